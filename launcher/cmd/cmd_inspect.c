/* seclaunch inspect IN.sld: the header as JSON; needs no key. */
#include <stdio.h>

#include <string.h>

#include "../cli/cli.h"
#include "../dataset/dataset_tree.h"
#include "seclaunch/sld.h"

static void usage_inspect(FILE *f)
{
	fprintf(f, "Usage: seclaunch inspect IN.sld\n"
	           "       seclaunch inspect [--ca-file F] [--s3-endpoint URL] DATASET\n"
	           "\n"
	           "For a sharded dataset (a folder holding manifest.sldm, or its URL) the\n"
	           "manifest is printed: dataset id, root, key reference, every shard and\n"
	           "every file (docs/format-sld.md part II), equally unauthenticated.\n"
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
	           "  -h, --help  this text\n" SL_REMOTE_HELP "\n"
	           "Exit codes: 0 ok, 1 usage, 2 not an SLD file / unsupported version /\n"
	           "unreadable, 6 a damaged header (the message names the field).\n");
}

struct inspect_opts {
	const char *in;
	sl_remote_opts remote;
};

static int on_args(void *ctx, int argc, char **argv)
{
	if (argc != 1)
		return sl_cli_usage("inspect", "exactly one file IN.sld expected");
	((struct inspect_opts *)ctx)->in = argv[0];
	return 0;
}

static int on_option(void *ctx, int key, char *arg)
{
	int taken = sl_remote_option(&((struct inspect_opts *)ctx)->remote, key, arg);
	if (taken > 0)
		return 0;
	return sl_cli_usage("inspect", "%s", taken < 0 ? sl_err_detail() : "unknown option");
}

static const struct sl_cli_opt inspect_opts_table[] = {SL_REMOTE_OPTS, {NULL, 0, 0, NULL}};

static const struct sl_cli_spec spec = {
    .name = "inspect",
    .shared = SL_SH_QUIET | SL_SH_JSON,
    .opts = inspect_opts_table,
    .help = usage_inspect,
    .on_option = on_option,
    .on_args = on_args,
};

/* The manifest of a sharded dataset, local or remote, as JSON. */
static SL_RESULT manifest_json(struct inspect_opts *o, json_t **out)
{
	sl_remote *remote = NULL;
	sl_sldm *m = NULL;
	json_t *j = NULL;
	sl_err rc = SL_OK;

	if (sl_remote_is_url(o->in))
		rc = sl_remote_open(o->in, &o->remote, &remote);
	if (rc == SL_OK)
		rc = sl_tree_manifest(o->in, remote, &m);
	if (rc == SL_OK) {
		j = sl_sldm_json(m);
		if (j == NULL)
			rc = sl_err_set(SL_E_NOMEM, "formatting the manifest as JSON");
	}
	sl_sldm_free(m);
	sl_remote_free(remote);
	*out = j;
	return rc;
}

int cmd_inspect(int argc, char **argv)
{
	struct sl_cli_shared sh;
	struct inspect_opts o = {0};
	sl_sld_header *h = NULL;
	json_t *j = NULL;
	sl_err rc;
	int ret = sl_cli_parse(&spec, &o, &sh, argc, argv);
	if (ret >= 0)
		return ret;
	if (sl_remote_is_url(o.in) || sl_tree_is_dataset(o.in)) {
		rc = manifest_json(&o, &j);
		if (rc != SL_OK)
			return sl_cli_fail("inspect", rc);
	} else {
		rc = sl_sld_header_read_file(o.in, &h);
		if (rc != SL_OK)
			return sl_cli_fail("inspect", rc);
		j = sl_sld_header_json(h);
	}
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
