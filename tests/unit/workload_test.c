/* The workload event and its log: shape checks, canonical form and the
 * identity digest that leaves the policy digest out, replay against the
 * quoted register (edited, reordered, truncated logs refused), the
 * register choice (resettable PCRs refused), TDX RTMR3 through a fake
 * measurement tree, and the policy's workloads rule naming what differed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seclaunch/policy.h"
#include "seclaunch/util.h"
#include "seclaunch/workload.h"

#define H64(c)                                                                                     \
	c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c  \
	    c c c c c c c c c c c c c c c c c c c

static json_t *event(const char *argv1, const char *pol)
{
	return json_pack("{s:s, s:i, s:{s:s, s:s}, s:n, s:[s, s], s:[s], s:s, s:s, s:[{s:s, s:s}], "
	                 "s:[], s:s}",
	                 "type", "seclaunch.workload", "version", 1, "exe", "path",
	                 "/usr/bin/python3", "sha256", H64("a"), "script", "argv", "python3", argv1,
	                 "env", "PATH=/usr/bin", "cwd", "/work", "image_digest", "", "datasets",
	                 "id", "d1", "root", "sha256:" H64("b"), "outputs", "policy_digest", pol);
}

static void test_event_checks(void **state)
{
	(void)state;
	json_t *e = event("train.py", H64("c"));
	assert_int_equal(sl_workload_event_check(e, "ev"), SL_OK);
	json_object_set_new(e, "extra", json_true());
	assert_int_equal(sl_workload_event_check(e, "ev"), SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "extra"));
	json_object_del(e, "extra");
	json_object_set_new(json_object_get(e, "exe"), "sha256", json_string("ABC"));
	assert_int_equal(sl_workload_event_check(e, "ev"), SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "ev.exe.sha256"));
	json_decref(e);
	e = event("train.py", H64("c"));
	json_object_set_new(e, "version", json_integer(2));
	assert_int_equal(sl_workload_event_check(e, "ev"), SL_E_VERSION);
	json_decref(e);
	e = event("train.py", H64("c"));
	json_object_set_new(e, "image_digest", json_string("sha256:xyz"));
	assert_int_equal(sl_workload_event_check(e, "ev"), SL_E_ATTEST_FORMAT);
	json_decref(e);
}

static void test_identity_leaves_out_policy(void **state)
{
	(void)state;
	json_t *a = event("train.py", H64("c")), *b = event("train.py", H64("d")),
	       *c = event("evil.py", H64("c"));
	uint8_t ia[32], ib[32], ic[32], ea[32], eb[32];
	assert_int_equal(sl_workload_identity(a, ia), SL_OK);
	assert_int_equal(sl_workload_identity(b, ib), SL_OK);
	assert_int_equal(sl_workload_identity(c, ic), SL_OK);
	assert_memory_equal(ia, ib, 32);     /* another policy: same job */
	assert_memory_not_equal(ia, ic, 32); /* another script argument: another job */
	assert_int_equal(sl_workload_event_digest(a, ea), SL_OK);
	assert_int_equal(sl_workload_event_digest(b, eb), SL_OK);
	assert_memory_not_equal(ea, eb, 32); /* the measurement names the policy */
	/* canonical: the same bytes whatever the member order */
	char *t = NULL;
	assert_int_equal(sl_workload_canonical(a, &t), SL_OK);
	assert_non_null(strstr(t, "{\"argv\":[\"python3\",\"train.py\"],\"cwd\":"));
	free(t);
	json_decref(a);
	json_decref(b);
	json_decref(c);
}

/* evidence {"kind", "workload_log"} with the register's claim set as a
 * verifier would have set it from the quote */
static sl_err verify_with(json_t *events, const char *kind, const char *reg, const char *ckey,
                          const uint8_t *val, size_t vlen, sl_claims **out)
{
	json_t *ev = json_pack("{s:s, s:{s:s, s:O}}", "kind", kind, "workload_log", "register", reg,
	                       "events", events);
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_claims_set_hex(c, ckey, val, vlen), SL_OK);
	sl_err rc = sl_workload_verify(ev, c);
	json_decref(ev);
	*out = c;
	return rc;
}

