/* Parsers of the key lifecycle requests (admin endpoints): pure functions
 * over untrusted bytes, each failing with SL_E_INPUT naming the field. */
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "seclaunch/json.h"

static SL_RESULT load(const uint8_t *body, size_t len, json_t **out)
{
	json_error_t je;
	json_t *root;
	if (len == 0) {
		*out = json_object();
		return *out ? SL_OK : sl_err_set(SL_E_NOMEM, "request");
	}
	root = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL || !json_is_object(root)) {
		json_decref(root);
		return sl_err_set(SL_E_INPUT, "body: not a JSON object (%s)",
		                  root == NULL ? je.text : "wrong type");
	}
	*out = root;
	return SL_OK;
}

sl_err kmsd_parse_key_action(const uint8_t *body, size_t len, bool *force)
{
	static const char *const allowed[] = {"force", NULL};
	sl_err rc = SL_E_INPUT;
	json_t *root = NULL, *f;
	*force = false;
	SL_GUARD(load(body, len, &root));
	SL_GUARD(sl_json_only(root, allowed, SL_E_INPUT, "key request"));
	f = json_object_get(root, "force");
	SL_ENSURE(f == NULL || json_is_boolean(f), SL_E_INPUT, "force: must be true or false");
	*force = json_is_true(f);
	rc = SL_OK;
out:
	json_decref(root);
	return rc;
}

/* POST /v1/enroll/tokens: {} or {"ttl_s": 1..KMSD_ETOKEN_TTL_MAX}. */
sl_err kmsd_parse_enroll_token(const uint8_t *body, size_t len, int64_t *ttl_s)
{
	static const char *const allowed[] = {"ttl_s", NULL};
	sl_err rc = SL_E_INPUT;
	json_t *root = NULL, *t;
	*ttl_s = KMSD_ETOKEN_TTL_DEFAULT;
	SL_GUARD(load(body, len, &root));
	SL_GUARD(sl_json_only(root, allowed, SL_E_INPUT, "enrollment token request"));
	t = json_object_get(root, "ttl_s");
	SL_ENSURE(t == NULL || (json_is_integer(t) && json_integer_value(t) >= 1 &&
	                        json_integer_value(t) <= KMSD_ETOKEN_TTL_MAX),
	          SL_E_INPUT, "ttl_s: must be an integer from 1 to %d", KMSD_ETOKEN_TTL_MAX);
	if (t != NULL)
		*ttl_s = json_integer_value(t);
	rc = SL_OK;
out:
	json_decref(root);
	return rc;
}

sl_err kmsd_parse_rewrap(const uint8_t *body, size_t len,
                         char dataset_id[static SL_KMS_DATASET_ID_MAX + 1],
                         uint8_t wrapped[static SL_KMS_WRAPPED_DEK_MAX], size_t *wrapped_len)
{
	static const char *const allowed[] = {"dataset_id", "wrapped_dek", NULL};
	sl_err rc = SL_E_INPUT;
	json_t *root = NULL;
	const char *ds = NULL, *w = NULL;
	uint8_t *raw = NULL;
	size_t n = 0;
	SL_GUARD(load(body, len, &root));
	SL_GUARD(sl_json_only(root, allowed, SL_E_INPUT, "rewrap request"));
	SL_GUARD(
	    sl_json_str(root, "dataset_id", SL_KMS_DATASET_ID_MAX, SL_E_INPUT, "dataset_id", &ds));
	SL_ENSURE(kmsd_valid_dataset_id(ds), SL_E_INPUT, "dataset_id: not a valid dataset id");
	memcpy(dataset_id, ds, strlen(ds) + 1);
	SL_GUARD(sl_json_str(root, "wrapped_dek", 2 * SL_KMS_WRAPPED_DEK_MAX, SL_E_INPUT,
	                     "wrapped_dek", &w));
	SL_GUARD(sl_b64_decode(w, SL_KMS_WRAPPED_DEK_MAX, &raw, &n, "wrapped_dek"));
	SL_ENSURE(n == SL_KMS_WRAPPED_DEK_LEN || (n >= 3 && raw[1] == KMSD_AWS_MARKER), SL_E_INPUT,
	          "wrapped_dek: must be %d bytes (or an AWS KMS one)", SL_KMS_WRAPPED_DEK_LEN);
	memcpy(wrapped, raw, n);
	*wrapped_len = n;
	rc = SL_OK;
out:
	free(raw);
	json_decref(root);
	return rc;
}

