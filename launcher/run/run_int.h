/* Private to `seclaunch run` (cmd_run.c parses, run_exec.c executes). */
#ifndef SECLAUNCH_LAUNCHER_RUN_INT_H
#define SECLAUNCH_LAUNCHER_RUN_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "../cli/report.h"
#include "../stage/data_service.h"
#include "../job/job.h"
#include "workload_int.h"
#include "../outputs/outputs.h"
#include "../dataset/dataset.h"
#include "../dataset/remote.h"
#include "../stage/stream.h"
#include "seclaunch/attest.h"
#include "seclaunch/kms_client.h"
#include "seclaunch/policy.h"
#include "seclaunch/sld.h"
#include "seclaunch/audit.h"
#include "seclaunch/stage.h"

#define SL_RUN_MAX_DATASETS 64

struct sl_run {
	const char *policy_path, *policy_sig, *policy_pub;
	const char *kms_url, *kms_ca, *kms_pin;
	const char *tcti, *tee, *collateral;
	const char *cloud_identity, *gcp_jwks, *aws_certs, *region;
	const char *audit_log, *audit_key;
	char audit_log_buf[512];
	sl_stage_where where;
	unsigned timeout_s, threads;
	const char *user;      /* --user USER[:GROUP] (NULL: seclaunch's own) */
	unsigned kill_grace_s; /* --kill-grace (kill_grace_set: given) */
	bool kill_grace_set;
	bool verbose;             /* -v: the probes' own messages (CUDA), step times */
	const char *image_digest; /* --image-digest sha256:... (container jobs) */
	const char *workload_log; /* --workload-log (NULL: $SECLAUNCH_WORKLOAD_LOG, default) */
	unsigned workload_pcr;    /* --workload-pcr (default SL_WORKLOAD_PCR_DEFAULT) */
	unsigned lease_grace_s;   /* --lease-grace: after expiry, before the job is stopped */
	bool gpu_decrypt;         /* --gpu-decrypt: the job decrypts on the GPU */
	sl_job_env *env;
	sl_remote_opts remote; /* --ca-file, --s3-endpoint, --connections */
	uint64_t window;       /* --window: stream staging's limit (0: the default) */
	unsigned linger_s;     /* --linger (linger_set: given) */
	bool linger_set;
	char **datasets;
	size_t ndatasets;
	char **cmd;               /* NULL under serve */
	struct sl_out_cfg outcfg; /* --output, --resume, --preempt-* (outputs.c) */
	struct sl_run_serve {
		bool on;            /* `seclaunch serve`: no job; serve until stopped */
		const char *socket; /* --socket PATH (NULL: a private folder) */
		int ready_fd;       /* --ready-fd N (-1: none) */
		const char *ready_file;
		pid_t until_pid; /* --until-pid (0: none) */
		char **measure;  /* -- CMD ARG...: the tasks' command, measured (NULL: none) */
	} serve;
};

/* The state of one run (run_exec.c, run_attest.c). */
struct sl_run_st {
	struct sl_run *o;
	struct sl_report rep; /* messages and audit records: the job id, the digests */
	const char *step;
	sl_policy *policy;
	sl_kms *kms;
	sl_kms_challenge ch;
	uint8_t eph_pub[SL_EPH_PUB_LEN];
	sl_secret *eph_sk;
	uint8_t binding[SL_BINDING_LEN];
	json_t *evidence, *identity;
	sl_claims *claims;
	sl_gpu_info gpu;
	bool use_gpu;
	size_t n;                           /* the datasets opened (or being opened) */
	sl_dataset ds[SL_RUN_MAX_DATASETS]; /* the operands, in order */
	sl_dsvc *dsvc;                      /* the data service while the job runs */
	const char *partial;        /* dataset whose staging failed midway (wiped by then) */
	sl_job_user user;           /* the job's user (user.set: --user) */
	char exe[4096];             /* the job's executable, resolved before attesting */
	int cmd_status;             /* 126/127: the command cannot be executed (env(1)'s codes) */
	bool explained;             /* a refusal's reasons are on stderr already */
	sl_wl wl;                   /* the job's workload identity (run_measure.c) */
	struct sl_run_lease *lease; /* the keys' lease (run_lease.c), armed by the release's */
	/* sealed outputs (outputs.c; NULL: none) */
	struct sl_outputs *out;
	/* the challenge, asked for on its own thread while the job is measured
	 * (run_attest.c): set by that thread, read after the join */
	struct {
		pthread_t thread;
		bool started;
		sl_err rc;
		char detail[1024];
		uint64_t ns;
	} ch_async;
	uint64_t t0;     /* sl_now_ns() when the run began (-v prints step times) */
	json_t *context; /* serve: node, Slurm job/step (in run.start and run.wipe) */
};

