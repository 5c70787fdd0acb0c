/* The verification cache (private to attest/): verdicts of checks whose
 * inputs do not change between releases (certificate chains, CRL and
 * collateral signatures), keyed by the SHA-256 of the exact bytes checked,
 * each held only for the time in which the same check passes (its chain's
 * notBefore..notAfter, the collateral's nextUpdate). Only successes are
 * kept; a key differs for any other byte, and a time outside the window
 * is verified again. Bounded (a set-associative table, LRU in each set)
 * and thread-safe. A report's or quote's own signature never goes here. */
#ifndef SECLAUNCH_ATTEST_VCACHE_H
#define SECLAUNCH_ATTEST_VCACHE_H

#include <openssl/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define SL_VCACHE_VAL_MAX 16

typedef struct sl_vcache_key {
	uint8_t h[32];
} sl_vcache_key;

/* SHA-256 fetched once (EVP_sha256() is fetched from the provider again
 * at each use in OpenSSL 3, which costs more than hashing a key's inputs). */
const EVP_MD *sl_vcache_md(void);

/* Incremental key: a domain label, then the bytes checked, in order. */
typedef struct sl_vcache_hasher sl_vcache_hasher;
sl_vcache_hasher *sl_vcache_begin(const char *label);
void sl_vcache_add(sl_vcache_hasher *h, const void *p, size_t n);
/* false (and the hasher freed) when hashing failed: do not cache */
bool sl_vcache_end(sl_vcache_hasher *h, sl_vcache_key *out);

/* true: this check passed before and at (0: now) lies in its window; val
 * (up to SL_VCACHE_VAL_MAX bytes) is what was stored with it. */
bool sl_vcache_get(const sl_vcache_key *k, time_t at, uint8_t *val, size_t *vlen);
void sl_vcache_put(const sl_vcache_key *k, time_t from, time_t until, const uint8_t *val,
                   size_t vlen);

#endif
