/* The job's output folder, in memory (outputs.h). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "outputs.h"
#include "seclaunch/fsat.h"

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#ifndef RAMFS_MAGIC
#define RAMFS_MAGIC 0x858458f6
#endif

/* Room for the file system's own metadata above the limit, so a job that
 * writes exactly the limit is not refused by the tmpfs first. */
#define HEADROOM ((uint64_t)4 << 20)

void sl_out_early(struct sl_out_cfg *c)
{
	const char *no = getenv("SECLAUNCH_OUTPUT_NO_NAMESPACE");
	if (c->n == 0)
		return;
	if (no != NULL && strcmp(no, "1") == 0) {
		snprintf(c->ns_why, sizeof(c->ns_why),
		         "no private mount namespace (SECLAUNCH_OUTPUT_NO_NAMESPACE=1)");
		return;
	}
	if (unshare(CLONE_NEWNS) != 0) {
		snprintf(c->ns_why, sizeof(c->ns_why), "no private mount namespace: unshare: %s",
		         strerror(errno));
		return;
	}
	/* nothing mounted from here on reaches the host's namespace */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		snprintf(c->ns_why, sizeof(c->ns_why), "mount propagation: %s", strerror(errno));
		return;
	}
	c->ns = true;
}

static bool in_memory(const char *dir)
{
	struct statfs sf;
	return statfs(dir, &sf) == 0 &&
	       ((unsigned long)sf.f_type == TMPFS_MAGIC || (unsigned long)sf.f_type == RAMFS_MAGIC);
}

static SL_RESULT shared_tmpfs(sl_memdir *d, uid_t uid, gid_t gid)
{
	const char *cands[] = {"/dev/shm", getenv("XDG_RUNTIME_DIR")};
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		if (cands[i] == NULL || cands[i][0] != '/' || !in_memory(cands[i]))
			continue;
		snprintf(d->path, sizeof(d->path), "%s/seclaunch-out.XXXXXX", cands[i]);
		if (mkdtemp(d->path) == NULL)
			continue;
		/* root's own new 0700 folder in a sticky one: no one else can
		 * rename it before it is open; from here on only the descriptor */
		d->fd = open(d->path, /* lint: trusted path (made just now, root's) */
		             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (d->fd < 0 || fchown(d->fd, uid, gid) != 0) {
			sl_err rc =
			    sl_err_set(SL_E_SYSTEM, "%s: chown: %s", d->path, strerror(errno));
			if (d->fd >= 0)
				close(d->fd);
			d->fd = -1;
			(void)rmdir(d->path); /* lint: trusted path (still root's) */
			d->path[0] = '\0';
			return rc;
		}
		snprintf(d->method, sizeof(d->method),
		         "folder in the shared tmpfs %s (mode 0700; root and this user's other "
		         "processes could open it)",
		         cands[i]);
		return SL_OK;
	}
	return sl_err_set(SL_E_SYSTEM,
	                  "no in-memory file system for %s: no private mount namespace, and "
	                  "neither /dev/shm nor $XDG_RUNTIME_DIR is a tmpfs",
	                  SL_OUT_ENV);
}

