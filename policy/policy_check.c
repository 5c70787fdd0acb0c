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

static SL_RESULT add(json_t *list, const char *path, const char *msg)
{
	json_t *o = json_pack("{s:s, s:s}", "path", path, "message", msg);
	if (o == NULL || json_array_append_new(list, o) != 0)
		return sl_err_set(SL_E_NOMEM, "policy check: recording a finding");
	return SL_OK;
}

sl_err sl_policy_note(struct vctx *c, sl_err e)
{
	if (e == SL_OK)
		return SL_OK;
	if (e != SL_E_INPUT && e != SL_E_VERSION && e != SL_E_FORMAT)
		return e;
	/* the detail is "PATH: message"; a path holds no ": " of its own */
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", sl_err_detail());
	char *sep = strstr(buf, ": ");
	const char *path = "$", *msg = buf;
	if (sep != NULL && buf[0] == '$') {
		*sep = '\0';
		path = buf;
		msg = sep + 2;
	}
	if (c->first == SL_OK)
		c->first = e;
	sl_err_clear();
	return add(c->errors, path, msg);
}

/* A dangerous gap that is still valid (policy check --strict makes it an error). */
static void sl_policy_warn(struct vctx *c, const char *path, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* a warning lost to OOM is not a policy error */
	if (add(c->warnings, path, msg) != SL_OK)
		sl_err_clear();
}

/* Levenshtein distance, two rows; names are short (capped at 64). */
static size_t distance(const char *a, const char *b)
{
	size_t la = strnlen(a, 64), lb = strnlen(b, 64);
	size_t row[65], prev[65];
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
			size_t del = prev[j] + 1, ins = row[j - 1] + 1;
			row[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
		}
		memcpy(prev, row, (lb + 1) * sizeof(row[0]));
	}
	return prev[lb];
}

static bool close_enough(const char *s, size_t d)
{
	size_t n = strnlen(s, 64);
	size_t limit = n / 3 > 0 ? n / 3 : 1;
	return d > 0 && d <= limit && d < n;
}

const char *sl_policy_nearest(const char *s, const char *const *cands, size_t n)
{
	const char *best = NULL;
	size_t bd = SIZE_MAX;
	for (size_t i = 0; i < n && cands[i] != NULL; i++) {
		size_t d = distance(s, cands[i]);
		if (d < bd) {
			bd = d;
			best = cands[i];
		}
	}
	return best != NULL && close_enough(s, bd) ? best : NULL;
}

const char *sl_policy_nearest_json(const char *s, const json_t *v)
{
	const char *best = NULL, *k;
	size_t bd = SIZE_MAX, i;
	json_t *e;
	if (json_is_array(v)) {
		json_array_foreach ((json_t *)v, i, e) {
			size_t d = distance(s, json_string_value(e));
			if (d < bd) {
				bd = d;
				best = json_string_value(e);
			}
		}
	} else {
		json_object_foreach ((json_t *)v, k, e) {
			size_t d = distance(s, k);
			if (d < bd) {
				bd = d;
				best = k;
			}
		}
	}
	return best != NULL && close_enough(s, bd) ? best : NULL;
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
		SL_GUARD(add(c.errors, "$", "the policy is larger than 1 MiB"));
		c.first = SL_E_TOO_LARGE;
	} else if ((root = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &je)) ==
	           NULL) {
		char msg[256];
		snprintf(msg, sizeof(msg), "not valid JSON at line %d column %d: %s", je.line,
		         je.column, je.text);
		SL_GUARD(add(c.errors, "$", msg));
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
