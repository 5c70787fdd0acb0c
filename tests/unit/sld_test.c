/* SLD v1: round trips over the boundary sizes for both AEADs and several
 * thread counts, random access, header parsing of bad input, wrong key,
 * header/chunk tampering, truncation and extension, sinks, output files. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "seclaunch/crypto.h"
#include "seclaunch/sld.h"
#include "seclaunch/util.h"

#define CS ((uint32_t)64 << 10)

static int setup(void **state)
{
	(void)state;
	return sl_crypto_init() == SL_OK ? 0 : -1;
}

static sl_secret *new_dek(void)
{
	sl_secret *k = NULL;
	assert_int_equal(sl_secret_random(SL_SLD_DEK_LEN, &k), SL_OK);
	return k;
}

static int memfd_with(const uint8_t *p, size_t n)
{
	int fd = memfd_create("sld-test", MFD_CLOEXEC);
	assert_true(fd >= 0);
	if (n > 0)
		assert_int_equal(sl_write_all(fd, p, n, "memfd"), SL_OK);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static uint8_t *random_bytes(size_t n)
{
	uint8_t *p = malloc(n + 1);
	assert_non_null(p);
	sl_random(p, n);
	return p;
}

/* Encrypts plain into a new memfd; returns it (offset 0). */
static int encrypt_to_fd(sl_secret *dek, const uint8_t *plain, size_t n,
                         const sl_sld_encrypt_params *p)
{
	int in = memfd_with(plain, n);
	int out = memfd_create("sld-out", MFD_CLOEXEC);
	assert_true(out >= 0);
	assert_int_equal(sl_sld_encrypt(dek, p, in, n, out), SL_OK);
	close(in);
	return out;
}

static size_t fd_size(int fd)
{
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	return (size_t)st.st_size;
}

static uint8_t *fd_bytes(int fd, size_t *n)
{
	*n = fd_size(fd);
	uint8_t *p = malloc(*n + 1);
	size_t got = 0;
	assert_non_null(p);
	assert_int_equal(pread(fd, p, *n, 0), (ssize_t)*n);
	(void)got;
	return p;
}

struct collect {
	uint8_t *buf;
	size_t len, cap;
	uint64_t next_index;
	uint64_t fail_at; /* UINT64_MAX = never */
};

static sl_err collect_sink(void *ctx, uint64_t i, const uint8_t *plain, size_t len)
{
	struct collect *c = ctx;
	assert_int_equal(i, c->next_index); /* strictly in order */
	if (i == c->fail_at)
		return sl_err_set(SL_E_IO, "sink refused chunk %llu", (unsigned long long)i);
	c->next_index++;
	assert_true(c->len + len <= c->cap);
	if (len > 0)
		memcpy(c->buf + c->len, plain, len);
	c->len += len;
	return SL_OK;
}

static sl_err decrypt_all(int fd, sl_secret *dek, unsigned threads, struct collect *c)
{
	sl_sld_reader *r = NULL;
	sl_err rc = sl_sld_open(fd, "test.sld", dek, &r);
	if (rc != SL_OK)
		return rc;
	rc = sl_sld_decrypt(r, threads, collect_sink, c, NULL, NULL);
	sl_sld_close(r);
	return rc;
}

static void round_trip(sl_aead_id aead, size_t n, unsigned threads)
{
	sl_secret *dek = new_dek();
	uint8_t *plain = random_bytes(n);
	sl_sld_encrypt_params p = {
	    .dataset_id = "unit/round-trip", .aead = aead, .chunk_size = CS, .threads = threads};
	int fd = encrypt_to_fd(dek, plain, n, &p);
	uint64_t chunks = n == 0 ? 1 : (n + CS - 1) / CS;
	assert_int_equal(fd_size(fd), 0 + fd_size(fd)); /* sanity */

	sl_sld_header *h = NULL;
	assert_int_equal(sl_sld_header_read_fd(fd, "t", &h), SL_OK);
	assert_int_equal(sl_sld_header_plaintext_len(h), n);
	assert_int_equal(sl_sld_header_chunk_count(h), chunks);
	assert_int_equal(sl_sld_header_aead(h), aead);
	assert_int_equal(sl_sld_header_file_size(h), fd_size(fd));
	assert_int_equal(fd_size(fd), sl_sld_header_len(h) + n + 16 * chunks);
	sl_sld_header_free(h);

	struct collect c = {.buf = malloc(n + 1), .cap = n, .fail_at = UINT64_MAX};
	assert_int_equal(decrypt_all(fd, dek, threads, &c), SL_OK);
	assert_int_equal(c.len, n);
	assert_int_equal(c.next_index, chunks);
	if (n > 0)
		assert_memory_equal(c.buf, plain, n);
	free(c.buf);
	free(plain);
	close(fd);
	sl_secret_free(dek);
}

