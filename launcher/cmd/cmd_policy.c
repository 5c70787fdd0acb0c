/* seclaunch policy keygen | sign | verify | check | explain
 *
 * Key and signature files are minisign's, so the stock `minisign` tool and
 * these commands work on the same files in both directions. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "policy_cli.h"
#include "seclaunch/json.h"
#include "seclaunch/attest.h"
#include "seclaunch/minisign.h"
#include "seclaunch/policy.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

#define CMD "policy"
#define PASSWORD_MAX 1024
#define CLAIMS_MAX (1024 * 1024)

static void usage(FILE *f)
{
	fprintf(f, "Usage:\n"
	           "  seclaunch policy keygen --secret-key F --public-key F.pub [-W] "
	           "[--force]\n"
	           "  seclaunch policy sign --secret-key F --policy P [-t COMMENT] "
	           "[--signature S] "
	           "[--legacy]\n"
	           "                        [--force]\n"
	           "  seclaunch policy verify --policy P --policy-pubkey K [--signature S] "
	           "[--json]\n"
	           "  seclaunch policy check --policy P [--strict] [--json]\n"
	           "  seclaunch policy explain --policy P --policy-pubkey K [--signature "
	           "S]\n"
	           "                           --claims CLAIMS.json --dataset D [--key ID]\n"
	           "                           [--destination URL]... [--identity DOC ...] "
	           "[--json]\n"
	           "  seclaunch policy identity-collect --cloud gcp|aws|auto [--binding "
	           "HEX] -o DOC\n"
	           "                           [--force]\n"
	           "  seclaunch policy identity-verify --identity DOC [--gcp-jwks F] "
	           "[--gcp-cs-root F]\n"
	           "                           [--aws-trust DIR] [--binding HEX] [--at "
	           "TIME] [--json]\n\n"
	           "Policies are JSON (docs/policy.md) signed with minisign keys; the files "
	           "are\n"
	           "minisign's own, so `minisign -S/-V` works on them too.\n\n"
	           "  --secret-key F      minisign secret key file (written mode 0600 by "
	           "keygen)\n"
	           "  --public-key F      minisign public key file (keygen output)\n"
	           "  -W                  keygen: leave the secret key unencrypted (no "
	           "password)\n"
	           "  --force             keygen, sign, identity-collect: replace existing "
	           "files\n"
	           "  --policy P          the policy document\n"
	           "  --strict            check: warnings (dangerous gaps) are errors too\n"
	           "  --policy-pubkey K   minisign public key that must have signed P\n"
	           "  --signature S       signature file (default: P.minisig)\n"
	           "  -t, --trusted-comment C  sign: signed comment (default: timestamp and "
	           "file name)\n"
	           "  --legacy            sign: legacy 'Ed' signature instead of prehashed "
	           "'ED'\n"
	           "  --claims F          explain: claims JSON as `seclaunch verify --json` "
	           "prints it;\n"
	           "                      repeatable (verify --json and measure --predict --json\n"
	           "                      of one machine and job: one claim set, no claim\n"
	           "                      given two values)\n"
	           "  --dataset D         explain: the dataset id asked for\n"
	           "  --key ID            explain: the key id asked for\n"
	           "  --destination URL   explain: a checkpoint/output destination the job "
	           "writes to\n"
	           "                      (repeatable)\n"
	           "  --identity DOC      a cloud identity document (JSON, or a bare GCP "
	           "JWT); explain\n"
	           "                      adds its verified region claims to --claims\n"
	           "  --gcp-jwks F        Google's signing keys (JWKS cache file) for GCP "
	           "identity JWTs\n"
	           "  --gcp-cs-root F     pinned root (PEM) for GCP Confidential Space "
	           "tokens\n"
	           "  --aws-trust DIR     AWS identity document certificates (PEM files)\n"
	           "  --binding HEX       the request binding: GCP audience / expected aud\n"
	           "  --at TIME           verify at this RFC 3339 time instead of now\n"
	           "  --cloud C           identity-collect: gcp, aws or auto (metadata "
	           "servers at\n"
	           "                      $SECLAUNCH_GCP_METADATA_URL / "
	           "$SECLAUNCH_AWS_METADATA_URL)\n"
	           "  -o, --out DOC       identity-collect: where to write the document\n"
	           "  --json              results as JSON on stdout; a failure is one\n"
	           "                      {\"error\": {\"code\", \"exit\", \"message\"}} "
	           "object\n"
	           "  -q, --quiet         print nothing on success\n"
	           "  -h, --help          this text (every subcommand takes it)\n\n"
	           "The secret key password comes from the file named by\n"
	           "SECLAUNCH_POLICY_PASSWORD_FILE (mode 0600), else from a prompt on the "
	           "terminal.\n"
	           "Exit codes (docs/exit-codes.md): 0 ok / allowed, 1 usage, 2 malformed "
	           "or\n"
	           "invalid file, output exists; 3 identity document invalid; 4 signature "
	           "invalid or\n"
	           "policy denied; 6 wrong password.\n");
}

/* The secret key password: from $SECLAUNCH_POLICY_PASSWORD_FILE or the tty. */
static SL_RESULT read_password(bool confirm, sl_secret **out)
{
	sl_err rc = SL_E_USAGE;
	sl_secret *s = NULL, *s2 = NULL;
	struct termios old, raw;
	bool restore = false;
	FILE *tty = NULL;
	const char *pf = getenv("SECLAUNCH_POLICY_PASSWORD_FILE");

	if (pf != NULL) {
		SL_GUARD(sl_secret_read_file(pf, PASSWORD_MAX, &s));
		size_t n = sl_secret_len(s);
		uint8_t *d = sl_secret_data(s);
		while (n > 0 && (d[n - 1] == '\n' || d[n - 1] == '\r'))
			n--;
		SL_ENSURE(n > 0 && n < PASSWORD_MAX, SL_E_INPUT, "%s: empty password", pf);
		sl_secret_truncate(s, n + 1);
		d[n] = '\0';
	} else {
		tty = fopen("/dev/tty", "r+e");
		SL_ENSURE(tty != NULL, SL_E_USAGE,
		          "no terminal to ask for the password: set "
		          "SECLAUNCH_POLICY_PASSWORD_FILE "
		          "or use -W");
		/* unbuffered: stdio would keep the typed password in a heap buffer
		 * that fclose frees unwiped; fgets then reads into secret memory */
		setvbuf(tty, NULL, _IONBF, 0);
		for (int round = 0; round < (confirm ? 2 : 1); round++) {
			sl_secret **dst = round == 0 ? &s : &s2;
			SL_GUARD(sl_secret_new(PASSWORD_MAX, dst));
			fprintf(tty, round == 0 ? "Password: " : "Password (again): ");
			fflush(tty);
			if (tcgetattr(fileno(tty), &old) == 0) {
				raw = old;
				raw.c_lflag &= ~(tcflag_t)ECHO;
				restore = tcsetattr(fileno(tty), TCSAFLUSH, &raw) == 0;
			}
			char *line = (char *)sl_secret_data(*dst);
			bool got = fgets(line, PASSWORD_MAX, tty) != NULL;
			if (restore)
				tcsetattr(fileno(tty), TCSAFLUSH, &old);
			restore = false;
			fprintf(tty, "\n");
			SL_ENSURE(got, SL_E_USAGE, "no password entered");
			line[strcspn(line, "\r\n")] = '\0';
			SL_ENSURE(line[0] != '\0', SL_E_USAGE, "empty password");
		}
		if (confirm)
			SL_ENSURE(strcmp((char *)sl_secret_data(s), (char *)sl_secret_data(s2)) ==
			              0,
			          SL_E_USAGE, "the passwords differ");
	}
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	if (tty != NULL)
		fclose(tty);
	sl_secret_free(s);
	sl_secret_free(s2);
	return rc;
}

