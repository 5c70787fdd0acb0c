/* Output files that appear only once complete: an O_TMPFILE in the target
 * directory, linked into place on commit. A failed or interrupted run
 * leaves nothing behind (the kernel frees an unlinked file on close). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seclaunch/secret.h"
#include "seclaunch/sld.h"

struct sl_sld_outfile {
	int fd;
	char path[PATH_MAX];
	char dir[PATH_MAX];
	char tmpname[PATH_MAX]; /* only where O_TMPFILE is unsupported */
	bool force;
	bool committed;
};

static SL_RESULT exists_error(const char *path)
{
	return sl_err_set(SL_E_EXISTS, "%s: already exists (not overwritten; --force replaces it)",
	                  path);
}

/* A fresh name in o->dir that does not exist yet. */
static SL_RESULT temp_name(const sl_sld_outfile *o, char *out, size_t cap)
{
	uint8_t rnd[8];
	char hex[17];
	sl_random(rnd, sizeof(rnd));
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
	if (snprintf(out, cap, "%s/.seclaunch-%s.tmp", o->dir, hex) >= (int)cap)
		return sl_err_set(SL_E_INPUT, "%s: path too long", o->path);
	return SL_OK;
}

sl_err sl_sld_outfile_open(const char *path, bool force, sl_sld_outfile **out)
{
	sl_err rc = SL_E_IO;
	struct stat st;
	char tmp[PATH_MAX];
	sl_sld_outfile *o = calloc(1, sizeof(*o));

	SL_ENSURE(o != NULL, SL_E_NOMEM, "allocating an output file");
	o->fd = -1;
	o->force = force;
	SL_ENSURE(strlen(path) > 0 && strlen(path) < sizeof(o->path), SL_E_INPUT,
	          "output path empty or too long");
	snprintf(o->path, sizeof(o->path), "%s", path);
	snprintf(tmp, sizeof(tmp), "%s", path);
	snprintf(o->dir, sizeof(o->dir), "%s", dirname(tmp));
	if (lstat(path, &st) == 0) {
		if (!force) {
			rc = exists_error(path);
			goto out;
		}
		SL_ENSURE(S_ISREG(st.st_mode), SL_E_EXISTS,
		          "%s: exists and is not a regular file; not replaced", path);
	}
	o->fd = open(o->dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (o->fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		/* file systems without O_TMPFILE: a named temporary, removed on failure */
		SL_GUARD(temp_name(o, o->tmpname, sizeof(o->tmpname)));
		o->fd = open(o->tmpname, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
		if (o->fd < 0)
			o->tmpname[0] = '\0';
	}
	SL_ENSURE(o->fd >= 0, SL_E_IO, "%s: cannot create the output file in %s: %s", path, o->dir,
	          strerror(errno));
	*out = o;
	o = NULL;
	rc = SL_OK;
out:
	sl_sld_outfile_free(o);
	return rc;
}

int sl_sld_outfile_fd(const sl_sld_outfile *o)
{
	return o->fd;
}

sl_err sl_sld_outfile_commit(sl_sld_outfile *o)
{
	sl_err rc = SL_E_IO;
	char src[64], tmp[PATH_MAX];
	int dfd = -1;

	SL_ENSURE(fsync(o->fd) == 0, SL_E_IO, "%s: fsync: %s", o->path, strerror(errno));
	if (o->tmpname[0] != '\0') {
		if (o->force) {
			SL_ENSURE(rename(o->tmpname, o->path) == 0, SL_E_IO, "%s: rename: %s",
			          o->path, strerror(errno));
		} else {
			if (link(o->tmpname, o->path) != 0) {
				rc = errno == EEXIST ? exists_error(o->path)
				                     : sl_err_set(SL_E_IO, "%s: link: %s", o->path,
				                                  strerror(errno));
				goto out;
			}
			unlink(o->tmpname);
		}
		o->tmpname[0] = '\0';
	} else {
		/* linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH; the /proc
		 * link works for any owner of the descriptor */
		snprintf(src, sizeof(src), "/proc/self/fd/%d", o->fd);
		if (!o->force) {
			if (linkat(AT_FDCWD, src, AT_FDCWD, o->path, AT_SYMLINK_FOLLOW) != 0) {
				rc = errno == EEXIST ? exists_error(o->path)
				                     : sl_err_set(SL_E_IO, "%s: link: %s", o->path,
				                                  strerror(errno));
				goto out;
			}
		} else {
			/* link under a fresh name, then rename over the target atomically */
			for (int tries = 0;; tries++) {
				SL_GUARD(temp_name(o, tmp, sizeof(tmp)));
				if (linkat(AT_FDCWD, src, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0)
					break;
				SL_ENSURE(errno == EEXIST && tries < 8, SL_E_IO, "%s: link: %s",
				          o->path, strerror(errno));
			}
			if (rename(tmp, o->path) != 0) {
				rc =
				    sl_err_set(SL_E_IO, "%s: rename: %s", o->path, strerror(errno));
				unlink(tmp);
				goto out;
			}
		}
	}
	o->committed = true;
	dfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	SL_ENSURE(dfd >= 0 && fsync(dfd) == 0, SL_E_IO, "%s: fsync of the directory: %s", o->dir,
	          strerror(errno));
	rc = SL_OK;
out:
	if (dfd >= 0)
		close(dfd);
	return rc;
}

void sl_sld_outfile_free(sl_sld_outfile *o)
{
	if (o == NULL)
		return;
	if (o->fd >= 0)
		close(o->fd);
	if (!o->committed && o->tmpname[0] != '\0')
		unlink(o->tmpname);
	free(o);
}
