/* The AWS KMS KEK backend (kmsd.h, "AWS KMS backend"): each key version is
 * an AWS KMS key (SYMMETRIC_DEFAULT, ENCRYPT_DECRYPT) whose ARN is that
 * version's row in the state store; a DEK is wrapped by Encrypt and opened
 * by Decrypt under the encryption context {"seclaunch:key_id": ID,
 * "seclaunch:dataset_id": DS}, so AWS itself refuses a wrapped DEK
 * presented for another key or dataset. Rotation makes a new AWS key (the
 * next version), so old wrapped DEKs name the version that opens them.
 *
 * Requests: the JSON protocol (POST / with X-Amz-Target TrentService.OP and
 * Content-Type application/x-amz-json-1.1), signed by libcurl (SigV4,
 * "aws:amz:REGION:kms"); throttling and 5xx answers are retried with
 * exponential backoff and jitter, at most AWS_ATTEMPTS times. Only the key
 * process (keyproc.c) opens this backend: the credentials (the standard
 * chain, seclaunch/aws.h) live in its guarded memory and nowhere else. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keys.h"
#include "seclaunch/aws.h"
#include "seclaunch/http.h"

#define AWS_ATTEMPTS 5
#define AWS_BACKOFF_MS 100
#define AWS_ANSWER_MAX (64 * 1024)
#define AWS_DELETE_DAYS 7 /* AWS's shortest ScheduleKeyDeletion window */

struct kmsd_aws {
	char *region, *endpoint, *protocols;
	sl_secret *userpwd;   /* "ACCESS_KEY_ID:SECRET" */
	sl_secret *token_hdr; /* "x-amz-security-token: ..." or NULL */
};

