/* The policy's `gpu_decrypt` field: validated as a boolean, and a request
 * for decryption on the GPU (`run --gpu-decrypt`) denied by a dataset rule
 * that says false, naming the rule; allowed where the rule says nothing or
 * true; a request without it is not affected by the field. The `gpu` rule
 * (a GPU set's count and mode): validated, and each of its denials. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/claims.h"
#include "seclaunch/policy.h"
#include "seclaunch/util.h"

#include "testlib.h"

static const char POLICY[] =
    "{\"version\": 1, \"keys\": {\"k\": [\"*\"]}, \"datasets\": ["
    "{\"id\": \"no-gpu\", \"allowed_regions\": [\"aws:us-east-1\"], \"tee_kinds\": [\"tpm2\"],"
    " \"gpu_decrypt\": false},"
    "{\"id\": \"yes-gpu\", \"allowed_regions\": [\"aws:us-east-1\"], \"tee_kinds\": [\"tpm2\"],"
    " \"gpu_decrypt\": true},"
    "{\"id\": \"plain\", \"allowed_regions\": [\"aws:us-east-1\"], \"tee_kinds\": [\"tpm2\"]}]}";

static sl_claims *claims(void)
{
	static const char *const kv[][2] = {
	    {"binding", "verified"},           {"tee.kind", "tpm2"},
	    {"cloud.provider", "aws"},         {"cloud.region", "us-east-1"},
	    {"cloud.region_verified", "true"}, {"cloud.identity_fresh", "false"}};
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		assert_int_equal(sl_claims_set(c, kv[i][0], kv[i][1]), SL_OK);
	return c;
}

static bool allowed(sl_policy *p, sl_claims *c, const char *ds, bool gpu, char *why, size_t n)
{
	sl_decision *d = NULL;
	sl_policy_request rq = {.dataset_id = ds, .key_id = "k", .gpu_decrypt = gpu};
	assert_int_equal(sl_policy_evaluate(p, c, &rq, &d), SL_OK);
	bool ok = sl_decision_allowed(d);
	why[0] = '\0';
	for (size_t i = 0; i < sl_decision_reason_count(d); i++)
		if (strstr(sl_decision_reason(d, i), "gpu_decrypt") != NULL)
			snprintf(why, n, "%s", sl_decision_reason(d, i));
	sl_decision_free(d);
	return ok;
}

static void test_gpu_decrypt_rule(void **state)
{
	(void)state;
	sl_policy *p = NULL;
	sl_claims *c = claims();
	char why[512];
	assert_int_equal(sl_policy_load((const uint8_t *)POLICY, strlen(POLICY), &p), SL_OK);
	assert_false(allowed(p, c, "no-gpu", true, why, sizeof(why)));
	assert_non_null(strstr(why, "$.datasets[0].gpu_decrypt"));
	assert_non_null(strstr(why, "forbidden"));
	assert_true(allowed(p, c, "no-gpu", false, why, sizeof(why)));
	assert_true(allowed(p, c, "yes-gpu", true, why, sizeof(why)));
	assert_true(allowed(p, c, "plain", true, why, sizeof(why)));
	sl_policy_free(p);
	sl_claims_free(c);
}

static void test_gpu_decrypt_must_be_bool(void **state)
{
	(void)state;
	static const char bad[] = "{\"version\": 1, \"datasets\": [{\"id\": \"d\", "
	                          "\"allowed_regions\": [\"aws:us-east-1\"],"
	                          " \"tee_kinds\": [\"tpm2\"], \"gpu_decrypt\": \"no\"}]}";
	sl_policy *p = NULL;
	expect_fail(sl_policy_load((const uint8_t *)bad, strlen(bad), &p), SL_E_INPUT,
	            "gpu_decrypt", "true or false");
	assert_null(p);
}

/* $.datasets[i].gpu: a set of exactly `count` GPUs in `mode`, none in
 * developer-tools mode, every report bound; each deny names the rule. */
static const char SET_POLICY[] =
    "{\"version\": 1, \"keys\": {\"k\": [\"*\"]}, \"datasets\": ["
    "{\"id\": \"eight-cc\", \"allowed_regions\": [\"aws:us-east-1\"], \"tee_kinds\": "
    "[\"tpm2\"], \"gpu\": {\"count\": 8, \"mode\": \"cc\"}},"
    "{\"id\": \"any-mode\", \"allowed_regions\": [\"aws:us-east-1\"], \"tee_kinds\": "
    "[\"tpm2\"], \"gpu\": {\"count\": 8}}]}";

static bool set_allowed(sl_policy *p, sl_claims *c, const char *ds, char *why, size_t n)
{
	sl_decision *d = NULL;
	sl_policy_request rq = {.dataset_id = ds, .key_id = "k"};
	assert_int_equal(sl_policy_evaluate(p, c, &rq, &d), SL_OK);
	bool ok = sl_decision_allowed(d);
	why[0] = '\0';
	for (size_t i = 0; i < sl_decision_reason_count(d); i++)
		snprintf(why + strlen(why), n - strlen(why), "%s; ", sl_decision_reason(d, i));
	sl_decision_free(d);
	return ok;
}

