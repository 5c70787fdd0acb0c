/* The KMS client API (include/seclaunch/kms.h) over kms_http.c. */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "kms_http.h"
#include "seclaunch/tpm2.h"
#include "seclaunch/json.h"
#include "seclaunch/sealbox.h"

#define SEALED_LEN (SL_KMS_DEK_LEN + SL_SEALBOX_OVERHEAD)

static SL_RESULT dup_opt(const char *in, char **out)
{
	*out = NULL;
	if (in == NULL)
		return SL_OK;
	*out = strdup(in);
	return *out != NULL ? SL_OK : sl_err_set(SL_E_NOMEM, "KMS options");
}

sl_err sl_kms_new(const sl_kms_opts *o, sl_kms **out)
{
	sl_err rc = SL_E_NOMEM;
	sl_kms *k = calloc(1, sizeof(*k));
	CURL *c;
	size_t n;
	SL_ENSURE(k != NULL, SL_E_NOMEM, "KMS client");
	SL_ENSURE(o->url != NULL && strncmp(o->url, "https://", 8) == 0 && strlen(o->url) > 8,
	          SL_E_USAGE, "--kms: '%s' must be an https:// URL", o->url ? o->url : "");
	k->o = *o;
	if (k->o.connect_timeout_ms == 0)
		k->o.connect_timeout_ms = 5000;
	if (k->o.total_timeout_ms == 0) {
		/* SECLAUNCH_KMS_TIMEOUT: seconds per attempt (default 30) */
		const char *t = getenv("SECLAUNCH_KMS_TIMEOUT");
		long s = t != NULL ? strtol(t, NULL, 10) : 0;
		k->o.total_timeout_ms = s > 0 && s <= 3600 ? s * 1000 : 30000;
	}
	if (k->o.max_attempts == 0)
		k->o.max_attempts = 4;
	if (k->o.max_response == 0)
		k->o.max_response = 1 << 20;
	SL_GUARD(dup_opt(o->url, &k->url));
	n = strlen(k->url);
	while (n > 8 && k->url[n - 1] == '/')
		k->url[--n] = '\0';
	SL_GUARD(dup_opt(o->ca_file, &k->ca_file));
	SL_GUARD(dup_opt(o->pinned_pubkey, &k->pinned));
	if (o->admin_token_file != NULL)
		SL_GUARD(sl_secret_read_client_token(o->admin_token_file, &k->admin_token));
	SL_ENSURE(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK, SL_E_SYSTEM, "curl init");
	c = curl_easy_init();
	SL_ENSURE(c != NULL, SL_E_NOMEM, "curl handle");
	k->curl = c;
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https"), SL_E_SYSTEM,
	              "curl CURLOPT_PROTOCOLS_STR");
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L), SL_E_SYSTEM,
	              "curl CURLOPT_FOLLOWLOCATION");
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L), SL_E_SYSTEM,
	              "curl CURLOPT_NOSIGNAL");
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L), SL_E_SYSTEM,
	              "curl CURLOPT_SSL_VERIFYPEER");
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L), SL_E_SYSTEM,
	              "curl CURLOPT_SSL_VERIFYHOST");
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2),
	              SL_E_SYSTEM, "curl CURLOPT_SSLVERSION");
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, k->o.connect_timeout_ms),
	              SL_E_SYSTEM, "curl CURLOPT_CONNECTTIMEOUT_MS");
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, k->o.total_timeout_ms), SL_E_SYSTEM,
	              "curl CURLOPT_TIMEOUT_MS");
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)k->o.max_response),
	              SL_E_SYSTEM, "curl CURLOPT_MAXFILESIZE_LARGE");
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_USERAGENT, "seclaunch/" SL_VERSION), SL_E_SYSTEM,
	              "curl CURLOPT_USERAGENT");
	if (k->ca_file != NULL)
		SL_ENSURE(curl_easy_setopt(c, CURLOPT_CAINFO, k->ca_file) == CURLE_OK, SL_E_SYSTEM,
		          "curl CAINFO");
	if (k->pinned != NULL)
		SL_ENSURE(curl_easy_setopt(c, CURLOPT_PINNEDPUBLICKEY, k->pinned) == CURLE_OK,
		          SL_E_USAGE, "--kms-pin: this libcurl cannot pin public keys");
	*out = k;
	k = NULL;
	rc = SL_OK;
