/* Fuzz target: the TDX quote parser (v4/v5, signature data, QE
 * certification data, PCK chain) and the whole verifier at a fixed time,
 * without collateral; and the CCEL event log replay. */
#include <stdint.h>

#include "../../attest/tdx_quote.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t rtmr[4][48];
	size_t events = 0;
	(void)sl_tdx_ccel_replay(data, size, rtmr, &events); /* the input as a CCEL log */
	sl_tdx_quote q;
	if (sl_tdx_quote_parse(data, size, &q) != SL_OK)
		return 0;
	sl_claims *c = NULL;
	if (sl_claims_new(&c) != SL_OK)
		return 0;
	sl_verify_opts o = {.no_binding = true, .at = 1771113600};
	(void)sl_tdx_verify_quote(data, size, &o, true, c);
	sl_claims_free(c);
	return 0;
}
