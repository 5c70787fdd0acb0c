/* HKDF-SHA256 and HMAC-SHA256 through OpenSSL's EVP interfaces. */
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include "seclaunch/crypto.h"

sl_err sl_hkdf_sha256(const uint8_t *ikm, size_t ikm_len, const uint8_t *salt, size_t salt_len,
                      const uint8_t *info, size_t info_len, uint8_t *out, size_t out_len)
{
	sl_err rc = SL_E_CRYPTO;
	EVP_KDF *kdf = NULL;
	EVP_KDF_CTX *ctx = NULL;
	OSSL_PARAM params[5];
	size_t n = 0;

	SL_ENSURE(out_len > 0 && out_len <= 255 * 32, SL_E_INTERNAL,
	          "HKDF-SHA256: output length %zu out of range", out_len);
	kdf = EVP_KDF_fetch(NULL, OSSL_KDF_NAME_HKDF, NULL);
	SL_GUARD_OSSL(kdf != NULL, SL_E_CRYPTO, "HKDF-SHA256: fetch");
	ctx = EVP_KDF_CTX_new(kdf);
	SL_GUARD_OSSL(ctx != NULL, SL_E_NOMEM, "HKDF-SHA256: context");
	params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
	params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikm_len);
	/* an absent salt means HashLen zero bytes (RFC 5869 section 2.2) */
	if (salt_len > 0)
		params[n++] =
		    OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, salt_len);
	if (info_len > 0)
		params[n++] =
		    OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_len);
	params[n] = OSSL_PARAM_construct_end();
	SL_GUARD_OSSL(EVP_KDF_derive(ctx, out, out_len, params) == 1, SL_E_CRYPTO,
	              "HKDF-SHA256: derive");
	rc = SL_OK;
out:
	EVP_KDF_CTX_free(ctx);
	EVP_KDF_free(kdf);
	return rc;
}

sl_err sl_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *data, size_t data_len,
                      uint8_t out[static SL_HMAC_SHA256_LEN])
{
	sl_err rc = SL_E_CRYPTO;
	size_t got = 0;

	SL_GUARD_OSSL(EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, key_len, data, data_len,
	                        out, SL_HMAC_SHA256_LEN, &got) != NULL &&
	                  got == SL_HMAC_SHA256_LEN,
	              SL_E_CRYPTO, "HMAC-SHA256");
	rc = SL_OK;
out:
	return rc;
}
