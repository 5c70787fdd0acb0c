/* Collecting identity documents from the cloud metadata servers over HTTP.
 * Short timeouts and at most one retry: on a machine without a metadata
 * server this must fail fast. Base URLs come from the environment so tests
 * point them at a loopback server. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloud_identity_int.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

#define GCP_DEFAULT "http://metadata.google.internal"
#define AWS_DEFAULT "http://169.254.169.254"
#define CONNECT_TIMEOUT_MS 1000L
#define TOTAL_TIMEOUT_MS 3000L

struct body {
	char *p;
	size_t len;
	bool too_big;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct body *b = ud;
	size_t n = size * nmemb;
	if (b->len + n > SL_IDENTITY_MAX_BYTES) {
		b->too_big = true;
		return 0;
	}
	char *q = realloc(b->p, b->len + n + 1);
	if (q == NULL)
		return 0;
	memcpy(q + b->len, ptr, n);
	b->len += n;
	q[b->len] = '\0';
	b->p = q;
	return n;
}

static void body_free(struct body *b)
{
	if (b->p != NULL)
		sl_wipe(b->p, b->len);
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* One request (PUT when put is true), retried once on a transport error. */
static sl_err fetch(const char *url, bool put, const char *const *headers, struct body *out)
{
	sl_err rc = SL_E_ATTEST;
	CURL *c = NULL;
	struct curl_slist *hl = NULL;
	long status = 0;
	CURLcode cc = CURLE_OK;

	for (size_t i = 0; headers != NULL && headers[i] != NULL; i++) {
		struct curl_slist *n = curl_slist_append(hl, headers[i]);
		SL_ENSURE(n != NULL, SL_E_NOMEM, "metadata request");
		hl = n;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		body_free(out);
		c = curl_easy_init();
		SL_ENSURE(c != NULL, SL_E_NOMEM, "metadata request");
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, TOTAL_TIMEOUT_MS);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_NOPROXY, "*"); /* never via a proxy */
		curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
		curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
		if (put) {
			curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
			curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
		}
		cc = curl_easy_perform(c);
		if (cc == CURLE_OK)
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_cleanup(c);
		c = NULL;
		if (cc == CURLE_OK || out->too_big)
			break;
	}
	SL_ENSURE(!out->too_big, SL_E_ATTEST_FORMAT, "metadata %s: response larger than %d bytes",
	          url, SL_IDENTITY_MAX_BYTES);
	if (cc != CURLE_OK) {
		rc = sl_err_curl(SL_E_ATTEST, (int)cc, "metadata server %s", url);
		goto out;
	}
	SL_ENSURE(status == 200, SL_E_ATTEST, "metadata server %s: HTTP %ld", url, status);
	SL_ENSURE(out->len > 0, SL_E_ATTEST_FORMAT, "metadata server %s: empty response", url);
	rc = SL_OK;
out:
	curl_slist_free_all(hl);
	return rc;
}

static const char *base(const char *env, const char *def)
{
	const char *b = getenv(env);
	return b != NULL && b[0] != '\0' ? b : def;
}

static sl_err collect_gcp(const uint8_t *binding, size_t blen, json_t **out)
{
	sl_err rc = SL_E_ATTEST;
	char hex[2 * 64 + 1], url[1024];
	struct body b = {0};
	static const char *const hdr[] = {"Metadata-Flavor: Google", NULL};
	SL_ENSURE(binding != NULL && blen > 0 && blen <= 64, SL_E_USAGE,
	          "GCP identity: the binding (1..64 bytes) is the audience");
	sl_hex_encode(binding, blen, hex);
	snprintf(url, sizeof(url),
	         "%s/computeMetadata/v1/instance/service-accounts/default/identity?audience=%s"
	         "&format=full",
	         base("SECLAUNCH_GCP_METADATA_URL", GCP_DEFAULT), hex);
	SL_GUARD(fetch(url, false, hdr, &b));
	size_t n = b.len;
	while (n > 0 && (b.p[n - 1] == '\n' || b.p[n - 1] == '\r'))
		n--;
	*out = json_pack("{s:s, s:s%}", "kind", "gcp-jwt", "token", b.p, n);
	SL_ENSURE(*out != NULL, SL_E_ATTEST_FORMAT, "GCP identity: token is not text");
	rc = SL_OK;
out:
	body_free(&b);
	return rc;
}

static sl_err collect_aws(json_t **out)
{
	sl_err rc = SL_E_ATTEST;
	char url[1024], *tokhdr = NULL;
	struct body tok = {0}, doc = {0}, p7 = {0};
	const char *bu = base("SECLAUNCH_AWS_METADATA_URL", AWS_DEFAULT);
	static const char *const ttl[] = {"X-aws-ec2-metadata-token-ttl-seconds: 60", NULL};

	snprintf(url, sizeof(url), "%s/latest/api/token", bu);
	SL_GUARD(fetch(url, true, ttl, &tok));
	tok.p[strcspn(tok.p, "\r\n")] = '\0';
	SL_ENSURE(asprintf(&tokhdr, "X-aws-ec2-metadata-token: %s", tok.p) >= 0, SL_E_NOMEM,
	          "metadata");
	const char *const hdr[] = {tokhdr, NULL};
	snprintf(url, sizeof(url), "%s/latest/dynamic/instance-identity/document", bu);
	SL_GUARD(fetch(url, false, hdr, &doc));
	snprintf(url, sizeof(url), "%s/latest/dynamic/instance-identity/pkcs7", bu);
	SL_GUARD(fetch(url, false, hdr, &p7));
	*out = json_pack("{s:s, s:s%, s:s%}", "kind", "aws-iid", "document", doc.p, doc.len,
	                 "pkcs7", p7.p, p7.len);
	SL_ENSURE(*out != NULL, SL_E_ATTEST_FORMAT, "AWS identity: document is not text");
	rc = SL_OK;
out:
	if (tokhdr != NULL) {
		sl_wipe(tokhdr, strlen(tokhdr));
		free(tokhdr);
	}
	body_free(&tok);
	body_free(&doc);
	body_free(&p7);
	return rc;
}

sl_err sl_identity_collect(const char *provider, const uint8_t *binding, size_t binding_len,
                           json_t **out)
{
	sl_err rc = SL_E_USAGE;
	if (provider == NULL || strcmp(provider, "auto") == 0) {
		rc = collect_gcp(binding, binding_len, out);
		if (rc == SL_OK || rc == SL_E_USAGE)
			return rc;
		char first[512];
		snprintf(first, sizeof(first), "%s", sl_err_detail());
		rc = collect_aws(out);
		if (rc != SL_OK)
			rc = sl_err_wrap(SL_E_ATTEST,
			                 "no cloud metadata server answered (GCP: %s; AWS", first);
		return rc;
	}
	if (strcmp(provider, "gcp") == 0)
		return collect_gcp(binding, binding_len, out);
	if (strcmp(provider, "aws") == 0)
		return collect_aws(out);
	return sl_err_set(SL_E_USAGE, "cloud '%s': want gcp, aws or auto", provider);
}
