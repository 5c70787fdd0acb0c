/* TPM 2.0 public areas, names, signatures: strict unmarshalling and OpenSSL keys. */
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <tss2/tss2_mu.h>

#include "seclaunch/util.h"
#include "tpm2_int.h"

/* Runs a Tss2_MU unmarshaller over exactly the bytes the reader holds: the
 * structure must end where the input ends. */
#define MU_WHOLE(fn, r, outp, what)                                                                \
	do {                                                                                       \
		size_t mu_off_ = 0;                                                                \
		const uint8_t *mu_p_ = NULL;                                                       \
		size_t mu_n_ = sl_reader_left(r);                                                  \
		SL_GUARD(sl_read_view((r), mu_n_, &mu_p_, (what)));                                \
		SL_GUARD_TSS(fn(mu_p_, mu_n_, &mu_off_, (outp)), SL_E_ATTEST_FORMAT,               \
		             "%s: malformed", (what));                                             \
		SL_ENSURE(mu_off_ == mu_n_, SL_E_ATTEST_FORMAT,                                    \
		          "%s: trailing bytes (%zu after the structure)", (what),                  \
		          mu_n_ - mu_off_);                                                        \
	} while (0)

sl_err sl_tpm2_mu_public(const uint8_t *p, size_t len, TPM2B_PUBLIC *out, const char *what)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r, sub;

	memset(out, 0, sizeof(*out));
	sl_reader_init(&r, p, len, what);
	rc = sl_read_lp16be(&r, &sub, sizeof(TPMT_PUBLIC), "size");
	if (rc != SL_OK) {
		rc = sl_err_wrap(SL_E_ATTEST_FORMAT, "TPM2B_PUBLIC");
		goto out;
	}
	SL_ENSURE(sl_reader_left(&sub) > 0, SL_E_ATTEST_FORMAT, "%s: empty public area", what);
	SL_ENSURE(sl_reader_left(&r) == 0, SL_E_ATTEST_FORMAT,
	          "%s: trailing bytes (%zu after the public area)", what, sl_reader_left(&r));
	out->size = (UINT16)sl_reader_left(&sub);
	MU_WHOLE(Tss2_MU_TPMT_PUBLIC_Unmarshal, &sub, &out->publicArea, what);
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_tpm2_mu_attest(const uint8_t *p, size_t len, TPMS_ATTEST *out)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r;

	memset(out, 0, sizeof(*out));
	sl_reader_init(&r, p, len, "TPMS_ATTEST");
	SL_ENSURE(len > 0, SL_E_ATTEST_FORMAT, "TPMS_ATTEST: empty");
	MU_WHOLE(Tss2_MU_TPMS_ATTEST_Unmarshal, &r, out, "TPMS_ATTEST");
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_tpm2_mu_signature(const uint8_t *p, size_t len, TPMT_SIGNATURE *out)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r;

	memset(out, 0, sizeof(*out));
	sl_reader_init(&r, p, len, "TPMT_SIGNATURE");
	SL_ENSURE(len > 0, SL_E_ATTEST_FORMAT, "TPMT_SIGNATURE: empty");
	MU_WHOLE(Tss2_MU_TPMT_SIGNATURE_Unmarshal, &r, out, "TPMT_SIGNATURE");
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_tpm2_marshal_public(const TPM2B_PUBLIC *pub, uint8_t **out, size_t *len)
{
	sl_err rc = SL_E_INTERNAL;
	uint8_t buf[sizeof(TPM2B_PUBLIC)];
	size_t off = 0;

	*out = NULL;
	SL_GUARD_TSS(Tss2_MU_TPM2B_PUBLIC_Marshal(pub, buf, sizeof(buf), &off), SL_E_INTERNAL,
	             "marshalling TPM2B_PUBLIC");
	*out = malloc(off);
	SL_ENSURE(*out != NULL, SL_E_NOMEM, "TPM2B_PUBLIC");
	memcpy(*out, buf, off);
	*len = off;
	rc = SL_OK;
out:
	return rc;
}

