/* The local KEK keystore: AES-256 KEKs in one file, encrypted and
 * authenticated with AES-256-GCM under a master key read from a 0600 file.
 *
 * File (docs/seclaunchd.md, "Local keystore"):
 *   "SLKS" | u8 version=1 | 3 zero bytes | iv[12] | u32be n | ct[n] | tag[16]
 * AAD = the 24 header bytes before ct. Plaintext:
 *   u32be count | count x (u8 id_len | id | kek[32])
 * Every update rewrites the whole file atomically (temp, fsync, rename, fsync
 * of the directory), so a crash leaves either the old or the new keystore.
 * A file that does not authenticate (tampered, truncated, other master key)
 * stops the service from starting. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kmsd.h"
#include "seclaunch/buf.h"

#define KS_MAGIC "SLKS"
#define KS_VERSION 1
#define KS_HDR 24
#define KS_MAX_KEYS 100000
#define KS_MAX_FILE (KS_HDR + 4 + (size_t)KS_MAX_KEYS * (1 + SL_KMS_ID_MAX + 32) + 16)

struct kmsd_keystore {
	pthread_rwlock_t lock;
	char *path;
	sl_secret *master; /* 32 bytes */
	char **ids;
	sl_secret *keks; /* cap * 32 bytes */
	size_t count, cap;
};

static ssize_t find(const kmsd_keystore *ks, const char *id)
{
	for (size_t i = 0; i < ks->count; i++) {
		if (strcmp(ks->ids[i], id) == 0)
			return (ssize_t)i;
	}
	return -1;
}

static SL_RESULT grow(kmsd_keystore *ks, size_t need)
{
	sl_err rc = SL_E_NOMEM;
	sl_secret *nk = NULL;
	char **nids;
	size_t ncap;
	if (need <= ks->cap)
		return SL_OK;
	ncap = ks->cap == 0 ? 16 : ks->cap * 2;
	while (ncap < need)
		ncap *= 2;
	nids = realloc(ks->ids, ncap * sizeof(*nids));
	SL_ENSURE(nids != NULL, SL_E_NOMEM, "keystore: %zu ids", ncap);
	ks->ids = nids;
	SL_GUARD(sl_secret_new(ncap * 32, &nk));
	if (ks->count > 0)
		memcpy(sl_secret_data(nk), sl_secret_data(ks->keks), ks->count * 32);
	sl_secret_free(ks->keks);
	ks->keks = nk;
	ks->cap = ncap;
	rc = SL_OK;
out:
	return rc;
}

