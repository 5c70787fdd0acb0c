/* Symmetric primitives: HKDF-SHA256, HMAC-SHA256 and the two AEADs of SLD.
 *
 * AES-256-GCM goes through OpenSSL's EVP (AES-NI / VAES where the CPU has
 * them); XChaCha20-Poly1305 through libsodium, for CPUs without AES
 * instructions. An sl_aead context holds one key and is used by one thread
 * at a time; create one per worker. Seal and open work in place (out may
 * equal in) and take the 16-byte tag separately, so a caller lays out
 * ciphertext || tag itself.
 */
#ifndef SECLAUNCH_CRYPTO_H
#define SECLAUNCH_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"
#include "seclaunch/secret.h"

/* AEAD ids as they appear on disk (SLD header byte "aead"). */
typedef enum sl_aead_id {
	SL_AEAD_NONE = 0,
	SL_AEAD_AES_256_GCM = 1,
	SL_AEAD_XCHACHA20_POLY1305 = 2,
} sl_aead_id;

#define SL_AEAD_KEY_LEN 32
#define SL_AEAD_TAG_LEN 16
#define SL_AEAD_MAX_NONCE_LEN 24
#define SL_HMAC_SHA256_LEN 32

/* HKDF-SHA256 (RFC 5869), extract and expand, via OpenSSL EVP_KDF.
 * out_len is at most 255 * 32. salt may be NULL when salt_len is 0. */
SL_MUST_USE sl_err sl_hkdf_sha256(const uint8_t *ikm, size_t ikm_len, const uint8_t *salt,
                                  size_t salt_len, const uint8_t *info, size_t info_len,
                                  uint8_t *out, size_t out_len);

/* HMAC-SHA256 (OpenSSL). */
SL_MUST_USE sl_err sl_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *data,
                                  size_t data_len, uint8_t out[static SL_HMAC_SHA256_LEN]);

/* "aes-256-gcm" / "xchacha20-poly1305"; NULL for an unknown id. */
const char *sl_aead_name(sl_aead_id id);
/* The inverse of sl_aead_name (SL_E_USAGE naming the choices otherwise). */
SL_MUST_USE sl_err sl_aead_from_name(const char *name, sl_aead_id *out);
/* 12 for AES-256-GCM, 24 for XChaCha20-Poly1305, 0 for an unknown id. */
size_t sl_aead_nonce_len(sl_aead_id id);

typedef struct sl_aead sl_aead;

/* A context keyed with key (SL_AEAD_KEY_LEN bytes); the key schedule lives
 * in memory that is wiped on sl_aead_free. */
SL_MUST_USE sl_err sl_aead_new(sl_aead_id id, const uint8_t key[static SL_AEAD_KEY_LEN],
                               sl_aead **out);
void sl_aead_free(sl_aead *a); /* NULL-safe */
sl_aead_id sl_aead_id_of(const sl_aead *a);

/* Encrypts len bytes of in to out (out == in allowed) and writes the tag.
 * nonce is sl_aead_nonce_len(id) bytes. */
SL_MUST_USE sl_err sl_aead_seal(sl_aead *a, const uint8_t *nonce, const uint8_t *aad,
                                size_t aad_len, const uint8_t *in, size_t len, uint8_t *out,
                                uint8_t tag[static SL_AEAD_TAG_LEN]);

/* Decrypts and authenticates. On a tag mismatch it returns SL_E_INTEGRITY
 * and wipes out[0..len), so no unauthenticated plaintext is left behind. */
SL_MUST_USE sl_err sl_aead_open(sl_aead *a, const uint8_t *nonce, const uint8_t *aad,
                                size_t aad_len, const uint8_t *in, size_t len,
                                const uint8_t tag[static SL_AEAD_TAG_LEN], uint8_t *out);

#endif
