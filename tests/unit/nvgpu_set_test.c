/* nvidia-gpu evidence of several GPUs as one set: the real H100 and
 * Blackwell vectors ($SL_VECTORS/nvidia-gpu) each answer their own nonce and
 * are distinct GPUs, so a mix of them is refused for its nonces, the same
 * item twice for the repeated GPU; an eight-GPU set is built from one real
 * GPU's verified claims with eight device identities (the set rules work
 * on claims); the CC mode must agree; seclaunchd's per-item merge
 * (sl_evidence_merge) keeps every rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../attest/nvgpu_int.h"
#include "../../attest/x509_util.h"
#include "seclaunch/attest.h"
#include "seclaunch/util.h"
#include "testlib.h"

#define T2025 1748736000 /* 2025-06-01T00:00:00Z */

/* {"kind":"nvidia-gpu","report","certs"[,"driver"]} of a vector pair */
static json_t *item(const char *report, const char *chain, const char *driver_cc)
{
	size_t rl = 0, cl = 0;
	uint8_t *r = tl_vector_load(&rl, "nvidia-gpu/%s", report);
	uint8_t *c = tl_vector_load(&cl, "nvidia-gpu/%s", chain);
	char *rb = NULL, *cb = NULL;
	assert_int_equal(sl_b64_encode(r, rl, &rb), SL_OK);
	assert_int_equal(sl_b64_encode(c, cl, &cb), SL_OK);
	json_t *ev = json_pack("{s:s, s:s, s:s}", "kind", "nvidia-gpu", "report", rb, "certs", cb);
	if (driver_cc != NULL)
		json_object_set_new(ev, "driver", json_pack("{s:s}", "cc", driver_cc));
	free(rb);
	free(cb);
	free(r);
	free(c);
	return ev;
}

static const sl_verify_opts unbound = {.no_binding = true, .at = T2025};

static void one_gpu_keeps_its_claims(void **state)
{
	(void)state;
	json_t *ev = item("blackwellAttestationReport.bin", "blackwell_cert_chain_case1.txt", NULL);
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_evidence_verify(ev, &unbound, c), SL_OK);
	/* the single-GPU claims as before, plus the set's */
	assert_string_equal(sl_claims_get(c, "gpu.arch"), "blackwell");
	assert_string_equal(sl_claims_get(c, "gpu.ueid"), "48b02d28458fddf9");
	assert_string_equal(sl_claims_get(c, "gpu.count"), "1");
	assert_string_equal(sl_claims_get(c, "gpu.0.ueid"), "48b02d28458fddf9");
	assert_string_equal(sl_claims_get(c, "gpu.0.measurement.64"),
	                    sl_claims_get(c, "gpu.measurement.64"));
	sl_claims_free(c);
	json_decref(ev);
}

static void mixed_nonces_refused(void **state)
{
	(void)state;
	json_t *a = item("hopperAttestationReport.bin", "hopper_cert_chain_case1.txt", NULL);
	json_t *b = item("hopper_coco_report1.bin", "hopper_coco_certs1.txt", NULL);
	json_t *bw = item("blackwellAttestationReport.bin", "blackwell_cert_chain_case1.txt", NULL);
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_evidence_verify(a, &unbound, c), SL_OK);
	size_t before = sl_claims_count(c);
	expect_fail(sl_evidence_verify(b, &unbound, c), SL_E_ATTEST_BINDING,
	            "GPU 1's report is bound to nonce 87d8e24ab336adaf..., GPU 0's to "
	            "931d8dd0add203ac...");
	expect_fail(sl_evidence_verify(bw, &unbound, c), SL_E_ATTEST_BINDING,
	            "every GPU of a set answers the same nonce");
	assert_int_equal(sl_claims_count(c), before); /* a refused GPU adds nothing */
	assert_string_equal(sl_claims_get(c, "gpu.count"), "1");
	sl_claims_free(c);
	json_decref(a);
	json_decref(b);
	json_decref(bw);
}

