/* seclaunchd internals (private to kms/). docs/seclaunchd.md describes the
 * configuration, docs/protocol.md the wire protocol. */
#ifndef SECLAUNCH_KMSD_H
#define SECLAUNCH_KMSD_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/claims.h"
#include "seclaunch/error.h"
#include "seclaunch/kms.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"
#include "store.h"

/* ---- configuration (config.c) ----------------------------------------- */

enum kmsd_backend { KMSD_KEK_LOCAL, KMSD_KEK_PKCS11, KMSD_KEK_AWS };

typedef struct kmsd_config {
	bool dev;
	char *state_dir; /* --dev only */
	char *listen;    /* "HOST:PORT" */
	char *tls_cert;  /* PEM files */
	char *tls_key;
	char *admin_token_file; /* scope admin: everything */
	char *wrap_token_file;  /* optional scope tokens (docs/seclaunchd.md, Tokens) */
	char *operate_token_file;
	char *metrics_token_file;
	char *store;             /* state store: SQLite path or postgresql:// URI (store.h) */
	char *registry_file;     /* before the store: read by seclaunchd migrate only */
	char *registry_key_file; /* HMAC key that protects the AK rows */
	char *audit_log;
	char *audit_key_file; /* Ed25519 checkpoint key (audit.h); NULL: no checkpoints */
	char *ek_ca_dir;      /* EK certificates must chain to a CA here */
	bool accept_ek_without_cert;
	char *policy; /* signed policy (policy.h) */
	char *policy_pubkey;
	char *gcp_jwks; /* identity documents (identity.h) */
	char *aws_trust_dir;
	char *ak_ca_dir;      /* optional: AKs with a certificate chaining here count as trusted */
	char *collateral_dir; /* optional: SEV-SNP / TDX vendor certificates, TCB info, CRLs */
	char *url_file;       /* where the URL is written once listening */
	char *log_file;       /* daemon log; NULL: stderr (reopened on SIGHUP) */
	/* limits */
	unsigned threads; /* libmicrohttpd's connection threads */
	unsigned workers; /* request handler threads */
	size_t max_body;
	unsigned max_connections;
	unsigned idle_timeout_s;
	size_t max_challenges;
	unsigned challenge_ttl_s;
	unsigned refusal_rate_per_min; /* refused releases per source and minute; 0: no limit */
	unsigned audit_aggregate_s;    /* window for summarising cheap refusals; 0: each in full */
	unsigned enroll_rate_per_min;  /* /v1/enroll requests per source and minute; 0: no limit */
	/* KEK backend */
	enum kmsd_backend backend;
	char *keystore_file;
	char *master_key_file;
	char *p11_module;
	char *p11_token_label;
	char *p11_pin_file;
	char *aws_region;       /* kek_backend "aws-kms" (kek_aws.c) */
	char *aws_kms_endpoint; /* NULL: https://kms.REGION.amazonaws.com */
	char *aws_metadata_url; /* NULL: http://169.254.169.254 (IMDSv2) */
} kmsd_config;

void kmsd_config_defaults(kmsd_config *c);
/* The defaults of the settings that have one, as the configuration file
 * spells them (`seclaunchd --print-defaults`; tests/integration/
 * conf_defaults.sh holds the packaged seclaunchd.conf and its man page to
 * them). NULL when out of memory. */
json_t *kmsd_config_defaults_json(void);
/* Overlays a JSON config file (unknown keys are errors naming the key). */
SL_MUST_USE sl_err kmsd_config_load(kmsd_config *c, const char *path);
/* --dev: fills every unset path under state_dir and creates what is missing
 * (TLS CA + server certificate, admin token, master key, registry key). */
SL_MUST_USE sl_err kmsd_config_dev(kmsd_config *c);
/* Checks that everything a production start needs is set. */
SL_MUST_USE sl_err kmsd_config_check(const kmsd_config *c);
void kmsd_config_free(kmsd_config *c);

/* statedir.c: the --dev state directory must be a real directory owned by
 * this user and writable by nobody else (SL_E_PERM naming the fix). */
SL_MUST_USE sl_err kmsd_state_dir_check(const char *dir);

/* devpolicy.c: the built-in development policy, written with a signature
 * and its public key into state_dir (policy.json, policy.json.minisig,
 * policy.pub) for clients, and loaded from there (sl_policy_is_dev). */
struct sl_policy;
SL_MUST_USE sl_err kmsd_devpolicy(const char *state_dir, struct sl_policy **out);

/* devca.c: a self-signed CA and a server certificate for 127.0.0.1/localhost. */
SL_MUST_USE sl_err kmsd_devca_create(const char *ca_pem, const char *cert_pem, const char *key_pem);

/* ---- AES-256-GCM (gcm.c) ---------------------------------------------- */

#define KMSD_GCM_IV 12
#define KMSD_GCM_TAG 16
SL_MUST_USE sl_err kmsd_gcm_seal(const uint8_t key[static 32], const uint8_t iv[static 12],
                                 const uint8_t *aad, size_t aad_len, const uint8_t *pt, size_t len,
                                 uint8_t *ct, uint8_t tag[static 16]);
/* SL_E_INTEGRITY when the tag does not verify. */
SL_MUST_USE sl_err kmsd_gcm_open(const uint8_t key[static 32], const uint8_t iv[static 12],
                                 const uint8_t *aad, size_t aad_len, const uint8_t *ct, size_t len,
                                 const uint8_t tag[static 16], uint8_t *pt);

/* ---- KEK backends (kek.c, keystore.c, pkcs11.c) ------------------------ */

typedef struct kmsd_kek kmsd_kek;
struct kmsd_store;
struct kmsd_key_row;

