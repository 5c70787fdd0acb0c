/* Datasets in object storage (remote.h): URL forms, credentials, and
 * parallel range requests with libcurl's multi interface. */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "remote.h"
#include "remote_int.h"
#include "seclaunch/secret.h"

#define DEFAULT_RANGE ((size_t)8 << 20)
#define MAX_CONNS 64
#define RATE_HIST 64 /* seconds of rate history, more than the longest window */

bool sl_remote_is_url(const char *s)
{
	return strncmp(s, "https://", 8) == 0 || strncmp(s, "s3://", 5) == 0 ||
	       strncmp(s, "gs://", 5) == 0;
}

const char *sl_remote_name(const sl_remote *r)
{
	return r->name;
}

/* The deadline, the minimum rate and its window, from an option (env
 * NULL) or the variable env: a usage error naming either. */
static SL_RESULT limit_option(sl_remote_opts *o, int key, const char *arg, const char *env)
{
	static const struct {
		int key;
		const char *opt, *var;
		unsigned long long lo, hi;
	} t[] = {
	    {SL_REMOTE_O_DEADLINE, "--remote-deadline", "SECLAUNCH_REMOTE_DEADLINE_S", 1, 86400},
	    {SL_REMOTE_O_MIN_RATE, "--remote-min-rate", "SECLAUNCH_REMOTE_MIN_RATE", 0,
	     (unsigned long long)1 << 40},
	    {SL_REMOTE_O_RATE_WINDOW, "--remote-rate-window", "SECLAUNCH_REMOTE_RATE_WINDOW_S", 1,
	     RATE_HIST - 4},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (t[i].key != key)
			continue;
		char *end;
		errno = 0;
		unsigned long long v = strtoull(arg, &end, 10);
		if (errno != 0 || end == arg || *end != '\0' || arg[0] == '-' || v < t[i].lo ||
		    v > t[i].hi)
			return env != NULL ? sl_err_set(SL_E_USAGE, "%s=%s: must be %llu..%llu",
			                                t[i].var, arg, t[i].lo, t[i].hi)
			                   : sl_err_set(SL_E_USAGE, "%s %s: must be %llu..%llu",
			                                t[i].opt, arg, t[i].lo, t[i].hi);
		if (key == SL_REMOTE_O_DEADLINE)
			o->deadline_s = (long)v;
		else if (key == SL_REMOTE_O_RATE_WINDOW)
			o->rate_window_s = (long)v;
		else {
			o->min_rate = v;
			o->min_rate_set = true;
		}
		return SL_OK;
	}
	return sl_err_set(SL_E_INTERNAL, "limit option %d", key);
}

int sl_remote_option(sl_remote_opts *o, int key, const char *arg)
{
	char *end;
	unsigned long v;

	switch (key) {
	case SL_REMOTE_O_CA_FILE:
		o->ca_file = arg;
		return 1;
	case SL_REMOTE_O_S3_ENDPOINT:
		o->s3_endpoint = arg;
		return 1;
	case SL_REMOTE_O_CONNECTIONS:
		errno = 0;
		v = strtoul(arg, &end, 10);
		if (errno != 0 || end == arg || *end != '\0' || v < 1 || v > MAX_CONNS) {
			(void)sl_err_set(SL_E_USAGE, "--connections %s: must be 1..%d", arg,
			                 MAX_CONNS);
			return -1;
		}
		o->connections = (unsigned)v;
		return 1;
	case SL_REMOTE_O_DEADLINE:
	case SL_REMOTE_O_MIN_RATE:
	case SL_REMOTE_O_RATE_WINDOW:
		return limit_option(o, key, arg, NULL) == SL_OK ? 1 : -1;
	default:
		return 0;
	}
}

void sl_remote_set_abort(sl_remote *r, const atomic_bool *flag)
{
	r->abort = flag;
}

void sl_remote_free(sl_remote *r)
{
	if (r == NULL)
		return;
	sl_secret_free(r->userpwd);
	sl_secret_free(r->header);
	free(r);
}

static SL_RESULT secret_str(const char *s, sl_secret **out)
{
	sl_err rc = sl_secret_new(strlen(s) + 1, out);
	if (rc == SL_OK)
		memcpy(sl_secret_data(*out), s, strlen(s) + 1);
	return rc;
}

static const char *sstr(sl_secret *s)
{
	return (const char *)sl_secret_data(s);
}

/* Object names and prefixes: unreserved characters only, no "." or ".."
 * segment, so a URL never needs escaping and never climbs. */
static bool seg_ok(const char *s, size_t n)
{
	if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.' ||
		      s[i] == '~'))
			return false;
	return true;
}

static bool name_ok(const char *s)
{
	return seg_ok(s, strlen(s));
}

/* "" or "seg/seg/" */
static bool prefix_ok(const char *s)
{
	while (*s != '\0') {
		const char *slash = strchr(s, '/');
		if (slash == NULL || !seg_ok(s, (size_t)(slash - s)))
			return false;
		s = slash + 1;
	}
	return true;
}

static bool bucket_ok(const char *b, size_t n)
{
	if (n < 3 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = b[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		      c == '_'))
			return false;
	}
	return true;
}

/* ---- small requests (metadata services, the manifest) ----------------- */

struct membuf {
	uint8_t *p;
	size_t len, max;
	bool over;
};

static size_t mem_write(char *data, size_t sz, size_t n, void *ctx)
{
	struct membuf *b = ctx;
	size_t k = sz * n;
	if (b->len + k > b->max) {
		b->over = true;
		return 0;
	}
	uint8_t *np = realloc(b->p, b->len + k + 1);
	if (np == NULL)
		return 0;
	b->p = np;
	memcpy(b->p + b->len, data, k);
	b->len += k;
	b->p[b->len] = '\0';
	return k;
}

/* What stops a request that is alive but not getting anywhere, checked at
 * least once a second (libcurl's progress callback):
 *   stall     no new byte for stall_s seconds (libcurl's low-speed check
 *             averages over several seconds, so a trickle of a few bytes
 *             would keep a dead transfer alive much longer);
 *   rate      fewer than min_rate bytes a second on average over the last
 *             window_s seconds (a store dripping a byte a second passes the
 *             stall rule forever);
 *   deadline  the request has run for deadline_s plus the time its own
 *             bytes take at min_rate (a big range or upload is not cut
 *             short by a deadline its rate already satisfies).
 * A request stopped so is retried like a dropped connection. */

