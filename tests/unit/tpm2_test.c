/* TPM 2.0: strict unmarshalling, quote verification on crafted (software-
 * signed) quotes, event-log replay on a crafted log, MakeCredential input
 * checks, and, against a real swtpm child, the credential round trip and
 * EK certificate verification. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "seclaunch/attest.h"
#include "seclaunch/secret.h"
#include "seclaunch/tpm2.h"
#include "testlib.h"
#include "tpm2_test_forge.h"
#include "tpm2_test_swtpm.h"

static const uint8_t nonce[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

static bool enrolled_yes(const uint8_t *name, size_t len, void *ctx)
{
	(void)ctx;
	return len == 34 && name[0] == 0x00 && name[1] == 0x0b;
}

static bool enrolled_no(const uint8_t *name, size_t len, void *ctx)
{
	(void)name, (void)len, (void)ctx;
	return false;
}

/* Verifies ev with the nonce above and the enrolled-AK callback. */
static sl_err verify(json_t *ev, bool (*enrolled)(const uint8_t *, size_t, void *), sl_claims **out)
{
	sl_verify_opts o = {.expect = nonce, .expect_len = sizeof(nonce), .ak_enrolled = enrolled};
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	sl_err rc = sl_evidence_verify(ev, &o, c);
	json_decref(ev);
	if (out != NULL)
		*out = c;
	else
		sl_claims_free(c);
	return rc;
}

static json_t *good(forge *f, const char *kind, TPMI_ALG_SIG_SCHEME s, TPMI_ALG_HASH h)
{
	forge_init(f, kind, s, h);
	forge_set_nonce(f, nonce, sizeof(nonce));
	forge_quote_info(f);
	return forge_evidence(f);
}

/* Verifies (and frees) evidence with the AK enrolled. */
static sl_err verify_enrolled(json_t *ev)
{
	return verify(ev, enrolled_yes, NULL);
}

static void test_good_schemes(void **state)
{
	(void)state;
	static const struct {
		const char *kind;
		TPMI_ALG_SIG_SCHEME s;
		TPMI_ALG_HASH h;
	} v[] = {
	    {"rsa", TPM2_ALG_RSASSA, TPM2_ALG_SHA256}, {"rsa", TPM2_ALG_RSASSA, TPM2_ALG_SHA384},
	    {"rsa", TPM2_ALG_RSAPSS, TPM2_ALG_SHA256}, {"rsa", TPM2_ALG_RSAPSS, TPM2_ALG_SHA384},
	    {"p256", TPM2_ALG_ECDSA, TPM2_ALG_SHA256}, {"p384", TPM2_ALG_ECDSA, TPM2_ALG_SHA384},
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		forge f;
		sl_claims *c = NULL;
		sl_err rc = verify(good(&f, v[i].kind, v[i].s, v[i].h), enrolled_yes, &c);
		if (rc != SL_OK)
			fail_msg("%s 0x%x 0x%x: %s", v[i].kind, v[i].s, v[i].h, sl_err_detail());
		assert_string_equal(sl_claims_get(c, "tee.kind"), "tpm2");
		assert_string_equal(sl_claims_get(c, "tpm.ak.trust"), "enrolled");
		assert_string_equal(sl_claims_get(c, "tpm.clock"), "123456");
		assert_string_equal(sl_claims_get(c, "tpm.reset_count"), "3");
		assert_string_equal(sl_claims_get(c, "tpm.restart_count"), "1");
		assert_string_equal(sl_claims_get(c, "tpm.safe"), "true");
		assert_string_equal(sl_claims_get(c, "tpm.firmware_version"), "2019102300163636");
		assert_string_equal(
		    sl_claims_get(c, "tpm.pcr.sha256.7"),
		    "1717171717171717171717171717171717171717171717171717171717171717");
		assert_string_equal(
		    sl_claims_get(c, "binding"),
		    "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20");
		assert_string_equal(sl_claims_get(c, "tpm.quote.hash"), sl_tpm2_hash_name(v[i].h));
		sl_claims_free(c);
		forge_free(&f);
	}
}

