/* HTTPS transport of the KMS client: libcurl with TLS 1.2+ verified against
 * the configured CA bundle (and an optional pinned public key), connect and
 * total timeouts, a response size cap, and retries with exponential backoff
 * and full jitter for connection failures, 429 and 5xx only. A 4xx answer is
 * never retried: it is the server's decision. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cli/cli.h"
#include "kms_http.h"
#include "seclaunch/http.h"
#include "seclaunch/json.h"

#define BACKOFF_BASE_MS 200
#define BACKOFF_MAX_MS 4000

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Full jitter: uniform in [delay/2, delay]. */
static long backoff_ms(unsigned attempt)
{
	long d = BACKOFF_BASE_MS << (attempt < 5 ? attempt : 5);
	uint32_t r;
	if (d > BACKOFF_MAX_MS)
		d = BACKOFF_MAX_MS;
	sl_random(&r, sizeof(r));
	return d / 2 + (long)(r % (uint32_t)(d / 2 + 1));
}

static bool transient(CURLcode c, enum kms_retry retry)
{
	if (c == CURLE_COULDNT_CONNECT || c == CURLE_COULDNT_RESOLVE_HOST)
		return true;
	if (retry == KMS_RETRY_UNPROCESSED)
		return false;
	return c == CURLE_SEND_ERROR || c == CURLE_RECV_ERROR || c == CURLE_GOT_NOTHING ||
	       c == CURLE_PARTIAL_FILE;
}

static bool tls_failure(CURLcode c)
{
	return c == CURLE_PEER_FAILED_VERIFICATION || c == CURLE_SSL_CACERT_BADFILE ||
	       c == CURLE_SSL_CONNECT_ERROR || c == CURLE_SSL_PINNEDPUBKEYNOTMATCH ||
	       c == CURLE_SSL_CERTPROBLEM || c == CURLE_SSL_ISSUER_ERROR;
}

sl_err sl_kms_refusal_code(const json_t *reasons)
{
	static const char *const attest_codes[] = {"evidence_invalid", "binding_mismatch",
	                                           "ak_not_enrolled",  "ak_revoked",
	                                           "identity_invalid", NULL};
	size_t i;
	const json_t *r;
	json_array_foreach (reasons, i, r) {
		const char *code = sl_json_getstr(r, "code");
		for (size_t j = 0; code != NULL && attest_codes[j] != NULL; j++)
			if (strcmp(code, attest_codes[j]) == 0)
				return SL_E_ATTEST;
	}
	return SL_E_POLICY_DENIED;
}

/* Turns a problem JSON into the error the caller returns. */
static SL_RESULT problem_err(sl_kms *k, const char *path, long status)
{
	const json_t *p = k->problem;
	const char *title = sl_json_getstr(p, "title");
	const char *detail = sl_json_getstr(p, "detail");
	const json_t *reasons = json_object_get(p, "reasons");
	if (status == 403 && json_is_array(reasons) && json_array_size(reasons) > 0) {
		char msg[4096];
		size_t o = 0;
		o += (size_t)snprintf(msg, sizeof(msg), "KMS denied %s (%zu reason%s):", path,
		                      json_array_size(reasons),
		                      json_array_size(reasons) == 1 ? "" : "s");
		for (size_t i = 0; i < json_array_size(reasons) && o < sizeof(msg); i++) {
			const json_t *r = json_array_get(reasons, i);
			const char *code = sl_json_getstr(r, "code");
			const char *d =
			    json_is_string(r) ? json_string_value(r) : sl_json_getstr(r, "detail");
			o += (size_t)snprintf(msg + o, sizeof(msg) - o, "%s [%s] %.400s",
			                      i ? ";" : "", code ? code : "reason", d ? d : "?");
		}
		return sl_err_set(sl_kms_refusal_code(reasons), "%s", msg);
	}
	return sl_err_set(SL_E_KMS_REFUSED, "KMS %s: HTTP %ld %s: %.600s", path, status,
	                  title ? title : "", detail ? detail : "(no detail)");
}

sl_err sl_kms_call(sl_kms *k, const char *path, const json_t *body, bool admin,
                   enum kms_retry retry, json_t **out)
{
	sl_err rc = SL_E_KMS_UNREACHABLE;
	CURL *c = k->curl;
	struct curl_slist *hdr = NULL;
	char *url = NULL, *text = NULL, *auth = NULL;
	size_t text_len = 0, auth_len = 0;
	sl_http_body b = {.max = k->o.max_response};
	long status = 0;
	CURLcode cc = CURLE_OK;
	json_error_t je;
	json_t *j = NULL;