/* ---- hashes ---------------------------------------------------------- */

static const struct {
	TPM2_ALG_ID alg;
	const char *name;
} hashes[] = {
    {TPM2_ALG_SHA1, "sha1"},
    {TPM2_ALG_SHA256, "sha256"},
    {TPM2_ALG_SHA384, "sha384"},
    {TPM2_ALG_SHA512, "sha512"},
};

const char *sl_tpm2_hash_name(TPM2_ALG_ID alg)
{
	for (size_t i = 0; i < sizeof(hashes) / sizeof(hashes[0]); i++) {
		if (hashes[i].alg == alg)
			return hashes[i].name;
	}
	return NULL;
}

TPM2_ALG_ID sl_tpm2_hash_from_name(const char *name)
{
	for (size_t i = 0; i < sizeof(hashes) / sizeof(hashes[0]); i++) {
		if (strcmp(hashes[i].name, name) == 0)
			return hashes[i].alg;
	}
	return TPM2_ALG_ERROR;
}

const EVP_MD *sl_tpm2_md(TPM2_ALG_ID alg)
{
	switch (alg) {
	case TPM2_ALG_SHA1:
		return EVP_sha1();
	case TPM2_ALG_SHA256:
		return EVP_sha256();
	case TPM2_ALG_SHA384:
		return EVP_sha384();
	case TPM2_ALG_SHA512:
		return EVP_sha512();
	default:
		return NULL;
	}
}

sl_err sl_tpm2_digest(TPM2_ALG_ID alg, const void *p, size_t len, uint8_t *out, size_t *out_len)
{
	sl_err rc = SL_E_CRYPTO;
	unsigned int n = 0;
	const EVP_MD *md = sl_tpm2_md(alg);

	SL_ENSURE(md != NULL, SL_E_ATTEST_FORMAT, "hash algorithm 0x%04x not supported", alg);
	SL_GUARD_OSSL(EVP_Digest(p, len, out, &n, md, NULL) == 1, SL_E_CRYPTO, "digest");
	*out_len = n;
	rc = SL_OK;
out:
	return rc;
}

/* ---- names ----------------------------------------------------------- */

sl_err sl_tpm2_tpmt_name(const TPMT_PUBLIC *pub, uint8_t name[static SL_TPM2_NAME_MAX],
                         size_t *name_len)
{
	sl_err rc = SL_E_INTERNAL;
	uint8_t buf[sizeof(TPMT_PUBLIC)];
	size_t off = 0, dlen = 0;

	SL_GUARD_TSS(Tss2_MU_TPMT_PUBLIC_Marshal(pub, buf, sizeof(buf), &off), SL_E_ATTEST_FORMAT,
	             "marshalling TPMT_PUBLIC");
	SL_ENSURE(sl_tpm2_md(pub->nameAlg) != NULL, SL_E_ATTEST_FORMAT,
	          "public area: nameAlg 0x%04x not supported", pub->nameAlg);
	name[0] = (uint8_t)(pub->nameAlg >> 8);
	name[1] = (uint8_t)pub->nameAlg;
	SL_GUARD(sl_tpm2_digest(pub->nameAlg, buf, off, name + 2, &dlen));
	*name_len = 2 + dlen;
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_tpm2_public_name(const uint8_t *pub, size_t pub_len,
                           uint8_t name[static SL_TPM2_NAME_MAX], size_t *name_len)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	TPM2B_PUBLIC p;

	SL_GUARD(sl_tpm2_mu_public(pub, pub_len, &p, "TPM2B_PUBLIC"));
	SL_GUARD(sl_tpm2_tpmt_name(&p.publicArea, name, name_len));
	rc = SL_OK;
out:
	return rc;
}

/* ---- keys ------------------------------------------------------------ */

