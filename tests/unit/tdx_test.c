/* TDX: the quote parser and verifier against the real quotes in
 * $SL_VECTORS/intel-tdx and azure-cvm/tdx (README: all valid at
 * 2026-02-15T00:00:00Z), claims checked against the quote bytes at the TD
 * report body offsets, tamper cases per check, PCS collateral (TCB info, QE
 * identity, CRLs) and the PCK SGX extension. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../attest/coll_dir.h"
#include "../../attest/tdx_quote.h"
#include "../../attest/x509_util.h"
#include "seclaunch/attest.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"
#include "testlib.h"

#define T_QUOTES 1771113600 /* 2026-02-15T00:00:00Z */

struct vec {
	const char *file;
	unsigned version;
	const char *fmspc;
	bool debug;
	unsigned pcesvn;
};

static const struct vec vecs[] = {
    {"intel-tdx/gtg_quote_v4_spr_e4.dat", 4, "50806f000000", false, 0},
    {"intel-tdx/trustee_quote_4.dat", 4, "50806f000000", true, 0},
    {"intel-tdx/gtg_quote_v5_sample.dat", 5, "90c06f000000", false, 0},
    {"intel-tdx/trustee_quote_5.dat", 5, "90c06f000000", false, 0},
    {"intel-tdx/trustee_quote_6.dat", 4, "00a06d080000", false, 11},
    {"intel-tdx/gtg_cos113_quote_v4.dat", 4, "00806f050000", false, 0},
    {"azure-cvm/tdx/td-quote.bin", 4, "00806f050000", false, 0},
};
#define NVEC (sizeof(vecs) / sizeof(vecs[0]))

static char coll[1024];

static uint8_t *load(const char *name, size_t *len)
{
	return tl_vector_load(len, "%s", name);
}

static sl_err verify(const uint8_t *q, size_t len, const char *cdir, time_t at,
                     const uint8_t *expect, size_t elen, sl_claims **out)
{
	sl_claims *c = NULL;
	char *b64 = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_b64_encode(q, len, &b64), SL_OK);
	json_t *ev = json_pack("{s:s, s:s}", "kind", "tdx", "quote", b64);
	free(b64);
	sl_verify_opts o = {.expect = expect,
	                    .expect_len = elen,
	                    .no_binding = expect == NULL,
	                    .collateral_dir = cdir,
	                    .at = at};
	sl_err rc = sl_evidence_verify(ev, &o, c);
	json_decref(ev);
	if (out != NULL)
		*out = c;
	else
		sl_claims_free(c);
	return rc;
}

static void claim_hex_at(const sl_claims *c, const char *key, const uint8_t *q, size_t off,
                         size_t n)
{
	char hex[200];
	sl_hex_encode(q + off, n, hex);
	const char *v = sl_claims_get(c, key);
	if (v == NULL || strcmp(v, hex) != 0)
		fail_msg("claim %s = %s, bytes at %zu = %s", key, v ? v : "(absent)", off, hex);
}

static size_t body_off(const uint8_t *q)
{
	return q[0] == 4 ? 48 : 54; /* v5: u16 body_type + u32 body_size */
}

