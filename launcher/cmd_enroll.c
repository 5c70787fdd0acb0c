/* seclaunch enroll --kms URL [--tcti T] [--kms-ca F] [--kms-pin P]:
 * enrolls this machine's TPM attestation key with seclaunchd by credential
 * activation (docs/protocol.md, "Enrollment"). Once per machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "seclaunch/kms_client.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "Usage: seclaunch enroll --kms URL [--tcti T] [--kms-ca FILE] [--kms-pin PIN]\n"
	        "                        [--json] [-q]\n"
	        "       seclaunch enroll list --kms URL --admin-token-file F [--json]\n"
	        "       seclaunch enroll revoke --kms URL --admin-token-file F AK_NAME\n\n"
	        "Enrolls this machine's TPM attestation key (AK) with seclaunchd: sends the EK\n"
	        "public key (and EK certificate when the TPM has one) and the AK public key,\n"
	        "then proves with TPM2_ActivateCredential that the AK lives in that TPM.\n"
	        "The AK is created once at its persistent handle when missing.\n\n"
	        "  --kms URL         seclaunchd base URL (https://HOST:PORT)\n"
	        "  --tcti T          TPM TCTI (default $SECLAUNCH_TCTI, else device:/dev/tpmrm0)\n"
	        "  --kms-ca FILE     CA bundle for the KMS's TLS certificate\n"
	        "                    (default $SECLAUNCH_KMS_CA, else the system store)\n"
	        "  --kms-pin PIN     pinned KMS public key: sha256//BASE64 or a key file\n"
	        "  --json            print {\"ak_name\": ...}\n"
	        "  -q, --quiet       print nothing on success\n\n"
	        "list and revoke (admin, --admin-token-file F): the enrolled AKs, and\n"
	        "revoking one; a revoked AK's jobs stop at their next lease renewal\n"
	        "(seclaunch enroll list --help).\n\n"
	        "Exit codes (docs/exit-codes.md): 0 enrolled, 1 usage, 5 KMS unreachable or\n"
	        "refused, 7 TPM error.\n");
}

static const struct sl_cli_spec spec = {
    .name = "enroll",
    .shared = SL_SH_QUIET | SL_SH_JSON | SL_SH_KMS_ALL | SL_SH_TCTI,
    .help = usage,
};

int cmd_enroll(int argc, char **argv)
{
	struct sl_cli_shared sh;
	sl_kms *k = NULL;
	char *name = NULL;
	sl_err rc;
	if (argc > 1 && (strcmp(argv[1], "list") == 0 || strcmp(argv[1], "revoke") == 0))
		return cmd_enroll_admin(argc, argv); /* cmd_enroll_admin.c */
	int ret = sl_cli_parse(&spec, NULL, &sh, argc, argv);
	if (ret >= 0)
		return ret;
	if (sh.kms == NULL)
		return sl_cli_usage("enroll", "--kms URL is required");
	sl_kms_opts ko = {.url = sh.kms, .ca_file = sh.kms_ca, .pinned_pubkey = sh.kms_pin};
	rc = sl_kms_new(&ko, &k);
	if (rc == SL_OK)
		rc = sl_kms_enroll(k, sh.tcti, &name);
	sl_kms_free(k);
	if (rc != SL_OK)
		return sl_cli_fail("enroll", rc);
	if (sl_cli_json)
		sl_cli_print_json(json_pack("{s:s, s:b}", "ak_name", name, "enrolled", 1));
	else if (!sl_cli_quiet)
		printf("enrolled AK %s\n", name);
	free(name);
	return 0;
}