static void test_round_trips(void **state)
{
	(void)state;
	const size_t sizes[] = {0, 1, CS - 1, CS, CS + 1, 9 * (size_t)CS + 12345};
	const unsigned threads[] = {1, 2, 4, 8};
	for (int a = SL_AEAD_AES_256_GCM; a <= SL_AEAD_XCHACHA20_POLY1305; a++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
			for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++)
				round_trip((sl_aead_id)a, sizes[s], threads[t]);
}

/* Many small chunks through a small window: ordering under contention. */
static void test_many_chunks(void **state)
{
	(void)state;
	round_trip(SL_AEAD_AES_256_GCM, 200 * (size_t)CS + 3, 8);
	round_trip(SL_AEAD_AES_256_GCM, 50 * (size_t)CS, 3);
}

static void test_default_chunk_and_threads(void **state)
{
	(void)state;
	sl_secret *dek = new_dek();
	size_t n = (size_t)SL_SLD_CHUNK_DEFAULT + 100;
	uint8_t *plain = random_bytes(n);
	sl_sld_encrypt_params p = {.dataset_id = "defaults"};
	int fd = encrypt_to_fd(dek, plain, n, &p);
	sl_sld_header *h = NULL;
	assert_int_equal(sl_sld_header_read_fd(fd, "t", &h), SL_OK);
	assert_int_equal(sl_sld_header_chunk_size(h), SL_SLD_CHUNK_DEFAULT);
	assert_int_equal(sl_sld_header_aead(h), SL_AEAD_AES_256_GCM);
	assert_int_equal(sl_sld_header_chunk_count(h), 2);
	sl_sld_header_free(h);
	struct collect c = {.buf = malloc(n), .cap = n, .fail_at = UINT64_MAX};
	assert_int_equal(decrypt_all(fd, dek, 0, &c), SL_OK);
	assert_memory_equal(c.buf, plain, n);
	assert_true(sl_sld_default_threads() >= 1);
	free(c.buf);
	free(plain);
	close(fd);
	sl_secret_free(dek);
}

static void test_random_access(void **state)
{
	(void)state;
	sl_secret *dek = new_dek();
	size_t n = 7 * (size_t)CS + 99;
	uint8_t *plain = random_bytes(n);
	sl_sld_encrypt_params p = {
	    .dataset_id = "ra", .chunk_size = CS, .aead = SL_AEAD_XCHACHA20_POLY1305};
	int fd = encrypt_to_fd(dek, plain, n, &p);
	sl_sld_reader *r = NULL;
	assert_int_equal(sl_sld_open(fd, "ra.sld", dek, &r), SL_OK);
	uint8_t *buf = malloc(CS + 16);
	size_t len = 0;
	const uint64_t order[] = {7, 0, 3, 6, 1};
	for (size_t k = 0; k < 5; k++) {
		uint64_t i = order[k];
		assert_int_equal(sl_sld_read_chunk(r, i, buf, CS + 16, &len), SL_OK);
		assert_int_equal(len, i == 7 ? 99 : CS);
		assert_int_equal(len, sl_sld_chunk_plain_len(sl_sld_reader_header(r), i));
		assert_memory_equal(buf, plain + i * CS, len);
	}
	assert_int_equal(sl_sld_read_chunk(r, 8, buf, CS + 16, &len), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "chunk 8"));
	assert_int_equal(sl_sld_read_chunk(r, 0, buf, CS, &len), SL_E_INTERNAL);
	sl_sld_close(r);
	free(buf);
	free(plain);
	close(fd);
	sl_secret_free(dek);
}