static int do_keygen(const struct opts *o)
{
	sl_err rc = SL_E_USAGE;
	sl_secret *pw = NULL;
	char *sec = NULL, *pub = NULL;
	sl_minisign_pubkey pk;
	char id[17];

	if (o->seckey == NULL || o->pubkey_out == NULL)
		return sl_cli_usage(CMD, "keygen needs --secret-key and --public-key");
	/* both refused before either is written */
	SL_GUARD(sl_cli_check_new(o->seckey, o->force));
	SL_GUARD(sl_cli_check_new(o->pubkey_out, o->force));
	if (!o->no_password)
		SL_GUARD(read_password(true, &pw));
	SL_GUARD(sl_minisign_keygen(pw ? (const char *)sl_secret_data(pw) : NULL, 0, 0, &sec, &pub,
	                            &pk));
	SL_GUARD(sl_file_write_atomic(o->seckey, sec, strlen(sec), 0600, o->force));
	SL_GUARD(sl_file_write_atomic(o->pubkey_out, pub, strlen(pub), 0644, o->force));
	sl_minisign_key_id_hex(pk.key_id, id);
	if (sl_cli_json)
		sl_cli_print_json(json_pack("{s:s, s:s, s:s, s:b}", "key_id", id, "secret_key",
		                            o->seckey, "public_key", o->pubkey_out,
		                            "password_protected", pw != NULL));
	else if (!sl_cli_quiet)
		printf("key id %s\nsecret key: %s (%s)\npublic key: %s\n", id, o->seckey,
		       pw ? "password-protected" : "unencrypted", o->pubkey_out);
	rc = SL_OK;
out:
	if (sec != NULL) {
		sl_wipe(sec, strlen(sec));
		free(sec);
	}
	free(pub);
	sl_secret_free(pw);
	return rc == SL_OK ? 0 : sl_cli_fail(CMD " keygen", rc);
}

