/* Refusals per source: the rate limit and the audit aggregation.
 *
 * A release that is refused costs the server its parse, its checks and (for
 * every refusal found after the evidence was verified) an fsync'd audit
 * record. A source that keeps being refused is slowed down: each refusal
 * takes a token from the source's bucket (rate_per_min tokens, refilled
 * evenly), and with none left its releases are answered 429 before their
 * body is read. Granted releases take no token.
 *
 * Releases, lease renewals and output-key requests (the attested requests)
 * share the bucket. Cheap refusals (decided before any evidence is looked
 * at: unknown, reused or expired nonce, policy digest skew, rate limited)
 * are aggregated: the first one of each (source, event, reason) in a window
 * is written in full, the rest are counted and written as one summary of
 * that event when the window closes.
 *
 * The table holds at most TABLE_CAP sources; a slot is reused only when its
 * bucket is full again and it has nothing pending. When every slot is busy a
 * new source is neither limited nor aggregated: its refusals are written in
 * full (no refusal is ever dropped to save memory). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

#define TABLE_CAP 4096
#define SOURCE_MAX 64

/* The reasons that are aggregated, in the order of their counters. */
static const char *const AGG[] = {"nonce_unknown", "nonce_reused", "nonce_expired",
                                  "policy_digest_mismatch", "rate_limited"};
#define NAGG (sizeof(AGG) / sizeof(AGG[0]))
/* The attested requests whose refusals are limited and aggregated, each
 * with windows of its own (a summary names its event). */
static const char *const EV[] = {"kms.release", "kms.renew", "kms.output"};
#define NEV (sizeof(EV) / sizeof(EV[0]))

struct agg {
	uint64_t win_start_ns; /* 0: no window open */
	uint64_t count;        /* counted (not written) in the open window */
	time_t first, last;
};

struct slot {
	char source[SOURCE_MAX];
	double tokens;
	uint64_t refill_ns;
	struct agg agg[NEV][NAGG];
};

struct kmsd_refusals {
	pthread_mutex_t mu;
	struct slot *s;
	size_t n; /* slots in use (a prefix is not kept: linear scan) */
	double rate_per_ns, burst;
	uint64_t window_ns;
	unsigned window_s;
	json_t *closed;             /* summaries of windows that closed, not yet written */
	atomic_ullong next_scan_ns; /* take() looks for closed windows at most once a second */
	atomic_bool audit_ok;
};

sl_err kmsd_refusals_new(unsigned rate_per_min, unsigned window_s, kmsd_refusals **out)
{
	sl_err rc = SL_E_NOMEM;
	kmsd_refusals *t = calloc(1, sizeof(*t));
	SL_ENSURE(t != NULL, SL_E_NOMEM, "refusal table");
	t->s = calloc(TABLE_CAP, sizeof(*t->s));
	t->closed = json_array();
	SL_ENSURE(t->s != NULL && t->closed != NULL, SL_E_NOMEM, "refusal table");
	pthread_mutex_init(&t->mu, NULL);
	t->burst = rate_per_min;
	t->rate_per_ns = rate_per_min / 60e9;
	t->window_s = window_s;
	t->window_ns = (uint64_t)window_s * 1000000000ULL;
	atomic_init(&t->audit_ok, true);
	*out = t;
	t = NULL;
	rc = SL_OK;
out:
	if (t != NULL) {
		free(t->s);
		json_decref(t->closed);
		free(t);
	}
	return rc;
}

void kmsd_refusals_free(kmsd_refusals *t)
{
	if (t == NULL)
		return;
	pthread_mutex_destroy(&t->mu);
	json_decref(t->closed);
	free(t->s);
	free(t);
}

static void refill(kmsd_refusals *t, struct slot *s, uint64_t now)
{
	if (now > s->refill_ns) {
		s->tokens += (double)(now - s->refill_ns) * t->rate_per_ns;
		if (s->tokens > t->burst)
			s->tokens = t->burst;
	}
	s->refill_ns = now;
}

static bool idle(kmsd_refusals *t, struct slot *s, uint64_t now)
{
	refill(t, s, now);
	if (s->tokens < t->burst)
		return false;
	for (size_t e = 0; e < NEV; e++)
		for (size_t r = 0; r < NAGG; r++)
			if (s->agg[e][r].count > 0 ||
			    (s->agg[e][r].win_start_ns != 0 &&
			     now < s->agg[e][r].win_start_ns + t->window_ns))
				return false;
	return true;
}

/* The source's slot, a new one, or NULL when the table is full. */
static struct slot *find(kmsd_refusals *t, const char *source, bool create, uint64_t now)
{
	struct slot *spare = NULL;
	if (source == NULL)
		source = "unknown";
	for (size_t i = 0; i < t->n; i++) {
		if (strcmp(t->s[i].source, source) == 0)
			return &t->s[i];
		if (create && spare == NULL && idle(t, &t->s[i], now))
			spare = &t->s[i];
	}
	if (!create)
		return NULL;
	if (spare == NULL && t->n < TABLE_CAP)
		spare = &t->s[t->n++];
	if (spare == NULL)
		return NULL;
	memset(spare, 0, sizeof(*spare));
	snprintf(spare->source, sizeof(spare->source), "%s", source);
	spare->tokens = t->burst;
	spare->refill_ns = now;
	return spare;
}

