/* spank_seclaunch.so: the Slurm SPANK plugin that runs `seclaunch serve`
 * once per node per step (docs/distributed.md).
 *
 * In slurmstepd (the remote context), after the step's options are known and
 * before any task starts, it starts `seclaunch serve` as root with the job's
 * user and the step's command after "--" (serve measures it: the workload
 * identity a policy's `workloads` rule judges), waits for its ready line
 * (socket, token, SECLAUNCH_DATA) and puts SECLAUNCH_DATA,
 * SECLAUNCH_DATA_SOCKET, SECLAUNCH_DATA_TOKEN (and, with --seclaunch-output,
 * SECLAUNCH_OUTPUT_DIR) into the tasks' environment. serve runs in a session
 * of its own, outside the step's process tracking, and stops itself if this
 * slurmstepd goes away
 * (--until-pid). At the step's end (slurm_spank_exit) it is sent SIGTERM: it
 * seals the outputs, wipes, and writes run.wipe with the node, job and step
 * to the audit log.
 * When serve fails (attestation, policy, KMS), every task of the step on
 * this node prints serve's message on its stderr and exits with serve's exit
 * code before running anything; nothing was staged.
 *
 * plugstack.conf arguments (the administrator's, all optional):
 *   seclaunch=PATH   the seclaunch binary (default /usr/bin/seclaunch)
 *   tcti=T           the TPM to quote with (default: seclaunch's)
 *   audit_log=F      serve's audit log (default /var/log/seclaunch/audit.log)
 *   workload_log=F   the workload register's event log (default seclaunch's)
 *   kms=URL kms_ca=F policy=P pubkey=K policy_sig=F   the cluster's: a step
 *                    that gives another value is refused (exit 1)
 *   stage=WHERE      default --stage (the user's --seclaunch-stage replaces it)
 *   timeout=S        how long to wait for serve's ready line (default 600)
 *   stop_timeout=S   how long serve may take to seal the outputs and wipe at
 *                    step end (default 60)
 *   required=1       every step must use seclaunch (no --seclaunch-policy: fail)
 *
 * The privilege boundary: serve runs as root, so no user value reaches its
 * argv but through build_argv's whitelist: each option as one
 * "--flag=value" string, the datasets after every option (serve parses in
 * POSIX mode: the first operand ends the options), the step's command
 * after "--"; a value that is empty, begins with '-' or holds a line break
 * fails the step with a message. serve opens the datasets as the job's
 * user (--user), so a path that user cannot read is refused (exit 2).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "seclaunch/proc.h"

SPANK_PLUGIN(seclaunch, 1);

#define MAX_ARGS 256
#define ENV_LEN 4096
#define MAX_DATA 32
#define ERR_MAX 4096
#define DATA_ENV_MAX (64 * 1024)

enum {
	OPT_POLICY = 1,
	OPT_PUBKEY,
	OPT_POLICY_SIG,
	OPT_KMS,
	OPT_KMS_CA,
	OPT_DATA,
	OPT_STAGE,
	OPT_WINDOW,
	OPT_REGION,
	OPT_OUTPUT,
	OPT_RESUME,
	OPT_LINGER,
};

/* What the administrator set in plugstack.conf (adm) and what the step's
 * user asked for (usr), apart: the administrator's policy, public key, KMS
 * and CA are not the user's to change, and no user value reaches serve's
 * argv but through the whitelist of start_serve (strdup'ed). */
static struct {
	char *bin, *tcti, *audit_log, *workload_log, *kms, *kms_ca, *policy, *pubkey, *policy_sig,
	    *stage;
	unsigned timeout_s, stop_timeout_s;
	bool required;
} adm = {.timeout_s = 600, .stop_timeout_s = 60};
static struct {
	char *kms, *kms_ca, *policy, *pubkey, *policy_sig, *stage;
	char *window, *region, *output, *resume, *linger;
	char *data[MAX_DATA];
	int ndata;
} usr;

