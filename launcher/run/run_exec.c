/* The steps of `seclaunch run` (see cmd_run.c for the flow and the CLI). */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../stage/stage_tree.h"
#include "run_int.h"
#include "seclaunch/attest.h"
#include "seclaunch/audit.h"
#include "seclaunch/identity.h"
#include "seclaunch/kms_client.h"
#include "seclaunch/policy.h"
#include "seclaunch/secret.h"
#include "seclaunch/sld.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"

static int g_sig; /* a termination signal that arrived before the job */

static int poll_sig(void)
{
	if (g_sig == 0)
		g_sig = sl_supervise_take_pending();
	return g_sig;
}

#define CHECK_SIGNAL()                                                                             \
	SL_ENSURE(poll_sig() == 0, SL_E_SYSTEM, "interrupted by signal %d before the job started", \
	          g_sig)

static SL_RESULT step_audit_open(struct sl_run_st *s)
{
	sl_err rc = SL_E_INTERNAL;
	uint8_t id[8];
	json_t *argv0 = NULL, *files = json_array();

	sl_random(id, sizeof(id));
	sl_hex_encode(id, sizeof(id), s->rep.job_id);
	if (s->o->audit_log == NULL)
		sl_report_say(
		    &s->rep,
		    "WARNING: no audit log (no --audit-log, $SECLAUNCH_AUDIT_LOG or $HOME)");
	else
		SL_GUARD(sl_audit_open(s->o->audit_log, s->o->audit_key,
		                       s->o->serve.on ? "seclaunch serve" : "seclaunch run", 0,
		                       &s->rep.audit));
	for (size_t i = 0; i < s->o->ndatasets; i++)
		json_array_append_new(files, json_string(s->o->datasets[i]));
	argv0 = json_pack("{s:s?, s:o, s:s, s:s, s:s, s:s?, s:s, s:O?}", "command",
	                  s->o->cmd != NULL ? s->o->cmd[0] : NULL, "datasets", files, "kms",
	                  s->o->kms_url, "policy", s->o->policy_path, "stage",
	                  s->o->where == SL_STAGE_HOST  ? "host"
	                  : s->o->where == SL_STAGE_GPU ? "gpu"
	                                                : "auto",
	                  "user", s->o->user, "mode", s->o->serve.on ? "serve" : "run", "context",
	                  s->context);
	files = NULL;
	SL_GUARD(sl_report_record(&s->rep, SL_AUDIT_EV_RUN_START, NULL, NULL, NULL, NULL, argv0));
	argv0 = NULL;
	rc = SL_OK;
out:
	json_decref(files);
	json_decref(argv0);
	return rc;
}

/* The job's user and executable, settled before anything is attested: a
 * command that cannot run costs no key release (exit 127 when it is not
 * found, 126 when it cannot be executed, as env(1)). */
static SL_RESULT step_command(struct sl_run_st *s)
{
	sl_err rc = SL_E_INTERNAL;
	char **envp = NULL;
	extern char **environ;
	struct stat st;

	if (s->o->user != NULL) {
		SL_GUARD(sl_job_user_parse(s->o->user, &s->user));
		if (s->user.set && s->o->env != NULL)
			SL_GUARD(sl_job_env_user(s->o->env, s->user.name, s->user.home));
	}
	if (s->o->serve.on) { /* serve starts no command: its user is the peers' */
		/* -- CMD: the tasks' command, resolved with serve's own PATH as
		 * the file the workload event names (run_measure.c) */
		if (s->o->serve.measure != NULL) {
			s->cmd_status = sl_job_resolve(s->o->serve.measure[0], environ, &s->user,
			                               s->exe, sizeof(s->exe));
			if (s->cmd_status != 0) {
				s->cmd_status = 0; /* serve's usage: the input's exit code */
				rc = SL_E_INPUT;
				goto out;
			}
		}
		rc = SL_OK;
		goto out;
	}
	SL_GUARD(sl_job_env_build(s->o->env, environ, NULL, &envp));
	s->cmd_status = sl_job_resolve(s->o->cmd[0], envp, &s->user, s->exe, sizeof(s->exe));
	if (s->cmd_status != 0) {
		rc = SL_E_INPUT; /* the detail names the command and why */
		goto out;
	}
	/* the job shares this process's user without --user: what that user can
	 * read, the job can read (docs/job-interface.md) */
	if (!s->user.set && s->o->audit_key != NULL && stat(s->o->audit_key, &st) == 0 &&
	    st.st_uid == geteuid())
		sl_report_say(&s->rep,
		              "WARNING: the job runs as this user and can read the audit key %s; "
		              "run seclaunch as root with --user to keep it from the job",
		              s->o->audit_key);
	rc = SL_OK;
out:
	sl_strv_free(envp);
	return rc;
}

/* MemAvailable of /proc/meminfo in bytes (0: unknown). */
static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	unsigned long long kb = 0;
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

