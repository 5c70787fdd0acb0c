/* The local KEK backend: AES-256 KEKs kept in the state store (store.h,
 * table kek_versions), each version wrapped under the master key read from
 * a 0600 file:
 *   wrapped = iv[12] | AES-256-GCM(master, iv, AAD, kek)[32] | tag[16]
 *   AAD     = "seclaunch-kek-v1" | u8 len(id) | id | u32be version
 * so a row moved to another key id or version, or edited, does not open.
 * Unwrapped KEKs are cached in guarded memory by (id, version) together
 * with the wrapped row they came from: every use reads that row from the
 * store (with whether the key is enabled and the version not retired), and
 * the cached KEK serves only when the row is the same bytes. A key deleted
 * and made again under the same id has a new random KEK and IV, so its row
 * differs and the old KEK is wiped and never used again; a delete also
 * wipes the key's entries at once (kmsd_keystore_forget). */
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"

#define KEK_WRAPPED_LEN (KMSD_GCM_IV + 32 + KMSD_GCM_TAG)
#define SLAB_KEKS 128

struct slot {
	char *name; /* "id#version"; NULL: empty */
	uint8_t *kek;
	uint8_t wrapped[KEK_WRAPPED_LEN]; /* the store row it was opened from */
	bool live;                        /* false: wiped (deleted or replaced) */
};

struct kmsd_keystore {
	kmsd_store *st;
	sl_secret *master;
	pthread_rwlock_t lock;
	struct slot *tab;
	size_t cap, used;
	sl_secret **slabs;
	size_t nslabs, slab_used;
};

static size_t kek_aad(const char *id, unsigned version, uint8_t *aad)
{
	static const char tag[] = "seclaunch-kek-v1";
	size_t n = strlen(id), o = sizeof(tag) - 1;
	memcpy(aad, tag, o);
	aad[o++] = (uint8_t)n;
	memcpy(aad + o, id, n);
	o += n;
	aad[o++] = (uint8_t)(version >> 24);
	aad[o++] = (uint8_t)(version >> 16);
	aad[o++] = (uint8_t)(version >> 8);
	aad[o++] = (uint8_t)version;
	return o;
}

sl_err kmsd_keystore_seal(kmsd_keystore *ks, const char *id, unsigned version,
                          const uint8_t kek[static 32], uint8_t out[static KEK_WRAPPED_LEN])
{
	uint8_t aad[32 + SL_KMS_ID_MAX];
	size_t n = kek_aad(id, version, aad);
	sl_random(out, KMSD_GCM_IV);
	return kmsd_gcm_seal(sl_secret_data(ks->master), out, aad, n, kek, 32, out + KMSD_GCM_IV,
	                     out + KMSD_GCM_IV + 32);
}

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ULL;
	return h;
}

/* Under a lock (read or write). */
static struct slot *lookup(kmsd_keystore *ks, const char *name)
{
	if (ks->cap == 0)
		return NULL;
	for (size_t i = fnv(name) & (ks->cap - 1);; i = (i + 1) & (ks->cap - 1)) {
		if (ks->tab[i].name == NULL)
			return NULL;
		if (strcmp(ks->tab[i].name, name) == 0)
			return &ks->tab[i];
	}
}

/* Under the write lock: the KEK opened from `wrapped` for name, replacing
 * (wiping) whatever the slot held. */