/* The node's serve, and a failure to tell the tasks about. */
static pid_t serve_pid;
static int fail_code;
static char fail_msg[ERR_MAX];

static void set_str(char **slot, const char *v)
{
	free(*slot);
	*slot = v != NULL ? strdup(v) : NULL;
}

/* --seclaunch-data takes one dataset or a comma-separated list (Slurm hands
 * the remote side one value per option, so a repeated option keeps only its
 * last value there). */
static int add_data(const char *v)
{
	char *copy = strdup(v), *save = NULL;
	if (copy == NULL)
		return -1;
	for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		bool seen = t[0] == '\0';
		/* the remote side may be handed the same value twice */
		for (int i = 0; i < usr.ndata && !seen; i++)
			seen = strcmp(usr.data[i], t) == 0;
		if (seen)
			continue;
		if (usr.ndata >= MAX_DATA) {
			slurm_error("seclaunch: more than %d datasets", MAX_DATA);
			free(copy);
			return -1;
		}
		usr.data[usr.ndata++] = strdup(t);
	}
	free(copy);
	return 0;
}

static int opt_cb(int val, const char *optarg, int remote)
{
	(void)remote;
	switch (val) {
	case OPT_POLICY:
		set_str(&usr.policy, optarg);
		break;
	case OPT_PUBKEY:
		set_str(&usr.pubkey, optarg);
		break;
	case OPT_POLICY_SIG:
		set_str(&usr.policy_sig, optarg);
		break;
	case OPT_KMS:
		set_str(&usr.kms, optarg);
		break;
	case OPT_KMS_CA:
		set_str(&usr.kms_ca, optarg);
		break;
	case OPT_DATA:
		return add_data(optarg);
	case OPT_STAGE:
		set_str(&usr.stage, optarg);
		break;
	case OPT_WINDOW:
		set_str(&usr.window, optarg);
		break;
	case OPT_REGION:
		set_str(&usr.region, optarg);
		break;
	case OPT_OUTPUT:
		set_str(&usr.output, optarg);
		break;
	case OPT_RESUME:
		set_str(&usr.resume, optarg);
		break;
	case OPT_LINGER:
		set_str(&usr.linger, optarg);
		break;
	default:
		return -1;
	}
	return 0;
}

static struct spank_option opts[] = {
    {"seclaunch-policy", "FILE", "seclaunch: the signed policy (turns seclaunch on for the step)",
     1, OPT_POLICY, opt_cb},
    {"seclaunch-pubkey", "FILE", "seclaunch: the compliance team's minisign public key", 1,
     OPT_PUBKEY, opt_cb},
    {"seclaunch-policy-sig", "FILE", "seclaunch: the policy's signature (default FILE.minisig)", 1,
     OPT_POLICY_SIG, opt_cb},
    {"seclaunch-kms", "URL", "seclaunch: the key-release service", 1, OPT_KMS, opt_cb},
    {"seclaunch-kms-ca", "FILE", "seclaunch: CA bundle of the KMS's certificate", 1, OPT_KMS_CA,
     opt_cb},
    {"seclaunch-data", "DATA[,DATA...]",
     "seclaunch: encrypted dataset(s): SLD file, dataset folder or URL", 1, OPT_DATA, opt_cb},
    {"seclaunch-stage", "WHERE", "seclaunch: auto, host, gpu or stream", 1, OPT_STAGE, opt_cb},
    {"seclaunch-window", "SIZE", "seclaunch: stream staging's window", 1, OPT_WINDOW, opt_cb},
    {"seclaunch-region", "CLOUD:REGION", "seclaunch: an UNSIGNED region (development policies)", 1,
     OPT_REGION, opt_cb},
    {"seclaunch-output", "NAME=DEST[,NAME=DEST...]",
     "seclaunch: sealed outputs: tasks write $SECLAUNCH_OUTPUT_DIR/NAME/, sealed to DEST at step "
     "end",
     1, OPT_OUTPUT, opt_cb},
    {"seclaunch-resume", "NAME=SOURCE[,NAME=SOURCE...]",
     "seclaunch: put the newest sealed checkpoint of each output NAME from SOURCE back into "
     "$SECLAUNCH_OUTPUT_DIR/NAME/ before the tasks start (a requeued job's resume)",
     1, OPT_RESUME, opt_cb},
    {"seclaunch-linger", "S", "seclaunch: stream staging: seconds a released shard stays staged", 1,
     OPT_LINGER, opt_cb},
    SPANK_OPTIONS_TABLE_END,
};

