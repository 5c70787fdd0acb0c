/* Shared helpers of the unit tests; see testlib.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ftw.h>

#include "seclaunch/util.h"
#include "testlib.h"

#define VECTOR_MAX ((size_t)16 << 20)

void tl_expect_fail(sl_err got, sl_err want, const char *call, const char *file, int line,
                    const char *needle, const char *what, ...)
{
	const char *detail = sl_err_detail();
	if (got == want && (needle == NULL || strstr(detail, needle) != NULL))
		return;
	print_error("%s%s%s: got %s '%s', want %s naming '%s'\n", what != NULL ? what : "",
	            what != NULL ? ": " : "", call, sl_err_name(got), detail, sl_err_name(want),
	            needle != NULL ? needle : "");
	_fail(file, line);
}

const char *tl_vectors(void)
{
	const char *v = getenv("SL_VECTORS");
	return v != NULL && v[0] != '\0' ? v : "tests/vectors";
}

static char *vector_vpath(char *buf, size_t n, const char *fmt, va_list ap)
{
	int a = snprintf(buf, n, "%s/", tl_vectors());
	assert_true(a > 0 && (size_t)a < n);
	int b = vsnprintf(buf + a, n - (size_t)a, fmt, ap);
	if (b < 0 || (size_t)b >= n - (size_t)a)
		fail_msg("vector path too long: %s...", buf);
	return buf;
}

char *tl_vector_path(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vector_vpath(buf, n, fmt, ap);
	va_end(ap);
	return buf;
}

uint8_t *tl_vector_load(size_t *len, const char *fmt, ...)
{
	char path[4096];
	uint8_t *b = NULL;
	va_list ap;
	va_start(ap, fmt);
	vector_vpath(path, sizeof(path), fmt, ap);
	va_end(ap);
	sl_err rc = sl_file_read(path, VECTOR_MAX, &b, len);
	if (rc != SL_OK)
		fail_msg("vector %s: %s", path, sl_err_detail());
	return b;
}

char *tl_tmpdir(char *buf, size_t n, const char *tag)
{
	const char *t = getenv("TMPDIR");
	int w = snprintf(buf, n, "%s/sl-%s.XXXXXX", t != NULL && t[0] != '\0' ? t : "/tmp", tag);
	assert_true(w > 0 && (size_t)w < n);
	if (mkdtemp(buf) == NULL)
		fail_msg("mkdtemp %s failed", buf);
	return buf;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

int tl_rmtree(const char *dir)
{
	return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void tl_flip_byte(const char *path, long off, unsigned char mask)
{
	FILE *f = fopen(path, "r+b");
	int c = EOF;

	if (f && fseek(f, off, SEEK_SET) == 0)
		c = fgetc(f);
	if (c == EOF || mask == 0 || fseek(f, off, SEEK_SET) != 0 || fputc(c ^ mask, f) == EOF) {
		if (f)
			fclose(f);
		fail_msg("cannot flip byte %ld of %s", off, path);
	}
	assert_int_equal(fclose(f), 0);
}