static void test_replay(void **state)
{
	(void)state;
	json_t *log = json_pack("[o, o, o]", event("a.py", H64("c")), event("b.py", H64("c")),
	                        event("c.py", H64("c")));
	uint8_t pcr[32], d[32], buf[64];
	sl_claims *c = NULL;
	/* the register by hand: extend from zero */
	memset(pcr, 0, 32);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(sl_workload_event_digest(json_array_get(log, i), d), SL_OK);
		memcpy(buf, pcr, 32);
		memcpy(buf + 32, d, 32);
		sl_sha256(buf, 64, pcr);
	}
	uint8_t r[32];
	assert_int_equal(sl_workload_replay(log, false, r, 32), SL_OK);
	assert_memory_equal(r, pcr, 32);
	assert_int_equal(verify_with(log, "tpm2", "pcr15", "tpm.pcr.sha256.15", pcr, 32, &c),
	                 SL_OK);
	assert_string_equal(sl_claims_get(c, "workload.argv"), "[\"python3\",\"c.py\"]");
	assert_string_equal(sl_claims_get(c, "workload.events"), "3");
	assert_string_equal(sl_claims_get(c, "workload.register"), "tpm2:pcr15");
	assert_string_equal(sl_claims_get(c, "workload.exe_sha256"), H64("a"));
	assert_string_equal(sl_claims_get(c, "workload.script_sha256"), "none");
	sl_claims_free(c);

	/* edited */
	json_t *e = json_deep_copy(log);
	json_array_set_new(json_object_get(json_array_get(e, 1), "argv"), 1, json_string("x.py"));
	assert_int_equal(verify_with(e, "tpm2", "pcr15", "tpm.pcr.sha256.15", pcr, 32, &c),
	                 SL_E_ATTEST);
	assert_non_null(strstr(sl_err_detail(), "edited, reordered or truncated"));
	sl_claims_free(c);
	json_decref(e);
	/* reordered */
	e = json_pack("[O, O, O]", json_array_get(log, 1), json_array_get(log, 0),
	              json_array_get(log, 2));
	assert_int_equal(verify_with(e, "tpm2", "pcr15", "tpm.pcr.sha256.15", pcr, 32, &c),
	                 SL_E_ATTEST);
	sl_claims_free(c);
	json_decref(e);
	/* truncated */
	e = json_deep_copy(log);
	json_array_remove(e, 2);
	assert_int_equal(verify_with(e, "tpm2", "pcr15", "tpm.pcr.sha256.15", pcr, 32, &c),
	                 SL_E_ATTEST);
	sl_claims_free(c);
	json_decref(e);
	/* a resettable PCR proves nothing */
	assert_int_equal(verify_with(log, "tpm2", "pcr16", "tpm.pcr.sha256.16", pcr, 32, &c),
	                 SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "cannot be reset"));
	sl_claims_free(c);
	/* the register not quoted */
	assert_int_equal(verify_with(log, "tpm2", "pcr14", "tpm.pcr.sha256.15", pcr, 32, &c),
	                 SL_E_ATTEST);
	sl_claims_free(c);
	json_decref(log);
}

/* TDX: RTMR3 through the kernel interface, on a fake measurement tree; the
 * verifier replays SHA-384 against tdx.rtmr3. */