static int parse_args(int ac, char **av)
{
	for (int i = 0; i < ac; i++) {
		const char *eq = strchr(av[i], '=');
		if (eq == NULL) {
			slurm_error("seclaunch: plugstack argument '%s' is not KEY=VALUE", av[i]);
			return -1;
		}
		size_t kl = (size_t)(eq - av[i]);
		const char *v = eq + 1;
#define KEY(k) (kl == strlen(k) && strncmp(av[i], k, kl) == 0)
		if (KEY("seclaunch"))
			set_str(&adm.bin, v);
		else if (KEY("tcti"))
			set_str(&adm.tcti, v);
		else if (KEY("audit_log"))
			set_str(&adm.audit_log, v);
		else if (KEY("workload_log"))
			set_str(&adm.workload_log, v);
		else if (KEY("kms"))
			set_str(&adm.kms, v);
		else if (KEY("kms_ca"))
			set_str(&adm.kms_ca, v);
		else if (KEY("policy"))
			set_str(&adm.policy, v);
		else if (KEY("pubkey"))
			set_str(&adm.pubkey, v);
		else if (KEY("policy_sig"))
			set_str(&adm.policy_sig, v);
		else if (KEY("stage"))
			set_str(&adm.stage, v);
		else if (KEY("timeout"))
			adm.timeout_s = (unsigned)strtoul(v, NULL, 10);
		else if (KEY("stop_timeout"))
			adm.stop_timeout_s = (unsigned)strtoul(v, NULL, 10);
		else if (KEY("required"))
			adm.required = strcmp(v, "1") == 0 || strcmp(v, "yes") == 0;
		else {
			slurm_error("seclaunch: unknown plugstack argument '%s'", av[i]);
			return -1;
		}
#undef KEY
	}
	if (adm.timeout_s == 0)
		adm.timeout_s = 600;
	if (adm.stop_timeout_s == 0)
		adm.stop_timeout_s = 60;
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (parse_args(ac, av) != 0)
		return -1;
	/* slurmd itself and prolog/epilog scripts take no options */
	if (spank_context() == S_CTX_SLURMD || spank_context() == S_CTX_JOB_SCRIPT)
		return 0;
	for (struct spank_option *o = opts; o->name != NULL; o++)
		if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
			slurm_error("seclaunch: cannot register --%s", o->name);
			return -1;
		}
	return 0;
}

static void fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(fail_msg, sizeof(fail_msg), fmt, ap);
	va_end(ap);
	fail_code = code;
	slurm_error("seclaunch: %s", fail_msg);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Appends what fd has to buf (at most cap-1 bytes kept); false at EOF. */
static bool drain(int fd, char *buf, size_t *len, size_t cap)
{
	char tmp[4096];
	ssize_t n = read(fd, tmp, sizeof(tmp));
	if (n < 0)
		return errno == EINTR || errno == EAGAIN;
	if (n == 0)
		return false;
	size_t take = (size_t)n;
	if (*len + take >= cap)
		take = cap - 1 - *len;
	memcpy(buf + *len, tmp, take);
	*len += take;
	buf[*len] = '\0';
	return true;
}