static void test_kms_key_reference(void **state)
{
	(void)state;
	sl_secret *dek = new_dek();
	const uint8_t wrapped[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	sl_sld_encrypt_params p = {.dataset_id = "données-eu",
	                           .chunk_size = CS,
	                           .kms_url = "https://kms.example:8443",
	                           .key_id = "team-a/key-1",
	                           .wrapped_dek = wrapped,
	                           .wrapped_dek_len = sizeof(wrapped)};
	int fd = encrypt_to_fd(dek, (const uint8_t *)"x", 1, &p);
	sl_sld_header *h = NULL;
	size_t wl = 0;
	assert_int_equal(sl_sld_header_read_fd(fd, "t", &h), SL_OK);
	assert_string_equal(sl_sld_header_dataset_id(h), "données-eu");
	assert_string_equal(sl_sld_header_kms_url(h), "https://kms.example:8443");
	assert_string_equal(sl_sld_header_key_id(h), "team-a/key-1");
	const uint8_t *w = sl_sld_header_wrapped_dek(h, &wl);
	assert_int_equal(wl, sizeof(wrapped));
	assert_memory_equal(w, wrapped, wl);
	json_t *j = sl_sld_header_json(h);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "key"), "source")),
	                    "kms");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(j, "key"), "wrapped_dek")),
	    "AQIDBAUGBwgJ");
	assert_int_equal(json_integer_value(json_object_get(j, "chunk_size")), CS);
	assert_true(json_is_false(json_object_get(j, "authenticated")));
	json_decref(j);
	sl_sld_header_free(h);
	close(fd);

	/* a partial key reference is refused */
	p.kms_url = NULL;
	int in = memfd_with((const uint8_t *)"x", 1), out = memfd_with(NULL, 0);
	assert_int_equal(sl_sld_encrypt(dek, &p, in, 1, out), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "key reference"));
	close(in);
	close(out);
	sl_secret_free(dek);
}

static void test_encrypt_bad_params(void **state)
{
	(void)state;
	sl_secret *dek = new_dek();
	int in = memfd_with((const uint8_t *)"abc", 3), out = memfd_with(NULL, 0);
	sl_sld_encrypt_params p = {.dataset_id = "d", .chunk_size = CS + 1};
	assert_int_equal(sl_sld_encrypt(dek, &p, in, 3, out), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "chunk size"));
	p.chunk_size = CS / 2;
	assert_int_equal(sl_sld_encrypt(dek, &p, in, 3, out), SL_E_INPUT);
	p.chunk_size = 128u << 20;
	assert_int_equal(sl_sld_encrypt(dek, &p, in, 3, out), SL_E_INPUT);
	p.chunk_size = CS;
	p.dataset_id = "";
	assert_int_equal(sl_sld_encrypt(dek, &p, in, 3, out), SL_E_INPUT);
	p.dataset_id = "bad\x01id";
	assert_int_equal(sl_sld_encrypt(dek, &p, in, 3, out), SL_E_INPUT);
	p.dataset_id = "bad\xc0\xafid"; /* overlong '/' */
	assert_int_equal(sl_sld_encrypt(dek, &p, in, 3, out), SL_E_INPUT);
	char longid[300];
	memset(longid, 'a', sizeof(longid) - 1);
	longid[299] = '\0';
	p.dataset_id = longid;
	assert_int_equal(sl_sld_encrypt(dek, &p, in, 3, out), SL_E_INPUT);
	p.dataset_id = "d";
	/* input shorter than announced */
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	assert_int_equal(sl_sld_encrypt(dek, &p, in, 4, out), SL_E_IO);
	assert_non_null(strstr(sl_err_detail(), "input ended"));
	/* input longer than announced */
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	assert_int_equal(sl_sld_encrypt(dek, &p, in, 2, out), SL_E_IO);
	assert_non_null(strstr(sl_err_detail(), "longer"));
	/* a DEK of the wrong size */
	sl_secret *short_key = NULL;
	assert_int_equal(sl_secret_random(16, &short_key), SL_OK);
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	assert_int_equal(sl_sld_encrypt(short_key, &p, in, 3, out), SL_E_INPUT);
	sl_secret_free(short_key);
	close(in);
	close(out);
	sl_secret_free(dek);
}

/* ---- header parsing --------------------------------------------------- */

/* A real header (key-file mode, dataset id "hdr") for the parse tests. */
static uint8_t *real_header(size_t *hlen, sl_secret **dek_out)
{
	sl_secret *dek = new_dek();
	sl_sld_encrypt_params p = {.dataset_id = "hdr", .chunk_size = CS};
	int fd = encrypt_to_fd(dek, (const uint8_t *)"hello", 5, &p);
	size_t n;
	uint8_t *all = fd_bytes(fd, &n);
	sl_sld_header *h = NULL;
	assert_int_equal(sl_sld_header_parse(all, n, &h), SL_OK);
	*hlen = sl_sld_header_len(h);
	assert_int_equal(*hlen, 145); /* the 143-byte minimum has a 1-byte id */
	sl_sld_header_free(h);
	close(fd);
	if (dek_out != NULL)
		*dek_out = dek;
	else
		sl_secret_free(dek);
	return all;
}