out:
	sl_kms_free(k);
	return rc;
}

void sl_kms_free(sl_kms *k)
{
	if (k == NULL)
		return;
	if (k->curl != NULL)
		curl_easy_cleanup(k->curl);
	sl_secret_free(k->admin_token);
	json_decref(k->problem);
	json_decref(k->lease);
	free(k->url);
	free(k->ca_file);
	free(k->pinned);
	free(k);
}

const json_t *sl_kms_last_problem(const sl_kms *k)
{
	return k->problem;
}

/* A base64 string member of exactly want bytes (want 0: any length up to max). */
static SL_RESULT get_b64(const json_t *o, const char *field, size_t want, size_t max, uint8_t **out,
                         size_t *len)
{
	const char *s = sl_json_getstr(o, field);
	sl_err rc;
	if (s == NULL)
		return sl_err_set(SL_E_KMS_PROTOCOL, "KMS answer: missing string \"%s\"", field);
	rc = sl_b64_decode(s, want != 0 ? want : max, out, len, field);
	if (rc != SL_OK)
		return sl_err_wrap(SL_E_KMS_PROTOCOL, "KMS answer");
	if (want != 0 && *len != want) {
		free(*out);
		*out = NULL;
		return sl_err_set(SL_E_KMS_PROTOCOL, "KMS answer: \"%s\" is %zu bytes, want %zu",
		                  field, *len, want);
	}
	return SL_OK;
}

sl_err sl_kms_challenge_get(sl_kms *k, sl_kms_challenge *out)
{
	sl_err rc = SL_E_KMS_PROTOCOL;
	json_t *req = json_object(), *res = NULL;
	uint8_t *n = NULL, *d = NULL;
	size_t nl = 0, dl = 0;
	const char *exp;
	SL_ENSURE(req != NULL, SL_E_NOMEM, "challenge");
	SL_GUARD(sl_kms_call(k, "/v1/challenge", req, false, KMS_RETRY_ALL, &res));
	SL_GUARD(get_b64(res, "nonce", SL_NONCE_LEN, 0, &n, &nl));
	SL_GUARD(get_b64(res, "policy_digest", SL_SHA256_LEN, 0, &d, &dl));
	exp = sl_json_getstr(res, "expires");
	SL_ENSURE(exp != NULL, SL_E_KMS_PROTOCOL, "KMS answer: missing string \"expires\"");
	rc = sl_time_parse_rfc3339(exp, &out->expires, "expires");
	if (rc != SL_OK)
		SL_FAIL(SL_E_KMS_PROTOCOL, "KMS answer: \"expires\" is not RFC 3339");
	memcpy(out->nonce, n, SL_NONCE_LEN);
	memcpy(out->policy_digest, d, SL_SHA256_LEN);
	rc = SL_OK;
out:
	free(n);
	free(d);
	json_decref(req);
	json_decref(res);
	return rc;
}

sl_err sl_kms_eph_keypair(uint8_t pub[static SL_EPH_PUB_LEN], sl_secret **sk)
{
	_Static_assert(SL_KMS_EPH_SK_LEN == SL_SEALBOX_SK_LEN, "ephemeral key size");
	return sl_sealbox_keypair(pub, sk);
}

/* A base64 member (the encoded text is wiped after use: DEKs and
 * enrollment credentials pass through here). */
static SL_RESULT sl_kms_b64_member(json_t *o, const char *field, const uint8_t *p, size_t n)
{
	char *s = NULL;
	sl_err rc = sl_b64_encode(p, n, &s);
	if (rc != SL_OK)
		return rc;
	rc = json_object_set_new(o, field, json_string(s)) == 0
	         ? SL_OK
	         : sl_err_set(SL_E_NOMEM, "%s", field);
	/* the DEK of a wrap and the enrollment credential pass through here */
	sl_wipe(s, strlen(s));
	free(s);
	return rc;
}