static SL_RESULT insert(kmsd_keystore *ks, const char *name, const uint8_t *wrapped,
                        const uint8_t kek[static 32])
{
	sl_err rc = SL_E_NOMEM;
	struct slot *old = lookup(ks, name);
	if (old != NULL) {
		memcpy(old->kek, kek, 32);
		memcpy(old->wrapped, wrapped, KEK_WRAPPED_LEN);
		old->live = true;
		return SL_OK;
	}
	if (2 * (ks->used + 1) > ks->cap) {
		size_t nc = ks->cap == 0 ? 64 : ks->cap * 2;
		struct slot *nt = calloc(nc, sizeof(*nt));
		SL_ENSURE(nt != NULL, SL_E_NOMEM, "KEK cache");
		for (size_t i = 0; i < ks->cap; i++) {
			if (ks->tab[i].name == NULL)
				continue;
			size_t j = fnv(ks->tab[i].name) & (nc - 1);
			while (nt[j].name != NULL)
				j = (j + 1) & (nc - 1);
			nt[j] = ks->tab[i];
		}
		free(ks->tab);
		ks->tab = nt;
		ks->cap = nc;
	}
	if (ks->nslabs == 0 || ks->slab_used == SLAB_KEKS) {
		sl_secret **ns = realloc(ks->slabs, (ks->nslabs + 1) * sizeof(*ns));
		SL_ENSURE(ns != NULL, SL_E_NOMEM, "KEK cache");
		ks->slabs = ns;
		SL_GUARD(sl_secret_new(SLAB_KEKS * 32, &ks->slabs[ks->nslabs]));
		ks->nslabs++;
		ks->slab_used = 0;
	}
	size_t j = fnv(name) & (ks->cap - 1);
	while (ks->tab[j].name != NULL)
		j = (j + 1) & (ks->cap - 1);
	ks->tab[j].name = strdup(name);
	SL_ENSURE(ks->tab[j].name != NULL, SL_E_NOMEM, "KEK cache");
	ks->tab[j].kek = sl_secret_data(ks->slabs[ks->nslabs - 1]) + ks->slab_used * 32;
	ks->slab_used++;
	memcpy(ks->tab[j].kek, kek, 32);
	memcpy(ks->tab[j].wrapped, wrapped, KEK_WRAPPED_LEN);
	ks->tab[j].live = true;
	ks->used++;
	rc = SL_OK;
out:
	return rc;
}

sl_err kmsd_keystore_open(kmsd_store *st, const char *master_key_file, kmsd_keystore **out)
{
	sl_err rc = SL_E_NOMEM;
	kmsd_keystore *ks = calloc(1, sizeof(*ks));
	SL_ENSURE(ks != NULL, SL_E_NOMEM, "keystore");
	pthread_rwlock_init(&ks->lock, NULL);
	ks->st = st;
	SL_GUARD(sl_secret_read_file(master_key_file, 64, &ks->master));
	SL_ENSURE(sl_secret_len(ks->master) == 32, SL_E_INPUT,
	          "%s: master key must be exactly 32 bytes, got %zu", master_key_file,
	          sl_secret_len(ks->master));
	SL_GUARD(kmsd_keycheck(st, "master key", master_key_file, sl_secret_data(ks->master)));
	*out = ks;
	ks = NULL;
	rc = SL_OK;
out:
	kmsd_keystore_close(ks);
	return rc;
}

void kmsd_keystore_close(kmsd_keystore *ks)
{
	if (ks == NULL)
		return;
	for (size_t i = 0; i < ks->cap; i++)
		free(ks->tab[i].name);
	free(ks->tab);
	for (size_t i = 0; i < ks->nslabs; i++)
		sl_secret_free(ks->slabs[i]);
	free(ks->slabs);
	sl_secret_free(ks->master);
	pthread_rwlock_destroy(&ks->lock);
	free(ks);
}

/* A new random KEK for (id, version), sealed into wrapped and cached. */
static SL_RESULT kmsd_keystore_make(kmsd_keystore *ks, const char *id, unsigned version,
                                    uint8_t wrapped[static KEK_WRAPPED_LEN])
{
	sl_err rc = SL_E_NOMEM;
	sl_secret *kek = NULL;
	SL_GUARD(sl_secret_random(32, &kek));
	SL_GUARD(kmsd_keystore_seal(ks, id, version, sl_secret_data(kek), wrapped));
	rc = SL_OK;
out:
	sl_secret_free(kek);
	return rc;
}

