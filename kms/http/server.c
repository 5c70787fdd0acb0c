/* The HTTPS server: libmicrohttpd with GnuTLS (TLS 1.2 and 1.3 only, AEAD
 * cipher suites with ECDHE only), a thread pool, connection and body limits,
 * idle timeouts, a graceful stop on SIGTERM / SIGINT and a reload on SIGHUP.
 * Request bodies are collected up to max_body (413 beyond it) and handed to
 * kmsd_dispatch.
 *
 * libmicrohttpd's threads only move bytes (TLS, HTTP). A complete request is
 * handed to a pool of worker threads through one FIFO queue while its
 * connection is suspended, and the worker resumes it with the answer. A
 * handler that waits (the audit record's fsync) then holds up only its own
 * request, never the other connections of the same libmicrohttpd thread,
 * requests are served in arrival order whatever connection they came on, and
 * the workers waiting on the audit log at the same moment share one fsync
 * (audit.h group commit). */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http.h"
#include "seclaunch/audit.h"
#include "seclaunch/json.h"
#include "seclaunch/policy.h"

#define DRAIN_MAX (4u << 20)
/* TLS 1.2 and 1.3; every suite authenticated encryption (AES-GCM,
 * ChaCha20-Poly1305) with an ephemeral key exchange: no CBC/HMAC-SHA1 suite
 * (Lucky13-style padding oracles), no static-RSA key exchange (no forward
 * secrecy). TLS 1.3 suites are all AEAD anyway. */
#define TLS_PRIORITIES                                                                             \
	"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-256-GCM:+AES-128-GCM:"        \
	"+CHACHA20-POLY1305:-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA"

/* The body limit, changed by a reload while connection threads read it. */
static _Atomic size_t g_max_body = 256 * 1024;
/* Set when SIGTERM/SIGINT arrived: new connections are refused. */
static atomic_bool g_stopping;

void kmsd_server_set_limits(const kmsd_config *c)
{
	atomic_store(&g_max_body, c->max_body);
}

struct conn {
	uint8_t *buf;
	size_t len, cap;
	bool too_large;
	bool answered;
	bool queued; /* handed to the workers; the connection is suspended */
	size_t discarded;
	uint64_t start_ns;
	/* the request as the worker sees it (pointers into the connection's
	 * memory, valid until the request completes) */
	struct MHD_Connection *c;
	const char *method, *url, *authorization;
	char source[INET6_ADDRSTRLEN];
	kmsd_response res;
	enum kmsd_route route;
	atomic_bool done;
	struct conn *next;
};

/* The worker pool: one FIFO of complete requests. */
struct pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct conn *head, *tail;
	bool stopping;
	kmsd_ctx *ctx;
	pthread_t *th;
	unsigned n;
};

