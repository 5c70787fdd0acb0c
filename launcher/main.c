/* seclaunch: the attested launcher. main() is a table of subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "seclaunch/util.h"

static const struct sl_cmd commands[] = {
    {"version", cmd_version, "print the version"},
    {"run", cmd_run, "attest, fetch keys under the policy, stage data in memory, run a job"},
    {"serve", cmd_serve,
     "the attested launch once for a node, then its data for every local rank or task"},
    {"keygen", cmd_keygen, "make a 32-byte data key file (mode 0600)"},
    {"encrypt", cmd_encrypt, "encrypt a file into an SLD dataset file"},
    {"decrypt", cmd_decrypt, "decrypt an SLD file (authenticated bytes only; never to a tty)"},
    {"inspect", cmd_inspect, "print an SLD header as JSON (needs no key)"},
    {"policy", cmd_policy, "sign, verify, check and explain compliance policies"},
    {"attest", cmd_attest, "collect attestation evidence (TPM quote, SEV-SNP/TDX report)"},
    {"verify", cmd_verify, "verify attestation evidence and print its claims"},
    {"evidence", cmd_evidence, "import an SEV-SNP report or TDX quote as evidence JSON"},
    {"enroll", cmd_enroll, "enroll this machine's TPM attestation key with seclaunchd"},
    {"measure", cmd_measure, "predict a job's workload identity; replay a workload log"},
    {"key", cmd_key, "create, list, rotate, disable or delete seclaunchd keys (admin)"},
    {"rewrap", cmd_rewrap, "move a sharded dataset to its key's newest version (admin)"},
    {"audit", cmd_audit, "verify or export the tamper-evident audit log; make its checkpoint key"},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	fprintf(f, "Usage: seclaunch COMMAND [OPTIONS] [ARGS]\n\n"
	           "Runs training jobs on encrypted datasets whose keys are released only to\n"
	           "attested confidential machines in allowed regions.\n\nCommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'seclaunch help COMMAND' (or 'seclaunch COMMAND --help') describes a "
	           "command.\n"
	           "Shared flags, wherever they mean something: -q/--quiet, --json (results as\n"
	           "JSON on stdout; a failure is one {\"error\": {\"code\", \"exit\", "
	           "\"message\"}}\n"
	           "object), --kms URL, --kms-ca FILE ($SECLAUNCH_KMS_CA), --kms-pin PIN,\n"
	           "--tcti T ($SECLAUNCH_TCTI), --audit-log FILE ($SECLAUNCH_AUDIT_LOG),\n"
	           "-o/--output FILE, --force (replace an existing output file).\n"
	           "Exit codes: 0 ok, 1 usage, 2 input/format, 3 attestation failed, 4 policy\n"
	           "denied, 5 KMS unreachable or refused, 6 integrity failure, 7 system error;\n"
	           "`run` exits with the job's own status (128+n for signal n). See\n"
	           "docs/exit-codes.md.\n");
}

static void usage_version(FILE *f)
{
	fprintf(f, "Usage: seclaunch version [--json]\n\nPrints the version of seclaunch.\n");
}

int cmd_version(int argc, char **argv)
{
	static const struct sl_cli_spec spec = {
	    .name = "version", .shared = SL_SH_JSON | SL_SH_QUIET, .help = usage_version};
	struct sl_cli_shared sh;
	int ret = sl_cli_parse(&spec, NULL, &sh, argc, argv);
	if (ret >= 0)
		return ret;
	if (sl_cli_json)
		sl_cli_print_json(json_pack("{s:s}", "version", SL_VERSION));
	else
		printf("seclaunch %s\n", SL_VERSION);
	return 0;
}

int main(int argc, char **argv)
{
	sl_err rc = sl_harden_process();
	if (rc == SL_OK)
		rc = sl_heap_wipe_install();
	if (rc != SL_OK)
		return sl_cli_fail("startup", rc);
	if (argc < 2) {
		usage(stderr);
		return SL_CAT_USAGE;
	}
	if (strcmp(argv[1], "help") == 0 && argc > 2) {
		/* `seclaunch help CMD [VERB]` is `seclaunch CMD [VERB] --help` */
		char *args[4] = {argv[2], argc > 3 ? argv[3] : NULL, NULL, NULL};
		int n = argc > 3 ? 2 : 1;
		args[n++] = "--help";
		for (size_t i = 0; i < NCOMMANDS; i++)
			if (strcmp(argv[2], commands[i].name) == 0)
				return commands[i].fn(n, args);
		fprintf(stderr, "seclaunch: unknown command '%s'\n", argv[2]);
		usage(stderr);
		return SL_CAT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0)
		return cmd_version(argc - 1, argv + 1);
	/* the TSS library's own log lines (a probed handle that is not there
	 * is an ERROR to it) would bury the one line that names the cause; its
	 * failures reach that line through the error detail. TSS2_LOG set by
	 * the user still wins. */
	setenv("TSS2_LOG", "all+NONE", 0);
	for (size_t i = 0; i < NCOMMANDS; i++) {
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	}
	fprintf(stderr, "seclaunch: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return SL_CAT_USAGE;
}