static int do_sign(const struct opts *o)
{
	sl_err rc = SL_E_USAGE;
	sl_secret *pw = NULL, *keytext = NULL;
	sl_minisign_seckey *sk = NULL;
	sl_policy *p = NULL;
	uint8_t *data = NULL;
	size_t len = 0;
	char *sig = NULL, *sigpath = NULL, comment[SL_MINISIGN_COMMENT_MAX + 1];

	if (o->seckey == NULL || o->policy == NULL)
		return sl_cli_usage(CMD, "sign needs --secret-key and --policy");
	if (o->sig == NULL)
		SL_ENSURE(asprintf(&sigpath, "%s.minisig", o->policy) >= 0, SL_E_NOMEM,
		          "allocating");
	/* an existing signature is refused before the password is asked for */
	SL_GUARD(sl_cli_check_new(o->sig ? o->sig : sigpath, o->force));
	SL_GUARD(sl_file_read(o->policy, SL_POLICY_MAX_BYTES, &data, &len));
	/* sign only what seclaunch would accept */
	rc = sl_policy_load(data, len, &p);
	if (rc != SL_OK) {
		rc = sl_err_wrap(rc, "%s: not signing an invalid policy", o->policy);
		goto out;
	}
	SL_GUARD(sl_secret_read_file(o->seckey, 4096, &keytext));
	if (sl_minisign_seckey_is_encrypted(sl_secret_data(keytext), sl_secret_len(keytext)))
		SL_GUARD(read_password(false, &pw));
	rc = sl_minisign_seckey_parse(sl_secret_data(keytext), sl_secret_len(keytext),
	                              pw ? (const char *)sl_secret_data(pw) : NULL, &sk);
	if (rc != SL_OK) {
		rc = sl_err_wrap(rc, "%s", o->seckey);
		goto out;
	}
	if (o->comment == NULL) {
		const char *base = strrchr(o->policy, '/');
		/* minisign's own default, so both tools' signatures read alike */
		snprintf(comment, sizeof(comment), "timestamp:%lld\tfile:%s%s",
		         (long long)time(NULL), base ? base + 1 : o->policy,
		         o->legacy ? "" : "\thashed");
	}
	SL_GUARD(
	    sl_minisign_sign(sk, data, len, o->comment ? o->comment : comment, o->legacy, &sig));
	SL_GUARD(sl_file_write_atomic(o->sig ? o->sig : sigpath, sig, strlen(sig), 0644, o->force));
	if (sl_cli_json)
		sl_cli_print_json(json_pack("{s:s, s:s, s:s}", "policy", o->policy, "policy_digest",
		                            sl_policy_digest_hex(p), "signature",
		                            o->sig ? o->sig : sigpath));
	else if (!sl_cli_quiet)
		printf("signed %s (sha256 %s) -> %s\n", o->policy, sl_policy_digest_hex(p),
		       o->sig ? o->sig : sigpath);
	rc = SL_OK;
out:
	free(sig);
	free(sigpath);
	free(data);
	sl_policy_free(p);
	sl_minisign_seckey_free(sk);
	sl_secret_free(keytext);
	sl_secret_free(pw);
	return rc == SL_OK ? 0 : sl_cli_fail(CMD " sign", rc);
}