/* Each of these is signed correctly; one field is wrong. */
static void test_signed_but_wrong(void **state)
{
	(void)state;
	forge f;

	forge_init(&f, "rsa", TPM2_ALG_RSASSA, TPM2_ALG_SHA256);
	forge_set_nonce(&f, nonce, sizeof(nonce));
	forge_quote_info(&f);
	f.att.magic = 0xff544348;
	expect_fail(verify_enrolled(forge_evidence(&f)), SL_E_ATTEST, "TPMS_ATTEST.magic");
	f.att.magic = TPM2_GENERATED_VALUE;

	f.att.type = TPM2_ST_ATTEST_CERTIFY;
	expect_fail(verify_enrolled(forge_evidence(&f)), SL_E_ATTEST, "TPMS_ATTEST.type: 0x8017");
	f.att.type = TPM2_ST_ATTEST_QUOTE;

	forge_set_nonce(&f, nonce, 31);
	expect_fail(verify_enrolled(forge_evidence(&f)), SL_E_ATTEST_BINDING, "extraData");
	forge_set_nonce(&f, nonce, sizeof(nonce));
	f.att.extraData.buffer[31] ^= 1;
	expect_fail(verify_enrolled(forge_evidence(&f)), SL_E_ATTEST_BINDING, "extraData");
	forge_set_nonce(&f, nonce, sizeof(nonce));

	f.att.attested.quote.pcrDigest.buffer[0] ^= 1;
	expect_fail(verify_enrolled(forge_evidence(&f)), SL_E_ATTEST, "pcrDigest");
	forge_quote_info(&f);

	/* the AK says RSASSA-SHA256; a PSS signature is not its scheme */
	f.scheme = TPM2_ALG_RSAPSS;
	expect_fail(verify_enrolled(forge_evidence(&f)), SL_E_ATTEST_SIG, "is not the AK's");
	f.scheme = TPM2_ALG_RSASSA;

	f.pub.publicArea.objectAttributes &= ~TPMA_OBJECT_RESTRICTED;
	expect_fail(verify_enrolled(forge_evidence(&f)), SL_E_ATTEST_UNTRUSTED,
	            "restricted is not set");
	f.pub.publicArea.objectAttributes |= TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
	expect_fail(verify_enrolled(forge_evidence(&f)), SL_E_ATTEST_UNTRUSTED, "decrypt is set");
	f.pub.publicArea.objectAttributes &= ~(TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM);
	expect_fail(verify_enrolled(forge_evidence(&f)), SL_E_ATTEST_UNTRUSTED,
	            "fixedTPM is not set");
	f.pub.publicArea.objectAttributes |= TPMA_OBJECT_FIXEDTPM;

	assert_int_equal(verify(forge_evidence(&f), enrolled_no, NULL), SL_E_ATTEST_UNTRUSTED);
	assert_non_null(strstr(sl_err_detail(), "not enrolled"));
	assert_int_equal(verify(forge_evidence(&f), NULL, NULL), SL_E_ATTEST_UNTRUSTED);
	assert_non_null(strstr(sl_err_detail(), "AK not trusted"));
	assert_int_equal(verify(forge_evidence(&f), enrolled_yes, NULL), SL_OK);
	forge_free(&f);

	/* SHA-1 signatures are refused even when valid */
	forge_init(&f, "rsa", TPM2_ALG_RSASSA, TPM2_ALG_SHA1);
	forge_set_nonce(&f, nonce, sizeof(nonce));
	forge_quote_info(&f);
	expect_fail(verify_enrolled(forge_evidence(&f)), SL_E_ATTEST_SIG, "SHA-256/384/512 only");
	forge_free(&f);
}

/* How the trust options combine (no AK certificate in this evidence). */
static void test_trust_combinations(void **state)
{
	(void)state;
	char dir[64], cmd[512];
	forge f;
	json_t *ev;
	sl_claims *c = NULL;

	tl_tmpdir(dir, sizeof(dir), "tpm2-trust");
	snprintf(cmd, sizeof(cmd),
	         "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=t "
	         "-days 1 -keyout %s/k.pem -out %s/ca.pem >/dev/null 2>&1 && rm %s/k.pem",
	         dir, dir, dir);
	assert_int_equal(system(cmd), 0);
	ev = good(&f, "p256", TPM2_ALG_ECDSA, TPM2_ALG_SHA256);
	sl_verify_opts o = {.no_binding = true, .trust_dir = dir};

	/* --trust alone: the evidence has no AK certificate */
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_evidence_verify(ev, &o, c), SL_E_ATTEST_UNTRUSTED);
	assert_non_null(strstr(sl_err_detail(), "carries no AK certificate"));
	/* --trust and a registry that knows the AK: enrolled */
	o.ak_enrolled = enrolled_yes;
	assert_int_equal(sl_evidence_verify(ev, &o, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "tpm.ak.trust"), "enrolled");
	assert_string_equal(sl_claims_get(c, "binding"), "unchecked");
	/* ... and one that does not: the certificate's reason is given */
	o.ak_enrolled = enrolled_no;
	assert_int_equal(sl_evidence_verify(ev, &o, c), SL_E_ATTEST_UNTRUSTED);
	assert_non_null(strstr(sl_err_detail(), "carries no AK certificate"));
	sl_claims_free(c);
	json_decref(ev);
	forge_free(&f);
	assert_int_equal(tl_rmtree(dir), 0);
}

