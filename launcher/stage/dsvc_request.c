/* The data service's request parser and answer pager (data_service.h):
 * pure functions, apart from the service so they can be fuzzed alone. */
#include <stdio.h>
#include <string.h>

#include "data_service.h"
#include "seclaunch/json.h"

static const struct {
	const char *name;
	sl_dsvc_op op;
	bool dataset, shard, start; /* which members the op takes */
} ops[] = {
    {"list", SL_DSVC_OP_LIST, false, false, false},
    {"open", SL_DSVC_OP_OPEN, true, false, false},
    {"open_shard", SL_DSVC_OP_OPEN_SHARD, true, true, false},
    {"release_shard", SL_DSVC_OP_RELEASE_SHARD, true, true, false},
    {"files", SL_DSVC_OP_FILES, true, false, true},
    {"shards", SL_DSVC_OP_SHARDS, true, false, true},
};

/* Member key of rq: absent (*have false), or an integer in [0, max]. */
static SL_RESULT uint_member(const json_t *rq, const char *key, uint64_t max, bool *have,
                             uint64_t *out)
{
	const json_t *v = json_object_get(rq, key);
	*have = v != NULL;
	*out = 0;
	if (v == NULL)
		return SL_OK;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return sl_err_set(SL_E_INPUT,
		                  "data service request: \"%s\" is not an integer "
		                  "from 0 to %llu",
		                  key, (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return SL_OK;
}

sl_err sl_dsvc_parse(const char *msg, size_t len, sl_dsvc_req *out)
{
	static const char *const allowed[] = {"op", "dataset", "shard", "start", "token", NULL};
	sl_err rc = SL_E_INPUT;
	json_error_t e;
	json_t *rq = NULL;
	const char *op = NULL, *id = NULL, *token = NULL;
	bool have_shard, have_start;
	uint64_t shard, start;
	size_t k;

	memset(out, 0, sizeof(*out));
	SL_ENSURE(len <= SL_DSVC_MSG_MAX, SL_E_INPUT, "data service request: over %d bytes",
	          SL_DSVC_MSG_MAX);
	rq = json_loadb(msg, len, JSON_REJECT_DUPLICATES, &e);
	SL_ENSURE(rq != NULL, SL_E_INPUT, "data service request: not JSON (%s)", e.text);
	SL_ENSURE(json_is_object(rq), SL_E_INPUT, "data service request: not a JSON object");
	SL_GUARD(sl_json_only(rq, allowed, SL_E_INPUT, "data service request"));
	SL_GUARD(sl_json_str(rq, "op", 32, SL_E_INPUT, "data service request", &op));
	for (k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
		if (strcmp(ops[k].name, op) == 0)
			break;
	SL_ENSURE(k < sizeof(ops) / sizeof(ops[0]), SL_E_INPUT,
	          "data service request: unknown op \"%s\"", op);
	out->op = ops[k].op;
	SL_GUARD(sl_json_str_opt(rq, "dataset", sizeof(out->dataset) - 1, SL_E_INPUT,
	                         "data service request", &id));
	SL_ENSURE((id != NULL) == ops[k].dataset, SL_E_INPUT,
	          "data service request: op \"%s\" %s \"dataset\"", op,
	          ops[k].dataset ? "needs" : "takes no");
	SL_ENSURE(id == NULL || id[0] != '\0', SL_E_INPUT,
	          "data service request: empty \"dataset\"");
	if (id != NULL)
		memcpy(out->dataset, id, strlen(id) + 1);
	SL_GUARD(uint_member(rq, "shard", UINT32_MAX, &have_shard, &shard));
	SL_ENSURE(have_shard == ops[k].shard, SL_E_INPUT,
	          "data service request: op \"%s\" %s \"shard\"", op,
	          ops[k].shard ? "needs" : "takes no");
	SL_GUARD(uint_member(rq, "start", INT64_MAX, &have_start, &start));
	SL_ENSURE(!have_start || ops[k].start, SL_E_INPUT,
	          "data service request: op \"%s\" takes no \"start\"", op);
	out->shard = (uint32_t)shard;
	out->start = start;
	SL_GUARD(sl_json_str_opt(rq, "token", sizeof(out->token) - 1, SL_E_INPUT,
	                         "data service request", &token));
	if (token != NULL) {
		out->has_token = true;
		memcpy(out->token, token, strlen(token) + 1);
	}
	rc = SL_OK;
out:
	json_decref(rq);
	return rc;
}

json_t *sl_dsvc_page(const json_t *arr, uint64_t start, size_t budget, uint64_t *next)
{
	json_t *page = json_array();
	size_t used = 2, n = json_array_size(arr);
	uint64_t i = start;

	*next = 0;
	if (page == NULL)
		return NULL;
	for (; i < n; i++) {
		size_t sz = json_dumpb(json_array_get(arr, (size_t)i), NULL, 0, JSON_COMPACT) + 1;
		if (json_array_size(page) > 0 && used + sz > budget)
			break;
		if (json_array_append(page, json_array_get(arr, (size_t)i)) != 0) {
			json_decref(page);
			return NULL;
		}
		used += sz;
	}
	if (i < n)
		*next = i;
	return page;
}
