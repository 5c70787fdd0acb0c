/* The pieces of an answer every handler shares: problem JSON, bearer-token
 * scopes, audit records (granting answers only once recorded), refusal
 * limits and their summaries, the 503s, the lease. routes.c dispatches to
 * the handlers; the handlers call only this file of the two, so no file
 * depends back on the one that calls it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "seclaunch/json.h"
#include "seclaunch/audit.h"
#include "seclaunch/policy.h"

void kmsd_problem(kmsd_response *res, unsigned status, const char *slug, const char *title,
                  const char *detail, json_t *reasons)
{
	char type[96];
	snprintf(type, sizeof(type), "urn:seclaunch:kms:%s", slug);
	json_decref(res->json);
	res->status = status;
	res->problem = true;
	res->json = json_pack("{s:s, s:s, s:i, s:s}", "type", type, "title", title, "status",
	                      (int)status, "detail", detail != NULL ? detail : title);
	if (res->json != NULL && reasons != NULL)
		json_object_set_new(res->json, "reasons", reasons);
	else
		json_decref(reasons);
}

void kmsd_bad_request(kmsd_response *res)
{
	kmsd_problem(res, 400, "bad-request", "Bad Request", sl_err_detail(), NULL);
}

static const char *const scope_names[KMSD_SCOPE__COUNT] = {"metrics", "wrap", "operate", "admin"};

const char *kmsd_scope_name(enum kmsd_scope s)
{
	return s < KMSD_SCOPE__COUNT ? scope_names[s] : "none";
}

sl_err kmsd_tokens_load(kmsd_ctx *ctx, const kmsd_config *c)
{
	sl_err rc = SL_E_INPUT;
	const struct {
		const char *key, *path;
	} files[KMSD_SCOPE__COUNT] = {
	    [KMSD_SCOPE_METRICS] = {"metrics_token_file", c->metrics_token_file},
	    [KMSD_SCOPE_WRAP] = {"wrap_token_file", c->wrap_token_file},
	    [KMSD_SCOPE_OPERATE] = {"operate_token_file", c->operate_token_file},
	    [KMSD_SCOPE_ADMIN] = {"admin_token_file", c->admin_token_file},
	};
	sl_secret *t = NULL;
	SL_ENSURE(c->admin_token_file != NULL, SL_E_INPUT,
	          "config: \"admin_token_file\" is required");
	for (int s = 0; s < KMSD_SCOPE__COUNT; s++) {
		ctx->token_set[s] = false;
		if (files[s].path == NULL)
			continue;
		rc = sl_secret_read_token(files[s].path, &t);
		if (rc != SL_OK) {
			rc = sl_err_wrap(rc, "\"%s\"", files[s].key);
			goto out;
		}
		sl_sha256(sl_secret_data(t), sl_secret_len(t), ctx->token_sha256[s]);
		sl_secret_free(t);
		t = NULL;
		ctx->token_set[s] = true;
		/* one token, one scope: a shared one would make its scope ambiguous */
		for (int o = 0; o < s; o++)
			SL_ENSURE(!ctx->token_set[o] ||
			              !sl_ct_eq(ctx->token_sha256[o], ctx->token_sha256[s], 32),
			          SL_E_INPUT,
			          "config: \"%s\" (%s) and \"%s\" (%s) hold the same token; each "
			          "scope needs a token of its own",
			          files[o].key, files[o].path, files[s].key, files[s].path);
	}
	rc = SL_OK;
out:
	sl_secret_free(t);
	return rc;
}

/* The scope of the presented token: every configured token is compared
 * (constant time, no early exit); KMSD_SCOPE__COUNT when none matches. */
static enum kmsd_scope token_scope(const kmsd_ctx *ctx, const char *token)
{
	uint8_t h[32];
	enum kmsd_scope found = KMSD_SCOPE__COUNT;
	/* comparing digests keeps the comparison constant-time whatever the length */
	sl_sha256(token, strlen(token), h);
	for (int s = 0; s < KMSD_SCOPE__COUNT; s++) {
		bool eq = sl_ct_eq(h, ctx->token_sha256[s], sizeof(h));
		if (eq && ctx->token_set[s])
			found = (enum kmsd_scope)s;
	}
	sl_wipe(h, sizeof(h));
	return found;
}

