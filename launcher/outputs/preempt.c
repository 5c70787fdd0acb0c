/* The preemption watcher (preempt.h). The metadata servers answer plain
 * HTTP on a link-local address; what they say is a hint to save work early,
 * never a reason to release or skip anything, so it needs no signature. */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "preempt.h"

#define GCE_BASE "http://metadata.google.internal"
#define AWS_BASE "http://169.254.169.254"
#define BODY_MAX 4096

struct sl_preempt {
	sl_preempt_opts o;
	char base[512];
	pthread_t th;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	bool noticed;
	char source[16];
	double when;
	pid_t pgid;
	bool signalled;
};

double sl_preempt_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool stopping(sl_preempt *p)
{
	pthread_mutex_lock(&p->mu);
	bool s = p->stop;
	pthread_mutex_unlock(&p->mu);
	return s;
}

/* Sleeps up to secs; false when told to stop meanwhile. */
static bool nap(sl_preempt *p, double secs)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	long ns = ts.tv_nsec + (long)((secs - (long)secs) * 1e9);
	ts.tv_sec += (time_t)secs + ns / 1000000000L;
	ts.tv_nsec = ns % 1000000000L;
	pthread_mutex_lock(&p->mu);
	while (!p->stop && pthread_cond_timedwait(&p->cv, &p->mu, &ts) != ETIMEDOUT)
		;
	bool s = p->stop;
	pthread_mutex_unlock(&p->mu);
	return !s;
}

struct body {
	char b[BODY_MAX + 1];
	size_t n;
};

static size_t on_body(char *d, size_t sz, size_t n, void *ctx)
{
	struct body *b = ctx;
	size_t k = sz * n;
	if (b->n + k > BODY_MAX)
		return 0;
	memcpy(b->b + b->n, d, k);
	b->n += k;
	b->b[b->n] = '\0';
	return k;
}

static int on_progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a, (void)b, (void)c, (void)d;
	return stopping(ctx) ? 1 : 0;
}

/* One request; the HTTP status, or -1 when none came. */
static long request(sl_preempt *p, const char *method, const char *url, const char *header,
                    long timeout_s, struct body *b)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	long st = -1;
	if (h == NULL)
		return -1;
	b->n = 0;
	b->b[0] = '\0';
	if (header != NULL)
		hdrs = curl_slist_append(NULL, header);
	/* every option must take: a half-configured request is not sent */
	CURLcode e = curl_easy_setopt(h, CURLOPT_URL, url);
	if (e == CURLE_OK)
		e = curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (e == CURLE_OK)
		e = curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (e == CURLE_OK)
		e = curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	if (e == CURLE_OK)
		e = curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	if (e == CURLE_OK)
		e = curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 2L);
	if (e == CURLE_OK)
		e = curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
	if (e == CURLE_OK)
		e = curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (e == CURLE_OK)
		e = curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	if (e == CURLE_OK)
		e = curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	if (e == CURLE_OK)
		e = curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	if (e == CURLE_OK)
		e = curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	if (e == CURLE_OK)
		e = curl_easy_setopt(h, CURLOPT_XFERINFODATA, p);
	if (strcmp(method, "PUT") == 0) {
		if (e == CURLE_OK)
			e = curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
		if (e == CURLE_OK)
			e = curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
	}
	if (e == CURLE_OK && curl_easy_perform(h) == CURLE_OK)
		(void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return st;
}

static void notice(sl_preempt *p, const char *source)
{
	pthread_mutex_lock(&p->mu);
	if (!p->noticed) {
		p->noticed = true;
		p->when = sl_preempt_now();
		snprintf(p->source, sizeof(p->source), "%s", source);
		if (p->pgid > 0)
			fprintf(stderr,
			        "seclaunch run: preemption notice (%s): signalling the job (%s), "
			        "%u s to finish\n",
			        source, strsignal(p->o.signo), p->o.grace_s);
		else /* serve: no job of its own; it stops and seals */
			fprintf(stderr, "seclaunch: preemption notice (%s): sealing the outputs\n",
			        source);
		if (p->pgid > 0 && !p->signalled) {
			(void)kill(-p->pgid, p->o.signo);
			p->signalled = true;
		}
	}
	pthread_mutex_unlock(&p->mu);
}

/* GCE: "TRUE" once the instance is being preempted. The first read is
 * immediate (wait_for_change waits for a change from the current value). */
