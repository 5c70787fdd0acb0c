/* TPM2_MakeCredential in software (TPM 2.0 Part 1 section 24, Part 3 12.6).
 *
 *   seed        fresh CSPRNG bytes (RSA EK: OAEP-encrypted, label "IDENTITY"), or
 *               KDFe(nameAlg, Z, "IDENTITY", ephemeral.x, EK.x) (ECC EK: ECDH)
 *   symKey      KDFa(nameAlg, seed, "STORAGE", AK name, "", EK symmetric keyBits)
 *   encIdentity AES-CFB(symKey, IV = 0, TPM2B_DIGEST credential)
 *   hmacKey     KDFa(nameAlg, seed, "INTEGRITY", "", "", digest bits)
 *   outerHMAC   HMAC(hmacKey, encIdentity || AK name)
 *   blob        TPM2B_ID_OBJECT { TPM2B_DIGEST outerHMAC, encIdentity }
 *
 * KDFa is NIST SP 800-108 counter mode with HMAC (OpenSSL's KBKDF: label,
 * 0x00, context, 32-bit length); KDFe is the SP 800-56A one-step KDF
 * (OpenSSL's SSKDF: counter || Z || info). The labels' terminating NUL is
 * part of the input, which is exactly KBKDF's separator byte.
 */
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/kdf.h>
#include <openssl/rsa.h>
#include <stdlib.h>
#include <string.h>

#include "tpm2_int.h"

/* seed, symKey, hmacKey and the plaintext credential live here. */
#define SEED_OFF 0
#define SYM_OFF 64
#define HMK_OFF 96
#define PT_OFF 160
#define SECRET_SIZE (PT_OFF + 2 + SL_TPM2_CREDENTIAL_MAX)

static SL_RESULT kdfa(const EVP_MD *md, const uint8_t *key, size_t keylen, const char *label,
                      const uint8_t *ctx_u, size_t ctx_u_len, uint8_t *out, size_t outlen)
{
	sl_err rc = SL_E_CRYPTO;
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "KBKDF", NULL);
	EVP_KDF_CTX *kctx = kdf != NULL ? EVP_KDF_CTX_new(kdf) : NULL;
	OSSL_PARAM p[7], *q = p;

	SL_GUARD_OSSL(kctx != NULL, SL_E_CRYPTO, "KDFa (KBKDF)");
	*q++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_MODE, (char *)"counter", 0);
	*q++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_MAC, (char *)"HMAC", 0);
	*q++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)EVP_MD_get0_name(md),
	                                        0);
	*q++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)key, keylen);
	*q++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)label, strlen(label));
	*q++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)ctx_u, ctx_u_len);
	*q = OSSL_PARAM_construct_end();
	SL_GUARD_OSSL(EVP_KDF_derive(kctx, out, outlen, p) == 1, SL_E_CRYPTO, "KDFa(%s)", label);
	rc = SL_OK;
out:
	EVP_KDF_CTX_free(kctx);
	EVP_KDF_free(kdf);
	return rc;
}

static SL_RESULT kdfe(const EVP_MD *md, const uint8_t *z, size_t zlen, const uint8_t *info,
                      size_t info_len, uint8_t *out, size_t outlen)
{
	sl_err rc = SL_E_CRYPTO;
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "SSKDF", NULL);
	EVP_KDF_CTX *kctx = kdf != NULL ? EVP_KDF_CTX_new(kdf) : NULL;
	OSSL_PARAM p[4];

	SL_GUARD_OSSL(kctx != NULL, SL_E_CRYPTO, "KDFe (SSKDF)");
	p[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)EVP_MD_get0_name(md),
	                                        0);
	p[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)z, zlen);
	p[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_len);
	p[3] = OSSL_PARAM_construct_end();
	SL_GUARD_OSSL(EVP_KDF_derive(kctx, out, outlen, p) == 1, SL_E_CRYPTO, "KDFe");
	rc = SL_OK;
out:
	EVP_KDF_CTX_free(kctx);
	EVP_KDF_free(kdf);
	return rc;
}

static const char identity_label[] = "IDENTITY"; /* sizeof includes the NUL */

