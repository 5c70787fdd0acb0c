/* TDX quote verification: the quote's ECDSA P-256 signature with the
 * attestation key, the QE report's signature with the PCK certificate, the
 * QE report binding of the attestation key, the PCK chain to the pinned
 * Intel SGX Root CA (with CRLs from the collateral), REPORTDATA, and the TCB
 * status from TCB info + QE identity collateral when supplied. */
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <pthread.h>
#include <string.h>

#include "snp_report.h"
#include "tdx_quote.h"
#include "x509_util.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

/* SHA-256 of the Intel SGX Root CA certificate (DER), "CN=Intel SGX Root CA",
 * 2018-05-21..2049-12-31. Source: https://certificates.trustedservices.intel.com/
 * Intel_SGX_Provisioning_Certification_RootCA.cer, as copied in
 * google/go-tdx-guest verify/trusted_root.pem (commit 91f9a52f36c7a6ce140d5f13a2fb4ca03b61349c). */
static const uint8_t intel_root_sha256[32] = {
    0x44, 0xa0, 0x19, 0x6b, 0x2b, 0x99, 0xf8, 0x89, 0xb8, 0xe1, 0x49, 0xe9, 0x5b, 0x80, 0x7a, 0x35,
    0x0e, 0x74, 0x24, 0x96, 0x43, 0x99, 0xe8, 0x85, 0xa7, 0xcb, 0xb8, 0xcc, 0xfa, 0xb6, 0x74, 0xd3};

/* The Intel quoting enclave's vendor id. */
static const uint8_t intel_qe_vendor[16] = {0x93, 0x9a, 0x72, 0x33, 0xf7, 0x9c, 0x4c, 0xa9,
                                            0x94, 0x0a, 0x0d, 0xb3, 0x95, 0x7f, 0x06, 0x07};

static bool is_intel_root(X509 *x)
{
	uint8_t fp[32];
	sl_x509_fingerprint(x, fp);
	return memcmp(fp, intel_root_sha256, 32) == 0;
}

/* The attestation key (x || y) as an EVP_PKEY. */
static SL_RESULT p256_key(const uint8_t xy[static 64], EVP_PKEY **out)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t pt[65];
	OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
	OSSL_PARAM *params = NULL;
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);

	*out = NULL;
	pt[0] = 0x04;
	memcpy(pt + 1, xy, 64);
	SL_GUARD_OSSL(b != NULL && ctx != NULL, SL_E_NOMEM, "attestation key");
	SL_GUARD_OSSL(
	    OSSL_PARAM_BLD_push_utf8_string(b, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1 &&
	        OSSL_PARAM_BLD_push_octet_string(b, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof(pt)) == 1,
	    SL_E_CRYPTO, "attestation key");
	params = OSSL_PARAM_BLD_to_param(b);
	SL_GUARD_OSSL(params != NULL, SL_E_NOMEM, "attestation key");
	SL_GUARD_OSSL(EVP_PKEY_fromdata_init(ctx) == 1, SL_E_CRYPTO, "attestation key");
	SL_GUARD_OSSL(EVP_PKEY_fromdata(ctx, out, EVP_PKEY_PUBLIC_KEY, params) == 1,
	              SL_E_ATTEST_FORMAT, "TDX quote: attestation key is not a P-256 point");
	rc = SL_OK;
out:
	OSSL_PARAM_free(params);
	OSSL_PARAM_BLD_free(b);
	EVP_PKEY_CTX_free(ctx);
	return rc;
}

/* Attestation keys as public key objects, by their exact 64 bytes: a QE
 * signs every quote of its platform with one key, and making the object is
 * a third of a quote's verification in OpenSSL 3. Only the object is kept;
 * every quote's signature is verified with it. */
#define AK_SLOTS 16
static struct {
	uint8_t xy[64];
	EVP_PKEY *k;
} aks[AK_SLOTS];
static unsigned ak_next;
static pthread_mutex_t ak_mu = PTHREAD_MUTEX_INITIALIZER;

static SL_RESULT attest_key(const uint8_t xy[static 64], EVP_PKEY **out)
{
	EVP_PKEY *old = NULL;
	*out = NULL;
	pthread_mutex_lock(&ak_mu);
	for (int i = 0; i < AK_SLOTS && *out == NULL; i++)
		if (aks[i].k != NULL && memcmp(aks[i].xy, xy, 64) == 0 &&
		    EVP_PKEY_up_ref(aks[i].k) == 1)
			*out = aks[i].k;
	pthread_mutex_unlock(&ak_mu);
	if (*out != NULL)
		return SL_OK;
	sl_err rc = p256_key(xy, out);
	if (rc != SL_OK || EVP_PKEY_up_ref(*out) != 1)
		return rc;
	pthread_mutex_lock(&ak_mu);
	unsigned i = ak_next++ % AK_SLOTS;
	old = aks[i].k;
	memcpy(aks[i].xy, xy, 64);
	aks[i].k = *out;
	pthread_mutex_unlock(&ak_mu);
	EVP_PKEY_free(old);
	return SL_OK;
}