static void test_evidence_fields(void **state)
{
	(void)state;
	forge f;
	json_t *ev = good(&f, "p256", TPM2_ALG_ECDSA, TPM2_ALG_SHA256);

	json_t *e = json_deep_copy(ev);
	json_object_set_new(json_object_get(e, "pcrs"), "sha1", json_object());
	expect_fail(verify_enrolled(e), SL_E_ATTEST_FORMAT, "banks");
	e = json_deep_copy(ev);
	json_object_del(json_object_get(json_object_get(e, "pcrs"), "sha256"), "7");
	expect_fail(verify_enrolled(e), SL_E_ATTEST_FORMAT, "evidence.pcrs.sha256.7: missing");
	e = json_deep_copy(ev);
	json_object_set_new(json_object_get(json_object_get(e, "pcrs"), "sha256"), "2",
	                    json_string("00"));
	expect_fail(verify_enrolled(e), SL_E_ATTEST_FORMAT, "values, the quote selects");
	e = json_deep_copy(ev);
	json_object_set_new(e, "signature", json_string("not base64!"));
	expect_fail(verify_enrolled(e), SL_E_ATTEST_FORMAT, "signature");
	e = json_deep_copy(ev);
	json_object_set_new(e, "version", json_integer(2));
	expect_fail(verify_enrolled(e), SL_E_VERSION, "version");
	e = json_deep_copy(ev);
	json_object_set_new(e, "ak_name", json_string("000b00"));
	expect_fail(verify_enrolled(e), SL_E_ATTEST, "ak_name");
	e = json_deep_copy(ev);
	json_object_set_new(e, "kind", json_string("tpm3"));
	expect_fail(verify_enrolled(e), SL_E_ATTEST_FORMAT, "unknown kind");
	json_decref(ev);
	forge_free(&f);
}

static void test_unmarshal_strict(void **state)
{
	(void)state;
	forge f;
	uint8_t buf[sizeof(TPM2B_PUBLIC) + 8], name[SL_TPM2_NAME_MAX], d[32];
	size_t n = 0, nl = 0, dl = 0;
	TPM2B_PUBLIC p;
	TPMS_ATTEST a;
	TPMT_SIGNATURE s;

	forge_init(&f, "rsa", TPM2_ALG_RSASSA, TPM2_ALG_SHA256);
	assert_int_equal(Tss2_MU_TPM2B_PUBLIC_Marshal(&f.pub, buf, sizeof(buf), &n), 0);
	assert_int_equal(sl_tpm2_mu_public(buf, n, &p, "t"), SL_OK);
	assert_int_equal(sl_tpm2_ak_check(buf, n), SL_OK);
	/* the name is nameAlg || SHA-256 of the TPMT_PUBLIC bytes */
	assert_int_equal(sl_tpm2_public_name(buf, n, name, &nl), SL_OK);
	assert_int_equal(sl_tpm2_digest(TPM2_ALG_SHA256, buf + 2, n - 2, d, &dl), SL_OK);
	assert_int_equal(nl, 34);
	assert_memory_equal(name + 2, d, 32);
	assert_int_equal(sl_tpm2_mu_public(buf, n + 1, &p, "t"), SL_E_ATTEST_FORMAT); /* trailing */
	assert_non_null(strstr(sl_err_detail(), "trailing"));
	assert_int_equal(sl_tpm2_mu_public(buf, n - 1, &p, "t"), SL_E_ATTEST_FORMAT); /* short */
	buf[1]--; /* size one less than the public area */
	assert_int_equal(sl_tpm2_mu_public(buf, n, &p, "t"), SL_E_ATTEST_FORMAT);
	assert_int_equal(sl_tpm2_mu_public(buf, 0, &p, "t"), SL_E_ATTEST_FORMAT);
	const uint8_t empty[2] = {0, 0};
	assert_int_equal(sl_tpm2_mu_public(empty, 2, &p, "t"), SL_E_ATTEST_FORMAT);
	const uint8_t badtype[] = {0x00, 0x04, 0x12, 0x34, 0x00, 0x0b};
	assert_int_equal(sl_tpm2_mu_public(badtype, sizeof(badtype), &p, "t"), SL_E_ATTEST_FORMAT);

	forge_set_nonce(&f, nonce, sizeof(nonce));
	forge_quote_info(&f);
	n = 0;
	assert_int_equal(Tss2_MU_TPMS_ATTEST_Marshal(&f.att, buf, sizeof(buf), &n), 0);
	assert_int_equal(sl_tpm2_mu_attest(buf, n, &a), SL_OK);
	for (size_t cut = 0; cut < n; cut += 7)
		assert_int_equal(sl_tpm2_mu_attest(buf, cut, &a), SL_E_ATTEST_FORMAT);
	assert_int_equal(sl_tpm2_mu_attest(buf, n + 1, &a), SL_E_ATTEST_FORMAT);
	const uint8_t sig_null[] = {0x00, 0x10};
	assert_int_equal(sl_tpm2_mu_signature(sig_null, 2, &s), SL_OK);
	assert_int_equal(sl_tpm2_mu_signature(sig_null, 1, &s), SL_E_ATTEST_FORMAT);
	forge_free(&f);
}