static void expect_parse(const uint8_t *p, size_t n, sl_err want, const char *needle)
{
	sl_sld_header *h = NULL;
	sl_err rc = sl_sld_header_parse(p, n, &h);
	if (rc != want || (needle != NULL && strstr(sl_err_detail(), needle) == NULL))
		fail_msg("parse: got %s (%s), want %s containing '%s'", sl_err_name(rc),
		         sl_err_detail(), sl_err_name(want), needle != NULL ? needle : "");
	sl_sld_header_free(h);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8),
	p[3] = (uint8_t)v;
}

static void test_header_bad_inputs(void **state)
{
	(void)state;
	size_t hl;
	uint8_t *h = real_header(&hl, NULL);
	uint8_t b[512];
	memcpy(b, h, hl);

	expect_parse(b, hl, SL_OK, NULL);
	expect_parse(b, 0, SL_E_FORMAT, "not an SLD file");
	expect_parse(b, 7, SL_E_FORMAT, "not an SLD file");
	expect_parse((const uint8_t *)"PK\x03\x04 this is a zip", 20, SL_E_FORMAT, "magic");
	expect_parse(b, 9, SL_E_TRUNCATED, "truncated");
	expect_parse(b, hl - 1, SL_E_TRUNCATED, "header_len");
	expect_parse(b, 100, SL_E_TRUNCATED, "header_len");

	/* one field at a time */
	memcpy(b, h, hl), b[0] ^= 1;
	expect_parse(b, hl, SL_E_FORMAT, "magic");
	memcpy(b, h, hl), b[9] = 2;
	expect_parse(b, hl, SL_E_VERSION, "version 2");
	memcpy(b, h, hl), b[8] = 1;
	expect_parse(b, hl, SL_E_VERSION, "header.version");
	memcpy(b, h, hl), put32(b + 10, 100);
	expect_parse(b, hl, SL_E_INTEGRITY, "header.header_len");
	memcpy(b, h, hl), put32(b + 10, 70000);
	expect_parse(b, hl, SL_E_INTEGRITY, "header.header_len");
	memcpy(b, h, hl), put32(b + 10, (uint32_t)hl - 1);
	expect_parse(b, hl, SL_E_INTEGRITY, "header");
	memcpy(b, h, hl), b[14] = 3;
	expect_parse(b, hl, SL_E_INTEGRITY, "header.aead");
	memcpy(b, h, hl), b[14] = 0;
	expect_parse(b, hl, SL_E_INTEGRITY, "header.aead");
	memcpy(b, h, hl), b[15] = 0x80;
	expect_parse(b, hl, SL_E_INTEGRITY, "header.flags");
	memcpy(b, h, hl), b[18] ^= 0x02; /* 64K|128K: not a power of two */
	expect_parse(b, hl, SL_E_INTEGRITY, "header.chunk_size");
	memcpy(b, h, hl), put32(b + 16, 1u << 15);
	expect_parse(b, hl, SL_E_INTEGRITY, "header.chunk_size");
	memcpy(b, h, hl), b[27] ^= 0x01; /* plaintext_len 5 -> 4: count still 1, parse ok */
	expect_parse(b, hl, SL_OK, NULL);
	memcpy(b, h, hl), b[21] ^= 0x01; /* plaintext_len huge */
	expect_parse(b, hl, SL_E_INTEGRITY, "header.chunk_count");
	memcpy(b, h, hl), b[20] = 0x20;
	expect_parse(b, hl, SL_E_INTEGRITY, "header.plaintext_len");
	memcpy(b, h, hl), b[35] ^= 0x02;
	expect_parse(b, hl, SL_E_INTEGRITY, "header.chunk_count");
	memcpy(b, h, hl), b[68] = 0; /* empty dataset id */
	expect_parse(b, hl, SL_E_INTEGRITY, "header.dataset_id");
	memcpy(b, h, hl), b[68] = 200;
	expect_parse(b, hl, SL_E_INTEGRITY, "header.dataset_id");
	memcpy(b, h, hl), b[69] = 0x07;
	expect_parse(b, hl, SL_E_INTEGRITY, "header.dataset_id");
	memcpy(b, h, hl), b[69] = 0xff;
	expect_parse(b, hl, SL_E_INTEGRITY, "header.dataset_id");
	memcpy(b, h, hl), b[73] = 1; /* kms_url length 1 */
	expect_parse(b, hl, SL_E_INTEGRITY, "header");
	memcpy(b, h, hl), b[72] = 0x10; /* kms_url length > 2048 */
	expect_parse(b, hl, SL_E_INTEGRITY, "header.kms_url");

	/* trailing bytes inside header_len */
	memcpy(b, h, hl);
	b[hl] = 0;
	put32(b + 10, (uint32_t)hl + 1);
	expect_parse(b, hl + 1, SL_E_INTEGRITY, "header");
	free(h);
}

