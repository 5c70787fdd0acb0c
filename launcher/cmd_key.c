/* seclaunch key create --kms URL --admin-token-file F --id ID: creates a KEK
 * in seclaunchd (admin). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "seclaunch/kms_client.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "Usage: seclaunch key create --kms URL --admin-token-file FILE --id ID\n"
	        "                            [--kms-ca FILE] [--kms-pin PIN] [--json] [-q]\n\n"
	        "Creates a key-encryption key (KEK) named ID in seclaunchd's backend (local\n"
	        "keystore or PKCS#11 token). Datasets are then encrypted with\n"
	        "`seclaunch encrypt --kms URL --key-id ID`.\n\n"
	        "  --kms URL                seclaunchd base URL (https://HOST:PORT)\n"
	        "  --admin-token-file FILE  the admin token (file mode 0600)\n"
	        "  --id ID                  key id: 1..128 of [A-Za-z0-9._-]\n"
	        "  --kms-ca FILE            CA bundle for the KMS's TLS certificate\n"
	        "                           (default $SECLAUNCH_KMS_CA, else the system store)\n"
	        "  --kms-pin PIN            pinned KMS public key: sha256//BASE64 or a key file\n"
	        "  --json                   print {\"id\": ID, \"created\": true}\n"
	        "  -q                       print nothing on success\n\n"
	        "Exit codes: 0 created, 1 usage, 2 token file unreadable or unsafe, 5 KMS\n"
	        "unreachable or refused (wrong token: 401; id taken: 409).\n");
}

int cmd_key(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"kms", required_argument, NULL, 'k'},
	    {"admin-token-file", required_argument, NULL, 'a'},
	    {"id", required_argument, NULL, 'i'},
	    {"kms-ca", required_argument, NULL, 'c'},
	    {"kms-pin", required_argument, NULL, 'p'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	sl_kms_opts ko = {.ca_file = getenv("SECLAUNCH_KMS_CA")};
	const char *id = NULL;
	sl_kms *k = NULL;
	sl_err rc;
	int c;
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "create") != 0)
		return sl_cli_usage("key", "expected the action 'create'");
	argc--;
	argv++;
	optind = 1;
	while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
		switch (c) {
		case 'k':
			ko.url = optarg;
			break;
		case 'a':
			ko.admin_token_file = optarg;
			break;
		case 'i':
			id = optarg;
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
			return sl_cli_usage("key", "unknown option");
		}
	}
	if (optind != argc)
		return sl_cli_usage("key", "unexpected argument '%s'", argv[optind]);
	if (ko.url == NULL || ko.admin_token_file == NULL || id == NULL)
		return sl_cli_usage("key", "create needs --kms, --admin-token-file and --id");
	rc = sl_kms_new(&ko, &k);
	if (rc == SL_OK)
		rc = sl_kms_key_create(k, id);
	sl_kms_free(k);
	if (rc != SL_OK)
		return sl_cli_fail("key create", rc);
	if (sl_cli_json)
		printf("{\"id\":\"%s\",\"created\":true}\n", id);
	else if (!sl_cli_quiet)
		printf("created key %s\n", id);
	return 0;
}
