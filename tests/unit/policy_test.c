/* Policy v1: a table of evaluation cases (each asserts the decision AND the
 * reason that names the rule), validation errors with their JSON paths,
 * signed loading, the development policy, and regions.json == the embedded copy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../policy/policy_int.h"
#include "seclaunch/minisign.h"
#include "seclaunch/policy.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

#define AA48                                                                                       \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"aaaaaaaa"
#define AB48                                                                                       \
	"abababababababababababababababababababababababababababababababababababababababababababab" \
	"abababab"
#define BB48                                                                                       \
	"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" \
	"bbbbbbbb"
#define BC48                                                                                       \
	"bcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbcbc" \
	"bcbcbcbc"
#define CC48                                                                                       \
	"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc" \
	"cccccccc"
#define DD32 "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
#define EE32 "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
#define FF32 "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
#define H11 "1111111111111111111111111111111111111111111111111111111111111111"
#define H12 "1212121212121212121212121212121212121212121212121212121212121212"

/* %s: the value of allow_unverified_region. */
static const char POLICY_FMT[] =
    "{\"version\": 1, \"allow_unverified_region\": %s,\n"
    " \"region_groups\": {\"nordics\": [\"aws:eu-north-1\", \"gcp:europe-north*\", "
    "\"azure:swedencentral\"]},\n"
    " \"datasets\": [\n"
    "  {\"id\": \"clinical-*\", \"classification\": \"restricted\",\n"
    "   \"allowed_regions\": [\"eu\"], \"denied_regions\": [\"gcp:europe-west3\", "
    "\"aws:eu-south-*\"],\n"
    "   \"tee_kinds\": [\"sev-snp\", \"tdx\"],\n"
    "   \"measurements\": {\"sev-snp\": {\"measurement\": [\"" AA48 "\"]},\n"
    "     \"tdx\": {\"mrtd\": \"" BB48 "\", \"rtmr0\": [\"" CC48 "\"]},\n"
    "     \"tpm2\": {\"sha256\": {\"7\": [\"" DD32 "\", \"" EE32 "\"]}}},\n"
    "   \"min_tcb\": {\"sev-snp\": {\"bootloader\": 3, \"tee\": 0, \"snp\": 8, \"microcode\": "
    "115},\n"
    "     \"tdx\": {\"tcb_status\": [\"UpToDate\"]}},\n"
    "   \"require_gpu_cc\": true, \"key_ttl\": 3600,\n"
    "   \"output_destinations\": [{\"url\": \"s3://ckpt-eu/*\", \"region\": \"aws:eu-west-1\"},\n"
    "     {\"url\": \"s3://ckpt-us/*\", \"region\": \"aws:us-east-1\"}]},\n"
    "  {\"id\": \"clinical-ch-*\", \"allowed_regions\": [\"ch\", \"eu\"], \"tee_kinds\": "
    "[\"sev-snp\"], \"debug_allowed\": false},\n"
    "  {\"id\": \"public-*\", \"allowed_regions\": [\"us\", \"gcp:europe-*\", \"nordics\"],\n"
    "   \"tee_kinds\": [\"tpm2\"], \"debug_allowed\": true,\n"
    "   \"measurements\": {\"tpm2\": {\"sha256\": {\"0\": \"" H11 "\"}}}},\n"
    "  {\"id\": \"web-logs\", \"allowed_regions\": [\"aws:*\"], \"tee_kinds\": [\"tpm2\", "
    "\"sev-snp\"],\n"
    "   \"require_fresh_identity\": true},\n"
    "  {\"id\": \"dev-*\", \"allowed_regions\": [\"*:*\"], \"tee_kinds\": [\"tpm2\"]}\n"
    " ],\n"
    " \"keys\": {\"k-clinical\": [\"clinical-*\"], \"k-public\": [\"public-*\", \"web-logs\"]}\n"
    "}\n";

enum base { SNP, TDX, TPM };

static const char *const BASE_SNP[] = {"binding=verified",
                                       "tee.kind=sev-snp",
                                       "snp.measurement=" AA48,
                                       "snp.policy.debug=false",
                                       "snp.reported_tcb.bootloader=3",
                                       "snp.reported_tcb.tee=0",
                                       "snp.reported_tcb.snp=8",
                                       "snp.reported_tcb.microcode=115",
                                       "gpu.cc=on",
                                       "cloud.provider=gcp",
                                       "cloud.region=europe-west4",
                                       "cloud.region_verified=true",
                                       "cloud.identity_fresh=true",
                                       NULL};
static const char *const BASE_TDX[] = {"binding=verified",
                                       "tee.kind=tdx",
                                       "tdx.mrtd=" BB48,
                                       "tdx.rtmr0=" CC48,
                                       "tdx.attributes.debug=false",
                                       "tdx.tcb_status=UpToDate",
                                       "gpu.cc=on",
                                       "cloud.provider=azure",
                                       "cloud.region=westeurope",
                                       "cloud.region_verified=true",
                                       "cloud.identity_fresh=false",
                                       NULL};
static const char *const BASE_TPM[] = {"binding=verified",
                                       "tee.kind=tpm2",
                                       "tpm.pcr.sha256.0=" H11,
                                       "tpm.pcr.sha256.7=" DD32,
                                       "cloud.provider=aws",
                                       "cloud.region=us-east-1",
                                       "cloud.region_verified=true",
                                       "cloud.identity_fresh=false",
                                       NULL};

struct ecase {
	const char *name;
	int pol; /* 0: allow_unverified_region false, 1: true */
	enum base base;
	const char *mods; /* "k=v;k2=" (empty value: remove) */
	const char *dataset;
	const char *key;     /* NULL: none */
	const char *outputs; /* comma-separated, NULL: none */
	bool allow;
	const char *want; /* in a reason (deny) or a matched line (allow) */
};

