/* seclaunch attest: collect attestation evidence (TPM quote, SEV-SNP or TDX
 * report) into a JSON file that `seclaunch verify` and seclaunchd check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "seclaunch/attest.h"
#include "seclaunch/tpm2.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"

static void help(FILE *f)
{
	fprintf(
	    f,
	    "Usage: seclaunch attest [OPTIONS] -o EVIDENCE.json\n\n"
	    "Collects attestation evidence bound to a nonce and writes it as JSON\n"
	    "(docs/evidence.md).\n\n"
	    "  --tee KIND          auto (default), tpm2, sev-snp, tdx or nvidia-gpu; auto picks\n"
	    "                      the first available of sev-snp, tdx, tpm2 (GPU evidence\n"
	    "                      accompanies CPU evidence: ask for it by name); aws-nitro\n"
	    "                      is not collected here (exit 7): import an NSM document\n"
	    "                      with `seclaunch evidence import --kind aws-nitro`\n"
	    "  --tcti T            TPM TCTI (default $SECLAUNCH_TCTI, else device:/dev/tpmrm0)\n"
	    "  --nonce HEX         1..64 bytes bound into the evidence (TPM qualifyingData,\n"
	    "                      SNP/TDX REPORT_DATA); without it the evidence is unbound\n"
	    "  --pcrs SEL          PCR selection, e.g. sha256:0,1,7+sha1:0\n"
	    "  --workload-log F    carry the workload event log F (as `run` writes it;\n"
	    "                      include its PCR in --pcrs, e.g. sha256:0,1,7,15)\n"
	    "                      (default sha256:0,1,2,3,4,5,6,7)\n"
	    "  --ak-alg rsa|ecc    TPM: the AK's key type when it has to be created (RSA-2048\n"
	    "                      RSASSA-SHA256 or ECC P-256 ECDSA-SHA256; default rsa). The AK\n"
	    "                      lives at persistent handle 0x81010002 (rsa) / 0x81010003 "
	    "(ecc),\n"
	    "                      or $SECLAUNCH_AK_HANDLE\n"
	    "  --eventlog PATH     TPM: measured-boot event log to include (default\n"
	    "                      /sys/kernel/security/tpm0/binary_bios_measurements when\n"
	    "                      readable, or $SECLAUNCH_EVENTLOG)\n"
	    "  --export-ak PEM     TPM: also write the AK public key (PEM), for --ak-pin\n"
	    "  --export-tpm2-tools PREFIX\n"
	    "                      TPM: also write PREFIX.msg, .sig, .pcrs, .ak.pem, .ak.pub for\n"
	    "                      tpm2_checkquote -m PREFIX.msg -s PREFIX.sig -f PREFIX.pcrs\n"
	    "                      -u PREFIX.ak.pem -q NONCE\n"
	    "  -o, --output FILE   where to write the evidence (required; '-' for stdout)\n"
	    "  --force             replace an existing FILE (and --export-ak / "
	    "--export-tpm2-tools\n"
	    "                      files); without it an existing one is kept\n"
	    "  --json              print {\"kind\", \"output\"} on stdout (not with -o -)\n"
	    "  -q, --quiet         no warnings or summary\n"
	    "  -h, --help          this text\n\n"
	    "Exit codes (docs/exit-codes.md): 0 ok, 1 usage, 2 input (an output file\n"
	    "exists), 3 attestation, 7 TPM/device error.\n");
}

enum { O_TEE = 256, O_NONCE, O_PCRS, O_AKALG, O_EVLOG, O_EXPAK, O_EXPTOOLS, O_WLLOG };

static const struct sl_cli_opt attest_opts[] = {
    {"tee", required_argument, O_TEE, NULL, SL_CLI_TEE_VALUES},
    {"nonce", required_argument, O_NONCE, NULL},
    {"pcrs", required_argument, O_PCRS, NULL},
    {"ak-alg", required_argument, O_AKALG, NULL},
    {"eventlog", required_argument, O_EVLOG, NULL},
    {"export-ak", required_argument, O_EXPAK, NULL},
    {"export-tpm2-tools", required_argument, O_EXPTOOLS, NULL},
    {"workload-log", required_argument, O_WLLOG, NULL},
    {NULL, 0, 0, NULL},
};

struct attest_ctx {
	struct sl_cli_shared sh;
	const char *tee, *nonce_hex, *tools, *ak_alg, *eventlog, *wllog;
	sl_collect_opts co;
	uint8_t *nonce;
};

static int on_option(void *ctx, int key, char *arg)
{
	struct attest_ctx *a = ctx;
	switch (key) {
	case O_TEE:
		a->tee = arg;
		break;
	case O_NONCE:
		a->nonce_hex = arg;
		break;
	case O_PCRS:
		a->co.pcrs = arg;
		break;
	case O_AKALG:
		a->ak_alg = arg;
		break;
	case O_EVLOG:
		a->eventlog = arg;
		break;
	case O_EXPAK:
		a->co.export_ak_pem = arg;
		break;
	case O_EXPTOOLS:
		a->tools = arg;
		break;
	case O_WLLOG:
		a->wllog = arg;
		break;
	default:
		return sl_cli_usage("attest", "unknown option");
	}
	return 0;
}

static const struct sl_cli_spec spec = {
    .name = "attest",
    .shared = SL_SH_QUIET | SL_SH_JSON | SL_SH_TCTI | SL_SH_OUT | SL_SH_FORCE,
    .opts = attest_opts,
    .help = help,
    .on_option = on_option,
};

/* The files --export-tpm2-tools PREFIX writes. */
static const char *const tools_ext[] = {".msg", ".sig", ".pcrs", ".ak.pem", ".ak.pub"};

