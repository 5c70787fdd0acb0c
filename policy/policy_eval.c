/* Policy evaluation: claims + request -> decision with every reason.
 *
 * Pure: reads the policy and the claims, writes only the decision. Every
 * dataset rule whose id pattern matches the dataset is evaluated and all of
 * them must pass (deny wins); no matching rule is a deny (default deny). Each
 * check appends "PATH: text" to matched (passed) or reasons (failed).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_int.h"
#include "seclaunch/json.h"

#define PATH_LEN 256
#define TEXT_LEN 1024

struct sl_decision {
	bool allowed;
	bool dev;
	char *dataset;
	char *key;
	char digest_hex[2 * SL_POLICY_DIGEST_LEN + 1];
	json_t *matched;  /* array of strings */
	json_t *reasons;  /* array of strings */
	json_t *rules;    /* array of the matching dataset rules' paths */
	uint64_t key_ttl; /* 0: none */
	bool oom;
};

static void add(sl_decision *d, json_t *list, const char *path, const char *fmt, ...)
    SL_PRINTF(4, 5);
static void add(sl_decision *d, json_t *list, const char *path, const char *fmt, ...)
{
	char text[TEXT_LEN];
	char line[PATH_LEN + TEXT_LEN + 4];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	snprintf(line, sizeof(line), "%s: %s", path, text);
	if (json_array_append_new(list, json_string(line)) != 0)
		d->oom = true;
}

#define PASS(d, path, ...) add((d), (d)->matched, (path), __VA_ARGS__)
#define DENY(d, path, ...) add((d), (d)->reasons, (path), __VA_ARGS__)

static const char *claim(const sl_claims *c, const char *k)
{
	return sl_claims_get(c, k);
}

static bool claim_is(const sl_claims *c, const char *k, const char *v)
{
	const char *x = sl_claims_get(c, k);
	return x != NULL && strcmp(x, v) == 0;
}

/* Joins a JSON string array as "a, b, c" into buf. */
static void join(const json_t *arr, char *buf, size_t n)
{
	size_t i, off = 0;
	json_t *e;
	buf[0] = '\0';
	json_array_foreach (arr, i, e) {
		int w = snprintf(buf + off, n - off, "%s%s", i ? ", " : "", json_string_value(e));
		if (w < 0 || (size_t)w >= n - off)
			break;
		off += (size_t)w;
	}
}

bool sl_policy_region_entry_matches(const sl_policy *p, const char *entry, const char *region)
{
	if (strchr(entry, ':') != NULL)
		return sl_policy_glob(entry, region);
	json_t *g = json_object_get(p->groups, entry);
	size_t i;
	json_t *e;
	json_array_foreach (g, i, e) {
		if (sl_policy_glob(json_string_value(e), region))
			return true;
	}
	return false;
}

/* Region against a rule's allowed/denied lists; returns whether it passes and
 * records why under path (what = "region" / "output 'u' region"). */
static bool region_allowed(const sl_policy *p, const json_t *rule, const char *rpath,
                           const char *region, const char *what, sl_decision *d)
{
	char path[PATH_LEN], list[TEXT_LEN];
	bool ok = true;
	size_t i;
	json_t *e;
	json_array_foreach (json_object_get(rule, "denied_regions"), i, e) {
		const char *s = json_string_value(e);
		if (sl_policy_region_entry_matches(p, s, region)) {
			snprintf(path, sizeof(path), "%s.denied_regions[%zu]", rpath, i);
			DENY(d, path, "%s %s is denied (%s '%s'; deny wins)", what, region,
			     strchr(s, ':') ? "pattern" : "group", s);
			ok = false;
		}
	}
	json_t *allowed = json_object_get(rule, "allowed_regions");
	json_array_foreach (allowed, i, e) {
		const char *s = json_string_value(e);
		if (sl_policy_region_entry_matches(p, s, region)) {
			snprintf(path, sizeof(path), "%s.allowed_regions[%zu]", rpath, i);
			if (ok)
				PASS(d, path, "%s %s %s '%s'", what, region,
				     strchr(s, ':') ? "matches pattern" : "is in group", s);
			return ok;
		}
	}
	snprintf(path, sizeof(path), "%s.allowed_regions", rpath);
	join(allowed, list, sizeof(list));
	DENY(d, path, "%s %s is not in the allowed regions [%s]", what, region, list);
	return false;
}