/* Opens one dataset: an SLD file, a dataset folder, or a dataset URL. */
static SL_RESULT open_dataset(struct sl_run_st *s, sl_dataset *d, const char *path)
{
	sl_err rc = SL_E_INPUT;

	s->o->remote.quiet = sl_cli_quiet;
	SL_GUARD(sl_dataset_open(d, path, &s->user, &s->o->remote));
	/* GPU decryption takes SLD chunks one file at a time: single files only */
	SL_ENSURE(d->man == NULL || !s->o->gpu_decrypt, SL_E_USAGE,
	          "%s: --gpu-decrypt takes SLD files; a sharded dataset is staged in host "
	          "memory and uploaded by the job (--stage gpu)",
	          path);
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT step_datasets(struct sl_run_st *s)
{
	sl_err rc = SL_E_INPUT;
	uint64_t total = 0;
	for (size_t i = 0; i < s->o->ndatasets; i++) {
		const char *path = s->o->datasets[i];
		s->n = i + 1;
		sl_dataset *d = &s->ds[i];
		SL_GUARD(open_dataset(s, d, path));
		size_t wl = 0;
		(void)sl_dataset_wrapped_dek(d, &wl);
		SL_ENSURE(sl_dataset_key_id(d)[0] != '\0' && wl > 0, SL_E_INPUT,
		          "%s: encrypted with a local key file (no KMS key id in its %s); "
		          "seclaunch run needs a dataset encrypted with --kms",
		          path, d->man != NULL ? "manifest" : "header");
		for (size_t j = 0; j < i; j++)
			SL_ENSURE(strcmp(sl_dataset_id(&s->ds[j]), sl_dataset_id(d)) != 0,
			          SL_E_INPUT, "%s and %s hold the same dataset id '%s'",
			          s->o->datasets[j], path, sl_dataset_id(d));
		total += sl_dataset_size(d);
	}
	/* how each dataset is staged: --stage stream streams every sharded
	 * dataset; auto streams them when staging them whole would take more
	 * than half of the memory available */
	uint64_t avail = mem_available(),
	         window = s->o->window ? s->o->window : SL_RUN_WINDOW_DEFAULT;
	bool stream_all = s->o->where == SL_STAGE_STREAM ||
	                  (s->o->where == SL_STAGE_AUTO && avail > 0 && total > avail / 2);
	uint64_t need = 0;
	for (size_t i = 0; i < s->n; i++) {
		sl_dataset *d = &s->ds[i];
		d->streamed = stream_all && d->man != NULL;
		if (d->streamed) {
			uint64_t largest = 0;
			for (uint32_t k = 0; k < sl_sldm_shard_count(d->man); k++)
				if (sl_sldm_shard_at(d->man, k).plaintext_len > largest)
					largest = sl_sldm_shard_at(d->man, k).plaintext_len;
			SL_ENSURE(
			    largest <= window, SL_E_USAGE,
			    "%s: its largest shard holds %llu bytes, more than the --window of "
			    "%llu; give a larger --window",
			    s->o->datasets[i], (unsigned long long)largest,
			    (unsigned long long)window);
			need += sl_dataset_size(d) < window ? sl_dataset_size(d) : window;
		} else {
			need += sl_dataset_size(d);
		}
	}
	/* what is staged must fit in memory: said now, before any key is
	 * released, not when the stage cannot be allocated */
	if (s->o->where != SL_STAGE_GPU && avail > 0)
		SL_ENSURE(
		    need <= avail / 10 * 9, SL_E_NOMEM,
		    "the datasets need %llu bytes of memory as staged (%llu bytes of plaintext; "
		    "a streamed dataset takes at most its --window), but only %llu bytes are "
		    "available (MemAvailable); nothing was released by the KMS. %s",
		    (unsigned long long)need, (unsigned long long)total, (unsigned long long)avail,
		    stream_all ? "Give a smaller --window, or use a machine with more memory"
		               : "Use --stage stream (sharded datasets, a bounded window), or a "
		                 "machine with more memory");
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT step_policy(struct sl_run_st *s)
{
	sl_err rc = SL_E_INTERNAL;
	SL_GUARD(sl_policy_load_signed(s->o->policy_path, s->o->policy_sig, s->o->policy_pub,
	                               &s->policy));
	s->rep.policy_digest = sl_policy_digest_hex(s->policy);
	sl_report_say(&s->rep, "policy %s: signature verified, sha256 %s", s->o->policy_path,
	              sl_policy_digest_hex(s->policy));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT step_preflight(struct sl_run_st *s)
{
	sl_err rc = SL_E_INTERNAL;
	sl_decision *d = NULL;
	json_t *reasons = NULL, *details = NULL;

	for (size_t i = 0; i < s->n; i++) {
		const char *ds = sl_dataset_id(&s->ds[i]);
		const char *key = sl_dataset_key_id(&s->ds[i]);
		sl_policy_request req = {
		    .dataset_id = ds, .key_id = key, .gpu_decrypt = s->o->gpu_decrypt};
		sl_decision_free(d);
		d = NULL;
		SL_GUARD(sl_policy_evaluate(s->policy, s->claims, &req, &d));
		bool ok = sl_decision_allowed(d);
		SL_GUARD(sl_decision_reasons_json(d, &reasons));
		details = json_pack("{s:s, s:s}", "gpu", s->gpu.reason[0] ? s->gpu.reason : "none",
		                    "gpu_cc", s->gpu.cc);
		SL_GUARD(sl_report_record(&s->rep, SL_AUDIT_EV_RUN_PREFLIGHT, ds, key,
		                          ok ? SL_AUDIT_ALLOW : SL_AUDIT_DENY, reasons, details));
		reasons = details = NULL;
		if (!ok) {
			fprintf(stderr,
			        "seclaunch %s: the policy denies dataset %s (key %s) here:\n",
			        s->rep.cmd, ds, key);
			for (size_t j = 0; j < sl_decision_reason_count(d); j++)
				fprintf(stderr, "  - %s\n", sl_decision_reason(d, j));
			fprintf(stderr, "  nothing was fetched from the KMS\n");
			s->explained = true;
			SL_GUARD(sl_decision_err(d));
		}
	}
	sl_report_say(&s->rep, "pre-flight: the policy allows %zu dataset%s here", s->n,
	              s->n == 1 ? "" : "s");
	rc = SL_OK;
out:
	json_decref(reasons);
	json_decref(details);
	sl_decision_free(d);
	return rc;
}

/* What --output and --resume name, read before anything is attested. */
static SL_RESULT step_outputs_open(struct sl_run_st *s)
{
	struct sl_out_ctx x = {.rep = &s->rep,
	                       .c = &s->o->outcfg,
	                       .remote = &s->o->remote,
	                       .user = &s->user,
	                       .env = s->o->env,
	                       .kms_url = s->o->kms_url,
	                       .threads = s->o->threads};
	return sl_out_open(&x, &s->out);
}

/* The policy's verdict on every output, beside the inputs it reads. */
static SL_RESULT step_outputs_preflight(struct sl_run_st *s)
{
	const char *ids[SL_RUN_MAX_DATASETS];
	for (size_t i = 0; i < s->n; i++)
		ids[i] = sl_dataset_id(&s->ds[i]);
	return sl_out_preflight(s->out, s->policy, s->claims, ids, s->n, &s->explained);
}

/* The KMS answers every refusal with 403 and a list of reasons, each with a
 * code; sl_kms_refusal_code() says which exit code that is (evidence the KMS
 * would not accept is an attestation failure, exit 3, not a policy decision).
 * The reasons are printed and audited either way. */
static SL_RESULT explain_refusal(struct sl_run_st *s)
{
	char detail[1024];
	const json_t *prob = sl_kms_last_problem(s->kms);
	json_t *reasons = prob != NULL ? json_object_get(prob, "reasons") : NULL, *r;
	sl_err code = sl_kms_refusal_code(reasons);
	size_t i;

	snprintf(detail, sizeof(detail), "%s", sl_err_detail());
	fprintf(stderr, "seclaunch %s: the KMS refused to release the keys:\n", s->rep.cmd);
	json_array_foreach (reasons, i, r) {
		const char *c = sl_json_getstr(r, "code");
		const char *d = sl_json_getstr(r, "detail");
		fprintf(stderr, "  - [%s] %s\n", c != NULL ? c : "?", d != NULL ? d : "?");
	}
	s->explained = true;
	sl_err a = sl_report_record(&s->rep, SL_AUDIT_EV_RUN_RELEASE, NULL, NULL, SL_AUDIT_DENY,
	                            reasons != NULL ? json_deep_copy(reasons) : NULL, NULL);
	(void)a;
	return sl_err_set(
	    code, "%s%s",
	    code == SL_E_ATTEST ? "the KMS did not accept this machine's attestation: " : "",
	    detail);
}

/* -v: each step's wall time, so where a launch spends its time shows
 * (scripts/bench/55-lease.sh prints them beside the peer) */
static void step_time(const struct sl_run_st *s, const char *name, uint64_t t)
{
	double ms = (double)(sl_now_ns() - t) / 1e6;
	if (!s->o->verbose)
		return;
	if (strcmp(name, "challenge") != 0)
		sl_report_say(&s->rep, "time: %s %.2f ms", name, ms);
	else if (s->ch_async.started)
		sl_report_say(&s->rep, "time: challenge sent %.2f ms", ms);
	else
		sl_report_say(
		    &s->rep,
		    "time: challenge wait %.2f ms (round trip %.2f ms, beside the workload)", ms,
		    (double)s->ch_async.ns / 1e6);
}

/* The launch's one release: the inputs' keys, the resumed checkpoints'
 * and the output keys, decided by the KMS all or nothing (one audit
 * record there), before anything is staged. */
static SL_RESULT step_release(struct sl_run_st *s)
{
	sl_err rc = SL_E_INTERNAL;
	struct sl_run_req *r = calloc(1, sizeof(*r));
	sl_secret *deks[SL_RUN_MAX_DATASETS + SL_OUT_MAX] = {NULL};

	SL_ENSURE(r != NULL, SL_E_NOMEM, "release request");
	SL_GUARD(sl_run_request(s, s->ch.nonce, s->eph_pub, s->evidence, s->identity, 0, r));
	if (r->rq.nkeys == 0 && r->rq.noutputs == 0) {
		rc = SL_OK;
		goto out;
	}
	rc = sl_kms_release(s->kms, &r->rq, s->eph_sk, deks);
	/* the ephemeral key has done its one job either way */
	sl_secret_free(s->eph_sk);
	s->eph_sk = NULL;
	if ((rc == SL_E_POLICY_DENIED || rc == SL_E_ATTEST) && sl_kms_last_problem(s->kms) != NULL)
		rc = explain_refusal(s);
	SL_GUARD(rc);
	for (size_t i = 0; i < s->n; i++) {
		s->ds[i].dek = deks[i];
		deks[i] = NULL;
	}
	sl_out_released(s->out, &deks[s->n], r->out_keys);
	SL_GUARD(sl_report_record(&s->rep, SL_AUDIT_EV_RUN_RELEASE, NULL, NULL, SL_AUDIT_ALLOW,
	                          NULL,
	                          json_pack("{s:i, s:i, s:i}", "keys", (int)s->n, "resumes",
	                                    (int)r->nresume, "outputs", (int)r->noutputs)));
	sl_report_say(&s->rep, "KMS released %zu key%s (sealed to this run's ephemeral key)",
	              r->rq.nkeys, r->rq.nkeys == 1 ? "" : "s");
	rc = SL_OK;
out:
	for (size_t i = 0; i < SL_RUN_MAX_DATASETS + SL_OUT_MAX; i++)
		sl_secret_free(deks[i]);
	if (r != NULL)
		sl_run_request_free(r);
	free(r);
	return rc;
}

static SL_RESULT step_stage(struct sl_run_st *s)
{
	sl_err rc = SL_E_INTERNAL;
	for (size_t i = 0; i < s->n; i++) {
		sl_dataset *d = &s->ds[i];
		CHECK_SIGNAL();
		/* gpu-ipc: seclaunch fills device buffers; gpu: the job's own context
		 * uploads host-staged data; --gpu-decrypt: ciphertext, decrypted there */
		bool ipc = s->use_gpu && s->o->where == SL_STAGE_GPU_IPC;
		if (d->streamed) {
			rc = sl_stream_new(d->dfd, sl_dataset_local_path(d), d->rem, d->man, d->dek,
			                   s->o->window ? s->o->window : SL_RUN_WINDOW_DEFAULT,
			                   s->o->linger_set ? s->o->linger_s * 1000u
			                                    : SL_RUN_LINGER_DEFAULT_S * 1000u,
			                   s->o->threads, &d->stream);
			sl_secret_free(d->dek);
			d->dek = NULL;
			if (rc != SL_OK)
				s->partial = sl_dataset_id(d);
			SL_GUARD(rc);
			sl_stream_stats st;
			sl_stream_stats_get(d->stream, &st);
			SL_GUARD(sl_report_record(
			    &s->rep, SL_AUDIT_EV_RUN_STAGE, sl_dataset_id(d), sl_dataset_key_id(d),
			    NULL, NULL,
			    json_pack("{s:s, s:I, s:s, s:I, s:I}", "method", "stream", "size",
			              (json_int_t)sl_dataset_size(d), "root", d->root, "shards",
			              (json_int_t)sl_sldm_shard_count(d->man), "window",
			              (json_int_t)st.window)));
			sl_report_say(
			    &s->rep,
			    "streaming %s: %llu bytes in %u shards through a %llu-byte window",
			    sl_dataset_id(d), (unsigned long long)sl_dataset_size(d),
			    sl_sldm_shard_count(d->man), (unsigned long long)st.window);
			continue;
		}
		if (d->man != NULL)
			rc = sl_stage_sldm(d->dfd, sl_dataset_local_path(d), d->rem, d->man, d->dek,
			                   ipc ? &s->gpu : NULL, s->o->threads, false, poll_sig,
			                   &d->stage);
		else if (s->o->gpu_decrypt)
			rc = sl_stage_sld_gpu_decrypt(d->fd, d->path, d->dek, &s->gpu, false,
			                              poll_sig, &d->stage);
		else
			rc = sl_stage_sld(d->fd, d->path, d->dek, ipc ? &s->gpu : NULL,
			                  s->o->threads, false, poll_sig, &d->stage);
		if (rc == SL_OK && s->use_gpu && !ipc && !s->o->gpu_decrypt &&
		    (rc = sl_stage_gpu_handoff(d->stage, &s->gpu)) != SL_OK) {
			sl_stage_free(d->stage);
			d->stage = NULL;
		}
		/* the DEK is not needed once its data is staged (or failed to be) */
		sl_secret_free(d->dek);
		d->dek = NULL;
		sl_dataset_close_file(d);
		/* staging zeroes and unmaps a partly staged dataset itself */
		if (rc != SL_OK)
			s->partial = sl_dataset_id(d);
		SL_GUARD(rc);
		const char *ds = sl_dataset_id(d);
		SL_GUARD(sl_report_record(
		    &s->rep, SL_AUDIT_EV_RUN_STAGE, ds, sl_dataset_key_id(d), NULL, NULL,
		    json_pack("{s:s, s:I, s:s, s:I, s:s}", "method", sl_stage_method(d->stage),
		              "size", (json_int_t)sl_stage_size(d->stage), "root", d->root,
		              "shards",
		              (json_int_t)(d->man != NULL ? sl_sldm_shard_count(d->man) : 0), "gpu",
		              s->o->gpu_decrypt ? "decrypt (file key to the job)"
		              : !s->use_gpu     ? "none"
		              : ipc             ? "ipc"
		                                : "upload by the job")));
		sl_report_say(&s->rep, "staged %s: %llu bytes (%s)", ds,
		              (unsigned long long)sl_stage_size(d->stage),
		              sl_stage_method(d->stage));
	}
	rc = SL_OK;
out:
	return rc;
}

/* A sharded dataset's files, for the job: path, mode, size and where its
 * bytes start in the staged plaintext. */
static json_t *files_json(const sl_sldm *m)
{
	json_t *a = json_array();
	uint64_t *start = calloc((size_t)sl_sldm_shard_count(m) + 1, sizeof(*start));
	if (a == NULL || start == NULL) {
		free(start);
		json_decref(a);
		return NULL;
	}
	for (uint32_t i = 0; i < sl_sldm_shard_count(m); i++)
		start[i + 1] = start[i] + sl_sldm_shard_at(m, i).plaintext_len;
	for (uint32_t i = 0; i < sl_sldm_file_count(m); i++) {
		sl_sldm_file f = sl_sldm_file_at(m, i);
		json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:i}", "path", f.path, "offset",
		                                   (json_int_t)(start[f.shard] + f.offset), "size",
		                                   (json_int_t)f.size, "mode", (int)f.mode));
	}
	free(start);
	return a;
}

