/* The enrolled-AK registry: TPM names of attestation keys that proved, by
 * credential activation, that they live in the same TPM as a known EK.
 *
 * File: JSON {"version": 1, "aks": [{"name", "ek_sha256", "enrolled"}],
 * "mac": hex HMAC-SHA256(registry key, canonical JSON of version+aks)}.
 * The MAC key comes from a 0600 file, so an edited registry (an AK added by
 * someone who can write the file but not read the key) is refused at start.
 * Updates are atomic (temp, fsync, rename, fsync of the directory). */
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kmsd.h"
#include "seclaunch/json.h"

#define NAME_MAX_LEN 66
#define REG_MAX_FILE (16u << 20)

struct ak {
	uint8_t name[NAME_MAX_LEN];
	size_t len;
};

struct kmsd_registry {
	pthread_rwlock_t lock;
	char *path;
	sl_secret *key;
	json_t *doc; /* {"version", "aks"} */
	struct ak *aks;
	size_t n, cap;
};

static int cmp_ak(const void *a, const void *b)
{
	const struct ak *x = a, *y = b;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return memcmp(x->name, y->name, x->len);
}

static SL_RESULT mac_of(kmsd_registry *r, const json_t *doc, char hex[65])
{
	uint8_t mac[32];
	char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	if (text == NULL)
		return sl_err_set(SL_E_NOMEM, "registry");
	crypto_auth_hmacsha256(mac, (const uint8_t *)text, strlen(text), sl_secret_data(r->key));
	free(text);
	sl_hex_encode(mac, 32, hex);
	return SL_OK;
}

static SL_RESULT push(kmsd_registry *r, const uint8_t *name, size_t len)
{
	if (r->n == r->cap) {
		size_t nc = r->cap == 0 ? 64 : r->cap * 2;
		struct ak *na = realloc(r->aks, nc * sizeof(*na));
		if (na == NULL)
			return sl_err_set(SL_E_NOMEM, "registry");
		r->aks = na;
		r->cap = nc;
	}
	memcpy(r->aks[r->n].name, name, len);
	r->aks[r->n].len = len;
	r->n++;
	return SL_OK;
}

static SL_RESULT load(kmsd_registry *r)
{
	sl_err rc = SL_E_INTEGRITY;
	uint8_t *buf = NULL;
	size_t len = 0;
	json_t *root = NULL, *aks;
	json_error_t je;
	char want[65], have[64];
	const char *mac;
	struct stat st;

	if (stat(r->path, &st) != 0 && errno == ENOENT)
		return SL_OK;
	SL_GUARD(sl_file_read(r->path, REG_MAX_FILE, &buf, &len));
	root = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &je);
	SL_ENSURE(root != NULL && json_is_object(root), SL_E_INTEGRITY,
	          "%s: registry is not valid JSON (truncated or edited): %s", r->path, je.text);
	mac = sl_json_getstr(root, "mac");
	SL_ENSURE(mac != NULL && strlen(mac) == 64, SL_E_INTEGRITY,
	          "%s: registry has no valid \"mac\"", r->path);
	memcpy(have, mac, sizeof(have));
	json_object_del(root, "mac"); /* frees mac */
	SL_GUARD(mac_of(r, root, want));
	SL_ENSURE(sl_ct_eq(have, want, 64), SL_E_INTEGRITY,
	          "%s: registry MAC does not verify (edited, or another registry key)", r->path);
	SL_ENSURE(json_integer_value(json_object_get(root, "version")) == 1, SL_E_VERSION,
	          "%s: registry version", r->path);
	aks = json_object_get(root, "aks");
	SL_ENSURE(json_is_array(aks), SL_E_INTEGRITY, "%s: registry \"aks\" is not an array",
	          r->path);
	for (size_t i = 0; i < json_array_size(aks); i++) {
		const char *h = sl_json_getstr(json_array_get(aks, i), "name");
		uint8_t *raw = NULL;
		size_t n = 0;
		SL_ENSURE(h != NULL, SL_E_INTEGRITY, "%s: aks[%zu].name missing", r->path, i);
		SL_GUARD(sl_hex_decode_alloc(h, NAME_MAX_LEN, &raw, &n, "aks[].name"));
		rc = push(r, raw, n);
		free(raw);
		if (rc != SL_OK)
			goto out;
	}
	if (r->n > 0)
		qsort(r->aks, r->n, sizeof(*r->aks), cmp_ak);
	r->doc = root;
	root = NULL;
	rc = SL_OK;
