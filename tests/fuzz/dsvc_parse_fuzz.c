/* The data service's request parser alone (launcher/stage/dsvc_request.c) and its
 * answer pager. Any bytes: sl_dsvc_parse returns cleanly, and what it
 * accepts satisfies the invariants the service relies on (a known op, a
 * NUL-terminated non-empty dataset id exactly for the ops that take one).
 * A JSON array in the input is paged from the accepted start. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../launcher/stage/data_service.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sl_dsvc_req rq;
	if (sl_dsvc_parse((const char *)data, size, &rq) == SL_OK) {
		size_t n = strnlen(rq.dataset, sizeof(rq.dataset));
		if (n == sizeof(rq.dataset))
			abort();
		if ((rq.op == SL_DSVC_OP_LIST) != (n == 0))
			abort();
		if (rq.op > SL_DSVC_OP_SHARDS)
			abort();
		if (rq.start != 0 && rq.op != SL_DSVC_OP_FILES && rq.op != SL_DSVC_OP_SHARDS)
			abort();
		if (strnlen(rq.token, sizeof(rq.token)) == sizeof(rq.token) ||
		    (!rq.has_token && rq.token[0] != '\0'))
			abort();
	}
	json_error_t e;
	json_t *j = json_loadb((const char *)data, size, 0, &e);
	if (json_is_array(j)) {
		for (uint64_t start = 0, next = 0;; start = next) {
			json_t *page = sl_dsvc_page(j, start, 64, &next);
			if (page == NULL)
				abort();
			size_t got = json_array_size(page);
			json_decref(page);
			if (start < json_array_size(j) && got == 0)
				abort(); /* a page always moves on */
			if (next == 0)
				break;
			if (next <= start || next > json_array_size(j))
				abort();
		}
	}
	json_decref(j);
	return 0;
}
