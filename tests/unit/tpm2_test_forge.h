/* Software-made TPM quotes for tpm2_test.c: an OpenSSL key dressed as an AK
 * (a TPMT_PUBLIC with chosen attributes), a TPMS_ATTEST built field by field
 * and signed with any scheme. A test can sign a structure that is wrong in
 * exactly one field, so the check for that field, not the signature, has to
 * catch it. */
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <tss2/tss2_mu.h>

#include "../../attest/tpm2_int.h"
#include "seclaunch/util.h"

typedef struct forge {
	EVP_PKEY *key;
	TPM2B_PUBLIC pub;
	TPMS_ATTEST att;
	TPMI_ALG_SIG_SCHEME scheme;
	TPMI_ALG_HASH hash;
	uint8_t pcr[24][32]; /* sha256 bank */
	uint32_t sel;
} forge;

static void bn_to(EVP_PKEY *k, const char *name, uint8_t *out, size_t len)
{
	BIGNUM *bn = NULL;
	assert_int_equal(EVP_PKEY_get_bn_param(k, name, &bn), 1);
	assert_int_equal(BN_bn2binpad(bn, out, (int)len), (int)len);
	BN_free(bn);
}

/* kind: "rsa", "p256", "p384". */
static void forge_init(forge *f, const char *kind, TPMI_ALG_SIG_SCHEME scheme, TPMI_ALG_HASH hash)
{
	TPMT_PUBLIC *p = &f->pub.publicArea;
	uint8_t name[SL_TPM2_NAME_MAX];
	size_t name_len;

	memset(f, 0, sizeof(*f));
	f->scheme = scheme;
	f->hash = hash;
	p->nameAlg = TPM2_ALG_SHA256;
	p->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
	                      TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH |
	                      TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_SIGN_ENCRYPT;
	if (strcmp(kind, "rsa") == 0) {
		f->key = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
		assert_non_null(f->key);
		p->type = TPM2_ALG_RSA;
		p->parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_NULL;
		p->parameters.rsaDetail.scheme.scheme = scheme;
		p->parameters.rsaDetail.scheme.details.anySig.hashAlg = hash;
		p->parameters.rsaDetail.keyBits = 2048;
		p->unique.rsa.size = 256;
		bn_to(f->key, OSSL_PKEY_PARAM_RSA_N, p->unique.rsa.buffer, 256);
	} else {
		size_t fl = strcmp(kind, "p256") == 0 ? 32 : 48;
		f->key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", fl == 32 ? "P-256" : "P-384");
		assert_non_null(f->key);
		p->type = TPM2_ALG_ECC;
		p->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
		p->parameters.eccDetail.scheme.scheme = scheme;
		p->parameters.eccDetail.scheme.details.anySig.hashAlg = hash;
		p->parameters.eccDetail.curveID =
		    fl == 32 ? TPM2_ECC_NIST_P256 : TPM2_ECC_NIST_P384;
		p->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
		p->unique.ecc.x.size = p->unique.ecc.y.size = (UINT16)fl;
		bn_to(f->key, OSSL_PKEY_PARAM_EC_PUB_X, p->unique.ecc.x.buffer, fl);
		bn_to(f->key, OSSL_PKEY_PARAM_EC_PUB_Y, p->unique.ecc.y.buffer, fl);
	}
	f->att.magic = TPM2_GENERATED_VALUE;
	f->att.type = TPM2_ST_ATTEST_QUOTE;
	assert_int_equal(sl_tpm2_tpmt_name(p, name, &name_len), SL_OK);
	f->att.qualifiedSigner.size = (UINT16)name_len;
	memcpy(f->att.qualifiedSigner.name, name, name_len);
	f->att.clockInfo.clock = 123456;
	f->att.clockInfo.resetCount = 3;
	f->att.clockInfo.restartCount = 1;
	f->att.clockInfo.safe = 1;
	f->att.firmwareVersion = 0x2019102300163636ull;
	f->sel = 0x83; /* PCRs 0, 1, 7 */
	for (unsigned i = 0; i < 24; i++)
		memset(f->pcr[i], (int)(0x10 + i), 32);
}

static void forge_set_nonce(forge *f, const void *n, size_t len)
{
	f->att.extraData.size = (UINT16)len;
	memcpy(f->att.extraData.buffer, n, len);
}

