/* Fuzz target: a TPM2B_PUBLIC through the strict unmarshaller, the name, the
 * AK attribute check, the OpenSSL key built from it, and MakeCredential
 * (which takes it as an EK). */
#include <stdint.h>
#include <stdlib.h>

#include "../../attest/tpm2_int.h"
#include "seclaunch/secret.h"

/* libsodium for secret buffers; TSS2 MU's error log would drown the output. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	setenv("TSS2_LOG", "all+none", 1);
	return sl_crypto_init() == SL_OK ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t name[SL_TPM2_NAME_MAX], *blob = NULL, *sec = NULL;
	static const uint8_t ak_name[34] = {0x00, 0x0b};
	static const uint8_t cred[16] = {1};
	size_t nl, bl, sl;
	char *pem = NULL;

	(void)sl_tpm2_public_name(data, size, name, &nl);
	(void)sl_tpm2_ak_check(data, size);
	if (sl_tpm2_public_to_pem(data, size, &pem) == SL_OK)
		free(pem);
	if (sl_tpm2_make_credential(data, size, ak_name, sizeof(ak_name), cred, sizeof(cred), &blob,
	                            &bl, &sec, &sl) == SL_OK) {
		free(blob);
		free(sec);
	}
	sl_err_clear();
	return 0;
}