/* Rebuilds the header with an extension area holding ext (n bytes). */
static size_t with_extensions(const uint8_t *h, size_t hl, const uint8_t *ext, size_t n,
                              uint8_t *out)
{
	/* key-file header with a 3-byte id: the extensions_len field sits at
	 * 69 + 3 + 2 + 1 + 2 = 77 */
	const size_t at = 77;
	memcpy(out, h, at);
	put32(out + at, (uint32_t)n);
	memcpy(out + at + 4, ext, n);
	memcpy(out + at + 4 + n, h + at + 4, hl - at - 4);
	put32(out + 10, (uint32_t)(hl + n));
	return hl + n;
}

static void test_header_extensions(void **state)
{
	(void)state;
	size_t hl;
	sl_secret *dek = NULL;
	uint8_t *h = real_header(&hl, &dek);
	uint8_t b[512];
	const uint8_t noncrit[] = {0x12, 0x34, 0x00, 0x01, 0x00, 0x02, 0xab, 0xcd};
	const uint8_t crit[] = {0x12, 0x34, 0x01, 0x01, 0x00, 0x00};
	const uint8_t badflags[] = {0x12, 0x34, 0x02, 0x01, 0x00, 0x00};
	const uint8_t dup[] = {0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0};
	const uint8_t shortv[] = {0x12, 0x34, 0x00, 0x01, 0x00, 0x09, 0xab};

	size_t n = with_extensions(h, hl, noncrit, sizeof(noncrit), b);
	sl_sld_header *ph = NULL;
	assert_int_equal(sl_sld_header_parse(b, n, &ph), SL_OK);
	json_t *j = sl_sld_header_json(ph);
	json_t *e0 = json_array_get(json_object_get(j, "extensions"), 0);
	assert_int_equal(json_integer_value(json_object_get(e0, "type")), 0x1234);
	assert_true(json_is_false(json_object_get(e0, "critical")));
	assert_int_equal(json_integer_value(json_object_get(e0, "length")), 2);
	json_decref(j);
	sl_sld_header_free(ph);

	n = with_extensions(h, hl, crit, sizeof(crit), b);
	expect_parse(b, n, SL_E_VERSION, "critical extension 0x1234");
	n = with_extensions(h, hl, badflags, sizeof(badflags), b);
	expect_parse(b, n, SL_E_INTEGRITY, "reserved flag");
	n = with_extensions(h, hl, dup, sizeof(dup), b);
	expect_parse(b, n, SL_E_INTEGRITY, "twice");
	n = with_extensions(h, hl, shortv, sizeof(shortv), b);
	expect_parse(b, n, SL_E_INTEGRITY, "header.extensions");

	/* an added (non-critical) extension parses, but the header MAC catches it */
	n = with_extensions(h, hl, noncrit, sizeof(noncrit), b);
	int fd = memfd_with(b, n);
	/* append the original chunk so the size is right for the new header */
	size_t all_n = hl + 5 + 16;
	assert_true(lseek(fd, 0, SEEK_END) == (off_t)n);
	assert_int_equal(sl_write_all(fd, h + hl, all_n - hl, "memfd"), SL_OK);
	sl_sld_reader *r = NULL;
	assert_int_equal(sl_sld_open(fd, "ext.sld", dek, &r), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "header_mac"));
	close(fd);
	free(h);
	sl_secret_free(dek);
}

/* ---- whole-file integrity --------------------------------------------- */

struct file {
	uint8_t *bytes;
	size_t n, hl;
	uint8_t *plain;
	size_t plain_n;
	sl_secret *dek;
};

static void make_file(struct file *f, size_t chunks_full, size_t tail)
{
	f->dek = new_dek();
	f->plain_n = chunks_full * CS + tail;
	f->plain = random_bytes(f->plain_n);
	sl_sld_encrypt_params p = {.dataset_id = "tamper", .chunk_size = CS, .threads = 2};
	int fd = encrypt_to_fd(f->dek, f->plain, f->plain_n, &p);
	f->bytes = fd_bytes(fd, &f->n);
	sl_sld_header *h = NULL;
	assert_int_equal(sl_sld_header_parse(f->bytes, f->n, &h), SL_OK);
	f->hl = sl_sld_header_len(h);
	sl_sld_header_free(h);
	close(fd);
}

static void free_file(struct file *f)
{
	free(f->bytes);
	free(f->plain);
	sl_secret_free(f->dek);
}