/* The data service's refusals go to the audit log (on its thread). */
static void data_refused(void *ctx, pid_t pid, uid_t uid, const char *why)
{
	sl_report_note(ctx, SL_AUDIT_EV_RUN_DATA_REFUSED, NULL, NULL, SL_AUDIT_DENY,
	               json_pack("[s]", why),
	               json_pack("{s:i, s:i}", "pid", (int)pid, "uid", (int)uid));
}

static SL_RESULT stream_acquire(void *ctx, uint32_t shard, int *fd, uint64_t *len, int *not_ready)
{
	return sl_stream_acquire(ctx, shard, fd, len, not_ready);
}

static void stream_release(void *ctx, uint32_t shard)
{
	sl_stream_release(ctx, shard);
}

/* A streamed dataset for the job: its files and where each shard's
 * plaintext starts (the job asks the data service for shards). */
static json_t *stream_entry(const struct sl_run_st *s, const sl_dataset *d)
{
	const sl_sldm *m = d->man;
	json_t *sh = json_array();
	uint64_t off = 0;
	for (uint32_t k = 0; k < sl_sldm_shard_count(m); k++) {
		uint64_t len = sl_sldm_shard_at(m, k).plaintext_len;
		json_array_append_new(sh,
		                      json_pack("{s:I, s:I, s:I}", "index", (json_int_t)k, "offset",
		                                (json_int_t)off, "size", (json_int_t)len));
		off += len;
	}
	return json_pack("{s:s, s:s, s:I, s:s, s:o, s:o, s:I}", "kind", "stream", "method",
	                 "stream", "size", (json_int_t)sl_dataset_size(d), "root", d->root, "files",
	                 files_json(m), "shards", sh, "window",
	                 (json_int_t)(s->o->window ? s->o->window : SL_RUN_WINDOW_DEFAULT));
}