static int do_verify(const struct opts *o)
{
	sl_err rc = SL_E_USAGE;
	sl_policy *p = NULL;
	if (o->policy == NULL || o->pubkey == NULL)
		return sl_cli_usage(CMD, "verify needs --policy and --policy-pubkey");
	SL_GUARD(sl_policy_load_signed(o->policy, o->sig, o->pubkey, &p));
	if (sl_cli_json) {
		json_t *j = json_pack("{s:s, s:s, s:s}", "policy", o->policy, "policy_digest",
		                      sl_policy_digest_hex(p), "trusted_comment",
		                      sl_policy_trusted_comment(p));
		sl_policy_cli_print_json(j);
		json_decref(j);
	} else if (!sl_cli_quiet) {
		printf("Signature and comment signature verified\nTrusted comment: %s\n"
		       "Policy digest: %s\n",
		       sl_policy_trusted_comment(p), sl_policy_digest_hex(p));
	}
	rc = SL_OK;
out:
	sl_policy_free(p);
	return rc == SL_OK ? 0 : sl_cli_fail(CMD " verify", rc);
}

/* Lists every error and warning (the logic is sl_policy_check). */
static void print_findings(const char *file, const json_t *list, const char *kind)
{
	size_t i;
	json_t *e;
	json_array_foreach ((json_t *)list, i, e) {
		fprintf(stderr, "seclaunch policy check: %s: %s: %s: %s\n", kind, file,
		        sl_json_getstr(e, "path"), sl_json_getstr(e, "message"));
	}
}

static int do_check(const struct opts *o)
{
	sl_err rc = SL_E_USAGE;
	sl_policy *p = NULL;
	uint8_t *data = NULL;
	size_t len = 0;
	json_t *rep = NULL;
	if (o->policy == NULL)
		return sl_cli_usage(CMD, "check needs --policy");
	SL_GUARD(sl_file_read(o->policy, SL_POLICY_MAX_BYTES + 1, &data, &len));
	sl_err crc = sl_policy_check(data, len, o->strict, &rep);
	SL_ENSURE(rep != NULL, crc, "%s", sl_err_detail());
	if (crc == SL_OK)
		SL_GUARD(sl_policy_load(data, len, &p));
	if (sl_cli_json) {
		json_object_set_new(rep, "policy", json_string(o->policy));
		if (p != NULL)
			json_object_set_new(rep, "policy_digest",
			                    json_string(sl_policy_digest_hex(p)));
		sl_policy_cli_print_json(rep);
	} else {
		print_findings(o->policy, json_object_get(rep, "errors"), "error");
		print_findings(o->policy, json_object_get(rep, "warnings"), "warning");
		if (p != NULL && !sl_cli_quiet)
			printf("%s: valid policy v1 (sha256 %s), %zu warning(s)\n", o->policy,
			       sl_policy_digest_hex(p),
			       json_array_size(json_object_get(rep, "warnings")));
	}
	if (crc != SL_OK) {
		json_decref(rep);
		free(data);
		return sl_err_exit_code(crc);
	}
	rc = SL_OK;
out:
	json_decref(rep);
	free(data);
	sl_policy_free(p);
	return rc == SL_OK ? 0 : sl_cli_fail(CMD " check", rc);
}

/* Claims: the object `seclaunch verify --json` prints; a "claims" member
 * holding that object is accepted too. */
static SL_RESULT load_claims(const char *path, sl_claims **out)
{
	sl_err rc = SL_E_IO;
	uint8_t *data = NULL;
	size_t len = 0;
	json_error_t je;
	json_t *root = NULL;
	SL_GUARD(sl_file_read(path, CLAIMS_MAX, &data, &len));
	root = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &je);
	SL_ENSURE(root != NULL, SL_E_FORMAT, "%s: not valid JSON at line %d: %s", path, je.line,
	          je.text);
	json_t *obj = json_is_object(json_object_get(root, "claims"))
	                  ? json_object_get(root, "claims")
	                  : root;
	rc = sl_claims_from_json(obj, out);
	if (rc != SL_OK)
		rc = sl_err_wrap(rc, "%s", path);
