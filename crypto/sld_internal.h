/* Internals shared by the crypto/sld_*.c files (not a public header). */
#ifndef SECLAUNCH_SLD_INTERNAL_H
#define SECLAUNCH_SLD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/sld.h"

#define SLD_MIN_HEADER 143
#define SLD_KEY_CHECK_LEN 32
#define SLD_MAC_LEN 32
#define SLD_AAD_LEN 41
#define SLD_PLAINTEXT_MAX ((uint64_t)1 << 60)

extern const uint8_t sld_magic[SL_SLD_MAGIC_LEN];

struct sld_ext {
	uint16_t type;
	uint8_t flags;
	uint8_t version;
	uint16_t len;
};

struct sl_sld_header {
	uint8_t *raw; /* exactly len bytes */
	size_t len;
	uint16_t version;
	sl_aead_id aead;
	uint32_t chunk_size;
	uint64_t plaintext_len;
	uint64_t chunk_count;
	uint8_t salt[SL_SLD_SALT_LEN];
	char dataset_id[SL_SLD_DATASET_ID_MAX + 1];
	char kms_url[SL_SLD_KMS_URL_MAX + 1];
	char key_id[SL_SLD_KEY_ID_MAX + 1];
	uint8_t wrapped_dek[SL_SLD_WRAPPED_DEK_MAX];
	size_t wrapped_dek_len;
	struct sld_ext *ext;
	size_t n_ext;
	uint8_t key_check[SLD_KEY_CHECK_LEN];
	uint8_t mac[SLD_MAC_LEN];
	uint8_t digest[32]; /* SHA-256 of raw */
};

/* Strict UTF-8 without control characters / printable ASCII 0x21..0x7e
 * (the text rules of docs/format-sld.md, shared with the manifest). */
bool sld_utf8_printable(const uint8_t *s, size_t n);
bool sld_ascii_printable(const uint8_t *s, size_t n);

/* The chunk count a plaintext length implies (at least 1). */
uint64_t sld_chunk_count(uint64_t plaintext_len, uint32_t chunk_size);

/* Keys derived from the DEK and the salt (docs/format-sld.md section 3). */
struct sld_keys {
	sl_secret *file_key;
	sl_secret *mac_key;
	uint8_t key_check[SLD_KEY_CHECK_LEN];
};
SL_MUST_USE sl_err sld_derive_keys(sl_secret *dek, const uint8_t salt[static SL_SLD_SALT_LEN],
                                   struct sld_keys *out);
void sld_keys_free(struct sld_keys *k);

/* The encryption parameters with their defaults filled in (AEAD, chunk
 * size, threads), checked: SL_E_INPUT naming the bad one. */
SL_MUST_USE sl_err sld_params_resolve(const sl_sld_encrypt_params *p, sl_sld_encrypt_params *out);

/* Serialises a header (everything but salt comes from p) with the key
 * check and MAC, and parses it back into *out. */
SL_MUST_USE sl_err sld_header_build(const sl_sld_encrypt_params *p, uint64_t plaintext_len,
                                    const uint8_t salt[static SL_SLD_SALT_LEN],
                                    const struct sld_keys *keys, sl_sld_header **out);

void sld_chunk_nonce(sl_aead_id id, uint64_t i, uint8_t out[static SL_AEAD_MAX_NONCE_LEN]);
void sld_chunk_aad(const uint8_t digest[static 32], uint64_t i, bool final,
                   uint8_t out[static SLD_AAD_LEN]);

/* Streaming AES-256-GCM opening (aead.c), for GCM contexts only: begin,
 * update over the ciphertext in pieces (out may equal in), final with the
 * tag (SL_E_INTEGRITY on a mismatch). What update wrote is unauthenticated
 * until final succeeds: the caller keeps it private and wipes it on failure. */
SL_MUST_USE sl_err sld_gcm_open_begin(sl_aead *a, const uint8_t *nonce, const uint8_t *aad,
                                      size_t aad_len);
SL_MUST_USE sl_err sld_gcm_open_update(sl_aead *a, const uint8_t *in, size_t len, uint8_t *out);
SL_MUST_USE sl_err sld_gcm_open_final(sl_aead *a, const uint8_t tag[static SL_AEAD_TAG_LEN]);

/* Streaming AES-256-GCM sealing, the counterpart of the above: the
 * ciphertext and tag equal sl_aead_seal's over the concatenated pieces. */
SL_MUST_USE sl_err sld_gcm_seal_begin(sl_aead *a, const uint8_t *nonce, const uint8_t *aad,
                                      size_t aad_len);
SL_MUST_USE sl_err sld_gcm_seal_update(sl_aead *a, const uint8_t *in, size_t len, uint8_t *out);
SL_MUST_USE sl_err sld_gcm_seal_final(sl_aead *a, uint8_t tag[static SL_AEAD_TAG_LEN]);

/* An ordered pool: count items; fill (optional, calling thread, index
 * order), work (worker threads, any order), emit (calling thread, index
 * order). At most 2 x threads buffers of buf_size bytes exist; they are
 * sl_secret memory, wiped when the run ends. With buf_size 0 there are no
 * buffers (work gets NULL: it writes elsewhere) and the window of 2 x
 * threads items only bounds how far workers run ahead of emit. With keep
 * the buffers come from and go back to that set (zeroed), not freed. */
struct sl_sld_bufs {
	size_t size; /* each buffer's size */
	size_t n;
	sl_secret **buf;
};

struct sld_pool_ops {
	void *ctx;
	uint64_t count;
	size_t buf_size;
	unsigned threads;
	sl_err (*worker_init)(void *ctx, void **wstate);
	void (*worker_fini)(void *ctx, void *wstate);
	sl_err (*fill)(void *ctx, uint64_t i, uint8_t *buf, size_t *len);
	sl_err (*work)(void *ctx, void *wstate, uint64_t i, uint8_t *buf, size_t *len);
	sl_err (*emit)(void *ctx, uint64_t i, const uint8_t *buf, size_t len);
	sl_sld_bufs *keep; /* may be NULL */
};
SL_MUST_USE sl_err sld_pool_run(const struct sld_pool_ops *ops);

#endif