SL_MUST_USE sl_err kmsd_kek_open(const kmsd_config *c, struct kmsd_store *st, kmsd_kek **out);
/* The network process's handle: every KEK operation goes to the key
 * process (keyproc.c); kmsd_kek_unwrap is refused (no DEK here). */
typedef struct kmsd_keyproc kmsd_keyproc;
SL_MUST_USE sl_err kmsd_kek_open_remote(kmsd_keyproc *kp, struct kmsd_store *st, kmsd_kek **out);
#define KMSD_SEALED_LEN (SL_KMS_DEK_LEN + 48) /* crypto_box_SEALBYTES */
/* Unwraps and seals the DEK to eph_pub (libsodium sealed box) in one step:
 * what the release hands out. */
SL_MUST_USE sl_err kmsd_kek_unwrap_seal(kmsd_kek *k, const char *id, const char *dataset_id,
                                        const uint8_t *wrapped, size_t len,
                                        const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                                        uint8_t sealed[static KMSD_SEALED_LEN]);
void kmsd_kek_close(kmsd_kek *k);
/* SL_E_EXISTS when the id is taken. */
SL_MUST_USE sl_err kmsd_kek_create(kmsd_kek *k, const char *id);
/* As create; aws_key_id (kek_backend "aws-kms" only; NULL: a new AWS key)
 * adopts an existing AWS KMS key as version 1. */
SL_MUST_USE sl_err kmsd_kek_adopt(kmsd_kek *k, const char *id, const char *aws_key_id);
/* Disable or enable: the store's state, and the backend's (AWS DisableKey /
 * EnableKey for every version). *found false for an unknown key. */
SL_MUST_USE sl_err kmsd_kek_set_state(kmsd_kek *k, const char *id, bool enable, bool *found);
/* The store's delete (kmsd_store_key_delete), then what this key process
 * holds of it, and for AWS keys ScheduleKeyDeletion of every version. */
SL_MUST_USE sl_err kmsd_kek_delete(kmsd_kek *k, const char *id, bool force, size_t *refs,
                                   bool *deleted);
bool kmsd_kek_exists(kmsd_kek *k, const char *id);
/* Whether key id may be used for a decision now: the denial it earns
 * (KMSD_D_KEY_UNKNOWN, KMSD_D_KEY_DISABLED) with *why, KMSD_KEY_USABLE, or
 * KMSD_KEY_STORE_DOWN when the state store could not answer. */
#define KMSD_KEY_USABLE (-1)
#define KMSD_KEY_STORE_DOWN (-2)
int kmsd_kek_usable(kmsd_kek *k, const char *id, char *why, size_t why_n);
/* Wipes what this replica's key process holds of key id (its cached KEKs),
 * after the store's rows are deleted. */
SL_MUST_USE sl_err kmsd_kek_forget(kmsd_kek *k, const char *id);
/* The key's row in the store (state, current version). */
SL_MUST_USE sl_err kmsd_kek_state(kmsd_kek *k, const char *id, struct kmsd_key_row *row,
                                  bool *found);
/* A new KEK version for new wraps; older versions keep unwrapping until
 * retired. *version: the new one. */
SL_MUST_USE sl_err kmsd_kek_rotate(kmsd_kek *k, const char *id, unsigned *version);
/* Opens a wrapped DEK and wraps it again under the key's current version,
 * inside this process (the DEK only in guarded memory, wiped). */
SL_MUST_USE sl_err kmsd_kek_rewrap(kmsd_kek *k, const char *id, const char *dataset_id,
                                   const uint8_t *in, size_t len,
                                   uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len);
size_t kmsd_kek_count(kmsd_kek *k);
/* SL_E_INPUT unknown key; SL_E_KMS_REFUSED disabled key or retired version;
 * SL_E_SYSTEM the state store failed.
 * wrapped = kek_version || iv(12) || AES-256-GCM(KEK, iv, aad(id, dataset), dek) || tag(16) */
SL_MUST_USE sl_err kmsd_kek_wrap(kmsd_kek *k, const char *id, const char *dataset_id,
                                 const uint8_t dek[static SL_KMS_DEK_LEN],
                                 uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len);
/* SL_E_INPUT unknown key; SL_E_INTEGRITY tag mismatch (AAD or bytes). */
/* dek: SL_KMS_DEK_LEN bytes of the caller's secret memory (wiped on failure). */
SL_MUST_USE sl_err kmsd_kek_unwrap(kmsd_kek *k, const char *id, const char *dataset_id,
                                   const uint8_t *wrapped, size_t len,
                                   uint8_t dek[static SL_KMS_DEK_LEN]);
/* AAD = u16be(len(id)) || id || u16be(len(dataset_id)) || dataset_id; aad
 * holds at least KMSD_AAD_MAX bytes. Returns its length. */
#define KMSD_AAD_MAX (4 + SL_KMS_ID_MAX + SL_KMS_DATASET_ID_MAX)
size_t kmsd_wrap_aad(const char *id, const char *dataset_id, uint8_t *aad);

/* A fresh random DEK made in the key process, returned only wrapped (for
 * the output's manifest) and sealed to eph_pub (for the job): what an
 * output key handler asks for, so that no DEK is ever in the network
 * process. */
SL_MUST_USE sl_err kmsd_kek_new_sealed(kmsd_kek *k, const char *id, const char *dataset_id,
                                       const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                                       uint8_t wrapped[static SL_KMS_WRAPPED_DEK_MAX],
                                       size_t *wrapped_len, uint8_t sealed[static KMSD_SEALED_LEN]);

/* keyproc.c: the key process (privilege separation). */
SL_MUST_USE sl_err kmsd_keyproc_start(const kmsd_config *cfg, unsigned channels,
                                      kmsd_keyproc **out);
