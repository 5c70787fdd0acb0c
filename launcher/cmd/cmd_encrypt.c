/* seclaunch encrypt: a plaintext file into an SLD v1 dataset file. */
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
#include "seclaunch/secret.h"
#include "seclaunch/sld.h"
#include "seclaunch/util.h"

static void usage_encrypt(FILE *f)
{
	fprintf(f,
	        "Usage: seclaunch encrypt (--key-file F | --kms URL --key-id ID "
	        "[--admin-token-file F])\n"
	        "                         --dataset-id D [--chunk-size N] [--aead A] "
	        "[--threads N]\n"
	        "                         [--force] [-q] IN -o OUT.sld\n"
	        "       seclaunch encrypt [the same options] [--shard-size N] "
	        "[--follow-symlinks]\n"
	        "                         [--stream-name NAME] [--sharded] PATH... -o OUTDIR\n"
	        "\n"
	        "Encrypts the regular file IN into the SLD v1 file OUT.sld "
	        "(docs/format-sld.md).\n"
	        "OUT.sld appears only once complete; an existing one is kept unless "
	        "--force.\n"
	        "\n"
	        "With several PATHs, a folder (its contents, walked in byte order), '-' (a\n"
	        "stream on standard input, alone) or --sharded, the result is a sharded\n"
	        "dataset: the folder OUTDIR with manifest.sldm and shard-NNNNN.sld files\n"
	        "(docs/format-sld.md part II). A file starts a new shard when it does not\n"
	        "fit in what is left of the current one; only a file larger than a shard is\n"
	        "split; when every input is a .tar file, each is a shard of its own.\n"
	        "  --shard-size N        plaintext bytes per shard (default 256M; K, M, G)\n"
	        "  --follow-symlinks     follow symbolic links (they are skipped, each said\n"
	        "                        on stderr, by default)\n"
	        "  --stream-name NAME    the file name of '-' in the dataset (default stdin)\n"
	        "  --sharded             a sharded dataset even for one regular file\n"
	        "\n"
	        "  --key-file F          the %d-byte data key made by 'seclaunch keygen' "
	        "(mode\n"
	        "                        0600; group- or world-readable files are "
	        "refused)\n"
	        "  --kms URL             have the KMS wrap a fresh data key (with "
	        "--key-id,\n"
	        "                        --admin-token-file, --kms-ca, --kms-pin)\n"
	        "  --key-id ID           the KMS key that wraps the data key\n"
	        "  --admin-token-file F  the KMS admin token (mode 0600)\n"
	        "  --kms-ca FILE         CA bundle for the KMS's TLS certificate "
	        "(default\n"
	        "                        $SECLAUNCH_KMS_CA, else the system store)\n"
	        "  --kms-pin PIN         pinned KMS public key: sha256//BASE64 or a key "
	        "file\n"
	        "  --dataset-id D        the dataset's id (required): 1..128 of "
	        "A-Z a-z 0-9 . _ : -,\n"
	        "                        starting with a letter or digit\n"
	        "  --chunk-size N        bytes per chunk: a power of two from 64K to "
	        "64M,\n"
	        "                        with an optional K or M suffix (default 4M)\n"
	        "  --aead A              aes-256-gcm (default) or xchacha20-poly1305 "
	        "(for CPUs\n"
	        "                        without AES instructions)\n"
	        "  --threads N           worker threads (default: online CPUs)\n"
	        "  -o, --output OUT.sld  the output file ('-' for stdout, never a "
	        "terminal)\n"
	        "  --force               replace an existing OUT.sld\n"
	        "  --json                print {\"input\", \"output\", \"bytes\", "
	        "\"dataset_id\"}\n"
	        "                        on stdout (not with -o -)\n"
	        "  -q, --quiet           no progress line, no summary\n"
	        "  -h, --help            this text\n"
	        "\n"
	        "Exit codes (docs/exit-codes.md): 0 ok, 1 usage, 2 input error (unreadable IN or "
	        "key file, "
	        "unsafe\n"
	        "key file permissions, output exists), 5 KMS unreachable or refused, 7 "
	        "system\n"
	        "error.\n",
	        SL_SLD_DEK_LEN);
}

enum {
	OPT_KEY_FILE = 256,
	OPT_KEY_ID,
	OPT_ADMIN_TOKEN_FILE,
	OPT_DATASET_ID,
	OPT_CHUNK_SIZE,
	OPT_AEAD,
	OPT_THREADS,
	OPT_SHARD_SIZE,
	OPT_FOLLOW,
	OPT_STREAM_NAME,
	OPT_SHARDED,
};