/* Whether evidence of kind is present in the claims. */
static bool kind_present(const sl_claims *c, const char *kind)
{
	if (claim_is(c, "tee.kind", kind))
		return true;
	const char *prefix = strcmp(kind, "tpm2") == 0        ? "tpm.pcr."
	                     : strcmp(kind, "sev-snp") == 0   ? "snp."
	                     : strcmp(kind, "aws-nitro") == 0 ? "nitro."
	                                                      : "tdx.";
	size_t n = strlen(prefix);
	for (size_t i = 0; i < sl_claims_count(c); i++)
		if (strncmp(sl_claims_key(c, i), prefix, n) == 0)
			return true;
	return false;
}

/* One claim against a list of accepted (lower-case hex) values. */
static void check_value(const sl_claims *c, const char *ckey, const json_t *accepted,
                        const char *path, sl_decision *d)
{
	char list[TEXT_LEN];
	const char *v = claim(c, ckey);
	size_t i;
	json_t *e;
	if (v == NULL) {
		DENY(d, path, "claim %s is missing", ckey);
		return;
	}
	json_array_foreach (accepted, i, e) {
		if (strcasecmp(v, json_string_value(e)) == 0) {
			PASS(d, path, "claim %s matches", ckey);
			return;
		}
	}
	join(accepted, list, sizeof(list));
	DENY(d, path, "claim %s is %s, want one of [%s]", ckey, v, list);
}

static void check_measurements(const sl_claims *c, const json_t *m, const char *rpath,
                               sl_decision *d)
{
	char path[PATH_LEN], ckey[128];
	const char *kind, *f;
	json_t *v, *fv;
	json_object_foreach ((json_t *)m, kind, v) {
		snprintf(path, sizeof(path), "%s.measurements.%s", rpath, kind);
		if (!kind_present(c, kind)) {
			PASS(d, path, "not applicable (no %s evidence)", kind);
			continue;
		}
		json_object_foreach (v, f, fv) {
			if (strcmp(kind, "tpm2") == 0) {
				const char *idx;
				json_t *iv;
				json_object_foreach (fv, idx, iv) {
					snprintf(path, sizeof(path), "%s.measurements.tpm2.%s.%s",
					         rpath, f, idx);
					snprintf(ckey, sizeof(ckey), "tpm.pcr.%s.%s", f, idx);
					check_value(c, ckey, iv, path, d);
				}
			} else {
				snprintf(path, sizeof(path), "%s.measurements.%s.%s", rpath, kind,
				         f);
				snprintf(ckey, sizeof(ckey), "%s.%s",
				         strcmp(kind, "sev-snp") == 0     ? "snp"
				         : strcmp(kind, "aws-nitro") == 0 ? "nitro"
				                                          : "tdx",
				         f);
				check_value(c, ckey, fv, path, d);
			}
		}
	}
}

static void check_min_tcb(const sl_claims *c, const json_t *m, const char *rpath, sl_decision *d)
{
	char path[PATH_LEN], ckey[128], list[TEXT_LEN];
	const char *kind, *f;
	json_t *v, *fv;
	json_object_foreach ((json_t *)m, kind, v) {
		snprintf(path, sizeof(path), "%s.min_tcb.%s", rpath, kind);
		if (!kind_present(c, kind)) {
			PASS(d, path, "not applicable (no %s evidence)", kind);
			continue;
		}
		json_object_foreach (v, f, fv) {
			snprintf(path, sizeof(path), "%s.min_tcb.%s.%s", rpath, kind, f);
			if (strcmp(kind, "tdx") == 0) {
				const char *st = claim(c, "tdx.tcb_status");
				size_t i;
				json_t *e;
				bool ok = false;
				json_array_foreach (fv, i, e)
					ok = ok || (st && strcmp(st, json_string_value(e)) == 0);
				join(fv, list, sizeof(list));
				if (ok)
					PASS(d, path, "TDX TCB status %s is acceptable", st);
				else
					DENY(d, path, "TDX TCB status %s is not in [%s]",
					     st ? st : "(missing)", list);
				continue;
			}
			snprintf(ckey, sizeof(ckey), "snp.reported_tcb.%s", f);
			const char *s = claim(c, ckey);
			char *end = NULL;
			long long have = s ? strtoll(s, &end, 10) : -1;
			long long want = json_integer_value(fv);
			if (s == NULL || *s == '\0' || *end != '\0')
				DENY(d, path, "claim %s is %s, want a number >= %lld", ckey,
				     s ? s : "missing", want);
			else if (have < want)
				DENY(d, path, "TCB below the minimum: %s is %lld, minimum %lld",
				     ckey, have, want);
			else
				PASS(d, path, "%s %lld >= %lld", ckey, have, want);
		}
	}
}