/* ---- event log ------------------------------------------------------- */

static void le32(sl_writer *w, uint32_t v)
{
	assert_int_equal(sl_write_u32le(w, v), SL_OK);
}

static void ev2(sl_writer *w, uint32_t pcr, uint32_t type, const uint8_t *data, size_t len,
                uint8_t sha256[32])
{
	uint8_t d1[20];
	size_t l;
	le32(w, pcr);
	le32(w, type);
	le32(w, 2);
	assert_int_equal(sl_tpm2_digest(TPM2_ALG_SHA1, data, len, d1, &l), SL_OK);
	assert_int_equal(sl_write_u16le(w, TPM2_ALG_SHA1), SL_OK);
	assert_int_equal(sl_write_bytes(w, d1, 20), SL_OK);
	assert_int_equal(sl_tpm2_digest(TPM2_ALG_SHA256, data, len, sha256, &l), SL_OK);
	assert_int_equal(sl_write_u16le(w, TPM2_ALG_SHA256), SL_OK);
	assert_int_equal(sl_write_bytes(w, sha256, 32), SL_OK);
	le32(w, (uint32_t)len);
	assert_int_equal(sl_write_bytes(w, data, len), SL_OK);
}

static void extend(uint8_t pcr[32], const uint8_t d[32])
{
	uint8_t b[64];
	size_t l;
	memcpy(b, pcr, 32);
	memcpy(b + 32, d, 32);
	assert_int_equal(sl_tpm2_digest(TPM2_ALG_SHA256, b, 64, pcr, &l), SL_OK);
}

/* A crypto-agile log: Spec ID header, StartupLocality 3, one PCR 0 event
 * and the SecureBoot variable (value sb) in PCR 7; pcrs gets the replay. */
static void make_log(sl_writer *w, uint8_t sb, sl_tpm2_pcrs *pcrs)
{
	static const uint8_t sig[16] = "Spec ID Event03";
	uint8_t d[32], var[16 + 8 + 8 + 20 + 1] = {0};
	uint8_t loc[17] = "StartupLocality";
	const char *name = "SecureBoot";

	sl_writer_init(w, 0);
	le32(w, 0);
	le32(w, 3);
	assert_int_equal(sl_write_zeros(w, 20), SL_OK);
	le32(w, 16 + 4 + 4 + 4 + 2 * 4 + 1);
	assert_int_equal(sl_write_bytes(w, sig, 16), SL_OK);
	le32(w, 0);
	le32(w, 0x00020000); /* version 2.0, errata 0, uintn 2 */
	le32(w, 2);
	assert_int_equal(sl_write_u16le(w, TPM2_ALG_SHA1), SL_OK);
	assert_int_equal(sl_write_u16le(w, 20), SL_OK);
	assert_int_equal(sl_write_u16le(w, TPM2_ALG_SHA256), SL_OK);
	assert_int_equal(sl_write_u16le(w, 32), SL_OK);
	assert_int_equal(sl_write_u8(w, 0), SL_OK);
	memset(pcrs, 0, sizeof(*pcrs));
	pcrs->nbanks = 1;
	pcrs->alg[0] = TPM2_ALG_SHA256;
	pcrs->set[0] = 0x83;
	loc[16] = 3;
	ev2(w, 0, 3, loc, sizeof(loc), d);
	pcrs->value[0][0][31] = 3;
	ev2(w, 0, 0x80000008, (const uint8_t *)"firmware", 8, d);
	extend(pcrs->value[0][0], d);
	var[16] = 10;
	var[24] = 1;
	for (int i = 0; i < 10; i++)
		var[32 + 2 * i] = (uint8_t)name[i];
	var[52] = sb;
	ev2(w, 7, 0x80000001, var, sizeof(var), d);
	extend(pcrs->value[0][7], d);
}

