/* Bounds-checked reader and writer (see include/seclaunch/buf.h). */
#include <stdlib.h>
#include <string.h>

#include "seclaunch/buf.h"
#include "seclaunch/secret.h"

#define SL_WRITER_DEFAULT_MAX ((size_t)1 << 30)

void sl_reader_init(sl_reader *r, const void *data, size_t len, const char *what)
{
	r->data = data;
	r->len = data != NULL ? len : 0;
	r->off = 0;
	r->what = what != NULL ? what : "input";
}

bool sl_reader_valid(const sl_reader *r)
{
	return r != NULL && (r->data != NULL || r->len == 0) && r->off <= r->len;
}

sl_err sl_reader_validate(const sl_reader *r)
{
	if (!sl_reader_valid(r))
		return sl_err_set(SL_E_INTERNAL, "%s: reader state is inconsistent",
		                  r != NULL && r->what != NULL ? r->what : "reader");
	return SL_OK;
}

size_t sl_reader_left(const sl_reader *r)
{
	return sl_reader_valid(r) ? r->len - r->off : 0;
}

size_t sl_reader_offset(const sl_reader *r)
{
	return r->off;
}

static SL_RESULT need(const sl_reader *r, size_t n, const char *field)
{
	sl_err rc = sl_reader_validate(r);
	if (rc != SL_OK)
		return rc;
	if (n > sl_reader_left(r))
		return sl_err_set(SL_E_FORMAT, "%s: %s: need %zu bytes at offset %zu, %zu left",
		                  r->what, field, n, r->off, sl_reader_left(r));
	return SL_OK;
}

sl_err sl_read_view(sl_reader *r, size_t n, const uint8_t **out, const char *field)
{
	sl_err rc = need(r, n, field);
	if (rc != SL_OK)
		return rc;
	*out = r->data + r->off;
	r->off += n;
	return SL_OK;
}

sl_err sl_read_bytes(sl_reader *r, void *out, size_t n, const char *field)
{
	const uint8_t *p;
	sl_err rc = sl_read_view(r, n, &p, field);
	if (rc != SL_OK)
		return rc;
	if (n > 0)
		memcpy(out, p, n);
	return SL_OK;
}

sl_err sl_read_skip(sl_reader *r, size_t n, const char *field)
{
	const uint8_t *p;
	return sl_read_view(r, n, &p, field);
}

sl_err sl_read_u8(sl_reader *r, uint8_t *v, const char *field)
{
	return sl_read_bytes(r, v, 1, field);
}

#define SL_READ_INT(fn, type, size, expr)                                                          \
	sl_err fn(sl_reader *r, type *v, const char *field)                                        \
	{                                                                                          \
		const uint8_t *p;                                                                  \
		sl_err rc = sl_read_view(r, size, &p, field);                                      \
		if (rc != SL_OK)                                                                   \
			return rc;                                                                 \
		type x = 0;                                                                        \
		for (size_t i = 0; i < size; i++)                                                  \
			x |= (type)p[i] << (expr);                                                 \
		*v = x;                                                                            \
		return SL_OK;                                                                      \
	}

SL_READ_INT(sl_read_u16be, uint16_t, 2, 8 * (1 - i))
SL_READ_INT(sl_read_u16le, uint16_t, 2, 8 * i)
SL_READ_INT(sl_read_u32be, uint32_t, 4, 8 * (3 - i))
SL_READ_INT(sl_read_u32le, uint32_t, 4, 8 * i)
SL_READ_INT(sl_read_u64be, uint64_t, 8, 8 * (7 - i))
SL_READ_INT(sl_read_u64le, uint64_t, 8, 8 * i)

sl_err sl_read_sub(sl_reader *r, size_t n, sl_reader *sub, const char *field)
{
	const uint8_t *p;
	sl_err rc = sl_read_view(r, n, &p, field);
	if (rc != SL_OK)
		return rc;
	sl_reader_init(sub, p, n, r->what);
	return SL_OK;
}

/* Length of the bytes before the first delim, or SIZE_MAX. */
static size_t span_to(const sl_reader *r, uint8_t delim)
{
	size_t left = sl_reader_left(r);
	const uint8_t *p = left > 0 ? memchr(r->data + r->off, delim, left) : NULL;
	return p != NULL ? (size_t)(p - (r->data + r->off)) : SIZE_MAX;
}

sl_err sl_read_until(sl_reader *r, uint8_t delim, sl_reader *sub, const char *field)
{
	sl_err rc = sl_reader_validate(r);
	if (rc != SL_OK)
		return rc;
	size_t n = span_to(r, delim);
	if (n == SIZE_MAX)
		return sl_err_set(SL_E_FORMAT, "%s: %s: no 0x%02x delimiter after offset %zu",
		                  r->what, field, delim, r->off);
	rc = sl_read_sub(r, n, sub, field);
	if (rc == SL_OK)
		rc = sl_read_skip(r, 1, field);
	return rc;
}

sl_err sl_read_token(sl_reader *r, uint8_t delim, sl_reader *sub, const char *field)
{
	sl_err rc = sl_reader_validate(r);
	if (rc != SL_OK)
		return rc;
	size_t n = span_to(r, delim);
	if (n == SIZE_MAX)
		return sl_read_sub(r, sl_reader_left(r), sub, field);
	rc = sl_read_sub(r, n, sub, field);
	if (rc == SL_OK)
		rc = sl_read_skip(r, 1, field);
	return rc;
}

