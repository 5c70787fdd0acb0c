/* Fuzz target: the TCG crypto-agile event log parser and its replay against
 * a fixed set of quoted PCRs (SHA-1 and SHA-256 banks, PCRs 0-9). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
	static sl_tpm2_pcrs pcrs;
	sl_claims *c = NULL;

	(void)sl_tpm2_eventlog_parse(data, size);
	if (pcrs.nbanks == 0) {
		pcrs.nbanks = 2;
		pcrs.alg[0] = TPM2_ALG_SHA1;
		pcrs.alg[1] = TPM2_ALG_SHA256;
		pcrs.set[0] = pcrs.set[1] = 0x3ff;
	}
	if (sl_claims_new(&c) == SL_OK)
		(void)sl_tpm2_eventlog_check(data, size, &pcrs, c);
	sl_claims_free(c);
	sl_err_clear();
	return 0;
}
