/* Azure CVM: the HCL report parser (field checks) and the verifier's links
 * on the real HCL reports in $SL_VECTORS/azure-cvm. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../attest/azure_hcl.h"
#include "seclaunch/attest.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"
#include "testlib.h"

static uint8_t *load(const char *name, size_t *len)
{
	return tl_vector_load(len, "azure-cvm/%s", name);
}

static void test_parse(void **state)
{
	(void)state;
	size_t len = 0;
	sl_hcl_report h;
	uint8_t *b = load("snp/hcl_report_milan_v2.bin", &len);
	assert_int_equal(len, 2600);
	assert_int_equal(sl_hcl_parse(b, len, &h), SL_OK);
	assert_int_equal(h.version, 1);
	assert_int_equal(h.report_type, SL_HCL_REPORT_TYPE_SNP);
	/* the hardware report starts at 0x20, its report_data at 0x20 + 0x50 */
	assert_ptr_equal(h.hw_report, b + 0x20);
	assert_memory_equal(h.report_data, b + 0x20 + 0x50, 64);
	/* runtime data: variable_data_size at 0x4d0, the JSON from 0x4d4 */
	uint32_t vs = (uint32_t)b[0x4d0] | (uint32_t)b[0x4d1] << 8;
	assert_int_equal(h.runtime_len, vs);
	assert_ptr_equal(h.runtime, b + 0x4d4);
	uint8_t hash[32];
	sl_sha256(h.runtime, h.runtime_len, hash);
	assert_memory_equal(hash, h.report_data, 32);
#define BAD(off, val, needle)                                                                      \
	do {                                                                                       \
		uint8_t keep = b[(off)];                                                           \
		b[(off)] = (val);                                                                  \
		expect_fail(sl_hcl_parse(b, len, &h), SL_E_ATTEST_FORMAT, (needle));               \
		b[(off)] = keep;                                                                   \
	} while (0)
	BAD(0, 'X', "signature");
	BAD(4, 3, "header.version");
	BAD(12, 1, "request_type");
	BAD(16, 1, "status");
	BAD(0x4c8, 3, "report_type");
	BAD(0x4cc, 2, "hash_type");
	BAD(0x4d1, 0xff, "variable_data"); /* runtime size past the end */
	BAD(0x4c1, 0xff, "igvm request data");
#undef BAD
	expect_fail(sl_hcl_parse(b, 1000, &h), SL_E_ATTEST_FORMAT, "hw_report", "truncated");
	free(b);

	b = load("tdx/hcl-report.bin", &len);
	assert_int_equal(sl_hcl_parse(b, len, &h), SL_OK);
	assert_int_equal(h.version, 2);
	assert_int_equal(h.report_type, SL_HCL_REPORT_TYPE_TDX);
	/* TDREPORT report_data at 128 */
	assert_memory_equal(h.report_data, b + 0x20 + 128, 64);
	sl_sha256(h.runtime, h.runtime_len, hash);
	assert_memory_equal(hash, h.report_data, 32);
	/* the 160 bytes after the 1024-byte TDREPORT must be zero */
	b[0x20 + 1100] = 1;
	expect_fail(sl_hcl_parse(b, len, &h), SL_E_ATTEST_FORMAT, "padding", "tdx padding");
	free(b);
}

/* A full evidence object for the Milan v2 HCL report, built here. */
static json_t *milan_evidence(void)
{
	size_t hl = 0, ql = 0, cl = 0;
	uint8_t *hcl = load("snp/hcl_report_milan_v2.bin", &hl);
	uint8_t *q = load("snp/tpm_quote_milan_v2.json", &ql);
	uint8_t *chain = load("snp/vcek_chain_milan_v2.pem", &cl);
	char *b64 = NULL;
	assert_int_equal(sl_b64_encode(hcl, hl, &b64), SL_OK);
	json_t *tq = json_loadb((const char *)q, ql, 0, NULL);
	json_t *in = json_pack("{s:O}", "quote", tq);
	/* the importer takes byte arrays (v0): hand it the HCL as one */
	json_t *arr = json_array();
	for (size_t i = 0; i < hl; i++)
		json_array_append_new(arr, json_integer(hcl[i]));
	json_object_set_new(in, "report", arr);
	json_object_set_new(in, "vcek", json_stringn((const char *)chain, cl));
	json_t *ev = NULL;
	assert_int_equal(sl_azure_import(in, &ev), SL_OK);
	json_decref(in);
	json_decref(tq);
	free(b64);
	free(hcl);
	free(q);
	free(chain);
	return ev;
}