static int add_arg(char **argv, int *n, const char *a)
{
	if (*n >= MAX_ARGS - 1 || a == NULL)
		return -1;
	argv[(*n)++] = (char *)a;
	argv[*n] = NULL;
	return 0;
}

/* "--flag=value" strings for serve's argv: one bump arena, never freed
 * (one step per slurmstepd). */
static char argbuf[64 * 1024];
static size_t argused;

static const char *joined(const char *flag, const char *v)
{
	size_t need = strlen(flag) + 1 + strlen(v) + 1;
	if (need > sizeof(argbuf) - argused)
		return NULL;
	char *p = argbuf + argused;
	snprintf(p, need, "%s=%s", flag, v);
	argused += need;
	return p;
}

/* A value the step's user gave reaches serve's argv only as an option's
 * argument ("--flag=value") or as a dataset operand: refused when serve
 * could read it as an option, or when it would split serve's lines. */
static bool user_value_ok(const char *opt, const char *v)
{
	if (v == NULL)
		return true;
	if (strpbrk(v, "\n\r") != NULL) {
		fail(1, "--%s: refused: a value may not hold a line break", opt);
		return false;
	}
	if (v[0] == '\0' || v[0] == '-') {
		fail(1, "--%s=%s: refused: a value may not be empty or begin with '-'", opt, v);
		return false;
	}
	return true;
}

/* The administrator's value (key= in plugstack.conf), else the user's
 * (--opt); a user's value that differs from the administrator's is refused. */
static bool pick(const char *opt, const char *key, const char *a, const char *u, const char **out)
{
	if (a != NULL && u != NULL && strcmp(a, u) != 0) {
		fail(1,
		     "--%s: this cluster's administrator set %s= in plugstack.conf; a step "
		     "cannot change it",
		     opt, key);
		return false;
	}
	if (a == NULL && !user_value_ok(opt, u))
		return false;
	*out = a != NULL ? a : u;
	return true;
}

static int add_opt(char **argv, int *n, const char *flag, const char *v)
{
	if (v == NULL)
		return 0;
	const char *j = joined(flag, v);
	if (j == NULL || add_arg(argv, n, j) != 0) {
		fail(1, "too many arguments for seclaunch serve");
		return -1;
	}
	return 0;
}

/* --flag=V for each V of a comma-separated list the user gave. */
static int add_user_list(char **argv, int *n, const char *opt, const char *flag, const char *list)
{
	char *copy, *save = NULL;
	int ret = 0;
	if (list == NULL)
		return 0;
	if ((copy = strdup(list)) == NULL)
		return -1;
	for (char *t = strtok_r(copy, ",", &save); t != NULL && ret == 0;
	     t = strtok_r(NULL, ",", &save))
		ret = !user_value_ok(opt, t) ? -1 : add_opt(argv, n, flag, t);
	free(copy);
	return ret;
}

/* serve's argv from a whitelist: the fixed options, the administrator's
 * settings, each user option as "--flag=value" after its check, then the
 * datasets (each checked: serve's options end at its first operand, and
 * none of them begins with '-'). The step's command follows after "--". */
