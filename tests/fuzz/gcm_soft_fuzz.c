/* Differential fuzz target: the GPU kernel's AES-256-GCM arithmetic compiled
 * for the CPU (seclaunch/gcm_soft.h) against OpenSSL on arbitrary inputs.
 * Input: key (32) || nonce (12) || aad_len (1 byte, capped by what is left)
 * || aad || ciphertext || tag (16, the last bytes). Both must accept or both
 * refuse, and an accepted ciphertext must give the same plaintext; sealing
 * the plaintext again must give back ciphertext and tag. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "seclaunch/gcm_soft.h"

static int ossl_open(const uint8_t *key, const uint8_t *nonce, const uint8_t *aad, size_t al,
                     const uint8_t *ct, size_t n, const uint8_t *tag, uint8_t *out)
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int len = 0, ok = 0;
	if (c == NULL)
		abort();
	if (EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, nonce) == 1 &&
	    (al == 0 || EVP_DecryptUpdate(c, NULL, &len, aad, (int)al) == 1) &&
	    (n == 0 || EVP_DecryptUpdate(c, out, &len, ct, (int)n) == 1) &&
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, (void *)tag) == 1)
		ok = EVP_DecryptFinal_ex(c, out + n, &len) == 1;
	EVP_CIPHER_CTX_free(c);
	return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 32 + 12 + 1 + 16 || size > 1 << 16)
		return 0;
	const uint8_t *key = data, *nonce = data + 32;
	size_t rest = size - 45 - 16;
	size_t al = data[44] < rest ? data[44] : rest;
	const uint8_t *aad = data + 45, *ct = aad + al, *tag = data + size - 16;
	size_t n = rest - al;
	uint8_t *a = malloc(n + 16), *b = malloc(n + 16), *c = malloc(n + 16), t[16];
	if (a == NULL || b == NULL || c == NULL)
		abort();
	int mine = sl_gcm_soft_open(key, nonce, aad, al, ct, n, tag, a) == SL_OK;
	int theirs = ossl_open(key, nonce, aad, al, ct, n, tag, b);
	if (mine != theirs || (mine && memcmp(a, b, n) != 0))
		abort();
	/* and sealing what was (or would be) the plaintext round-trips */
	sl_gcm_soft_seal(key, nonce, aad, al, ct, n, c, t);
	if (sl_gcm_soft_open(key, nonce, aad, al, c, n, t, a) != SL_OK || memcmp(a, ct, n) != 0)
		abort();
	free(a), free(b), free(c);
	return 0;
}
