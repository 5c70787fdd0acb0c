/* seclaunch run: the attested launch, step by step as DESIGN.md's data flow
 * gives it: policy signature -> challenge -> ephemeral key -> evidence bound
 * to (nonce, eph_pub, policy digest) -> region identity -> local pre-flight
 * -> release -> open DEKs -> decrypt and stage -> job -> supervise -> wipe.
 * Any failure before the job starts: no job, everything wiped, the exit code
 * of the failure's category, one line naming the cause, an audit record. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../job/job.h"
#include "../outputs/outputs.h"
#include "../cli/region_id.h"
#include "../run/run_int.h"
#include "seclaunch/secret.h"
#include "seclaunch/stage.h"
#include "seclaunch/util.h"
#include "seclaunch/workload.h"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: seclaunch run --policy P --policy-pubkey K --kms URL [options] DATA... "
	    "-- CMD [ARG...]\n"
	    "(options come first: the first DATA ends them)\n\n"
	    "Attests this machine, asks the KMS for the datasets' keys under the signed\n"
	    "policy, decrypts and stages the data in memory (GPU or sealed host memory),\n"
	    "runs CMD with SECLAUNCH_DATA describing it, and wipes everything afterwards.\n"
	    "DATA is an SLD file, a sharded dataset folder (manifest.sldm + shards), or\n"
	    "the https://, s3:// or gs:// URL of one. Every process the job starts reaches\n"
	    "the data through the data service (SECLAUNCH_DATA_SOCKET).\n\n"
	    "  --policy P             the signed policy (JSON)\n"
	    "  --policy-sig F         its minisign signature (default: P.minisig)\n"
	    "  --policy-pubkey K      the compliance team's minisign public key\n"
	    "  --kms URL              the key-release service (https://host:port)\n"
	    "  --kms-ca F             CA bundle for the KMS's TLS certificate (default\n"
	    "                         $SECLAUNCH_KMS_CA, else the system store)\n"
	    "  --kms-pin PIN          pinned KMS public key: sha256//BASE64 or a key file\n"
	    "  --tcti T               TPM to quote with (or $SECLAUNCH_TCTI; default "
	    "device:/dev/tpmrm0)\n"
	    "  --tee KIND             evidence kind: auto (default), tpm2, sev-snp, tdx\n"
	    "  --collateral DIR       vendor certificates for the local check of SNP/TDX "
	    "evidence\n"
	    "  --stage WHERE          auto (GPU when a CUDA device is usable; a sharded dataset\n"
	    "                         streamed when staging it whole would take more than\n"
	    "                         half the available memory; default), gpu, host, or\n"
	    "                         stream (sharded datasets shard by shard through the\n"
	    "                         data service, at most --window in memory), gpu-ipc\n"
	    "                         (device buffers by CUDA IPC, where supported)\n"
	    "  --gpu-decrypt          stage ciphertext; the job decrypts on the GPU\n"
	    "                         (libseclaunch_data.so; the file key enters the "
	    "job)\n" SL_REGION_ID_HELP SL_REMOTE_HELP
	    "  --window SIZE          stream staging: plaintext staged at most (default 1G;\n"
	    "                         K, M, G); it must hold a dataset's largest shard\n"
	    "  --linger S             stream staging: a shard every reader released stays\n"
	    "                         staged (sealed, within --window) up to S seconds for\n"
	    "                         a reader that asks for it again, unless its room is\n"
	    "                         needed (default 2; 0: wiped at once)\n"
	    "  --env K=V              set K in the job's environment (repeatable)\n"
	    "  --env-pass K           pass K from this environment to the job (repeatable;\n"
	    "                         a shell pattern such as 'NCCL_*' passes every match)\n"
	    "  --clean-env            do not pass the distributed-training variables\n"
	    "                         (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
	    "                         MASTER_ADDR, MASTER_PORT, OMP_NUM_THREADS, SLURM_*,\n"
	    "                         CUDA_VISIBLE_DEVICES, VIRTUAL_ENV, ...), passed by\n"
	    "                         default\n"
	    "  --timeout S            SIGTERM the job after S seconds, then SIGKILL\n"
	    "  --kill-grace S         from SIGTERM to SIGKILL after --timeout or a second\n"
	    "                         SIGINT/SIGTERM (default 10)\n"
	    "  --user USER[:GROUP]    run the job as USER (root only): it cannot read\n"
	    "                         seclaunch's key files or its /proc files; DATA is\n"
	    "                         opened as USER (what USER cannot read: exit 2)\n"
	    "  --threads N            decryption threads (default: online CPUs)\n"
	    "  --image-digest D       the container image (sha256:HEX): part of the job's\n"
	    "                         identity (docs/claims.md)\n"
	    "  --workload-pcr N       TPM PCR the job's identity is extended into\n"
	    "                         (default 15)\n"
	    "  --workload-log F       the register's workload event log (or\n"
	    "                         $SECLAUNCH_WORKLOAD_LOG; default under /run/seclaunch)\n"
	    "  --lease-grace S        after the lease's expiry without a renewal, before the\n"
	    "                         job is stopped (default 2)\n" SL_OUT_HELP
	    "  --audit-log F          audit log (or $SECLAUNCH_AUDIT_LOG; default\n"
	    "                         $XDG_STATE_HOME/seclaunch/audit.log)\n"
	    "  --audit-key F          Ed25519 checkpoint key for the audit log (or\n"
	    "                         $SECLAUNCH_AUDIT_KEY)\n"
	    "  --json                 a failure before the job is one {\"error\": {...}}\n"
	    "                         object on stdout (the job's own output follows it\n"
	    "                         otherwise)\n"
	    "  -q, --quiet            print errors only\n"
	    "  -v, --verbose          also the probes' own messages (CUDA) and each\n"
	    "                         launch step's wall time (\"time: STEP N ms\")\n"
	    "  -h, --help             this text\n\n"
	    "The job gets a clean environment (PATH, HOME, LANG, LC_*, TERM, TZ, CUDA_*,\n"
	    "NVIDIA_*, --env, --env-pass, SECLAUNCH_DATA), descriptors 0-2 and the staged\n"
	    "data, its own process group; SIGINT/SIGTERM/SIGHUP are forwarded to it.\n"
	    "Exit: the job's status (128+n for signal n); before the job: 1 usage, 2 input,\n"
	    "3 attestation, 4 policy denied, 5 KMS, 6 integrity, 7 system\n"
	    "(docs/exit-codes.md).\n"
	    "See docs/job-interface.md.\n");
}

/* run's options, one line each (the shared ones are cli.c's; the launch's
 * are run_int.h's, shared with serve). */
