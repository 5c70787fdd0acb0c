/* SLD v1 header: parsing of bad input field by field, extensions, the KMS
 * key reference and JSON view, and an independent reading of the format
 * document (key derivation, key check, header MAC, nonces, AAD, final flag). */
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

#include "sld_fixture.h"
#include "testlib.h"

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
	expect_fail(sl_sld_header_parse(p, n, &h), want, needle);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kms_key_reference),
	    cmocka_unit_test(test_header_bad_inputs),
	    cmocka_unit_test(test_header_extensions),
	    cmocka_unit_test(test_spec_conformance),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
