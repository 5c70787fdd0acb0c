/* POST /v1/release: the attested key release.
 *
 * Order: a source refused too often is answered 429 before its body is
 * read; consume the nonce (any presentation uses it up); check the policy
 * digest; only when both pass (they cost nothing, verification costs
 * milliseconds) compute the binding; verify every evidence item and identity
 * document against it (the AK must be enrolled); evaluate the policy for
 * each requested key; only when nothing was refused, unwrap each DEK with
 * its KEK (AAD = key id + dataset id) and seal it to eph_pub. All or
 * nothing: one reason refuses the whole request, and the 403 lists every
 * reason found. */
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "seclaunch/json.h"
#include "seclaunch/audit.h"
#include "seclaunch/claims.h"
#include "seclaunch/identity.h"
#include "seclaunch/policy.h"

struct rel {
	kmsd_ctx *ctx;
	kmsd_release_req *req;
	json_t *reasons;
	sl_claims *claims;
	bool ak_refused;
	bool store_failed;       /* the state store could not answer: 503, no decision */
	bool nonce_taken;        /* this request used the nonce (given back on a 503) */
	char ak_hex[2 * 66 + 1]; /* the AK presented, enrolled or not (for the record) */
	bool ak_revoked;
	char revoked_name[2 * 66 + 1];
	uint64_t ttl;       /* smallest key_ttl of the decisions (0: none): the lease */
	bool verified;      /* the evidence was looked at (claims_digest means something) */
	const char *source; /* client address, or NULL */
	/* the output keys asked for with the keys (handlers_output.c) */
	kmsd_outputs_ask ask;
	const char *inputs[KMSD_MAX_KEYS];
	const char *out_keys[KMSD_MAX_OUTPUTS];
	/* the AK and key rows read with the nonce's use (one round trip) */
	kmsd_release_read rd;
};

_Static_assert(KMSD_MAX_KEYS <= KMSD_READ_KEYS, "every key of a release is read ahead");

static void deny(struct rel *r, enum kmsd_denial d, const kmsd_key_entry *key, const char *fmt, ...)
    SL_PRINTF(4, 5);

