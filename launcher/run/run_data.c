/* The datasets as the job (or serve's tasks) get them in SECLAUNCH_DATA. */
#include <stdlib.h>
#include <string.h>

#include "run_int.h"
#include "seclaunch/util.h"

/* SECLAUNCH_DATA as the job gets it. One environment string may hold at
 * most 128 KiB (the kernel's MAX_ARG_STRLEN; exec fails with E2BIG past
 * it), and a dataset of a few thousand files lists more than that. Past
 * SL_RUN_DATA_ENV_MAX, each entry's "files" and "shards" are left out, with
 * their counts and "files_from": "service": the job pages them from the data
 * service ("files" / "shards" requests). */
sl_err sl_run_data_slim(const struct sl_report *rep, json_t *data, size_t max, bool *cut_any)
{
	sl_err rc = SL_E_NOMEM;
	char *text = json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS);
	const char *id;
	json_t *e;

	*cut_any = false;
	SL_ENSURE(text != NULL, SL_E_NOMEM, "SECLAUNCH_DATA");
	size_t full = strlen(text);
	sl_wipe(text, full);
	free(text);
	text = NULL;
	if (full <= max)
		return SL_OK;
	json_object_foreach (data, id, e) {
		static const char *const lists[] = {"files", "shards"};
		static const char *const counts[] = {"file_count", "shard_count"};
		bool cut = false;
		for (size_t k = 0; k < 2; k++) {
			const json_t *a = json_object_get(e, lists[k]);
			if (!json_is_array(a))
				continue;
			SL_ENSURE(json_object_set_new(
			              e, counts[k], json_integer((json_int_t)json_array_size(a))) ==
			                  0 &&
			              json_object_del(e, lists[k]) == 0,
			          SL_E_NOMEM, "SECLAUNCH_DATA");
			cut = true;
		}
		if (cut)
			SL_ENSURE(json_object_set_new(e, "files_from", json_string("service")) == 0,
			          SL_E_NOMEM, "SECLAUNCH_DATA");
		*cut_any |= cut;
	}
	text = json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS);
	SL_ENSURE(text != NULL, SL_E_NOMEM, "SECLAUNCH_DATA");
	SL_ENSURE(strlen(text) <= max, SL_E_TOO_LARGE,
	          "SECLAUNCH_DATA: %zu bytes even without the file lists (at most %zu)",
	          strlen(text), max);
	sl_report_say(rep,
	              "SECLAUNCH_DATA lists no files (%zu bytes with them, over %zu): the job "
	              "pages them from the data service",
	              full, max);
	rc = SL_OK;
out:
	if (text != NULL) {
		sl_wipe(text, strlen(text));
		free(text);
	}
	return rc;
}
