/* The sealed box of KMS protocol v1 (docs/protocol.md, "Sealing"): a DEK
 * sealed by seclaunchd to the client's ephemeral X25519 public key and
 * opened with its secret key (libsodium crypto_box_seal: an ephemeral
 * sender key, XSalsa20-Poly1305). The one place either side seals or opens. */
#ifndef SECLAUNCH_SEALBOX_H
#define SECLAUNCH_SEALBOX_H

#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"
#include "seclaunch/secret.h"

#define SL_SEALBOX_PUB_LEN 32
#define SL_SEALBOX_SK_LEN 32
#define SL_SEALBOX_OVERHEAD 48 /* crypto_box_SEALBYTES */

/* A fresh X25519 key pair; the secret half in guarded memory. */
SL_MUST_USE sl_err sl_sealbox_keypair(uint8_t pub[static SL_SEALBOX_PUB_LEN], sl_secret **sk);

/* Seals len bytes of msg to pub into out (len + SL_SEALBOX_OVERHEAD bytes). */
SL_MUST_USE sl_err sl_sealbox_seal(const uint8_t *msg, size_t len,
                                   const uint8_t pub[static SL_SEALBOX_PUB_LEN], uint8_t *out);

/* Opens sealed (len bytes, at least SL_SEALBOX_OVERHEAD) with the secret key
 * sk (SL_SEALBOX_SK_LEN bytes) into out (len - SL_SEALBOX_OVERHEAD bytes).
 * SL_E_INTEGRITY when it was not sealed to sk's public key or was changed;
 * out is wiped then. */
SL_MUST_USE sl_err sl_sealbox_open(const uint8_t *sealed, size_t len, sl_secret *sk, uint8_t *out);

#endif
