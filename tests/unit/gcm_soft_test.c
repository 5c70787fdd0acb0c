/* The GPU kernel's AES-256-GCM arithmetic, compiled for the CPU
 * (crypto/gcm_arith.h through seclaunch/gcm_soft.h), against OpenSSL: the
 * NIST GCM vectors the repository uses, random lengths across the GHASH
 * segment boundaries, and SLD files made by sl_sld_encrypt (the code behind
 * `seclaunch encrypt`) decrypted chunk batch by chunk batch as the kernel does,
 * with tampered, reordered and truncated chunks refused and zeroed. */
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
#include <openssl/evp.h>

#include "seclaunch/crypto.h"
#include "seclaunch/gcm_soft.h"
#include "seclaunch/sld.h"
#include "seclaunch/util.h"

#include "sld_fixture.h"
#include "testlib.h"

static uint8_t *unhex(const char *h, size_t *n)
{
	*n = strlen(h) / 2;
	uint8_t *p = malloc(*n + 1);
	assert_non_null(p);
	for (size_t i = 0; i < *n; i++)
		assert_int_equal(sscanf(h + 2 * i, "%2hhx", &p[i]), 1);
	return p;
}

/* OpenSSL's AES-256-GCM seal with a 96-bit nonce. */
static void ossl_seal(const uint8_t key[32], const uint8_t nonce[12], const uint8_t *aad,
                      size_t aad_len, const uint8_t *pt, size_t len, uint8_t *ct, uint8_t tag[16])
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int n = 0;
	assert_non_null(c);
	assert_int_equal(EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, nonce), 1);
	if (aad_len > 0)
		assert_int_equal(EVP_EncryptUpdate(c, NULL, &n, aad, (int)aad_len), 1);
	if (len > 0)
		assert_int_equal(EVP_EncryptUpdate(c, ct, &n, pt, (int)len), 1);
	assert_int_equal(EVP_EncryptFinal_ex(c, ct + len, &n), 1);
	assert_int_equal(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag), 1);
	EVP_CIPHER_CTX_free(c);
}

/* ---- NIST vectors ------------------------------------------------------ */
struct kat {
	const char *name, *key, *nonce, *pt, *aad, *ct, *tag;
};

static const struct kat kats[] = {
    /* gcmEncryptExtIV256.rsp, the four of tests/unit/crypto_test.c */
    {"pt0 aad0", "b52c505a37d78eda5dd34f20c22540ea1b58963cf8e5bf8ffa85f9f2492505b4",
     "516c33929df5a3284ff463d7", "", "", "", "bdc1ac884d332457a1d2664f168c76f0"},
    {"pt128 aad0", "31bdadd96698c204aa9ce1448ea94ae1fb4a9a0b3c9d773b51bb1822666b8f22",
     "0d18e06c7c725ac9e362e1ce", "2db5168e932556f8089a0622981d017d", "",
     "fa4362189661d163fcd6a56d8bf0405a", "d636ac1bbedd5cc3ee727dc2ab4a9489"},
    {"pt128 aad128", "92e11dcdaa866f5ce790fd24501f92509aacf4cb8b1339d50c9c1240935dd08b",
     "ac93a1a6145299bde902f21a", "2d71bcfa914e4ac045b2aa60955fad24",
     "1e0889016f67601c8ebea4943bc23ad6", "8995ae2e6df3dbf96fac7b7137bae67f",
     "eca5aa77d51d4a0a14d9c51e1da474ab"},
    {"pt128 aad0 #1", "460fc864972261c2560e1eb88761ff1c992b982497bd2ac36c04071cbb8e5d99",
     "8a4a16b9e210eb68bcb6f58d", "99e4e926ffe927f691893fb79a96b067", "",
     "133fc15751621b5f325c7ff71ce08324", "ec4e87e0cf74a13618d0b68636ba9fa7"},
    /* the GCM specification's AES-256 test cases 14 and 16 (NIST's GCM page) */
    {"spec tc14", "0000000000000000000000000000000000000000000000000000000000000000",
     "000000000000000000000000", "00000000000000000000000000000000", "",
     "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"},
    {"spec tc16", "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
     "cafebabefacedbaddecaf888",
     "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e24"
     "49a6b525b16aedf5aa0de657ba637b39",
     "feedfacedeadbeeffeedfacedeadbeefabaddad2",
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b10"
     "56828838c5f61e6393ba7a0abcc9f662",
     "76fc6ece0f4e1768cddf8853bb2d551b"},
};