enum why_stopped { W_NONE, W_STALL, W_SLOW, W_DEADLINE };

struct watch {
	long stall_s, window_s, deadline_s;
	uint64_t min_rate;
	curl_off_t seen;
	struct timespec start, last;
	curl_off_t hist[RATE_HIST]; /* bytes seen by the end of second i (mod RATE_HIST) */
	long hist_s;                /* the last second recorded */
	enum why_stopped fired;
};

static int watch_cb(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                    curl_off_t ulnow)
{
	struct watch *w = ctx;
	struct timespec now;
	(void)dltotal;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long el = (long)(now.tv_sec - w->start.tv_sec);
	/* bytes either way: an upload (PUT of an output) moves too */
	curl_off_t total = dlnow + ulnow;
	for (long s = w->hist_s + 1; s <= el; s++)
		w->hist[s % RATE_HIST] = w->hist[w->hist_s % RATE_HIST];
	w->hist_s = el > w->hist_s ? el : w->hist_s;
	w->hist[el % RATE_HIST] = total;
	if (el >= w->deadline_s) {
		w->fired = W_DEADLINE;
		return 1;
	}
	if (total != w->seen) {
		w->seen = total;
		w->last = now;
	} else if (now.tv_sec - w->last.tv_sec >= w->stall_s) {
		w->fired = W_STALL;
		return 1;
	}
	/* an upload sent whole waits for the store's answer: only the stall
	 * rule and the deadline apply then */
	bool waiting = ultotal > 0 && ulnow >= ultotal;
	if (w->min_rate > 0 && !waiting && el >= w->window_s) {
		curl_off_t before = w->hist[(el - w->window_s) % RATE_HIST];
		if ((uint64_t)(total - before) < w->min_rate * (uint64_t)w->window_s) {
			w->fired = W_SLOW;
			return 1;
		}
	}
	return 0;
}

/* "stalled (no data for 30 s)", "slower than 65536 B/s over 10 s", ... */
static const char *watch_why(const struct watch *w, char *buf, size_t n)
{
	switch (w->fired) {
	case W_STALL:
		snprintf(buf, n, "stalled (no data for %ld s)", w->stall_s);
		break;
	case W_SLOW:
		snprintf(buf, n, "slower than %llu B/s over %ld s", (unsigned long long)w->min_rate,
		         w->window_s);
		break;
	case W_DEADLINE:
		snprintf(buf, n, "not done within its deadline of %ld s", w->deadline_s);
		break;
	case W_NONE:
		snprintf(buf, n, "not stopped");
		break;
	}
	return buf;
}

static long stall_of(const sl_remote *r)
{
	return r != NULL && r->o.stall_s > 0 ? r->o.stall_s : 30;
}

/* bytes: what the request moves (a range, an upload; 0: a small answer) */
static void watch_init(const sl_remote *r, uint64_t bytes, struct watch *w)
{
	*w = (struct watch){.stall_s = stall_of(r),
	                    .window_s =
	                        r != NULL && r->o.rate_window_s > 0 ? r->o.rate_window_s : 10,
	                    .deadline_s = r != NULL && r->o.deadline_s > 0 ? r->o.deadline_s : 120,
	                    .min_rate = r == NULL ? SL_REMOTE_MIN_RATE_DEFAULT : r->o.min_rate};
	if (r != NULL && !r->o.min_rate_set)
		w->min_rate = SL_REMOTE_MIN_RATE_DEFAULT;
	if (w->min_rate > 0)
		w->deadline_s += (long)(bytes / w->min_rate);
	clock_gettime(CLOCK_MONOTONIC, &w->start);
	w->last = w->start;
}

static bool has_header(const struct curl_slist *l, const char *prefix)
{
	for (; l != NULL; l = l->next)
		if (strncasecmp(l->data, prefix, strlen(prefix)) == 0)
			return true;
	return false;
}

static SL_RESULT common_setopts(const sl_remote *r, CURL *h, const char *url, bool tls_only,
                                struct curl_slist **hdrs, struct watch *w, uint64_t bytes)
{
	sl_err rc = SL_E_INTERNAL;
	long stall = stall_of(r);

	watch_init(r, bytes, w);
	SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, watch_cb), SL_E_INTERNAL,
	              "stall");
	SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_XFERINFODATA, w), SL_E_INTERNAL, "stall");
	SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L), SL_E_INTERNAL, "stall");

	SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_URL, url), SL_E_INTERNAL, "%s", url);
	SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, tls_only ? "https" : "http,https"),
	              SL_E_INTERNAL, "protocols");
	SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L), SL_E_INTERNAL, "redirects");
	SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L), SL_E_INTERNAL, "nosignal");
	SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L), SL_E_INTERNAL, "verify");
	SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L), SL_E_INTERNAL, "verify");
	SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L), SL_E_INTERNAL, "timeout");
	/* a backstop, and what makes libcurl look at an idle transfer each second */
	SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L), SL_E_INTERNAL, "stall");
	SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 2 * stall), SL_E_INTERNAL,
	              "stall");
	SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS),
	              SL_E_INTERNAL, "http2");
	if (r != NULL && r->o.ca_file != NULL)
		SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_CAINFO, r->o.ca_file), SL_E_INTERNAL,
		              "--ca-file");
	if (r != NULL && r->sigv4[0] != '\0') {
		SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_AWS_SIGV4, r->sigv4), SL_E_INTERNAL,
		              "sigv4");
		SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_USERPWD, sstr(r->userpwd)), SL_E_INTERNAL,
		              "credentials");
	}
	if (r != NULL && r->sigv4[0] != '\0' && !has_header(*hdrs, "x-amz-content-sha256:")) {
		/* S3 wants the payload's hash as a signed header; a GET has none */
		struct curl_slist *n = curl_slist_append(
		    *hdrs, "x-amz-content-sha256: "
		           "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
		SL_ENSURE(n != NULL, SL_E_NOMEM, "request headers");
		*hdrs = n;
	}
	if (r != NULL && r->header != NULL) {
		struct curl_slist *n = curl_slist_append(*hdrs, sstr(r->header));
		SL_ENSURE(n != NULL, SL_E_NOMEM, "request headers");
		*hdrs = n;
	}
	if (*hdrs != NULL)
		SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs), SL_E_INTERNAL,
		              "headers");
	rc = SL_OK;
