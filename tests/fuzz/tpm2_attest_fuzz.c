/* Fuzz target: TPMS_ATTEST bytes through the strict unmarshaller, and as the
 * signed body of a quote verified against a fixed GCE-shaped evidence object
 * (so the header, binding and PCR digest checks all see hostile input). */
#include <stdint.h>
#include <stdlib.h>

#include "../../attest/tpm2_int.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

/* The GCE vTPM AK (TPM2B_PUBLIC), so verification gets past the AK checks. */
static const char gce_ak[] =
    "ARgAAQALAAUAcgAAABAAFAALCAAAAAAAAQDLrW8InGmCJEMfSgiGm1a7aZZdVUlZ/mAPrisxjenBdE0Y"
    "Ei1FVRu/OAgICaJ0BF18HjT5InizWQNCAxgwjOmISKS2TzmN6Dj7e2fYGPVutiZYAuQqChsjpK3uGwJe"
    "dPa9GuNinfYSPv+U6yCKiUXJNTnhE5NiaBLU9fcZi3qhaKIV2Ihhhozvna1o+b9Z4XFZcDzbocSQzXKX"
    "NEieXwXQ55rr70NlPgJdVvJvEsZ1VkUNihDKz1KayfGmxx9NM7NZ+lR3AFdj4A2z0QqKeD4BVTS6AkFe"
    "XEkERGkRp+e7nYAVPwFqQtczsR9cAiD9OTJEBdjDo12ZsSQOh01Y5j1n";

/* libsodium for secret buffers; TSS2 MU's error log would drown the output. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	setenv("TSS2_LOG", "all+none", 1);
	return sl_crypto_init() == SL_OK ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	TPMS_ATTEST a;
	char *b64 = NULL;
	sl_claims *c = NULL;
	static const uint8_t nonce[2] = {0x90, 0x09};
	sl_verify_opts o = {.expect = nonce, .expect_len = sizeof(nonce)};

	(void)sl_tpm2_mu_attest(data, size, &a);
	if (size > SL_TPM2_BLOB_MAX || sl_b64_encode(data, size, &b64) != SL_OK)
		return 0;
	json_t *ev =
	    json_pack("{s:s, s:s, s:s, s:s, s:{s:{s:s}}}", "kind", "tpm2", "tpms_attest", b64,
	              "signature", "ABQACwAA", "ak_public", gce_ak, "pcrs", "sha256", "0", "00");
	if (ev != NULL && sl_claims_new(&c) == SL_OK)
		(void)sl_tpm2_verify_evidence(ev, &o, c);
	sl_claims_free(c);
	json_decref(ev);
	free(b64);
	sl_err_clear();
	return 0;
}
