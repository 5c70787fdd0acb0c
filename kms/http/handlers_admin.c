/* POST /v1/keys creates a KEK (scope admin); POST /v1/keys/{id}/wrap wraps
 * a DEK for a dataset (scope wrap). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "http.h"
#include "seclaunch/audit.h"
#include "seclaunch/json.h"
#include "seclaunch/policy.h"

/* Records a refusal (why: one string) before it is answered; 503 instead of
 * the answer when it cannot be recorded. */
static void refused(kmsd_ctx *ctx, kmsd_response *res, const char *event, const char *key_id,
                    const char *dataset_id, const char *why_text)
{
	json_t *why = json_pack("[s]", why_text);
	if (!kmsd_audit(ctx, event, key_id, dataset_id, SL_AUDIT_DENY, why, NULL, NULL))
		kmsd_audit_failed(ctx, res, event);
	json_decref(why);
}

void kmsd_handle_key_create(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	char id[SL_KMS_ID_MAX + 1], aws_key[KMSD_AWS_KEY_ID_MAX + 1];
	sl_err rc;
	if (!kmsd_authorize(ctx, req, res, KMSD_SCOPE_ADMIN, "POST /v1/keys",
	                    SL_AUDIT_EV_KEY_CREATE, NULL))
		return;
	if (kmsd_parse_key_create_aws(req->body, req->len, id, aws_key) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	rc = kmsd_kek_adopt(ctx->kek, id, aws_key[0] ? aws_key : NULL);
	if (rc == SL_E_EXISTS) {
		kmsd_problem(res, 409, "key-exists", "Conflict", sl_err_detail(), NULL);
		refused(ctx, res, SL_AUDIT_EV_KEY_CREATE, id, NULL, "key id exists");
		return;
	}
	if (rc == SL_E_SYSTEM) {
		kmsd_store_failed(ctx, res, "key create");
		return;
	}
	if (rc != SL_OK) {
		char err[512];
		snprintf(err, sizeof(err), "%s", sl_err_detail());
		kmsd_problem(res, 500, "backend", "KEK backend error", err, NULL);
		if (!kmsd_audit(ctx, SL_AUDIT_EV_KEY_CREATE, id, NULL, SL_AUDIT_ERROR, NULL, NULL,
		                json_pack("{s:s}", "error", err)))
			kmsd_audit_failed(ctx, res, "key create");
		return;
	}
	if (!kmsd_audit(ctx, SL_AUDIT_EV_KEY_CREATE, id, NULL, SL_AUDIT_ALLOW, NULL, NULL, NULL)) {
		kmsd_audit_failed(ctx, res, "key create");
		return;
	}
	res->status = 201;
	res->json = json_pack("{s:s}", "id", id);
}

void kmsd_handle_wrap(kmsd_ctx *ctx, const kmsd_request *req, const char *key_id,
                      kmsd_response *res)
{
	char dataset[SL_KMS_DATASET_ID_MAX + 1];
	uint8_t wrapped[SL_KMS_WRAPPED_DEK_MAX];
	size_t wlen = 0;
	sl_secret *dek = NULL;
	char *w64 = NULL;
	sl_err rc;
	if (!kmsd_authorize(ctx, req, res, KMSD_SCOPE_WRAP, "POST /v1/keys/{id}/wrap",
	                    SL_AUDIT_EV_KEY_WRAP, kmsd_valid_key_id(key_id) ? key_id : NULL))
		return;
	if (!kmsd_valid_key_id(key_id)) {
		kmsd_problem(res, 404, "unknown-key", "Not Found", "key id is not valid", NULL);
		refused(ctx, res, SL_AUDIT_EV_KEY_WRAP, NULL, NULL, "key id is not valid");
		return;
	}
	if (kmsd_parse_wrap(req->body, req->len, dataset, &dek) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	/* the policy's keys map governs wrap as it governs release: a DEK is
	 * never wrapped under a key that could not release it */
	if (sl_policy_key_check(ctx->policy, key_id, dataset) != SL_OK) {
		char why[1100];
		snprintf(why, sizeof(why), "%s", sl_err_detail());
		kmsd_problem(res, 403, "denied", "Forbidden", why,
		             json_pack("[{s:s, s:s, s:s, s:s}]", "code",
		                       kmsd_denial_code(KMSD_D_POLICY), "detail", why, "key_id",
		                       key_id, "dataset_id", dataset));
		refused(ctx, res, SL_AUDIT_EV_KEY_WRAP, key_id, dataset, why);
		goto out;
	}
	rc = kmsd_kek_wrap(ctx->kek, key_id, dataset, sl_secret_data(dek), wrapped, &wlen);
	if (rc == SL_E_INPUT) {
		char why[300];
		snprintf(why, sizeof(why), "%s", sl_err_detail());
		kmsd_problem(res, 404, "unknown-key", "Not Found", why, NULL);
		refused(ctx, res, SL_AUDIT_EV_KEY_WRAP, key_id, dataset, why);
		goto out;
	}
	if (rc == SL_E_SYSTEM) {
		kmsd_store_failed(ctx, res, "wrap");
		goto out;
	}
	if (rc == SL_E_KMS_REFUSED) {
		char why[300];
		snprintf(why, sizeof(why), "%s", sl_err_detail());
		kmsd_problem(res, 409, "key-disabled", "Conflict", why, NULL);
		refused(ctx, res, SL_AUDIT_EV_KEY_WRAP, key_id, dataset, why);
		goto out;
	}
	if (rc != SL_OK || sl_b64_encode(wrapped, wlen, &w64) != SL_OK) {
		kmsd_problem(res, 500, "backend", "KEK backend error", sl_err_detail(), NULL);
		goto out;
	}
	/* the dataset references this version now (delete and retire ask); a
	 * delete that won the key's row first leaves nothing to reference */
	rc = kmsd_store_ref_note(ctx->store, key_id, wrapped[0], dataset, (int64_t)time(NULL));
	if (rc == SL_E_KMS_REFUSED) {
		char why[300];
		snprintf(why, sizeof(why), "key '%s' was deleted during the wrap", key_id);
		kmsd_problem(res, 409, "key-deleted", "Conflict", why, NULL);
		refused(ctx, res, SL_AUDIT_EV_KEY_WRAP, key_id, dataset, why);
		goto out;
	}
	if (rc != SL_OK) {
		kmsd_store_failed(ctx, res, "wrap");
		goto out;
	}
	if (!kmsd_audit(ctx, SL_AUDIT_EV_KEY_WRAP, key_id, dataset, SL_AUDIT_ALLOW, NULL, NULL,
	                json_pack("{s:i}", "version", wrapped[0]))) {
		kmsd_audit_failed(ctx, res, "wrap");
		goto out;
	}
	res->status = 200;
	res->json = json_pack("{s:s, s:s, s:s}", "key_id", key_id, "dataset_id", dataset,
	                      "wrapped_dek", w64);
out:
	free(w64);
	sl_secret_free(dek);
}