static void test_nist_vectors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(kats) / sizeof(kats[0]); i++) {
		const struct kat *k = &kats[i];
		size_t kl, nl, pl, al, cl, tl;
		uint8_t *key = unhex(k->key, &kl), *nonce = unhex(k->nonce, &nl);
		uint8_t *pt = unhex(k->pt, &pl), *aad = unhex(k->aad, &al);
		uint8_t *ct = unhex(k->ct, &cl), *tag = unhex(k->tag, &tl);
		uint8_t got[128], gtag[16], otag[16], out[128];
		assert_true(kl == 32 && nl == 12 && tl == 16 && cl == pl && pl <= sizeof(got));
		sl_gcm_soft_seal(key, nonce, aad, al, pt, pl, got, gtag);
		if (!sl_ct_eq(got, ct, cl) || !sl_ct_eq(gtag, tag, 16))
			fail_msg("%s: the kernel arithmetic disagrees with NIST", k->name);
		ossl_seal(key, nonce, aad, al, pt, pl, out, otag);
		assert_memory_equal(otag, tag, 16); /* and OpenSSL agrees */
		assert_int_equal(sl_gcm_soft_open(key, nonce, aad, al, ct, cl, tag, out), SL_OK);
		assert_memory_equal(out, pt, pl);
		tag[15] ^= 1;
		memset(out, 0xa5, sizeof(out));
		assert_int_equal(sl_gcm_soft_open(key, nonce, aad, al, ct, cl, tag, out),
		                 SL_E_INTEGRITY);
		for (size_t j = 0; j < cl; j++)
			assert_int_equal(out[j], 0);
		free(key), free(nonce), free(pt), free(aad), free(ct), free(tag);
	}
}

/* Random keys, nonces and lengths, across 16-byte and GHASH-segment
 * (SLG_SEG_BLOCKS x 16 bytes) boundaries, against OpenSSL both ways. */
static void test_random_vs_openssl(void **state)
{
	(void)state;
	static const size_t lens[] = {0,    1,    15,   16,   17,   31,   33,    1000,
	                              1008, 1024, 1025, 2047, 2048, 4096, 65536, 100003};
	static const size_t aads[] = {0, 1, 16, 41, 70};
	uint8_t key[32], nonce[12], *pt = malloc(100003), *ct = malloc(100003 + 16),
	                            *mine = malloc(100003 + 16), aad[70], t1[16], t2[16];
	assert_true(pt && ct && mine);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t j = 0; j < sizeof(aads) / sizeof(aads[0]); j++) {
			size_t n = lens[i], a = aads[j];
			sl_random(key, 32), sl_random(nonce, 12), sl_random(aad, sizeof(aad));
			sl_random(pt, n);
			ossl_seal(key, nonce, aad, a, pt, n, ct, t1);
			sl_gcm_soft_seal(key, nonce, aad, a, pt, n, mine, t2);
			if (!sl_ct_eq(ct, mine, n) || !sl_ct_eq(t1, t2, 16))
				fail_msg("len %zu aad %zu: differs from OpenSSL", n, a);
			assert_int_equal(sl_gcm_soft_open(key, nonce, aad, a, ct, n, t1, mine),
			                 SL_OK);
			assert_memory_equal(mine, pt, n);
		}
	free(pt), free(ct), free(mine);
}

/* ---- SLD files --------------------------------------------------------- */
struct sld_case {
	uint8_t *plain, *file;
	size_t n, flen, hlen;
	uint32_t cs;
	uint64_t count;
	uint8_t key[32], digest[32];
};

static void sld_make(struct sld_case *c, size_t n)
{
	sl_secret *dek = new_dek(), *fk = NULL;
	sl_sld_encrypt_params p = {.dataset_id = "gpu-test", .chunk_size = CS, .threads = 2};
	sl_sld_reader *r = NULL;
	memset(c, 0, sizeof(*c));
	c->n = n;
	c->plain = random_bytes(n);
	int fd = encrypt_to_fd(dek, c->plain, n, &p);
	c->file = fd_bytes(fd, &c->flen);
	assert_int_equal(sl_sld_open(fd, "gpu.sld", dek, &r), SL_OK);
	const sl_sld_header *h = sl_sld_reader_header(r);
	c->hlen = sl_sld_header_len(h);
	c->cs = sl_sld_header_chunk_size(h);
	c->count = sl_sld_header_chunk_count(h);
	sl_sld_header_digest(h, c->digest);
	assert_int_equal(sl_sld_export_file_key(r, &fk), SL_OK);
	assert_int_equal(sl_secret_len(fk), 32);
	memcpy(c->key, sl_secret_data(fk), 32);
	sl_secret_free(fk);
	sl_sld_close(r);
	sl_secret_free(dek);
	close(fd);
}

static void sld_free(struct sld_case *c)
{
	free(c->plain), free(c->file);
}

static uint32_t chunk_len(const struct sld_case *c, uint64_t i)
{
	return i + 1 < c->count ? c->cs : (uint32_t)(c->n - (c->count - 1) * (uint64_t)c->cs);
}

/* Decrypts the whole file in batches of `per` chunks; the result of the
 * last failing batch is returned, dst and ok filled throughout. */