static const struct sl_cli_opt run_opts[] = {
    SL_RUN_LAUNCH_OPTS,
    {"gpu-decrypt", no_argument, SL_RUN_O_GPU_DECRYPT, NULL},
    {"env", required_argument, SL_RUN_O_ENV, NULL},
    {"env-pass", required_argument, SL_RUN_O_ENV_PASS, NULL},
    {"timeout", required_argument, SL_RUN_O_TIMEOUT, NULL},
    {"kill-grace", required_argument, SL_RUN_O_KILL_GRACE, NULL},
    {"image-digest", required_argument, SL_RUN_O_IMAGE_DIGEST, NULL},
    {"workload-pcr", required_argument, SL_RUN_O_WORKLOAD_PCR, NULL},
    {"workload-log", required_argument, SL_RUN_O_WORKLOAD_LOG, NULL},
    {"clean-env", no_argument, SL_RUN_O_CLEAN_ENV, NULL},
    SL_OUT_OPTS,
    {NULL, 0, 0, NULL},
};

static bool parse_uint(const char *s, unsigned max, unsigned *out)
{
	char *end = NULL;
	unsigned long v = strtoul(s, &end, 10);
	if (s[0] < '0' || s[0] > '9' || *end != '\0' || v > max)
		return false;
	*out = (unsigned)v;
	return true;
}

static const char *default_audit_log(char *buf, size_t n)
{
	const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	if (state != NULL && state[0] == '/')
		snprintf(buf, n, "%s/seclaunch", state);
	else if (home != NULL && home[0] == '/')
		snprintf(buf, n, "%s/.local/state/seclaunch", home);
	else
		return NULL;
	/* each level private; an existing one is left as it is */
	for (char *p = buf + 1; *p != '\0'; p++) {
		if (*p == '/') {
			*p = '\0';
			(void)mkdir(buf, 0700);
			*p = '/';
		}
	}
	(void)mkdir(buf, 0700);
	size_t l = strlen(buf);
	snprintf(buf + l, n - l, "/audit.log");
	return buf;
}