/* Parses the decrypted plaintext into ks. */
static SL_RESULT load_plain(kmsd_keystore *ks, const uint8_t *pt, size_t len)
{
	sl_err rc = SL_E_FORMAT;
	sl_reader r;
	uint32_t count;
	sl_reader_init(&r, pt, len, "keystore");
	SL_GUARD(sl_read_u32be(&r, &count, "count"));
	SL_ENSURE(count <= KS_MAX_KEYS, SL_E_FORMAT, "keystore: %u keys is over the limit", count);
	SL_GUARD(grow(ks, count));
	for (uint32_t i = 0; i < count; i++) {
		sl_reader sub;
		const uint8_t *idp;
		char id[SL_KMS_ID_MAX + 1];
		SL_GUARD(sl_read_lp8(&r, &sub, "key id"));
		SL_ENSURE(sub.len <= SL_KMS_ID_MAX, SL_E_FORMAT, "keystore: entry %u id too long",
		          i);
		SL_GUARD(sl_read_view(&sub, sl_reader_left(&sub), &idp, "key id"));
		memcpy(id, idp, sub.len);
		id[sub.len] = '\0';
		SL_ENSURE(kmsd_valid_key_id(id) && find(ks, id) < 0, SL_E_FORMAT,
		          "keystore: entry %u has an invalid or duplicate id", i);
		ks->ids[ks->count] = strdup(id);
		SL_ENSURE(ks->ids[ks->count] != NULL, SL_E_NOMEM, "keystore id");
		SL_GUARD(sl_read_bytes(&r, sl_secret_data(ks->keks) + ks->count * 32, 32, "kek"));
		ks->count++;
	}
	SL_GUARD(sl_reader_expect_end(&r));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT load_file(kmsd_keystore *ks)
{
	sl_err rc = SL_E_IO;
	uint8_t *buf = NULL;
	size_t len = 0;
	sl_secret *pt = NULL;
	sl_reader r;
	const uint8_t *iv, *ct, *tag;
	uint32_t n;
	uint8_t ver;
	struct stat st;

	if (stat(ks->path, &st) != 0 && errno == ENOENT)
		return SL_OK; /* a new keystore; the first key creates the file */
	SL_GUARD(sl_file_read(ks->path, KS_MAX_FILE, &buf, &len));
	sl_reader_init(&r, buf, len, ks->path);
	SL_ENSURE(len >= KS_HDR + 16 && memcmp(buf, KS_MAGIC, 4) == 0, SL_E_INTEGRITY,
	          "%s: not a seclaunchd keystore (bad magic or truncated)", ks->path);
	SL_GUARD(sl_read_skip(&r, 4, "magic"));
	SL_GUARD(sl_read_u8(&r, &ver, "version"));
	SL_ENSURE(ver == KS_VERSION, SL_E_VERSION, "%s: keystore version %u (want %u)", ks->path,
	          ver, KS_VERSION);
	SL_GUARD(sl_read_zeros(&r, 3, "reserved"));
	SL_GUARD(sl_read_view(&r, KMSD_GCM_IV, &iv, "iv"));
	SL_GUARD(sl_read_u32be(&r, &n, "ciphertext length"));
	SL_ENSURE(sl_reader_left(&r) == (size_t)n + 16, SL_E_INTEGRITY,
	          "%s: keystore truncated or extended (%zu bytes after the header, want %u)",
	          ks->path, sl_reader_left(&r), n + 16);
	SL_GUARD(sl_read_view(&r, n, &ct, "ciphertext"));
	SL_GUARD(sl_read_view(&r, 16, &tag, "tag"));
	SL_GUARD(sl_secret_new(n > 0 ? n : 1, &pt));
	rc = kmsd_gcm_open(sl_secret_data(ks->master), iv, buf, KS_HDR, ct, n, tag,
	                   sl_secret_data(pt));
	SL_ENSURE(rc == SL_OK, SL_E_INTEGRITY,
	          "%s: keystore does not authenticate under the master key (tampered, or another "
	          "master key)",
	          ks->path);
	rc = load_plain(ks, sl_secret_data(pt), n);
	if (rc != SL_OK)
		rc = sl_err_wrap(SL_E_INTEGRITY, "%s", ks->path);
out:
	sl_secret_free(pt);
	free(buf);
	return rc;
}

/* Writes ks plus (extra_id, extra_kek) when extra_id is set. */
static SL_RESULT save(kmsd_keystore *ks, const char *extra_id, const uint8_t *extra_kek)
{
	sl_err rc = SL_E_NOMEM;
	size_t count = ks->count + (extra_id != NULL ? 1 : 0);
	size_t ptlen = 4;
	sl_secret *pt = NULL;
	uint8_t *file = NULL;
	sl_writer w;
	for (size_t i = 0; i < ks->count; i++)
		ptlen += 1 + strlen(ks->ids[i]) + 32;
	if (extra_id != NULL)
		ptlen += 1 + strlen(extra_id) + 32;
	SL_GUARD(sl_secret_new(ptlen, &pt));
	sl_writer_init_fixed(&w, sl_secret_data(pt), ptlen);
	SL_GUARD(sl_write_u32be(&w, (uint32_t)count));
	for (size_t i = 0; i < count; i++) {
		const char *id = i < ks->count ? ks->ids[i] : extra_id;
		const uint8_t *kek = i < ks->count ? sl_secret_data(ks->keks) + i * 32 : extra_kek;
		SL_GUARD(sl_write_u8(&w, (uint8_t)strlen(id)));
		SL_GUARD(sl_write_bytes(&w, id, strlen(id)));
		SL_GUARD(sl_write_bytes(&w, kek, 32));
	}
	file = malloc(KS_HDR + ptlen + 16);
	SL_ENSURE(file != NULL, SL_E_NOMEM, "keystore file");
	memcpy(file, KS_MAGIC, 4);
	file[4] = KS_VERSION;
	memset(file + 5, 0, 3);
	sl_random(file + 8, KMSD_GCM_IV);
	file[20] = (uint8_t)(ptlen >> 24);
	file[21] = (uint8_t)(ptlen >> 16);
	file[22] = (uint8_t)(ptlen >> 8);
	file[23] = (uint8_t)ptlen;
	SL_GUARD(kmsd_gcm_seal(sl_secret_data(ks->master), file + 8, file, KS_HDR,
	                       sl_secret_data(pt), ptlen, file + KS_HDR, file + KS_HDR + ptlen));
	SL_GUARD(sl_file_write_atomic(ks->path, file, KS_HDR + ptlen + 16, 0600, true));
	rc = SL_OK;
out:
	free(file);
	sl_secret_free(pt);
	return rc;
}

sl_err kmsd_keystore_open(const char *path, const char *master_key_file, kmsd_keystore **out)
{
	sl_err rc = SL_E_NOMEM;
	kmsd_keystore *ks = calloc(1, sizeof(*ks));
	SL_ENSURE(ks != NULL, SL_E_NOMEM, "keystore");
	pthread_rwlock_init(&ks->lock, NULL);
	ks->path = strdup(path);
	SL_ENSURE(ks->path != NULL, SL_E_NOMEM, "keystore path");
	SL_GUARD(sl_secret_read_file(master_key_file, 64, &ks->master));
	SL_ENSURE(sl_secret_len(ks->master) == 32, SL_E_INPUT,
	          "%s: master key must be exactly 32 bytes, got %zu", master_key_file,
	          sl_secret_len(ks->master));
	kmsd_remove_stale_tmp(path);
	SL_GUARD(load_file(ks));
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
	for (size_t i = 0; i < ks->count; i++)
		free(ks->ids[i]);
	free(ks->ids);
	sl_secret_free(ks->keks);
	sl_secret_free(ks->master);
	free(ks->path);
	pthread_rwlock_destroy(&ks->lock);
	free(ks);
}

sl_err kmsd_keystore_create(kmsd_keystore *ks, const char *id)
{
	sl_err rc = SL_E_NOMEM;
	sl_secret *kek = NULL;
	char *dup = NULL;
	pthread_rwlock_wrlock(&ks->lock);
	SL_ENSURE(find(ks, id) < 0, SL_E_EXISTS, "key '%s' already exists", id);
	SL_ENSURE(ks->count < KS_MAX_KEYS, SL_E_TOO_LARGE, "keystore is full (%d keys)",
	          KS_MAX_KEYS);
	SL_GUARD(sl_secret_random(32, &kek));
	dup = strdup(id);
	SL_ENSURE(dup != NULL, SL_E_NOMEM, "key id");
	SL_GUARD(grow(ks, ks->count + 1));
	/* durable first: a key is usable only once it is on disk */
	SL_GUARD(save(ks, id, sl_secret_data(kek)));
	memcpy(sl_secret_data(ks->keks) + ks->count * 32, sl_secret_data(kek), 32);
	ks->ids[ks->count++] = dup;
	dup = NULL;
	rc = SL_OK;
out:
	pthread_rwlock_unlock(&ks->lock);
	free(dup);
	sl_secret_free(kek);
	return rc;
}

size_t kmsd_keystore_count(kmsd_keystore *ks)
{
	pthread_rwlock_rdlock(&ks->lock);
	size_t n = ks->count;
	pthread_rwlock_unlock(&ks->lock);
	return n;
}

sl_err kmsd_keystore_with(kmsd_keystore *ks, const char *id,
                          sl_err (*fn)(const uint8_t kek[static 32], void *ctx), void *ctx)
{
	sl_err rc;
	pthread_rwlock_rdlock(&ks->lock);
	ssize_t i = find(ks, id);
	if (i < 0)
		rc = sl_err_set(SL_E_INPUT, "unknown key id '%s'", id);
	else
		rc = fn(sl_secret_data(ks->keks) + (size_t)i * 32, ctx);
	pthread_rwlock_unlock(&ks->lock);
	return rc;
}