/* The data service: every host-staged dataset, for the job and every
 * process it starts (SECLAUNCH_DATA_SOCKET). data: SECLAUNCH_DATA's object;
 * token: serve's admission token (NULL: run's). */
static SL_RESULT sl_run_data_service(struct sl_run_st *s, json_t *data, const char *token)
{
	sl_err rc = SL_E_INTERNAL;
	char *kv = NULL;
	sl_dsvc_opts o = {.job_uid = s->user.set ? s->user.uid : geteuid(),
	                  .job_gid = s->user.set ? s->user.gid : getegid(),
	                  .path = s->o->serve.socket,
	                  .token = token,
	                  .refused = data_refused,
	                  .refused_ctx = &s->rep};
	SL_GUARD(sl_dsvc_new(&o, &s->dsvc));
	for (size_t i = 0; i < s->n; i++) {
		sl_dataset *d = &s->ds[i];
		if (d->streamed) {
			sl_dsvc_stream_ops ops = {
			    .acquire = stream_acquire, .release = stream_release, .ctx = d->stream};
			json_t *info = json_deep_copy(json_object_get(data, sl_dataset_id(d)));
			SL_ENSURE(info != NULL, SL_E_NOMEM, "data service");
			rc = sl_dsvc_add_stream(s->dsvc, sl_dataset_id(d), info, &ops);
			json_decref(info);
			SL_GUARD(rc);
			continue;
		}
		int fd = sl_stage_fd(d->stage);
		if (fd < 0)
			continue;
		json_t *info = json_deep_copy(json_object_get(data, sl_stage_dataset_id(d->stage)));
		SL_ENSURE(info != NULL, SL_E_NOMEM, "data service");
		json_object_del(info, "fd");
		json_object_del(info, "path");
		rc = sl_dsvc_add(s->dsvc, sl_stage_dataset_id(d->stage), fd, info);
		json_decref(info);
		SL_GUARD(rc);
	}
	SL_GUARD(sl_dsvc_serve(s->dsvc));
	if (s->o->env == NULL) { /* serve: no job environment of its own */
		rc = SL_OK;
		goto out;
	}
	SL_ENSURE(asprintf(&kv, "%s=%s", SL_DSVC_ENV, sl_dsvc_path(s->dsvc)) > 0, SL_E_NOMEM,
	          "job environment");
	SL_GUARD(sl_job_env_own(s->o->env, kv));
	rc = SL_OK;
out:
	free(kv);
	return rc;
}

