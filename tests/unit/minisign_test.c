/* minisign keys and signatures: round trips, both signature modes, fixed
 * vectors made by the stock minisign 0.11 tool, and every tamper case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/minisign.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"
#include "testlib.h"

/* Made with `minisign -G -W`, `minisign -S -t "tc here"` over "hello\n". */
static const char vec_pub[] = "untrusted comment: minisign public key 39222B9004B2E741\n"
                              "RWRB57IEkCsiOeqkrgnkV9TzdzYByeNn8YXlHJmmOsB0LnkzYAqq5ahH\n";
static const char vec_sec[] =
    "untrusted comment: minisign encrypted secret key\n"
    "RWQAAEIyAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAQeeyBJArIjkkY7DqEQJ83Y"
    "8t"
    "0Jhe0jN2z/"
    "a4qnm7VZgUQ72SXIDScuqkrgnkV9TzdzYByeNn8YXlHJmmOsB0LnkzYAqq5ahHAAAAAAAAAAAAAAAAAAAAAAA"
    "AAAAAAAAAAAAAAAAAAAA=\n";
static const char vec_sig[] =
    "untrusted comment: signature from minisign secret key\n"
    "RURB57IEkCsiOWwSX4h71pD36YHMMgshE4fQq5NcT7QsSeicCgN9B8HW8WgU0Z8m8p3OJyr5HPRl7/"
    "bzh5xY1gyvbgTXEnu"
    "wwA0=\n"
    "trusted comment: tc here\n"
    "PI+SN17InrEk7oFuldipdsxvzByrnJgjrkTaLAT35sqaUEL9pT9txPU58DTeJcjw5AGmY2SUKorcqnx/CatUCQ==\n";
/* `minisign -S -l` (legacy "Ed" mode) over the same message. */
static const char vec_sig_legacy[] =
    "untrusted comment: signature from minisign secret key\n"
    "RWRB57IEkCsiOUE0u9TaS4Y5Xlpm65bMhDXUx+IoZ4OfjB63F8Ll+FAIJD+q+"
    "z1LxK6wZPmUH8qXpjihQ2XuVUfalewRLzv"
    "pkQA=\n"
    "trusted comment: timestamp:1795979047\tfile:m\n"
    "UJsqlO8cn3Jhp0xkEpsaDENM1dBKkbYJJOx2+NvjSJ+vKV097xE6MnTakD8oIy1Gy6nevgkbkxURD0leJ/UeCA==\n";
static const uint8_t msg[] = "hello\n";
#define MSGLEN (sizeof(msg) - 1)

static sl_err verify_text(const sl_minisign_pubkey *pk, const char *sig, const uint8_t *m,
                          size_t len)
{
	sl_minisign_sig *s = NULL;
	sl_err rc = sl_minisign_sig_parse((const uint8_t *)sig, strlen(sig), &s);
	if (rc == SL_OK)
		rc = sl_minisign_verify(pk, s, m, len);
	sl_minisign_sig_free(s);
	return rc;
}

static void test_vectors_verify(void **state)
{
	(void)state;
	sl_minisign_pubkey pk;
	char id[17];
	assert_int_equal(sl_minisign_pubkey_parse((const uint8_t *)vec_pub, strlen(vec_pub), &pk),
	                 SL_OK);
	sl_minisign_key_id_hex(pk.key_id, id);
	assert_string_equal(id, "39222B9004B2E741");
	assert_int_equal(verify_text(&pk, vec_sig, msg, MSGLEN), SL_OK);
	assert_int_equal(verify_text(&pk, vec_sig_legacy, msg, MSGLEN), SL_OK);

	sl_minisign_sig *s = NULL;
	assert_int_equal(sl_minisign_sig_parse((const uint8_t *)vec_sig, strlen(vec_sig), &s),
	                 SL_OK);
	assert_true(sl_minisign_sig_prehashed(s));
	assert_string_equal(sl_minisign_sig_trusted_comment(s), "tc here");
	sl_minisign_sig_free(s);
	assert_int_equal(
	    sl_minisign_sig_parse((const uint8_t *)vec_sig_legacy, strlen(vec_sig_legacy), &s),
	    SL_OK);
	assert_false(sl_minisign_sig_prehashed(s));
	sl_minisign_sig_free(s);

	/* a bare base64 key (minisign -P form) */
	const char *bare = "RWRB57IEkCsiOeqkrgnkV9TzdzYByeNn8YXlHJmmOsB0LnkzYAqq5ahH";
	sl_minisign_pubkey pk2;
	assert_int_equal(sl_minisign_pubkey_parse((const uint8_t *)bare, strlen(bare), &pk2),
	                 SL_OK);
	assert_memory_equal(&pk, &pk2, sizeof(pk));
}

