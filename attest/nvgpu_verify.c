/* The "nvidia-gpu" evidence kind, verification:
 * {"kind":"nvidia-gpu","report":b64,"certs":b64 PEM chain leaf first,
 *  "driver":{...} (optional, unsigned, see docs/evidence-nvidia-gpu.md)},
 * or a machine's GPUs in one item: {"kind":"nvidia-gpu","gpus":[{"report",
 * "certs"},...],"driver":{...}}, each GPU verified alone, then as one set.
 * Order: parse the report; the chain up to the pinned NVIDIA Device
 * Identity CA at opts->at; the leaf's FWID (TCG DICE TcbInfo) against the
 * report's; the report
 * signature with the leaf key; the request nonce against the binding. */
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

#include "dice_tcbinfo.h"
#include "kinds.h"
#include "nvgpu_int.h"
#include "nvgpu_report.h"
#include "x509_util.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"

#define MAX_REPORT_B64 12000
#define MAX_CERTS_B64 65536
#define MAX_CHAIN 8
#define MAX_SET_GPUS 64 /* as nvgpu_set.c */

/* SHA-256 of the DER of "CN = NVIDIA Device Identity CA, O = NVIDIA"
 * (notBefore 2021-11-05, notAfter 9999-12-31), the root of every NVIDIA GPU
 * device-identity chain; the same certificate as the test vector
 * tests/vectors: nvidia-gpu/nvidia_device_identity_root.pem. */
static const uint8_t sl_nvgpu_root_sha256[32] = {
    0x10, 0x2b, 0xf6, 0x59, 0xd5, 0x41, 0x96, 0x14, 0xc9, 0xd8, 0xe6, 0xae, 0xce, 0xbc, 0x80, 0x45,
    0x4e, 0xb2, 0x6b, 0x1d, 0xf6, 0xa7, 0x69, 0xac, 0x72, 0x0b, 0x9a, 0x69, 0x0b, 0x16, 0x7b, 0x48,
};

/* The leaf's FWID: from the standard DiceTcbInfo under 2.23.133.5.4.1.1
 * (Blackwell) or 2.23.133.5.4.1 (the first FWID of its list), or from
 * Hopper's own layout under 2.23.133.5.4.1; when both extensions are there
 * they must name the same firmware. */
static SL_RESULT leaf_fwid(X509 *leaf, uint8_t fwid[static 48], sl_dice_tcbinfo *tcb, bool *has_tcb)
{
	sl_err rc = SL_E_ATTEST_CHAIN;
	const char *oids[] = {SL_DICE_OID_TCBINFO_1, SL_DICE_OID_TCBINFO};
	bool found = false;
	sl_dice_tcbinfo t;
	sl_dice_fwid f;

	*has_tcb = false;
	for (size_t i = 0; i < 2; i++) {
		const ASN1_OCTET_STRING *ext = sl_x509_ext(leaf, oids[i]);
		if (ext == NULL)
			continue;
		const uint8_t *der = ASN1_STRING_get0_data(ext);
		size_t len = (size_t)ASN1_STRING_length(ext);
		if (i == 0 || sl_dice_is_standard(der, len)) {
			rc = sl_dice_tcbinfo_parse(der, len, &t);
			if (rc != SL_OK)
				SL_GUARD(sl_err_wrap(SL_E_ATTEST_CHAIN,
				                     "GPU certificate: extension %s", oids[i]));
			SL_ENSURE(t.nfwids > 0, SL_E_ATTEST_CHAIN,
			          "GPU certificate: the DICE TcbInfo (%s) lists no FWID", oids[i]);
			f = t.fwids[0];
			if (!*has_tcb)
				*tcb = t;
			*has_tcb = true;
		} else {
			rc = sl_dice_nv_hopper_parse(der, len, &f);
			if (rc != SL_OK)
				SL_GUARD(sl_err_wrap(SL_E_ATTEST_CHAIN,
				                     "GPU certificate: extension %s", oids[i]));
		}
		SL_ENSURE(
		    sl_dice_fwid_is_sha384(&f), SL_E_ATTEST_CHAIN,
		    "GPU certificate: the FWID of %s is not a 48-byte SHA-384 digest (%zu bytes)",
		    oids[i], f.digest.len);
		SL_ENSURE(!found || sl_ct_eq(fwid, f.digest.p, 48), SL_E_ATTEST_CHAIN,
		          "GPU certificate: the FWIDs of %s and %s differ", oids[0], oids[1]);
		memcpy(fwid, f.digest.p, 48);
		found = true;
	}
	SL_ENSURE(found, SL_E_ATTEST_CHAIN,
	          "GPU certificate chain: the first certificate has no FWID extension (TCG DICE "
	          "TcbInfo %s or %s): it is not the GPU's attestation certificate",
	          SL_DICE_OID_TCBINFO_1, SL_DICE_OID_TCBINFO);
	rc = SL_OK;
out:
	return rc;
}