static const struct ecase CASES[] = {
    {"region in group eu", 0, SNP, "", "clinical-1", NULL, NULL, true,
     "$.datasets[0].allowed_regions[0]: region gcp:europe-west4 is in group 'eu'"},
    {"key serves its dataset", 0, SNP, "", "clinical-1", "k-clinical", NULL, true,
     "$.keys.k-clinical[0]: key 'k-clinical' may serve dataset 'clinical-1'"},
    {"region outside the group", 0, SNP, "cloud.provider=aws;cloud.region=us-east-1", "clinical-1",
     NULL, NULL, false,
     "$.datasets[0].allowed_regions: region aws:us-east-1 is not in the allowed regions [eu]"},
    {"deny wins over group allow (pattern)", 0, SNP, "cloud.region=europe-west3", "clinical-1",
     NULL, NULL, false,
     "$.datasets[0].denied_regions[0]: region gcp:europe-west3 is denied (pattern "
     "'gcp:europe-west3'; deny wins)"},
    {"deny by wildcard pattern", 0, SNP, "cloud.provider=aws;cloud.region=eu-south-1", "clinical-1",
     NULL, NULL, false,
     "$.datasets[0].denied_regions[1]: region aws:eu-south-1 is denied (pattern "
     "'aws:eu-south-*'"},
    {"uk is not eu", 0, SNP, "cloud.region=europe-west2", "clinical-1", NULL, NULL, false,
     "region gcp:europe-west2 is not in the allowed regions [eu]"},
    {"tdx in azure westeurope", 0, TDX, "", "clinical-7", "k-clinical", NULL, true,
     "$.datasets[0].allowed_regions[0]: region azure:westeurope is in group 'eu'"},
    {"group us", 0, TPM, "", "public-1", "k-public", NULL, true,
     "$.datasets[2].allowed_regions[0]: region aws:us-east-1 is in group 'us'"},
    {"wildcard pattern", 0, TPM, "cloud.provider=gcp;cloud.region=europe-west1", "public-1", NULL,
     NULL, true,
     "$.datasets[2].allowed_regions[1]: region gcp:europe-west1 matches pattern 'gcp:europe-*'"},
    {"policy-defined group", 0, TPM, "cloud.provider=azure;cloud.region=swedencentral", "public-1",
     NULL, NULL, true,
     "$.datasets[2].allowed_regions[2]: region azure:swedencentral is in group 'nordics'"},
    {"apac not allowed", 0, TPM, "cloud.region=ap-south-1", "public-1", NULL, NULL, false,
     "$.datasets[2].allowed_regions: region aws:ap-south-1 is not in the allowed regions [us, "
     "gcp:europe-*, nordics]"},
    {"unknown dataset", 0, SNP, "", "finance-1", NULL, NULL, false,
     "$.datasets: no rule matches dataset 'finance-1' (default deny)"},
    {"key may not serve dataset", 0, SNP, "", "clinical-1", "k-public", NULL, false,
     "$.keys.k-public: key 'k-public' may not serve dataset 'clinical-1' (it serves [public-*, "
     "web-logs])"},
    {"unknown key", 0, SNP, "", "clinical-1", "k-nope", NULL, false,
     "$.keys: key 'k-nope' is not in the policy"},
    {"TEE kind not allowed", 0, SNP, "tee.kind=tpm2", "clinical-1", NULL, NULL, false,
     "$.datasets[0].tee_kinds: TEE kind 'tpm2' is not allowed (allowed: sev-snp, tdx)"},
    {"no TEE at all", 0, SNP, "tee.kind=", "clinical-1", NULL, NULL, false,
     "$.datasets[0].tee_kinds: no attested TEE (claim tee.kind missing)"},
    {"SNP measurement off", 0, SNP, "snp.measurement=" AB48, "clinical-1", NULL, NULL, false,
     "$.datasets[0].measurements.sev-snp.measurement: claim snp.measurement is " AB48
     ", want one of [" AA48 "]"},
    {"SNP measurement missing", 0, SNP, "snp.measurement=", "clinical-1", NULL, NULL, false,
     "$.datasets[0].measurements.sev-snp.measurement: claim snp.measurement is missing"},
    {"SNP measurement upper-case hex", 0, SNP,
     "snp.measurement="
     "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
     "AAAAAAAAAAAAAA",
     "clinical-1", NULL, NULL, true,
     "$.datasets[0].measurements.sev-snp.measurement: claim snp.measurement matches"},
    {"one PCR off", 0, TPM, "tpm.pcr.sha256.0=" H12, "public-1", NULL, NULL, false,
     "$.datasets[2].measurements.tpm2.sha256.0: claim tpm.pcr.sha256.0 is " H12
     ", want one of [" H11 "]"},
    {"PCR missing", 0, TPM, "tpm.pcr.sha256.0=", "public-1", NULL, NULL, false,
     "$.datasets[2].measurements.tpm2.sha256.0: claim tpm.pcr.sha256.0 is missing"},
    {"vTPM PCR off beside SNP", 0, SNP, "tpm.pcr.sha256.7=" FF32, "clinical-1", NULL, NULL, false,
     "$.datasets[0].measurements.tpm2.sha256.7: claim tpm.pcr.sha256.7 is " FF32},
    {"vTPM PCR second accepted value", 0, SNP, "tpm.pcr.sha256.7=" EE32, "clinical-1", NULL, NULL,
     true, "$.datasets[0].measurements.tpm2.sha256.7: claim tpm.pcr.sha256.7 matches"},
    {"measurements of absent kind skipped", 0, SNP, "", "clinical-1", NULL, NULL, true,
     "$.datasets[0].measurements.tpm2: not applicable (no tpm2 evidence)"},
    {"TDX MRTD off", 0, TDX, "tdx.mrtd=" BC48, "clinical-1", NULL, NULL, false,
     "$.datasets[0].measurements.tdx.mrtd: claim tdx.mrtd is " BC48},
    {"TDX RTMR0 off", 0, TDX, "tdx.rtmr0=" AA48, "clinical-1", NULL, NULL, false,
     "$.datasets[0].measurements.tdx.rtmr0: claim tdx.rtmr0 is " AA48},
    {"TCB snp below minimum", 0, SNP, "snp.reported_tcb.snp=7", "clinical-1", NULL, NULL, false,
     "$.datasets[0].min_tcb.sev-snp.snp: TCB below the minimum: snp.reported_tcb.snp is 7, "
     "minimum 8"},
    {"TCB microcode below minimum", 0, SNP, "snp.reported_tcb.microcode=114", "clinical-1", NULL,
     NULL, false,
     "$.datasets[0].min_tcb.sev-snp.microcode: TCB below the minimum: "
     "snp.reported_tcb.microcode is 114, minimum 115"},
    {"TCB above minimum", 0, SNP, "snp.reported_tcb.microcode=200", "clinical-1", NULL, NULL, true,
     "$.datasets[0].min_tcb.sev-snp.microcode: snp.reported_tcb.microcode 200 >= 115"},
    {"TCB claim missing", 0, SNP, "snp.reported_tcb.bootloader=", "clinical-1", NULL, NULL, false,
     "$.datasets[0].min_tcb.sev-snp.bootloader: claim snp.reported_tcb.bootloader is missing, "
     "want a number >= 3"},
    {"TCB claim not a number", 0, SNP, "snp.reported_tcb.tee=x1", "clinical-1", NULL, NULL, false,
     "$.datasets[0].min_tcb.sev-snp.tee: claim snp.reported_tcb.tee is x1"},
    {"TDX TCB status out of date", 0, TDX, "tdx.tcb_status=OutOfDate", "clinical-1", NULL, NULL,
     false, "$.datasets[0].min_tcb.tdx.tcb_status: TDX TCB status OutOfDate is not in [UpToDate]"},
    {"SNP debug on", 0, SNP, "snp.policy.debug=true", "clinical-1", NULL, NULL, false,
     "$.datasets[0].debug_allowed: the TEE allows debugging (snp.policy.debug=true) and the "
     "rule forbids it"},
    {"TDX debug on", 0, TDX, "tdx.attributes.debug=true", "clinical-1", NULL, NULL, false,
     "$.datasets[0].debug_allowed: the TEE allows debugging (tdx.attributes.debug=true)"},
    {"SNP debug unknown", 0, SNP, "snp.policy.debug=", "clinical-1", NULL, NULL, false,
     "$.datasets[0].debug_allowed: claim snp.policy.debug is missing"},
    {"debug allowed by the rule", 0, TPM, "snp.policy.debug=true", "public-1", NULL, NULL, true,
     "$.datasets[2].debug_allowed: debugging allowed by the rule"},
    {"GPU CC required, no GPU", 0, SNP, "gpu.cc=", "clinical-1", NULL, NULL, false,
     "$.datasets[0].require_gpu_cc: no GPU in confidential-computing mode (gpu.cc=missing)"},
    {"GPU CC required, GPU off", 0, SNP, "gpu.cc=off", "clinical-1", NULL, NULL, false,
     "$.datasets[0].require_gpu_cc: no GPU in confidential-computing mode (gpu.cc=off)"},
    {"GPU CC on but in dev-tools mode", 0, SNP, "gpu.devtools=true", "clinical-1", NULL, NULL,
     false, "$.datasets[0].require_gpu_cc: the GPU is in developer-tools mode (gpu.devtools=true)"},
    {"GPU CC on, dev-tools unknown", 0, SNP, "gpu.devtools=unknown;gpu.binding=verified",
     "clinical-1", NULL, NULL, true,
     "$.datasets[0].require_gpu_cc: GPU in confidential-computing mode (gpu.cc=on)"},
    {"GPU evidence unbound", 0, SNP, "gpu.binding=unchecked", "clinical-1", NULL, NULL, false,
     "$.datasets[0].require_gpu_cc: the GPU evidence is not bound to this request"},
    {"unverified region refused", 0, SNP, "cloud.region_verified=false", "clinical-1", NULL, NULL,
     false,
     "$.allow_unverified_region: region gcp:europe-west4 is not signed by the provider "
     "(cloud.region_verified=false) and the policy does not allow unverified regions"},
    {"unverified region allowed by policy", 1, SNP, "cloud.region_verified=false", "clinical-1",
     NULL, NULL, true, "$.allow_unverified_region: unverified region gcp:europe-west4 accepted"},
    {"unverified region allowed, but outside", 1, SNP,
     "cloud.region_verified=false;cloud.provider=aws;cloud.region=us-west-2", "clinical-1", NULL,
     NULL, false,
     "$.datasets[0].allowed_regions: region aws:us-west-2 is not in the allowed regions [eu]"},
    {"no region claim", 0, SNP, "cloud.region=;cloud.provider=", "clinical-1", NULL, NULL, false,
     "$.datasets[0].allowed_regions: no region claim"},
    {"stale identity document", 0, TPM, "", "web-logs", "k-public", NULL, false,
     "$.datasets[3].require_fresh_identity: the identity document is stale: not bound to this "
     "request (cloud.identity_fresh=false)"},
    {"fresh identity document", 0, TPM, "cloud.identity_fresh=true", "web-logs", "k-public", NULL,
     true, "$.datasets[3].require_fresh_identity: the identity document is fresh"},
    {"output in allowed region", 0, SNP, "", "clinical-1", NULL, "s3://ckpt-eu/run1", true,
     "$.datasets[0].allowed_regions[0]: output 's3://ckpt-eu/run1' "
     "($.datasets[0].output_destinations[0]) goes to region aws:eu-west-1 is in group 'eu'"},
    {"output outside allowed regions", 0, SNP, "", "clinical-1", NULL,
     "s3://ckpt-eu/a,s3://ckpt-us/run1", false,
     "$.datasets[0].allowed_regions: output 's3://ckpt-us/run1' "
     "($.datasets[0].output_destinations[1]) goes to region aws:us-east-1 is not in the allowed "
     "regions [eu]"},
    {"output not listed", 0, SNP, "", "clinical-1", NULL, "gs://elsewhere/x", false,
     "$.datasets[0].output_destinations: output 'gs://elsewhere/x' matches no allowed output "
     "destination"},
    {"output without destinations", 0, TPM, "", "public-1", NULL, "s3://any/x", false,
     "$.datasets[2].output_destinations: output 's3://any/x' matches no allowed output "
     "destination"},
    {"deny wins across overlapping rules", 0, SNP, "cloud.provider=aws;cloud.region=eu-central-2",
     "clinical-ch-1", NULL, NULL, false,
     "$.datasets[0].allowed_regions: region aws:eu-central-2 is not in the allowed regions [eu]"},
    {"overlapping rules both allow", 0, SNP, "", "clinical-ch-1", NULL, NULL, true,
     "$.datasets[1]: rule 'clinical-ch-*' applies to dataset 'clinical-ch-1'"},
    {"binding unchecked", 0, SNP, "binding=unchecked", "clinical-1", NULL, NULL, false,
     "$: the evidence is not bound to this request (binding=unchecked)"},
    {"binding as the checked hex value (TPM)", 0, TPM, "binding=5ec1a0c4", "public-1", NULL, NULL,
     true, "$.datasets[2].allowed_regions[0]: region aws:us-east-1 is in group 'us'"},
    {"binding missing", 0, TPM, "binding=", "public-1", NULL, NULL, false,
     "$: the evidence is not bound to this request (binding=missing)"},
    {"any region pattern", 0, TPM, "cloud.provider=azure;cloud.region=brazilsouth", "dev-1", NULL,
     NULL, true,
     "$.datasets[4].allowed_regions[0]: region azure:brazilsouth matches "
     "pattern '*:*'"},
    {"key's second pattern", 0, TPM, "cloud.identity_fresh=true", "web-logs", "k-public", NULL,
     true, "$.keys.k-public[1]: key 'k-public' may serve dataset 'web-logs' (pattern 'web-logs')"},
    {"exact dataset id does not match a longer id", 0, TPM, "cloud.identity_fresh=true",
     "web-logs-2", NULL, NULL, false,
     "$.datasets: no rule matches dataset 'web-logs-2' (default deny)"},
    {"group ch", 0, SNP, "cloud.provider=azure;cloud.region=switzerlandnorth", "clinical-ch-9",
     NULL, NULL, false,
     "$.datasets[0].allowed_regions: region azure:switzerlandnorth is not in the allowed "
     "regions [eu]"},
    {"group us wildcard member (gcp:us-*)", 0, TPM, "cloud.provider=gcp;cloud.region=us-east5",
     "public-1", NULL, NULL, true,
     "$.datasets[2].allowed_regions[0]: region gcp:us-east5 is in group 'us'"},
    {"classification shown", 0, SNP, "", "clinical-1", NULL, NULL, true,
     "$.datasets[0].classification: dataset classified 'restricted'"},
};

