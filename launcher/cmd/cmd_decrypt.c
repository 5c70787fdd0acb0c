/* seclaunch decrypt: an SLD v1 file back to plaintext (the data owner's
 * check). Only authenticated bytes are written; a file output appears only
 * after the whole file authenticated. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../dataset/dataset_tree.h"
#include "../kmsc/kms_cli.h"
#include "../cli/progress.h"
#include "../cli/region_id.h"
#include "seclaunch/secret.h"
#include "seclaunch/sld.h"
#include "seclaunch/util.h"

static void usage_decrypt(FILE *f)
{
	fprintf(f,
	        "Usage: seclaunch decrypt (--key-file F | --kms URL [KMS options])\n"
	        "                         [--threads N] [--force] [--json] [-q] IN.sld -o OUT\n"
	        "       seclaunch decrypt (--key-file F | --kms URL [KMS options]) [options]\n"
	        "                         DATASET -o DIR\n"
	        "\n"
	        "DATASET, a sharded dataset (a folder holding manifest.sldm, or its URL),\n"
	        "is restored into the new folder DIR: every file with its path and mode,\n"
	        "after the manifest, every shard's place in it and every chunk\n"
	        "authenticated. DIR appears only once complete (docs/format-sld.md II).\n"
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
	        "  --kms URL        obtain the data key from the KMS: this machine attests\n"
	        "                   (TPM quote or SEV-SNP/TDX report bound to the KMS's\n"
	        "                   nonce) and the KMS releases the key under its policy\n"
	        "  --threads N      worker threads (default: online CPUs)\n"
	        "  -o, --output OUT where to write the plaintext ('-' for stdout; "
	        "required)\n"
	        "  --force          replace an existing OUT\n"
	        "  --json           print {\"input\", \"output\", \"dataset_id\", "
	        "\"bytes\"} on stdout\n"
	        "                   (not with -o -)\n"
	        "  -q, --quiet      no progress line\n"
	        "  -h, --help       this text\n"
	        "KMS options (with --kms):\n"
	        "  --kms-ca FILE    CA bundle for the KMS's TLS certificate (default\n"
	        "                   $SECLAUNCH_KMS_CA, else the system store)\n"
	        "  --kms-pin PIN    pinned KMS public key: sha256//BASE64 or a key file\n"
	        "  --tcti T         TPM to quote with (default $SECLAUNCH_TCTI, else\n"
	        "                   device:/dev/tpmrm0)\n" SL_REGION_ID_HELP SL_REMOTE_HELP "\n"
	        "Exit codes (docs/exit-codes.md): 0 ok, 1 usage, 2 not an SLD file, "
	        "unsupported\n"
	        "version, unreadable input or key file, output exists; 3 the KMS did not\n"
	        "accept this machine's attestation; 4 the KMS's policy denied the key; 5 KMS\n"
	        "unreachable or refused; 6 integrity failure: wrong key, altered header, a\n"
	        "chunk that fails authentication, truncation or extra bytes (the message\n"
	        "names the chunk or header field); 7 system error.\n",
	        SL_SLD_DEK_LEN);
}

enum { OPT_KEY_FILE = 256, OPT_THREADS };

struct decrypt_opts {
	const char *key_file;
	const char *in;
	unsigned threads;
	struct sl_region_id rid;
	sl_remote_opts remote;
	struct sl_cli_shared sh;
};

/* Obtains the data key for the file whose header is h. Returns an exit
 * code (0 = ok). The KMS path goes here. */
