/* seclaunch run: the attested launch, step by step as DESIGN.md's data flow
 * gives it: policy signature -> challenge -> ephemeral key -> evidence bound
 * to (nonce, eph_pub, policy digest) -> region identity -> local pre-flight
 * -> release -> open DEKs -> decrypt and stage -> job -> supervise -> wipe.
 * Any failure before the job starts: no job, everything wiped, the exit code
 * of the failure's category, one line naming the cause, an audit record. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "job.h"
#include "run_int.h"
#include "seclaunch/secret.h"
#include "seclaunch/stage.h"
#include "seclaunch/util.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "Usage: seclaunch run --policy P --policy-pubkey K --kms URL [options] DATA.sld... "
	        "-- CMD [ARG...]\n\n"
	        "Attests this machine, asks the KMS for the datasets' keys under the signed\n"
	        "policy, decrypts and stages the data in memory (GPU or sealed host memory),\n"
	        "runs CMD with SECLAUNCH_DATA describing it, and wipes everything afterwards.\n\n"
	        "  --policy P             the signed policy (JSON)\n"
	        "  --policy-sig F         its minisign signature (default: P.minisig)\n"
	        "  --policy-pubkey K      the compliance team's minisign public key\n"
	        "  --kms URL              the key-release service (https://host:port)\n"
	        "  --kms-ca F             CA bundle for the KMS's TLS certificate\n"
	        "  --tcti T               TPM to quote with (or $SECLAUNCH_TCTI; default "
	        "device:/dev/tpmrm0)\n"
	        "  --tee KIND             evidence kind: auto (default), tpm2, sev-snp, tdx\n"
	        "  --collateral DIR       vendor certificates for the local check of SNP/TDX "
	        "evidence\n"
	        "  --stage WHERE          auto (GPU when a CUDA device is usable; default), gpu, "
	        "host\n"
	        "  --cloud-identity FILE  a signed cloud identity document (GCP JWT, AWS IID)\n"
	        "  --cloud-identity metadata[:gcp|:aws]\n"
	        "                         fetch it from the metadata server now (a GCP token\n"
	        "                         then names this run's binding as its audience)\n"
	        "  --gcp-jwks FILE        Google's signing keys, to check a GCP token locally\n"
	        "  --aws-certs DIR        AWS certificates, to check an AWS document locally\n"
	        "  --region CLOUD:REGION  an UNSIGNED region; counts only when the policy sets\n"
	        "                         allow_unverified_region (development)\n"
	        "  --env K=V              set K in the job's environment (repeatable)\n"
	        "  --env-pass K           pass K from this environment to the job (repeatable)\n"
	        "  --timeout S            SIGTERM the job after S seconds, then SIGKILL\n"
	        "  --kill-grace S         from SIGTERM to SIGKILL after --timeout or a second\n"
	        "                         SIGINT/SIGTERM (default 10)\n"
	        "  --user USER[:GROUP]    run the job as USER (root only): it cannot read\n"
	        "                         seclaunch's key files or its /proc files\n"
	        "  --threads N            decryption threads (default: online CPUs)\n"
	        "  --audit-log F          audit log (or $SECLAUNCH_AUDIT_LOG; default\n"
	        "                         $XDG_STATE_HOME/seclaunch/audit.log)\n"
	        "  --audit-key F          Ed25519 checkpoint key for the audit log (or\n"
	        "                         $SECLAUNCH_AUDIT_KEY)\n"
	        "  -q, --quiet            print errors only\n"
	        "  -v, --verbose          also the probes' own messages (CUDA)\n"
	        "  -h, --help             this text\n\n"
	        "The job gets a clean environment (PATH, HOME, LANG, LC_*, TERM, TZ, CUDA_*,\n"
	        "NVIDIA_*, --env, --env-pass, SECLAUNCH_DATA), descriptors 0-2 and the staged\n"
	        "data, its own process group; SIGINT/SIGTERM/SIGHUP are forwarded to it.\n"
	        "Exit: the job's status (128+n for signal n); before the job: 1 usage, 2 input,\n"
	        "3 attestation, 4 policy denied, 5 KMS, 6 integrity, 7 system.\n"
	        "See docs/job-interface.md.\n");
}

enum {
	O_POLICY = 256,
	O_POLICY_SIG,
	O_POLICY_PUB,
	O_KMS,
	O_KMS_CA,
	O_TCTI,
	O_TEE,
	O_COLLATERAL,
	O_STAGE,
	O_CLOUD_ID,
	O_GCP_JWKS,
	O_AWS_CERTS,
	O_REGION,
	O_ENV,
	O_ENV_PASS,
	O_TIMEOUT,
	O_THREADS,
	O_AUDIT_LOG,
	O_AUDIT_KEY,
	O_USER,
	O_KILL_GRACE,
};

static const struct option opts[] = {
    {"policy", required_argument, NULL, O_POLICY},
    {"policy-sig", required_argument, NULL, O_POLICY_SIG},
    {"policy-pubkey", required_argument, NULL, O_POLICY_PUB},
    {"kms", required_argument, NULL, O_KMS},
    {"kms-ca", required_argument, NULL, O_KMS_CA},
    {"tcti", required_argument, NULL, O_TCTI},
    {"tee", required_argument, NULL, O_TEE},
    {"collateral", required_argument, NULL, O_COLLATERAL},
    {"stage", required_argument, NULL, O_STAGE},
    {"cloud-identity", required_argument, NULL, O_CLOUD_ID},
    {"gcp-jwks", required_argument, NULL, O_GCP_JWKS},
    {"aws-certs", required_argument, NULL, O_AWS_CERTS},
    {"region", required_argument, NULL, O_REGION},
    {"env", required_argument, NULL, O_ENV},
    {"env-pass", required_argument, NULL, O_ENV_PASS},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"threads", required_argument, NULL, O_THREADS},
    {"audit-log", required_argument, NULL, O_AUDIT_LOG},
    {"audit-key", required_argument, NULL, O_AUDIT_KEY},
    {"user", required_argument, NULL, O_USER},
    {"kill-grace", required_argument, NULL, O_KILL_GRACE},
    {"verbose", no_argument, NULL, 'v'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
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

/* Splits argv at the first "--": options and datasets before, the job after. */
static int parse(struct sl_run *r, int argc, char **argv)
{
	int dd = -1, c;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			dd = i;
			break;
		}
	}
	int nopt = dd < 0 ? argc : dd;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(nopt, argv, "qvh", opts, NULL)) != -1) {
		sl_err rc = SL_OK;
		switch (c) {
		case O_POLICY:
			r->policy_path = optarg;
			break;
		case O_POLICY_SIG:
			r->policy_sig = optarg;
			break;
		case O_POLICY_PUB:
			r->policy_pub = optarg;
			break;
		case O_KMS:
			r->kms_url = optarg;
			break;
		case O_KMS_CA:
			r->kms_ca = optarg;
			break;
		case O_TCTI:
			r->tcti = optarg;
			break;
		case O_TEE:
			r->tee = optarg;
			break;
		case O_COLLATERAL:
			r->collateral = optarg;
			break;
		case O_STAGE:
			rc = sl_stage_where_parse(optarg, &r->where);
			break;
		case O_CLOUD_ID:
			r->cloud_identity = optarg;
			break;
		case O_GCP_JWKS:
			r->gcp_jwks = optarg;
			break;
		case O_AWS_CERTS:
			r->aws_certs = optarg;
			break;
		case O_REGION:
			r->region = optarg;
			break;
		case O_ENV:
			rc = sl_job_env_set(r->env, optarg);
			break;
		case O_ENV_PASS:
			rc = sl_job_env_pass(r->env, optarg);
			break;
		case O_TIMEOUT:
			if (!parse_uint(optarg, 365u * 86400u, &r->timeout_s) || r->timeout_s == 0)
				return sl_cli_usage(
				    "run", "--timeout: '%s' is not a number of seconds", optarg);
			break;
		case O_THREADS:
			if (!parse_uint(optarg, 1024, &r->threads) || r->threads == 0)
				return sl_cli_usage("run", "--threads: '%s' is not 1..1024",
				                    optarg);
			break;
		case O_AUDIT_LOG:
			r->audit_log = optarg;
			break;
		case O_AUDIT_KEY:
			r->audit_key = optarg;
			break;
		case O_USER:
			r->user = optarg;
			break;
		case O_KILL_GRACE:
			if (!parse_uint(optarg, 86400u, &r->kill_grace_s))
				return sl_cli_usage("run", "--kill-grace: '%s' is not 0..86400",
				                    optarg);
			r->kill_grace_set = true;
			break;
		case 'v':
			r->verbose = true;
			break;
		case 'q':
			sl_cli_quiet = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return sl_cli_usage("run", "unknown or incomplete option '%s'",
			                    argv[optind - 1]);
		}
		if (rc != SL_OK)
			return sl_cli_usage("run", "%s", sl_err_detail());
	}
	if (r->policy_path == NULL || r->policy_pub == NULL || r->kms_url == NULL)
		return sl_cli_usage("run", "--policy, --policy-pubkey and --kms are required");
	if (r->cloud_identity != NULL && r->region != NULL)
		return sl_cli_usage("run", "--cloud-identity and --region exclude each other");
	r->datasets = argv + optind;
	r->ndatasets = (size_t)(nopt - optind);
	if (r->ndatasets == 0)
		return sl_cli_usage("run", "no dataset given (DATA.sld...)");
	if (r->ndatasets > SL_RUN_MAX_DATASETS)
		return sl_cli_usage("run", "at most %d datasets", SL_RUN_MAX_DATASETS);
	if (dd < 0 || dd + 1 >= argc)
		return sl_cli_usage("run",
		                    "no command given: end the options with -- CMD [ARG...]");
	r->cmd = argv + dd + 1;
	if (r->audit_log == NULL)
		r->audit_log = getenv("SECLAUNCH_AUDIT_LOG");
	if (r->audit_log == NULL)
		r->audit_log = default_audit_log(r->audit_log_buf, sizeof(r->audit_log_buf));
	if (r->audit_key == NULL)
		r->audit_key = getenv("SECLAUNCH_AUDIT_KEY");
	if (r->tee == NULL)
		r->tee = "auto";
	return -1; /* go on */
}

int cmd_run(int argc, char **argv)
{
	struct sl_run r;
	int code;
	sl_err rc;

	memset(&r, 0, sizeof(r));
	rc = sl_job_env_new(&r.env);
	if (rc != SL_OK)
		return sl_cli_fail("run", rc);
	code = parse(&r, argc, argv);
	if (code >= 0) {
		sl_job_env_free(r.env);
		return code;
	}
	/* the TSS library's own log lines would bury the one line that names
	 * the cause; its failures reach that line through our error detail */
	setenv("TSS2_LOG", "all+NONE", 0);
	code = sl_run_execute(&r);
	sl_job_env_free(r.env);
	return code;
}