void kmsd_keyproc_stop(kmsd_keyproc *kp);
pid_t kmsd_keyproc_pid(const kmsd_keyproc *kp);
/* Whether a key process serves now (false while it is restarted). */
bool kmsd_keyproc_up(const kmsd_keyproc *kp);
/* Calls fn from a thread of its own: state 0 the key process pid died
 * (status: its wait status) and is restarted, 1 it was restarted as pid,
 * -1 it ended and is not restarted (status 0: the service stops). */
SL_MUST_USE sl_err kmsd_keyproc_watch(kmsd_keyproc *kp,
                                      void (*fn)(void *arg, int state, int pid, int status),
                                      void *arg);
SL_MUST_USE sl_err kmsd_keyproc_create(kmsd_keyproc *kp, const char *id, const char *aws_key_id);
SL_MUST_USE sl_err kmsd_keyproc_set_state(kmsd_keyproc *kp, const char *id, bool enable,
                                          bool *found);
SL_MUST_USE sl_err kmsd_keyproc_delete(kmsd_keyproc *kp, const char *id, bool force, size_t *refs,
                                       bool *deleted);
SL_MUST_USE sl_err kmsd_keyproc_rotate(kmsd_keyproc *kp, const char *id, unsigned *version);
SL_MUST_USE sl_err kmsd_keyproc_forget(kmsd_keyproc *kp, const char *id);
SL_MUST_USE sl_err kmsd_keyproc_wrap(kmsd_keyproc *kp, const char *id, const char *ds,
                                     const uint8_t dek[static SL_KMS_DEK_LEN],
                                     uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len);
SL_MUST_USE sl_err kmsd_keyproc_unwrap_seal(kmsd_keyproc *kp, const char *id, const char *ds,
                                            const uint8_t *wrapped, size_t len,
                                            const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                                            uint8_t sealed[static KMSD_SEALED_LEN]);
SL_MUST_USE sl_err kmsd_keyproc_new_sealed(kmsd_keyproc *kp, const char *id, const char *ds,
                                           const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                                           uint8_t wrapped[static SL_KMS_WRAPPED_DEK_MAX],
                                           size_t *wrapped_len,
                                           uint8_t sealed[static KMSD_SEALED_LEN]);
SL_MUST_USE sl_err kmsd_keyproc_rewrap(kmsd_keyproc *kp, const char *id, const char *ds,
                                       const uint8_t *in, size_t len,
                                       uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len);

/* AWS KMS backend (kek_aws.c): a key version is an AWS KMS key (symmetric,
 * ENCRYPT_DECRYPT) whose ARN is the version's KEK row; a DEK is wrapped by
 * AWS KMS Encrypt under the encryption context {"seclaunch:key_id",
 * "seclaunch:dataset_id"}:
 *   wrapped = kek_version (u8) || KMSD_AWS_MARKER || CiphertextBlob
 * Every call runs in the key process, which alone holds the credentials. */
#define KMSD_AWS_MARKER 0xA5
typedef struct kmsd_aws kmsd_aws;
SL_MUST_USE sl_err kmsd_aws_open(const kmsd_config *c, kmsd_aws **out);
void kmsd_aws_close(kmsd_aws *a);
/* Claims id in the store with a new AWS key (CreateKey) or adopt's. */
SL_MUST_USE sl_err kmsd_aws_create(kmsd_aws *a, struct kmsd_store *st, const char *id,
                                   const char *adopt);
SL_MUST_USE sl_err kmsd_aws_rotate(kmsd_aws *a, struct kmsd_store *st, const char *id,
                                   unsigned version);
SL_MUST_USE sl_err kmsd_aws_wrap(kmsd_aws *a, const uint8_t *arn, size_t arn_len, const char *id,
                                 const char *dataset_id, unsigned version,
                                 const uint8_t dek[static SL_KMS_DEK_LEN],
                                 uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len);
/* SL_E_INTEGRITY: AWS does not open it under this key and context. */
SL_MUST_USE sl_err kmsd_aws_unwrap(kmsd_aws *a, const uint8_t *arn, size_t arn_len, const char *id,
                                   const char *dataset_id, const uint8_t *wrapped, size_t len,
                                   uint8_t dek[static SL_KMS_DEK_LEN]);
SL_MUST_USE sl_err kmsd_aws_key_state(kmsd_aws *a, const uint8_t *arn, size_t arn_len, bool enable);
SL_MUST_USE sl_err kmsd_aws_schedule_delete(kmsd_aws *a, const uint8_t *arn, size_t arn_len);
/* The endpoint rule: https://, or http:// only to a loopback address (an
 * emulator); SL_E_INPUT naming the config key otherwise. */
SL_MUST_USE sl_err kmsd_aws_endpoint_check(const char *url);

/* kek_aws_parse.c: AWS KMS JSON answers (untrusted bytes; fuzzed). */
typedef struct kmsd_aws_answer {
	char error[64];    /* "__type" of an error answer, after any '#'; "" */
	char message[256]; /* its message, control characters dropped */
	char key_arn[KMSD_KEK_WRAPPED_MAX + 1];
	char key_state[32]; /* KeyMetadata.KeyState */
	char key_spec[32];  /* KeyMetadata.KeySpec */
	char key_usage[32]; /* KeyMetadata.KeyUsage */
	uint8_t *blob;      /* CiphertextBlob or Plaintext, decoded; free with wiping */
	size_t blob_len;
} kmsd_aws_answer;
/* want: "CiphertextBlob", "Plaintext", "KeyMetadata" or NULL (an empty
 * answer); an error answer (status >= 300) fills error/message. */