static int obtain_key(const struct decrypt_opts *o, const sl_sld_header *h, sl_secret **dek)
{
	sl_err rc;

	if (o->sh.kms != NULL) {
		sl_kms_opts ko = {
		    .url = o->sh.kms, .ca_file = o->sh.kms_ca, .pinned_pubkey = o->sh.kms_pin};
		rc = sl_kms_cli_release_dek(&ko, o->sh.tcti, &o->rid, h, dek);
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

/* The data key of a sharded dataset: from the key file, or released by the
 * KMS for the manifest's key reference. An exit code (0 = ok). */
static int obtain_tree_key(const struct decrypt_opts *o, const sl_sldm *m, sl_secret **dek)
{
	sl_err rc;

	if (o->sh.kms != NULL) {
		sl_kms_opts ko = {
		    .url = o->sh.kms, .ca_file = o->sh.kms_ca, .pinned_pubkey = o->sh.kms_pin};
		size_t wl = 0;
		const uint8_t *w = sl_sldm_wrapped_dek(m, &wl);
		sl_kms_key_req kr = {.key_id = sl_sldm_key_id(m),
		                     .dataset_id = sl_sldm_dataset_id(m),
		                     .wrapped_dek = w,
		                     .wrapped_dek_len = wl};
		rc = sl_kms_cli_release_ref(&ko, o->sh.tcti, &o->rid, &kr, dek);
		return rc == SL_OK ? 0 : sl_cli_fail("decrypt", rc);
	}
	return obtain_key(o, NULL, dek);
}

/* decrypt DATASET -o DIR */
static int run_tree(struct decrypt_opts *o)
{
	sl_remote *remote = NULL;
	sl_sldm *m = NULL;
	sl_secret *dek = NULL;
	sl_tree_stats st;
	sl_err rc = SL_OK;
	int ret;

	if (strcmp(o->sh.out, "-") == 0)
		return sl_cli_usage("decrypt",
		                    "a sharded dataset is restored into a folder: -o DIR");
	if (sl_remote_is_url(o->in)) {
		o->remote.quiet = sl_cli_quiet;
		rc = sl_remote_open(o->in, &o->remote, &remote);
	}
	if (rc == SL_OK)
		rc = sl_tree_manifest(o->in, remote, &m);
	if (rc != SL_OK) {
		ret = sl_cli_fail("decrypt", rc);
		goto done;
	}
	ret = obtain_tree_key(o, m, &dek);
	if (ret != 0)
		goto done;
	rc = sl_tree_decrypt(o->in, remote, m, dek, o->sh.out, o->sh.force, o->threads, &st);
	if (rc != SL_OK) {
		ret = sl_cli_fail("decrypt", rc);
		goto done;
	}
	char root[2 * SL_SLDM_ROOT_LEN + 1];
	sl_hex_encode(st.root, sizeof(st.root), root);
	if (sl_cli_json)
		sl_cli_print_json(json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I}", "input", o->in,
		                            "output", o->sh.out, "dataset_id",
		                            sl_sldm_dataset_id(m), "root", root, "files",
		                            (json_int_t)st.files, "shards", (json_int_t)st.shards,
		                            "bytes", (json_int_t)st.bytes));
	else if (!sl_cli_quiet)
		fprintf(stderr,
		        "seclaunch decrypt: %s -> %s: %u file(s), %llu bytes from %u shard(s) of "
		        "dataset '%s' (root %.16s…), all authenticated\n",
		        o->in, o->sh.out, st.files, (unsigned long long)st.bytes, st.shards,
		        sl_sldm_dataset_id(m), root);
	ret = 0;
done:
	sl_secret_free(dek);
	sl_sldm_free(m);
	sl_remote_free(remote);
	return ret;
}

static const struct sl_cli_opt decrypt_opts_table[] = {
    {"key-file", required_argument, OPT_KEY_FILE, NULL},
    {"threads", required_argument, OPT_THREADS, NULL},
    SL_REGION_ID_OPTS,
    SL_REMOTE_OPTS,
    {NULL, 0, 0, NULL},
};

static int on_option(void *ctx, int key, char *arg)
{
	struct decrypt_opts *o = ctx;
	char *end;
	long v;

	if (sl_region_id_option(&o->rid, key, arg))
		return 0;
	int taken = sl_remote_option(&o->remote, key, arg);
	if (taken != 0)
		return taken > 0 ? 0 : sl_cli_usage("decrypt", "%s", sl_err_detail());
	switch (key) {
	case OPT_KEY_FILE:
		o->key_file = arg;
		return 0;
	case OPT_THREADS:
		errno = 0;
		v = strtol(arg, &end, 10);
		if (errno != 0 || end == arg || *end != '\0' || v < 1 || v > SL_SLD_THREADS_MAX)
			return sl_cli_usage("decrypt", "--threads %s: must be 1..%d", arg,
			                    SL_SLD_THREADS_MAX);
		o->threads = (unsigned)v;
		return 0;
	default:
		return sl_cli_usage("decrypt", "unknown option");
	}
}