static SL_RESULT rsa_pkey(const TPMT_PUBLIC *pub, EVP_PKEY **out)
{
	sl_err rc = SL_E_CRYPTO;
	OSSL_PARAM_BLD *bld = NULL;
	OSSL_PARAM *params = NULL;
	EVP_PKEY_CTX *ctx = NULL;
	BIGNUM *n = NULL, *e = NULL;
	const TPM2B_PUBLIC_KEY_RSA *u = &pub->unique.rsa;
	uint32_t exp =
	    pub->parameters.rsaDetail.exponent ? pub->parameters.rsaDetail.exponent : 65537;

	SL_ENSURE(u->size > 0 && u->size * 8u == pub->parameters.rsaDetail.keyBits,
	          SL_E_ATTEST_FORMAT, "public area: RSA modulus is %u bytes, keyBits %u", u->size,
	          pub->parameters.rsaDetail.keyBits);
	n = BN_bin2bn(u->buffer, u->size, NULL);
	e = BN_new();
	SL_GUARD_OSSL(n != NULL && e != NULL && BN_set_word(e, exp) == 1, SL_E_CRYPTO, "RSA key");
	bld = OSSL_PARAM_BLD_new();
	SL_GUARD_OSSL(bld != NULL && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) == 1 &&
	                  OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e) == 1,
	              SL_E_CRYPTO, "RSA key parameters");
	params = OSSL_PARAM_BLD_to_param(bld);
	ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
	SL_GUARD_OSSL(params != NULL && ctx != NULL && EVP_PKEY_fromdata_init(ctx) == 1 &&
	                  EVP_PKEY_fromdata(ctx, out, EVP_PKEY_PUBLIC_KEY, params) == 1,
	              SL_E_ATTEST_FORMAT, "public area: RSA key rejected");
	rc = SL_OK;
out:
	EVP_PKEY_CTX_free(ctx);
	OSSL_PARAM_free(params);
	OSSL_PARAM_BLD_free(bld);
	BN_free(n);
	BN_free(e);
	return rc;
}

static SL_RESULT ecc_pkey(const TPMT_PUBLIC *pub, EVP_PKEY **out)
{
	sl_err rc = SL_E_CRYPTO;
	OSSL_PARAM_BLD *bld = NULL;
	OSSL_PARAM *params = NULL;
	EVP_PKEY_CTX *ctx = NULL;
	const char *group;
	size_t fl;
	uint8_t point[1 + 2 * 66];
	const TPMS_ECC_POINT *u = &pub->unique.ecc;

	switch (pub->parameters.eccDetail.curveID) {
	case TPM2_ECC_NIST_P256:
		group = "P-256", fl = 32;
		break;
	case TPM2_ECC_NIST_P384:
		group = "P-384", fl = 48;
		break;
	case TPM2_ECC_NIST_P521:
		group = "P-521", fl = 66;
		break;
	default:
		SL_FAIL(SL_E_ATTEST_FORMAT, "public area: ECC curve 0x%04x not supported",
		        pub->parameters.eccDetail.curveID);
	}
	SL_ENSURE(u->x.size > 0 && u->x.size <= fl && u->y.size > 0 && u->y.size <= fl,
	          SL_E_ATTEST_FORMAT, "public area: ECC point coordinates of %u/%u bytes",
	          u->x.size, u->y.size);
	memset(point, 0, sizeof(point));
	point[0] = 0x04;
	memcpy(point + 1 + fl - u->x.size, u->x.buffer, u->x.size);
	memcpy(point + 1 + 2 * fl - u->y.size, u->y.buffer, u->y.size);
	bld = OSSL_PARAM_BLD_new();
	SL_GUARD_OSSL(
	    bld != NULL &&
	        OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, group, 0) == 1 &&
	        OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, 1 + 2 * fl) ==
	            1,
	    SL_E_CRYPTO, "EC key parameters");
	params = OSSL_PARAM_BLD_to_param(bld);
	ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
	SL_GUARD_OSSL(params != NULL && ctx != NULL && EVP_PKEY_fromdata_init(ctx) == 1 &&
	                  EVP_PKEY_fromdata(ctx, out, EVP_PKEY_PUBLIC_KEY, params) == 1,
	              SL_E_ATTEST_FORMAT, "public area: ECC point rejected (not on the curve?)");
	rc = SL_OK;