/* Everything that can be refused before the TPM is touched. */
static int check(void *ctx)
{
	struct attest_ctx *a = ctx;
	sl_tpm2_alg alg;
	size_t nonce_len = 0;
	sl_err rc;
	int ret = sl_cli_need_out("attest", &a->sh, "-o EVIDENCE.json is required");

	if (ret != 0)
		return ret;
	if (a->ak_alg != NULL && sl_tpm2_alg_parse(a->ak_alg, &alg) != SL_OK)
		return sl_cli_usage("attest", "--ak-alg: want rsa or ecc");
	if (a->nonce_hex != NULL) {
		rc = sl_hex_decode_alloc(a->nonce_hex, 64, &a->nonce, &nonce_len, "--nonce");
		if (rc != SL_OK || nonce_len == 0)
			return sl_cli_usage("attest", "--nonce: want 1..64 bytes of hex");
		a->co.nonce = a->nonce;
		a->co.nonce_len = nonce_len;
	}
	rc = sl_cli_check_new(a->sh.out, a->sh.force);
	if (rc == SL_OK)
		rc = sl_cli_check_new(a->co.export_ak_pem, a->sh.force);
	for (size_t i = 0; rc == SL_OK && a->tools != NULL && i < 5; i++) {
		char p[4096];
		snprintf(p, sizeof(p), "%s%s", a->tools, tools_ext[i]);
		rc = sl_cli_check_new(p, a->sh.force);
	}
	return rc == SL_OK ? 0 : sl_cli_fail("attest", rc);
}

static SL_RESULT write_evidence(const struct attest_ctx *a, const json_t *ev)
{
	sl_err rc = SL_E_NOMEM;
	char *text = json_dumps(ev, JSON_INDENT(2) | JSON_SORT_KEYS);
	const char *kind = sl_json_getstr(ev, "kind");
	SL_ENSURE(text != NULL, SL_E_NOMEM, "evidence JSON");
	if (strcmp(a->sh.out, "-") == 0) {
		printf("%s\n", text);
	} else {
		size_t n = strlen(text);
		text[n] = '\n';
		rc = sl_file_write_atomic(a->sh.out, text, n + 1, 0644, a->sh.force);
		text[n] = '\0';
		SL_GUARD(rc);
		if (sl_cli_json)
			sl_cli_print_json(
			    json_pack("{s:s, s:s}", "kind", kind ? kind : "", "output", a->sh.out));
		else if (!sl_cli_quiet)
			fprintf(stderr, "seclaunch attest: %s evidence written to %s\n", kind,
			        a->sh.out);
	}
	rc = SL_OK;
out:
	free(text);
	return rc;
}

static int run(void *ctx)
{
	struct attest_ctx *a = ctx;
	json_t *ev = NULL;
	sl_err rc;

	/* the tpm2 collector reads its key type and event log from here */
	if (a->ak_alg != NULL)
		setenv("SECLAUNCH_AK_ALG", a->ak_alg, 1);
	if (a->eventlog != NULL)
		setenv("SECLAUNCH_EVENTLOG", a->eventlog, 1);
	a->co.tcti = a->sh.tcti;
	if (a->nonce == NULL && !sl_cli_quiet && !sl_cli_json)
		fprintf(stderr,
		        "seclaunch attest: warning: no --nonce; the evidence is not bound to "
		        "a request and can be replayed\n");
	rc = sl_evidence_collect(a->tee, &a->co, &ev);
	if (rc == SL_OK && a->wllog != NULL) {
		/* the workload register's log, carried as `run` carries it (its
		 * register must be in --pcrs for a verifier to replay it) */
		json_error_t je;
		json_t *l = json_load_file(a->wllog, JSON_REJECT_DUPLICATES, &je);
		rc = json_is_object(l) && json_object_set_new(ev, "workload_log", l) == 0
		         ? SL_OK
		         : sl_err_set(SL_E_INPUT, "--workload-log %s: %s", a->wllog,
		                      l == NULL ? je.text : "not a JSON object");
	}
	if (rc == SL_OK && a->tools != NULL) {
		const char *kind = sl_json_getstr(ev, "kind");
		if (kind == NULL || strcmp(kind, "tpm2") != 0)
			rc = sl_err_set(SL_E_USAGE,
			                "--export-tpm2-tools: the evidence is not a TPM quote");
		else
			rc = sl_tpm2_tools_export(ev, a->tools);
	}
	if (rc == SL_OK)
		rc = write_evidence(a, ev);
	json_decref(ev);
	return rc == SL_OK ? 0 : sl_cli_fail("attest", rc);
}

int cmd_attest(int argc, char **argv)
{
	struct attest_ctx a = {.tee = "auto"};
	int ret = sl_cli_run(&spec, &a, &a.sh, argc, argv, check, run);
	free(a.nonce);
	return ret;
}