/* The chain must reach a root whose fingerprint is the pinned one; the root
 * may travel in the chain itself or come from the collateral directory. */
static SL_RESULT verify_chain(STACK_OF(X509) * certs, const sl_verify_opts *o)
{
	sl_err rc = SL_E_ATTEST_CHAIN;
	STACK_OF(X509) *roots = sk_X509_new_null(), *untrusted = sk_X509_new_null();
	STACK_OF(X509) *extra = sk_X509_new_null();
	uint8_t fp[32], test_root[32];
	/* NULL in every product build (nvgpu_int.h) */
	bool has_test_root = sl_nvgpu_test_root != NULL && sl_nvgpu_test_root(test_root);

	SL_ENSURE(roots != NULL && untrusted != NULL && extra != NULL, SL_E_NOMEM, "GPU chain");
	SL_ENSURE(sk_X509_num(certs) >= 2, SL_E_ATTEST_CHAIN,
	          "GPU certificate chain: %d certificate(s); it must hold at least the GPU's "
	          "attestation certificate and the root",
	          sk_X509_num(certs));
	SL_ENSURE(sk_X509_num(certs) <= MAX_CHAIN, SL_E_ATTEST_CHAIN,
	          "GPU certificate chain: %d certificates, more than %d", sk_X509_num(certs),
	          MAX_CHAIN);
	if (o->collateral_dir != NULL)
		SL_GUARD(sl_x509_load_dir(o->collateral_dir, extra, NULL));
	for (int i = 0; i < sk_X509_num(certs) + sk_X509_num(extra); i++) {
		bool in_chain = i < sk_X509_num(certs);
		X509 *x = in_chain ? sk_X509_value(certs, i)
		                   : sk_X509_value(extra, i - sk_X509_num(certs));
		sl_x509_fingerprint(x, fp);
		bool pinned = CRYPTO_memcmp(fp, sl_nvgpu_root_sha256, 32) == 0 ||
		              (has_test_root && CRYPTO_memcmp(fp, test_root, 32) == 0);
		if (pinned)
			SL_ENSURE(sk_X509_push(roots, x) > 0, SL_E_NOMEM, "GPU chain");
		else if (in_chain && i > 0)
			SL_ENSURE(sk_X509_push(untrusted, x) > 0, SL_E_NOMEM, "GPU chain");
	}
	SL_ENSURE(sk_X509_num(roots) > 0, SL_E_ATTEST_CHAIN,
	          "GPU certificate chain: no certificate is the pinned NVIDIA Device Identity CA "
	          "(SHA-256 102bf659...167b48); the chain ends at an untrusted root");
	SL_GUARD(sl_x509_verify_chain(sk_X509_value(certs, 0), untrusted, roots, o->at, NULL,
	                              "GPU certificate chain"));
	rc = SL_OK;
out:
	sk_X509_free(roots);
	sk_X509_free(untrusted);
	sk_X509_pop_free(extra, X509_free);
	return rc;
}

