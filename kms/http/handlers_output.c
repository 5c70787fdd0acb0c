/* POST /v1/output, the compatibility path for output keys
 * (docs/protocol.md): the same attestation as a release
 * (kmsd_release_attest: single-use nonce, policy digest, evidence and
 * identity bound to nonce + eph_pub + policy digest, enrolled AK), then the
 * outputs judged and issued as a release judges them (outputs_judge.c);
 * audited with every destination. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "seclaunch/audit.h"
#include "seclaunch/json.h"
#include "seclaunch/util.h"

struct outreq {
	kmsd_ctx *ctx;
	kmsd_output_req *req;
	kmsd_outputs_ask ask;
	const char *inputs[KMSD_MAX_KEYS];
	const char *keys[KMSD_MAX_OUTPUTS];
	json_t *reasons;
	sl_claims *claims;
	bool store_failed;
};

static bool audit_output(struct outreq *o, bool allowed, bool verified)
{
	char cd[65];
	uint8_t digest[32];
	json_t *inputs = json_array();
	for (size_t i = 0; i < o->req->ninputs; i++)
		json_array_append_new(inputs, json_string(o->req->inputs[i]));
	sl_claims_digest(o->claims, digest);
	sl_hex_encode(digest, sizeof(digest), cd);
	const kmsd_output_entry *one = o->req->noutputs == 1 ? &o->req->outputs[0] : NULL;
	json_t *details =
	    json_pack("{s:o, s:o, s:O}", "outputs", kmsd_outputs_json(&o->ask, o->keys), "inputs",
	              inputs, "job", o->req->att->job);
	return kmsd_audit(o->ctx, SL_AUDIT_EV_OUTPUT, one ? o->keys[0] : NULL,
	                  one ? one->output_id : NULL, allowed ? SL_AUDIT_ALLOW : SL_AUDIT_DENY,
	                  allowed ? NULL : o->reasons, verified ? cd : NULL, details);
}

struct out_rec {
	struct outreq *o;
	bool verified;
};

static bool write_refusal(void *arg)
{
	struct out_rec *w = arg;
	return audit_output(w->o, false, w->verified);
}

void kmsd_handle_output(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	struct outreq o = {.ctx = ctx};
	json_t *out = NULL;
	bool verified = false;
	uint64_t ttl = 0;
	char detail[256];

	/* a source refused too often is slowed down as for releases */
	if (kmsd_refusal_limited(ctx, req, res, SL_AUDIT_EV_OUTPUT, "output key request"))
		return;
	if (kmsd_parse_output(req->body, req->len, &o.req) != SL_OK) {
		if (ctx->refusals != NULL)
			kmsd_refusals_charge(ctx->refusals, req->source);
		kmsd_bad_request(res);
		return;
	}
	for (size_t i = 0; i < o.req->ninputs; i++)
		o.inputs[i] = o.req->inputs[i];
	o.ask = (kmsd_outputs_ask){.job = o.req->att->job,
	                           .inputs = o.inputs,
	                           .ninputs = o.req->ninputs,
	                           .outputs = o.req->outputs,
	                           .noutputs = o.req->noutputs};
	o.reasons = json_array();
	out = json_array();
	if (o.reasons == NULL || out == NULL || sl_claims_new(&o.claims) != SL_OK) {
		kmsd_problem(res, 500, "internal", "Internal Server Error", "out of memory", NULL);
		goto out;
	}
	kmsd_release_attest(ctx, o.req->att, o.reasons, o.claims,
	                    &(kmsd_attest_opts){.check_digest = true,
	                                        .verified = &verified,
	                                        .store_failed = &o.store_failed});
	if (!o.store_failed && json_array_size(o.reasons) == 0)
		kmsd_outputs_judge(ctx, &o.ask, o.reasons, o.claims, o.keys, &ttl, &o.store_failed);
	if (o.store_failed) {
		/* nothing decided: no key, no refusal to record */
		kmsd_store_failed(ctx, res, "output key");
		goto out;
	}
	if (json_array_size(o.reasons) == 0 &&
	    kmsd_outputs_issue(ctx, &o.ask, o.keys, o.req->att->eph_pub, o.reasons, out)) {
		if (!audit_output(&o, true, verified)) {
			/* no record, no keys */
			kmsd_audit_failed(ctx, res, "output key");
			goto out;
		}
		res->status = 200;
		res->json = json_pack("{s:O}", "outputs", out);
		goto out;
	}
	/* charged, and a cheap refusal (before any evidence was verified) is
	 * counted once one like it was written in this window */
	const char *code = sl_json_getstr(json_array_get(o.reasons, 0), "code");
	struct out_rec w = {&o, verified};
	if (!kmsd_refusal_record(ctx, req->source, SL_AUDIT_EV_OUTPUT, code ? code : "", !verified,
	                         write_refusal, &w)) {
		kmsd_audit_failed(ctx, res, "output key refusal");
		goto out;
	}
	snprintf(detail, sizeof(detail), "output key refused: %zu reason%s",
	         json_array_size(o.reasons), json_array_size(o.reasons) == 1 ? "" : "s");
	kmsd_problem(res, 403, "denied", "Forbidden", detail, json_incref(o.reasons));
out:
	json_decref(out);
	json_decref(o.reasons);
	sl_claims_free(o.claims);
	kmsd_output_req_free(o.req);
}
