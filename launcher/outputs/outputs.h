/* Sealed outputs of `seclaunch run` (docs/job-interface.md, "Outputs"):
 * --output NAME=DEST, --resume NAME=SOURCE, the in-memory output folder,
 * checkpoints, preemption. Private to the launcher: run_exec.c calls the
 * hooks below at fixed steps with what they take of the launch (struct
 * sl_out_ctx); everything else lives in outputs.c (options, pre-flight,
 * release), outputs_dest.c (destinations, LATEST), outputs_resume.c,
 * outputs_seal.c, outputs_dir.c, preempt.c and remote_upload.c. */
#ifndef SECLAUNCH_LAUNCHER_OUTPUTS_H
#define SECLAUNCH_LAUNCHER_OUTPUTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../dataset/remote.h"
#include "../job/job.h"
#include "seclaunch/claims.h"
#include "seclaunch/error.h"
#include "seclaunch/kms_client.h"
#include "seclaunch/policy.h"

#define SL_OUT_MAX 16
#define SL_OUT_NAME_MAX 64
/* seclaunch's exit status after a preemption whose outputs were saved:
 * 128 + SIGTERM, what a process the platform stopped reports. */
#define SL_OUT_PREEMPTED_EXIT 143
#define SL_OUT_ENV "SECLAUNCH_OUTPUT_DIR"

enum sl_preempt_kind { SL_PREEMPT_NONE, SL_PREEMPT_SIGTERM, SL_PREEMPT_GCE, SL_PREEMPT_AWS };

/* The options, as cmd_run.c parses them. */
struct sl_out_cfg {
	const char *spec[SL_OUT_MAX]; /* NAME=DEST */
	size_t n;
	const char *resume[SL_OUT_MAX]; /* NAME=SOURCE */
	size_t nresume;
	uint64_t limit;               /* --output-limit (0: none but the memory's) */
	enum sl_preempt_kind preempt; /* --preempt-watch */
	char preempt_base[512];       /* metadata base URL */
	int preempt_signal;           /* --preempt-signal (default SIGTERM) */
	unsigned preempt_grace_s;     /* --preempt-grace (default 25) */
	bool preempt_signal_set, preempt_grace_set;
	uint64_t ckpt_min_interval_ms; /* --checkpoint-min-interval (default 1 s) */
	bool ckpt_min_interval_set;
	/* a remote output's sealing, from the environment, read and checked
	 * by sl_out_check before anything runs (a bad value is a usage error
	 * then, not a checkpoint lost after the job) */
	uint64_t up_shard_size; /* SECLAUNCH_OUTPUT_SHARD_SIZE */
	uint64_t up_uploads;    /* SECLAUNCH_OUTPUT_UPLOADS */
	uint64_t up_in_mem;     /* SECLAUNCH_OUTPUT_STAGE_MEMORY */
	bool ns;                /* a private mount namespace was made (sl_out_early) */
	char ns_why[256];       /* why not */
};

enum {
	SL_OUT_O_OUTPUT = 0x2300,
	SL_OUT_O_RESUME,
	SL_OUT_O_LIMIT,
	SL_OUT_O_PREEMPT_WATCH,
	SL_OUT_O_PREEMPT_SIGNAL,
	SL_OUT_O_PREEMPT_GRACE,
	SL_OUT_O_CKPT_MIN_INTERVAL,
};
#define SL_OUT_OPTS                                                                                \
	{"output", required_argument, SL_OUT_O_OUTPUT, NULL},                                      \
	    {"resume", required_argument, SL_OUT_O_RESUME, NULL},                                  \
	    {"output-limit", required_argument, SL_OUT_O_LIMIT, NULL},                             \
	    {"preempt-watch", required_argument, SL_OUT_O_PREEMPT_WATCH, NULL,                     \
	     SL_CLI_PREEMPT_VALUES},                                                               \
	    {"preempt-signal", required_argument, SL_OUT_O_PREEMPT_SIGNAL, NULL},                  \
	    {"preempt-grace", required_argument, SL_OUT_O_PREEMPT_GRACE, NULL},                    \
	{                                                                                          \
		"checkpoint-min-interval", required_argument, SL_OUT_O_CKPT_MIN_INTERVAL, NULL     \
	}