static sl_policy *load_test_policy(int allow_unverified)
{
	char *text = NULL;
	sl_policy *p = NULL;
	assert_true(asprintf(&text, POLICY_FMT, allow_unverified ? "true" : "false") > 0);
	sl_err rc = sl_policy_load((uint8_t *)text, strlen(text), &p);
	if (rc != SL_OK)
		fail_msg("test policy: %s", sl_err_detail());
	free(text);
	return p;
}

static sl_claims *make_claims(enum base b, const char *mods)
{
	sl_claims *c = NULL;
	const char *const *base = b == SNP ? BASE_SNP : b == TDX ? BASE_TDX : BASE_TPM;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	char *all = NULL;
	for (size_t i = 0; base[i] != NULL; i++) {
		char *kv = strdup(base[i]);
		char *eq = strchr(kv, '=');
		*eq = '\0';
		assert_int_equal(sl_claims_set(c, kv, eq + 1), SL_OK);
		free(kv);
	}
	/* removing a claim: rebuild without it */
	all = strdup(mods);
	for (char *save = NULL, *m = strtok_r(all, ";", &save); m != NULL;
	     m = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(m, '=');
		*eq = '\0';
		if (eq[1] != '\0') {
			assert_int_equal(sl_claims_set(c, m, eq + 1), SL_OK);
			continue;
		}
		sl_claims *n = NULL;
		assert_int_equal(sl_claims_new(&n), SL_OK);
		for (size_t i = 0; i < sl_claims_count(c); i++)
			if (strcmp(sl_claims_key(c, i), m) != 0)
				assert_int_equal(
				    sl_claims_set(n, sl_claims_key(c, i), sl_claims_value(c, i)),
				    SL_OK);
		sl_claims_free(c);
		c = n;
	}
	free(all);
	return c;
}

static bool list_has(const sl_decision *d, bool reasons, const char *want)
{
	size_t n = reasons ? sl_decision_reason_count(d) : sl_decision_matched_count(d);
	for (size_t i = 0; i < n; i++) {
		const char *s = reasons ? sl_decision_reason(d, i) : sl_decision_matched(d, i);
		if (strstr(s, want) != NULL)
			return true;
	}
	return false;
}

static void dump(const sl_decision *d)
{
	for (size_t i = 0; i < sl_decision_reason_count(d); i++)
		fprintf(stderr, "    reason: %s\n", sl_decision_reason(d, i));
	for (size_t i = 0; i < sl_decision_matched_count(d); i++)
		fprintf(stderr, "    matched: %s\n", sl_decision_matched(d, i));
}

static void test_eval_table(void **state)
{
	(void)state;
	sl_policy *pol[2] = {load_test_policy(0), load_test_policy(1)};
	size_t ncases = sizeof(CASES) / sizeof(CASES[0]);
	int failed = 0;
	assert_true(ncases >= 40);
	for (size_t i = 0; i < ncases; i++) {
		const struct ecase *t = &CASES[i];
		sl_claims *c = make_claims(t->base, t->mods);
		const char *outs[4];
		size_t nout = 0;
		char *ob = t->outputs ? strdup(t->outputs) : NULL;
		for (char *save = NULL, *o = ob ? strtok_r(ob, ",", &save) : NULL; o != NULL;
		     o = strtok_r(NULL, ",", &save))
			outs[nout++] = o;
		sl_policy_request req = {t->dataset, t->key, outs, nout};
		sl_decision *d = NULL;
		assert_int_equal(sl_policy_evaluate(pol[t->pol], c, &req, &d), SL_OK);
		bool ok = sl_decision_allowed(d) == t->allow;
		/* a deny must carry the reason; an allow has none and shows the match */
		if (ok && t->allow)
			ok = sl_decision_reason_count(d) == 0 && list_has(d, false, t->want);
		else if (ok)
			ok = sl_decision_reason_count(d) > 0 && list_has(d, true, t->want);
		if (!ok) {
			fprintf(stderr, "case %zu '%s': want %s with '%s', got %s\n", i, t->name,
			        t->allow ? "allow" : "deny", t->want,
			        sl_decision_allowed(d) ? "allow" : "deny");
			dump(d);
			failed++;
		}
		/* deterministic: the same inputs give the same JSON */
		sl_decision *d2 = NULL;
		json_t *j1 = NULL, *j2 = NULL;
		assert_int_equal(sl_policy_evaluate(pol[t->pol], c, &req, &d2), SL_OK);
		assert_int_equal(sl_decision_to_json(d, &j1), SL_OK);
		assert_int_equal(sl_decision_to_json(d2, &j2), SL_OK);
		assert_true(json_equal(j1, j2));
		json_decref(j1);
		json_decref(j2);
		sl_decision_free(d2);
		sl_decision_free(d);
		sl_claims_free(c);
		free(ob);
	}
	sl_policy_free(pol[0]);
	sl_policy_free(pol[1]);
	assert_int_equal(failed, 0);
}

static void test_decision_json_and_err(void **state)
{
	(void)state;
	sl_policy *p = load_test_policy(0);
	sl_claims *c = make_claims(SNP, "gpu.cc=;snp.policy.debug=true");
	sl_policy_request req = {"clinical-1", "k-clinical", NULL, 0};
	sl_decision *d = NULL;
	json_t *j = NULL, *r = NULL;
	assert_int_equal(sl_policy_evaluate(p, c, &req, &d), SL_OK);
	assert_false(sl_decision_allowed(d));
	/* every reason, not only the first */
	assert_int_equal(sl_decision_reason_count(d), 2);
	assert_int_equal(sl_decision_to_json(d, &j), SL_OK);
	assert_string_equal(json_string_value(json_object_get(j, "decision")), "deny");
	assert_string_equal(json_string_value(json_object_get(j, "key")), "k-clinical");
	assert_string_equal(json_string_value(json_object_get(j, "policy_digest")),
	                    sl_policy_digest_hex(p));
	assert_int_equal(json_integer_value(json_object_get(j, "key_ttl")), 3600);
	assert_int_equal(json_array_size(json_object_get(j, "reasons")), 2);
	assert_string_equal(
	    json_string_value(json_array_get(json_object_get(j, "dataset_rules"), 0)),
	    "$.datasets[0]");
	assert_int_equal(sl_decision_reasons_json(d, &r), SL_OK);
	assert_true(json_equal(r, json_object_get(j, "reasons")));
	assert_int_equal(sl_decision_err(d), SL_E_POLICY_DENIED);
	assert_non_null(strstr(sl_err_detail(), "debug_allowed"));
	assert_non_null(strstr(sl_err_detail(), "require_gpu_cc"));
	json_decref(j);
	json_decref(r);
	sl_decision_free(d);
	sl_claims_free(c);
	sl_policy_free(p);
}