out:
	return rc;
}

static bool retryable_status(long st)
{
	return st == 429 || st >= 500;
}

static bool retryable_curl(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return true;
	default:
		return false;
	}
}

void sl_remote_backoff(unsigned attempt)
{
	uint32_t base = 100u << (attempt < 6 ? attempt : 6), jitter;
	sl_random(&jitter, sizeof(jitter));
	usleep((useconds_t)(base + jitter % (base + 1)) * 1000);
}

static size_t up_read(char *buf, size_t sz, size_t n, void *ctx)
{
	struct sl_remote_upsrc *u = ctx;
	size_t want = sz * n;
	if (u->size - u->off < want)
		want = (size_t)(u->size - u->off);
	if (want == 0)
		return 0;
	ssize_t got = pread(u->fd, buf, want, (off_t)(u->base + u->off));
	if (got <= 0) {
		u->io_error = true;
		return CURL_READFUNC_ABORT;
	}
	u->off += (uint64_t)got;
	return (size_t)got;
}

/* The ETag header of the answer (the last one, of the final answer). */
static size_t etag_header(char *data, size_t sz, size_t n, void *ctx)
{
	struct sl_remote_answer *a = ctx;
	size_t k = sz * n;
	if (k >= 5 && strncmp(data, "HTTP/", 5) == 0)
		a->etag[0] = '\0';
	if (k > 5 && strncasecmp(data, "etag:", 5) == 0) {
		const char *v = data + 5;
		size_t vl = k - 5;
		while (vl > 0 && (*v == ' ' || *v == '\t')) {
			v++;
			vl--;
		}
		while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		if (vl >= sizeof(a->etag))
			vl = 0; /* too long: none, which the caller refuses */
		memcpy(a->etag, v, vl);
		a->etag[vl] = '\0';
	}
	return k;
}

static const char *status_hint(long st)
{
	return st == 403               ? " (access denied: check the credentials)"
	       : st == 404             ? " (not found)"
	       : st >= 300 && st < 400 ? " (redirects are not followed)"
	                               : "";
}

/* One request on one handle, with the retries every request has: backoff
 * and jitter on connection errors, 429, 5xx and a stopped watch (never on
 * other 4xx). A GET or PUT of a small answer (at most max bytes, kept),
 * optionally uploading up->size bytes of up->fd from up->base; success is
 * 200, or for an upload or a DELETE 200, 201 or 204 (an upload only once
 * every byte was sent); ans (optional) gets the status and the ETag. r == NULL: a metadata
 * service (plain HTTP allowed, a short connect timeout, one retry). */
sl_err sl_remote_request(const sl_remote *r, const char *url, bool tls_only, const char *method,
                         const char *const *headers, const struct sl_remote_upsrc *up, size_t max,
                         const char *what, struct sl_remote_answer *ans, uint8_t **out,
                         size_t *out_len)
{
	sl_err rc = SL_E_REMOTE_UNREACHABLE;
	/* a metadata service answers at once or is not there (off a cloud
	 * machine): one retry, not a minute of them */
	unsigned retries = r == NULL ? 1 : r->o.retries > 0 ? r->o.retries : 4;
	struct curl_slist *hdrs = NULL;
	struct membuf b = {.max = max};
	struct watch w;
	CURL *h = NULL;
	char why[96];

	for (unsigned attempt = 0;; attempt++) {
		long st = 0;
		struct sl_remote_upsrc u =
		    up != NULL
		        ? (struct sl_remote_upsrc){.fd = up->fd, .base = up->base, .size = up->size}
		        : (struct sl_remote_upsrc){0};
		if (b.p != NULL)
			sl_wipe(b.p, b.len);
		free(b.p);
		b = (struct membuf){.max = max};
		curl_slist_free_all(hdrs);
		hdrs = NULL;
		curl_easy_cleanup(h);
		h = curl_easy_init();
		SL_ENSURE(h != NULL, SL_E_NOMEM, "curl");
		for (size_t i = 0; headers != NULL && headers[i] != NULL; i++) {
			struct curl_slist *n = curl_slist_append(hdrs, headers[i]);
			SL_ENSURE(n != NULL, SL_E_NOMEM, "headers");
			hdrs = n;
		}
		SL_GUARD(common_setopts(r, h, url, tls_only, &hdrs, &w, up != NULL ? up->size : 0));
		if (r == NULL)
			SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 2L),
			              SL_E_INTERNAL, "timeout");
		SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, mem_write), SL_E_INTERNAL,
		              "write");
		SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_WRITEDATA, &b), SL_E_INTERNAL, "write");
		if (up != NULL) {
			SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_UPLOAD, 1L), SL_E_INTERNAL,
			              "upload");
			SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_READFUNCTION, up_read),
			              SL_E_INTERNAL, "read");
			SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_READDATA, &u), SL_E_INTERNAL,
			              "read");
			SL_GUARD_CURL(
			    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)up->size),
			    SL_E_INTERNAL, "size");
			if (strcmp(method, "PUT") != 0)
				SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method),
				              SL_E_INTERNAL, "method");
		} else if (strcmp(method, "POST") == 0) {
			SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L), SL_E_INTERNAL,
			              "method");
			SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_POSTFIELDS, ""), SL_E_INTERNAL,
			              "method");
		} else if (strcmp(method, "GET") != 0) {
			SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method),
			              SL_E_INTERNAL, "method");
		}
		if (ans != NULL) {
			ans->etag[0] = '\0';
			SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, etag_header),
			              SL_E_INTERNAL, "header");
			SL_GUARD_CURL(curl_easy_setopt(h, CURLOPT_HEADERDATA, ans), SL_E_INTERNAL,
			              "header");
		}
		CURLcode cc = curl_easy_perform(h);
		(void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
		SL_ENSURE(!u.io_error, SL_E_IO, "%s: reading the local file: %s", what,
		          strerror(errno));
		SL_ENSURE(!b.over, SL_E_TOO_LARGE, "%s (%s): the answer exceeds %zu bytes", what,
		          url, max);
		bool done = cc == CURLE_OK &&
		            (st == 200 || ((up != NULL || strcmp(method, "DELETE") == 0) &&
		                           (st == 201 || st == 204)));
		if (ans != NULL)
			ans->status = st;
		if (done) {
			SL_ENSURE(up == NULL || u.off == up->size, SL_E_REMOTE_UNREACHABLE,
			          "%s: the store answered %ld after %llu of %llu bytes", what, st,
			          (unsigned long long)u.off, (unsigned long long)up->size);
			break;
		}
		bool stopped = w.fired != W_NONE;
		bool again =
		    stopped || (cc != CURLE_OK ? retryable_curl(cc) : retryable_status(st));
		const char *ex = again ? " (retries exhausted)" : "";
		if (!again || attempt >= retries) {
			if (stopped)
				SL_FAIL(SL_E_REMOTE_UNREACHABLE, "%s: %s%s", what,
				        watch_why(&w, why, sizeof(why)), ex);
			if (cc != CURLE_OK)
				SL_FAIL(SL_E_REMOTE_UNREACHABLE, "%s: %s%s", what,
				        curl_easy_strerror(cc), ex);
			SL_FAIL(st >= 400 && st < 500 && st != 429 ? SL_E_REMOTE_REFUSED
			                                           : SL_E_REMOTE_UNREACHABLE,
			        "%s: HTTP %ld%s%s", what, st, status_hint(st), ex);
		}
		if (r != NULL && !r->o.quiet)
			fprintf(stderr, "seclaunch: %s: %s, retrying\n", what,
			        stopped          ? watch_why(&w, why, sizeof(why))
			        : cc != CURLE_OK ? curl_easy_strerror(cc)
			                         : "server error");
		sl_remote_backoff(attempt);
	}
	if (out != NULL) {
		*out = b.p;
		*out_len = b.len;
		b.p = NULL;
	}
	rc = SL_OK;
