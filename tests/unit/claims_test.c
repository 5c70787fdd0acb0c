/* The claim set: ordering, replacement, key rules, JSON round trip, digest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "seclaunch/attest.h"
#include "seclaunch/secret.h"

static void test_sorted_and_replaced(void **state)
{
	(void)state;
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_claims_set(c, "tpm.pcr.sha256.7", "aa"), SL_OK);
	assert_int_equal(sl_claims_set(c, "binding", "unchecked"), SL_OK);
	assert_int_equal(sl_claims_set(c, "tee.kind", "tpm2"), SL_OK);
	assert_int_equal(sl_claims_setf(c, "tpm.clock", "%u", 42u), SL_OK);
	assert_int_equal(sl_claims_count(c), 4);
	assert_string_equal(sl_claims_key(c, 0), "binding");
	assert_string_equal(sl_claims_key(c, 1), "tee.kind");
	assert_string_equal(sl_claims_key(c, 2), "tpm.clock");
	assert_string_equal(sl_claims_key(c, 3), "tpm.pcr.sha256.7");
	assert_null(sl_claims_key(c, 4));
	assert_int_equal(sl_claims_set(c, "tee.kind", "sev-snp"), SL_OK);
	assert_int_equal(sl_claims_count(c), 4);
	assert_string_equal(sl_claims_get(c, "tee.kind"), "sev-snp");
	assert_string_equal(sl_claims_get(c, "tpm.clock"), "42");
	assert_null(sl_claims_get(c, "absent"));
	const uint8_t b[] = {0xde, 0xad};
	assert_int_equal(sl_claims_set_hex(c, "snp.chip_id", b, 2), SL_OK);
	assert_string_equal(sl_claims_get(c, "snp.chip_id"), "dead");
	sl_claims_free(c);
}

static void test_bad_keys(void **state)
{
	(void)state;
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_claims_set(c, "", "x"), SL_E_INTERNAL);
	assert_int_equal(sl_claims_set(c, "Upper", "x"), SL_E_INTERNAL);
	assert_int_equal(sl_claims_set(c, "a b", "x"), SL_E_INTERNAL);
	assert_int_equal(sl_claims_set(c, "a\"b", "x"), SL_E_INTERNAL);
	assert_int_equal(sl_claims_count(c), 0);
	sl_claims_free(c);
}

static void test_json_round_trip_and_digest(void **state)
{
	(void)state;
	sl_claims *c = NULL, *d = NULL;
	json_t *j = NULL;
	uint8_t h1[32], h2[32];
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_claims_set(c, "cloud.region", "eu-west-1"), SL_OK);
	assert_int_equal(sl_claims_set(c, "cloud.provider", "aws"), SL_OK);
	assert_int_equal(sl_claims_to_json(c, &j), SL_OK);
	assert_int_equal(sl_claims_from_json(j, &d), SL_OK);
	assert_int_equal(sl_claims_count(d), 2);
	assert_string_equal(sl_claims_get(d, "cloud.region"), "eu-west-1");
	sl_claims_digest(c, h1);
	sl_claims_digest(d, h2);
	assert_true(sl_ct_eq(h1, h2, 32));
	assert_int_equal(sl_claims_set(d, "cloud.region", "us-east-1"), SL_OK);
	sl_claims_digest(d, h2);
	assert_false(sl_ct_eq(h1, h2, 32));
	json_decref(j);
	sl_claims_free(d);

	/* merge: src wins */
	assert_int_equal(sl_claims_new(&d), SL_OK);
	assert_int_equal(sl_claims_set(d, "cloud.region", "x"), SL_OK);
	assert_int_equal(sl_claims_set(d, "gpu.cc", "on"), SL_OK);
	assert_int_equal(sl_claims_merge(c, d), SL_OK);
	assert_int_equal(sl_claims_count(c), 3);
	assert_string_equal(sl_claims_get(c, "cloud.region"), "x");
	/* ...except that a weak GPU or binding state already there stays */
	assert_int_equal(sl_claims_set(c, "gpu.cc", "off"), SL_OK);
	assert_int_equal(sl_claims_set(c, "binding", "unchecked"), SL_OK);
	assert_int_equal(sl_claims_set(d, "binding", "verified"), SL_OK);
	assert_int_equal(sl_claims_merge(c, d), SL_OK);
	assert_string_equal(sl_claims_get(c, "gpu.cc"), "off");
	assert_string_equal(sl_claims_get(c, "binding"), "unchecked");
	assert_int_equal(sl_claims_set(c, "gpu.cc", "unknown"), SL_OK);
	assert_int_equal(sl_claims_merge(c, d), SL_OK);
	assert_string_equal(sl_claims_get(c, "gpu.cc"), "unknown");
	assert_int_equal(sl_claims_set(c, "gpu.cc", "on"), SL_OK);
	assert_int_equal(sl_claims_set(d, "gpu.cc", "off"), SL_OK);
	assert_int_equal(sl_claims_merge(c, d), SL_OK);
	assert_string_equal(sl_claims_get(c, "gpu.cc"), "off");
	sl_claims_free(d);
	sl_claims_free(c);
}

static void test_from_json_rejects(void **state)
{
	(void)state;
	sl_claims *c = NULL;
	json_t *j = json_loads("{\"a\": 1}", 0, NULL);
	assert_int_equal(sl_claims_from_json(j, &c), SL_E_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "claims.a: not a string"));
	json_decref(j);
	j = json_loads("{\"Bad Key\": \"v\"}", 0, NULL);
	assert_int_equal(sl_claims_from_json(j, &c), SL_E_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "Bad Key"));
	json_decref(j);
	j = json_loads("[1]", 0, NULL);
	assert_int_equal(sl_claims_from_json(j, &c), SL_E_FORMAT);
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sorted_and_replaced),
	    cmocka_unit_test(test_bad_keys),
	    cmocka_unit_test(test_json_round_trip_and_digest),
	    cmocka_unit_test(test_from_json_rejects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
