/* The key lifecycle (docs/protocol.md, "Key lifecycle"; the GETs and
 * rewrap need scope wrap, the rest admin):
 *   GET  /v1/keys                    every key: state, versions, references
 *   GET  /v1/keys/{id}               one key
 *   POST /v1/keys/{id}/rotate        a new KEK version for new wraps; older
 *                                    versions keep unwrapping until retired
 *   POST /v1/keys/{id}/disable       releases and wraps refused at once (on
 *   POST /v1/keys/{id}/enable        every replica: the state is read per use)
 *   POST /v1/keys/{id}/retire        versions below the current one stop
 *                                    unwrapping; refused while a dataset still
 *                                    references one, unless {"force": true}
 *   POST /v1/keys/{id}/delete        the key and every version; refused while
 *                                    referenced, unless {"force": true}
 *   POST /v1/keys/{id}/rewrap        {"dataset_id","wrapped_dek"} -> the same
 *                                    DEK wrapped under the current version;
 *                                    the DEK never leaves seclaunchd
 * Every change, and every refusal, is audited before it is answered. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "seclaunch/audit.h"
#include "seclaunch/json.h"
#include "seclaunch/policy.h"

static bool record(kmsd_ctx *ctx, kmsd_response *res, const char *event, const char *id,
                   const char *dataset, const char *decision, const char *why, json_t *details)
{
	json_t *reasons = why ? json_pack("[s]", why) : NULL;
	bool ok = kmsd_audit(ctx, event, id, dataset, decision, reasons, NULL, details);
	json_decref(reasons);
	if (!ok) {
		json_decref(res->json);
		res->json = NULL;
		kmsd_audit_failed(ctx, res, event);
	}
	return ok;
}

static void store_err(kmsd_ctx *ctx, kmsd_response *res, sl_err rc, const char *what)
{
	if (rc == SL_E_SYSTEM)
		kmsd_store_failed(ctx, res, what);
	else
		kmsd_problem(res, 500, "internal", "Internal Server Error", sl_err_detail(), NULL);
}

static void list(kmsd_ctx *ctx, const char *id, kmsd_response *res)
{
	json_t *arr = NULL;
	sl_err rc = kmsd_store_key_list(ctx->store, id, &arr);
	if (rc != SL_OK) {
		store_err(ctx, res, rc, "key list");
		return;
	}
	if (id != NULL && json_array_size(arr) == 0) {
		kmsd_problem(res, 404, "unknown-key", "Not Found", "unknown key id", NULL);
		json_decref(arr);
		return;
	}
	res->status = 200;
	res->json = id ? json_incref(json_array_get(arr, 0)) : json_pack("{s:o}", "keys", arr);
	if (id != NULL)
		json_decref(arr);
}

/* 409 with a refusal record: something still depends on what was asked. */
static void conflict(kmsd_ctx *ctx, kmsd_response *res, const char *event, const char *id,
                     const char *why)
{
	kmsd_problem(res, 409, "key-referenced", "Conflict", why, NULL);
	record(ctx, res, event, id, NULL, SL_AUDIT_DENY, why, NULL);
}