static void test_verify_links(void **state)
{
	(void)state;
	char trust[1100];
	tl_vector_path(trust, sizeof(trust), "amd-sev-snp/trust");
	const uint8_t challenge[] = "challenge";
	sl_verify_opts o = {
	    .expect = challenge, .expect_len = 9, .collateral_dir = trust, .at = 1704067200};
	sl_claims *c = NULL;
	json_t *ev = milan_evidence();
	assert_int_equal(sl_claims_new(&c), SL_OK);
	if (sl_evidence_verify(ev, &o, c) != SL_OK)
		fail_msg("milan v2: %s", sl_err_detail());
	assert_string_equal(sl_claims_get(c, "tee.kind"), "sev-snp");
	assert_string_equal(sl_claims_get(c, "binding"), "verified");
	assert_string_equal(sl_claims_get(c, "azure.vm.unique_id"),
	                    "911B0EF8-9DBA-48B0-B275-4E4DF2D39252");
	assert_string_equal(sl_claims_get(c, "azure.vm.secure_boot"), "true");
	assert_non_null(sl_claims_get(c, "tpm.pcr.sha256.0"));
	sl_claims_free(c);
	/* the hardware report's own signature still counts: flip a measurement bit */
	const char *s = json_string_value(json_object_get(ev, "hcl_report"));
	uint8_t *h = NULL;
	size_t hl = 0;
	assert_int_equal(sl_b64_decode(s, 1 << 16, &h, &hl, "hcl"), SL_OK);
	h[0x20 + 0x90] ^= 1;
	char *b64 = NULL;
	assert_int_equal(sl_b64_encode(h, hl, &b64), SL_OK);
	json_object_set_new(ev, "hcl_report", json_string(b64));
	assert_int_equal(sl_claims_new(&c), SL_OK);
	expect_fail(sl_evidence_verify(ev, &o, c), SL_E_ATTEST_SIG, "SNP report signature",
	            "hw report tamper");
	sl_claims_free(c);
	free(b64);
	free(h);
	json_decref(ev);
}

/* The TDX HCL report with its TD quote; then its TDREPORT's MRTD changed
 * (the runtime data binding still holds): the TDINFO check names it. */
static void test_tdx_tdinfo(void **state)
{
	(void)state;
	size_t hl = 0, ql = 0, tl = 0;
	uint8_t *hcl = load("tdx/hcl-report.bin", &hl);
	uint8_t *tdq = load("tdx/td-quote.bin", &ql);
	uint8_t *tq = load("tdx/tpm-quote-v1.json", &tl);
	json_t *in = json_pack("{s:o}", "tpm_quote", json_loadb((const char *)tq, tl, 0, NULL));
	json_t *a = json_array(), *b = json_array();
	for (size_t i = 0; i < hl; i++)
		json_array_append_new(a, json_integer(hcl[i]));
	for (size_t i = 0; i < ql; i++)
		json_array_append_new(b, json_integer(tdq[i]));
	json_object_set_new(in, "hcl_report", a);
	json_object_set_new(in, "td_quote", b);
	json_t *ev = NULL;
	assert_int_equal(sl_azure_import(in, &ev), SL_OK);
	const uint8_t challenge[] = "challenge";
	sl_verify_opts o = {.expect = challenge, .expect_len = 9, .at = 1748736000};
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	if (sl_evidence_verify(ev, &o, c) != SL_OK)
		fail_msg("tdx hcl: %s", sl_err_detail());
	assert_string_equal(sl_claims_get(c, "tee.kind"), "tdx");
	sl_claims_free(c);
	json_decref(ev);
	/* MRTD of the TDREPORT: TDINFO at 0x20 + 512, mrtd 16 bytes in */
	hcl[0x20 + 512 + 16] ^= 1;
	a = json_array();
	for (size_t i = 0; i < hl; i++)
		json_array_append_new(a, json_integer(hcl[i]));
	json_object_set_new(in, "hcl_report", a);
	assert_int_equal(sl_azure_import(in, &ev), SL_OK);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	expect_fail(sl_evidence_verify(ev, &o, c), SL_E_ATTEST_BINDING, "TDINFO", "TDREPORT mrtd");
	sl_claims_free(c);
	json_decref(ev);
	json_decref(in);
	free(hcl);
	free(tdq);
	free(tq);
}

int main(void)
{
	assert_int_equal(sl_crypto_init(), SL_OK);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_verify_links),
	    cmocka_unit_test(test_tdx_tdinfo),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
