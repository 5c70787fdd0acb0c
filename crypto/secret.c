/* Secret buffers in libsodium guarded memory. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seclaunch/secret.h"
#include "seclaunch/util.h"

struct sl_secret {
	uint8_t *p;
	size_t len;
	size_t alloc;
};

sl_err sl_crypto_init(void)
{
	if (sodium_init() < 0)
		return sl_err_set(SL_E_CRYPTO, "libsodium failed to initialise");
	return SL_OK;
}

sl_err sl_secret_new(size_t len, sl_secret **out)
{
	sl_secret *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return sl_err_set(SL_E_NOMEM, "allocating a secret buffer");
	s->alloc = len != 0 ? len : 1;
	/* guard pages, mlock (best effort), MADV_DONTDUMP */
	s->p = sodium_malloc(s->alloc);
	if (s->p == NULL) {
		free(s);
		return sl_err_set(SL_E_NOMEM, "allocating %zu bytes of secret memory", len);
	}
	memset(s->p, 0, s->alloc);
	s->len = len;
	*out = s;
	return SL_OK;
}

sl_err sl_secret_random(size_t len, sl_secret **out)
{
	sl_err rc = sl_secret_new(len, out);
	if (rc == SL_OK)
		randombytes_buf((*out)->p, len);
	return rc;
}

sl_err sl_secret_from(const void *p, size_t len, sl_secret **out)
{
	sl_err rc = sl_secret_new(len, out);
	if (rc == SL_OK && len > 0)
		memcpy((*out)->p, p, len);
	return rc;
}

/* any_owner: root reading a client-side token; the mode and type still hold */
static SL_RESULT file_check(int fd, const char *path, const char *what, bool any_owner,
                            struct stat *st)
{
	if (fstat(fd, st) != 0)
		return sl_err_set(SL_E_IO, "%s: stat: %s", path, strerror(errno));
	if (!S_ISREG(st->st_mode))
		return sl_err_set(SL_E_IO, "%s: not a regular file", path);
	if ((st->st_mode & 077) != 0)
		return sl_err_set(SL_E_PERM,
		                  "%s: mode %04o lets group or others access a %s; chmod 600 it",
		                  path, (unsigned)(st->st_mode & 07777), what);
	if (st->st_uid != geteuid() && st->st_uid != 0 && !(any_owner && geteuid() == 0))
		return sl_err_set(
		    SL_E_PERM,
		    "%s: %s owned by uid %u, not by this user (uid %u) or root; chown it", path,
		    what, (unsigned)st->st_uid, (unsigned)geteuid());
	return SL_OK;
}

sl_err sl_private_file_check(int fd, const char *path, const char *what, struct stat *st)
{
	return file_check(fd, path, what, false, st);
}

sl_err sl_private_file_open_error(const char *path, const char *what)
{
	if (errno == ELOOP)
		return sl_err_set(SL_E_PERM,
		                  "%s: a symbolic link: a %s is never opened through a link (one "
		                  "that another user can point elsewhere); name the file itself",
		                  path, what);
	return sl_err_set(SL_E_IO, "%s: cannot open: %s", path, strerror(errno));
}

static SL_RESULT read_private(const char *path, size_t max, bool any_owner, sl_secret **out)
{
	sl_err rc = SL_E_IO;
	sl_secret *s = NULL;
	struct stat st;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return sl_private_file_open_error(path, "key file");
	SL_GUARD(file_check(fd, path, "key file", any_owner, &st));
	SL_ENSURE((uint64_t)st.st_size <= max, SL_E_TOO_LARGE,
	          "%s: %lld bytes, at most %zu allowed", path, (long long)st.st_size, max);
	SL_GUARD(sl_secret_new(max, &s));
	SL_GUARD(sl_read_full(fd, s->p, max, &got, path));
	{
		/* a file that grew between fstat and read */
		uint8_t extra;
		ssize_t n = read(fd, &extra, 1);
		SL_ENSURE(n == 0, SL_E_TOO_LARGE, "%s: larger than %zu bytes", path, max);
	}
	s->len = got;
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	sl_secret_free(s);
	return rc;
}

sl_err sl_secret_read_file(const char *path, size_t max, sl_secret **out)
{
	return read_private(path, max, false, out);
}

static SL_RESULT read_token(const char *path, bool any_owner, sl_secret **out)
{
	sl_err rc = SL_E_INPUT;
	sl_secret *t = NULL, *z = NULL;
	size_t n;
	SL_GUARD(read_private(path, SL_TOKEN_MAX, any_owner, &t));
	n = t->len;
	while (n > 0 && (t->p[n - 1] == '\n' || t->p[n - 1] == '\r' || t->p[n - 1] == ' '))
		n--;
	for (size_t i = 0; i < n; i++)
		SL_ENSURE(t->p[i] > 0x20 && t->p[i] < 0x7f, SL_E_INPUT,
		          "%s: a token must be printable ASCII without spaces (byte %zu is not)",
		          path, i);
	SL_ENSURE(n >= SL_TOKEN_MIN, SL_E_INPUT,
	          "%s: token of %zu characters; a token needs at least %d", path, n, SL_TOKEN_MIN);
	SL_GUARD(sl_secret_new(n + 1, &z));
	memcpy(z->p, t->p, n);
	z->p[n] = '\0';
	z->len = n;
	*out = z;
	z = NULL;
	rc = SL_OK;
out:
	sl_secret_free(t);
	sl_secret_free(z);
	return rc;
}

sl_err sl_secret_read_token(const char *path, sl_secret **out)
{
	return read_token(path, false, out);
}

/* The owner rule keeps others from reading a token; root reads any file
 * anyway, so a packaged admin.token (owner _seclaunchd, 0600) is no secret
 * from it. Whoever owns the file chooses what root sends as its bearer,
 * which grants only what that token grants them already. seclaunchd's own
 * scope tokens stay under the strict rule: their owner decides who is admin. */
sl_err sl_secret_read_client_token(const char *path, sl_secret **out)
{
	return read_token(path, true, out);
}

void sl_secret_free(sl_secret *s)
{
	if (s == NULL)
		return;
	sodium_mprotect_readwrite(s->p);
	sodium_memzero(s->p, s->alloc);
	sodium_free(s->p); /* wipes again and checks the canary */
	free(s);
}

uint8_t *sl_secret_data(sl_secret *s)
{
	return s->p;
}

size_t sl_secret_len(const sl_secret *s)
{
	return s->len;
}

void sl_secret_truncate(sl_secret *s, size_t len)
{
	if (len < s->len) {
		sodium_memzero(s->p + len, s->len - len);
		s->len = len;
	}
}

void sl_secret_readonly(sl_secret *s)
{
	sodium_mprotect_readonly(s->p);
}

void sl_secret_readwrite(sl_secret *s)
{
	sodium_mprotect_readwrite(s->p);
}

bool sl_ct_eq(const void *a, const void *b, size_t len)
{
	return sodium_memcmp(a, b, len) == 0;
}

void sl_wipe(void *p, size_t len)
{
	if (p != NULL && len > 0)
		sodium_memzero(p, len);
}

void sl_random(void *p, size_t len)
{
	randombytes_buf(p, len);
}