static sl_err sld_run(const struct sld_case *c, uint64_t per, uint8_t *dst, uint32_t *ok)
{
	sl_err rc = SL_OK;
	for (uint64_t first = 0; first < c->count; first += per) {
		uint32_t k = (uint32_t)(c->count - first < per ? c->count - first : per);
		uint64_t last = first + k - 1;
		sl_err r = sl_gcm_soft_sld(
		    c->key, c->digest, first, k, c->cs, chunk_len(c, last), last + 1 == c->count,
		    c->file + c->hlen + first * ((uint64_t)c->cs + 16), dst + first * c->cs, ok);
		if (r != SL_OK)
			rc = r;
	}
	return rc;
}

static void test_sld_files(void **state)
{
	(void)state;
	static const size_t sizes[] = {0, 1, 17, CS - 1, CS, CS + 1, 3 * CS + 17};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct sld_case c;
		sld_make(&c, sizes[i]);
		for (uint64_t per = 1; per <= 4; per += 3) {
			uint8_t *dst = malloc(c.count * c.cs);
			uint32_t *ok = calloc(c.count, sizeof(*ok));
			assert_true(dst && ok);
			assert_int_equal(sld_run(&c, per, dst, ok), SL_OK);
			assert_memory_equal(dst, c.plain, c.n);
			for (uint64_t k = 0; k < c.count; k++)
				assert_int_equal(ok[k], 1);
			free(dst), free(ok);
		}
		sld_free(&c);
	}
}

/* A flipped ciphertext or tag byte, two chunks swapped, a wrong key, and a
 * file cut after a chunk boundary: the chunk fails, its plaintext is zeros,
 * the others are unaffected. */
static void test_sld_tamper(void **state)
{
	(void)state;
	struct sld_case c;
	sld_make(&c, 3 * CS + 17);
	size_t stride = (size_t)c.cs + 16;
	uint8_t *dst = malloc(c.count * c.cs);
	uint32_t *ok = calloc(c.count, sizeof(*ok));
	assert_true(dst && ok);

	/* ciphertext byte of chunk 1 */
	c.file[c.hlen + stride + 100] ^= 0x01;
	memset(dst, 0xa5, c.count * c.cs);
	expect_fail(sld_run(&c, 4, dst, ok), SL_E_INTEGRITY, "chunk 1: authentication failed");
	assert_int_equal(ok[0], 1), assert_int_equal(ok[1], 0), assert_int_equal(ok[2], 1);
	assert_memory_equal(dst, c.plain, c.cs);
	for (size_t k = 0; k < c.cs; k++)
		assert_int_equal(dst[c.cs + k], 0);
	assert_memory_equal(dst + 2 * (size_t)c.cs, c.plain + 2 * (size_t)c.cs, c.cs);
	c.file[c.hlen + stride + 100] ^= 0x01;

	/* tag byte of the last chunk */
	c.file[c.hlen + 3 * stride + 17 + 15] ^= 0x80;
	expect_fail(sld_run(&c, 1, dst, ok), SL_E_INTEGRITY, "chunk 3");
	c.file[c.hlen + 3 * stride + 17 + 15] ^= 0x80;

	/* chunks 0 and 1 swapped */
	uint8_t *tmp = malloc(stride);
	assert_non_null(tmp);
	memcpy(tmp, c.file + c.hlen, stride);
	memcpy(c.file + c.hlen, c.file + c.hlen + stride, stride);
	memcpy(c.file + c.hlen + stride, tmp, stride);
	expect_fail(sld_run(&c, 4, dst, ok), SL_E_INTEGRITY, "chunk 0");
	assert_int_equal(ok[0], 0), assert_int_equal(ok[1], 0);
	memcpy(c.file + c.hlen + stride, c.file + c.hlen, stride);
	memcpy(c.file + c.hlen, tmp, stride);
	free(tmp);

	/* truncation: chunk 2 presented as the final one */
	expect_fail(
	    sl_gcm_soft_sld(c.key, c.digest, 0, 3, c.cs, c.cs, true, c.file + c.hlen, dst, ok),
	    SL_E_INTEGRITY, "chunk 2");

	/* wrong key */
	c.key[0] ^= 1;
	expect_fail(sld_run(&c, 4, dst, ok), SL_E_INTEGRITY, "chunk 0");
	for (size_t k = 0; k < c.n; k++)
		assert_int_equal(dst[k], 0);
	c.key[0] ^= 1;

	/* and whole again */
	assert_int_equal(sld_run(&c, 2, dst, ok), SL_OK);
	assert_memory_equal(dst, c.plain, c.n);
	free(dst), free(ok);
	sld_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nist_vectors),
	    cmocka_unit_test(test_random_vs_openssl),
	    cmocka_unit_test(test_sld_files),
	    cmocka_unit_test(test_sld_tamper),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
