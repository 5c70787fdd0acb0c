/* Request body parsers: pure functions from untrusted bytes to checked
 * structures (fuzzed by tests/fuzz/kms_request_fuzz.c). Every failure is
 * SL_E_INPUT naming the field. Unknown fields are rejected so that a client
 * that means something else is told instead of silently ignored. */
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "seclaunch/json.h"

static SL_RESULT load(const uint8_t *body, size_t len, json_t **out)
{
	json_error_t e;
	json_t *j = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &e);
	if (j == NULL)
		return sl_err_set(SL_E_INPUT,
		                  "request body: invalid JSON at line %d column %d: %.80s", e.line,
		                  e.column, e.text);
	if (!json_is_object(j)) {
		json_decref(j);
		return sl_err_set(SL_E_INPUT, "request body: must be a JSON object");
	}
	*out = j;
	return SL_OK;
}

/* Rejects any member of obj not in the NULL-terminated list. */
static SL_RESULT only_fields(const json_t *obj, const char *what, const char *const *allowed)
{
	const char *k = sl_json_unknown(obj, allowed);
	if (k != NULL)
		return sl_err_set(SL_E_INPUT, "%s: unknown field \"%.64s\"", what, k);
	return SL_OK;
}

static SL_RESULT get_str(const json_t *obj, const char *field, const char **out)
{
	json_t *v = json_object_get(obj, field);
	if (v == NULL)
		return sl_err_set(SL_E_INPUT, "%s: missing", field);
	if (!json_is_string(v))
		return sl_err_set(SL_E_INPUT, "%s: must be a string", field);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return sl_err_set(SL_E_INPUT, "%s: contains a NUL byte", field);
	*out = json_string_value(v);
	return SL_OK;
}

/* base64 field of exactly want bytes. */
static SL_RESULT get_b64_fixed(const json_t *obj, const char *field, uint8_t *out, size_t want)
{
	sl_err rc = SL_E_INPUT;
	const char *s;
	uint8_t *raw = NULL;
	size_t n = 0;
	SL_GUARD(get_str(obj, field, &s));
	SL_GUARD(sl_b64_decode(s, want, &raw, &n, field));
	SL_ENSURE(n == want, SL_E_INPUT, "%s: must be %zu bytes, got %zu", field, want, n);
	memcpy(out, raw, want);
	rc = SL_OK;
out:
	free(raw);
	return rc;
}

static SL_RESULT get_id(const json_t *obj, const char *field, bool key_id, char *out)
{
	sl_err rc = SL_E_INPUT;
	const char *s;
	SL_GUARD(get_str(obj, field, &s));
	if (key_id)
		SL_ENSURE(kmsd_valid_key_id(s), SL_E_INPUT,
		          "%s: must be 1..%d characters of [A-Za-z0-9._-]", field, SL_KMS_ID_MAX);
	else
		SL_ENSURE(kmsd_valid_dataset_id(s), SL_E_INPUT,
		          "%s: must be 1..%d bytes without control characters", field,
		          SL_KMS_DATASET_ID_MAX);
	memcpy(out, s, strlen(s) + 1);
	rc = SL_OK;
out:
	return rc;
}

sl_err kmsd_parse_challenge(const uint8_t *body, size_t len)
{
	static const char *const allowed[] = {NULL};
	sl_err rc = SL_E_INPUT;
	json_t *root = NULL;
	if (len == 0)
		return SL_OK; /* an empty body means {} */
	SL_GUARD(load(body, len, &root));
	SL_GUARD(only_fields(root, "challenge request", allowed));
	rc = SL_OK;
out:
	json_decref(root);
	return rc;
}

