/* Fuzz target: the NVIDIA GPU SPDM report parser (measurement blocks, opaque
 * TLVs), the claims of whatever parses (with a certificate made at start, so
 * the certificate claims run too), the verifier up to its pinned-root check,
 * and, for inputs that start with '{', the evidence JSON path including the
 * driver's unsigned settings. */
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../attest/nvgpu_int.h"
#include "../../attest/nvgpu_report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static X509 *make_leaf(void)
{
	EVP_PKEY *k = EVP_EC_gen("P-384");
	X509 *x = X509_new();
	if (k == NULL || x == NULL)
		abort();
	X509_NAME *n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"GH100 fuzz", -1,
	                           -1, 0);
	X509_set_issuer_name(x, n);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 42);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, k);
	if (X509_sign(x, k, EVP_sha384()) <= 0)
		abort();
	EVP_PKEY_free(k);
	return x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static X509 *leaf;
	static sl_nvgpu_report r;
	if (leaf == NULL)
		leaf = make_leaf();
	sl_verify_opts o = {.no_binding = true, .at = 1748736000};
	sl_claims *c = NULL;
	if (sl_claims_new(&c) != SL_OK)
		return 0;
	if (size > 0 && data[0] == '{') {
		json_t *ev = json_loadb((const char *)data, size, 0, NULL);
		if (ev != NULL) {
			(void)sl_evidence_verify(ev, &o, c);
			(void)sl_nvgpu_driver_claims(json_object_get(ev, "driver"), c);
			json_decref(ev);
		}
	} else if (sl_nvgpu_report_parse(data, size, &r) == SL_OK) {
		(void)sl_nvgpu_claims(&r, leaf, c);
		STACK_OF(X509) *s = sk_X509_new_null();
		if (s != NULL && sk_X509_push(s, leaf) > 0 && sk_X509_push(s, leaf) > 0)
			(void)sl_nvgpu_verify_parts(data, size, s, &o, c);
		sk_X509_free(s);
	}
	sl_claims_free(c);
	return 0;
}
