/* POST /v1/renew: a lease renewal (docs/protocol.md, Leases).
 *
 * The request is a release request (fresh nonce, a fresh eph_pub that
 * opens nothing, fresh evidence bound to SHA-256("seclaunch-bind-v1" ||
 * nonce || eph_pub || policy_digest), the keys the lease covers) whose job
 * names the lease. Nothing is unwrapped or sealed. What differs from a
 * release: the policy judged is the one in force now (after a reload), not
 * the one the client holds, so a changed policy ends leases instead of
 * failing them as version skew; the AK must be enrolled and not revoked; each
 * key must still exist; each output key asked for ("outputs") is judged as
 * at the release (destination, run binding), none is issued. Allowed: a new lease from now.
 * Refused: 403 with every reason, and the client stops the job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "seclaunch/audit.h"
#include "seclaunch/json.h"
#include "seclaunch/policy.h"

struct ren {
	kmsd_ctx *ctx;
	kmsd_release_req *req;
	json_t *reasons;
	sl_claims *claims;
	bool store_failed; /* the state store could not answer: 503, no decision */
	uint64_t ttl;
};

struct ren_rec {
	struct ren *r;
	const kmsd_request *req;
	bool ok;
	json_t *lease; /* borrowed */
	const char *cd;
};

static bool audit_renew(void *arg)
{
	struct ren_rec *w = arg;
	struct ren *r = w->r;
	json_t *keys = json_array();
	for (size_t i = 0; i < r->req->nkeys; i++)
		json_array_append_new(keys,
		                      json_pack("{s:s, s:s}", "key_id", r->req->keys[i].key_id,
		                                "dataset_id", r->req->keys[i].dataset_id));
	json_t *details =
	    json_pack("{s:o, s:O, s:O?}", "keys", keys, "job", r->req->job, "lease", w->lease);
	/* the lease covers the run's output keys too */
	kmsd_outputs_ask ask = {.outputs = r->req->outputs, .noutputs = r->req->noutputs};
	if (details != NULL && r->req->noutputs > 0)
		json_object_set_new(details, "outputs", kmsd_outputs_json(&ask, NULL));
	if (details != NULL && w->req->source != NULL)
		json_object_set_new(details, "source", json_string(w->req->source));
	const kmsd_key_entry *one = r->req->nkeys == 1 ? &r->req->keys[0] : NULL;
	return kmsd_audit(r->ctx, SL_AUDIT_EV_RENEW, one ? one->key_id : NULL,
	                  one ? one->dataset_id : NULL, w->ok ? SL_AUDIT_ALLOW : SL_AUDIT_DENY,
	                  w->ok ? NULL : r->reasons, w->cd, details);
}

void kmsd_handle_renew(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	struct ren r = {.ctx = ctx};
	uint8_t cd[32];
	char cdhex[65];
	json_t *lease = NULL;
	/* a source refused too often is slowed down as for releases */
	if (kmsd_refusal_limited(ctx, req, res, SL_AUDIT_EV_RENEW, "lease renewal"))
		return;
	if (kmsd_parse_release(req->body, req->len, &r.req) != SL_OK) {
		if (ctx->refusals != NULL)
			kmsd_refusals_charge(ctx->refusals, req->source);
		kmsd_bad_request(res);
		return;
	}
	r.reasons = json_array();
	if (r.reasons == NULL || sl_claims_new(&r.claims) != SL_OK) {
		kmsd_problem(res, 500, "internal", "Internal Server Error", "out of memory", NULL);
		goto out;
	}
	/* the attestation of a release, but judged by the policy in force now:
	 * policy_digest only enters the binding */
	bool verified = false;
	kmsd_release_attest(ctx, r.req, r.reasons, r.claims,
	                    &(kmsd_attest_opts){.check_digest = false,
	                                        .verified = &verified,
	                                        .store_failed = &r.store_failed});
	if (!r.store_failed && json_array_size(r.reasons) == 0)
		kmsd_release_judge(ctx, r.req, r.reasons, r.claims, &r.ttl, &r.store_failed);
	if (r.store_failed) {
		/* nothing decided: the client retries until its lease's grace ends */
		kmsd_store_failed(ctx, res, "lease renewal");
		goto out;
	}
	bool ok = json_array_size(r.reasons) == 0;
	lease = ok ? (r.ttl != 0 ? kmsd_lease_json(r.ttl) : json_null()) : NULL;
	sl_claims_digest(r.claims, cd);
	sl_hex_encode(cd, sizeof(cd), cdhex);
	struct ren_rec w = {.r = &r, .req = req, .ok = ok, .lease = lease, .cd = cdhex};
	if (ok) {
		if (!audit_renew(&w)) {
			kmsd_audit_failed(ctx, res, "lease renewal");
			goto out;
		}
		res->status = 200;
		/* no key_ttl in the policy in force now: no lease to keep */
		res->json = json_pack("{s:O}", "lease", lease);
		goto out;
	}
	/* refused: charged, and a cheap refusal (before any evidence was
	 * verified) is counted once one like it was written in this window */
	const char *code = sl_json_getstr(json_array_get(r.reasons, 0), "code");
	if (!kmsd_refusal_record(ctx, req->source, SL_AUDIT_EV_RENEW, code ? code : "", !verified,
	                         audit_renew, &w)) {
		kmsd_audit_failed(ctx, res, "lease renewal refusal");
		goto out;
	}
	char detail[128];
	snprintf(detail, sizeof(detail), "lease renewal refused: %zu reason%s",
	         json_array_size(r.reasons), json_array_size(r.reasons) == 1 ? "" : "s");
	kmsd_problem(res, 403, "denied", "Forbidden", detail, json_incref(r.reasons));
out:
	json_decref(lease);
	json_decref(r.reasons);
	sl_claims_free(r.claims);
	kmsd_release_req_free(r.req);
}
