/* seclaunch decrypt: an SLD v1 file back to plaintext (the data owner's
 * check). Only authenticated bytes are written; a file output appears only
 * after the whole file authenticated. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "kms_cli.h"
#include "progress.h"
#include "seclaunch/secret.h"
#include "seclaunch/sld.h"
#include "seclaunch/util.h"

static void usage_decrypt(FILE *f)
{
	fprintf(f,
	        "Usage: seclaunch decrypt (--key-file F | --kms URL [--kms-ca FILE])\n"
	        "                         [--threads N] [--force] [-q] IN.sld -o OUT\n"
	        "\n"
	        "Decrypts the SLD v1 file IN.sld. Every chunk is authenticated before "
	        "any of\n"
	        "its bytes is written. OUT is created as an unnamed file in its "
	        "directory and\n"
	        "linked into place only after every chunk and the end of the file\n"
	        "authenticated: on any failure nothing is left behind. '-o -' streams\n"
	        "authenticated chunks to stdout in order and stops with exit 6 at the "
	        "first\n"
	        "failure (discard the output then); so does an OUT that is a device or\n"
	        "FIFO (/dev/null, a named pipe) of your own, named directly (not a\n"
	        "symlink). Plaintext never goes to a terminal.\n"
	        "\n"
	        "  --key-file F     the %d-byte data key (mode 0600; group- or "
	        "world-readable\n"
	        "                   files are refused)\n"
	        "  --kms URL        obtain the data key from the KMS named in the "
	        "header\n"
	        "  --kms-ca FILE    CA bundle for the KMS's TLS certificate\n"
	        "  --threads N      worker threads (default: online CPUs)\n"
	        "  -o, --output OUT where to write the plaintext ('-' for stdout; "
	        "required)\n"
	        "  --force          replace an existing OUT\n"
	        "  -q, --quiet      no progress line\n"
	        "  -h, --help       this text\n"
	        "\n"
	        "Exit codes: 0 ok, 1 usage, 2 not an SLD file, unsupported version, "
	        "unreadable\n"
	        "input or key file, output exists; 6 integrity failure: wrong key, "
	        "altered\n"
	        "header, a chunk that fails authentication, truncation or extra bytes "
	        "(the\n"
	        "message names the chunk or header field); 7 system error.\n",
	        SL_SLD_DEK_LEN);
}

enum { OPT_KEY_FILE = 256, OPT_KMS, OPT_KMS_CA, OPT_THREADS, OPT_FORCE };

struct decrypt_opts {
	const char *key_file;
	const char *kms;
	const char *kms_ca;
	const char *in;
	const char *out;
	bool force;
	unsigned threads;
};

/* Obtains the data key for the file whose header is h. Returns an exit
 * code (0 = ok). The KMS path goes here. */
static int obtain_key(const struct decrypt_opts *o, const sl_sld_header *h, sl_secret **dek)
{
	sl_err rc;

	if (o->kms != NULL) {
		rc = sl_kms_cli_release_dek(o->kms, o->kms_ca, h, dek);
		return rc == SL_OK ? 0 : sl_cli_fail("decrypt", rc);
	}
	rc = sl_secret_read_file(o->key_file, 4096, dek);
	if (rc == SL_OK && sl_secret_len(*dek) != SL_SLD_DEK_LEN) {
		rc = sl_err_set(SL_E_INPUT, "%s: %zu bytes; a key file holds exactly %d",
		                o->key_file, sl_secret_len(*dek), SL_SLD_DEK_LEN);
		sl_secret_free(*dek);
		*dek = NULL;
	}
	if (rc != SL_OK)
		return sl_cli_fail("decrypt", rc);
	return 0;
}