static void test_group_override(void **state)
{
	(void)state;
	static const char text[] =
	    "{\"version\":1,\"region_groups\":{\"eu\":[\"gcp:europe-west4\"]},"
	    "\"datasets\":[{\"id\":\"d\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"sev-snp\"]}]"
	    "}";
	sl_policy *p = NULL;
	sl_decision *d = NULL;
	assert_int_equal(sl_policy_load((const uint8_t *)text, strlen(text), &p), SL_OK);
	sl_claims *c = make_claims(SNP, "cloud.provider=aws;cloud.region=eu-west-1");
	sl_policy_request req = {"d", NULL, NULL, 0};
	assert_int_equal(sl_policy_evaluate(p, c, &req, &d), SL_OK);
	assert_false(sl_decision_allowed(d));
	assert_true(list_has(d, true, "region aws:eu-west-1 is not in the allowed regions [eu]"));
	sl_decision_free(d);
	sl_claims_free(c);
	sl_policy_free(p);
}

static void test_dev_policy(void **state)
{
	(void)state;
	sl_policy *p = NULL;
	sl_decision *d = NULL;
	uint8_t dg[32];
	assert_int_equal(sl_policy_dev(&p), SL_OK);
	assert_true(sl_policy_is_dev(p));
	assert_true(sl_policy_allow_unverified_region(p));
	assert_false(sl_policy_signed(p));
	sl_sha256(sl_policy_dev_text(), strlen(sl_policy_dev_text()), dg);
	assert_memory_equal(dg, sl_policy_digest(p), 32);
	sl_claims *c = make_claims(TPM, "cloud.region=;cloud.provider=");
	sl_policy_request req = {"anything", "any-key", NULL, 0};
	assert_int_equal(sl_policy_evaluate(p, c, &req, &d), SL_OK);
	assert_true(sl_decision_allowed(d));
	assert_true(list_has(d, false, "development policy"));
	json_t *j = NULL;
	assert_int_equal(sl_decision_to_json(d, &j), SL_OK);
	assert_true(json_is_true(json_object_get(j, "development_policy")));
	json_decref(j);
	sl_decision_free(d);
	sl_claims_free(c);
	sl_policy_free(p);
	/* a normal policy is not the dev one */
	p = load_test_policy(0);
	assert_false(sl_policy_is_dev(p));
	sl_policy_free(p);
}

struct vcase {
	const char *text;
	sl_err code;
	const char *want;
};

