/* Fuzz target: an evidence JSON document through the kind dispatch and the
 * verifier it names (base64 fields, PCR maps, certificates, event log). */
#include <stdint.h>
#include <stdlib.h>

#include "seclaunch/attest.h"
#include "seclaunch/secret.h"

static bool enrolled(const uint8_t *name, size_t len, void *ctx)
{
	(void)name, (void)len, (void)ctx;
	return true;
}

/* libsodium for secret buffers; TSS2 MU's error log would drown the output. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	setenv("TSS2_LOG", "all+none", 1);
	return sl_crypto_init() == SL_OK ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t jerr;
	json_t *ev = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
	sl_claims *c = NULL;
	sl_verify_opts o = {.no_binding = true, .ak_enrolled = enrolled};

	if (ev != NULL && sl_claims_new(&c) == SL_OK)
		(void)sl_evidence_verify(ev, &o, c);
	sl_claims_free(c);
	json_decref(ev);
	sl_err_clear();
	return 0;
}
