/* Fuzz target: the Azure HCL report parser, and the import of CoCo-agent
 * evidence JSON followed by verification (no collateral, fixed time). */
#include <stdint.h>

#include "../../attest/azure_hcl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sl_hcl_report h;
	(void)sl_hcl_parse(data, size, &h);
	json_t *in = json_loadb((const char *)data, size, 0, NULL);
	if (in == NULL)
		return 0;
	json_t *ev = NULL;
	if (sl_azure_import(in, &ev) == SL_OK) {
		sl_claims *c = NULL;
		sl_verify_opts o = {.no_binding = true, .at = 1748736000};
		if (sl_claims_new(&c) == SL_OK) {
			(void)sl_azure_verify(ev, &o, c);
			sl_claims_free(c);
		}
		json_decref(ev);
	}
	json_decref(in);
	return 0;
}