/* Decrypts bytes with threads; expects want and a detail with needle; the
 * sink must have received exactly `good` chunks. */
static void expect_decrypt(const uint8_t *bytes, size_t n, sl_secret *dek, unsigned threads,
                           sl_err want, const char *needle, uint64_t good)
{
	int fd = memfd_with(bytes, n);
	struct collect c = {.buf = malloc(n + 1), .cap = n, .fail_at = UINT64_MAX};
	sl_err rc = decrypt_all(fd, dek, threads, &c);
	if (rc != want || (needle != NULL && strstr(sl_err_detail(), needle) == NULL))
		fail_msg("decrypt: got %s (%s), want %s containing '%s'", sl_err_name(rc),
		         sl_err_detail(), sl_err_name(want), needle != NULL ? needle : "");
	assert_int_equal(c.next_index, good);
	free(c.buf);
	close(fd);
}

static void test_wrong_key_and_header_mac(void **state)
{
	(void)state;
	struct file f;
	make_file(&f, 3, 10);
	sl_secret *other = new_dek();
	expect_decrypt(f.bytes, f.n, other, 2, SL_E_WRONG_KEY, "wrong key", 0);
	sl_secret_free(other);

	uint8_t *b = malloc(f.n);
	/* dataset id byte: parses, MAC fails */
	memcpy(b, f.bytes, f.n), b[69] ^= 0x01;
	expect_decrypt(b, f.n, f.dek, 2, SL_E_INTEGRITY, "header authentication failed", 0);
	/* salt: reported as wrong key (cannot be told apart), naming the salt */
	memcpy(b, f.bytes, f.n), b[40] ^= 0x80;
	expect_decrypt(b, f.n, f.dek, 2, SL_E_WRONG_KEY, "header.salt", 0);
	/* key check */
	memcpy(b, f.bytes, f.n), b[f.hl - 40] ^= 0x01;
	expect_decrypt(b, f.n, f.dek, 2, SL_E_WRONG_KEY, "key_check", 0);
	/* MAC itself */
	memcpy(b, f.bytes, f.n), b[f.hl - 1] ^= 0x01;
	expect_decrypt(b, f.n, f.dek, 2, SL_E_INTEGRITY, "header_mac", 0);
	/* plaintext_len 3*CS+10 -> 3*CS+11: same chunk count, MAC fails */
	memcpy(b, f.bytes, f.n), b[27] ^= 0x01;
	expect_decrypt(b, f.n, f.dek, 2, SL_E_INTEGRITY, "header", 0);
	free(b);
	free_file(&f);
}

static void test_chunk_tamper(void **state)
{
	(void)state;
	struct file f;
	make_file(&f, 4, 100); /* 5 chunks */
	uint8_t *b = malloc(f.n + 2 * (CS + 16));
	const size_t stride = CS + 16;
	const unsigned threads[] = {1, 4};
	for (size_t t = 0; t < 2; t++) {
		for (uint64_t i = 0; i < 5; i++) {
			size_t off = f.hl + i * stride;
			size_t clen = i == 4 ? 100 : CS;
			char needle[32];
			snprintf(needle, sizeof(needle), "chunk %llu of 5", (unsigned long long)i);
			/* data */
			memcpy(b, f.bytes, f.n), b[off + clen / 2] ^= 0x10;
			expect_decrypt(b, f.n, f.dek, threads[t], SL_E_INTEGRITY, needle, i);
			/* tag */
			memcpy(b, f.bytes, f.n), b[off + clen + 15] ^= 0x01;
			expect_decrypt(b, f.n, f.dek, threads[t], SL_E_INTEGRITY, needle, i);
		}
		/* swap chunks 1 and 2 */
		memcpy(b, f.bytes, f.n);
		memcpy(b + f.hl + 1 * stride, f.bytes + f.hl + 2 * stride, stride);
		memcpy(b + f.hl + 2 * stride, f.bytes + f.hl + 1 * stride, stride);
		expect_decrypt(b, f.n, f.dek, threads[t], SL_E_INTEGRITY, "chunk 1 of 5", 1);
		/* chunk 0 duplicated over chunk 1 */
		memcpy(b, f.bytes, f.n);
		memcpy(b + f.hl + stride, f.bytes + f.hl, stride);
		expect_decrypt(b, f.n, f.dek, threads[t], SL_E_INTEGRITY, "chunk 1 of 5", 1);
	}
	/* truncation: 1 byte, a tag, a whole chunk, down to the header */
	expect_decrypt(f.bytes, f.n - 1, f.dek, 2, SL_E_TRUNCATED, "chunk 4 of 5", 0);
	expect_decrypt(f.bytes, f.n - 16, f.dek, 2, SL_E_TRUNCATED, "truncated", 0);
	expect_decrypt(f.bytes, f.n - 116, f.dek, 2, SL_E_TRUNCATED, "chunk 4 of 5", 0);
	expect_decrypt(f.bytes, f.hl, f.dek, 2, SL_E_TRUNCATED, "chunk 0 of 5", 0);
	/* extension: a byte, a duplicated chunk */
	memcpy(b, f.bytes, f.n), b[f.n] = 0;
	expect_decrypt(b, f.n + 1, f.dek, 2, SL_E_INTEGRITY, "extended", 0);
	memcpy(b, f.bytes, f.n), memcpy(b + f.n, f.bytes + f.hl, stride);
	expect_decrypt(b, f.n + stride, f.dek, 2, SL_E_INTEGRITY, "extended", 0);
	free(b);
	free_file(&f);
}