/* ECDSA P-384 over SHA-384 of request || response-without-signature. */
static SL_RESULT verify_signature(const sl_nvgpu_report *r, X509 *leaf)
{
	sl_err rc = SL_E_ATTEST_SIG;
	EVP_PKEY *key = X509_get0_pubkey(leaf);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	ECDSA_SIG *sig = ECDSA_SIG_new();
	BIGNUM *br = BN_bin2bn(r->sig, 48, NULL), *bs = BN_bin2bn(r->sig + 48, 48, NULL);
	unsigned char *der = NULL;
	char group[64] = "";
	size_t glen = 0;

	SL_GUARD_OSSL(md != NULL && sig != NULL && br != NULL && bs != NULL, SL_E_NOMEM,
	              "GPU report signature");
	SL_ENSURE(key != NULL && EVP_PKEY_is_a(key, "EC") &&
	              EVP_PKEY_get_utf8_string_param(key, "group", group, sizeof(group), &glen) ==
	                  1 &&
	              strcmp(group, "secp384r1") == 0,
	          SL_E_ATTEST_SIG, "GPU certificate: the attestation key is not ECDSA P-384");
	/* a certificate limited to other uses (a CA's certSign) must not sign reports */
	SL_ENSURE((X509_get_extension_flags(leaf) & EXFLAG_KUSAGE) == 0 ||
	              (X509_get_key_usage(leaf) & KU_DIGITAL_SIGNATURE) != 0,
	          SL_E_ATTEST_SIG,
	          "GPU certificate: the attestation certificate's keyUsage lacks digitalSignature");
	SL_GUARD_OSSL(ECDSA_SIG_set0(sig, br, bs) == 1, SL_E_CRYPTO, "GPU report signature");
	br = bs = NULL;
	int dlen = i2d_ECDSA_SIG(sig, &der);
	SL_GUARD_OSSL(dlen > 0, SL_E_CRYPTO, "GPU report signature encoding");
	SL_GUARD_OSSL(EVP_DigestVerifyInit(md, NULL, EVP_sha384(), NULL, key) == 1, SL_E_CRYPTO,
	              "GPU report signature");
	int ok = EVP_DigestVerify(md, der, (size_t)dlen, r->signed_data, r->signed_len);
	ERR_clear_error();
	SL_ENSURE(ok == 1, SL_E_ATTEST_SIG,
	          "GPU report: signature (offset %zu) does not verify with the GPU's attestation "
	          "certificate",
	          r->signed_len);
	rc = SL_OK;
out:
	ERR_clear_error();
	OPENSSL_free(der);
	BN_free(br);
	BN_free(bs);
	ECDSA_SIG_free(sig);
	EVP_MD_CTX_free(md);
	return rc;
}

static SL_RESULT check_binding(const sl_nvgpu_report *r, const sl_verify_opts *o, sl_claims *c)
{
	sl_err rc = SL_E_ATTEST_BINDING;
	uint8_t want[SL_NVGPU_NONCE_LEN] = {0};
	const char *state = "unchecked";
	if (!o->no_binding) {
		SL_ENSURE(o->expect != NULL && o->expect_len > 0, SL_E_USAGE,
		          "GPU evidence: no expected binding given");
		SL_ENSURE(o->expect_len <= SL_NVGPU_NONCE_LEN, SL_E_ATTEST_BINDING,
		          "GPU evidence: binding of %zu bytes does not fit the 32-byte SPDM nonce",
		          o->expect_len);
		memcpy(want, o->expect, o->expect_len);
		SL_ENSURE(sl_ct_eq(want, r->req_nonce, SL_NVGPU_NONCE_LEN), SL_E_ATTEST_BINDING,
		          "GPU report: request.nonce does not equal the expected binding");
		state = "verified";
	}
	SL_GUARD(sl_claims_set(c, "gpu.binding", state));
	SL_GUARD(sl_claims_set(c, "binding", state));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT load_certs(const json_t *ev, STACK_OF(X509) * certs)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t *pem = NULL;
	size_t len = 0;
	const char *b64 = sl_json_getstr(ev, "certs");
	SL_ENSURE(b64 != NULL, SL_E_ATTEST_FORMAT, "evidence.certs: missing base64 string");
	SL_GUARD(sl_b64_decode(b64, MAX_CERTS_B64, &pem, &len, "evidence.certs"));
	SL_GUARD(sl_x509_parse_blob(pem, len, certs, NULL, "evidence.certs"));
	rc = SL_OK;
out:
	if (rc == SL_E_FORMAT)
		rc = SL_E_ATTEST_FORMAT;
	free(pem);
	return rc;
}

sl_err sl_nvgpu_verify_parts(const uint8_t *report, size_t rlen, STACK_OF(X509) * certs,
                             const sl_verify_opts *o, sl_claims *c)
{
	sl_err rc = SL_E_ATTEST;
	sl_nvgpu_report *r = calloc(1, sizeof(*r));
	uint8_t fwid[48];
	sl_dice_tcbinfo tcb;
	bool has_tcb = false;

	SL_ENSURE(r != NULL, SL_E_NOMEM, "GPU report");
	SL_GUARD(sl_nvgpu_report_parse(report, rlen, r));
	SL_GUARD(verify_chain(certs, o));
	X509 *leaf = sk_X509_value(certs, 0);
	SL_GUARD(leaf_fwid(leaf, fwid, &tcb, &has_tcb));
	const sl_nvgpu_tlv *t = sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_FWID);
	/* the FWID ties this report's firmware to the certified device key */
	SL_ENSURE(t == NULL ||
	              (t->len == sizeof(fwid) && memcmp(t->value, fwid, sizeof(fwid)) == 0),
	          SL_E_ATTEST_CHAIN,
	          "GPU report: opaque FWID does not equal the FWID of the attestation certificate");
	SL_GUARD(verify_signature(r, leaf));
	SL_GUARD(check_binding(r, o, c));
	SL_GUARD(sl_nvgpu_claims(r, leaf, c));
	if (has_tcb)
		SL_GUARD(sl_nvgpu_tcb_claims(&tcb, c));
	rc = SL_OK;