#define DS(extra)                                                                                  \
	"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":["  \
	"\"tpm2\"]" extra "}]}"

static const struct vcase VCASES[] = {
    {"{\"version\":1,", SL_E_FORMAT, "policy: not valid JSON at line 1"},
    {"[]", SL_E_INPUT, "$: must be an object, not an array"},
    {"{\"datasets\":[]}", SL_E_INPUT, "$.version: missing"},
    {"{\"version\":\"1\"}", SL_E_INPUT, "$.version: must be an integer, not a string"},
    {"{\"version\":2}", SL_E_VERSION, "$.version: 2 is not supported"},
    {"{\"version\":1,\"datasetz\":[]}", SL_E_INPUT, "$: unknown field 'datasetz'"},
    {"{\"version\":1,\"datasets\":[]}", SL_E_INPUT, "$.datasets: an empty allow-list"},
    {"{\"version\":1,\"datasets\":{}}", SL_E_INPUT, "$.datasets: must be an array"},
    {"{\"version\":1,\"version\":1}", SL_E_FORMAT, "duplicate object key"},
    {DS(",\"regions\":[]"), SL_E_INPUT, "$.datasets[0]: unknown field 'regions'"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":[],\"tee_kinds\":[\"tpm2\"]}]"
     "}",
     SL_E_INPUT, "$.datasets[0].allowed_regions: an empty allow-list allows nothing"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":\"eu\",\"tee_kinds\":["
     "\"tpm2\"]}]}",
     SL_E_INPUT,
     "$.datasets[0].allowed_regions: must be an array of region groups or patterns, "
     "not a string"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"tee_kinds\":[\"tpm2\"]}]}", SL_E_INPUT,
     "$.datasets[0].allowed_regions: must be an array of region groups or patterns, not absent"},
    {"{\"version\":1,\"datasets\":[5]}", SL_E_INPUT,
     "$.datasets[0]: must be an object, not an integer"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":["
     "\"tpm2\"]},"
     "{\"id\":\"b\",\"allowed_regions\":[\"aws:eu-*x\"],\"tee_kinds\":[\"tpm2\"]}]}",
     SL_E_INPUT, "$.datasets[1].allowed_regions[0]: pattern 'aws:eu-*x' matches no known region"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":[\"eu\",\"eux\"],\"tee_"
     "kinds\":[\"tpm2\"]}]}",
     SL_E_INPUT, "$.datasets[0].allowed_regions[1]: unknown region group 'eux'"},
    {DS(",\"denied_regions\":[\"gcp:mars-1\"]"), SL_E_INPUT,
     "$.datasets[0].denied_regions[0]: pattern 'gcp:mars-1' matches no known region"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":["
     "\"sgx\"]}]}",
     SL_E_INPUT, "$.datasets[0].tee_kinds[0]: not a TEE kind"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[]}]}",
     SL_E_INPUT, "$.datasets[0].tee_kinds: an empty allow-list allows nothing"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":["
     "\"tpm2\"]},"
     "{\"id\":\"a\",\"allowed_regions\":[\"us\"],\"tee_kinds\":[\"tpm2\"]}]}",
     SL_E_INPUT, "$.datasets[1].id: duplicate rule for dataset 'a' (also $.datasets[0])"},
    {DS(",\"measurements\":{\"sev-snp\":{\"measurement\":[\"abcd\"]}}"), SL_E_INPUT,
     "$.datasets[0].measurements.sev-snp.measurement[0]: want 96 hex digits (48 bytes), got 4"},
    {DS(",\"measurements\":{\"sev-snp\":{\"measurement\":[]}}"), SL_E_INPUT,
     "$.datasets[0].measurements.sev-snp.measurement: an empty list of accepted values"},
    {DS(",\"measurements\":{\"tpm2\":{\"sha256\":{\"24\":\"" H11 "\"}}}"), SL_E_INPUT,
     "$.datasets[0].measurements.tpm2.sha256.24: PCR index must be 0..23"},
    {DS(",\"measurements\":{\"tpm2\":{\"md5\":{\"0\":\"" H11 "\"}}}"), SL_E_INPUT,
     "$.datasets[0].measurements.tpm2.md5: unknown PCR bank"},
    {DS(",\"measurements\":{\"tpm2\":{\"sha1\":{\"0\":\"" H11 "\"}}}"), SL_E_INPUT,
     "$.datasets[0].measurements.tpm2.sha1.0[0]: want 40 hex digits (20 bytes), got 64"},
    {DS(",\"measurements\":{\"tdx\":{\"mrtd\":\"" H11 "\"}}"), SL_E_INPUT,
     "$.datasets[0].measurements.tdx.mrtd[0]: want 96 hex digits"},
    {DS(",\"measurements\":{\"tdx\":{\"mrowner\":\"" BB48 "\"}}"), SL_E_INPUT,
     "$.datasets[0].measurements.tdx: unknown field 'mrowner'"},
    {DS(",\"measurements\":{\"sev-snp\":{\"measurement\":\"zz" AA48 "\"}}"), SL_E_INPUT,
     "$.datasets[0].measurements.sev-snp.measurement[0]: want 96 hex digits"},
    {DS(",\"min_tcb\":{\"sev-snp\":{\"snp\":300}}"), SL_E_INPUT,
     "$.datasets[0].min_tcb.sev-snp.snp: must be an integer 0..255"},
    {DS(",\"min_tcb\":{\"sev-snp\":{\"ucode\":3}}"), SL_E_INPUT,
     "$.datasets[0].min_tcb.sev-snp: unknown field 'ucode'"},
    {DS(",\"min_tcb\":{\"tdx\":{\"tcb_status\":[\"Fine\"]}}"), SL_E_INPUT,
     "$.datasets[0].min_tcb.tdx.tcb_status[0]: not a TDX TCB status"},
    {DS(",\"debug_allowed\":\"yes\""), SL_E_INPUT,
     "$.datasets[0].debug_allowed: must be true or false, not a string"},
    {DS(",\"require_gpu_cc\":1"), SL_E_INPUT,
     "$.datasets[0].require_gpu_cc: must be true or false, not an integer"},
    {DS(",\"key_ttl\":0"), SL_E_INPUT, "$.datasets[0].key_ttl: must be a number of seconds"},
    {DS(",\"output_destinations\":[{\"url\":\"s3://b/*\",\"region\":\"aws:eu-*\"}]"), SL_E_INPUT,
     "$.datasets[0].output_destinations[0].region: name the destination's one region"},
    {DS(",\"output_destinations\":[{\"url\":\"bucket\",\"region\":\"aws:eu-west-1\"}]"), SL_E_INPUT,
     "$.datasets[0].output_destinations[0].url: 'bucket' is not a URL pattern"},
    {DS(",\"output_destinations\":[{\"url\":\"s3://b/*\",\"region\":\"aws:eu-west-9\"}]"),
     SL_E_INPUT,
     "$.datasets[0].output_destinations[0].region: pattern 'aws:eu-west-9' matches no known "
     "region"},
    {DS(",\"output_destinations\":[]"), SL_E_INPUT,
     "$.datasets[0].output_destinations: an empty allow-list"},
    {"{\"version\":1,\"region_groups\":{\"x\":[\"aws:nowhere\"]},\"datasets\":[]}", SL_E_INPUT,
     "$.region_groups.x[0]: pattern 'aws:nowhere' matches no known region"},
    {"{\"version\":1,\"region_groups\":{\"x\":[]},\"datasets\":[]}", SL_E_INPUT,
     "$.region_groups.x: an empty group matches nothing"},
    {"{\"version\":1,\"region_groups\":{\"X:1\":[\"aws:*\"]},\"datasets\":[]}", SL_E_INPUT,
     "$.region_groups.X:1: group names are [a-z0-9_-]+"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":["
     "\"tpm2\"]}],"
     "\"keys\":{\"k\":[]}}",
     SL_E_INPUT, "$.keys.k: an empty allow-list allows nothing"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":["
     "\"tpm2\"]}],"
     "\"keys\":{\"k\":\"a\"}}",
     SL_E_INPUT, "$.keys.k: must be an array of dataset id patterns, not a string"},
    {"{\"version\":1,\"allow_unverified_region\":\"true\",\"datasets\":[]}", SL_E_INPUT,
     "$.allow_unverified_region: must be true or false"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a "
     "b\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"tpm2\"]}]}",
     SL_E_INPUT, "$.datasets[0].id: dataset id pattern: ' ' at byte 1 is not allowed"},
    /* the dataset naming rule (sl_dataset_id_check) on rule ids and key patterns */
    {"{\"version\":1,\"datasets\":[{\"id\":\"../../etc\",\"allowed_regions\":[\"eu\"],"
     "\"tee_kinds\":[\"tpm2\"]}]}",
     SL_E_INPUT, "$.datasets[0].id: dataset id pattern: '.' at byte 0 is not allowed"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"sales/EU\",\"allowed_regions\":[\"eu\"],"
     "\"tee_kinds\":[\"tpm2\"]}]}",
     SL_E_INPUT, "$.datasets[0].id: dataset id pattern: '/' at byte 5 is not allowed"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"daten-\xc3\xbc\",\"allowed_regions\":[\"eu\"],"
     "\"tee_kinds\":[\"tpm2\"]}]}",
     SL_E_INPUT, "$.datasets[0].id: dataset id pattern: 0xc3 at byte 6 is not allowed"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":["
     "\"tpm2\"]}],\"keys\":{\"k\":[\"a\",\"a b\"]}}",
     SL_E_INPUT, "$.keys.k[1]: dataset id pattern: ' ' at byte 1 is not allowed"},
    /* suggestions: the nearest name by edit distance */
    {DS(",\"allowed_region\":[\"eu\"]"), SL_E_INPUT,
     "$.datasets[0]: unknown field 'allowed_region' (did you mean 'allowed_regions'?)"},
    {"{\"version\":1,\"datasetz\":[]}", SL_E_INPUT, "(did you mean 'datasets'?)"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":[\"eux\"],\"tee_"
     "kinds\":[\"tpm2\"]}]}",
     SL_E_INPUT,
     "$.datasets[0].allowed_regions[0]: unknown region group 'eux' (did you mean 'eu'?)"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":[\"aws:eu-west-9\"],"
     "\"tee_kinds\":[\"tpm2\"]}]}",
     SL_E_INPUT,
     "$.datasets[0].allowed_regions[0]: pattern 'aws:eu-west-9' matches no known region (did "
     "you mean 'aws:eu-west-1'?)"},
    {"{\"version\":1,\"datasets\":[{\"id\":\"a\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":["
     "\"sev-snpp\"]}]}",
     SL_E_INPUT,
     "$.datasets[0].tee_kinds[0]: not a TEE kind (tpm2, sev-snp, tdx, aws-nitro) (did you mean "
     "'sev-snp'?)"},
    {DS(",\"min_tcb\":{\"sev-snp\":{\"microcod\":3}}"), SL_E_INPUT,
     "$.datasets[0].min_tcb.sev-snp: unknown field 'microcod' (did you mean 'microcode'?)"},
    /* cloud_identity: the provider-signed identity pins */
    {DS(",\"cloud_identity\":[]"), SL_E_INPUT,
     "$.datasets[0].cloud_identity: must be an object of identity pins, not an array"},
    {DS(",\"cloud_identity\":{}"), SL_E_INPUT, "$.datasets[0].cloud_identity: pins nothing"},
    {DS(",\"cloud_identity\":{\"gcp_project_id\":[\"ml-train-eu\"]}"), SL_E_INPUT,
     "$.datasets[0].cloud_identity: unknown field 'gcp_project_id' (did you mean "
     "'gcp_project_ids'?)"},
    {DS(",\"cloud_identity\":{\"gcp_project_ids\":[]}"), SL_E_INPUT,
     "$.datasets[0].cloud_identity.gcp_project_ids: an empty allow-list allows nothing"},
    {DS(",\"cloud_identity\":{\"gcp_project_ids\":\"ml-train-eu\"}"), SL_E_INPUT,
     "$.datasets[0].cloud_identity.gcp_project_ids: must be an array of strings"},
    {DS(",\"cloud_identity\":{\"gcp_project_ids\":[\"ML_Train\"]}"), SL_E_INPUT,
     "$.datasets[0].cloud_identity.gcp_project_ids[0]: 'ML_Train' is not a GCP project id"},
    {DS(",\"cloud_identity\":{\"gcp_project_numbers\":[\"ml-train-eu\"]}"), SL_E_INPUT,
     "$.datasets[0].cloud_identity.gcp_project_numbers[0]: 'ml-train-eu' is not a GCP project "
     "number"},
    {DS(",\"cloud_identity\":{\"gcp_instance_ids\":[\"instance-1\"]}"), SL_E_INPUT,
     "$.datasets[0].cloud_identity.gcp_instance_ids[0]: 'instance-1' is not a GCE instance id"},
    {DS(",\"cloud_identity\":{\"aws_account_ids\":[\"12345\"]}"), SL_E_INPUT,
     "$.datasets[0].cloud_identity.aws_account_ids[0]: '12345' is not an AWS account id (12 "
     "digits)"},
    {DS(",\"cloud_identity\":{\"aws_instance_ids\":[\"i-XYZ\"]}"), SL_E_INPUT,
     "$.datasets[0].cloud_identity.aws_instance_ids[0]: 'i-XYZ' is not an AWS instance id"},
    {DS(",\"cloud_identity\":{\"same_instance\":1}"), SL_E_INPUT,
     "$.datasets[0].cloud_identity.same_instance: must be true or false, not an integer"},
};

static void test_validation(void **state)
{
	(void)state;
	int failed = 0;
	for (size_t i = 0; i < sizeof(VCASES) / sizeof(VCASES[0]); i++) {
		sl_policy *p = NULL;
		sl_err rc =
		    sl_policy_load((const uint8_t *)VCASES[i].text, strlen(VCASES[i].text), &p);
		if (rc != VCASES[i].code || strstr(sl_err_detail(), VCASES[i].want) == NULL) {
			fprintf(stderr, "vcase %zu: got %s '%s', want %s '%s'\n", i,
			        sl_err_name(rc), sl_err_detail(), sl_err_name(VCASES[i].code),
			        VCASES[i].want);
			failed++;
		}
		assert_null(p);
		/* exit codes: malformed or invalid policies are input errors (2) */
		assert_int_equal(sl_err_exit_code(rc), 2);
	}
	assert_int_equal(failed, 0);
}