static void test_vector_seckey_signs(void **state)
{
	(void)state;
	sl_minisign_seckey *sk = NULL;
	sl_minisign_pubkey pk, pk2;
	char *sig = NULL;
	assert_false(sl_minisign_seckey_is_encrypted((const uint8_t *)vec_sec, strlen(vec_sec)));
	assert_int_equal(
	    sl_minisign_seckey_parse((const uint8_t *)vec_sec, strlen(vec_sec), NULL, &sk), SL_OK);
	sl_minisign_seckey_pubkey(sk, &pk2);
	assert_int_equal(sl_minisign_pubkey_parse((const uint8_t *)vec_pub, strlen(vec_pub), &pk),
	                 SL_OK);
	assert_memory_equal(&pk, &pk2, sizeof(pk));
	/* Ed25519 is deterministic: same key, message and comment give minisign's bytes. */
	assert_int_equal(sl_minisign_sign(sk, msg, MSGLEN, "tc here", false, &sig), SL_OK);
	assert_string_equal(sig, vec_sig);
	free(sig);
	assert_int_equal(
	    sl_minisign_sign(sk, msg, MSGLEN, "timestamp:1795979047\tfile:m", true, &sig), SL_OK);
	assert_string_equal(sig, vec_sig_legacy);
	free(sig);
	sl_minisign_seckey_free(sk);
}

static void test_keygen_roundtrip_unencrypted(void **state)
{
	(void)state;
	char *sec = NULL, *pub = NULL, *sig = NULL;
	sl_minisign_pubkey pk, pk2;
	sl_minisign_seckey *sk = NULL;
	assert_int_equal(sl_minisign_keygen(NULL, 0, 0, &sec, &pub, &pk), SL_OK);
	assert_false(sl_minisign_seckey_is_encrypted((uint8_t *)sec, strlen(sec)));
	assert_int_equal(sl_minisign_pubkey_parse((uint8_t *)pub, strlen(pub), &pk2), SL_OK);
	assert_memory_equal(&pk, &pk2, sizeof(pk));
	assert_int_equal(sl_minisign_seckey_parse((uint8_t *)sec, strlen(sec), NULL, &sk), SL_OK);
	for (int legacy = 0; legacy < 2; legacy++) {
		assert_int_equal(sl_minisign_sign(sk, msg, MSGLEN, NULL, legacy, &sig), SL_OK);
		assert_int_equal(verify_text(&pk, sig, msg, MSGLEN), SL_OK);
		assert_int_equal(verify_text(&pk, sig, msg, MSGLEN - 1), SL_E_INTEGRITY);
		assert_non_null(strstr(sl_err_detail(), "signature does not verify"));
		free(sig);
	}
	sl_minisign_seckey_free(sk);
	sl_wipe(sec, strlen(sec));
	free(sec);
	free(pub);
}

static void test_keygen_encrypted(void **state)
{
	(void)state;
	char *sec = NULL, *pub = NULL, *sig = NULL;
	sl_minisign_pubkey pk;
	sl_minisign_seckey *sk = NULL;
	/* small scrypt limits keep the test fast; the format carries them */
	assert_int_equal(sl_minisign_keygen("correct horse", 1 << 16, 1 << 22, &sec, &pub, &pk),
	                 SL_OK);
	assert_true(sl_minisign_seckey_is_encrypted((uint8_t *)sec, strlen(sec)));
	assert_int_equal(sl_minisign_seckey_parse((uint8_t *)sec, strlen(sec), NULL, &sk),
	                 SL_E_USAGE);
	assert_int_equal(sl_minisign_seckey_parse((uint8_t *)sec, strlen(sec), "wrong", &sk),
	                 SL_E_WRONG_KEY);
	assert_non_null(strstr(sl_err_detail(), "wrong password"));
	assert_int_equal(
	    sl_minisign_seckey_parse((uint8_t *)sec, strlen(sec), "correct horse", &sk), SL_OK);
	assert_int_equal(sl_minisign_sign(sk, msg, MSGLEN, "x", false, &sig), SL_OK);
	assert_int_equal(verify_text(&pk, sig, msg, MSGLEN), SL_OK);
	free(sig);
	sl_minisign_seckey_free(sk);
	free(sec);
	free(pub);
}