static int build_argv(char **argv, int *n, const char *until, const char *uidbuf)
{
	const char *policy = NULL, *pubkey = NULL, *kms = NULL, *kms_ca = NULL, *sig = NULL;

	add_arg(argv, n, adm.bin != NULL ? adm.bin : "/usr/bin/seclaunch");
	add_arg(argv, n, "serve");
	add_arg(argv, n, "-q");
	add_arg(argv, n, "--ready-fd=3");
	if (add_opt(argv, n, "--until-pid", until) != 0 || add_opt(argv, n, "--user", uidbuf) != 0)
		return -1;
	if (!pick("seclaunch-policy", "policy", adm.policy, usr.policy, &policy) ||
	    !pick("seclaunch-pubkey", "pubkey", adm.pubkey, usr.pubkey, &pubkey) ||
	    !pick("seclaunch-kms", "kms", adm.kms, usr.kms, &kms) ||
	    !pick("seclaunch-kms-ca", "kms_ca", adm.kms_ca, usr.kms_ca, &kms_ca))
		return -1;
	/* the administrator's policy is signed where the administrator says */
	if (adm.policy != NULL && adm.policy_sig == NULL && usr.policy_sig != NULL) {
		fail(1, "--seclaunch-policy-sig: this cluster's administrator set policy= in "
		        "plugstack.conf; a step cannot change its signature");
		return -1;
	}
	if (!pick("seclaunch-policy-sig", "policy_sig", adm.policy_sig, usr.policy_sig, &sig))
		return -1;
	if (pubkey == NULL) {
		fail(1, "--seclaunch-pubkey is required with --seclaunch-policy");
		return -1;
	}
	if (kms == NULL) {
		fail(1, "--seclaunch-kms is required with --seclaunch-policy");
		return -1;
	}
	/* the user's stage replaces the administrator's default */
	const char *stage = usr.stage != NULL ? usr.stage : adm.stage;
	if (!user_value_ok("seclaunch-stage", usr.stage) ||
	    !user_value_ok("seclaunch-window", usr.window) ||
	    !user_value_ok("seclaunch-linger", usr.linger) ||
	    !user_value_ok("seclaunch-region", usr.region))
		return -1;
	if (add_opt(argv, n, "--policy", policy) != 0 ||
	    add_opt(argv, n, "--policy-pubkey", pubkey) != 0 ||
	    add_opt(argv, n, "--kms", kms) != 0 || add_opt(argv, n, "--policy-sig", sig) != 0 ||
	    add_opt(argv, n, "--kms-ca", kms_ca) != 0 || add_opt(argv, n, "--stage", stage) != 0 ||
	    add_opt(argv, n, "--window", usr.window) != 0 ||
	    add_opt(argv, n, "--linger", usr.linger) != 0 ||
	    add_opt(argv, n, "--region", usr.region) != 0 ||
	    add_opt(argv, n, "--workload-log", adm.workload_log) != 0 ||
	    add_opt(argv, n, "--audit-log",
	            adm.audit_log != NULL ? adm.audit_log : "/var/log/seclaunch/audit.log") != 0)
		return -1;
	/* NAME=DEST[,NAME=DEST...]: serve seals each when the step ends;
	 * NAME=SOURCE[,...]: serve stages each output's newest checkpoint back */
	if (add_user_list(argv, n, "seclaunch-output", "--output", usr.output) != 0 ||
	    add_user_list(argv, n, "seclaunch-resume", "--resume", usr.resume) != 0)
		return -1;
	if (usr.ndata == 0) {
		fail(1, "--seclaunch-data names no dataset");
		return -1;
	}
	for (int i = 0; i < usr.ndata; i++) {
		if (!user_value_ok("seclaunch-data", usr.data[i]))
			return -1;
		if (add_arg(argv, n, usr.data[i]) != 0) {
			fail(1, "too many arguments for seclaunch serve");
			return -1;
		}
	}
	return 0;
}