/* Whether the report's list holds an entry with this path and message text. */
static bool report_has(const json_t *rep, const char *list, const char *path, const char *msg)
{
	size_t i;
	json_t *e;
	json_array_foreach (json_object_get(rep, list), i, e) {
		if (strcmp(json_string_value(json_object_get(e, "path")), path) == 0 &&
		    strstr(json_string_value(json_object_get(e, "message")), msg) != NULL)
			return true;
	}
	return false;
}

/* policy check: every error with its path, not only the first. */
static void test_check_every_error(void **state)
{
	(void)state;
	static const char text[] =
	    "{\"version\":1,\"datasetz\":1,\"datasets\":[{\"id\":\"a b\",\"allowed_region\":[],"
	    "\"allowed_regions\":[\"eux\",\"aws:eu-west-9\"],\"tee_kinds\":[\"sgx\"],"
	    "\"key_ttl\":0},{\"id\":\"ok\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"tpm2\"],"
	    "\"debug_allowed\":\"no\"}],\"keys\":{\"k\":[\"a/b\"]}}";
	static const char *const want[][2] = {
	    {"$", "unknown field 'datasetz' (did you mean 'datasets'?)"},
	    {"$.datasets[0]", "unknown field 'allowed_region' (did you mean 'allowed_regions'?)"},
	    {"$.datasets[0].id", "dataset id pattern: ' ' at byte 1 is not allowed"},
	    {"$.datasets[0].allowed_regions[0]", "unknown region group 'eux' (did you mean 'eu'?)"},
	    {"$.datasets[0].allowed_regions[1]", "(did you mean 'aws:eu-west-1'?)"},
	    {"$.datasets[0].tee_kinds[0]", "not a TEE kind"},
	    {"$.datasets[0].key_ttl", "must be a number of seconds"},
	    {"$.datasets[1].debug_allowed", "must be true or false, not a string"},
	    {"$.keys.k[0]", "dataset id pattern: '/' at byte 1 is not allowed"},
	};
	size_t n = sizeof(want) / sizeof(want[0]);
	json_t *rep = NULL;
	sl_err rc = sl_policy_check((const uint8_t *)text, strlen(text), false, &rep);
	assert_int_equal(rc, SL_E_INPUT); /* the first error's code: exit 2 */
	assert_non_null(rep);
	assert_true(json_is_false(json_object_get(rep, "ok")));
	json_t *errs = json_object_get(rep, "errors");
	if (json_array_size(errs) != n) {
		char *dumped = json_dumps(rep, JSON_INDENT(1));
		fail_msg("want %zu errors, got %s", n, dumped);
	}
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(errs, i);
		assert_string_equal(json_string_value(json_object_get(e, "path")), want[i][0]);
		if (strstr(json_string_value(json_object_get(e, "message")), want[i][1]) == NULL)
			fail_msg("error %zu: '%s' lacks '%s'", i,
			         json_string_value(json_object_get(e, "message")), want[i][1]);
	}
	json_decref(rep);
	/* loading stops too, naming the first and saying there are more */
	sl_policy *p = NULL;
	assert_int_equal(sl_policy_load((const uint8_t *)text, strlen(text), &p), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "$: unknown field 'datasetz'"));
	assert_non_null(strstr(sl_err_detail(), "and more errors"));
	assert_null(p);
	/* another version: that one error only (its fields are not v1's to judge) */
	static const char v2[] = "{\"version\":2,\"datasetz\":1,\"rules\":[]}";
	assert_int_equal(sl_policy_check((const uint8_t *)v2, strlen(v2), false, &rep),
	                 SL_E_VERSION);
	assert_int_equal(json_array_size(json_object_get(rep, "errors")), 1);
	assert_true(report_has(rep, "errors", "$.version", "2 is not supported"));
	json_decref(rep);
	/* not JSON at all: one error at $, still a report */
	assert_int_equal(sl_policy_check((const uint8_t *)"{", 1, false, &rep), SL_E_FORMAT);
	assert_true(json_is_false(json_object_get(rep, "ok")));
	assert_string_equal(json_string_value(json_object_get(
	                        json_array_get(json_object_get(rep, "errors"), 0), "path")),
	                    "$");
	json_decref(rep);
}

/* Dangerous gaps: warnings in a valid policy; --strict makes them errors. */
static void test_check_warnings(void **state)
{
	(void)state;
	static const char gaps[] =
	    "{\"version\":1,\"allow_unverified_region\":true,\"datasets\":["
	    "{\"id\":\"snp-*\",\"classification\":\"restricted\",\"allowed_regions\":[\"eu\"],"
	    "\"tee_kinds\":[\"sev-snp\"]},"
	    "{\"id\":\"tdx-*\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"tdx\"],"
	    "\"measurements\":{\"tdx\":{\"mrtd\":\"" BB48 "\"}},\"key_ttl\":60},"
	    "{\"id\":\"tpm-*\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"tpm2\"]},"
	    "{\"id\":\"pin-*\",\"allowed_regions\":[\"eu\"],\"tee_kinds\":[\"tpm2\"],"
	    "\"min_tcb\":{\"sev-snp\":{\"snp\":8}},"
	    "\"cloud_identity\":{\"gcp_project_ids\":[\"ml-train-eu\"],\"same_instance\":true}}]}";
	json_t *rep = NULL;
	assert_int_equal(sl_policy_check((const uint8_t *)gaps, strlen(gaps), false, &rep), SL_OK);
	assert_true(json_is_true(json_object_get(rep, "ok")));
	assert_int_equal(json_array_size(json_object_get(rep, "errors")), 0);
	assert_true(report_has(rep, "warnings", "$.datasets[0].measurements",
	                       "allows sev-snp but pins no SEV-SNP launch measurement"));
	assert_true(report_has(rep, "warnings", "$.datasets[0].min_tcb",
	                       "rule 'snp-*' sets no minimum TCB"));
	assert_true(report_has(rep, "warnings", "$.datasets[0].key_ttl",
	                       "classified 'restricted' but sets no key_ttl"));
	assert_true(report_has(rep, "warnings", "$.datasets[1].min_tcb",
	                       "rule 'tdx-*' sets no minimum TCB"));
	assert_true(report_has(rep, "warnings", "$.datasets[2].min_tcb", "it allows only tpm2"));
	assert_true(report_has(rep, "warnings", "$.keys", "no keys map"));
	assert_true(report_has(rep, "warnings", "$.allow_unverified_region", "development only"));
	assert_true(report_has(rep, "warnings", "$.datasets[3].cloud_identity.same_instance",
	                       "every request under rule 'pin-*' is denied"));
	/* pinned measurements, a TCB floor and a TTL: no warning for that rule */
	assert_false(report_has(rep, "warnings", "$.datasets[1].measurements", ""));
	assert_false(report_has(rep, "warnings", "$.datasets[1].key_ttl", ""));
	/* tpm2 rules without PCR pins warn as an SNP rule without a measurement */
	assert_true(report_has(rep, "warnings", "$.datasets[2].measurements",
	                       "rule 'tpm-*' allows tpm2 but pins no TPM PCR values"));
	assert_true(report_has(rep, "warnings", "$.datasets[3].measurements", "allows tpm2"));
	assert_int_equal(json_array_size(json_object_get(rep, "warnings")), 10);
	json_decref(rep);

	/* --strict: the same findings are errors, exit 2 */
	assert_int_equal(sl_policy_check((const uint8_t *)gaps, strlen(gaps), true, &rep),
	                 SL_E_INPUT);
	assert_int_equal(sl_err_exit_code(SL_E_INPUT), 2);
	assert_true(json_is_false(json_object_get(rep, "ok")));
	assert_int_equal(json_array_size(json_object_get(rep, "errors")), 10);
	assert_int_equal(json_array_size(json_object_get(rep, "warnings")), 0);
	assert_true(report_has(rep, "errors", "$.datasets[0].measurements", "(--strict)"));
	json_decref(rep);

	/* the full test policy pins everything it should: only the tpm2 rules warn */
	char *text = NULL;
	assert_true(asprintf(&text, POLICY_FMT, "false") > 0);
	assert_int_equal(sl_policy_check((const uint8_t *)text, strlen(text), true, &rep),
	                 SL_E_INPUT);
	assert_false(report_has(rep, "errors", "$.datasets[0].measurements", ""));
	assert_false(report_has(rep, "errors", "$.datasets[0].min_tcb", ""));
	assert_false(report_has(rep, "errors", "$.datasets[0].key_ttl", ""));
	assert_false(report_has(rep, "errors", "$.keys", ""));
	assert_true(report_has(rep, "errors", "$.datasets[1].measurements", "allows sev-snp"));
	json_decref(rep);
	free(text);
}

