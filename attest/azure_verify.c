/* Azure confidential VM verification: HCL report -> hardware report (SNP
 * report with the VCEK chain, or the TD quote whose REPORTDATA equals the
 * TDREPORT's) -> runtime data (its SHA-256 is report_data) -> the vTPM AK
 * (the "HCLAkPub" JWK in the runtime data) -> the vTPM quote signed by that
 * AK, whose extraData carries the binding. */
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tss2/tss2_mu.h>

#include "azure_hcl.h"
#include "snp_report.h"
#include "tdx_quote.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"

#define MAX_B64 (64 * 1024)
#define NPCRS 24

static SL_RESULT b64(const json_t *o, const char *key, uint8_t **out, size_t *len)
{
	const char *s = sl_json_getstr(o, key);
	*out = NULL;
	if (s == NULL)
		return sl_err_set(SL_E_ATTEST_FORMAT, "azure-cvm evidence: %s missing", key);
	sl_err rc = sl_b64_decode(s, MAX_B64, out, len, key);
	return rc == SL_OK ? SL_OK : sl_err_wrap(SL_E_ATTEST_FORMAT, "azure-cvm evidence");
}

/* The RSA public key of the runtime data's JWK with kid "HCLAkPub". */
static SL_RESULT runtime_ak(const json_t *rt, EVP_PKEY **out)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	size_t i;
	json_t *k = NULL, *ak = NULL;
	uint8_t *n = NULL, *e = NULL;
	size_t nl = 0, el = 0;
	BIGNUM *bn = NULL, *be = NULL;
	OSSL_PARAM_BLD *b = NULL;
	OSSL_PARAM *params = NULL;
	EVP_PKEY_CTX *ctx = NULL;

	*out = NULL;
	json_array_foreach (json_object_get(rt, "keys"), i, k) {
		const char *kid = sl_json_getstr(k, "kid");
		if (kid != NULL && strcmp(kid, "HCLAkPub") == 0)
			ak = k;
	}
	SL_ENSURE(ak != NULL, SL_E_ATTEST_FORMAT, "HCL runtime data: no HCLAkPub key");
	const char *kty = sl_json_getstr(ak, "kty");
	const char *sn = sl_json_getstr(ak, "n");
	const char *se = sl_json_getstr(ak, "e");
	SL_ENSURE(kty != NULL && strcmp(kty, "RSA") == 0 && sn != NULL && se != NULL,
	          SL_E_ATTEST_FORMAT, "HCL runtime data: HCLAkPub is not an RSA JWK");
	SL_GUARD(sl_b64url_decode(sn, strlen(sn), 1024, &n, &nl, "HCLAkPub.n"));
	SL_GUARD(sl_b64url_decode(se, strlen(se), 8, &e, &el, "HCLAkPub.e"));
	SL_ENSURE(nl >= 256, SL_E_ATTEST_UNTRUSTED, "HCLAkPub: RSA modulus below 2048 bits");
	bn = BN_bin2bn(n, (int)nl, NULL);
	be = BN_bin2bn(e, (int)el, NULL);
	b = OSSL_PARAM_BLD_new();
	ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
	SL_GUARD_OSSL(bn != NULL && be != NULL && b != NULL && ctx != NULL, SL_E_NOMEM, "HCLAkPub");
	SL_GUARD_OSSL(OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_RSA_N, bn) == 1 &&
	                  OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_RSA_E, be) == 1,
	              SL_E_CRYPTO, "HCLAkPub");
	params = OSSL_PARAM_BLD_to_param(b);
	SL_GUARD_OSSL(params != NULL && EVP_PKEY_fromdata_init(ctx) == 1 &&
	                  EVP_PKEY_fromdata(ctx, out, EVP_PKEY_PUBLIC_KEY, params) == 1,
	              SL_E_ATTEST_FORMAT, "HCLAkPub: not a usable RSA key");
	rc = SL_OK;
out:
	if (rc != SL_OK && rc != SL_E_ATTEST_FORMAT && rc != SL_E_ATTEST_UNTRUSTED &&
	    rc != SL_E_NOMEM && rc != SL_E_CRYPTO)
		rc = sl_err_wrap(SL_E_ATTEST_FORMAT, "HCL runtime data");
	free(n);
	free(e);
	BN_free(bn);
	BN_free(be);
	OSSL_PARAM_free(params);
	OSSL_PARAM_BLD_free(b);
	EVP_PKEY_CTX_free(ctx);
	return rc;
}

