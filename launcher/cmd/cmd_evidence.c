/* seclaunch evidence import: wrap an SEV-SNP report, TDX quote or AWS Nitro
 * Enclaves attestation document collected elsewhere (a cloud API, another tool) into evidence JSON
 * that `seclaunch verify` and seclaunchd accept. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "seclaunch/attest.h"
#include "seclaunch/util.h"

#define MAX_REPORT (256 * 1024) /* a 64 KiB quote as line-wrapped hex */
#define MAX_CERT_FILE (1024 * 1024)
#define MAX_CERT_FILES 8
#define MAX_CCEL (4 * 1024 * 1024)

static void help(FILE *f)
{
	fprintf(
	    f,
	    "Usage: seclaunch evidence import --kind sev-snp|tdx|aws-nitro|azure-cvm --report "
	    "FILE\n"
	    "                                 [--certs FILE]... [--ccel FILE] -o EVIDENCE.json\n\n"
	    "Wraps a raw report collected elsewhere into evidence JSON for `seclaunch\n"
	    "verify` (docs/evidence-sev-snp.md, docs/evidence-tdx.md,\n"
	    "docs/evidence-aws-nitro.md). The report is parsed, not verified.\n\n"
	    "  --kind KIND      sev-snp (an ATTESTATION_REPORT, 1184 bytes), tdx (a DCAP\n"
	    "                   quote v4/v5), aws-nitro (a Nitro Enclaves attestation\n"
	    "                   document, COSE_Sign1), or azure-cvm (the JSON the CoCo\n"
	    "                   attestation agent's az-snp-vtpm / az-tdx-vtpm attesters\n"
	    "                   write: HCL report, VCEK or TD quote, vTPM quote)\n"
	    "  --report FILE    the report, quote or document (\"-\": stdin); for sev-snp,\n"
	    "                   tdx and aws-nitro binary, hex or base64 (whitespace and\n"
	    "                   line breaks allowed), detected and named on stderr\n"
	    "  --certs FILE     sev-snp, azure-cvm; repeatable (at most %d): PEM bundles or DER\n"
	    "                   certificates (VCEK/VLEK, ASK/ASVK, ARK), filed by subject\n"
	    "  --ccel FILE      tdx only: the CCEL event log (ACPI CCEL table data, e.g.\n"
	    "                   /sys/firmware/acpi/tables/data/CCEL); verify replays it\n"
	    "                   to the quote's RTMRs\n"
	    "  -o, --output F   where to write the evidence (\"-\": stdout)\n"
	    "  --force          replace an existing output file\n"
	    "  --json           print {\"kind\", \"output\", \"format\"} on stdout (not with\n"
	    "                   -o -)\n"
	    "  -q, --quiet      print nothing on success\n"
	    "  -h, --help       this text\n\n"
	    "Exit codes (docs/exit-codes.md): 0 ok, 1 usage, 2 unreadable input or output\n"
	    "exists,\n"
	    "3 the report is malformed (the message names the field).\n",
	    MAX_CERT_FILES);
}

enum { O_KIND = 256, O_REPORT, O_CERTS, O_CCEL };

static const struct sl_cli_opt import_opts[] = {
    {"kind", required_argument, O_KIND, NULL},
    {"report", required_argument, O_REPORT, NULL},
    {"certs", required_argument, O_CERTS, NULL},
    {"ccel", required_argument, O_CCEL, NULL},
    {NULL, 0, 0, NULL},
};

struct import_ctx {
	struct sl_cli_shared sh;
	const char *kind, *report, *ccel, *cert_paths[MAX_CERT_FILES];
	size_t ncerts;
};

static int on_option(void *ctx, int key, char *arg)
{
	struct import_ctx *c = ctx;
	switch (key) {
	case O_KIND:
		c->kind = arg;
		break;
	case O_REPORT:
		c->report = arg;
		break;
	case O_CERTS:
		if (c->ncerts == MAX_CERT_FILES)
			return sl_cli_usage("evidence import", "at most %d --certs files",
			                    MAX_CERT_FILES);
		c->cert_paths[c->ncerts++] = arg;
		break;
	case O_CCEL:
		c->ccel = arg;
		break;
	default:
		return sl_cli_usage("evidence import", "unknown option");
	}
	return 0;
}

static const struct sl_cli_spec import_spec = {
    .name = "evidence import",
    .shared = SL_SH_QUIET | SL_SH_JSON | SL_SH_OUT | SL_SH_FORCE,
    .opts = import_opts,
    .help = help,
    .on_option = on_option,
};

