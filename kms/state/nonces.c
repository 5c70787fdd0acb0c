/* Challenges: single-use 32-byte nonces with a fixed TTL, kept in the
 * state store so that a nonce issued by one replica and presented to
 * another is known there, and a nonce used on one is refused on all
 * (store.h: one conditional UPDATE decides). Expiry is in milliseconds of
 * wall-clock time, so replicas' clocks must agree to well under the TTL
 * (NTP does).
 *
 * A flood of challenge requests cannot grow the store without bound: when
 * `cap` live (unexpired) challenges exist, issuing fails and the handler
 * answers 429. Expired rows are purged at most once a second; entries stay
 * until they expire, used or not, which is what tells a second use apart
 * from a nonce that was never issued. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "state.h"

struct kmsd_nonces {
	kmsd_store *st;
	pthread_mutex_t mu;
	size_t cap, live;
	int64_t last_purge_ms;
	unsigned ttl_s;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

sl_err kmsd_nonces_new(kmsd_store *st, size_t cap, unsigned ttl_s, kmsd_nonces **out)
{
	kmsd_nonces *t;
	if (cap < 1 || cap > 10000000)
		return sl_err_set(SL_E_INPUT, "max_challenges: %zu is out of range", cap);
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return sl_err_set(SL_E_NOMEM, "challenge table");
	pthread_mutex_init(&t->mu, NULL);
	t->st = st;
	t->cap = cap;
	t->ttl_s = ttl_s;
	t->last_purge_ms = -1000000;
	*out = t;
	return SL_OK;
}

void kmsd_nonces_free(kmsd_nonces *t)
{
	if (t == NULL)
		return;
	pthread_mutex_destroy(&t->mu);
	free(t);
}

/* Called with mu held. */
static SL_RESULT purge(kmsd_nonces *t, int64_t now)
{
	size_t live = 0;
	sl_err rc = kmsd_store_challenge_purge(t->st, now, &live);
	if (rc == SL_OK) {
		t->live = live;
		t->last_purge_ms = now;
	}
	return rc;
}

sl_err kmsd_nonces_issue(kmsd_nonces *t, uint8_t nonce[static SL_NONCE_LEN], time_t *expires)
{
	int64_t now = now_ms(), exp_ms = now + (int64_t)t->ttl_s * 1000;
	sl_err rc = SL_OK;
	pthread_mutex_lock(&t->mu);
	if (now - t->last_purge_ms >= 1000 || t->live >= t->cap)
		rc = purge(t, now);
	if (rc == SL_OK && t->live >= t->cap)
		rc = sl_err_set(SL_E_KMS_REFUSED,
		                "challenge table full (%zu live challenges); retry later", t->cap);
	if (rc == SL_OK)
		t->live++;
	pthread_mutex_unlock(&t->mu);
	if (rc != SL_OK)
		return rc;
	sl_random(nonce, SL_NONCE_LEN);
	rc = kmsd_store_challenge_put(t->st, nonce, exp_ms);
	*expires = (time_t)(exp_ms / 1000);
	return rc;
}

enum kmsd_nonce_result kmsd_nonces_consume(kmsd_nonces *t, const uint8_t nonce[static SL_NONCE_LEN])
{
	return kmsd_nonces_consume_read(t, nonce, NULL);
}

enum kmsd_nonce_result kmsd_nonces_consume_read(kmsd_nonces *t,
                                                const uint8_t nonce[static SL_NONCE_LEN],
                                                kmsd_release_read *rd)
{
	enum kmsd_challenge_result r = KMSD_CH_UNKNOWN;
	if (kmsd_store_challenge_read(t->st, nonce, now_ms(), &r, rd) != SL_OK)
		return KMSD_NONCE_FAILED;
	switch (r) {
	case KMSD_CH_OK:
		return KMSD_NONCE_OK;
	case KMSD_CH_USED:
		return KMSD_NONCE_USED;
	case KMSD_CH_EXPIRED:
		return KMSD_NONCE_EXPIRED;
	case KMSD_CH_UNKNOWN:
		break;
	}
	return KMSD_NONCE_UNKNOWN;
}

void kmsd_nonces_give_back(kmsd_nonces *t, const uint8_t nonce[static SL_NONCE_LEN])
{
	/* a nonce nobody could use meanwhile (this request held it): giving it
	 * back is as if it had not been presented */
	if (kmsd_store_challenge_unuse(t->st, nonce) != SL_OK) {
		kmsd_log(KMSD_LOG_ERR,
		         "nonce not given back after a 503 (a retry is refused as "
		         "reused): %s",
		         sl_err_detail());
		sl_err_clear();
	}
}

size_t kmsd_nonces_size(kmsd_nonces *t)
{
	pthread_mutex_lock(&t->mu);
	/* a failed purge (store down) leaves the last count: a gauge, not a decision */
	if (purge(t, now_ms()) != SL_OK)
		sl_err_clear();
	size_t n = t->live;
	pthread_mutex_unlock(&t->mu);
	return n;
}