static bool loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	char h[64];
	size_t n = strlen(host);
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (n >= 2 && n < sizeof(h) + 2 && host[0] == '[' && host[n - 1] == ']') {
		snprintf(h, sizeof(h), "%.*s", (int)(n - 2), host + 1);
		return inet_pton(AF_INET6, h, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
	}
	return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

sl_err kmsd_aws_endpoint_check(const char *url)
{
	sl_err rc = SL_E_INPUT;
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL;
	SL_ENSURE(u != NULL, SL_E_NOMEM, "aws_kms_endpoint");
	SL_ENSURE(curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	              curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	              curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK,
	          SL_E_INPUT, "config: \"aws_kms_endpoint\" '%s' is not a URL", url);
	if (strcmp(scheme, "https") == 0) {
		rc = SL_OK;
		goto out;
	}
	SL_ENSURE(strcmp(scheme, "http") == 0, SL_E_INPUT,
	          "config: \"aws_kms_endpoint\" '%s': must be https:// (http:// only on a "
	          "loopback address, for an emulator)",
	          url);
	SL_ENSURE(loopback(host), SL_E_INPUT,
	          "config: \"aws_kms_endpoint\" '%s': http:// is allowed only on a loopback "
	          "address (127.0.0.0/8 or [::1], for an emulator); use https://",
	          url);
	rc = SL_OK;
out:
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
	return rc;
}

static bool region_ok(const char *r)
{
	size_t n = strlen(r);
	return n >= 1 && n <= 32 && strspn(r, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

static SL_RESULT secret_str(const char *s, sl_secret **out)
{
	size_t n = strlen(s);
	sl_err rc = sl_secret_new(n + 1, out);
	if (rc == SL_OK)
		memcpy(sl_secret_data(*out), s, n + 1);
	return rc;
}

sl_err kmsd_aws_open(const kmsd_config *c, kmsd_aws **out)
{
	sl_err rc = SL_E_NOMEM;
	kmsd_aws *a = calloc(1, sizeof(*a));
	sl_aws_creds cr = {0};
	char *hdr = NULL;
	SL_ENSURE(a != NULL, SL_E_NOMEM, "aws-kms");
	SL_ENSURE(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK, SL_E_SYSTEM, "curl init");
	SL_ENSURE(c->aws_region != NULL && region_ok(c->aws_region), SL_E_INPUT,
	          "config: \"aws_region\" must be an AWS region name (e.g. eu-west-1)");
	a->region = strdup(c->aws_region);
	if (c->aws_kms_endpoint != NULL) {
		SL_GUARD(kmsd_aws_endpoint_check(c->aws_kms_endpoint));
		a->endpoint = strdup(c->aws_kms_endpoint);
	} else {
		SL_ENSURE(asprintf(&a->endpoint, "https://kms.%s.amazonaws.com/", c->aws_region) >
		              0,
		          SL_E_NOMEM, "aws-kms");
	}
	a->protocols = strdup(strncmp(a->endpoint, "http://", 7) == 0 ? "http" : "https");
	SL_ENSURE(a->region && a->endpoint && a->protocols, SL_E_NOMEM, "aws-kms");
	rc = sl_aws_creds_chain(c->aws_metadata_url, &cr);
	if (rc != SL_OK) {
		rc = sl_err_wrap(SL_E_INPUT, "kek_backend \"aws-kms\"");
		goto out;
	}
	SL_ENSURE(asprintf(&hdr, "%s:%s", cr.id, cr.secret) > 0, SL_E_NOMEM, "aws-kms");
	SL_GUARD(secret_str(hdr, &a->userpwd));
	sl_wipe(hdr, strlen(hdr));
	free(hdr);
	hdr = NULL;
	if (cr.token != NULL) {
		SL_ENSURE(asprintf(&hdr, "x-amz-security-token: %s", cr.token) > 0, SL_E_NOMEM,
		          "aws-kms");
		SL_GUARD(secret_str(hdr, &a->token_hdr));
	}
	*out = a;
	a = NULL;
	rc = SL_OK;
out:
	if (hdr != NULL)
		sl_wipe(hdr, strlen(hdr));
	free(hdr);
	sl_aws_creds_wipe(&cr);
	kmsd_aws_close(a);
	return rc;
}

void kmsd_aws_close(kmsd_aws *a)
{
	if (a == NULL)
		return;
	free(a->region);
	free(a->endpoint);
	free(a->protocols);
	sl_secret_free(a->userpwd);
	sl_secret_free(a->token_hdr);
	free(a);
}

/* The error answers worth another try: throttling, and AWS's own trouble. */
static bool retryable(long status, const char *error)
{
	return status >= 500 || status == 429 || strcmp(error, "ThrottlingException") == 0 ||
	       strcmp(error, "RequestLimitExceeded") == 0 ||
	       strcmp(error, "LimitExceededException") == 0;
}

static void backoff(unsigned attempt)
{
	uint32_t jitter = 0;
	sl_random(&jitter, sizeof(jitter));
	long ms = (long)AWS_BACKOFF_MS << attempt;
	ms += (long)(jitter % (uint32_t)(ms / 2 + 1));
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* One TrentService call; body is wiped after (it may hold a DEK). */
static SL_RESULT call(kmsd_aws *a, const char *op, json_t *req, const char *want,
                      kmsd_aws_answer *ans)
{
	sl_err rc = SL_E_SYSTEM;
	char *body = json_dumps(req, JSON_COMPACT);
	char target[80], sigv4[80];
	struct curl_slist *hl = NULL, *n;
	sl_http_body b = {.max = AWS_ANSWER_MAX};
	CURL *c = NULL;
	CURLcode cc = CURLE_OK;
	long status = 0;
	memset(ans, 0, sizeof(*ans));
	SL_ENSURE(body != NULL, SL_E_NOMEM, "AWS KMS %s", op);
	snprintf(target, sizeof(target), "X-Amz-Target: TrentService.%s", op);
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:kms", a->region);
	const char *hs[] = {"Content-Type: application/x-amz-json-1.1", target,
	                    a->token_hdr ? (const char *)sl_secret_data(a->token_hdr) : NULL};
	for (size_t i = 0; i < 3 && hs[i] != NULL; i++) {
		n = curl_slist_append(hl, hs[i]);
		SL_ENSURE(n != NULL, SL_E_NOMEM, "AWS KMS %s", op);
		hl = n;
	}
	for (unsigned attempt = 0; attempt < AWS_ATTEMPTS; attempt++) {
		if (attempt > 0)
			backoff(attempt - 1);
		sl_http_body_reset(&b);
		kmsd_aws_answer_free(ans);
		c = curl_easy_init();
		SL_ENSURE(c != NULL, SL_E_NOMEM, "AWS KMS %s", op);
		if (curl_easy_setopt(c, CURLOPT_URL, a->endpoint) != CURLE_OK ||
		    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, a->protocols) != CURLE_OK ||
		    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
		    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
		    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L) != CURLE_OK ||
		    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 15000L) != CURLE_OK ||
		    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl) != CURLE_OK ||
		    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body) != CURLE_OK ||
		    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4) != CURLE_OK ||
		    curl_easy_setopt(c, CURLOPT_USERPWD,
		                     (const char *)sl_secret_data(a->userpwd)) != CURLE_OK ||
		    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sl_http_body_write) != CURLE_OK ||
		    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b) != CURLE_OK)
			SL_FAIL(SL_E_INTERNAL, "AWS KMS %s: curl options", op);
		cc = curl_easy_perform(c);
		status = 0;
		if (cc == CURLE_OK)
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_cleanup(c);
		c = NULL;
		SL_ENSURE(!b.overflow, SL_E_SYSTEM, "AWS KMS %s: answer larger than %d bytes", op,
		          AWS_ANSWER_MAX);
		if (cc != CURLE_OK)
			continue; /* a transport failure: try again */
		SL_GUARD(kmsd_aws_parse(b.p, b.len, status, want, ans));
		if (status >= 200 && status < 300)
			break;
		if (!retryable(status, ans->error))
			break;
	}
	if (cc != CURLE_OK)
		SL_FAIL(SL_E_SYSTEM, "AWS KMS %s at %s: %s (after %d attempts)", op, a->endpoint,
		        curl_easy_strerror(cc), AWS_ATTEMPTS);
	if (status < 200 || status >= 300) {
		const char *e = ans->error;
		sl_err code = strcmp(e, "InvalidCiphertextException") == 0 ||
		                      strcmp(e, "IncorrectKeyException") == 0
		                  ? SL_E_INTEGRITY
		              : strcmp(e, "DisabledException") == 0 ||
		                      strcmp(e, "KMSInvalidStateException") == 0
		                  ? SL_E_KMS_REFUSED
		              : strcmp(e, "NotFoundException") == 0 ? SL_E_INPUT
		                                                    : SL_E_SYSTEM;
		SL_FAIL(code, "AWS KMS %s: HTTP %ld %s%s%s", op, status, e[0] ? e : "error",
		        ans->message[0] ? ": " : "", ans->message);
	}
	rc = SL_OK;
