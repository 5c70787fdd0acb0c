/* Known-answer tests for HKDF-SHA256 (RFC 5869 A.1-A.3), AES-256-GCM (NIST
 * CAVP gcmEncryptExtIV256, 96-bit IV) and XChaCha20-Poly1305
 * (draft-irtf-cfrg-xchacha-03 A.3.1), with tamper cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "seclaunch/crypto.h"
#include "seclaunch/sealbox.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = strlen(hex) / 2;
	assert_true(n <= cap);
	if (n > 0)
		assert_int_equal(sl_hex_decode(hex, out, n, "test vector"), SL_OK);
	return n;
}

static void assert_hex(const uint8_t *got, size_t len, const char *want)
{
	char buf[1024];
	assert_true(len * 2 < sizeof(buf));
	sl_hex_encode(got, len, buf);
	assert_string_equal(buf, want);
}

static int setup(void **state)
{
	(void)state;
	return sl_crypto_init() == SL_OK ? 0 : -1;
}

/* ---- HKDF ------------------------------------------------------------- */

static void seq(uint8_t *p, size_t n, uint8_t start)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(start + i);
}

static void test_hkdf_rfc5869_1(void **state)
{
	(void)state;
	uint8_t ikm[22], salt[13], info[10], okm[42];
	memset(ikm, 0x0b, sizeof(ikm));
	seq(salt, sizeof(salt), 0x00);
	seq(info, sizeof(info), 0xf0);
	assert_int_equal(sl_hkdf_sha256(ikm, sizeof(ikm), salt, sizeof(salt), info, sizeof(info),
	                                okm, sizeof(okm)),
	                 SL_OK);
	assert_hex(okm, sizeof(okm),
	           "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b8"
	           "87185865");
}

static void test_hkdf_rfc5869_2(void **state)
{
	(void)state;
	uint8_t ikm[80], salt[80], info[80], okm[82];
	seq(ikm, 80, 0x00);
	seq(salt, 80, 0x60);
	seq(info, 80, 0xb0);
	assert_int_equal(sl_hkdf_sha256(ikm, 80, salt, 80, info, 80, okm, sizeof(okm)), SL_OK);
	assert_hex(okm, sizeof(okm),
	           "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7"
	           "827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5"
	           "c1f3434f1d87");
}

static void test_hkdf_rfc5869_3(void **state)
{
	(void)state;
	uint8_t ikm[22], okm[42];
	memset(ikm, 0x0b, sizeof(ikm));
	assert_int_equal(sl_hkdf_sha256(ikm, sizeof(ikm), NULL, 0, NULL, 0, okm, sizeof(okm)),
	                 SL_OK);
	assert_hex(okm, sizeof(okm),
	           "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4"
	           "b61a96c8");
}

static void test_hkdf_bad_length(void **state)
{
	(void)state;
	uint8_t ikm[32] = {0}, okm[1];
	assert_int_equal(sl_hkdf_sha256(ikm, sizeof(ikm), NULL, 0, NULL, 0, okm, 0), SL_E_INTERNAL);
	assert_int_equal(sl_hkdf_sha256(ikm, sizeof(ikm), NULL, 0, NULL, 0, okm, 255 * 32 + 1),
	                 SL_E_INTERNAL);
}

