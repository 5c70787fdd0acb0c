/* seclaunch key create|list|show|rotate|disable|enable|retire|delete: the
 * key lifecycle in seclaunchd (admin token; docs/protocol.md, "Key
 * lifecycle"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "../kmsc/kms_http.h"
#include "seclaunch/kms_client.h"

static void usage(FILE *f)
{
	fprintf(
	    f, "Usage: seclaunch key create --kms URL --admin-token-file FILE --id ID\n"
	       "                            [--aws-key-id ARN] [--kms-ca FILE] [--kms-pin PIN]\n"
	       "                            [--json] [-q]\n"
	       "       seclaunch key list --kms URL --admin-token-file FILE\n"
	       "       seclaunch key show|rotate|disable|enable --kms URL --admin-token-file FILE\n"
	       "                            --id ID\n"
	       "       seclaunch key retire|delete --kms URL --admin-token-file FILE --id ID\n"
	       "                            [--force]\n\n"
	       "create makes a key-encryption key (KEK) named ID in seclaunchd's backend (the\n"
	       "state store, wrapped under the master key, a PKCS#11 token, or AWS KMS: a new\n"
	       "AWS key, or with --aws-key-id an existing one adopted). Datasets are\n"
	       "then encrypted with `seclaunch encrypt --kms URL --key-id ID`.\n"
	       "list and show print each key's state, versions and dataset references.\n"
	       "rotate makes a new KEK version for new wraps; older versions keep unwrapping\n"
	       "until retired (`seclaunch rewrap DATASET` moves a dataset to the newest).\n"
	       "disable stops every release and wrap under the key at once; enable undoes it.\n"
	       "retire stops versions below the current one from unwrapping; delete removes\n"
	       "the key: both are refused while a dataset references what they remove,\n"
	       "unless --force (data wrapped under it is then lost). Every change is audited.\n\n"
	       "  --kms URL                seclaunchd base URL (https://HOST:PORT)\n"
	       "  --admin-token-file FILE  the admin token (file mode 0600)\n"
	       "  --id ID                  key id: 1..128 of [A-Za-z0-9._-]\n"
	       "  --force                  retire or delete although datasets reference it\n"
	       "  --aws-key-id ARN         create: adopt this AWS KMS key (kek_backend\n"
	       "                           \"aws-kms\"; symmetric, ENCRYPT_DECRYPT, enabled)\n"
	       "  --kms-ca FILE            CA bundle for the KMS's TLS certificate\n"
	       "                           (default $SECLAUNCH_KMS_CA, else the system store)\n"
	       "  --kms-pin PIN            pinned KMS public key: sha256//BASE64 or a key file\n"
	       "  --json                   print {\"id\": ID, \"created\": true}\n"
	       "  -q, --quiet              print nothing on success\n\n"
	       "Exit codes: 0 done, 1 usage, 2 token file unreadable or unsafe, 5 KMS\n"
	       "unreachable or refused (wrong token: 401; id taken or still referenced: 409;\n"
	       "unknown key: 404).\n");
}

enum { O_ADMIN_TOKEN = 256, O_ID, O_FORCE, O_AWS_KEY };

static const struct sl_cli_opt key_create_opts[] = {
    {"admin-token-file", required_argument, O_ADMIN_TOKEN, NULL},
    {"id", required_argument, O_ID, NULL},
    {"aws-key-id", required_argument, O_AWS_KEY, NULL},
    {NULL, 0, 0, NULL},
};

static const struct sl_cli_opt key_opts[] = {
    {"admin-token-file", required_argument, O_ADMIN_TOKEN, NULL},
    {"id", required_argument, O_ID, NULL},
    {NULL, 0, 0, NULL},
};

static const struct sl_cli_opt key_force_opts[] = {
    {"admin-token-file", required_argument, O_ADMIN_TOKEN, NULL},
    {"id", required_argument, O_ID, NULL},
    {"force", no_argument, O_FORCE, NULL},
    {NULL, 0, 0, NULL},
};

struct key_ctx {
	const char *token, *id, *aws_key;
	bool force;
};

static int on_option(void *ctx, int key, char *arg)
{
	struct key_ctx *k = ctx;
	if (key == O_ADMIN_TOKEN)
		k->token = arg;
	else if (key == O_FORCE)
		k->force = true;
	else if (key == O_AWS_KEY)
		k->aws_key = arg;
	else
		k->id = arg;
	return 0;
}

static const struct sl_cli_spec spec = {
    .name = "key create",
    .shared = SL_SH_QUIET | SL_SH_JSON | SL_SH_KMS_ALL,
    .opts = key_create_opts,
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
		rc = sl_kms_key_create_aws(k, kc.id, kc.aws_key);
	sl_kms_free(k);
	if (rc != SL_OK)
		return sl_cli_fail("key create", rc);
	if (sl_cli_json)
		sl_cli_print_json(json_pack("{s:s, s:b}", "id", kc.id, "created", 1));
	else if (!sl_cli_quiet)
		printf("created key %s\n", kc.id);
	return 0;
}

/* list, show and the changes: one admin call each (data: the action). */
static int key_action(const struct sl_cli_verb *v, int argc, char **argv)
{
	const char *action = v->data;
	bool listing = strcmp(v->name, "list") == 0, show = strcmp(v->name, "show") == 0;
	bool forceable = strcmp(v->name, "retire") == 0 || strcmp(v->name, "delete") == 0;
	char name[32], path[64 + SL_KMS_ID_MAX];
	struct sl_cli_spec sp = spec;
	struct sl_cli_shared sh;
	struct key_ctx kc = {0};
	sl_kms *k = NULL;
	json_t *body = NULL, *res = NULL;
	sl_err rc;
	snprintf(name, sizeof(name), "key %s", v->name);
	sp.name = name;
	sp.opts = forceable ? key_force_opts : key_opts;
	int ret = sl_cli_parse(&sp, &kc, &sh, argc, argv);
	if (ret >= 0)
		return ret;
	if (sh.kms == NULL || kc.token == NULL || (!listing && kc.id == NULL))
		return sl_cli_usage(name, "needs --kms, --admin-token-file%s",
		                    listing ? "" : " and --id");
	if (!listing &&
	    (strlen(kc.id) > SL_KMS_ID_MAX ||
	     strspn(kc.id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789."
	                   "_-") != strlen(kc.id)))
		return sl_cli_usage(name, "--id: '%s' must be 1..%d of [A-Za-z0-9._-]", kc.id,
		                    SL_KMS_ID_MAX);
	if (listing)
		snprintf(path, sizeof(path), "/v1/keys");
	else if (show)
		snprintf(path, sizeof(path), "/v1/keys/%s", kc.id);
	else
		snprintf(path, sizeof(path), "/v1/keys/%s/%s", kc.id, action);
	if (!listing && !show)
		body = json_pack("{s:b}", "force", kc.force);
	sl_kms_opts ko = {.url = sh.kms,
	                  .ca_file = sh.kms_ca,
	                  .pinned_pubkey = sh.kms_pin,
	                  .admin_token_file = kc.token};
	rc = sl_kms_new(&ko, &k);
	if (rc == SL_OK)
		rc = sl_kms_call(k, path, body, true, KMS_RETRY_UNPROCESSED, &res);
	sl_kms_free(k);
	json_decref(body);
	if (rc != SL_OK)
		return sl_cli_fail(name, rc);
	if (sl_cli_json || listing || show) {
		if (!sl_cli_quiet || sl_cli_json) {
			char *t = json_dumps(res, sl_cli_json ? JSON_COMPACT : JSON_INDENT(2));
			if (t != NULL)
				printf("%s\n", t);
			free(t);
		}
	} else if (!sl_cli_quiet) {
		json_int_t ver = json_integer_value(json_object_get(res, "current_version"));
		if (strcmp(v->name, "rotate") == 0)
			printf("key %s: version %lld is current\n", kc.id, (long long)ver);
		else
			printf("key %s: %s\n", kc.id,
			       strcmp(v->name, "disable") == 0  ? "disabled"
			       : strcmp(v->name, "enable") == 0 ? "enabled"
			       : strcmp(v->name, "retire") == 0
			           ? "versions below the current one retired"
			           : "deleted");
	}
	json_decref(res);
	return 0;
}

static const struct sl_cli_verb verbs[] = {
    {"create", key_create, NULL},
    {"list", key_action, NULL},
    {"show", key_action, NULL},
    {"rotate", key_action, "rotate"},
    {"disable", key_action, "disable"},
    {"enable", key_action, "enable"},
    {"retire", key_action, "retire"},
    {"delete", key_action, "delete"},
    {NULL, NULL, NULL},
};

int cmd_key(int argc, char **argv)
{
	return sl_cli_dispatch("key", verbs, usage, argc, argv);
}
