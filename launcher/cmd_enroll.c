/* seclaunch enroll --kms URL [--tcti T] [--kms-ca F] [--kms-pin P]:
 * enrolls this machine's TPM attestation key with seclaunchd by credential
 * activation (docs/protocol.md, "Enrollment"). Once per machine. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "seclaunch/kms_client.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "Usage: seclaunch enroll --kms URL [--tcti T] [--kms-ca FILE] [--kms-pin PIN]\n"
	        "                        [--json] [-q]\n\n"
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
	        "  -q                print nothing on success\n\n"
	        "Exit codes: 0 enrolled, 1 usage, 5 KMS unreachable or refused, 7 TPM error.\n");
}

int cmd_enroll(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"kms", required_argument, NULL, 'k'},
	    {"tcti", required_argument, NULL, 't'},
	    {"kms-ca", required_argument, NULL, 'c'},
	    {"kms-pin", required_argument, NULL, 'p'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	sl_kms_opts ko = {.ca_file = getenv("SECLAUNCH_KMS_CA")};
	const char *tcti = NULL;
	sl_kms *k = NULL;
	char *name = NULL;
	sl_err rc;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
		switch (c) {
		case 'k':
			ko.url = optarg;
			break;
		case 't':
			tcti = optarg;
			break;
		case 'c':
			ko.ca_file = optarg;
			break;
		case 'p':
			ko.pinned_pubkey = optarg;
			break;
		case 'j':
			sl_cli_json = true;
			break;
		case 'q':
			sl_cli_quiet = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return sl_cli_usage("enroll", "unknown option");
		}
	}
	if (optind != argc)
		return sl_cli_usage("enroll", "unexpected argument '%s'", argv[optind]);
	if (ko.url == NULL)
		return sl_cli_usage("enroll", "--kms URL is required");
	rc = sl_kms_new(&ko, &k);
	if (rc == SL_OK)
		rc = sl_kms_enroll(k, tcti, &name);
	sl_kms_free(k);
	if (rc != SL_OK)
		return sl_cli_fail("enroll", rc);
	if (sl_cli_json)
		printf("{\"ak_name\":\"%s\",\"enrolled\":true}\n", name);
	else if (!sl_cli_quiet)
		printf("enrolled AK %s\n", name);
	free(name);
	return 0;
}
