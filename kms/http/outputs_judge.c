/* Output keys judged and issued (docs/protocol.md), for a release that
 * carries "outputs" (the launch's one request), for each renewal, and for
 * POST /v1/output, the compatibility path: one code path for the three.
 *
 * For each output asked for: the policy names the one KEK that serves the
 * output id ($.keys); the output id's own rules and every input dataset's
 * rules must allow this machine and list the destination in
 * output_destinations, whose region must pass their region rules. Only when
 * nothing was refused: a fresh DEK per output, wrapped under that KEK (AAD =
 * key id + output id, as every wrapped DEK) and sealed to eph_pub. All or
 * nothing.
 *
 * Output ids belong to the run that attested: each must be NAME:RUN with
 * RUN the request's job.id, and a run id is bound, at its first granted
 * output keys, to the attested subject (machine identity and workload
 * identity: run_subject). A later request naming that run from another
 * subject is refused (output_run_mismatch), so one run cannot be issued the
 * output key of another run's output id, nor write outputs in its name. */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "seclaunch/audit.h"
#include "seclaunch/json.h"
#include "seclaunch/policy.h"

struct outctx {
	kmsd_ctx *ctx;
	const kmsd_outputs_ask *a;
	json_t *reasons;
	const sl_claims *claims;
	const char **keys; /* the KEK of each output */
	uint64_t ttl;      /* smallest key_ttl of the decisions (0: none) */
	bool store_failed; /* the state store could not answer: 503 */
};

static void deny(struct outctx *o, enum kmsd_denial d, size_t i, const char *fmt, ...)
    SL_PRINTF(4, 5);