/* The PCK certificate's SGX extension as parsed, by the certificate's
 * fingerprint (the same certificate for every quote of a platform). */
#define PCK_SLOTS 16
static struct {
	bool used;
	uint8_t fp[32];
	sl_pck_ext ext;
} pcks[PCK_SLOTS];
static unsigned pck_next;
static pthread_mutex_t pck_mu = PTHREAD_MUTEX_INITIALIZER;

static SL_RESULT pck_ext(X509 *pck, sl_pck_ext *out)
{
	uint8_t fp[32];
	bool hit = false;
	sl_x509_fingerprint(pck, fp);
	pthread_mutex_lock(&pck_mu);
	for (int i = 0; i < PCK_SLOTS && !hit; i++)
		if (pcks[i].used && memcmp(pcks[i].fp, fp, 32) == 0) {
			*out = pcks[i].ext;
			hit = true;
		}
	pthread_mutex_unlock(&pck_mu);
	if (hit)
		return SL_OK;
	sl_err rc = sl_pck_ext_from_cert(pck, out);
	if (rc != SL_OK)
		return rc;
	pthread_mutex_lock(&pck_mu);
	unsigned i = pck_next++ % PCK_SLOTS;
	pcks[i].used = true;
	memcpy(pcks[i].fp, fp, 32);
	pcks[i].ext = *out;
	pthread_mutex_unlock(&pck_mu);
	return SL_OK;
}

static SL_RESULT check_qe(const sl_tdx_quote *q, X509 *pck)
{
	sl_err rc = SL_E_ATTEST_SIG;
	uint8_t want[64] = {0};
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned int n = 32;

	SL_GUARD(sl_p256_verify(X509_get0_pubkey(pck), q->qe_report_sig, q->qe_report_raw,
	                        SL_TDX_QE_REPORT_LEN,
	                        "TDX QE report signature (with the PCK certificate)"));
	/* SGX ATTRIBUTES.DEBUG (flags bit 1): a debuggable QE's key is not protected */
	SL_ENSURE((q->qe_report.attributes[0] & 0x02) == 0, SL_E_ATTEST_UNTRUSTED,
	          "TDX QE report: the quoting enclave runs in debug mode");
	SL_GUARD_OSSL(md != NULL && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
	                  EVP_DigestUpdate(md, q->attest_key, 64) == 1 &&
	                  EVP_DigestUpdate(md, q->qe_auth, q->qe_auth_len) == 1 &&
	                  EVP_DigestFinal_ex(md, want, &n) == 1,
	              SL_E_CRYPTO, "QE report data");
	SL_ENSURE(sl_ct_eq(want, q->qe_report.report_data, 64), SL_E_ATTEST_SIG,
	          "TDX QE report data is not SHA-256(attestation key || QE auth data) || zeros: "
	          "the attestation key is not bound to the quoting enclave");
	rc = SL_OK;
out:
	EVP_MD_CTX_free(md);
	return rc;
}

/* PCK leaf -> Platform/Processor CA -> pinned Intel SGX Root CA at o->at. */
/* coll, crls: the collateral directory's certificates and CRLs (loaded once
 * for the chain and the TCB info's signer) */
static SL_RESULT check_pck_chain(const sl_tdx_quote *q, const sl_verify_opts *o,
                                 STACK_OF(X509) * coll, STACK_OF(X509_CRL) * crls, X509 **leaf_out,
                                 bool *crl_checked, STACK_OF(X509) * *roots_out)
{
	sl_err rc = SL_E_ATTEST_CHAIN;
	STACK_OF(X509) *qc = sk_X509_new_null(), *mids = sk_X509_new_null(),
	               *roots = sk_X509_new_null(), *chain = NULL;
	bool f1 = false, f2 = false;

	*leaf_out = NULL;
	*roots_out = NULL;
	SL_ENSURE(qc != NULL && mids != NULL && roots != NULL, SL_E_NOMEM, "PCK chain");
	SL_GUARD(sl_x509_parse_blob(q->pck_chain, q->pck_chain_len, qc, NULL,
	                            "TDX quote pck_cert_chain"));
	for (int pass = 0; pass < 2; pass++) {
		STACK_OF(X509) *src = pass == 0 ? qc : coll;
		for (int i = pass == 0 ? 1 : 0; i < sk_X509_num(src); i++) {
			X509 *x = sk_X509_value(src, i);
			SL_ENSURE(X509_up_ref(x) == 1 &&
			              sk_X509_push(is_intel_root(x) ? roots : mids, x) > 0,
			          SL_E_NOMEM, "PCK chain");
		}
	}
	SL_ENSURE(sk_X509_num(roots) > 0, SL_E_ATTEST_UNTRUSTED,
	          "TDX PCK chain: the pinned Intel SGX Root CA is in neither the quote nor the "
	          "collateral");
	X509 *leaf = sk_X509_value(qc, 0);
	SL_GUARD(sl_x509_verify_chain(leaf, mids, roots, o->at, &chain, "TDX PCK certificate"));
	SL_ENSURE(sk_X509_num(chain) == 3, SL_E_ATTEST_CHAIN,
	          "TDX PCK chain: %d certificates, want PCK, PCK CA, root", sk_X509_num(chain));
	SL_GUARD(sl_x509_check_crls(leaf, sk_X509_value(chain, 1), crls, &f1, "TDX PCK CRL"));
	SL_GUARD(sl_x509_check_crls(sk_X509_value(chain, 1), sk_X509_value(chain, 2), crls, &f2,
	                            "TDX root CA CRL"));
	*crl_checked = f1;
	SL_ENSURE(X509_up_ref(leaf) == 1, SL_E_NOMEM, "PCK chain");
	*leaf_out = leaf;
	*roots_out = roots;
	roots = NULL;
	rc = SL_OK;
out:
	sk_X509_pop_free(qc, X509_free);
	sk_X509_pop_free(mids, X509_free);
	sk_X509_pop_free(roots, X509_free);
	sk_X509_pop_free(chain, X509_free);
	return rc;
}

