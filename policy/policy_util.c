/* The helpers every other file of policy/ shares, and that call none of
 * them: region globs and the built-in region tables, nearest-name
 * suggestions for typos, the validation findings list, the field and type
 * checks that name the JSON path at fault, and the formatting of an
 * evaluation's findings. The parser, the checks and the evaluators call
 * down into this file; nothing here calls back up. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy_int.h"

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

sl_err sl_policy_finding(json_t *list, const char *path, const char *msg)
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
	return sl_policy_finding(c->errors, path, msg);
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

sl_err sl_policy_unknown_field(const char *path, const char *k, const char *const *allowed)
{
	const char *near = sl_policy_nearest(k, allowed, SIZE_MAX);
	if (near != NULL)
		return sl_policy_verr(path, "unknown field '%s' (did you mean '%s'?)", k, near);
	return sl_policy_verr(path, "unknown field '%s'", k);
}

sl_err sl_policy_only_fields(const json_t *obj, const char *path, const char *const *allowed)
{
	const char *k;
	json_t *v;
	json_object_foreach ((json_t *)obj, k, v) {
		if (!sl_policy_in_list(allowed, k))
			return sl_policy_unknown_field(path, k, allowed);
	}
	return SL_OK;
}

sl_err sl_policy_want_type(const json_t *v, json_type t, const char *path, const char *what)
{
	if (v == NULL || json_typeof(v) != t)
		return sl_policy_verr(path, "must be %s, not %s", what,
		                      v == NULL ? "absent" : sl_policy_type_name(v));
	return SL_OK;
}

sl_err sl_policy_want_list(const json_t *v, const char *path, const char *what)
{
	sl_err rc = sl_policy_want_type(v, JSON_ARRAY, path, what);
	if (rc == SL_OK && json_array_size(v) == 0)
		rc = sl_err_set(SL_E_INPUT, "%s: an empty allow-list allows nothing", path);
	return rc;
}

void sl_policy_notef(sl_policy_note_fn fn, void *d, bool pass, const char *path, const char *fmt,
                     ...)
{
	char text[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	fn(d, pass, path, text);
}
