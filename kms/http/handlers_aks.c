/* Admin endpoints over the enrolled-AK registry: GET /v1/aks lists the
 * enrolled AKs and the revoked machines, POST /v1/aks/revoke {"name": HEX}
 * revokes one AK and its machine (EK) (both scope operate). A revoked AK's
 * releases and renewals are refused by name (ak_revoked), so a job running
 * on that machine stops at its next renewal, and no other AK of that EK
 * releases or enrolls until POST /v1/eks/readmit {"ek_sha256": HEX} (scope
 * admin: it grants) re-admits the machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "seclaunch/audit.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"

void kmsd_handle_aks_list(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	if (!kmsd_authorize(ctx, req, res, KMSD_SCOPE_OPERATE, "GET /v1/aks", KMSD_AUDIT_EV_AK_LIST,
	                    NULL))
		return;
	json_t *l = kmsd_registry_list(ctx->registry);
	json_t *e = l != NULL ? kmsd_registry_eks_revoked(ctx->registry) : NULL;
	if (l == NULL || e == NULL) {
		json_decref(l);
		if (!kmsd_store_healthy(ctx->store))
			kmsd_store_failed(ctx, res, "AK list");
		else
			kmsd_problem(res, 500, "internal", "Internal Server Error", sl_err_detail(),
			             NULL);
		return;
	}
	res->status = 200;
	res->json = json_pack("{s:o, s:o}", "aks", l, "revoked_eks", e);
}

void kmsd_handle_aks_revoke(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	uint8_t name[KMSD_AK_NAME_MAX], ek[32];
	char hex[2 * KMSD_AK_NAME_MAX + 1], ekhex[65];
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
	if (kmsd_registry_ak_ek(ctx->registry, name, len, ek) != SL_OK) {
		kmsd_store_failed(ctx, res, "AK revocation");
		return;
	}
	sl_hex_encode(ek, 32, ekhex);
	if (!kmsd_audit(ctx, SL_AUDIT_EV_AK_REVOKE, NULL, NULL, SL_AUDIT_ALLOW, NULL, NULL,
	                json_pack("{s:s, s:s, s:b}", "ak_name", hex, "ek_sha256", ekhex,
	                          "already_revoked", was))) {
		kmsd_audit_failed(ctx, res, "AK revocation");
		return;
	}
	res->status = 200;
	res->json = json_pack("{s:s, s:s, s:b, s:b}", "name", hex, "ek_sha256", ekhex, "revoked", 1,
	                      "already", was);
}

/* An admin re-admits a revoked machine: its AKs that were not revoked
 * themselves release again, and new AKs of it may enroll. */
void kmsd_handle_eks_readmit(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	uint8_t ek[32];
	char hex[65];
	bool was = false;
	if (!kmsd_authorize(ctx, req, res, KMSD_SCOPE_ADMIN, "POST /v1/eks/readmit",
	                    SL_AUDIT_EV_EK_READMIT, NULL))
		return;
	if (kmsd_parse_ek_readmit(req->body, req->len, ek, hex) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	if (kmsd_registry_ek_revoked(ctx->registry, ek, &was) != SL_OK) {
		kmsd_store_failed(ctx, res, "EK re-admission");
		return;
	}
	if (!was) {
		char d[200];
		snprintf(d, sizeof(d), "EK sha256:%s is not revoked here", hex);
		kmsd_problem(res, 404, "unknown-ek", "Not Found", d, NULL);
		json_t *why = json_pack("[s]", d);
		if (!kmsd_audit(ctx, SL_AUDIT_EV_EK_READMIT, NULL, NULL, SL_AUDIT_DENY, why, NULL,
		                json_pack("{s:s}", "ek_sha256", hex)))
			kmsd_audit_failed(ctx, res, "EK re-admission");
		json_decref(why);
		return;
	}
	/* a grant: recorded before it takes effect */
	if (!kmsd_audit(ctx, SL_AUDIT_EV_EK_READMIT, NULL, NULL, SL_AUDIT_ALLOW, NULL, NULL,
	                json_pack("{s:s}", "ek_sha256", hex))) {
		kmsd_audit_failed(ctx, res, "EK re-admission");
		return;
	}
	if (kmsd_registry_ek_readmit(ctx->registry, ek, &was) != SL_OK) {
		kmsd_store_failed(ctx, res, "EK re-admission");
		return;
	}
	res->status = 200;
	res->json = json_pack("{s:s, s:b}", "ek_sha256", hex, "readmitted", 1);
}
