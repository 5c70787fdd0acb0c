/* AES-256-GCM for the local keystore and local KEK wrapping: crypto/'s
 * AEAD (the same primitive SLD uses; a 12-byte IV, the 16-byte tag apart,
 * the plaintext wiped when the tag does not match), so the key service has
 * no AES-GCM of its own. */
#include "keys.h"
#include "seclaunch/crypto.h"

_Static_assert(SL_AEAD_TAG_LEN == 16, "AES-GCM tag");

sl_err kmsd_gcm_seal(const uint8_t key[static 32], const uint8_t iv[static 12], const uint8_t *aad,
                     size_t aad_len, const uint8_t *pt, size_t len, uint8_t *ct,
                     uint8_t tag[static 16])
{
	sl_err rc = SL_E_CRYPTO;
	sl_aead *a = NULL;
	SL_GUARD(sl_aead_new(SL_AEAD_AES_256_GCM, key, &a));
	SL_GUARD(sl_aead_seal(a, iv, aad, aad_len, pt, len, ct, tag));
	rc = SL_OK;
out:
	sl_aead_free(a);
	return rc;
}

sl_err kmsd_gcm_open(const uint8_t key[static 32], const uint8_t iv[static 12], const uint8_t *aad,
                     size_t aad_len, const uint8_t *ct, size_t len, const uint8_t tag[static 16],
                     uint8_t *pt)
{
	sl_err rc = SL_E_CRYPTO;
	sl_aead *a = NULL;
	SL_GUARD(sl_aead_new(SL_AEAD_AES_256_GCM, key, &a));
	rc = sl_aead_open(a, iv, aad, aad_len, ct, len, tag, pt);
	if (rc == SL_E_INTEGRITY)
		rc = sl_err_set(SL_E_INTEGRITY, "authentication tag mismatch");
out:
	sl_aead_free(a);
	return rc;
}
