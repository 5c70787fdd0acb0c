/* One HTTP fetch helper over libcurl, below attest/ and the launcher.
 *
 * Every HTTP request seclaunch makes goes through here or through the
 * capped body sink: a hard size cap (the transfer aborts past it),
 * connect and total timeouts, no redirects, a protocol allow-list, and
 * libcurl failures turned into sl_err with curl's text (sl_err_curl).
 * Bodies are wiped when freed: metadata answers carry identity tokens.
 * No curl type appears here.
 */
#ifndef SECLAUNCH_HTTP_H
#define SECLAUNCH_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

#define SL_HTTP_MAX_DEFAULT (1024 * 1024)

/* A response body collected up to max bytes; p[len] is a NUL when p is set. */
typedef struct sl_http_body {
	uint8_t *p;
	size_t len;
	size_t max;    /* cap in bytes; 0: SL_HTTP_MAX_DEFAULT */
	bool overflow; /* more than max arrived: the transfer was aborted */
} sl_http_body;

/* libcurl write callback (CURLOPT_WRITEFUNCTION) over an sl_http_body given
 * as CURLOPT_WRITEDATA: appends, or aborts the transfer past the cap. */
size_t sl_http_body_write(char *ptr, size_t size, size_t n, void *body);
/* Wipes and frees what was collected; keeps max. */
void sl_http_body_reset(sl_http_body *b);

typedef struct sl_http_req {
	const char *what;           /* names the service in messages ("AMD KDS") */
	const char *url;            /* the scheme must be in protocols */
	const char *method;         /* NULL: GET; "PUT" or "POST" send an empty body */
	const char *const *headers; /* NULL-terminated "Name: value" lines; NULL: none */
	const char *protocols;      /* curl list, NULL: "https" */
	long connect_timeout_ms;    /* 0: 5000 */
	long total_timeout_ms;      /* 0: 30000 */
	size_t max_bytes;           /* 0: SL_HTTP_MAX_DEFAULT */
	unsigned attempts;          /* transport failures are retried up to this; 0: 1 */
	bool no_proxy;              /* never through a proxy (link-local metadata) */
	bool any_status;            /* true: any HTTP status is SL_OK, the caller reads it */
	sl_err fail;                /* transport failure or bad status; 0: SL_E_IO */
	sl_err fail_format;         /* over max_bytes or (with want_body) empty; 0: fail */
	bool want_body;             /* an empty 2xx answer fails */
} sl_http_req;

typedef struct sl_http_resp {
	long status;
	sl_http_body body;
	long long retry_after_s; /* from a 429/503 Retry-After, else 0 */
} sl_http_resp;

/* Performs one request (attempts times on a transport failure). Unless
 * any_status, only a 2xx answer is SL_OK; a 429 names its Retry-After.
 * Errors name what, the URL and curl's text. Free with sl_http_resp_free. */
SL_MUST_USE sl_err sl_http_fetch(const sl_http_req *r, sl_http_resp *out);
void sl_http_resp_free(sl_http_resp *r);

#endif