/* The naming rule itself, and each refusal from the issue. */
static void test_dataset_id_rule(void **state)
{
	(void)state;
	static const char *const bad[][2] = {
	    {"sales 2026/EU", "' ' at byte 5"},
	    {"../../etc", "'.' at byte 0"},
	    {"daten-\xc3\xbc", "0xc3 at byte 6"},
	    {"a*b", "'*' at byte 1"},
	    {"-rf", "'-' at byte 0"},
	    {"", "empty dataset id"},
	    {"a\tb", "0x09 at byte 1"},
	    {"=HYPERLINK(1)", "'=' at byte 0"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(sl_dataset_id_check(bad[i][0], false, "--dataset-id"), SL_E_INPUT);
		if (strstr(sl_err_detail(), bad[i][1]) == NULL ||
		    strstr(sl_err_detail(), "--dataset-id: ") != sl_err_detail())
			fail_msg("'%s': %s", bad[i][0], sl_err_detail());
		assert_false(sl_dataset_id_valid(bad[i][0]));
	}
	char longid[SL_DATASET_ID_MAX + 2];
	memset(longid, 'a', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	assert_int_equal(sl_dataset_id_check(longid, false, "x"), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "longer than 128"));
	longid[SL_DATASET_ID_MAX] = '\0';
	assert_int_equal(sl_dataset_id_check(longid, false, "x"), SL_OK);
	static const char *const good[] = {"clinical-eu-2026", "team:sales.2026_Q4", "0", "A-b.c"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(sl_dataset_id_valid(good[i]));
	/* patterns may hold '*' anywhere, nothing else more */
	assert_int_equal(sl_dataset_id_check("*", true, "p"), SL_OK);
	assert_int_equal(sl_dataset_id_check("clinical-*", true, "p"), SL_OK);
	assert_int_equal(sl_dataset_id_check("a b*", true, "p"), SL_E_INPUT);
}

/* cloud_identity: what the provider signed, pinned per field (policy_identity.c). */
static const char ID_POLICY[] =
    "{\"version\":1,\"datasets\":["
    "{\"id\":\"gcp-*\",\"allowed_regions\":[\"*:*\"],\"tee_kinds\":[\"tpm2\"],"
    "\"cloud_identity\":{\"gcp_project_ids\":[\"ml-train-eu\"],\"gcp_project_numbers\":["
    "\"123456789012\"],\"gcp_instance_ids\":[\"4567890123456789012\"]}},"
    "{\"id\":\"aws-*\",\"allowed_regions\":[\"*:*\"],\"tee_kinds\":[\"tpm2\"],"
    "\"cloud_identity\":{\"aws_account_ids\":[\"123456789012\"],\"aws_instance_ids\":["
    "\"i-0123456789abcdef0\"]}},"
    "{\"id\":\"proj-*\",\"allowed_regions\":[\"*:*\"],\"tee_kinds\":[\"tpm2\"],"
    "\"cloud_identity\":{\"gcp_project_ids\":[\"ml-train-eu\"]}},"
    "{\"id\":\"same-*\",\"allowed_regions\":[\"*:*\"],\"tee_kinds\":[\"tpm2\"],"
    "\"cloud_identity\":{\"gcp_project_ids\":[\"ml-train-eu\"],\"same_instance\":true}},"
    "{\"id\":\"az-*\",\"allowed_regions\":[\"*:*\"],\"tee_kinds\":[\"tpm2\"],"
    "\"cloud_identity\":{\"same_instance\":true}}]}";

#define GCP_ID                                                                                     \
	"cloud.provider=gcp;cloud.region=europe-west4;cloud.project_id=ml-train-eu;"               \
	"cloud.project_number=123456789012;cloud.instance_id=4567890123456789012"
#define AWS_ID                                                                                     \
	"cloud.provider=aws;cloud.region=eu-west-1;cloud.account_id=123456789012;"                 \
	"cloud.instance_id=i-0123456789abcdef0"
#define AZ_ID                                                                                      \
	"cloud.provider=azure;cloud.region=westeurope;"                                            \
	"cloud.instance_id=6C0B3C4E-1A2B-4C5D-8E9F-0A1B2C3D4E5F;"                                  \
	"azure.vm.unique_id=6c0b3c4e-1a2b-4c5d-8e9f-0a1b2c3d4e5f"

static const struct {
	const char *name, *mods, *dataset;
	bool allow;
	const char *want;
} ICASES[] = {
    {"gcp: every pin matches", GCP_ID, "gcp-1", true,
     "$.datasets[0].cloud_identity.gcp_project_ids: the gcp identity's cloud.project_id is "
     "ml-train-eu (provider-signed)"},
    {"gcp: project number matches", GCP_ID, "gcp-1", true,
     "$.datasets[0].cloud_identity.gcp_project_numbers: the gcp identity's "
     "cloud.project_number is 123456789012"},
    {"gcp: instance matches", GCP_ID, "gcp-1", true,
     "$.datasets[0].cloud_identity.gcp_instance_ids: the gcp identity's cloud.instance_id is "
     "4567890123456789012"},
    {"gcp: an identity from another project", GCP_ID ";cloud.project_id=attacker-proj", "gcp-1",
     false,
     "$.datasets[0].cloud_identity.gcp_project_ids: the gcp identity's cloud.project_id is "
     "attacker-proj, want one of [ml-train-eu]: an identity from another project"},
    {"gcp: another project number", GCP_ID ";cloud.project_number=999", "gcp-1", false,
     "$.datasets[0].cloud_identity.gcp_project_numbers: the gcp identity's "
     "cloud.project_number is 999, want one of [123456789012]"},
    {"gcp: another instance", GCP_ID ";cloud.instance_id=1", "gcp-1", false,
     "$.datasets[0].cloud_identity.gcp_instance_ids: the gcp identity's cloud.instance_id is 1, "
     "want one of [4567890123456789012]: an identity from another instance"},
    {"gcp: project claim missing", GCP_ID ";cloud.project_id=", "gcp-1", false,
     "$.datasets[0].cloud_identity.gcp_project_ids: the gcp identity's cloud.project_id is "
     "missing"},
    {"gcp: unsigned region", GCP_ID ";cloud.region_verified=false", "gcp-1", false,
     "$.datasets[0].cloud_identity: the rule pins the cloud identity, and there is no "
     "provider-signed identity document"},
    {"aws: every pin matches", AWS_ID, "aws-1", true,
     "$.datasets[1].cloud_identity.aws_account_ids: the aws identity's cloud.account_id is "
     "123456789012"},
    {"aws: instance matches", AWS_ID, "aws-1", true,
     "$.datasets[1].cloud_identity.aws_instance_ids: the aws identity's cloud.instance_id is "
     "i-0123456789abcdef0"},
    {"aws: another account", AWS_ID ";cloud.account_id=999999999999", "aws-1", false,
     "$.datasets[1].cloud_identity.aws_account_ids: the aws identity's cloud.account_id is "
     "999999999999, want one of [123456789012]: an identity from another account"},
    {"aws: another instance", AWS_ID ";cloud.instance_id=i-0fffffffffffffff0", "aws-1", false,
     "$.datasets[1].cloud_identity.aws_instance_ids: the aws identity's cloud.instance_id is "
     "i-0fffffffffffffff0, want one of [i-0123456789abcdef0]"},
    {"gcp pins only: an aws identity is refused", AWS_ID, "proj-1", false,
     "$.datasets[2].cloud_identity: the rule pins the cloud identity but nothing for provider "
     "'aws'"},
    {"same_instance: gcp evidence names no instance", GCP_ID, "same-1", false,
     "$.datasets[3].cloud_identity.same_instance: no TEE evidence seclaunch verifies names a "
     "gcp instance"},
    {"same_instance: azure vTPM evidence names the same VM", AZ_ID, "az-1", true,
     "$.datasets[4].cloud_identity.same_instance: the identity and the TEE evidence name "
     "instance"},
    {"same_instance: azure evidence names another VM",
     AZ_ID ";azure.vm.unique_id=00000000-0000-0000-0000-000000000000", "az-1", false,
     "$.datasets[4].cloud_identity.same_instance: the identity names instance "
     "6C0B3C4E-1A2B-4C5D-8E9F-0A1B2C3D4E5F, the TEE evidence "
     "00000000-0000-0000-0000-000000000000 (azure.vm.unique_id): a relayed identity"},
    {"same_instance: azure evidence without its VM id", AZ_ID ";azure.vm.unique_id=", "az-1", false,
     "$.datasets[4].cloud_identity.same_instance: the identity and the TEE evidence must "
     "name the same instance, and azure.vm.unique_id is missing"},
};

static void test_identity_pins(void **state)
{
	(void)state;
	sl_policy *p = NULL;
	int failed = 0;
	if (sl_policy_load((const uint8_t *)ID_POLICY, strlen(ID_POLICY), &p) != SL_OK)
		fail_msg("identity policy: %s", sl_err_detail());
	for (size_t i = 0; i < sizeof(ICASES) / sizeof(ICASES[0]); i++) {
		sl_claims *c = make_claims(TPM, ICASES[i].mods);
		sl_policy_request req = {ICASES[i].dataset, NULL, NULL, 0};
		sl_decision *d = NULL;
		assert_int_equal(sl_policy_evaluate(p, c, &req, &d), SL_OK);
		bool ok = sl_decision_allowed(d) == ICASES[i].allow &&
		          list_has(d, !ICASES[i].allow, ICASES[i].want);
		if (!ok) {
			fprintf(stderr, "icase %zu '%s': want %s with '%s'\n", i, ICASES[i].name,
			        ICASES[i].allow ? "allow" : "deny", ICASES[i].want);
			dump(d);
			failed++;
		}
		sl_decision_free(d);
		sl_claims_free(c);
	}
	/* a rule without cloud_identity is unchanged: the same claims, no pin */
	sl_policy_free(p);
	assert_int_equal(failed, 0);
}

static void test_signed_loading(void **state)
{
	(void)state;
	char *sec = NULL, *pub = NULL, *sig = NULL, *text = NULL, *pub2 = NULL, *sec2 = NULL;
	sl_minisign_pubkey pk, pk2;
	sl_minisign_seckey *sk = NULL;
	sl_policy *p = NULL;
	uint8_t dg[32];

	assert_true(asprintf(&text, POLICY_FMT, "false") > 0);
	size_t tl = strlen(text);
	assert_int_equal(sl_minisign_keygen(NULL, 0, 0, &sec, &pub, &pk), SL_OK);
	assert_int_equal(sl_minisign_seckey_parse((uint8_t *)sec, strlen(sec), NULL, &sk), SL_OK);
	assert_int_equal(sl_minisign_sign(sk, (uint8_t *)text, tl, "policy v7", false, &sig),
	                 SL_OK);
	assert_int_equal(sl_policy_load_signed_mem((uint8_t *)text, tl, (uint8_t *)sig, strlen(sig),
	                                           (uint8_t *)pub, strlen(pub), &p),
	                 SL_OK);
	assert_string_equal(sl_policy_trusted_comment(p), "policy v7");
	assert_true(sl_policy_signed(p));
	sl_sha256(text, tl, dg);
	assert_memory_equal(dg, sl_policy_digest(p), 32);
	sl_policy_free(p);
	p = NULL;

	/* a flipped byte in the policy: refused before any parse, exit 4 */
	text[30] ^= 1;
	assert_int_equal(sl_policy_load_signed_mem((uint8_t *)text, tl, (uint8_t *)sig, strlen(sig),
	                                           (uint8_t *)pub, strlen(pub), &p),
	                 SL_E_POLICY_SIG);
	assert_non_null(strstr(sl_err_detail(), "signature does not verify"));
	assert_int_equal(sl_err_exit_code(SL_E_POLICY_SIG), 4);
	text[30] ^= 1;
	/* a badly signed policy that is also invalid JSON: still a signature error */
	assert_int_equal(sl_policy_load_signed_mem((uint8_t *)"{", 1, (uint8_t *)sig, strlen(sig),
	                                           (uint8_t *)pub, strlen(pub), &p),
	                 SL_E_POLICY_SIG);
	/* wrong public key */
	assert_int_equal(sl_minisign_keygen(NULL, 0, 0, &sec2, &pub2, &pk2), SL_OK);
	assert_int_equal(sl_policy_load_signed_mem((uint8_t *)text, tl, (uint8_t *)sig, strlen(sig),
	                                           (uint8_t *)pub2, strlen(pub2), &p),
	                 SL_E_POLICY_SIG);
	assert_non_null(strstr(sl_err_detail(), "wrong public key"));
	/* tampered trusted comment */
	char *t = strdup(sig);
	*strstr(t, "policy v7") = 'P';
	assert_int_equal(sl_policy_load_signed_mem((uint8_t *)text, tl, (uint8_t *)t, strlen(t),
	                                           (uint8_t *)pub, strlen(pub), &p),
	                 SL_E_POLICY_SIG);
	assert_non_null(strstr(sl_err_detail(), "trusted comment"));
	free(t);
	/* malformed signature file: exit 2 */
	assert_int_equal(sl_policy_load_signed_mem((uint8_t *)text, tl, (const uint8_t *)"junk", 4,
	                                           (uint8_t *)pub, strlen(pub), &p),
	                 SL_E_FORMAT);
	/* validly signed but invalid document: input error naming the path */
	const char *bad = "{\"version\":1,\"datasets\":[]}";
	free(sig);
	assert_int_equal(sl_minisign_sign(sk, (const uint8_t *)bad, strlen(bad), NULL, false, &sig),
	                 SL_OK);
	assert_int_equal(sl_policy_load_signed_mem((const uint8_t *)bad, strlen(bad),
	                                           (uint8_t *)sig, strlen(sig), (uint8_t *)pub,
	                                           strlen(pub), &p),
	                 SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "$.datasets"));
	assert_null(p);
	sl_minisign_seckey_free(sk);
	free(sec);
	free(pub);
	free(sec2);
	free(pub2);
	free(sig);
	free(text);
}

static void test_regions_embedded(void **state)
{
	(void)state;
	uint8_t *data = NULL;
	size_t len = 0;
	const char *root = getenv("SL_ROOT");
	char path[4096];
	snprintf(path, sizeof(path), "%s/policy/regions.json", root ? root : ".");
	assert_int_equal(sl_file_read(path, 1 << 20, &data, &len), SL_OK);
	/* run scripts/gen-regions after editing policy/regions.json */
	assert_int_equal(len, sl_policy_regions_json_len);
	assert_memory_equal(data, sl_policy_regions_json, len);
	free(data);
	json_t *known = NULL, *groups = NULL;
	assert_int_equal(sl_policy_builtin_regions(&known, &groups), SL_OK);
	static const char *const want[] = {"eu", "eea", "us", "uk", "ch", "apac"};
	for (size_t i = 0; i < 6; i++)
		assert_non_null(json_object_get(groups, want[i]));
	assert_true(json_array_size(known) > 100);
	json_decref(known);
	json_decref(groups);
}

/* The built-in groups say what their names mean: aws:eu-* is not the EU. */
static void test_builtin_groups(void **state)
{
	(void)state;
	sl_policy *p = load_test_policy(0);
	static const struct {
		const char *group, *region;
		bool in;
	} t[] = {
	    {"eu", "aws:eu-west-1", true},          {"eu", "aws:eu-west-2", false},
	    {"eu", "aws:eu-central-2", false},      {"eu", "gcp:europe-west2", false},
	    {"eu", "gcp:europe-west6", false},      {"eu", "azure:norwayeast", false},
	    {"eea", "azure:norwayeast", true},      {"eea", "gcp:europe-west4", true},
	    {"uk", "aws:eu-west-2", true},          {"uk", "azure:ukwest", true},
	    {"ch", "gcp:europe-west6", true},       {"ch", "aws:eu-central-1", false},
	    {"us", "aws:us-gov-west-1", true},      {"us", "aws:ca-central-1", false},
	    {"apac", "gcp:asia-south1", true},      {"apac", "aws:me-south-1", false},
	    {"nordics", "gcp:europe-north2", true}, /* the test policy's own group */
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (sl_policy_region_entry_matches(p, t[i].group, t[i].region) != t[i].in)
			fail_msg("%s %s group %s", t[i].region, t[i].in ? "not in" : "wrongly in",
			         t[i].group);
	sl_policy_free(p);
}

static void test_glob(void **state)
{
	(void)state;
	assert_true(sl_policy_glob("*", ""));
	assert_true(sl_policy_glob("aws:eu-*", "aws:eu-west-1"));
	assert_false(sl_policy_glob("aws:eu-*", "aws:us-east-1"));
	assert_true(sl_policy_glob("a*b*c", "axxbyyc"));
	assert_false(sl_policy_glob("a*b*c", "axxbyy"));
	assert_true(sl_policy_glob("*-1", "us-east-1"));
	assert_false(sl_policy_glob("us-east-1", "us-east-10"));
	assert_false(sl_policy_glob("clinical-?", "clinical-1")); /* '?' is literal */
}

int main(void)
{
	if (sl_crypto_init() != SL_OK)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_eval_table),       cmocka_unit_test(test_decision_json_and_err),
	    cmocka_unit_test(test_group_override),   cmocka_unit_test(test_dev_policy),
	    cmocka_unit_test(test_validation),       cmocka_unit_test(test_signed_loading),
	    cmocka_unit_test(test_regions_embedded), cmocka_unit_test(test_glob),
	    cmocka_unit_test(test_builtin_groups),   cmocka_unit_test(test_check_every_error),
	    cmocka_unit_test(test_check_warnings),   cmocka_unit_test(test_dataset_id_rule),
	    cmocka_unit_test(test_identity_pins),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