static SL_RESULT runtime_claims(const json_t *rt, sl_claims *c)
{
	static const struct {
		const char *json, *claim;
	} map[] = {
	    {"console-enabled", "azure.vm.console_enabled"},
	    {"secure-boot", "azure.vm.secure_boot"},
	    {"tpm-enabled", "azure.vm.tpm_enabled"},
	    {"tpm-persisted", "azure.vm.tpm_persisted"},
	    {"vmUniqueId", "azure.vm.unique_id"},
	};
	sl_err rc = SL_E_INTERNAL;
	json_t *vm = json_object_get(rt, "vm-configuration");
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		json_t *v = json_object_get(vm, map[i].json);
		if (json_is_boolean(v))
			SL_GUARD(
			    sl_claims_set(c, map[i].claim, json_is_true(v) ? "true" : "false"));
		else if (json_is_string(v) && json_string_length(v) < 128)
			SL_GUARD(sl_claims_set(c, map[i].claim, json_string_value(v)));
	}
	const char *ud = sl_json_getstr(rt, "user-data");
	if (ud != NULL && strlen(ud) <= 128)
		SL_GUARD(sl_claims_set(c, "azure.user_data", ud));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT check_tpm_quote(const json_t *tq, EVP_PKEY *ak, const sl_verify_opts *o,
                                 sl_claims *c)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t *msg = NULL, *sig = NULL, *pcr = NULL;
	size_t ml = 0, sl = 0, pl = 0, off = 0;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	EVP_MD_CTX *pd = EVP_MD_CTX_new();
	TPMS_ATTEST a;
	uint8_t dig[32];
	unsigned int dl = 32;
	char key[32];

	SL_ENSURE(md != NULL && pd != NULL, SL_E_NOMEM, "vTPM quote");
	SL_ENSURE(json_is_object(tq), SL_E_ATTEST_FORMAT, "azure-cvm evidence: tpm_quote missing");
	SL_GUARD(b64(tq, "message", &msg, &ml));
	SL_GUARD(b64(tq, "signature", &sig, &sl));
	SL_GUARD_OSSL(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, ak) == 1, SL_E_CRYPTO,
	              "vTPM quote");
	if (EVP_DigestVerify(md, sig, sl, msg, ml) != 1) {
		ERR_clear_error();
		SL_FAIL(SL_E_ATTEST_SIG,
		        "vTPM quote signature (RSASSA-PKCS1-v1_5 SHA-256) does not verify with the "
		        "HCL runtime data's HCLAkPub");
	}
	memset(&a, 0, sizeof(a));
	SL_ENSURE(Tss2_MU_TPMS_ATTEST_Unmarshal(msg, ml, &off, &a) == 0 && off == ml,
	          SL_E_ATTEST_FORMAT, "vTPM quote: message is not a TPMS_ATTEST");
	SL_ENSURE(a.magic == TPM2_GENERATED_VALUE && a.type == TPM2_ST_ATTEST_QUOTE,
	          SL_E_ATTEST_FORMAT, "vTPM quote: not a TPM-generated quote (magic/type)");
	/* pcrDigest = SHA-256 of the selected PCRs (SHA-256 bank, index order) */
	json_t *pcrs = json_object_get(tq, "pcrs");
	SL_ENSURE(json_array_size(pcrs) == NPCRS, SL_E_ATTEST_FORMAT,
	          "vTPM quote: want %d PCR values", NPCRS);
	TPML_PCR_SELECTION *sel = &a.attested.quote.pcrSelect;
	SL_ENSURE(sel->count == 1 && sel->pcrSelections[0].hash == TPM2_ALG_SHA256 &&
	              sel->pcrSelections[0].sizeofSelect <= 3,
	          SL_E_ATTEST_FORMAT, "vTPM quote: want one SHA-256 PCR selection");
	SL_GUARD_OSSL(EVP_DigestInit_ex(pd, EVP_sha256(), NULL) == 1, SL_E_CRYPTO, "pcrDigest");
	for (int i = 0; i < NPCRS; i++) {
		if (i / 8 >= sel->pcrSelections[0].sizeofSelect ||
		    !(sel->pcrSelections[0].pcrSelect[i / 8] >> (i % 8) & 1))
			continue;
		const char *hx = json_string_value(json_array_get(pcrs, (size_t)i));
		SL_ENSURE(hx != NULL, SL_E_ATTEST_FORMAT, "vTPM quote: pcrs[%d] not a string", i);
		SL_GUARD(sl_b64_decode(hx, 64, &pcr, &pl, "pcr"));
		SL_ENSURE(pl == 32, SL_E_ATTEST_FORMAT, "vTPM quote: pcrs[%d] is not 32 bytes", i);
		SL_GUARD_OSSL(EVP_DigestUpdate(pd, pcr, 32) == 1, SL_E_CRYPTO, "pcrDigest");
		snprintf(key, sizeof(key), "tpm.pcr.sha256.%d", i);
		SL_GUARD(sl_claims_set_hex(c, key, pcr, 32));
		free(pcr);
		pcr = NULL;
	}
	SL_GUARD_OSSL(EVP_DigestFinal_ex(pd, dig, &dl) == 1, SL_E_CRYPTO, "pcrDigest");
	SL_ENSURE(a.attested.quote.pcrDigest.size == 32 &&
	              sl_ct_eq(dig, a.attested.quote.pcrDigest.buffer, 32),
	          SL_E_ATTEST_SIG, "vTPM quote: pcrDigest does not match the PCR values");
	if (o->no_binding) {
		SL_GUARD(sl_claims_set(c, "binding", "unchecked"));
	} else {
		SL_ENSURE(
		    o->expect != NULL && o->expect_len == a.extraData.size &&
		        sl_ct_eq(o->expect, a.extraData.buffer, o->expect_len),
		    SL_E_ATTEST_BINDING,
		    "vTPM quote: extraData (qualifyingData) does not equal the expected binding");
		SL_GUARD(sl_claims_set(c, "binding", "verified"));
	}
	SL_GUARD(sl_claims_setf(c, "tpm.clock", "%llu", (unsigned long long)a.clockInfo.clock));
	SL_GUARD(sl_claims_set(c, "tpm.ak.trust", "azure-hcl"));
	rc = SL_OK;