static SL_RESULT parse_key(const json_t *k, size_t i, kmsd_key_entry *e)
{
	static const char *const allowed[] = {"key_id", "dataset_id", "wrapped_dek", NULL};
	sl_err rc = SL_E_INPUT;
	const char *s;
	uint8_t *raw = NULL;
	size_t n = 0;
	SL_ENSURE(json_is_object(k), SL_E_INPUT, "keys[%zu]: must be an object", i);
	rc = only_fields(k, "keys[]", allowed);
	if (rc != SL_OK)
		goto out;
	rc = get_id(k, "key_id", true, e->key_id);
	if (rc == SL_OK)
		rc = get_id(k, "dataset_id", false, e->dataset_id);
	if (rc == SL_OK)
		rc = get_str(k, "wrapped_dek", &s);
	if (rc == SL_OK)
		rc = sl_b64_decode(s, SL_KMS_WRAPPED_DEK_MAX, &raw, &n, "wrapped_dek");
	if (rc != SL_OK) {
		rc = sl_err_wrap(SL_E_INPUT, "keys[%zu]", i);
		goto out;
	}
	/* 61 bytes, or an AWS KMS backend's (docs/protocol.md, "Wrapping") */
	SL_ENSURE(n == SL_KMS_WRAPPED_DEK_LEN ||
	              (n >= 3 && n <= SL_KMS_WRAPPED_DEK_MAX && raw[1] == KMSD_AWS_MARKER),
	          SL_E_INPUT, "keys[%zu].wrapped_dek: must be %d bytes (or an AWS KMS one)", i,
	          SL_KMS_WRAPPED_DEK_LEN);
	memcpy(e->wrapped, raw, n);
	e->wrapped_len = n;
	rc = SL_OK;
out:
	free(raw);
	return rc;
}

/* The same item twice is refused rather than verified (or released) twice:
 * it doubles the work and says nothing more. */
static SL_RESULT no_repeats(const json_t *arr, const char *what)
{
	for (size_t i = 1; i < json_array_size(arr); i++)
		for (size_t j = 0; j < i; j++)
			if (json_equal(json_array_get(arr, i), json_array_get(arr, j)))
				return sl_err_set(SL_E_INPUT, "%s[%zu]: repeats %s[%zu]", what, i,
				                  what, j);
	return SL_OK;
}

/* The attested part a release and an output request share: nonce, eph_pub,
 * policy_digest, evidence, identity, job. */
static SL_RESULT parse_attested(kmsd_release_req *r)
{
	sl_err rc = SL_E_INPUT;
	SL_GUARD(get_b64_fixed(r->root, "nonce", r->nonce, SL_NONCE_LEN));
	SL_GUARD(get_b64_fixed(r->root, "eph_pub", r->eph_pub, SL_EPH_PUB_LEN));
	SL_GUARD(get_b64_fixed(r->root, "policy_digest", r->policy_digest, SL_SHA256_LEN));

	r->evidence = json_object_get(r->root, "evidence");
	SL_ENSURE(r->evidence != NULL, SL_E_INPUT, "evidence: missing");
	SL_ENSURE(json_is_array(r->evidence), SL_E_INPUT, "evidence: must be an array");
	SL_ENSURE(json_array_size(r->evidence) >= 1 &&
	              json_array_size(r->evidence) <= KMSD_MAX_EVIDENCE,
	          SL_E_INPUT, "evidence: must hold 1..%d items", KMSD_MAX_EVIDENCE);
	for (size_t i = 0; i < json_array_size(r->evidence); i++)
		SL_ENSURE(json_is_object(json_array_get(r->evidence, i)), SL_E_INPUT,
		          "evidence[%zu]: must be an object", i);
	SL_GUARD(no_repeats(r->evidence, "evidence"));

	r->identity = json_object_get(r->root, "identity");
	if (r->identity == NULL) {
		r->identity = json_array();
		SL_ENSURE(r->identity != NULL &&
		              json_object_set_new(r->root, "identity", r->identity) == 0,
		          SL_E_NOMEM, "identity");
	}
	SL_ENSURE(json_is_array(r->identity), SL_E_INPUT, "identity: must be an array");
	SL_ENSURE(json_array_size(r->identity) <= KMSD_MAX_EVIDENCE, SL_E_INPUT,
	          "identity: at most %d items", KMSD_MAX_EVIDENCE);
	SL_GUARD(no_repeats(r->identity, "identity"));

	r->job = json_object_get(r->root, "job");
	if (r->job == NULL) {
		r->job = json_object();
		SL_ENSURE(r->job != NULL && json_object_set_new(r->root, "job", r->job) == 0,
		          SL_E_NOMEM, "job");
	}
	SL_ENSURE(json_is_object(r->job), SL_E_INPUT, "job: must be an object");
	{
		/* the job object is copied into the audit record: keep it small */
		size_t jl = json_dumpb(r->job, NULL, 0, JSON_COMPACT);
		SL_ENSURE(jl <= KMSD_MAX_JOB, SL_E_INPUT, "job: %zu bytes of JSON, at most %d", jl,
		          KMSD_MAX_JOB);
	}
	rc = SL_OK;
out:
	return rc;
}