static struct pool g_pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* The generation of config and policy in force (the daemon's, ctx->live);
 * without one, the base context is the one in force. */
static kmsd_gen *live_enter(const kmsd_ctx *base, kmsd_ctx *req)
{
	if (base->live == NULL) {
		*req = *base;
		return NULL;
	}
	return base->live->enter(base, req);
}

static void live_leave(const kmsd_ctx *base, kmsd_gen *g)
{
	if (base->live != NULL)
		base->live->leave(g);
}

static void handle(kmsd_ctx *base, struct conn *st)
{
	kmsd_ctx ctx;
	kmsd_gen *gen = live_enter(base, &ctx);
	kmsd_request req = {
	    .method = st->method,
	    .path = st->url,
	    .body = st->buf != NULL ? st->buf : (const uint8_t *)"",
	    .len = st->len,
	    .authorization = st->authorization,
	    .source = st->source[0] != '\0' ? st->source : NULL,
	};
	st->route = kmsd_dispatch(&ctx, &req, &st->res);
	live_leave(base, gen);
}

static void *worker_main(void *arg)
{
	struct pool *p = arg;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		while (p->head == NULL && !p->stopping)
			pthread_cond_wait(&p->cv, &p->mu);
		struct conn *st = p->head;
		if (st == NULL) { /* stopping and nothing left */
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
		p->head = st->next;
		if (p->head == NULL)
			p->tail = NULL;
		pthread_mutex_unlock(&p->mu);
		handle(p->ctx, st);
		atomic_store(&st->done, true);
		MHD_resume_connection(st->c);
	}
}

/* Queues a suspended request; false once the pool is stopping (the caller
 * then answers it itself, so no connection is left suspended). */
static bool pool_push(struct pool *p, struct conn *st)
{
	bool ok;
	pthread_mutex_lock(&p->mu);
	ok = !p->stopping && p->n > 0;
	if (ok) {
		st->next = NULL;
		if (p->tail != NULL)
			p->tail->next = st;
		else
			p->head = st;
		p->tail = st;
		pthread_cond_signal(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return ok;
}

static SL_RESULT pool_start(struct pool *p, kmsd_ctx *ctx, unsigned n)
{
	sl_err rc = SL_E_SYSTEM;
	p->ctx = ctx;
	p->th = calloc(n, sizeof(*p->th));
	SL_ENSURE(p->th != NULL, SL_E_NOMEM, "worker threads");
	for (; p->n < n; p->n++)
		SL_ENSURE(pthread_create(&p->th[p->n], NULL, worker_main, p) == 0, SL_E_SYSTEM,
		          "cannot start worker thread %u: %s", p->n, strerror(errno));
	rc = SL_OK;
out:
	return rc;
}

/* Workers finish every queued request (resuming its connection) and exit. */
static void pool_stop(struct pool *p)
{
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->n; i++)
		pthread_join(p->th[i], NULL);
	free(p->th);
	p->th = NULL;
	p->n = 0;
}

static enum MHD_Result send_response(struct MHD_Connection *c, kmsd_response *res)
{
	char *text = res->text;
	const char *ctype = "text/plain; version=0.0.4";
	struct MHD_Response *r;
	enum MHD_Result ret;
	if (res->json != NULL) {
		text = json_dumps(res->json, JSON_COMPACT);
		free(res->text);
		ctype = res->problem ? "application/problem+json" : "application/json";
	}
	res->text = NULL;
	if (text == NULL)
		return MHD_NO;
	r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (r == NULL) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (res->status == 405)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
		                        res->json != NULL && json_object_get(res->json, "allow")
		                            ? sl_json_getstr(res->json, "allow")
		                            : "POST");
	if (res->status == 429 || res->status == 503) {
		char ra[16];
		snprintf(ra, sizeof(ra), "%u", res->retry_after > 0 ? res->retry_after : 1);
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, ra);
	}
	ret = MHD_queue_response(c, res->status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result too_large(kmsd_ctx *ctx, struct MHD_Connection *c, struct conn *st)
{
	kmsd_response res = {0};
	char detail[128];
	snprintf(detail, sizeof(detail), "request body is larger than the %zu-byte limit",
	         atomic_load(&g_max_body));
	kmsd_problem(&res, 413, "too-large", "Payload Too Large", detail, NULL);
	st->answered = true;
	kmsd_metrics_request(ctx->metrics, KMSD_R_OTHER, 413, sl_now_ns() - st->start_ns);
	enum MHD_Result ret = send_response(c, &res);
	json_decref(res.json);
	return ret;
}

/* The peer's address as text (per-source rate limit, audit "source"). */
static void client_address(struct MHD_Connection *c, char *out, size_t n)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;
	out[0] = '\0';
	if (sa != NULL && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)n);
	else if (sa != NULL && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out,
		          (socklen_t)n);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
	kmsd_ctx *ctx = cls;
	struct conn *st = *con_cls;
	const size_t max_body = atomic_load(&g_max_body);
	(void)version;
	if (st == NULL) {
		const char *cl =
		    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		st = calloc(1, sizeof(*st));
		if (st == NULL)
			return MHD_NO;
		st->start_ns = sl_now_ns();
		*con_cls = st;
		if (cl != NULL && strtoull(cl, NULL, 10) > max_body) {
			st->too_large = true;
			/* a body a little over the limit is drained and answered at its
			 * end: answered now, the close would reset the connection under
			 * the client still sending it, and it would never read the 413 */
			if (strtoull(cl, NULL, 10) > DRAIN_MAX)
				return too_large(ctx, c, st);
		}
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		if (st->too_large) {
			/* libmicrohttpd cannot answer mid-upload: drain a bounded amount so
			 * the 413 can go out at the end, then give up on the connection */
			st->discarded += n;
			return st->discarded > DRAIN_MAX ? MHD_NO : MHD_YES;
		}
		if (st->len > max_body || n > max_body - st->len) {
			st->too_large = true;
			st->discarded = st->len + n;
			free(st->buf);
			st->buf = NULL;
			st->len = 0;
			return MHD_YES;
		}
		if (st->len + n > st->cap) {
			size_t ncap = st->cap == 0 ? 4096 : st->cap;
			while (ncap < st->len + n)
				ncap *= 2;
			if (ncap > max_body)
				ncap = max_body;
			uint8_t *nb = realloc(st->buf, ncap);
			if (nb == NULL)
				return MHD_NO;
			st->buf = nb;
			st->cap = ncap;
		}
		memcpy(st->buf + st->len, upload_data, n);
		st->len += n;
		return MHD_YES;
	}
	if (st->answered)
		return MHD_YES;
	if (st->too_large)
		return too_large(ctx, c, st);
	if (!st->queued) {
		st->c = c;
		st->method = method;
		st->url = url;
		st->authorization =
		    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
		client_address(c, st->source, sizeof(st->source));
		st->queued = true;
		/* suspended before it is queued, so the worker's resume cannot
		 * come first */
		MHD_suspend_connection(c);
		if (pool_push(&g_pool, st))
			return MHD_YES;
		MHD_resume_connection(c);
		handle(ctx, st);
		atomic_store(&st->done, true);
	}
	if (!atomic_load(&st->done))
		return MHD_YES; /* resumed before the answer (not expected): wait */
	st->answered = true;
	kmsd_metrics_request(ctx->metrics, st->route, st->res.status, sl_now_ns() - st->start_ns);
	enum MHD_Result ret = send_response(c, &st->res);
	json_decref(st->res.json);
	st->res.json = NULL;
	free(st->res.text);
	st->res.text = NULL;
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct conn *st = *con_cls;
	(void)cls;
	(void)c;
	(void)toe;
	if (st == NULL)
		return;
	json_decref(st->res.json);
	free(st->res.text);
	if (st->buf != NULL) {
		sl_wipe(st->buf, st->len); /* admin wrap bodies carry a DEK */
		free(st->buf);
	}
	free(st);
	*con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	kmsd_log(KMSD_LOG_INFO, "http: %s", msg);
}

