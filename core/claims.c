/* The normalised claim set: a sorted key -> string map. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/claims.h"
#include "seclaunch/util.h"

#define SL_CLAIMS_MAX 4096
#define SL_CLAIM_VALUE_MAX 65536

struct claim {
	char *key;
	char *value;
};

struct sl_claims {
	struct claim *v;
	size_t n;
	size_t cap;
};

sl_err sl_claims_new(sl_claims **out)
{
	*out = calloc(1, sizeof(**out));
	if (*out == NULL)
		return sl_err_set(SL_E_NOMEM, "allocating a claim set");
	return SL_OK;
}

void sl_claims_free(sl_claims *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].key);
		free(c->v[i].value);
	}
	free(c->v);
	free(c);
}

static bool key_ok(const char *k)
{
	if (k == NULL || *k == '\0' || strlen(k) > 128)
		return false;
	for (const char *p = k; *p; p++) {
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' ||
		      *p == '_' || *p == '-'))
			return false;
	}
	return true;
}

/* Index of key, or where it would be inserted (binary search). */
static size_t find(const sl_claims *c, const char *key, bool *found)
{
	size_t lo = 0, hi = c->n;
	*found = false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int d = strcmp(c->v[mid].key, key);
		if (d == 0) {
			*found = true;
			return mid;
		}
		if (d < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

sl_err sl_claims_set(sl_claims *c, const char *key, const char *value)
{
	bool found;
	if (!key_ok(key))
		return sl_err_set(SL_E_INTERNAL, "claim key '%s' is not [a-z0-9._-]+", key);
	if (strlen(value) > SL_CLAIM_VALUE_MAX)
		return sl_err_set(SL_E_TOO_LARGE, "claim %s: value longer than %d bytes", key,
		                  SL_CLAIM_VALUE_MAX);
	size_t i = find(c, key, &found);
	char *v = strdup(value);
	if (v == NULL)
		return sl_err_set(SL_E_NOMEM, "claim %s", key);
	if (found) {
		free(c->v[i].value);
		c->v[i].value = v;
		return SL_OK;
	}
	if (c->n >= SL_CLAIMS_MAX) {
		free(v);
		return sl_err_set(SL_E_TOO_LARGE, "more than %d claims", SL_CLAIMS_MAX);
	}
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 32;
		struct claim *nv = realloc(c->v, ncap * sizeof(*nv));
		if (nv == NULL) {
			free(v);
			return sl_err_set(SL_E_NOMEM, "claim %s", key);
		}
		c->v = nv;
		c->cap = ncap;
	}
	char *k = strdup(key);
	if (k == NULL) {
		free(v);
		return sl_err_set(SL_E_NOMEM, "claim %s", key);
	}
	memmove(&c->v[i + 1], &c->v[i], (c->n - i) * sizeof(*c->v));
	c->v[i].key = k;
	c->v[i].value = v;
	c->n++;
	return SL_OK;
}

sl_err sl_claims_setf(sl_claims *c, const char *key, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return sl_err_set(SL_E_INTERNAL, "claim %s: formatted value too long", key);
	return sl_claims_set(c, key, buf);
}

sl_err sl_claims_set_hex(sl_claims *c, const char *key, const uint8_t *p, size_t len)
{
	if (len > SL_CLAIM_VALUE_MAX / 2)
		return sl_err_set(SL_E_TOO_LARGE, "claim %s: value too long", key);
	char *h = malloc(len * 2 + 1);
	if (h == NULL)
		return sl_err_set(SL_E_NOMEM, "claim %s", key);
	sl_hex_encode(p, len, h);
	sl_err rc = sl_claims_set(c, key, h);
	free(h);
	return rc;
}

const char *sl_claims_get(const sl_claims *c, const char *key)
{
	bool found;
	size_t i = find(c, key, &found);
	return found ? c->v[i].value : NULL;
}

size_t sl_claims_count(const sl_claims *c)
{
	return c->n;
}

const char *sl_claims_key(const sl_claims *c, size_t i)
{
	return i < c->n ? c->v[i].key : NULL;
}

const char *sl_claims_value(const sl_claims *c, size_t i)
{
	return i < c->n ? c->v[i].value : NULL;
}

/* Claims that one item of evidence must not take back from another once
 * they are weak (several GPUs in one request): the value that, in dst,
 * stays whatever src says; NULL: any value other than the strong one. */
static const struct {
	const char *key, *strong, *sticky;
} weak_sticky[] = {
    {"gpu.cc", "on", NULL},
    {"gpu.devtools", NULL, "true"},
    {"gpu.binding", NULL, "unchecked"},
    {"binding", NULL, "unchecked"},
};

static bool keeps(const sl_claims *dst, const char *key)
{
	for (size_t i = 0; i < sizeof(weak_sticky) / sizeof(weak_sticky[0]); i++) {
		if (strcmp(key, weak_sticky[i].key) != 0)
			continue;
		const char *had = sl_claims_get(dst, key);
		if (had == NULL)
			return false;
		return weak_sticky[i].sticky != NULL ? strcmp(had, weak_sticky[i].sticky) == 0
		                                     : strcmp(had, weak_sticky[i].strong) != 0;
	}
	return false;
}

/* src wins, except that a weak state in dst (weak_sticky) stays. */
sl_err sl_claims_merge(sl_claims *dst, const sl_claims *src)
{
	for (size_t i = 0; i < src->n; i++) {
		if (keeps(dst, src->v[i].key))
			continue;
		sl_err rc = sl_claims_set(dst, src->v[i].key, src->v[i].value);
		if (rc != SL_OK)
			return rc;
	}
	return SL_OK;
}

sl_err sl_claims_to_json(const sl_claims *c, json_t **out)
{
	json_t *o = json_object();
	if (o == NULL)
		return sl_err_set(SL_E_NOMEM, "claims JSON");
	for (size_t i = 0; i < c->n; i++) {
		if (json_object_set_new(o, c->v[i].key, json_string(c->v[i].value)) != 0) {
			json_decref(o);
			return sl_err_set(SL_E_NOMEM, "claims JSON");
		}
	}
	*out = o;
	return SL_OK;
}

sl_err sl_claims_from_json(const json_t *obj, sl_claims **out)
{
	sl_err rc = SL_E_FORMAT;
	sl_claims *c = NULL;
	const char *k;
	json_t *v;

	SL_ENSURE(json_is_object(obj), SL_E_FORMAT, "claims: not a JSON object");
	SL_GUARD(sl_claims_new(&c));
	json_object_foreach ((json_t *)obj, k, v) {
		SL_ENSURE(key_ok(k), SL_E_FORMAT, "claims: key '%.64s' is not [a-z0-9._-]+", k);
		SL_ENSURE(json_is_string(v), SL_E_FORMAT, "claims.%s: not a string", k);
		SL_GUARD(sl_claims_set(c, k, json_string_value(v)));
	}
	*out = c;
	c = NULL;
	rc = SL_OK;
out:
	sl_claims_free(c);
	return rc;
}

void sl_claims_json_digest(const json_t *claims, uint8_t out[static 32])
{
	char *s = json_is_object(claims) ? json_dumps(claims, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	if (s != NULL)
		sl_sha256(s, strlen(s), out);
	else
		memset(out, 0, 32);
	free(s);
}

void sl_claims_digest(const sl_claims *c, uint8_t out[static 32])
{
	json_t *o = NULL;
	if (sl_claims_to_json(c, &o) != SL_OK)
		o = NULL;
	sl_claims_json_digest(o, out);
	json_decref(o);
}