/* SECLAUNCH_DATA as the job gets it (sl_run_data_slim). */
static SL_RESULT data_env_text(const struct sl_report *rep, const json_t *data, char **out)
{
	sl_err rc = SL_E_NOMEM;
	json_t *slim = json_deep_copy(data);
	bool cut;

	SL_ENSURE(slim != NULL, SL_E_NOMEM, "SECLAUNCH_DATA");
	SL_GUARD(sl_run_data_slim(rep, slim, SL_RUN_DATA_ENV_MAX, &cut));
	*out = json_dumps(slim, JSON_COMPACT | JSON_SORT_KEYS);
	SL_ENSURE(*out != NULL, SL_E_NOMEM, "SECLAUNCH_DATA");
	rc = SL_OK;
out:
	json_decref(slim);
	return rc;
}

static void job_started(pid_t pid, void *ctx)
{
	struct sl_run_st *s = ctx;
	if (s->o->verbose)
		sl_report_say(&s->rep, "time: job started %.2f ms after the run began",
		              (double)(sl_now_ns() - s->t0) / 1e6);
	sl_report_note(&s->rep, SL_AUDIT_EV_RUN_JOB_START, NULL, NULL, NULL, NULL,
	               json_pack("{s:i, s:s}", "pid", (int)pid, "command", s->o->cmd[0]));
	sl_run_lease_start(s->lease);
	sl_out_job_started(s->out, pid);
}