SL_MUST_USE sl_err kmsd_aws_parse(const uint8_t *body, size_t len, long status, const char *want,
                                  kmsd_aws_answer *out);
void kmsd_aws_answer_free(kmsd_aws_answer *a);

/* Local keystore (keystore.c): KEK versions in the state store, wrapped
 * under the master key. */
typedef struct kmsd_keystore kmsd_keystore;
SL_MUST_USE sl_err kmsd_keystore_open(struct kmsd_store *st, const char *master_key_file,
                                      kmsd_keystore **out);
void kmsd_keystore_close(kmsd_keystore *ks);
SL_MUST_USE sl_err kmsd_keystore_create(kmsd_keystore *ks, const char *id);
SL_MUST_USE sl_err kmsd_keystore_rotate(kmsd_keystore *ks, const char *id, unsigned version);
/* Seals a KEK for the store (migrate imports keys with it): 60 bytes. */
SL_MUST_USE sl_err kmsd_keystore_seal(kmsd_keystore *ks, const char *id, unsigned version,
                                      const uint8_t kek[static 32], uint8_t out[static 60]);
/* Runs fn with the KEK of (id, version) opened from `wrapped` (its store
 * row, read for this use) under a read lock (the KEK never leaves the
 * keystore). A cached KEK serves only the same row's bytes. */
SL_MUST_USE sl_err kmsd_keystore_with(kmsd_keystore *ks, const char *id, unsigned version,
                                      const uint8_t *wrapped, size_t wlen,
                                      sl_err (*fn)(const uint8_t kek[static 32], void *ctx),
                                      void *ctx);
/* Wipes every cached KEK of key id (after its delete). */
void kmsd_keystore_forget(kmsd_keystore *ks, const char *id);

/* PKCS#11 (pkcs11.c). */
typedef struct kmsd_p11 kmsd_p11;
SL_MUST_USE sl_err kmsd_p11_open(const char *module, const char *label, const char *pin_file,
                                 kmsd_p11 **out);
void kmsd_p11_close(kmsd_p11 *p);
SL_MUST_USE sl_err kmsd_p11_create(kmsd_p11 *p, const char *id);
SL_MUST_USE sl_err kmsd_p11_encrypt(kmsd_p11 *p, const char *id, const uint8_t iv[static 12],
                                    const uint8_t *aad, size_t aad_len, const uint8_t pt[static 32],
                                    uint8_t ct_tag[static 48]);
SL_MUST_USE sl_err kmsd_p11_decrypt(kmsd_p11 *p, const char *id, const uint8_t iv[static 12],
                                    const uint8_t *aad, size_t aad_len,
                                    const uint8_t ct_tag[static 48], uint8_t pt[static 32]);

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
/* Enrolled and not revoked (false on any failure). */
bool kmsd_registry_has(kmsd_registry *r, const uint8_t *ak_name, size_t len);
/* Records an AK (idempotent); ek_digest identifies the TPM it lives in. */
SL_MUST_USE sl_err kmsd_registry_add(kmsd_registry *r, const uint8_t *ak_name, size_t len,
                                     const uint8_t ek_digest[static 32]);
SL_MUST_USE sl_err kmsd_registry_add_at(kmsd_registry *r, const uint8_t *ak_name, size_t len,
                                        const uint8_t ek_digest[static 32], int64_t when);
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

/* ---- request parsers (parse.c): pure functions over untrusted bytes ---- */

#define KMSD_MAX_KEYS 64
#define KMSD_MAX_EVIDENCE 8
#define KMSD_MAX_JOB 16384 /* bytes of compact JSON in a release's "job" */

typedef struct kmsd_key_entry {
	char key_id[SL_KMS_ID_MAX + 1];
	char dataset_id[SL_KMS_DATASET_ID_MAX + 1];
	uint8_t wrapped[SL_KMS_WRAPPED_DEK_MAX];
	size_t wrapped_len;
} kmsd_key_entry;

/* An output key asked for: in a release (the launch's one request), a
 * renewal, or the compatibility path POST /v1/output. */
#define KMSD_MAX_OUTPUTS 16
#define KMSD_DEST_MAX 2048
typedef struct kmsd_output_entry {
	char output_id[SL_KMS_DATASET_ID_MAX + 1];
	char destination[KMSD_DEST_MAX + 1];
	char key_id[SL_KMS_ID_MAX + 1]; /* "" when the client names none */
} kmsd_output_entry;

typedef struct kmsd_release_req {
	json_t *root; /* owns evidence/identity/job */
	uint8_t nonce[SL_NONCE_LEN];
	uint8_t eph_pub[SL_EPH_PUB_LEN];
	uint8_t policy_digest[SL_SHA256_LEN];
	json_t *evidence; /* borrowed from root: array of objects */
	json_t *identity; /* array (maybe empty) */
	json_t *job;      /* object (maybe empty) */
	size_t nkeys;
	kmsd_key_entry keys[KMSD_MAX_KEYS];
	size_t noutputs; /* "outputs": fresh output keys (0: none) */
	kmsd_output_entry outputs[KMSD_MAX_OUTPUTS];
} kmsd_release_req;

/* Each fails with SL_E_INPUT naming the field. */
SL_MUST_USE sl_err kmsd_parse_challenge(const uint8_t *body, size_t len);
SL_MUST_USE sl_err kmsd_parse_release(const uint8_t *body, size_t len, kmsd_release_req **out);
void kmsd_release_req_free(kmsd_release_req *r);
/* POST /v1/output (handlers_output.c): the attested part of a release (nkeys
 * 0, noutputs 0), the job's input dataset ids, and each output asked for. */