static void rewrap(kmsd_ctx *ctx, const kmsd_request *req, const char *id, kmsd_response *res)
{
	char dataset[SL_KMS_DATASET_ID_MAX + 1];
	uint8_t in[SL_KMS_WRAPPED_DEK_MAX], out[SL_KMS_WRAPPED_DEK_MAX];
	size_t inlen = 0, outlen = 0;
	char *w64 = NULL;
	sl_err rc;
	if (kmsd_parse_rewrap(req->body, req->len, dataset, in, &inlen) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	/* the policy's keys map governs rewrap as it governs wrap */
	if (sl_policy_key_check(ctx->policy, id, dataset) != SL_OK) {
		char why[1100];
		snprintf(why, sizeof(why), "%s", sl_err_detail());
		kmsd_problem(res, 403, "denied", "Forbidden", why, NULL);
		record(ctx, res, "kms.key.rewrap", id, dataset, SL_AUDIT_DENY, why, NULL);
		return;
	}
	rc = kmsd_kek_rewrap(ctx->kek, id, dataset, in, inlen, out, &outlen);
	if (rc == SL_E_SYSTEM) {
		kmsd_store_failed(ctx, res, "rewrap");
		return;
	}
	if (rc != SL_OK) {
		char why[600];
		snprintf(why, sizeof(why), "%s", sl_err_detail());
		kmsd_problem(res,
		             rc == SL_E_INPUT         ? 404
		             : rc == SL_E_KMS_REFUSED ? 409
		                                      : 422,
		             "rewrap-refused", "Rewrap refused", why, NULL);
		record(ctx, res, "kms.key.rewrap", id, dataset, SL_AUDIT_DENY, why, NULL);
		return;
	}
	rc = kmsd_store_ref_move(ctx->store, id, out[0], dataset, (int64_t)time(NULL));
	if (rc != SL_OK || sl_b64_encode(out, outlen, &w64) != SL_OK) {
		store_err(ctx, res, rc, "rewrap");
		return;
	}
	if (record(ctx, res, "kms.key.rewrap", id, dataset, SL_AUDIT_ALLOW, NULL,
	           json_pack("{s:i, s:i}", "from_version", in[0], "to_version", out[0]))) {
		res->status = 200;
		res->json = json_pack("{s:s, s:s, s:s, s:i}", "key_id", id, "dataset_id", dataset,
		                      "wrapped_dek", w64, "version", out[0]);
	}
	free(w64);
}

void kmsd_handle_key_admin(kmsd_ctx *ctx, const kmsd_request *req, const char *id,
                           const char *action, kmsd_response *res)
{
	char event[64];
	bool get = strcmp(req->method, "GET") == 0, force = false, found = false;
	kmsd_key_row row = {0};
	sl_err rc;
	snprintf(event, sizeof(event), "kms.key.%s", action ? action : id ? "show" : "list");
	/* reading keys and (re)wrapping DEKs is a data owner's (wrap); the
	 * lifecycle is admin's */
	bool reads = action == NULL ? get : strcmp(action, "rewrap") == 0;
	char what[64];
	snprintf(what, sizeof(what), "%s /v1/keys%s%s%s", req->method, id ? "/{id}" : "",
	         action ? "/" : "", action ? action : "");
	if (!kmsd_authorize(ctx, req, res, reads ? KMSD_SCOPE_WRAP : KMSD_SCOPE_ADMIN, what, event,
	                    id && kmsd_valid_key_id(id) ? id : NULL))
		return;
	if (id != NULL && !kmsd_valid_key_id(id)) {
		kmsd_problem(res, 404, "unknown-key", "Not Found", "key id is not valid", NULL);
		if (action != NULL)
			record(ctx, res, event, NULL, NULL, SL_AUDIT_DENY, "key id is not valid",
			       NULL);
		return;
	}
	if (action == NULL) {
		if (!get) {
			kmsd_problem(res, 405, "method-not-allowed", "Method Not Allowed",
			             id ? "use GET (changes are POST /v1/keys/{id}/ACTION)"
			                : "use GET to list or POST to create",
			             NULL);
			return;
		}
		list(ctx, id, res);
		return;
	}
	if (get) {
		kmsd_problem(res, 405, "method-not-allowed", "Method Not Allowed", "use POST",
		             NULL);
		return;
	}
	if (strcmp(action, "rewrap") == 0) {
		rewrap(ctx, req, id, res);
		return;
	}
	if (kmsd_parse_key_action(req->body, req->len, &force) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	rc = kmsd_kek_state(ctx->kek, id, &row, &found);
	if (rc != SL_OK) {
		store_err(ctx, res, rc, event);
		return;
	}
	if (!found) {
		kmsd_problem(res, 404, "unknown-key", "Not Found", "unknown key id", NULL);
		record(ctx, res, event, id, NULL, SL_AUDIT_DENY, "unknown key id", NULL);
		return;
	}
	if (strcmp(action, "rotate") == 0) {
		unsigned v = 0;
		rc = kmsd_kek_rotate(ctx->kek, id, &v);
		if (rc == SL_E_EXISTS || rc == SL_E_TOO_LARGE) {
			conflict(ctx, res, event, id, sl_err_detail());
			return;
		}
		if (rc != SL_OK) {
			store_err(ctx, res, rc, event);
			return;
		}
		if (record(ctx, res, event, id, NULL, SL_AUDIT_ALLOW, NULL,
		           json_pack("{s:i}", "version", v))) {
			res->status = 200;
			res->json = json_pack("{s:s, s:i}", "id", id, "current_version", v);
		}
		return;
	}
	if (strcmp(action, "disable") == 0 || strcmp(action, "enable") == 0) {
		bool dis = action[0] == 'd';
		/* in the key process: a backend that keeps the key (AWS KMS)
		 * disables or enables it there too */
		rc = kmsd_kek_set_state(ctx->kek, id, !dis, &found);
		if (rc != SL_OK && rc != SL_E_SYSTEM) {
			kmsd_problem(res, 502, "backend", "KEK backend error", sl_err_detail(),
			             NULL);
			return;
		}
		if (rc != SL_OK) {
			store_err(ctx, res, rc, event);
			return;
		}
		if (record(ctx, res, event, id, NULL, SL_AUDIT_ALLOW, NULL, NULL)) {
			res->status = 200;
			res->json = json_pack("{s:s, s:s}", "id", id, "state",
			                      dis ? "disabled" : "enabled");
		}
		return;
	}
	if (strcmp(action, "retire") == 0 || strcmp(action, "delete") == 0) {
		bool del = action[0] == 'd', deleted = false;
		size_t refs = 0, n = 0;
		char why[300];
		/* a delete counts and deletes in one transaction holding the key's
		 * row, so a wrap noting a reference meanwhile is counted or refused */
		rc = del ? kmsd_kek_delete(ctx->kek, id, force, &refs, &deleted)
		         : kmsd_store_ref_count_below(ctx->store, id, row.current, &refs);
		if (rc != SL_OK) {
			store_err(ctx, res, rc, event);
			return;
		}
		if (refs > 0 && !force) {
			snprintf(why, sizeof(why),
			         "key '%s': %zu dataset reference%s to %s (seclaunch rewrap them "
			         "first, or --force)",
			         id, refs, refs == 1 ? "" : "s",
			         del ? "it" : "versions below the current one");
			conflict(ctx, res, event, id, why);
			return;
		}
		if (del && !deleted) {
			kmsd_problem(res, 404, "unknown-key", "Not Found", "unknown key id", NULL);
			return;
		}
		/* the KEKs this replica's key process holds are wiped now; others
		 * find the row gone on their next use */
		rc = del ? SL_OK : kmsd_store_kek_retire(ctx->store, id, row.current, &n);
		if (rc != SL_OK && del) {
			kmsd_log(KMSD_LOG_ERR, "key '%s' deleted, but its cached KEKs: %s", id,
			         sl_err_detail());
			rc = SL_OK;
		}
		if (rc != SL_OK) {
			store_err(ctx, res, rc, event);
			return;
		}
		if (record(ctx, res, event, id, NULL, SL_AUDIT_ALLOW, NULL,
		           json_pack("{s:b, s:I, s:I}", "force", force, "references",
		                     (json_int_t)refs, "versions_retired", (json_int_t)n))) {
			res->status = 200;
			res->json = del ? json_pack("{s:s, s:b}", "id", id, "deleted", 1)
			                : json_pack("{s:s, s:I}", "id", id, "versions_retired",
			                            (json_int_t)n);
		}
		return;
	}
	kmsd_problem(res, 404, "not-found", "Not Found",
	             "no such key action (rotate, disable, enable, retire, delete, rewrap)", NULL);
}
