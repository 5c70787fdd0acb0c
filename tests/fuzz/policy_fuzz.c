/* Fuzz target: a policy document through `policy check` (validation that
 * goes on past errors, warnings, --strict), parse + validate, and when valid,
 * an evaluation against fixed claims and a request (must never crash, and a
 * valid policy's decision must be produced; check and load must agree). */
#include <stdint.h>
#include <stdlib.h>

#include "seclaunch/attest.h"
#include "seclaunch/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sl_policy *p = NULL;
	sl_claims *c = NULL;
	sl_decision *d = NULL;
	json_t *j = NULL;
	for (int strict = 0; strict < 2; strict++) {
		sl_err crc = sl_policy_check(data, size, strict, &j);
		if (j == NULL)
			abort(); /* a report, unless memory ran out */
		if ((crc == SL_OK) != json_is_true(json_object_get(j, "ok")))
			abort();
		json_decref(j);
		j = NULL;
	}
	sl_err lrc = sl_policy_load(data, size, &p);
	json_t *r0 = NULL;
	if ((sl_policy_check(data, size, false, &r0) == SL_OK) != (lrc == SL_OK))
		abort();
	json_decref(r0);
	if (lrc != SL_OK)
		return 0;
	if (sl_claims_new(&c) != SL_OK)
		abort();
	static const char *const kv[][2] = {{"binding", "verified"},
	                                    {"tee.kind", "sev-snp"},
	                                    {"snp.policy.debug", "false"},
	                                    {"snp.reported_tcb.snp", "8"},
	                                    {"tpm.pcr.sha256.7", "00"},
	                                    {"cloud.provider", "gcp"},
	                                    {"cloud.region", "europe-west4"},
	                                    {"cloud.region_verified", "true"},
	                                    {"gpu.cc", "on"},
	                                    {"cloud.project_id", "ml-train-eu"},
	                                    {"cloud.instance_id", "4567890123456789012"},
	                                    {"azure.vm.unique_id", "4567890123456789012"}};
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		if (sl_claims_set(c, kv[i][0], kv[i][1]) != SL_OK)
			abort();
	const char *outs[] = {"s3://bucket/x", "gs://other/y"};
	sl_policy_request req = {"clinical-1", "k1", outs, 2};
	if (sl_policy_evaluate(p, c, &req, &d) != SL_OK)
		abort();
	if (sl_decision_to_json(d, &j) != SL_OK)
		abort();
	json_decref(j);
	sl_decision_free(d);
	sl_claims_free(c);
	sl_policy_free(p);
	return 0;
}