typedef struct kmsd_output_req {
	kmsd_release_req *att;
	size_t ninputs;
	char inputs[KMSD_MAX_KEYS][SL_KMS_DATASET_ID_MAX + 1];
	size_t noutputs;
	kmsd_output_entry outputs[KMSD_MAX_OUTPUTS];
} kmsd_output_req;
SL_MUST_USE sl_err kmsd_parse_output(const uint8_t *body, size_t len, kmsd_output_req **out);
void kmsd_output_req_free(kmsd_output_req *r);
SL_MUST_USE sl_err kmsd_parse_key_create(const uint8_t *body, size_t len,
                                         char id[static SL_KMS_ID_MAX + 1]);
SL_MUST_USE sl_err kmsd_parse_wrap(const uint8_t *body, size_t len,
                                   char dataset_id[static SL_KMS_DATASET_ID_MAX + 1],
                                   sl_secret **dek);

typedef struct kmsd_enroll_req {
	uint8_t *ek_pub; /* TPM2B_PUBLIC bytes */
	size_t ek_pub_len;
	uint8_t *ek_cert; /* DER, NULL when absent */
	size_t ek_cert_len;
	uint8_t *ak_pub; /* TPM2B_PUBLIC bytes */
	size_t ak_pub_len;
	bool has_token; /* an admin-issued enrollment token came with it */
	char enroll_token[129];
} kmsd_enroll_req;
SL_MUST_USE sl_err kmsd_parse_enroll(const uint8_t *body, size_t len, kmsd_enroll_req *out);
void kmsd_enroll_req_clear(kmsd_enroll_req *r);

typedef struct kmsd_activate_req {
	uint8_t session[16];
	sl_secret *secret; /* the activated credential */
} kmsd_activate_req;
SL_MUST_USE sl_err kmsd_parse_activate(const uint8_t *body, size_t len, kmsd_activate_req *out);

/* parse_admin.c: {} or {"force": bool}; {"dataset_id", "wrapped_dek"}. */
SL_MUST_USE sl_err kmsd_parse_key_action(const uint8_t *body, size_t len, bool *force);
/* POST /v1/aks/revoke {"name": HEX}: the AK's TPM name (1..KMSD_AK_NAME_MAX
 * bytes) and its hex; SL_E_INPUT otherwise. */
SL_MUST_USE sl_err kmsd_parse_ak_revoke(const uint8_t *body, size_t len,
                                        uint8_t name[static KMSD_AK_NAME_MAX], size_t *nlen,
                                        char hex[static 2 * KMSD_AK_NAME_MAX + 1]);
/* POST /v1/eks/readmit {"ek_sha256": HEX}: the EK's digest (as enroll list
 * shows it) and its canonical lower-case hex. */
SL_MUST_USE sl_err kmsd_parse_ek_readmit(const uint8_t *body, size_t len, uint8_t ek[static 32],
                                         char hex[static 65]);
/* POST /v1/enroll/tokens {} or {"ttl_s": N}: the token's lifetime in
 * seconds (default one hour, at most a week); SL_E_INPUT naming the field. */
#define KMSD_ETOKEN_TTL_DEFAULT 3600
#define KMSD_ETOKEN_TTL_MAX 604800
SL_MUST_USE sl_err kmsd_parse_enroll_token(const uint8_t *body, size_t len, int64_t *ttl_s);
SL_MUST_USE sl_err kmsd_parse_rewrap(const uint8_t *body, size_t len,
                                     char dataset_id[static SL_KMS_DATASET_ID_MAX + 1],
                                     uint8_t wrapped[static SL_KMS_WRAPPED_DEK_MAX],
                                     size_t *wrapped_len);
/* POST /v1/keys {"id", "aws_key_id"?}: aws_key_id "" when absent. */
#define KMSD_AWS_KEY_ID_MAX KMSD_KEK_WRAPPED_MAX
SL_MUST_USE sl_err kmsd_parse_key_create_aws(const uint8_t *body, size_t len,
                                             char id[static SL_KMS_ID_MAX + 1],
                                             char aws_key_id[static KMSD_AWS_KEY_ID_MAX + 1]);

/* Key ids: [A-Za-z0-9._-]{1,128}; dataset ids: 1..255 bytes, no control characters. */
bool kmsd_valid_key_id(const char *s);
bool kmsd_valid_dataset_id(const char *s);

/* ---- metrics (metrics.c) ---------------------------------------------- */

enum kmsd_route {
	KMSD_R_CHALLENGE,
	KMSD_R_RELEASE,
	KMSD_R_OUTPUT,
	KMSD_R_ENROLL,
	KMSD_R_ACTIVATE,
	KMSD_R_KEYS,
	KMSD_R_WRAP,
	KMSD_R_HEALTH,
	KMSD_R_METRICS,
	KMSD_R_RENEW,
	KMSD_R_AKS,
	KMSD_R_OTHER,
	KMSD_R__COUNT
};

/* Denial reason codes: the "code" of each reason in a 403 and a metrics label. */
#define KMSD_DENIALS(X)                                                                            \
	X(NONCE_UNKNOWN, "nonce_unknown")                                                          \
	X(NONCE_USED, "nonce_reused")                                                              \
	X(NONCE_EXPIRED, "nonce_expired")                                                          \
	X(POLICY_DIGEST, "policy_digest_mismatch")                                                 \
	X(EVIDENCE, "evidence_invalid")                                                            \
	X(IDENTITY, "identity_invalid")                                                            \
	X(BINDING, "binding_mismatch")                                                             \
	X(AK_UNKNOWN, "ak_not_enrolled")                                                           \
	X(AK_REVOKED, "ak_revoked")                                                                \
	X(POLICY, "policy_denied")                                                                 \
	X(KEY_UNKNOWN, "key_unknown")                                                              \
	X(KEY_DISABLED, "key_disabled")                                                            \
	X(UNWRAP, "unwrap_failed")                                                                 \
	X(RATE_LIMITED, "rate_limited")                                                            \
	X(OUTPUT_RUN, "output_run_mismatch")