/* The lease the release granted (NULL: no key_ttl). */
static const json_t *granted_lease(const struct sl_run_st *s)
{
	return s->kms != NULL ? sl_kms_last_lease(s->kms) : NULL;
}

/* serve's data service (struct sl_run_serve_in), over this run's datasets. */
static SL_RESULT serve_data_service(void *ctx, json_t *data, const char *token, const char **socket)
{
	struct sl_run_st *s = ctx;
	sl_err rc = sl_run_data_service(s, data, token);
	*socket = rc == SL_OK ? sl_dsvc_path(s->dsvc) : NULL;
	return rc;
}

static SL_RESULT step_job(struct sl_run_st *s, int *exit_code, const char **why)
{
	sl_err rc = SL_E_INTERNAL;
	json_t *data = json_object(), *e = NULL;
	char *text = NULL, **envp = NULL;
	int fds[SL_RUN_MAX_DATASETS];
	size_t nfds = 0;
	sl_job_result res;
	extern char **environ;

	SL_ENSURE(data != NULL, SL_E_NOMEM, "SECLAUNCH_DATA");
	for (size_t i = 0; i < s->n; i++) {
		sl_dataset *d = &s->ds[i];
		if (d->streamed) {
			e = stream_entry(s, d);
			SL_ENSURE(e != NULL && json_object_set_new(data, sl_dataset_id(d), e) == 0,
			          SL_E_NOMEM, "SECLAUNCH_DATA");
			e = NULL;
			continue;
		}
		int fd = sl_stage_fd(d->stage);
		if (fd >= 0)
			fds[nfds++] = fd;
		SL_GUARD(sl_stage_describe(d->stage, fd, &e));
		json_object_set_new(e, "root", json_string(d->root));
		if (d->man != NULL)
			json_object_set_new(e, "files", files_json(d->man));
		SL_ENSURE(json_object_set_new(data, sl_stage_dataset_id(d->stage), e) == 0,
		          SL_E_NOMEM, "SECLAUNCH_DATA");
		e = NULL;
	}
	/* every record of the launch is on disk before a job (or serve's
	 * clients) can see any data */
	rc = sl_audit_sync(s->rep.audit);
	if (rc != SL_OK)
		SL_GUARD(sl_err_wrap(rc, "audit log %s", s->o->audit_log));
	s->rep.defer = false;
	if (s->o->serve.on) {
		struct sl_run_serve_in in = {.rep = &s->rep,
		                             .o = &s->o->serve,
		                             .user = &s->user,
		                             .ndatasets = s->n,
		                             .out = s->out,
		                             .lease = s->lease,
		                             .granted = granted_lease(s),
		                             .data_service = serve_data_service,
		                             .ctx = s};
		SL_GUARD(sl_run_step_serve(&in, data, why, exit_code));
		rc = SL_OK;
		goto out;
	}
	SL_GUARD(sl_run_data_service(s, data, NULL));
	SL_GUARD(data_env_text(&s->rep, data, &text));
	SL_GUARD(sl_job_env_build(s->o->env, environ, text, &envp));
	CHECK_SIGNAL();
	const char *nocg = getenv("SECLAUNCH_NO_CGROUP");
	sl_job_spec sp = {.argv = s->wl.exec_argv != NULL ? s->wl.exec_argv : s->o->cmd,
	                  .path = s->exe,
	                  .exec_fd = s->wl.exe_fd >= 0 ? &s->wl.exe_fd : NULL,
	                  .stop_fd = sl_run_lease_stop_fd(s->lease, granted_lease(s)),
	                  .envp = envp,
	                  .fds = fds,
	                  .nfds = nfds,
	                  .timeout_s = s->o->timeout_s,
	                  .grace_s =
	                      s->o->kill_grace_set ? s->o->kill_grace_s : SL_RUN_KILL_GRACE_DEFAULT,
	                  .user = &s->user,
	                  .name = s->rep.job_id,
	                  .no_cgroup = nocg != NULL && strcmp(nocg, "1") == 0,
	                  .started = job_started,
	                  .ctx = s};
	sl_report_say(&s->rep, "starting the job: %s", s->o->cmd[0]);
	rc = sl_job_run(&sp, &res);
	/* the lease is still renewed while the outputs are sealed: their keys
	 * are under it until wiped (sl_out_finish; stopped after it) */
	sl_run_lease_job_over(s->lease);
	SL_GUARD(rc);
	sl_out_job_exited(s->out, &res);
	*exit_code = res.exit_code;
	SL_GUARD(sl_report_record(
	    &s->rep, SL_AUDIT_EV_RUN_JOB_EXIT, NULL, NULL, NULL, NULL,
	    json_pack("{s:i, s:i, s:i, s:b, s:b, s:b, s:i, s:s, s:i, s:s?}", "pid", (int)res.pid,
	              "exit_code", res.exit_code, "signal", res.signaled ? res.signo : 0,
	              "timed_out", res.timed_out, "killed", res.killed, "escalated", res.escalated,
	              "forwarded_signal", res.forwarded, "containment", res.containment,
	              "leftover_killed", (int)res.leftover, "user",
	              s->user.set ? s->user.name : NULL)));
	if (res.leftover > 0)
		sl_report_say(&s->rep, "killed %u process%s the job left running (%s containment)",
		              res.leftover, res.leftover == 1 ? "" : "es", res.containment);
	if (res.timed_out)
		sl_report_say(&s->rep, "the job ran past --timeout %u s and was stopped",
		              s->o->timeout_s);
	if (res.stopped)
		(void)sl_run_lease_end(s->lease, exit_code);
	rc = SL_OK;
out:
	json_decref(e);
	json_decref(data);
	if (text != NULL) {
		sl_wipe(text, strlen(text));
		free(text);
	}
	sl_strv_free(envp);
	return rc;
}

