/* POST /v1/renew: a lease renewal (docs/protocol.md, Leases).
 *
 * The request is a release request (fresh nonce, a fresh eph_pub that
 * opens nothing, fresh evidence bound to SHA-256("seclaunch-bind-v1" ||
 * nonce || eph_pub || policy_digest), the keys the lease covers) whose job
 * names the lease. Nothing is unwrapped or sealed. What differs from a
 * release: the policy judged is the one in force now (after a reload), not
 * the one the client holds, so a changed policy ends leases instead of
 * failing them as version skew; the AK must be enrolled and not revoked; each
 * key must still exist. Allowed: a new lease from now. Refused: 403 with
 * every reason, and the client stops the job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kmsd.h"
#include "store.h"
#include "seclaunch/audit.h"
#include "seclaunch/identity.h"
#include "seclaunch/json.h"
#include "seclaunch/policy.h"

struct ren {
	kmsd_ctx *ctx;
	kmsd_release_req *req;
	json_t *reasons;
	sl_claims *claims;
	bool revoked, unknown;
	bool store_failed; /* the state store could not answer: 503, no decision */
	char name[2 * 66 + 1];
	uint64_t ttl;
};

static void deny(struct ren *r, enum kmsd_denial d, const char *fmt, ...) SL_PRINTF(3, 4);
static void deny(struct ren *r, enum kmsd_denial d, const char *fmt, ...)
{
	char detail[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	json_array_append_new(
	    r->reasons, json_pack("{s:s, s:s}", "code", kmsd_denial_code(d), "detail", detail));
	kmsd_metrics_denial(r->ctx->metrics, d);
}

json_t *kmsd_lease_json(uint64_t ttl_s)
{
	char when[32];
	time_t exp = time(NULL) + (time_t)ttl_s;
	sl_time_rfc3339(exp, when, sizeof(when));
	return json_pack("{s:I, s:I, s:s}", "ttl", (json_int_t)ttl_s, "expires_unix",
	                 (json_int_t)exp, "expires", when);
}

static bool enrolled(const uint8_t *name, size_t len, void *cbctx)
{
	struct ren *r = cbctx;
	enum kmsd_ak_status st = KMSD_AK_UNKNOWN;
	sl_err rc = kmsd_registry_lookup(r->ctx->registry, name, len, &st);
	if (rc == SL_E_SYSTEM)
		r->store_failed = true;
	else if (rc != SL_OK)
		kmsd_log(KMSD_LOG_ERR, "%s", sl_err_detail());
	if (st == KMSD_AK_REVOKED) {
		sl_hex_encode(name, len <= 66 ? len : 0, r->name);
		r->revoked = true;
		return false;
	}
	if (st != KMSD_AK_ENROLLED) {
		r->unknown = true;
		return false;
	}
	return true;
}

static void verify(struct ren *r)
{
	const kmsd_config *cfg = r->ctx->cfg;
	uint8_t binding[SL_BINDING_LEN];
	sl_binding_compute(r->req->nonce, r->req->eph_pub, r->req->policy_digest, binding);
	for (size_t i = 0; i < json_array_size(r->req->evidence); i++) {
		sl_claims *c = NULL;
		sl_verify_opts vo = {.expect = binding,
		                     .expect_len = SL_BINDING_LEN,
		                     .trust_dir = cfg->ak_ca_dir,
		                     .collateral_dir = cfg->collateral_dir,
		                     .ak_enrolled = enrolled,
		                     .ak_enrolled_ctx = r};
		r->revoked = r->unknown = false;
		kmsd_metrics_count(r->ctx->metrics, KMSD_C_EVIDENCE_VERIFIED);
		sl_err rc = sl_claims_new(&c);
		if (rc == SL_OK)
			rc = sl_evidence_verify(json_array_get(r->req->evidence, i), &vo, c);
		if (rc == SL_OK)
			rc = sl_claims_merge(r->claims, c);
		if (rc != SL_OK && r->revoked)
			deny(r, KMSD_D_AK_REVOKED,
			     "evidence[%zu]: AK %s was revoked by an administrator", i, r->name);
		else if (rc != SL_OK)
			deny(r,
			     r->unknown                  ? KMSD_D_AK_UNKNOWN
			     : rc == SL_E_ATTEST_BINDING ? KMSD_D_BINDING
			                                 : KMSD_D_EVIDENCE,
			     "evidence[%zu]: %s", i,
			     sl_err_detail()[0] ? sl_err_detail() : sl_err_message(rc));
		sl_claims_free(c);
	}
	if (json_array_size(r->reasons) == 0 &&
	    sl_claims_set(r->claims, "binding", "verified") != SL_OK)
		deny(r, KMSD_D_EVIDENCE, "claims: %s", sl_err_detail());
	for (size_t i = 0; i < json_array_size(r->req->identity); i++) {
		sl_identity_opts io = {.gcp_jwks = cfg->gcp_jwks,
		                       .aws_trust_dir = cfg->aws_trust_dir,
		                       .binding = binding,
		                       .binding_len = SL_BINDING_LEN};
		if (sl_identity_verify(json_array_get(r->req->identity, i), &io, r->claims) !=
		    SL_OK)
			deny(r, KMSD_D_IDENTITY, "identity[%zu]: %s", i, sl_err_detail());
	}
}

static void judge(struct ren *r)
{
	for (size_t i = 0; i < r->req->nkeys; i++) {
		const kmsd_key_entry *k = &r->req->keys[i];
		sl_policy_request pr = {.dataset_id = k->dataset_id, .key_id = k->key_id};
		sl_decision *d = NULL;
		kmsd_key_row row = {0};
		bool found = false;
		if (kmsd_kek_state(r->ctx->kek, k->key_id, &row, &found) != SL_OK) {
			r->store_failed = true;
			return;
		}
		if (!found) {
			deny(r, KMSD_D_KEY_UNKNOWN, "keys[%zu]: key '%s' no longer exists", i,
			     k->key_id);
			continue;
		}
		if (row.state != KMSD_KEY_ENABLED) {
			deny(r, KMSD_D_KEY_DISABLED,
			     "keys[%zu]: key '%s' is disabled (seclaunch key enable)", i,
			     k->key_id);
			continue;
		}
		if (sl_policy_evaluate(r->ctx->policy, r->claims, &pr, &d) != SL_OK) {
			deny(r, KMSD_D_POLICY, "keys[%zu]: policy evaluation failed: %s", i,
			     sl_err_detail());
			continue;
		}
		for (size_t j = 0; j < sl_decision_reason_count(d); j++)
			deny(r, KMSD_D_POLICY, "keys[%zu]: %s", i, sl_decision_reason(d, j));
		if (!sl_decision_allowed(d) && sl_decision_reason_count(d) == 0)
			deny(r, KMSD_D_POLICY, "keys[%zu]: denied by policy", i);
		if (sl_decision_key_ttl(d) != 0 && (r->ttl == 0 || sl_decision_key_ttl(d) < r->ttl))
			r->ttl = sl_decision_key_ttl(d);
		sl_decision_free(d);
	}
}

void kmsd_handle_renew(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	struct ren r = {.ctx = ctx};
	uint8_t cd[32];
	char cdhex[65];
	if (kmsd_parse_release(req->body, req->len, &r.req) != SL_OK) {
		kmsd_bad_request(res);
		return;
	}
	r.reasons = json_array();
	if (r.reasons == NULL || sl_claims_new(&r.claims) != SL_OK) {
		kmsd_problem(res, 500, "internal", "Internal Server Error", "out of memory", NULL);
		goto out;
	}
	switch (kmsd_nonces_consume(ctx->nonces, r.req->nonce)) {
	case KMSD_NONCE_OK:
		break;
	case KMSD_NONCE_FAILED:
		r.store_failed = true;
		break;
	case KMSD_NONCE_USED:
		deny(&r, KMSD_D_NONCE_USED,
		     "nonce: already presented once (nonces are single-use)");
		break;
	case KMSD_NONCE_EXPIRED:
		deny(&r, KMSD_D_NONCE_EXPIRED, "nonce: expired");
		break;
	case KMSD_NONCE_UNKNOWN:
		deny(&r, KMSD_D_NONCE_UNKNOWN, "nonce: not issued by this server");
		break;
	}
	if (!r.store_failed && json_array_size(r.reasons) == 0)
		verify(&r);
	if (!r.store_failed && json_array_size(r.reasons) == 0)
		judge(&r);
	if (r.store_failed) {
		/* nothing decided: the client retries until its lease's grace ends */
		kmsd_store_failed(ctx, res, "lease renewal");
		goto out;
	}
	bool ok = json_array_size(r.reasons) == 0;
	json_t *keys = json_array();
	for (size_t i = 0; i < r.req->nkeys; i++)
		json_array_append_new(keys, json_pack("{s:s, s:s}", "key_id", r.req->keys[i].key_id,
		                                      "dataset_id", r.req->keys[i].dataset_id));
	json_t *lease = ok ? (r.ttl != 0 ? kmsd_lease_json(r.ttl) : json_null()) : NULL;
	sl_claims_digest(r.claims, cd);
	sl_hex_encode(cd, sizeof(cd), cdhex);
	json_t *details =
	    json_pack("{s:o, s:O, s:O?}", "keys", keys, "job", r.req->job, "lease", lease);
	if (details != NULL && req->source != NULL)
		json_object_set_new(details, "source", json_string(req->source));
	const kmsd_key_entry *one = r.req->nkeys == 1 ? &r.req->keys[0] : NULL;
	if (!kmsd_audit(ctx, SL_AUDIT_EV_RENEW, one ? one->key_id : NULL,
	                one ? one->dataset_id : NULL, ok ? SL_AUDIT_ALLOW : SL_AUDIT_DENY,
	                ok ? NULL : r.reasons, cdhex, details)) {
		json_decref(lease);
		kmsd_audit_failed(ctx, res, "lease renewal");
		goto out;
	}
	if (ok) {
		res->status = 200;
		/* no key_ttl in the policy in force now: no lease to keep */
		res->json = json_pack("{s:o}", "lease", lease);
		goto out;
	}
	char detail[128];
	snprintf(detail, sizeof(detail), "lease renewal refused: %zu reason%s",
	         json_array_size(r.reasons), json_array_size(r.reasons) == 1 ? "" : "s");
	kmsd_problem(res, 403, "denied", "Forbidden", detail, json_incref(r.reasons));
out:
	json_decref(r.reasons);
	sl_claims_free(r.claims);
	kmsd_release_req_free(r.req);
}
