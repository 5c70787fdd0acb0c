/* seclaunch enroll list|revoke|readmit --kms URL --admin-token-file F [NAME]:
 * the enrolled AKs of seclaunchd, revoking one, and re-admitting a revoked
 * machine (admin). A revoked AK's releases and lease renewals are refused
 * by name, so a job running on that machine stops at its next renewal; its
 * machine (EK) is revoked with it, so no other AK of it enrolls or releases
 * until readmit (docs/protocol.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "seclaunch/json.h"
#include "seclaunch/kms_client.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: seclaunch enroll list --kms URL --admin-token-file F [--json]\n"
	           "       seclaunch enroll revoke --kms URL --admin-token-file F AK_NAME\n"
	           "       seclaunch enroll readmit --kms URL --admin-token-file F EK_SHA256\n\n"
	           "list: the AKs enrolled with seclaunchd (name, state, enrolled, EK digest)\n"
	           "and the revoked machines.\n"
	           "revoke: revokes an enrolled AK by its TPM name (hex, as list and enroll print\n"
	           "it): its releases and renewals are refused from now on, and a job running\n"
	           "on that machine is stopped at its next lease renewal. The machine (its EK)\n"
	           "is revoked with it: no other AK of that TPM releases or enrolls.\n"
	           "readmit: lifts a machine's revocation by its EK digest (as list prints it):\n"
	           "its other AKs release again and new AKs may enroll; the revoked AK itself\n"
	           "stays revoked.\n\n"
	           "  --kms URL               seclaunchd base URL\n"
	           "  --admin-token-file F    the admin token (mode 0600)\n"
	           "  --kms-ca F, --kms-pin P as for every KMS command\n"
	           "  --json                  results as JSON\n\n"
	           "Exit codes: 0 done, 1 usage, 5 KMS unreachable or refused (an unknown AK,\n"
	           "an EK that is not revoked).\n");
}

enum { O_ADMIN_TOKEN = 256 };

static const struct sl_cli_opt opts[] = {
    {"admin-token-file", required_argument, O_ADMIN_TOKEN, NULL},
    {NULL, 0, 0, NULL},
};

struct ctx {
	const char *token;
	char **args;
	int nargs;
};

static int on_option(void *c, int key, char *arg)
{
	(void)key;
	((struct ctx *)c)->token = arg;
	return 0;
}

static int on_args(void *c, int argc, char **argv)
{
	((struct ctx *)c)->args = argv;
	((struct ctx *)c)->nargs = argc;
	return 0;
}

static int admin(const char *verb, int argc, char **argv, struct ctx *c, sl_kms **k)
{
	struct sl_cli_shared sh;
	char name[32];
	snprintf(name, sizeof(name), "enroll %s", verb);
	const struct sl_cli_spec spec = {
	    .name = name,
	    .shared = SL_SH_QUIET | SL_SH_JSON | SL_SH_KMS_ALL,
	    .opts = opts,
	    .help = usage,
	    .on_option = on_option,
	    .on_args = on_args,
	};
	int ret = sl_cli_parse(&spec, c, &sh, argc, argv);
	if (ret >= 0)
		return ret;
	if (sh.kms == NULL || c->token == NULL)
		return sl_cli_usage(name, "needs --kms and --admin-token-file");
	sl_kms_opts ko = {.url = sh.kms,
	                  .ca_file = sh.kms_ca,
	                  .pinned_pubkey = sh.kms_pin,
	                  .admin_token_file = c->token};
	sl_err rc = sl_kms_new(&ko, k);
	return rc == SL_OK ? -1 : sl_cli_fail(name, rc);
}

static int list(const struct sl_cli_verb *v, int argc, char **argv)
{
	struct ctx c = {0};
	sl_kms *k = NULL;
	json_t *aks = NULL;
	(void)v;
	int ret = admin("list", argc, argv, &c, &k);
	if (ret >= 0)
		return ret;
	if (c.nargs != 0) {
		sl_kms_free(k);
		return sl_cli_usage("enroll list", "takes no arguments");
	}
	sl_err rc = sl_kms_aks_list(k, &aks);
	sl_kms_free(k);
	if (rc != SL_OK)
		return sl_cli_fail("enroll list", rc);
	if (sl_cli_json) {
		sl_cli_print_json(aks);
		return 0;
	}
	size_t i;
	json_t *a;
	json_array_foreach (json_object_get(aks, "aks"), i, a) {
		/* a revoked AK, or one of a revoked machine, is never shown as enrolled */
		bool rv = json_is_true(json_object_get(a, "revoked"));
		bool ekr = json_is_true(json_object_get(a, "ek_revoked"));
		bool forged = json_is_false(json_object_get(a, "verified"));
		printf("%s  %s  since %s  ek sha256:%s\n", sl_json_getstr(a, "name") ?: "?",
		       forged ? "NOT VERIFIED (row not under the registry key)"
		       : rv   ? "REVOKED"
		       : ekr  ? "REVOKED (machine revoked)"
		              : "enrolled",
		       sl_json_getstr(a, "enrolled") ?: "?", sl_json_getstr(a, "ek_sha256") ?: "?");
	}
	json_array_foreach (json_object_get(aks, "revoked_eks"), i, a) {
		printf("machine ek sha256:%s  REVOKED %s (with AK %s); readmit with: seclaunch "
		       "enroll readmit ... %s\n",
		       sl_json_getstr(a, "ek_sha256") ?: "?", sl_json_getstr(a, "revoked") ?: "?",
		       sl_json_getstr(a, "by_ak") ?: "?", sl_json_getstr(a, "ek_sha256") ?: "?");
	}
	json_decref(aks);
	return 0;
}

