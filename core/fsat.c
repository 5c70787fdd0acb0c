/* File work relative to a directory descriptor (seclaunch/fsat.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seclaunch/fsat.h"
#include "seclaunch/util.h"

/* 1 once openat2 answered ENOSYS (an older kernel, or a filter that hides it) */
static atomic_int g_no_openat2;

void sl_fsat_test_no_openat2(bool on)
{
	atomic_store(&g_no_openat2, on ? 1 : 0);
}

/* Names separated by single '/', none of them "." or "..", not absolute. */
static bool rel_ok(const char *rel)
{
	const char *p = rel;
	if (rel == NULL || rel[0] == '\0' || rel[0] == '/' || strlen(rel) >= PATH_MAX)
		return false;
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash != NULL ? (size_t)(slash - p) : strlen(p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (slash == NULL)
			return true;
		p = slash + 1;
	}
}

/* One component at a time: each opened with O_NOFOLLOW beneath the last
 * (so no link is followed on the way), and on the starting folder's device. */
static int open_by_parts(int dirfd, const char *rel, int flags, mode_t mode, unsigned how)
{
	char buf[PATH_MAX];
	struct stat root, st;
	bool same_fs = !(how & SL_FSAT_CROSS_MOUNTS);
	int cur = dirfd, e;
	char *p = buf;

	if (same_fs && fstat(dirfd, &root) != 0)
		return -1;
	snprintf(buf, sizeof(buf), "%s", rel);
	for (;;) {
		char *slash = strchr(p, '/');
		int nfd;
		if (slash != NULL) {
			*slash = '\0';
			nfd = openat(cur, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		} else {
			nfd = openat(cur, p, flags | O_NOFOLLOW | O_CLOEXEC, mode);
		}
		if (nfd < 0)
			goto fail;
		if (same_fs && (fstat(nfd, &st) != 0 || st.st_dev != root.st_dev)) {
			e = errno == 0 ? EXDEV : errno;
			close(nfd);
			errno = st.st_dev != root.st_dev ? EXDEV : e;
			goto fail;
		}
		if (cur != dirfd)
			close(cur);
		cur = nfd;
		if (slash == NULL)
			return cur;
		p = slash + 1;
	}
fail:
	e = errno;
	if (cur != dirfd)
		close(cur);
	errno = e;
	return -1;
}

int sl_fsat_openat(int dirfd, const char *rel, int flags, mode_t mode, unsigned how)
{
	if (!rel_ok(rel)) {
		errno = EINVAL;
		return -1;
	}
	if (how & SL_FSAT_FOLLOW) /* the caller's own tree: links as the caller sees them */
		return openat(dirfd, rel, flags | O_CLOEXEC, mode);
	if (!atomic_load(&g_no_openat2)) {
		struct open_how h = {
		    .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
		    .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
		    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
		               ((how & SL_FSAT_CROSS_MOUNTS) ? 0 : RESOLVE_NO_XDEV),
		};
		long fd;
		do
			fd = syscall(SYS_openat2, dirfd, rel, &h, sizeof(h));
		while (fd < 0 && errno == EAGAIN); /* a rename raced the lookup */
		if (fd >= 0 || errno != ENOSYS)
			return (int)fd;
		atomic_store(&g_no_openat2, 1);
	}
	errno = 0;
	return open_by_parts(dirfd, rel, flags, mode, how);
}

static const char *why(int e)
{
	switch (e) {
	case ELOOP:
		return "a symbolic link on the way (never followed here)";
	case EXDEV:
		return "another file system on the way (never entered here)";
	case EINVAL:
		return "not a plain relative path (no \"..\", \".\" or empty part)";
	default:
		return strerror(e);
	}
}

sl_err sl_fsat_open_dir(int dirfd, const char *rel, unsigned how, const char *what, int *fd)
{
	*fd = sl_fsat_openat(dirfd, rel, O_RDONLY | O_DIRECTORY, 0, how);
	if (*fd < 0)
		return sl_err_set(SL_E_IO, "%s/%s: cannot open the folder: %s", what, rel,
		                  why(errno));
	return SL_OK;
}

sl_err sl_fsat_open_file(int dirfd, const char *rel, int flags, mode_t mode, unsigned how,
                         const char *what, int *fd_out, struct stat *st_out)
{
	struct stat st;
	int fd = sl_fsat_openat(dirfd, rel, flags | O_NONBLOCK, mode, how);

	*fd_out = -1;
	if (fd < 0)
		return sl_err_set(SL_E_IO, "%s/%s: %s", what, rel, why(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return sl_err_set(SL_E_IO, "%s/%s: not a regular file", what, rel);
	}
	if (!(flags & O_NONBLOCK))
		(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	if (st_out != NULL)
		*st_out = st;
	*fd_out = fd;
	return SL_OK;
}

/* The folder that holds rel's last name (dirfd itself for a single name),
 * and that name. */
static int parent_of(int dirfd, const char *rel, char *dir, const char **leaf)
{
	const char *slash = strrchr(rel, '/');
	if (!rel_ok(rel)) {
		errno = EINVAL;
		return -1;
	}
	if (slash == NULL) {
		*leaf = rel;
		return dup(dirfd);
	}
	memcpy(dir, rel, (size_t)(slash - rel));
	dir[slash - rel] = '\0';
	*leaf = slash + 1;
	return sl_fsat_openat(dirfd, dir, O_RDONLY | O_DIRECTORY, 0, 0);
}

sl_err sl_fsat_mkdir(int dirfd, const char *rel, mode_t mode, uid_t uid, gid_t gid,
                     const char *what, int *fd_out)
{
	sl_err rc = SL_E_IO;
	char dir[PATH_MAX];
	const char *leaf = NULL;
	int pfd = parent_of(dirfd, rel, dir, &leaf), fd = -1;

	SL_ENSURE(pfd >= 0, SL_E_IO, "%s/%s: %s", what, rel, why(errno));
	SL_ENSURE(mkdirat(pfd, leaf, mode) == 0 || errno == EEXIST, SL_E_IO, "%s/%s: %s", what, rel,
	          strerror(errno));
	fd = sl_fsat_openat(pfd, leaf, O_RDONLY | O_DIRECTORY, 0, 0);
	SL_ENSURE(fd >= 0, SL_E_IO, "%s/%s: %s", what, rel, why(errno));
	SL_ENSURE(uid == (uid_t)-1 || fchown(fd, uid, gid) == 0, SL_E_SYSTEM, "%s/%s: chown: %s",
	          what, rel, strerror(errno));
	SL_ENSURE(fchmod(fd, mode) == 0, SL_E_SYSTEM, "%s/%s: chmod: %s", what, rel,
	          strerror(errno));
	if (fd_out != NULL) {
		*fd_out = fd;
		fd = -1;
	}
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	if (pfd >= 0)
		close(pfd);
	return rc;
}

int sl_fsat_unlink(int dirfd, const char *rel, int flags)
{
	char dir[PATH_MAX];
	const char *leaf = NULL;
	int pfd = parent_of(dirfd, rel, dir, &leaf), r, e;
	if (pfd < 0)
		return -1;
	r = unlinkat(pfd, leaf, flags);
	e = errno;
	close(pfd);
	errno = e;
	return r;
}

sl_err sl_fsat_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                            uid_t uid, gid_t gid, const char *what)
{
	sl_err rc = SL_E_IO;
	char tmp[NAME_MAX + 1] = "";
	int fd = -1;
	bool created = false;

	SL_ENSURE(rel_ok(name) && strchr(name, '/') == NULL && strlen(name) < NAME_MAX - 24,
	          SL_E_INTERNAL, "%s/%s: not a single file name", what, name);
	/* an unpredictable name, created O_EXCL: nothing there beforehand is used */
	for (int tries = 0; fd < 0 && tries < 16; tries++) {
		uint8_t r[8];
		SL_ENSURE(getrandom(r, sizeof(r), 0) == (ssize_t)sizeof(r), SL_E_SYSTEM,
		          "getrandom: %s", strerror(errno));
		snprintf(tmp, sizeof(tmp), ".%s.%02x%02x%02x%02x%02x%02x%02x%02x", name, r[0], r[1],
		         r[2], r[3], r[4], r[5], r[6], r[7]);
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		SL_ENSURE(fd >= 0 || errno == EEXIST, SL_E_IO, "%s/%s: cannot create it: %s", what,
		          tmp, strerror(errno));
	}
	SL_ENSURE(fd >= 0, SL_E_IO, "%s/%s: no free temporary name", what, name);
	created = true;
	/* owner and mode on the descriptor, before the name is visible as name */
	SL_ENSURE(uid == (uid_t)-1 || fchown(fd, uid, gid) == 0, SL_E_SYSTEM, "%s/%s: chown: %s",
	          what, tmp, strerror(errno));
	SL_ENSURE(fchmod(fd, mode) == 0, SL_E_SYSTEM, "%s/%s: chmod: %s", what, tmp,
	          strerror(errno));
	SL_GUARD(sl_write_all(fd, data, len, name));
	SL_ENSURE(fsync(fd) == 0, SL_E_IO, "%s/%s: fsync: %s", what, name, strerror(errno));
	SL_ENSURE(renameat(dirfd, tmp, dirfd, name) == 0, SL_E_IO, "%s/%s: rename: %s", what, name,
	          strerror(errno));
	created = false;
	SL_ENSURE(fsync(dirfd) == 0, SL_E_IO, "%s: fsync: %s", what, strerror(errno));
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	if (created)
		(void)unlinkat(dirfd, tmp, 0);
	return rc;
}

/* ---- the walk ----------------------------------------------------------- */

struct walk {
	unsigned how, max;
	bool sorted;
	sl_fsat_fn fn;
	void *ctx;
	const char *what;
	dev_t root_dev;
	dev_t anc_dev[SL_FSAT_DEPTH_MAX + 1];
	ino_t anc_ino[SL_FSAT_DEPTH_MAX + 1];
	char rel[PATH_MAX];
};

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in a folder (its descriptor stays the caller's). */
static SL_RESULT list(struct walk *w, int dfd, char ***out, size_t *n_out)
{
	sl_err rc = SL_E_IO;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (d == NULL && fd >= 0)
		close(fd);
	SL_ENSURE(d != NULL, SL_E_IO, "%s%s%s: cannot open the folder: %s", w->what,
	          w->rel[0] ? "/" : "", w->rel, strerror(errno));
	rewinddir(d); /* the copy shares the caller's position, maybe at the end */
	while ((errno = 0, de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 32;
			char **v = realloc(names, cap * sizeof(*v));
			SL_ENSURE(v != NULL, SL_E_NOMEM, "listing %s/%s", w->what, w->rel);
			names = v;
		}
		names[n] = strdup(de->d_name);
		SL_ENSURE(names[n] != NULL, SL_E_NOMEM, "listing %s/%s", w->what, w->rel);
		n++;
	}
	SL_ENSURE(errno == 0, SL_E_IO, "%s%s%s: reading the folder: %s", w->what,
	          w->rel[0] ? "/" : "", w->rel, strerror(errno));
	if (w->sorted && n > 1)
		qsort(names, n, sizeof(*names), cmp_name);
	*out = names;
	*n_out = n;
	names = NULL;
	n = 0;
	rc = SL_OK;
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (d != NULL)
		closedir(d);
	return rc;
}

static SL_RESULT walk_dir(struct walk *w, int dfd, unsigned depth);

static SL_RESULT visit(struct walk *w, int dfd, const char *name, unsigned depth)
{
	sl_err rc = SL_E_IO;
	sl_fsat_ent e = {.dirfd = dfd, .name = name, .rel = w->rel, .depth = depth, .fd = -1};

	if (fstatat(dfd, name, &e.st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT
		           ? SL_OK /* removed meanwhile */
		           : sl_err_set(SL_E_IO, "%s/%s: %s", w->what, w->rel, strerror(errno));
	if (S_ISLNK(e.st.st_mode) && (w->how & SL_FSAT_FOLLOW)) {
		SL_ENSURE(fstatat(dfd, name, &e.st, 0) == 0, SL_E_IO, "%s/%s: %s", w->what, w->rel,
		          strerror(errno));
		e.followed = true;
	}
	if (S_ISLNK(e.st.st_mode)) {
		e.kind = SL_FSAT_LINK;
	} else if (S_ISREG(e.st.st_mode)) {
		e.kind = SL_FSAT_REG;
	} else if (!S_ISDIR(e.st.st_mode)) {
		e.kind = SL_FSAT_OTHER;
	} else if (!(w->how & SL_FSAT_CROSS_MOUNTS) && e.st.st_dev != w->root_dev) {
		e.kind = SL_FSAT_MOUNT;
	} else {
		/* entered only through a descriptor opened beneath the parent: a
		 * folder swapped for a link since the fstatat is refused here */
		e.fd = sl_fsat_openat(dfd, name, O_RDONLY | O_DIRECTORY, 0, w->how);
		if (e.fd < 0 && errno == ENOENT)
			return SL_OK;
		if (e.fd < 0) {
			int err = errno;
			SL_ENSURE(err == ELOOP || err == ENOTDIR || err == EXDEV, SL_E_IO,
			          "%s/%s: cannot open the folder: %s", w->what, w->rel,
			          strerror(err));
			e.kind = err == EXDEV ? SL_FSAT_MOUNT : SL_FSAT_OTHER;
			if (fstatat(dfd, name, &e.st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(e.st.st_mode))
				e.kind = SL_FSAT_LINK;
		} else {
			SL_ENSURE(fstat(e.fd, &e.st) == 0 && S_ISDIR(e.st.st_mode), SL_E_IO,
			          "%s/%s: not a folder once opened", w->what, w->rel);
			e.kind = SL_FSAT_DIR;
			for (unsigned i = 0; i < depth; i++)
				SL_ENSURE(
				    w->anc_dev[i] != e.st.st_dev || w->anc_ino[i] != e.st.st_ino,
				    SL_E_INPUT, "%s/%s: a link loop (the folder contains itself)",
				    w->what, w->rel);
			SL_ENSURE(depth < w->max, SL_E_INPUT,
			          "%s/%s: folders nested deeper than %u", w->what, w->rel, w->max);
		}
	}
	SL_GUARD(w->fn(w->ctx, &e));
	if (e.kind == SL_FSAT_DIR && !e.skip) {
		w->anc_dev[depth] = e.st.st_dev;
		w->anc_ino[depth] = e.st.st_ino;
		SL_GUARD(walk_dir(w, e.fd, depth + 1));
		e.kind = SL_FSAT_DIR_POST;
		e.rel = w->rel;
		SL_GUARD(w->fn(w->ctx, &e));
	}
	rc = SL_OK;
out:
	if (e.fd >= 0)
		close(e.fd);
	return rc;
}

static SL_RESULT walk_dir(struct walk *w, int dfd, unsigned depth)
{
	sl_err rc = SL_E_IO;
	char **names = NULL;
	size_t n = 0, base = strlen(w->rel);

	SL_GUARD(list(w, dfd, &names, &n));
	for (size_t i = 0; i < n; i++) {
		int k = snprintf(w->rel + base, sizeof(w->rel) - base, "%s%s", base ? "/" : "",
		                 names[i]);
		SL_ENSURE(k > 0 && (size_t)k < sizeof(w->rel) - base, SL_E_INPUT,
		          "%s/%s: path too long", w->what, w->rel);
		rc = visit(w, dfd, names[i], depth);
		w->rel[base] = '\0';
		if (rc != SL_OK)
			goto out;
	}
	rc = SL_OK;
out:
	w->rel[base] = '\0';
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

sl_err sl_fsat_walk(int rootfd, unsigned how, unsigned max_depth, bool sorted, sl_fsat_fn fn,
                    void *ctx, const char *what)
{
	struct stat st;
	sl_err rc;
	struct walk *w = calloc(1, sizeof(*w));

	if (w == NULL)
		return sl_err_set(SL_E_NOMEM, "walking %s", what);
	if (fstat(rootfd, &st) != 0 || !S_ISDIR(st.st_mode)) {
		free(w);
		return sl_err_set(SL_E_IO, "%s: not a folder", what);
	}
	*w = (struct walk){
	    .how = how,
	    .max = max_depth == 0 || max_depth > SL_FSAT_DEPTH_MAX ? SL_FSAT_DEPTH_MAX : max_depth,
	    .sorted = sorted,
	    .fn = fn,
	    .ctx = ctx,
	    .what = what,
	    .root_dev = st.st_dev};
	w->anc_dev[0] = st.st_dev;
	w->anc_ino[0] = st.st_ino;
	rc = walk_dir(w, rootfd, 1);
	free(w);
	return rc;
}