#define KMSD_DENIAL_ENUM_(n, s) KMSD_D_##n,
enum kmsd_denial { KMSD_DENIALS(KMSD_DENIAL_ENUM_) KMSD_D__COUNT };
#undef KMSD_DENIAL_ENUM_
const char *kmsd_denial_code(enum kmsd_denial d);

typedef struct kmsd_metrics kmsd_metrics;
SL_MUST_USE sl_err kmsd_metrics_new(kmsd_metrics **out);
void kmsd_metrics_free(kmsd_metrics *m);
void kmsd_metrics_request(kmsd_metrics *m, enum kmsd_route r, unsigned status, uint64_t ns);
void kmsd_metrics_release(kmsd_metrics *m, size_t nkeys);
void kmsd_metrics_denial(kmsd_metrics *m, enum kmsd_denial d);
/* Counters of work done and not done (docs/seclaunchd.md, Metrics). */
enum kmsd_counter {
	KMSD_C_EVIDENCE_VERIFIED, /* evidence items handed to a verifier */
	KMSD_C_AUDIT_AGGREGATED,  /* refusals counted into a summary record */
	KMSD_C_AUDIT_UNRECORDED,  /* decisions answered 503: no record could be written */
	KMSD_C__COUNT
};
void kmsd_metrics_count(kmsd_metrics *m, enum kmsd_counter c);
/* Prometheus text exposition (malloc'd). */
SL_MUST_USE sl_err kmsd_metrics_render(kmsd_metrics *m, size_t challenges, size_t aks, size_t keys,
                                       char **out);

/* ---- the service (server.c, handlers_*.c) ----------------------------- */

struct sl_audit;
struct sl_policy;

/* ---- refusals per source (refusals.c) ----------------------------------
 * A token bucket per client address, charged by refused releases
 * (rate_per_min tokens, refilled evenly), and the audit aggregation of cheap
 * refusals: per source and reason, the first in each window is written in
 * full, later ones are counted and written as one summary record when the
 * window closes (docs/audit.md, Aggregated refusals). Memory is bounded. */
typedef struct kmsd_refusals kmsd_refusals;
SL_MUST_USE sl_err kmsd_refusals_new(unsigned rate_per_min, unsigned window_s, kmsd_refusals **out);
void kmsd_refusals_free(kmsd_refusals *t);
/* false when the source has no token left; *retry_after_s: when one is back. */
bool kmsd_refusals_admit(kmsd_refusals *t, const char *source, unsigned *retry_after_s);
/* Takes one token from the source. */
void kmsd_refusals_charge(kmsd_refusals *t, const char *source);
/* true: write this refusal in full now; false: it was counted (a summary
 * follows). reason is a denial code (kmsd_denial_code). */
bool kmsd_refusals_note(kmsd_refusals *t, const char *source, const char *reason);
/* The same for a refused lease renewal or output-key request (event
 * SL_AUDIT_EV_RENEW / SL_AUDIT_EV_OUTPUT: a window of its own, and the
 * summary is a record of that event); kmsd_refusals_note is for releases. */
bool kmsd_refusals_note_event(kmsd_refusals *t, const char *source, const char *event,
                              const char *reason);
/* Summaries whose window closed (all pending ones when force), as a JSON
 * array of {"source","reason","count","first","last","window_s"}; NULL when
 * none. The caller writes them, or hands them back with _putback. */
json_t *kmsd_refusals_take(kmsd_refusals *t, bool force);
void kmsd_refusals_putback(kmsd_refusals *t, json_t *summaries);
/* Whether the last audit write succeeded (a counted refusal is only answered
 * 403 while the log is writable). */
void kmsd_refusals_audit_state(kmsd_refusals *t, bool ok);
bool kmsd_refusals_audit_ok(kmsd_refusals *t);

/* Bearer-token scopes (routes.c): each a token file of its own; admin holds
 * every scope. */
enum kmsd_scope {
	KMSD_SCOPE_METRICS, /* GET /metrics */
	KMSD_SCOPE_WRAP,    /* data owners: wrap and rewrap DEKs, read keys */
	KMSD_SCOPE_OPERATE, /* enrollment tokens, AK list and revoke */
	KMSD_SCOPE_ADMIN,   /* the key lifecycle, and everything above */
	KMSD_SCOPE__COUNT
};
const char *kmsd_scope_name(enum kmsd_scope s);

typedef struct kmsd_ctx {
	const kmsd_config *cfg;
	kmsd_kek *kek;
	kmsd_nonces *nonces;
	kmsd_registry *registry;
	kmsd_metrics *metrics;
	struct sl_audit *audit;
	struct sl_policy *policy;
	struct kmsd_store *store;
	kmsd_keyproc *keyproc;       /* the KEK process (NULL in unit tests: in-process KEKs) */
	kmsd_refusals *refusals;     /* NULL: no rate limit, every refusal in full */
	kmsd_refusals *enroll_limit; /* /v1/enroll requests per source; NULL: none */
	/* the SHA-256 of each scope's token (the tokens themselves are not
	 * kept); token_set: that scope has a token of its own */
	uint8_t token_sha256[KMSD_SCOPE__COUNT][32];
	bool token_set[KMSD_SCOPE__COUNT];
} kmsd_ctx;

typedef struct kmsd_request {
	const char *method;
	const char *path;
	const uint8_t *body;
	size_t len;
	const char *authorization; /* NULL when absent */
	const char *source;        /* client address ("127.0.0.1"), NULL when unknown */
} kmsd_request;