/* An AWS KMS key id, ARN or alias: what DescribeKey takes. */
static bool aws_key_ok(const char *s)
{
	size_t n = strlen(s);
	return n >= 1 && n <= KMSD_AWS_KEY_ID_MAX &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:/_.-") ==
	           n;
}

sl_err kmsd_parse_key_create_aws(const uint8_t *body, size_t len, char id[static SL_KMS_ID_MAX + 1],
                                 char aws_key_id[static KMSD_AWS_KEY_ID_MAX + 1])
{
	static const char *const allowed[] = {"id", "aws_key_id", NULL};
	sl_err rc = SL_E_INPUT;
	json_t *root = NULL;
	const char *s = NULL, *a = NULL;
	aws_key_id[0] = '\0';
	SL_GUARD(load(body, len, &root));
	SL_GUARD(sl_json_only(root, allowed, SL_E_INPUT, "key create request"));
	SL_GUARD(sl_json_str(root, "id", SL_KMS_ID_MAX, SL_E_INPUT, "id", &s));
	SL_ENSURE(kmsd_valid_key_id(s), SL_E_INPUT, "id: must be 1..%d of [A-Za-z0-9._-]",
	          SL_KMS_ID_MAX);
	memcpy(id, s, strlen(s) + 1);
	SL_GUARD(
	    sl_json_str_opt(root, "aws_key_id", KMSD_AWS_KEY_ID_MAX, SL_E_INPUT, "aws_key_id", &a));
	if (a != NULL) {
		SL_ENSURE(aws_key_ok(a), SL_E_INPUT,
		          "aws_key_id: must be an AWS KMS key id, ARN or alias (1..%d of "
		          "[A-Za-z0-9:/_.-])",
		          KMSD_AWS_KEY_ID_MAX);
		memcpy(aws_key_id, a, strlen(a) + 1);
	}
	rc = SL_OK;
out:
	json_decref(root);
	return rc;
}

/* POST /v1/aks/revoke {"name": HEX}. */
sl_err kmsd_parse_ak_revoke(const uint8_t *body, size_t len, uint8_t name[static KMSD_AK_NAME_MAX],
                            size_t *nlen, char hex[static 2 * KMSD_AK_NAME_MAX + 1])
{
	static const char *const fields[] = {"name", NULL};
	sl_err rc = SL_E_INPUT;
	json_error_t je;
	const char *s = NULL;
	uint8_t *raw = NULL;
	json_t *j = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
	SL_ENSURE(json_is_object(j), SL_E_INPUT, "request body: must be a JSON object");
	SL_GUARD(sl_json_only(j, fields, SL_E_INPUT, "revoke request"));
	SL_GUARD(sl_json_str(j, "name", 2 * KMSD_AK_NAME_MAX, SL_E_INPUT, "revoke request", &s));
	SL_GUARD(sl_hex_decode_alloc(s, KMSD_AK_NAME_MAX, &raw, nlen, "name"));
	SL_ENSURE(*nlen > 0, SL_E_INPUT, "name: empty");
	memcpy(name, raw, *nlen);
	sl_hex_encode(name, *nlen, hex);
	rc = SL_OK;
out:
	free(raw);
	json_decref(j);
	return rc;
}

/* POST /v1/eks/readmit {"ek_sha256": 64 hex digits}. */
sl_err kmsd_parse_ek_readmit(const uint8_t *body, size_t len, uint8_t ek[static 32],
                             char hex[static 65])
{
	static const char *const fields[] = {"ek_sha256", NULL};
	sl_err rc = SL_E_INPUT;
	json_t *root = NULL;
	const char *s = NULL;
	uint8_t *raw = NULL;
	size_t n = 0;
	SL_GUARD(load(body, len, &root));
	SL_GUARD(sl_json_only(root, fields, SL_E_INPUT, "readmit request"));
	SL_GUARD(sl_json_str(root, "ek_sha256", 64, SL_E_INPUT, "ek_sha256", &s));
	SL_GUARD(sl_hex_decode_alloc(s, 32, &raw, &n, "ek_sha256"));
	SL_ENSURE(n == 32, SL_E_INPUT, "ek_sha256: must be 64 hex digits (the SHA-256 of the EK)");
	memcpy(ek, raw, 32);
	sl_hex_encode(ek, 32, hex);
	rc = SL_OK;
out:
	free(raw);
	json_decref(root);
	return rc;
}
