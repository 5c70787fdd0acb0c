/* The one attested request of a run or a serve (docs/protocol.md): what
 * the launch's release asks for and what each renewal of its lease names,
 * built in one place so the two cannot drift: the inputs' keys, the
 * resumed checkpoints' keys, the output keys (names and destinations),
 * the job, and this machine's evidence bound to the request's nonce. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/region_id.h"
#include "run_int.h"
#include "seclaunch/identity.h"
#include "seclaunch/json.h"
#include "seclaunch/sldm.h"

sl_err sl_run_collect(struct sl_run_st *s, const uint8_t binding[static SL_BINDING_LEN],
                      json_t **ev)
{
	sl_err rc = SL_E_INTERNAL;
	sl_collect_opts co = {.tcti = s->o->tcti,
	                      .nonce = binding,
	                      .nonce_len = SL_BINDING_LEN,
	                      .pcrs = s->wl.pcrs[0] != '\0' ? s->wl.pcrs : NULL};
	*ev = NULL;
	SL_GUARD(sl_evidence_collect(s->o->tee, &co, ev));
	/* the workload register's log travels with the quote that covers it */
	SL_GUARD(sl_wl_attach(&s->wl, *ev));
	rc = SL_OK;
out:
	if (rc != SL_OK) {
		json_decref(*ev);
		*ev = NULL;
	}
	return rc;
}

sl_err sl_run_request(struct sl_run_st *s, const uint8_t *nonce, const uint8_t *eph_pub,
                      const json_t *evidence, const json_t *identity, unsigned renewal,
                      struct sl_run_req *r)
{
	sl_err rc = SL_E_NOMEM;
	json_t *ds = json_array(), *roots = json_object(), *res = json_array();
	size_t n = 0;

	memset(r, 0, sizeof(*r));
	SL_ENSURE(ds != NULL && roots != NULL && res != NULL, SL_E_NOMEM, "job description");
	for (size_t i = 0; i < s->n; i++, n++) {
		/* an SLD header's key reference or a manifest's */
		r->keys[n].key_id = sl_dataset_key_id(&s->ds[i]);
		r->keys[n].dataset_id = sl_dataset_id(&s->ds[i]);
		r->keys[n].wrapped_dek =
		    sl_dataset_wrapped_dek(&s->ds[i], &r->keys[n].wrapped_dek_len);
		json_array_append_new(ds, json_string(r->keys[n].dataset_id));
		/* each dataset's root: a manifest's authenticated digest, an SLD
		 * file's header digest (either names every byte of the dataset) */
		json_object_set_new(roots, r->keys[n].dataset_id, json_string(s->ds[i].root));
	}
	r->nresume = sl_out_resume_keys(s->out, &r->keys[n]);
	for (size_t i = 0; i < r->nresume; i++)
		json_array_append_new(res, json_string(r->keys[n + i].dataset_id));
	n += r->nresume;
	r->noutputs = sl_out_wants(s->out, r->want);
	r->job = json_pack("{s:s, s:s, s:o, s:o, s:o, s:O?}", "id", s->rep.job_id, "command",
	                   s->o->cmd != NULL ? s->o->cmd[0] : "seclaunch serve", "datasets", ds,
	                   "roots", roots, "resumes", res, "context", s->context);
	ds = roots = res = NULL;
	SL_ENSURE(r->job != NULL, SL_E_NOMEM, "job description");
	if (renewal > 0)
		SL_ENSURE(json_object_set_new(r->job, "renewal", json_integer(renewal)) == 0,
		          SL_E_NOMEM, "job description");
	r->rq = (sl_kms_release_req){.nonce = nonce,
	                             .eph_pub = eph_pub,
	                             .policy_digest = sl_policy_digest(s->policy),
	                             .evidence = evidence,
	                             .identity = identity,
	                             .job = r->job,
	                             .keys = r->keys,
	                             .nkeys = n,
	                             .outputs = r->want,
	                             .noutputs = r->noutputs,
	                             .out_keys = r->out_keys};
	rc = SL_OK;
out:
	json_decref(ds);
	json_decref(roots);
	json_decref(res);
	return rc;
}