out:
	EVP_PKEY_CTX_free(ctx);
	OSSL_PARAM_free(params);
	OSSL_PARAM_BLD_free(bld);
	return rc;
}

/* Keys already built, by the digest of what they were built from: a
 * verifier sees the same few AKs over and over (seclaunchd, one per
 * release), and building an OpenSSL key costs about as much as checking
 * the signature with it. A hit needs the same type, parameters and public
 * value, so it is the key that would have been built. */
#define PKEY_CACHE 32
static struct {
	uint8_t id[SL_SHA256_LEN];
	EVP_PKEY *key;
} g_pkeys[PKEY_CACHE];
static size_t g_pkey_next;
static pthread_mutex_t g_pkey_mu = PTHREAD_MUTEX_INITIALIZER;

/* What a key is built from: type, parameters and public value, each field
 * at a fixed place (no padding or unused union bytes). */
static bool pkey_id(const TPMT_PUBLIC *pub, uint8_t id[static SL_SHA256_LEN])
{
	uint8_t buf[16 + sizeof(pub->unique)];
	size_t n = 0;
	memcpy(buf, &pub->type, sizeof(pub->type));
	n += sizeof(pub->type);
	if (pub->type == TPM2_ALG_RSA) {
		const TPM2B_PUBLIC_KEY_RSA *u = &pub->unique.rsa;
		if (u->size > sizeof(u->buffer))
			return false;
		memcpy(buf + n, &pub->parameters.rsaDetail.keyBits, 2);
		memcpy(buf + n + 2, &pub->parameters.rsaDetail.exponent, 4);
		memcpy(buf + n + 6, &u->size, 2);
		memcpy(buf + n + 8, u->buffer, u->size);
		n += 8 + u->size;
	} else if (pub->type == TPM2_ALG_ECC) {
		const TPMS_ECC_POINT *u = &pub->unique.ecc;
		if (u->x.size > sizeof(u->x.buffer) || u->y.size > sizeof(u->y.buffer))
			return false;
		memcpy(buf + n, &pub->parameters.eccDetail.curveID, 2);
		memcpy(buf + n + 2, &u->x.size, 2);
		memcpy(buf + n + 4, u->x.buffer, u->x.size);
		n += 4 + u->x.size;
		memcpy(buf + n, &u->y.size, 2);
		memcpy(buf + n + 2, u->y.buffer, u->y.size);
		n += 2 + u->y.size;
	} else {
		return false;
	}
	sl_sha256(buf, n, id);
	return true;
}

sl_err sl_tpm2_public_pkey(const TPMT_PUBLIC *pub, EVP_PKEY **out)
{
	uint8_t id[SL_SHA256_LEN];
	bool cacheable = pkey_id(pub, id);
	sl_err rc;
	*out = NULL;
	if (cacheable) {
		pthread_mutex_lock(&g_pkey_mu);
		for (size_t i = 0; i < PKEY_CACHE && *out == NULL; i++)
			if (g_pkeys[i].key != NULL && memcmp(g_pkeys[i].id, id, sizeof(id)) == 0 &&
			    EVP_PKEY_up_ref(g_pkeys[i].key) == 1)
				*out = g_pkeys[i].key;
		pthread_mutex_unlock(&g_pkey_mu);
		if (*out != NULL)
			return SL_OK;
	}
	if (pub->type == TPM2_ALG_RSA)
		rc = rsa_pkey(pub, out);
	else if (pub->type == TPM2_ALG_ECC)
		rc = ecc_pkey(pub, out);
	else
		return sl_err_set(SL_E_ATTEST_FORMAT,
		                  "public area: key type 0x%04x is not RSA or ECC", pub->type);
	if (rc == SL_OK && cacheable && EVP_PKEY_up_ref(*out) == 1) {
		pthread_mutex_lock(&g_pkey_mu);
		size_t i = g_pkey_next++ % PKEY_CACHE;
		EVP_PKEY_free(g_pkeys[i].key);
		memcpy(g_pkeys[i].id, id, sizeof(id));
		g_pkeys[i].key = *out;
		pthread_mutex_unlock(&g_pkey_mu);
	}
	return rc;
}