sl_err sl_memdir_create(sl_memdir *d, bool ns, uint64_t limit, uid_t uid, gid_t gid)
{
	char opts[200];
	const char *tmp = getenv("TMPDIR");
	memset(d, 0, sizeof(*d));
	d->fd = -1;
	if (!ns)
		return shared_tmpfs(d, uid, gid);
	/* the mount point is an empty folder; its contents exist only in this
	 * process's namespace (and the job's, which inherits it) */
	snprintf(d->path, sizeof(d->path), "%s/seclaunch-out.XXXXXX",
	         tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
	if (mkdtemp(d->path) == NULL)
		return sl_err_set(SL_E_SYSTEM, "%s: %s", d->path, strerror(errno));
	int n =
	    snprintf(opts, sizeof(opts), "mode=0700,uid=%u,gid=%u", (unsigned)uid, (unsigned)gid);
	if (limit > 0)
		snprintf(opts + n, sizeof(opts) - (size_t)n, ",size=%llu",
		         (unsigned long long)(limit + HEADROOM));
	char with[240];
	snprintf(with, sizeof(with), "%s,noswap", opts);
	if (mount("seclaunch-out", d->path, "tmpfs", MS_NOSUID | MS_NODEV, with) == 0) {
		d->noswap = true;
	} else if (mount("seclaunch-out", d->path, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0) {
		/* no tmpfs of its own after all (a container without CAP_SYS_ADMIN) */
		(void)rmdir(d->path); /* lint: trusted path (root's mount point) */
		d->path[0] = '\0';
		return shared_tmpfs(d, uid, gid);
	}
	d->mounted = true;
	/* the mount point is root's, in root's TMPDIR */
	d->fd = open(d->path, /* lint: trusted path (root's mount point) */
	             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d->fd < 0) {
		sl_err rc = sl_err_set(SL_E_SYSTEM, "%s: %s", d->path, strerror(errno));
		(void)umount2(d->path, MNT_DETACH);
		(void)rmdir(d->path); /* lint: trusted path (root's mount point) */
		d->path[0] = '\0';
		return rc;
	}
	snprintf(d->method, sizeof(d->method), "tmpfs of its own in a private mount namespace%s",
	         d->noswap ? " (noswap)" : "");
	return SL_OK;
}

struct wipe {
	const char *what;
	sl_err first;
	char msg[600];
	unsigned seen;
};

static void wipe_err(struct wipe *w, const sl_fsat_ent *e, const char *op, int err)
{
	if (err == ENOENT || w->first != SL_OK)
		return;
	w->first = SL_E_SYSTEM;
	snprintf(w->msg, sizeof(w->msg), "%s/%s: %s: %s", w->what, e->rel, op, strerror(err));
}

/* tmpfs frees pages without clearing them: a file's bytes are overwritten
 * first, through a descriptor opened beneath its folder. A file with
 * another link is only unlinked: its bytes are not this folder's alone. */
static void zero_file(const sl_fsat_ent *e)
{
	static const char zeros[65536];
	struct stat st;
	if (e->st.st_nlink != 1)
		return;
	int fd = sl_fsat_openat(e->dirfd, e->name, O_WRONLY | O_NONBLOCK, 0, 0);
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1) {
		for (off_t at = 0; at < st.st_size;) {
			size_t k = st.st_size - at > (off_t)sizeof(zeros)
			               ? sizeof(zeros)
			               : (size_t)(st.st_size - at);
			ssize_t w = pwrite(fd, zeros, k, at);
			if (w <= 0)
				break;
			at += w;
		}
	}
	close(fd);
}

static SL_RESULT wipe_one(void *ctx, sl_fsat_ent *e)
{
	struct wipe *w = ctx;
	w->seen++;
	switch (e->kind) {
	case SL_FSAT_DIR:
		return SL_OK;
	case SL_FSAT_REG:
		zero_file(e);
		/* fall through */
	case SL_FSAT_LINK:
	case SL_FSAT_OTHER:
		if (unlinkat(e->dirfd, e->name, 0) != 0)
			wipe_err(w, e, "remove", errno);
		return SL_OK;
	case SL_FSAT_DIR_POST:
	case SL_FSAT_MOUNT:
		if (unlinkat(e->dirfd, e->name, AT_REMOVEDIR) != 0)
			wipe_err(w, e, "remove", errno);
		return SL_OK;
	}
	return SL_OK;
}

/* Removes the shared-tmpfs folder by its name in its parent, only while
 * that name is still this folder (the job's user owns the name). */
static int remove_named(const sl_memdir *d)
{
	char buf[sizeof(d->path)], nb[sizeof(d->path)];
	struct stat mine, there;
	snprintf(buf, sizeof(buf), "%s", d->path);
	snprintf(nb, sizeof(nb), "%s", d->path);
	int pfd = open(dirname(buf), /* lint: trusted path (/dev/shm or $XDG_RUNTIME_DIR) */
	               O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	const char *name = basename(nb);
	int r = -1, e = 0;
	if (pfd < 0)
		return -1;
	if (fstat(d->fd, &mine) == 0 && fstatat(pfd, name, &there, AT_SYMLINK_NOFOLLOW) == 0 &&
	    mine.st_dev == there.st_dev && mine.st_ino == there.st_ino)
		r = unlinkat(pfd, name, AT_REMOVEDIR);
	else
		errno = ENOENT; /* renamed away by its owner: nothing of ours by that name */
	e = errno;
	close(pfd);
	errno = e;
	return r;
}

/* Passes of the walk until one finds nothing: a name the job renamed
 * while a pass listed its folder can escape that pass. */
static void wipe_passes(int fd, const char *what, struct wipe *w)
{
	for (int pass = 0; pass < 4 && fd >= 0; pass++) {
		w->seen = 0;
		sl_err r = sl_fsat_walk(fd, 0, 0, false, wipe_one, w, what);
		if (r != SL_OK && w->first == SL_OK) {
			w->first = r;
			snprintf(w->msg, sizeof(w->msg), "%s", sl_err_detail());
		}
		if (w->seen == 0)
			break;
	}
}

sl_err sl_memdir_wipe_sub(sl_memdir *d, const char *name)
{
	sl_err rc = SL_E_SYSTEM;
	char what[sizeof(d->path) + 80];
	struct wipe w = {.what = what};
	int fd = -1;

	snprintf(what, sizeof(what), "%s/%s", d->path, name);
	SL_GUARD(sl_fsat_open_dir(d->fd, name, 0, d->path, &fd));
	wipe_passes(fd, what, &w);
	SL_ENSURE(w.first == SL_OK, w.first, "%s: wiping: %s", what, w.msg);
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

sl_err sl_memdir_wipe(sl_memdir *d)
{
	sl_err rc = SL_OK;
	struct wipe w = {.what = d->path};

	if (d->path[0] == '\0')
		return SL_OK;
	wipe_passes(d->fd, d->path, &w);
	if (w.first != SL_OK)
		rc = sl_err_set(w.first, "%s: wiping: %s", d->path, w.msg);
	if (d->mounted) {
		if (d->fd >= 0)
			close(d->fd);
		d->fd = -1;
		/* root's mount point in root's TMPDIR */
		if (umount2(d->path, MNT_DETACH) != 0 && rc == SL_OK)
			rc = sl_err_set(SL_E_SYSTEM, "%s: unmount: %s", d->path, strerror(errno));
		if (rmdir(d->path) != 0 && rc == SL_OK) /* lint: trusted path (root's) */
			rc = sl_err_set(SL_E_SYSTEM, "%s: %s", d->path, strerror(errno));
	} else if (d->fd >= 0) {
		if (remove_named(d) != 0 && errno != ENOENT && rc == SL_OK)
			rc = sl_err_set(SL_E_SYSTEM, "%s: %s", d->path, strerror(errno));
		close(d->fd);
		d->fd = -1;
	}
	d->path[0] = '\0';
	d->mounted = false;
	return rc;
}

struct usage {
	uint64_t bytes;
	uint32_t files;
};

static SL_RESULT count(void *ctx, sl_fsat_ent *e)
{
	struct usage *u = ctx;
	if (e->kind == SL_FSAT_REG) {
		u->bytes += (uint64_t)e->st.st_size;
		u->files++;
	}
	return SL_OK;
}

sl_err sl_dir_usage(int dirfd, const char *what, uint64_t *bytes, uint32_t *files)
{
	struct usage u = {0};
	sl_err rc = sl_fsat_walk(dirfd, 0, 0, false, count, &u, what);
	if (rc != SL_OK)
		return rc;
	*bytes = u.bytes;
	*files = u.files;
	return SL_OK;
}

bool sl_swap_active(void)
{
	FILE *f = fopen("/proc/swaps", "re");
	char line[512];
	int n = 0;
	if (f == NULL)
		return false;
	while (fgets(line, sizeof(line), f) != NULL)
		n++;
	fclose(f);
	return n > 1;
}
