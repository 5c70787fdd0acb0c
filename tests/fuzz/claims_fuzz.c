/* Fuzz target: a claims file (the JSON `seclaunch verify --json` prints and
 * `policy explain --claims` reads) through jansson and sl_claims_from_json. */
#include <stdint.h>
#include <stdlib.h>

#include "seclaunch/attest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t jerr;
	json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
	sl_claims *c = NULL;
	if (j != NULL && sl_claims_from_json(j, &c) == SL_OK) {
		uint8_t d[32];
		json_t *back = NULL;
		sl_claims_digest(c, d);
		if (sl_claims_to_json(c, &back) == SL_OK)
			json_decref(back);
		sl_claims_free(c);
	}
	json_decref(j);
	return 0;
}