sl_err sl_tpm2_public_to_pem(const uint8_t *pub, size_t pub_len, char **pem)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	TPM2B_PUBLIC p;
	EVP_PKEY *key = NULL;
	BIO *bio = NULL;
	char *data;
	long n;

	*pem = NULL;
	SL_GUARD(sl_tpm2_mu_public(pub, pub_len, &p, "TPM2B_PUBLIC"));
	SL_GUARD(sl_tpm2_public_pkey(&p.publicArea, &key));
	bio = BIO_new(BIO_s_mem());
	SL_GUARD_OSSL(bio != NULL && PEM_write_bio_PUBKEY(bio, key) == 1, SL_E_CRYPTO, "PEM");
	n = BIO_get_mem_data(bio, &data);
	*pem = calloc(1, (size_t)n + 1);
	SL_ENSURE(*pem != NULL, SL_E_NOMEM, "PEM");
	memcpy(*pem, data, (size_t)n);
	rc = SL_OK;
out:
	BIO_free(bio);
	EVP_PKEY_free(key);
	return rc;
}

/* ---- the AK's attributes --------------------------------------------- */

sl_err sl_tpm2_ak_check_tpmt(const TPMT_PUBLIC *pub)
{
	sl_err rc = SL_E_ATTEST_UNTRUSTED;
	static const struct {
		TPMA_OBJECT bit;
		const char *name;
	} need[] = {
	    {TPMA_OBJECT_FIXEDTPM, "fixedTPM"},
	    {TPMA_OBJECT_FIXEDPARENT, "fixedParent"},
	    {TPMA_OBJECT_SENSITIVEDATAORIGIN, "sensitiveDataOrigin"},
	    {TPMA_OBJECT_RESTRICTED, "restricted"},
	    {TPMA_OBJECT_SIGN_ENCRYPT, "sign"},
	};

	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		SL_ENSURE(pub->objectAttributes & need[i].bit, SL_E_ATTEST_UNTRUSTED,
		          "AK attributes: %s is not set (not a restricted signing key)",
		          need[i].name);
	}
	SL_ENSURE(!(pub->objectAttributes & TPMA_OBJECT_DECRYPT), SL_E_ATTEST_UNTRUSTED,
	          "AK attributes: decrypt is set (not a restricted signing key)");
	if (pub->type == TPM2_ALG_RSA) {
		SL_ENSURE(pub->parameters.rsaDetail.keyBits >= 2048, SL_E_ATTEST_UNTRUSTED,
		          "AK: RSA key of %u bits", pub->parameters.rsaDetail.keyBits);
	} else if (pub->type == TPM2_ALG_ECC) {
		TPMI_ECC_CURVE c = pub->parameters.eccDetail.curveID;
		SL_ENSURE(c == TPM2_ECC_NIST_P256 || c == TPM2_ECC_NIST_P384 ||
		              c == TPM2_ECC_NIST_P521,
		          SL_E_ATTEST_UNTRUSTED, "AK: ECC curve 0x%04x not accepted", c);
	} else {
		SL_FAIL(SL_E_ATTEST_UNTRUSTED, "AK: key type 0x%04x is not RSA or ECC", pub->type);
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_tpm2_ak_check(const uint8_t *pub, size_t pub_len)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	TPM2B_PUBLIC p;

	SL_GUARD(sl_tpm2_mu_public(pub, pub_len, &p, "AK public"));
	SL_GUARD(sl_tpm2_ak_check_tpmt(&p.publicArea));
	rc = SL_OK;
out:
	return rc;
}

