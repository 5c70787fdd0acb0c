/* seclaunch enroll --kms URL [--enroll-token-file F] [--tcti T] ...:
 * enrolls this machine's TPM attestation key with seclaunchd by credential
 * activation (docs/protocol.md, "Enrollment"). Once per machine.
 * seclaunch enroll --issue-token --kms URL --admin-token-file F [--ttl S]:
 * an admin makes a single-use enrollment token for a TPM without an EK
 * certificate the service trusts. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../kmsc/kms_http.h"
#include "seclaunch/json.h"
#include "seclaunch/kms_client.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "Usage: seclaunch enroll --kms URL [--enroll-token-file F] [--tcti T]\n"
	        "                        [--kms-ca FILE] [--kms-pin PIN] [--json] [-q]\n"
	        "       seclaunch enroll --issue-token --kms URL --admin-token-file F [--ttl S]\n"
	        "                        [-o FILE]\n"
	        "       seclaunch enroll list --kms URL --admin-token-file F [--json]\n"
	        "       seclaunch enroll revoke --kms URL --admin-token-file F AK_NAME\n"
	        "       seclaunch enroll readmit --kms URL --admin-token-file F EK_SHA256\n\n"
	        "Enrolls this machine's TPM attestation key (AK) with seclaunchd: sends the EK\n"
	        "public key (and EK certificate when the TPM has one) and the AK public key,\n"
	        "then proves with TPM2_ActivateCredential that the AK lives in that TPM.\n"
	        "The AK is created once at its persistent handle when missing.\n\n"
	        "Outside seclaunchd --dev a TPM is vouched for by its EK certificate (chaining\n"
	        "to the service's manufacturer CA directory) or by a single-use enrollment\n"
	        "token an admin issued (--issue-token prints one; --enroll-token-file sends\n"
	        "it).\n\n"
	        "  --kms URL         seclaunchd base URL (https://HOST:PORT)\n"
	        "  --enroll-token-file F  an enrollment token (file mode 0600)\n"
	        "  --issue-token     (admin) print a new single-use enrollment token\n"
	        "  -o, --output FILE with --issue-token: write the token to FILE (created mode\n"
	        "                    0600; an existing file or link is refused), not stdout\n"
	        "  --admin-token-file F   the admin token, with --issue-token\n"
	        "  --ttl S           the issued token's lifetime in seconds (default 3600)\n"
	        "  --tcti T          TPM TCTI (default $SECLAUNCH_TCTI, else device:/dev/tpmrm0)\n"
	        "  --kms-ca FILE     CA bundle for the KMS's TLS certificate\n"
	        "                    (default $SECLAUNCH_KMS_CA, else the system store)\n"
	        "  --kms-pin PIN     pinned KMS public key: sha256//BASE64 or a key file\n"
	        "  --json            print {\"ak_name\": ...}\n"
	        "  -q, --quiet       print nothing on success\n\n"
	        "list, revoke and readmit (admin, --admin-token-file F): the enrolled AKs,\n"
	        "revoking one (and its machine: a revoked AK's jobs stop at their next lease\n"
	        "renewal, and no other AK of that TPM enrolls), re-admitting a machine\n"
	        "(seclaunch enroll list --help).\n\n"
	        "Exit codes (docs/exit-codes.md): 0 enrolled, 1 usage, 5 KMS unreachable or\n"
	        "refused, 7 TPM error.\n");
}

enum { O_TOKEN = 256, O_ISSUE, O_ADMIN, O_TTL };

static const struct sl_cli_opt opts[] = {
    {"enroll-token-file", required_argument, O_TOKEN, NULL},
    {"issue-token", no_argument, O_ISSUE, NULL},
    {"admin-token-file", required_argument, O_ADMIN, NULL},
    {"ttl", required_argument, O_TTL, NULL},
    {NULL, 0, 0, NULL},
};

struct en_ctx {
	const char *token_file, *admin;
	bool issue;
	long ttl;
};

static int on_option(void *ctx, int key, char *arg)
{
	struct en_ctx *c = ctx;
	char *end = NULL;
	switch (key) {
	case O_TOKEN:
		c->token_file = arg;
		break;
	case O_ISSUE:
		c->issue = true;
		break;
	case O_ADMIN:
		c->admin = arg;
		break;
	default:
		errno = 0;
		c->ttl = strtol(arg, &end, 10);
		if (errno != 0 || end == arg || *end != '\0' || c->ttl < 1 || c->ttl > 604800)
			return sl_cli_usage("enroll", "--ttl: seconds in 1..604800");
	}
	return 0;
}

static const struct sl_cli_spec spec = {
    .name = "enroll",
    .shared = SL_SH_QUIET | SL_SH_JSON | SL_SH_KMS_ALL | SL_SH_TCTI | SL_SH_OUT,
    .opts = opts,
    .help = usage,
    .on_option = on_option,
};

/* The token into a new file of mode 0600: never an existing file, nor
 * through a link (O_EXCL refuses both), so it lands nowhere but where asked. */