static int on_args(void *ctx, int argc, char **argv)
{
	struct decrypt_opts *o = ctx;
	if (argc != 1)
		return sl_cli_usage("decrypt", argc == 0 ? "the input file IN.sld is required"
		                                         : "exactly one input file expected");
	o->in = argv[0];
	return 0;
}

static const struct sl_cli_spec spec = {
    .name = "decrypt",
    .shared = SL_SH_QUIET | SL_SH_JSON | SL_SH_KMS_ALL | SL_SH_TCTI | SL_SH_OUT | SL_SH_FORCE,
    .opts = decrypt_opts_table,
    .help = usage_decrypt,
    .on_option = on_option,
    .on_args = on_args,
};

/* The checks that need no file: the options agree with each other. */
static int check(void *ctx)
{
	const struct decrypt_opts *o = ctx;
	bool kms = o->sh.kms != NULL;
	int ret = sl_kms_cli_key_source("decrypt", o->key_file, o->sh.kms);
	if (ret != 0)
		return ret;
	if (!kms && (o->rid.cloud_identity != NULL || o->rid.region != NULL ||
	             o->rid.gcp_jwks != NULL || o->rid.aws_trust != NULL))
		return sl_cli_usage("decrypt", "--cloud-identity, --region, --gcp-jwks and "
		                               "--aws-trust go with --kms");
	ret = sl_cli_need_out("decrypt", &o->sh, "-o OUT is required ('-o -' for stdout)");
	return ret != 0 ? ret : sl_region_id_check(&o->rid, "decrypt");
}

struct fd_sink {
	int fd;
	const char *name;
};

static SL_RESULT write_sink(void *ctx, uint64_t i, const uint8_t *plain, size_t len)
{
	struct fd_sink *s = ctx;
	(void)i;
	return sl_write_all(s->fd, plain, len, s->name);
}

static int run(void *ctx);

int cmd_decrypt(int argc, char **argv)
{
	struct decrypt_opts o = {0};
	return sl_cli_run(&spec, &o, &o.sh, argc, argv, check, run);
}

static int run(void *ctx)
{
	struct decrypt_opts *op = ctx;
	struct decrypt_opts o = *op;
	const char *out_path = o.sh.out;
	sl_sld_header *h = NULL;
	sl_sld_reader *r = NULL;
	sl_secret *dek = NULL;
	sl_sld_outfile *of = NULL;
	struct sl_progress prog;
	struct fd_sink sink;
	int in = -1, out_fd = -1, ret;
	sl_err rc;

	if (sl_remote_is_url(o.in) || sl_tree_is_dataset(o.in))
		return run_tree(op);
	bool to_stdout = strcmp(out_path, "-") == 0;
	/* a device or FIFO (/dev/null, a named pipe) is a stream, as stdout; a
	 * symlink to one is an existing file (refused) */
	bool to_stream = !to_stdout && sl_output_is_stream(out_path);
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
		rc = sl_output_open_stream(out_path, &out_fd);
		if (rc == SL_E_USAGE) {
			ret = sl_cli_usage("decrypt", "%s", sl_err_detail());
			goto done;
		}
		if (rc != SL_OK)
			goto fail;
	} else if (!to_stdout) {
		rc = sl_sld_outfile_open(out_path, o.sh.force, &of);
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
	sink.name = to_stdout ? "stdout" : out_path;
	sl_progress_init(&prog, "decrypt");
	rc = sl_sld_decrypt(r, o.threads, write_sink, &sink, sl_progress_update, &prog);
	sl_progress_end(&prog);
	if (rc == SL_OK && of != NULL)
		rc = sl_sld_outfile_commit(of);
	if (rc != SL_OK)
		goto fail;
	if (sl_cli_json)
		sl_cli_print_json(json_pack("{s:s, s:s, s:s, s:I}", "input", o.in, "output",
		                            out_path, "dataset_id", sl_sld_header_dataset_id(h),
		                            "bytes", (json_int_t)sl_sld_header_plaintext_len(h)));
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