static void test_vectors_valid(void **state)
{
	(void)state;
	for (size_t i = 0; i < NVEC; i++) {
		const struct vec *v = &vecs[i];
		size_t len = 0;
		uint8_t *q = load(v->file, &len);
		size_t b = body_off(q);
		sl_claims *c = NULL;
		sl_err rc = verify(q, len, NULL, T_QUOTES, q + b + 520, 64, &c);
		if (rc != SL_OK)
			fail_msg("%s: %s", v->file, sl_err_detail());
		assert_string_equal(sl_claims_get(c, "tee.kind"), "tdx");
		assert_string_equal(sl_claims_get(c, "binding"), "verified");
		char num[8];
		snprintf(num, sizeof(num), "%u", v->version);
		assert_string_equal(sl_claims_get(c, "tdx.version"), num);
		claim_hex_at(c, "tdx.tee_tcb_svn", q, b + 0, 16);
		claim_hex_at(c, "tdx.mrseam", q, b + 16, 48);
		claim_hex_at(c, "tdx.td_attributes", q, b + 120, 8);
		claim_hex_at(c, "tdx.xfam", q, b + 128, 8);
		claim_hex_at(c, "tdx.mrtd", q, b + 136, 48);
		claim_hex_at(c, "tdx.mrconfigid", q, b + 184, 48);
		claim_hex_at(c, "tdx.mrowner", q, b + 232, 48);
		claim_hex_at(c, "tdx.mrownerconfig", q, b + 280, 48);
		claim_hex_at(c, "tdx.rtmr0", q, b + 328, 48);
		claim_hex_at(c, "tdx.rtmr1", q, b + 376, 48);
		claim_hex_at(c, "tdx.rtmr2", q, b + 424, 48);
		claim_hex_at(c, "tdx.rtmr3", q, b + 472, 48);
		claim_hex_at(c, "tdx.report_data", q, b + 520, 64);
		if (v->version == 5) {
			claim_hex_at(c, "tdx.tee_tcb_svn2", q, b + 584, 16);
			claim_hex_at(c, "tdx.mrservicetd", q, b + 600, 48);
		} else {
			assert_null(sl_claims_get(c, "tdx.mrservicetd"));
		}
		assert_string_equal(sl_claims_get(c, "tdx.fmspc"), v->fmspc);
		assert_string_equal(sl_claims_get(c, "tdx.attributes.debug"),
		                    v->debug ? "true" : "false");
		/* bit 28 of TD attributes: byte 3, 0x10 */
		assert_string_equal(sl_claims_get(c, "tdx.attributes.sept_ve_disable"),
		                    (q[b + 123] & 0x10) ? "true" : "false");
		if (v->pcesvn != 0) {
			snprintf(num, sizeof(num), "%u", v->pcesvn);
			assert_string_equal(sl_claims_get(c, "tdx.pce_svn"), num);
		}
		assert_string_equal(sl_claims_get(c, "tdx.tcb_status"), "unknown");
		assert_string_equal(sl_claims_get(c, "tdx.pck_crl"), "absent");
		sl_claims_free(c);
		free(q);
	}
}