out:
	json_decref(root);
	free(data);
	return rc;
}

/* Every --claims file as one claim set (attest + verify --json of the
 * evidence, measure --predict --json of the job): a claim two files give
 * with different values is an error naming both files. */
static SL_RESULT load_all_claims(const struct opts *o, sl_claims **out)
{
	sl_err rc = SL_E_INTERNAL;
	sl_claims *all = NULL, *one = NULL;
	SL_GUARD(load_claims(o->claims[0], &all));
	for (size_t f = 1; f < o->n_claims; f++) {
		SL_GUARD(load_claims(o->claims[f], &one));
		for (size_t i = 0; i < sl_claims_count(one); i++) {
			const char *k = sl_claims_key(one, i), *v = sl_claims_value(one, i);
			const char *had = sl_claims_get(all, k);
			SL_ENSURE(
			    had == NULL || strcmp(had, v) == 0, SL_E_INPUT,
			    "--claims %s: claim %s is '%.80s' there and '%.80s' in an earlier "
			    "--claims file (one machine's claims do not disagree)",
			    o->claims[f], k, v, had);
		}
		SL_GUARD(sl_claims_merge(all, one));
		sl_claims_free(one);
		one = NULL;
	}
	*out = all;
	all = NULL;
	rc = SL_OK;
out:
	sl_claims_free(one);
	sl_claims_free(all);
	return rc;
}

/* Verifies --identity with the trust options and adds its claims. */
static int do_explain(const struct opts *o)
{
	sl_err rc = SL_E_USAGE;
	sl_policy *p = NULL;
	sl_claims *c = NULL;
	sl_decision *d = NULL;
	json_t *j = NULL;
	if (o->policy == NULL || o->pubkey == NULL || o->n_claims == 0 || o->dataset == NULL)
		return sl_cli_usage(
		    CMD, "explain needs --policy, --policy-pubkey, --claims and --dataset");
	SL_GUARD(sl_policy_load_signed(o->policy, o->sig, o->pubkey, &p));
	SL_GUARD(load_all_claims(o, &c));
	if (o->identity != NULL)
		SL_GUARD(sl_policy_cli_add_identity(o, c));
	sl_policy_request req = {o->dataset, o->key, o->outputs, o->n_outputs};
	SL_GUARD(sl_policy_evaluate(p, c, &req, &d));
	if (sl_cli_json) {
		SL_GUARD(sl_decision_to_json(d, &j));
		sl_policy_cli_print_json(j);
	} else if (!sl_cli_quiet) {
		printf("decision: %s\ndataset: %s\nkey: %s\npolicy: %s (%s)\nsigned: %s\n",
		       sl_decision_allowed(d) ? "ALLOW" : "DENY", o->dataset, o->key ? o->key : "-",
		       o->policy, sl_policy_digest_hex(p), sl_policy_trusted_comment(p));
		if (sl_decision_key_ttl(d) != 0)
			printf("key_ttl: %llu s (the keys are a lease, renewed with fresh evidence "
			       "while the job runs)\n",
			       (unsigned long long)sl_decision_key_ttl(d));
		else
			printf("key_ttl: none (the keys are released for the whole run)\n");
		if (!sl_decision_allowed(d)) {
			printf("denied because:\n");
			for (size_t i = 0; i < sl_decision_reason_count(d); i++)
				printf("  - %s\n", sl_decision_reason(d, i));
		}
		printf("rules checked and passed:\n");
		for (size_t i = 0; i < sl_decision_matched_count(d); i++)
			printf("  + %s\n", sl_decision_matched(d, i));
	}
	rc = sl_decision_allowed(d) ? SL_OK : SL_E_POLICY_DENIED;
out:
	json_decref(j);
	sl_decision_free(d);
	sl_claims_free(c);
	sl_policy_free(p);
	if (rc == SL_E_POLICY_DENIED)
		return sl_err_exit_code(rc); /* the reasons are printed above */
	return rc == SL_OK ? 0 : sl_cli_fail(CMD " explain", rc);
}

/* ---- options -> checks -> run: one option table, a verb table -------- */

