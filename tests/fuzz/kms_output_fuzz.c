/* The POST /v1/output body parser (kms/http/parse.c, kmsd_parse_output). Must
 * return cleanly (accept or SL_E_INPUT) on any bytes, and what it accepts
 * must satisfy the checked invariants: the attested part as a release's,
 * 1..16 outputs with valid, distinct output ids and printable destinations,
 * distinct valid input ids. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../kms/http/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	kmsd_output_req *r = NULL;
	if (!init) {
		if (sl_crypto_init() != SL_OK)
			abort();
		init = 1;
	}
	if (kmsd_parse_output(data, size, &r) == SL_OK) {
		if (r->att == NULL || r->att->nkeys != 0 || !json_is_array(r->att->evidence) ||
		    !json_is_array(r->att->identity) || !json_is_object(r->att->job))
			abort();
		if (r->noutputs < 1 || r->noutputs > KMSD_MAX_OUTPUTS || r->ninputs > KMSD_MAX_KEYS)
			abort();
		for (size_t i = 0; i < r->noutputs; i++) {
			const kmsd_output_entry *e = &r->outputs[i];
			if (!kmsd_valid_dataset_id(e->output_id) || e->destination[0] == '\0' ||
			    strlen(e->destination) > KMSD_DEST_MAX ||
			    (e->key_id[0] != '\0' && !kmsd_valid_key_id(e->key_id)))
				abort();
			for (const char *c = e->destination; *c != '\0'; c++)
				if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
					abort();
			for (size_t j = 0; j < i; j++)
				if (strcmp(e->output_id, r->outputs[j].output_id) == 0)
					abort();
		}
		for (size_t i = 0; i < r->ninputs; i++)
			if (!kmsd_valid_dataset_id(r->inputs[i]))
				abort();
	}
	kmsd_output_req_free(r);
	return 0;
}
