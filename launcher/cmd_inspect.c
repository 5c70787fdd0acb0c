/* seclaunch inspect IN.sld: the header as JSON; needs no key. */
#include <stdio.h>

#include "cli.h"
#include "seclaunch/sld.h"

static void usage_inspect(FILE *f)
{
	fprintf(f, "Usage: seclaunch inspect IN.sld\n"
	           "\n"
	           "Prints the SLD header as JSON on stdout (docs/format-sld.md section 8): "
	           "format,\n"
	           "version, AEAD, chunk size and count, plaintext length, dataset id, key\n"
	           "reference (KMS URL, key id, wrapped data key) or \"key-file\", salt, "
	           "key\n"
	           "check, header MAC, header SHA-256 and extensions. Needs no key, so "
	           "nothing\n"
	           "in it is authenticated (\"authenticated\": false); 'decrypt' verifies.\n"
	           "\n"
	           "  --json      one compact line instead of indented JSON; a failure is\n"
	           "              then {\"error\": {...}} on stdout\n"
	           "  -q, --quiet accepted for symmetry\n"
	           "  -h, --help  this text\n"
	           "\n"
	           "Exit codes: 0 ok, 1 usage, 2 not an SLD file / unsupported version /\n"
	           "unreadable, 6 a damaged header (the message names the field).\n");
}

static int on_args(void *ctx, int argc, char **argv)
{
	if (argc != 1)
		return sl_cli_usage("inspect", "exactly one file IN.sld expected");
	*(const char **)ctx = argv[0];
	return 0;
}

static const struct sl_cli_spec spec = {
    .name = "inspect",
    .shared = SL_SH_QUIET | SL_SH_JSON,
    .help = usage_inspect,
    .on_args = on_args,
};

int cmd_inspect(int argc, char **argv)
{
	struct sl_cli_shared sh;
	const char *in = NULL;
	sl_sld_header *h = NULL;
	json_t *j = NULL;
	sl_err rc;
	int ret = sl_cli_parse(&spec, &in, &sh, argc, argv);
	if (ret >= 0)
		return ret;
	rc = sl_sld_header_read_file(in, &h);
	if (rc != SL_OK)
		return sl_cli_fail("inspect", rc);
	j = sl_sld_header_json(h);
	if (j == NULL || json_dumpf(j, stdout,
	                            sl_cli_json ? JSON_COMPACT | JSON_PRESERVE_ORDER
	                                        : JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0) {
		ret =
		    sl_cli_fail("inspect", sl_err_set(SL_E_NOMEM, "formatting the header as JSON"));
	} else {
		fputc('\n', stdout);
		ret =
		    fflush(stdout) == 0 ? 0 : sl_cli_fail("inspect", sl_err_set(SL_E_IO, "stdout"));
	}
	json_decref(j);
	sl_sld_header_free(h);
	return ret;
}
