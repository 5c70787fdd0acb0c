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

/* Validation context: the built-in tables and the policy's merged groups. */
struct vctx {
	json_t *known;  /* array of "cloud:region" */
	json_t *groups; /* merged */
};

static const char *const TEE_KINDS[] = {"tpm2", "sev-snp", "tdx", NULL};

bool sl_policy_in_list(const char *const *list, const char *s)
{
	for (size_t i = 0; list[i] != NULL; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

bool sl_policy_glob(const char *pat, const char *s)
{
	const char *star = NULL, *resume = NULL;
	while (*s != '\0') {
		if (*pat == '*') {
			star = pat++;
			resume = s;
		} else if (*pat == *s) {
			pat++;
			s++;
		} else if (star != NULL) {
			pat = star + 1;
			s = ++resume;
		} else {
			return false;
		}
	}
	while (*pat == '*')
		pat++;
	return *pat == '\0';
}

sl_err sl_policy_builtin_regions(json_t **known, json_t **groups)
{
	sl_err rc = SL_E_INTERNAL;
	json_error_t je;
	json_t *root = json_loadb(sl_policy_regions_json, sl_policy_regions_json_len, 0, &je);
	json_t *k = json_array();
	const char *cloud;
	json_t *list;

	SL_ENSURE(root != NULL && k != NULL, SL_E_INTERNAL, "built-in regions.json: %s", je.text);
	json_object_foreach (json_object_get(root, "known_regions"), cloud, list) {
		size_t i;
		json_t *r;
		json_array_foreach (list, i, r) {
			char buf[128];
			snprintf(buf, sizeof(buf), "%s:%s", cloud, json_string_value(r));
			SL_ENSURE(json_array_append_new(k, json_string(buf)) == 0, SL_E_NOMEM,
			          "regions");
		}
	}
	SL_ENSURE(json_is_object(json_object_get(root, "groups")), SL_E_INTERNAL,
	          "built-in regions.json: no groups");
	*groups = json_deep_copy(json_object_get(root, "groups"));
	SL_ENSURE(*groups != NULL, SL_E_NOMEM, "regions");
	*known = k;
	k = NULL;
	rc = SL_OK;
out:
	json_decref(k);
	json_decref(root);
	return rc;
}

sl_err sl_policy_verr(const char *path, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return sl_err_set(SL_E_INPUT, "%s: %s", path, msg);
}

const char *sl_policy_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

/* Rejects members not in allowed (NULL-terminated). */
sl_err sl_policy_only_fields(const json_t *obj, const char *path, const char *const *allowed)
{
	const char *k = sl_json_unknown(obj, allowed);
	if (k != NULL)
		return sl_policy_verr(path, "unknown field '%s'", k);
	return SL_OK;
}

sl_err sl_policy_want_type(const json_t *v, json_type t, const char *path, const char *what)
{
	if (v == NULL || json_typeof(v) != t)
		return sl_policy_verr(path, "must be %s, not %s", what,
		                      v == NULL ? "absent" : sl_policy_type_name(v));
	return SL_OK;
}

static sl_err want_bool(const json_t *obj, const char *name, const char *path)
{
	char p[PATH_MAX_LEN];
	json_t *v = json_object_get(obj, name);
	snprintf(p, sizeof(p), "%s.%s", path, name);
	if (v != NULL && !json_is_boolean(v))
		return sl_policy_verr(p, "must be true or false, not %s", sl_policy_type_name(v));
	return SL_OK;
}

/* A region pattern "cloud:region" (with '*') that matches a known region. */
static sl_err check_pattern(const struct vctx *c, const char *pat, const char *path)
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
	return sl_policy_verr(path, "pattern '%s' matches no known region", pat);
}

/* A non-empty (when need_nonempty) array of group names or patterns. */
static sl_err check_region_list(const struct vctx *c, const json_t *v, const char *path,
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
		SL_GUARD(sl_policy_want_type(e, JSON_STRING, p, "a string"));
		const char *s = json_string_value(e);
		if (strchr(s, ':') == NULL) {
			if (json_object_get(c->groups, s) == NULL)
				SL_FAIL(SL_E_INPUT, "%s: unknown region group '%s'", p, s);
		} else {
			SL_GUARD(check_pattern(c, s, p));
		}
	}
	rc = SL_OK;
out:
	return rc;
}

/* A hex value or a non-empty list of them, want_bytes each; rewritten in
 * place as an array of lower-case strings. */
static sl_err check_outputs(const struct vctx *c, const json_t *v, const char *path)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN], q[PATH_MAX_LEN];
	static const char *const fields[] = {"url", "region", NULL};
	size_t i;
	json_t *e;

	SL_GUARD(sl_policy_want_type(v, JSON_ARRAY, path, "an array of {url, region}"));
	SL_ENSURE(json_array_size(v) > 0, SL_E_INPUT, "%s: an empty allow-list allows nothing",
	          path);
	json_array_foreach (v, i, e) {
		snprintf(p, sizeof(p), "%s[%zu]", path, i);
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
	}
	rc = SL_OK;