/* Once stopping, a new connection is closed at once (instead of
 * MHD_quiesce_daemon: see kmsd_serve). */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	(void)cls;
	(void)addr;
	(void)addrlen;
	return atomic_load(&g_stopping) ? MHD_NO : MHD_YES;
}

/* Audit records of the server itself, under the policy in force. */
static void audit_event(kmsd_ctx *base, const char *event, json_t *details)
{
	kmsd_ctx ctx;
	kmsd_gen *gen = live_enter(base, &ctx);
	kmsd_audit(&ctx, event, NULL, NULL, NULL, NULL, NULL, details);
	live_leave(base, gen);
}

static SL_RESULT parse_listen(const char *s, struct sockaddr_storage *ss, char *host, size_t hostn,
                              unsigned *port)
{
	sl_err rc = SL_E_INPUT;
	const char *colon = strrchr(s, ':');
	char h[64];
	char *end;
	unsigned long p;
	SL_ENSURE(colon != NULL && (size_t)(colon - s) < sizeof(h), SL_E_INPUT,
	          "listen: '%s' is not HOST:PORT", s);
	memcpy(h, s, (size_t)(colon - s));
	h[colon - s] = '\0';
	p = strtoul(colon + 1, &end, 10);
	SL_ENSURE(*end == '\0' && colon[1] != '\0' && p <= 65535, SL_E_INPUT,
	          "listen: bad port in '%s'", s);
	memset(ss, 0, sizeof(*ss));
	if (h[0] == '[' && h[strlen(h) - 1] == ']') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
		h[strlen(h) - 1] = '\0';
		memmove(h, h + 1, strlen(h));
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)p);
		SL_ENSURE(inet_pton(AF_INET6, h, &a6->sin6_addr) == 1, SL_E_INPUT,
		          "listen: '%s' is not an IPv6 address", h);
		snprintf(host, hostn, "[%s]", h);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)p);
		SL_ENSURE(inet_pton(AF_INET, h, &a4->sin_addr) == 1, SL_E_INPUT,
		          "listen: '%s' is not an IPv4 address", h);
		snprintf(host, hostn, "%s", h);
	}
	*port = (unsigned)p;
	rc = SL_OK;