static void test_tdx_rtmr3(void **state)
{
	(void)state;
	char dir[] = "/tmp/sl-rtmr.XXXXXX", path[64];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/rtmr3:sha384", dir);
	assert_false(sl_workload_rtmr_available(dir));
	assert_int_equal(sl_workload_rtmr_extend(dir, (uint8_t[48]){0}), SL_E_SYSTEM);
	int fd = open(path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_true(sl_workload_rtmr_available(dir));
	json_t *e = event("t.py", H64("c"));
	char *t = NULL;
	uint8_t d[48], got[64], reg[96], val[48];
	unsigned int dl = 0;
	assert_int_equal(sl_workload_canonical(e, &t), SL_OK);
	assert_int_equal(EVP_Digest(t, strlen(t), d, &dl, EVP_sha384(), NULL), 1);
	free(t);
	assert_int_equal(sl_workload_rtmr_extend(dir, d), SL_OK);
	fd = open(path, O_RDONLY);
	assert_int_equal(read(fd, got, sizeof(got)), 48); /* one write of the digest */
	close(fd);
	assert_memory_equal(got, d, 48);
	memset(reg, 0, 48);
	memcpy(reg + 48, d, 48);
	assert_int_equal(EVP_Digest(reg, 96, val, &dl, EVP_sha384(), NULL), 1);
	json_t *log = json_pack("[o]", e);
	sl_claims *c = NULL;
	assert_int_equal(verify_with(log, "tdx", "rtmr3", "tdx.rtmr3", val, 48, &c), SL_OK);
	assert_string_equal(sl_claims_get(c, "workload.register"), "tdx:rtmr3");
	sl_claims_free(c);
	val[0] ^= 1;
	assert_int_equal(verify_with(log, "tdx", "rtmr3", "tdx.rtmr3", val, 48, &c), SL_E_ATTEST);
	sl_claims_free(c);
	json_decref(log);
	unlink(path);
	rmdir(dir);
}

static void test_policy_workloads(void **state)
{
	(void)state;
	const char *doc =
	    "{\"version\": 1, \"allow_unverified_region\": true, \"keys\": {\"k\": [\"d1\"]},"
	    " \"datasets\": [{\"id\": \"d1\", \"allowed_regions\": [\"gcp:europe-west4\"],"
	    " \"tee_kinds\": [\"tpm2\"], \"workloads\": [{\"exe_sha256\": [\"" H64(
	        "a") "\"],"
	             " \"argv\": [\"python3\", \"train.py\"], \"env\": [\"PATH=*\"]}]}]}";
	sl_policy *p = NULL;
	sl_claims *c = NULL;
	sl_decision *d = NULL;
	sl_policy_request req = {.dataset_id = "d1", .key_id = "k"};
	assert_int_equal(sl_policy_load((const uint8_t *)doc, strlen(doc), &p), SL_OK);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_claims_set(c, "tee.kind", "tpm2"), SL_OK);
	assert_int_equal(sl_claims_set(c, "cloud.region", "gcp:europe-west4"), SL_OK);
	assert_int_equal(sl_claims_set(c, "cloud.provider", "gcp"), SL_OK);
	/* no workload measured: denied saying so */
	assert_int_equal(sl_policy_evaluate(p, c, &req, &d), SL_OK);
	assert_false(sl_decision_allowed(d));
	bool said = false;
	for (size_t i = 0; i < sl_decision_reason_count(d); i++)
		said = said || strstr(sl_decision_reason(d, i), "no measured workload") != NULL;
	assert_true(said);
	sl_decision_free(d);
	json_t *e = event("train.py", H64("c"));
	assert_int_equal(sl_workload_claims(e, c), SL_OK);
	assert_int_equal(sl_policy_evaluate(p, c, &req, &d), SL_OK);
	for (size_t i = 0; i < sl_decision_reason_count(d); i++)
		said = said && strstr(sl_decision_reason(d, i), "workloads") == NULL;
	assert_true(said);
	sl_decision_free(d);
	json_decref(e);
	e = event("evil.py", H64("c"));
	assert_int_equal(sl_workload_claims(e, c), SL_OK);
	assert_int_equal(sl_policy_evaluate(p, c, &req, &d), SL_OK);
	assert_false(sl_decision_allowed(d));
	said = false;
	for (size_t i = 0; i < sl_decision_reason_count(d); i++)
		said = said || strstr(sl_decision_reason(d, i),
		                      "workloads[0]: argv[1] differs: 'evil.py'") != NULL;
	assert_true(said);
	sl_decision_free(d);
	json_decref(e);
	sl_claims_free(c);
	sl_policy_free(p);
	/* bad rules are named */
	const char *bad = "{\"version\": 1, \"keys\": {\"k\": [\"d1\"]}, \"datasets\": [{\"id\": "
	                  "\"d1\", \"allowed_regions\": [\"gcp:europe-west4\"], \"tee_kinds\": "
	                  "[\"tpm2\"], \"workloads\": [{\"exe_sha256\": [\"nothex\"]}]}]}";
	assert_int_equal(sl_policy_load((const uint8_t *)bad, strlen(bad), &p), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "$.datasets[0].workloads[0].exe_sha256"));
}

/* A container job allowed by its image digest: the measured digest is
 * allowed, another (or none, a job run outside the image) is denied
 * naming the image digest. */
static void test_policy_image_digest(void **state)
{
	(void)state;
	const char *doc =
	    "{\"version\": 1, \"allow_unverified_region\": true, \"keys\": {\"k\": [\"d1\"]},"
	    " \"datasets\": [{\"id\": \"d1\", \"allowed_regions\": [\"gcp:europe-west4\"],"
	    " \"tee_kinds\": [\"tpm2\"], \"workloads\": [{\"image_digest\": [\"sha256:" H64(
	        "e") "\"]}]}]}";
	static const char *const digests[] = {"sha256:" H64("e"), "sha256:" H64("f"), ""};
	sl_policy *p = NULL;
	sl_policy_request req = {.dataset_id = "d1", .key_id = "k"};
	assert_int_equal(sl_policy_load((const uint8_t *)doc, strlen(doc), &p), SL_OK);
	for (size_t k = 0; k < 3; k++) {
		sl_claims *c = NULL;
		sl_decision *d = NULL;
		json_t *e = event("train.py", H64("c"));
		json_object_set_new(e, "image_digest", json_string(digests[k]));
		assert_int_equal(sl_claims_new(&c), SL_OK);
		assert_int_equal(sl_claims_set(c, "tee.kind", "tpm2"), SL_OK);
		assert_int_equal(sl_claims_set(c, "cloud.region", "europe-west4"), SL_OK);
		assert_int_equal(sl_claims_set(c, "cloud.provider", "gcp"), SL_OK);
		assert_int_equal(sl_claims_set(c, "binding", "verified"), SL_OK);
		assert_int_equal(sl_workload_claims(e, c), SL_OK);
		assert_int_equal(sl_policy_evaluate(p, c, &req, &d), SL_OK);
		bool named = false;
		for (size_t i = 0; i < sl_decision_reason_count(d); i++)
			named = named ||
			        strstr(sl_decision_reason(d, i), "image digest differs") != NULL;
		assert_int_equal(sl_decision_allowed(d), k == 0);
		assert_int_equal(named, k != 0);
		sl_decision_free(d);
		sl_claims_free(c);
		json_decref(e);
	}
	sl_policy_free(p);
}

