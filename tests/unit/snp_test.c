/* SEV-SNP: the parser and verifier against the real reports in
 * $SL_VECTORS/amd-sev-snp (README there gives each expected result), claims
 * checked against the report bytes at their ABI offsets, and one tamper case
 * per verified field group; configfs-tsm path handling on a fake tree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../attest/snp_report.h"
#include "../../attest/snp_tsm.h"
#include "../../attest/x509_util.h"
#include "seclaunch/attest.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"
#include "testlib.h"

#define T2024 1704067200 /* 2024-01-01T00:00:00Z */
#define T2025 1748736000 /* 2025-06-01T00:00:00Z */

struct vec {
	const char *report, *vek, *key;
	time_t at;
	unsigned bl, tee, snp, ucode;
	const char *product;
	unsigned version;
};

/* From amd-sev-snp/README.md: every one is "valid" at its suggested time. */
static const struct vec vecs[] = {
    {"gsg_milan_report.bin", "gsg_milan_vcek.der", "vcek", T2024, 2, 0, 5, 68, "Milan", 2},
    {"virtee_milan_report.bin", "virtee_milan_vcek.der", "vcek", T2024, 3, 0, 8, 115, "Milan", 2},
    {"trustee_milan_report.bin", "trustee_milan_vcek.der", "vcek", T2024, 3, 0, 8, 115, "Milan", 2},
    {"trustee_milan_vlek_report.bin", "trustee_milan_vlek.der", "vlek", T2025, 4, 0, 24, 217,
     "Milan", 3},
    {"azure_milan_v2_report.bin", "azure_milan_v2_vcek.der", "vcek", T2024, 3, 0, 8, 115, "Milan",
     2},
    {"azure_milan_v3_report.bin", "azure_milan_v3_vcek.pem", "vcek", T2025, 4, 0, 24, 219, "Milan",
     3},
    {"azure_genoa_v3_report.bin", "azure_genoa_vcek.pem", "vcek", T2025, 10, 0, 23, 84, "Genoa", 3},
};
#define NVEC (sizeof(vecs) / sizeof(vecs[0]))

static char trust[1024];

static uint8_t *load(const char *name, size_t *len)
{
	return tl_vector_load(len, "amd-sev-snp/%s", name);
}

/* The VEK as base64 DER (the vectors hold DER or PEM). */
static char *vek_b64(const char *name)
{
	size_t len = 0;
	uint8_t *b = load(name, &len);
	STACK_OF(X509) *st = sk_X509_new_null();
	assert_int_equal(sl_x509_parse_blob(b, len, st, NULL, name), SL_OK);
	unsigned char *der = NULL;
	int dl = i2d_X509(sk_X509_value(st, 0), &der);
	assert_true(dl > 0);
	char *out = NULL;
	assert_int_equal(sl_b64_encode(der, (size_t)dl, &out), SL_OK);
	OPENSSL_free(der);
	sk_X509_pop_free(st, X509_free);
	free(b);
	return out;
}

static json_t *evidence(const uint8_t *rep, size_t len, const char *key, const char *vek_name)
{
	char *b64 = NULL;
	assert_int_equal(sl_b64_encode(rep, len, &b64), SL_OK);
	json_t *ev = json_pack("{s:s, s:s}", "kind", "sev-snp", "report", b64);
	free(b64);
	if (vek_name != NULL) {
		char *v = vek_b64(vek_name);
		json_object_set_new(ev, "certs", json_pack("{s:s}", key, v));
		free(v);
	}
	return ev;
}

/* Verifies rep with the VEK vek_name in the evidence and collateral coll. */
static sl_err verify(const uint8_t *rep, size_t len, const char *key, const char *vek_name,
                     const char *coll, time_t at, const uint8_t *expect, size_t elen,
                     sl_claims **claims_out)
{
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	json_t *ev = evidence(rep, len, key, vek_name);
	sl_verify_opts o = {.expect = expect,
	                    .expect_len = elen,
	                    .no_binding = expect == NULL,
	                    .collateral_dir = coll,
	                    .at = at};
	sl_err rc = sl_evidence_verify(ev, &o, c);
	json_decref(ev);
	if (claims_out != NULL)
		*claims_out = c;
	else
		sl_claims_free(c);
	return rc;
}