static SL_RESULT tcb_claims(const sl_tdx_tcb *t, sl_claims *c)
{
	sl_err rc = SL_E_INTERNAL;
	SL_GUARD(sl_claims_set(c, "tdx.tcb_status", t->status));
	if (t->qe_status[0] != '\0')
		SL_GUARD(sl_claims_set(c, "tdx.qe_tcb_status", t->qe_status));
	if (t->module_status[0] != '\0')
		SL_GUARD(sl_claims_set(c, "tdx.module_tcb_status", t->module_status));
	if (t->tcb_date[0] != '\0')
		SL_GUARD(sl_claims_set(c, "tdx.tcb_date", t->tcb_date));
	SL_GUARD(sl_claims_set(c, "tdx.collateral_stale", t->stale ? "true" : "false"));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_tdx_verify_quote(const uint8_t *quote, size_t len, const sl_verify_opts *o,
                           bool check_binding, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST;
	sl_tdx_quote q;
	EVP_PKEY *ak = NULL;
	X509 *pck = NULL;
	STACK_OF(X509) *roots = NULL;
	sl_pck_ext ext;
	bool crl = false, found = false;
	sl_tdx_tcb tcb;
	STACK_OF(X509) *coll = sk_X509_new_null();
	STACK_OF(X509_CRL) *crls = sk_X509_CRL_new_null();

	SL_ENSURE(coll != NULL && crls != NULL, SL_E_NOMEM, "TDX collateral");
	SL_GUARD(sl_tdx_quote_parse(quote, len, &q));
	SL_ENSURE(memcmp(q.qe_vendor_id, intel_qe_vendor, 16) == 0, SL_E_ATTEST_UNTRUSTED,
	          "TDX quote: qe_vendor_id is not Intel's");
	if (o->collateral_dir != NULL)
		SL_GUARD(sl_x509_load_dir(o->collateral_dir, coll, crls));
	SL_GUARD(check_pck_chain(&q, o, coll, crls, &pck, &crl, &roots));
	SL_GUARD(pck_ext(pck, &ext));
	SL_GUARD(check_qe(&q, pck));
	SL_GUARD(attest_key(q.attest_key, &ak));
	SL_GUARD(sl_p256_verify(ak, q.sig, q.signed_part, q.signed_len,
	                        "TDX quote signature (header and TD report body, with the "
	                        "attestation key)"));
	if (check_binding)
		SL_GUARD(sl_tee_check_report_data(q.body.report_data, o, "TDX REPORTDATA", claims));
	SL_GUARD(sl_claims_set(claims, "tdx.pck_crl", crl ? "checked" : "absent"));
	if (o->collateral_dir != NULL) {
		SL_GUARD(sl_tdx_collateral_eval(o->collateral_dir, coll, roots, o->at, &ext,
		                                &q.body, &q.qe_report, &found, &tcb));
		if (found)
			SL_GUARD(tcb_claims(&tcb, claims));
	}
	if (!found)
		SL_GUARD(sl_claims_set(claims, "tdx.tcb_status", "unknown"));
	SL_GUARD(sl_tdx_claims(&q, &ext, claims));
	rc = SL_OK;
out:
	EVP_PKEY_free(ak);
	X509_free(pck);
	sk_X509_pop_free(roots, X509_free);
	sk_X509_pop_free(coll, X509_free);
	sk_X509_CRL_pop_free(crls, X509_CRL_free);
	return rc;
}