static void repeated_gpu_refused(void **state)
{
	(void)state;
	json_t *a = item("blackwell_coco_report.bin", "blackwell_coco_certs.txt", NULL);
	sl_claims *c = NULL;
	size_t n = 0;
	uint8_t *r = tl_vector_load(&n, "nvidia-gpu/blackwell_coco_report.bin");
	sl_verify_opts bound = {.expect = r + 4, .expect_len = 32, .at = T2025};
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_evidence_verify(a, &bound, c), SL_OK);
	/* the same report again: bound to the right nonce, but the same GPU */
	expect_fail(sl_evidence_verify(a, &bound, c), SL_E_ATTEST,
	            "GPU 1 is GPU 0 again (device id 48b02d7b1b9fe9ba)");
	assert_string_equal(sl_claims_get(c, "gpu.count"), "1");
	sl_claims_free(c);
	/* seclaunchd's way: each item into its own set, then merged */
	sl_claims *all = NULL, *one = NULL;
	assert_int_equal(sl_claims_new(&all), SL_OK);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(sl_claims_new(&one), SL_OK);
		assert_int_equal(sl_evidence_verify(a, &bound, one), SL_OK);
		if (i == 0)
			assert_int_equal(sl_evidence_merge(all, one), SL_OK);
		else
			expect_fail(sl_evidence_merge(all, one), SL_E_ATTEST,
			            "each GPU counts once");
		sl_claims_free(one);
	}
	assert_string_equal(sl_claims_get(all, "gpu.count"), "1");
	sl_claims_free(all);
	free(r);
	json_decref(a);
}

/* One real GPU's verified claims as eight GPUs: device id and certificate
 * serial changed per GPU (what a set's members differ in), all else kept. */
static sl_claims *gpu_like(const sl_claims *real, int i, const char *cc)
{
	sl_claims *c = NULL;
	char v[64];
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_claims_merge(c, real), SL_OK);
	snprintf(v, sizeof(v), "48b02d28458fdd%02x", i);
	assert_int_equal(sl_claims_set(c, "gpu.ueid", v), SL_OK);
	snprintf(v, sizeof(v), "47998610bf499ac0121fe43825e060ff14e852%02x", i);
	assert_int_equal(sl_claims_set(c, "gpu.cert.serial", v), SL_OK);
	if (cc != NULL)
		assert_int_equal(sl_claims_set(c, "gpu.cc", cc), SL_OK);
	return c;
}

static sl_claims *real_blackwell(void)
{
	size_t rl = 0, cl = 0;
	uint8_t *r = tl_vector_load(&rl, "nvidia-gpu/blackwellAttestationReport.bin");
	uint8_t *pem = tl_vector_load(&cl, "nvidia-gpu/blackwell_cert_chain_case1.txt");
	STACK_OF(X509) *s = sk_X509_new_null();
	sl_claims *c = NULL;
	sl_verify_opts o = {.expect = r + 4, .expect_len = 32, .at = T2025};
	assert_int_equal(sl_x509_parse_blob(pem, cl, s, NULL, "chain"), SL_OK);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_nvgpu_verify_parts(r, rl, s, &o, c), SL_OK);
	sk_X509_pop_free(s, X509_free);
	free(r);
	free(pem);
	return c;
}

