/* Reading and atomically writing files. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "seclaunch/secret.h"
#include "seclaunch/util.h"

sl_err sl_write_all(int fd, const void *p, size_t len, const char *what)
{
	const uint8_t *b = p;
	while (len > 0) {
		ssize_t n = write(fd, b, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sl_err_set(SL_E_IO, "%s: write: %s", what, strerror(errno));
		b += n;
		len -= (size_t)n;
	}
	return SL_OK;
}

sl_err sl_read_full(int fd, void *p, size_t len, size_t *got, const char *what)
{
	uint8_t *b = p;
	size_t have = 0;
	while (have < len) {
		ssize_t n = read(fd, b + have, len - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sl_err_set(SL_E_IO, "%s: read: %s", what, strerror(errno));
		if (n == 0)
			break;
		have += (size_t)n;
	}
	*got = have;
	return SL_OK;
}

sl_err sl_pread_full(int fd, void *p, size_t len, uint64_t off, size_t *got, const char *what)
{
	uint8_t *b = p;
	size_t have = 0;
	while (have < len) {
		ssize_t n = pread(fd, b + have, len - have, (off_t)(off + have));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sl_err_set(SL_E_IO, "%s: read at byte %llu: %s", what,
			                  (unsigned long long)(off + have), strerror(errno));
		if (n == 0)
			break;
		have += (size_t)n;
	}
	*got = have;
	return SL_OK;
}

sl_err sl_file_read(const char *path, size_t max, uint8_t **out, size_t *len)
{
	sl_err rc = SL_E_IO;
	uint8_t *buf = NULL;
	size_t cap = 0, have = 0;
	int fd = -1;
	bool is_stdin = strcmp(path, "-") == 0;

	*out = NULL;
	*len = 0;
	fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
	SL_ENSURE(fd >= 0, SL_E_IO, "%s: cannot open: %s", path, strerror(errno));
	for (;;) {
		if (have == cap) {
			SL_ENSURE(cap <= max, SL_E_TOO_LARGE, "%s: larger than the %zu-byte limit",
			          path, max);
			size_t ncap = cap == 0 ? 4096 : cap * 2;
			if (ncap > max + 1)
				ncap = max + 1;
			uint8_t *nb = realloc(buf, ncap + 1);
			SL_ENSURE(nb != NULL, SL_E_NOMEM, "%s: allocating %zu bytes", path, ncap);
			buf = nb;
			cap = ncap;
		}
		ssize_t n = read(fd, buf + have, cap - have);
		if (n < 0 && errno == EINTR)
			continue;
		SL_ENSURE(n >= 0, SL_E_IO, "%s: read: %s", path, strerror(errno));
		if (n == 0)
			break;
		have += (size_t)n;
	}
	SL_ENSURE(have <= max, SL_E_TOO_LARGE, "%s: larger than the %zu-byte limit", path, max);
	if (buf == NULL) {
		buf = malloc(1);
		SL_ENSURE(buf != NULL, SL_E_NOMEM, "%s: allocating", path);
	}
	buf[have] = '\0';
	*out = buf;
	*len = have;
	buf = NULL;
	rc = SL_OK;
out:
	if (fd >= 0 && !is_stdin)
		close(fd);
	free(buf);
	return rc;
}

sl_err sl_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
                            bool replace)
{
	sl_err rc = SL_E_IO;
	char dirbuf[PATH_MAX], tmp[PATH_MAX];
	int fd = -1, dfd = -1;
	bool created = false;

	SL_ENSURE(strlen(path) < sizeof(dirbuf), SL_E_INPUT, "%s: path too long", path);
	snprintf(dirbuf, sizeof(dirbuf), "%s", path);
	const char *dir = dirname(dirbuf);
	if (!replace) {
		struct stat st;
		SL_ENSURE(lstat(path, &st) != 0 && errno == ENOENT, SL_E_EXISTS,
		          "%s: already exists (not overwritten)", path);
	}
	SL_ENSURE(snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.XXXXXX", path, (long)getpid()) <
	              (int)sizeof(tmp),
	          SL_E_INPUT, "%s: path too long", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	SL_ENSURE(fd >= 0, SL_E_IO, "%s: cannot create a temporary file: %s", path,
	          strerror(errno));
	created = true;
	SL_ENSURE(fchmod(fd, mode) == 0, SL_E_IO, "%s: chmod: %s", tmp, strerror(errno));
	SL_GUARD(sl_write_all(fd, data, len, path));
	SL_ENSURE(fsync(fd) == 0, SL_E_IO, "%s: fsync: %s", path, strerror(errno));
	SL_ENSURE(close(fd) == 0, SL_E_IO, "%s: close: %s", path, strerror(errno));
	fd = -1;
	if (replace) {
		SL_ENSURE(rename(tmp, path) == 0, SL_E_IO, "%s: rename: %s", path, strerror(errno));
	} else {
		/* link() fails if the target appeared meanwhile: never clobber */
		SL_ENSURE(link(tmp, path) == 0, errno == EEXIST ? SL_E_EXISTS : SL_E_IO, "%s: %s",
		          path, errno == EEXIST ? "already exists" : strerror(errno));
		unlink(tmp);
	}
	created = false;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	SL_ENSURE(dfd >= 0, SL_E_IO, "%s: open directory: %s", dir, strerror(errno));
	SL_ENSURE(fsync(dfd) == 0, SL_E_IO, "%s: fsync directory: %s", dir, strerror(errno));
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	if (created)
		unlink(tmp);
	return rc;
}