/* run_measure.c: the job's identity, extended into the workload register
 * before the challenge; the evidence then carries the log. */
SL_MUST_USE sl_err sl_run_step_workload(struct sl_run_st *s);

/* run_request.c: the one attested request, for the launch's release and
 * for each renewal of its lease (renewal: its number; 0 at the launch):
 * every key the run holds (the inputs', then the resumed checkpoints'),
 * the output keys, the job. r->rq is ready for sl_kms_release or
 * sl_kms_renew; free wipes what a release filled in and was not taken. */
struct sl_run_req {
	sl_kms_key_req keys[SL_RUN_MAX_DATASETS + SL_OUT_MAX];
	size_t nresume; /* the resume keys, after the inputs' */
	sl_kms_output_want want[SL_OUT_MAX];
	size_t noutputs;
	sl_kms_output_key out_keys[SL_OUT_MAX];
	json_t *job;
	sl_kms_release_req rq;
};
SL_MUST_USE sl_err sl_run_request(struct sl_run_st *s, const uint8_t *nonce, const uint8_t *eph_pub,
                                  const json_t *evidence, const json_t *identity, unsigned renewal,
                                  struct sl_run_req *r);
void sl_run_request_free(struct sl_run_req *r);
/* This machine's evidence (--tee) bound to binding, the workload log in it. */
SL_MUST_USE sl_err sl_run_collect(struct sl_run_st *s, const uint8_t binding[static SL_BINDING_LEN],
                                  json_t **ev);

/* run_lease.c: the lease of the released keys (release answer + key_ttl).
 * new: a lease not yet armed (NULL: out of memory, no lease); stop_fd arms
 * it from granted, the release's lease (NULL: no key_ttl, no lease), the
 * first time, and returns the descriptor for sl_job_spec.stop_fd (NULL: no
 * lease); start: when the job has started (renewals from then on, in a
 * thread; nothing while not armed); stop: joins the renewal thread after
 * the job ended; end: when the lease ended the job, records
 * run.lease_ended with the reason and sets *exit_code to the exit status of
 * that reason (docs/exit-codes.md); false when it did not. The end itself
 * is in the report (sl_report_lease_ended), for every thread. */
struct sl_run_lease_cfg {
	struct sl_report *rep;
	const char *kms_url, *kms_ca, *kms_pin; /* the renewals' own connection */
	unsigned grace_s;                       /* --lease-grace */
	/* one renewal over kms, the launch's attested request again
	 * (sl_run_renew): SL_OK with *lease, NULL when there is none any more */
	sl_err (*renew)(void *ctx, sl_kms *kms, unsigned renewal, json_t **lease);
	void *ctx;
};
struct sl_run_lease *sl_run_lease_new(const struct sl_run_lease_cfg *c);
const int *sl_run_lease_stop_fd(struct sl_run_lease *L, const json_t *granted);
void sl_run_lease_start(struct sl_run_lease *L);
void sl_run_lease_stop(struct sl_run_lease *L);
/* The job is gone; the lease is still renewed (the outputs are sealed
 * under it) until sl_run_lease_stop. */