void sl_run_request_free(struct sl_run_req *r)
{
	for (size_t i = 0; i < SL_OUT_MAX; i++) {
		sl_secret_free(r->out_keys[i].dek);
		r->out_keys[i].dek = NULL;
	}
	json_decref(r->job);
	r->job = NULL;
}

/* One renewal of the lease (run_lease.c's thread); SL_OK with *lease (NULL:
 * no lease any more). The request is the launch's (sl_run_request): every
 * key and output key the run holds. */
sl_err sl_run_renew(void *ctx, sl_kms *kms, unsigned renewal, json_t **lease)
{
	struct sl_run_st *s = ctx;
	sl_err rc = SL_E_INTERNAL;
	sl_kms_challenge ch;
	uint8_t pub[SL_EPH_PUB_LEN], b[SL_BINDING_LEN];
	sl_secret *sk = NULL;
	json_t *evs = json_array(), *ev = NULL, *ids = json_array(), *doc = NULL;
	sl_claims *scratch = NULL;
	struct sl_run_req *rq = calloc(1, sizeof(*rq));
	bool locked = false;

	SL_ENSURE(evs != NULL && ids != NULL && rq != NULL, SL_E_NOMEM, "renewal");
	SL_GUARD(sl_kms_challenge_get(kms, &ch));
	/* an ephemeral key that opens nothing: the binding keeps its one form */
	SL_GUARD(sl_kms_eph_keypair(pub, &sk));
	sl_secret_free(sk);
	sk = NULL;
	sl_binding_compute(ch.nonce, pub, sl_policy_digest(s->policy), b);
	if (s->use_gpu) {
		sl_gpu_info g;
		memset(&g, 0, sizeof(g));
		sl_gpu_probe(&g);
		SL_ENSURE(strcmp(g.cc, s->gpu.cc) == 0, SL_E_ATTEST,
		          "the GPU's confidential-computing mode changed from %s to %s", s->gpu.cc,
		          g.cc);
	}
	SL_GUARD(sl_wl_refresh(&s->wl));
	locked = true;
	SL_GUARD(sl_run_collect(s, b, &ev));
	sl_wl_unlock(&s->wl);
	locked = false;
	SL_ENSURE(json_array_append_new(evs, ev) == 0, SL_E_NOMEM, "evidence");
	ev = NULL;
	if (s->use_gpu && strcmp(s->gpu.cc, "on") == 0) {
		sl_collect_opts go = {.nonce = b, .nonce_len = SL_BINDING_LEN};
		SL_GUARD(sl_evidence_collect("nvidia-gpu", &go, &ev));
		SL_ENSURE(json_array_append_new(evs, ev) == 0, SL_E_NOMEM, "evidence");
		ev = NULL;
	}
	if (json_array_size(s->identity) > 0) {
		struct sl_region_id rid = {.cloud_identity = s->o->cloud_identity,
		                           .gcp_jwks = s->o->gcp_jwks,
		                           .aws_trust = s->o->aws_certs,
		                           .region = s->o->region};
		SL_GUARD(sl_claims_new(&scratch));
		SL_GUARD(sl_region_id_collect(&rid, b, scratch, &doc));
		if (doc != NULL)
			SL_ENSURE(json_array_append(ids, doc) == 0, SL_E_NOMEM, "identity");
	}
	SL_GUARD(sl_run_request(s, ch.nonce, pub, evs, ids, renewal, rq));
	SL_GUARD(sl_kms_renew(kms, &rq->rq, lease));
	rc = SL_OK;
out:
	if (locked)
		sl_wl_unlock(&s->wl);
	sl_secret_free(sk);
	sl_claims_free(scratch);
	if (rq != NULL)
		sl_run_request_free(rq);
	free(rq);
	json_decref(evs);
	json_decref(ev);
	json_decref(ids);
	json_decref(doc);
	return rc;
}
