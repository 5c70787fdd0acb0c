/* Fuzz target: the AWS Nitro Enclaves attestation document parser (CBOR
 * bounds pass, libcbor, COSE_Sign1, payload fields) and the verifier at the
 * document's own time (chain and signature on whatever parses), and the
 * binary / hex / base64 import decoder in front of it. */
#include <stdint.h>
#include <stdlib.h>

#include "../../attest/import_format.h"
#include "../../attest/nitro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const uint8_t *p, size_t n)
{
	sl_nitro_doc d;
	if (sl_nitro_doc_parse(p, n, &d) != SL_OK)
		return;
	time_t at = (time_t)(d.timestamp_ms / 1000);
	sl_nitro_doc_free(&d);
	sl_claims *c = NULL;
	if (sl_claims_new(&c) != SL_OK)
		return;
	sl_verify_opts o = {.no_binding = true, .at = at}; /* on to the claims */
	(void)sl_nitro_verify_doc(p, n, sl_nitro_root_sha256, &o, c);
	sl_claims_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *bin = NULL;
	size_t blen = 0;
	const char *fmt = NULL;
	one(data, size);
	if (sl_import_decode(data, size, SL_NITRO_DOC_MAX, &bin, &blen, &fmt, "fuzz") == SL_OK) {
		if (bin != NULL && (blen != size || fmt[0] != 'b' || fmt[1] != 'i'))
			one(bin, blen);
		free(bin);
	}
	return 0;
}