static void check_debug(const sl_claims *c, const json_t *rule, const char *rpath, sl_decision *d)
{
	char path[PATH_LEN];
	snprintf(path, sizeof(path), "%s.debug_allowed", rpath);
	if (json_is_true(json_object_get(rule, "debug_allowed"))) {
		PASS(d, path, "debugging allowed by the rule");
		return;
	}
	static const struct {
		const char *kind, *claim;
	} dbg[] = {{"sev-snp", "snp.policy.debug"},
	           {"tdx", "tdx.attributes.debug"},
	           {"aws-nitro", "nitro.debug"}};
	bool bad = false;
	for (size_t i = 0; i < sizeof(dbg) / sizeof(dbg[0]); i++) {
		const char *v = claim(c, dbg[i].claim);
		if (v != NULL && strcmp(v, "false") != 0) {
			DENY(d, path, "the TEE allows debugging (%s=%s) and the rule forbids it",
			     dbg[i].claim, v);
			bad = true;
		} else if (v == NULL && claim_is(c, "tee.kind", dbg[i].kind)) {
			DENY(d, path, "claim %s is missing, so debugging cannot be ruled out",
			     dbg[i].claim);
			bad = true;
		}
	}
	if (!bad)
		PASS(d, path, "no debug-enabled TEE");
}

static void check_outputs(const sl_policy *p, const json_t *rule, const char *rpath,
                          const sl_policy_request *req, sl_decision *d)
{
	char path[PATH_LEN], what[TEXT_LEN];
	json_t *dests = json_object_get(rule, "output_destinations");
	for (size_t o = 0; o < req->n_outputs; o++) {
		const char *u = req->outputs[o];
		size_t i;
		json_t *e;
		bool found = false;
		json_array_foreach (dests, i, e) {
			if (!sl_policy_glob(sl_json_getstr(e, "url"), u))
				continue;
			found = true;
			snprintf(path, sizeof(path), "%s.output_destinations[%zu]", rpath, i);
			snprintf(what, sizeof(what), "output '%s' (%s) goes to region", u, path);
			region_allowed(p, rule, rpath, sl_json_getstr(e, "region"), what, d);
			break;
		}
		if (!found) {
			snprintf(path, sizeof(path), "%s.output_destinations", rpath);
			DENY(d, path, "output '%s' matches no allowed output destination", u);
		}
	}
}

static void check_region(const sl_policy *p, const sl_claims *c, const json_t *rule,
                         const char *rpath, sl_decision *d)
{
	char path[PATH_LEN], region[256];
	const char *prov = claim(c, "cloud.provider"), *reg = claim(c, "cloud.region");
	snprintf(path, sizeof(path), "%s.allowed_regions", rpath);
	if (prov == NULL || reg == NULL) {
		DENY(d, path,
		     "no region claim (cloud.provider/cloud.region missing: no cloud identity "
		     "document)");
		return;
	}
	snprintf(region, sizeof(region), "%s:%s", prov, reg);
	if (!claim_is(c, "cloud.region_verified", "true")) {
		if (!p->allow_unverified) {
			DENY(d, "$.allow_unverified_region",
			     "region %s is not signed by the provider (cloud.region_verified=%s) "
			     "and "
			     "the policy does not allow unverified regions",
			     region, claim(c, "cloud.region_verified") ?: "missing");
			return;
		}
		PASS(d, "$.allow_unverified_region",
		     "unverified region %s accepted (allow_unverified_region is true)", region);
	}
	region_allowed(p, rule, rpath, region, "region", d);
	snprintf(path, sizeof(path), "%s.require_fresh_identity", rpath);
	if (json_is_true(json_object_get(rule, "require_fresh_identity"))) {
		if (claim_is(c, "cloud.identity_fresh", "true"))
			PASS(d, path, "the identity document is fresh (bound to this request)");
		else
			DENY(d, path,
			     "the identity document is stale: not bound to this request "
			     "(cloud.identity_fresh=%s)",
			     claim(c, "cloud.identity_fresh") ?: "missing");
	}
}