bool kmsd_authorize(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res,
                    enum kmsd_scope need, const char *what, const char *event, const char *key_id)
{
	static const char prefix[] = "Bearer ";
	const char *a = req->authorization;
	char d[300];
	enum kmsd_scope have = KMSD_SCOPE__COUNT;
	if (a == NULL || strncmp(a, prefix, sizeof(prefix) - 1) != 0) {
		snprintf(d, sizeof(d),
		         "%s needs a token of scope %s: missing \"Authorization: Bearer <token>\"",
		         what, kmsd_scope_name(need));
		kmsd_problem(res, 401, "unauthorized", "Unauthorized", d, NULL);
	} else if ((have = token_scope(ctx, a + sizeof(prefix) - 1)) == KMSD_SCOPE__COUNT) {
		snprintf(d, sizeof(d), "%s: the bearer token is not one of seclaunchd's tokens",
		         what);
		kmsd_problem(res, 401, "unauthorized", "Unauthorized", d, NULL);
	} else if (have == need || have == KMSD_SCOPE_ADMIN) {
		return true;
	} else {
		snprintf(d, sizeof(d), "this token has scope %s; %s needs %s",
		         kmsd_scope_name(have), what, kmsd_scope_name(need));
		kmsd_problem(res, 403, "insufficient-scope", "Forbidden", d, NULL);
		json_object_set_new(res->json, "scope", json_string(kmsd_scope_name(have)));
		json_object_set_new(res->json, "needs", json_string(kmsd_scope_name(need)));
	}
	/* a refused token is recorded: it is someone trying keys */
	json_t *why = json_pack("[s]", d);
	json_t *details = json_pack("{s:s, s:s, s:s?}", "endpoint", what, "needs",
	                            kmsd_scope_name(need), "source", req->source);
	if (details != NULL && have != KMSD_SCOPE__COUNT)
		json_object_set_new(details, "scope", json_string(kmsd_scope_name(have)));
	if (!kmsd_audit(ctx, event, key_id, NULL, SL_AUDIT_DENY, why, NULL, details))
		kmsd_audit_failed(ctx, res, event);
	json_decref(why);
	return false;
}

bool kmsd_audit(kmsd_ctx *ctx, const char *event, const char *key_id, const char *dataset_id,
                const char *decision, json_t *reasons, const char *claims_digest, json_t *details)
{
	return kmsd_audit_job(ctx, event, NULL, key_id, dataset_id, decision, reasons,
	                      claims_digest, details);
}

bool kmsd_audit_job(kmsd_ctx *ctx, const char *event, const char *job_id, const char *key_id,
                    const char *dataset_id, const char *decision, json_t *reasons,
                    const char *claims_digest, json_t *details)
{
	bool ok = true;
	if (ctx->audit == NULL) {
		json_decref(details);
		return true;
	}
	/* the counts of every open window go into the log before it closes */
	if (strcmp(event, SL_AUDIT_EV_KMS_STOP) == 0)
		kmsd_flush_refusals(ctx, true);
	if (details == NULL)
		details = json_object();
	if (details != NULL && ctx->policy != NULL && sl_policy_is_dev(ctx->policy))
		json_object_set_new(details, "development_policy", json_true());
	sl_audit_record r = {
	    .event = event,
	    .job_id = job_id,
	    .key_id = key_id,
	    .dataset_id = dataset_id,
	    .decision = decision,
	    .reasons = reasons,
	    .claims_digest = claims_digest,
	    .policy_digest = ctx->policy != NULL ? sl_policy_digest_hex(ctx->policy) : NULL,
	    .details = details,
	};
	if (sl_audit_append(ctx->audit, &r) != SL_OK) {
		kmsd_log(KMSD_LOG_ERR, "audit: %s", sl_err_detail());
		ok = false;
	}
	if (ctx->refusals != NULL)
		kmsd_refusals_audit_state(ctx->refusals, ok);
	json_decref(details);
	return ok;
}

void kmsd_audit_failed(kmsd_ctx *ctx, kmsd_response *res, const char *what)
{
	char d[200];
	snprintf(d, sizeof(d),
	         "%s: the audit record could not be written, so no decision was given; retry "
	         "later",
	         what);
	kmsd_metrics_count(ctx->metrics, KMSD_C_AUDIT_UNRECORDED);
	kmsd_problem(res, 503, "audit-unavailable", "Audit Log Unavailable", d, NULL);
	res->retry_after = 5;
}

/* Writes the refusal summaries that are due (all when force: at stop);
 * false when one could not be written (they are kept for the next try). */
