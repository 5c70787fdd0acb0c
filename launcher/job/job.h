/* Private to the launcher: the job's environment (job_env.c) and its
 * supervision (supervise.c). */
#ifndef SECLAUNCH_LAUNCHER_JOB_H
#define SECLAUNCH_LAUNCHER_JOB_H

#include <stdbool.h>
#include <stdint.h>
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
/* --user: HOME, USER and LOGNAME of the job's user (--env still wins). */
SL_MUST_USE sl_err sl_job_env_user(sl_job_env *e, const char *name, const char *home);
/* --clean-env: the distributed-training variables (RANK, WORLD_SIZE,
 * MASTER_ADDR, SLURM_*, ...) are not passed by default. */
void sl_job_env_clean(sl_job_env *e);
/* A variable seclaunch itself sets for the job ("K=V", e.g. the data
 * service's socket); it wins over everything else. */
SL_MUST_USE sl_err sl_job_env_own(sl_job_env *e, const char *kv);
/* The NULL-terminated environment for the job, built from envp (seclaunch's
 * environment) and data_json (SECLAUNCH_DATA; NULL: not set). */
SL_MUST_USE sl_err sl_job_env_build(const sl_job_env *e, char *const *envp, const char *data_json,
                                    char ***out);
/* The folder of the Python helper (seclaunch_data.py) of a source build:
 * <repo>/jobside/python beside the <repo>/bin this program runs from, or
 * NULL when this program is installed (the package puts the helper where
 * python3 imports from). sl_job_env_build sets PYTHONPATH to it unless
 * --env or --env-pass set PYTHONPATH; the workload measurement knows that
 * value for seclaunch's own (docs/job-interface.md). */
const char *sl_job_pyhelper_dir(void);
void sl_strv_free(char **v);

/* ---- supervision ------------------------------------------------------ */

/* Blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD for the whole run, so a signal
 * that arrives before the job starts is held (and acted on: wipe, exit)
 * instead of killing seclaunch with secrets in memory. Call first. */
SL_MUST_USE sl_err sl_supervise_init(void);
/* The first of SIGINT/SIGTERM/SIGHUP pending (consumed), 0 when none. */
int sl_supervise_take_pending(void);

/* ---- the job's user (--user USER[:GROUP]) --------------------------------- */

#define SL_JOB_MAX_GROUPS 64
typedef struct sl_job_user {
	bool set; /* false: the job runs as seclaunch's own user */
	uid_t uid;
	gid_t gid;
	gid_t groups[SL_JOB_MAX_GROUPS]; /* supplementary groups (the user's) */
	int ngroups;
	char name[64];
	char home[256];
} sl_job_user;

/* Resolves "USER[:GROUP]" (names or numbers) against the user database.
 * Only root may name another user (SL_E_USAGE otherwise); naming oneself is
 * allowed and changes nothing. */
SL_MUST_USE sl_err sl_job_user_parse(const char *spec, sl_job_user *u);

/* The executable the job will run: argv0 looked up as execvp would, in the
 * PATH of envp (the job's environment), checked for the job's user (NULL:
 * this process). 0 and the path in out; 127 when there is none; 126 when it
 * exists but cannot be executed (the reason in sl_err_detail()). */
int sl_job_resolve(const char *argv0, char *const *envp, const sl_job_user *u, char *out, size_t n);

/* ---- opening as the job's user (user_open.c) --------------------------- */

/* Opens path (a file or a folder, read-only) with the rights of u: a child
 * takes u's groups, gid and uid and PR_SET_NO_NEW_PRIVS, opens it (following
 * what u could follow) and hands the descriptor back over a socketpair
 * (SCM_RIGHTS); the caller reads only through it. A folder must be one u may
 * search. u NULL or !u->set: opened by this process. SL_E_IO naming path
 * and the user when u cannot open it. */
SL_MUST_USE sl_err sl_user_open(const sl_job_user *u, const char *path, int *fd);
/* Creates the new file path (mode 0600, write-only; it must not exist, and
 * its last component is never followed) as u, the same way: a file the job's
 * user is handed (serve's --ready-file) is made in the user's name, so a
 * folder the user could change under root's feet decides nothing. */
SL_MUST_USE sl_err sl_user_create(const sl_job_user *u, const char *path, int *fd);

/* ---- containment (contain.c) ------------------------------------------- */

/* Every process the job starts stays countable and killable, whatever
 * setsid or double forks it does: a cgroup v2 of its own (below seclaunch's
 * cgroup, when that is writable and the kernel has cgroup.kill), else
 * seclaunch as a child subreaper that finds and kills what is left. */