/* serve's environment: the step's identity for its audit records. */
static int build_env(spank_t sp, char **envp, char store[][ENV_LEN], int max)
{
	uint32_t job = 0, step = 0, ajob = 0, atask = 0;
	char host[128] = "";
	int n = 0;
	(void)gethostname(host, sizeof(host) - 1);
	spank_get_item(sp, S_JOB_ID, &job);
	spank_get_item(sp, S_JOB_STEPID, &step);
	/* the job's PATH: serve resolves the step's command (measured) as the
	 * tasks' exec would; serve itself executes nothing by PATH */
	char path[ENV_LEN - 8];
	if (spank_getenv(sp, "PATH", path, sizeof(path)) == ESPANK_SUCCESS && path[0] != '\0')
		snprintf(store[n++], ENV_LEN, "PATH=%s", path);
	else
		snprintf(store[n++], ENV_LEN, "PATH=/usr/sbin:/usr/bin:/sbin:/bin");
	snprintf(store[n++], ENV_LEN, "HOME=/root");
	snprintf(store[n++], ENV_LEN, "SLURM_JOB_ID=%u", job);
	if (step == SLURM_BATCH_SCRIPT)
		snprintf(store[n++], ENV_LEN, "SLURM_STEP_ID=batch");
	else
		snprintf(store[n++], ENV_LEN, "SLURM_STEP_ID=%u", step);
	/* Slurm's name of this node: slurmstepd's own environment has it where
	 * the job's does not yet (the tasks' is made later) */
	char node[128] = "";
	const char *own = getenv("SLURMD_NODENAME");
	if (spank_getenv(sp, "SLURMD_NODENAME", node, sizeof(node)) != ESPANK_SUCCESS)
		snprintf(node, sizeof(node), "%s", own != NULL && own[0] != '\0' ? own : host);
	snprintf(store[n++], ENV_LEN, "SLURMD_NODENAME=%s", node);
	if (spank_get_item(sp, S_JOB_ARRAY_ID, &ajob) == ESPANK_SUCCESS && ajob != 0 &&
	    spank_get_item(sp, S_JOB_ARRAY_TASK_ID, &atask) == ESPANK_SUCCESS) {
		snprintf(store[n++], ENV_LEN, "SLURM_ARRAY_JOB_ID=%u", ajob);
		snprintf(store[n++], ENV_LEN, "SLURM_ARRAY_TASK_ID=%u", atask);
	}
	char rc[32];
	if (spank_getenv(sp, "SLURM_RESTART_COUNT", rc, sizeof(rc)) == ESPANK_SUCCESS)
		snprintf(store[n++], ENV_LEN, "SLURM_RESTART_COUNT=%s", rc);
	if (adm.tcti != NULL)
		snprintf(store[n++], ENV_LEN, "SECLAUNCH_TCTI=%s", adm.tcti);
	if (n >= max)
		return -1;
	for (int i = 0; i < n; i++)
		envp[i] = store[i];
	envp[n] = NULL;
	return 0;
}

/* Starts serve (in a session of its own, not this process's child) and
 * reads its ready line; on success exports the tasks' variables. */
