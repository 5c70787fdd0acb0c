/* POST /v1/challenge, GET /v1/health, GET /metrics (scope metrics). */
#include <stdlib.h>

#include "http.h"
#include "seclaunch/policy.h"

void kmsd_handle_challenge(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	uint8_t nonce[SL_NONCE_LEN];
	time_t expires;
	char when[32];
	char *n64 = NULL, *p64 = NULL;
	if (kmsd_parse_challenge(req->body, req->len) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	sl_err rc = kmsd_nonces_issue(ctx->nonces, nonce, &expires);
	if (rc == SL_E_SYSTEM) {
		/* the challenge could not be kept: no nonce that no replica knows */
		kmsd_store_failed(ctx, res, "challenge");
		return;
	}
	if (rc != SL_OK) {
		kmsd_problem(res, 429, "busy", "Too Many Requests", sl_err_detail(), NULL);
		return;
	}
	sl_time_rfc3339(expires, when, sizeof(when));
	if (sl_b64_encode(nonce, sizeof(nonce), &n64) != SL_OK ||
	    sl_b64_encode(sl_policy_digest(ctx->policy), SL_POLICY_DIGEST_LEN, &p64) != SL_OK) {
		kmsd_problem(res, 500, "internal", "Internal Server Error", sl_err_detail(), NULL);
		goto out;
	}
	res->status = 200;
	res->json =
	    json_pack("{s:s, s:s, s:s}", "nonce", n64, "expires", when, "policy_digest", p64);
out:
	free(n64);
	free(p64);
}

/* 200 "ok" when the state store's last operation reached it and a key
 * process serves; else 503 naming the part that is down (a load balancer
 * takes the replica out; nothing here costs a store round trip). */
void kmsd_handle_health(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	(void)req;
	bool store = ctx->store == NULL || kmsd_store_healthy(ctx->store);
	bool keys = ctx->keyproc == NULL || kmsd_keyproc_up(ctx->keyproc);
	res->status = store && keys ? 200 : 503;
	res->json = json_pack(
	    "{s:s, s:s, s:s, s:s, s:b, s:s, s:s}", "status", store && keys ? "ok" : "unavailable",
	    "version", SL_VERSION, "policy_digest", sl_policy_digest_hex(ctx->policy),
	    "kek_backend", ctx->cfg->backend == KMSD_KEK_LOCAL ? "local" : "pkcs11", "development",
	    ctx->cfg->dev, "store", store ? "ok" : "down", "key_process", keys ? "ok" : "down");
	if (res->status == 503)
		res->retry_after = 2;
}

/* Behind a token of scope metrics: the counters tell who is being refused and how
 * much work the service does, which is not for anyone on the KMS port. */
void kmsd_handle_metrics(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	if (!kmsd_authorize(ctx, req, res, KMSD_SCOPE_METRICS, "GET /metrics",
	                    KMSD_AUDIT_EV_METRICS, NULL))
		return;
	if (kmsd_metrics_render(ctx->metrics, kmsd_nonces_size(ctx->nonces),
	                        kmsd_registry_count(ctx->registry), kmsd_kek_count(ctx->kek),
	                        &res->text) != SL_OK) {
		kmsd_problem(res, 500, "internal", "Internal Server Error", sl_err_detail(), NULL);
		return;
	}
	res->status = 200;
}