static void test_eventlog(void **state)
{
	(void)state;
	sl_writer w;
	sl_tpm2_pcrs pcrs;
	sl_claims *c = NULL;

	assert_int_equal(sl_claims_new(&c), SL_OK);
	make_log(&w, 1, &pcrs);
	assert_int_equal(sl_tpm2_eventlog_parse(w.data, w.len), SL_OK);
	assert_int_equal(sl_tpm2_eventlog_check(w.data, w.len, &pcrs, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "tpm.secure_boot"), "enabled");
	assert_string_equal(sl_claims_get(c, "tpm.eventlog.pcrs"), "0,7");
	/* a quoted value the log does not reproduce */
	pcrs.value[0][7][0] ^= 1;
	assert_int_equal(sl_tpm2_eventlog_check(w.data, w.len, &pcrs, c), SL_E_ATTEST);
	assert_non_null(strstr(sl_err_detail(), "replay of PCR sha256.7"));
	pcrs.value[0][7][0] ^= 1;
	/* SecureBoot data that is not what its digest measured */
	w.data[w.len - 1] ^= 1;
	assert_int_equal(sl_tpm2_eventlog_check(w.data, w.len, &pcrs, c), SL_E_ATTEST);
	assert_non_null(strstr(sl_err_detail(), "SecureBoot"));
	for (size_t cut = 1; cut < w.len; cut += 13)
		assert_int_equal(sl_tpm2_eventlog_parse(w.data, w.len - cut), SL_E_ATTEST_FORMAT);
	w.data[32] = 'X'; /* the Spec ID signature */
	assert_int_equal(sl_tpm2_eventlog_parse(w.data, w.len), SL_E_ATTEST_FORMAT);
	sl_writer_free(&w);
	make_log(&w, 0, &pcrs);
	assert_int_equal(sl_tpm2_eventlog_check(w.data, w.len, &pcrs, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "tpm.secure_boot"), "disabled");
	pcrs.set[0] = 0x03; /* PCR 7 not quoted: the state is not known */
	assert_int_equal(sl_tpm2_eventlog_check(w.data, w.len, &pcrs, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "tpm.secure_boot"), "unknown");
	sl_writer_free(&w);
	sl_claims_free(c);
}

/* ---- credentials ------------------------------------------------------ */

static void test_make_credential_inputs(void **state)
{
	(void)state;
	forge f;
	uint8_t pub[sizeof(TPM2B_PUBLIC)], name[34] = {0x00, 0x0b}, cred[33] = {0};
	uint8_t *blob = NULL, *sec = NULL;
	size_t n = 0, bl, sl;

	forge_init(&f, "rsa", TPM2_ALG_RSASSA, TPM2_ALG_SHA256);
	assert_int_equal(Tss2_MU_TPM2B_PUBLIC_Marshal(&f.pub, pub, sizeof(pub), &n), 0);
	/* a signing key is not an EK */
	assert_int_equal(sl_tpm2_make_credential(pub, n, name, 34, cred, 16, &blob, &bl, &sec, &sl),
	                 SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "restricted decryption"));
	f.pub.publicArea.objectAttributes ^= TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_DECRYPT;
	f.pub.publicArea.parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_AES;
	f.pub.publicArea.parameters.rsaDetail.symmetric.keyBits.aes = 128;
	f.pub.publicArea.parameters.rsaDetail.symmetric.mode.aes = TPM2_ALG_CFB;
	f.pub.publicArea.parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
	n = 0;
	assert_int_equal(Tss2_MU_TPM2B_PUBLIC_Marshal(&f.pub, pub, sizeof(pub), &n), 0);
	assert_int_equal(sl_tpm2_make_credential(pub, n, name, 34, cred, 16, &blob, &bl, &sec, &sl),
	                 SL_OK);
	assert_int_equal(sec[0] << 8 | sec[1], 256); /* OAEP to a 2048-bit EK */
	assert_int_equal(bl, 2 + 2 + 32 + 2 + 16);
	free(blob);
	free(sec);
	assert_int_equal(sl_tpm2_make_credential(pub, n, name, 34, cred, 33, &blob, &bl, &sec, &sl),
	                 SL_E_INPUT);
	assert_int_equal(sl_tpm2_make_credential(pub, n, name, 34, cred, 0, &blob, &bl, &sec, &sl),
	                 SL_E_INPUT);
	assert_int_equal(sl_tpm2_make_credential(pub, n, name, 33, cred, 16, &blob, &bl, &sec, &sl),
	                 SL_E_INPUT);
	assert_int_equal(
	    sl_tpm2_make_credential(pub, n - 1, name, 34, cred, 16, &blob, &bl, &sec, &sl),
	    SL_E_ATTEST_FORMAT);
	forge_free(&f);
}