struct encrypt_opts {
	const char *key_file;
	const char *key_id;
	const char *admin_token_file;
	const char *in;
	char **paths;
	size_t n_paths;
	uint64_t shard_size;
	bool follow, sharded;
	const char *stream_name;
	struct sl_cli_shared sh;
	sl_sld_encrypt_params p;
};

static int parse_threads(const char *s, unsigned *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 1 || v > SL_SLD_THREADS_MAX)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* Obtains the data key and fills in the header's key reference. Returns
 * an exit code (0 = ok). The KMS path goes here. */
static int obtain_key(struct encrypt_opts *o, sl_secret **dek)
{
	sl_err rc;

	if (o->sh.kms != NULL) {
		/* wrapped lives until the header is written (after this returns) */
		static uint8_t wrapped[SL_KMS_WRAPPED_DEK_MAX];
		static size_t wrapped_len;
		sl_kms_opts ko = {.url = o->sh.kms,
		                  .ca_file = o->sh.kms_ca,
		                  .pinned_pubkey = o->sh.kms_pin,
		                  .admin_token_file = o->admin_token_file};
		rc =
		    sl_kms_cli_new_dek(&ko, o->key_id, o->p.dataset_id, dek, wrapped, &wrapped_len);
		if (rc != SL_OK)
			return sl_cli_fail("encrypt", rc);
		o->p.kms_url = o->sh.kms;
		o->p.key_id = o->key_id;
		o->p.wrapped_dek = wrapped;
		o->p.wrapped_dek_len = wrapped_len;
		return 0;
	}
	rc = sl_secret_read_file(o->key_file, 4096, dek);
	if (rc == SL_OK && sl_secret_len(*dek) != SL_SLD_DEK_LEN) {
		rc = sl_err_set(SL_E_INPUT,
		                "%s: %zu bytes; a key file holds exactly %d (seclaunch keygen "
		                "makes one)",
		                o->key_file, sl_secret_len(*dek), SL_SLD_DEK_LEN);
		sl_secret_free(*dek);
		*dek = NULL;
	}
	if (rc != SL_OK)
		return sl_cli_fail("encrypt", rc);
	o->p.kms_url = NULL;
	o->p.key_id = NULL;
	o->p.wrapped_dek = NULL;
	o->p.wrapped_dek_len = 0;
	return 0;
}

static const struct sl_cli_opt encrypt_opts_table[] = {
    {"key-file", required_argument, OPT_KEY_FILE, NULL},
    {"key-id", required_argument, OPT_KEY_ID, NULL},
    {"admin-token-file", required_argument, OPT_ADMIN_TOKEN_FILE, NULL},
    {"dataset-id", required_argument, OPT_DATASET_ID, NULL},
    {"chunk-size", required_argument, OPT_CHUNK_SIZE, NULL},
    {"aead", required_argument, OPT_AEAD, NULL, SL_CLI_AEAD_VALUES},
    {"threads", required_argument, OPT_THREADS, NULL},
    {"shard-size", required_argument, OPT_SHARD_SIZE, NULL},
    {"follow-symlinks", no_argument, OPT_FOLLOW, NULL},
    {"stream-name", required_argument, OPT_STREAM_NAME, NULL},
    {"sharded", no_argument, OPT_SHARDED, NULL},
    {NULL, 0, 0, NULL},
};

static int on_option(void *ctx, int key, char *arg)
{
	struct encrypt_opts *o = ctx;
	uint64_t cs;

	switch (key) {
	case OPT_KEY_FILE:
		o->key_file = arg;
		return 0;
	case OPT_KEY_ID:
		o->key_id = arg;
		return 0;
	case OPT_ADMIN_TOKEN_FILE:
		o->admin_token_file = arg;
		return 0;
	case OPT_DATASET_ID:
		o->p.dataset_id = arg;
		return 0;
	case OPT_CHUNK_SIZE:
		cs = sl_cli_parse_size(arg);
		if (cs < SL_SLD_CHUNK_MIN || cs > SL_SLD_CHUNK_MAX || (cs & (cs - 1)) != 0)
			return sl_cli_usage("encrypt",
			                    "--chunk-size %s: must be a power of two from 64K "
			                    "to 64M (e.g. 4M, 65536)",
			                    arg);
		o->p.chunk_size = (uint32_t)cs;
		return 0;
	case OPT_AEAD:
		if (sl_aead_from_name(arg, &o->p.aead) != SL_OK)
			return sl_cli_usage("encrypt", "--aead: %s", sl_err_detail());
		return 0;
	case OPT_THREADS:
		if (parse_threads(arg, &o->p.threads) != 0)
			return sl_cli_usage("encrypt", "--threads %s: must be 1..%d", arg,
			                    SL_SLD_THREADS_MAX);
		return 0;
	case OPT_SHARD_SIZE:
		o->shard_size = sl_cli_parse_size(arg);
		if (o->shard_size < SL_SLD_CHUNK_MIN)
			return sl_cli_usage("encrypt", "--shard-size %s: at least 64K (e.g. 256M)",
			                    arg);
		return 0;
	case OPT_FOLLOW:
		o->follow = true;
		return 0;
	case OPT_STREAM_NAME:
		o->stream_name = arg;
		return 0;
	case OPT_SHARDED:
		o->sharded = true;
		return 0;
	default:
		return sl_cli_usage("encrypt", "unknown option");
	}
}

