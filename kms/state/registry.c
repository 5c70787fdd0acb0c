/* The enrolled-AK registry and every other store row that grants
 * something: TPM names of attestation keys that proved, by credential
 * activation, that they live in the same TPM as a known EK; the pending
 * enrollments that lead there; the enrollment tokens admins issue; and the
 * machines (EKs) that are revoked.
 *
 * The granting rows live in the state store (store.h) under the one row MAC
 * of rowmac.c with the registry key, read from a 0600 file, so someone who
 * can write the database but not read the key cannot add an AK, answer an
 * enrollment of their own making, or mint a token: a row that does not
 * verify grants nothing and is reported (audited where a request used it).
 *   aks:           name | ek_sha256 | enrolled
 *   pending:       session | ak_name | ek_sha256 | cred_sha256 | expires
 *   enroll_tokens: hash | expires
 * Revocations (an AK's flag, an EK's row in ek_revocations) are not under
 * the MAC: they only ever take trust away. Undoing one, or putting back an
 * earlier copy of a row, needs write access to the database, which the
 * operator's backups and the audit log answer for (SECURITY.md). */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "state.h"

struct kmsd_registry {
	kmsd_store *st;
	sl_secret *key;
};

#define BLOB(b, l) ((kmsd_sqlv){.t = KMSD_SQLV_BLOB, .p = (b), .n = (l)})
#define INT(x) ((kmsd_sqlv){.t = KMSD_SQLV_INT, .i = (int64_t)(x)})

static void ak_mac(kmsd_registry *r, const uint8_t *name, size_t len, const kmsd_ak_row *row,
                   uint8_t mac[static 32])
{
	kmsd_sqlv c[] = {BLOB(name, len), BLOB(row->ek_sha256, 32), INT(row->enrolled)};
	kmsd_row_mac(sl_secret_data(r->key), "aks", c, 3, mac);
}

static bool ak_ok(kmsd_registry *r, const uint8_t *name, size_t len, const kmsd_ak_row *row)
{
	kmsd_sqlv c[] = {BLOB(name, len), BLOB(row->ek_sha256, 32), INT(row->enrolled)};
	return kmsd_row_mac_ok(sl_secret_data(r->key), "aks", c, 3, row->mac);
}

/* The AK MAC of schema 1, before the one row MAC: kept only to move rows
 * that carry it (and verify) to the row MAC at start. */
static void v1_ak_mac(kmsd_registry *r, const uint8_t *name, size_t len, const kmsd_ak_row *row,
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

/* Rows to move, collected during the list (which holds the connection). */
struct move {
	kmsd_registry *r;
	struct moved {
		uint8_t name[KMSD_AK_NAME_MAX];
		size_t len;
		uint8_t old[32], mac[32];
	} * v;
	size_t n, cap;
};

static SL_RESULT move_one(void *ctx, const uint8_t *name, size_t len, const kmsd_ak_row *row)
{
	struct move *m = ctx;
	uint8_t old[32];
	if (ak_ok(m->r, name, len, row))
		return SL_OK;
	v1_ak_mac(m->r, name, len, row, old);
	if (!sl_ct_eq(old, row->mac, 32))
		return SL_OK; /* forged: stays so, and is reported where it is used */
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 16;
		struct moved *v = realloc(m->v, cap * sizeof(*v));
		if (v == NULL)
			return sl_err_set(SL_E_NOMEM, "AK rows");
		m->v = v;
		m->cap = cap;
	}
	memcpy(m->v[m->n].name, name, len);
	m->v[m->n].len = len;
	memcpy(m->v[m->n].old, old, 32);
	ak_mac(m->r, name, len, row, m->v[m->n].mac);
	m->n++;
	return SL_OK;
}

/* AK rows of schema 1 carry the MAC of before: each that verifies under it
 * gets the row MAC (compare-and-set, so replicas starting together agree). */