sl_err sl_kms_attested_members(json_t *req, const uint8_t *nonce, const uint8_t *eph_pub,
                               const uint8_t *policy_digest, const json_t *evidence,
                               const json_t *identity, const json_t *job)
{
	sl_err rc = SL_E_NOMEM;
	SL_ENSURE(json_is_array(evidence), SL_E_USAGE, "evidence must be an array");
	SL_GUARD(sl_kms_b64_member(req, "nonce", nonce, SL_NONCE_LEN));
	SL_GUARD(sl_kms_b64_member(req, "eph_pub", eph_pub, SL_EPH_PUB_LEN));
	SL_GUARD(sl_kms_b64_member(req, "policy_digest", policy_digest, SL_SHA256_LEN));
	SL_ENSURE(
	    json_object_set(req, "evidence", (json_t *)evidence) == 0 &&
	        json_object_set_new(req, "identity",
	                            identity != NULL ? json_incref((json_t *)identity)
	                                             : json_array()) == 0 &&
	        json_object_set_new(req, "job",
	                            job != NULL ? json_incref((json_t *)job) : json_object()) == 0,
	    SL_E_NOMEM, "request");
	rc = SL_OK;
out:
	return rc;
}

/* "outputs": the output keys asked for. */
static SL_RESULT output_members(json_t *req, const sl_kms_output_want *w, size_t n)
{
	sl_err rc = SL_E_NOMEM;
	json_t *outs = json_array();
	SL_ENSURE(outs != NULL, SL_E_NOMEM, "outputs");
	SL_ENSURE(n >= 1 && n <= 16, SL_E_USAGE, "output keys: 1..16 outputs, not %zu", n);
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_pack("{s:s, s:s}", "output_id", w[i].output_id, "destination",
		                      w[i].destination);
		SL_ENSURE(e != NULL && json_array_append_new(outs, e) == 0, SL_E_NOMEM, "outputs");
		if (w[i].key_id != NULL)
			SL_ENSURE(json_object_set_new(e, "key_id", json_string(w[i].key_id)) == 0,
			          SL_E_NOMEM, "outputs");
	}
	SL_ENSURE(json_object_set(req, "outputs", outs) == 0, SL_E_NOMEM, "outputs");
	rc = SL_OK;
out:
	json_decref(outs);
	return rc;
}

/* The answer's "outputs": each output's wrapped DEK and its DEK, opened
 * with eph_sk. All or nothing. */
static SL_RESULT open_outputs(const json_t *res, const sl_kms_output_want *w, size_t n,
                              sl_secret *eph_sk, sl_kms_output_key keys[])
{
	sl_err rc = SL_E_KMS_PROTOCOL;
	const json_t *got = json_object_get(res, "outputs");
	sl_secret *tmp[16] = {NULL};
	SL_ENSURE(n <= 16 && json_is_array(got) && json_array_size(got) == n, SL_E_KMS_PROTOCOL,
	          "KMS answer: \"outputs\" must list the %zu outputs asked for", n);
	for (size_t i = 0; i < n; i++) {
		const json_t *e = json_array_get(got, i);
		const char *id = sl_json_getstr(e, "output_id");
		const char *key = sl_json_getstr(e, "key_id");
		uint8_t *sealed = NULL, *wrapped = NULL;
		size_t sl = 0, wl = 0;
		SL_ENSURE(id != NULL && strcmp(id, w[i].output_id) == 0, SL_E_KMS_PROTOCOL,
		          "KMS answer: outputs[%zu] is not output '%s'", i, w[i].output_id);
		SL_ENSURE(key != NULL && strlen(key) <= SL_KMS_ID_MAX, SL_E_KMS_PROTOCOL,
		          "KMS answer: outputs[%zu].key_id", i);
		snprintf(keys[i].key_id, sizeof(keys[i].key_id), "%s", key);
		SL_GUARD(get_b64(e, "wrapped_dek", 0, SL_KMS_WRAPPED_DEK_MAX, &wrapped, &wl));
		memcpy(keys[i].wrapped_dek, wrapped, wl);
		keys[i].wrapped_dek_len = wl;
		free(wrapped);
		SL_GUARD(get_b64(e, "sealed", SEALED_LEN, 0, &sealed, &sl));
		rc = sl_secret_new(SL_KMS_DEK_LEN, &tmp[i]);
		if (rc == SL_OK &&
		    sl_sealbox_open(sealed, sl, eph_sk, sl_secret_data(tmp[i])) != SL_OK)
			rc = sl_err_set(SL_E_INTEGRITY,
			                "KMS answer: sealed key of output '%s' does not open with "
			                "this request's ephemeral key",
			                id);
		free(sealed);
		if (rc != SL_OK)
			goto out;
	}
	for (size_t i = 0; i < n; i++) {
		keys[i].dek = tmp[i];
		tmp[i] = NULL;
	}
	rc = SL_OK;
out:
	for (size_t i = 0; i < 16; i++)
		sl_secret_free(tmp[i]);
	return rc;
}

