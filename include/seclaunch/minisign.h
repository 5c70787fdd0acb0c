/* minisign-compatible Ed25519 keys and signatures (the stock `minisign` tool's
 * formats, so a compliance team can sign policies with it).
 *
 * Public key file:  "untrusted comment: ...\n" base64("Ed" || key_id[8] || pk[32]) "\n"
 * Secret key file:  "untrusted comment: ...\n" base64("Ed" || kdf "Sc"|"\0\0" || "B2" ||
 *                   salt[32] || opslimit u64le || memlimit u64le ||
 *                   (key_id[8] || sk[64] || BLAKE2b-256 checksum[32]) XOR scrypt stream)
 * Signature file:   "untrusted comment: ...\n" base64("ED"|"Ed" || key_id[8] || sig[64]) "\n"
 *                   "trusted comment: TEXT\n" base64(global_sig[64]) "\n"
 * "ED" signs BLAKE2b-512(message) (prehashed, the default since minisign 0.8);
 * "Ed" (legacy) signs the message itself. global_sig signs sig || TEXT, so the
 * trusted comment is authenticated too.
 */
#ifndef SECLAUNCH_MINISIGN_H
#define SECLAUNCH_MINISIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

#define SL_MINISIGN_KEYID_LEN 8
#define SL_MINISIGN_PK_LEN 32
#define SL_MINISIGN_SIG_LEN 64
/* Longest trusted comment accepted (minisign's TRUSTEDCOMMENTMAXBYTES). */
#define SL_MINISIGN_COMMENT_MAX 8192

/* Public keys hold nothing secret, so the struct is plain. */
typedef struct sl_minisign_pubkey {
	uint8_t key_id[SL_MINISIGN_KEYID_LEN];
	uint8_t pk[SL_MINISIGN_PK_LEN];
} sl_minisign_pubkey;

/* Secret key: lives in sodium guarded memory. */
typedef struct sl_minisign_seckey sl_minisign_seckey;

/* A parsed signature file. */
typedef struct sl_minisign_sig sl_minisign_sig;

/* Parses a public key file's text (comment line optional) or a bare base64
 * key (as `minisign -P` takes). SL_E_FORMAT naming what is wrong. */
SL_MUST_USE sl_err sl_minisign_pubkey_parse(const uint8_t *data, size_t len,
                                            sl_minisign_pubkey *out);
/* The key id as minisign prints it: 16 upper-case hex digits of the
 * little-endian 64-bit number. buf >= 17. */
void sl_minisign_key_id_hex(const uint8_t key_id[static SL_MINISIGN_KEYID_LEN], char *buf);

/* True when the secret key text is password-encrypted ("Sc" KDF). */
bool sl_minisign_seckey_is_encrypted(const uint8_t *data, size_t len);
/* Parses (and decrypts with password when encrypted; password may be NULL
 * for an unencrypted key) a secret key file's text. A wrong password fails
 * with SL_E_WRONG_KEY (the checksum does not match). */
SL_MUST_USE sl_err sl_minisign_seckey_parse(const uint8_t *data, size_t len, const char *password,
                                            sl_minisign_seckey **out);
void sl_minisign_seckey_free(sl_minisign_seckey *sk);
void sl_minisign_seckey_pubkey(const sl_minisign_seckey *sk, sl_minisign_pubkey *out);

/* A new key pair. password NULL: unencrypted secret key (minisign -W).
 * opslimit/memlimit: scrypt parameters, 0 = minisign's defaults
 * (crypto_pwhash_scryptsalsa208sha256_*_SENSITIVE). Both texts malloc'd;
 * *seckey_text is secret: the caller wipes it (sl_wipe) before free. */
SL_MUST_USE sl_err sl_minisign_keygen(const char *password, uint64_t opslimit, uint64_t memlimit,
                                      char **seckey_text, char **pubkey_text,
                                      sl_minisign_pubkey *pk);

/* Signs msg; trusted_comment NULL: "timestamp:<unix time>". legacy true
 * makes an "Ed" (non-prehashed) signature. The signature file text, malloc'd. */
SL_MUST_USE sl_err sl_minisign_sign(const sl_minisign_seckey *sk, const uint8_t *msg, size_t len,
                                    const char *trusted_comment, bool legacy, char **sig_text);

/* Parses a signature file's text. SL_E_FORMAT naming the line/field. */
SL_MUST_USE sl_err sl_minisign_sig_parse(const uint8_t *data, size_t len, sl_minisign_sig **out);
void sl_minisign_sig_free(sl_minisign_sig *s);
bool sl_minisign_sig_prehashed(const sl_minisign_sig *s);
const char *sl_minisign_sig_trusted_comment(const sl_minisign_sig *s);
void sl_minisign_sig_key_id(const sl_minisign_sig *s, uint8_t out[static SL_MINISIGN_KEYID_LEN]);

/* Verifies sig over msg under pk: key id, signature, then the global
 * signature over the trusted comment. Failures: SL_E_INTEGRITY with the
 * reason ("key id ... does not match public key ...", "signature does not
 * verify", "trusted comment signature does not verify"). */
SL_MUST_USE sl_err sl_minisign_verify(const sl_minisign_pubkey *pk, const sl_minisign_sig *sig,
                                      const uint8_t *msg, size_t len);

#endif
