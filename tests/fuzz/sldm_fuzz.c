/* libFuzzer: the SLDM v1 manifest parser (shard table, file table, path
 * rule, key reference), re-keying and the inspect JSON of what it accepts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/sldm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sl_sldm *m = NULL, *m2 = NULL;
	uint8_t *re = NULL, r1[SL_SLDM_ROOT_LEN], r2[SL_SLDM_ROOT_LEN];
	size_t re_len = 0;

	if (sl_sldm_parse(data, size, &m) != SL_OK)
		return 0;
	/* invariants the parser promises */
	uint32_t ns = sl_sldm_shard_count(m), nf = sl_sldm_file_count(m);
	if (ns == 0 || ns > SL_SLDM_SHARDS_MAX || nf > SL_SLDM_FILES_MAX)
		abort();
	uint64_t total = 0;
	for (uint32_t i = 0; i < ns; i++) {
		sl_sldm_shard s = sl_sldm_shard_at(m, i);
		if (s.index != i || strchr(s.name, '/') != NULL || s.file_size < s.plaintext_len)
			abort();
		total += s.plaintext_len;
	}
	if (total != sl_sldm_plaintext_len(m))
		abort();
	for (uint32_t i = 0; i < nf; i++) {
		sl_sldm_file f = sl_sldm_file_at(m, i);
		if (f.shard >= ns || f.mode > 0777 || sl_sldm_path_check(f.path) != SL_OK)
			abort();
		uint64_t g = f.offset;
		for (uint32_t k = 0; k < f.shard; k++)
			g += sl_sldm_shard_at(m, k).plaintext_len;
		if (f.offset > sl_sldm_shard_at(m, f.shard).plaintext_len || g + f.size > total)
			abort();
	}
	/* a re-key keeps the root and parses back */
	if (sl_sldm_rekey(m, NULL, NULL, NULL, 0, &re, &re_len) != SL_OK)
		abort();
	if (sl_sldm_parse(re, re_len, &m2) != SL_OK)
		abort();
	sl_sldm_root(m, r1);
	sl_sldm_root(m2, r2);
	if (memcmp(r1, r2, sizeof(r1)) != 0)
		abort();
	json_t *j = sl_sldm_json(m);
	if (j != NULL) {
		char *s = json_dumps(j, 0);
		free(s);
		json_decref(j);
	}
	free(re);
	sl_sldm_free(m2);
	sl_sldm_free(m);
	return 0;
}
