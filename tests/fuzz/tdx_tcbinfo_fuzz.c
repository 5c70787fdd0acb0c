/* Fuzz target: Intel PCS collateral as read from the collateral directory.
 * The input is one JSON file: the signed-range split (the exact bytes of
 * "tcbInfo" / "enclaveIdentity" that Intel signs, found by jansson), then
 * TCB info evaluation against a platform with the lowest and the highest
 * SVNs, and QE identity evaluation. Invariant: the evaluated object is the
 * one parsed from the signed bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../attest/tdx_quote.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_range(const uint8_t *data, size_t size, const uint8_t *sv, size_t svl,
                        const json_t *body)
{
	/* the signed bytes lie inside the input and parse to the evaluated object */
	if (sv < data || svl > size || (size_t)(sv - data) > size - svl)
		abort();
	json_t *again = json_loadb((const char *)sv, svl, JSON_REJECT_DUPLICATES, NULL);
	if (!json_equal(again, body))
		abort();
	json_decref(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *body = NULL;
	const uint8_t *sv = NULL;
	size_t svl = 0;
	uint8_t sig[64];

	if (sl_tdx_pcs_parse(data, size, "tcbInfo", "fuzz.json", &body, &sv, &svl, sig) == SL_OK) {
		check_range(data, size, sv, svl, body);
		for (int hi = 0; hi < 2; hi++) {
			sl_pck_ext pck;
			sl_tdx_body b;
			sl_tdx_tcb out;
			memset(&pck, hi ? 0xff : 0, sizeof(pck));
			memset(&b, hi ? 0xff : 0, sizeof(b));
			(void)sl_tdx_tcb_eval(body, &pck, &b, &out);
		}
		json_decref(body);
		body = NULL;
	}
	if (sl_tdx_pcs_parse(data, size, "enclaveIdentity", "fuzz.json", &body, &sv, &svl, sig) ==
	    SL_OK) {
		check_range(data, size, sv, svl, body);
		sl_tdx_qe_report qe;
		char status[40];
		memset(&qe, 0, sizeof(qe));
		(void)sl_tdx_qe_eval(body, &qe, status);
		json_decref(body);
	}
	return 0;
}