/* An independent reading of docs/format-sld.md with only crypto.h: key
 * derivation, key check, header MAC, nonces and associated data, and the
 * final flag (a chunk opened with the wrong flag fails). */
static void derive(sl_secret *dek, const uint8_t *salt, const char *info, uint8_t out[32])
{
	assert_int_equal(sl_hkdf_sha256(sl_secret_data(dek), 32, salt, 32, (const uint8_t *)info,
	                                strlen(info), out, 32),
	                 SL_OK);
}

static void test_spec_conformance(void **state)
{
	(void)state;
	const sl_aead_id ids[] = {SL_AEAD_AES_256_GCM, SL_AEAD_XCHACHA20_POLY1305};
	for (size_t k = 0; k < 2; k++) {
		sl_secret *dek = new_dek();
		size_t n = 2 * (size_t)CS + 777;
		uint8_t *plain = random_bytes(n);
		sl_sld_encrypt_params p = {.dataset_id = "spec", .chunk_size = CS, .aead = ids[k]};
		int fd = encrypt_to_fd(dek, plain, n, &p);
		size_t fn;
		uint8_t *f = fd_bytes(fd, &fn);
		sl_sld_header *h = NULL;
		assert_int_equal(sl_sld_header_parse(f, fn, &h), SL_OK);
		size_t hl = sl_sld_header_len(h);
		assert_memory_equal(f, "\x89SLD\r\n\x1a\n", 8);
		assert_int_equal(f[14], ids[k]);
		const uint8_t *salt = f + 36;
		assert_memory_equal(salt, sl_sld_header_salt(h), 32);
		uint8_t fk[32], kc[32], mk[32], mac[32], digest[32];
		derive(dek, salt, "seclaunch sld1", fk);
		derive(dek, salt, "seclaunch sld1 key check", kc);
		derive(dek, salt, "seclaunch sld1 header mac", mk);
		assert_memory_equal(f + hl - 64, kc, 32);
		assert_int_equal(sl_hmac_sha256(mk, 32, f, hl - 32, mac), SL_OK);
		assert_memory_equal(f + hl - 32, mac, 32);
		sl_sha256(f, hl, digest);
		sl_aead *a = NULL;
		assert_int_equal(sl_aead_new(ids[k], fk, &a), SL_OK);
		uint8_t *buf = malloc(CS + 16);
		for (uint64_t i = 0; i < 3; i++) {
			size_t clen = i == 2 ? 777 : CS;
			const uint8_t *c = f + hl + i * (CS + 16);
			uint8_t nonce[24] = {0}, aad[41];
			size_t nl = sl_aead_nonce_len(ids[k]);
			nonce[nl - 1] = (uint8_t)i;
			memcpy(aad, digest, 32);
			memset(aad + 32, 0, 8);
			aad[39] = (uint8_t)i;
			for (int flag = 0; flag <= 1; flag++) {
				bool right = (flag == 1) == (i == 2);
				aad[40] = (uint8_t)flag;
				sl_err rc = sl_aead_open(a, nonce, aad, 41, c, clen, c + clen, buf);
				assert_int_equal(rc, right ? SL_OK : SL_E_INTEGRITY);
				if (right)
					assert_memory_equal(buf, plain + i * CS, clen);
			}
		}
		free(buf);
		sl_aead_free(a);
		sl_sld_header_free(h);
		free(f);
		free(plain);
		close(fd);
		sl_secret_free(dek);
	}
}

