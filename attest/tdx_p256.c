/* ECDSA P-256 / SHA-256 signatures given as r || s (the TDX quote, its QE
 * report and Intel's PCS collateral sign this way): the one verifier that
 * tdx_verify.c and tdx_pcs.c share, so neither calls back into the other. */
#include <openssl/evp.h>
#include <openssl/err.h>
#include <string.h>

#include "tdx_quote.h"
#include "seclaunch/util.h"

/* One INTEGER of r || s in DER (minimal, non-negative) at out; its length. */
static size_t der_int(const uint8_t v[static 32], uint8_t *out)
{
	size_t i = 0, o = 0;
	while (i < 31 && v[i] == 0)
		i++;
	size_t n = 32 - i + (v[i] >= 0x80);
	out[o++] = 0x02;
	out[o++] = (uint8_t)n;
	if (v[i] >= 0x80)
		out[o++] = 0x00;
	memcpy(out + o, v + i, 32 - i);
	return o + 32 - i;
}

/* The signature as the DER ECDSA-Sig-Value that OpenSSL verifies (at most
 * 2 + 2 x 35 bytes: every length fits in one byte). OpenSSL encodes what it
 * decoded again and refuses a signature whose bytes differ, so a mistake
 * here could only refuse a good signature, never pass a bad one. */
static size_t sig_der(const uint8_t sig[static 64], uint8_t out[static 72])
{
	size_t n = der_int(sig, out + 2);
	n += der_int(sig + 32, out + 2 + n);
	out[0] = 0x30;
	out[1] = (uint8_t)n;
	return n + 2;
}

sl_err sl_p256_verify(EVP_PKEY *key, const uint8_t sig[static 64], const uint8_t *msg, size_t len,
                      const char *what)
{
	sl_err rc = SL_E_ATTEST_SIG;
	uint8_t der[72], digest[32];
	EVP_PKEY_CTX *ctx = NULL;
	char curve[32] = "";
	size_t clen = 0;

	SL_ENSURE(EVP_PKEY_is_a(key, "EC") &&
	              EVP_PKEY_get_utf8_string_param(key, "group", curve, sizeof(curve), &clen) ==
	                  1 &&
	              strcmp(curve, "prime256v1") == 0,
	          SL_E_ATTEST_CHAIN, "%s: key is not ECDSA P-256", what);
	size_t dl = sig_der(sig, der);
	/* the digest here and a bare verify: EVP_DigestVerifyInit fetches two
	 * implementations from the provider each time, which cost about a
	 * tenth of the verification itself */
	sl_sha256(msg, len, digest);
	ctx = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
	SL_GUARD_OSSL(ctx != NULL, SL_E_NOMEM, "%s", what);
	SL_GUARD_OSSL(EVP_PKEY_verify_init(ctx) == 1, SL_E_CRYPTO, "%s", what);
	if (EVP_PKEY_verify(ctx, der, dl, digest, sizeof(digest)) != 1) {
		ERR_clear_error();
		SL_FAIL(SL_E_ATTEST_SIG, "%s does not verify", what);
	}
	rc = SL_OK;
out:
	EVP_PKEY_CTX_free(ctx);
	return rc;
}