/* ---- signatures ------------------------------------------------------ */

static SL_RESULT ecdsa_der(const TPMS_SIGNATURE_ECC *e, uint8_t **der, int *len)
{
	sl_err rc = SL_E_CRYPTO;
	ECDSA_SIG *s = ECDSA_SIG_new();
	BIGNUM *r = BN_bin2bn(e->signatureR.buffer, e->signatureR.size, NULL);
	BIGNUM *sv = BN_bin2bn(e->signatureS.buffer, e->signatureS.size, NULL);

	*der = NULL;
	SL_GUARD_OSSL(s != NULL && r != NULL && sv != NULL && ECDSA_SIG_set0(s, r, sv) == 1,
	              SL_E_CRYPTO, "ECDSA signature");
	r = sv = NULL;
	*len = i2d_ECDSA_SIG(s, der);
	SL_GUARD_OSSL(*len > 0, SL_E_CRYPTO, "ECDSA signature encoding");
	rc = SL_OK;
out:
	BN_free(r);
	BN_free(sv);
	ECDSA_SIG_free(s);
	return rc;
}

sl_err sl_tpm2_sig_verify(EVP_PKEY *key, const TPMT_SIGNATURE *sig, const uint8_t *msg, size_t len)
{
	sl_err rc = SL_E_ATTEST_SIG;
	EVP_MD_CTX *mctx = EVP_MD_CTX_new();
	EVP_PKEY_CTX *pctx = NULL;
	const EVP_MD *md;
	const uint8_t *s;
	uint8_t *der = NULL;
	size_t slen;
	int dlen = 0, is_rsa = EVP_PKEY_is_a(key, "RSA");

	SL_ENSURE(mctx != NULL, SL_E_NOMEM, "signature check");
	switch (sig->sigAlg) {
	case TPM2_ALG_RSASSA:
	case TPM2_ALG_RSAPSS:
		SL_ENSURE(is_rsa, SL_E_ATTEST_SIG,
		          "signature: RSA signature but the AK is not RSA");
		md = sl_tpm2_md(sig->signature.rsassa.hash);
		s = sig->signature.rsassa.sig.buffer;
		slen = sig->signature.rsassa.sig.size;
		break;
	case TPM2_ALG_ECDSA:
		SL_ENSURE(!is_rsa, SL_E_ATTEST_SIG, "signature: ECDSA signature but the AK is RSA");
		md = sl_tpm2_md(sig->signature.ecdsa.hash);
		SL_GUARD(ecdsa_der(&sig->signature.ecdsa, &der, &dlen));
		s = der;
		slen = (size_t)dlen;
		break;
	default:
		SL_FAIL(SL_E_ATTEST_SIG, "signature: scheme 0x%04x not supported", sig->sigAlg);
	}
	SL_ENSURE(md != NULL && md != EVP_sha1(), SL_E_ATTEST_SIG,
	          "signature: hash algorithm not accepted (SHA-256/384/512 only)");
	SL_GUARD_OSSL(EVP_DigestVerifyInit(mctx, &pctx, md, NULL, key) == 1, SL_E_CRYPTO,
	              "signature check");
	if (sig->sigAlg == TPM2_ALG_RSAPSS) {
		SL_GUARD_OSSL(EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1 &&
		                  EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_AUTO) == 1,
		              SL_E_CRYPTO, "RSA-PSS parameters");
	}
	if (EVP_DigestVerify(mctx, s, slen, msg, len) != 1) {
		ERR_clear_error();
		SL_FAIL(SL_E_ATTEST_SIG, "signature: does not verify with the AK");
	}
	rc = SL_OK;
out:
	OPENSSL_free(der);
	EVP_MD_CTX_free(mctx);
	return rc;
}