sl_err kmsd_keystore_create(kmsd_keystore *ks, const char *id)
{
	uint8_t wrapped[KEK_WRAPPED_LEN];
	sl_err rc = kmsd_keystore_make(ks, id, 1, wrapped);
	if (rc != SL_OK)
		return rc;
	/* durable first: a key is usable only once the store has it */
	return kmsd_store_key_create(ks->st, id, "local", wrapped, sizeof(wrapped),
	                             (int64_t)time(NULL));
}

sl_err kmsd_keystore_rotate(kmsd_keystore *ks, const char *id, unsigned version)
{
	uint8_t wrapped[KEK_WRAPPED_LEN];
	sl_err rc = kmsd_keystore_make(ks, id, version, wrapped);
	if (rc != SL_OK)
		return rc;
	return kmsd_store_kek_add(ks->st, id, version, wrapped, sizeof(wrapped),
	                          (int64_t)time(NULL));
}

/* Opens (id, version)'s wrapped row under the master key into the cache. */
static SL_RESULT load(kmsd_keystore *ks, const char *id, unsigned version, const char *name,
                      const uint8_t *wrapped)
{
	uint8_t aad[32 + SL_KMS_ID_MAX];
	size_t n;
	sl_secret *kek = NULL;
	sl_err rc;
	SL_GUARD(sl_secret_new(32, &kek));
	n = kek_aad(id, version, aad);
	rc = kmsd_gcm_open(sl_secret_data(ks->master), wrapped, aad, n, wrapped + KMSD_GCM_IV, 32,
	                   wrapped + KMSD_GCM_IV + 32, sl_secret_data(kek));
	SL_ENSURE(rc == SL_OK, SL_E_WRONG_KEY,
	          "state store: KEK '%s' version %u does not authenticate under the master key "
	          "(tampered, or another master key)",
	          id, version);
	pthread_rwlock_wrlock(&ks->lock);
	rc = insert(ks, name, wrapped, sl_secret_data(kek));
	pthread_rwlock_unlock(&ks->lock);
out:
	sl_secret_free(kek);
	return rc;
}

sl_err kmsd_keystore_with(kmsd_keystore *ks, const char *id, unsigned version,
                          const uint8_t *wrapped, size_t wlen,
                          sl_err (*fn)(const uint8_t kek[static 32], void *ctx), void *ctx)
{
	char name[SL_KMS_ID_MAX + 16];
	sl_err rc;
	if (wlen != KEK_WRAPPED_LEN)
		return sl_err_set(SL_E_INTEGRITY,
		                  "state store: KEK '%s' version %u is not a local key (%zu bytes)",
		                  id, version, wlen);
	snprintf(name, sizeof(name), "%s#%u", id, version);
	for (int pass = 0; pass < 2; pass++) {
		pthread_rwlock_rdlock(&ks->lock);
		struct slot *s = lookup(ks, name);
		/* the same row as the one read for this use: a recreated key's is not */
		if (s != NULL && s->live &&
		    sodium_memcmp(s->wrapped, wrapped, KEK_WRAPPED_LEN) == 0) {
			rc = fn(s->kek, ctx);
			pthread_rwlock_unlock(&ks->lock);
			return rc;
		}
		pthread_rwlock_unlock(&ks->lock);
		if (pass == 0 && (rc = load(ks, id, version, name, wrapped)) != SL_OK)
			return rc;
	}
	return sl_err_set(SL_E_INTERNAL, "KEK cache");
}

void kmsd_keystore_forget(kmsd_keystore *ks, const char *id)
{
	size_t n = strlen(id);
	pthread_rwlock_wrlock(&ks->lock);
	for (size_t i = 0; i < ks->cap; i++) {
		struct slot *s = &ks->tab[i];
		if (s->name != NULL && strncmp(s->name, id, n) == 0 && s->name[n] == '#' &&
		    s->live) {
			sodium_memzero(s->kek, 32);
			s->live = false;
		}
	}
	pthread_rwlock_unlock(&ks->lock);
}