static void test_header_from_other_file(void **state)
{
	(void)state;
	struct file a, bf;
	make_file(&a, 2, 5);
	/* the same key, same size, another file */
	bf.dek = a.dek;
	bf.plain_n = a.plain_n;
	bf.plain = random_bytes(bf.plain_n);
	sl_sld_encrypt_params p = {.dataset_id = "tamper", .chunk_size = CS};
	int fd = encrypt_to_fd(a.dek, bf.plain, bf.plain_n, &p);
	bf.bytes = fd_bytes(fd, &bf.n);
	close(fd);
	assert_int_equal(a.n, bf.n);
	uint8_t *mix = malloc(a.n);
	memcpy(mix, bf.bytes, a.hl);
	memcpy(mix + a.hl, a.bytes + a.hl, a.n - a.hl);
	expect_decrypt(mix, a.n, a.dek, 2, SL_E_INTEGRITY, "chunk 0 of 3", 0);
	free(mix);
	free(bf.bytes);
	free(bf.plain);
	free_file(&a);
}

static void test_sink_error_stops(void **state)
{
	(void)state;
	struct file f;
	make_file(&f, 6, 1);
	int fd = memfd_with(f.bytes, f.n);
	for (unsigned t = 1; t <= 4; t *= 2) {
		struct collect c = {.buf = malloc(f.n), .cap = f.n, .fail_at = 3};
		assert_int_equal(decrypt_all(fd, f.dek, t, &c), SL_E_IO);
		assert_non_null(strstr(sl_err_detail(), "sink refused chunk 3"));
		assert_int_equal(c.next_index, 3);
		free(c.buf);
	}
	close(fd);
	free_file(&f);
}

/* ---- output files ----------------------------------------------------- */

static size_t dir_entries(const char *dir)
{
	size_t n = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.' || strncmp(e->d_name, ".seclaunch", 10) == 0;
	closedir(d);
	return n;
}

static void test_outfile(void **state)
{
	(void)state;
	char dir[] = "/tmp/sld-outfile-XXXXXX", path[256];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/out.bin", dir);

	sl_sld_outfile *o = NULL;
	assert_int_equal(sl_sld_outfile_open(path, false, &o), SL_OK);
	assert_int_equal(sl_write_all(sl_sld_outfile_fd(o), "abc", 3, "o"), SL_OK);
	sl_sld_outfile_free(o); /* not committed: nothing appears */
	assert_int_equal(dir_entries(dir), 0);

	assert_int_equal(sl_sld_outfile_open(path, false, &o), SL_OK);
	assert_int_equal(sl_write_all(sl_sld_outfile_fd(o), "abc", 3, "o"), SL_OK);
	assert_int_equal(sl_sld_outfile_commit(o), SL_OK);
	sl_sld_outfile_free(o);
	assert_int_equal(dir_entries(dir), 1);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 3);
	assert_int_equal(st.st_mode & 0777, 0600);

	assert_int_equal(sl_sld_outfile_open(path, false, &o), SL_E_EXISTS);
	assert_non_null(strstr(sl_err_detail(), "already exists"));

	/* appears between open and commit: still not clobbered */
	char path2[256];
	snprintf(path2, sizeof(path2), "%s/late.bin", dir);
	assert_int_equal(sl_sld_outfile_open(path2, false, &o), SL_OK);
	int late = open(path2, O_CREAT | O_WRONLY, 0600);
	assert_true(late >= 0);
	close(late);
	assert_int_equal(sl_sld_outfile_commit(o), SL_E_EXISTS);
	sl_sld_outfile_free(o);
	unlink(path2);

	assert_int_equal(sl_sld_outfile_open(path, true, &o), SL_OK);
	assert_int_equal(sl_write_all(sl_sld_outfile_fd(o), "hello", 5, "o"), SL_OK);
	assert_int_equal(sl_sld_outfile_commit(o), SL_OK);
	sl_sld_outfile_free(o);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 5);
	assert_int_equal(dir_entries(dir), 1);

	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trips),
	    cmocka_unit_test(test_many_chunks),
	    cmocka_unit_test(test_default_chunk_and_threads),
	    cmocka_unit_test(test_random_access),
	    cmocka_unit_test(test_kms_key_reference),
	    cmocka_unit_test(test_encrypt_bad_params),
	    cmocka_unit_test(test_header_bad_inputs),
	    cmocka_unit_test(test_header_extensions),
	    cmocka_unit_test(test_wrong_key_and_header_mac),
	    cmocka_unit_test(test_chunk_tamper),
	    cmocka_unit_test(test_spec_conformance),
	    cmocka_unit_test(test_header_from_other_file),
	    cmocka_unit_test(test_sink_error_stops),
	    cmocka_unit_test(test_outfile),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