typedef enum { SL_CONTAIN_NONE, SL_CONTAIN_CGROUP, SL_CONTAIN_SUBREAPER } sl_contain_kind;
typedef struct sl_contain {
	sl_contain_kind kind;
	int procs_fd; /* the job cgroup's cgroup.procs, written by the child */
	int dir_fd;   /* the job cgroup's directory (clone3 CLONE_INTO_CGROUP) */
	char dir[512];
	char why[256]; /* why no cgroup (when kind is SUBREAPER) */
} sl_contain;

/* Sets it up before the fork; name is unique to this run. allow_cgroup
 * false: the subreaper alone (--no-cgroup, tests). */
SL_MUST_USE sl_err sl_contain_init(sl_contain *c, const char *name, bool allow_cgroup);
/* In the child, before exec (async-signal-safe): joins the job's cgroup. */
int sl_contain_enter(const sl_contain *c);
/* fork(), but with a cgroup the child starts in it (clone3 with
 * CLONE_INTO_CGROUP: no migration through cgroup.procs, which waits for an
 * RCU grace period, ~10 ms); *entered tells the child whether it is in the
 * cgroup already (false: fork's fallback, sl_contain_enter still due). The
 * child of clone3 is single-threaded like fork's but glibc was not told:
 * it may use only raw system calls before exec. */
pid_t sl_contain_fork(const sl_contain *c, bool *entered);
/* Sends sig to every process of the job still running (pgid: its group). */
void sl_contain_signal(const sl_contain *c, pid_t pgid, int sig);
/* Kills every process of the job still running, waits until they are gone
 * and reaps them; returns how many there were. */
unsigned sl_contain_kill_all(sl_contain *c, pid_t pgid);
/* Removes the cgroup (after sl_contain_kill_all). */
void sl_contain_free(sl_contain *c);
const char *sl_contain_name(const sl_contain *c);

/* ---- supervision ------------------------------------------------------ */

typedef struct sl_job_spec {
	char *const *argv; /* argv[0] as the user gave it */
	const char *path;  /* the executable (sl_job_resolve); NULL: execvp(argv[0]) */
	char *const *envp; /* from sl_job_env_build */
	const int *fds;    /* inherited at these same numbers; everything else >2 is closed */
	size_t nfds;
	unsigned timeout_s;      /* 0: none; then SIGTERM, and SIGKILL after grace_s */
	unsigned grace_s;        /* after --timeout or a second SIGINT/SIGTERM: SIGKILL */
	const sl_job_user *user; /* NULL or !set: seclaunch's own user */
	const char *name;        /* unique to this run: the cgroup's name */
	bool no_cgroup;          /* containment by subreaper only */
	/* The measured executable (run_workload.c): started with
	 * execveat(*exec_fd, "", AT_EMPTY_PATH) so what runs is what was
	 * measured; NULL: path / execvp. */
	const int *exec_fd;
	/* Readable when the job must stop (its lease ended, run_lease.c): the
	 * job gets SIGTERM, then SIGKILL after grace_s. NULL: none. */
	const int *stop_fd;
	/* Called once the command has been executed (its pid), before waiting. */
	void (*started)(pid_t pid, void *ctx);
	void *ctx;
} sl_job_spec;

typedef struct sl_job_result {
	pid_t pid;
	int exit_code; /* the status seclaunch exits with: code, or 128+n for signal n */
	bool signaled; /* the job died of signal signo */
	int signo;
	bool timed_out;          /* --timeout fired */
	bool stopped;            /* stop_fd fired (the lease ended) */
	bool killed;             /* the grace period ran out: SIGKILL was sent */
	bool escalated;          /* a second SIGINT/SIGTERM started the grace period */
	int forwarded;           /* the last signal forwarded to the job (0: none) */
	const char *containment; /* "cgroup" or "subreaper" */
	unsigned leftover;       /* processes of the job still running at its end, killed */
} sl_job_result;

/* Starts the job in its own process group and containment, with
 * PR_SET_PDEATHSIG(SIGKILL), as spec->user when set (groups, gid, uid
 * dropped after every other descriptor is closed; no_new_privs), forwards
 * SIGINT/SIGTERM/SIGHUP to that group, escalates a second SIGINT/SIGTERM to
 * SIGKILL after grace_s, enforces the timeout, waits, and kills whatever is
 * left of the job, escaped descendants included. Errors only when the job
 * could not be started (SL_E_INPUT: the command cannot be executed;
 * SL_E_SYSTEM). */
SL_MUST_USE sl_err sl_job_run(const sl_job_spec *spec, sl_job_result *res);

#endif