out:
	return rc;
}

static sl_err check_dataset(const struct vctx *c, json_t *d, const char *path)
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
	                                     "require_fresh_identity",
	                                     "key_ttl",
	                                     "output_destinations",
	                                     NULL};
	json_t *v;

	SL_GUARD(sl_policy_want_type(d, JSON_OBJECT, path, "an object"));
	SL_GUARD(sl_policy_only_fields(d, path, fields));
	snprintf(p, sizeof(p), "%s.id", path);
	v = json_object_get(d, "id");
	SL_GUARD(sl_policy_want_type(v, JSON_STRING, p, "a dataset id pattern"));
	SL_ENSURE(json_string_length(v) > 0, SL_E_INPUT, "%s: empty", p);
	SL_ENSURE(sl_json_strval(v) != NULL, SL_E_INPUT, "%s: contains a NUL character", p);
	for (const char *s = json_string_value(v); *s != '\0'; s++)
		SL_ENSURE((unsigned char)*s > 0x20 && (unsigned char)*s < 0x7f, SL_E_INPUT,
		          "%s: only printable ASCII without spaces", p);
	static const char *const strs[] = {"description", "classification", NULL};
	for (size_t i = 0; strs[i] != NULL; i++) {
		v = json_object_get(d, strs[i]);
		snprintf(p, sizeof(p), "%s.%s", path, strs[i]);
		if (v != NULL)
			SL_GUARD(sl_policy_want_type(v, JSON_STRING, p, "a string"));
	}
	snprintf(p, sizeof(p), "%s.allowed_regions", path);
	SL_GUARD(check_region_list(c, json_object_get(d, "allowed_regions"), p, true));
	if ((v = json_object_get(d, "denied_regions")) != NULL) {
		snprintf(p, sizeof(p), "%s.denied_regions", path);
		SL_GUARD(check_region_list(c, v, p, false));
	}
	snprintf(p, sizeof(p), "%s.tee_kinds", path);
	v = json_object_get(d, "tee_kinds");
	SL_GUARD(
	    sl_policy_want_type(v, JSON_ARRAY, p, "an array of TEE kinds (tpm2, sev-snp, tdx)"));
	SL_ENSURE(json_array_size(v) > 0, SL_E_INPUT, "%s: an empty allow-list allows nothing", p);
	{
		size_t i;
		json_t *e;
		json_array_foreach (v, i, e) {
			char q[PATH_MAX_LEN];
			snprintf(q, sizeof(q), "%s[%zu]", p, i);
			SL_ENSURE(json_is_string(e) &&
			              sl_policy_in_list(TEE_KINDS, json_string_value(e)),
			          SL_E_INPUT, "%s: not a TEE kind (tpm2, sev-snp, tdx)", q);
		}
	}
	if ((v = json_object_get(d, "measurements")) != NULL) {
		snprintf(p, sizeof(p), "%s.measurements", path);
		SL_GUARD(sl_policy_check_measurements(v, p));
	}
	if ((v = json_object_get(d, "min_tcb")) != NULL) {
		snprintf(p, sizeof(p), "%s.min_tcb", path);
		SL_GUARD(sl_policy_check_min_tcb(v, p));
	}
	SL_GUARD(want_bool(d, "debug_allowed", path));
	SL_GUARD(want_bool(d, "require_gpu_cc", path));
	SL_GUARD(want_bool(d, "require_fresh_identity", path));
	if ((v = json_object_get(d, "key_ttl")) != NULL) {
		snprintf(p, sizeof(p), "%s.key_ttl", path);
		SL_ENSURE(json_is_integer(v) && json_integer_value(v) > 0 &&
		              json_integer_value(v) <= KEY_TTL_MAX,
		          SL_E_INPUT, "%s: must be a number of seconds, 1..%lld", p, KEY_TTL_MAX);
	}
	if ((v = json_object_get(d, "output_destinations")) != NULL) {
		snprintf(p, sizeof(p), "%s.output_destinations", path);
		SL_GUARD(check_outputs(c, v, p));
	}
	rc = SL_OK;
out:
	return rc;
}

static sl_err check_groups(struct vctx *c, const json_t *g)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN], q[PATH_MAX_LEN];
	const char *name;
	json_t *list;

	SL_GUARD(sl_policy_want_type(g, JSON_OBJECT, "$.region_groups",
	                             "an object of group -> patterns"));
	json_object_foreach ((json_t *)g, name, list) {
		snprintf(p, sizeof(p), "$.region_groups.%s", name);
		SL_ENSURE(name[0] != '\0' &&
		              strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") ==
		                  strlen(name),
		          SL_E_INPUT, "%s: group names are [a-z0-9_-]+", p);
		SL_GUARD(
		    sl_policy_want_type(list, JSON_ARRAY, p, "an array of CLOUD:REGION patterns"));
		SL_ENSURE(json_array_size(list) > 0, SL_E_INPUT,
		          "%s: an empty group matches nothing", p);
		size_t i;
		json_t *e;
		json_array_foreach (list, i, e) {
			snprintf(q, sizeof(q), "%s[%zu]", p, i);
			SL_GUARD(sl_policy_want_type(e, JSON_STRING, q, "a CLOUD:REGION pattern"));
			SL_GUARD(check_pattern(c, json_string_value(e), q));
		}
		/* the policy's group replaces a built-in one of the same name */
		SL_ENSURE(json_object_set(c->groups, name, list) == 0, SL_E_NOMEM, "policy");
	}
	rc = SL_OK;