static int start_serve(spank_t sp)
{
	char *argv[MAX_ARGS];
	int n = 0, ready[2] = {-1, -1}, errp[2] = {-1, -1}, pidp[2] = {-1, -1};
	static char envstore[12][ENV_LEN];
	char *envp[13], cwd[ENV_LEN] = "";
	char until[32], uidbuf[32], *line = NULL;
	size_t line_len = 0, line_cap = 1 << 20, err_len = 0;
	char err[ERR_MAX] = "";
	uid_t uid = 0;
	gid_t gid = 0;
	int ret = -1;
	json_t *j = NULL;

	if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
		fail(7, "cannot read the job's uid and gid from Slurm");
		return -1;
	}
	snprintf(uidbuf, sizeof(uidbuf), "%u:%u", (unsigned)uid, (unsigned)gid);
	snprintf(until, sizeof(until), "%d", (int)getpid());
	if (build_env(sp, envp, envstore, 12) != 0) {
		fail(7, "serve's environment");
		return -1;
	}
	if (build_argv(argv, &n, until, uidbuf) != 0)
		return -1;
	/* the step's command, for serve to measure (its workload identity) */
	int jargc = 0;
	char **jargv = NULL;
	if (spank_get_item(sp, S_JOB_ARGV, &jargc, &jargv) == ESPANK_SUCCESS && jargc > 0 &&
	    jargv != NULL && jargv[0] != NULL && jargv[0][0] != '\0') {
		if (add_arg(argv, &n, "--") != 0) {
			fail(1, "too many arguments for seclaunch serve");
			return -1;
		}
		for (int i = 0; i < jargc; i++)
			if (add_arg(argv, &n, jargv[i]) != 0) {
				fail(1,
				     "the step's command has too many arguments (at most %d with "
				     "seclaunch serve's own)",
				     MAX_ARGS - 1);
				return -1;
			}
		/* where the tasks start: a relative script is measured there */
		if (spank_getenv(sp, "PWD", cwd, sizeof(cwd)) != ESPANK_SUCCESS)
			cwd[0] = '\0';
	}
	if (adm.audit_log == NULL)
		(void)mkdir("/var/log/seclaunch", 0700);

	line = malloc(line_cap);
	if (line == NULL || pipe2(ready, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0 ||
	    pipe2(pidp, O_CLOEXEC) != 0) {
		fail(7, "pipe: %s", strerror(errno));
		goto out;
	}
	pid_t mid = fork();
	if (mid < 0) {
		fail(7, "fork: %s", strerror(errno));
		goto out;
	}
	if (mid == 0) {
		/* a session of its own; its child is serve, reparented at once */
		(void)setsid();
		pid_t p = fork();
		if (p != 0) {
			(void)!write(pidp[1], &p, sizeof(p));
			_exit(p > 0 ? 0 : 1);
		}
		int nul = open("/dev/null", O_RDWR);
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(errp[1], 2) < 0 ||
		    dup2(ready[1], 3) < 0)
			_exit(127);
		for (int fd = 4; fd < 1024; fd++)
			close(fd);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (cwd[0] == '/')
			(void)!chdir(cwd);
		execve(argv[0], argv, envp);
		dprintf(2, "cannot execute %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(ready[1]);
	close(errp[1]);
	close(pidp[1]);
	ready[1] = errp[1] = pidp[1] = -1;
	int st = 0;
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	if (read(pidp[0], &serve_pid, sizeof(serve_pid)) != (ssize_t)sizeof(serve_pid) ||
	    serve_pid <= 0) {
		serve_pid = 0;
		fail(7, "could not start %s", argv[0]);
		goto out;
	}
	/* the ready line, or EOF (serve failed, its message on errp) */
	double deadline = now_s() + adm.timeout_s;
	bool ready_open = true, err_open = true;
	while (ready_open && memchr(line, '\n', line_len) == NULL) {
		struct pollfd pf[2] = {{.fd = ready[0], .events = POLLIN},
		                       {.fd = err_open ? errp[0] : -1, .events = POLLIN}};
		double left = deadline - now_s();
		if (left <= 0) {
			fail(7, "seclaunch serve did not get ready within %u s (timeout=)",
			     adm.timeout_s);
			kill(serve_pid, SIGTERM);
			goto out;
		}
		int pr = poll(pf, 2, (int)(left * 1000) + 1);
		if (pr < 0 && errno != EINTR)
			break;
		if (pf[0].revents != 0) {
			ssize_t r = read(ready[0], line + line_len, line_cap - 1 - line_len);
			if (r <= 0)
				ready_open = false;
			else
				line_len += (size_t)r;
			line[line_len] = '\0';
			if (line_len >= line_cap - 1)
				break;
		}
		if (pf[1].revents != 0 && !drain(errp[0], err, &err_len, sizeof(err)))
			err_open = false;
	}
	line[line_len] = '\0';
	/* serve's last words, when it failed */
	if (err_open) {
		int fl = fcntl(errp[0], F_GETFL);
		fcntl(errp[0], F_SETFL, fl | O_NONBLOCK);
		for (int k = 0; k < 20 && drain(errp[0], err, &err_len, sizeof(err)); k++)
			;
	}
	json_error_t je;
	j = line_len > 0 ? json_loads(line, 0, &je) : NULL;
	json_t *e = j != NULL ? json_object_get(j, "error") : NULL;
	if (j == NULL || e != NULL) {
		json_t *ex = e != NULL ? json_object_get(e, "exit") : NULL;
		json_t *msg = e != NULL ? json_object_get(e, "message") : NULL;
		while (err_len > 0 && err[err_len - 1] == '\n')
			err[--err_len] = '\0';
		fail(json_is_integer(ex) ? (int)json_integer_value(ex) : 7, "%s",
		     err_len > 0           ? err
		     : json_is_string(msg) ? json_string_value(msg)
		                           : "seclaunch serve ended without a ready line");
		serve_pid = 0;
		goto out;
	}
	json_t *sock = json_object_get(j, "socket"), *tok = json_object_get(j, "token"),
	       *data = json_object_get(j, "data"), *odir = json_object_get(j, "output_dir");
	char *dtext = data != NULL ? json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	if (!json_is_string(sock) || !json_is_string(tok) || dtext == NULL ||
	    spank_setenv(sp, "SECLAUNCH_DATA_SOCKET", json_string_value(sock), 1) !=
	        ESPANK_SUCCESS ||
	    spank_setenv(sp, "SECLAUNCH_DATA_TOKEN", json_string_value(tok), 1) != ESPANK_SUCCESS ||
	    /* a dataset of many files makes a long SECLAUNCH_DATA; past what one
	     * environment string may hold the tasks ask the service ("list") */
	    (strlen(dtext) < DATA_ENV_MAX &&
	     spank_setenv(sp, "SECLAUNCH_DATA", dtext, 1) != ESPANK_SUCCESS) ||
	    (json_is_string(odir) && spank_setenv(sp, "SECLAUNCH_OUTPUT_DIR",
	                                          json_string_value(odir), 1) != ESPANK_SUCCESS)) {
		free(dtext);
		fail(7, "cannot export the data service to the tasks");
		kill(serve_pid, SIGTERM);
		goto out;
	}
	free(dtext);
	ret = 0;
out:
	if (j != NULL) {
		json_t *tok2 = json_object_get(j, "token");
		if (json_is_string(tok2))
			json_string_set(tok2, "");
		json_decref(j);
	}
	if (line != NULL) {
		memset(line, 0, line_cap);
		free(line);
	}
	for (int k = 0; k < 2; k++) {
		if (ready[k] >= 0)
			close(ready[k]);
		if (errp[k] >= 0)
			close(errp[k]);
		if (pidp[k] >= 0)
			close(pidp[k]);
	}
	return ret;
}

/* The step's options are known: one serve for this node and step. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	uint32_t step = 0;
	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	if (spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS && step == SLURM_EXTERN_CONT)
		return 0;
	if (adm.policy == NULL && usr.policy == NULL) {
		if (adm.required)
			fail(4, "this cluster runs every step under seclaunch: give "
			        "--seclaunch-policy, --seclaunch-pubkey, --seclaunch-kms and "
			        "--seclaunch-data");
		return 0;
	}
	(void)start_serve(sp);
	/* a failure is told to each task (task_init), so it reaches the step's
	 * stderr and exit code; nothing was staged */
	return 0;
}

/* In each task, as the user, before exec: a failed serve stops the task
 * with serve's message and exit code. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	if (fail_code == 0)
		return 0;
	dprintf(2, "seclaunch: %s\n", fail_msg);
	_exit(fail_code);
}

/* The step ends: serve wipes and audits. */
int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE || serve_pid <= 0)
		return 0;
	kill(serve_pid, SIGTERM);
	double deadline = now_s() + adm.stop_timeout_s;
	while (sl_proc_alive(serve_pid) && now_s() < deadline)
		usleep(20000);
	if (sl_proc_alive(serve_pid)) {
		slurm_error("seclaunch: serve (pid %d) did not stop within %u s; killed",
		            (int)serve_pid, adm.stop_timeout_s);
		kill(serve_pid, SIGKILL);
	}
	serve_pid = 0;
	return 0;
}