/* Wipes every key and all staged plaintext; says so in the audit log. */
static SL_RESULT wipe_all(struct sl_run_st *s, const char *why)
{
	json_t *list = json_array();
	size_t deks = 0;
	bool all = true;
	/* a run that failed while the challenge was on its way: the thread may
	 * still make the ephemeral key, which is wiped below */
	sl_run_challenge_join(s);

	/* no descriptor is handed out once the wipe starts */
	sl_dsvc_free(s->dsvc);
	s->dsvc = NULL;
	for (size_t i = 0; i < s->n; i++) {
		sl_dataset *d = &s->ds[i];
		if (d->stream != NULL) {
			sl_stream_stats st;
			sl_err w = sl_stream_wipe_all(d->stream);
			sl_stream_stats_get(d->stream, &st);
			all &= w == SL_OK;
			json_array_append_new(
			    list,
			    json_pack("{s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I}", "dataset",
			              sl_dataset_id(d), "method", "stream", "zeroed", w == SL_OK,
			              "window", (json_int_t)st.window, "peak_staged",
			              (json_int_t)st.peak, "shards_staged", (json_int_t)st.staged,
			              "shards_wiped", (json_int_t)st.wiped, "shards_reused",
			              (json_int_t)st.reused, "shards_refetched",
			              (json_int_t)st.refetched));
			sl_stream_free(d->stream);
			d->stream = NULL;
		}
		if (d->stage != NULL) {
			sl_err w = sl_stage_wipe(d->stage);
			all &= w == SL_OK;
			json_array_append_new(list, json_pack("{s:s, s:s, s:b}", "dataset",
			                                      sl_stage_dataset_id(d->stage),
			                                      "method", sl_stage_method(d->stage),
			                                      "zeroed", w == SL_OK));
			sl_stage_free(d->stage);
			d->stage = NULL;
		}
		if (d->dek != NULL) {
			sl_secret_free(d->dek);
			d->dek = NULL;
			deks++;
		}
	}
	bool eph = s->eph_sk != NULL;
	sl_secret_free(s->eph_sk);
	s->eph_sk = NULL;
	return sl_report_record(
	    &s->rep, SL_AUDIT_EV_RUN_WIPE, NULL, NULL, all ? SL_AUDIT_ALLOW : SL_AUDIT_ERROR, NULL,
	    json_pack("{s:s, s:o, s:s?, s:i, s:b, s:b, s:O?}", "after", why, "staged", list,
	              "partly_staged_wiped", s->partial, "deks_wiped_unused", (int)deks,
	              "ephemeral_key_wiped_now", eph, "all_zeroed", all, "context", s->context));
}

static void cleanup(struct sl_run_st *s)
{
	for (size_t i = 0; i < s->n; i++)
		sl_dataset_free(&s->ds[i]);
	json_decref(s->evidence);
	json_decref(s->identity);
	sl_claims_free(s->claims);
	/* a run that failed while the challenge was on its way */
	sl_run_challenge_join(s);
	sl_secret_free(s->eph_sk);
	s->eph_sk = NULL;
	sl_kms_free(s->kms);
	s->rep.policy_digest = NULL;
	sl_policy_free(s->policy);
	sl_run_lease_free(s->lease);
	s->lease = NULL;
	sl_wl_free(&s->wl);
	json_decref(s->context);
}