static void claim_hex_at(const sl_claims *c, const char *key, const uint8_t *rep, size_t off,
                         size_t n)
{
	char hex[200];
	sl_hex_encode(rep + off, n, hex);
	const char *v = sl_claims_get(c, key);
	assert_non_null(v);
	assert_string_equal(v, hex);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void test_vectors_valid(void **state)
{
	(void)state;
	for (size_t i = 0; i < NVEC; i++) {
		const struct vec *v = &vecs[i];
		size_t len = 0;
		uint8_t *rep = load(v->report, &len);
		sl_claims *c = NULL;
		/* the binding: the report's own report_data at 0x50 */
		sl_err rc = verify(rep, len, v->key, v->vek, trust, v->at, rep + 0x50, 64, &c);
		if (rc != SL_OK)
			fail_msg("%s: %s", v->report, sl_err_detail());
		assert_string_equal(sl_claims_get(c, "tee.kind"), "sev-snp");
		assert_string_equal(sl_claims_get(c, "binding"), "verified");
		assert_string_equal(sl_claims_get(c, "snp.signing_key"), v->key);
		assert_string_equal(sl_claims_get(c, "snp.product"), v->product);
		claim_hex_at(c, "snp.measurement", rep, 0x90, 48);
		claim_hex_at(c, "snp.report_data", rep, 0x50, 64);
		claim_hex_at(c, "snp.host_data", rep, 0xC0, 32);
		claim_hex_at(c, "snp.id_key_digest", rep, 0xE0, 48);
		claim_hex_at(c, "snp.author_key_digest", rep, 0x110, 48);
		claim_hex_at(c, "snp.report_id", rep, 0x140, 32);
		claim_hex_at(c, "snp.chip_id", rep, 0x1A0, 64);
		char num[32];
		snprintf(num, sizeof(num), "%u", le32(rep + 0x04));
		assert_string_equal(sl_claims_get(c, "snp.guest_svn"), num);
		snprintf(num, sizeof(num), "%u", le32(rep + 0x30));
		assert_string_equal(sl_claims_get(c, "snp.vmpl"), num);
		snprintf(num, sizeof(num), "%u", v->version);
		assert_string_equal(sl_claims_get(c, "snp.version"), num);
		snprintf(num, sizeof(num), "%u", v->bl);
		assert_string_equal(sl_claims_get(c, "snp.reported_tcb.bootloader"), num);
		snprintf(num, sizeof(num), "%u", v->tee);
		assert_string_equal(sl_claims_get(c, "snp.reported_tcb.tee"), num);
		snprintf(num, sizeof(num), "%u", v->snp);
		assert_string_equal(sl_claims_get(c, "snp.reported_tcb.snp"), num);
		snprintf(num, sizeof(num), "%u", v->ucode);
		assert_string_equal(sl_claims_get(c, "snp.reported_tcb.microcode"), num);
		/* debug is policy bit 19: byte 0x0a bit 3 */
		assert_string_equal(sl_claims_get(c, "snp.policy.debug"),
		                    (rep[0x0A] & 8) ? "true" : "false");
		sl_claims_free(c);
		free(rep);
	}
}

/* README facts: gsg policy 0xb0000 has debug on; the VLEK report is VMPL1 and
 * v3 with cpuid; trustee report_data is 32 bytes then zeros. */
static void test_vector_specifics(void **state)
{
	(void)state;
	size_t len = 0;
	sl_claims *c = NULL;
	uint8_t *rep = load("gsg_milan_report.bin", &len);
	const uint8_t five[] = {1, 2, 3, 4, 5}; /* README: report_data=0102030405 then zeros */
	assert_int_equal(verify(rep, len, "vcek", "gsg_milan_vcek.der", trust, T2024, five, 5, &c),
	                 SL_OK);
	assert_string_equal(sl_claims_get(c, "snp.policy"), "0xb0000");
	assert_string_equal(sl_claims_get(c, "snp.policy.debug"), "true");
	assert_string_equal(sl_claims_get(c, "snp.policy.smt"), "true");
	assert_string_equal(sl_claims_get(c, "snp.policy.migrate_ma"), "false");
	assert_string_equal(sl_claims_get(c, "snp.platform_info.smt_en"), "true");
	assert_null(sl_claims_get(c, "snp.cpuid.family"));
	sl_claims_free(c);
	free(rep);

	rep = load("trustee_milan_vlek_report.bin", &len);
	assert_int_equal(
	    verify(rep, len, "vlek", "trustee_milan_vlek.der", trust, T2025, NULL, 0, &c), SL_OK);
	assert_string_equal(sl_claims_get(c, "binding"), "unchecked");
	assert_string_equal(sl_claims_get(c, "snp.vmpl"), "1");
	assert_string_equal(sl_claims_get(c, "snp.platform_info"), "0x27");
	assert_string_equal(sl_claims_get(c, "snp.current_tcb"), "dc18000000000004");
	assert_string_equal(sl_claims_get(c, "snp.committed_tcb"), "db18000000000004");
	assert_string_equal(sl_claims_get(c, "snp.cpuid.family"), "0x19");
	sl_claims_free(c);
	free(rep);

	rep = load("azure_genoa_v3_report.bin", &len);
	assert_int_equal(
	    verify(rep, len, "vcek", "azure_genoa_vcek.pem", trust, T2025, NULL, 0, &c), SL_OK);
	assert_string_equal(sl_claims_get(c, "snp.guest_svn"), "65547");
	assert_string_equal(sl_claims_get(c, "snp.cpuid.model"), "0x11");
	sl_claims_free(c);
	free(rep);
}

/* The VCEK may come from the collateral directory alone (KDS cache layout). */
static void test_vcek_from_collateral(void **state)
{
	(void)state;
	char dir[64], p[2048];
	tl_tmpdir(dir, sizeof(dir), "snpcoll");
	size_t len = 0;
	uint8_t *b = load("trust/ask_ark_milan.pem", &len);
	snprintf(p, sizeof(p), "%s/ask_ark_milan.pem", dir);
	assert_int_equal(sl_file_write_atomic(p, b, len, 0600, false), SL_OK);
	free(b);
	b = load("virtee_milan_vcek.der", &len);
	snprintf(p, sizeof(p), "%s/vcek.der", dir);
	assert_int_equal(sl_file_write_atomic(p, b, len, 0600, false), SL_OK);
	free(b);
	uint8_t *rep = load("virtee_milan_report.bin", &len);
	assert_int_equal(verify(rep, len, "vcek", NULL, dir, T2024, NULL, 0, NULL), SL_OK);
	/* no VCEK anywhere */
	assert_int_equal(unlink(p), 0);
	expect_fail(verify(rep, len, "vcek", NULL, dir, T2024, NULL, 0, NULL),
	            SL_E_ATTEST_UNTRUSTED, "none is in the collateral", "no VCEK");
	/* only the VLEK (ASVK) chain: the VCEK's issuer is missing */
	snprintf(p, sizeof(p), "%s/ask_ark_milan.pem", dir);
	assert_int_equal(unlink(p), 0);
	size_t blen = 0;
	b = load("trust/ask_ark_milan_vlek.pem", &blen);
	snprintf(p, sizeof(p), "%s/ask_ark_milan_vlek.pem", dir);
	assert_int_equal(sl_file_write_atomic(p, b, blen, 0600, false), SL_OK);
	free(b);
	expect_fail(verify(rep, len, "vcek", "virtee_milan_vcek.der", dir, T2024, NULL, 0, NULL),
	            SL_E_ATTEST_CHAIN, "chain invalid", "VCEK against the ASVK");
	assert_int_equal(unlink(p), 0);
	/* nothing at all */
	expect_fail(verify(rep, len, "vcek", "virtee_milan_vcek.der", dir, T2024, NULL, 0, NULL),
	            SL_E_ATTEST_UNTRUSTED, "no AMD ARK", "no ARK");
	assert_int_equal(rmdir(dir), 0);
	free(rep);
}

static void flip(uint8_t *rep, size_t off, uint8_t mask)
{
	rep[off] ^= mask;
}

static void test_tamper(void **state)
{
	(void)state;
	for (size_t i = 0; i < NVEC; i++) {
		const struct vec *v = &vecs[i];
		size_t len = 0;
		uint8_t *rep = load(v->report, &len);
		uint8_t *t = malloc(len);
		bool vlek = strcmp(v->key, "vlek") == 0;
#define TAMPER(off, mask, want, needle)                                                            \
	do {                                                                                       \
		memcpy(t, rep, len);                                                               \
		flip(t, (off), (mask));                                                            \
		expect_fail(verify(t, len, v->key, v->vek, trust, v->at, NULL, 0, NULL), (want),   \
		            (needle), v->report);                                                  \
	} while (0)
		TAMPER(0x90, 0x01, SL_E_ATTEST_SIG, "signature");       /* measurement */
		TAMPER(0x50, 0x80, SL_E_ATTEST_SIG, "signature");       /* report_data */
		TAMPER(0x0A, 0x08, SL_E_ATTEST_SIG, "signature");       /* policy.debug */
		TAMPER(0x04, 0x01, SL_E_ATTEST_SIG, "signature");       /* guest_svn */
		TAMPER(0x30, 0x02, SL_E_ATTEST_SIG, "signature");       /* vmpl */
		TAMPER(0x180, 0x01, SL_E_ATTEST_CHAIN, "TCB mismatch"); /* reported_tcb.bl */
		TAMPER(0x187, 0x01, SL_E_ATTEST_CHAIN, "TCB mismatch"); /* reported_tcb.ucode */
		TAMPER(0x2A0, 0x01, SL_E_ATTEST_SIG, "signature");      /* signature r */
		TAMPER(0x2E8, 0x01, SL_E_ATTEST_SIG, "signature");      /* signature s */
		TAMPER(0x2A, 0xFF, SL_E_ATTEST_SIG, "signature");       /* trustee: byte 42 */
		TAMPER(21, 0x80, SL_E_ATTEST_SIG, "signature");         /* virtee: byte 21 ^ 0x80 */
		if (!vlek)
			TAMPER(0x1A0, 0x01, SL_E_ATTEST_CHAIN, "hwID"); /* chip_id */
		else
			TAMPER(0x1A0, 0x01, SL_E_ATTEST_SIG, "signature");
		TAMPER(0x00, 0x04, SL_E_ATTEST_FORMAT, "version");   /* version 2/3 -> 6/7 */
		TAMPER(0x1F8, 0x01, SL_E_ATTEST_FORMAT, "reserved"); /* reserved */
		TAMPER(0x34, 0x02, SL_E_ATTEST_FORMAT, "signature_algo");
		TAMPER(0x400, 0x01, SL_E_ATTEST_FORMAT, "signature reserved");
#undef TAMPER
		/* the binding: a different expected value */
		uint8_t other[64];
		memcpy(other, rep + 0x50, 64);
		other[0] ^= 1;
		expect_fail(verify(rep, len, v->key, v->vek, trust, v->at, other, 64, NULL),
		            SL_E_ATTEST_BINDING, "binding", v->report);
		/* truncated / over-long */
		expect_fail(verify(rep, len - 1, v->key, v->vek, trust, v->at, NULL, 0, NULL),
		            SL_E_ATTEST_FORMAT, "1183 bytes", v->report);
		/* version 1 */
		memcpy(t, rep, len);
		t[0] = 1;
		expect_fail(verify(t, len, v->key, v->vek, trust, v->at, NULL, 0, NULL),
		            SL_E_ATTEST_FORMAT, "version 1", v->report);
		/* a VCEK from another chip */
		if (!vlek) {
			const char *other_vek =
			    i == 0 ? "virtee_milan_vcek.der" : "gsg_milan_vcek.der";
			expect_fail(
			    verify(rep, len, "vcek", other_vek, trust, v->at, NULL, 0, NULL),
			    SL_E_ATTEST_CHAIN, "hwID", v->report);
		}
		/* certificate times: before the VEK's notBefore (2020) */
		expect_fail(verify(rep, len, v->key, v->vek, trust, 1577836800, NULL, 0, NULL),
		            SL_E_ATTEST_CHAIN, "not yet valid", v->report);
		free(t);
		free(rep);
	}
}

/* README: the VLEK expires 2025-12-10 22:14:21Z: valid at 2025-06-01, not now / 2026. */
static void test_vlek_expired(void **state)
{
	(void)state;
	size_t len = 0;
	uint8_t *rep = load("trustee_milan_vlek_report.bin", &len);
	expect_fail(
	    verify(rep, len, "vlek", "trustee_milan_vlek.der", trust, 1767225600, NULL, 0, NULL),
	    SL_E_ATTEST_CHAIN, "expired", "VLEK at 2026-01-01");
	expect_fail(verify(rep, len, "vlek", "trustee_milan_vlek.der", trust, 0, NULL, 0, NULL),
	            SL_E_ATTEST_CHAIN, "expired", "VLEK now");
	/* the VLEK report with a VCEK: wrong key kind */
	expect_fail(verify(rep, len, "vcek", "trustee_milan_vcek.der", trust, T2025, NULL, 0, NULL),
	            SL_E_ATTEST_UNTRUSTED, "VLEK", "VLEK report, VCEK given");
	free(rep);
}

/* The synthetic VCEKs: both hwID encodings parse to 00 01 .. 3f, and their
 * signatures do not verify against the Milan ASK (README: chain failure). */
static void test_synthetic_hwid(void **state)
{
	(void)state;
	const char *names[] = {"trustee_synthetic_vcek_hwid_legacy.der",
	                       "trustee_synthetic_vcek_hwid_new.der"};
	size_t len = 0;
	uint8_t *rep = load("trustee_milan_report.bin", &len);
	for (int i = 0; i < 64; i++)
		rep[0x1A0 + i] = (uint8_t)i;
	for (size_t k = 0; k < 2; k++) {
		size_t dl = 0;
		uint8_t *der = load(names[k], &dl);
		X509 *x = NULL;
		assert_int_equal(sl_x509_from_der(der, dl, &x, names[k]), SL_OK);
		const ASN1_OCTET_STRING *os = sl_x509_ext(x, "1.3.6.1.4.1.3704.1.4");
		assert_non_null(os);
		assert_int_equal(ASN1_STRING_length(os), k == 0 ? 64 : 66);
		X509_free(x);
		free(der);
		/* hwID matches the patched chip_id, so the failure is the chain */
		expect_fail(verify(rep, len, "vcek", names[k], trust, T2024, NULL, 0, NULL),
		            SL_E_ATTEST_CHAIN, "signature failure", names[k]);
	}
	free(rep);
}

/* Turin: the chain verifies; FMC SVN extension present; TCB layout. */
static void test_turin(void **state)
{
	(void)state;
	size_t dl = 0, bl = 0;
	uint8_t *der = load("virtee_turin_vcek.der", &dl);
	uint8_t *bundle = load("trust/ask_ark_turin_vcek.pem", &bl);
	X509 *vcek = NULL;
	STACK_OF(X509) *st = sk_X509_new_null(), *roots = sk_X509_new_null(), *chain = NULL;
	assert_int_equal(sl_x509_from_der(der, dl, &vcek, "turin"), SL_OK);
	assert_int_equal(sl_x509_parse_blob(bundle, bl, st, NULL, "turin chain"), SL_OK);
	assert_int_equal(sk_X509_num(st), 2);
	sk_X509_push(roots, sk_X509_value(st, 1));
	assert_int_equal(sl_x509_verify_chain(vcek, st, roots, T2025, &chain, "Turin VCEK"), SL_OK);
	assert_int_equal(sk_X509_num(chain), 3);
	bool present = false;
	uint32_t fmc = 99;
	assert_int_equal(sl_x509_ext_uint(vcek, "1.3.6.1.4.1.3704.1.3.9", &present, &fmc, "turin"),
	                 SL_OK);
	assert_true(present);
	assert_int_equal(fmc, 0);
	/* Turin's hwID is the first 8 bytes of chip_id */
	assert_int_equal(ASN1_STRING_length(sl_x509_ext(vcek, "1.3.6.1.4.1.3704.1.4")), 8);
	sl_snp_tcb t;
	sl_snp_tcb_decode(0x4800000000050401ull, SL_SNP_PRODUCT_TURIN, &t);
	assert_int_equal(t.fmc, 1);
	assert_int_equal(t.bootloader, 4);
	assert_int_equal(t.tee, 5);
	assert_int_equal(t.snp, 0);
	assert_int_equal(t.microcode, 0x48);
	sl_snp_tcb_decode(0x4800000000050401ull, SL_SNP_PRODUCT_MILAN, &t);
	assert_int_equal(t.bootloader, 1);
	assert_int_equal(t.snp, 0);
	assert_int_equal(t.microcode, 0x48);
	/* outside the VCEK's validity (2024-11-06 .. 2031-11-06) */
	assert_int_equal(sl_x509_verify_chain(vcek, st, roots, T2024, NULL, "Turin VCEK"),
	                 SL_E_ATTEST_CHAIN);
	sk_X509_pop_free(chain, X509_free);
	sk_X509_free(roots);
	sk_X509_pop_free(st, X509_free);
	X509_free(vcek);
	free(der);
	free(bundle);
}

/* README: any report with any other VCEK from the folder: signature (or, for
 * a VCEK of another chip, the hwID check) fails, for all pairs. */
static void test_all_pairs(void **state)
{
	(void)state;
	for (size_t i = 0; i < NVEC; i++) {
		size_t len = 0;
		uint8_t *rep = load(vecs[i].report, &len);
		for (size_t j = 0; j < NVEC; j++) {
			if (j == i || strcmp(vecs[j].key, "vcek") != 0)
				continue;
			/* two vectors share a chip only when they share the VCEK file */
			if (strcmp(vecs[i].vek, vecs[j].vek) == 0)
				continue;
			sl_err rc =
			    verify(rep, len, "vcek", vecs[j].vek, trust, vecs[j].at, NULL, 0, NULL);
			if (rc == SL_OK)
				fail_msg("%s verified with %s", vecs[i].report, vecs[j].vek);
		}
		free(rep);
	}
}

/* README (trustee): add 1 to byte 42 of a VCEK's DER -> chain signature invalid. */
static void test_vcek_der_tamper(void **state)
{
	(void)state;
	size_t len = 0, dl = 0;
	uint8_t *rep = load("trustee_milan_report.bin", &len);
	uint8_t *der = load("trustee_milan_vcek.der", &dl);
	der[42]++;
	char dir[64], p[2048], q[2048];
	tl_tmpdir(dir, sizeof(dir), "snpder");
	snprintf(p, sizeof(p), "%s/vcek.der", dir);
	assert_int_equal(sl_file_write_atomic(p, der, dl, 0600, false), SL_OK);
	size_t bl = 0;
	uint8_t *b = load("trust/ask_ark_milan.pem", &bl);
	snprintf(q, sizeof(q), "%s/chain.pem", dir);
	assert_int_equal(sl_file_write_atomic(q, b, bl, 0600, false), SL_OK);
	expect_fail(verify(rep, len, "vcek", NULL, dir, T2024, NULL, 0, NULL), SL_E_ATTEST_CHAIN,
	            "certificate signature failure", "VCEK byte 42 + 1");
	assert_int_equal(tl_rmtree(dir), 0);
	free(b);
	free(der);
	free(rep);
}

/* The verification cache (attest/vcache.c): a second verification of the
 * same VCEK chain is served from it; a changed VCEK, a time past the
 * VCEK's notAfter and a changed report all fail with the cache warm. */
static void test_cache(void **state)
{
	(void)state;
	size_t len = 0, dl = 0, bl = 0;
	uint64_t h0 = 0, m0 = 0, h1 = 0, m1 = 0;
	uint8_t *rep = load("gsg_milan_report.bin", &len);
	uint8_t *der = load("gsg_milan_vcek.der", &dl);
	uint8_t *b = load("trust/ask_ark_milan.pem", &bl);
	char dir[64], p[2048], q[2048];
	tl_tmpdir(dir, sizeof(dir), "snpcache");
	snprintf(p, sizeof(p), "%s/vcek.der", dir);
	snprintf(q, sizeof(q), "%s/chain.pem", dir);
	assert_int_equal(sl_file_write_atomic(p, der, dl, 0600, false), SL_OK);
	assert_int_equal(sl_file_write_atomic(q, b, bl, 0600, false), SL_OK);
	sl_verify_cache_reset(false);
	assert_int_equal(verify(rep, len, "vcek", NULL, dir, T2024, NULL, 0, NULL), SL_OK);
	sl_verify_cache_stats(&h0, &m0);
	assert_true(m0 >= 1);
	/* (a) the same chain again: served, nothing verified again */
	assert_int_equal(verify(rep, len, "vcek", NULL, dir, T2024, NULL, 0, NULL), SL_OK);
	sl_verify_cache_stats(&h1, &m1);
	assert_int_equal(m1, m0);
	assert_true(h1 > h0);
	/* (b) one byte of the VCEK changed: another key, verified, refused */
	der[42]++;
	assert_int_equal(sl_file_write_atomic(p, der, dl, 0600, true), SL_OK);
	expect_fail(verify(rep, len, "vcek", NULL, dir, T2024, NULL, 0, NULL), SL_E_ATTEST_CHAIN,
	            "certificate signature failure", "VCEK byte 42 + 1, cache warm");
	der[42]--;
	assert_int_equal(sl_file_write_atomic(p, der, dl, 0600, true), SL_OK);
	assert_int_equal(verify(rep, len, "vcek", NULL, dir, T2024, NULL, 0, NULL), SL_OK);
	/* (c) past the VCEK's notAfter (2029-09-24) after a cached success */
	expect_fail(verify(rep, len, "vcek", NULL, dir, 1893456000 /* 2030-01-01 */, NULL, 0, NULL),
	            SL_E_ATTEST_CHAIN, "expired", "VCEK at 2030, cache warm");
	/* (d) the report's own signature, cache warm */
	rep[0x90] ^= 1;
	expect_fail(verify(rep, len, "vcek", NULL, dir, T2024, NULL, 0, NULL), SL_E_ATTEST_SIG,
	            "signature", "measurement flipped, cache warm");
	rep[0x90] ^= 1;
	/* off: every check runs each time */
	sl_verify_cache_reset(true);
	assert_int_equal(verify(rep, len, "vcek", NULL, dir, T2024, NULL, 0, NULL), SL_OK);
	sl_verify_cache_stats(&h1, &m1);
	assert_int_equal(h1, 0);
	sl_verify_cache_reset(false);
	assert_int_equal(tl_rmtree(dir), 0);
	free(b);
	free(der);
	free(rep);
}

#include "snp_test_forge.h"

static void test_parse_fields(void **state)
{
	(void)state;
	size_t len = 0;
	uint8_t *rep = load("trustee_milan_report.bin", &len);
	sl_snp_report r;
	assert_int_equal(sl_snp_report_parse(rep, len, &r), SL_OK);
	/* README field summary */
	assert_int_equal(r.version, 2);
	assert_int_equal(r.guest_svn, 4);
	assert_int_equal(r.policy, 0x3001f);
	assert_int_equal(r.current_tcb, 0xce08000000000003ull);
	assert_int_equal(r.reported_tcb, 0x7308000000000003ull);
	assert_int_equal(r.committed_tcb, 0x7308000000000003ull);
	assert_int_equal(r.launch_tcb, 0x7308000000000003ull);
	assert_false(r.has_cpuid);
	assert_false(r.has_mit);
	/* version 5 layout: the mitigation vectors at 0x1f8 / 0x200 */
	rep[0] = 5;
	rep[0x1F8] = 0x11;
	rep[0x200] = 0x22;
	assert_int_equal(sl_snp_report_parse(rep, len, &r), SL_OK);
	assert_true(r.has_mit);
	assert_true(r.has_cpuid);
	assert_int_equal(r.launch_mit_vector, 0x11);
	assert_int_equal(r.current_mit_vector, 0x22);
	rep[0x208] = 1;
	assert_int_equal(sl_snp_report_parse(rep, len, &r), SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "reserved 0x208"));
	rep[0x208] = 0;
	rep[0] = 2; /* v2: cpuid bytes are reserved */
	rep[0x1F8] = rep[0x200] = 0;
	rep[0x188] = 0x19;
	assert_int_equal(sl_snp_report_parse(rep, len, &r), SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "reserved 0x188"));
	rep[0x188] = 0;
	rep[0x0A] &= (uint8_t)~0x02; /* policy bit 17 must be one */
	assert_int_equal(sl_snp_report_parse(rep, len, &r), SL_E_ATTEST_FORMAT);
	rep[0x0A] |= 0x02;
	rep[0x48] = 0x1C; /* signing_key 7 (none) is allowed by the parser */
	assert_int_equal(sl_snp_report_parse(rep, len, &r), SL_OK);
	rep[0x48] = 0x08; /* signing_key 2: reserved */
	assert_int_equal(sl_snp_report_parse(rep, len, &r), SL_E_ATTEST_FORMAT);
	free(rep);
}

