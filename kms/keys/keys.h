/* kms/keys/: the key process's side of the privilege wall (docs/
 * architecture.md): the KEK backends (local keystore, PKCS#11, AWS KMS), the
 * in-process KEK operations, and the key process that serves them over the
 * request table (../keyproc_table.h). kms/http/ may not call into this folder
 * (scripts/check-layers, a link-time check). */
#ifndef SECLAUNCH_KMS_KEYS_H
#define SECLAUNCH_KMS_KEYS_H

#include "../kmsd.h"
#include "../state/state.h"

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

/* ---- KEK operations (kek.c): only the key process runs these ---------- */

typedef struct kmsd_keys kmsd_keys;
struct kmsd_store;
struct kmsd_key_row;

/* The configured backend (kek_backend) over the state store st. */
SL_MUST_USE sl_err kmsd_keys_open(const kmsd_config *c, struct kmsd_store *st, kmsd_keys **out);
void kmsd_keys_close(kmsd_keys *k);
/* SL_E_EXISTS when the id is taken. */
SL_MUST_USE sl_err kmsd_keys_create(kmsd_keys *k, const char *id);
/* As create; aws_key_id (kek_backend "aws-kms" only; NULL: a new AWS key)
 * adopts an existing AWS KMS key as version 1. */
SL_MUST_USE sl_err kmsd_keys_adopt(kmsd_keys *k, const char *id, const char *aws_key_id);
/* Disable or enable: the store's state, and the backend's (AWS DisableKey /
 * EnableKey for every version). *found false for an unknown key. */
SL_MUST_USE sl_err kmsd_keys_set_state(kmsd_keys *k, const char *id, bool enable, bool *found);
/* The store's delete (kmsd_store_key_delete), then what this process holds
 * of it, and for AWS keys ScheduleKeyDeletion of every version. */
SL_MUST_USE sl_err kmsd_keys_delete(kmsd_keys *k, const char *id, bool force, size_t *refs,
                                    bool *deleted);
/* A new KEK version for new wraps; older versions keep unwrapping until
 * retired. *version: the new one. */
SL_MUST_USE sl_err kmsd_keys_rotate(kmsd_keys *k, const char *id, unsigned *version);
/* SL_E_INPUT unknown key; SL_E_KMS_REFUSED disabled key or retired version;
 * SL_E_SYSTEM the state store failed.
 * wrapped = kek_version || iv(12) || AES-256-GCM(KEK, iv, aad(id, dataset), dek) || tag(16) */
SL_MUST_USE sl_err kmsd_keys_wrap(kmsd_keys *k, const char *id, const char *dataset_id,
                                  const uint8_t dek[static SL_KMS_DEK_LEN],
                                  uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len);
/* SL_E_INPUT unknown key; SL_E_INTEGRITY tag mismatch (AAD or bytes).
 * dek: SL_KMS_DEK_LEN bytes of the caller's secret memory (wiped on failure).
 * There is no request for it in the key process's table: a DEK leaves this
 * process only wrapped or sealed. */
SL_MUST_USE sl_err kmsd_keys_unwrap(kmsd_keys *k, const char *id, const char *dataset_id,
                                    const uint8_t *wrapped, size_t len,
                                    uint8_t dek[static SL_KMS_DEK_LEN]);
/* Opens a wrapped DEK and wraps it again under the key's current version
 * (the DEK only in guarded memory, wiped). */
SL_MUST_USE sl_err kmsd_keys_rewrap(kmsd_keys *k, const char *id, const char *dataset_id,
                                    const uint8_t *in, size_t len,
                                    uint8_t out[static SL_KMS_WRAPPED_DEK_MAX], size_t *out_len);
/* Unwraps and seals the DEK to eph_pub (libsodium sealed box) in one step:
 * what a release hands out. */
SL_MUST_USE sl_err kmsd_keys_unwrap_seal(kmsd_keys *k, const char *id, const char *dataset_id,
                                         const uint8_t *wrapped, size_t len,
                                         const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                                         uint8_t sealed[static KMSD_SEALED_LEN]);
/* A fresh random DEK, returned only wrapped (for the output's manifest) and
 * sealed to eph_pub (for the job). */
SL_MUST_USE sl_err kmsd_keys_new_sealed(kmsd_keys *k, const char *id, const char *dataset_id,
                                        const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                                        uint8_t wrapped[static SL_KMS_WRAPPED_DEK_MAX],
                                        size_t *wrapped_len,
                                        uint8_t sealed[static KMSD_SEALED_LEN]);
/* AAD = u16be(len(id)) || id || u16be(len(dataset_id)) || dataset_id; aad
 * holds at least KMSD_AAD_MAX bytes. Returns its length. */
#define KMSD_AAD_MAX (4 + SL_KMS_ID_MAX + SL_KMS_DATASET_ID_MAX)
size_t kmsd_wrap_aad(const char *id, const char *dataset_id, uint8_t *aad);

/* keyproc.c: the key process's server half. Forks the monitor (which forks
 * the key process) with `channels` socketpairs, before anything touches the
 * network; near[0..channels) gets the network process's ends, *status_fd
 * the monitor's status pipe, *pid the monitor. The first answer on near[0]
 * says whether the key process could open its keys
 * (kmsd_keyproc_attach, kms/http/). */
SL_MUST_USE sl_err kmsd_keyproc_spawn(const kmsd_config *cfg, unsigned channels, int *near,
                                      int *status_fd, pid_t *pid);

/* AWS KMS backend (kek_aws.c): a key version is an AWS KMS key (symmetric,
 * ENCRYPT_DECRYPT) whose ARN is the version's KEK row; a DEK is wrapped by
 * AWS KMS Encrypt under the encryption context {"seclaunch:key_id",
 * "seclaunch:dataset_id"}:
 *   wrapped = kek_version (u8) || KMSD_AWS_MARKER || CiphertextBlob
 * (KMSD_AWS_MARKER: ../kmsd.h). Every call runs in the key process, which
 * alone holds the credentials. */
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

#endif