static void roundtrip(sl_tpm2_alg ek_alg, sl_tpm2_alg ak_alg)
{
	swtpm a, b;
	sl_tpm2_material ma, mb;
	sl_tpm2_key_opts oa = {.ek_alg = ek_alg, .ak_alg = ak_alg}, ob = oa;
	uint8_t cred[32], *blob = NULL, *sec = NULL;
	size_t bl, sl;
	sl_secret *out = NULL;

	if (!have_swtpm())
		skip();
	assert_true(swtpm_start(&a, NULL));
	assert_true(swtpm_start(&b, NULL));
	oa.tcti = a.tcti;
	ob.tcti = b.tcti;
	if (sl_tpm2_enrollment_material(&oa, &ma) != SL_OK)
		fail_msg("material: %s", sl_err_detail());
	assert_int_equal(sl_tpm2_enrollment_material(&ob, &mb), SL_OK);
	assert_int_equal(ma.ak_handle,
	                 ak_alg == SL_TPM2_ALG_ECC ? SL_TPM2_AK_HANDLE_ECC : SL_TPM2_AK_HANDLE_RSA);
	assert_int_equal(sl_tpm2_ak_check(ma.ak_public, ma.ak_public_len), SL_OK);
	assert_null(ma.ek_cert); /* a fresh swtpm has no EK certificate */

	/* the right TPM recovers the credential */
	sl_random(cred, sizeof(cred));
	assert_int_equal(sl_tpm2_make_credential(ma.ek_public, ma.ek_public_len, ma.ak_name,
	                                         ma.ak_name_len, cred, sizeof(cred), &blob, &bl,
	                                         &sec, &sl),
	                 SL_OK);
	if (sl_tpm2_activate_credential(&oa, blob, bl, sec, sl, &out) != SL_OK)
		fail_msg("activate: %s", sl_err_detail());
	assert_int_equal(sl_secret_len(out), sizeof(cred));
	assert_memory_equal(sl_secret_data(out), cred, sizeof(cred));
	sl_secret_free(out);
	out = NULL;
	/* On the wire the credential is encrypted (EK-salted session): record
	 * the TPM traffic with the pcap TCTI and look for it. The blob we send
	 * is there in the clear, which shows the capture works. */
	{
		char pcap[128], tcti[96];
		uint8_t *cap = NULL;
		size_t caplen = 0;
		sl_tpm2_key_opts op = oa;
		snprintf(pcap, sizeof(pcap), "%s/activate.pcap", a.dir);
		snprintf(tcti, sizeof(tcti), "pcap:%s", a.tcti);
		setenv("TCTI_PCAP_FILE", pcap, 1);
		op.tcti = tcti;
		if (sl_tpm2_activate_credential(&op, blob, bl, sec, sl, &out) != SL_OK)
			fail_msg("activate through pcap: %s", sl_err_detail());
		assert_memory_equal(sl_secret_data(out), cred, sizeof(cred));
		sl_secret_free(out);
		out = NULL;
		unsetenv("TCTI_PCAP_FILE");
		assert_int_equal(sl_file_read(pcap, 1u << 20, &cap, &caplen), SL_OK);
		assert_non_null(memmem(cap, caplen, blob + 2, bl - 2));
		assert_null(memmem(cap, caplen, cred, sizeof(cred)));
		free(cap);
	}
	/* another TPM (its own EK, its own AK) cannot */
	assert_int_equal(sl_tpm2_activate_credential(&ob, blob, bl, sec, sl, &out), SL_E_ATTEST);
	assert_null(out);
	/* ... and that TPM still works afterwards */
	sl_tpm2_material_free(&mb);
	assert_int_equal(sl_tpm2_enrollment_material(&ob, &mb), SL_OK);
	free(blob);
	free(sec);
	/* made for TPM b's EK but this TPM's AK name: TPM a cannot open it */
	assert_int_equal(sl_tpm2_make_credential(mb.ek_public, mb.ek_public_len, ma.ak_name,
	                                         ma.ak_name_len, cred, sizeof(cred), &blob, &bl,
	                                         &sec, &sl),
	                 SL_OK);
	assert_int_equal(sl_tpm2_activate_credential(&oa, blob, bl, sec, sl, &out), SL_E_ATTEST);
	free(blob);
	free(sec);
	/* made for this TPM's EK but another AK's name */
	assert_int_equal(sl_tpm2_make_credential(ma.ek_public, ma.ek_public_len, mb.ak_name,
	                                         mb.ak_name_len, cred, sizeof(cred), &blob, &bl,
	                                         &sec, &sl),
	                 SL_OK);
	assert_int_equal(sl_tpm2_activate_credential(&oa, blob, bl, sec, sl, &out), SL_E_ATTEST);
	/* activation never creates an AK: an empty handle is an error */
	sl_tpm2_key_opts none = oa;
	none.ak_handle = 0x81010099;
	assert_int_equal(sl_tpm2_activate_credential(&none, blob, bl, sec, sl, &out), SL_E_TPM);
	assert_non_null(strstr(sl_err_detail(), "no AK at persistent handle 0x81010099"));
	/* a blob cut short is refused before the TPM sees it */
	assert_int_equal(sl_tpm2_activate_credential(&oa, blob, bl - 1, sec, sl, &out),
	                 SL_E_ATTEST_FORMAT);
	free(blob);
	free(sec);
	/* the AK is stable: asking again gives the same name */
	sl_tpm2_material_free(&mb);
	assert_int_equal(sl_tpm2_enrollment_material(&oa, &mb), SL_OK);
	assert_memory_equal(mb.ak_name, ma.ak_name, ma.ak_name_len);
	sl_tpm2_material_free(&ma);
	sl_tpm2_material_free(&mb);
	swtpm_stop(&a);
	swtpm_stop(&b);
}