static void test_tamper(void **state)
{
	(void)state;
	size_t clen = 0;
	/* another quote's PCK chain (all the embedded chains are 3677 bytes) */
	uint8_t *other_chain =
	    load("intel-tdx/collateral/pck_chain_from_trustee_quote_4.pem", &clen);
	for (size_t i = 0; i < NVEC; i++) {
		const struct vec *v = &vecs[i];
		size_t len = 0;
		uint8_t *q = load(v->file, &len);
		uint8_t *t = malloc(len);
		size_t b = body_off(q);
		size_t sd = b + (q[0] == 4 ? 584 : 648) + 4; /* signature data */
		size_t qe = sd + 128 + 6, auth = qe + 384 + 64 + 2;
#define TAMPER(off, mask, want, needle)                                                            \
	do {                                                                                       \
		memcpy(t, q, len);                                                                 \
		t[(off)] ^= (mask);                                                                \
		expect_fail(verify(t, len, NULL, T_QUOTES, NULL, 0, NULL), (want), (needle),       \
		            v->file);                                                              \
	} while (0)
		TAMPER(b + 136, 0x01, SL_E_ATTEST_SIG, "quote signature"); /* mrtd */
		TAMPER(b + 328, 0x80, SL_E_ATTEST_SIG, "quote signature"); /* rtmr0 */
		TAMPER(b + 520, 0x01, SL_E_ATTEST_SIG, "quote signature"); /* report_data */
		TAMPER(b + 120, 0x01, SL_E_ATTEST_SIG, "quote signature"); /* debug bit */
		TAMPER(b + 0, 0x01, SL_E_ATTEST_SIG, "quote signature");   /* tee_tcb_svn */
		TAMPER(28, 0x01, SL_E_ATTEST_SIG, "quote signature");      /* header user_data */
		TAMPER(sd + 0, 0x01, SL_E_ATTEST_SIG, "quote signature");  /* sig r */
		TAMPER(sd + 32, 0x01, SL_E_ATTEST_SIG, "quote signature"); /* sig s */
		TAMPER(sd + 70, 0x01, SL_E_ATTEST_SIG, "attestation key is not bound"); /* key */
		TAMPER(qe + 10, 0x01, SL_E_ATTEST_SIG, "QE report signature");
		TAMPER(qe + 384, 0x01, SL_E_ATTEST_SIG, "QE report signature");
		TAMPER(auth, 0x01, SL_E_ATTEST_SIG, "attestation key is not bound");
		TAMPER(0, 0x07, SL_E_ATTEST_FORMAT, "header.version"); /* 4->3, 5->2 */
		TAMPER(2, 0x01, SL_E_ATTEST_FORMAT, "att_key_type");
		TAMPER(4, 0x81, SL_E_ATTEST_FORMAT, "tee_type");
		TAMPER(8, 0x01, SL_E_ATTEST_FORMAT, "reserved1");
		TAMPER(12, 0x01, SL_E_ATTEST_UNTRUSTED, "qe_vendor_id");
		TAMPER(sd + 128, 0x01, SL_E_ATTEST_FORMAT, "certification_data.type");
		if (q[0] == 5)
			TAMPER(48, 0x01, SL_E_ATTEST_FORMAT, "body_type");
#undef TAMPER
		/* truncated inside the signature data */
		expect_fail(verify(q, sd + 500, NULL, T_QUOTES, NULL, 0, NULL), SL_E_ATTEST_FORMAT,
		            "need", v->file);
		/* the binding */
		uint8_t other[64];
		memcpy(other, q + b + 520, 64);
		other[63] ^= 1;
		expect_fail(verify(q, len, NULL, T_QUOTES, other, 64, NULL), SL_E_ATTEST_BINDING,
		            "REPORTDATA", v->file);
		/* swapped PCK chain */
		memcpy(t, q, len);
		size_t chain = auth + 32 + 6;
		if (chain + clen <= len && memcmp(t + chain, other_chain, clen) != 0 &&
		    memcmp(t + chain, "-----BEGIN", 10) == 0) {
			memcpy(t + chain, other_chain, clen);
			expect_fail(verify(t, len, NULL, T_QUOTES, NULL, 0, NULL), SL_E_ATTEST_SIG,
			            "QE report signature", v->file);
		}
		/* certificate times: before the PCK leaf, after the PCK CA (2033) */
		expect_fail(verify(q, len, NULL, 1483228800, NULL, 0, NULL), SL_E_ATTEST_CHAIN,
		            "not yet valid", v->file);
		expect_fail(verify(q, len, NULL, 2019686400, NULL, 0, NULL), SL_E_ATTEST_CHAIN,
		            "expired", v->file);
		free(t);
		free(q);
	}
	free(other_chain);
}

/* gtg_quote_v5_sample's PCK leaf starts 2026-01-27 14:36:27 (README: verify at >= 2026-01-28). */
/* sl_p256_verify against OpenSSL's own signatures: r and s with the top
 * bit set and with leading zero bytes (each DER INTEGER shape) verify, a
 * flipped bit in r, s or the message does not, and a P-384 key is refused. */
