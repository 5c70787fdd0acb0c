/* AES-256-GCM in plain C from the arithmetic the GPU kernel runs
 * (crypto/gcm_arith.h): the CPU build of jobside/gcm_kernel.cu, so that the
 * kernel's arithmetic and its cut into threads are checked against OpenSSL
 * on every build, with or without a GPU. A reference, not seclaunch's own
 * decryption path (that is OpenSSL): its S-box lookups are not constant time. */
#ifndef SECLAUNCH_GCM_SOFT_H
#define SECLAUNCH_GCM_SOFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

/* Generic AES-256-GCM with a 96-bit nonce. open: SL_E_INTEGRITY on a tag
 * mismatch, out zeroed then. */
void sl_gcm_soft_seal(const uint8_t key[static 32], const uint8_t nonce[static 12],
                      const uint8_t *aad, size_t aad_len, const uint8_t *pt, size_t len,
                      uint8_t *ct, uint8_t tag[static 16]);
SL_MUST_USE sl_err sl_gcm_soft_open(const uint8_t key[static 32], const uint8_t nonce[static 12],
                                    const uint8_t *aad, size_t aad_len, const uint8_t *ct,
                                    size_t len, const uint8_t tag[static 16], uint8_t *out);

/* SLD chunks first .. first + n - 1 of a file whose chunks hold chunk_size
 * bytes, exactly as the kernel does them: src is the chunks as in the file
 * (ciphertext || tag, stride chunk_size + 16), dst receives the plaintext
 * packed (stride chunk_size), last_len is the last of these chunks' length
 * and final_last says whether it is the file's final chunk; key is the SLD
 * file key, digest the SHA-256 of the header. ok[first + k] is set to 1 for
 * a chunk whose tag verified, 0 otherwise (its plaintext is zeros).
 * SL_E_INTEGRITY names the first chunk that failed. */
SL_MUST_USE sl_err sl_gcm_soft_sld(const uint8_t key[static 32], const uint8_t digest[static 32],
                                   uint64_t first, uint32_t n, uint32_t chunk_size,
                                   uint32_t last_len, bool final_last, const uint8_t *src,
                                   uint8_t *dst, uint32_t *ok);

#endif