static void test_credential_rsa_ek(void **state)
{
	(void)state;
	roundtrip(SL_TPM2_ALG_RSA, SL_TPM2_ALG_RSA);
}

static void test_credential_ecc_ek(void **state)
{
	(void)state;
	roundtrip(SL_TPM2_ALG_ECC, SL_TPM2_ALG_ECC);
}

/* swtpm_setup + swtpm_localca write an EK certificate into NV. */
static void test_ek_certificate(void **state)
{
	(void)state;
	char dir[64], cmd[1024], state_dir[96], ca[96];
	swtpm t;
	sl_tpm2_material m;
	sl_tpm2_key_opts o = {0};

	if (!have_swtpm() || system("command -v swtpm_setup >/dev/null 2>&1") != 0)
		skip();
	tl_tmpdir(dir, sizeof(dir), "tpm2-ekcert");
	snprintf(state_dir, sizeof(state_dir), "%s/state", dir);
	snprintf(ca, sizeof(ca), "%s/ca", dir);
	snprintf(
	    cmd, sizeof(cmd),
	    "set -e; d=%s; mkdir -p $d/state $d/ca; "
	    "printf 'statedir = %%s\\nsigningkey = %%s\\nissuercert = %%s\\ncertserial = %%s\\n' "
	    "$d/ca $d/ca/signkey.pem $d/ca/issuercert.pem $d/ca/certserial >$d/localca.conf; "
	    "printf 'create_certs_tool = /usr/bin/swtpm_localca\\ncreate_certs_tool_config = "
	    "%%s\\ncreate_certs_tool_options = /etc/swtpm-localca.options\\n' $d/localca.conf "
	    ">$d/setup.conf; swtpm_setup --tpm2 --create-ek-cert --tpmstate $d/state --config "
	    "$d/setup.conf >/dev/null 2>&1",
	    dir);
	assert_int_equal(system(cmd), 0);
	assert_true(swtpm_start(&t, state_dir));
	o.tcti = t.tcti;
	assert_int_equal(sl_tpm2_enrollment_material(&o, &m), SL_OK);
	assert_non_null(m.ek_cert);
	/* the certificate chains to the local CA and certifies this EK */
	if (sl_tpm2_ek_cert_verify(m.ek_cert, m.ek_cert_len, ca, 0, m.ek_public, m.ek_public_len) !=
	    SL_OK)
		fail_msg("%s", sl_err_detail());
	/* ... and to no other CA */
	char other[96];
	snprintf(other, sizeof(other), "%s/other", dir);
	snprintf(cmd, sizeof(cmd),
	         "mkdir -p %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
	         "-nodes -subj /CN=other -days 1 -keyout %s/k.pem -out %s/ca.pem >/dev/null 2>&1 "
	         "&& rm %s/k.pem",
	         other, other, other, other);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(sl_tpm2_ek_cert_verify(m.ek_cert, m.ek_cert_len, other, 0, m.ek_public,
	                                        m.ek_public_len),
	                 SL_E_ATTEST_CHAIN);
	/* ... and not for another EK (this TPM's ECC EK) */
	sl_tpm2_material me;
	o.ek_alg = SL_TPM2_ALG_ECC;
	o.ak_alg = SL_TPM2_ALG_ECC;
	assert_int_equal(sl_tpm2_enrollment_material(&o, &me), SL_OK);
	assert_int_equal(
	    sl_tpm2_ek_cert_verify(m.ek_cert, m.ek_cert_len, ca, 0, me.ek_public, me.ek_public_len),
	    SL_E_ATTEST_UNTRUSTED);
	sl_tpm2_material_free(&me);
	sl_tpm2_material_free(&m);
	swtpm_stop(&t);
	assert_int_equal(tl_rmtree(dir), 0);
}