sl_err sl_kms_key_members(json_t *req, const sl_kms_release_req *rq)
{
	sl_err rc = SL_E_NOMEM;
	json_t *keys = json_array();
	SL_ENSURE(keys != NULL, SL_E_NOMEM, "keys");
	for (size_t i = 0; i < rq->nkeys; i++) {
		json_t *e = json_pack("{s:s, s:s}", "key_id", rq->keys[i].key_id, "dataset_id",
		                      rq->keys[i].dataset_id);
		SL_ENSURE(e != NULL && json_array_append_new(keys, e) == 0, SL_E_NOMEM, "keys");
		SL_GUARD(sl_kms_b64_member(e, "wrapped_dek", rq->keys[i].wrapped_dek,
		                           rq->keys[i].wrapped_dek_len));
	}
	SL_ENSURE(json_object_set(req, "keys", keys) == 0, SL_E_NOMEM, "keys");
	if (rq->noutputs > 0)
		SL_GUARD(output_members(req, rq->outputs, rq->noutputs));
	rc = SL_OK;
out:
	json_decref(keys);
	return rc;
}

sl_err sl_kms_release(sl_kms *k, const sl_kms_release_req *rq, sl_secret *eph_sk, sl_secret *deks[])
{
	sl_err rc = SL_E_NOMEM;
	json_t *req = json_object(), *res = NULL, *got;
	sl_secret **tmp = calloc(rq->nkeys > 0 ? rq->nkeys : 1, sizeof(*tmp));
	SL_ENSURE(req != NULL && tmp != NULL, SL_E_NOMEM, "release request");
	SL_ENSURE((rq->nkeys >= 1 || rq->noutputs >= 1) && rq->nkeys <= 64 &&
	              (rq->noutputs == 0 || rq->out_keys != NULL),
	          SL_E_USAGE, "release: 1..64 keys (0 with outputs), not %zu", rq->nkeys);
	SL_GUARD(sl_kms_attested_members(req, rq->nonce, rq->eph_pub, rq->policy_digest,
	                                 rq->evidence, rq->identity, rq->job));
	SL_GUARD(sl_kms_key_members(req, rq));
	/* a release uses up its nonce: retry only what the server cannot have processed */
	SL_GUARD(sl_kms_call(k, "/v1/release", req, false, KMS_RETRY_UNPROCESSED, &res));
	got = json_object_get(res, "keys");
	SL_ENSURE(json_is_array(got) && json_array_size(got) == rq->nkeys, SL_E_KMS_PROTOCOL,
	          "KMS answer: \"keys\" must list the %zu keys asked for", rq->nkeys);
	for (size_t i = 0; i < rq->nkeys; i++) {
		const json_t *e = json_array_get(got, i);
		const char *id = sl_json_getstr(e, "key_id");
		uint8_t *sealed = NULL;
		size_t sl = 0;
		SL_ENSURE(id != NULL && strcmp(id, rq->keys[i].key_id) == 0, SL_E_KMS_PROTOCOL,
		          "KMS answer: keys[%zu] is not key '%s'", i, rq->keys[i].key_id);
		SL_GUARD(get_b64(e, "sealed", SEALED_LEN, 0, &sealed, &sl));
		rc = sl_secret_new(SL_KMS_DEK_LEN, &tmp[i]);
		if (rc == SL_OK &&
		    sl_sealbox_open(sealed, sl, eph_sk, sl_secret_data(tmp[i])) != SL_OK)
			rc = sl_err_set(
			    SL_E_INTEGRITY,
			    "KMS answer: sealed DEK for key '%s' does not open with this "
			    "request's ephemeral key",
			    id);
		free(sealed);
		if (rc != SL_OK)
			goto out;
	}
	if (rq->noutputs > 0)
		SL_GUARD(open_outputs(res, rq->outputs, rq->noutputs, eph_sk, rq->out_keys));
	for (size_t i = 0; i < rq->nkeys; i++) {
		deks[i] = tmp[i];
		tmp[i] = NULL;
	}
	json_decref(k->lease);
	k->lease = json_incref(json_object_get(res, "lease"));
	rc = SL_OK;
out:
	if (tmp != NULL) {
		for (size_t i = 0; i < rq->nkeys; i++)
			sl_secret_free(tmp[i]);
	}
	free(tmp);
	json_decref(req);
	json_decref(res);
	return rc;
}