static void watch_gce(sl_preempt *p)
{
	char url[700];
	struct body b;
	bool first = true;
	while (!stopping(p)) {
		snprintf(url, sizeof(url), "%s/computeMetadata/v1/instance/preempted%s", p->base,
		         first ? "" : "?wait_for_change=true&timeout_sec=30");
		long st = request(p, "GET", url, "Metadata-Flavor: Google", 40, &b);
		if (st == 200 && strncmp(b.b, "TRUE", 4) == 0) {
			notice(p, "gce");
			return;
		}
		if (st == 200)
			first = false;
		else if (!nap(p, 1.0))
			return;
	}
}

/* AWS: spot/instance-action is 404 until a stop or termination is due. */
static void watch_aws(sl_preempt *p)
{
	char url[700], tok[600] = "", hdr[700];
	struct body b;
	while (!stopping(p)) {
		if (tok[0] == '\0') {
			snprintf(url, sizeof(url), "%s/latest/api/token", p->base);
			long st = request(p, "PUT", url,
			                  "X-aws-ec2-metadata-token-ttl-seconds: 21600", 5, &b);
			if (st == 200 && b.n > 0 && b.n < sizeof(tok) &&
			    strcspn(b.b, "\r\n") == b.n)
				snprintf(tok, sizeof(tok), "%s", b.b);
			else if (!nap(p, 1.0))
				return;
			continue;
		}
		snprintf(url, sizeof(url), "%s/latest/meta-data/spot/instance-action", p->base);
		snprintf(hdr, sizeof(hdr), "X-aws-ec2-metadata-token: %s", tok);
		long st = request(p, "GET", url, hdr, 5, &b);
		if (st == 200) {
			notice(p, "aws");
			return;
		}
		if (st == 401)
			tok[0] = '\0';
		if (!nap(p, 1.0))
			return;
	}
}

static void *watch(void *arg)
{
	sl_preempt *p = arg;
	if (p->o.kind == SL_PREEMPT_GCE)
		watch_gce(p);
	else
		watch_aws(p);
	/* after a notice: the grace period, then SIGKILL for a job still there */
	pthread_mutex_lock(&p->mu);
	bool noticed = p->noticed;
	pthread_mutex_unlock(&p->mu);
	if (noticed && nap(p, (double)p->o.grace_s)) {
		pthread_mutex_lock(&p->mu);
		if (p->pgid > 0) {
			fprintf(stderr,
			        "seclaunch run: the job is still running after the %u s "
			        "preemption grace: killing it\n",
			        p->o.grace_s);
			(void)kill(-p->pgid, SIGKILL);
		}
		pthread_mutex_unlock(&p->mu);
	}
	return NULL;
}

sl_err sl_preempt_start(const sl_preempt_opts *o, sl_preempt **out)
{
	sl_err rc = SL_E_NOMEM;
	sl_preempt *p = calloc(1, sizeof(*p));
	SL_ENSURE(p != NULL, SL_E_NOMEM, "preemption watcher");
	p->o = *o;
	snprintf(p->base, sizeof(p->base), "%s",
	         o->base != NULL && o->base[0] != '\0' ? o->base
	         : o->kind == SL_PREEMPT_GCE           ? GCE_BASE
	                                               : AWS_BASE);
	size_t l = strlen(p->base);
	if (l > 0 && p->base[l - 1] == '/')
		p->base[l - 1] = '\0';
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	SL_ENSURE(pthread_create(&p->th, NULL, watch, p) == 0, SL_E_SYSTEM,
	          "starting the preemption watcher");
	p->started = true;
	*out = p;
	p = NULL;
	rc = SL_OK;
out:
	free(p);
	return rc;
}

void sl_preempt_set_job(sl_preempt *p, pid_t pgid)
{
	pthread_mutex_lock(&p->mu);
	p->pgid = pgid;
	if (p->noticed && !p->signalled && pgid > 0) {
		(void)kill(-pgid, p->o.signo);
		p->signalled = true;
	}
	pthread_mutex_unlock(&p->mu);
}

bool sl_preempt_noticed(sl_preempt *p, char *source, size_t n, double *when)
{
	if (p == NULL)
		return false;
	pthread_mutex_lock(&p->mu);
	bool b = p->noticed;
	if (b) {
		snprintf(source, n, "%s", p->source);
		*when = p->when;
	}
	pthread_mutex_unlock(&p->mu);
	return b;
}

void sl_preempt_free(sl_preempt *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	p->pgid = 0; /* the job is gone: nothing to kill any more */
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (p->started)
		pthread_join(p->th, NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}