static void identity_note(void *dv, bool pass, const char *path, const char *text)
{
	sl_decision *d = dv;
	if (pass)
		PASS(d, path, "%s", text);
	else
		DENY(d, path, "%s", text);
}

static void eval_rule(const sl_policy *p, const sl_claims *c, const json_t *rule, const char *rpath,
                      const sl_policy_request *req, sl_decision *d)
{
	char path[PATH_LEN], list[TEXT_LEN];
	json_t *v;

	if ((v = json_object_get(rule, "classification")) != NULL) {
		snprintf(path, sizeof(path), "%s.classification", rpath);
		PASS(d, path, "dataset classified '%s'", json_string_value(v));
	}
	check_region(p, c, rule, rpath, d);
	sl_policy_eval_identity(c, rule, rpath, identity_note, d);
	sl_policy_eval_workloads(c, rule, rpath, identity_note, d);

	snprintf(path, sizeof(path), "%s.tee_kinds", rpath);
	const char *kind = claim(c, "tee.kind");
	json_t *kinds = json_object_get(rule, "tee_kinds");
	bool kind_ok = false;
	size_t i;
	json_t *e;
	json_array_foreach (kinds, i, e)
		kind_ok = kind_ok || (kind && strcmp(kind, json_string_value(e)) == 0);
	join(kinds, list, sizeof(list));
	if (kind == NULL)
		DENY(d, path, "no attested TEE (claim tee.kind missing)");
	else if (!kind_ok)
		DENY(d, path, "TEE kind '%s' is not allowed (allowed: %s)", kind, list);
	else
		PASS(d, path, "TEE kind '%s' is allowed", kind);

	if ((v = json_object_get(rule, "measurements")) != NULL)
		check_measurements(c, v, rpath, d);
	if ((v = json_object_get(rule, "min_tcb")) != NULL)
		check_min_tcb(c, v, rpath, d);
	check_debug(c, rule, rpath, d);
	if (json_is_true(json_object_get(rule, "require_gpu_cc"))) {
		snprintf(path, sizeof(path), "%s.require_gpu_cc", rpath);
		if (claim_is(c, "gpu.cc", "on"))
			PASS(d, path, "GPU in confidential-computing mode (gpu.cc=on)");
		else
			DENY(d, path, "no GPU in confidential-computing mode (gpu.cc=%s)",
			     claim(c, "gpu.cc") ?: "missing");
		/* dev-tools mode lets a debugger read GPU memory: never data there */
		if (claim_is(c, "gpu.devtools", "true"))
			DENY(d, path, "the GPU is in developer-tools mode (gpu.devtools=true)");
		if (claim_is(c, "gpu.binding", "unchecked"))
			DENY(d, path,
			     "the GPU evidence is not bound to this request "
			     "(gpu.binding=unchecked)");
	}
	sl_policy_eval_gpu(c, rule, rpath, identity_note, d);
	/* GPU decryption puts the file key in the job's process and on the GPU */
	if (req->gpu_decrypt) {
		snprintf(path, sizeof(path), "%s.gpu_decrypt", rpath);
		if (json_is_false(json_object_get(rule, "gpu_decrypt")))
			DENY(d, path,
			     "decryption on the GPU is forbidden for this dataset (gpu_decrypt: "
			     "false): the key may not leave seclaunch");
		else
			PASS(d, path, "decryption on the GPU allowed");
	}
	check_outputs(p, rule, rpath, req, d);
	if ((v = json_object_get(rule, "key_ttl")) != NULL) {
		uint64_t ttl = (uint64_t)json_integer_value(v);
		if (d->key_ttl == 0 || ttl < d->key_ttl)
			d->key_ttl = ttl;
	}
}

