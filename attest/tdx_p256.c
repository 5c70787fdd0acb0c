/* ECDSA P-256 / SHA-256 signatures given as r || s (the TDX quote, its QE
 * report and Intel's PCS collateral sign this way): the one verifier that
 * tdx_verify.c and tdx_pcs.c share, so neither calls back into the other. */
#include <openssl/ec.h>
#include <openssl/err.h>
#include <string.h>

#include "tdx_quote.h"
#include "seclaunch/util.h"

sl_err sl_p256_verify(EVP_PKEY *key, const uint8_t sig[static 64], const uint8_t *msg, size_t len,
                      const char *what)
{
	sl_err rc = SL_E_ATTEST_SIG;
	ECDSA_SIG *s = ECDSA_SIG_new();
	BIGNUM *r = BN_bin2bn(sig, 32, NULL), *ss = BN_bin2bn(sig + 32, 32, NULL);
	unsigned char *der = NULL;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	char curve[32] = "";
	size_t clen = 0;

	SL_GUARD_OSSL(s != NULL && r != NULL && ss != NULL && md != NULL, SL_E_NOMEM, "%s", what);
	SL_ENSURE(EVP_PKEY_is_a(key, "EC") &&
	              EVP_PKEY_get_utf8_string_param(key, "group", curve, sizeof(curve), &clen) ==
	                  1 &&
	              strcmp(curve, "prime256v1") == 0,
	          SL_E_ATTEST_CHAIN, "%s: key is not ECDSA P-256", what);
	SL_GUARD_OSSL(ECDSA_SIG_set0(s, r, ss) == 1, SL_E_CRYPTO, "%s", what);
	r = ss = NULL;
	int dl = i2d_ECDSA_SIG(s, &der);
	SL_GUARD_OSSL(dl > 0, SL_E_CRYPTO, "%s", what);
	SL_GUARD_OSSL(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1, SL_E_CRYPTO,
	              "%s", what);
	if (EVP_DigestVerify(md, der, (size_t)dl, msg, len) != 1) {
		ERR_clear_error();
		SL_FAIL(SL_E_ATTEST_SIG, "%s does not verify", what);
	}
	rc = SL_OK;
out:
	BN_free(r);
	BN_free(ss);
	ECDSA_SIG_free(s);
	OPENSSL_free(der);
	EVP_MD_CTX_free(md);
	return rc;
}
