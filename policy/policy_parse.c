/* Policy v1: parse and validate. Every error names the JSON path at fault. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_int.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"

#define KEY_TTL_MAX (366LL * 24 * 3600)

static const char *const TEE_KINDS[] = {"tpm2", "sev-snp", "tdx", "aws-nitro", NULL};

/* Every unknown member, each noted. */
static SL_RESULT only_fields_all(struct vctx *c, const json_t *obj, const char *path,
                                 const char *const *allowed)
{
	sl_err rc = SL_E_INPUT;
	const char *k;
	json_t *v;
	json_object_foreach ((json_t *)obj, k, v) {
		if (!sl_policy_in_list(allowed, k))
			NOTE(sl_policy_unknown_field(path, k, allowed));
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT want_bool(const json_t *obj, const char *name, const char *path)
{
	char p[PATH_MAX_LEN];
	json_t *v = json_object_get(obj, name);
	snprintf(p, sizeof(p), "%s.%s", path, name);
	if (v != NULL && !json_is_boolean(v))
		return sl_policy_verr(p, "must be true or false, not %s", sl_policy_type_name(v));
	return SL_OK;
}

/* A region pattern "cloud:region" (with '*') that matches a known region. */
static SL_RESULT check_pattern(const struct vctx *c, const char *pat, const char *path)
{
	size_t i;
	json_t *r;
	if (strchr(pat, ':') == NULL)
		return sl_policy_verr(
		    path, "'%s' is neither a region group nor a CLOUD:REGION pattern", pat);
	json_array_foreach (c->known, i, r) {
		if (sl_policy_glob(pat, json_string_value(r)))
			return SL_OK;
	}
	const char *near = strchr(pat, '*') == NULL ? sl_policy_nearest_json(pat, c->known) : NULL;
	if (near != NULL)
		return sl_policy_verr(
		    path, "pattern '%s' matches no known region (did you mean '%s'?)", pat, near);
	return sl_policy_verr(path, "pattern '%s' matches no known region", pat);
}

/* A non-empty (when need_nonempty) array of group names or patterns. */
static SL_RESULT check_region_entry(const struct vctx *c, const json_t *e, const char *p)
{
	sl_err rc = SL_E_INPUT;
	SL_GUARD(sl_policy_want_type(e, JSON_STRING, p, "a string"));
	const char *s = json_string_value(e);
	if (strchr(s, ':') != NULL)
		return check_pattern(c, s, p);
	if (json_object_get(c->groups, s) == NULL) {
		const char *near = sl_policy_nearest_json(s, c->groups);
		if (near != NULL)
			SL_FAIL(SL_E_INPUT, "%s: unknown region group '%s' (did you mean '%s'?)", p,
			        s, near);
		SL_FAIL(SL_E_INPUT, "%s: unknown region group '%s'", p, s);
	}
	rc = SL_OK;
out:
	return rc;
}

/* A non-empty (when need_nonempty) array of group names or patterns; every
 * bad entry is noted. */
static SL_RESULT check_region_list(struct vctx *c, const json_t *v, const char *path,
                                   bool need_nonempty)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN];
	size_t i;
	json_t *e;
	SL_GUARD(sl_policy_want_type(v, JSON_ARRAY, path, "an array of region groups or patterns"));
	if (need_nonempty && json_array_size(v) == 0)
		SL_FAIL(SL_E_INPUT, "%s: an empty allow-list allows nothing", path);
	json_array_foreach (v, i, e) {
		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		NOTE(check_region_entry(c, e, p));
	}
	rc = SL_OK;
out:
	return rc;
}

/* A hex value or a non-empty list of them, want_bytes each; rewritten in
 * place as an array of lower-case strings. */