bool sl_output_is_stream(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode));
}

static bool is_dev_null(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && major(st->st_rdev) == 1 && minor(st->st_rdev) == 3;
}

sl_err sl_output_open_stream(const char *path, int *fd_out)
{
	sl_err rc = SL_E_EXISTS;
	struct stat st, st2;
	char self[64];
	int pfd = -1, fd = -1;

	*fd_out = -1;
	/* the inode itself, without opening it for I/O: a FIFO does not wait and
	 * a device sees no open() before it has been checked */
	pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	SL_ENSURE(pfd >= 0, SL_E_IO, "%s: %s", path, strerror(errno));
	SL_ENSURE(fstat(pfd, &st) == 0, SL_E_IO, "%s: stat: %s", path, strerror(errno));
	/* O_PATH|O_NOFOLLOW opens a symlink itself rather than failing */
	SL_ENSURE(!S_ISLNK(st.st_mode), SL_E_EXISTS,
	          "%s: is a symbolic link; not written through (name the target)", path);
	SL_ENSURE(S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode), SL_E_EXISTS,
	          "%s: already exists (not overwritten)", path);
	SL_ENSURE(st.st_uid == geteuid() || is_dev_null(&st), SL_E_EXISTS,
	          "%s: a %s owned by uid %u, not by this user (uid %u); plaintext is written "
	          "only to a FIFO or device of your own, or /dev/null",
	          path, S_ISFIFO(st.st_mode) ? "FIFO" : "character device", (unsigned)st.st_uid,
	          (unsigned)geteuid());
	/* reopening through the descriptor reaches the same inode, whatever the
	 * path names by now */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_WRONLY | O_NOCTTY | O_CLOEXEC);
	SL_ENSURE(fd >= 0, SL_E_IO, "%s: cannot open: %s", path, strerror(errno));
	SL_ENSURE(fstat(fd, &st2) == 0 && st2.st_dev == st.st_dev && st2.st_ino == st.st_ino,
	          SL_E_EXISTS, "%s: replaced while it was opened; not written", path);
	SL_ENSURE(!isatty(fd), SL_E_USAGE, "refusing to write plaintext to a terminal (%s)", path);
	*fd_out = fd;
	fd = -1;
	rc = SL_OK;
out:
	if (pfd >= 0)
		close(pfd);
	if (fd >= 0)
		close(fd);
	return rc;
}
