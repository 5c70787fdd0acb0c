/* Bounds-checked byte reader and writer.
 *
 * Every byte that comes from disk, the network, a TPM or a device is parsed
 * through sl_reader: no pointer arithmetic on untrusted input elsewhere. Each
 * read names the field it reads, so a short or malformed input fails with
 * SL_E_FORMAT and a message such as "header.chunk_size: need 4 bytes at
 * offset 12, 2 left".
 */
#ifndef SECLAUNCH_BUF_H
#define SECLAUNCH_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

typedef struct sl_reader {
	const uint8_t *data;
	size_t len;
	size_t off;
	const char *what; /* the thing being parsed, for messages ("SLD header") */
} sl_reader;

void sl_reader_init(sl_reader *r, const void *data, size_t len, const char *what);
/* The precondition every read checks first (as s2n's stuffer_validate):
 * data is set unless len is 0, and off <= len. A reader that fails it was
 * corrupted by code that touched its fields: SL_E_INTERNAL, nothing read. */
bool sl_reader_valid(const sl_reader *r);
SL_MUST_USE sl_err sl_reader_validate(const sl_reader *r);
size_t sl_reader_left(const sl_reader *r);
size_t sl_reader_offset(const sl_reader *r);

SL_MUST_USE sl_err sl_read_u8(sl_reader *r, uint8_t *v, const char *field);
SL_MUST_USE sl_err sl_read_u16be(sl_reader *r, uint16_t *v, const char *field);
SL_MUST_USE sl_err sl_read_u16le(sl_reader *r, uint16_t *v, const char *field);
SL_MUST_USE sl_err sl_read_u32be(sl_reader *r, uint32_t *v, const char *field);
SL_MUST_USE sl_err sl_read_u32le(sl_reader *r, uint32_t *v, const char *field);
SL_MUST_USE sl_err sl_read_u64be(sl_reader *r, uint64_t *v, const char *field);
SL_MUST_USE sl_err sl_read_u64le(sl_reader *r, uint64_t *v, const char *field);
/* Copies n bytes out. */
SL_MUST_USE sl_err sl_read_bytes(sl_reader *r, void *out, size_t n, const char *field);
/* Borrows n bytes in place (valid while the underlying data lives). */
SL_MUST_USE sl_err sl_read_view(sl_reader *r, size_t n, const uint8_t **out, const char *field);
SL_MUST_USE sl_err sl_read_skip(sl_reader *r, size_t n, const char *field);
/* A sub-reader over the next n bytes; the parent advances past them. */
SL_MUST_USE sl_err sl_read_sub(sl_reader *r, size_t n, sl_reader *sub, const char *field);
/* Delimiter-bounded: the bytes before the next delim as a sub-reader; the
 * parent advances past the delim. sl_read_until fails (SL_E_FORMAT naming
 * field) when no delim is left; sl_read_token then takes the rest. */
SL_MUST_USE sl_err sl_read_until(sl_reader *r, uint8_t delim, sl_reader *sub, const char *field);
SL_MUST_USE sl_err sl_read_token(sl_reader *r, uint8_t delim, sl_reader *sub, const char *field);
/* Length-prefixed (u8 / u16be / u32be length) field as a sub-reader; max bounds the length. */
SL_MUST_USE sl_err sl_read_lp8(sl_reader *r, sl_reader *sub, const char *field);
SL_MUST_USE sl_err sl_read_lp16be(sl_reader *r, sl_reader *sub, size_t max, const char *field);
SL_MUST_USE sl_err sl_read_lp32be(sl_reader *r, sl_reader *sub, size_t max, const char *field);
/* Requires n bytes that are all zero (reserved fields). */
SL_MUST_USE sl_err sl_read_zeros(sl_reader *r, size_t n, const char *field);
/* Fails with "trailing bytes" unless the reader is exactly at its end. */
SL_MUST_USE sl_err sl_reader_expect_end(const sl_reader *r);

/* Writer: fixed (over caller memory) or growable (heap, freed by sl_writer_free).
 * A fixed writer that would overflow fails with SL_E_INTERNAL; a growable one
 * is capped at max bytes (0 = 1 GiB). Growable writers hold no secrets: their
 * memory is wiped on free anyway. */
typedef struct sl_writer {
	uint8_t *data;
	size_t len;
	size_t cap;
	size_t max;
	bool fixed;
} sl_writer;

void sl_writer_init_fixed(sl_writer *w, void *buf, size_t cap);
void sl_writer_init(sl_writer *w, size_t max);
void sl_writer_free(sl_writer *w);
SL_MUST_USE sl_err sl_write_u8(sl_writer *w, uint8_t v);
SL_MUST_USE sl_err sl_write_u16be(sl_writer *w, uint16_t v);
SL_MUST_USE sl_err sl_write_u16le(sl_writer *w, uint16_t v);
SL_MUST_USE sl_err sl_write_u32be(sl_writer *w, uint32_t v);
SL_MUST_USE sl_err sl_write_u32le(sl_writer *w, uint32_t v);
SL_MUST_USE sl_err sl_write_u64be(sl_writer *w, uint64_t v);
SL_MUST_USE sl_err sl_write_u64le(sl_writer *w, uint64_t v);
SL_MUST_USE sl_err sl_write_bytes(sl_writer *w, const void *p, size_t n);
SL_MUST_USE sl_err sl_write_zeros(sl_writer *w, size_t n);

#endif
