/* SLD v1: round trips over the boundary sizes for both AEADs and several
 * thread counts, random access, bad parameters, wrong key, header and chunk
 * tampering, truncation and extension, sinks, output files.
 * (sld_header_test.c: header parsing and the format document.) */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "seclaunch/crypto.h"
#include "seclaunch/sld.h"
#include "seclaunch/util.h"

#include "../../crypto/sld_internal.h" /* struct sl_sld_bufs: the kept buffers */
#include "sld_fixture.h"
#include "testlib.h"

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

/* The fd's bytes in memory of their own (exactly n bytes, so that a read
 * past the end is caught by ASan), for sl_sld_open_mem. */
static uint8_t *mem_copy(int fd, size_t *n)
{
	uint8_t *b = fd_bytes(fd, n);
	uint8_t *m = malloc(*n > 0 ? *n : 1);
	assert_non_null(m);
	if (*n > 0)
		memcpy(m, b, *n);
	free(b);
	return m;
}

static sl_err decrypt_all_from(bool mem, int fd, sl_secret *dek, unsigned threads,
                               struct collect *c)
{
	sl_sld_reader *r = NULL;
	size_t n = 0;
	uint8_t *m = mem ? mem_copy(fd, &n) : NULL;
	sl_err rc =
	    mem ? sl_sld_open_mem(m, n, "test.sld", dek, &r) : sl_sld_open(fd, "test.sld", dek, &r);
	if (rc == SL_OK)
		rc = sl_sld_decrypt(r, threads, collect_sink, c, NULL, NULL);
	sl_sld_close(r);
	free(m);
	return rc;
}

