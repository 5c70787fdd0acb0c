/* The KMS sealed box (include/seclaunch/sealbox.h) over libsodium. */
#include <sodium.h>

#include "seclaunch/sealbox.h"
#include "seclaunch/util.h"

_Static_assert(SL_SEALBOX_OVERHEAD == crypto_box_SEALBYTES, "sealed box overhead");
_Static_assert(SL_SEALBOX_PUB_LEN == crypto_box_PUBLICKEYBYTES, "X25519 public key size");
_Static_assert(SL_SEALBOX_SK_LEN == crypto_box_SECRETKEYBYTES, "X25519 secret key size");

sl_err sl_sealbox_keypair(uint8_t pub[static SL_SEALBOX_PUB_LEN], sl_secret **sk)
{
	sl_err rc = SL_E_NOMEM;
	sl_secret *s = NULL;
	SL_GUARD(sl_secret_new(SL_SEALBOX_SK_LEN, &s));
	SL_GUARD_SODIUM(crypto_box_keypair(pub, sl_secret_data(s)), SL_E_CRYPTO,
	                "ephemeral X25519 key pair");
	*sk = s;
	s = NULL;
	rc = SL_OK;
out:
	sl_secret_free(s);
	return rc;
}

sl_err sl_sealbox_seal(const uint8_t *msg, size_t len, const uint8_t pub[static SL_SEALBOX_PUB_LEN],
                       uint8_t *out)
{
	sl_err rc = SL_E_CRYPTO;
	SL_GUARD_SODIUM(crypto_box_seal(out, msg, len, pub), SL_E_CRYPTO,
	                "sealing to the ephemeral public key");
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_sealbox_open(const uint8_t *sealed, size_t len, sl_secret *sk, uint8_t *out)
{
	sl_err rc = SL_E_INTEGRITY;
	uint8_t pk[SL_SEALBOX_PUB_LEN];
	SL_ENSURE(len >= SL_SEALBOX_OVERHEAD && sl_secret_len(sk) == SL_SEALBOX_SK_LEN, SL_E_INPUT,
	          "sealed box: %zu bytes, want at least %d", len, SL_SEALBOX_OVERHEAD);
	SL_GUARD_SODIUM(crypto_scalarmult_base(pk, sl_secret_data(sk)), SL_E_CRYPTO,
	                "sealed box: public key");
	if (crypto_box_seal_open(out, sealed, len, pk, sl_secret_data(sk)) != 0) {
		sl_wipe(out, len - SL_SEALBOX_OVERHEAD);
		SL_FAIL(SL_E_INTEGRITY, "sealed box does not open with this key");
	}
	rc = SL_OK;
out:
	sl_wipe(pk, sizeof(pk));
	return rc;
}
