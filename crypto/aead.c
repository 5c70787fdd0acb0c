/* AEAD contexts: AES-256-GCM (OpenSSL EVP) and XChaCha20-Poly1305 (libsodium).
 *
 * The GCM key schedule is set once per context, so sealing a chunk only
 * re-initialises the IV: that keeps per-chunk overhead negligible next to
 * the bulk work. */
#include <limits.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/crypto.h"
#include "sld_internal.h"

struct sl_aead {
	sl_aead_id id;
	EVP_CIPHER_CTX *enc; /* GCM only */
	EVP_CIPHER_CTX *dec; /* GCM only */
	sl_secret *key;      /* XChaCha only */
};

/* EVP lengths are int; feed large buffers in pieces. */
#define UPDATE_MAX ((size_t)1 << 30)

const char *sl_aead_name(sl_aead_id id)
{
	switch (id) {
	case SL_AEAD_AES_256_GCM:
		return "aes-256-gcm";
	case SL_AEAD_XCHACHA20_POLY1305:
		return "xchacha20-poly1305";
	default:
		return NULL;
	}
}

sl_err sl_aead_from_name(const char *name, sl_aead_id *out)
{
	if (strcmp(name, "aes-256-gcm") == 0)
		*out = SL_AEAD_AES_256_GCM;
	else if (strcmp(name, "xchacha20-poly1305") == 0)
		*out = SL_AEAD_XCHACHA20_POLY1305;
	else
		return sl_err_set(SL_E_USAGE,
		                  "unknown AEAD '%s' (choose aes-256-gcm or xchacha20-poly1305)",
		                  name);
	return SL_OK;
}

size_t sl_aead_nonce_len(sl_aead_id id)
{
	switch (id) {
	case SL_AEAD_AES_256_GCM:
		return 12;
	case SL_AEAD_XCHACHA20_POLY1305:
		return crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
	default:
		return 0;
	}
}

static SL_RESULT gcm_ctx(EVP_CIPHER *cipher, const uint8_t *key, int enc, EVP_CIPHER_CTX **out)
{
	sl_err rc = SL_E_CRYPTO;
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();

	SL_GUARD_OSSL(c != NULL, SL_E_NOMEM, "AES-256-GCM: context");
	SL_GUARD_OSSL(EVP_CipherInit_ex2(c, cipher, key, NULL, enc, NULL) == 1, SL_E_CRYPTO,
	              "AES-256-GCM: key setup");
	*out = c;
	c = NULL;
	rc = SL_OK;
out:
	EVP_CIPHER_CTX_free(c);
	return rc;
}

sl_err sl_aead_new(sl_aead_id id, const uint8_t key[static SL_AEAD_KEY_LEN], sl_aead **out)
{
	sl_err rc = SL_E_NOMEM;
	EVP_CIPHER *cipher = NULL;
	sl_aead *a = calloc(1, sizeof(*a));

	SL_ENSURE(a != NULL, SL_E_NOMEM, "allocating an AEAD context");
	a->id = id;
	switch (id) {
	case SL_AEAD_AES_256_GCM:
		cipher = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
		SL_GUARD_OSSL(cipher != NULL, SL_E_CRYPTO, "AES-256-GCM: fetch");
		SL_GUARD(gcm_ctx(cipher, key, 1, &a->enc));
		SL_GUARD(gcm_ctx(cipher, key, 0, &a->dec));
		break;
	case SL_AEAD_XCHACHA20_POLY1305:
		SL_GUARD(sl_secret_from(key, SL_AEAD_KEY_LEN, &a->key));
		break;
	default:
		SL_FAIL(SL_E_INTERNAL, "unknown AEAD id %d", (int)id);
	}
	*out = a;
	a = NULL;
	rc = SL_OK;
out:
	EVP_CIPHER_free(cipher);
	sl_aead_free(a);
	return rc;
}

void sl_aead_free(sl_aead *a)
{
	if (a == NULL)
		return;
	EVP_CIPHER_CTX_free(a->enc); /* cleanses the key schedule */
	EVP_CIPHER_CTX_free(a->dec);
	sl_secret_free(a->key);
	free(a);
}