static int revoke(const struct sl_cli_verb *v, int argc, char **argv)
{
	struct ctx c = {0};
	sl_kms *k = NULL;
	bool already = false;
	(void)v;
	int ret = admin("revoke", argc, argv, &c, &k);
	if (ret >= 0)
		return ret;
	if (c.nargs != 1) {
		sl_kms_free(k);
		return sl_cli_usage("enroll revoke", "give exactly one AK_NAME");
	}
	sl_err rc = sl_kms_ak_revoke(k, c.args[0], &already);
	sl_kms_free(k);
	if (rc != SL_OK)
		return sl_cli_fail("enroll revoke", rc);
	if (sl_cli_json)
		sl_cli_print_json(json_pack("{s:s, s:b, s:b}", "ak_name", c.args[0], "revoked", 1,
		                            "already", already));
	else if (!sl_cli_quiet)
		printf("%s AK %s\n", already ? "already revoked:" : "revoked", c.args[0]);
	return 0;
}

static int readmit(const struct sl_cli_verb *v, int argc, char **argv)
{
	struct ctx c = {0};
	sl_kms *k = NULL;
	(void)v;
	int ret = admin("readmit", argc, argv, &c, &k);
	if (ret >= 0)
		return ret;
	if (c.nargs != 1) {
		sl_kms_free(k);
		return sl_cli_usage("enroll readmit", "give exactly one EK_SHA256");
	}
	sl_err rc = sl_kms_ek_readmit(k, c.args[0]);
	sl_kms_free(k);
	if (rc != SL_OK)
		return sl_cli_fail("enroll readmit", rc);
	if (sl_cli_json)
		sl_cli_print_json(json_pack("{s:s, s:b}", "ek_sha256", c.args[0], "readmitted", 1));
	else if (!sl_cli_quiet)
		printf("readmitted machine ek sha256:%s\n", c.args[0]);
	return 0;
}

static const struct sl_cli_verb verbs[] = {
    {"list", list, NULL},
    {"revoke", revoke, NULL},
    {"readmit", readmit, NULL},
    {NULL, NULL, NULL},
};

int cmd_enroll_admin(int argc, char **argv)
{
	return sl_cli_dispatch("enroll", verbs, usage, argc, argv);
}
