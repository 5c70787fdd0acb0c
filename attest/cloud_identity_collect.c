/* Collecting identity documents from the cloud metadata servers over HTTP.
 * Short timeouts and at most one retry: on a machine without a metadata
 * server this must fail fast. Base URLs come from the environment so tests
 * point them at a loopback server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloud_identity_int.h"
#include "seclaunch/http.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

#define GCP_DEFAULT "http://metadata.google.internal"
#define AWS_DEFAULT "http://169.254.169.254"
#define CONNECT_TIMEOUT_MS 1000L
#define TOTAL_TIMEOUT_MS 3000L

/* One request (PUT when put is true), retried once on a transport error. */
static SL_RESULT fetch(const char *url, bool put, const char *const *headers, sl_http_resp *out)
{
	const sl_http_req req = {
	    .what = "metadata server",
	    .url = url,
	    .method = put ? "PUT" : NULL,
	    .headers = headers,
	    .protocols = "http,https",
	    .connect_timeout_ms = CONNECT_TIMEOUT_MS,
	    .total_timeout_ms = TOTAL_TIMEOUT_MS,
	    .max_bytes = SL_IDENTITY_MAX_BYTES,
	    .attempts = 2,
	    .no_proxy = true, /* never via a proxy */
	    .fail = SL_E_ATTEST,
	    .fail_format = SL_E_ATTEST_FORMAT,
	    .want_body = true,
	};
	return sl_http_fetch(&req, out);
}

static const char *base(const char *env, const char *def)
{
	const char *b = getenv(env);
	return b != NULL && b[0] != '\0' ? b : def;
}

static SL_RESULT collect_gcp(const uint8_t *binding, size_t blen, json_t **out)
{
	sl_err rc = SL_E_ATTEST;
	char hex[2 * 64 + 1], url[1024];
	sl_http_resp b = {0};
	static const char *const hdr[] = {"Metadata-Flavor: Google", NULL};
	SL_ENSURE(binding != NULL && blen > 0 && blen <= 64, SL_E_USAGE,
	          "GCP identity: the binding (1..64 bytes) is the audience");
	sl_hex_encode(binding, blen, hex);
	snprintf(url, sizeof(url),
	         "%s/computeMetadata/v1/instance/service-accounts/default/identity?audience=%s"
	         "&format=full",
	         base("SECLAUNCH_GCP_METADATA_URL", GCP_DEFAULT), hex);
	SL_GUARD(fetch(url, false, hdr, &b));
	const char *tok = (const char *)b.body.p;
	size_t n = b.body.len;
	while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r'))
		n--;
	*out = json_pack("{s:s, s:s%}", "kind", "gcp-jwt", "token", tok, n);
	SL_ENSURE(*out != NULL, SL_E_ATTEST_FORMAT, "GCP identity: token is not text");
	rc = SL_OK;
out:
	sl_http_resp_free(&b);
	return rc;
}

static SL_RESULT collect_aws(json_t **out)
{
	sl_err rc = SL_E_ATTEST;
	char url[1024], *tokhdr = NULL;
	sl_http_resp tok = {0}, doc = {0}, p7 = {0};
	const char *bu = base("SECLAUNCH_AWS_METADATA_URL", AWS_DEFAULT);
	static const char *const ttl[] = {"X-aws-ec2-metadata-token-ttl-seconds: 60", NULL};

	snprintf(url, sizeof(url), "%s/latest/api/token", bu);
	SL_GUARD(fetch(url, true, ttl, &tok));
	char *t = (char *)tok.body.p;
	t[strcspn(t, "\r\n")] = '\0';
	SL_ENSURE(asprintf(&tokhdr, "X-aws-ec2-metadata-token: %s", t) >= 0, SL_E_NOMEM,
	          "metadata");
	const char *const hdr[] = {tokhdr, NULL};
	snprintf(url, sizeof(url), "%s/latest/dynamic/instance-identity/document", bu);
	SL_GUARD(fetch(url, false, hdr, &doc));
	snprintf(url, sizeof(url), "%s/latest/dynamic/instance-identity/pkcs7", bu);
	SL_GUARD(fetch(url, false, hdr, &p7));
	*out = json_pack("{s:s, s:s%, s:s%}", "kind", "aws-iid", "document", (char *)doc.body.p,
	                 doc.body.len, "pkcs7", (char *)p7.body.p, p7.body.len);
	SL_ENSURE(*out != NULL, SL_E_ATTEST_FORMAT, "AWS identity: document is not text");
	rc = SL_OK;
out:
	if (tokhdr != NULL) {
		sl_wipe(tokhdr, strlen(tokhdr));
		free(tokhdr);
	}
	sl_http_resp_free(&tok);
	sl_http_resp_free(&doc);
	sl_http_resp_free(&p7);
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