/* Flips one base64 character of line `line` (0-based) at column col. */
static char *flip(const char *text, int line, size_t col)
{
	char *t = strdup(text);
	char *p = t;
	for (int i = 0; i < line; i++)
		p = strchr(p, '\n') + 1;
	p[col] = p[col] == 'A' ? 'B' : 'A';
	return t;
}

static void test_tamper(void **state)
{
	(void)state;
	sl_minisign_pubkey pk;
	assert_int_equal(sl_minisign_pubkey_parse((const uint8_t *)vec_pub, strlen(vec_pub), &pk),
	                 SL_OK);
	/* flipped byte in the message */
	uint8_t m2[MSGLEN];
	memcpy(m2, msg, MSGLEN);
	m2[0] ^= 1;
	assert_int_equal(verify_text(&pk, vec_sig, m2, MSGLEN), SL_E_INTEGRITY);
	assert_int_equal(verify_text(&pk, vec_sig_legacy, m2, MSGLEN), SL_E_INTEGRITY);
	/* flipped byte in the signature (inside the 64 signature bytes) */
	char *t = flip(vec_sig, 1, 30);
	assert_int_equal(verify_text(&pk, t, msg, MSGLEN), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "signature does not verify"));
	free(t);
	/* changed trusted comment */
	t = strdup(vec_sig);
	*strstr(t, "tc here") = 'T';
	assert_int_equal(verify_text(&pk, t, msg, MSGLEN), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "trusted comment"));
	free(t);
	/* flipped byte in the global signature */
	t = flip(vec_sig, 3, 10);
	assert_int_equal(verify_text(&pk, t, msg, MSGLEN), SL_E_INTEGRITY);
	free(t);
	/* an untrusted comment may change freely */
	t = strdup(vec_sig);
	memcpy(strstr(t, "signature from"), "SIGNATURE", 9);
	assert_int_equal(verify_text(&pk, t, msg, MSGLEN), SL_OK);
	free(t);
	/* wrong public key */
	sl_minisign_pubkey other;
	char *sec = NULL, *pub = NULL;
	assert_int_equal(sl_minisign_keygen(NULL, 0, 0, &sec, &pub, &other), SL_OK);
	assert_int_equal(verify_text(&other, vec_sig, msg, MSGLEN), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "wrong public key"));
	/* same key id, different key: the signature check fails */
	memcpy(other.key_id, pk.key_id, sizeof(pk.key_id));
	assert_int_equal(verify_text(&other, vec_sig, msg, MSGLEN), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "does not verify"));
	free(sec);
	free(pub);
}

/* A legacy signature built from raw Ed25519 over the message, independent of
 * our signer: proves verify's "Ed" path follows the format, not our sign(). */
static void test_legacy_constructed(void **state)
{
	(void)state;
	uint8_t pkb[32], skb[64], blob[74], gsig[64];
	uint8_t gm[64 + 4];
	char b1[128], b2[128], text[512];
	sl_minisign_pubkey pk;
	crypto_sign_keypair(pkb, skb);
	memcpy(blob, "Ed", 2);
	memcpy(blob + 2, "\1\2\3\4\5\6\7\10", 8);
	crypto_sign_detached(blob + 10, NULL, msg, MSGLEN, skb);
	memcpy(gm, blob + 10, 64);
	memcpy(gm + 64, "tcmt", 4);
	crypto_sign_detached(gsig, NULL, gm, sizeof(gm), skb);
	sodium_bin2base64(b1, sizeof(b1), blob, sizeof(blob), sodium_base64_VARIANT_ORIGINAL);
	sodium_bin2base64(b2, sizeof(b2), gsig, sizeof(gsig), sodium_base64_VARIANT_ORIGINAL);
	snprintf(text, sizeof(text), "untrusted comment: x\n%s\ntrusted comment: tcmt\n%s", b1, b2);
	memcpy(pk.key_id, blob + 2, 8);
	memcpy(pk.pk, pkb, 32);
	assert_int_equal(verify_text(&pk, text, msg, MSGLEN), SL_OK);
	/* the same signature claimed as prehashed fails */
	blob[1] = 'D';
	sodium_bin2base64(b1, sizeof(b1), blob, sizeof(blob), sodium_base64_VARIANT_ORIGINAL);
	snprintf(text, sizeof(text), "untrusted comment: x\n%s\ntrusted comment: tcmt\n%s\n", b1,
	         b2);
	assert_int_equal(verify_text(&pk, text, msg, MSGLEN), SL_E_INTEGRITY);
}