out:
	if (c != NULL)
		curl_easy_cleanup(c);
	curl_slist_free_all(hl);
	sl_http_body_reset(&b); /* wipes */
	if (body != NULL)
		sl_wipe(body, strlen(body));
	free(body);
	if (rc != SL_OK)
		kmsd_aws_answer_free(ans);
	return rc;
}

static json_t *context(const char *id, const char *dataset_id)
{
	return json_pack("{s:s, s:s}", "seclaunch:key_id", id, "seclaunch:dataset_id", dataset_id);
}

/* The ARN bytes of a store row as a string. */
static SL_RESULT arn_of(const uint8_t *arn, size_t len, char out[static KMSD_KEK_WRAPPED_MAX + 1])
{
	if (len == 0 || len > KMSD_KEK_WRAPPED_MAX || memchr(arn, '\0', len) != NULL)
		return sl_err_set(SL_E_INTEGRITY, "AWS KMS key row: not an ARN (%zu bytes)", len);
	memcpy(out, arn, len);
	out[len] = '\0';
	return SL_OK;
}

/* DisableKey, EnableKey and ScheduleKeyDeletion act only on keys of the
 * caller's own account, where the key id (the ARN's "key/ID") names the key
 * as well as the ARN does; some emulators take only the id. */
static const char *own_key_id(const char *arn)
{
	const char *k = strstr(arn, ":key/");
	return k != NULL && strncmp(arn, "arn:", 4) == 0 ? k + 5 : arn;
}

static SL_RESULT new_key(kmsd_aws *a, const char *id, unsigned version,
                         char arn[static KMSD_KEK_WRAPPED_MAX + 1])
{
	sl_err rc;
	kmsd_aws_answer ans;
	char desc[SL_KMS_ID_MAX + 64];
	snprintf(desc, sizeof(desc), "seclaunch KEK %s version %u", id, version);
	json_t *req = json_pack("{s:s, s:s, s:s, s:[{s:s, s:s}]}", "KeySpec", "SYMMETRIC_DEFAULT",
	                        "KeyUsage", "ENCRYPT_DECRYPT", "Description", desc, "Tags",
	                        "TagKey", "seclaunch:key_id", "TagValue", id);
	if (req == NULL)
		return sl_err_set(SL_E_NOMEM, "AWS KMS CreateKey");
	rc = call(a, "CreateKey", req, "KeyMetadata", &ans);
	json_decref(req);
	if (rc == SL_OK)
		memcpy(arn, ans.key_arn, strlen(ans.key_arn) + 1);
	kmsd_aws_answer_free(&ans);
	return rc;
}

