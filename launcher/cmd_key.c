/* seclaunch key create --kms URL --admin-token-file F --id ID: creates a KEK
 * in seclaunchd (admin). */
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
	        "  -q, --quiet              print nothing on success\n\n"
	        "Exit codes: 0 created, 1 usage, 2 token file unreadable or unsafe, 5 KMS\n"
	        "unreachable or refused (wrong token: 401; id taken: 409).\n");
}

enum { O_ADMIN_TOKEN = 256, O_ID };

static const struct sl_cli_opt key_opts[] = {
    {"admin-token-file", required_argument, O_ADMIN_TOKEN, NULL},
    {"id", required_argument, O_ID, NULL},
    {NULL, 0, 0, NULL},
};

struct key_ctx {
	const char *token, *id;
};

static int on_option(void *ctx, int key, char *arg)
{
	struct key_ctx *k = ctx;
	if (key == O_ADMIN_TOKEN)
		k->token = arg;
	else
		k->id = arg;
	return 0;
}

static const struct sl_cli_spec spec = {
    .name = "key create",
    .shared = SL_SH_QUIET | SL_SH_JSON | SL_SH_KMS_ALL,
    .opts = key_opts,
    .help = usage,
    .on_option = on_option,
};

static int key_create(const struct sl_cli_verb *v, int argc, char **argv)
{
	struct sl_cli_shared sh;
	struct key_ctx kc = {0};
	(void)v;
	sl_kms *k = NULL;
	sl_err rc;
	int ret = sl_cli_parse(&spec, &kc, &sh, argc, argv);
	if (ret >= 0)
		return ret;
	if (sh.kms == NULL || kc.token == NULL || kc.id == NULL)
		return sl_cli_usage("key create", "needs --kms, --admin-token-file and --id");
	sl_kms_opts ko = {.url = sh.kms,
	                  .ca_file = sh.kms_ca,
	                  .pinned_pubkey = sh.kms_pin,
	                  .admin_token_file = kc.token};
	rc = sl_kms_new(&ko, &k);
	if (rc == SL_OK)
		rc = sl_kms_key_create(k, kc.id);
	sl_kms_free(k);
	if (rc != SL_OK)
		return sl_cli_fail("key create", rc);
	if (sl_cli_json)
		sl_cli_print_json(json_pack("{s:s, s:b}", "id", kc.id, "created", 1));
	else if (!sl_cli_quiet)
		printf("created key %s\n", kc.id);
	return 0;
}

static const struct sl_cli_verb verbs[] = {
    {"create", key_create, NULL},
    {NULL, NULL, NULL},
};

int cmd_key(int argc, char **argv)
{
	return sl_cli_dispatch("key", verbs, usage, argc, argv);
}