out:
	if (b.p != NULL)
		sl_wipe(b.p, b.len);
	free(b.p);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return rc;
}

static SL_RESULT simple_request(const sl_remote *r, const char *url, bool tls_only,
                                const char *method, const char *const *headers, size_t max,
                                const char *what, uint8_t **out, size_t *out_len)
{
	return sl_remote_request(r, url, tls_only, method, headers, NULL, max, what, NULL, out,
	                         out_len);
}

/* ---- credentials ------------------------------------------------------ */

/* The AWS shared credentials file: core's one reader (seclaunch/aws.h),
 * which keeps the key-file rule (owner-only, not a link; refused, exit 2). */
static SL_RESULT aws_credentials_file(char **id, char **secret, char **token)
{
	sl_aws_creds c = {0};
	sl_err rc = sl_aws_creds_file(&c);
	if (rc != SL_OK)
		return rc;
	*id = c.id;
	*secret = c.secret;
	*token = c.token;
	return SL_OK;
}

/* IMDSv2: a session token by PUT, the role's name, then its credentials. */
static SL_RESULT aws_imds(const sl_remote *r, char **id, char **secret, char **token)
{
	sl_err rc = SL_E_REMOTE_UNREACHABLE;
	const char *base =
	    r->o.aws_metadata_url != NULL ? r->o.aws_metadata_url : "http://169.254.169.254";
	char url[1024], hdr[2048];
	uint8_t *tok = NULL, *role = NULL, *cred = NULL;
	size_t tl = 0, rl = 0, cl = 0;
	const char *ttl[] = {"X-aws-ec2-metadata-token-ttl-seconds: 300", NULL};

	snprintf(url, sizeof(url), "%s/latest/api/token", base);
	SL_GUARD(simple_request(NULL, url, false, "PUT", ttl, 4096, url, &tok, &tl));
	SL_ENSURE(tl > 0 && strchr((char *)tok, '\n') == NULL && strchr((char *)tok, '\r') == NULL,
	          SL_E_REMOTE_UNREACHABLE, "AWS instance metadata: a malformed token");
	snprintf(hdr, sizeof(hdr), "X-aws-ec2-metadata-token: %s", (char *)tok);
	const char *h[] = {hdr, NULL};
	snprintf(url, sizeof(url), "%s/latest/meta-data/iam/security-credentials/", base);
	SL_GUARD(simple_request(NULL, url, false, "GET", h, 4096, url, &role, &rl));
	char *nl = strchr((char *)role, '\n');
	if (nl != NULL)
		*nl = '\0';
	SL_ENSURE(name_ok((char *)role), SL_E_REMOTE_UNREACHABLE,
	          "AWS instance metadata: no usable role name");
	snprintf(url, sizeof(url), "%s/latest/meta-data/iam/security-credentials/%s", base,
	         (char *)role);
	SL_GUARD(simple_request(NULL, url, false, "GET", h, 65536, url, &cred, &cl));
	sl_remote_creds c = {0};
	SL_GUARD(sl_remote_parse_imds(cred, cl, &c));
	*id = c.id;
	*secret = c.secret;
	*token = c.token;
	rc = SL_OK;
out:
	if (tok != NULL)
		sl_wipe(tok, tl);
	if (cred != NULL)
		sl_wipe(cred, cl);
	sl_wipe(hdr, sizeof(hdr));
	free(tok);
	free(role);
	free(cred);
	return rc;
}

static void free_wiped(char *s)
{
	if (s != NULL)
		sl_wipe(s, strlen(s));
	free(s);
}

static SL_RESULT s3_credentials(sl_remote *r)
{
	sl_err rc = SL_E_REMOTE_REFUSED;
	char *id = NULL, *secret = NULL, *token = NULL, *up = NULL, *hdr = NULL;
	const char *e_id = getenv("AWS_ACCESS_KEY_ID"), *e_sec = getenv("AWS_SECRET_ACCESS_KEY");

	if (e_id != NULL && e_sec != NULL) {
		id = strdup(e_id);
		secret = strdup(e_sec);
		if (getenv("AWS_SESSION_TOKEN") != NULL)
			token = strdup(getenv("AWS_SESSION_TOKEN"));
	} else {
		SL_GUARD(aws_credentials_file(&id, &secret, &token));
		if (id == NULL || secret == NULL) {
			free_wiped(id);
			free_wiped(secret);
			free_wiped(token);
			id = secret = token = NULL;
			rc = aws_imds(r, &id, &secret, &token);
			if (rc != SL_OK)
				SL_FAIL(
				    SL_E_REMOTE_REFUSED,
				    "%s: no AWS credentials (AWS_ACCESS_KEY_ID / "
				    "AWS_SECRET_ACCESS_KEY, the shared credentials file, or the "
				    "instance metadata service: %s)",
				    r->name, sl_err_detail());
		}
	}
	SL_ENSURE(id != NULL && secret != NULL && strchr(id, ':') == NULL, SL_E_NOMEM,
	          "AWS credentials");
	SL_ENSURE(asprintf(&up, "%s:%s", id, secret) > 0, SL_E_NOMEM, "AWS credentials");
	SL_GUARD(secret_str(up, &r->userpwd));
	if (token != NULL) {
		SL_ENSURE(strpbrk(token, "\r\n") == NULL, SL_E_INPUT,
		          "AWS session token: holds a line break");
		SL_ENSURE(asprintf(&hdr, "x-amz-security-token: %s", token) > 0, SL_E_NOMEM,
		          "AWS credentials");
		SL_GUARD(secret_str(hdr, &r->header));
	}
	rc = SL_OK;
out:
	free_wiped(id);
	free_wiped(secret);
	free_wiped(token);
	free_wiped(up);
	free_wiped(hdr);
	return rc;
}