out:
	return rc;
}

sl_err kmsd_serve(kmsd_ctx *ctx)
{
	sl_err rc = SL_E_SYSTEM;
	const kmsd_config *cfg = ctx->cfg;
	struct MHD_Daemon *d = NULL;
	struct sockaddr_storage ss;
	char host[80], url[128];
	unsigned port = 0;
	uint8_t *cert = NULL;
	size_t cert_len = 0;
	sl_secret *key = NULL;
	sigset_t sigs;
	int sig = 0;
	const union MHD_DaemonInfo *info;

	SL_GUARD(parse_listen(cfg->listen, &ss, host, sizeof(host), &port));
	SL_GUARD(pool_start(&g_pool, ctx, cfg->workers));
	SL_GUARD(sl_file_read(cfg->tls_cert, 1 << 20, &cert, &cert_len));
	SL_GUARD(sl_secret_read_file(cfg->tls_key, 1 << 16, &key));
	{
		/* GnuTLS wants a NUL-terminated PEM string */
		sl_secret *kz = NULL;
		SL_GUARD(sl_secret_new(sl_secret_len(key) + 1, &kz));
		memcpy(sl_secret_data(kz), sl_secret_data(key), sl_secret_len(key));
		sl_secret_data(kz)[sl_secret_len(key)] = '\0';
		sl_secret_free(key);
		key = kz;
	}
	/* every thread MHD starts inherits this mask, so only sigwait sees them */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	kmsd_server_set_limits(cfg);
	atomic_store(&g_stopping, false);
	/* Not MHD_USE_TURBO: in libmicrohttpd 0.9.75 it puts a new connection on
	 * the epoll "ready" list without registering it with epoll, and only a
	 * read that clears the ready flag registers it; the TLS handshake reads
	 * through GnuTLS's own transport, so EAGAIN there never clears it. A
	 * connection that sends nothing then stays "ready" for good: its thread
	 * polls with a zero timeout at 100 % CPU, and once the table is full of
	 * such connections and they time out or close, their sockets are never
	 * reaped (CLOSE-WAIT) and the service stops answering. Plain epoll
	 * registers every connection and waits on it. */
	d = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TLS | MHD_USE_ERROR_LOG |
	        MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME,
	    0, accept_policy, NULL, on_request, ctx, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_THREAD_POOL_SIZE,
	    (unsigned int)cfg->threads, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned int)cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned int)cfg->idle_timeout_s, MHD_OPTION_PER_IP_CONNECTION_LIMIT, 0u,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024, MHD_OPTION_HTTPS_MEM_CERT,
	    (const char *)cert, MHD_OPTION_HTTPS_MEM_KEY, (const char *)sl_secret_data(key),
	    MHD_OPTION_HTTPS_PRIORITIES, TLS_PRIORITIES, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
	    NULL, MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, MHD_OPTION_END);
	SL_ENSURE(d != NULL, SL_E_SYSTEM,
	          "cannot start the HTTPS server on %s (address in use, or bad TLS certificate/key "
	          "in %s / %s)",
	          cfg->listen, cfg->tls_cert, cfg->tls_key);
	sl_secret_free(key);
	key = NULL;
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	if (info != NULL && info->port != 0)
		port = info->port;
	snprintf(url, sizeof(url), "https://%s:%u", host, port);
	kmsd_log(KMSD_LOG_NOTICE,
	         "listening on %s (%u connection threads, %u workers, TLS 1.2+ AEAD suites)", url,
	         cfg->threads, cfg->workers);
	/* no kms.start record, no service: what cannot be recorded is not decided;
	 * under the policy in force (the live generation owns it) */
	kmsd_ctx now;
	kmsd_gen *gen = live_enter(ctx, &now);
	bool started = kmsd_audit(
	    &now, SL_AUDIT_EV_KMS_START, NULL, NULL, NULL, NULL, NULL,
	    json_pack("{s:s, s:b, s:s, s:b}", "url", url, "dev", cfg->dev, "kek_backend",
	              cfg->backend == KMSD_KEK_LOCAL ? "local"
	              : cfg->backend == KMSD_KEK_AWS ? "aws-kms"
	                                             : "pkcs11",
	              "allow_unverified_region",
	              now.policy != NULL && sl_policy_allow_unverified_region(now.policy)));
	live_leave(ctx, gen);
	SL_ENSURE(started, SL_E_SYSTEM,
	          "audit log %s: cannot write the kms.start record; not starting", cfg->audit_log);
	if (cfg->url_file != NULL)
		SL_GUARD(sl_file_write_atomic(cfg->url_file, url, strlen(url), 0644, true));

	/* a live log verifies without waiting for a hundred records or the
	 * stop: its records are sealed by a checkpoint at most
	 * audit_checkpoint_s after they were written, and at once on SIGUSR1 */
	struct timespec tick = {.tv_sec = 1};
	uint64_t last_cp = (uint64_t)time(NULL);
	for (;;) {
		sig = sigtimedwait(&sigs, NULL, &tick);
		uint64_t now_s = (uint64_t)time(NULL);
		if (sig < 0 || sig == SIGUSR1) {
			bool due = sig == SIGUSR1 || (cfg->audit_checkpoint_s > 0 &&
			                              now_s - last_cp >= cfg->audit_checkpoint_s);
			if (due && sl_audit_unsealed(ctx->audit)) {
				if (sl_audit_checkpoint(ctx->audit) != SL_OK)
					kmsd_log(KMSD_LOG_ERR, "audit checkpoint: %s",
					         sl_err_detail());
				else if (sig == SIGUSR1)
					kmsd_log(KMSD_LOG_NOTICE,
					         "SIGUSR1: audit log checkpointed");
			}
			if (due)
				last_cp = now_s;
			continue;
		}
		if (sig != SIGHUP)
			break;
		if (ctx->live != NULL)
			ctx->live->reload(ctx);
	}
	kmsd_log(KMSD_LOG_NOTICE, "%s: stopping", strsignal(sig));
	/* Stop accepting, let requests in flight finish (bounded), then stop.
	 * Not MHD_quiesce_daemon: with a thread pool in epoll mode (0.9.75) it
	 * removes the listening socket from each thread's epoll set from this
	 * thread while a busy connection thread may be removing it too; the
	 * loser's EPOLL_CTL_DEL fails with ENOENT and libmicrohttpd aborts
	 * ("Failed to remove listen FD from epoll set"). The accept policy
	 * refuses new connections instead; the socket closes with the daemon. */
	atomic_store(&g_stopping, true);
	for (int i = 0; i < 20; i++) {
		info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
		if (info == NULL || info->num_connections == 0)
			break;
		usleep(100 * 1000);
	}
	pool_stop(&g_pool); /* queued requests answered (and audited) first */
	audit_event(ctx, SL_AUDIT_EV_KMS_STOP, json_pack("{s:s}", "signal", strsignal(sig)));
	rc = SL_OK;
out:
	/* no connection may stay suspended when the daemon stops: the workers
	 * answer what is queued, later requests are answered inline */
	pool_stop(&g_pool);
	if (d != NULL)
		MHD_stop_daemon(d);
	sl_secret_free(key);
	free(cert);
	return rc;
}
