/* seclaunch keygen -o KEYFILE: a new 32-byte data key for --key-file. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "seclaunch/secret.h"
#include "seclaunch/sld.h"
#include "seclaunch/util.h"

static void usage_keygen(FILE *f)
{
	fprintf(f,
	        "Usage: seclaunch keygen -o KEYFILE\n"
	        "\n"
	        "Writes %d random bytes (a data encryption key for 'encrypt "
	        "--key-file' and\n"
	        "'decrypt --key-file') to KEYFILE with mode 0600. An existing "
	        "KEYFILE is\n"
	        "never overwritten. Keep the file secret: anyone holding it can "
	        "decrypt.\n"
	        "\n"
	        "  -o, --output KEYFILE  where to write the key (required)\n"
	        "  -q, --quiet           print nothing on success\n"
	        "  -h, --help            this text\n",
	        SL_SLD_DEK_LEN);
}

int cmd_keygen(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *out = NULL;
	sl_secret *key = NULL;
	sl_err rc;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'q':
			sl_cli_quiet = true;
			break;
		case 'h':
			usage_keygen(stdout);
			return 0;
		default:
			return sl_cli_usage("keygen", "unknown option");
		}
	}
	if (optind != argc)
		return sl_cli_usage("keygen", "unexpected argument '%s'", argv[optind]);
	if (out == NULL)
		return sl_cli_usage("keygen", "-o KEYFILE is required");

	rc = sl_secret_random(SL_SLD_DEK_LEN, &key);
	if (rc == SL_OK)
		rc = sl_file_write_atomic(out, sl_secret_data(key), SL_SLD_DEK_LEN, 0600, false);
	sl_secret_free(key);
	if (rc != SL_OK)
		return sl_cli_fail("keygen", rc);
	if (!sl_cli_quiet)
		fprintf(stderr, "seclaunch keygen: wrote a %d-byte key to %s (mode 0600)\n",
		        SL_SLD_DEK_LEN, out);
	return 0;
}
