/* The enrolled-AK registry: TPM names of attestation keys that proved, by
 * credential activation, that they live in the same TPM as a known EK.
 * The rows live in the state store (store.h, table aks); each carries
 *   mac = HMAC-SHA256(registry key, "seclaunch-ak-v1" | u8 len | name |
 *                     ek_sha256 | i64be enrolled)
 * under a key read from a 0600 file, so someone who can write the database
 * but not read the key cannot add an AK: a row that does not verify counts
 * as not enrolled and is reported. Revocation is a flag on the row; it is
 * not under the MAC (it only ever takes trust away; restoring a revoked row
 * needs write access to the database, which the operator's backups and the
 * audit log answer for). */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kmsd.h"
#include "store.h"

struct kmsd_registry {
	kmsd_store *st;
	sl_secret *key;
};

static void mac_of(kmsd_registry *r, const uint8_t *name, size_t len, const kmsd_ak_row *row,
                   uint8_t mac[static 32])
{
	static const char tag[] = "seclaunch-ak-v1";
	crypto_auth_hmacsha256_state h;
	uint8_t l = (uint8_t)len, when[8];
	for (int i = 0; i < 8; i++)
		when[i] = (uint8_t)((uint64_t)row->enrolled >> (56 - 8 * i));
	crypto_auth_hmacsha256_init(&h, sl_secret_data(r->key), 32);
	crypto_auth_hmacsha256_update(&h, (const uint8_t *)tag, sizeof(tag) - 1);
	crypto_auth_hmacsha256_update(&h, &l, 1);
	crypto_auth_hmacsha256_update(&h, name, len);
	crypto_auth_hmacsha256_update(&h, row->ek_sha256, 32);
	crypto_auth_hmacsha256_update(&h, when, 8);
	crypto_auth_hmacsha256_final(&h, mac);
	sodium_memzero(&h, sizeof(h));
}

sl_err kmsd_registry_open(kmsd_store *st, const char *key_file, kmsd_registry **out)
{
	sl_err rc = SL_E_NOMEM;
	kmsd_registry *r = calloc(1, sizeof(*r));
	SL_ENSURE(r != NULL, SL_E_NOMEM, "registry");
	r->st = st;
	SL_GUARD(sl_secret_read_file(key_file, 64, &r->key));
	SL_ENSURE(sl_secret_len(r->key) == 32, SL_E_INPUT,
	          "%s: registry key must be exactly 32 bytes", key_file);
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
	sl_secret_free(r->key);
	free(r);
}

sl_err kmsd_registry_lookup(kmsd_registry *r, const uint8_t *name, size_t len,
                            enum kmsd_ak_status *status)
{
	kmsd_ak_row row = {0};
	bool found = false;
	uint8_t want[32];
	char hex[2 * KMSD_AK_NAME_MAX + 1];
	*status = KMSD_AK_UNKNOWN;
	if (len == 0 || len > KMSD_AK_NAME_MAX)
		return SL_OK;
	sl_err rc = kmsd_store_ak_get(r->st, name, len, &row, &found);
	if (rc != SL_OK || !found)
		return rc;
	mac_of(r, name, len, &row, want);
	if (!sl_ct_eq(want, row.mac, 32)) {
		sl_hex_encode(name, len, hex);
		*status = KMSD_AK_FORGED;
		return sl_err_set(
		    SL_E_INTEGRITY,
		    "state store: the row of AK %s does not verify under the registry "
		    "key (added or edited outside seclaunchd)",
		    hex);
	}
	*status = row.revoked ? KMSD_AK_REVOKED : KMSD_AK_ENROLLED;
	return SL_OK;
}

bool kmsd_registry_has(kmsd_registry *r, const uint8_t *name, size_t len)
{
	enum kmsd_ak_status st;
	return kmsd_registry_lookup(r, name, len, &st) == SL_OK && st == KMSD_AK_ENROLLED;
}

size_t kmsd_registry_count(kmsd_registry *r)
{
	size_t n = 0;
	if (kmsd_store_count(r->st, KMSD_T_AKS, &n) != SL_OK)
		return 0;
	return n;
}

sl_err kmsd_registry_add_at(kmsd_registry *r, const uint8_t *name, size_t len,
                            const uint8_t ek_digest[static 32], int64_t when)
{
	kmsd_ak_row row = {.enrolled = when};
	if (len == 0 || len > KMSD_AK_NAME_MAX)
		return sl_err_set(SL_E_INPUT, "AK name: %zu bytes", len);
	memcpy(row.ek_sha256, ek_digest, 32);
	mac_of(r, name, len, &row, row.mac);
	return kmsd_store_ak_put(r->st, name, len, &row, NULL);
}

sl_err kmsd_registry_add(kmsd_registry *r, const uint8_t *name, size_t len,
                         const uint8_t ek_digest[static 32])
{
	return kmsd_registry_add_at(r, name, len, ek_digest, (int64_t)time(NULL));
}

sl_err kmsd_registry_revoke(kmsd_registry *r, const uint8_t *name, size_t len, bool *was)
{
	enum kmsd_ak_status st = KMSD_AK_UNKNOWN;
	bool found = false;
	char hex[2 * KMSD_AK_NAME_MAX + 1] = "";
	sl_err rc = kmsd_registry_lookup(r, name, len, &st);
	*was = false;
	if (rc != SL_OK && st != KMSD_AK_FORGED)
		return rc;
	if (len > 0 && len <= KMSD_AK_NAME_MAX)
		sl_hex_encode(name, len, hex);
	if (st == KMSD_AK_UNKNOWN)
		return sl_err_set(SL_E_INPUT, "AK %s is not enrolled here", hex);
	*was = st == KMSD_AK_REVOKED;
	if (*was)
		return SL_OK;
	/* a forged row is revoked too: it only ever takes trust away */
	rc = kmsd_store_ak_revoke(r->st, name, len, &found);
	if (rc == SL_OK && !found)
		rc = sl_err_set(SL_E_INPUT, "AK %s is not enrolled here", hex);
	return rc;
}

bool kmsd_registry_revoked(kmsd_registry *r, const uint8_t *name, size_t len)
{
	enum kmsd_ak_status st = KMSD_AK_UNKNOWN;
	return kmsd_registry_lookup(r, name, len, &st) == SL_OK && st == KMSD_AK_REVOKED;
}

struct list_ctx {
	kmsd_registry *r;
	json_t *out;
};

static SL_RESULT list_one(void *ctx, const uint8_t *name, size_t len, const kmsd_ak_row *row)
{
	struct list_ctx *l = ctx;
	char hex[2 * KMSD_AK_NAME_MAX + 1], ek[65], when[32];
	uint8_t want[32];
	sl_hex_encode(name, len, hex);
	sl_hex_encode(row->ek_sha256, 32, ek);
	sl_time_rfc3339((time_t)row->enrolled, when, sizeof(when));
	mac_of(l->r, name, len, row, want);
	json_t *e =
	    json_pack("{s:s, s:s, s:s, s:b, s:b}", "name", hex, "ek_sha256", ek, "enrolled", when,
	              "revoked", row->revoked, "verified", sl_ct_eq(want, row->mac, 32));
	if (e == NULL || json_array_append_new(l->out, e) != 0)
		return sl_err_set(SL_E_NOMEM, "AK list");
	return SL_OK;
}

json_t *kmsd_registry_list(kmsd_registry *r)
{
	struct list_ctx l = {r, json_array()};
	if (l.out == NULL || kmsd_store_ak_list(r->st, list_one, &l) != SL_OK) {
		json_decref(l.out);
		return NULL;
	}
	return l.out;
}