int sl_run_option(struct sl_run *r, const char *cmd, int key, char *arg)
{
	struct sl_region_id rid = {r->cloud_identity, r->gcp_jwks, r->aws_certs, r->region};
	sl_err rc = SL_OK;

	int taken = sl_remote_option(&r->remote, key, arg);
	if (taken != 0)
		return taken > 0 ? 0 : sl_cli_usage(cmd, "%s", sl_err_detail());
	int o = sl_out_option(&r->outcfg, key, arg);
	if (o != 0)
		return o > 0 ? 0 : sl_cli_usage(cmd, "%s", sl_err_detail());
	if (sl_region_id_option(&rid, key, arg)) {
		r->cloud_identity = rid.cloud_identity;
		r->gcp_jwks = rid.gcp_jwks;
		r->aws_certs = rid.aws_trust;
		r->region = rid.region;
		return 0;
	}
	switch (key) {
	case SL_RUN_O_POLICY:
		r->policy_path = arg;
		break;
	case SL_RUN_O_POLICY_SIG:
		r->policy_sig = arg;
		break;
	case SL_RUN_O_POLICY_PUB:
		r->policy_pub = arg;
		break;
	case SL_RUN_O_TEE:
		r->tee = arg;
		break;
	case SL_RUN_O_COLLATERAL:
		r->collateral = arg;
		break;
	case SL_RUN_O_STAGE:
		rc = sl_stage_where_parse(arg, &r->where);
		break;
	case SL_RUN_O_GPU_DECRYPT:
		r->gpu_decrypt = true;
		break;
	case SL_RUN_O_ENV:
		rc = sl_job_env_set(r->env, arg);
		break;
	case SL_RUN_O_ENV_PASS:
		rc = sl_job_env_pass(r->env, arg);
		break;
	case SL_RUN_O_TIMEOUT:
		if (!parse_uint(arg, 365u * 86400u, &r->timeout_s) || r->timeout_s == 0)
			return sl_cli_usage(cmd, "--timeout: '%s' is not a number of seconds", arg);
		break;
	case SL_RUN_O_THREADS:
		if (!parse_uint(arg, 1024, &r->threads) || r->threads == 0)
			return sl_cli_usage(cmd, "--threads: '%s' is not 1..1024", arg);
		break;
	case SL_RUN_O_AUDIT_KEY:
		r->audit_key = arg;
		break;
	case SL_RUN_O_USER:
		r->user = arg;
		break;
	case SL_RUN_O_WINDOW:
		r->window = sl_cli_parse_size(arg);
		if (r->window < ((uint64_t)64 << 10))
			return sl_cli_usage(cmd, "--window %s: at least 64K (e.g. 512M, 4G)", arg);
		break;
	case SL_RUN_O_CLEAN_ENV:
		sl_job_env_clean(r->env);
		break;
	case SL_RUN_O_KILL_GRACE:
		if (!parse_uint(arg, 86400u, &r->kill_grace_s))
			return sl_cli_usage(cmd, "--kill-grace: '%s' is not 0..86400", arg);
		r->kill_grace_set = true;
		break;
	case SL_RUN_O_IMAGE_DIGEST:
		if (strncmp(arg, "sha256:", 7) != 0 || !sl_hex_is_lower(arg + 7, 64))
			return sl_cli_usage(cmd,
			                    "--image-digest: '%s' is not sha256: and 64 "
			                    "lower-case hex digits",
			                    arg);
		r->image_digest = arg;
		break;
	case SL_RUN_O_WORKLOAD_PCR:
		if (!parse_uint(arg, 15, &r->workload_pcr))
			return sl_cli_usage(cmd,
			                    "--workload-pcr: '%s' is not 0..15 (16 and 23 can be "
			                    "reset by anyone, 17-22 belong to DRTM)",
			                    arg);
		break;
	case SL_RUN_O_WORKLOAD_LOG:
		r->workload_log = arg;
		break;
	case SL_RUN_O_LINGER:
		if (!parse_uint(arg, 600, &r->linger_s))
			return sl_cli_usage(cmd, "--linger: '%s' is not 0..600 (seconds)", arg);
		r->linger_set = true;
		break;
	case SL_RUN_O_LEASE_GRACE:
		if (!parse_uint(arg, 3600, &r->lease_grace_s))
			return sl_cli_usage(cmd, "--lease-grace: '%s' is not 0..3600", arg);
		break;
	case 'v':
		r->verbose = true;
		break;
	default:
		return sl_cli_usage(cmd, "unknown option");
	}
	return rc == SL_OK ? 0 : sl_cli_usage(cmd, "%s", sl_err_detail());
}