static SL_RESULT check_output(const struct vctx *c, const json_t *e, const char *p)
{
	sl_err rc = SL_E_INPUT;
	char q[PATH_MAX_LEN];
	static const char *const fields[] = {"url", "region", NULL};

	SL_GUARD(sl_policy_want_type(e, JSON_OBJECT, p, "an object {url, region}"));
	SL_GUARD(sl_policy_only_fields(e, p, fields));
	json_t *u = json_object_get(e, "url"), *r = json_object_get(e, "region");
	snprintf(q, sizeof(q), "%s.url", p);
	SL_GUARD(sl_policy_want_type(u, JSON_STRING, q, "a URL pattern"));
	SL_ENSURE(strstr(json_string_value(u), "://") != NULL, SL_E_INPUT,
	          "%s: '%s' is not a URL pattern (SCHEME://...)", q, json_string_value(u));
	snprintf(q, sizeof(q), "%s.region", p);
	SL_GUARD(sl_policy_want_type(r, JSON_STRING, q, "a CLOUD:REGION"));
	const char *rs = json_string_value(r);
	SL_ENSURE(strchr(rs, '*') == NULL, SL_E_INPUT,
	          "%s: name the destination's one region, not a pattern", q);
	SL_GUARD(check_pattern(c, rs, q));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT check_outputs(struct vctx *c, const json_t *v, const char *path)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN];
	size_t i;
	json_t *e;

	SL_GUARD(sl_policy_want_list(v, path, "an array of {url, region}"));
	json_array_foreach (v, i, e) {
		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		NOTE(check_output(c, e, p));
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT check_tee_kinds(const json_t *v, const char *p)
{
	sl_err rc = SL_E_INPUT;
	size_t i;
	json_t *e;
	SL_GUARD(
	    sl_policy_want_list(v, p, "an array of TEE kinds (tpm2, sev-snp, tdx, aws-nitro)"));
	json_array_foreach (v, i, e) {
		char q[PATH_MAX_LEN];
		snprintf(q, sizeof(q), "%s[%zu]", p, i);
		const char *k = json_is_string(e) ? json_string_value(e) : NULL;
		const char *near = k != NULL ? sl_policy_nearest(k, TEE_KINDS, SIZE_MAX) : NULL;
		SL_ENSURE(k != NULL && sl_policy_in_list(TEE_KINDS, k), SL_E_INPUT,
		          "%s: not a TEE kind (tpm2, sev-snp, tdx, aws-nitro)%s%s%s", q,
		          near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT check_key_ttl(const json_t *v, const char *p)
{
	if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) <= KEY_TTL_MAX)
		return SL_OK;
	return sl_err_set(SL_E_INPUT, "%s: must be a number of seconds, 1..%lld", p, KEY_TTL_MAX);
}

static SL_RESULT check_dataset(struct vctx *c, json_t *d, const char *path)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN];
	static const char *const fields[] = {"id",
	                                     "description",
	                                     "classification",
	                                     "allowed_regions",
	                                     "denied_regions",
	                                     "tee_kinds",
	                                     "measurements",
	                                     "min_tcb",
	                                     "debug_allowed",
	                                     "require_gpu_cc",
	                                     "gpu",
	                                     "gpu_decrypt",
	                                     "require_fresh_identity",
	                                     "key_ttl",
	                                     "output_destinations",
	                                     "cloud_identity",
	                                     "workloads",
	                                     NULL};
	json_t *v;

	SL_GUARD(sl_policy_want_type(d, JSON_OBJECT, path, "an object"));
	NOTE(only_fields_all(c, d, path, fields));
	snprintf(p, sizeof(p), "%s.id", path);
	v = json_object_get(d, "id");
	NOTE(json_is_string(v) ? sl_dataset_id_check(json_string_value(v), true, p)
	                       : sl_policy_want_type(v, JSON_STRING, p, "a dataset id pattern"));
	static const char *const strs[] = {"description", "classification", NULL};
	for (size_t i = 0; strs[i] != NULL; i++) {
		v = json_object_get(d, strs[i]);
		snprintf(p, sizeof(p), "%s.%s", path, strs[i]);
		if (v != NULL)
			NOTE(sl_policy_want_type(v, JSON_STRING, p, "a string"));
	}
	snprintf(p, sizeof(p), "%s.allowed_regions", path);
	NOTE(check_region_list(c, json_object_get(d, "allowed_regions"), p, true));
	if ((v = json_object_get(d, "denied_regions")) != NULL) {
		snprintf(p, sizeof(p), "%s.denied_regions", path);
		NOTE(check_region_list(c, v, p, false));
	}
	snprintf(p, sizeof(p), "%s.tee_kinds", path);
	NOTE(check_tee_kinds(json_object_get(d, "tee_kinds"), p));
	if ((v = json_object_get(d, "measurements")) != NULL) {
		snprintf(p, sizeof(p), "%s.measurements", path);
		NOTE(sl_policy_check_measurements(v, p));
	}
	if ((v = json_object_get(d, "min_tcb")) != NULL) {
		snprintf(p, sizeof(p), "%s.min_tcb", path);
		NOTE(sl_policy_check_min_tcb(v, p));
	}
	NOTE(want_bool(d, "debug_allowed", path));
	NOTE(want_bool(d, "require_gpu_cc", path));
	NOTE(want_bool(d, "gpu_decrypt", path));
	if ((v = json_object_get(d, "gpu")) != NULL) {
		snprintf(p, sizeof(p), "%s.gpu", path);
		NOTE(sl_policy_check_gpu(v, p));
	}
	NOTE(want_bool(d, "require_fresh_identity", path));
	if ((v = json_object_get(d, "key_ttl")) != NULL) {
		snprintf(p, sizeof(p), "%s.key_ttl", path);
		NOTE(check_key_ttl(v, p));
	}
	if ((v = json_object_get(d, "output_destinations")) != NULL) {
		snprintf(p, sizeof(p), "%s.output_destinations", path);
		NOTE(check_outputs(c, v, p));
	}
	if ((v = json_object_get(d, "cloud_identity")) != NULL) {
		snprintf(p, sizeof(p), "%s.cloud_identity", path);
		NOTE(sl_policy_check_identity(c, v, p));
	}
	if ((v = json_object_get(d, "workloads")) != NULL) {
		snprintf(p, sizeof(p), "%s.workloads", path);
		NOTE(sl_policy_check_workloads(c, v, p));
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT check_group(struct vctx *c, const char *name, json_t *list)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN], q[PATH_MAX_LEN];
	size_t i;
	json_t *e;

	snprintf(p, sizeof(p), "$.region_groups.%s", name);
	SL_ENSURE(name[0] != '\0' &&
	              strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == strlen(name),
	          SL_E_INPUT, "%s: group names are [a-z0-9_-]+", p);
	SL_GUARD(sl_policy_want_type(list, JSON_ARRAY, p, "an array of CLOUD:REGION patterns"));
	SL_ENSURE(json_array_size(list) > 0, SL_E_INPUT, "%s: an empty group matches nothing", p);
	json_array_foreach (list, i, e) {
		snprintf(q, sizeof(q), "%s[%zu]", p, i);
		NOTE(sl_policy_want_type(e, JSON_STRING, q, "a CLOUD:REGION pattern"));
		if (json_is_string(e))
			NOTE(check_pattern(c, json_string_value(e), q));
	}
	/* the policy's group replaces a built-in one of the same name */
	SL_ENSURE(json_object_set(c->groups, name, list) == 0, SL_E_NOMEM, "policy");
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT check_groups(struct vctx *c, const json_t *g)
{
	sl_err rc = SL_E_INPUT;
	const char *name;
	json_t *list;

	SL_GUARD(sl_policy_want_type(g, JSON_OBJECT, "$.region_groups",
	                             "an object of group -> patterns"));
	json_object_foreach ((json_t *)g, name, list) {
		NOTE(check_group(c, name, list));
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT check_key(struct vctx *c, const char *id, const json_t *list)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN], q[PATH_MAX_LEN];
	size_t i;
	json_t *e;

	snprintf(p, sizeof(p), "$.keys.%s", id);
	SL_ENSURE(id[0] != '\0', SL_E_INPUT, "$.keys: empty key id");
	SL_GUARD(sl_policy_want_list(list, p, "an array of dataset id patterns"));
	json_array_foreach (list, i, e) {
		snprintf(q, sizeof(q), "%s[%zu]", p, i);
		NOTE(json_is_string(e)
		         ? sl_dataset_id_check(json_string_value(e), true, q)
		         : sl_policy_want_type(e, JSON_STRING, q, "a dataset id pattern"));
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT check_keys(struct vctx *c, const json_t *k)
{
	sl_err rc = SL_E_INPUT;
	const char *id;
	json_t *list;

	SL_GUARD(sl_policy_want_type(k, JSON_OBJECT, "$.keys",
	                             "an object of key id -> dataset patterns"));
	json_object_foreach ((json_t *)k, id, list) {
		NOTE(check_key(c, id, list));
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT check_version(const json_t *v)
{
	if (v == NULL)
		return sl_err_set(SL_E_INPUT, "$.version: missing (this is policy version 1)");
	if (!json_is_integer(v))
		return sl_err_set(SL_E_INPUT, "$.version: must be an integer, not %s",
		                  sl_policy_type_name(v));
	if (json_integer_value(v) != 1)
		return sl_err_set(SL_E_VERSION,
		                  "$.version: %lld is not supported (this is policy version 1)",
		                  (long long)json_integer_value(v));
	return SL_OK;
}

static SL_RESULT check_datasets(struct vctx *c, const json_t *v)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN];
	size_t i;
	json_t *d;

	SL_GUARD(sl_policy_want_list(v, "$.datasets", "an array of dataset rules"));
	json_array_foreach (v, i, d) {
		snprintf(p, sizeof(p), "$.datasets[%zu]", i);
		NOTE(check_dataset(c, d, p));
		const char *id = sl_json_getstr(d, "id");
		for (size_t j = 0; id != NULL && j < i; j++) {
			const char *o = sl_json_getstr(json_array_get(v, j), "id");
			if (o != NULL && strcmp(o, id) == 0)
				NOTE(sl_err_set(SL_E_INPUT,
				                "%s.id: duplicate rule for dataset '%s' (also "
				                "$.datasets[%zu])",
				                p, id, j));
		}
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_policy_validate(json_t *root, struct vctx *c)
{
	sl_err rc = SL_E_INPUT;
	static const char *const fields[] = {"version",  "description", "region_groups",
	                                     "datasets", "keys",        "allow_unverified_region",
	                                     NULL};
	json_t *v;

	NOTE(sl_policy_want_type(root, JSON_OBJECT, "$", "an object"));
	if (!json_is_object(root))
		return SL_OK;
	/* another version's fields are not errors of this one: that is all to say */
	v = json_object_get(root, "version");
	if (json_is_integer(v) && json_integer_value(v) != 1)
		return sl_policy_note(c, check_version(v));
	NOTE(only_fields_all(c, root, "$", fields));
	NOTE(check_version(v));
	if ((v = json_object_get(root, "description")) != NULL)
		NOTE(sl_policy_want_type(v, JSON_STRING, "$.description", "a string"));
	NOTE(want_bool(root, "allow_unverified_region", "$"));
	if ((v = json_object_get(root, "region_groups")) != NULL)
		NOTE(check_groups(c, v));
	NOTE(check_datasets(c, json_object_get(root, "datasets")));
	if ((v = json_object_get(root, "keys")) != NULL)
		NOTE(check_keys(c, v));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_policy_load(const uint8_t *data, size_t len, sl_policy **out)
{
	sl_err rc = SL_E_FORMAT;
	json_error_t je;
	json_t *root = NULL;
	struct vctx c = {NULL, NULL, NULL, NULL, SL_OK};
	sl_policy *p = NULL;

	SL_ENSURE(len <= SL_POLICY_MAX_BYTES, SL_E_TOO_LARGE,
	          "policy: %zu bytes, at most %d allowed", len, SL_POLICY_MAX_BYTES);
	root = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &je);
	SL_ENSURE(root != NULL, SL_E_FORMAT, "policy: not valid JSON at line %d column %d: %s",
	          je.line, je.column, je.text);
	SL_GUARD(sl_policy_builtin_regions(&c.known, &c.groups));
	c.errors = json_array();
	c.warnings = json_array();
	SL_ENSURE(c.errors != NULL && c.warnings != NULL, SL_E_NOMEM, "policy");
	SL_GUARD(sl_policy_validate(root, &c));
	if (c.first != SL_OK) {
		/* the first error names its path; `policy check` lists them all */
		json_t *e0 = json_array_get(c.errors, 0);
		size_t n = json_array_size(c.errors);
		SL_FAIL(c.first, "%s: %s%s", sl_json_getstr(e0, "path"),
		        sl_json_getstr(e0, "message"),
		        n > 1 ? " (and more errors: `seclaunch policy check` lists them all)" : "");
	}
	p = calloc(1, sizeof(*p));
	SL_ENSURE(p != NULL, SL_E_NOMEM, "allocating a policy");
	p->doc = root;
	root = NULL;
	p->groups = c.groups;
	c.groups = NULL;
	p->allow_unverified = json_is_true(json_object_get(p->doc, "allow_unverified_region"));
	sl_sha256(data, len, p->digest);
	sl_hex_encode(p->digest, sizeof(p->digest), p->digest_hex);
	*out = p;
	p = NULL;
	rc = SL_OK;
out:
	sl_policy_free(p);
	json_decref(root);
	json_decref(c.known);
	json_decref(c.groups);
	json_decref(c.errors);
	json_decref(c.warnings);
	return rc;
}

void sl_policy_free(sl_policy *p)
{
	if (p == NULL)
		return;
	json_decref(p->doc);
	json_decref(p->groups);
	free(p->trusted_comment);
	free(p);
}

const uint8_t *sl_policy_digest(const sl_policy *p)
{
	return p->digest;
}
const char *sl_policy_digest_hex(const sl_policy *p)
{
	return p->digest_hex;
}
const char *sl_policy_trusted_comment(const sl_policy *p)
{
	return p->trusted_comment;
}
bool sl_policy_signed(const sl_policy *p)
{
	return p->trusted_comment != NULL;
}
bool sl_policy_allow_unverified_region(const sl_policy *p)
{
	return p->allow_unverified;
}
bool sl_policy_is_dev(const sl_policy *p)
{
	return p->dev;
}
