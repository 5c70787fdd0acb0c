/* seclaunch verify: check attestation evidence of any kind and print its
 * claims (docs/claims.md). Needs no TPM or TEE. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "seclaunch/attest.h"
#include "seclaunch/tpm2.h"
#include "seclaunch/util.h"

#define EVIDENCE_MAX (16u << 20)

static void help(FILE *f)
{
	fprintf(
	    f, "Usage: seclaunch verify EVIDENCE.json BINDING [TRUST] [OPTIONS]\n"
	       "       seclaunch verify --from-tpm2-tools MSG SIG PCRS --ak-public AK.pub BINDING\n"
	       "                        [TRUST]\n\n"
	       "Verifies attestation evidence (an object, or an array of objects, as\n"
	       "`seclaunch attest` writes it) and prints the claims. Exit 3 names the\n"
	       "check that failed.\n\n"
	       "BINDING, exactly one of:\n"
	       "  --nonce HEX                the evidence must be bound to HEX: a TPM quote's\n"
	       "                             qualifyingData equals it, SEV-SNP/TDX REPORT_DATA\n"
	       "                             is it zero-padded to 64 bytes, an NVIDIA GPU\n"
	       "                             report's SPDM nonce is it zero-padded to 32 bytes,\n"
	       "                             an AWS Nitro document's nonce equals it (1..512\n"
	       "                             bytes; the others take at most 64)\n"
	       "  --expect-report-data HEX   the same (the name SEV-SNP/TDX users know)\n"
	       "  --no-binding               check signatures and chains only (claims say\n"
	       "                             binding=unchecked)\n"
	       "TRUST in the TPM AK (one is required for tpm2 evidence):\n"
	       "  --ak-pin PEM               exactly this AK public key\n"
	       "  --trust DIR                an AK certificate in the evidence chaining to a CA\n"
	       "                             certificate (PEM or DER) in DIR; with --ak-pin, DIR\n"
	       "                             only checks the EK certificate (claim tpm.ek.cert)\n"
	       "OPTIONS:\n"
	       "  --collateral DIR           SEV-SNP/TDX vendor certificates, TCB info, CRLs\n"
	       "  --at RFC3339               verify certificates at this time (default now)\n"
	       "  --from-tpm2-tools          the three arguments are tpm2_quote's -m, -s and -o\n"
	       "                             (serialized PCR format) files\n"
	       "  --ak-public FILE           with --from-tpm2-tools: the AK's public key as\n"
	       "                             TPM2B_PUBLIC (tpm2_createak -u, tpm2_readpublic\n"
	       "                             -o), TPMT_PUBLIC, or PEM / DER SubjectPublicKeyInfo\n"
	       "                             (tpm2_readpublic -f pem|der); the form read is\n"
	       "                             the claim tpm.ak.file_format. A bare key carries\n"
	       "                             no TPM attributes: trust it with --ak-pin\n"
	       "  --json                     print the claims as one JSON object (a failure:\n"
	       "                             {\"error\": {...}})\n"
	       "  -q, --quiet                print nothing on success\n"
	       "  -h, --help                 this text\n\n"
	       "Exit codes (docs/exit-codes.md): 0 verified, 1 usage, 2 unreadable input,\n"
	       "3 attestation failed.\n");
}

typedef struct args {
	const char *nonce, *report_data, *at, *ak_public;
	bool tools;
	long repeat;
	int nbind;
	char **files;
	int nfiles;
	sl_verify_opts o;
	uint8_t *expect;
	const char *ak_format; /* --ak-public: the form read */
	struct sl_cli_shared sh;
} args;

static SL_RESULT load(args *a, json_t **ev)
{
	char **argv = a->files;
	uint8_t *text = NULL;
	size_t len = 0;
	json_error_t jerr;
	sl_err rc;

	if (a->tools)
		return sl_tpm2_tools_import(argv[0], argv[1], argv[2], a->ak_public, ev,
		                            &a->ak_format);
	rc = sl_file_read(argv[0], EVIDENCE_MAX, &text, &len);
	if (rc != SL_OK)
		return rc;
	*ev = json_loadb((const char *)text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (*ev == NULL)
		return sl_err_set(SL_E_FORMAT, "%s: line %d: %s", argv[0], jerr.line, jerr.text);
	return SL_OK;
}

static SL_RESULT verify_all(const json_t *ev, const sl_verify_opts *o, sl_claims **out)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_claims *c = NULL;
	size_t i;
	const json_t *one;

	*out = NULL;
	SL_GUARD(sl_claims_new(&c));
	if (json_is_array(ev)) {
		SL_ENSURE(json_array_size(ev) > 0, SL_E_ATTEST_FORMAT, "evidence: empty array");
		json_array_foreach (ev, i, one) {
			rc = sl_evidence_verify(one, o, c);
			if (rc != SL_OK) {
				rc = sl_err_wrap(rc, "evidence[%zu]", i);
				goto out;
			}
		}
	} else {
		SL_GUARD(sl_evidence_verify(ev, o, c));
	}
	*out = c;
	c = NULL;
	rc = SL_OK;
out:
	sl_claims_free(c);
	return rc;
}