static int on_option(void *ctx, int key, char *arg)
{
	return sl_run_option(ctx, "run", key, arg);
}

int sl_run_on_args(void *ctx, int argc, char **argv)
{
	struct sl_run *r = ctx;
	/* options end at the first dataset (POSIX mode): one after it is a
	 * mistake said as such, never an option (a privileged caller hands on
	 * datasets it was given) */
	for (int i = 0; i < argc; i++)
		if (argv[i][0] == '-' && argv[i][1] != '\0')
			return sl_cli_usage(r->serve.on ? "serve" : "run",
			                    "'%s' after the dataset %s: options come before the "
			                    "datasets (the first DATA ends them)",
			                    argv[i], argv[0]);
	r->datasets = argv;
	r->ndatasets = (size_t)argc;
	return 0;
}

void sl_run_init(struct sl_run *r)
{
	memset(r, 0, sizeof(*r));
	r->workload_pcr = SL_WORKLOAD_PCR_DEFAULT;
	r->lease_grace_s = SL_RUN_LEASE_GRACE_DEFAULT;
}

static const struct sl_cli_spec spec = {
    .name = "run",
    .shared = SL_RUN_SHARED,
    .shortopts = "v",
    .opts = run_opts,
    .help = usage,
    .on_option = on_option,
    .on_args = sl_run_on_args,
    .posix = true,
};

int sl_run_check(struct sl_run *r, const struct sl_cli_shared *sh, const char *cmd)
{
	struct sl_region_id rid = {r->cloud_identity, r->gcp_jwks, r->aws_certs, r->region};
	r->kms_url = sh->kms;
	r->kms_ca = sh->kms_ca;
	r->kms_pin = sh->kms_pin;
	r->tcti = sh->tcti;
	r->audit_log = sh->audit_log;
	if (r->policy_path == NULL || r->policy_pub == NULL || r->kms_url == NULL)
		return sl_cli_usage(cmd, "--policy, --policy-pubkey and --kms are required");
	if (sl_region_id_check(&rid, cmd) != 0)
		return SL_CAT_USAGE;
	if (r->ndatasets == 0 && r->outcfg.n == 0)
		return sl_cli_usage(cmd, "no dataset given (DATA.sld...)");
	if (sl_out_check(&r->outcfg) != SL_OK)
		return sl_cli_usage(cmd, "%s", sl_err_detail());
	if (r->ndatasets > SL_RUN_MAX_DATASETS)
		return sl_cli_usage(cmd, "at most %d datasets", SL_RUN_MAX_DATASETS);
	if (r->audit_log == NULL)
		r->audit_log = default_audit_log(r->audit_log_buf, sizeof(r->audit_log_buf));
	if (r->audit_key == NULL)
		r->audit_key = getenv("SECLAUNCH_AUDIT_KEY");
	if (r->tee == NULL)
		r->tee = "auto";
	return 0;
}

/* cmd is the job after "--" (NULL when there is none). */
static int check(struct sl_run *r, const struct sl_cli_shared *sh, char **cmd)
{
	int ret = sl_run_check(r, sh, "run");
	if (ret != 0)
		return ret;
	if (cmd == NULL || cmd[0] == NULL)
		return sl_cli_usage("run",
		                    "no command given: end the options with -- CMD [ARG...]");
	r->cmd = cmd;
	return 0;
}

/* Options and datasets before the first "--", the job after it. */
static int parse(struct sl_run *r, int argc, char **argv)
{
	struct sl_cli_shared sh;
	int dd = sl_cli_dashdash(argc, argv), ret;
	ret = sl_cli_parse(&spec, r, &sh, dd, argv);
	if (ret >= 0)
		return ret;
	ret = check(r, &sh, dd < argc ? argv + dd + 1 : NULL);
	return ret != 0 ? ret : -1;
}

int cmd_run(int argc, char **argv)
{
	struct sl_run r;
	int code;
	sl_err rc;

	sl_run_init(&r);
	rc = sl_job_env_new(&r.env);
	if (rc != SL_OK)
		return sl_cli_fail("run", rc);
	code = parse(&r, argc, argv);
	if (code >= 0) {
		sl_job_env_free(r.env);
		return code;
	}
	/* while this process has one thread: the outputs' mount namespace */
	sl_out_early(&r.outcfg);
	code = sl_run_execute(&r);
	sl_job_env_free(r.env);
	return code;
}