/* A destination is what the policy's output_destinations patterns match:
 * printable ASCII, no spaces. */
static bool valid_destination(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > KMSD_DEST_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

static SL_RESULT parse_output(const json_t *o, size_t i, kmsd_output_entry *e)
{
	static const char *const allowed[] = {"output_id", "destination", "key_id", NULL};
	sl_err rc = SL_E_INPUT;
	const char *d = NULL;
	SL_ENSURE(json_is_object(o), SL_E_INPUT, "outputs[%zu]: must be an object", i);
	SL_GUARD(only_fields(o, "outputs[]", allowed));
	rc = get_id(o, "output_id", false, e->output_id);
	if (rc == SL_OK)
		rc = get_str(o, "destination", &d);
	if (rc == SL_OK && json_object_get(o, "key_id") != NULL)
		rc = get_id(o, "key_id", true, e->key_id);
	if (rc != SL_OK) {
		rc = sl_err_wrap(SL_E_INPUT, "outputs[%zu]", i);
		goto out;
	}
	SL_ENSURE(valid_destination(d), SL_E_INPUT,
	          "outputs[%zu].destination: must be 1..%d printable ASCII characters, no spaces",
	          i, KMSD_DEST_MAX);
	memcpy(e->destination, d, strlen(d) + 1);
	rc = SL_OK;
out:
	return rc;
}

/* "outputs": 1..16 output keys asked for, no output id twice. */
static SL_RESULT parse_outputs(const json_t *a, kmsd_output_entry *outs, size_t *n)
{
	sl_err rc = SL_E_INPUT;
	SL_ENSURE(json_is_array(a), SL_E_INPUT, "outputs: must be an array");
	*n = json_array_size(a);
	SL_ENSURE(*n >= 1 && *n <= KMSD_MAX_OUTPUTS, SL_E_INPUT, "outputs: must hold 1..%d entries",
	          KMSD_MAX_OUTPUTS);
	for (size_t i = 0; i < *n; i++) {
		SL_GUARD(parse_output(json_array_get(a, i), i, &outs[i]));
		for (size_t j = 0; j < i; j++)
			SL_ENSURE(strcmp(outs[i].output_id, outs[j].output_id) != 0, SL_E_INPUT,
			          "outputs[%zu]: repeats the output id of outputs[%zu]", i, j);
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err kmsd_parse_release(const uint8_t *body, size_t len, kmsd_release_req **out)
{
	static const char *const allowed[] = {"nonce",    "eph_pub",       "evidence",
	                                      "identity", "policy_digest", "job",
	                                      "keys",     "outputs",       NULL};
	sl_err rc = SL_E_INPUT;
	kmsd_release_req *r = calloc(1, sizeof(*r));
	json_t *keys, *outs;
	SL_ENSURE(r != NULL, SL_E_NOMEM, "release request");
	SL_GUARD(load(body, len, &r->root));
	SL_GUARD(only_fields(r->root, "release request", allowed));
	SL_GUARD(parse_attested(r));

	keys = json_object_get(r->root, "keys");
	SL_ENSURE(keys != NULL, SL_E_INPUT, "keys: missing");
	SL_ENSURE(json_is_array(keys), SL_E_INPUT, "keys: must be an array");
	r->nkeys = json_array_size(keys);
	outs = json_object_get(r->root, "outputs");
	if (outs != NULL)
		SL_GUARD(parse_outputs(outs, r->outputs, &r->noutputs));
	/* a run that only writes outputs asks for no dataset key */
	SL_ENSURE((r->nkeys >= 1 || r->noutputs >= 1) && r->nkeys <= KMSD_MAX_KEYS, SL_E_INPUT,
	          "keys: must hold 1..%d entries (0 with \"outputs\")", KMSD_MAX_KEYS);
	for (size_t i = 0; i < r->nkeys; i++) {
		SL_GUARD(parse_key(json_array_get(keys, i), i, &r->keys[i]));
		for (size_t j = 0; j < i; j++) {
			const kmsd_key_entry *a = &r->keys[j], *b = &r->keys[i];
			SL_ENSURE(strcmp(a->key_id, b->key_id) != 0 ||
			              strcmp(a->dataset_id, b->dataset_id) != 0,
			          SL_E_INPUT,
			          "keys[%zu]: repeats keys[%zu] (key_id '%s', dataset_id)", i, j,
			          b->key_id);
			SL_ENSURE(a->wrapped_len != b->wrapped_len ||
			              memcmp(a->wrapped, b->wrapped, a->wrapped_len) != 0,
			          SL_E_INPUT, "keys[%zu]: wrapped_dek repeats keys[%zu]", i, j);
		}
	}
	*out = r;
	r = NULL;
	rc = SL_OK;
out:
	kmsd_release_req_free(r);
	return rc;
}

void kmsd_release_req_free(kmsd_release_req *r)
{
	if (r == NULL)
		return;
	json_decref(r->root);
	free(r);
}

sl_err kmsd_parse_key_create(const uint8_t *body, size_t len, char id[static SL_KMS_ID_MAX + 1])
{
	static const char *const allowed[] = {"id", NULL};
	sl_err rc = SL_E_INPUT;
	json_t *root = NULL;
	SL_GUARD(load(body, len, &root));
	SL_GUARD(only_fields(root, "key create request", allowed));
	SL_GUARD(get_id(root, "id", true, id));
	rc = SL_OK;
out:
	json_decref(root);
	return rc;
}

sl_err kmsd_parse_wrap(const uint8_t *body, size_t len,
                       char dataset_id[static SL_KMS_DATASET_ID_MAX + 1], sl_secret **dek)
{
	static const char *const allowed[] = {"dataset_id", "dek", NULL};
	sl_err rc = SL_E_INPUT;
	json_t *root = NULL;
	const char *s;
	uint8_t *raw = NULL;
	size_t n = 0;
	SL_GUARD(load(body, len, &root));
	SL_GUARD(only_fields(root, "wrap request", allowed));
	SL_GUARD(get_id(root, "dataset_id", false, dataset_id));
	SL_GUARD(sl_dataset_id_check(dataset_id, false, "dataset_id")); /* creating: strict */
	SL_GUARD(get_str(root, "dek", &s));
	SL_GUARD(sl_b64_decode(s, SL_KMS_DEK_LEN, &raw, &n, "dek"));
	SL_ENSURE(n == SL_KMS_DEK_LEN, SL_E_INPUT, "dek: must be %d bytes, got %zu", SL_KMS_DEK_LEN,
	          n);
	SL_GUARD(sl_secret_from(raw, n, dek));
	rc = SL_OK;
out:
	if (raw != NULL)
		sl_wipe(raw, n);
	free(raw);
	/* the DEK also sat in the JSON string: wipe it there too */
	if (root != NULL) {
		json_t *v = json_object_get(root, "dek");
		if (json_is_string(v))
			sl_wipe((char *)json_string_value(v), json_string_length(v));
	}
	json_decref(root);
	return rc;
}

static SL_RESULT get_b64_alloc(const json_t *obj, const char *field, size_t max, uint8_t **out,
                               size_t *len)
{
	sl_err rc = SL_E_INPUT;
	const char *s;
	SL_GUARD(get_str(obj, field, &s));
	SL_GUARD(sl_b64_decode(s, max, out, len, field));
	SL_ENSURE(*len > 0, SL_E_INPUT, "%s: empty", field);
	rc = SL_OK;
out:
	return rc;
}

sl_err kmsd_parse_enroll(const uint8_t *body, size_t len, kmsd_enroll_req *out)
{
	static const char *const allowed[] = {"ek_pub", "ek_cert", "ak_pub", "enroll_token", NULL};
	sl_err rc = SL_E_INPUT;
	json_t *root = NULL;
	memset(out, 0, sizeof(*out));
	SL_GUARD(load(body, len, &root));
	SL_GUARD(only_fields(root, "enroll request", allowed));
	SL_GUARD(get_b64_alloc(root, "ek_pub", 1024, &out->ek_pub, &out->ek_pub_len));
	SL_GUARD(get_b64_alloc(root, "ak_pub", 1024, &out->ak_pub, &out->ak_pub_len));
	if (json_object_get(root, "ek_cert") != NULL &&
	    !json_is_null(json_object_get(root, "ek_cert")))
		SL_GUARD(get_b64_alloc(root, "ek_cert", 8192, &out->ek_cert, &out->ek_cert_len));
	const char *tok = NULL;
	SL_GUARD(sl_json_str_opt(root, "enroll_token", sizeof(out->enroll_token) - 1, SL_E_INPUT,
	                         "enroll_token", &tok));
	if (tok != NULL) {
		SL_ENSURE(strlen(tok) >= 16, SL_E_INPUT, "enroll_token: too short");
		memcpy(out->enroll_token, tok, strlen(tok) + 1);
		out->has_token = true;
	}
	rc = SL_OK;
out:
	if (rc != SL_OK)
		kmsd_enroll_req_clear(out);
	json_decref(root);
	return rc;
}

void kmsd_enroll_req_clear(kmsd_enroll_req *r)
{
	free(r->ek_pub);
	free(r->ek_cert);
	free(r->ak_pub);
	sl_wipe(r->enroll_token, sizeof(r->enroll_token));
	memset(r, 0, sizeof(*r));
}

sl_err kmsd_parse_activate(const uint8_t *body, size_t len, kmsd_activate_req *out)
{
	static const char *const allowed[] = {"session", "secret", NULL};
	sl_err rc = SL_E_INPUT;
	json_t *root = NULL;
	const char *s;
	uint8_t *raw = NULL;
	size_t n = 0;
	memset(out, 0, sizeof(*out));
	SL_GUARD(load(body, len, &root));
	SL_GUARD(only_fields(root, "activate request", allowed));
	SL_GUARD(get_b64_fixed(root, "session", out->session, sizeof(out->session)));
	SL_GUARD(get_str(root, "secret", &s));
	SL_GUARD(sl_b64_decode(s, 64, &raw, &n, "secret"));
	SL_ENSURE(n > 0, SL_E_INPUT, "secret: empty");
	SL_GUARD(sl_secret_from(raw, n, &out->secret));
	rc = SL_OK;
out:
	if (raw != NULL)
		sl_wipe(raw, n);
	free(raw);
	json_decref(root);
	return rc;
}

sl_err kmsd_parse_output(const uint8_t *body, size_t len, kmsd_output_req **out)
{
	static const char *const allowed[] = {"nonce",    "eph_pub",       "evidence",
	                                      "identity", "policy_digest", "job",
	                                      "inputs",   "outputs",       NULL};
	sl_err rc = SL_E_INPUT;
	kmsd_output_req *r = calloc(1, sizeof(*r));
	json_t *a;
	SL_ENSURE(r != NULL, SL_E_NOMEM, "output request");
	r->att = calloc(1, sizeof(*r->att));
	SL_ENSURE(r->att != NULL, SL_E_NOMEM, "output request");
	SL_GUARD(load(body, len, &r->att->root));
	SL_GUARD(only_fields(r->att->root, "output request", allowed));
	SL_GUARD(parse_attested(r->att));

	a = json_object_get(r->att->root, "inputs");
	if (a != NULL) {
		SL_ENSURE(json_is_array(a) && json_array_size(a) <= KMSD_MAX_KEYS, SL_E_INPUT,
		          "inputs: must be an array of at most %d dataset ids", KMSD_MAX_KEYS);
		SL_GUARD(no_repeats(a, "inputs"));
		r->ninputs = json_array_size(a);
		for (size_t i = 0; i < r->ninputs; i++) {
			json_t *v = json_array_get(a, i);
			const char *s = json_string_value(v);
			SL_ENSURE(s != NULL && strlen(s) == json_string_length(v) &&
			              kmsd_valid_dataset_id(s),
			          SL_E_INPUT, "inputs[%zu]: must be a dataset id", i);
			memcpy(r->inputs[i], s, strlen(s) + 1);
		}
	}
	a = json_object_get(r->att->root, "outputs");
	SL_ENSURE(a != NULL, SL_E_INPUT, "outputs: missing");
	SL_GUARD(parse_outputs(a, r->outputs, &r->noutputs));
	*out = r;
	r = NULL;
	rc = SL_OK;
out:
	kmsd_output_req_free(r);
	return rc;
}

void kmsd_output_req_free(kmsd_output_req *r)
{
	if (r == NULL)
		return;
	kmsd_release_req_free(r->att);
	free(r);
}