static int on_args(void *ctx, int argc, char **argv)
{
	struct encrypt_opts *o = ctx;
	if (argc == 0)
		return sl_cli_usage("encrypt", "the input file IN is required");
	o->in = argv[0];
	o->paths = argv;
	o->n_paths = (size_t)argc;
	return 0;
}

/* Several inputs, a folder, a stream or --sharded: a sharded dataset. */
static bool wants_tree(const struct encrypt_opts *o)
{
	struct stat st;
	if (o->sharded || o->n_paths > 1 || o->shard_size != 0 || o->stream_name != NULL ||
	    o->follow)
		return true;
	return strcmp(o->in, "-") == 0 || (stat(o->in, &st) == 0 && S_ISDIR(st.st_mode));
}

static const struct sl_cli_spec spec = {
    .name = "encrypt",
    .shared = SL_SH_QUIET | SL_SH_JSON | SL_SH_KMS_ALL | SL_SH_OUT | SL_SH_FORCE,
    .opts = encrypt_opts_table,
    .help = usage_encrypt,
    .on_option = on_option,
    .on_args = on_args,
};

static int check(void *ctx)
{
	const struct encrypt_opts *o = ctx;
	int ret = sl_kms_cli_key_source("encrypt", o->key_file, o->sh.kms);
	if (ret != 0)
		return ret;
	if (o->sh.kms == NULL && (o->key_id != NULL || o->admin_token_file != NULL))
		return sl_cli_usage("encrypt", "--key-id and --admin-token-file go with --kms");
	if (o->sh.kms != NULL && o->key_id == NULL)
		return sl_cli_usage("encrypt", "--kms needs --key-id ID");
	if (o->p.dataset_id == NULL)
		return sl_cli_usage("encrypt", "--dataset-id D is required");
	if (sl_dataset_id_check(o->p.dataset_id, false, "--dataset-id") != SL_OK)
		return sl_cli_usage("encrypt", "%s", sl_err_detail());
	return sl_cli_need_out("encrypt", &o->sh, "-o OUT.sld is required");
}

static int run(void *ctx);

int cmd_encrypt(int argc, char **argv)
{
	struct encrypt_opts o = {0};
	return sl_cli_run(&spec, &o, &o.sh, argc, argv, check, run);
}

static int obtain_key(struct encrypt_opts *o, sl_secret **dek);

/* encrypt PATH... -o OUTDIR */
static int run_tree(struct encrypt_opts *o)
{
	sl_secret *dek = NULL;
	sl_tree_stats st;
	sl_err rc;
	int ret;

	if (strcmp(o->sh.out, "-") == 0)
		return sl_cli_usage("encrypt", "a sharded dataset is a folder: -o OUTDIR");
	ret = obtain_key(o, &dek);
	if (ret != 0)
		return ret;
	sl_tree_encrypt_opts t = {.paths = (const char *const *)o->paths,
	                          .n_paths = o->n_paths,
	                          .out_dir = o->sh.out,
	                          .force = o->sh.force,
	                          .follow_symlinks = o->follow,
	                          .quiet = sl_cli_quiet,
	                          .shard_size = o->shard_size,
	                          .stream_name = o->stream_name,
	                          .p = o->p};
	rc = sl_tree_encrypt(dek, &t, &st);
	sl_secret_free(dek);
	if (rc != SL_OK)
		return sl_cli_fail("encrypt", rc);
	char root[2 * SL_SLDM_ROOT_LEN + 1];
	sl_hex_encode(st.root, sizeof(st.root), root);
	if (sl_cli_json)
		sl_cli_print_json(json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "output",
		                            o->sh.out, "dataset_id", o->p.dataset_id, "root", root,
		                            "files", (json_int_t)st.files, "shards",
		                            (json_int_t)st.shards, "skipped",
		                            (json_int_t)st.skipped, "bytes", (json_int_t)st.bytes));
	else if (!sl_cli_quiet)
		fprintf(
		    stderr,
		    "seclaunch encrypt: %u file(s), %llu bytes -> %s: %u shard(s), dataset '%s', "
		    "root %s%s\n",
		    st.files, (unsigned long long)st.bytes, o->sh.out, st.shards, o->p.dataset_id,
		    root, st.skipped ? " (some inputs skipped, see above)" : "");
	return 0;
}