static void deny(struct rel *r, enum kmsd_denial d, const kmsd_key_entry *key, const char *fmt, ...)
{
	char detail[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	json_t *o = json_pack("{s:s, s:s}", "code", kmsd_denial_code(d), "detail", detail);
	if (o != NULL && key != NULL) {
		json_object_set_new(o, "key_id", json_string(key->key_id));
		json_object_set_new(o, "dataset_id", json_string(key->dataset_id));
	}
	json_array_append_new(r->reasons, o);
	kmsd_metrics_denial(r->ctx->metrics, d);
}

static bool ak_enrolled(const uint8_t *name, size_t len, void *cbctx)
{
	struct rel *r = cbctx;
	enum kmsd_ak_status st = KMSD_AK_UNKNOWN;
	if (len <= 66)
		sl_hex_encode(name, len, r->ak_hex);
	sl_err rc = kmsd_registry_lookup_read(r->ctx->registry, &r->rd, name, len, &st);
	if (rc == SL_E_SYSTEM)
		r->store_failed = true;
	else if (rc != SL_OK)
		kmsd_log(KMSD_LOG_ERR, "%s", sl_err_detail());
	if (st == KMSD_AK_REVOKED) {
		sl_hex_encode(name, len <= 66 ? len : 0, r->revoked_name);
		r->ak_revoked = true;
		return false;
	}
	if (st != KMSD_AK_ENROLLED)
		r->ak_refused = true;
	return st == KMSD_AK_ENROLLED;
}

/* What the store is asked with the nonce's use: the keys the request names
 * and the AKs its evidence names. Those names are not verified yet: a row
 * read here serves only the name the evidence then verifies to (registry.c
 * checks its MAC as it checks any AK row), any other is asked anew. */
static void read_ahead(struct rel *r)
{
	kmsd_release_read *rd = &r->rd;
	for (size_t i = 0; i < r->req->nkeys && rd->nkeys < KMSD_READ_KEYS; i++)
		rd->key[rd->nkeys++].id = r->req->keys[i].key_id;
	for (size_t i = 0; i < json_array_size(r->req->evidence) && rd->nak < KMSD_READ_AKS; i++) {
		const char *hex = sl_json_getstr(json_array_get(r->req->evidence, i), "ak_name");
		size_t len = hex != NULL ? strlen(hex) / 2 : 0;
		if (len == 0 || len > KMSD_AK_NAME_MAX || strlen(hex) != 2 * len)
			continue;
		if (sl_hex_decode(hex, rd->ak[rd->nak].name, len, "evidence.ak_name") != SL_OK) {
			sl_err_clear(); /* the verification reports it */
			continue;
		}
		rd->ak[rd->nak++].len = len;
	}
}

static void check_nonce(struct rel *r)
{
	read_ahead(r);
	switch (kmsd_nonces_consume_read(r->ctx->nonces, r->req->nonce, &r->rd)) {
	case KMSD_NONCE_OK:
		r->nonce_taken = true;
		break;
	case KMSD_NONCE_FAILED:
		r->store_failed = true;
		break;
	case KMSD_NONCE_USED:
		deny(r, KMSD_D_NONCE_USED, NULL,
		     "nonce: already presented once (nonces are single-use)");
		break;
	case KMSD_NONCE_EXPIRED:
		deny(r, KMSD_D_NONCE_EXPIRED, NULL, "nonce: expired (challenges live %u s)",
		     r->ctx->cfg->challenge_ttl_s);
		break;
	case KMSD_NONCE_UNKNOWN:
		deny(r, KMSD_D_NONCE_UNKNOWN, NULL,
		     "nonce: not issued by this server (or expired long ago)");
		break;
	}
}

static void check_evidence(struct rel *r, const uint8_t binding[static SL_BINDING_LEN])
{
	const kmsd_config *cfg = r->ctx->cfg;
	for (size_t i = 0; i < json_array_size(r->req->evidence); i++) {
		sl_claims *c = NULL;
		sl_verify_opts vo = {.expect = binding,
		                     .expect_len = SL_BINDING_LEN,
		                     .trust_dir = cfg->ak_ca_dir,
		                     .collateral_dir = cfg->collateral_dir,
		                     .ak_enrolled = ak_enrolled,
		                     .ak_enrolled_ctx = r};
		r->ak_refused = false;
		r->ak_revoked = false;
		kmsd_metrics_count(r->ctx->metrics, KMSD_C_EVIDENCE_VERIFIED);
		sl_err rc = sl_claims_new(&c);
		if (rc == SL_OK)
			rc = sl_evidence_verify(json_array_get(r->req->evidence, i), &vo, c);
		if (rc == SL_OK)
			rc = sl_evidence_merge(r->claims, c);
		if (rc != SL_OK) {
			enum kmsd_denial d = r->ak_revoked               ? KMSD_D_AK_REVOKED
			                     : r->ak_refused             ? KMSD_D_AK_UNKNOWN
			                     : rc == SL_E_ATTEST_BINDING ? KMSD_D_BINDING
			                                                 : KMSD_D_EVIDENCE;
			if (r->ak_revoked)
				deny(r, d, NULL,
				     "evidence[%zu]: AK %s was revoked by an administrator", i,
				     r->revoked_name);
			else
				deny(r, d, NULL, "evidence[%zu]: %s", i,
				     sl_err_detail()[0] ? sl_err_detail() : sl_err_message(rc));
		}
		sl_claims_free(c);
	}
	/* every item verified with expect = this request's binding (the tpm2
	 * kind reports the bound value itself rather than "verified") */
	if (json_array_size(r->reasons) == 0 &&
	    sl_claims_set(r->claims, "binding", "verified") != SL_OK)
		deny(r, KMSD_D_EVIDENCE, NULL, "claims: %s", sl_err_detail());
	for (size_t i = 0; i < json_array_size(r->req->identity); i++) {
		sl_identity_opts io = {.gcp_jwks = cfg->gcp_jwks,
		                       .aws_trust_dir = cfg->aws_trust_dir,
		                       .binding = binding,
		                       .binding_len = SL_BINDING_LEN};
		sl_err rc = sl_identity_verify(json_array_get(r->req->identity, i), &io, r->claims);
		if (rc != SL_OK)
			deny(r, KMSD_D_IDENTITY, NULL, "identity[%zu]: %s", i, sl_err_detail());
	}
}

static void check_policy(struct rel *r)
{
	for (size_t i = 0; i < r->req->nkeys; i++) {
		const kmsd_key_entry *k = &r->req->keys[i];
		sl_policy_request pr = {.dataset_id = k->dataset_id, .key_id = k->key_id};
		sl_decision *d = NULL;
		char why[300];
		int use = kmsd_kek_usable(r->ctx->kek, &r->rd, k->key_id, why, sizeof(why));
		if (use == KMSD_KEY_STORE_DOWN) {
			r->store_failed = true;
			return;
		}
		if (use != KMSD_KEY_USABLE) {
			deny(r, (enum kmsd_denial)use, k, "keys[%zu]: %s", i, why);
			continue;
		}
		if (sl_policy_evaluate(r->ctx->policy, r->claims, &pr, &d) != SL_OK) {
			deny(r, KMSD_D_POLICY, k, "keys[%zu]: policy evaluation failed: %s", i,
			     sl_err_detail());
			continue;
		}
		for (size_t j = 0; j < sl_decision_reason_count(d); j++)
			deny(r, KMSD_D_POLICY, k, "keys[%zu]: %s", i, sl_decision_reason(d, j));
		if (sl_decision_key_ttl(d) != 0 && (r->ttl == 0 || sl_decision_key_ttl(d) < r->ttl))
			r->ttl = sl_decision_key_ttl(d);
		if (!sl_decision_allowed(d) && sl_decision_reason_count(d) == 0)
			deny(r, KMSD_D_POLICY, k, "keys[%zu]: denied by policy", i);
		sl_decision_free(d);
	}
	if (r->req->noutputs == 0 || r->store_failed)
		return;
	/* the output keys, judged as POST /v1/output judges them: every key of
	 * the request (inputs and resumed checkpoints) is what was read */
	for (size_t i = 0; i < r->req->nkeys; i++)
		r->inputs[i] = r->req->keys[i].dataset_id;
	r->ask = (kmsd_outputs_ask){.job = r->req->job,
	                            .inputs = r->inputs,
	                            .ninputs = r->req->nkeys,
	                            .outputs = r->req->outputs,
	                            .noutputs = r->req->noutputs};
	kmsd_outputs_judge(r->ctx, &r->ask, r->reasons, r->claims, r->out_keys, &r->ttl,
	                   &r->store_failed);
}

/* Has every DEK unwrapped and sealed to eph_pub (by the key process: no
 * DEK is ever in this one) into out (an array); false when one fails. */
static bool release_keys(struct rel *r, json_t *out)
{
	bool ok = true;
	for (size_t i = 0; i < r->req->nkeys; i++) {
		const kmsd_key_entry *k = &r->req->keys[i];
		uint8_t sealed[KMSD_SEALED_LEN];
		char *s64 = NULL;
		sl_err rc = kmsd_kek_unwrap_seal(r->ctx->kek, k->key_id, k->dataset_id, k->wrapped,
		                                 k->wrapped_len, r->req->eph_pub, sealed);
		if (rc == SL_E_SYSTEM) {
			r->store_failed = true;
			ok = false;
			break;
		}
		if (rc != SL_OK) {
			deny(r,
			     rc == SL_E_INPUT         ? KMSD_D_KEY_UNKNOWN
			     : rc == SL_E_KMS_REFUSED ? KMSD_D_KEY_DISABLED
			                              : KMSD_D_UNWRAP,
			     k, "keys[%zu]: %s", i, sl_err_detail());
			ok = false;
			continue;
		}
		if (sl_b64_encode(sealed, sizeof(sealed), &s64) != SL_OK) {
			deny(r, KMSD_D_UNWRAP, k, "keys[%zu]: out of memory", i);
			ok = false;
		} else {
			json_array_append_new(out, json_pack("{s:s, s:s, s:s}", "key_id", k->key_id,
			                                     "dataset_id", k->dataset_id, "sealed",
			                                     s64));
		}
		free(s64);
	}
	return ok;
}

/* Measurement claims: what an auditor compares with the expected image. */
static bool is_measurement(const char *k)
{
	static const char *const exact[] = {
	    "snp.measurement",       "snp.host_data",     "snp.id_key_digest",
	    "snp.author_key_digest", "tdx.mrtd",          "tdx.mrconfigid",
	    "tdx.mrowner",           "tdx.mrownerconfig", NULL};
	for (size_t i = 0; exact[i]; i++)
		if (strcmp(k, exact[i]) == 0)
			return true;
	return strncmp(k, "tpm.pcr.", 8) == 0 || strncmp(k, "tdx.rtmr", 8) == 0 ||
	       strncmp(k, "gpu.measurement", 15) == 0 || strncmp(k, "nitro.pcr", 9) == 0;
}

/* Who asked, and what they proved (docs/audit.md, "Release records"): the
 * AK, the TEE kinds, the measurements, the region and whether a signed
 * document verified it, the client address, the workload identity, and
 * the whole claim set (attestation facts only: nothing secret is a claim).
 * ak_hint: the AK name presented when no verified claim names it (an
 * unenrolled AK). */
static json_t *kmsd_audit_subject(const sl_claims *c, const json_t *evidence, const char *source,
                                  const char *ak_hint)
{
	json_t *kinds = json_array(), *meas = json_object(), *work = json_object(), *all = NULL;
	const char *ak = sl_claims_get(c, "tpm.ak.name") ? sl_claims_get(c, "tpm.ak.name")
	                 : ak_hint && ak_hint[0]         ? ak_hint
	                                                 : NULL;
	const char *region = sl_claims_get(c, "cloud.region");
	const char *rv = sl_claims_get(c, "cloud.region_verified");
	for (size_t i = 0; i < json_array_size(evidence); i++) {
		const char *k = sl_json_getstr(json_array_get(evidence, i), "kind");
		if (k != NULL)
			json_array_append_new(kinds, json_string(k));
	}
	for (size_t i = 0; i < sl_claims_count(c); i++) {
		const char *k = sl_claims_key(c, i), *v = sl_claims_value(c, i);
		if (is_measurement(k))
			json_object_set_new(meas, k, json_string(v));
		else if (strncmp(k, "workload.", 9) == 0 || strncmp(k, "job.", 4) == 0)
			json_object_set_new(work, k, json_string(v));
	}
	if (sl_claims_to_json(c, &all) != SL_OK)
		all = json_null();
	return json_pack("{s:s?, s:o, s:o, s:s?, s:b, s:s?, s:o?, s:o}", "ak_name", ak, "tee_kinds",
	                 kinds, "measurements", meas, "region", region, "region_verified",
	                 rv != NULL && strcmp(rv, "true") == 0, "client", source, "workload",
	                 json_object_size(work) ? work : (json_decref(work), NULL), "claims", all);
}

static bool audit_release(struct rel *r, bool allowed)
{
	char cd[65];
	uint8_t digest[32];
	json_t *keys = json_array();
	for (size_t i = 0; i < r->req->nkeys; i++)
		json_array_append_new(keys,
		                      json_pack("{s:s, s:s}", "key_id", r->req->keys[i].key_id,
		                                "dataset_id", r->req->keys[i].dataset_id));
	const kmsd_key_entry *one = r->req->nkeys == 1 ? &r->req->keys[0] : NULL;
	json_t *details = json_pack("{s:o, s:O}", "keys", keys, "job", r->req->job);
	/* one record for the launch: the output keys beside the inputs' */
	kmsd_outputs_ask asked = {.outputs = r->req->outputs, .noutputs = r->req->noutputs};
	if (details != NULL && r->req->noutputs > 0)
		json_object_set_new(details, "outputs", kmsd_outputs_json(&asked, r->out_keys));
	json_t *subject = kmsd_audit_subject(r->claims, r->req->evidence, r->source, r->ak_hex);
	/* the digest of the claim set the subject carries (rendered once) */
	if (subject != NULL && json_is_object(json_object_get(subject, "claims")))
		sl_claims_json_digest(json_object_get(subject, "claims"), digest);
	else
		sl_claims_digest(r->claims, digest);
	sl_hex_encode(digest, sizeof(digest), cd);
	if (details != NULL && r->source != NULL)
		json_object_set_new(details, "source", json_string(r->source));
	/* whether a lease was granted, and for how long: the run holds its keys
	 * only while it renews (null: no key_ttl, the keys are held for good) */
	if (details != NULL && allowed)
		json_object_set_new(details, "lease",
		                    r->ttl != 0 ? json_pack("{s:I}", "key_ttl", (json_int_t)r->ttl)
		                                : json_null());
	if (details != NULL && subject != NULL)
		json_object_set_new(details, "subject", subject);
	else
		json_decref(subject);
	const char *job_id = sl_json_getstr(r->req->job, "id");
	return kmsd_audit_job(r->ctx, SL_AUDIT_EV_RELEASE, job_id, one ? one->key_id : NULL,
	                      one ? one->dataset_id : NULL,
	                      allowed ? SL_AUDIT_ALLOW : SL_AUDIT_DENY, allowed ? NULL : r->reasons,
	                      r->verified ? cd : NULL, details);
}

/* Records a refusal: in full, or counted into a summary when it is a cheap
 * one (decided before any evidence was verified) and another like it from
 * the same source was written in full in this window. false: it could not
 * be recorded (nor may it be counted while the log is failing). */
static bool record_refusal(kmsd_ctx *ctx, const char *source, const char *code, bool cheap,
                           bool (*write)(void *), void *arg)
{
	if (ctx->refusals == NULL)
		return write(arg);
	kmsd_refusals_charge(ctx->refusals, source);
	if (ctx->audit != NULL && cheap && !kmsd_refusals_note(ctx->refusals, source, code)) {
		kmsd_metrics_count(ctx->metrics, KMSD_C_AUDIT_AGGREGATED);
		return kmsd_refusals_audit_ok(ctx->refusals);
	}
	return write(arg);
}

static bool write_denial(void *arg)
{
	return audit_release(arg, false);
}

struct limited {
	kmsd_ctx *ctx;
	const char *source;
	const char *detail;
};

static bool write_limited(void *arg)
{
	struct limited *l = arg;
	json_t *why = json_pack("[{s:s, s:s}]", "code", kmsd_denial_code(KMSD_D_RATE_LIMITED),
	                        "detail", l->detail);
	bool ok = kmsd_audit(l->ctx, SL_AUDIT_EV_RELEASE, NULL, NULL, SL_AUDIT_DENY, why, NULL,
	                     json_pack("{s:s}", "source", l->source ? l->source : "unknown"));
	json_decref(why);
	return ok;
}

/* 429 before the body is read: this source was refused too often. */
static bool rate_limited(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	unsigned retry = 0;
	char detail[256];
	if (ctx->refusals == NULL || kmsd_refusals_admit(ctx->refusals, req->source, &retry))
		return false;
	kmsd_metrics_denial(ctx->metrics, KMSD_D_RATE_LIMITED);
	snprintf(detail, sizeof(detail),
	         "too many refused releases from %s (limit %u a minute); retry in %u s",
	         req->source ? req->source : "this address", ctx->cfg->refusal_rate_per_min, retry);
	struct limited l = {ctx, req->source, detail};
	bool recorded = true;
	if (ctx->audit == NULL) {
		recorded = true;
	} else if (kmsd_refusals_note(ctx->refusals, req->source,
	                              kmsd_denial_code(KMSD_D_RATE_LIMITED))) {
		recorded = write_limited(&l);
	} else {
		kmsd_metrics_count(ctx->metrics, KMSD_C_AUDIT_AGGREGATED);
		recorded = kmsd_refusals_audit_ok(ctx->refusals);
	}
	if (!recorded) {
		kmsd_audit_failed(ctx, res, "rate-limited release");
		return true;
	}
	kmsd_problem(res, 429, "rate-limited", "Too Many Requests", detail, NULL);
	res->retry_after = retry;
	return true;
}

/* The cheap checks first (nonce, policy digest): a request they refuse
 * costs no verification. Then every evidence item and identity document
 * against the request's binding; r->verified says whether that ran. */
static void attest(struct rel *r, bool check_digest)
{
	uint8_t binding[SL_BINDING_LEN];
	const uint8_t *want = sl_policy_digest(r->ctx->policy);
	check_nonce(r);
	if (check_digest && !sl_ct_eq(r->req->policy_digest, want, SL_SHA256_LEN)) {
		char have[65], mine[65];
		sl_hex_encode(r->req->policy_digest, SL_SHA256_LEN, have);
		sl_hex_encode(want, SL_SHA256_LEN, mine);
		deny(r, KMSD_D_POLICY_DIGEST, NULL,
		     "policy_digest: request binds policy %s but this server enforces %s (policy "
		     "version skew)",
		     have, mine);
	}
	if (json_array_size(r->reasons) != 0 || r->store_failed)
		return;
	sl_binding_compute(r->req->nonce, r->req->eph_pub, r->req->policy_digest, binding);
	check_evidence(r, binding);
	r->verified = true;
}

void kmsd_handle_release(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	struct rel r = {.ctx = ctx, .source = req->source};
	json_t *out = NULL, *outs = NULL;
	bool cheap = true;
	if (rate_limited(ctx, req, res))
		return;
	if (kmsd_parse_release(req->body, req->len, &r.req) != SL_OK) {
		if (ctx->refusals != NULL)
			kmsd_refusals_charge(ctx->refusals, req->source);
		kmsd_bad_request(res);
		return;
	}
	r.reasons = json_array();
	out = json_array();
	if (r.reasons == NULL || out == NULL || sl_claims_new(&r.claims) != SL_OK) {
		kmsd_problem(res, 500, "internal", "Internal Server Error", "out of memory", NULL);
		goto out;
	}
	attest(&r, true);
	cheap = !r.verified;
	if (json_array_size(r.reasons) == 0 && !r.store_failed)
		check_policy(&r);
	outs = json_array();
	if (outs == NULL) {
		kmsd_problem(res, 500, "internal", "Internal Server Error", "out of memory", NULL);
		goto out;
	}
	if (json_array_size(r.reasons) == 0 && !r.store_failed && release_keys(&r, out) &&
	    !r.store_failed &&
	    (r.req->noutputs == 0 ||
	     kmsd_outputs_issue(ctx, &r.ask, r.out_keys, r.req->eph_pub, r.reasons, outs))) {
		if (!audit_release(&r, true)) {
			/* no record, no keys: the sealed DEKs are dropped unsent, and
			 * nothing was decided (the nonce is unused again) */
			kmsd_nonces_give_back(ctx->nonces, r.req->nonce);
			kmsd_audit_failed(ctx, res, "key release");
			goto out;
		}
		kmsd_metrics_release(ctx->metrics, r.req->nkeys);
		res->status = 200;
		res->json = json_pack("{s:O}", "keys", out);
		if (res->json != NULL && r.req->noutputs > 0)
			json_object_set(res->json, "outputs", outs);
		if (res->json != NULL && r.ttl != 0)
			json_object_set_new(res->json, "lease", kmsd_lease_json(r.ttl));
		goto out;
	}
	if (r.store_failed) {
		/* nothing decided: neither keys nor a refusal that would be recorded,
		 * and the nonce is unused again for the identical retry */
		if (r.nonce_taken)
			kmsd_nonces_give_back(ctx->nonces, r.req->nonce);
		kmsd_store_failed(ctx, res, "key release");
		goto out;
	}
	const char *code = sl_json_getstr(json_array_get(r.reasons, 0), "code");
	if (!record_refusal(ctx, req->source, code ? code : "", cheap, write_denial, &r)) {
		kmsd_audit_failed(ctx, res, "key release refusal");
		goto out;
	}
	char detail[256];
	snprintf(detail, sizeof(detail), "key release refused: %zu reason%s",
	         json_array_size(r.reasons), json_array_size(r.reasons) == 1 ? "" : "s");
	kmsd_problem(res, 403, "denied", "Forbidden", detail, json_incref(r.reasons));
out:
	if (out != NULL) {
		/* sealed DEKs are safe to leave, but keep the heap clean anyway */
		json_decref(out);
	}
	json_decref(outs);
	json_decref(r.reasons);
	sl_claims_free(r.claims);
	kmsd_release_req_free(r.req);
}

void kmsd_release_judge(kmsd_ctx *ctx, const kmsd_release_req *req, json_t *reasons,
                        sl_claims *claims, uint64_t *ttl, bool *store_failed)
{
	struct rel r = {
	    .ctx = ctx, .req = (kmsd_release_req *)req, .reasons = reasons, .claims = claims};
	check_policy(&r);
	*ttl = r.ttl;
	*store_failed = r.store_failed;
}

void kmsd_release_attest(kmsd_ctx *ctx, const kmsd_release_req *req, json_t *reasons,
                         sl_claims *claims, const kmsd_attest_opts *o)
{
	struct rel r = {
	    .ctx = ctx, .req = (kmsd_release_req *)req, .reasons = reasons, .claims = claims};
	attest(&r, o->check_digest);
	*o->verified = r.verified;
	*o->store_failed = r.store_failed;
}
