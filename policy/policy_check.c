/* `policy check`: every error with its JSON path, suggestions for typos, and
 * warnings for valid policies with dangerous gaps (docs/policy.md,
 * "Checking a policy"). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "seclaunch/json.h"
#include "policy_int.h"

/* A dangerous gap that is still valid (policy check --strict makes it an error). */
static void sl_policy_warn(struct vctx *c, const char *path, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* a warning lost to OOM is not a policy error */
	if (sl_policy_finding(c->warnings, path, msg) != SL_OK)
		sl_err_clear();
}

static bool has_kind(const json_t *kinds, const char *k)
{
	size_t i;
	json_t *e;
	json_array_foreach ((json_t *)kinds, i, e) {
		if (json_is_string(e) && strcmp(json_string_value(e), k) == 0)
			return true;
	}
	return false;
}

/* What SECURITY.md says a policy for real data must pin. Only called on a
 * document without errors, so every member has its validated type. */
static SL_RESULT sl_policy_warn_gaps(const json_t *root, struct vctx *c)
{
	char p[PATH_MAX_LEN];
	size_t i;
	json_t *d;

	if (json_is_true(json_object_get(root, "allow_unverified_region")))
		sl_policy_warn(c, "$.allow_unverified_region",
		               "true: a region nobody signed (--region) is accepted; development "
		               "only");
	if (json_object_get(root, "keys") == NULL)
		sl_policy_warn(c, "$.keys",
		               "no keys map: no key may wrap or release any dataset, so every "
		               "request that names a key is denied");
	json_array_foreach (json_object_get(root, "datasets"), i, d) {
		const json_t *kinds = json_object_get(d, "tee_kinds");
		const json_t *m = json_object_get(d, "measurements");
		const char *id = sl_json_getstr(d, "id");
		/* a tpm2 rule with no PCR pins releases to any boot chain, as an
		 * SNP rule without a launch measurement does to any guest image */
		static const char *const hw[][2] = {{"sev-snp", "SEV-SNP launch measurement"},
		                                    {"tdx", "TDX MRTD/RTMR"},
		                                    {"aws-nitro", "Nitro PCR0 (enclave image)"},
		                                    {"tpm2", "TPM PCR values (boot chain)"}};
		bool any_hw = false;
		for (size_t k = 0; k < sizeof(hw) / sizeof(hw[0]); k++) {
			if (!has_kind(kinds, hw[k][0]))
				continue;
			any_hw = any_hw || k < 2; /* a Nitro enclave has no TCB to pin */
			if (json_object_get(m, hw[k][0]) != NULL)
				continue;
			snprintf(p, sizeof(p), "$.datasets[%zu].measurements", i);
			sl_policy_warn(
			    c, p,
			    "rule '%s' allows %s but pins no %s: any guest image on such "
			    "a machine gets the key (SECURITY.md: pin the measurements)",
			    id, hw[k][0], hw[k][1]);
		}
		if (json_object_get(d, "min_tcb") == NULL) {
			snprintf(p, sizeof(p), "$.datasets[%zu].min_tcb", i);
			if (any_hw)
				sl_policy_warn(
				    c, p,
				    "rule '%s' sets no minimum TCB: firmware with known, "
				    "fixed vulnerabilities is accepted",
				    id);
			else
				sl_policy_warn(
				    c, p,
				    "rule '%s' sets no minimum TCB (it allows only tpm2 or "
				    "aws-nitro, which have none: nothing about the platform's "
				    "firmware is checked)",
				    id);
		}
		const char *cls = sl_json_getstr(d, "classification");
		if (cls != NULL && strcasecmp(cls, "restricted") == 0 &&
		    json_object_get(d, "key_ttl") == NULL) {
			snprintf(p, sizeof(p), "$.datasets[%zu].key_ttl", i);
			sl_policy_warn(
			    c, p,
			    "rule '%s' is classified 'restricted' but sets no key_ttl: no "
			    "lease, a released key may be held without limit and a running job "
			    "is never re-attested",
			    id);
		}
		const json_t *ci = json_object_get(d, "cloud_identity");
		if (json_is_true(json_object_get(ci, "same_instance"))) {
			snprintf(p, sizeof(p), "$.datasets[%zu].cloud_identity.same_instance", i);
			sl_policy_warn(c, p,
			               "no identity document seclaunch verifies can be tied to the "
			               "TEE evidence's instance today (docs/policy.md): every "
			               "request under rule '%s' is denied",
			               id);
		}
	}
	return SL_OK;
}

sl_err sl_policy_check(const uint8_t *data, size_t len, bool strict, json_t **report)
{
	sl_err rc = SL_E_NOMEM;
	json_error_t je;
	json_t *root = NULL, *rep = NULL;
	struct vctx c = {NULL, NULL, json_array(), json_array(), SL_OK};

	*report = NULL;
	SL_ENSURE(c.errors != NULL && c.warnings != NULL, SL_E_NOMEM, "policy check");
	if (len > SL_POLICY_MAX_BYTES) {
		SL_GUARD(sl_policy_finding(c.errors, "$", "the policy is larger than 1 MiB"));
		c.first = SL_E_TOO_LARGE;
	} else if ((root = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &je)) ==
	           NULL) {
		char msg[256];
		snprintf(msg, sizeof(msg), "not valid JSON at line %d column %d: %s", je.line,
		         je.column, je.text);
		SL_GUARD(sl_policy_finding(c.errors, "$", msg));
		c.first = SL_E_FORMAT;
	} else {
		SL_GUARD(sl_policy_builtin_regions(&c.known, &c.groups));
		SL_GUARD(sl_policy_validate(root, &c));
		if (c.first == SL_OK)
			SL_GUARD(sl_policy_warn_gaps(root, &c));
	}
	if (strict && json_array_size(c.warnings) > 0) {
		size_t i;
		json_t *w;
		json_array_foreach (c.warnings, i, w) {
			json_t *e =
			    json_pack("{s:O, s:s+}", "path", json_object_get(w, "path"), "message",
			              "(--strict) ", sl_json_getstr(w, "message"));
			SL_ENSURE(e != NULL && json_array_append_new(c.errors, e) == 0, SL_E_NOMEM,
			          "policy check");
		}
		json_array_clear(c.warnings);
		if (c.first == SL_OK)
			c.first = SL_E_INPUT;
	}
	bool ok = json_array_size(c.errors) == 0;
	rep = json_pack("{s:b, s:O, s:O}", "ok", ok, "errors", c.errors, "warnings", c.warnings);
	SL_ENSURE(rep != NULL, SL_E_NOMEM, "policy check");
	if (ok) {
		rc = SL_OK;
	} else {
		json_t *e0 = json_array_get(c.errors, 0);
		size_t n = json_array_size(c.errors);
		rc = sl_err_set(c.first, "%s: %s%s", sl_json_getstr(e0, "path"),
		                sl_json_getstr(e0, "message"), n > 1 ? " (and more errors)" : "");
	}
	*report = rep;
	rep = NULL;
out:
	json_decref(rep);
	json_decref(root);
	json_decref(c.known);
	json_decref(c.groups);
	json_decref(c.errors);
	json_decref(c.warnings);
	return rc;
}
