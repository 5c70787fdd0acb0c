/* Admin endpoints over the enrolled-AK registry (scope operate):
 * GET /v1/aks lists the enrolled AKs; POST /v1/aks/revoke {"name": HEX}
 * revokes one. A revoked AK's releases and renewals are refused by name
 * (ak_revoked), so a job running on that machine stops at its next renewal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kmsd.h"
#include "seclaunch/audit.h"
#include "seclaunch/json.h"

void kmsd_handle_aks_list(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	if (!kmsd_authorize(ctx, req, res, KMSD_SCOPE_OPERATE, "GET /v1/aks", KMSD_AUDIT_EV_AK_LIST,
	                    NULL))
		return;
	json_t *l = kmsd_registry_list(ctx->registry);
	if (l == NULL) {
		if (!kmsd_store_healthy(ctx->store))
			kmsd_store_failed(ctx, res, "AK list");
		else
			kmsd_problem(res, 500, "internal", "Internal Server Error", sl_err_detail(),
			             NULL);
		return;
	}
	res->status = 200;
	res->json = json_pack("{s:o}", "aks", l);
}

void kmsd_handle_aks_revoke(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	uint8_t name[KMSD_AK_NAME_MAX];
	char hex[2 * KMSD_AK_NAME_MAX + 1];
	size_t len = 0;
	bool was = false;
	if (!kmsd_authorize(ctx, req, res, KMSD_SCOPE_OPERATE, "POST /v1/aks/revoke",
	                    SL_AUDIT_EV_AK_REVOKE, NULL))
		return;
	if (kmsd_parse_ak_revoke(req->body, req->len, name, &len, hex) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	sl_err rc = kmsd_registry_revoke(ctx->registry, name, len, &was);
	if (rc == SL_E_SYSTEM) {
		kmsd_store_failed(ctx, res, "AK revocation");
		return;
	}
	if (rc != SL_OK) {
		char d[300];
		snprintf(d, sizeof(d), "%s", sl_err_detail());
		kmsd_problem(res, rc == SL_E_INPUT ? 404 : 500,
		             rc == SL_E_INPUT ? "unknown-ak" : "internal",
		             rc == SL_E_INPUT ? "Not Found" : "Internal Server Error", d, NULL);
		/* a revocation that found nothing is someone's mistake or probe */
		json_t *why = json_pack("[s]", d);
		if (!kmsd_audit(ctx, SL_AUDIT_EV_AK_REVOKE, NULL, NULL, SL_AUDIT_DENY, why, NULL,
		                json_pack("{s:s}", "ak_name", hex)))
			kmsd_audit_failed(ctx, res, "AK revocation");
		json_decref(why);
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