static int import_check(const struct import_ctx *c)
{
	if (c->kind == NULL || c->report == NULL || c->sh.out == NULL)
		return sl_cli_usage("evidence import", "--kind, --report and -o are required");
	if (strcmp(c->kind, "sev-snp") != 0 && strcmp(c->kind, "tdx") != 0 &&
	    strcmp(c->kind, "azure-cvm") != 0 && strcmp(c->kind, "aws-nitro") != 0)
		return sl_cli_usage("evidence import",
		                    "--kind %s: want sev-snp, tdx, aws-nitro or azure-cvm",
		                    c->kind);
	if (strcmp(c->kind, "tdx") == 0 && c->ncerts > 0)
		return sl_cli_usage("evidence import",
		                    "--certs: a TDX quote carries its own PCK chain");
	if (strcmp(c->kind, "aws-nitro") == 0 && c->ncerts > 0)
		return sl_cli_usage("evidence import", "--certs: a Nitro attestation document "
		                                       "carries its own chain (cabundle)");
	if (c->ccel != NULL && strcmp(c->kind, "tdx") != 0)
		return sl_cli_usage("evidence import", "--ccel: only with --kind tdx");
	if (sl_cli_json && strcmp(c->sh.out, "-") == 0)
		return sl_cli_usage("evidence import", "--json and -o - both want stdout");
	return 0;
}

/* Reads the report, certificates and event log; builds the evidence. */
static SL_RESULT import_build(const struct import_ctx *c, json_t **ev, const char **format)
{
	sl_err rc = SL_E_IO;
	sl_blob certs[MAX_CERT_FILES];
	uint8_t *rep = NULL, *log = NULL;
	size_t rlen = 0, loglen = 0;

	memset(certs, 0, sizeof(certs));
	SL_GUARD(sl_file_read(c->report, MAX_REPORT, &rep, &rlen));
	for (size_t i = 0; i < c->ncerts; i++) {
		uint8_t *b = NULL;
		SL_GUARD(sl_file_read(c->cert_paths[i], MAX_CERT_FILE, &b, &certs[i].len));
		certs[i].p = b;
		certs[i].name = c->cert_paths[i];
	}
	SL_GUARD(sl_evidence_import(c->kind, rep, rlen, certs, c->ncerts, ev, format));
	if (c->ccel != NULL) {
		SL_GUARD(sl_file_read(c->ccel, MAX_CCEL, &log, &loglen));
		SL_GUARD(sl_evidence_add_ccel(*ev, log, loglen));
	}
	rc = SL_OK;
out:
	for (size_t i = 0; i < c->ncerts; i++)
		free((void *)certs[i].p);
	free(rep);
	free(log);
	return rc;
}

static int import_run(const struct import_ctx *c)
{
	json_t *ev = NULL;
	char *text = NULL;
	const char *format = NULL;
	sl_err rc = sl_cli_check_new(c->sh.out, c->sh.force);

	if (rc == SL_OK)
		rc = import_build(c, &ev, &format);
	if (rc == SL_OK) {
		text = json_dumps(ev, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		if (text == NULL)
			rc = sl_err_set(SL_E_NOMEM, "evidence JSON");
	}
	if (rc == SL_OK) {
		size_t n = strlen(text);
		text[n] = '\n'; /* replaces the NUL; written with its length */
		if (strcmp(c->sh.out, "-") == 0)
			rc = sl_write_all(1, text, n + 1, "stdout");
		else
			rc = sl_file_write_atomic(c->sh.out, text, n + 1, 0644, c->sh.force);
		text[n] = '\0';
	}
	if (rc == SL_OK && sl_cli_json)
		sl_cli_print_json(json_pack("{s:s, s:s, s:s}", "kind", c->kind, "output", c->sh.out,
		                            "format", format != NULL ? format : "json"));
	else if (rc == SL_OK && !sl_cli_quiet)
		fprintf(stderr,
		        "seclaunch evidence import: %s read as %s; %s evidence written to %s\n",
		        c->report, format != NULL ? format : "json", c->kind, c->sh.out);
	free(text);
	json_decref(ev);
	return rc == SL_OK ? 0 : sl_cli_fail("evidence import", rc);
}

static int import(const struct sl_cli_verb *v, int argc, char **argv)
{
	struct import_ctx c;
	(void)v;
	memset(&c, 0, sizeof(c));
	int ret = sl_cli_parse(&import_spec, &c, &c.sh, argc, argv);
	if (ret >= 0)
		return ret;
	ret = import_check(&c);
	return ret != 0 ? ret : import_run(&c);
}

static const struct sl_cli_verb verbs[] = {
    {"import", import, NULL},
    {NULL, NULL, NULL},
};

int cmd_evidence(int argc, char **argv)
{
	return sl_cli_dispatch("evidence", verbs, help, argc, argv);
}
