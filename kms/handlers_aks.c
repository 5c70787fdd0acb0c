/* Admin endpoints over the enrolled-AK registry (Bearer admin token):
 * GET /v1/aks lists the enrolled AKs; POST /v1/aks/revoke {"name": HEX}
 * revokes one. A revoked AK's releases and renewals are refused by name
 * (ak_revoked), so a job running on that machine stops at its next renewal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kmsd.h"
#include "seclaunch/audit.h"
#include "seclaunch/json.h"

#define NAME_MAX_BYTES 66

static bool admin(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	if (kmsd_admin_ok(ctx, req, res))
		return true;
	json_t *why = json_pack("[s]", sl_json_getstr(res->json, "detail") ?: "admin auth failed");
	if (!kmsd_audit(ctx, SL_AUDIT_EV_AK_REVOKE, NULL, NULL, SL_AUDIT_DENY, why, NULL, NULL))
		kmsd_audit_failed(ctx, res, "AK administration");
	json_decref(why);
	return false;
}

void kmsd_handle_aks_list(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	if (!admin(ctx, req, res))
		return;
	json_t *l = kmsd_registry_list(ctx->registry);
	if (l == NULL) {
		kmsd_problem(res, 500, "internal", "Internal Server Error", "out of memory", NULL);
		return;
	}
	res->status = 200;
	res->json = json_pack("{s:o}", "aks", l);
}

static SL_RESULT parse(const uint8_t *body, size_t len, uint8_t *name, size_t *nlen, char *hex)
{
	static const char *const fields[] = {"name", NULL};
	sl_err rc = SL_E_INPUT;
	json_error_t je;
	const char *s = NULL;
	uint8_t *raw = NULL;
	json_t *j = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
	SL_ENSURE(json_is_object(j), SL_E_INPUT, "request body: must be a JSON object");
	SL_GUARD(sl_json_only(j, fields, SL_E_INPUT, "revoke request"));
	SL_GUARD(sl_json_str(j, "name", 2 * NAME_MAX_BYTES, SL_E_INPUT, "revoke request", &s));
	SL_GUARD(sl_hex_decode_alloc(s, NAME_MAX_BYTES, &raw, nlen, "name"));
	SL_ENSURE(*nlen > 0, SL_E_INPUT, "name: empty");
	memcpy(name, raw, *nlen);
	sl_hex_encode(name, *nlen, hex);
	rc = SL_OK;
out:
	free(raw);
	json_decref(j);
	return rc;
}

void kmsd_handle_aks_revoke(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	uint8_t name[NAME_MAX_BYTES];
	char hex[2 * NAME_MAX_BYTES + 1];
	size_t len = 0;
	bool was = false;
	if (!admin(ctx, req, res))
		return;
	if (parse(req->body, req->len, name, &len, hex) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	if (kmsd_registry_revoke(ctx->registry, name, len, &was) != SL_OK) {
		char d[300];
		snprintf(d, sizeof(d), "%s", sl_err_detail());
		kmsd_problem(res, 404, "unknown-ak", "Not Found", d, NULL);
		return;
	}
	if (!kmsd_audit(ctx, SL_AUDIT_EV_AK_REVOKE, NULL, NULL, SL_AUDIT_ALLOW, NULL, NULL,
	                json_pack("{s:s, s:b}", "ak_name", hex, "already_revoked", was))) {
		kmsd_audit_failed(ctx, res, "AK revocation");
		return;
	}
	res->status = 200;
	res->json = json_pack("{s:s, s:b, s:b}", "name", hex, "revoked", 1, "already", was);
}