static SL_RESULT write_token(const char *path, const char *tok)
{
	sl_err rc = SL_E_IO;
	size_t len = strlen(tok), off = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	SL_ENSURE(fd >= 0, errno == EEXIST ? SL_E_EXISTS : SL_E_IO, "%s: %s%s", path,
	          strerror(errno), errno == EEXIST ? " (the token goes to a new file only)" : "");
	SL_ENSURE(fchmod(fd, 0600) == 0, SL_E_IO, "%s: fchmod: %s", path, strerror(errno));
	while (off < len) {
		ssize_t w = write(fd, tok + off, len - off);
		SL_ENSURE(w > 0 || errno == EINTR, SL_E_IO, "%s: write: %s", path, strerror(errno));
		off += w > 0 ? (size_t)w : 0;
	}
	SL_ENSURE(write(fd, "\n", 1) == 1 && fsync(fd) == 0, SL_E_IO, "%s: write: %s", path,
	          strerror(errno));
	rc = SL_OK;
out:
	if (fd >= 0 && close(fd) != 0 && rc == SL_OK)
		rc = sl_err_set(SL_E_IO, "%s: close: %s", path, strerror(errno));
	if (rc != SL_OK && fd >= 0)
		(void)unlink(path);
	return rc;
}

static int issue(const struct sl_cli_shared *sh, const struct en_ctx *c)
{
	sl_kms_opts ko = {.url = sh->kms,
	                  .ca_file = sh->kms_ca,
	                  .pinned_pubkey = sh->kms_pin,
	                  .admin_token_file = c->admin};
	sl_kms *k = NULL;
	json_t *req = json_pack("{s:I}", "ttl_s", (json_int_t)(c->ttl > 0 ? c->ttl : 3600)),
	       *res = NULL;
	sl_err rc = sl_kms_new(&ko, &k);
	if (rc == SL_OK)
		rc = sl_kms_call(k, "/v1/enroll/tokens", req, true, KMS_RETRY_UNPROCESSED, &res);
	sl_kms_free(k);
	json_decref(req);
	const char *tok = rc == SL_OK ? sl_json_getstr(res, "token") : NULL;
	if (rc == SL_OK && tok == NULL)
		rc = sl_err_set(SL_E_KMS_PROTOCOL, "KMS answer: missing \"token\"");
	if (rc != SL_OK) {
		json_decref(res);
		return sl_cli_fail("enroll", rc);
	}
	if (sh->out != NULL && strcmp(sh->out, "-") != 0) {
		rc = write_token(sh->out, tok);
		if (rc == SL_OK && sl_cli_json) {
			json_object_del(res, "token");
			json_object_set_new(res, "token_file", json_string(sh->out));
			sl_cli_print_json(json_incref(res));
		} else if (rc == SL_OK && !sl_cli_quiet) {
			fprintf(stderr,
			        "seclaunch enroll: single-use enrollment token written to %s\n",
			        sh->out);
		}
		json_decref(res);
		return rc == SL_OK ? 0 : sl_cli_fail("enroll", rc);
	}
	if (sl_cli_json)
		sl_cli_print_json(json_incref(res));
	else
		printf("%s\n", tok); /* the token itself: -o FILE puts it in a 0600 file */
	json_decref(res);
	return 0;
}

int cmd_enroll(int argc, char **argv)
{
	struct sl_cli_shared sh;
	struct en_ctx c = {0};
	sl_kms *k = NULL;
	char *name = NULL;
	sl_err rc;
	if (argc > 1 && (strcmp(argv[1], "list") == 0 || strcmp(argv[1], "revoke") == 0 ||
	                 strcmp(argv[1], "readmit") == 0))
		return cmd_enroll_admin(argc, argv); /* cmd_enroll_admin.c */
	/* the completion's list: the admin verbs, then enroll's own options */
	if (argc == 2 && strcmp(argv[1], "--complete") == 0)
		(void)cmd_enroll_admin(argc, argv);
	int ret = sl_cli_parse(&spec, &c, &sh, argc, argv);
	if (ret >= 0)
		return ret;
	if (sh.kms == NULL)
		return sl_cli_usage("enroll", "--kms URL is required");
	if (c.issue && c.admin == NULL)
		return sl_cli_usage("enroll", "--issue-token needs --admin-token-file");
	if (!c.issue && sh.out != NULL)
		return sl_cli_usage("enroll", "-o goes with --issue-token");
	if (c.issue)
		return issue(&sh, &c);
	sl_kms_opts ko = {.url = sh.kms,
	                  .ca_file = sh.kms_ca,
	                  .pinned_pubkey = sh.kms_pin,
	                  .enroll_token_file = c.token_file};
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