static void test_malformed(void **state)
{
	(void)state;
	sl_minisign_sig *s = NULL;
	sl_minisign_pubkey pk;
	static const struct {
		const char *text;
		const char *want;
	} sigs[] = {
	    {"", "missing line"},
	    {"untrusted comment: x\n", "signature line: missing line"},
	    {"hello\nRURB\n", "line 1 must start"},
	    {"untrusted comment: x\nRURB57IE\ntrusted comment: a\nAAAA\n", "line 2"},
	    {"untrusted comment: x\n"
	     "XXRB57IEkCsiOWwSX4h71pD36YHMMgshE4fQq5NcT7QsSeicCgN9B8HW8WgU0Z8m8p3OJyr5HPRl7/"
	     "bzh5xY1gyvbgTXEnuwwA0=\ntrusted comment: a\nAAAA\n",
	     "neither 'ED' nor 'Ed'"},
	    {"untrusted comment: x\n"
	     "RURB57IEkCsiOWwSX4h71pD36YHMMgshE4fQq5NcT7QsSeicCgN9B8HW8WgU0Z8m8p3OJyr5HPRl7/"
	     "bzh5xY1gyvbgTXEnuwwA0=\nnot trusted\nAAAA\n",
	     "line 3 must start"},
	    {"untrusted comment: x\n"
	     "RURB57IEkCsiOWwSX4h71pD36YHMMgshE4fQq5NcT7QsSeicCgN9B8HW8WgU0Z8m8p3OJyr5HPRl7/"
	     "bzh5xY1gyvbgTXEnuwwA0=\ntrusted comment: a\nAAAA\n",
	     "line 4"},
	    {"untrusted comment: x\n"
	     "RURB57IEkCsiOWwSX4h71pD36YHMMgshE4fQq5NcT7QsSeicCgN9B8HW8WgU0Z8m8p3OJyr5HPRl7/"
	     "bzh5xY1gyvbgTXEnuwwA0=\ntrusted comment: a\n"
	     "PI+SN17InrEk7oFuldipdsxvzByrnJgjrkTaLAT35sqaUEL9pT9txPU58DTeJcjw5AGmY2SUKorcqnx/"
	     "CatUCQ==\nextra\n",
	     "unexpected text"},
	};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		expect_fail(
		    sl_minisign_sig_parse((const uint8_t *)sigs[i].text, strlen(sigs[i].text), &s),
		    SL_E_FORMAT, sigs[i].want, sigs[i].want);
	}
	/* NUL inside a line */
	const char nul[] = "untrusted comment: x\0y\nRURB\n";
	assert_int_equal(sl_minisign_sig_parse((const uint8_t *)nul, sizeof(nul) - 1, &s),
	                 SL_E_FORMAT);
	assert_int_equal(
	    sl_minisign_pubkey_parse((const uint8_t *)"untrusted comment: x\nRWRB\n", 26, &pk),
	    SL_E_FORMAT);
	/* an encrypted-key algorithm name on a public key */
	const char *bad = "RURB57IEkCsiOeqkrgnkV9TzdzYByeNn8YXlHJmmOsB0LnkzYAqq5ahH";
	assert_int_equal(sl_minisign_pubkey_parse((const uint8_t *)bad, strlen(bad), &pk),
	                 SL_E_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "not Ed25519"));
	/* corrupt secret key: a flipped secret byte breaks the seed/public match */
	char *t = flip(vec_sec, 1, 100);
	sl_minisign_seckey *sk = NULL;
	assert_int_not_equal(sl_minisign_seckey_parse((uint8_t *)t, strlen(t), NULL, &sk), SL_OK);
	assert_null(sk);
	free(t);
}

int main(void)
{
	if (sl_crypto_init() != SL_OK)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vectors_verify),
	    cmocka_unit_test(test_vector_seckey_signs),
	    cmocka_unit_test(test_keygen_roundtrip_unencrypted),
	    cmocka_unit_test(test_keygen_encrypted),
	    cmocka_unit_test(test_tamper),
	    cmocka_unit_test(test_legacy_constructed),
	    cmocka_unit_test(test_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
