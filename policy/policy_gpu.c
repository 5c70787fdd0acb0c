/* $.datasets[i].gpu: {"count": N, "mode": "cc" | "ppcie"}, the machine's
 * GPUs attested as one set (attest/nvgpu_set.c): exactly N GPUs
 * (gpu.count), all in confidential-computing mode (gpu.cc=on) or all in
 * protected PCIe mode (gpu.mode=protected-pcie); and, as require_gpu_cc,
 * none in developer-tools mode and every report bound to this request.
 * "ppcie" is refused: in protected PCIe mode NVLink traffic crosses the
 * NVSwitches in plaintext, so the switches must be attested too, and
 * seclaunch can neither collect (NSCQ) nor verify NVSwitch evidence
 * (docs/evidence-nvidia-gpu.md). The GPUs' reports alone do not do. */
#include <stdio.h>
#include <string.h>

#include "policy_int.h"
#include "seclaunch/claims.h"

#define GPU_COUNT_MAX 64

sl_err sl_policy_check_gpu(const json_t *v, const char *path)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN];
	static const char *const fields[] = {"count", "mode", NULL};
	static const char *const modes[] = {"cc", "ppcie", NULL};

	SL_GUARD(sl_policy_want_type(v, JSON_OBJECT, path, "an object {count, mode}"));
	SL_GUARD(sl_policy_only_fields(v, path, fields));
	const json_t *n = json_object_get(v, "count");
	snprintf(p, sizeof(p), "%s.count", path);
	SL_ENSURE(n == NULL || (json_is_integer(n) && json_integer_value(n) >= 1 &&
	                        json_integer_value(n) <= GPU_COUNT_MAX),
	          SL_E_INPUT, "%s: must be a number of GPUs, 1..%d", p, GPU_COUNT_MAX);
	const json_t *m = json_object_get(v, "mode");
	snprintf(p, sizeof(p), "%s.mode", path);
	SL_ENSURE(m == NULL ||
	              (json_is_string(m) && sl_policy_in_list(modes, json_string_value(m))),
	          SL_E_INPUT, "%s: must be \"cc\" or \"ppcie\"", p);
	SL_ENSURE(m == NULL || strcmp(json_string_value(m), "ppcie") != 0, SL_E_INPUT,
	          "%s: \"ppcie\" is not supported: protected PCIe mode sends NVLink traffic "
	          "through the NVSwitches in plaintext, and seclaunch cannot collect or verify "
	          "NVSwitch attestation (NSCQ), so it will not release keys on the GPUs' reports "
	          "alone; use \"cc\"",
	          p);
	rc = SL_OK;
out:
	return rc;
}

static const char *get(const sl_claims *c, const char *k)
{
	const char *v = sl_claims_get(c, k);
	return v != NULL ? v : "missing";
}

void sl_policy_eval_gpu(const sl_claims *c, const json_t *rule, const char *rpath,
                        sl_policy_note_fn fn, void *d)
{
	char path[PATH_MAX_LEN];
	const json_t *g = json_object_get(rule, "gpu");
	if (g == NULL)
		return;
	const json_t *n = json_object_get(g, "count");
	if (n != NULL) {
		char want[24];
		snprintf(path, sizeof(path), "%s.gpu.count", rpath);
		snprintf(want, sizeof(want), "%lld", (long long)json_integer_value(n));
		bool ok = strcmp(get(c, "gpu.count"), want) == 0;
		sl_policy_notef(fn, d, ok, path,
		                "%s GPUs attested as one set (gpu.count=%s), the rule asks %s",
		                ok ? "the" : "not the", get(c, "gpu.count"), want);
	}
	const char *mode = json_string_value(json_object_get(g, "mode"));
	snprintf(path, sizeof(path), "%s.gpu.mode", rpath);
	if (mode != NULL && strcmp(mode, "cc") == 0) {
		bool ok = strcmp(get(c, "gpu.cc"), "on") == 0;
		sl_policy_notef(fn, d, ok, path, "%s in confidential-computing mode (gpu.cc=%s)",
		                ok ? "every GPU" : "not every GPU", get(c, "gpu.cc"));
	} else if (mode != NULL) {
		/* refused at load (above); a rule that got here anyway never passes */
		sl_policy_notef(
		    fn, d, false, path,
		    "protected PCIe mode needs the NVSwitches attested, which seclaunch cannot do "
		    "(gpu.mode=%s)",
		    get(c, "gpu.mode"));
	}
	snprintf(path, sizeof(path), "%s.gpu", rpath);
	if (sl_claims_get(c, "gpu.count") == NULL)
		sl_policy_notef(fn, d, false, path, "no attested GPU (gpu.count missing)");
	if (strcmp(get(c, "gpu.devtools"), "true") == 0)
		sl_policy_notef(fn, d, false, path,
		                "a GPU is in developer-tools mode (gpu.devtools=true)");
	if (strcmp(get(c, "gpu.binding"), "unchecked") == 0)
		sl_policy_notef(
		    fn, d, false, path,
		    "the GPU evidence is not bound to this request (gpu.binding=unchecked)");
}