/* RSA EK: seed encrypted with OAEP (nameAlg, label "IDENTITY\0"). */
static SL_RESULT seed_rsa(EVP_PKEY *ek, const EVP_MD *md, uint8_t *seed, size_t dsize,
                          sl_writer *enc)
{
	sl_err rc = SL_E_CRYPTO;
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, ek, NULL);
	uint8_t ct[512];
	size_t ctlen = sizeof(ct);
	void *label = OPENSSL_memdup(identity_label, sizeof(identity_label));

	sl_random(seed, dsize);
	SL_GUARD_OSSL(ctx != NULL && label != NULL && EVP_PKEY_encrypt_init(ctx) == 1 &&
	                  EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) == 1 &&
	                  EVP_PKEY_CTX_set_rsa_oaep_md(ctx, md) == 1 &&
	                  EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, md) == 1,
	              SL_E_CRYPTO, "RSA-OAEP setup");
	SL_GUARD_OSSL(EVP_PKEY_CTX_set0_rsa_oaep_label(ctx, label, sizeof(identity_label)) == 1,
	              SL_E_CRYPTO, "RSA-OAEP label");
	label = NULL;
	SL_GUARD_OSSL(EVP_PKEY_encrypt(ctx, ct, &ctlen, seed, dsize) == 1, SL_E_CRYPTO,
	              "RSA-OAEP encryption of the seed to the EK");
	SL_GUARD(sl_write_u16be(enc, (uint16_t)ctlen));
	SL_GUARD(sl_write_bytes(enc, ct, ctlen));
	rc = SL_OK;
out:
	OPENSSL_free(label);
	EVP_PKEY_CTX_free(ctx);
	return rc;
}

static SL_RESULT bn_fixed(EVP_PKEY *k, const char *param, uint8_t *out, size_t len)
{
	sl_err rc = SL_E_CRYPTO;
	BIGNUM *bn = NULL;

	SL_GUARD_OSSL(EVP_PKEY_get_bn_param(k, param, &bn) == 1 &&
	                  BN_bn2binpad(bn, out, (int)len) == (int)len,
	              SL_E_CRYPTO, "EC point coordinate");
	rc = SL_OK;
out:
	BN_free(bn);
	return rc;
}

/* ECC EK: ephemeral ECDH; the ephemeral point is the "encrypted" secret. */
static SL_RESULT seed_ecc(EVP_PKEY *ek, const TPMT_PUBLIC *ekp, const EVP_MD *md, uint8_t *seed,
                          size_t dsize, sl_writer *enc)
{
	sl_err rc = SL_E_CRYPTO;
	EVP_PKEY *eph = NULL;
	EVP_PKEY_CTX *ctx = NULL;
	char group[32];
	uint8_t z[66], ex[66], ey[66], info[sizeof(identity_label) + 2 * 66];
	size_t zlen = sizeof(z), fl, ilen = 0;
	const TPM2B_ECC_PARAMETER *ekx = &ekp->unique.ecc.x;

	SL_GUARD_OSSL(EVP_PKEY_get_group_name(ek, group, sizeof(group), NULL) == 1, SL_E_CRYPTO,
	              "EK curve");
	fl = (size_t)(EVP_PKEY_get_bits(ek) + 7) / 8;
	SL_ENSURE(fl <= 66 && ekx->size <= fl, SL_E_INPUT, "EK: ECC point of %u bytes", ekx->size);
	eph = EVP_PKEY_Q_keygen(NULL, NULL, "EC", group);
	SL_GUARD_OSSL(eph != NULL, SL_E_CRYPTO, "ephemeral ECDH key");
	ctx = EVP_PKEY_CTX_new_from_pkey(NULL, eph, NULL);
	SL_GUARD_OSSL(ctx != NULL && EVP_PKEY_derive_init(ctx) == 1 &&
	                  EVP_PKEY_derive_set_peer(ctx, ek) == 1 &&
	                  EVP_PKEY_derive(ctx, z, &zlen) == 1,
	              SL_E_CRYPTO, "ECDH with the EK");
	SL_GUARD(bn_fixed(eph, OSSL_PKEY_PARAM_EC_PUB_X, ex, fl));
	SL_GUARD(bn_fixed(eph, OSSL_PKEY_PARAM_EC_PUB_Y, ey, fl));
	memcpy(info, identity_label, sizeof(identity_label));
	ilen = sizeof(identity_label);
	memcpy(info + ilen, ex, fl);
	ilen += fl;
	memcpy(info + ilen, ekx->buffer, ekx->size);
	ilen += ekx->size;
	SL_GUARD(kdfe(md, z, zlen, info, ilen, seed, dsize));
	SL_GUARD(sl_write_u16be(enc, (uint16_t)(4 + 2 * fl)));
	SL_GUARD(sl_write_u16be(enc, (uint16_t)fl));
	SL_GUARD(sl_write_bytes(enc, ex, fl));
	SL_GUARD(sl_write_u16be(enc, (uint16_t)fl));
	SL_GUARD(sl_write_bytes(enc, ey, fl));
	rc = SL_OK;
out:
	sl_wipe(z, sizeof(z));
	EVP_PKEY_CTX_free(ctx);
	EVP_PKEY_free(eph);
	return rc;
}