static sl_err decrypt_all(int fd, sl_secret *dek, unsigned threads, struct collect *c)
{
	return decrypt_all_from(false, fd, dek, threads, c);
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

	/* from the file, then from memory: the same plaintext */
	for (int mem = 0; mem <= 1; mem++) {
		struct collect c = {.buf = malloc(n + 1), .cap = n, .fail_at = UINT64_MAX};
		assert_int_equal(decrypt_all_from(mem, fd, dek, threads, &c), SL_OK);
		assert_int_equal(c.len, n);
		assert_int_equal(c.next_index, chunks);
		if (n > 0)
			assert_memory_equal(c.buf, plain, n);
		free(c.buf);
	}
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

/* Reading is lenient: a file whose dataset id predates the naming rule
 * (docs/format-sld.md, "Dataset ids") still reads and decrypts; only
 * creating a new one through encrypt or the KMS is refused. */
static void test_pre_rule_ids_still_read(void **state)
{
	(void)state;
	static const char *const old_ids[] = {"sales 2026/EU", "../../etc", "daten-\xc3\xbc",
	                                      "a*b"};
	for (size_t i = 0; i < sizeof(old_ids) / sizeof(old_ids[0]); i++) {
		assert_false(sl_dataset_id_valid(old_ids[i]));
		sl_secret *dek = new_dek();
		uint8_t *plain = random_bytes(1000);
		sl_sld_encrypt_params p = {.dataset_id = old_ids[i], .chunk_size = CS};
		int fd = encrypt_to_fd(dek, plain, 1000, &p);
		sl_sld_header *h = NULL;
		assert_int_equal(sl_sld_header_read_fd(fd, "t", &h), SL_OK);
		assert_string_equal(sl_sld_header_dataset_id(h), old_ids[i]);
		sl_sld_header_free(h);
		struct collect c = {.buf = malloc(1001), .cap = 1000, .fail_at = UINT64_MAX};
		assert_int_equal(decrypt_all(fd, dek, 1, &c), SL_OK);
		assert_int_equal(c.len, 1000);
		assert_memory_equal(c.buf, plain, 1000);
		free(c.buf);
		free(plain);
		close(fd);
		sl_secret_free(dek);
	}
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

/* Decrypts bytes with threads, from a file and from memory; expects want
 * and a detail with needle, the same error word for word from both; the
 * sink must have received exactly `good` chunks, and no byte of a chunk
 * that failed. */
static void expect_decrypt(const uint8_t *bytes, size_t n, sl_secret *dek, unsigned threads,
                           sl_err want, const char *needle, uint64_t good)
{
	int fd = memfd_with(bytes, n);
	char fd_detail[1024];
	for (int mem = 0; mem <= 1; mem++) {
		struct collect c = {.buf = malloc(n + 1), .cap = n, .fail_at = UINT64_MAX};
		expect_fail(decrypt_all_from(mem, fd, dek, threads, &c), want, needle);
		if (!mem)
			snprintf(fd_detail, sizeof(fd_detail), "%s", sl_err_detail());
		else
			assert_string_equal(sl_err_detail(), fd_detail);
		assert_int_equal(c.next_index, good);
		free(c.buf);
	}
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

/* ---- chunk buffers kept from one decryption to the next --------------- */

/* The kept buffers (a slot a small file never used has none) are of the
 * set's size (a chunk and its tag) and hold only zeroes. */
static void expect_kept_zero(const sl_sld_bufs *b, size_t size)
{
	size_t made = 0;
	assert_int_equal(b->size, size);
	for (size_t k = 0; k < b->n; k++) {
		if (b->buf[k] == NULL)
			continue;
		made++;
		assert_int_equal(sl_secret_len(b->buf[k]), size);
		const uint8_t *d = sl_secret_data(b->buf[k]);
		for (size_t j = 0; j < size; j++)
			if (d[j] != 0)
				fail_msg("kept buffer %zu holds a non-zero byte at %zu", k, j);
	}
	assert_true(made > 0);
}

/* Decrypts n bytes (chunk size cs) through bufs; returns the plaintext the
 * sink got, checked against plain when rc is SL_OK. */
static sl_err bufs_round(sl_sld_bufs *bufs, unsigned threads, uint32_t cs, size_t n,
                         uint64_t fail_at, bool tamper)
{
	sl_secret *dek = new_dek();
	uint8_t *plain = random_bytes(n);
	sl_sld_encrypt_params p = {.dataset_id = "unit/kept-bufs", .chunk_size = cs, .threads = 2};
	int fd = encrypt_to_fd(dek, plain, n, &p);
	if (tamper) {
		size_t fn = 0;
		uint8_t *b = fd_bytes(fd, &fn);
		b[fn - 20] ^= 1; /* the last chunk's ciphertext */
		close(fd);
		fd = memfd_with(b, fn);
		free(b);
	}
	struct collect c = {.buf = malloc(n + 1), .cap = n, .fail_at = fail_at};
	sl_sld_reader *r = NULL;
	sl_err rc = sl_sld_open(fd, "kept.sld", dek, &r);
	assert_int_equal(rc, SL_OK);
	rc = sl_sld_decrypt_bufs(r, threads, bufs, collect_sink, &c, NULL, NULL);
	sl_sld_close(r);
	if (rc == SL_OK) {
		assert_int_equal(c.len, n);
		assert_memory_equal(c.buf, plain, n);
	}
	free(c.buf);
	free(plain);
	close(fd);
	sl_secret_free(dek);
	return rc;
}

static void test_kept_bufs(void **state)
{
	(void)state;
	const unsigned threads[] = {1, 3};
	for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
		sl_sld_bufs *bufs = NULL;
		assert_int_equal(sl_sld_bufs_new(&bufs), SL_OK);
		/* two files, one set: each decrypts right, and between them the
		 * set holds zeroes only */
		assert_int_equal(
		    bufs_round(bufs, threads[t], CS, 9 * (size_t)CS + 77, UINT64_MAX, false),
		    SL_OK);
		expect_kept_zero(bufs, CS + SL_AEAD_TAG_LEN);
		sl_secret *first = bufs->buf[0];
		size_t n = bufs->n;
		assert_int_equal(
		    bufs_round(bufs, threads[t], CS, 5 * (size_t)CS + 1, UINT64_MAX, false), SL_OK);
		expect_kept_zero(bufs, CS + SL_AEAD_TAG_LEN);
		assert_ptr_equal(bufs->buf[0], first); /* made once, not per file */
		assert_int_equal(bufs->n, n);
		/* a file of another chunk size: the set is remade at that size */
		assert_int_equal(
		    bufs_round(bufs, threads[t], 2 * CS, 4 * (size_t)CS + 3, UINT64_MAX, false),
		    SL_OK);
		expect_kept_zero(bufs, 2 * CS + SL_AEAD_TAG_LEN);
		/* a failed decryption (a tampered chunk, a sink that refuses)
		 * leaves no plaintext in the set either */
		expect_fail(bufs_round(bufs, threads[t], 2 * CS, 6 * (size_t)CS, UINT64_MAX, true),
		            SL_E_INTEGRITY, "chunk");
		expect_kept_zero(bufs, 2 * CS + SL_AEAD_TAG_LEN);
		assert_int_equal(bufs_round(bufs, threads[t], 2 * CS, 8 * (size_t)CS, 2, false),
		                 SL_E_IO);
		expect_kept_zero(bufs, 2 * CS + SL_AEAD_TAG_LEN);
		sl_sld_bufs_free(bufs);
	}
	sl_sld_bufs_free(NULL);
}

/* ---- decryption straight into a destination ---------------------------- */

struct into_log {
	uint64_t prepared[256]; /* per chunk: offset + 1 of its prepare call */
	uint64_t next, done_bytes, stop_at;
};

static sl_err log_prepare(void *ctx, uint64_t i, uint64_t off, size_t len)
{
	struct into_log *l = ctx;
	assert_true(i < 256 && l->prepared[i] == 0 && len > 0);
	l->prepared[i] = off + 1; /* each chunk on exactly one worker, once */
	return SL_OK;
}

static sl_err log_done(void *ctx, uint64_t i, uint64_t done_bytes)
{
	struct into_log *l = ctx;
	assert_int_equal(i, l->next); /* strictly in order */
	if (i == l->stop_at)
		return sl_err_set(SL_E_SYSTEM, "stopped at chunk %llu", (unsigned long long)i);
	l->next++;
	l->done_bytes = done_bytes;
	return SL_OK;
}

static bool into_from_mem; /* decrypt_into opens the bytes in memory */

static sl_err decrypt_into(const uint8_t *bytes, size_t n, sl_secret *dek, unsigned threads,
                           uint8_t *dst, size_t dst_len, struct into_log *l)
{
	int fd = memfd_with(bytes, n);
	sl_sld_reader *r = NULL;
	sl_sld_into_ops ops = {.prepare = log_prepare, .done = log_done, .ctx = l};
	sl_err rc = into_from_mem ? sl_sld_open_mem(bytes, n, "into.sld", dek, &r)
	                          : sl_sld_open(fd, "into.sld", dek, &r);
	if (rc == SL_OK)
		rc = sl_sld_decrypt_into(r, threads, dst, dst_len, &ops);
	sl_sld_close(r);
	close(fd);
	return rc;
}

/* Both AEADs, chunks smaller and larger than the read piece, every thread
 * count: the plaintext lands in place, hooks as documented. */
static void test_decrypt_into(void **state)
{
	(void)state;
	const uint32_t chunk[] = {CS, 4u << 20}; /* 4 MiB: read in 1 MiB pieces */
	const size_t sizes[] = {0, 1, 2 * ((size_t)4 << 20) + ((size_t)3 << 19) + 1};
	for (int a = SL_AEAD_AES_256_GCM; a <= SL_AEAD_XCHACHA20_POLY1305; a++)
		for (size_t c = 0; c < 2; c++)
			for (size_t z = 0; z < 3; z++)
				for (unsigned t = 1; t <= 4; t++) {
					sl_secret *dek = new_dek();
					size_t n = sizes[z];
					uint8_t *plain = random_bytes(n), *dst = malloc(n + 1);
					sl_sld_encrypt_params p = {.dataset_id = "into",
					                           .aead = (sl_aead_id)a,
					                           .chunk_size = chunk[c]};
					int fd = encrypt_to_fd(dek, plain, n, &p);
					size_t fn;
					uint8_t *b = fd_bytes(fd, &fn);
					struct into_log l = {.stop_at = UINT64_MAX};
					uint64_t chunks =
					    n == 0 ? 1 : (n + chunk[c] - 1) / chunk[c];
					assert_int_equal(decrypt_into(b, fn, dek, t, dst, n, &l),
					                 SL_OK);
					assert_int_equal(l.next, chunks);
					assert_int_equal(l.done_bytes, n);
					if (n > 0)
						assert_memory_equal(dst, plain, n);
					for (uint64_t i = 0; i < chunks && n > 0; i++)
						assert_int_equal(l.prepared[i], i * chunk[c] + 1);
					/* a destination of another length is refused */
					memset(&l, 0, sizeof(l));
					assert_int_equal(
					    decrypt_into(b, fn, dek, t, dst, n + 1, &l),
					    SL_E_INTERNAL);
					free(b), free(dst), free(plain), close(fd);
					sl_secret_free(dek);
				}
}

/* A chunk altered in its last piece (4 MiB chunks, read in pieces): the
 * error names it and its bytes in the destination are zero; a done hook's
 * error stops the run and is returned. */
static void test_decrypt_into_tamper(void **state)
{
	(void)state;
	const size_t cs = 4u << 20, n = 4 * cs + 1000;
	sl_secret *dek = new_dek();
	uint8_t *plain = random_bytes(n), *dst = malloc(n);
	sl_sld_encrypt_params p = {.dataset_id = "into", .chunk_size = (uint32_t)cs};
	int fd = encrypt_to_fd(dek, plain, n, &p);
	size_t fn, hl = fd_size(fd) - n - 5 * 16;
	uint8_t *b = fd_bytes(fd, &fn);
	for (unsigned t = 1; t <= 4; t *= 2) {
		struct into_log l = {.stop_at = UINT64_MAX};
		b[hl + 2 * (cs + 16) + cs - 5] ^= 0x40; /* chunk 2, its last piece */
		memset(dst, 0xAA, n);
		assert_int_equal(decrypt_into(b, fn, dek, t, dst, n, &l), SL_E_INTEGRITY);
		assert_non_null(strstr(sl_err_detail(), "chunk 2 of 5"));
		assert_int_equal(l.next, 2);
		assert_memory_equal(dst, plain, 2 * cs);
		for (size_t k = 2 * cs; k < 3 * cs; k++)
			assert_int_equal(dst[k], 0);
		b[hl + 2 * (cs + 16) + cs - 5] ^= 0x40;
		l = (struct into_log){.stop_at = 1};
		assert_int_equal(decrypt_into(b, fn, dek, t, dst, n, &l), SL_E_SYSTEM);
		assert_non_null(strstr(sl_err_detail(), "stopped at chunk 1"));
	}
	free(b), free(dst), free(plain), close(fd);
	sl_secret_free(dek);
}

/* ---- decryption from memory (sl_sld_open_mem) ---------------------------- */

static void test_decrypt_into_from_mem(void **state)
{
	into_from_mem = true;
	test_decrypt_into(state);
	test_decrypt_into_tamper(state);
	into_from_mem = false;
}

/* Random access from memory: the plaintext of the fd path; a chunk altered
 * anywhere (first byte, middle, tag) is refused with the fd path's error,
 * and the destination then holds no plaintext: it is wiped (zero), not
 * left with what decryption wrote before the tag was checked. */
static void test_mem_read_chunk(void **state)
{
	(void)state;
	for (int a = SL_AEAD_AES_256_GCM; a <= SL_AEAD_XCHACHA20_POLY1305; a++) {
		struct file f = {.plain_n = 3 * CS + 777};
		f.plain = random_bytes(f.plain_n);
		f.dek = new_dek();
		sl_sld_encrypt_params p = {
		    .dataset_id = "mem", .aead = (sl_aead_id)a, .chunk_size = CS};
		int fd = encrypt_to_fd(f.dek, f.plain, f.plain_n, &p);
		uint8_t *b = mem_copy(fd, &f.n);
		f.hl = f.n - f.plain_n - 4 * 16;
		uint8_t *buf = malloc(CS + 16), *fbuf = malloc(CS + 16);
		for (uint64_t i = 0; i < 4; i++) {
			size_t plen = i == 3 ? 777 : CS, len = 0, off = f.hl + i * (CS + 16);
			sl_sld_reader *r = NULL, *rf = NULL;
			assert_int_equal(sl_sld_open_mem(b, f.n, "mem.sld", f.dek, &r), SL_OK);
			assert_int_equal(sl_sld_read_chunk(r, i, buf, CS + 16, &len), SL_OK);
			assert_int_equal(len, plen);
			assert_memory_equal(buf, f.plain + i * CS, plen);
			const size_t flips[] = {off, off + plen / 2, off + plen + 15};
			for (size_t k = 0; k < 3; k++) {
				b[flips[k]] ^= 0x04;
				int tfd = memfd_with(b, f.n);
				assert_int_equal(sl_sld_open(tfd, "mem.sld", f.dek, &rf), SL_OK);
				memset(fbuf, 0xAA, CS + 16);
				assert_int_equal(sl_sld_read_chunk(rf, i, fbuf, CS + 16, &len),
				                 SL_E_INTEGRITY);
				char fd_detail[512];
				snprintf(fd_detail, sizeof(fd_detail), "%s", sl_err_detail());
				memset(buf, 0xAA, CS + 16);
				assert_int_equal(sl_sld_read_chunk(r, i, buf, CS + 16, &len),
				                 SL_E_INTEGRITY);
				assert_string_equal(sl_err_detail(), fd_detail);
				for (size_t z = 0; z < plen; z++)
					assert_int_equal(buf[z], 0);
				sl_sld_close(rf);
				close(tfd);
				b[flips[k]] ^= 0x04;
			}
			sl_sld_close(r);
		}
		/* a buffer shorter or longer than the header says, and none */
		sl_sld_reader *r = NULL;
		expect_fail(sl_sld_open_mem(b, f.n - 1, "mem.sld", f.dek, &r), SL_E_TRUNCATED,
		            "truncated");
		expect_fail(sl_sld_open_mem(b, f.hl - 1, "mem.sld", f.dek, &r), SL_E_TRUNCATED,
		            "mem.sld");
		/* nothing at all: what an empty file gives */
		int efd = memfd_with(NULL, 0);
		expect_fail(sl_sld_open(efd, "mem.sld", f.dek, &r), SL_E_FORMAT,
		            "mem.sld: not an SLD");
		close(efd);
		expect_fail(sl_sld_open_mem(b, 0, "mem.sld", f.dek, &r), SL_E_FORMAT,
		            "mem.sld: not an SLD");
		expect_fail(sl_sld_open_mem(NULL, 0, "mem.sld", f.dek, &r), SL_E_FORMAT,
		            "mem.sld: not an SLD");
		uint8_t *longer = malloc(f.n + 1);
		memcpy(longer, b, f.n), longer[f.n] = 0;
		expect_fail(sl_sld_open_mem(longer, f.n + 1, "mem.sld", f.dek, &r), SL_E_INTEGRITY,
		            "extended");
		free(longer);
		free(buf), free(fbuf), free(b);
		close(fd);
		free(f.plain);
		sl_secret_free(f.dek);
	}
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
	char dir[64], path[256];
	tl_tmpdir(dir, sizeof(dir), "sld-outfile");
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
	assert_int_equal(tl_rmtree(dir), 0);
}

/* ---- decryption from a mapping, under a read lease ---------------------- */

/* bytes written to a file of their own in a fresh folder; *fd is it open
 * read-only. False when the folder's filesystem is not one the reader maps
 * (the tests then say so and check nothing). */
static bool lease_file(const uint8_t *bytes, size_t n, char *dir, size_t dn, char *path, size_t pn,
                       int *fd)
{
	struct statfs sf;
	tl_tmpdir(dir, dn, "sldmap");
	snprintf(path, pn, "%s/f.sld", dir);
	int w = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(w >= 0);
	assert_int_equal(write(w, bytes, n), (ssize_t)n);
	close(w);
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(*fd >= 0);
	assert_int_equal(statfs(dir, &sf), 0);
	switch ((unsigned long)sf.f_type) {
	case 0xEF53:
	case 0x58465342:
	case 0x9123683E:
	case 0x01021994:
		return true;
	default:
		print_message("  (%s is not ext4, xfs, btrfs or tmpfs: nothing mapped)\n", dir);
		return false;
	}
}

/* Whether /proc/locks shows a lease on fd's file in this state ("ACTIVE",
 * "BREAKING"). The reader holds its lease on a description of its own. */
static bool lease_state(int fd, const char *state)
{
	struct stat st;
	char line[256], ino[40];
	bool found = false;
	FILE *f = fopen("/proc/locks", "r");
	assert_int_equal(fstat(fd, &st), 0);
	snprintf(ino, sizeof(ino), ":%lu ", (unsigned long)st.st_ino);
	assert_non_null(f);
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, "LEASE") != NULL && strstr(line, state) != NULL &&
		        strstr(line, ino) != NULL;
	fclose(f);
	return found;
}

static void lease_file_free(char *dir, int fd)
{
	close(fd);
	assert_int_equal(tl_rmtree(dir), 0);
}

/* A read-only descriptor of a file nobody writes: the reader maps it; the
 * plaintext is the file's, and tampering is caught and named as on pread. */
static void test_mapped_decrypt(void **state)
{
	(void)state;
	struct file f;
	char dir[256], path[300];
	int fd;
	const size_t stride = CS + 16;
	make_file(&f, 4, 100); /* 5 chunks */
	uint8_t *b = malloc(f.n);
	for (int v = 0; v < 3; v++) {
		memcpy(b, f.bytes, f.n);
		if (v == 1)
			b[f.hl + 2 * stride + 7] ^= 0x10; /* chunk 2's data */
		if (v == 2)
			b[f.hl + 4 * stride + 100 + 3] ^= 0x01; /* the last tag */
		bool fs = lease_file(b, f.n, dir, sizeof(dir), path, sizeof(path), &fd);
		for (unsigned t = 1; t <= 2; t++) {
			sl_sld_reader *r = NULL;
			struct collect c = {.buf = malloc(f.n), .cap = f.n, .fail_at = UINT64_MAX};
			assert_int_equal(sl_sld_open(fd, "m.sld", f.dek, &r), SL_OK);
			sl_err rc = sl_sld_decrypt(r, t, collect_sink, &c, NULL, NULL);
			if (v == 0) {
				assert_int_equal(rc, SL_OK);
				assert_int_equal(c.len, f.plain_n);
				assert_memory_equal(c.buf, f.plain, f.plain_n);
			} else {
				expect_fail(rc, SL_E_INTEGRITY,
				            v == 1 ? "chunk 2 of 5" : "chunk 4 of 5");
				assert_int_equal(c.next_index, v == 1 ? 2 : 4);
			}
			/* read from the mapping to the end: nothing broke the lease;
			 * and it was given back when the decryption ended */
			assert_int_equal(sl_sld_reader_mapped(r), fs);
			assert_false(lease_state(fd, "LEASE"));
			sl_sld_close(r);
			free(c.buf);
		}
		lease_file_free(dir, fd);
	}
	free(b);
	free_file(&f);
}

static void urg_handler(int sig)
{
	(void)sig;
}

/* No lease, so pread: the file open for writing somewhere (here by this
 * very process), a descriptor that is not read-only, a SIGURG handler. */
static void test_mapped_refused(void **state)
{
	(void)state;
	struct file f;
	char dir[256], path[300];
	int fd;
	make_file(&f, 2, 9);
	bool fs = lease_file(f.bytes, f.n, dir, sizeof(dir), path, sizeof(path), &fd);
	int wfd = open(path, O_WRONLY | O_CLOEXEC), rwfd = open(path, O_RDWR | O_CLOEXEC);
	assert_true(wfd >= 0 && rwfd >= 0);
	struct sigaction sa = {.sa_handler = urg_handler}, old;
	for (int k = 0; k < 3; k++) {
		sl_sld_reader *r = NULL;
		struct collect c = {.buf = malloc(f.n), .cap = f.n, .fail_at = UINT64_MAX};
		if (k == 1)
			close(wfd);
		if (k == 2) {
			sigemptyset(&sa.sa_mask);
			assert_int_equal(sigaction(SIGURG, &sa, &old), 0);
		}
		/* k == 1: read-write, the only writer being itself */
		assert_int_equal(sl_sld_open(k == 1 ? rwfd : fd, "m.sld", f.dek, &r), SL_OK);
		assert_int_equal(sl_sld_decrypt(r, 2, collect_sink, &c, NULL, NULL), SL_OK);
		assert_false(sl_sld_reader_mapped(r));
		assert_memory_equal(c.buf, f.plain, f.plain_n);
		sl_sld_close(r);
		free(c.buf);
	}
	assert_int_equal(sigaction(SIGURG, &old, NULL), 0);
	/* and once nothing writes and nothing handles SIGURG, it maps */
	close(rwfd);
	sl_sld_reader *r = NULL;
	struct collect c = {.buf = malloc(f.n), .cap = f.n, .fail_at = UINT64_MAX};
	assert_int_equal(sl_sld_open(fd, "m.sld", f.dek, &r), SL_OK);
	assert_int_equal(sl_sld_decrypt(r, 2, collect_sink, &c, NULL, NULL), SL_OK);
	assert_int_equal(sl_sld_reader_mapped(r), fs);
	sl_sld_close(r);
	free(c.buf);
	lease_file_free(dir, fd);
	free_file(&f);
}

/* The attack a mapping invites: a writer changing ciphertext while it is
 * decrypted. Its open for writing breaks the lease; the reader notices at
 * the next chunk, releases the lease (the writer goes on at once rather
 * than after lease-break-time) and reads with pread from then on, so the
 * writer's change to a later chunk is caught by that chunk's tag. */
struct breaker {
	struct collect c;
	const char *path;
	int fd;
	size_t flip_at;
	pid_t child;
	double child_ms;
	struct timespec t0;
};

static sl_err breaker_sink(void *ctx, uint64_t i, const uint8_t *plain, size_t len)
{
	struct breaker *b = ctx;
	if (i == 0) /* the decryption holds the lease */
		assert_true(lease_state(b->fd, "ACTIVE"));
	if (i == 1) {
		b->child = fork();
		assert_true(b->child >= 0);
		if (b->child == 0) {
			int w = open(b->path, O_RDWR | O_CLOEXEC); /* blocks on the lease */
			uint8_t x = 0;
			if (w < 0 || pread(w, &x, 1, (off_t)b->flip_at) != 1)
				_exit(2);
			x ^= 0x40;
			_exit(pwrite(w, &x, 1, (off_t)b->flip_at) == 1 ? 0 : 3);
		}
		clock_gettime(CLOCK_MONOTONIC, &b->t0);
		/* until the child's open is waiting on the lease */
		for (int k = 0; k < 5000 && !lease_state(b->fd, "BREAKING"); k++)
			usleep(1000);
		assert_true(lease_state(b->fd, "BREAKING"));
	}
	if (i == 2) {
		/* chunk 2 was opened after the break: the lease is released and
		 * the writer has finished its write before chunk 3 is read */
		int st = 0;
		struct timespec t1;
		assert_int_equal(waitpid(b->child, &st, 0), b->child);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		b->child_ms = (double)(t1.tv_sec - b->t0.tv_sec) * 1e3 +
		              (double)(t1.tv_nsec - b->t0.tv_nsec) / 1e6;
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	return collect_sink(&b->c, i, plain, len);
}

static void test_mapped_writer_breaks_lease(void **state)
{
	(void)state;
	struct file f;
	char dir[256], path[300];
	int fd;
	make_file(&f, 5, 0); /* 5 chunks */
	if (!lease_file(f.bytes, f.n, dir, sizeof(dir), path, sizeof(path), &fd)) {
		lease_file_free(dir, fd);
		free_file(&f);
		return;
	}
	struct breaker b = {.c = {.buf = malloc(f.n), .cap = f.n, .fail_at = UINT64_MAX},
	                    .path = path,
	                    .fd = fd,
	                    .flip_at = f.hl + 3 * (CS + 16) + 5};
	sl_sld_reader *r = NULL;
	assert_int_equal(sl_sld_open(fd, "m.sld", f.dek, &r), SL_OK);
	/* one thread: chunk i+1 is opened only after chunk i reached the sink */
	expect_fail(sl_sld_decrypt(r, 1, breaker_sink, &b, NULL, NULL), SL_E_INTEGRITY,
	            "chunk 3 of 5");
	assert_int_equal(b.c.next_index, 3);
	assert_memory_equal(b.c.buf, f.plain, 3 * (size_t)CS); /* the chunks before it */
	assert_false(sl_sld_reader_mapped(r));
	/* the writer waited for about one chunk, not lease-break-time (45 s) */
	assert_true(b.child_ms < 10000.0);
	assert_false(lease_state(fd, "LEASE"));
	sl_sld_close(r);
	free(b.c.buf);
	lease_file_free(dir, fd);
	free_file(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trips),
	    cmocka_unit_test(test_pre_rule_ids_still_read),
	    cmocka_unit_test(test_many_chunks),
	    cmocka_unit_test(test_default_chunk_and_threads),
	    cmocka_unit_test(test_random_access),
	    cmocka_unit_test(test_encrypt_bad_params),
	    cmocka_unit_test(test_wrong_key_and_header_mac),
	    cmocka_unit_test(test_chunk_tamper),
	    cmocka_unit_test(test_header_from_other_file),
	    cmocka_unit_test(test_sink_error_stops),
	    cmocka_unit_test(test_kept_bufs),
	    cmocka_unit_test(test_decrypt_into),
	    cmocka_unit_test(test_decrypt_into_tamper),
	    cmocka_unit_test(test_decrypt_into_from_mem),
	    cmocka_unit_test(test_mem_read_chunk),
	    cmocka_unit_test(test_outfile),
	    cmocka_unit_test(test_mapped_decrypt),
	    cmocka_unit_test(test_mapped_refused),
	    cmocka_unit_test(test_mapped_writer_breaks_lease),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