out:
	free(r);
	return rc;
}

/* One GPU's {"report", "certs"} (item) into its own claims; the machine's
 * unsigned driver object (may be NULL) applies to every GPU of it. */
static SL_RESULT verify_one(const json_t *item, const json_t *driver, const sl_verify_opts *o,
                            sl_claims *one)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t *report = NULL;
	size_t rlen = 0;
	STACK_OF(X509) *certs = sk_X509_new_null();

	SL_ENSURE(certs != NULL, SL_E_NOMEM, "GPU evidence");
	SL_ENSURE(json_is_object(item), SL_E_ATTEST_FORMAT, "evidence: not an object");
	const char *b64 = sl_json_getstr(item, "report");
	SL_ENSURE(b64 != NULL, SL_E_ATTEST_FORMAT, "evidence.report: missing base64 string");
	rc = sl_b64_decode(b64, MAX_REPORT_B64, &report, &rlen, "evidence.report");
	if (rc == SL_E_FORMAT || rc == SL_E_TOO_LARGE)
		rc = SL_E_ATTEST_FORMAT;
	SL_GUARD(rc);
	SL_GUARD(load_certs(item, certs));
	SL_GUARD(sl_nvgpu_verify_parts(report, rlen, certs, o, one));
	SL_GUARD(sl_nvgpu_driver_claims(driver, one));
	rc = SL_OK;
out:
	sk_X509_pop_free(certs, X509_free);
	free(report);
	return rc;
}

/* {"gpus": [...]}: every GPU verified and joined into a set of its own
 * first, so a refused GPU leaves c as it was; then the set joins c. */
static SL_RESULT verify_set(const json_t *ev, const json_t *gpus, const sl_verify_opts *o,
                            sl_claims *c)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_claims *set = NULL, *one = NULL;
	const json_t *driver = json_object_get(ev, "driver");
	size_t n = json_array_size(gpus);

	SL_ENSURE(json_is_array(gpus) && n > 0, SL_E_ATTEST_FORMAT,
	          "evidence.gpus: not a non-empty array");
	SL_ENSURE(n <= MAX_SET_GPUS, SL_E_ATTEST_FORMAT, "evidence.gpus: %zu GPUs, more than %d", n,
	          MAX_SET_GPUS);
	/* one item is either form, never both: a reader must not pick */
	SL_ENSURE(json_object_get(ev, "report") == NULL && json_object_get(ev, "certs") == NULL,
	          SL_E_ATTEST_FORMAT,
	          "evidence: both gpus and a single GPU's report/certs; one form only");
	SL_GUARD(sl_claims_new(&set));
	for (size_t i = 0; i < n; i++) {
		SL_GUARD(sl_claims_new(&one));
		rc = verify_one(json_array_get(gpus, i), driver, o, one);
		if (rc == SL_OK)
			rc = sl_nvgpu_set_add(set, one);
		if (rc != SL_OK)
			SL_GUARD(sl_err_wrap(rc, "evidence.gpus[%zu]", i));
		sl_claims_free(one);
		one = NULL;
	}
	SL_GUARD(sl_nvgpu_set_merge(c, set));
	rc = SL_OK;
out:
	sl_claims_free(one);
	sl_claims_free(set);
	return rc;
}

static SL_RESULT nvgpu_verify(const json_t *ev, const sl_verify_opts *o, sl_claims *c)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_claims *tmp = NULL;
	const json_t *gpus = json_object_get(ev, "gpus");

	if (gpus != NULL)
		return verify_set(ev, gpus, o, c);
	/* claims land only when everything verified */
	SL_GUARD(sl_claims_new(&tmp));
	SL_GUARD(verify_one(ev, json_object_get(ev, "driver"), o, tmp));
	/* joins the GPUs already in c as one set (nvgpu_set.c) */
	SL_GUARD(sl_nvgpu_set_add(c, tmp));
	rc = SL_OK;
out:
	sl_claims_free(tmp);
	return rc;
}

const sl_evidence_kind sl_kind_nvgpu = {
    .name = "nvidia-gpu",
    .available = sl_nvgpu_available,
    .collect = sl_nvgpu_collect,
    .verify = nvgpu_verify,
};