	json_decref(k->problem);
	k->problem = NULL;
	SL_ENSURE(asprintf(&url, "%s%s", k->url, path) >= 0, SL_E_NOMEM, "KMS url");
	if (body != NULL) {
		/* json_dumps grows its buffer by realloc and frees the old copies
		 * unwiped; a wrap body holds a DEK: size first, then dump once
		 * into a buffer that is wiped at the end */
		size_t need = json_dumpb(body, NULL, 0, JSON_COMPACT);
		SL_ENSURE(need > 0, SL_E_NOMEM, "KMS request");
		text = malloc(need + 1);
		SL_ENSURE(text != NULL, SL_E_NOMEM, "KMS request");
		text_len = need; /* what the wipe at out covers */
		SL_ENSURE(json_dumpb(body, text, need, JSON_COMPACT) == need, SL_E_INTERNAL,
		          "KMS request: body changed size");
		text[text_len] = '\0';
	}
	hdr = curl_slist_append(hdr, "Content-Type: application/json");
	hdr = curl_slist_append(hdr, "Accept: application/json, application/problem+json");
	hdr = curl_slist_append(hdr, "Expect:");
	if (admin) {
		SL_ENSURE(k->admin_token != NULL, SL_E_USAGE,
		          "%s is an admin call: --admin-token-file is required", path);
		auth_len = strlen("Authorization: Bearer ") +
		           strlen((char *)sl_secret_data(k->admin_token));
		auth = malloc(auth_len + 1);
		SL_ENSURE(auth != NULL, SL_E_NOMEM, "KMS request");
		snprintf(auth, auth_len + 1, "Authorization: Bearer %s",
		         (char *)sl_secret_data(k->admin_token));
		hdr = curl_slist_append(hdr, auth);
	}
	SL_ENSURE(hdr != NULL, SL_E_NOMEM, "KMS request headers");
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_URL, url), SL_E_SYSTEM, "curl URL");
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr), SL_E_SYSTEM, "curl headers");
	if (text != NULL) {
		SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_POST, 1L), SL_E_SYSTEM, "curl POST");
		SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_POSTFIELDS, text), SL_E_SYSTEM,
		              "curl body");
		SL_GUARD_CURL(
		    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)text_len),
		    SL_E_SYSTEM, "curl body size");
	} else {
		SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_HTTPGET, 1L), SL_E_SYSTEM, "curl GET");
	}
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sl_http_body_write), SL_E_SYSTEM,
	              "curl write function");
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_WRITEDATA, &b), SL_E_SYSTEM, "curl write data");

	for (unsigned attempt = 0;; attempt++) {
		sl_http_body_reset(&b);
		status = 0;
		cc = curl_easy_perform(c);
		if (cc == CURLE_OK)
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		bool again = (cc != CURLE_OK && transient(cc, retry)) ||
		             (cc == CURLE_OK && (status == 429 || status == 503 ||
		                                 (retry == KMS_RETRY_ALL && status >= 500)));
		if (!again || attempt + 1 >= k->o.max_attempts)
			break;
		long ms = backoff_ms(attempt);
		if (!sl_cli_quiet)
			fprintf(stderr,
			        "seclaunch: KMS %s: %s; retrying in %ld ms (attempt %u of %u)\n",
			        path,
			        cc != CURLE_OK  ? curl_easy_strerror(cc)
			        : status == 429 ? "busy (429)"
			                        : "server error",
			        ms, attempt + 2, k->o.max_attempts);
		sleep_ms(ms);
	}
	if (b.overflow || cc == CURLE_FILESIZE_EXCEEDED)
		SL_FAIL(SL_E_KMS_PROTOCOL, "KMS %s: answer larger than the %zu-byte limit", path,
		        k->o.max_response);
	if (cc != CURLE_OK) {
		if (tls_failure(cc))
			rc = sl_err_curl(
			    SL_E_KMS_UNREACHABLE, (int)cc,
			    "KMS %s: TLS verification failed (check --kms-ca / the pinned "
			    "key); nothing was sent",
			    k->url);
		else
			rc = sl_err_curl(SL_E_KMS_UNREACHABLE, (int)cc, "KMS %s%s unreachable",
			                 k->url, path);
		goto out;
	}
	j = b.p != NULL ? json_loadb((const char *)b.p, b.len, JSON_REJECT_DUPLICATES, &je) : NULL;
	if (status < 200 || status >= 300) {
		k->problem = json_is_object(j) ? json_incref(j) : json_object();
		rc = problem_err(k, path, status);
		goto out;
	}
	SL_ENSURE(json_is_object(j), SL_E_KMS_PROTOCOL,
	          "KMS %s: HTTP %ld answer is not a JSON object (%s)", path, status,
	          j == NULL ? je.text : "wrong type");
	*out = j;
	j = NULL;
	rc = SL_OK;
out:
	/* bodies may carry a DEK (wrap) and headers the admin token */
	if (text != NULL)
		sl_wipe(text, text_len);
	if (auth != NULL)
		sl_wipe(auth, auth_len);
	free(text);
	free(auth);
	for (struct curl_slist *h = hdr; h != NULL; h = h->next)
		sl_wipe(h->data, strlen(h->data)); /* curl's copy of the token header */
	curl_slist_free_all(hdr);
	/* the handle is reused: no pointer into freed memory stays set (these
	 * two cannot fail, they only clear) */
	(void)curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	(void)curl_easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
	json_decref(j);
	sl_http_body_reset(&b);
	free(url);
	return rc;
}