static void test_p256_verify(void **state)
{
	(void)state;
	EVP_PKEY *k = EVP_EC_gen("prime256v1"), *k384 = EVP_EC_gen("secp384r1");
	uint8_t msg[100], rs[64];
	bool high = false, zero = false;
	assert_non_null(k);
	assert_non_null(k384);
	for (int i = 0; i < 20000 && !(i >= 64 && high && zero); i++) {
		EVP_MD_CTX *md = EVP_MD_CTX_new();
		unsigned char der[80];
		size_t dl = sizeof(der);
		randombytes_buf(msg, sizeof(msg));
		assert_int_equal(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k), 1);
		assert_int_equal(EVP_DigestSign(md, der, &dl, msg, sizeof(msg)), 1);
		EVP_MD_CTX_free(md);
		const unsigned char *p = der;
		ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)dl);
		assert_non_null(sig);
		assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_r(sig), rs, 32), 32);
		assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_s(sig), rs + 32, 32), 32);
		ECDSA_SIG_free(sig);
		high = high || rs[0] >= 0x80 || rs[32] >= 0x80;
		zero = zero || rs[0] == 0 || rs[32] == 0;
		assert_int_equal(sl_p256_verify(k, rs, msg, sizeof(msg), "t"), SL_OK);
		int bit = (int)randombytes_uniform(64 * 8);
		rs[bit / 8] ^= (uint8_t)(1 << (bit % 8));
		assert_int_equal(sl_p256_verify(k, rs, msg, sizeof(msg), "t"), SL_E_ATTEST_SIG);
		rs[bit / 8] ^= (uint8_t)(1 << (bit % 8));
		msg[i % sizeof(msg)] ^= 1;
		assert_int_equal(sl_p256_verify(k, rs, msg, sizeof(msg), "t"), SL_E_ATTEST_SIG);
	}
	assert_true(high && zero);
	memset(rs, 0, sizeof(rs));
	assert_int_equal(sl_p256_verify(k, rs, msg, sizeof(msg), "t"), SL_E_ATTEST_SIG);
	assert_int_equal(sl_p256_verify(k384, rs, msg, sizeof(msg), "t"), SL_E_ATTEST_CHAIN);
	EVP_PKEY_free(k);
	EVP_PKEY_free(k384);
}

static void test_v5_leaf_dates(void **state)
{
	(void)state;
	size_t len = 0;
	uint8_t *q = load("intel-tdx/gtg_quote_v5_sample.dat", &len);
	assert_int_equal(verify(q, len, NULL, 1769558400, NULL, 0, NULL), SL_OK);
	expect_fail(verify(q, len, NULL, 1748736000, NULL, 0, NULL), SL_E_ATTEST_CHAIN,
	            "not yet valid", "v5 at 2025-06-01");
	free(q);
}

#include "tdx_test_coll.h"

/* The verification cache (attest/vcache.c) over the 2023 collateral at a
 * time before its nextUpdate: a second verification is served from it (no
 * check verified again); a changed TCB info, a time past the PCK leaf's
 * notAfter or past the collateral's nextUpdate, and a changed quote are
 * verified again; concurrent verifications agree. */
static const char *const cached[] = {"gtg_tcbinfo_fmspc_50806f000000.json",
                                     "gtg_qe_identity_td_qe.json", "tcb_signing_chain.pem",
                                     "gtg_pckcrl_platform.der", "gtg_rootcrl.der"};
#define T_FRESH 1687305600 /* 2023-06-21, before the TCB info's nextUpdate */

struct par {
	const uint8_t *q;
	size_t len;
	const char *d;
	int bad;
};

static void *par_run(void *arg)
{
	struct par *p = arg;
	for (int i = 0; i < 25; i++)
		if (verify(p->q, p->len, p->d, T_FRESH, NULL, 0, NULL) != SL_OK)
			p->bad++;
	return NULL;
}