#define SL_OUT_HELP                                                                                \
	"Outputs (sealed; docs/job-interface.md, \"Outputs\"):\n"                                  \
	"  --output NAME=DEST     the job writes $SECLAUNCH_OUTPUT_DIR/NAME/ (memory); it is\n"    \
	"                         sealed to DEST (a folder, https://, s3://, gs://) at exit,\n"    \
	"                         at each checkpoint and on preemption (repeatable)\n"             \
	"  --resume NAME=SOURCE   stage the newest sealed checkpoint of NAME from SOURCE\n"        \
	"                         into $SECLAUNCH_OUTPUT_DIR/NAME/ before the job starts\n"        \
	"  --output-limit SIZE    at most SIZE bytes of outputs (K, M, G suffixes)\n"              \
	"  --preempt-watch KIND[=URL]  sigterm, gce or aws (metadata base URL optional):\n"        \
	"                         on notice signal the job, wait, seal, upload, exit 143\n"        \
	"  --preempt-signal SIG   the signal the job gets on notice (default TERM)\n"              \
	"  --preempt-grace S      seconds the job has before it is killed (default 25)\n"          \
	"  --checkpoint-min-interval S  at most one checkpoint every S seconds (default 1;\n"      \
	"                         decimals allowed): requests that arrive while one is\n"          \
	"                         sealed, or sooner, are answered by one checkpoint\n"

/* Takes key/arg when it is one of SL_OUT_OPTS: 1, or -1
 * for a bad value (the message in sl_err_detail()); 0 when not one. */
int sl_out_option(struct sl_out_cfg *c, int key, const char *arg);
/* The options agree (each --resume names an --output). */
SL_MUST_USE sl_err sl_out_check(struct sl_out_cfg *c);
/* Before any thread exists: a private mount namespace for the output
 * folder's tmpfs when seclaunch may make one (why not in c->ns_why). */
void sl_out_early(struct sl_out_cfg *c);

struct sl_report;
struct sl_job_result;
struct sl_outputs;
/* What the outputs take from the launch. */
struct sl_out_ctx {
	struct sl_report *rep;   /* messages, audit records, the lease's end, the job id */
	struct sl_out_cfg *c;    /* the options */
	sl_remote_opts *remote;  /* --ca-file, --s3-endpoint, --connections */
	const sl_job_user *user; /* the job's user (user->set: --user) */
	sl_job_env *env;         /* the job's environment (NULL: serve's ready line) */
	const char *kms_url;     /* named in each sealed manifest */
	unsigned threads;        /* --threads */
};
/* The datasets step: each --output's destination and what LATEST names
 * there, each --resume's newest checkpoint (LATEST, its manifest, the
 * rollback check), before anything is attested. *out: NULL without
 * --output; set as soon as made, so that sl_out_abort wipes a half-open one. */
SL_MUST_USE sl_err sl_out_open(const struct sl_out_ctx *x, struct sl_outputs **out);
/* After the pre-flight: the policy's verdict on every output here, given
 * the inputs' dataset ids (deny: SL_E_POLICY_DENIED, every reason printed
 * and audited, *explained set). */
SL_MUST_USE sl_err sl_out_preflight(struct sl_outputs *O, const sl_policy *policy,
                                    const sl_claims *claims, const char *const *inputs,
                                    size_t ninputs, bool *explained);
/* What the launch's release (and each renewal) asks for besides the
 * inputs: the resumed checkpoints' keys (at most SL_OUT_MAX, appended at
 * keys) and the output keys (want: SL_OUT_MAX); the counts. */
size_t sl_out_resume_keys(const struct sl_outputs *O, sl_kms_key_req *keys);
size_t sl_out_wants(const struct sl_outputs *O, sl_kms_output_want *want);
/* The release's answer: resume_deks[i] for the i-th resume key, keys[i]
 * for the i-th output (both taken over, NULL'd). */