sl_err kmsd_aws_schedule_delete(kmsd_aws *a, const uint8_t *arn, size_t arn_len)
{
	char k[KMSD_KEK_WRAPPED_MAX + 1];
	kmsd_aws_answer ans;
	sl_err rc = arn_of(arn, arn_len, k);
	if (rc != SL_OK)
		return rc;
	json_t *req =
	    json_pack("{s:s, s:i}", "KeyId", own_key_id(k), "PendingWindowInDays", AWS_DELETE_DAYS);
	if (req == NULL)
		return sl_err_set(SL_E_NOMEM, "AWS KMS ScheduleKeyDeletion");
	rc = call(a, "ScheduleKeyDeletion", req, NULL, &ans);
	json_decref(req);
	kmsd_aws_answer_free(&ans);
	return rc;
}

sl_err kmsd_aws_create(kmsd_aws *a, kmsd_store *st, const char *id, const char *adopt)
{
	sl_err rc = SL_E_SYSTEM;
	char arn[KMSD_KEK_WRAPPED_MAX + 1];
	kmsd_key_row row = {0};
	kmsd_aws_answer ans = {0};
	bool found = false;
	json_t *req = NULL;
	SL_GUARD(kmsd_store_key_get(st, id, &row, &found));
	SL_ENSURE(!found, SL_E_EXISTS, "key '%s' already exists", id);
	if (adopt != NULL) {
		req = json_pack("{s:s}", "KeyId", adopt);
		SL_ENSURE(req != NULL, SL_E_NOMEM, "AWS KMS DescribeKey");
		rc = call(a, "DescribeKey", req, "KeyMetadata", &ans);
		if (rc == SL_E_INPUT)
			rc = sl_err_set(SL_E_INPUT, "aws_key_id '%s': AWS KMS has no such key",
			                adopt);
		if (rc != SL_OK)
			goto out;
		SL_ENSURE(
		    (ans.key_spec[0] == '\0' || strcmp(ans.key_spec, "SYMMETRIC_DEFAULT") == 0) &&
		        (ans.key_usage[0] == '\0' || strcmp(ans.key_usage, "ENCRYPT_DECRYPT") == 0),
		    SL_E_INPUT,
		    "aws_key_id '%s': a %s key for %s; seclaunch needs SYMMETRIC_DEFAULT for "
		    "ENCRYPT_DECRYPT",
		    adopt, ans.key_spec, ans.key_usage);
		SL_ENSURE(strcmp(ans.key_state, "Enabled") == 0, SL_E_INPUT,
		          "aws_key_id '%s': the AWS KMS key is %s, not Enabled", adopt,
		          ans.key_state[0] ? ans.key_state : "in an unknown state");
		memcpy(arn, ans.key_arn, strlen(ans.key_arn) + 1);
	} else {
		SL_GUARD(new_key(a, id, 1, arn));
	}
	rc = kmsd_store_key_create(st, id, "aws-kms", (const uint8_t *)arn, strlen(arn),
	                           (int64_t)time(NULL));
	/* another replica won the id meanwhile: the AWS key made for it goes */
	if (rc != SL_OK && adopt == NULL &&
	    kmsd_aws_schedule_delete(a, (const uint8_t *)arn, strlen(arn)) != SL_OK)
		fprintf(stderr, "seclaunchd-kek: AWS KMS key %s is left over: %s\n", arn,
		        sl_err_detail());
out:
	json_decref(req);
	kmsd_aws_answer_free(&ans);
	return rc;
}

sl_err kmsd_aws_rotate(kmsd_aws *a, kmsd_store *st, const char *id, unsigned version)
{
	char arn[KMSD_KEK_WRAPPED_MAX + 1];
	sl_err rc = new_key(a, id, version, arn);
	if (rc != SL_OK)
		return rc;
	rc = kmsd_store_kek_add(st, id, version, (const uint8_t *)arn, strlen(arn),
	                        (int64_t)time(NULL));
	if (rc != SL_OK && kmsd_aws_schedule_delete(a, (const uint8_t *)arn, strlen(arn)) != SL_OK)
		fprintf(stderr, "seclaunchd-kek: AWS KMS key %s is left over: %s\n", arn,
		        sl_err_detail());
	return rc;
}

