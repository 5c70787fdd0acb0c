/* seclaunch attest: collect attestation evidence (TPM quote, SEV-SNP or TDX
 * report) into a JSON file that `seclaunch verify` and seclaunchd check. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "seclaunch/attest.h"
#include "seclaunch/tpm2.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"

static void help(void)
{
	printf(
	    "Usage: seclaunch attest [OPTIONS] -o EVIDENCE.json\n\n"
	    "Collects attestation evidence bound to a nonce and writes it as JSON\n"
	    "(docs/evidence.md).\n\n"
	    "  --tee KIND          auto (default), tpm2, sev-snp, tdx or nvidia-gpu; auto picks\n"
	    "                      the first available of sev-snp, tdx, tpm2 (GPU evidence\n"
	    "                      accompanies CPU evidence: ask for it by name)\n"
	    "  --tcti T            TPM TCTI (default $SECLAUNCH_TCTI, else device:/dev/tpmrm0)\n"
	    "  --nonce HEX         1..64 bytes bound into the evidence (TPM qualifyingData,\n"
	    "                      SNP/TDX REPORT_DATA); without it the evidence is unbound\n"
	    "  --pcrs SEL          PCR selection, e.g. sha256:0,1,7+sha1:0\n"
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
	    "  -q                  quiet\n"
	    "  -h, --help          this text\n\n"
	    "Exit codes: 0 ok, 1 usage, 2 input, 3 attestation, 7 TPM/device error.\n");
}

int cmd_attest(int argc, char **argv)
{
	enum { O_TEE = 256, O_TCTI, O_NONCE, O_PCRS, O_AKALG, O_EVLOG, O_EXPAK, O_EXPTOOLS };
	static const struct option opts[] = {
	    {"tee", required_argument, NULL, O_TEE},
	    {"tcti", required_argument, NULL, O_TCTI},
	    {"nonce", required_argument, NULL, O_NONCE},
	    {"pcrs", required_argument, NULL, O_PCRS},
	    {"ak-alg", required_argument, NULL, O_AKALG},
	    {"eventlog", required_argument, NULL, O_EVLOG},
	    {"export-ak", required_argument, NULL, O_EXPAK},
	    {"export-tpm2-tools", required_argument, NULL, O_EXPTOOLS},
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *tee = "auto", *output = NULL, *nonce_hex = NULL, *tools = NULL;
	sl_collect_opts co = {0};
	sl_tpm2_alg alg;
	uint8_t *nonce = NULL;
	size_t nonce_len = 0;
	json_t *ev = NULL;
	char *text = NULL;
	sl_err rc = SL_OK;
	int c, ret = 1;

	/* The TSS logs every failure it sees on stderr; our own message names
	 * the failure (with the TPM's code), so its log stays off unless asked. */
	setenv("TSS2_LOG", "all+NONE", 0);
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:qh", opts, NULL)) != -1) {
		switch (c) {
		case O_TEE:
			tee = optarg;
			break;
		case O_TCTI:
			co.tcti = optarg;
			break;
		case O_NONCE:
			nonce_hex = optarg;
			break;
		case O_PCRS:
			co.pcrs = optarg;
			break;
		case O_AKALG:
			if (sl_tpm2_alg_parse(optarg, &alg) != SL_OK)
				return sl_cli_usage("attest", "--ak-alg: want rsa or ecc");
			/* the tpm2 collector reads its key type from here */
			setenv("SECLAUNCH_AK_ALG", optarg, 1);
			break;
		case O_EVLOG:
			setenv("SECLAUNCH_EVENTLOG", optarg, 1);
			break;
		case O_EXPAK:
			co.export_ak_pem = optarg;
			break;
		case O_EXPTOOLS:
			tools = optarg;
			break;
		case 'o':
			output = optarg;
			break;
		case 'q':
			sl_cli_quiet = true;
			break;
		case 'h':
			help();
			return 0;
		default:
			return sl_cli_usage("attest", "unknown option");
		}
	}
	if (optind != argc)
		return sl_cli_usage("attest", "unexpected argument '%s'", argv[optind]);
	if (output == NULL)
		return sl_cli_usage("attest", "-o EVIDENCE.json is required");
	if (nonce_hex != NULL) {
		rc = sl_hex_decode_alloc(nonce_hex, 64, &nonce, &nonce_len, "--nonce");
		if (rc != SL_OK || nonce_len == 0) {
			free(nonce);
			return sl_cli_usage("attest", "--nonce: want 1..64 bytes of hex");
		}
		co.nonce = nonce;
		co.nonce_len = nonce_len;
	} else if (!sl_cli_quiet) {
		fprintf(stderr,
		        "seclaunch attest: warning: no --nonce; the evidence is not bound to "
		        "a request and can be replayed\n");
	}
	rc = sl_evidence_collect(tee, &co, &ev);
	if (rc != SL_OK)
		goto out;
	if (tools != NULL) {
		const char *kind = sl_json_getstr(ev, "kind");
		if (kind == NULL || strcmp(kind, "tpm2") != 0) {
			rc = sl_err_set(SL_E_USAGE,
			                "--export-tpm2-tools: the evidence is not a TPM quote");
			goto out;
		}
		rc = sl_tpm2_tools_export(ev, tools);
		if (rc != SL_OK)
			goto out;
	}
	text = json_dumps(ev, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (text == NULL) {
		rc = sl_err_set(SL_E_NOMEM, "evidence JSON");
		goto out;
	}
	if (strcmp(output, "-") == 0) {
		printf("%s\n", text);
	} else {
		size_t n = strlen(text);
		text[n] = '\n';
		rc = sl_file_write_atomic(output, text, n + 1, 0644, true);
		text[n] = '\0';
		if (rc != SL_OK)
			goto out;
		if (!sl_cli_quiet)
			fprintf(stderr, "seclaunch attest: %s evidence written to %s\n",
			        sl_json_getstr(ev, "kind"), output);
	}
	ret = 0;
out:
	free(text);
	free(nonce);
	json_decref(ev);
	if (rc != SL_OK)
		ret = sl_cli_fail("attest", rc);
	return ret;
}
