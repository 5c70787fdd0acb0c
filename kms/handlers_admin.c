/* Admin endpoints (Bearer admin token): POST /v1/keys creates a KEK,
 * POST /v1/keys/{id}/wrap wraps a DEK for a dataset. */
#include <stdlib.h>

#include "kmsd.h"
#include "seclaunch/audit.h"
#include "seclaunch/json.h"

/* Failed admin authentication is recorded too: it is someone trying keys. */
static bool admin_ok(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res, const char *event,
                     const char *key_id)
{
	if (kmsd_admin_ok(ctx, req, res))
		return true;
	json_t *why = json_pack("[s]", sl_json_getstr(res->json, "detail"));
	kmsd_audit(ctx, event, key_id, NULL, SL_AUDIT_DENY, why, NULL, NULL);
	json_decref(why);
	return false;
}

void kmsd_handle_key_create(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	char id[SL_KMS_ID_MAX + 1];
	sl_err rc;
	if (!admin_ok(ctx, req, res, SL_AUDIT_EV_KEY_CREATE, NULL))
		return;
	if (kmsd_parse_key_create(req->body, req->len, id) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	rc = kmsd_kek_create(ctx->kek, id);
	if (rc == SL_E_EXISTS) {
		kmsd_problem(res, 409, "key-exists", "Conflict", sl_err_detail(), NULL);
		json_t *why = json_pack("[s]", "key id exists");
		kmsd_audit(ctx, SL_AUDIT_EV_KEY_CREATE, id, NULL, SL_AUDIT_DENY, why, NULL, NULL);
		json_decref(why);
		return;
	}
	if (rc != SL_OK) {
		kmsd_audit(ctx, SL_AUDIT_EV_KEY_CREATE, id, NULL, SL_AUDIT_ERROR, NULL, NULL,
		           json_pack("{s:s}", "error", sl_err_detail()));
		kmsd_problem(res, 500, "backend", "KEK backend error", sl_err_detail(), NULL);
		return;
	}
	if (!kmsd_audit(ctx, SL_AUDIT_EV_KEY_CREATE, id, NULL, SL_AUDIT_ALLOW, NULL, NULL, NULL)) {
		kmsd_audit_failed(res, "key create");
		return;
	}
	res->status = 201;
	res->json = json_pack("{s:s}", "id", id);
}

void kmsd_handle_wrap(kmsd_ctx *ctx, const kmsd_request *req, const char *key_id,
                      kmsd_response *res)
{
	char dataset[SL_KMS_DATASET_ID_MAX + 1];
	uint8_t wrapped[SL_KMS_WRAPPED_DEK_LEN];
	sl_secret *dek = NULL;
	char *w64 = NULL;
	sl_err rc;
	if (!admin_ok(ctx, req, res, SL_AUDIT_EV_KEY_WRAP,
	              kmsd_valid_key_id(key_id) ? key_id : NULL))
		return;
	if (!kmsd_valid_key_id(key_id)) {
		kmsd_problem(res, 404, "unknown-key", "Not Found", "key id is not valid", NULL);
		return;
	}
	if (kmsd_parse_wrap(req->body, req->len, dataset, &dek) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	rc = kmsd_kek_wrap(ctx->kek, key_id, dataset, sl_secret_data(dek), wrapped);
	if (rc == SL_E_INPUT) {
		kmsd_problem(res, 404, "unknown-key", "Not Found", sl_err_detail(), NULL);
		goto out;
	}
	if (rc != SL_OK || sl_b64_encode(wrapped, sizeof(wrapped), &w64) != SL_OK) {
		kmsd_problem(res, 500, "backend", "KEK backend error", sl_err_detail(), NULL);
		goto out;
	}
	if (!kmsd_audit(ctx, SL_AUDIT_EV_KEY_WRAP, key_id, dataset, SL_AUDIT_ALLOW, NULL, NULL,
	                NULL)) {
		kmsd_audit_failed(res, "wrap");
		goto out;
	}
	res->status = 200;
	res->json = json_pack("{s:s, s:s, s:s}", "key_id", key_id, "dataset_id", dataset,
	                      "wrapped_dek", w64);
out:
	free(w64);
	sl_secret_free(dek);
}