static void eight_gpus(void **state)
{
	(void)state;
	sl_claims *real = real_blackwell(), *set = NULL;
	assert_int_equal(sl_claims_new(&set), SL_OK);
	for (int i = 0; i < 8; i++) {
		sl_claims *g = gpu_like(real, i, NULL);
		assert_int_equal(sl_nvgpu_set_add(set, g), SL_OK);
		sl_claims_free(g);
	}
	assert_string_equal(sl_claims_get(set, "gpu.count"), "8");
	assert_string_equal(sl_claims_get(set, "gpu.7.ueid"), "48b02d28458fdd07");
	assert_string_equal(sl_claims_get(set, "gpu.3.cert.serial"),
	                    "47998610bf499ac0121fe43825e060ff14e85203");
	/* what all share stays; what differs is "mixed" */
	assert_string_equal(sl_claims_get(set, "gpu.cc"), "on");
	assert_string_equal(sl_claims_get(set, "gpu.mode"), "cc-single-gpu");
	assert_string_equal(sl_claims_get(set, "gpu.fwid"), sl_claims_get(real, "gpu.fwid"));
	assert_string_equal(sl_claims_get(set, "gpu.measurement.9"),
	                    sl_claims_get(real, "gpu.measurement.9"));
	assert_string_equal(sl_claims_get(set, "gpu.ueid"), "mixed");
	assert_string_equal(sl_claims_get(set, "gpu.binding"), "verified");
	/* a ninth that is GPU 5 again, or unbound: refused / weakest kept */
	sl_claims *g = gpu_like(real, 5, NULL);
	expect_fail(sl_nvgpu_set_add(set, g), SL_E_ATTEST, "GPU 8 is GPU 5 again");
	sl_claims_free(g);
	g = gpu_like(real, 9, NULL);
	assert_int_equal(sl_claims_set(g, "gpu.binding", "unchecked"), SL_OK);
	assert_int_equal(sl_claims_set(g, "gpu.devtools", "true"), SL_OK);
	assert_int_equal(sl_nvgpu_set_add(set, g), SL_OK);
	sl_claims_free(g);
	g = gpu_like(real, 10, NULL);
	assert_int_equal(sl_nvgpu_set_add(set, g), SL_OK);
	sl_claims_free(g);
	assert_string_equal(sl_claims_get(set, "gpu.count"), "10");
	assert_string_equal(sl_claims_get(set, "gpu.binding"), "unchecked");
	assert_string_equal(sl_claims_get(set, "gpu.devtools"), "true");
	/* a set merged into another (seclaunchd): the same rules, GPU by GPU */
	sl_claims *all = NULL;
	assert_int_equal(sl_claims_new(&all), SL_OK);
	assert_int_equal(sl_evidence_merge(all, set), SL_OK);
	assert_string_equal(sl_claims_get(all, "gpu.count"), "10");
	expect_fail(sl_evidence_merge(all, set), SL_E_ATTEST, "GPU 10 is GPU 0 again");
	sl_claims_free(all);
	sl_claims_free(set);
	sl_claims_free(real);
}

static void mixed_modes_refused(void **state)
{
	(void)state;
	sl_claims *real = real_blackwell(), *set = NULL;
	assert_int_equal(sl_claims_new(&set), SL_OK);
	sl_claims *g = gpu_like(real, 0, NULL);
	assert_int_equal(sl_nvgpu_set_add(set, g), SL_OK);
	sl_claims_free(g);
	g = gpu_like(real, 1, "off");
	expect_fail(sl_nvgpu_set_add(set, g), SL_E_ATTEST,
	            "GPU 1 has gpu.cc=off, GPU 0 gpu.cc=on: a set does not mix");
	sl_claims_free(g);
	g = gpu_like(real, 2, NULL);
	assert_int_equal(sl_claims_set(g, "gpu.mode", "cc-multi-gpu"), SL_OK);
	expect_fail(sl_nvgpu_set_add(set, g), SL_E_ATTEST,
	            "GPU 1 is in mode cc-multi-gpu, GPU 0 in cc-single-gpu");
	sl_claims_free(g);
	assert_string_equal(sl_claims_get(set, "gpu.count"), "1");
	/* the real report with the driver saying CC is off joins no set in CC mode */
	json_t *ev =
	    item("blackwellAttestationReport.bin", "blackwell_cert_chain_case1.txt", "off");
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	json_t *on = item("blackwell_coco_report.bin", "blackwell_coco_certs.txt", NULL);
	assert_int_equal(sl_evidence_verify(on, &unbound, c), SL_OK);
	/* (its nonce differs too; the nonce is checked first) */
	expect_fail(sl_evidence_verify(ev, &unbound, c), SL_E_ATTEST_BINDING, "same nonce");
	sl_claims_free(c);
	json_decref(ev);
	json_decref(on);
	sl_claims_free(set);
	sl_claims_free(real);
}

/* {"gpus": [...]}, the collector's form for several GPUs: one item, each
 * GPU verified alone and then as a set; a refusal names the GPU's place in
 * the item and leaves the claims as they were. */