static SL_RESULT read_input_at(void *ctx, void **tls, uint32_t file, uint64_t off, uint8_t *buf,
                               size_t len)
{
	const int *fd = ctx;
	size_t got = 0;
	(void)tls;
	(void)file;
	sl_err rc = sl_pread_full(*fd, buf, len, off, &got, "input");
	if (rc == SL_OK && got < len)
		rc = sl_err_set(SL_E_IO,
		                "input ended at byte %llu (did it shrink while being read?)",
		                (unsigned long long)(off + got));
	return rc;
}

static int run(void *ctx)
{
	struct encrypt_opts *op = ctx;
	struct encrypt_opts o = *op;
	if (wants_tree(op))
		return run_tree(op);
	if (o.n_paths != 1)
		return sl_cli_usage("encrypt", "exactly one input file expected");
	sl_secret *dek = NULL;
	sl_sld_outfile *of = NULL;
	struct sl_progress prog;
	struct stat st;
	int in = -1, out_fd, ret;
	sl_err rc;

	in = open(o.in, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		rc = sl_err_set(SL_E_IO, "%s: cannot open: %s", o.in, strerror(errno));
		goto fail;
	}
	if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = sl_err_set(SL_E_INPUT,
		                "%s: not a regular file (its size goes into the header)", o.in);
		goto fail;
	}
	if (strcmp(o.sh.out, "-") == 0) {
		if (isatty(STDOUT_FILENO)) {
			close(in);
			return sl_cli_usage("encrypt",
			                    "refusing to write to a terminal; use -o FILE");
		}
		out_fd = STDOUT_FILENO;
	} else {
		rc = sl_sld_outfile_open(o.sh.out, o.sh.force, &of);
		if (rc != SL_OK)
			goto fail;
		out_fd = sl_sld_outfile_fd(of);
	}
	ret = obtain_key(&o, &dek);
	if (ret != 0)
		goto done;
	sl_progress_init(&prog, "encrypt");
	o.p.progress = sl_progress_update;
	o.p.progress_ctx = &prog;
	{
		/* workers read the input at their chunks' offsets; a file goes out
		 * by pwrite (and is written behind for the final fsync), standard
		 * output in order */
		uint64_t len = (uint64_t)st.st_size;
		sl_sld_source src = {.ctx = &in, .read_at = read_input_at};
		rc = sl_sld_encrypt_files(dek, &o.p, 1, &len, &out_fd, &src,
		                          of != NULL ? SL_SLD_WRITE_BEHIND : SL_SLD_IN_ORDER, NULL);
		if (rc == SL_OK && (fstat(in, &st) != 0 || (uint64_t)st.st_size != len))
			rc = sl_err_set(SL_E_IO, "%s: changed size while it was being encrypted",
			                o.in);
	}
	sl_progress_end(&prog);
	if (rc == SL_OK && of != NULL)
		rc = sl_sld_outfile_commit(of);
	if (rc != SL_OK)
		goto fail;
	if (sl_cli_json)
		sl_cli_print_json(json_pack("{s:s, s:s, s:I, s:s}", "input", o.in, "output",
		                            o.sh.out, "bytes", (json_int_t)st.st_size, "dataset_id",
		                            o.p.dataset_id));
	else if (!sl_cli_quiet)
		fprintf(stderr, "seclaunch encrypt: %s -> %s (%lld bytes, dataset '%s')\n", o.in,
		        o.sh.out, (long long)st.st_size, o.p.dataset_id);
	ret = 0;
	goto done;
fail:
	ret = sl_cli_fail("encrypt", rc);
done:
	sl_sld_outfile_free(of);
	sl_secret_free(dek);
	if (in >= 0)
		close(in);
	return ret;
}
