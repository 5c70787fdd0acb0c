/* seclaunch evidence import: wrap an SEV-SNP report or TDX quote collected
 * elsewhere (a cloud API, another tool) into evidence JSON that `seclaunch
 * verify` and seclaunchd accept. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "seclaunch/attest.h"
#include "seclaunch/util.h"

#define MAX_REPORT (64 * 1024)
#define MAX_CERT_FILE (1024 * 1024)
#define MAX_CERT_FILES 8
#define MAX_CCEL (4 * 1024 * 1024)

static void help(void)
{
	printf(
	    "Usage: seclaunch evidence import --kind sev-snp|tdx|azure-cvm --report FILE\n"
	    "                                 [--certs FILE]... [--ccel FILE] -o EVIDENCE.json\n\n"
	    "Wraps a raw report collected elsewhere into evidence JSON for `seclaunch\n"
	    "verify` (docs/evidence-sev-snp.md, docs/evidence-tdx.md). The report is\n"
	    "parsed, not verified.\n\n"
	    "  --kind KIND      sev-snp (an ATTESTATION_REPORT, 1184 bytes, or its hex)\n"
	    "                   or tdx (a DCAP quote v4/v5), or azure-cvm (the JSON the\n"
	    "                   CoCo attestation agent's az-snp-vtpm / az-tdx-vtpm\n"
	    "                   attesters write: HCL report, VCEK or TD quote, vTPM quote)\n"
	    "  --report FILE    the raw report or quote (\"-\": stdin)\n"
	    "  --certs FILE     sev-snp, azure-cvm; repeatable (at most %d): PEM bundles or DER\n"
	    "                   certificates (VCEK/VLEK, ASK/ASVK, ARK), filed by subject\n"
	    "  --ccel FILE      tdx only: the CCEL event log (ACPI CCEL table data, e.g.\n"
	    "                   /sys/firmware/acpi/tables/data/CCEL); verify replays it\n"
	    "                   to the quote's RTMRs\n"
	    "  -o, --output F   where to write the evidence (\"-\": stdout)\n"
	    "  --force          replace an existing output file\n"
	    "  -h, --help       this text\n\n"
	    "Exit codes: 0 ok, 1 usage, 2 unreadable input or output exists,\n"
	    "3 the report is malformed (the message names the field).\n",
	    MAX_CERT_FILES);
}

static int import(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"kind", required_argument, NULL, 'k'},  {"report", required_argument, NULL, 'r'},
	    {"certs", required_argument, NULL, 'c'}, {"output", required_argument, NULL, 'o'},
	    {"force", no_argument, NULL, 'f'},       {"ccel", required_argument, NULL, 'e'},
	    {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
	};
	const char *kind = NULL, *report = NULL, *outp = NULL, *cert_paths[MAX_CERT_FILES];
	size_t ncerts = 0, rlen = 0;
	bool force = false;
	const char *ccel = NULL;
	uint8_t *rep = NULL;
	sl_blob certs[MAX_CERT_FILES];
	json_t *ev = NULL;
	char *text = NULL;
	sl_err rc = SL_OK;
	int c, ret = 0;

	memset(certs, 0, sizeof(certs));
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'k':
			kind = optarg;
			break;
		case 'r':
			report = optarg;
			break;
		case 'c':
			if (ncerts == MAX_CERT_FILES)
				return sl_cli_usage("evidence import", "at most %d --certs files",
				                    MAX_CERT_FILES);
			cert_paths[ncerts++] = optarg;
			break;
		case 'o':
			outp = optarg;
			break;
		case 'f':
			force = true;
			break;
		case 'e':
			ccel = optarg;
			break;
		case 'h':
			help();
			return 0;
		default:
			return sl_cli_usage("evidence import", "unknown option");
		}
	}
	if (kind == NULL || report == NULL || outp == NULL)
		return sl_cli_usage("evidence import", "--kind, --report and -o are required");
	if (strcmp(kind, "sev-snp") != 0 && strcmp(kind, "tdx") != 0 &&
	    strcmp(kind, "azure-cvm") != 0)
		return sl_cli_usage("evidence import", "--kind %s: want sev-snp, tdx or azure-cvm",
		                    kind);
	if (optind != argc)
		return sl_cli_usage("evidence import", "unexpected argument '%s'", argv[optind]);
	if (strcmp(kind, "tdx") == 0 && ncerts > 0)
		return sl_cli_usage("evidence import",
		                    "--certs: a TDX quote carries its own PCK chain");
	if (ccel != NULL && strcmp(kind, "tdx") != 0)
		return sl_cli_usage("evidence import", "--ccel: only with --kind tdx");
	rc = sl_file_read(report, MAX_REPORT, &rep, &rlen);
	for (size_t i = 0; rc == SL_OK && i < ncerts; i++) {
		uint8_t *b = NULL;
		rc = sl_file_read(cert_paths[i], MAX_CERT_FILE, &b, &certs[i].len);
		certs[i].p = b;
		certs[i].name = cert_paths[i];
	}
	if (rc == SL_OK)
		rc = sl_evidence_import(kind, rep, rlen, certs, ncerts, &ev);
	if (rc == SL_OK && ccel != NULL) {
		uint8_t *log = NULL;
		size_t loglen = 0;
		rc = sl_file_read(ccel, MAX_CCEL, &log, &loglen);
		if (rc == SL_OK)
			rc = sl_evidence_add_ccel(ev, log, loglen);
		free(log);
	}
	if (rc == SL_OK) {
		text = json_dumps(ev, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		if (text == NULL)
			rc = sl_err_set(SL_E_NOMEM, "evidence JSON");
	}
	if (rc == SL_OK) {
		size_t n = strlen(text);
		text[n] = '\n'; /* replaces the NUL; written with its length */
		if (strcmp(outp, "-") == 0)
			rc = sl_write_all(1, text, n + 1, "stdout");
		else
			rc = sl_file_write_atomic(outp, text, n + 1, 0644, force);
		text[n] = '\0';
	}
	if (rc != SL_OK)
		ret = sl_cli_fail("evidence import", rc);
	for (size_t i = 0; i < ncerts; i++)
		free((void *)certs[i].p);
	free(rep);
	free(text);
	json_decref(ev);
	return ret;
}

int cmd_evidence(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		help();
		return argc < 2 ? 1 : 0;
	}
	if (strcmp(argv[1], "import") == 0)
		return import(argc - 1, argv + 1);
	return sl_cli_usage("evidence", "unknown subcommand '%s' (want import)", argv[1]);
}