static SL_RESULT ek_params(const TPMT_PUBLIC *p, const EVP_CIPHER **cipher)
{
	sl_err rc = SL_E_INPUT;
	const TPMT_SYM_DEF_OBJECT *sym = p->type == TPM2_ALG_RSA
	                                     ? &p->parameters.rsaDetail.symmetric
	                                     : &p->parameters.eccDetail.symmetric;
	TPMA_OBJECT need = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;

	SL_ENSURE(p->type == TPM2_ALG_RSA || p->type == TPM2_ALG_ECC, SL_E_INPUT,
	          "EK: key type 0x%04x is not RSA or ECC", p->type);
	SL_ENSURE((p->objectAttributes & need) == need &&
	              !(p->objectAttributes & TPMA_OBJECT_SIGN_ENCRYPT),
	          SL_E_INPUT, "EK: not a restricted decryption key");
	SL_ENSURE(sl_tpm2_md(p->nameAlg) != NULL && p->nameAlg != TPM2_ALG_SHA1, SL_E_INPUT,
	          "EK: nameAlg 0x%04x not supported", p->nameAlg);
	SL_ENSURE(sym->algorithm == TPM2_ALG_AES && sym->mode.aes == TPM2_ALG_CFB, SL_E_INPUT,
	          "EK: symmetric algorithm is not AES-CFB");
	switch (sym->keyBits.aes) {
	case 128:
		*cipher = EVP_aes_128_cfb128();
		break;
	case 192:
		*cipher = EVP_aes_192_cfb128();
		break;
	case 256:
		*cipher = EVP_aes_256_cfb128();
		break;
	default:
		SL_FAIL(SL_E_INPUT, "EK: AES key size %u", sym->keyBits.aes);
	}
	rc = SL_OK;
out:
	return rc;
}

static void *dup_writer(sl_writer *w, size_t *len)
{
	void *p = malloc(w->len);
	if (p != NULL) {
		memcpy(p, w->data, w->len);
		*len = w->len;
	}
	return p;
}