static void check_key(const sl_policy *p, const sl_policy_request *req, sl_decision *d)
{
	char path[PATH_LEN], list[TEXT_LEN];
	if (req->key_id == NULL)
		return;
	json_t *pats = json_object_get(json_object_get(p->doc, "keys"), req->key_id);
	snprintf(path, sizeof(path), "$.keys.%s", req->key_id);
	if (pats == NULL) {
		DENY(d, "$.keys", "key '%s' is not in the policy", req->key_id);
		return;
	}
	size_t i;
	json_t *e;
	json_array_foreach (pats, i, e) {
		if (sl_policy_glob(json_string_value(e), req->dataset_id)) {
			snprintf(path, sizeof(path), "$.keys.%s[%zu]", req->key_id, i);
			PASS(d, path, "key '%s' may serve dataset '%s' (pattern '%s')", req->key_id,
			     req->dataset_id, json_string_value(e));
			return;
		}
	}
	join(pats, list, sizeof(list));
	DENY(d, path, "key '%s' may not serve dataset '%s' (it serves [%s])", req->key_id,
	     req->dataset_id, list);
}

sl_err sl_policy_key_check(const sl_policy *p, const char *key_id, const char *dataset_id)
{
	char list[TEXT_LEN];
	if (p->dev)
		return SL_OK;
	json_t *pats = json_object_get(json_object_get(p->doc, "keys"), key_id);
	if (pats == NULL)
		return sl_err_set(SL_E_POLICY_DENIED, "$.keys: key '%s' is not in the policy",
		                  key_id);
	size_t i;
	json_t *e;
	json_array_foreach (pats, i, e)
		if (sl_policy_glob(json_string_value(e), dataset_id))
			return SL_OK;
	join(pats, list, sizeof(list));
	return sl_err_set(SL_E_POLICY_DENIED,
	                  "$.keys.%s: key '%s' may not serve dataset '%s' (it serves [%s])", key_id,
	                  key_id, dataset_id, list);
}

sl_err sl_policy_output_key(const sl_policy *p, const char *output_id, const char **key_id)
{
	const char *found = NULL, *key;
	char list[TEXT_LEN] = "";
	size_t n = 0, used = 0;
	json_t *pats;
	if (p->dev) {
		*key_id = SL_POLICY_DEV_OUTPUT_KEY;
		return SL_OK;
	}
	json_object_foreach (json_object_get(p->doc, "keys"), key, pats) {
		size_t i;
		json_t *e;
		json_array_foreach (pats, i, e) {
			if (sl_policy_glob(json_string_value(e), output_id)) {
				found = key;
				n++;
				int w = snprintf(list + used, sizeof(list) - used, "%s'%s'",
				                 used ? ", " : "", key);
				if (w > 0 && (size_t)w < sizeof(list) - used)
					used += (size_t)w;
				break;
			}
		}
	}
	if (n == 0)
		return sl_err_set(SL_E_POLICY_DENIED, "$.keys: no key may serve output '%s'",
		                  output_id);
	if (n > 1)
		return sl_err_set(
		    SL_E_POLICY_DENIED,
		    "$.keys: %zu keys may serve output '%s' (%s); the policy must name "
		    "one",
		    n, output_id, list);
	*key_id = found;
	return SL_OK;
}