/* Fills the quote info from f->sel / f->pcr (pcrDigest with the signing hash). */
static void forge_quote_info(forge *f)
{
	TPMS_QUOTE_INFO *q = &f->att.attested.quote;
	uint8_t buf[24 * 32];
	size_t n = 0, dl = 0;

	q->pcrSelect.count = 1;
	q->pcrSelect.pcrSelections[0].hash = TPM2_ALG_SHA256;
	q->pcrSelect.pcrSelections[0].sizeofSelect = 3;
	for (unsigned i = 0; i < 24; i++) {
		if (!(f->sel & (1u << i)))
			continue;
		q->pcrSelect.pcrSelections[0].pcrSelect[i / 8] |= (uint8_t)(1u << (i % 8));
		memcpy(buf + n, f->pcr[i], 32);
		n += 32;
	}
	assert_int_equal(sl_tpm2_digest(f->hash, buf, n, q->pcrDigest.buffer, &dl), SL_OK);
	q->pcrDigest.size = (UINT16)dl;
}

static char *b64s(const uint8_t *p, size_t n)
{
	char *s = NULL;
	assert_int_equal(sl_b64_encode(p, n, &s), SL_OK);
	return s;
}

static void put(json_t *o, const char *k, const uint8_t *p, size_t n)
{
	char *s = b64s(p, n);
	json_object_set_new(o, k, json_string(s));
	free(s);
}

/* Marshals f->att as it stands (call forge_quote_info first unless a test
 * wants an inconsistent digest), signs it, and returns the evidence. */
static json_t *forge_evidence(forge *f)
{
	uint8_t att[sizeof(TPMS_ATTEST)], sigb[sizeof(TPMT_SIGNATURE)], pubb[sizeof(TPM2B_PUBLIC)];
	size_t alen = 0, slen = 0, plen = 0, dlen = 1024;
	uint8_t der[1024];
	TPMT_SIGNATURE sig = {.sigAlg = f->scheme};
	EVP_MD_CTX *m = EVP_MD_CTX_new();
	EVP_PKEY_CTX *pc = NULL;
	json_t *ev = json_object(), *bank = json_object();
	char k[4], hex[65];

	assert_int_equal(Tss2_MU_TPMS_ATTEST_Marshal(&f->att, att, sizeof(att), &alen), 0);
	assert_int_equal(EVP_DigestSignInit(m, &pc, sl_tpm2_md(f->hash), NULL, f->key), 1);
	if (f->scheme == TPM2_ALG_RSAPSS) {
		assert_int_equal(EVP_PKEY_CTX_set_rsa_padding(pc, RSA_PKCS1_PSS_PADDING), 1);
		assert_int_equal(EVP_PKEY_CTX_set_rsa_pss_saltlen(pc, RSA_PSS_SALTLEN_DIGEST), 1);
	}
	assert_int_equal(EVP_DigestSign(m, der, &dlen, att, alen), 1);
	if (f->scheme == TPM2_ALG_ECDSA) {
		const unsigned char *q = der;
		ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &q, (long)dlen);
		size_t fl = f->pub.publicArea.unique.ecc.x.size;
		assert_non_null(es);
		sig.signature.ecdsa.hash = f->hash;
		sig.signature.ecdsa.signatureR.size = sig.signature.ecdsa.signatureS.size =
		    (UINT16)fl;
		BN_bn2binpad(ECDSA_SIG_get0_r(es), sig.signature.ecdsa.signatureR.buffer, (int)fl);
		BN_bn2binpad(ECDSA_SIG_get0_s(es), sig.signature.ecdsa.signatureS.buffer, (int)fl);
		ECDSA_SIG_free(es);
	} else {
		sig.signature.rsassa.hash = f->hash;
		sig.signature.rsassa.sig.size = (UINT16)dlen;
		memcpy(sig.signature.rsassa.sig.buffer, der, dlen);
	}
	EVP_MD_CTX_free(m);
	assert_int_equal(Tss2_MU_TPMT_SIGNATURE_Marshal(&sig, sigb, sizeof(sigb), &slen), 0);
	assert_int_equal(Tss2_MU_TPM2B_PUBLIC_Marshal(&f->pub, pubb, sizeof(pubb), &plen), 0);
	json_object_set_new(ev, "kind", json_string("tpm2"));
	json_object_set_new(ev, "version", json_integer(1));
	put(ev, "tpms_attest", att, alen);
	put(ev, "signature", sigb, slen);
	put(ev, "ak_public", pubb, plen);
	for (unsigned i = 0; i < 24; i++) {
		if (!(f->sel & (1u << i)))
			continue;
		snprintf(k, sizeof(k), "%u", i);
		sl_hex_encode(f->pcr[i], 32, hex);
		json_object_set_new(bank, k, json_string(hex));
	}
	json_object_set_new(ev, "pcrs", json_pack("{s:o}", "sha256", bank));
	return ev;
}

static void forge_free(forge *f)
{
	EVP_PKEY_free(f->key);
}