/* Verifiers keep the keys they built from AK public areas: a kept key is
 * used again only for the very same public area. An AK verified once (its
 * key kept) must not lend that key to another AK: a quote signed with the
 * first AK's key but naming the second's public area fails, and the second
 * AK's own quote verifies. */
static void test_ak_key_cache(void **state)
{
	(void)state;
	static const struct {
		const char *kind;
		TPMI_ALG_SIG_SCHEME s;
	} v[] = {{"rsa", TPM2_ALG_RSASSA}, {"p256", TPM2_ALG_ECDSA}};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		forge a, b, c;
		forge_init(&a, v[i].kind, v[i].s, TPM2_ALG_SHA256);
		forge_init(&b, v[i].kind, v[i].s, TPM2_ALG_SHA256);
		forge_set_nonce(&a, nonce, sizeof(nonce));
		forge_quote_info(&a);
		forge_set_nonce(&b, nonce, sizeof(nonce));
		forge_quote_info(&b);
		assert_int_equal(verify_enrolled(forge_evidence(&a)), SL_OK);
		assert_int_equal(verify_enrolled(forge_evidence(&a)), SL_OK); /* a's key kept */
		/* signed by a's key, naming b's public area */
		c = a;
		c.pub = b.pub;
		c.att.qualifiedSigner = b.att.qualifiedSigner;
		expect_fail(verify_enrolled(forge_evidence(&c)), SL_E_ATTEST_SIG,
		            "does not verify");
		assert_int_equal(verify_enrolled(forge_evidence(&b)), SL_OK);
		/* and the other way round, b's key now kept too */
		c = b;
		c.pub = a.pub;
		c.att.qualifiedSigner = a.att.qualifiedSigner;
		expect_fail(verify_enrolled(forge_evidence(&c)), SL_E_ATTEST_SIG,
		            "does not verify");
		forge_free(&a);
		forge_free(&b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good_schemes),           cmocka_unit_test(test_signed_but_wrong),
	    cmocka_unit_test(test_trust_combinations),     cmocka_unit_test(test_evidence_fields),
	    cmocka_unit_test(test_unmarshal_strict),       cmocka_unit_test(test_eventlog),
	    cmocka_unit_test(test_make_credential_inputs), cmocka_unit_test(test_credential_rsa_ek),
	    cmocka_unit_test(test_credential_ecc_ek),      cmocka_unit_test(test_ek_certificate),
	    cmocka_unit_test(test_ak_key_cache),
	};
	if (sl_crypto_init() != SL_OK)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