/* A script the launcher could not tell ("script": "unknown", claim
 * workload.script_sha256 "unknown") matches no script_sha256 pin, neither
 * a digest nor "none"; a policy cannot list "unknown"; an entry without a
 * script pin is not affected. */
static void test_policy_script_unknown(void **state)
{
	(void)state;
	const char *doc =
	    "{\"version\": 1, \"allow_unverified_region\": true, \"keys\": {\"k\": [\"d*\"]},"
	    " \"datasets\": [{\"id\": \"d1\", \"allowed_regions\": [\"gcp:europe-west4\"],"
	    " \"tee_kinds\": [\"tpm2\"], \"workloads\": [{\"exe_sha256\": [\"" H64(
	        "a") "\"], \"script_sha256\": [\"" H64("5") "\", \"none\"]}]},"
	                                                    " {\"id\": \"d2\", "
	                                                    "\"allowed_regions\": "
	                                                    "[\"gcp:europe-west4\"],"
	                                                    " \"tee_kinds\": [\"tpm2\"], "
	                                                    "\"workloads\": [{\"exe_sha256\": "
	                                                    "[\"" H64("a") "\"]}]}]}";
	sl_policy *p = NULL;
	sl_claims *c = NULL;
	sl_decision *d = NULL;
	sl_policy_request req = {.dataset_id = "d1", .key_id = "k"};
	assert_int_equal(sl_policy_load((const uint8_t *)doc, strlen(doc), &p), SL_OK);
	json_t *e = event("evil.py", H64("c"));
	/* the shape: "unknown" is the one string allowed */
	json_object_set_new(e, "script", json_string("maybe"));
	assert_int_equal(sl_workload_event_check(e, "ev"), SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "ev.script"));
	json_object_set_new(e, "script", json_string("unknown"));
	assert_int_equal(sl_workload_event_check(e, "ev"), SL_OK);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_claims_set(c, "tee.kind", "tpm2"), SL_OK);
	assert_int_equal(sl_claims_set(c, "cloud.region", "gcp:europe-west4"), SL_OK);
	assert_int_equal(sl_claims_set(c, "cloud.provider", "gcp"), SL_OK);
	assert_int_equal(sl_workload_claims(e, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "workload.script_sha256"), "unknown");
	assert_string_equal(sl_claims_get(c, "workload.script_path"), "");
	assert_int_equal(sl_policy_evaluate(p, c, &req, &d), SL_OK);
	assert_false(sl_decision_allowed(d));
	bool said = false;
	for (size_t i = 0; i < sl_decision_reason_count(d); i++)
		said = said ||
		       strstr(sl_decision_reason(d, i),
		              "workloads[0]: script unknown: seclaunch could not tell") != NULL;
	assert_true(said);
	sl_decision_free(d);
	/* the same job under an entry that pins only the executable */
	req.dataset_id = "d2";
	assert_int_equal(sl_policy_evaluate(p, c, &req, &d), SL_OK);
	for (size_t i = 0; i < sl_decision_reason_count(d); i++)
		assert_null(strstr(sl_decision_reason(d, i), "workloads"));
	sl_decision_free(d);
	sl_claims_free(c);
	json_decref(e);
	sl_policy_free(p);
	const char *bad = "{\"version\": 1, \"keys\": {\"k\": [\"d1\"]}, \"datasets\": [{\"id\": "
	                  "\"d1\", \"allowed_regions\": [\"gcp:europe-west4\"], \"tee_kinds\": "
	                  "[\"tpm2\"], \"workloads\": [{\"script_sha256\": [\"unknown\"]}]}]}";
	assert_int_equal(sl_policy_load((const uint8_t *)bad, strlen(bad), &p), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "$.datasets[0].workloads[0].script_sha256"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_event_checks),
	    cmocka_unit_test(test_identity_leaves_out_policy),
	    cmocka_unit_test(test_policy_image_digest),
	    cmocka_unit_test(test_replay),
	    cmocka_unit_test(test_tdx_rtmr3),
	    cmocka_unit_test(test_policy_workloads),
	    cmocka_unit_test(test_policy_script_unknown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