sl_err sl_kms_output(sl_kms *k, const sl_kms_output_req *rq, sl_secret *eph_sk,
                     sl_kms_output_key keys[])
{
	sl_err rc = SL_E_NOMEM;
	json_t *req = json_object(), *ins = json_array(), *res = NULL;
	SL_ENSURE(req != NULL && ins != NULL, SL_E_NOMEM, "output request");
	SL_GUARD(sl_kms_attested_members(req, rq->nonce, rq->eph_pub, rq->policy_digest,
	                                 rq->evidence, rq->identity, rq->job));
	for (size_t i = 0; i < rq->ninputs; i++)
		json_array_append_new(ins, json_string(rq->inputs[i]));
	json_object_set(req, "inputs", ins);
	SL_GUARD(output_members(req, rq->outputs, rq->noutputs));
	SL_GUARD(sl_kms_call(k, "/v1/output", req, false, KMS_RETRY_UNPROCESSED, &res));
	SL_GUARD(open_outputs(res, rq->outputs, rq->noutputs, eph_sk, keys));
	rc = SL_OK;
out:
	json_decref(ins);
	json_decref(req);
	json_decref(res);
	return rc;
}

sl_err sl_kms_enroll(sl_kms *k, const char *tcti, char **ak_name_hex)
{
	sl_err rc = SL_E_NOMEM;
	sl_tpm2_key_opts ko = {.tcti = tcti, .ek_alg = SL_TPM2_ALG_RSA, .ak_alg = SL_TPM2_ALG_RSA};
	sl_tpm2_material m = {0};
	json_t *req = json_object(), *res = NULL, *act = json_object(), *res2 = NULL;
	uint8_t *blob = NULL, *sec = NULL, *sess = NULL;
	size_t blob_len = 0, sec_len = 0, sess_len = 0;
	sl_secret *cred = NULL, *etok = NULL;
	const char *name;
	SL_ENSURE(req != NULL && act != NULL, SL_E_NOMEM, "enroll");
	SL_GUARD(sl_tpm2_enrollment_material(&ko, &m));
	SL_GUARD(sl_kms_b64_member(req, "ek_pub", m.ek_public, m.ek_public_len));
	SL_GUARD(sl_kms_b64_member(req, "ak_pub", m.ak_public, m.ak_public_len));
	if (m.ek_cert != NULL)
		SL_GUARD(sl_kms_b64_member(req, "ek_cert", m.ek_cert, m.ek_cert_len));
	if (k->o.enroll_token_file != NULL) {
		SL_GUARD(sl_secret_read_client_token(k->o.enroll_token_file, &etok));
		SL_ENSURE(json_object_set_new(req, "enroll_token",
		                              json_string((const char *)sl_secret_data(etok))) == 0,
		          SL_E_NOMEM, "enroll");
	}
	SL_GUARD(sl_kms_call(k, "/v1/enroll", req, false, KMS_RETRY_ALL, &res));
	SL_GUARD(get_b64(res, "session", 16, 0, &sess, &sess_len));
	SL_GUARD(get_b64(res, "credential_blob", 0, 4096, &blob, &blob_len));
	SL_GUARD(get_b64(res, "encrypted_secret", 0, 4096, &sec, &sec_len));
	SL_GUARD(sl_tpm2_activate_credential(&ko, blob, blob_len, sec, sec_len, &cred));
	SL_GUARD(sl_kms_b64_member(act, "session", sess, sess_len));
	SL_GUARD(sl_kms_b64_member(act, "secret", sl_secret_data(cred), sl_secret_len(cred)));
	SL_GUARD(sl_kms_call(k, "/v1/enroll/activate", act, false, KMS_RETRY_UNPROCESSED, &res2));
	name = sl_json_getstr(res2, "ak_name");
	SL_ENSURE(name != NULL, SL_E_KMS_PROTOCOL, "KMS answer: missing \"ak_name\"");
	*ak_name_hex = strdup(name);
	SL_ENSURE(*ak_name_hex != NULL, SL_E_NOMEM, "ak name");
	rc = SL_OK;
out:
	if (act != NULL && json_is_string(json_object_get(act, "secret"))) {
		json_t *s = json_object_get(act, "secret");
		sl_wipe((char *)json_string_value(s), json_string_length(s));
	}
	sl_secret_free(cred);
	sl_secret_free(etok);
	if (req != NULL && json_is_string(json_object_get(req, "enroll_token"))) {
		json_t *t = json_object_get(req, "enroll_token");
		sl_wipe((char *)json_string_value(t), json_string_length(t));
	}
	free(blob);
	free(sec);
	free(sess);
	json_decref(req);
	json_decref(res);
	json_decref(act);
	json_decref(res2);
	sl_tpm2_material_free(&m);
	return rc;
}