static SL_RESULT print_claims(const sl_claims *c)
{
	json_t *j = NULL;
	char *s;
	sl_err rc;

	if (sl_cli_quiet)
		return SL_OK;
	if (!sl_cli_json) {
		for (size_t i = 0; i < sl_claims_count(c); i++)
			printf("%s=%s\n", sl_claims_key(c, i), sl_claims_value(c, i));
		return SL_OK;
	}
	rc = sl_claims_to_json(c, &j);
	if (rc != SL_OK)
		return rc;
	s = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(j);
	if (s == NULL)
		return sl_err_set(SL_E_NOMEM, "claims JSON");
	printf("%s\n", s);
	free(s);
	return SL_OK;
}

enum { O_NONCE = 256, O_RD, O_NOBIND, O_PIN, O_TRUST, O_COLL, O_AT, O_TOOLS, O_AKPUB, O_REPEAT };

static const struct sl_cli_opt verify_opts[] = {
    {"nonce", required_argument, O_NONCE, NULL},
    {"expect-report-data", required_argument, O_RD, NULL},
    {"no-binding", no_argument, O_NOBIND, NULL},
    {"ak-pin", required_argument, O_PIN, NULL},
    {"trust", required_argument, O_TRUST, NULL},
    {"collateral", required_argument, O_COLL, NULL},
    {"at", required_argument, O_AT, NULL},
    {"from-tpm2-tools", no_argument, O_TOOLS, NULL},
    {"ak-public", required_argument, O_AKPUB, NULL},
    {"repeat", required_argument, O_REPEAT, NULL}, /* benchmarks only; not in --help */
    {NULL, 0, 0, NULL},
};

static int on_option(void *ctx, int key, char *arg)
{
	args *a = ctx;
	switch (key) {
	case O_NONCE:
		a->nonce = arg;
		a->nbind++;
		break;
	case O_RD:
		a->report_data = arg;
		a->nbind++;
		break;
	case O_NOBIND:
		a->o.no_binding = true;
		a->nbind++;
		break;
	case O_PIN:
		a->o.ak_pin_pem = arg;
		break;
	case O_TRUST:
		a->o.trust_dir = arg;
		break;
	case O_COLL:
		a->o.collateral_dir = arg;
		break;
	case O_AT:
		a->at = arg;
		break;
	case O_TOOLS:
		a->tools = true;
		break;
	case O_AKPUB:
		a->ak_public = arg;
		break;
	case O_REPEAT:
		a->repeat = strtol(arg, NULL, 10);
		if (a->repeat < 1 || a->repeat > 10000000)
			return sl_cli_usage("verify", "--repeat: 1..10000000");
		break;
	default:
		return sl_cli_usage("verify", "unknown option");
	}
	return 0;
}

static int on_args(void *ctx, int argc, char **argv)
{
	args *a = ctx;
	a->files = argv;
	a->nfiles = argc;
	return 0;
}

static const struct sl_cli_spec spec = {
    .name = "verify",
    .shared = SL_SH_QUIET | SL_SH_JSON,
    .opts = verify_opts,
    .help = help,
    .on_option = on_option,
    .on_args = on_args,
};

/* The options agree, and the binding and time parse. */
static int check(void *ctx)
{
	args *a = ctx;
	size_t expect_len = 0;
	sl_err rc;
	if (a->nfiles != (a->tools ? 3 : 1))
		return sl_cli_usage("verify", a->tools ? "--from-tpm2-tools takes MSG SIG PCRS"
		                                       : "one EVIDENCE.json is required");
	if (a->nbind != 1)
		return sl_cli_usage(
		    "verify", "give exactly one of --nonce, --expect-report-data, --no-binding");
	if (a->tools && a->ak_public == NULL)
		return sl_cli_usage("verify",
		                    "--from-tpm2-tools needs --ak-public AK (TPM2B_PUBLIC, "
		                    "TPMT_PUBLIC, PEM or DER public key)");
	if (a->nonce != NULL || a->report_data != NULL) {
		const char *name = a->nonce != NULL ? "--nonce" : "--expect-report-data";
		/* up to 512: a Nitro nonce may be that long; each kind bounds its own */
		rc = sl_hex_decode_alloc(a->nonce != NULL ? a->nonce : a->report_data, 512,
		                         &a->expect, &expect_len, name);
		if (rc != SL_OK || expect_len == 0)
			return sl_cli_usage("verify", "%s: want 1..512 bytes of hex", name);
		a->o.expect = a->expect;
		a->o.expect_len = expect_len;
	}
	if (a->at != NULL && sl_time_parse_rfc3339(a->at, &a->o.at, "--at") != SL_OK)
		return sl_cli_usage("verify", "--at: want RFC 3339, e.g. 2024-01-01T00:00:00Z");
	return 0;
}

static int run(void *ctx)
{
	args *a = ctx;
	json_t *ev = NULL;
	sl_claims *claims = NULL;
	sl_err rc;

	rc = load(a, &ev);
	for (long i = 0; rc == SL_OK && i < a->repeat; i++) {
		sl_claims_free(claims);
		claims = NULL;
		rc = verify_all(ev, &a->o, &claims);
	}
	if (rc == SL_OK && a->ak_format != NULL)
		rc = sl_claims_set(claims, "tpm.ak.file_format", a->ak_format);
	if (rc == SL_OK)
		rc = print_claims(claims);
	sl_claims_free(claims);
	json_decref(ev);
	return rc == SL_OK ? 0 : sl_cli_fail("verify", rc);
}

int cmd_verify(int argc, char **argv)
{
	args a = {.repeat = 1};
	int ret = sl_cli_run(&spec, &a, &a.sh, argc, argv, check, run);
	free(a.expect);
	return ret;
}
