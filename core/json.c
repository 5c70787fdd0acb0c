/* Strict JSON accessors (include/seclaunch/json.h). */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "seclaunch/json.h"

#define P(path) ((path) != NULL ? (path) : "$")

const char *sl_json_unknown(const json_t *obj, const char *const *allowed)
{
	const char *k;
	json_t *v;
	if (!json_is_object(obj))
		return NULL;
	json_object_foreach ((json_t *)obj, k, v) {
		(void)v;
		bool ok = false;
		for (size_t i = 0; allowed != NULL && allowed[i] != NULL && !ok; i++)
			ok = strcmp(k, allowed[i]) == 0;
		if (!ok)
			return k;
	}
	return NULL;
}

sl_err sl_json_only(const json_t *obj, const char *const *allowed, sl_err code, const char *path)
{
	if (!json_is_object(obj))
		return sl_err_set(code, "%s: not a JSON object", P(path));
	const char *k = sl_json_unknown(obj, allowed);
	if (k != NULL)
		return sl_err_set(code, "%s: unknown field \"%.64s\"", P(path), k);
	return SL_OK;
}

const char *sl_json_strval(const json_t *j)
{
	const char *s = json_string_value(j);
	if (s == NULL || strlen(s) != json_string_length(j))
		return NULL;
	return s;
}

const char *sl_json_getstr(const json_t *obj, const char *key)
{
	return json_is_object(obj) ? sl_json_strval(json_object_get(obj, key)) : NULL;
}

static SL_RESULT str_member(const json_t *obj, const char *key, size_t max, bool optional,
                            sl_err code, const char *path, const char **out)
{
	const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
	*out = NULL;
	if (!json_is_object(obj))
		return sl_err_set(code, "%s: not a JSON object", P(path));
	if (v == NULL || json_is_null(v)) {
		if (optional)
			return SL_OK;
		return sl_err_set(code, "%s.%s: missing", P(path), key);
	}
	if (!json_is_string(v))
		return sl_err_set(code, "%s.%s: not a string", P(path), key);
	if (sl_json_strval(v) == NULL)
		return sl_err_set(code, "%s.%s: contains a NUL character", P(path), key);
	if (max != 0 && json_string_length(v) > max)
		return sl_err_set(code, "%s.%s: longer than %zu bytes", P(path), key, max);
	*out = json_string_value(v);
	return SL_OK;
}

sl_err sl_json_str(const json_t *obj, const char *key, size_t max, sl_err code, const char *path,
                   const char **out)
{
	return str_member(obj, key, max, false, code, path, out);
}

sl_err sl_json_str_opt(const json_t *obj, const char *key, size_t max, sl_err code,
                       const char *path, const char **out)
{
	return str_member(obj, key, max, true, code, path, out);
}

static int nibble(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

sl_err sl_hex_exact(const char *s, size_t slen, uint8_t *out, size_t len, sl_err code,
                    const char *what)
{
	if (s == NULL || len > SIZE_MAX / 2 || slen != 2 * len)
		return sl_err_set(code, "%s: want %zu hex digits (%zu bytes), got %zu", what,
		                  2 * len, len, s != NULL ? slen : 0);
	for (size_t i = 0; i < len; i++) {
		int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			sodium_memzero(out, len);
			return sl_err_set(code, "%s: not hex at character %zu", what,
			                  hi < 0 ? 2 * i : 2 * i + 1);
		}
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return SL_OK;
}

sl_err sl_b64_exact(const char *s, size_t slen, uint8_t *out, size_t len, sl_err code,
                    const char *what)
{
	size_t got = 0;
	const char *end = NULL;
	/* exactly the encoded length of len bytes: no room for a longer value */
	size_t want = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL) - 1;
	if (s == NULL || slen != want)
		return sl_err_set(code, "%s: want %zu bytes of base64 (%zu characters), got %zu",
		                  what, len, want, s != NULL ? slen : 0);
	if (sodium_base642bin(out, len, s, slen, NULL, &got, &end,
	                      sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    end != s + slen || got != len) {
		sodium_memzero(out, len);
		return sl_err_set(code, "%s: not base64 of %zu bytes", what, len);
	}
	return SL_OK;
}

static SL_RESULT coded(const json_t *obj, const char *key, uint8_t *out, size_t len, sl_err code,
                       const char *path, bool hex)
{
	const char *s;
	char what[256];
	sl_err rc = str_member(obj, key, 0, false, code, path, &s);
	if (rc != SL_OK)
		return rc;
	snprintf(what, sizeof(what), "%s.%s", P(path), key);
	size_t n = json_string_length(json_object_get(obj, key));
	return hex ? sl_hex_exact(s, n, out, len, code, what)
	           : sl_b64_exact(s, n, out, len, code, what);
}

sl_err sl_json_hex(const json_t *obj, const char *key, uint8_t *out, size_t len, sl_err code,
                   const char *path)
{
	return coded(obj, key, out, len, code, path, true);
}

sl_err sl_json_b64(const json_t *obj, const char *key, uint8_t *out, size_t len, sl_err code,
                   const char *path)
{
	return coded(obj, key, out, len, code, path, false);
}
