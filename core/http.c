/* The HTTP fetch helper (include/seclaunch/http.h). One easy handle per
 * request: callers are rare (metadata servers, vendor collateral), so
 * connection reuse is not worth the shared state. */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/http.h"
#include "seclaunch/secret.h"

size_t sl_http_body_write(char *ptr, size_t size, size_t n, void *body)
{
	sl_http_body *b = body;
	size_t max = b->max != 0 ? b->max : SL_HTTP_MAX_DEFAULT;
	if (n != 0 && size > SIZE_MAX / n) {
		b->overflow = true;
		return 0;
	}
	size_t add = size * n;
	if (add > max - b->len) {
		b->overflow = true;
		return 0; /* aborts the transfer */
	}
	/* grow by copying so the old bytes are wiped, not left behind by realloc */
	uint8_t *np = malloc(b->len + add + 1);
	if (np == NULL)
		return 0;
	if (b->p != NULL) {
		memcpy(np, b->p, b->len);
		sl_wipe(b->p, b->len);
		free(b->p);
	}
	memcpy(np + b->len, ptr, add);
	b->p = np;
	b->len += add;
	b->p[b->len] = '\0';
	return add;
}

void sl_http_body_reset(sl_http_body *b)
{
	if (b->p != NULL)
		sl_wipe(b->p, b->len);
	free(b->p);
	b->p = NULL;
	b->len = 0;
	b->overflow = false;
}

void sl_http_resp_free(sl_http_resp *r)
{
	if (r == NULL)
		return;
	sl_http_body_reset(&r->body);
	r->status = 0;
	r->retry_after_s = 0;
}

static SL_RESULT setup(CURL *c, const sl_http_req *r, struct curl_slist *hl, sl_http_body *b)
{
	sl_err rc = SL_E_INTERNAL;
	const char *what = r->what != NULL ? r->what : "HTTP";
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_URL, r->url), SL_E_INTERNAL, "%s: URL", what);
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR,
	                               r->protocols != NULL ? r->protocols : "https"),
	              SL_E_INTERNAL, "%s: protocols", what);
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L), SL_E_INTERNAL,
	              "%s: redirects", what);
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L), SL_E_INTERNAL, "%s: signals",
	              what);
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
	                               r->connect_timeout_ms > 0 ? r->connect_timeout_ms : 5000L),
	              SL_E_INTERNAL, "%s: connect timeout", what);
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
	                               r->total_timeout_ms > 0 ? r->total_timeout_ms : 30000L),
	              SL_E_INTERNAL, "%s: timeout", what);
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)b->max),
	              SL_E_INTERNAL, "%s: size cap", what);
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sl_http_body_write), SL_E_INTERNAL,
	              "%s: write callback", what);
	SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_WRITEDATA, b), SL_E_INTERNAL, "%s: write data",
	              what);
	if (hl != NULL)
		SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl), SL_E_INTERNAL,
		              "%s: headers", what);
	if (r->no_proxy)
		SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_NOPROXY, "*"), SL_E_INTERNAL, "%s: proxy",
		              what);
	if (r->method != NULL && strcmp(r->method, "GET") != 0) {
		SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method), SL_E_INTERNAL,
		              "%s: method", what);
		SL_GUARD_CURL(curl_easy_setopt(c, CURLOPT_POSTFIELDS, ""), SL_E_INTERNAL,
		              "%s: body", what);
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_http_fetch(const sl_http_req *r, sl_http_resp *out)
{
	const char *what = r->what != NULL ? r->what : "HTTP";
	sl_err fail = r->fail != SL_OK ? r->fail : SL_E_IO;
	sl_err fail_format = r->fail_format != SL_OK ? r->fail_format : fail;
	unsigned attempts = r->attempts > 0 ? r->attempts : 1;
	sl_err rc = fail;
	CURL *c = NULL;
	struct curl_slist *hl = NULL;
	CURLcode cc = CURLE_OK;

	memset(out, 0, sizeof(*out));
	out->body.max = r->max_bytes != 0 ? r->max_bytes : SL_HTTP_MAX_DEFAULT;
	SL_ENSURE(r->url != NULL, SL_E_INTERNAL, "%s: no URL", what);
	for (size_t i = 0; r->headers != NULL && r->headers[i] != NULL; i++) {
		struct curl_slist *n = curl_slist_append(hl, r->headers[i]);
		SL_ENSURE(n != NULL, SL_E_NOMEM, "%s request headers", what);
		hl = n;
	}
	for (unsigned attempt = 0; attempt < attempts; attempt++) {
		sl_http_body_reset(&out->body);
		out->status = 0;
		c = curl_easy_init();
		SL_ENSURE(c != NULL, SL_E_NOMEM, "%s: curl handle", what);
		SL_GUARD(setup(c, r, hl, &out->body));
		cc = curl_easy_perform(c);
		if (cc == CURLE_OK) {
			curl_off_t retry = 0;
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
			if (curl_easy_getinfo(c, CURLINFO_RETRY_AFTER, &retry) == CURLE_OK)
				out->retry_after_s = (long long)retry;
		}
		curl_easy_cleanup(c);
		c = NULL;
		if (cc == CURLE_OK || out->body.overflow || cc == CURLE_FILESIZE_EXCEEDED)
			break;
	}
	SL_ENSURE(!out->body.overflow && cc != CURLE_FILESIZE_EXCEEDED, fail_format,
	          "%s %s: answer larger than %zu bytes", what, r->url, out->body.max);
	if (cc != CURLE_OK) {
		rc = sl_err_curl(fail, (int)cc, "%s %s", what, r->url);
		goto out;
	}
	if (!r->any_status) {
		if (out->status == 429)
			SL_FAIL(fail, "%s %s: rate limited (429), retry after %lld s", what, r->url,
			        out->retry_after_s);
		SL_ENSURE(out->status >= 200 && out->status < 300, fail, "%s %s: HTTP %ld", what,
		          r->url, out->status);
	}
	SL_ENSURE(!r->want_body || out->body.len > 0, fail_format, "%s %s: empty response", what,
	          r->url);
	rc = SL_OK;
out:
	if (c != NULL)
		curl_easy_cleanup(c);
	curl_slist_free_all(hl);
	if (rc != SL_OK)
		sl_http_resp_free(out);
	return rc;
}
