/* Fuzz target: a policy document through parse + validate, and when valid,
 * an evaluation against fixed claims and a request (must never crash, and a
 * valid policy's decision must be produced). */
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
	if (sl_policy_load(data, size, &p) != SL_OK)
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
	                                    {"gpu.cc", "on"}};
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
