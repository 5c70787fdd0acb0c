/* The job's output folder, in memory (outputs.h). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "outputs.h"

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
		if (chown(d->path, uid, gid) != 0) {
			int e = errno;
			(void)rmdir(d->path);
			return sl_err_set(SL_E_SYSTEM, "%s: chown: %s", d->path, strerror(e));
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
		(void)rmdir(d->path);
		d->path[0] = '\0';
		return shared_tmpfs(d, uid, gid);
	}
	d->mounted = true;
	snprintf(d->method, sizeof(d->method), "tmpfs of its own in a private mount namespace%s",
	         d->noswap ? " (noswap)" : "");
	return SL_OK;
}

static int zero_remove(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	if (f->level == 0)
		return 0; /* the folder itself (a mount point, maybe): after the unmount */
	if (flag == FTW_F && S_ISREG(st->st_mode)) {
		/* tmpfs frees pages without clearing them: clear them first */
		int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0) {
			static const char zeros[65536];
			off_t left = st->st_size;
			while (left > 0) {
				size_t k =
				    left > (off_t)sizeof(zeros) ? sizeof(zeros) : (size_t)left;
				ssize_t w = write(fd, zeros, k);
				if (w <= 0)
					break;
				left -= w;
			}
			close(fd);
		}
	}
	return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

sl_err sl_memdir_wipe(sl_memdir *d)
{
	sl_err rc = SL_OK;
	if (d->path[0] == '\0')
		return SL_OK;
	if (nftw(d->path, zero_remove, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
		rc = sl_err_set(SL_E_SYSTEM, "%s: wiping: %s", d->path, strerror(errno));
	if (d->mounted && umount2(d->path, MNT_DETACH) != 0 && rc == SL_OK)
		rc = sl_err_set(SL_E_SYSTEM, "%s: unmount: %s", d->path, strerror(errno));
	if (rmdir(d->path) != 0 && rc == SL_OK)
		rc = sl_err_set(SL_E_SYSTEM, "%s: %s", d->path, strerror(errno));
	d->path[0] = '\0';
	d->mounted = false;
	return rc;
}

static uint64_t g_bytes;
static uint32_t g_files;

static int count(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)path, (void)f;
	if (flag == FTW_F && S_ISREG(st->st_mode)) {
		g_bytes += (uint64_t)st->st_size;
		g_files++;
	}
	return 0;
}

sl_err sl_dir_usage(const char *dir, uint64_t *bytes, uint32_t *files)
{
	/* one caller at a time: outputs.c holds its lock around this */
	g_bytes = 0;
	g_files = 0;
	if (nftw(dir, count, 16, FTW_PHYS) != 0)
		return sl_err_set(SL_E_IO, "%s: %s", dir, strerror(errno));
	*bytes = g_bytes;
	*files = g_files;
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
