/* Fuzz target: a workload log as evidence carries it ({"kind": "tpm2",
 * "workload_log": {...}}) through the event checks, the replay and the
 * claims, against a quoted PCR 15 of zeros. */
#include <stdint.h>
#include <stdlib.h>

#include "seclaunch/workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t jerr;
	json_t *log = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
	json_t *ev =
	    log != NULL ? json_pack("{s:s, s:o}", "kind", "tpm2", "workload_log", log) : NULL;
	sl_claims *c = NULL;
	if (ev != NULL && sl_claims_new(&c) == SL_OK) {
		static const uint8_t zero[32];
		if (sl_claims_set_hex(c, "tpm.pcr.sha256.15", zero, 32) == SL_OK &&
		    sl_workload_verify(ev, c) != SL_OK)
			sl_err_clear();
		sl_claims_free(c);
	}
	json_decref(ev);
	return 0;
}