out:
	json_decref(root);
	free(buf);
	return rc;
}

sl_err kmsd_registry_open(const char *path, const char *key_file, kmsd_registry **out)
{
	sl_err rc = SL_E_NOMEM;
	kmsd_registry *r = calloc(1, sizeof(*r));
	SL_ENSURE(r != NULL, SL_E_NOMEM, "registry");
	pthread_rwlock_init(&r->lock, NULL);
	r->path = strdup(path);
	SL_ENSURE(r->path != NULL, SL_E_NOMEM, "registry");
	SL_GUARD(sl_secret_read_file(key_file, 64, &r->key));
	SL_ENSURE(sl_secret_len(r->key) == 32, SL_E_INPUT,
	          "%s: registry key must be exactly 32 bytes", key_file);
	kmsd_remove_stale_tmp(path);
	SL_GUARD(load(r));
	if (r->doc == NULL) {
		r->doc = json_pack("{s:i, s:[]}", "version", 1, "aks");
		SL_ENSURE(r->doc != NULL, SL_E_NOMEM, "registry");
	}
	*out = r;
	r = NULL;
	rc = SL_OK;
out:
	kmsd_registry_close(r);
	return rc;
}

void kmsd_registry_close(kmsd_registry *r)
{
	if (r == NULL)
		return;
	json_decref(r->doc);
	free(r->aks);
	sl_secret_free(r->key);
	free(r->path);
	pthread_rwlock_destroy(&r->lock);
	free(r);
}

static bool has_locked(kmsd_registry *r, const uint8_t *name, size_t len)
{
	struct ak k;
	if (len == 0 || len > NAME_MAX_LEN || r->n == 0)
		return false;
	memcpy(k.name, name, len);
	k.len = len;
	return bsearch(&k, r->aks, r->n, sizeof(*r->aks), cmp_ak) != NULL;
}

bool kmsd_registry_has(kmsd_registry *r, const uint8_t *name, size_t len)
{
	pthread_rwlock_rdlock(&r->lock);
	bool found = has_locked(r, name, len);
	pthread_rwlock_unlock(&r->lock);
	return found;
}

size_t kmsd_registry_count(kmsd_registry *r)
{
	pthread_rwlock_rdlock(&r->lock);
	size_t n = r->n;
	pthread_rwlock_unlock(&r->lock);
	return n;
}

sl_err kmsd_registry_add(kmsd_registry *r, const uint8_t *name, size_t len,
                         const uint8_t ek_digest[static 32])
{
	sl_err rc = SL_E_NOMEM;
	char hex[2 * NAME_MAX_LEN + 1], ekhex[65], mac[65], when[32];
	json_t *doc = NULL, *entry;
	char *text = NULL;
	pthread_rwlock_wrlock(&r->lock);
	SL_ENSURE(len > 0 && len <= NAME_MAX_LEN, SL_E_INPUT, "AK name: %zu bytes", len);
	if (has_locked(r, name, len)) {
		rc = SL_OK;
		goto out;
	}
	sl_hex_encode(name, len, hex);
	sl_hex_encode(ek_digest, 32, ekhex);
	sl_time_rfc3339(time(NULL), when, sizeof(when));
	doc = json_deep_copy(r->doc);
	entry = json_pack("{s:s, s:s, s:s}", "name", hex, "ek_sha256", ekhex, "enrolled", when);
	SL_ENSURE(doc != NULL && entry != NULL &&
	              json_array_append_new(json_object_get(doc, "aks"), entry) == 0,
	          SL_E_NOMEM, "registry");
	SL_GUARD(mac_of(r, doc, mac));
	json_object_set_new(doc, "mac", json_string(mac));
	text = json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_object_del(doc, "mac");
	SL_ENSURE(text != NULL, SL_E_NOMEM, "registry");
	SL_GUARD(sl_file_write_atomic(r->path, text, strlen(text), 0600, true));
	SL_GUARD(push(r, name, len));
	qsort(r->aks, r->n, sizeof(*r->aks), cmp_ak);
	json_decref(r->doc);
	r->doc = doc;
	doc = NULL;
	rc = SL_OK;
out:
	pthread_rwlock_unlock(&r->lock);
	free(text);
	json_decref(doc);
	return rc;
}
