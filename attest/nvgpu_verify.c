/* The "nvidia-gpu" evidence kind, verification:
 * {"kind":"nvidia-gpu","report":b64,"certs":b64 PEM chain leaf first,
 *  "driver":{...} (optional, unsigned, see docs/evidence-nvidia-gpu.md)}.
 * Order: parse the report; the chain up to the pinned NVIDIA Device
 * Identity CA at opts->at; the leaf's FWID against the report's; the report
 * signature with the leaf key; the request nonce against the binding. */
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

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

/* SHA-256 of the DER of "CN = NVIDIA Device Identity CA, O = NVIDIA"
 * (notBefore 2021-11-05, notAfter 9999-12-31), the root of every NVIDIA GPU
 * device-identity chain; the same certificate as the test vector
 * tests/vectors: nvidia-gpu/nvidia_device_identity_root.pem. */
const uint8_t sl_nvgpu_root_sha256[32] = {
    0x10, 0x2b, 0xf6, 0x59, 0xd5, 0x41, 0x96, 0x14, 0xc9, 0xd8, 0xe6, 0xae, 0xce, 0xbc, 0x80, 0x45,
    0x4e, 0xb2, 0x6b, 0x1d, 0xf6, 0xa7, 0x69, 0xac, 0x72, 0x0b, 0x9a, 0x69, 0x0b, 0x16, 0x7b, 0x48,
};

#define OID_NV_TCBINFO "2.23.133.5.4.1"

/* The extension 2.23.133.5.4.1 of the GPU's leaf: SEQUENCE { ..., SEQUENCE
 * { hashAlg OID, digest OCTET STRING } } whose last element carries the
 * firmware ID; ASN1 decoding by OpenSSL. */
static SL_RESULT leaf_fwid(X509 *leaf, uint8_t *fwid, size_t *len)
{
	sl_err rc = SL_E_ATTEST_CHAIN;
	STACK_OF(ASN1_TYPE) *outer = NULL, *inner = NULL;
	const ASN1_OCTET_STRING *ext = sl_x509_ext(leaf, OID_NV_TCBINFO);
	SL_ENSURE(ext != NULL, SL_E_ATTEST_CHAIN,
	          "GPU certificate chain: the first certificate has no FWID extension (%s): it is "
	          "not the GPU's attestation certificate",
	          OID_NV_TCBINFO);
	const unsigned char *p = ASN1_STRING_get0_data(ext);
	outer = d2i_ASN1_SEQUENCE_ANY(NULL, &p, ASN1_STRING_length(ext));
	SL_ENSURE(outer != NULL && sk_ASN1_TYPE_num(outer) > 0, SL_E_ATTEST_CHAIN,
	          "GPU certificate: FWID extension is not a DER SEQUENCE");
	ERR_clear_error();
	const ASN1_TYPE *last = sk_ASN1_TYPE_value(outer, sk_ASN1_TYPE_num(outer) - 1);
	SL_ENSURE(last->type == V_ASN1_SEQUENCE, SL_E_ATTEST_CHAIN,
	          "GPU certificate: FWID extension does not end with a SEQUENCE");
	p = ASN1_STRING_get0_data(last->value.sequence);
	inner = d2i_ASN1_SEQUENCE_ANY(NULL, &p, ASN1_STRING_length(last->value.sequence));
	SL_ENSURE(inner != NULL && sk_ASN1_TYPE_num(inner) == 2 &&
	              sk_ASN1_TYPE_value(inner, 0)->type == V_ASN1_OBJECT &&
	              sk_ASN1_TYPE_value(inner, 1)->type == V_ASN1_OCTET_STRING,
	          SL_E_ATTEST_CHAIN, "GPU certificate: FWID is not { hashAlg, digest }");
	const ASN1_OCTET_STRING *d = sk_ASN1_TYPE_value(inner, 1)->value.octet_string;
	SL_ENSURE(ASN1_STRING_length(d) == 48, SL_E_ATTEST_CHAIN,
	          "GPU certificate: FWID digest is %d bytes, not 48", ASN1_STRING_length(d));
	memcpy(fwid, ASN1_STRING_get0_data(d), 48);
	*len = 48;
	rc = SL_OK;
out:
	ERR_clear_error();
	sk_ASN1_TYPE_pop_free(outer, ASN1_TYPE_free);
	sk_ASN1_TYPE_pop_free(inner, ASN1_TYPE_free);
	return rc;
}