static SL_RESULT gcs_credentials(sl_remote *r)
{
	sl_err rc = SL_E_REMOTE_REFUSED;
	const char *tok = getenv("GOOGLE_OAUTH_ACCESS_TOKEN");
	char *md_tok = NULL;
	const char *hid = getenv("SECLAUNCH_GCS_HMAC_ID"),
	           *hsec = getenv("SECLAUNCH_GCS_HMAC_SECRET");
	char *hdr = NULL, *up = NULL;
	uint8_t *ans = NULL;
	size_t al = 0;

	if (hid != NULL && hsec != NULL) {
		snprintf(r->sigv4, sizeof(r->sigv4), "aws:amz:auto:s3");
		SL_ENSURE(asprintf(&up, "%s:%s", hid, hsec) > 0, SL_E_NOMEM, "GCS HMAC key");
		SL_GUARD(secret_str(up, &r->userpwd));
		rc = SL_OK;
		goto out;
	}
	if (tok == NULL) {
		const char *base = r->o.gcp_metadata_url != NULL
		                       ? r->o.gcp_metadata_url
		                       : "http://metadata.google.internal";
		char url[1024];
		const char *h[] = {"Metadata-Flavor: Google", NULL};
		snprintf(url, sizeof(url),
		         "%s/computeMetadata/v1/instance/service-accounts/default/token", base);
		rc = simple_request(NULL, url, false, "GET", h, 65536, url, &ans, &al);
		if (rc != SL_OK)
			SL_FAIL(SL_E_REMOTE_REFUSED,
			        "%s: no GCS credentials (GOOGLE_OAUTH_ACCESS_TOKEN, "
			        "SECLAUNCH_GCS_HMAC_ID/SECRET, or the metadata server: %s)",
			        r->name, sl_err_detail());
		SL_GUARD(sl_remote_parse_gcp_token(ans, al, &md_tok));
		tok = md_tok;
	}
	SL_ENSURE(strpbrk(tok, "\r\n") == NULL, SL_E_INPUT, "GCS token: holds a line break");
	SL_ENSURE(asprintf(&hdr, "Authorization: Bearer %s", tok) > 0, SL_E_NOMEM, "GCS token");
	SL_GUARD(secret_str(hdr, &r->header));
	rc = SL_OK;
out:
	if (ans != NULL)
		sl_wipe(ans, al);
	free(ans);
	free_wiped(md_tok);
	free_wiped(hdr);
	free_wiped(up);
	return rc;
}

/* ---- URLs ------------------------------------------------------------- */

static bool host_is_address(const char *host, size_t n)
{
	if (n == 9 && strncmp(host, "localhost", 9) == 0)
		return true;
	if (n > 0 && host[0] == '[')
		return true;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)host[i]) && host[i] != '.')
			return false;
	return n > 0;
}

/* Endpoints of the metadata services and of GCS, the stall timeout, the
 * deadline and the minimum rate, the retries, the part size, the multipart
 * threshold and the range size, from the
 * environment when the caller set none: for tests
 * against local servers (and for a metadata proxy), not options a user
 * needs. */
sl_err sl_remote_env_num(const char *name, uint64_t min, uint64_t max, uint64_t *v)
{
	const char *s = getenv(name);
	char *end = NULL;
	if (s == NULL)
		return SL_OK;
	errno = 0;
	unsigned long long n = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || n < min || n > max)
		return sl_err_set(SL_E_USAGE, "%s=%s: must be %llu..%llu", name, s,
		                  (unsigned long long)min, (unsigned long long)max);
	*v = n;
	return SL_OK;
}

static SL_RESULT env_overrides(sl_remote_opts *o)
{
	const char *v;
	if (o->aws_metadata_url == NULL)
		o->aws_metadata_url = getenv("SECLAUNCH_AWS_METADATA_URL");
	if (o->gcp_metadata_url == NULL)
		o->gcp_metadata_url = getenv("SECLAUNCH_GCP_METADATA_URL");
	if (o->gcs_endpoint == NULL)
		o->gcs_endpoint = getenv("SECLAUNCH_GCS_ENDPOINT");
	if (o->stall_s == 0 && (v = getenv("SECLAUNCH_REMOTE_STALL_S")) != NULL) {
		char *end;
		errno = 0;
		long n = strtol(v, &end, 10);
		if (errno != 0 || end == v || *end != '\0' || n < 1 || n > 3600)
			return sl_err_set(SL_E_USAGE,
			                  "SECLAUNCH_REMOTE_STALL_S=%s: must be 1..3600", v);
		o->stall_s = n;
	}
	if (o->deadline_s == 0 && (v = getenv("SECLAUNCH_REMOTE_DEADLINE_S")) != NULL) {
		sl_err e = limit_option(o, SL_REMOTE_O_DEADLINE, v, "env");
		if (e != SL_OK)
			return e;
	}
	if (!o->min_rate_set && (v = getenv("SECLAUNCH_REMOTE_MIN_RATE")) != NULL) {
		sl_err e = limit_option(o, SL_REMOTE_O_MIN_RATE, v, "env");
		if (e != SL_OK)
			return e;
	}
	if (o->rate_window_s == 0 && (v = getenv("SECLAUNCH_REMOTE_RATE_WINDOW_S")) != NULL) {
		sl_err e = limit_option(o, SL_REMOTE_O_RATE_WINDOW, v, "env");
		if (e != SL_OK)
			return e;
	}
	if (o->retries == 0) {
		uint64_t n = 0;
		sl_err e = sl_remote_env_num("SECLAUNCH_REMOTE_RETRIES", 1, 20, &n);
		if (e != SL_OK)
			return e;
		o->retries = (unsigned)n;
	}
	if (o->part_size == 0) {
		sl_err e = sl_remote_env_num("SECLAUNCH_REMOTE_PART_SIZE", SL_REMOTE_PART_MIN,
		                             SL_REMOTE_PART_MAX, &o->part_size);
		if (e != SL_OK)
			return e;
	}
	if (o->multipart_min == 0) {
		sl_err e = sl_remote_env_num("SECLAUNCH_REMOTE_MULTIPART_MIN", SL_REMOTE_PART_MIN,
		                             SL_REMOTE_PART_MAX, &o->multipart_min);
		if (e != SL_OK)
			return e;
	}
	if (o->range_size == 0) {
		uint64_t n = 0;
		sl_err e = sl_remote_env_num("SECLAUNCH_REMOTE_RANGE", 4096, (uint64_t)1 << 30, &n);
		if (e != SL_OK)
			return e;
		o->range_size = (size_t)n;
	}
	return SL_OK;
}