int sl_run_execute(struct sl_run *o)
{
	struct sl_run_st s;
	sl_err rc;
	int job_code = -1, run_code, lease_code = 0;
	char detail[1024];
	const char *why = "job exit", *cmd = o->serve.on ? "serve" : "run";

	memset(&s, 0, sizeof(s));
	s.t0 = sl_now_ns();
	s.rep.defer = true;
	s.rep.cmd = cmd;
	s.rep.audit_log = o->audit_log;
	s.o = o;
	for (size_t i = 0; i < SL_RUN_MAX_DATASETS; i++)
		sl_dataset_init(&s.ds[i]);
	sl_wl_init(&s.wl);
	struct sl_run_lease_cfg lc = {.rep = &s.rep,
	                              .kms_url = o->kms_url,
	                              .kms_ca = o->kms_ca,
	                              .kms_pin = o->kms_pin,
	                              .grace_s = o->lease_grace_s,
	                              .renew = sl_run_renew,
	                              .ctx = &s};
	s.lease = sl_run_lease_new(&lc);
	if (o->serve.on)
		s.context = sl_run_serve_context();
	rc = sl_supervise_init();
	if (rc != SL_OK) {
		json_decref(s.context);
		sl_run_lease_free(s.lease);
		return sl_cli_fail(cmd, rc);
	}
#define STEP(name, call)                                                                           \
	do {                                                                                       \
		uint64_t t_ = sl_now_ns();                                                         \
		s.step = name;                                                                     \
		rc = (call);                                                                       \
		step_time(&s, name, t_);                                                           \
		if (rc == SL_OK && poll_sig() != 0)                                                \
			rc = sl_err_set(SL_E_SYSTEM,                                               \
			                "interrupted by signal %d before the job started", g_sig); \
		if (rc != SL_OK)                                                                   \
			goto failed;                                                               \
	} while (0)
	STEP("audit", step_audit_open(&s));
	STEP("command", step_command(&s));
	STEP("datasets", step_datasets(&s));
	/* what --output and --resume name, read before anything is attested */
	STEP("datasets", step_outputs_open(&s));
	STEP("policy", step_policy(&s));
	STEP("gpu", sl_run_step_gpu(&s));
	STEP("challenge", sl_run_challenge_begin(&s));
	/* serve starts no command: it measures the tasks' command when given */
	if (!o->serve.on || o->serve.measure != NULL)
		STEP("workload", sl_run_step_workload(&s));
	STEP("challenge", sl_run_challenge_end(&s));
	STEP("evidence", sl_run_step_evidence(&s));
	STEP("identity", sl_run_step_identity(&s));
	STEP("claims", sl_run_step_claims(&s));
	STEP("preflight", step_preflight(&s));
	STEP("outputs", step_outputs_preflight(&s));
	STEP("release", step_release(&s));
	STEP("stage", step_stage(&s));
	STEP("outputs", sl_out_prepare(s.out));
	s.step = o->serve.on ? "serve" : "job";
	rc = step_job(&s, &job_code, &why);
	if (rc != SL_OK)
		goto failed;
	/* a shard that failed to stage while the job ran is not lost in a
	 * job's exit 0: the run fails with it */
	for (size_t i = 0; i < s.n; i++) {
		const sl_dataset *d = &s.ds[i];
		sl_err se = d->stream != NULL ? sl_stream_error(d->stream) : SL_OK;
		if (se != SL_OK) {
			fprintf(stderr, "seclaunch %s: streaming %s failed while the job ran\n",
			        cmd, sl_dataset_id(d));
			sl_err a =
			    sl_report_record(&s.rep, SL_AUDIT_EV_RUN_ERROR, sl_dataset_id(d), NULL,
			                     SL_AUDIT_ERROR, NULL,
			                     json_pack("{s:s, s:s, s:i}", "step", "stream", "error",
			                               sl_err_name(se), "job_exit_code", job_code));
			(void)a;
			if (job_code == 0)
				job_code = sl_err_exit_code(se);
		}
	}
	/* outputs sealed and uploaded (or not): the run's status */
	run_code = sl_out_finish(&s.out, job_code);
	/* ended by the time the seal was over: the seal ran under it */
	bool lease_over = sl_report_lease_ended(&s.rep);
	sl_run_lease_stop(s.lease);
	sl_out_abort(&s.out); /* wiped already; freed now the renewer is gone */
	/* a lease that ended after the job did, while the outputs were sealed:
	 * the run's status is the lease's; run.lease_ended says why (also when
	 * it ended only after everything was sealed, which changes no status) */
	if (sl_run_lease_end(s.lease, &lease_code) && lease_over)
		run_code = lease_code;
	rc = wipe_all(&s, why);
	if (rc != SL_OK)
		fprintf(stderr, "seclaunch %s: warning: %s\n", cmd, sl_err_detail());
	else if (!sl_cli_quiet && o->serve.on)
		fprintf(stderr, "seclaunch serve: stopped (%s); data and keys wiped\n", why);
	else if (!sl_cli_quiet && run_code != job_code)
		/* a preemption (143) or outputs that failed to seal: the run's
		 * status is not the job's, and the last line says both */
		fprintf(stderr,
		        "seclaunch run: job exited %d; seclaunch exits %d%s; data and keys wiped\n",
		        job_code, run_code,
		        run_code == SL_OUT_PREEMPTED_EXIT ? " (preempted, outputs sealed)" : "");
	else if (!sl_cli_quiet)
		fprintf(stderr, "seclaunch run: job exited %d; data and keys wiped\n", job_code);
	if (s.rep.audit != NULL && sl_audit_close(s.rep.audit) != SL_OK)
		fprintf(stderr, "seclaunch %s: warning: closing the audit log: %s\n", cmd,
		        sl_err_detail());
	cleanup(&s);
	return run_code;

failed:
	snprintf(detail, sizeof(detail), "%s",
	         sl_err_detail()[0] != '\0' ? sl_err_detail() : sl_err_message(rc));
	{
		int code = job_code >= 0      ? job_code
		           : g_sig != 0       ? 128 + g_sig
		           : s.cmd_status > 0 ? s.cmd_status
		                              : sl_err_exit_code(rc);
		/* the record of the failure, then the wipe: both before exit */
		sl_err a = sl_report_record(
		    &s.rep, SL_AUDIT_EV_RUN_ERROR, NULL, NULL, SL_AUDIT_ERROR, NULL,
		    json_pack("{s:s, s:s, s:s, s:i}", "step", s.step, "error", sl_err_name(rc),
		              "message", detail, "exit_code", code));
		/* the renewer reads the outputs (and the datasets): stopped first */
		sl_run_lease_stop(s.lease);
		sl_out_abort(&s.out);
		sl_err w = wipe_all(&s, g_sig != 0 ? "signal" : "error");
		/* a refusal whose reasons are printed already is not printed again
		 * (under --json the one error object is still due) */
		if (!s.explained || sl_cli_json)
			sl_cli_report(cmd, rc, code, detail);
		if (o->serve.on)
			sl_run_serve_failed(s.o, rc, code, detail);
		if ((a != SL_OK || w != SL_OK) && s.rep.audit != NULL)
			fprintf(stderr,
			        "seclaunch %s: warning: the audit log could not record this\n",
			        cmd);
		if (s.rep.audit != NULL && sl_audit_close(s.rep.audit) != SL_OK)
			fprintf(stderr, "seclaunch %s: warning: closing the audit log: %s\n", cmd,
			        sl_err_detail());
		cleanup(&s);
		return code;
	}
}