void sl_run_lease_job_over(struct sl_run_lease *L);
/* Whether the lease ended (run.lease_ended recorded the first time), and
 * the run's exit status for its reason. */
bool sl_run_lease_end(struct sl_run_lease *L, int *exit_code);
void sl_run_lease_free(struct sl_run_lease *L);
/* run_request.c: a renewal of the run's lease (a sl_run_lease_cfg.renew;
 * ctx: the struct sl_run_st): a fresh challenge, the workload register
 * quoted again, the GPU's CC state read again, every key and output key. */
SL_MUST_USE sl_err sl_run_renew(void *ctx, sl_kms *kms, unsigned renewal, json_t **lease);
#define SL_RUN_LEASE_GRACE_DEFAULT 2

SL_MUST_USE sl_err sl_run_step_gpu(struct sl_run_st *s);
/* The challenge round trip overlapped with the measurement: begin starts
 * the challenge step (run_attest.c) on a thread, end joins it and returns its result
 * (the thread's error detail carried over), SL_OK when begin was not
 * called; join only waits for the thread (cleanup), harmless twice. */
SL_MUST_USE sl_err sl_run_challenge_begin(struct sl_run_st *s);
SL_MUST_USE sl_err sl_run_challenge_end(struct sl_run_st *s);
void sl_run_challenge_join(struct sl_run_st *s);
SL_MUST_USE sl_err sl_run_step_evidence(struct sl_run_st *s);
SL_MUST_USE sl_err sl_run_step_identity(struct sl_run_st *s);
SL_MUST_USE sl_err sl_run_step_claims(struct sl_run_st *s);

/* The default of --window. */
#define SL_RUN_WINDOW_DEFAULT ((uint64_t)1 << 30)
/* The default of --linger, in seconds: how long a released streamed shard
 * stays staged for a reader that asks for it again. */
#define SL_RUN_LINGER_DEFAULT_S 2
/* The most bytes of SECLAUNCH_DATA with its file lists in it (the kernel
 * takes at most 128 KiB per environment string). */
#define SL_RUN_DATA_ENV_MAX 65536

/* The default of --kill-grace, in seconds. */
#define SL_RUN_KILL_GRACE_DEFAULT 10

/* SECLAUNCH_DATA past max bytes (SL_RUN_DATA_ENV_MAX: the kernel takes at
 * most 128 KiB per environment string, and a dataset of a few thousand
 * files lists more): each entry's "files" and "shards" are taken out, their
 * counts and "files_from": "service" put in (the job pages them from the
 * data service). *cut_any says whether anything was. SL_E_TOO_LARGE when
 * it is still over max (run_data.c). */
SL_MUST_USE sl_err sl_run_data_slim(const struct sl_report *rep, json_t *data, size_t max,
                                    bool *cut_any);
/* serve: the data service until SIGTERM/SIGINT/SIGHUP, --until-pid's end or
 * the end of the keys' lease (run_serve.c); *why says which, *exit_code is
 * 0 but after a lease that ended. What it takes of the launch: */
struct sl_run_serve_in {
	struct sl_report *rep;
	struct sl_run_serve *o;  /* --socket, --ready-fd (closed once written), ... */
	const sl_job_user *user; /* the job's user: the --ready-file is theirs */
	size_t ndatasets;        /* what it serves */
	struct sl_outputs *out;  /* NULL: no --output */
	struct sl_run_lease *lease;
	const json_t *granted; /* the release's lease (NULL: none) */
	/* the data service over the staged datasets for the holders of token
	 * (sl_run_data_service); *socket: where it listens */
	sl_err (*data_service)(void *ctx, json_t *data, const char *token, const char **socket);
	void *ctx;
};
SL_MUST_USE sl_err sl_run_step_serve(const struct sl_run_serve_in *in, json_t *data,
                                     const char **why, int *exit_code);