/* The chain must reach a root whose fingerprint is the pinned one; the root
 * may travel in the chain itself or come from the collateral directory. */
static SL_RESULT verify_chain(STACK_OF(X509) * certs, const sl_verify_opts *o)
{
	sl_err rc = SL_E_ATTEST_CHAIN;
	STACK_OF(X509) *roots = sk_X509_new_null(), *untrusted = sk_X509_new_null();
	STACK_OF(X509) *extra = sk_X509_new_null();
	uint8_t fp[32];

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
		bool pinned = CRYPTO_memcmp(fp, sl_nvgpu_root_sha256, 32) == 0;
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
	size_t fwid_len = 0;

	SL_ENSURE(r != NULL, SL_E_NOMEM, "GPU report");
	SL_GUARD(sl_nvgpu_report_parse(report, rlen, r));
	SL_GUARD(verify_chain(certs, o));
	X509 *leaf = sk_X509_value(certs, 0);
	SL_GUARD(leaf_fwid(leaf, fwid, &fwid_len));
	const sl_nvgpu_tlv *t = sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_FWID);
	/* the FWID ties this report's firmware to the certified device key */
	SL_ENSURE(t == NULL || (t->len == fwid_len && memcmp(t->value, fwid, fwid_len) == 0),
	          SL_E_ATTEST_CHAIN,
	          "GPU report: opaque FWID does not equal the FWID of the attestation certificate");
	SL_GUARD(verify_signature(r, leaf));
	SL_GUARD(check_binding(r, o, c));
	SL_GUARD(sl_nvgpu_claims(r, leaf, c));
	rc = SL_OK;
out:
	free(r);
	return rc;
}

static SL_RESULT nvgpu_verify(const json_t *ev, const sl_verify_opts *o, sl_claims *c)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t *report = NULL;
	size_t rlen = 0;
	STACK_OF(X509) *certs = sk_X509_new_null();
	sl_claims *tmp = NULL;

	SL_ENSURE(certs != NULL, SL_E_NOMEM, "GPU evidence");
	const char *b64 = sl_json_getstr(ev, "report");
	SL_ENSURE(b64 != NULL, SL_E_ATTEST_FORMAT, "evidence.report: missing base64 string");
	rc = sl_b64_decode(b64, MAX_REPORT_B64, &report, &rlen, "evidence.report");
	if (rc == SL_E_FORMAT || rc == SL_E_TOO_LARGE)
		rc = SL_E_ATTEST_FORMAT;
	SL_GUARD(rc);
	SL_GUARD(load_certs(ev, certs));
	/* claims land only when everything verified */
	SL_GUARD(sl_claims_new(&tmp));
	SL_GUARD(sl_nvgpu_verify_parts(report, rlen, certs, o, tmp));
	SL_GUARD(sl_nvgpu_driver_claims(json_object_get(ev, "driver"), tmp));
	/* a weaker GPU state already in c stays (sl_claims_merge) */
	SL_GUARD(sl_claims_merge(c, tmp));
	rc = SL_OK;
out:
	sl_claims_free(tmp);
	sk_X509_pop_free(certs, X509_free);
	free(report);
	return rc;
}

const sl_evidence_kind sl_kind_nvgpu = {
    .name = "nvidia-gpu",
    .available = sl_nvgpu_available,
    .collect = sl_nvgpu_collect,
    .verify = nvgpu_verify,
};