enum {
	O_SECRET = 256,
	O_PUBLIC,
	O_POLICY,
	O_PUBKEY,
	O_SIG,
	O_LEGACY,
	O_CLAIMS,
	O_DATASET,
	O_KEY,
	O_DEST,
	O_IDENTITY,
	O_JWKS,
	O_CSROOT,
	O_AWSTRUST,
	O_BINDING,
	O_AT,
	O_CLOUD,
	O_STRICT
};

/* Each verb's own options, one line each. */
#define OPT_POLICY                                                                                 \
	{                                                                                          \
		"policy", required_argument, O_POLICY, NULL                                        \
	}
#define OPT_PUBKEY                                                                                 \
	{                                                                                          \
		"policy-pubkey", required_argument, O_PUBKEY, NULL                                 \
	}
#define OPT_SIG                                                                                    \
	{                                                                                          \
		"signature", required_argument, O_SIG, NULL                                        \
	}
#define OPT_SECRET                                                                                 \
	{                                                                                          \
		"secret-key", required_argument, O_SECRET, NULL                                    \
	}
#define OPT_BINDING                                                                                \
	{                                                                                          \
		"binding", required_argument, O_BINDING, NULL                                      \
	}
#define OPT_TRUST                                                                                  \
	{"identity", required_argument, O_IDENTITY, NULL},                                         \
	    {"gcp-jwks", required_argument, O_JWKS, NULL},                                         \
	    {"gcp-cs-root", required_argument, O_CSROOT, NULL},                                    \
	    {"aws-trust", required_argument, O_AWSTRUST, NULL},                                    \
	    {"aws-certs", required_argument, O_AWSTRUST, "aws-trust"}, OPT_BINDING,                \
	{                                                                                          \
		"at", required_argument, O_AT, NULL                                                \
	}
#define OPT_END                                                                                    \
	{                                                                                          \
		NULL, 0, 0, NULL                                                                   \
	}

static const struct sl_cli_opt keygen_opts[] = {
    OPT_SECRET, {"public-key", required_argument, O_PUBLIC, NULL}, OPT_END};
static const struct sl_cli_opt sign_opts[] = {OPT_SECRET,
                                              OPT_POLICY,
                                              OPT_SIG,
                                              {"trusted-comment", required_argument, 't', NULL},
                                              {"legacy", no_argument, O_LEGACY, NULL},
                                              OPT_END};
static const struct sl_cli_opt verify_opts[] = {OPT_POLICY, OPT_PUBKEY, OPT_SIG, OPT_END};
static const struct sl_cli_opt check_opts[] = {
    OPT_POLICY, {"strict", no_argument, O_STRICT, NULL}, OPT_END};
static const struct sl_cli_opt explain_opts[] = {OPT_POLICY,
                                                 OPT_PUBKEY,
                                                 OPT_SIG,
                                                 {"claims", required_argument, O_CLAIMS, NULL},
                                                 {"dataset", required_argument, O_DATASET, NULL},
                                                 {"key", required_argument, O_KEY, NULL},
                                                 {"destination", required_argument, O_DEST, NULL},
                                                 OPT_TRUST,
                                                 OPT_END};
static const struct sl_cli_opt idverify_opts[] = {OPT_TRUST, OPT_END};
static const struct sl_cli_opt idcollect_opts[] = {
    {"cloud", required_argument, O_CLOUD, NULL}, OPT_BINDING, OPT_END};

struct policy_ctx {
	struct opts o;
	struct sl_cli_shared sh;
	uint8_t *binding;
};

