/* seclaunch inspect IN.sld: the header as JSON; needs no key. */
#include <getopt.h>
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
	           "  --json      accepted for symmetry (the output is always JSON)\n"
	           "  -h, --help  this text\n"
	           "\n"
	           "Exit codes: 0 ok, 1 usage, 2 not an SLD file / unsupported version /\n"
	           "unreadable, 6 a damaged header (the message names the field).\n");
}

int cmd_inspect(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	sl_sld_header *h = NULL;
	json_t *j = NULL;
	sl_err rc;
	int c, ret;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			sl_cli_json = true;
			break;
		case 'h':
			usage_inspect(stdout);
			return 0;
		default:
			return sl_cli_usage("inspect", "unknown option");
		}
	}
	if (argc - optind != 1)
		return sl_cli_usage("inspect", "exactly one file IN.sld expected");
	rc = sl_sld_header_read_file(argv[optind], &h);
	if (rc != SL_OK)
		return sl_cli_fail("inspect", rc);
	j = sl_sld_header_json(h);
	if (j == NULL || json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0) {
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