void sl_out_released(struct sl_outputs *O, sl_secret *resume_deks[], sl_kms_output_key keys[]);
/* An --output NAME=DEST's destination: dest (a folder, or a URL ending in
 * '/') and policy_dest (what output_destinations match and what the job's
 * workload identity names: the URL, or file:///ABSOLUTE/PATH/). */
SL_MUST_USE sl_err sl_out_destination(const char *spec, char *dest, size_t dest_n,
                                      char *policy_dest, size_t policy_n, bool *remote);
/* A DEST or SOURCE of this machine as a folder: file:///PATH (or
 * file://localhost/PATH) is PATH; anything else is returned as it is. NULL:
 * a file:// URL of another host. */
const char *sl_out_file_url_path(const char *dest);
/* After staging: the in-memory folder, the resumed checkpoints restored
 * into it (their keys came in the release), the watchers. No KMS call. */
SL_MUST_USE sl_err sl_out_prepare(struct sl_outputs *O);
void sl_out_job_started(struct sl_outputs *O, pid_t pid);
void sl_out_job_exited(struct sl_outputs *O, const struct sl_job_result *res);
/* After the job: the final seal and upload, the wipe of the keys and the
 * plaintext, run.preempted when due. Returns the exit status of the run
 * (job_code, 143 after a saved preemption, or the failure's exit code,
 * reported on stderr). The seal runs under the lease (checked between
 * shards), so the renewer keeps running through it: it reads the outputs'
 * ids, and sl_out_abort frees *O once it has stopped. */
int sl_out_finish(struct sl_outputs **O, int job_code);
/* serve: the output folder ($SECLAUNCH_OUTPUT_DIR; NULL: no --output), and
 * whether a --preempt-watch gce|aws notice came (serve then stops). */
const char *sl_out_dir(const struct sl_outputs *O);
bool sl_out_preempt_noticed(struct sl_outputs *O);
/* Any failure: stop the watchers, wipe the folder, seal nothing; *O is freed. */
void sl_out_abort(struct sl_outputs **O);

/* ---- the in-memory output folder (outputs_dir.c) ----------------------- */

typedef struct sl_memdir {
	char path[256];
	/* the folder, opened once when made: everything in it is reached
	 * through this descriptor (the job's user owns what is inside) */
	int fd;
	bool mounted;     /* a tmpfs of its own (private mount namespace) */
	bool noswap;      /* mounted with noswap (Linux 6.4+) */
	char method[200]; /* what it is, for messages and the audit log */
} sl_memdir;

/* A private folder in memory, owned by uid:gid, mode 0700: its own tmpfs
 * (size limit + headroom, noswap where the kernel has it) when ns is true,
 * else a folder in a tmpfs that exists (/dev/shm, $XDG_RUNTIME_DIR);
 * SL_E_SYSTEM when there is none. */
SL_MUST_USE sl_err sl_memdir_create(sl_memdir *d, bool ns, uint64_t limit, uid_t uid, gid_t gid);
/* Zeroes and removes every file, unmounts, removes the folder: a walk of
 * descriptors (seclaunch/fsat.h) that never follows a link nor leaves the
 * folder's file system, whatever the job renames meanwhile. */
SL_MUST_USE sl_err sl_memdir_wipe(sl_memdir *d);
/* The same for what the folder's subfolder name holds (it stays, empty):
 * an output the job can no longer write to, wiped once sealed. */
SL_MUST_USE sl_err sl_memdir_wipe_sub(sl_memdir *d, const char *name);
/* Total bytes and regular files below the folder dirfd (what names it),
 * links not followed. */
SL_MUST_USE sl_err sl_dir_usage(int dirfd, const char *what, uint64_t *bytes, uint32_t *files);
/* Whether the kernel has swap space on (/proc/swaps lists any). */
bool sl_swap_active(void);

#endif