/* serve: a failure before serving, as one JSON line on --ready-fd
 * ({"error": {"code", "exit", "message"}}) for the caller that waits there. */
void sl_run_serve_failed(struct sl_run *o, sl_err rc, int exit_code, const char *message);
/* serve: who and where, for the audit records (run_serve.c). */
json_t *sl_run_serve_context(void);

/* The options run and serve share (cmd_run.c): the attested launch's. */
enum {
	SL_RUN_O_POLICY = 256,
	SL_RUN_O_POLICY_SIG,
	SL_RUN_O_POLICY_PUB,
	SL_RUN_O_TEE,
	SL_RUN_O_COLLATERAL,
	SL_RUN_O_STAGE,
	SL_RUN_O_ENV,
	SL_RUN_O_ENV_PASS,
	SL_RUN_O_TIMEOUT,
	SL_RUN_O_THREADS,
	SL_RUN_O_AUDIT_KEY,
	SL_RUN_O_USER,
	SL_RUN_O_KILL_GRACE,
	SL_RUN_O_CLEAN_ENV,
	SL_RUN_O_WINDOW,
	SL_RUN_O_GPU_DECRYPT,
	SL_RUN_O_IMAGE_DIGEST,
	SL_RUN_O_WORKLOAD_PCR,
	SL_RUN_O_WORKLOAD_LOG,
	SL_RUN_O_LEASE_GRACE,
	SL_RUN_O_LINGER,
	SL_RUN_O_LAST, /* a command's own keys start here */
};
#define SL_RUN_LAUNCH_OPTS                                                                         \
	{"policy", required_argument, SL_RUN_O_POLICY, NULL},                                      \
	    {"policy-sig", required_argument, SL_RUN_O_POLICY_SIG, NULL},                          \
	    {"policy-pubkey", required_argument, SL_RUN_O_POLICY_PUB, NULL},                       \
	    {"tee", required_argument, SL_RUN_O_TEE, NULL, SL_CLI_TEE_VALUES},                     \
	    {"collateral", required_argument, SL_RUN_O_COLLATERAL, NULL},                          \
	    {"stage", required_argument, SL_RUN_O_STAGE, NULL, SL_CLI_STAGE_VALUES},               \
	    SL_REGION_ID_OPTS, {"threads", required_argument, SL_RUN_O_THREADS, NULL},             \
	    {"audit-key", required_argument, SL_RUN_O_AUDIT_KEY, NULL},                            \
	    {"user", required_argument, SL_RUN_O_USER, NULL},                                      \
	    {"window", required_argument, SL_RUN_O_WINDOW, NULL},                                  \
	    {"linger", required_argument, SL_RUN_O_LINGER, NULL},                                  \
	    {"lease-grace", required_argument, SL_RUN_O_LEASE_GRACE, NULL}, SL_REMOTE_OPTS,        \
	{                                                                                          \
		"verbose", no_argument, 'v', NULL                                                  \
	}
/* The shared options (cli.h) that run and serve take. */
#define SL_RUN_SHARED (SL_SH_QUIET | SL_SH_JSON | SL_SH_KMS_ALL | SL_SH_TCTI | SL_SH_AUDIT_LOG)
/* Zeroes r and sets the defaults run and serve start from. */
void sl_run_init(struct sl_run *r);
/* The operands of run and serve: the datasets (sl_cli_spec.on_args). */
int sl_run_on_args(void *ctx, int argc, char **argv);
/* One of the shared options (cmd names the messages); 0 or an exit code. */
int sl_run_option(struct sl_run *r, const char *cmd, int key, char *arg);
struct sl_cli_shared;
/* The shared options agree and the defaults are filled in; 0 or an exit code. */
int sl_run_check(struct sl_run *r, const struct sl_cli_shared *sh, const char *cmd);

/* Runs the whole launch; returns the exit code. */
int sl_run_execute(struct sl_run *r);

#endif