sl_err sl_remote_open(const char *url, const sl_remote_opts *o, sl_remote **out)
{
	sl_err rc = SL_E_INPUT;
	sl_remote *r = calloc(1, sizeof(*r));
	size_t n = strlen(url);

	SL_ENSURE(r != NULL, SL_E_NOMEM, "remote");
	r->o = *o;
	SL_GUARD(env_overrides(&r->o));
	SL_ENSURE(n + 2 < sizeof(r->name), SL_E_INPUT, "%.64s...: URL too long", url);
	snprintf(r->name, sizeof(r->name), "%s%s", url, url[n - 1] == '/' ? "" : "/");
	if (strncmp(url, "https://", 8) == 0) {
		r->kind = K_HTTPS;
		const char *path = strchr(r->name + 8, '/');
		SL_ENSURE(path != NULL && path > r->name + 8 && prefix_ok(path + 1), SL_E_INPUT,
		          "%s: the path may hold only letters, digits, -._~ and /", r->name);
		snprintf(r->base, sizeof(r->base), "%s", r->name);
	} else {
		bool s3 = strncmp(url, "s3://", 5) == 0;
		const char *b = r->name + 5, *slash = strchr(b, '/');
		SL_ENSURE(s3 || strncmp(url, "gs://", 5) == 0, SL_E_INPUT,
		          "%s: not an https://, s3:// or gs:// URL", url);
		size_t bl = (size_t)(slash - b);
		SL_ENSURE(bucket_ok(b, bl), SL_E_INPUT,
		          "%s: bucket name must be 3..63 of [a-z0-9.-_]", r->name);
		SL_ENSURE(prefix_ok(slash + 1), SL_E_INPUT,
		          "%s: the prefix may hold only letters, digits, -._~ and /", r->name);
		r->kind = s3 ? K_S3 : K_GCS;
		if (s3) {
			const char *region = getenv("AWS_REGION");
			if (region == NULL)
				region = getenv("AWS_DEFAULT_REGION");
			if (region == NULL)
				region = "us-east-1";
			SL_ENSURE(name_ok(region), SL_E_INPUT, "AWS_REGION %s: not a region",
			          region);
			snprintf(r->sigv4, sizeof(r->sigv4), "aws:amz:%s:s3", region);
			if (r->o.s3_endpoint != NULL) {
				const char *ep = r->o.s3_endpoint;
				SL_ENSURE(strncmp(ep, "https://", 8) == 0, SL_E_INPUT,
				          "--s3-endpoint %s: only https:// (TLS is always on)", ep);
				const char *h = ep + 8, *he = h + strcspn(h, ":/");
				size_t el = strlen(ep);
				while (el > 0 && ep[el - 1] == '/')
					el--;
				if (host_is_address(h, (size_t)(he - h)))
					/* path-style: an address cannot carry the bucket as a name
					 */
					snprintf(r->base, sizeof(r->base), "%.*s/%.*s/%s", (int)el,
					         ep, (int)bl, b, slash + 1);
				else
					snprintf(r->base, sizeof(r->base), "https://%.*s.%.*s/%s",
					         (int)bl, b, (int)(el - 8), h, slash + 1);
			} else {
				snprintf(r->base, sizeof(r->base),
				         "https://%.*s.s3.%s.amazonaws.com/%s", (int)bl, b, region,
				         slash + 1);
			}
			SL_GUARD(s3_credentials(r));
		} else {
			const char *ep = r->o.gcs_endpoint != NULL
			                     ? r->o.gcs_endpoint
			                     : "https://storage.googleapis.com";
			SL_ENSURE(strncmp(ep, "https://", 8) == 0, SL_E_INPUT,
			          "GCS endpoint %s: only https://", ep);
			snprintf(r->base, sizeof(r->base), "%s/%.*s/%s", ep, (int)bl, b, slash + 1);
			SL_GUARD(gcs_credentials(r));
		}
	}
	*out = r;
	r = NULL;
	rc = SL_OK;
out:
	sl_remote_free(r);
	return rc;
}

sl_err sl_remote_object_url(const sl_remote *r, const char *object, char *url, size_t cap)
{
	if (!name_ok(object))
		return sl_err_set(SL_E_INPUT, "%s: object name \"%s\" is not a plain name", r->name,
		                  object);
	if (snprintf(url, cap, "%s%s", r->base, object) >= (int)cap)
		return sl_err_set(SL_E_INPUT, "%s%s: URL too long", r->base, object);
	return SL_OK;
}

sl_err sl_remote_get(sl_remote *r, const char *object, size_t max, uint8_t **data, size_t *len)
{
	sl_err rc = SL_E_INPUT;
	char url[4096], what[1200];

	SL_GUARD(sl_remote_object_url(r, object, url, sizeof(url)));
	snprintf(what, sizeof(what), "%s%s", r->name, object);
	SL_GUARD(simple_request(r, url, true, "GET", NULL, max, what, data, len));
	rc = SL_OK;
out:
	return rc;
}

/* ---- parallel ranges -------------------------------------------------- */

/* Where a fetch's bytes land: a descriptor (pwrite at the object's
 * offsets), or cap bytes of the caller's memory (mem != NULL; copied in at
 * the same offsets). Both are fed by the same transfers and judged by the
 * same rules (judge), so every check on what the server sends holds for
 * both. */