bool kmsd_refusals_admit(kmsd_refusals *t, const char *source, unsigned *retry_after_s)
{
	bool ok = true;
	uint64_t now = sl_now_ns();
	if (t->burst <= 0)
		return true;
	pthread_mutex_lock(&t->mu);
	struct slot *s = find(t, source, false, now);
	if (s != NULL) {
		refill(t, s, now);
		if (s->tokens < 1.0) {
			ok = false;
			*retry_after_s = (unsigned)ceil((1.0 - s->tokens) / t->rate_per_ns / 1e9);
			if (*retry_after_s == 0)
				*retry_after_s = 1;
		}
	}
	pthread_mutex_unlock(&t->mu);
	return ok;
}

void kmsd_refusals_charge(kmsd_refusals *t, const char *source)
{
	uint64_t now = sl_now_ns();
	if (t->burst <= 0)
		return;
	pthread_mutex_lock(&t->mu);
	struct slot *s = find(t, source, true, now);
	if (s != NULL) {
		refill(t, s, now);
		s->tokens = s->tokens >= 1.0 ? s->tokens - 1.0 : 0.0;
	}
	pthread_mutex_unlock(&t->mu);
}

static json_t *summary(kmsd_refusals *t, const struct slot *s, size_t e, size_t r)
{
	char first[40], last[40];
	sl_time_rfc3339(s->agg[e][r].first, first, sizeof(first));
	sl_time_rfc3339(s->agg[e][r].last, last, sizeof(last));
	return json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:i}", "event", EV[e], "source", s->source,
	                 "reason", AGG[r], "count", (json_int_t)s->agg[e][r].count, "first", first,
	                 "last", last, "window_s", (int)t->window_s);
}

/* Moves a closed window's count into t->closed. */
static void close_window(kmsd_refusals *t, struct slot *s, size_t e, size_t r)
{
	if (s->agg[e][r].count > 0) {
		json_t *o = summary(t, s, e, r);
		/* out of memory: the count stays pending rather than vanish */
		if (o == NULL || json_array_append_new(t->closed, o) != 0)
			return;
	}
	memset(&s->agg[e][r], 0, sizeof(s->agg[e][r]));
}

bool kmsd_refusals_note(kmsd_refusals *t, const char *source, const char *reason)
{
	return kmsd_refusals_note_event(t, source, EV[0], reason);
}

bool kmsd_refusals_note_event(kmsd_refusals *t, const char *source, const char *event,
                              const char *reason)
{
	bool full = true;
	uint64_t now = sl_now_ns();
	size_t r = 0, e = 0;
	while (r < NAGG && strcmp(AGG[r], reason) != 0)
		r++;
	while (e < NEV && strcmp(EV[e], event) != 0)
		e++;
	if (r == NAGG || e == NEV || t->window_ns == 0)
		return true;
	pthread_mutex_lock(&t->mu);
	struct slot *s = find(t, source, true, now);
	if (s != NULL) {
		struct agg *a = &s->agg[e][r];
		if (a->win_start_ns != 0 && now >= a->win_start_ns + t->window_ns)
			close_window(t, s, e, r);
		if (a->win_start_ns == 0) {
			a->win_start_ns = now; /* this one is written in full */
		} else {
			time_t w = time(NULL);
			if (a->count++ == 0)
				a->first = w;
			a->last = w;
			full = false;
		}
	}
	pthread_mutex_unlock(&t->mu);
	return full;
}

json_t *kmsd_refusals_take(kmsd_refusals *t, bool force)
{
	uint64_t now = sl_now_ns();
	json_t *out = NULL;
	if (!force && now < atomic_load(&t->next_scan_ns))
		return NULL;
	atomic_store(&t->next_scan_ns,
	             now + (t->window_ns < 1000000000ULL ? t->window_ns : 1000000000ULL));
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < t->n; i++)
		for (size_t e = 0; e < NEV; e++)
			for (size_t r = 0; r < NAGG; r++)
				if (t->s[i].agg[e][r].win_start_ns != 0 &&
				    (force || now >= t->s[i].agg[e][r].win_start_ns + t->window_ns))
					close_window(t, &t->s[i], e, r);
	if (json_array_size(t->closed) > 0) {
		json_t *fresh = json_array();
		if (fresh != NULL) {
			out = t->closed;
			t->closed = fresh;
		}
	}
	pthread_mutex_unlock(&t->mu);
	return out;
}

void kmsd_refusals_putback(kmsd_refusals *t, json_t *summaries)
{
	pthread_mutex_lock(&t->mu);
	/* keep them in order ahead of anything closed meanwhile */
	if (json_array_extend(summaries, t->closed) == 0) {
		json_decref(t->closed);
		t->closed = json_incref(summaries);
	}
	pthread_mutex_unlock(&t->mu);
	json_decref(summaries);
}

void kmsd_refusals_audit_state(kmsd_refusals *t, bool ok)
{
	atomic_store(&t->audit_ok, ok);
}

bool kmsd_refusals_audit_ok(kmsd_refusals *t)
{
	return atomic_load(&t->audit_ok);
}