static int on_option(void *ctx, int key, char *arg)
{
	struct opts *o = &((struct policy_ctx *)ctx)->o;
	switch (key) {
	case O_SECRET:
		o->seckey = arg;
		break;
	case O_PUBLIC:
		o->pubkey_out = arg;
		break;
	case O_POLICY:
		o->policy = arg;
		break;
	case O_PUBKEY:
		o->pubkey = arg;
		break;
	case O_SIG:
		o->sig = arg;
		break;
	case 't':
		o->comment = arg;
		break;
	case O_LEGACY:
		o->legacy = true;
		break;
	case O_CLAIMS:
		if (o->n_claims == MAX_CLAIMS)
			return sl_cli_usage(CMD, "--claims: at most %d files", MAX_CLAIMS);
		o->claims[o->n_claims++] = arg;
		break;
	case O_DATASET:
		o->dataset = arg;
		break;
	case O_KEY:
		o->key = arg;
		break;
	case O_DEST:
		if (o->n_outputs == MAX_OUTPUTS)
			return sl_cli_usage(CMD, "at most %d --destination", MAX_OUTPUTS);
		o->outputs[o->n_outputs++] = arg;
		break;
	case O_IDENTITY:
		o->identity = arg;
		break;
	case O_JWKS:
		o->id.gcp_jwks = arg;
		break;
	case O_CSROOT:
		o->id.gcp_cs_root = arg;
		break;
	case O_AWSTRUST:
		o->id.aws_trust_dir = arg;
		break;
	case O_BINDING:
		o->binding_hex = arg;
		break;
	case O_AT:
		o->at = arg;
		break;
	case O_STRICT:
		o->strict = true;
		break;
	case O_CLOUD:
		o->cloud = arg;
		break;
	case 'W':
		o->no_password = true;
		break;
	default:
		return sl_cli_usage(CMD, "unknown option");
	}
	return 0;
}

/* The checks every verb shares: --binding and --at parse. */
static int check(struct policy_ctx *c, const char *name)
{
	sl_err rc;
	c->o.force = c->sh.force;
	c->o.out = c->sh.out;
	if (c->o.binding_hex != NULL) {
		rc = sl_hex_decode_alloc(c->o.binding_hex, 64, &c->binding, &c->o.id.binding_len,
		                         "--binding");
		if (rc != SL_OK)
			return sl_cli_usage(name, "%s", sl_err_detail());
		c->o.id.binding = c->binding;
	}
	if (c->o.at != NULL) {
		rc = sl_time_parse_rfc3339(c->o.at, &c->o.id.at, "--at");
		if (rc != SL_OK)
			return sl_cli_usage(name, "%s", sl_err_detail());
	}
	return 0;
}

#define SH_RESULT (SL_SH_QUIET | SL_SH_JSON)

/* The verb table: its name (for messages), the shared flags and own options
 * it takes, and what it does. */
static const struct policy_verb {
	struct sl_cli_spec spec;
	int (*run)(const struct opts *o);
} policy_verbs[] = {
    {{"policy keygen", SH_RESULT | SL_SH_FORCE, "W", keygen_opts, usage, on_option, NULL},
     do_keygen},
    {{"policy sign", SH_RESULT | SL_SH_FORCE, "t:", sign_opts, usage, on_option, NULL}, do_sign},
    {{"policy verify", SH_RESULT, NULL, verify_opts, usage, on_option, NULL}, do_verify},
    {{"policy check", SH_RESULT, NULL, check_opts, usage, on_option, NULL}, do_check},
    {{"policy explain", SH_RESULT, NULL, explain_opts, usage, on_option, NULL}, do_explain},
    {{"policy identity-verify", SH_RESULT, NULL, idverify_opts, usage, on_option, NULL},
     sl_policy_cli_identity_verify},
    {{"policy identity-collect", SH_RESULT | SL_SH_OUT | SL_SH_FORCE, NULL, idcollect_opts, usage,
      on_option, NULL},
     sl_policy_cli_identity_collect},
};

static int run_verb(const struct sl_cli_verb *verb, int argc, char **argv)
{
	const struct policy_verb *v = verb->data;
	struct policy_ctx c;
	memset(&c, 0, sizeof(c));
	int ret = sl_cli_parse(&v->spec, &c, &c.sh, argc, argv);
	if (ret >= 0)
		return ret;
	ret = check(&c, v->spec.name);
	if (ret == 0)
		ret = v->run(&c.o);
	free(c.binding);
	return ret;
}

static const struct sl_cli_verb verbs[] = {
    {"keygen", run_verb, &policy_verbs[0]},
    {"sign", run_verb, &policy_verbs[1]},
    {"verify", run_verb, &policy_verbs[2]},
    {"check", run_verb, &policy_verbs[3]},
    {"explain", run_verb, &policy_verbs[4]},
    {"identity-verify", run_verb, &policy_verbs[5]},
    {"identity-collect", run_verb, &policy_verbs[6]},
    {NULL, NULL, NULL},
};

int cmd_policy(int argc, char **argv)
{
	return sl_cli_dispatch(CMD, verbs, usage, argc, argv);
}