sl_err sl_read_lp8(sl_reader *r, sl_reader *sub, const char *field)
{
	uint8_t n;
	sl_err rc = sl_read_u8(r, &n, field);
	if (rc != SL_OK)
		return rc;
	return sl_read_sub(r, n, sub, field);
}

static SL_RESULT check_max(const sl_reader *r, size_t n, size_t max, const char *field)
{
	if (n > max)
		return sl_err_set(SL_E_FORMAT, "%s: %s: length %zu exceeds the limit %zu", r->what,
		                  field, n, max);
	return SL_OK;
}

sl_err sl_read_lp16be(sl_reader *r, sl_reader *sub, size_t max, const char *field)
{
	uint16_t n;
	sl_err rc = sl_read_u16be(r, &n, field);
	if (rc == SL_OK)
		rc = check_max(r, n, max, field);
	if (rc != SL_OK)
		return rc;
	return sl_read_sub(r, n, sub, field);
}

sl_err sl_read_lp32be(sl_reader *r, sl_reader *sub, size_t max, const char *field)
{
	uint32_t n;
	sl_err rc = sl_read_u32be(r, &n, field);
	if (rc == SL_OK)
		rc = check_max(r, n, max, field);
	if (rc != SL_OK)
		return rc;
	return sl_read_sub(r, n, sub, field);
}

sl_err sl_read_zeros(sl_reader *r, size_t n, const char *field)
{
	const uint8_t *p;
	size_t start = r->off;
	sl_err rc = sl_read_view(r, n, &p, field);
	if (rc != SL_OK)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (p[i] != 0)
			return sl_err_set(
			    SL_E_FORMAT, "%s: %s: reserved byte at offset %zu is 0x%02x, must be 0",
			    r->what, field, start + i, p[i]);
	}
	return SL_OK;
}

sl_err sl_reader_expect_end(const sl_reader *r)
{
	sl_err rc = sl_reader_validate(r);
	if (rc != SL_OK)
		return rc;
	if (sl_reader_left(r) != 0)
		return sl_err_set(SL_E_FORMAT, "%s: %zu trailing bytes at offset %zu", r->what,
		                  sl_reader_left(r), r->off);
	return SL_OK;
}

/* ---- writer ---------------------------------------------------------- */

void sl_writer_init_fixed(sl_writer *w, void *buf, size_t cap)
{
	w->data = buf;
	w->len = 0;
	w->cap = cap;
	w->max = cap;
	w->fixed = true;
}

void sl_writer_init(sl_writer *w, size_t max)
{
	w->data = NULL;
	w->len = 0;
	w->cap = 0;
	w->max = max != 0 ? max : SL_WRITER_DEFAULT_MAX;
	w->fixed = false;
}

void sl_writer_free(sl_writer *w)
{
	if (!w->fixed && w->data != NULL) {
		sl_wipe(w->data, w->cap);
		free(w->data);
	}
	w->data = NULL;
	w->len = w->cap = 0;
}

static SL_RESULT reserve(sl_writer *w, size_t n)
{
	if (n > w->max - w->len)
		return sl_err_set(w->fixed ? SL_E_INTERNAL : SL_E_TOO_LARGE,
		                  "output buffer full: %zu + %zu bytes exceeds %zu", w->len, n,
		                  w->max);
	if (w->len + n <= w->cap)
		return SL_OK;
	size_t cap = w->cap != 0 ? w->cap : 256;
	while (cap < w->len + n)
		cap = cap > w->max / 2 ? w->max : cap * 2;
	uint8_t *p = malloc(cap);
	if (p == NULL)
		return sl_err_set(SL_E_NOMEM, "allocating %zu bytes", cap);
	if (w->len > 0)
		memcpy(p, w->data, w->len);
	if (w->data != NULL) {
		sl_wipe(w->data, w->cap);
		free(w->data);
	}
	w->data = p;
	w->cap = cap;
	return SL_OK;
}

sl_err sl_write_bytes(sl_writer *w, const void *p, size_t n)
{
	sl_err rc = reserve(w, n);
	if (rc != SL_OK)
		return rc;
	if (n > 0)
		memcpy(w->data + w->len, p, n);
	w->len += n;
	return SL_OK;
}

sl_err sl_write_zeros(sl_writer *w, size_t n)
{
	sl_err rc = reserve(w, n);
	if (rc != SL_OK)
		return rc;
	memset(w->data + w->len, 0, n);
	w->len += n;
	return SL_OK;
}

sl_err sl_write_u8(sl_writer *w, uint8_t v)
{
	return sl_write_bytes(w, &v, 1);
}

#define SL_WRITE_INT(fn, type, size, expr)                                                         \
	sl_err fn(sl_writer *w, type v)                                                            \
	{                                                                                          \
		uint8_t b[size];                                                                   \
		for (size_t i = 0; i < size; i++)                                                  \
			b[i] = (uint8_t)(v >> (expr));                                             \
		return sl_write_bytes(w, b, size);                                                 \
	}

SL_WRITE_INT(sl_write_u16be, uint16_t, 2, 8 * (1 - i))
SL_WRITE_INT(sl_write_u16le, uint16_t, 2, 8 * i)
SL_WRITE_INT(sl_write_u32be, uint32_t, 4, 8 * (3 - i))
SL_WRITE_INT(sl_write_u32le, uint32_t, 4, 8 * i)
SL_WRITE_INT(sl_write_u64be, uint64_t, 8, 8 * (7 - i))
SL_WRITE_INT(sl_write_u64le, uint64_t, 8, 8 * i)