typedef struct kmsd_response {
	unsigned status;
	json_t *json;         /* body (owned); problem JSON for errors */
	char *text;           /* or a text body (owned, metrics) */
	bool problem;         /* content type application/problem+json */
	unsigned retry_after; /* seconds for Retry-After on 429/503 (0: 1) */
} kmsd_response;

/* Sets an RFC 7807 problem body: type "urn:seclaunch:kms:<slug>". reasons
 * (stolen, may be NULL) becomes "reasons". */
void kmsd_problem(kmsd_response *res, unsigned status, const char *slug, const char *title,
                  const char *detail, json_t *reasons);
/* 400 from a parser error (the detail names the field). */
void kmsd_bad_request(kmsd_response *res);
/* Reads every configured token file (sl_secret_read_token) into ctx; two
 * scopes holding the same token is a configuration error naming both. */
struct kmsd_config;
SL_MUST_USE sl_err kmsd_tokens_load(kmsd_ctx *ctx, const kmsd_config *c);
/* Whether the request's bearer token has scope need (the admin token has
 * every scope), compared in constant time against every configured token.
 * false: 401 (no token, or not one of seclaunchd's) or 403 naming the
 * token's scope and what `what` ("POST /v1/keys/{id}/delete") needs; the
 * refusal is recorded as event (key_id: NULL or a valid key id), and the
 * answer is 503 when that record cannot be written. */
bool kmsd_authorize(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res,
                    enum kmsd_scope need, const char *what, const char *event, const char *key_id);
/* Appends an audit record; false (and the failure on stderr) when it could not
 * be written. An answer that grants something (keys released, a DEK wrapped, a
 * key created, an AK enrolled) is sent only when its record was written:
 * callers answer kmsd_audit_failed() otherwise. reasons is borrowed; details
 * is stolen. Without an audit log (unit tests) it records nothing, true. */
bool kmsd_audit(kmsd_ctx *ctx, const char *event, const char *key_id, const char *dataset_id,
                const char *decision, json_t *reasons, const char *claims_digest, json_t *details);
/* kmsd_audit with the record's top-level job_id (the release's job.id). */
bool kmsd_audit_job(kmsd_ctx *ctx, const char *event, const char *job_id, const char *key_id,
                    const char *dataset_id, const char *decision, json_t *reasons,
                    const char *claims_digest, json_t *details);
/* handlers_release.c: the "subject" of a release, renewal, denial or
 * enrollment record (docs/audit.md): ak_name, tee_kinds, measurements,
 * region, region_verified, client, workload, claims. ak_hint: the AK name
 * presented when no verified claim names it (an unenrolled AK). */
struct sl_claims;
json_t *kmsd_audit_subject(const struct sl_claims *c, const json_t *evidence, const char *source,
                           const char *ak_hint);
/* 503: the decision (grant or refusal) was not recorded, so it is not
 * given; the client may retry. */
void kmsd_audit_failed(kmsd_ctx *ctx, kmsd_response *res, const char *what);
/* 429 before the body is read when req's source has no refusal token left
 * (kmsd_refusals_admit), the refusal recorded as `event` (in full, or
 * counted); what names the request ("lease renewal"). true: answered. */
bool kmsd_refusal_limited(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res,
                          const char *event, const char *what);
/* A refused attested request: takes a token from the source and records it
 * with write(arg), or counts it when it is cheap (decided before evidence
 * was verified) and one like it (event, code) was written in full in this
 * window. false: it could not be recorded (the caller answers 503). */
bool kmsd_refusal_record(kmsd_ctx *ctx, const char *source, const char *event, const char *code,
                         bool cheap, bool (*write)(void *), void *arg);