bool kmsd_flush_refusals(kmsd_ctx *ctx, bool force)
{
	json_t *sums, *s;
	bool ok = true;
	if (ctx->refusals == NULL || ctx->audit == NULL ||
	    (sums = kmsd_refusals_take(ctx->refusals, force)) == NULL)
		return true;
	/* written one by one, in order; what could not be written goes back */
	while (ok && json_array_size(sums) > 0) {
		s = json_array_get(sums, 0);
		char detail[256];
		snprintf(detail, sizeof(detail),
		         "%lld further refusal%s (%s) from %s between %s and %s, counted, not "
		         "written one by one",
		         (long long)json_integer_value(json_object_get(s, "count")),
		         json_integer_value(json_object_get(s, "count")) == 1 ? "" : "s",
		         sl_json_getstr(s, "reason"), sl_json_getstr(s, "source"),
		         sl_json_getstr(s, "first"), sl_json_getstr(s, "last"));
		json_t *why = json_pack("[{s:s, s:s}]", "code", sl_json_getstr(s, "reason"),
		                        "detail", detail);
		json_t *details = json_pack("{s:O}", "aggregated", s);
		if (details != NULL && ctx->policy != NULL && sl_policy_is_dev(ctx->policy))
			json_object_set_new(details, "development_policy", json_true());
		const char *ev = sl_json_getstr(s, "event");
		sl_audit_record r = {
		    .event = ev != NULL ? ev : SL_AUDIT_EV_RELEASE,
		    .decision = SL_AUDIT_DENY,
		    .reasons = why,
		    .policy_digest = ctx->policy != NULL ? sl_policy_digest_hex(ctx->policy) : NULL,
		    .details = details,
		};
		if (why == NULL || details == NULL || sl_audit_append(ctx->audit, &r) != SL_OK) {
			fprintf(stderr, "seclaunchd: audit: refusal summary: %s\n",
			        sl_err_detail());
			ok = false;
		} else {
			json_array_remove(sums, 0);
		}
		json_decref(why);
		json_decref(details);
	}
	kmsd_refusals_audit_state(ctx->refusals, ok);
	if (json_array_size(sums) > 0)
		kmsd_refusals_putback(ctx->refusals, sums);
	else
		json_decref(sums);
	return ok;
}

bool kmsd_refusal_record(kmsd_ctx *ctx, const char *source, const char *event, const char *code,
                         bool cheap, bool (*write)(void *), void *arg)
{
	if (ctx->refusals == NULL)
		return write(arg);
	kmsd_refusals_charge(ctx->refusals, source);
	if (ctx->audit != NULL && cheap &&
	    !kmsd_refusals_note_event(ctx->refusals, source, event, code)) {
		kmsd_metrics_count(ctx->metrics, KMSD_C_AUDIT_AGGREGATED);
		return kmsd_refusals_audit_ok(ctx->refusals);
	}
	return write(arg);
}

bool kmsd_refusal_limited(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res,
                          const char *event, const char *what)
{
	unsigned retry = 0;
	char detail[256];
	const char *code = kmsd_denial_code(KMSD_D_RATE_LIMITED);
	bool recorded = true;
	if (ctx->refusals == NULL || kmsd_refusals_admit(ctx->refusals, req->source, &retry))
		return false;
	kmsd_metrics_denial(ctx->metrics, KMSD_D_RATE_LIMITED);
	snprintf(detail, sizeof(detail),
	         "too many refused attested requests from %s (limit %u a minute); %s refused; "
	         "retry in %u s",
	         req->source ? req->source : "this address", ctx->cfg->refusal_rate_per_min, what,
	         retry);
	if (ctx->audit != NULL &&
	    kmsd_refusals_note_event(ctx->refusals, req->source, event, code)) {
		json_t *why = json_pack("[{s:s, s:s}]", "code", code, "detail", detail);
		recorded =
		    kmsd_audit(ctx, event, NULL, NULL, SL_AUDIT_DENY, why, NULL,
		               json_pack("{s:s}", "source", req->source ? req->source : "unknown"));
		json_decref(why);
	} else if (ctx->audit != NULL) {
		kmsd_metrics_count(ctx->metrics, KMSD_C_AUDIT_AGGREGATED);
		recorded = kmsd_refusals_audit_ok(ctx->refusals);
	}
	if (!recorded) {
		kmsd_audit_failed(ctx, res, what);
		return true;
	}
	kmsd_problem(res, 429, "rate-limited", "Too Many Requests", detail, NULL);
	res->retry_after = retry;
	return true;
}

void kmsd_store_failed(kmsd_ctx *ctx, kmsd_response *res, const char *what)
{
	char d[600];
	(void)ctx;
	snprintf(d, sizeof(d),
	         "%s: the state store is unavailable, so no decision was made; retry later (%s)",
	         what, sl_err_detail());
	fprintf(stderr, "seclaunchd: %s\n", d);
	kmsd_problem(res, 503, "store-unavailable", "State Store Unavailable", d, NULL);
	res->retry_after = 2;
}

json_t *kmsd_lease_json(uint64_t ttl_s)
{
	char when[32];
	time_t exp = time(NULL) + (time_t)ttl_s;
	sl_time_rfc3339(exp, when, sizeof(when));
	return json_pack("{s:I, s:I, s:s}", "ttl", (json_int_t)ttl_s, "expires_unix",
	                 (json_int_t)exp, "expires", when);
}