out:
	return rc;
}

static sl_err check_keys(const json_t *k)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN], q[PATH_MAX_LEN];
	const char *id;
	json_t *list;

	SL_GUARD(sl_policy_want_type(k, JSON_OBJECT, "$.keys",
	                             "an object of key id -> dataset patterns"));
	json_object_foreach ((json_t *)k, id, list) {
		snprintf(p, sizeof(p), "$.keys.%s", id);
		SL_ENSURE(id[0] != '\0', SL_E_INPUT, "$.keys: empty key id");
		SL_GUARD(
		    sl_policy_want_type(list, JSON_ARRAY, p, "an array of dataset id patterns"));
		SL_ENSURE(json_array_size(list) > 0, SL_E_INPUT,
		          "%s: an empty allow-list allows nothing", p);
		size_t i;
		json_t *e;
		json_array_foreach (list, i, e) {
			snprintf(q, sizeof(q), "%s[%zu]", p, i);
			SL_GUARD(sl_policy_want_type(e, JSON_STRING, q, "a dataset id pattern"));
			SL_ENSURE(json_string_length(e) > 0, SL_E_INPUT, "%s: empty", q);
		}
	}
	rc = SL_OK;
out:
	return rc;
}

static sl_err validate(json_t *root, struct vctx *c)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN];
	static const char *const fields[] = {"version",  "description", "region_groups",
	                                     "datasets", "keys",        "allow_unverified_region",
	                                     NULL};
	json_t *v;

	SL_GUARD(sl_policy_want_type(root, JSON_OBJECT, "$", "an object"));
	SL_GUARD(sl_policy_only_fields(root, "$", fields));
	v = json_object_get(root, "version");
	SL_ENSURE(v != NULL, SL_E_INPUT, "$.version: missing (this is policy version 1)");
	SL_ENSURE(json_is_integer(v), SL_E_INPUT, "$.version: must be an integer, not %s",
	          sl_policy_type_name(v));
	SL_ENSURE(json_integer_value(v) == 1, SL_E_VERSION,
	          "$.version: %lld is not supported (this is policy version 1)",
	          (long long)json_integer_value(v));
	if ((v = json_object_get(root, "description")) != NULL)
		SL_GUARD(sl_policy_want_type(v, JSON_STRING, "$.description", "a string"));
	SL_GUARD(want_bool(root, "allow_unverified_region", "$"));
	if ((v = json_object_get(root, "region_groups")) != NULL)
		SL_GUARD(check_groups(c, v));
	v = json_object_get(root, "datasets");
	SL_GUARD(sl_policy_want_type(v, JSON_ARRAY, "$.datasets", "an array of dataset rules"));
	SL_ENSURE(json_array_size(v) > 0, SL_E_INPUT,
	          "$.datasets: an empty allow-list allows nothing");
	size_t i;
	json_t *d;
	json_array_foreach (v, i, d) {
		snprintf(p, sizeof(p), "$.datasets[%zu]", i);
		SL_GUARD(check_dataset(c, d, p));
		for (size_t j = 0; j < i; j++) {
			json_t *o = json_array_get(v, j);
			SL_ENSURE(strcmp(sl_json_getstr(o, "id"), sl_json_getstr(d, "id")) != 0,
			          SL_E_INPUT,
			          "%s.id: duplicate rule for dataset '%s' (also $.datasets[%zu])",
			          p, sl_json_getstr(d, "id"), j);
		}
	}
	if ((v = json_object_get(root, "keys")) != NULL)
		SL_GUARD(check_keys(v));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_policy_load(const uint8_t *data, size_t len, sl_policy **out)
{
	sl_err rc = SL_E_FORMAT;
	json_error_t je;
	json_t *root = NULL;
	struct vctx c = {NULL, NULL};
	sl_policy *p = NULL;

	SL_ENSURE(len <= SL_POLICY_MAX_BYTES, SL_E_TOO_LARGE,
	          "policy: %zu bytes, at most %d allowed", len, SL_POLICY_MAX_BYTES);
	root = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &je);
	SL_ENSURE(root != NULL, SL_E_FORMAT, "policy: not valid JSON at line %d column %d: %s",
	          je.line, je.column, je.text);
	SL_GUARD(sl_policy_builtin_regions(&c.known, &c.groups));
	SL_GUARD(validate(root, &c));
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