sl_err sl_tpm2_make_credential(const uint8_t *ek_pub, size_t ek_pub_len, const uint8_t *ak_name,
                               size_t ak_name_len, const uint8_t *credential, size_t credential_len,
                               uint8_t **cred_blob, size_t *cred_blob_len, uint8_t **enc_secret,
                               size_t *enc_secret_len)
{
	sl_err rc = SL_E_INPUT;
	TPM2B_PUBLIC ek;
	EVP_PKEY *key = NULL;
	const EVP_MD *md, *name_md;
	const EVP_CIPHER *cipher = NULL;
	EVP_CIPHER_CTX *cctx = NULL;
	sl_secret *sec = NULL;
	sl_writer enc, blob;
	uint8_t *s, iv[16] = {0}, ct[2 + SL_TPM2_CREDENTIAL_MAX], hmac[64];
	size_t dsize, keybytes, hlen = sizeof(hmac);
	int n1 = 0, n2 = 0;

	*cred_blob = *enc_secret = NULL;
	sl_writer_init(&enc, 1024);
	sl_writer_init(&blob, 1024);
	SL_GUARD(sl_tpm2_mu_public(ek_pub, ek_pub_len, &ek, "EK public"));
	SL_GUARD(ek_params(&ek.publicArea, &cipher));
	md = sl_tpm2_md(ek.publicArea.nameAlg);
	dsize = (size_t)EVP_MD_get_size(md);
	SL_ENSURE(ak_name_len >= 2, SL_E_INPUT, "AK name: too short");
	name_md = sl_tpm2_md((TPM2_ALG_ID)(ak_name[0] << 8 | ak_name[1]));
	SL_ENSURE(name_md != NULL && ak_name_len == 2 + (size_t)EVP_MD_get_size(name_md),
	          SL_E_INPUT, "AK name: %zu bytes is not a name (nameAlg || digest)", ak_name_len);
	SL_ENSURE(credential_len >= 1 && credential_len <= dsize &&
	              credential_len <= SL_TPM2_CREDENTIAL_MAX,
	          SL_E_INPUT, "credential: %zu bytes (1..%zu)", credential_len, dsize);
	SL_GUARD(sl_tpm2_public_pkey(&ek.publicArea, &key));
	SL_GUARD(sl_secret_new(SECRET_SIZE, &sec));
	s = sl_secret_data(sec);

	if (ek.publicArea.type == TPM2_ALG_RSA)
		SL_GUARD(seed_rsa(key, md, s + SEED_OFF, dsize, &enc));
	else
		SL_GUARD(seed_ecc(key, &ek.publicArea, md, s + SEED_OFF, dsize, &enc));

	keybytes = (size_t)EVP_CIPHER_get_key_length(cipher);
	SL_GUARD(
	    kdfa(md, s + SEED_OFF, dsize, "STORAGE", ak_name, ak_name_len, s + SYM_OFF, keybytes));
	SL_GUARD(kdfa(md, s + SEED_OFF, dsize, "INTEGRITY", NULL, 0, s + HMK_OFF, dsize));

	/* encIdentity: the credential as a marshalled TPM2B_DIGEST */
	s[PT_OFF] = (uint8_t)(credential_len >> 8);
	s[PT_OFF + 1] = (uint8_t)credential_len;
	memcpy(s + PT_OFF + 2, credential, credential_len);
	cctx = EVP_CIPHER_CTX_new();
	SL_GUARD_OSSL(
	    cctx != NULL && EVP_EncryptInit_ex(cctx, cipher, NULL, s + SYM_OFF, iv) == 1 &&
	        EVP_EncryptUpdate(cctx, ct, &n1, s + PT_OFF, (int)(2 + credential_len)) == 1 &&
	        EVP_EncryptFinal_ex(cctx, ct + n1, &n2) == 1,
	    SL_E_CRYPTO, "AES-CFB encryption of the credential");

	{
		/* outerHMAC over encIdentity || name */
		EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
		EVP_MAC_CTX *mctx = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;
		OSSL_PARAM mp[2] = {OSSL_PARAM_construct_utf8_string(
		                        OSSL_MAC_PARAM_DIGEST, (char *)EVP_MD_get0_name(md), 0),
		                    OSSL_PARAM_construct_end()};
		int ok = mctx != NULL && EVP_MAC_init(mctx, s + HMK_OFF, dsize, mp) == 1 &&
		         EVP_MAC_update(mctx, ct, (size_t)(n1 + n2)) == 1 &&
		         EVP_MAC_update(mctx, ak_name, ak_name_len) == 1 &&
		         EVP_MAC_final(mctx, hmac, &hlen, sizeof(hmac)) == 1;
		EVP_MAC_CTX_free(mctx);
		EVP_MAC_free(mac);
		SL_GUARD_OSSL(ok, SL_E_CRYPTO, "integrity HMAC");
	}
	SL_GUARD(sl_write_u16be(&blob, (uint16_t)(2 + hlen + (size_t)(n1 + n2))));
	SL_GUARD(sl_write_u16be(&blob, (uint16_t)hlen));
	SL_GUARD(sl_write_bytes(&blob, hmac, hlen));
	SL_GUARD(sl_write_bytes(&blob, ct, (size_t)(n1 + n2)));

	*cred_blob = dup_writer(&blob, cred_blob_len);
	*enc_secret = dup_writer(&enc, enc_secret_len);
	SL_ENSURE(*cred_blob != NULL && *enc_secret != NULL, SL_E_NOMEM, "credential blob");
	rc = SL_OK;
out:
	if (rc != SL_OK) {
		free(*cred_blob);
		free(*enc_secret);
		*cred_blob = *enc_secret = NULL;
	}
	sl_wipe(ct, sizeof(ct));
	EVP_CIPHER_CTX_free(cctx);
	sl_secret_free(sec);
	EVP_PKEY_free(key);
	sl_writer_free(&enc);
	sl_writer_free(&blob);
	return rc;
}