/* RFC 4231 test case 2 ("Jefe"). */
static void test_hmac_rfc4231_2(void **state)
{
	(void)state;
	uint8_t mac[32];
	const char *data = "what do ya want for nothing?";
	assert_int_equal(
	    sl_hmac_sha256((const uint8_t *)"Jefe", 4, (const uint8_t *)data, strlen(data), mac),
	    SL_OK);
	assert_hex(mac, 32, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

/* ---- AEAD ------------------------------------------------------------- */

struct aead_kat {
	const char *name;
	sl_aead_id id;
	const char *key, *nonce, *pt, *aad, *ct, *tag;
};

static const struct aead_kat kats[] = {
    /* gcmEncryptExtIV256.rsp [PTlen = 0][AADlen = 0] Count = 0 */
    {"gcm pt0 aad0", SL_AEAD_AES_256_GCM,
     "b52c505a37d78eda5dd34f20c22540ea1b58963cf8e5bf8ffa85f9f2492505b4", "516c33929df5a3284ff463d7",
     "", "", "", "bdc1ac884d332457a1d2664f168c76f0"},
    /* [PTlen = 128][AADlen = 0] Count = 0 */
    {"gcm pt128 aad0", SL_AEAD_AES_256_GCM,
     "31bdadd96698c204aa9ce1448ea94ae1fb4a9a0b3c9d773b51bb1822666b8f22", "0d18e06c7c725ac9e362e1ce",
     "2db5168e932556f8089a0622981d017d", "", "fa4362189661d163fcd6a56d8bf0405a",
     "d636ac1bbedd5cc3ee727dc2ab4a9489"},
    /* [PTlen = 128][AADlen = 128] Count = 0 */
    {"gcm pt128 aad128", SL_AEAD_AES_256_GCM,
     "92e11dcdaa866f5ce790fd24501f92509aacf4cb8b1339d50c9c1240935dd08b", "ac93a1a6145299bde902f21a",
     "2d71bcfa914e4ac045b2aa60955fad24", "1e0889016f67601c8ebea4943bc23ad6",
     "8995ae2e6df3dbf96fac7b7137bae67f", "eca5aa77d51d4a0a14d9c51e1da474ab"},
    /* [PTlen = 128][AADlen = 0] Count = 1 */
    {"gcm pt128 aad0 #1", SL_AEAD_AES_256_GCM,
     "460fc864972261c2560e1eb88761ff1c992b982497bd2ac36c04071cbb8e5d99", "8a4a16b9e210eb68bcb6f58d",
     "99e4e926ffe927f691893fb79a96b067", "", "133fc15751621b5f325c7ff71ce08324",
     "ec4e87e0cf74a13618d0b68636ba9fa7"},
    /* draft-irtf-cfrg-xchacha-03 A.3.1 */
    {"xchacha A.3.1", SL_AEAD_XCHACHA20_POLY1305,
     "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f",
     "404142434445464748494a4b4c4d4e4f5051525354555657",
     "4c616469657320616e642047656e746c656d656e206f662074686520636c617373206f66202739393a20496620"
     "4920636f756c64206f6666657220796f75206f6e6c79206f6e652074697020666f7220746865206675747572"
     "652c2073756e73637265656e20776f756c642062652069742e",
     "50515253c0c1c2c3c4c5c6c7",
     "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4e"
     "da7e39ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2"
     "383565d3fff921f9664c97637da9768812f615c68b13b52e",
     "c0875924c1c7987947deafd8780acf49"},
};

struct kat_bytes {
	uint8_t key[32], nonce[24], pt[256], aad[64], ct[256], tag[16];
	size_t pt_len, aad_len, ct_len;
};

static void load(const struct aead_kat *k, struct kat_bytes *b)
{
	assert_int_equal(unhex(k->key, b->key, 32), 32);
	assert_int_equal(unhex(k->nonce, b->nonce, 24), sl_aead_nonce_len(k->id));
	b->pt_len = unhex(k->pt, b->pt, sizeof(b->pt));
	b->aad_len = unhex(k->aad, b->aad, sizeof(b->aad));
	b->ct_len = unhex(k->ct, b->ct, sizeof(b->ct));
	assert_int_equal(unhex(k->tag, b->tag, 16), 16);
}

static void test_aead_kats(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(kats) / sizeof(kats[0]); i++) {
		struct kat_bytes b;
		uint8_t out[256], tag[16];
		sl_aead *a = NULL;
		print_message("%s\n", kats[i].name);
		load(&kats[i], &b);
		assert_int_equal(sl_aead_new(kats[i].id, b.key, &a), SL_OK);
		assert_int_equal(
		    sl_aead_seal(a, b.nonce, b.aad, b.aad_len, b.pt, b.pt_len, out, tag), SL_OK);
		assert_memory_equal(tag, b.tag, 16);
		if (b.ct_len > 0)
			assert_memory_equal(out, b.ct, b.ct_len);
		/* open it back, in place */
		memcpy(out, b.ct, b.ct_len);
		assert_int_equal(
		    sl_aead_open(a, b.nonce, b.aad, b.aad_len, out, b.ct_len, b.tag, out), SL_OK);
		if (b.pt_len > 0)
			assert_memory_equal(out, b.pt, b.pt_len);
		/* the same context seals again with another nonce (context reuse) */
		assert_int_equal(
		    sl_aead_seal(a, b.nonce, b.aad, b.aad_len, b.pt, b.pt_len, out, tag), SL_OK);
		assert_memory_equal(tag, b.tag, 16);
		sl_aead_free(a);
	}
}

/* Every single-bit change of tag, ciphertext, AAD or nonce fails to open,
 * and the output buffer holds no plaintext afterwards. */
static void test_aead_tamper(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(kats) / sizeof(kats[0]); i++) {
		struct kat_bytes b;
		uint8_t out[256];
		sl_aead *a = NULL;
		load(&kats[i], &b);
		assert_int_equal(sl_aead_new(kats[i].id, b.key, &a), SL_OK);
		size_t nlen = sl_aead_nonce_len(kats[i].id);
		for (size_t bit = 0; bit < 16 * 8; bit++) {
			uint8_t tag[16];
			memcpy(tag, b.tag, 16);
			tag[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			memset(out, 0xAA, sizeof(out));
			assert_int_equal(
			    sl_aead_open(a, b.nonce, b.aad, b.aad_len, b.ct, b.ct_len, tag, out),
			    SL_E_INTEGRITY);
			for (size_t j = 0; j < b.ct_len; j++)
				assert_int_equal(out[j], 0);
		}
		if (b.ct_len > 0) {
			uint8_t ct[256];
			memcpy(ct, b.ct, b.ct_len);
			ct[b.ct_len - 1] ^= 0x01;
			assert_int_equal(
			    sl_aead_open(a, b.nonce, b.aad, b.aad_len, ct, b.ct_len, b.tag, out),
			    SL_E_INTEGRITY);
		}
		if (b.aad_len > 0) {
			uint8_t aad[64];
			memcpy(aad, b.aad, b.aad_len);
			aad[0] ^= 0x80;
			assert_int_equal(
			    sl_aead_open(a, b.nonce, aad, b.aad_len, b.ct, b.ct_len, b.tag, out),
			    SL_E_INTEGRITY);
		}
		uint8_t nonce[24];
		memcpy(nonce, b.nonce, nlen);
		nonce[nlen - 1] ^= 0x01;
		assert_int_equal(
		    sl_aead_open(a, nonce, b.aad, b.aad_len, b.ct, b.ct_len, b.tag, out),
		    SL_E_INTEGRITY);
		/* still usable after failures */
		assert_int_equal(
		    sl_aead_open(a, b.nonce, b.aad, b.aad_len, b.ct, b.ct_len, b.tag, out), SL_OK);
		sl_aead_free(a);
	}
}

static void test_aead_names(void **state)
{
	(void)state;
	sl_aead_id id;
	assert_int_equal(sl_aead_from_name("aes-256-gcm", &id), SL_OK);
	assert_int_equal(id, SL_AEAD_AES_256_GCM);
	assert_string_equal(sl_aead_name(id), "aes-256-gcm");
	assert_int_equal(sl_aead_from_name("xchacha20-poly1305", &id), SL_OK);
	assert_int_equal(id, SL_AEAD_XCHACHA20_POLY1305);
	assert_string_equal(sl_aead_name(id), "xchacha20-poly1305");
	assert_int_equal(sl_aead_from_name("aes-128-gcm", &id), SL_E_USAGE);
	assert_non_null(strstr(sl_err_detail(), "aes-128-gcm"));
	assert_null(sl_aead_name(SL_AEAD_NONE));
	assert_null(sl_aead_name((sl_aead_id)3));
	assert_int_equal(sl_aead_nonce_len((sl_aead_id)3), 0);
	uint8_t key[32] = {0};
	sl_aead *a = NULL;
	assert_int_equal(sl_aead_new((sl_aead_id)7, key, &a), SL_E_INTERNAL);
	assert_null(a);
}

/* A large buffer goes through both AEADs and back (the bulk path). */
static void test_aead_large_round_trip(void **state)
{
	(void)state;
	size_t len = (size_t)3 << 20;
	uint8_t *buf = malloc(len), *orig = malloc(len);
	uint8_t key[32], nonce[24] = {0}, tag[16], aad[41];
	assert_non_null(buf);
	assert_non_null(orig);
	sl_random(orig, len);
	sl_random(key, sizeof(key));
	sl_random(aad, sizeof(aad));
	for (int id = SL_AEAD_AES_256_GCM; id <= SL_AEAD_XCHACHA20_POLY1305; id++) {
		sl_aead *a = NULL;
		assert_int_equal(sl_aead_new((sl_aead_id)id, key, &a), SL_OK);
		memcpy(buf, orig, len);
		assert_int_equal(sl_aead_seal(a, nonce, aad, sizeof(aad), buf, len, buf, tag),
		                 SL_OK);
		assert_memory_not_equal(buf, orig, 64);
		assert_int_equal(sl_aead_open(a, nonce, aad, sizeof(aad), buf, len, tag, buf),
		                 SL_OK);
		assert_memory_equal(buf, orig, len);
		sl_aead_free(a);
	}
	free(buf);
	free(orig);
}

/* The KMS sealed box: what one key pair seals, only its secret key opens;
 * a flipped bit or another key is SL_E_INTEGRITY and leaves no plaintext */
static void test_sealbox(void **state)
{
	uint8_t pub[SL_SEALBOX_PUB_LEN], pub2[SL_SEALBOX_PUB_LEN], dek[32], back[32];
	uint8_t sealed[32 + SL_SEALBOX_OVERHEAD];
	sl_secret *sk = NULL, *sk2 = NULL;
	(void)state;
	for (size_t i = 0; i < sizeof(dek); i++)
		dek[i] = (uint8_t)(i * 7 + 1);
	assert_int_equal(sl_sealbox_keypair(pub, &sk), SL_OK);
	assert_int_equal(sl_sealbox_keypair(pub2, &sk2), SL_OK);
	assert_memory_not_equal(pub, pub2, sizeof(pub));
	assert_int_equal(sl_sealbox_seal(dek, sizeof(dek), pub, sealed), SL_OK);
	assert_int_equal(sl_sealbox_open(sealed, sizeof(sealed), sk, back), SL_OK);
	assert_memory_equal(back, dek, sizeof(dek));
	memset(back, 0xAA, sizeof(back));
	assert_int_equal(sl_sealbox_open(sealed, sizeof(sealed), sk2, back), SL_E_INTEGRITY);
	for (size_t i = 0; i < sizeof(back); i++)
		assert_int_equal(back[i], 0);
	sealed[40] ^= 1;
	assert_int_equal(sl_sealbox_open(sealed, sizeof(sealed), sk, back), SL_E_INTEGRITY);
	assert_int_equal(sl_sealbox_open(sealed, SL_SEALBOX_OVERHEAD - 1, sk, back), SL_E_INPUT);
	sl_secret_free(sk);
	sl_secret_free(sk2);
}

static void test_hex_is_lower(void **state)
{
	(void)state;
	assert_true(sl_hex_is_lower("00ff", 4));
	assert_false(sl_hex_is_lower("00FF", 4));
	assert_false(sl_hex_is_lower("00ff", 3));
	assert_false(sl_hex_is_lower("00fg", 4));
	assert_false(sl_hex_is_lower("00ff0", 4));
	assert_false(sl_hex_is_lower(NULL, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hkdf_rfc5869_1),        cmocka_unit_test(test_hkdf_rfc5869_2),
	    cmocka_unit_test(test_hkdf_rfc5869_3),        cmocka_unit_test(test_hkdf_bad_length),
	    cmocka_unit_test(test_hmac_rfc4231_2),        cmocka_unit_test(test_aead_kats),
	    cmocka_unit_test(test_aead_tamper),           cmocka_unit_test(test_aead_names),
	    cmocka_unit_test(test_aead_large_round_trip), cmocka_unit_test(test_sealbox),
	    cmocka_unit_test(test_hex_is_lower),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
