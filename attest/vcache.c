/* The verification cache (vcache.h): 64 sets of 8 entries, the set chosen
 * by the key's first byte, the least recently used entry of a full set
 * replaced; one mutex (a lookup is a few compares, the checks it saves
 * are signature verifications). */
#include <openssl/evp.h>
#include <pthread.h>
#include <string.h>

#include "vcache.h"
#include "seclaunch/attest.h"
#include "seclaunch/util.h"

#define SETS 64
#define WAYS 8

struct entry {
	sl_vcache_key k;
	time_t from, until;
	uint64_t used; /* 0: empty */
	uint8_t val[SL_VCACHE_VAL_MAX];
	size_t vlen;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct entry table[SETS][WAYS];
static uint64_t tick, hits, misses;
static bool disabled;

struct sl_vcache_hasher {
	EVP_MD_CTX *md;
};

static EVP_MD *sha256;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
	sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
}

const EVP_MD *sl_vcache_md(void)
{
	pthread_once(&sha256_once, sha256_fetch);
	return sha256 != NULL ? sha256 : EVP_sha256();
}

sl_vcache_hasher *sl_vcache_begin(const char *label)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (md == NULL || EVP_DigestInit_ex(md, sl_vcache_md(), NULL) != 1 ||
	    EVP_DigestUpdate(md, label, strlen(label) + 1) != 1) {
		EVP_MD_CTX_free(md);
		return NULL;
	}
	return (sl_vcache_hasher *)md;
}

void sl_vcache_add(sl_vcache_hasher *h, const void *p, size_t n)
{
	uint8_t len[8];
	if (h == NULL)
		return;
	/* each part's length first: no two sequences of parts hash alike */
	for (int i = 0; i < 8; i++)
		len[i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
	if (EVP_DigestUpdate((EVP_MD_CTX *)h, len, 8) != 1 ||
	    (n > 0 && EVP_DigestUpdate((EVP_MD_CTX *)h, p, n) != 1)) {
		/* poison it: the final digest is refused */
		EVP_MD_CTX_reset((EVP_MD_CTX *)h);
	}
}

bool sl_vcache_end(sl_vcache_hasher *h, sl_vcache_key *out)
{
	unsigned int n = 0;
	bool ok = h != NULL && EVP_MD_CTX_get0_md((EVP_MD_CTX *)h) != NULL &&
	          EVP_DigestFinal_ex((EVP_MD_CTX *)h, out->h, &n) == 1 && n == 32;
	EVP_MD_CTX_free((EVP_MD_CTX *)h);
	return ok;
}

static time_t now_or(time_t at)
{
	return at != 0 ? at : time(NULL);
}

bool sl_vcache_get(const sl_vcache_key *k, time_t at, uint8_t *val, size_t *vlen)
{
	bool hit = false;
	time_t t = now_or(at);
	pthread_mutex_lock(&mu);
	struct entry *set = table[k->h[0] % SETS];
	for (int i = 0; i < WAYS && !disabled; i++) {
		struct entry *e = &set[i];
		if (e->used == 0 || memcmp(e->k.h, k->h, 32) != 0)
			continue;
		if (t < e->from || t > e->until)
			break; /* verified again; a pass puts the new window */
		e->used = ++tick;
		if (val != NULL)
			memcpy(val, e->val, e->vlen);
		if (vlen != NULL)
			*vlen = e->vlen;
		hit = true;
		break;
	}
	if (hit)
		hits++;
	else
		misses++;
	pthread_mutex_unlock(&mu);
	return hit;
}

void sl_vcache_put(const sl_vcache_key *k, time_t from, time_t until, const uint8_t *val,
                   size_t vlen)
{
	if (vlen > SL_VCACHE_VAL_MAX || until < from)
		return;
	pthread_mutex_lock(&mu);
	struct entry *set = table[k->h[0] % SETS], *e = &set[0];
	for (int i = 0; i < WAYS; i++) {
		if (set[i].used != 0 && memcmp(set[i].k.h, k->h, 32) == 0) {
			e = &set[i];
			break;
		}
		if (set[i].used < e->used)
			e = &set[i];
	}
	if (!disabled) {
		e->k = *k;
		e->from = from;
		e->until = until;
		if (vlen > 0)
			memcpy(e->val, val, vlen);
		e->vlen = vlen;
		e->used = ++tick;
	}
	pthread_mutex_unlock(&mu);
}

void sl_verify_cache_stats(uint64_t *hit, uint64_t *miss)
{
	pthread_mutex_lock(&mu);
	*hit = hits;
	*miss = misses;
	pthread_mutex_unlock(&mu);
}

void sl_verify_cache_reset(bool off)
{
	pthread_mutex_lock(&mu);
	memset(table, 0, sizeof(table));
	hits = misses = 0;
	disabled = off;
	pthread_mutex_unlock(&mu);
}