out:
	if (rc == SL_E_FORMAT || rc == SL_E_TOO_LARGE)
		rc = sl_err_wrap(SL_E_ATTEST_FORMAT, "vTPM quote");
	free(msg);
	free(sig);
	free(pcr);
	EVP_MD_CTX_free(md);
	EVP_MD_CTX_free(pd);
	return rc;
}

sl_err sl_azure_verify(const json_t *ev, const sl_verify_opts *o, sl_claims *claims)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t *hcl = NULL, *tdq = NULL;
	size_t hl = 0, ql = 0;
	sl_hcl_report h;
	uint8_t hash[32], want[64] = {0};
	json_t *rt = NULL;
	EVP_PKEY *ak = NULL;
	STACK_OF(X509) *certs = sk_X509_new_null();
	sl_verify_opts hw = *o;

	SL_ENSURE(certs != NULL, SL_E_NOMEM, "azure-cvm");
	SL_GUARD(b64(ev, "hcl_report", &hcl, &hl));
	SL_GUARD(sl_hcl_parse(hcl, hl, &h));
	/* the hardware report binds the runtime data, not the verifier's nonce */
	hw.no_binding = true;
	if (h.report_type == SL_HCL_REPORT_TYPE_SNP) {
		SL_GUARD(sl_snp_ev_certs(ev, certs));
		SL_GUARD(sl_snp_verify_report(h.hw_report, SL_HCL_HW_REPORT_LEN, certs, &hw, false,
		                              claims));
	} else {
		sl_tdx_quote q;
		SL_GUARD(b64(ev, "td_quote", &tdq, &ql));
		SL_GUARD(sl_tdx_verify_quote(tdq, ql, &hw, false, claims));
		SL_GUARD(sl_tdx_quote_parse(tdq, ql, &q));
		SL_ENSURE(sl_ct_eq(q.body.report_data, h.report_data, 64), SL_E_ATTEST_BINDING,
		          "azure-cvm: the TD quote's REPORTDATA differs from the HCL TDREPORT's");
		/* TDREPORT TDINFO (at 512): attributes, xfam, mrtd, mrconfigid, mrowner,
		 * mrownerconfig, rtmr0..3 must be the quote's: the quote is of this TD */
		SL_ENSURE(memcmp(h.hw_report + 512, q.body.td_attributes, 8) == 0 &&
		              memcmp(h.hw_report + 520, q.body.xfam, 8) == 0 &&
		              memcmp(h.hw_report + 528, q.body.mrtd, 48) == 0 &&
		              memcmp(h.hw_report + 576, q.body.mrconfigid, 48) == 0 &&
		              memcmp(h.hw_report + 624, q.body.mrowner, 48) == 0 &&
		              memcmp(h.hw_report + 672, q.body.mrownerconfig, 48) == 0 &&
		              memcmp(h.hw_report + 720, q.body.rtmr, 4 * 48) == 0,
		          SL_E_ATTEST_BINDING,
		          "azure-cvm: the HCL TDREPORT's TDINFO (MRTD, RTMRs, attributes) differs "
		          "from the TD quote's");
	}
	sl_sha256(h.runtime, h.runtime_len, hash);
	memcpy(want, hash, 32);
	SL_ENSURE(sl_ct_eq(want, h.report_data, 64), SL_E_ATTEST_BINDING,
	          "azure-cvm: SHA-256 of the HCL runtime data is not the hardware report's "
	          "report_data");
	rt = json_loadb((const char *)h.runtime, h.runtime_len, JSON_REJECT_DUPLICATES, NULL);
	SL_ENSURE(json_is_object(rt), SL_E_ATTEST_FORMAT, "HCL runtime data: not a JSON object");
	SL_GUARD(runtime_ak(rt, &ak));
	SL_GUARD(check_tpm_quote(json_object_get(ev, "tpm_quote"), ak, o, claims));
	SL_GUARD(runtime_claims(rt, claims));
	SL_GUARD(sl_claims_set(claims, "azure.cvm", "true"));
	SL_GUARD(sl_claims_setf(claims, "azure.hcl.version", "%u", h.version));
	SL_GUARD(sl_claims_set_hex(claims, "azure.runtime_data.sha256", hash, 32));
	rc = SL_OK;
out:
	free(hcl);
	free(tdq);
	json_decref(rt);
	EVP_PKEY_free(ak);
	sk_X509_pop_free(certs, X509_free);
	return rc;
}