void kmsd_handle_challenge(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_release(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_output(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
typedef struct kmsd_attest_opts {
	bool check_digest;  /* refuse a policy_digest other than the one in force
	                     * (a release: version skew); false for a renewal,
	                     * judged by the policy in force now */
	bool *verified;     /* out: the evidence was looked at */
	bool *store_failed; /* out: the state store could not answer (503) */
} kmsd_attest_opts;
/* The attestation checks of a release, for the other attested operations
 * (handlers_output.c): nonce (consumed), policy digest, then (only when both
 * pass) every evidence item and identity document against the binding.
 * Reasons are appended to reasons as a release words them; claims are
 * filled; *verified says whether evidence was looked at. */
void kmsd_release_attest(kmsd_ctx *ctx, const kmsd_release_req *req, json_t *reasons,
                         sl_claims *claims, const kmsd_attest_opts *o);
/* Each key of req as a release judges it: usable (not unknown, not
 * disabled) and allowed by the policy in force for these claims; reasons
 * appended, *ttl the smallest key_ttl (0: none), *store_failed when the state
 * store could not answer. */
void kmsd_release_judge(kmsd_ctx *ctx, const kmsd_release_req *req, json_t *reasons,
                        sl_claims *claims, uint64_t *ttl, bool *store_failed);
/* The output keys asked for (handlers_output.c), for a release, a renewal
 * and POST /v1/output alike: each output id is NAME:RUN with RUN job.id;
 * the policy names its KEK, which is usable; the output id's rules and
 * every input's (inputs: the dataset ids read) allow this machine and the
 * destination; the run is bound to this attested subject (output_runs).
 * keys[i] is the KEK of outputs[i]; *ttl lowered to the smallest key_ttl
 * (0: none yet); *store_failed when the store could not answer. */
typedef struct kmsd_outputs_ask {
	const json_t *job;
	const char *const *inputs;
	size_t ninputs;
	const kmsd_output_entry *outputs;
	size_t noutputs;
} kmsd_outputs_ask;
void kmsd_outputs_judge(kmsd_ctx *ctx, const kmsd_outputs_ask *a, json_t *reasons,
                        const sl_claims *claims, const char *keys[], uint64_t *ttl,
                        bool *store_failed);
/* A fresh DEK per output, made, wrapped and sealed to eph_pub in the key
 * process, appended to out as {"output_id", "key_id", "wrapped_dek",
 * "sealed"}; false (reasons appended) when one fails. */
bool kmsd_outputs_issue(kmsd_ctx *ctx, const kmsd_outputs_ask *a, const char *const keys[],
                        const uint8_t eph_pub[static SL_EPH_PUB_LEN], json_t *reasons, json_t *out);
/* The outputs of a request as audit records list them. */
json_t *kmsd_outputs_json(const kmsd_outputs_ask *a, const char *const keys[]);
void kmsd_handle_enroll(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_activate(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
/* POST /v1/enroll/tokens {"ttl_s"?} (admin): a single-use enrollment token. */
void kmsd_handle_enroll_token(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_key_create(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_wrap(kmsd_ctx *ctx, const kmsd_request *req, const char *key_id,
                      kmsd_response *res);
/* handlers_keys.c: GET /v1/keys, GET /v1/keys/{id}, POST
 * /v1/keys/{id}/{rotate|disable|enable|retire|delete|rewrap} (admin).
 * action: NULL for the key itself. */
void kmsd_handle_key_admin(kmsd_ctx *ctx, const kmsd_request *req, const char *key_id,
                           const char *action, kmsd_response *res);
/* handlers_renew.c: POST /v1/renew (a lease renewal: docs/protocol.md). */
void kmsd_handle_renew(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
/* handlers_aks.c: GET /v1/aks, POST /v1/aks/revoke (admin). */
void kmsd_handle_aks_list(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_aks_revoke(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_eks_readmit(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
/* The lease of an allowed release or renewal: {"ttl", "expires"} for the
 * smallest key_ttl of the decisions (ttl_s), NULL when there is none. */
json_t *kmsd_lease_json(uint64_t ttl_s);
void kmsd_handle_health(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);
void kmsd_handle_metrics(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);

/* 503 for a failure of the state store (the decision cannot be made or
 * kept: nothing is granted, nothing is recorded as refused). */
void kmsd_store_failed(kmsd_ctx *ctx, kmsd_response *res, const char *what);

/* Routes one request (pure dispatch: used by the server and the fuzz target). */
enum kmsd_route kmsd_dispatch(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res);

/* heap_wipe.c: jansson wipes every block before freeing it (request
 * bodies carry wrap DEKs and tokens). Called first in main. */
void kmsd_heap_wipe_install(void);

/* migrate.c: seclaunchd migrate | backup (argv[0] is the command). */
int kmsd_tool_main(int argc, char **argv);

/* Runs the HTTPS server until SIGTERM/SIGINT; SIGHUP calls kmsd_reload. */
SL_MUST_USE sl_err kmsd_serve(kmsd_ctx *ctx);
/* The limits a reload may change (max_body). */
void kmsd_server_set_limits(const kmsd_config *c);

/* ---- daemon log (log.c) ------------------------------------------------ */

/* syslog priorities (the journal's <N> prefixes) */
enum kmsd_log_level {
	KMSD_LOG_ERR = 3,
	KMSD_LOG_WARNING = 4,
	KMSD_LOG_NOTICE = 5,
	KMSD_LOG_INFO = 6
};
/* path NULL: stderr. */
SL_MUST_USE sl_err kmsd_log_open(const char *path);
/* Opens the log file again (after logrotate moved it); stderr: nothing. */
SL_MUST_USE sl_err kmsd_log_reopen(void);
const char *kmsd_log_path(void);
void kmsd_log_close(void);
void kmsd_log(enum kmsd_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- live configuration and SIGHUP (reload.c) -------------------------- */

#define KMSD_AUDIT_EV_RELOAD "kms.reload"   /* SIGHUP: "applied" or "refused" (details.error) */
#define KMSD_AUDIT_EV_AK_LIST "kms.ak.list" /* written only when refused */
#define KMSD_AUDIT_EV_METRICS "kms.metrics" /* written only when refused */

/* What the command line asked for; a reload builds the config from it again. */
typedef struct kmsd_start_opts {
	const char *config, *state, *listen, *policy, *pubkey, *log_file;
	bool dev;
} kmsd_start_opts;
/* defaults, the config file, the command-line options, --dev's files, checks */
SL_MUST_USE sl_err kmsd_config_build(const kmsd_start_opts *o, kmsd_config *c);
/* The signed policy the config names, or the development policy in --dev. */
SL_MUST_USE sl_err kmsd_policy_load(const kmsd_config *c, struct sl_policy **out);
typedef struct kmsd_gen kmsd_gen;
/* Makes (start, ctx->policy) the first generation; it takes ctx->policy. The
 * start-up config must outlive kmsd_live_stop(). */
SL_MUST_USE sl_err kmsd_live_start(kmsd_ctx *ctx, const kmsd_config *start,
                                   const kmsd_start_opts *o);
/* req = base with the current generation's config and policy, held until
 * kmsd_live_leave. */
kmsd_gen *kmsd_live_enter(const kmsd_ctx *base, kmsd_ctx *req);
void kmsd_live_leave(kmsd_gen *g);
void kmsd_live_stop(void);
/* SIGHUP: reopen the log; rebuild config + policy and swap them in whole, or
 * keep the old ones and say why (log + audit record). Never stops the service. */
void kmsd_reload(kmsd_ctx *ctx);

#endif