static void test_evidence_json_errors(void **state)
{
	(void)state;
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	sl_verify_opts o = {.no_binding = true, .collateral_dir = trust, .at = T2024};
	json_t *ev = json_pack("{s:s}", "kind", "sev-snp");
	expect_fail(sl_evidence_verify(ev, &o, c), SL_E_ATTEST_FORMAT, "report", "no report");
	json_object_set_new(ev, "report", json_string("@@@"));
	expect_fail(sl_evidence_verify(ev, &o, c), SL_E_ATTEST_FORMAT, "base64", "bad b64");
	json_object_set_new(ev, "report", json_string("AAAA"));
	json_object_set_new(ev, "certs", json_pack("{s:s}", "pck", "AAAA"));
	expect_fail(sl_evidence_verify(ev, &o, c), SL_E_ATTEST_FORMAT, "unknown certificate",
	            "unknown cert");
	json_object_set_new(ev, "certs", json_pack("{s:s}", "vcek", "AAAA"));
	expect_fail(sl_evidence_verify(ev, &o, c), SL_E_ATTEST_FORMAT, "vcek", "bad DER");
	json_decref(ev);
	/* no binding given and not no_binding */
	size_t len = 0;
	uint8_t *rep = load("gsg_milan_report.bin", &len);
	ev = evidence(rep, len, "vcek", "gsg_milan_vcek.der");
	o.no_binding = false;
	expect_fail(sl_evidence_verify(ev, &o, c), SL_E_ATTEST_BINDING, "no expected binding",
	            "no binding");
	json_decref(ev);
	free(rep);
	sl_claims_free(c);
}

#include "snp_test_tsm.h"

int main(void)
{
	tl_vector_path(trust, sizeof(trust), "amd-sev-snp/trust");
	assert_int_equal(sl_crypto_init(), SL_OK);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vectors_valid),
	    cmocka_unit_test(test_vector_specifics),
	    cmocka_unit_test(test_vcek_from_collateral),
	    cmocka_unit_test(test_tamper),
	    cmocka_unit_test(test_all_pairs),
	    cmocka_unit_test(test_vcek_der_tamper),
	    cmocka_unit_test(test_cache),
	    cmocka_unit_test(test_vlek_expired),
	    cmocka_unit_test(test_synthetic_hwid),
	    cmocka_unit_test(test_turin),
	    cmocka_unit_test(test_forged_chain),
	    cmocka_unit_test(test_vcek_per_tcb),
	    cmocka_unit_test(test_parse_fields),
	    cmocka_unit_test(test_evidence_json_errors),
	    cmocka_unit_test(test_tsm_fake_tree),
	    cmocka_unit_test(test_cert_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
