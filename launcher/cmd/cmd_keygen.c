/* seclaunch keygen -o KEYFILE: a new 32-byte data key for --key-file. */
#include <stdio.h>
#include <string.h>

#include "../cli/cli.h"
#include "seclaunch/secret.h"
#include "seclaunch/sld.h"
#include "seclaunch/util.h"

static void usage_keygen(FILE *f)
{
	fprintf(f,
	        "Usage: seclaunch keygen -o KEYFILE [--force] [--json] [-q]\n"
	        "\n"
	        "Writes %d random bytes (a data encryption key for 'encrypt "
	        "--key-file' and\n"
	        "'decrypt --key-file') to KEYFILE with mode 0600. An existing "
	        "KEYFILE is kept\n"
	        "unless --force. Keep the file secret: anyone holding it can "
	        "decrypt.\n"
	        "\n"
	        "  -o, --output KEYFILE  where to write the key (required)\n"
	        "  --force               replace an existing KEYFILE\n"
	        "  --json                print {\"key_file\", \"bytes\"} on stdout\n"
	        "  -q, --quiet           print nothing on success\n"
	        "  -h, --help            this text\n"
	        "\n"
	        "Exit codes (docs/exit-codes.md): 0 ok, 1 usage, 2 KEYFILE exists or "
	        "cannot be\n"
	        "written, 7 system error.\n",
	        SL_SLD_DEK_LEN);
}

static const struct sl_cli_spec spec = {
    .name = "keygen",
    .shared = SL_SH_QUIET | SL_SH_JSON | SL_SH_OUT | SL_SH_FORCE,
    .help = usage_keygen,
};

int cmd_keygen(int argc, char **argv)
{
	struct sl_cli_shared sh;
	sl_secret *key = NULL;
	sl_err rc;
	int ret = sl_cli_parse(&spec, NULL, &sh, argc, argv);
	if (ret >= 0)
		return ret;
	if (sh.out == NULL)
		return sl_cli_usage("keygen", "-o KEYFILE is required");
	if (sl_cli_json && strcmp(sh.out, "-") == 0)
		return sl_cli_usage("keygen", "-o -: a key never goes to stdout");

	rc = sl_secret_random(SL_SLD_DEK_LEN, &key);
	if (rc == SL_OK)
		rc = sl_file_write_atomic(sh.out, sl_secret_data(key), SL_SLD_DEK_LEN, 0600,
		                          sh.force);
	sl_secret_free(key);
	if (rc != SL_OK)
		return sl_cli_fail("keygen", rc);
	if (sl_cli_json)
		sl_cli_print_json(
		    json_pack("{s:s, s:i}", "key_file", sh.out, "bytes", SL_SLD_DEK_LEN));
	else if (!sl_cli_quiet)
		fprintf(stderr, "seclaunch keygen: wrote a %d-byte key to %s (mode 0600)\n",
		        SL_SLD_DEK_LEN, sh.out);
	return 0;
}