sl_err kmsd_aws_wrap(kmsd_aws *a, const uint8_t *arn_row, size_t arn_len, const char *id,
                     const char *dataset_id, unsigned version,
                     const uint8_t dek[static SL_KMS_DEK_LEN],
                     uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len)
{
	sl_err rc = SL_E_NOMEM;
	char arn[KMSD_KEK_WRAPPED_MAX + 1], *pt = NULL;
	kmsd_aws_answer ans = {0};
	json_t *req = NULL;
	*out_len = 0;
	SL_GUARD(arn_of(arn_row, arn_len, arn));
	SL_GUARD(sl_b64_encode(dek, SL_KMS_DEK_LEN, &pt));
	req = json_pack("{s:s, s:s, s:o}", "KeyId", arn, "Plaintext", pt, "EncryptionContext",
	                context(id, dataset_id));
	SL_ENSURE(req != NULL, SL_E_NOMEM, "AWS KMS Encrypt");
	SL_GUARD(call(a, "Encrypt", req, "CiphertextBlob", &ans));
	SL_ENSURE(ans.blob_len <= SL_KMS_WRAPPED_DEK_MAX - 2, SL_E_SYSTEM,
	          "AWS KMS Encrypt: a ciphertext of %zu bytes (at most %d fit a wrapped DEK)",
	          ans.blob_len, SL_KMS_WRAPPED_DEK_MAX - 2);
	out[0] = (uint8_t)version;
	out[1] = KMSD_AWS_MARKER;
	memcpy(out + 2, ans.blob, ans.blob_len);
	*out_len = 2 + ans.blob_len;
	rc = SL_OK;
out:
	if (req != NULL) {
		json_t *p = json_object_get(req, "Plaintext");
		if (json_is_string(p))
			sl_wipe((char *)json_string_value(p), json_string_length(p));
	}
	json_decref(req);
	if (pt != NULL)
		sl_wipe(pt, strlen(pt));
	free(pt);
	kmsd_aws_answer_free(&ans);
	return rc;
}

sl_err kmsd_aws_unwrap(kmsd_aws *a, const uint8_t *arn_row, size_t arn_len, const char *id,
                       const char *dataset_id, const uint8_t *wrapped, size_t len,
                       uint8_t dek[static SL_KMS_DEK_LEN])
{
	sl_err rc = SL_E_INTEGRITY;
	char arn[KMSD_KEK_WRAPPED_MAX + 1], *ct = NULL;
	kmsd_aws_answer ans = {0};
	json_t *req = NULL;
	SL_GUARD(arn_of(arn_row, arn_len, arn));
	SL_ENSURE(len > 2 && wrapped[1] == KMSD_AWS_MARKER, SL_E_INTEGRITY,
	          "wrapped DEK for key '%s': not an AWS KMS one (no marker)", id);
	SL_GUARD(sl_b64_encode(wrapped + 2, len - 2, &ct));
	/* KeyId given: AWS refuses a blob of any other key */
	req = json_pack("{s:s, s:s, s:o}", "KeyId", arn, "CiphertextBlob", ct, "EncryptionContext",
	                context(id, dataset_id));
	SL_ENSURE(req != NULL, SL_E_NOMEM, "AWS KMS Decrypt");
	SL_GUARD(call(a, "Decrypt", req, "Plaintext", &ans));
	SL_ENSURE(ans.blob_len == SL_KMS_DEK_LEN, SL_E_INTEGRITY,
	          "AWS KMS Decrypt: a plaintext of %zu bytes, not a DEK", ans.blob_len);
	SL_ENSURE(ans.key_arn[0] == '\0' || strcmp(ans.key_arn, arn) == 0, SL_E_INTEGRITY,
	          "AWS KMS Decrypt: opened by key %s, not %s", ans.key_arn, arn);
	memcpy(dek, ans.blob, SL_KMS_DEK_LEN);
	rc = SL_OK;
out:
	json_decref(req);
	free(ct);
	kmsd_aws_answer_free(&ans); /* wipes */
	if (rc != SL_OK)
		sl_wipe(dek, SL_KMS_DEK_LEN);
	return rc;
}

sl_err kmsd_aws_key_state(kmsd_aws *a, const uint8_t *arn_row, size_t arn_len, bool enable)
{
	char arn[KMSD_KEK_WRAPPED_MAX + 1];
	kmsd_aws_answer ans;
	sl_err rc = arn_of(arn_row, arn_len, arn);
	if (rc != SL_OK)
		return rc;
	json_t *req = json_pack("{s:s}", "KeyId", own_key_id(arn));
	if (req == NULL)
		return sl_err_set(SL_E_NOMEM, "AWS KMS key state");
	rc = call(a, enable ? "EnableKey" : "DisableKey", req, NULL, &ans);
	json_decref(req);
	kmsd_aws_answer_free(&ans);
	return rc;
}