static void deny(struct outctx *o, enum kmsd_denial d, size_t i, const char *fmt, ...)
{
	char detail[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	json_t *r = json_pack("{s:s, s:s, s:s, s:s}", "code", kmsd_denial_code(d), "detail", detail,
	                      "output_id", o->a->outputs[i].output_id, "destination",
	                      o->a->outputs[i].destination);
	json_array_append_new(o->reasons, r);
	kmsd_metrics_denial(o->ctx->metrics, d);
}

/* One decision's reasons become denials of output i, prefixed by what was
 * evaluated. */
static void evaluate(struct outctx *o, size_t i, const sl_policy_request *pr, const char *what)
{
	sl_decision *d = NULL;
	if (sl_policy_evaluate(o->ctx->policy, o->claims, pr, &d) != SL_OK) {
		deny(o, KMSD_D_POLICY, i, "outputs[%zu]: %s: policy evaluation failed: %s", i, what,
		     sl_err_detail());
		return;
	}
	for (size_t j = 0; j < sl_decision_reason_count(d); j++)
		deny(o, KMSD_D_POLICY, i, "outputs[%zu]: %s: %s", i, what,
		     sl_decision_reason(d, j));
	if (!sl_decision_allowed(d) && sl_decision_reason_count(d) == 0)
		deny(o, KMSD_D_POLICY, i, "outputs[%zu]: %s: denied by policy", i, what);
	if (sl_decision_key_ttl(d) != 0 && (o->ttl == 0 || sl_decision_key_ttl(d) < o->ttl))
		o->ttl = sl_decision_key_ttl(d);
	sl_decision_free(d);
}

static void check_policy(struct outctx *o)
{
	char what[600];
	for (size_t i = 0; i < o->a->noutputs; i++) {
		const kmsd_output_entry *e = &o->a->outputs[i];
		const char *key = NULL;
		const char *dest[1] = {e->destination};
		if (sl_policy_output_key(o->ctx->policy, e->output_id, &key) != SL_OK) {
			/* the development policy names no key: the client's choice then */
			if (!sl_policy_is_dev(o->ctx->policy) || e->key_id[0] == '\0') {
				deny(o, KMSD_D_POLICY, i, "outputs[%zu]: %s", i, sl_err_detail());
				continue;
			}
			key = e->key_id;
		}
		if (e->key_id[0] != '\0' && strcmp(e->key_id, key) != 0) {
			deny(o, KMSD_D_POLICY, i,
			     "outputs[%zu]: key '%s' asked for, but the policy names '%s' for "
			     "output "
			     "'%s'",
			     i, e->key_id, key, e->output_id);
			continue;
		}
		char why[300];
		int use = kmsd_kek_usable(o->ctx->kek, NULL, key, why, sizeof(why));
		if (use == KMSD_KEY_STORE_DOWN) {
			o->store_failed = true;
			return;
		}
		if (use != KMSD_KEY_USABLE) {
			deny(o, (enum kmsd_denial)use, i, "outputs[%zu]: %s", i, why);
			continue;
		}
		o->keys[i] = key;
		sl_policy_request pr = {
		    .dataset_id = e->output_id, .key_id = key, .outputs = dest, .n_outputs = 1};
		snprintf(what, sizeof(what), "output '%s'", e->output_id);
		evaluate(o, i, &pr, what);
		/* what was read decides where its derivatives may go */
		for (size_t j = 0; j < o->a->ninputs; j++) {
			sl_policy_request ir = {
			    .dataset_id = o->a->inputs[j], .outputs = dest, .n_outputs = 1};
			snprintf(what, sizeof(what), "input '%s'", o->a->inputs[j]);
			evaluate(o, i, &ir, what);
		}
	}
}

/* Who attested, as far as the claims tell: the machine (AK, SEV-SNP chip and
 * report id, TDX TD measurement, cloud instance) and the workload. */
static void run_subject(const sl_claims *c, uint8_t out[static 32])
{
	static const char *const keys[] = {"tpm.ak.name", "snp.chip_id",       "snp.report_id",
	                                   "tdx.mrtd",    "cloud.instance_id", "workload.identity",
	                                   NULL};
	crypto_hash_sha256_state h;
	static const char tag[] = "seclaunch-output-run-v1";
	crypto_hash_sha256_init(&h);
	crypto_hash_sha256_update(&h, (const uint8_t *)tag, sizeof(tag));
	for (size_t i = 0; keys[i] != NULL; i++) {
		const char *v = sl_claims_get(c, keys[i]);
		/* NUL-separated: a claim value is a C string */
		crypto_hash_sha256_update(&h, (const uint8_t *)keys[i], strlen(keys[i]) + 1);
		if (v != NULL)
			crypto_hash_sha256_update(&h, (const uint8_t *)v, strlen(v) + 1);
		else
			crypto_hash_sha256_update(&h, (const uint8_t *)"\x01", 1);
	}
	crypto_hash_sha256_final(&h, out);
}

/* Every output id names this request's run (NAME:RUN, RUN = job.id). */
static void check_run_ids(struct outctx *o)
{
	const char *run = sl_json_getstr(o->a->job, "id");
	for (size_t i = 0; i < o->a->noutputs; i++) {
		const char *id = o->a->outputs[i].output_id, *c = strrchr(id, ':');
		if (run == NULL || !kmsd_valid_key_id(run)) {
			deny(o, KMSD_D_OUTPUT_RUN, i,
			     "outputs[%zu]: job.id: an output-key request names its run "
			     "([A-Za-z0-9._-], at most %d characters); output ids are NAME:RUN",
			     i, SL_KMS_ID_MAX);
		} else if (c == NULL || c == id || strcmp(c + 1, run) != 0) {
			deny(o, KMSD_D_OUTPUT_RUN, i,
			     "outputs[%zu]: output id '%s' is not of this run: output ids are "
			     "NAME:RUN with RUN this request's job.id ('%s')",
			     i, id, run);
		}
	}
}

/* The run is this subject's: bound at its first grant, refused to any other. */
static void check_run_owner(struct outctx *o)
{
	const char *run = sl_json_getstr(o->a->job, "id");
	uint8_t subj[32];
	bool same = false;
	run_subject(o->claims, subj);
	if (kmsd_store_run_bind(o->ctx->store, run, subj, (int64_t)time(NULL), &same) != SL_OK) {
		o->store_failed = true;
		return;
	}
	if (!same)
		for (size_t i = 0; i < o->a->noutputs; i++)
			deny(o, KMSD_D_OUTPUT_RUN, i,
			     "outputs[%zu]: run '%s' belongs to another attested machine or "
			     "workload (its first output keys went there): the output ids of a run "
			     "are issued to that run only",
			     i, run);
}

void kmsd_outputs_judge(kmsd_ctx *ctx, const kmsd_outputs_ask *a, json_t *reasons,
                        const sl_claims *claims, const char *keys[], uint64_t *ttl,
                        bool *store_failed)
{
	struct outctx o = {
	    .ctx = ctx, .a = a, .reasons = reasons, .claims = claims, .keys = keys, .ttl = *ttl};
	size_t before = json_array_size(reasons);
	for (size_t i = 0; i < a->noutputs; i++)
		keys[i] = NULL;
	check_run_ids(&o);
	if (!o.store_failed && json_array_size(reasons) == before)
		check_policy(&o);
	/* bound only when everything else allowed it */
	if (!o.store_failed && json_array_size(reasons) == 0)
		check_run_owner(&o);
	*ttl = o.ttl;
	*store_failed = o.store_failed;
}

bool kmsd_outputs_issue(kmsd_ctx *ctx, const kmsd_outputs_ask *a, const char *const keys[],
                        const uint8_t eph_pub[static SL_EPH_PUB_LEN], json_t *reasons, json_t *out)
{
	struct outctx o = {.ctx = ctx, .a = a, .reasons = reasons};
	bool ok = true;
	for (size_t i = 0; i < a->noutputs && ok; i++) {
		const kmsd_output_entry *e = &a->outputs[i];
		uint8_t wrapped[SL_KMS_WRAPPED_DEK_MAX], sealed[KMSD_SEALED_LEN];
		size_t wlen = 0;
		char *w64 = NULL, *s64 = NULL;
		/* a fresh DEK made, wrapped and sealed to eph_pub in the key process:
		 * this network-facing process never holds it */
		sl_err rc = kmsd_kek_new_sealed(ctx->kek, keys[i], e->output_id, eph_pub, wrapped,
		                                &wlen, sealed);
		if (rc == SL_OK)
			rc = sl_b64_encode(wrapped, wlen, &w64);
		if (rc == SL_OK)
			rc = sl_b64_encode(sealed, sizeof(sealed), &s64);
		if (rc != SL_OK) {
			deny(&o, KMSD_D_UNWRAP, i, "outputs[%zu]: %s", i, sl_err_detail());
			ok = false;
		} else {
			json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:s}", "output_id",
			                                     e->output_id, "key_id", keys[i],
			                                     "wrapped_dek", w64, "sealed", s64));
		}
		free(w64);
		free(s64);
	}
	return ok;
}

json_t *kmsd_outputs_json(const kmsd_outputs_ask *a, const char *const keys[])
{
	json_t *list = json_array();
	for (size_t i = 0; i < a->noutputs; i++)
		json_array_append_new(list, json_pack("{s:s, s:s, s:s?}", "output_id",
		                                      a->outputs[i].output_id, "destination",
		                                      a->outputs[i].destination, "key_id",
		                                      keys != NULL ? keys[i] : NULL));
	return list;
}

/* ---- POST /v1/output (the compatibility path) --------------------------- */
