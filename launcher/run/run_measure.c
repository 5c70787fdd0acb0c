/* `seclaunch run`: the job's workload identity, computed before the
 * challenge and extended into the workload register (TPM PCR, default 15;
 * TDX RTMR3) before evidence is collected (docs/claims.md). */
#include <stdio.h>
#include <string.h>

#include "run_int.h"
#include "seclaunch/attest.h"
#include "seclaunch/sld.h"
#include "seclaunch/sldm.h"
#include "seclaunch/util.h"
#include "seclaunch/workload.h"

/* The kind of evidence `run` will collect ("auto" resolved). */
static const char *sl_run_evidence_kind(const struct sl_run_st *s)
{
	static const char *const order[] = {"sev-snp", "tdx", NULL};
	sl_collect_opts co = {.tcti = s->o->tcti};
	if (strcmp(s->o->tee, "auto") != 0)
		return s->o->tee;
	for (size_t i = 0; order[i] != NULL; i++) {
		const sl_evidence_kind *k = sl_evidence_kind_find(order[i]);
		if (k != NULL && k->available != NULL && k->available(&co))
			return order[i];
	}
	return "tpm2";
}

sl_err sl_run_step_workload(struct sl_run_st *s)
{
	sl_err rc = SL_E_NOMEM;
	extern char **environ;
	char **envp = NULL, hex[65], root[80];
	json_t *ds = json_array(), *outs = json_array();
	const char *kind = sl_run_evidence_kind(s);

	SL_ENSURE(ds != NULL, SL_E_NOMEM, "datasets");
	for (size_t i = 0; i < s->n; i++) {
		/* the root run_exec.c computed: a sharded dataset's manifest root,
		 * a single SLD file's header SHA-256 */
		const char *id = sl_dataset_id(&s->ds[i]);
		snprintf(root, sizeof(root), "sha256:%s", s->ds[i].root);
		SL_ENSURE(
		    json_array_append_new(ds, json_pack("{s:s, s:s}", "id", id, "root", root)) == 0,
		    SL_E_NOMEM, "datasets");
	}
	SL_ENSURE(outs != NULL, SL_E_NOMEM, "outputs");
	SL_GUARD(sl_wl_output_entries(s->o->outcfg.spec, s->o->outcfg.n, outs));
	/* the environment the job will receive, before SECLAUNCH_DATA; serve
	 * does not make the tasks' environment (Slurm does): measured empty */
	if (s->o->env != NULL)
		SL_GUARD(sl_job_env_build(s->o->env, environ, NULL, &envp));
	sl_wl_in in = {.argv = s->o->serve.on ? s->o->serve.measure : s->o->cmd,
	               .exe = s->exe,
	               .envp = envp,
	               .image_digest = s->o->image_digest,
	               .datasets = ds,
	               .outputs = outs,
	               .policy_hex = sl_policy_digest_hex(s->policy)};
	SL_GUARD(sl_wl_build(&in, &s->wl));
	SL_GUARD(sl_wl_extend(&s->wl, kind, s->o->tcti, s->o->workload_pcr, s->o->workload_log));
	sl_hex_encode(s->wl.identity, 32, hex);
	if (s->wl.script_why[0] != '\0')
		sl_report_say(&s->rep,
		              "workload script unknown: %s (a policy entry that pins script_sha256 "
		              "denies it)",
		              s->wl.script_why);
	if (s->wl.reg[0] == '\0') {
		sl_report_say(
		    &s->rep, "workload %.16s... not measured: %s evidence has no workload register",
		    hex, kind);
	} else {
		sl_report_say(&s->rep, "workload %.16s... extended into %s (log %s)", hex,
		              s->wl.reg, s->wl.log_path);
	}
	char ed[65];
	sl_hex_encode(s->wl.event_digest, 32, ed);
	SL_GUARD(sl_report_record(&s->rep, SL_AUDIT_EV_RUN_MEASURE, NULL, NULL, NULL, NULL,
	                          json_pack("{s:s, s:s, s:s, s:O}", "identity", hex, "event_sha256",
	                                    ed, "register", s->wl.reg[0] ? s->wl.reg : "none",
	                                    "event", s->wl.event)));
	rc = SL_OK;
out:
	sl_strv_free(envp);
	json_decref(ds);
	json_decref(outs);
	return rc;
}
