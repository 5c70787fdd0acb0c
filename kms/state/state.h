/* kms/state/: the state store and what lives in it (challenges, the AK
 * registry, row MACs). Below every other folder of kms/: it calls none. */
#ifndef SECLAUNCH_KMS_STATE_H
#define SECLAUNCH_KMS_STATE_H

#include <time.h>

#include "../kmsd.h"
#include "store.h"

/* ---- challenge table (nonces.c) ---------------------------------------- */

typedef struct kmsd_nonces kmsd_nonces;
/* FAILED: the state store could not say (the request fails closed, 503). */
enum kmsd_nonce_result {
	KMSD_NONCE_OK,
	KMSD_NONCE_UNKNOWN,
	KMSD_NONCE_USED,
	KMSD_NONCE_EXPIRED,
	KMSD_NONCE_FAILED
};

SL_MUST_USE sl_err kmsd_nonces_new(struct kmsd_store *st, size_t cap, unsigned ttl_s,
                                   kmsd_nonces **out);
void kmsd_nonces_free(kmsd_nonces *t);
/* A fresh nonce; SL_E_KMS_REFUSED when the table is full of live entries. */
SL_MUST_USE sl_err kmsd_nonces_issue(kmsd_nonces *t, uint8_t nonce[static SL_NONCE_LEN],
                                     time_t *expires);
enum kmsd_nonce_result kmsd_nonces_consume(kmsd_nonces *t,
                                           const uint8_t nonce[static SL_NONCE_LEN]);
/* The same, reading the rows rd asks for in the same round trip (the
 * release's AKs and keys: store.h). */
enum kmsd_nonce_result kmsd_nonces_consume_read(kmsd_nonces *t,
                                                const uint8_t nonce[static SL_NONCE_LEN],
                                                kmsd_release_read *rd);
/* A request that consumed the nonce ended with no decision (503): the
 * nonce is unused again, so that the identical request retried is decided
 * rather than refused as reused (docs/protocol.md: a 503 decided nothing). */
void kmsd_nonces_give_back(kmsd_nonces *t, const uint8_t nonce[static SL_NONCE_LEN]);
size_t kmsd_nonces_size(kmsd_nonces *t);

/* ---- AK registry (registry.c) ----------------------------------------- */

typedef struct kmsd_registry kmsd_registry;
enum kmsd_ak_status { KMSD_AK_UNKNOWN, KMSD_AK_ENROLLED, KMSD_AK_REVOKED, KMSD_AK_FORGED };
SL_MUST_USE sl_err kmsd_registry_open(struct kmsd_store *st, const char *key_file,
                                      kmsd_registry **out);
void kmsd_registry_close(kmsd_registry *r);
/* SL_E_SYSTEM: the store failed; SL_E_INTEGRITY (status FORGED): a row
 * whose MAC does not verify. */
SL_MUST_USE sl_err kmsd_registry_lookup(kmsd_registry *r, const uint8_t *ak_name, size_t len,
                                        enum kmsd_ak_status *status);
/* The same, from the row read ahead in rd when rd holds one for this name
 * (its MAC checked here as the store's would be), else from the store. */
SL_MUST_USE sl_err kmsd_registry_lookup_read(kmsd_registry *r, const kmsd_release_read *rd,
                                             const uint8_t *ak_name, size_t len,
                                             enum kmsd_ak_status *status);
/* Enrolled and not revoked (false on any failure). */
bool kmsd_registry_has(kmsd_registry *r, const uint8_t *ak_name, size_t len);
/* Records an AK (idempotent); ek_digest identifies the TPM it lives in. */
SL_MUST_USE sl_err kmsd_registry_add(kmsd_registry *r, const uint8_t *ak_name, size_t len,
                                     const uint8_t ek_digest[static 32]);
size_t kmsd_registry_count(kmsd_registry *r);
/* Revocation (an admin's, handlers_aks.c): a revoked AK stays listed, is
 * refused by name, and cannot enroll again. SL_E_INPUT when not enrolled;
 * *was: it was revoked already (nothing written). */
SL_MUST_USE sl_err kmsd_registry_revoke(kmsd_registry *r, const uint8_t *ak_name, size_t len,
                                        bool *was);
bool kmsd_registry_revoked(kmsd_registry *r, const uint8_t *ak_name, size_t len);
/* The enrolled AKs, in name order: [{"name", "ek_sha256", "enrolled",
 * "revoked", "ek_revoked", "verified"}] (new reference; NULL: no memory or
 * no store). */
json_t *kmsd_registry_list(kmsd_registry *r);
/* Revocation names the machine: kmsd_registry_revoke marks the AK's EK
 * revoked too, every AK of a revoked EK is KMSD_AK_REVOKED, and no AK
 * enrolls through it until an admin re-admits it (*was: it was revoked). */
SL_MUST_USE sl_err kmsd_registry_ak_ek(kmsd_registry *r, const uint8_t *ak_name, size_t len,
                                       uint8_t ek[static 32]);
SL_MUST_USE sl_err kmsd_registry_ek_revoked(kmsd_registry *r, const uint8_t ek[static 32],
                                            bool *revoked);
SL_MUST_USE sl_err kmsd_registry_ek_readmit(kmsd_registry *r, const uint8_t ek[static 32],
                                            bool *was);
/* [{"ek_sha256", "revoked", "by_ak"}] (new reference; NULL on failure). */
json_t *kmsd_registry_eks_revoked(kmsd_registry *r);
/* Pending enrollments and enrollment tokens, under the row MAC: put seals
 * the row (row->mac), take / use remove or use it up and say what it
 * grants: OK, NONE (unknown, used or expired), FORGED (its MAC does not
 * verify under the registry key: made or edited outside seclaunchd). */
enum kmsd_grant { KMSD_GRANT_NONE, KMSD_GRANT_OK, KMSD_GRANT_FORGED };
SL_MUST_USE sl_err kmsd_registry_pending_put(kmsd_registry *r, const uint8_t session[static 16],
                                             kmsd_pending_row *row);
SL_MUST_USE sl_err kmsd_registry_pending_take(kmsd_registry *r, const uint8_t session[static 16],
                                              kmsd_pending_row *row, enum kmsd_grant *g);
SL_MUST_USE sl_err kmsd_registry_token_put(kmsd_registry *r, const uint8_t hash[static 32],
                                           int64_t expires);
SL_MUST_USE sl_err kmsd_registry_token_use(kmsd_registry *r, const uint8_t hash[static 32],
                                           int64_t now, enum kmsd_grant *g);

/* ---- row MACs and key-check values (rowmac.c) --------------------------- */

/* The one MAC of every granting store row: HMAC-SHA256(key,
 * "seclaunch-row-v1" | table | its primary key and granting columns). */
void kmsd_row_mac(const uint8_t key[static 32], const char *table, const kmsd_sqlv *cols, size_t n,
                  uint8_t mac[static 32]);
/* Constant-time check of a row's MAC. */
bool kmsd_row_mac_ok(const uint8_t key[static 32], const char *table, const kmsd_sqlv *cols,
                     size_t n, const uint8_t mac[static 32]);
/* The key-check value of `name` (the secret file `file` holds key): written
 * into the store when it has none, else compared: SL_E_INTEGRITY (exit 6)
 * naming the file when the store was made with another key. */
SL_MUST_USE sl_err kmsd_keycheck(struct kmsd_store *st, const char *name, const char *file,
                                 const uint8_t key[static 32]);
#endif
