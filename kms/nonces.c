/* The challenge table: single-use 32-byte nonces with a fixed TTL.
 *
 * All memory is allocated up front for `cap` entries, so a flood of
 * challenge requests cannot grow the process: when every slot holds a live
 * (unexpired) nonce, issuing fails and the handler answers 429. Entries stay
 * in the table until they expire, used or not, which is what lets a second
 * use be told apart from a nonce that was never issued. Since the TTL is the
 * same for all, issue order is expiry order: a FIFO list gives O(1) eviction
 * of expired entries, a hash index O(1) lookup. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kmsd.h"

#define NIL UINT32_MAX

struct entry {
	uint8_t nonce[SL_NONCE_LEN];
	uint64_t expires_ns; /* monotonic */
	time_t expires_wall;
	uint32_t next_hash; /* bucket chain */
	uint32_t next_fifo; /* issue order (also the free list) */
	bool used;
};

struct kmsd_nonces {
	pthread_mutex_t mu;
	struct entry *e;
	uint32_t *bucket;
	uint32_t nbuckets; /* power of two */
	uint32_t cap, size;
	uint32_t head, tail; /* FIFO of live entries */
	uint32_t free_list;
	uint64_t ttl_ns;
	unsigned ttl_s;
};

static uint32_t hash_of(const kmsd_nonces *t, const uint8_t *nonce)
{
	uint32_t h;
	memcpy(&h, nonce, sizeof(h)); /* the nonce is uniformly random */
	return h & (t->nbuckets - 1);
}

sl_err kmsd_nonces_new(size_t cap, unsigned ttl_s, kmsd_nonces **out)
{
	sl_err rc = SL_E_NOMEM;
	kmsd_nonces *t = calloc(1, sizeof(*t));
	SL_ENSURE(t != NULL, SL_E_NOMEM, "challenge table");
	SL_ENSURE(cap >= 1 && cap <= 10000000, SL_E_INPUT, "max_challenges: %zu is out of range",
	          cap);
	pthread_mutex_init(&t->mu, NULL);
	t->cap = (uint32_t)cap;
	t->nbuckets = 1;
	while (t->nbuckets < t->cap)
		t->nbuckets <<= 1;
	t->e = calloc(cap, sizeof(*t->e));
	t->bucket = malloc(t->nbuckets * sizeof(*t->bucket));
	SL_ENSURE(t->e != NULL && t->bucket != NULL, SL_E_NOMEM, "challenge table of %zu", cap);
	for (uint32_t i = 0; i < t->nbuckets; i++)
		t->bucket[i] = NIL;
	for (uint32_t i = 0; i < t->cap; i++)
		t->e[i].next_fifo = i + 1 < t->cap ? i + 1 : NIL;
	t->free_list = 0;
	t->head = t->tail = NIL;
	t->ttl_s = ttl_s;
	t->ttl_ns = (uint64_t)ttl_s * 1000000000ULL;
	*out = t;
	t = NULL;
	rc = SL_OK;
out:
	kmsd_nonces_free(t);
	return rc;
}

void kmsd_nonces_free(kmsd_nonces *t)
{
	if (t == NULL)
		return;
	free(t->e);
	free(t->bucket);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

static void unlink_hash(kmsd_nonces *t, uint32_t i)
{
	uint32_t *p = &t->bucket[hash_of(t, t->e[i].nonce)];
	while (*p != NIL && *p != i)
		p = &t->e[*p].next_hash;
	if (*p == i)
		*p = t->e[i].next_hash;
}

/* Drops expired entries from the head of the FIFO. */
static void evict_expired(kmsd_nonces *t, uint64_t now)
{
	while (t->head != NIL && t->e[t->head].expires_ns <= now) {
		uint32_t i = t->head;
		t->head = t->e[i].next_fifo;
		if (t->head == NIL)
			t->tail = NIL;
		unlink_hash(t, i);
		sl_wipe(&t->e[i], sizeof(t->e[i]));
		t->e[i].next_fifo = t->free_list;
		t->free_list = i;
		t->size--;
	}
}

sl_err kmsd_nonces_issue(kmsd_nonces *t, uint8_t nonce[static SL_NONCE_LEN], time_t *expires)
{
	uint64_t now = sl_now_ns();
	uint32_t i, b;
	pthread_mutex_lock(&t->mu);
	if (t->free_list == NIL)
		evict_expired(t, now);
	if (t->free_list == NIL) {
		pthread_mutex_unlock(&t->mu);
		return sl_err_set(SL_E_KMS_REFUSED,
		                  "challenge table full (%u live challenges); retry later", t->cap);
	}
	i = t->free_list;
	t->free_list = t->e[i].next_fifo;
	sl_random(t->e[i].nonce, SL_NONCE_LEN);
	t->e[i].expires_ns = now + t->ttl_ns;
	t->e[i].expires_wall = time(NULL) + (time_t)t->ttl_s;
	t->e[i].used = false;
	b = hash_of(t, t->e[i].nonce);
	t->e[i].next_hash = t->bucket[b];
	t->bucket[b] = i;
	t->e[i].next_fifo = NIL;
	if (t->tail != NIL)
		t->e[t->tail].next_fifo = i;
	else
		t->head = i;
	t->tail = i;
	t->size++;
	memcpy(nonce, t->e[i].nonce, SL_NONCE_LEN);
	*expires = t->e[i].expires_wall;
	pthread_mutex_unlock(&t->mu);
	return SL_OK;
}

enum kmsd_nonce_result kmsd_nonces_consume(kmsd_nonces *t, const uint8_t nonce[static SL_NONCE_LEN])
{
	enum kmsd_nonce_result res = KMSD_NONCE_UNKNOWN;
	uint64_t now = sl_now_ns();
	pthread_mutex_lock(&t->mu);
	for (uint32_t i = t->bucket[hash_of(t, nonce)]; i != NIL; i = t->e[i].next_hash) {
		if (!sl_ct_eq(t->e[i].nonce, nonce, SL_NONCE_LEN))
			continue;
		if (t->e[i].used)
			res = KMSD_NONCE_USED;
		else if (t->e[i].expires_ns <= now)
			res = KMSD_NONCE_EXPIRED;
		else
			res = KMSD_NONCE_OK;
		/* any presentation uses it up, even one that is refused later */
		t->e[i].used = true;
		break;
	}
	pthread_mutex_unlock(&t->mu);
	return res;
}

size_t kmsd_nonces_size(kmsd_nonces *t)
{
	pthread_mutex_lock(&t->mu);
	evict_expired(t, sl_now_ns());
	size_t n = t->size;
	pthread_mutex_unlock(&t->mu);
	return n;
}