sl_err sl_policy_evaluate(const sl_policy *p, const sl_claims *claims, const sl_policy_request *req,
                          sl_decision **out)
{
	sl_err rc = SL_E_NOMEM;
	char path[PATH_LEN];
	sl_decision *d = NULL;

	SL_ENSURE(p != NULL && claims != NULL && req != NULL && req->dataset_id != NULL &&
	              (req->n_outputs == 0 || req->outputs != NULL),
	          SL_E_USAGE, "policy evaluation: a dataset id is required");
	d = calloc(1, sizeof(*d));
	SL_ENSURE(d != NULL, SL_E_NOMEM, "allocating a decision");
	d->matched = json_array();
	d->reasons = json_array();
	d->rules = json_array();
	d->dataset = strdup(req->dataset_id);
	d->key = req->key_id ? strdup(req->key_id) : NULL;
	d->dev = p->dev;
	memcpy(d->digest_hex, p->digest_hex, sizeof(d->digest_hex));
	SL_ENSURE(d->matched && d->reasons && d->rules && d->dataset &&
	              (req->key_id == NULL || d->key),
	          SL_E_NOMEM, "allocating a decision");

	if (p->dev) {
		PASS(d, "$",
		     "development policy: any key for any dataset to any verified evidence, "
		     "in any region (NOT for production)");
	} else {
		/* verifiers set "binding" to the checked value (or "verified"), and to
		 * "unchecked" only when told to skip the check */
		const char *b = claim(claims, "binding");
		if (b == NULL || b[0] == '\0' || strcmp(b, "unchecked") == 0)
			DENY(d, "$", "the evidence is not bound to this request (binding=%s)",
			     b ? b : "missing");
		check_key(p, req, d);
		json_t *sets = json_object_get(p->doc, "datasets");
		size_t i;
		json_t *rule;
		json_array_foreach (sets, i, rule) {
			const char *id = sl_json_getstr(rule, "id");
			if (!sl_policy_glob(id, req->dataset_id))
				continue;
			snprintf(path, sizeof(path), "$.datasets[%zu]", i);
			if (json_array_append_new(d->rules, json_string(path)) != 0)
				d->oom = true;
			PASS(d, path, "rule '%s' applies to dataset '%s'", id, req->dataset_id);
			eval_rule(p, claims, rule, path, req, d);
		}
		if (json_array_size(d->rules) == 0)
			DENY(d, "$.datasets", "no rule matches dataset '%s' (default deny)",
			     req->dataset_id);
	}
	SL_ENSURE(!d->oom, SL_E_NOMEM, "building a decision");
	d->allowed = json_array_size(d->reasons) == 0;
	*out = d;
	d = NULL;
	rc = SL_OK;
out:
	sl_decision_free(d);
	return rc;
}

void sl_decision_free(sl_decision *d)
{
	if (d == NULL)
		return;
	json_decref(d->matched);
	json_decref(d->reasons);
	json_decref(d->rules);
	free(d->dataset);
	free(d->key);
	free(d);
}

bool sl_decision_allowed(const sl_decision *d)
{
	return d->allowed;
}
size_t sl_decision_matched_count(const sl_decision *d)
{
	return json_array_size(d->matched);
}
const char *sl_decision_matched(const sl_decision *d, size_t i)
{
	return json_string_value(json_array_get(d->matched, i));
}
size_t sl_decision_reason_count(const sl_decision *d)
{
	return json_array_size(d->reasons);
}
const char *sl_decision_reason(const sl_decision *d, size_t i)
{
	return json_string_value(json_array_get(d->reasons, i));
}
uint64_t sl_decision_key_ttl(const sl_decision *d)
{
	return d->key_ttl;
}

sl_err sl_decision_reasons_json(const sl_decision *d, json_t **out)
{
	*out = json_deep_copy(d->reasons);
	return *out != NULL ? SL_OK : sl_err_set(SL_E_NOMEM, "copying reasons");
}

sl_err sl_decision_to_json(const sl_decision *d, json_t **out)
{
	json_t *o = json_pack("{s:s, s:s, s:o, s:O, s:s, s:b, s:O, s:O}", "decision",
	                      d->allowed ? "allow" : "deny", "dataset", d->dataset, "key",
	                      d->key ? json_string(d->key) : json_null(), "dataset_rules", d->rules,
	                      "policy_digest", d->digest_hex, "development_policy", d->dev,
	                      "matched", d->matched, "reasons", d->reasons);
	if (o == NULL)
		return sl_err_set(SL_E_NOMEM, "building the decision JSON");
	if (d->key_ttl != 0 &&
	    json_object_set_new(o, "key_ttl", json_integer((json_int_t)d->key_ttl)) != 0) {
		json_decref(o);
		return sl_err_set(SL_E_NOMEM, "building the decision JSON");
	}
	*out = o;
	return SL_OK;
}

sl_err sl_decision_err(const sl_decision *d)
{
	char buf[4096];
	size_t off = 0;
	if (d->allowed)
		return SL_OK;
	buf[0] = '\0';
	for (size_t i = 0; i < sl_decision_reason_count(d); i++) {
		int w = snprintf(buf + off, sizeof(buf) - off, "%s%s", i ? "; " : "",
		                 sl_decision_reason(d, i));
		if (w < 0 || (size_t)w >= sizeof(buf) - off)
			break;
		off += (size_t)w;
	}
	return sl_err_set(SL_E_POLICY_DENIED, "policy denied dataset '%s': %s", d->dataset, buf);
}
