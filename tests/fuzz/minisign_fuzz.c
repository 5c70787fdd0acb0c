/* Fuzz target: minisign signature, public key and (unencrypted) secret key
 * files through their parsers; a parsed signature is also verified. */
#include <stdint.h>
#include <stdlib.h>

#include "seclaunch/minisign.h"
#include "seclaunch/secret.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* secret keys live in sodium guarded memory */
	if (sl_crypto_init() != SL_OK)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sl_minisign_sig *s = NULL;
	sl_minisign_pubkey pk = {{0}, {0}};
	sl_minisign_seckey *sk = NULL;
	if (sl_minisign_sig_parse(data, size, &s) == SL_OK) {
		uint8_t id[SL_MINISIGN_KEYID_LEN];
		sl_minisign_sig_key_id(s, id);
		for (int i = 0; i < SL_MINISIGN_KEYID_LEN; i++)
			pk.key_id[i] = id[i];
		(void)sl_minisign_verify(&pk, s, data, size);
		sl_minisign_sig_free(s);
	}
	(void)sl_minisign_pubkey_parse(data, size, &pk);
	/* no password: encrypted keys stop before the (deliberately slow) KDF */
	if (sl_minisign_seckey_parse(data, size, NULL, &sk) == SL_OK)
		sl_minisign_seckey_free(sk);
	return 0;
}