struct fetch_sink {
	int fd;
	uint8_t *mem;
	uint64_t cap;
};

struct xfer {
	CURL *h;
	struct curl_slist *hdrs;
	uint64_t off, len, got;
	const struct fetch_sink *sink;
	unsigned tries;
	bool overflow, io_error;
	struct watch w;
	char content_range[128];
	char range[64];
};

static size_t range_write(char *data, size_t sz, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	size_t k = sz * n, done = 0;
	if (x->got + k > x->len) {
		x->overflow = true;
		return 0;
	}
	if (x->sink->mem != NULL) {
		/* fetch_into checked off + len <= cap for every range; checked
		 * again here, where the bytes are written */
		if (x->off + x->got + k > x->sink->cap) {
			x->overflow = true;
			return 0;
		}
		memcpy(x->sink->mem + x->off + x->got, data, k);
		x->got += k;
		return k;
	}
	while (done < k) {
		ssize_t w =
		    pwrite(x->sink->fd, data + done, k - done, (off_t)(x->off + x->got + done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			x->io_error = true;
			return 0;
		}
		done += (size_t)w;
	}
	x->got += k;
	return k;
}

static size_t range_header(char *data, size_t sz, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	size_t k = sz * n;
	if (k >= 5 && strncmp(data, "HTTP/", 5) == 0)
		x->content_range[0] = '\0';
	if (k > 14 && strncasecmp(data, "content-range:", 14) == 0) {
		size_t v = k - 14;
		if (v >= sizeof(x->content_range))
			v = sizeof(x->content_range) - 1;
		memcpy(x->content_range, data + 14, v);
		while (v > 0 &&
		       (x->content_range[v - 1] == '\r' || x->content_range[v - 1] == '\n'))
			v--;
		x->content_range[v] = '\0';
	}
	return k;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* A memory sink's pages for bytes [off, off + len) made present and
 * writable before the range's first byte arrives, one call per range
 * rather than a fault per page inside the write callback; running out of
 * memory is then an error here, not a fault mid-copy. Where the kernel
 * lacks MADV_POPULATE_WRITE the copy faults them in as before. */
static SL_RESULT sink_prepare(const struct fetch_sink *sink, uint64_t off, uint64_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a, b;

	if (sink->mem == NULL || len == 0)
		return SL_OK;
	a = (uintptr_t)(sink->mem + off) & ~(page - 1);
	b = (uintptr_t)(sink->mem + off + len);
	if (madvise((void *)a, b - a, MADV_POPULATE_WRITE) != 0 && errno == ENOMEM)
		return sl_err_set(SL_E_NOMEM, "no memory for bytes %llu to %llu of a fetch",
		                  (unsigned long long)off, (unsigned long long)(off + len));
	return SL_OK;
}

static SL_RESULT start_xfer(sl_remote *r, CURLM *m, struct xfer *x, const char *url)
{
	sl_err rc = SL_E_NOMEM;

	SL_GUARD(sink_prepare(x->sink, x->off, x->len));
	x->got = 0;
	x->overflow = x->io_error = false;
	x->content_range[0] = '\0';
	x->h = curl_easy_init();
	SL_ENSURE(x->h != NULL, SL_E_NOMEM, "curl");
	SL_GUARD(common_setopts(r, x->h, url, true, &x->hdrs, &x->w, x->len));
	snprintf(x->range, sizeof(x->range), "%llu-%llu", (unsigned long long)x->off,
	         (unsigned long long)(x->off + x->len - 1));
	SL_GUARD_CURL(curl_easy_setopt(x->h, CURLOPT_RANGE, x->range), SL_E_INTERNAL, "range");
	SL_GUARD_CURL(curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, range_write), SL_E_INTERNAL,
	              "write");
	SL_GUARD_CURL(curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x), SL_E_INTERNAL, "write");
	SL_GUARD_CURL(curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, range_header), SL_E_INTERNAL,
	              "header");
	SL_GUARD_CURL(curl_easy_setopt(x->h, CURLOPT_HEADERDATA, x), SL_E_INTERNAL, "header");
	SL_GUARD_CURL(curl_easy_setopt(x->h, CURLOPT_PRIVATE, x), SL_E_INTERNAL, "private");
	SL_GUARD_CURL(curl_easy_setopt(x->h, CURLOPT_PIPEWAIT, 1L), SL_E_INTERNAL, "pipewait");
	SL_ENSURE(curl_multi_add_handle(m, x->h) == CURLM_OK, SL_E_INTERNAL, "curl multi");
	rc = SL_OK;
out:
	return rc;
}

static void end_xfer(CURLM *m, struct xfer *x)
{
	if (x->h != NULL) {
		curl_multi_remove_handle(m, x->h);
		curl_easy_cleanup(x->h);
	}
	curl_slist_free_all(x->hdrs);
	x->h = NULL;
	x->hdrs = NULL;
}

/* SL_OK: the range is complete and exactly as asked. SL_E_AGAIN-like:
 * *retry set. Otherwise the error, naming the object and range. */
