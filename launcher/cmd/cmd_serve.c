/* seclaunch serve: the node-level form of `seclaunch run`. The same attested
 * launch (run_exec.c: policy, challenge, evidence, pre-flight, release,
 * stage), once for the node; then the data service answers every process
 * of the job's user that presents the step's token, until it is told to
 * stop; then the same wipe and audit records as after a job. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "../cli/region_id.h"
#include "../run/run_int.h"
#include "seclaunch/workload.h"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: seclaunch serve --policy P --policy-pubkey K --kms URL [options] DATA...\n"
	    "                       [-- CMD [ARG...]]\n"
	    "(options come first: the first DATA ends them)\n\n"
	    "The attested launch of `seclaunch run`, once for this node, for every process\n"
	    "of a job that runs here (torchrun ranks, the tasks of a Slurm step): attests\n"
	    "the machine, asks the KMS for the datasets' keys under the signed policy,\n"
	    "decrypts and stages the data in memory, then serves it over the data service\n"
	    "socket. It starts no command. A process is answered when it runs as the job's\n"
	    "user (--user, else serve's own) and sends the step's token, a random 256-bit\n"
	    "value serve makes at start, with every request (SECLAUNCH_DATA_TOKEN for the\n"
	    "Python helper); every other peer is refused and the refusal audited.\n"
	    "When the socket is up, serve writes one JSON line to --ready-fd and/or\n"
	    "--ready-file: {\"data\": SECLAUNCH_DATA, \"socket\": PATH, \"token\": HEX}\n"
	    "(and \"output_dir\": SECLAUNCH_OUTPUT_DIR with --output).\n"
	    "It stops on SIGTERM, SIGINT or SIGHUP, when the --until-pid process ends, or\n"
	    "when the keys' lease (the policy's key_ttl) is refused or missed;\n"
	    "it then seals and uploads the outputs (--output), wipes every key, all staged\n"
	    "plaintext and the output folder, and appends run.wipe to the\n"
	    "audit log with its context (node, SLURM_JOB_ID, SLURM_STEP_ID).\n\n"
	    "  --socket PATH          the socket's path (it must not exist; default: a new\n"
	    "                         private folder under $XDG_RUNTIME_DIR, or /tmp with\n"
	    "                         --user or without XDG_RUNTIME_DIR)\n"
	    "  --ready-fd N           write the ready line to descriptor N, then close it\n"
	    "  --ready-file F         write it to the new file F (mode 0600, the job's user)\n"
	    "  --until-pid PID        stop when process PID ends\n"
	    "  --user USER[:GROUP]    the job's user (root only; default: serve's own);\n"
	    "                         DATA is opened as USER (what USER cannot read: exit 2)\n"
	    "  --policy P, --policy-sig F, --policy-pubkey K, --kms URL, --kms-ca F,\n"
	    "  --kms-pin PIN, --tcti T, --tee KIND, --collateral DIR, --stage WHERE,\n"
	    "  --window SIZE, --linger S, --threads N, --lease-grace S, --audit-log F,\n"
	    "  --audit-key F,\n"
	    "  -q, -v, --json         as for `seclaunch run` (see its --help)\n" SL_REGION_ID_HELP
	        SL_REMOTE_HELP SL_OUT_HELP
	    "  under serve the output folder is a private folder (0700, the job's user) in\n"
	    "  /dev/shm or $XDG_RUNTIME_DIR, as the tasks are not serve's children; the\n"
	    "  tasks write $SECLAUNCH_OUTPUT_DIR/NAME/, serve seals it when it stops (a\n"
	    "  preemption notice of --preempt-watch gce|aws stops serve too)\n"
	    "Workload identity (docs/distributed.md, \"What serve measures\"):\n"
	    "  -- CMD [ARG...]        the command the tasks will run (the SPANK plugin passes\n"
	    "                         the step's): serve resolves CMD as run does, hashes the\n"
	    "                         file (and a script it names) and extends the same\n"
	    "                         workload event as run into the workload register\n"
	    "                         before the quote, so a policy's `workloads` rule can\n"
	    "                         allow or refuse the step. The environment is measured\n"
	    "                         as empty (Slurm makes the tasks' own). Slurm, not\n"
	    "                         seclaunch, executes the tasks: this proves which file\n"
	    "                         CMD resolved to when serve started, not that the tasks\n"
	    "                         ran that file; any process of the job's user with the\n"
	    "                         token is served. Without CMD nothing is measured.\n"
	    "  --image-digest D, --workload-pcr N, --workload-log F   as for `seclaunch run`\n"
	    "  -h, --help             this text\n\n"
	    "serve takes none of run's job options (--env, --timeout, --kill-grace...).\n"
	    "Exit: 0 after a stop; before serving: 1 usage, 2 input, 3 attestation,\n"
	    "4 policy denied, 5 KMS, 6 integrity, 7 system; see docs/exit-codes.md.\n"
	    "See docs/job-interface.md and docs/distributed.md.\n");
}

enum {
	O_SOCKET = SL_RUN_O_LAST,
	O_READY_FD,
	O_READY_FILE,
	O_UNTIL_PID,
};

static const struct sl_cli_opt serve_opts[] = {
    SL_RUN_LAUNCH_OPTS,
    {"socket", required_argument, O_SOCKET, NULL},
    {"ready-fd", required_argument, O_READY_FD, NULL},
    {"ready-file", required_argument, O_READY_FILE, NULL},
    {"until-pid", required_argument, O_UNTIL_PID, NULL},
    SL_OUT_OPTS,
    {"image-digest", required_argument, SL_RUN_O_IMAGE_DIGEST, NULL},
    {"workload-pcr", required_argument, SL_RUN_O_WORKLOAD_PCR, NULL},
    {"workload-log", required_argument, SL_RUN_O_WORKLOAD_LOG, NULL},
    {NULL, 0, 0, NULL},
};

static bool parse_long(const char *s, long lo, long hi, long *out)
{
	char *end = NULL;
	long v = strtol(s, &end, 10);
	if (s[0] < '0' || s[0] > '9' || *end != '\0' || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static int on_option(void *ctx, int key, char *arg)
{
	struct sl_run *r = ctx;
	long v;
	switch (key) {
	case O_SOCKET:
		if (arg[0] != '/' || strlen(arg) > 107)
			return sl_cli_usage("serve",
			                    "--socket %s: an absolute path of at most "
			                    "107 bytes",
			                    arg);
		r->serve.socket = arg;
		return 0;
	case O_READY_FD:
		if (!parse_long(arg, 3, 1 << 20, &v) || fcntl((int)v, F_GETFD) < 0)
			return sl_cli_usage(
			    "serve", "--ready-fd %s: not an open descriptor (3 or more)", arg);
		r->serve.ready_fd = (int)v;
		(void)fcntl((int)v, F_SETFD, FD_CLOEXEC);
		return 0;
	case O_READY_FILE:
		r->serve.ready_file = arg;
		return 0;
	case O_UNTIL_PID:
		if (!parse_long(arg, 2, 1 << 22, &v))
			return sl_cli_usage("serve", "--until-pid %s: not a process id", arg);
		r->serve.until_pid = (pid_t)v;
		return 0;
	default:
		return sl_run_option(r, "serve", key, arg);
	}
}

static const struct sl_cli_spec spec = {
    .name = "serve",
    .shared = SL_RUN_SHARED,
    .shortopts = "v",
    .opts = serve_opts,
    .help = usage,
    .on_option = on_option,
    .on_args = sl_run_on_args,
    .posix = true,
};

int cmd_serve(int argc, char **argv)
{
	struct sl_run r;
	struct sl_cli_shared sh;
	int code;

	/* options and datasets before the first "--", the tasks' command after it */
	int dd = sl_cli_dashdash(argc, argv);
	sl_run_init(&r);
	r.serve.on = true;
	r.serve.ready_fd = -1;
	code = sl_cli_parse(&spec, &r, &sh, dd, argv);
	if (code == 0) /* --help */
		return code;
	if (code < 0)
		code = sl_run_check(&r, &sh, "serve");
	if (code == 0 && dd < argc) {
		if (dd + 1 >= argc || argv[dd + 1][0] == '\0')
			code = sl_cli_usage("serve", "no command after --: give the tasks' "
			                             "CMD [ARG...], or leave out the --");
		r.serve.measure = argv + dd + 1;
	}
	if (code != 0) {
		/* whoever waits on --ready-fd (the SPANK plugin) learns the exit
		 * code too; the message went to stderr */
		sl_run_serve_failed(&r, SL_E_USAGE, code, "usage error (see stderr)");
		return code;
	}
	/* no private mount namespace (sl_out_early): the tasks that write the
	 * outputs are not serve's children and must see the folder */
	snprintf(r.outcfg.ns_why, sizeof(r.outcfg.ns_why),
	         "serve's tasks are not its children (no private mount namespace)");
	return sl_run_execute(&r);
}