sl_aead_id sl_aead_id_of(const sl_aead *a)
{
	return a->id;
}

static SL_RESULT gcm_run(EVP_CIPHER_CTX *c, const uint8_t *nonce, const uint8_t *aad,
                         size_t aad_len, const uint8_t *in, size_t len, uint8_t *out)
{
	sl_err rc = SL_E_CRYPTO;
	int n;

	SL_GUARD_OSSL(EVP_CipherInit_ex2(c, NULL, NULL, nonce, -1, NULL) == 1, SL_E_CRYPTO,
	              "AES-256-GCM: nonce setup");
	for (size_t off = 0; off < aad_len; off += UPDATE_MAX) {
		size_t k = aad_len - off < UPDATE_MAX ? aad_len - off : UPDATE_MAX;
		SL_GUARD_OSSL(EVP_CipherUpdate(c, NULL, &n, aad + off, (int)k) == 1, SL_E_CRYPTO,
		              "AES-256-GCM: associated data");
	}
	for (size_t off = 0; off < len; off += UPDATE_MAX) {
		size_t k = len - off < UPDATE_MAX ? len - off : UPDATE_MAX;
		SL_GUARD_OSSL(EVP_CipherUpdate(c, out + off, &n, in + off, (int)k) == 1 &&
		                  (size_t)n == k,
		              SL_E_CRYPTO, "AES-256-GCM: update");
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_aead_seal(sl_aead *a, const uint8_t *nonce, const uint8_t *aad, size_t aad_len,
                    const uint8_t *in, size_t len, uint8_t *out,
                    uint8_t tag[static SL_AEAD_TAG_LEN])
{
	sl_err rc = SL_E_CRYPTO;
	int n;

	if (a->id == SL_AEAD_XCHACHA20_POLY1305) {
		SL_GUARD_SODIUM(
		    crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
		        out, tag, NULL, in, len, aad, aad_len, NULL, nonce, sl_secret_data(a->key)),
		    SL_E_CRYPTO, "XChaCha20-Poly1305: seal");
	} else {
		SL_GUARD(gcm_run(a->enc, nonce, aad, aad_len, in, len, out));
		SL_GUARD_OSSL(EVP_EncryptFinal_ex(a->enc, out + len, &n) == 1 && n == 0,
		              SL_E_CRYPTO, "AES-256-GCM: final");
		SL_GUARD_OSSL(
		    EVP_CIPHER_CTX_ctrl(a->enc, EVP_CTRL_GCM_GET_TAG, SL_AEAD_TAG_LEN, tag) == 1,
		    SL_E_CRYPTO, "AES-256-GCM: tag");
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_aead_open(sl_aead *a, const uint8_t *nonce, const uint8_t *aad, size_t aad_len,
                    const uint8_t *in, size_t len, const uint8_t tag[static SL_AEAD_TAG_LEN],
                    uint8_t *out)
{
	sl_err rc = SL_E_CRYPTO;
	int n;

	if (a->id == SL_AEAD_XCHACHA20_POLY1305) {
		if (crypto_aead_xchacha20poly1305_ietf_decrypt_detached(
		        out, NULL, in, len, tag, aad, aad_len, nonce, sl_secret_data(a->key)) != 0)
			SL_FAIL(SL_E_INTEGRITY, "authentication failed (tag mismatch)");
	} else {
		SL_GUARD(gcm_run(a->dec, nonce, aad, aad_len, in, len, out));
		SL_GUARD_OSSL(EVP_CIPHER_CTX_ctrl(a->dec, EVP_CTRL_GCM_SET_TAG, SL_AEAD_TAG_LEN,
		                                  (void *)tag) == 1,
		              SL_E_CRYPTO, "AES-256-GCM: tag");
		if (EVP_DecryptFinal_ex(a->dec, out + len, &n) != 1) {
			ERR_clear_error();
			SL_FAIL(SL_E_INTEGRITY, "authentication failed (tag mismatch)");
		}
	}
	rc = SL_OK;
out:
	/* GCM decrypts before it can check the tag: never leave those bytes */
	if (rc != SL_OK && out != NULL && len > 0)
		sl_wipe(out, len);
	return rc;
}

/* Streaming AES-256-GCM opening (declared in crypto/sld_internal.h): SLD
 * decryption reads a chunk in pieces small enough to stay in cache and
 * decrypts each piece right after its read. */
sl_err sld_gcm_open_begin(sl_aead *a, const uint8_t *nonce, const uint8_t *aad, size_t aad_len)
{
	sl_err rc = SL_E_INTERNAL;

	SL_ENSURE(a->id == SL_AEAD_AES_256_GCM, SL_E_INTERNAL,
	          "streaming open is AES-256-GCM only");
	SL_GUARD(gcm_run(a->dec, nonce, aad, aad_len, NULL, 0, NULL));
	rc = SL_OK;
out:
	return rc;
}

sl_err sld_gcm_open_update(sl_aead *a, const uint8_t *in, size_t len, uint8_t *out)
{
	sl_err rc = SL_E_CRYPTO;
	int n;

	for (size_t off = 0; off < len; off += UPDATE_MAX) {
		size_t k = len - off < UPDATE_MAX ? len - off : UPDATE_MAX;
		SL_GUARD_OSSL(EVP_DecryptUpdate(a->dec, out + off, &n, in + off, (int)k) == 1 &&
		                  (size_t)n == k,
		              SL_E_CRYPTO, "AES-256-GCM: update");
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sld_gcm_open_final(sl_aead *a, const uint8_t tag[static SL_AEAD_TAG_LEN])
{
	sl_err rc = SL_E_CRYPTO;
	uint8_t none[16];
	int n;

	SL_GUARD_OSSL(
	    EVP_CIPHER_CTX_ctrl(a->dec, EVP_CTRL_GCM_SET_TAG, SL_AEAD_TAG_LEN, (void *)tag) == 1,
	    SL_E_CRYPTO, "AES-256-GCM: tag");
	if (EVP_DecryptFinal_ex(a->dec, none, &n) != 1) {
		ERR_clear_error();
		SL_FAIL(SL_E_INTEGRITY, "authentication failed (tag mismatch)");
	}
	rc = SL_OK;
out:
	return rc;
}

/* Streaming AES-256-GCM sealing (sld_internal.h): SLD encryption reads a
 * chunk's plaintext in pieces and seals each piece while it is in cache. */
sl_err sld_gcm_seal_begin(sl_aead *a, const uint8_t *nonce, const uint8_t *aad, size_t aad_len)
{
	sl_err rc = SL_E_INTERNAL;

	SL_ENSURE(a->id == SL_AEAD_AES_256_GCM, SL_E_INTERNAL,
	          "streaming seal is AES-256-GCM only");
	SL_GUARD(gcm_run(a->enc, nonce, aad, aad_len, NULL, 0, NULL));
	rc = SL_OK;
out:
	return rc;
}

sl_err sld_gcm_seal_update(sl_aead *a, const uint8_t *in, size_t len, uint8_t *out)
{
	sl_err rc = SL_E_CRYPTO;
	int n;

	for (size_t off = 0; off < len; off += UPDATE_MAX) {
		size_t k = len - off < UPDATE_MAX ? len - off : UPDATE_MAX;
		SL_GUARD_OSSL(EVP_EncryptUpdate(a->enc, out + off, &n, in + off, (int)k) == 1 &&
		                  (size_t)n == k,
		              SL_E_CRYPTO, "AES-256-GCM: update");
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sld_gcm_seal_final(sl_aead *a, uint8_t tag[static SL_AEAD_TAG_LEN])
{
	sl_err rc = SL_E_CRYPTO;
	uint8_t none[16];
	int n;

	SL_GUARD_OSSL(EVP_EncryptFinal_ex(a->enc, none, &n) == 1 && n == 0, SL_E_CRYPTO,
	              "AES-256-GCM: final");
	SL_GUARD_OSSL(EVP_CIPHER_CTX_ctrl(a->enc, EVP_CTRL_GCM_GET_TAG, SL_AEAD_TAG_LEN, tag) == 1,
	              SL_E_CRYPTO, "AES-256-GCM: tag");
	rc = SL_OK;
out:
	return rc;
}