static void test_gpu_set_rule(void **state)
{
	(void)state;
	sl_policy *p = NULL;
	sl_claims *c = claims();
	char why[2048];
	assert_int_equal(sl_policy_load((const uint8_t *)SET_POLICY, strlen(SET_POLICY), &p),
	                 SL_OK);
	/* no GPU at all */
	assert_false(set_allowed(p, c, "eight-cc", why, sizeof(why)));
	assert_non_null(strstr(why, "$.datasets[0].gpu: no attested GPU"));
	assert_non_null(strstr(why, "$.datasets[0].gpu.count: not the GPUs attested as one set "
	                            "(gpu.count=missing), the rule asks 8"));
	assert_int_equal(sl_claims_set(c, "gpu.count", "8"), SL_OK);
	assert_int_equal(sl_claims_set(c, "gpu.cc", "on"), SL_OK);
	assert_int_equal(sl_claims_set(c, "gpu.mode", "cc-multi-gpu"), SL_OK);
	assert_int_equal(sl_claims_set(c, "gpu.devtools", "unknown"), SL_OK);
	assert_int_equal(sl_claims_set(c, "gpu.binding", "verified"), SL_OK);
	assert_true(set_allowed(p, c, "eight-cc", why, sizeof(why)));
	assert_true(set_allowed(p, c, "any-mode", why, sizeof(why)));
	/* seven of eight */
	assert_int_equal(sl_claims_set(c, "gpu.count", "7"), SL_OK);
	assert_false(set_allowed(p, c, "eight-cc", why, sizeof(why)));
	assert_non_null(strstr(why, "gpu.count=7), the rule asks 8"));
	assert_int_equal(sl_claims_set(c, "gpu.count", "8"), SL_OK);
	assert_int_equal(sl_claims_set(c, "gpu.cc", "off"), SL_OK);
	assert_false(set_allowed(p, c, "eight-cc", why, sizeof(why)));
	assert_non_null(strstr(why, "$.datasets[0].gpu.mode: not every GPU in confidential"));
	assert_int_equal(sl_claims_set(c, "gpu.cc", "on"), SL_OK);
	assert_int_equal(sl_claims_set(c, "gpu.devtools", "true"), SL_OK);
	assert_false(set_allowed(p, c, "eight-cc", why, sizeof(why)));
	assert_non_null(strstr(why, "developer-tools mode"));
	assert_int_equal(sl_claims_set(c, "gpu.devtools", "unknown"), SL_OK);
	assert_int_equal(sl_claims_set(c, "gpu.binding", "unchecked"), SL_OK);
	assert_false(set_allowed(p, c, "eight-cc", why, sizeof(why)));
	assert_non_null(strstr(why, "not bound to this request"));
	assert_int_equal(sl_claims_set(c, "gpu.binding", "verified"), SL_OK);
	assert_int_equal(sl_claims_set(c, "gpu.cc", "off"), SL_OK);
	assert_int_equal(sl_claims_set(c, "gpu.mode", "protected-pcie"), SL_OK);
	/* protected PCIe GPUs: a count-only rule takes them, a "cc" rule does not */
	assert_true(set_allowed(p, c, "any-mode", why, sizeof(why)));
	assert_false(set_allowed(p, c, "eight-cc", why, sizeof(why)));
	sl_policy_free(p);
	sl_claims_free(c);
}

static void test_gpu_set_rule_validated(void **state)
{
	(void)state;
	static const char *const bad[][2] = {
	    {"{\"count\": 0}", "gpu.count: must be a number of GPUs, 1..64"},
	    {"{\"count\": \"8\"}", "gpu.count: must be a number of GPUs"},
	    {"{\"mode\": \"on\"}", "gpu.mode: must be \"cc\" or \"ppcie\""},
	    /* no NVSwitch attestation: a rule that needs it is refused, saying why */
	    {"{\"count\": 8, \"mode\": \"ppcie\"}",
	     "gpu.mode: \"ppcie\" is not supported: protected PCIe mode sends NVLink traffic "
	     "through the NVSwitches in plaintext, and seclaunch cannot collect or verify "
	     "NVSwitch attestation (NSCQ)"},
	    {"{\"count\": 8, \"cc\": true}", "cc"},
	    {"true", "an object {count, mode}"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char doc[512];
		snprintf(doc, sizeof(doc),
		         "{\"version\": 1, \"datasets\": [{\"id\": \"d\", \"allowed_regions\": "
		         "[\"aws:us-east-1\"], \"tee_kinds\": [\"tpm2\"], \"gpu\": %s}]}",
		         bad[i][0]);
		sl_policy *p = NULL;
		expect_fail(sl_policy_load((const uint8_t *)doc, strlen(doc), &p), SL_E_INPUT,
		            "$.datasets[0].gpu", bad[i][1]);
		assert_null(p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gpu_decrypt_rule),
	    cmocka_unit_test(test_gpu_decrypt_must_be_bool),
	    cmocka_unit_test(test_gpu_set_rule),
	    cmocka_unit_test(test_gpu_set_rule_validated),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