sl_err sl_kms_key_create_aws(sl_kms *k, const char *key_id, const char *aws_key_id)
{
	sl_err rc = SL_E_NOMEM;
	json_t *req = json_pack("{s:s, s:s*}", "id", key_id, "aws_key_id", aws_key_id), *res = NULL;
	SL_ENSURE(req != NULL, SL_E_NOMEM, "key create");
	SL_GUARD(sl_kms_call(k, "/v1/keys", req, true, KMS_RETRY_UNPROCESSED, &res));
	rc = SL_OK;
out:
	json_decref(req);
	json_decref(res);
	return rc;
}

sl_err sl_kms_wrap(sl_kms *k, const char *key_id, const char *dataset_id, sl_secret *dek,
                   uint8_t **wrapped, size_t *wrapped_len)
{
	sl_err rc = SL_E_NOMEM;
	json_t *req = json_pack("{s:s}", "dataset_id", dataset_id), *res = NULL;
	char path[64 + SL_KMS_ID_MAX];
	SL_ENSURE(req != NULL, SL_E_NOMEM, "wrap");
	SL_ENSURE(strlen(key_id) >= 1 && strlen(key_id) <= SL_KMS_ID_MAX &&
	              strspn(key_id,
	                     "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
	                  strlen(key_id),
	          SL_E_USAGE, "--key-id: '%s' must be 1..%d of [A-Za-z0-9._-]", key_id,
	          SL_KMS_ID_MAX);
	SL_ENSURE(sl_secret_len(dek) == SL_KMS_DEK_LEN, SL_E_USAGE, "wrap: DEK must be %d bytes",
	          SL_KMS_DEK_LEN);
	snprintf(path, sizeof(path), "/v1/keys/%s/wrap", key_id);
	SL_GUARD(sl_kms_b64_member(req, "dek", sl_secret_data(dek), SL_KMS_DEK_LEN));
	SL_GUARD(sl_kms_call(k, path, req, true, KMS_RETRY_ALL, &res));
	SL_GUARD(get_b64(res, "wrapped_dek", 0, SL_KMS_WRAPPED_DEK_MAX, wrapped, wrapped_len));
	SL_ENSURE(*wrapped_len > 0, SL_E_KMS_PROTOCOL, "KMS answer: \"wrapped_dek\" is empty");
	rc = SL_OK;
out:
	if (req != NULL && json_is_string(json_object_get(req, "dek"))) {
		json_t *s = json_object_get(req, "dek");
		sl_wipe((char *)json_string_value(s), json_string_length(s));
	}
	json_decref(req);
	json_decref(res);
	return rc;
}