static SL_RESULT move_v1_macs(kmsd_registry *r)
{
	struct move m = {r, NULL, 0, 0};
	sl_err rc = kmsd_store_ak_list(r->st, move_one, &m);
	for (size_t i = 0; rc == SL_OK && i < m.n; i++)
		rc = kmsd_store_ak_set_mac(r->st, m.v[i].name, m.v[i].len, m.v[i].old, m.v[i].mac);
	if (rc == SL_OK && m.n > 0)
		kmsd_log(KMSD_LOG_NOTICE,
		         "state store: %zu AK row(s) moved from the schema-1 MAC to the row MAC",
		         m.n);
	free(m.v);
	return rc;
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
	SL_GUARD(kmsd_keycheck(st, "registry key", key_file, sl_secret_data(r->key)));
	SL_GUARD(move_v1_macs(r));
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

/* What an AK row (found or not) says of the AK. */
static SL_RESULT ak_status(kmsd_registry *r, const uint8_t *name, size_t len,
                           const kmsd_ak_row *row, bool found, enum kmsd_ak_status *status)
{
	char hex[2 * KMSD_AK_NAME_MAX + 1];
	*status = KMSD_AK_UNKNOWN;
	if (!found)
		return SL_OK;
	if (!ak_ok(r, name, len, row)) {
		sl_hex_encode(name, len, hex);
		*status = KMSD_AK_FORGED;
		return sl_err_set(
		    SL_E_INTEGRITY,
		    "state store: the row of AK %s does not verify under the registry "
		    "key (added or edited outside seclaunchd)",
		    hex);
	}
	/* revocation names the machine: every AK of a revoked EK is refused */
	*status = row->revoked || row->ek_revoked ? KMSD_AK_REVOKED : KMSD_AK_ENROLLED;
	return SL_OK;
}

sl_err kmsd_registry_lookup_read(kmsd_registry *r, const kmsd_release_read *rd, const uint8_t *name,
                                 size_t len, enum kmsd_ak_status *status)
{
	kmsd_ak_row row = {0};
	bool found = false;
	*status = KMSD_AK_UNKNOWN;
	if (len == 0 || len > KMSD_AK_NAME_MAX)
		return SL_OK;
	/* a row read ahead counts only for the very name verified here */
	for (size_t i = 0; rd != NULL && i < rd->nak; i++)
		if (rd->ak[i].read && rd->ak[i].len == len && sl_ct_eq(rd->ak[i].name, name, len))
			return ak_status(r, name, len, &rd->ak[i].row, rd->ak[i].found, status);
	sl_err rc = kmsd_store_ak_get(r->st, name, len, &row, &found);
	if (rc != SL_OK)
		return rc;
	return ak_status(r, name, len, &row, found, status);
}

sl_err kmsd_registry_lookup(kmsd_registry *r, const uint8_t *name, size_t len,
                            enum kmsd_ak_status *status)
{
	return kmsd_registry_lookup_read(r, NULL, name, len, status);
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

static SL_RESULT kmsd_registry_add_at(kmsd_registry *r, const uint8_t *name, size_t len,
                                      const uint8_t ek_digest[static 32], int64_t when)
{
	kmsd_ak_row row = {.enrolled = when};
	if (len == 0 || len > KMSD_AK_NAME_MAX)
		return sl_err_set(SL_E_INPUT, "AK name: %zu bytes", len);
	memcpy(row.ek_sha256, ek_digest, 32);
	ak_mac(r, name, len, &row, row.mac);
	return kmsd_store_ak_put(r->st, name, len, &row, NULL);
}

sl_err kmsd_registry_add(kmsd_registry *r, const uint8_t *name, size_t len,
                         const uint8_t ek_digest[static 32])
{
	return kmsd_registry_add_at(r, name, len, ek_digest, (int64_t)time(NULL));
}

sl_err kmsd_registry_revoke(kmsd_registry *r, const uint8_t *name, size_t len, bool *was)
{
	kmsd_ak_row row = {0};
	bool found = false, added = false;
	char hex[2 * KMSD_AK_NAME_MAX + 1] = "";
	sl_err rc;
	*was = false;
	if (len == 0 || len > KMSD_AK_NAME_MAX)
		return sl_err_set(SL_E_INPUT, "AK name: %zu bytes", len);
	sl_hex_encode(name, len, hex);
	rc = kmsd_store_ak_get(r->st, name, len, &row, &found);
	if (rc != SL_OK)
		return rc;
	if (!found)
		return sl_err_set(SL_E_INPUT, "AK %s is not enrolled here", hex);
	/* the machine too, so that it cannot come back with another AK; a
	 * forged row is revoked as well: it only ever takes trust away */
	rc = kmsd_store_ek_revoke(r->st, row.ek_sha256, name, len, (int64_t)time(NULL), &added);
	if (rc != SL_OK)
		return rc;
	*was = row.revoked && !added;
	if (row.revoked)
		return SL_OK;
	rc = kmsd_store_ak_revoke(r->st, name, len, &found);
	if (rc == SL_OK && !found)
		rc = sl_err_set(SL_E_INPUT, "AK %s is not enrolled here", hex);
	return rc;
}

sl_err kmsd_registry_ak_ek(kmsd_registry *r, const uint8_t *name, size_t len, uint8_t ek[static 32])
{
	kmsd_ak_row row = {0};
	bool found = false;
	sl_err rc = kmsd_store_ak_get(r->st, name, len, &row, &found);
	if (rc == SL_OK && !found)
		rc = sl_err_set(SL_E_INPUT, "AK not enrolled here");
	if (rc == SL_OK)
		memcpy(ek, row.ek_sha256, 32);
	return rc;
}

sl_err kmsd_registry_ek_revoked(kmsd_registry *r, const uint8_t ek[static 32], bool *revoked)
{
	return kmsd_store_ek_revoked(r->st, ek, revoked);
}

sl_err kmsd_registry_ek_readmit(kmsd_registry *r, const uint8_t ek[static 32], bool *was)
{
	return kmsd_store_ek_readmit(r->st, ek, was);
}

/* ---- pending enrollments and enrollment tokens ----------------------------- */

static void pending_cols(const uint8_t session[static 16], const kmsd_pending_row *p,
                         kmsd_sqlv c[static 5])
{
	c[0] = BLOB(session, 16);
	c[1] = BLOB(p->ak_name, p->ak_name_len);
	c[2] = BLOB(p->ek_sha256, 32);
	c[3] = BLOB(p->cred_sha256, 32);
	c[4] = INT(p->expires);
}

sl_err kmsd_registry_pending_put(kmsd_registry *r, const uint8_t session[static 16],
                                 kmsd_pending_row *row)
{
	kmsd_sqlv c[5];
	pending_cols(session, row, c);
	kmsd_row_mac(sl_secret_data(r->key), "pending", c, 5, row->mac);
	return kmsd_store_pending_put(r->st, session, row);
}

sl_err kmsd_registry_pending_take(kmsd_registry *r, const uint8_t session[static 16],
                                  kmsd_pending_row *row, enum kmsd_grant *g)
{
	kmsd_sqlv c[5];
	bool found = false;
	sl_err rc = kmsd_store_pending_take(r->st, session, row, &found);
	*g = KMSD_GRANT_NONE;
	if (rc != SL_OK || !found)
		return rc;
	pending_cols(session, row, c);
	if (!kmsd_row_mac_ok(sl_secret_data(r->key), "pending", c, 5, row->mac))
		*g = KMSD_GRANT_FORGED;
	else if (row->expires > (int64_t)time(NULL))
		*g = KMSD_GRANT_OK;
	return SL_OK;
}

sl_err kmsd_registry_token_put(kmsd_registry *r, const uint8_t hash[static 32], int64_t expires)
{
	kmsd_sqlv c[] = {BLOB(hash, 32), INT(expires)};
	uint8_t mac[32];
	kmsd_row_mac(sl_secret_data(r->key), "enroll_tokens", c, 2, mac);
	return kmsd_store_etoken_put(r->st, hash, expires, mac);
}

sl_err kmsd_registry_token_use(kmsd_registry *r, const uint8_t hash[static 32], int64_t now,
                               enum kmsd_grant *g)
{
	int64_t expires = 0;
	uint8_t mac[32];
	bool found = false;
	sl_err rc = kmsd_store_etoken_use(r->st, hash, now, &found, &expires, mac);
	*g = KMSD_GRANT_NONE;
	if (rc != SL_OK || !found)
		return rc;
	kmsd_sqlv c[] = {BLOB(hash, 32), INT(expires)};
	*g = kmsd_row_mac_ok(sl_secret_data(r->key), "enroll_tokens", c, 2, mac)
	         ? KMSD_GRANT_OK
	         : KMSD_GRANT_FORGED;
	return SL_OK;
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
	sl_hex_encode(name, len, hex);
	sl_hex_encode(row->ek_sha256, 32, ek);
	sl_time_rfc3339((time_t)row->enrolled, when, sizeof(when));
	json_t *e = json_pack("{s:s, s:s, s:s, s:b, s:b, s:b}", "name", hex, "ek_sha256", ek,
	                      "enrolled", when, "revoked", row->revoked, "ek_revoked",
	                      row->ek_revoked, "verified", ak_ok(l->r, name, len, row));
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

static SL_RESULT ek_one(void *ctx, const uint8_t ek[static 32], int64_t revoked, const uint8_t *ak,
                        size_t ak_len)
{
	json_t *out = ctx;
	char hex[65], akh[2 * KMSD_AK_NAME_MAX + 1] = "", when[32];
	sl_hex_encode(ek, 32, hex);
	if (ak_len > 0 && ak_len <= KMSD_AK_NAME_MAX)
		sl_hex_encode(ak, ak_len, akh);
	sl_time_rfc3339((time_t)revoked, when, sizeof(when));
	json_t *e = json_pack("{s:s, s:s, s:s}", "ek_sha256", hex, "revoked", when, "by_ak", akh);
	if (e == NULL || json_array_append_new(out, e) != 0)
		return sl_err_set(SL_E_NOMEM, "EK list");
	return SL_OK;
}

json_t *kmsd_registry_eks_revoked(kmsd_registry *r)
{
	json_t *out = json_array();
	if (out == NULL || kmsd_store_ek_list(r->st, ek_one, out) != SL_OK) {
		json_decref(out);
		return NULL;
	}
	return out;
}
