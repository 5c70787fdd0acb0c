/* AES-256-GCM with OpenSSL, for the local keystore and local KEK wrapping. */
#include <openssl/evp.h>

#include "keys.h"

sl_err kmsd_gcm_seal(const uint8_t key[static 32], const uint8_t iv[static 12], const uint8_t *aad,
                     size_t aad_len, const uint8_t *pt, size_t len, uint8_t *ct,
                     uint8_t tag[static 16])
{
	sl_err rc = SL_E_CRYPTO;
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int n = 0;
	SL_GUARD_OSSL(ctx != NULL, SL_E_NOMEM, "AES-GCM context");
	SL_GUARD_OSSL(EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, iv) == 1, SL_E_CRYPTO,
	              "AES-GCM init");
	if (aad_len > 0)
		SL_GUARD_OSSL(EVP_EncryptUpdate(ctx, NULL, &n, aad, (int)aad_len) == 1, SL_E_CRYPTO,
		              "AES-GCM aad");
	if (len > 0)
		SL_GUARD_OSSL(EVP_EncryptUpdate(ctx, ct, &n, pt, (int)len) == 1, SL_E_CRYPTO,
		              "AES-GCM encrypt");
	SL_GUARD_OSSL(EVP_EncryptFinal_ex(ctx, ct + len, &n) == 1, SL_E_CRYPTO, "AES-GCM final");
	SL_GUARD_OSSL(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1, SL_E_CRYPTO,
	              "AES-GCM tag");
	rc = SL_OK;
out:
	EVP_CIPHER_CTX_free(ctx);
	return rc;
}

sl_err kmsd_gcm_open(const uint8_t key[static 32], const uint8_t iv[static 12], const uint8_t *aad,
                     size_t aad_len, const uint8_t *ct, size_t len, const uint8_t tag[static 16],
                     uint8_t *pt)
{
	sl_err rc = SL_E_CRYPTO;
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int n = 0;
	SL_GUARD_OSSL(ctx != NULL, SL_E_NOMEM, "AES-GCM context");
	SL_GUARD_OSSL(EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, iv) == 1, SL_E_CRYPTO,
	              "AES-GCM init");
	if (aad_len > 0)
		SL_GUARD_OSSL(EVP_DecryptUpdate(ctx, NULL, &n, aad, (int)aad_len) == 1, SL_E_CRYPTO,
		              "AES-GCM aad");
	if (len > 0)
		SL_GUARD_OSSL(EVP_DecryptUpdate(ctx, pt, &n, ct, (int)len) == 1, SL_E_CRYPTO,
		              "AES-GCM decrypt");
	SL_GUARD_OSSL(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, (void *)tag) == 1,
	              SL_E_CRYPTO, "AES-GCM tag");
	if (EVP_DecryptFinal_ex(ctx, pt + len, &n) != 1) {
		sl_wipe(pt, len);
		SL_FAIL(SL_E_INTEGRITY, "authentication tag mismatch");
	}
	rc = SL_OK;
out:
	EVP_CIPHER_CTX_free(ctx);
	return rc;
}