static int parse(int argc, char **argv, struct decrypt_opts *o)
{
	static const struct option opts[] = {
	    {"key-file", required_argument, NULL, OPT_KEY_FILE},
	    {"kms", required_argument, NULL, OPT_KMS},
	    {"kms-ca", required_argument, NULL, OPT_KMS_CA},
	    {"threads", required_argument, NULL, OPT_THREADS},
	    {"output", required_argument, NULL, 'o'},
	    {"force", no_argument, NULL, OPT_FORCE},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;
	char *end;
	long v;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:qh", opts, NULL)) != -1) {
		switch (c) {
		case OPT_KEY_FILE:
			o->key_file = optarg;
			break;
		case OPT_KMS:
			o->kms = optarg;
			break;
		case OPT_KMS_CA:
			o->kms_ca = optarg;
			break;
		case OPT_THREADS:
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno != 0 || end == optarg || *end != '\0' || v < 1 ||
			    v > SL_SLD_THREADS_MAX)
				return sl_cli_usage("decrypt", "--threads %s: must be 1..%d",
				                    optarg, SL_SLD_THREADS_MAX);
			o->threads = (unsigned)v;
			break;
		case 'o':
			o->out = optarg;
			break;
		case OPT_FORCE:
			o->force = true;
			break;
		case 'q':
			sl_cli_quiet = true;
			break;
		case 'h':
			usage_decrypt(stdout);
			return -1;
		default:
			return sl_cli_usage("decrypt", "unknown option");
		}
	}
	if (argc - optind != 1)
		return sl_cli_usage("decrypt", argc == optind ? "the input file IN.sld is required"
		                                              : "exactly one input file expected");
	o->in = argv[optind];
	if ((o->key_file == NULL) == (o->kms == NULL))
		return sl_cli_usage("decrypt", "give exactly one of --key-file F and --kms URL");
	if (o->out == NULL)
		return sl_cli_usage("decrypt", "-o OUT is required ('-o -' for stdout)");
	return 0;
}

struct fd_sink {
	int fd;
	const char *name;
};

static sl_err write_sink(void *ctx, uint64_t i, const uint8_t *plain, size_t len)
{
	struct fd_sink *s = ctx;
	(void)i;
	return sl_write_all(s->fd, plain, len, s->name);
}

int cmd_decrypt(int argc, char **argv)
{
	struct decrypt_opts o = {0};
	sl_sld_header *h = NULL;
	sl_sld_reader *r = NULL;
	sl_secret *dek = NULL;
	sl_sld_outfile *of = NULL;
	struct sl_progress prog;
	struct fd_sink sink;
	int in = -1, out_fd = -1, ret;
	sl_err rc;

	ret = parse(argc, argv, &o);
	if (ret != 0)
		return ret < 0 ? 0 : ret;
	bool to_stdout = strcmp(o.out, "-") == 0;
	/* a device or FIFO (/dev/null, a named pipe) is a stream, as stdout; a
	 * symlink to one is an existing file (refused) */
	bool to_stream = !to_stdout && sl_output_is_stream(o.out);
	if (to_stdout && isatty(STDOUT_FILENO))
		return sl_cli_usage("decrypt", "refusing to write plaintext to a terminal; use -o "
		                               "FILE or a pipe");
	in = open(o.in, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		rc = sl_err_set(SL_E_IO, "%s: cannot open: %s", o.in, strerror(errno));
		goto fail;
	}
	/* the header first: "not an SLD file" needs no key */
	rc = sl_sld_header_read_fd(in, o.in, &h);
	if (rc != SL_OK)
		goto fail;
	if (to_stream) {
		rc = sl_output_open_stream(o.out, &out_fd);
		if (rc == SL_E_USAGE) {
			ret = sl_cli_usage("decrypt", "%s", sl_err_detail());
			goto done;
		}
		if (rc != SL_OK)
			goto fail;
	} else if (!to_stdout) {
		rc = sl_sld_outfile_open(o.out, o.force, &of);
		if (rc != SL_OK)
			goto fail;
	}
	ret = obtain_key(&o, h, &dek);
	if (ret != 0)
		goto done;
	rc = sl_sld_open(in, o.in, dek, &r);
	if (rc != SL_OK)
		goto fail;
	sink.fd = of != NULL ? sl_sld_outfile_fd(of) : to_stream ? out_fd : STDOUT_FILENO;
	sink.name = to_stdout ? "stdout" : o.out;
	sl_progress_init(&prog, "decrypt");
	rc = sl_sld_decrypt(r, o.threads, write_sink, &sink, sl_progress_update, &prog);
	sl_progress_end(&prog);
	if (rc == SL_OK && of != NULL)
		rc = sl_sld_outfile_commit(of);
	if (rc != SL_OK)
		goto fail;
	ret = 0;
	goto done;
fail:
	ret = sl_cli_fail("decrypt", rc);
done:
	sl_sld_close(r);
	sl_sld_outfile_free(of);
	sl_secret_free(dek);
	sl_sld_header_free(h);
	if (in >= 0)
		close(in);
	if (out_fd >= 0)
		close(out_fd);
	return ret;
}
