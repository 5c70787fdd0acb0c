/* Private to the launcher: the job's environment (job_env.c) and its
 * supervision (supervise.c). */
#ifndef SECLAUNCH_LAUNCHER_JOB_H
#define SECLAUNCH_LAUNCHER_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "seclaunch/error.h"

/* ---- environment ------------------------------------------------------ */

/* The job gets a clean environment: only the allow-listed names (PATH, HOME,
 * LANG, LC_*, TERM, TZ, CUDA_*, NVIDIA_*) of seclaunch's own environment, the
 * names given with --env-pass, the values given with --env, and
 * SECLAUNCH_DATA, which nothing else may set. */
typedef struct sl_job_env sl_job_env;

SL_MUST_USE sl_err sl_job_env_new(sl_job_env **out);
void sl_job_env_free(sl_job_env *e);
/* --env K=V (a later value for K replaces an earlier one). */
SL_MUST_USE sl_err sl_job_env_set(sl_job_env *e, const char *kv);
/* --env-pass K: K's value in seclaunch's environment, when set. */
SL_MUST_USE sl_err sl_job_env_pass(sl_job_env *e, const char *key);
/* The NULL-terminated environment for the job, built from envp (seclaunch's
 * environment) and data_json (SECLAUNCH_DATA; NULL: not set). */
SL_MUST_USE sl_err sl_job_env_build(const sl_job_env *e, char *const *envp, const char *data_json,
                                    char ***out);
void sl_strv_free(char **v);

/* ---- supervision ------------------------------------------------------ */

/* Blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD for the whole run, so a signal
 * that arrives before the job starts is held (and acted on: wipe, exit)
 * instead of killing seclaunch with secrets in memory. Call first. */
SL_MUST_USE sl_err sl_supervise_init(void);
/* The first of SIGINT/SIGTERM/SIGHUP pending (consumed), 0 when none. */
int sl_supervise_take_pending(void);

typedef struct sl_job_spec {
	char *const *argv; /* argv[0] is looked up in the job's PATH */
	char *const *envp; /* from sl_job_env_build */
	const int *fds;    /* inherited at these same numbers; everything else >2 is closed */
	size_t nfds;
	unsigned timeout_s; /* 0: none; then SIGTERM, and SIGKILL after grace_s */
	unsigned grace_s;   /* 0: 5 */
	/* Called once the command has been executed (its pid), before waiting. */
	void (*started)(pid_t pid, void *ctx);
	void *ctx;
} sl_job_spec;

typedef struct sl_job_result {
	pid_t pid;
	int exit_code; /* the status seclaunch exits with: code, or 128+n for signal n */
	bool signaled; /* the job died of signal signo */
	int signo;
	bool timed_out; /* --timeout fired */
	bool killed;    /* the grace period ran out: SIGKILL was sent */
	int forwarded;  /* the last signal forwarded to the job (0: none) */
} sl_job_result;

/* Starts the job in its own process group with PR_SET_PDEATHSIG(SIGKILL),
 * forwards SIGINT/SIGTERM/SIGHUP to that group, enforces the timeout, waits,
 * and kills whatever is left of the group. Errors only when the job could not
 * be started (SL_E_INPUT: the command cannot be executed; SL_E_SYSTEM). */
SL_MUST_USE sl_err sl_job_run(const sl_job_spec *spec, sl_job_result *res);

#endif