static void test_cache(void **state)
{
	(void)state;
	const char *d = mkcoll(cached, 5);
	size_t len = 0, bl = 0;
	uint64_t h0 = 0, m0 = 0, h1 = 0, m1 = 0;
	sl_claims *c = NULL;
	uint8_t *q = load("intel-tdx/trustee_quote_4.dat", &len), *b = NULL;
	sl_verify_cache_reset(false);
	assert_int_equal(verify(q, len, d, T_FRESH, NULL, 0, NULL), SL_OK);
	sl_verify_cache_stats(&h0, &m0);
	/* (a) PCK chain, two CRLs, the TCB signing chain, two signatures */
	assert_int_equal(verify(q, len, d, T_FRESH, NULL, 0, &c), SL_OK);
	sl_verify_cache_stats(&h1, &m1);
	assert_int_equal(m1, m0);
	assert_true(h1 - h0 >= 6);
	assert_string_equal(sl_claims_get(c, "tdx.tcb_status"), "UpToDate");
	assert_string_equal(sl_claims_get(c, "tdx.collateral_stale"), "false");
	assert_string_equal(sl_claims_get(c, "tdx.pck_crl"), "checked");
	sl_claims_free(c);
	/* (b) one byte of the TCB info changed: another key, verified, refused */
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", d, cached[0]);
	assert_int_equal(sl_file_read(p, 1 << 20, &b, &bl), SL_OK);
	char *hit = strstr((char *)b, "\"pcesvn\":11");
	assert_non_null(hit);
	hit[10] = '0';
	assert_int_equal(sl_file_write_atomic(p, b, bl, 0600, true), SL_OK);
	expect_fail(verify(q, len, d, T_FRESH, NULL, 0, NULL), SL_E_ATTEST_SIG,
	            "tcbInfo) does not verify", "tampered TCB info, cache warm");
	hit[10] = '1';
	assert_int_equal(sl_file_write_atomic(p, b, bl, 0600, true), SL_OK);
	assert_int_equal(verify(q, len, d, T_FRESH, NULL, 0, NULL), SL_OK);
	/* (c) past the PCK leaf's notAfter (2030-02-07) after a cached success */
	expect_fail(verify(q, len, d, 1924992000 /* 2031-01-01 */, NULL, 0, NULL),
	            SL_E_ATTEST_CHAIN, "expired", "PCK at 2031, cache warm");
	/* ... and past the collateral's nextUpdate: verified again, stale */
	sl_verify_cache_stats(&h0, &m0);
	assert_int_equal(verify(q, len, d, T_QUOTES, NULL, 0, &c), SL_OK);
	sl_verify_cache_stats(&h1, &m1);
	assert_true(m1 > m0);
	assert_string_equal(sl_claims_get(c, "tdx.collateral_stale"), "true");
	sl_claims_free(c);
	/* (d) the quote's own signature, cache warm: REPORTDATA flipped */
	q[48 + 520] ^= 1;
	expect_fail(verify(q, len, d, T_FRESH, NULL, 0, NULL), SL_E_ATTEST_SIG,
	            "TDX quote signature", "REPORTDATA flipped, cache warm");
	q[48 + 520] ^= 1;
	/* seclaunchd verifies on many threads at once */
	struct par ps[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		ps[i] = (struct par){q, len, d, 0};
		assert_int_equal(pthread_create(&th[i], NULL, par_run, &ps[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(ps[i].bad, 0);
	}
	free(b);
	free(q);
	rmcoll(cached, 5);
}

/* The collateral directory's snapshot (attest/coll_dir.c): once its files
 * are two seconds old, verifications read them from the snapshot; a byte
 * changed in place (same size, same name), a file replaced by rename and a
 * file removed are each seen by the next verification, and a fresh change
 * is never served from a snapshot. */
static void flip_in_place(const char *path, const char *needle, size_t at, char to)
{
	uint8_t *b = NULL;
	size_t bl = 0;
	assert_int_equal(sl_file_read(path, 1 << 20, &b, &bl), SL_OK);
	char *hit = strstr((char *)b, needle);
	assert_non_null(hit);
	FILE *f = fopen(path, "r+");
	assert_non_null(f);
	assert_int_equal(fseek(f, (long)(hit - (char *)b + (long)at), SEEK_SET), 0);
	assert_int_equal(fputc(to, f), to);
	assert_int_equal(fclose(f), 0);
	free(b);
}

static void test_coll_snapshot(void **state)
{
	(void)state;
	const char *d = mkcoll(cached, 5);
	size_t len = 0;
	uint64_t s0 = 0, r0 = 0, s1 = 0, r1 = 0;
	sl_claims *c = NULL;
	uint8_t *q = load("intel-tdx/trustee_quote_4.dat", &len);
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", d, cached[0]);

	/* just written: read each time, never kept */
	sl_coll_dir_stats(&s0, &r0);
	assert_int_equal(verify(q, len, d, T_FRESH, NULL, 0, NULL), SL_OK);
	sl_coll_dir_stats(&s1, &r1);
	assert_int_equal(s1, s0);
	assert_true(r1 > r0);
	sleep(3);
	assert_int_equal(verify(q, len, d, T_FRESH, NULL, 0, NULL), SL_OK);
	sl_coll_dir_stats(&s0, &r0);
	assert_int_equal(verify(q, len, d, T_FRESH, NULL, 0, &c), SL_OK);
	sl_coll_dir_stats(&s1, &r1);
	assert_int_equal(r1, r0);
	assert_true(s1 - s0 >= 2); /* the certificates and the JSON files */
	assert_string_equal(sl_claims_get(c, "tdx.tcb_status"), "UpToDate");
	sl_claims_free(c);

	/* one byte of the TCB info changed in place, snapshot warm */
	flip_in_place(p, "\"pcesvn\":11", 10, '0');
	expect_fail(verify(q, len, d, T_FRESH, NULL, 0, NULL), SL_E_ATTEST_SIG,
	            "tcbInfo) does not verify", "TCB info changed in place, snapshot warm");
	flip_in_place(p, "\"pcesvn\":10", 10, '1');
	assert_int_equal(verify(q, len, d, T_FRESH, NULL, 0, NULL), SL_OK);

	/* replaced by rename, after the snapshot settled again */
	sleep(3);
	assert_int_equal(verify(q, len, d, T_FRESH, NULL, 0, NULL), SL_OK);
	uint8_t *b = NULL;
	size_t bl = 0;
	assert_int_equal(sl_file_read(p, 1 << 20, &b, &bl), SL_OK);
	char *hit = strstr((char *)b, "\"pcesvn\":11");
	assert_non_null(hit);
	hit[10] = '0';
	assert_int_equal(sl_file_write_atomic(p, b, bl, 0600, true), SL_OK);
	expect_fail(verify(q, len, d, T_FRESH, NULL, 0, NULL), SL_E_ATTEST_SIG,
	            "tcbInfo) does not verify", "TCB info replaced, snapshot warm");
	hit[10] = '1';
	assert_int_equal(sl_file_write_atomic(p, b, bl, 0600, true), SL_OK);
	free(b);

	/* removed: no TCB info for this platform any more */
	sleep(3);
	assert_int_equal(verify(q, len, d, T_FRESH, NULL, 0, NULL), SL_OK);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(verify(q, len, d, T_FRESH, NULL, 0, &c), SL_OK);
	assert_string_equal(sl_claims_get(c, "tdx.tcb_status"), "unknown");
	sl_claims_free(c);
	free(q);
	rmcoll(cached + 1, 4);
}

int main(void)
{
	tl_vector_path(coll, sizeof(coll), "intel-tdx/collateral");
	assert_int_equal(sl_crypto_init(), SL_OK);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vectors_valid),
	    cmocka_unit_test(test_tamper),
	    cmocka_unit_test(test_p256_verify),
	    cmocka_unit_test(test_v5_leaf_dates),
	    cmocka_unit_test(test_pck_ext),
	    cmocka_unit_test(test_crl),
	    cmocka_unit_test(test_tcb_gtg_2023),
	    cmocka_unit_test(test_tcb_eval),
	    cmocka_unit_test(test_tcb_signing_expired),
	    cmocka_unit_test(test_collateral_tamper),
	    cmocka_unit_test(test_collateral_duplicate),
	    cmocka_unit_test(test_cache),
	    cmocka_unit_test(test_coll_snapshot),
	    cmocka_unit_test(test_ccel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