static SL_RESULT judge(const sl_remote *r, const char *what, struct xfer *x, CURLcode cc,
                       uint64_t size, bool *retry)
{
	long st = 0;
	uint64_t a = 0, b = 0, t = 0;

	*retry = false;
	(void)curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &st);
	if (st == 200 && !(x->off == 0 && x->len == size))
		/* the whole object for a part of it: refused before its bytes
		 * are counted (the write stopped at the range's end) */
		return sl_err_set(SL_E_REMOTE_UNREACHABLE,
		                  "%s: the server ignored the Range header (HTTP 200 for "
		                  "bytes %s of %llu)",
		                  what, x->range, (unsigned long long)size);
	if (x->overflow)
		return sl_err_set(SL_E_REMOTE_UNREACHABLE,
		                  "%s bytes %s: the server sent more than the range asked for",
		                  what, x->range);
	if (x->io_error)
		return sl_err_set(SL_E_SYSTEM, "%s: cannot write to memory: %s", what,
		                  strerror(errno));
	if (cc != CURLE_OK) {
		char why[96];
		*retry = retryable_curl(cc);
		if (x->w.fired != W_NONE || cc == CURLE_OPERATION_TIMEDOUT) {
			*retry = true;
			if (x->w.fired == W_NONE)
				x->w.fired = W_STALL; /* libcurl's low-speed backstop */
			return sl_err_set(SL_E_REMOTE_UNREACHABLE, "%s bytes %s: %s", what,
			                  x->range, watch_why(&x->w, why, sizeof(why)));
		}
		return sl_err_set(SL_E_REMOTE_UNREACHABLE, "%s bytes %s: %s", what, x->range,
		                  curl_easy_strerror(cc));
	}
	if (st != 206 && st != 200) {
		*retry = retryable_status(st);
		return sl_err_set(st >= 400 && st < 500 && st != 429 ? SL_E_REMOTE_REFUSED
		                                                     : SL_E_REMOTE_UNREACHABLE,
		                  "%s (%s): HTTP %ld%s", what, r->name, st, status_hint(st));
	}
	if (st == 200) {
		/* the whole object: acceptable only when the whole object was asked */
		if (!(x->off == 0 && x->len == size && x->got == size))
			return sl_err_set(SL_E_REMOTE_UNREACHABLE,
			                  "%s: the server ignored the Range header (HTTP 200 for "
			                  "bytes %s)",
			                  what, x->range);
		return SL_OK;
	}
	if (!sl_remote_content_range(x->content_range, &a, &b, &t) || a != x->off ||
	    b != x->off + x->len - 1 || t != size)
		return sl_err_set(SL_E_REMOTE_UNREACHABLE,
		                  "%s: Content-Range \"%s\" is not bytes %s/%llu as asked", what,
		                  x->content_range[0] ? x->content_range + 1 : "", x->range,
		                  (unsigned long long)size);
	if (x->got != x->len) {
		*retry = true;
		return sl_err_set(SL_E_REMOTE_UNREACHABLE,
		                  "%s bytes %s: %llu of %llu bytes arrived", what, x->range,
		                  (unsigned long long)x->got, (unsigned long long)x->len);
	}
	return SL_OK;
}

static SL_RESULT fetch_into(sl_remote *r, const char *object, uint64_t size,
                            const struct fetch_sink *sink)
{
	sl_err rc = SL_E_INPUT;
	char url[4096], what[1200];
	size_t rs = r->o.range_size > 0 ? r->o.range_size : DEFAULT_RANGE;
	unsigned conns = r->o.connections > 0 ? r->o.connections : 4;
	unsigned retries = r->o.retries > 0 ? r->o.retries : 4;
	uint64_t n_ranges = size == 0 ? 0 : (size + rs - 1) / rs, next = 0;
	struct xfer *xs = NULL;
	CURLM *m = NULL;
	int active = 0;

	if (conns > MAX_CONNS)
		conns = MAX_CONNS;
	SL_GUARD(sl_remote_object_url(r, object, url, sizeof(url)));
	snprintf(what, sizeof(what), "%s%s", r->name, object);
	SL_ENSURE(sink->mem == NULL || size <= sink->cap, SL_E_INTERNAL,
	          "%s: %llu bytes into a buffer of %llu", what, (unsigned long long)size,
	          (unsigned long long)sink->cap);
	if (size == 0)
		return SL_OK;
	SL_ENSURE(sink->mem != NULL || ftruncate(sink->fd, (off_t)size) == 0, SL_E_NOMEM,
	          "%s: %llu bytes of memory: %s", what, (unsigned long long)size, strerror(errno));
	xs = calloc(conns, sizeof(*xs));
	m = curl_multi_init();
	SL_ENSURE(xs != NULL && m != NULL, SL_E_NOMEM, "curl multi");
	(void)curl_multi_setopt(m, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
	(void)curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)conns);
	for (;;) {
		bool added = false;
		/* checked at least once a second (the poll below) */
		SL_ENSURE(r->abort == NULL || !atomic_load(r->abort), SL_E_SYSTEM,
		          "%s: fetch stopped (the staging is ending)", what);
		for (unsigned i = 0; i < conns && next < n_ranges; i++) {
			if (xs[i].h != NULL)
				continue;
			xs[i] = (struct xfer){.off = next * rs, .sink = sink};
			xs[i].len = size - xs[i].off < rs ? size - xs[i].off : rs;
			next++;
			SL_GUARD(start_xfer(r, m, &xs[i], url));
			active++;
			added = true;
		}
		if (active == 0)
			break;
		int running = 0;
		SL_ENSURE(curl_multi_perform(m, &running) == CURLM_OK, SL_E_INTERNAL, "curl multi");
		CURLMsg *msg;
		int q;
		while ((msg = curl_multi_info_read(m, &q)) != NULL) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct xfer *x = NULL;
			bool retry;
			(void)curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
			sl_err jr = judge(r, what, x, msg->data.result, size, &retry);
			end_xfer(m, x);
			active--;
			/* refill the freed slot before waiting: a poll now could sleep
			 * its whole timeout with nothing left to wake it */
			added = true;
			if (jr == SL_OK)
				continue;
			if (!retry || x->tries >= retries) {
				rc = jr;
				if (retry)
					sl_err_wrap(jr, "after %u tries", x->tries + 1);
				goto out;
			}
			sl_remote_backoff(x->tries++);
			SL_GUARD(start_xfer(r, m, x, url));
			active++;
			added = true;
		}
		/* a handle added since the last perform has not started yet (poll
		 * would wait for sockets it has not opened), and a slot freed by a
		 * finished range is refilled at once */
		if (!added)
			(void)curl_multi_poll(m, NULL, 0, 1000, NULL);
	}
	rc = SL_OK;
out:
	for (unsigned i = 0; xs != NULL && i < conns; i++)
		end_xfer(m, &xs[i]);
	free(xs);
	if (m != NULL)
		curl_multi_cleanup(m);
	return rc;
}

sl_err sl_remote_fetch(sl_remote *r, const char *object, uint64_t size, int fd)
{
	struct fetch_sink sink = {.fd = fd};
	return fetch_into(r, object, size, &sink);
}

sl_err sl_remote_fetch_mem(sl_remote *r, const char *object, uint64_t size, uint8_t *mem,
                           uint64_t cap)
{
	struct fetch_sink sink = {.fd = -1, .mem = mem, .cap = cap};
	if (mem == NULL)
		return sl_err_set(SL_E_INTERNAL, "%s: no memory to fetch into", object);
	return fetch_into(r, object, size, &sink);
}