static json_t *set_item(json_t *a, json_t *b)
{
	json_t *gpus = json_array();
	json_t *pair[2] = {a, b};
	for (int i = 0; i < 2; i++) {
		if (pair[i] == NULL)
			continue;
		json_t *g = json_deep_copy(pair[i]);
		json_object_del(g, "kind");
		json_array_append_new(gpus, g);
	}
	return json_pack("{s:s, s:o}", "kind", "nvidia-gpu", "gpus", gpus);
}

static void set_item_form(void **state)
{
	(void)state;
	json_t *a = item("blackwell_coco_report.bin", "blackwell_coco_certs.txt", NULL);
	json_t *b = item("hopper_coco_report1.bin", "hopper_coco_certs1.txt", NULL);
	sl_claims *c = NULL;
	/* one GPU in the set form: the claims of the single form */
	json_t *one = set_item(a, NULL);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_evidence_verify(one, &unbound, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "gpu.count"), "1");
	assert_string_equal(sl_claims_get(c, "gpu.0.ueid"), "48b02d7b1b9fe9ba");
	assert_string_equal(sl_claims_get(c, "binding"), "unchecked");
	size_t before = sl_claims_count(c);
	/* the same GPU again, in a second item: refused as a repeat */
	expect_fail(sl_evidence_verify(one, &unbound, c), SL_E_ATTEST, "GPU 1 is GPU 0 again");
	assert_int_equal(sl_claims_count(c), before);
	sl_claims_free(c);
	/* two GPUs answering two nonces: GPU 1 refused, named by its place */
	json_t *two = set_item(a, b);
	assert_int_equal(sl_claims_new(&c), SL_OK);
	expect_fail(sl_evidence_verify(two, &unbound, c), SL_E_ATTEST_BINDING,
	            "evidence.gpus[1]: GPU evidence set: GPU 1's report is bound to nonce");
	assert_int_equal(sl_claims_count(c), 0);
	/* GPU 1 with GPU 0's chain does not verify: its reason, under its place */
	json_t *gpus = json_object_get(two, "gpus");
	json_object_set_new(json_array_get(gpus, 1), "certs",
	                    json_deep_copy(json_object_get(json_array_get(gpus, 0), "certs")));
	expect_fail(sl_evidence_verify(two, &unbound, c), SL_E_ATTEST_CHAIN,
	            "evidence.gpus[1]: GPU report: opaque FWID does not equal");
	assert_int_equal(sl_claims_count(c), 0);
	/* both forms in one item, an empty set, a set that is not an array */
	json_t *both = set_item(a, NULL);
	json_object_set(both, "report", json_object_get(a, "report"));
	expect_fail(sl_evidence_verify(both, &unbound, c), SL_E_ATTEST_FORMAT,
	            "both gpus and a single GPU's report/certs");
	json_t *empty = json_pack("{s:s, s:[]}", "kind", "nvidia-gpu", "gpus");
	expect_fail(sl_evidence_verify(empty, &unbound, c), SL_E_ATTEST_FORMAT,
	            "evidence.gpus: not a non-empty array");
	json_object_set_new(empty, "gpus", json_string("x"));
	expect_fail(sl_evidence_verify(empty, &unbound, c), SL_E_ATTEST_FORMAT,
	            "evidence.gpus: not a non-empty array");
	json_t *notobj = json_pack("{s:s, s:[i]}", "kind", "nvidia-gpu", "gpus", 1);
	expect_fail(sl_evidence_verify(notobj, &unbound, c), SL_E_ATTEST_FORMAT,
	            "evidence.gpus[0]: evidence: not an object");
	assert_int_equal(sl_claims_count(c), 0);
	sl_claims_free(c);
	json_decref(notobj);
	json_decref(empty);
	json_decref(both);
	json_decref(two);
	json_decref(one);
	json_decref(a);
	json_decref(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(one_gpu_keeps_its_claims), cmocka_unit_test(mixed_nonces_refused),
	    cmocka_unit_test(repeated_gpu_refused),     cmocka_unit_test(eight_gpus),
	    cmocka_unit_test(mixed_modes_refused),      cmocka_unit_test(set_item_form),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
