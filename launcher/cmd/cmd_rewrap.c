/* seclaunch rewrap DATASET: moves a sharded dataset to its key's newest KEK
 * version (and, with --set-kms-url, to another KMS address) by rewriting
 * only the manifest's key reference, which sits after the manifest's MAC:
 * no shard is read or written, the dataset root is unchanged. seclaunchd
 * opens the wrapped DEK and wraps it again inside itself (POST
 * /v1/keys/{id}/rewrap, admin): the DEK never reaches this process.
 * docs/format-sld.md, part II, "Re-pointing". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../cli/cli.h"
#include "../kmsc/kms_http.h"
#include "seclaunch/json.h"
#include "seclaunch/kms.h"
#include "seclaunch/sldm.h"
#include "seclaunch/util.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: seclaunch rewrap DATASET --admin-token-file FILE [--kms URL]\n"
	           "                        [--set-kms-url URL] [--kms-ca FILE] [--kms-pin PIN]\n"
	           "                        [--json] [-q]\n\n"
	           "Moves the sharded dataset DATASET (a folder holding manifest.sldm) to the\n"
	           "newest version of its key-encryption key: seclaunchd unwraps the dataset's\n"
	           "DEK and wraps it again under the current version without the DEK leaving\n"
	           "it, and only the manifest's key reference is rewritten (shards and the\n"
	           "dataset root stay). A single SLD v1 file cannot be rewrapped: its header,\n"
	           "which every chunk authenticates, holds the key reference.\n\n"
	           "  --admin-token-file FILE  the admin token (file mode 0600)\n"
	           "  --kms URL                the KMS to ask (default: the manifest's)\n"
	           "  --set-kms-url URL        record URL as the dataset's KMS from now on\n"
	           "  --kms-ca FILE            CA bundle for the KMS's TLS certificate\n"
	           "  --kms-pin PIN            pinned KMS public key\n"
	           "  --json                   print {\"dataset\", \"key_id\", \"from_version\",\n"
	           "                           \"to_version\", \"kms_url\"}\n"
	           "  -q, --quiet              print nothing on success\n\n"
	           "Exit codes: 0 done, 1 usage, 2 not a sharded dataset, 5 KMS unreachable or\n"
	           "refused (key disabled or retired: 409), 6 manifest damaged.\n");
}

enum { O_ADMIN_TOKEN = 256, O_SET_URL };

static const struct sl_cli_opt opts[] = {
    {"admin-token-file", required_argument, O_ADMIN_TOKEN, NULL},
    {"set-kms-url", required_argument, O_SET_URL, NULL},
    {NULL, 0, 0, NULL},
};

struct rw_ctx {
	const char *token, *set_url, *dataset;
};

static int on_option(void *ctx, int key, char *arg)
{
	struct rw_ctx *c = ctx;
	if (key == O_ADMIN_TOKEN)
		c->token = arg;
	else
		c->set_url = arg;
	return 0;
}

static int on_args(void *ctx, int argc, char **argv)
{
	struct rw_ctx *c = ctx;
	if (argc != 1)
		return sl_cli_usage("rewrap", "needs exactly one DATASET");
	c->dataset = argv[0];
	return 0;
}

static const struct sl_cli_spec spec = {
    .name = "rewrap",
    .shared = SL_SH_QUIET | SL_SH_JSON | SL_SH_KMS_ALL,
    .opts = opts,
    .help = usage,
    .on_option = on_option,
    .on_args = on_args,
};

int cmd_rewrap(int argc, char **argv)
{
	struct sl_cli_shared sh;
	struct rw_ctx c = {0};
	char *man = NULL, *w64 = NULL, path[64 + SL_KMS_ID_MAX];
	sl_sldm *m = NULL;
	sl_kms *k = NULL;
	json_t *req = NULL, *res = NULL;
	uint8_t *out = NULL, *nw = NULL;
	size_t out_len = 0, wl = 0, nwl = 0;
	const uint8_t *w;
	const char *url;
	struct stat st;
	sl_err rc = SL_E_NOMEM;
	int ret = sl_cli_parse(&spec, &c, &sh, argc, argv);
	if (ret >= 0)
		return ret;
	if (c.token == NULL || c.dataset == NULL)
		return sl_cli_usage("rewrap", "needs DATASET and --admin-token-file");
	SL_ENSURE(asprintf(&man, "%s/%s", c.dataset, SL_SLDM_NAME) >= 0, SL_E_NOMEM, "path");
	SL_ENSURE(stat(man, &st) == 0, SL_E_INPUT,
	          "%s: no %s here: only a sharded dataset can be rewrapped (an SLD v1 file's "
	          "header, which every chunk authenticates, holds its key reference)",
	          c.dataset, SL_SLDM_NAME);
	SL_GUARD(sl_sldm_read_file(man, &m));
	w = sl_sldm_wrapped_dek(m, &wl);
	url = sh.kms ? sh.kms : sl_sldm_kms_url(m);
	SL_ENSURE(url != NULL && url[0] != '\0' && w != NULL && wl > 0, SL_E_INPUT,
	          "%s: the dataset's key is a local key file, not a KMS key", man);
	SL_GUARD(sl_b64_encode(w, wl, &w64));
	req = json_pack("{s:s, s:s}", "dataset_id", sl_sldm_dataset_id(m), "wrapped_dek", w64);
	SL_ENSURE(req != NULL, SL_E_NOMEM, "rewrap");
	snprintf(path, sizeof(path), "/v1/keys/%s/rewrap", sl_sldm_key_id(m));
	sl_kms_opts ko = {.url = url,
	                  .ca_file = sh.kms_ca,
	                  .pinned_pubkey = sh.kms_pin,
	                  .admin_token_file = c.token};
	SL_GUARD(sl_kms_new(&ko, &k));
	SL_GUARD(sl_kms_call(k, path, req, true, KMS_RETRY_UNPROCESSED, &res));
	SL_ENSURE(sl_json_getstr(res, "wrapped_dek") != NULL, SL_E_KMS_PROTOCOL,
	          "rewrap answer: no \"wrapped_dek\"");
	rc = sl_b64_decode(sl_json_getstr(res, "wrapped_dek"), SL_KMS_WRAPPED_DEK_MAX, &nw, &nwl,
	                   "rewrap answer: wrapped_dek");
	if (rc != SL_OK) {
		rc = sl_err_wrap(SL_E_KMS_PROTOCOL, "KMS answer");
		goto out;
	}
	SL_ENSURE(nwl > 0, SL_E_KMS_PROTOCOL, "rewrap answer: wrapped_dek is empty");
	SL_GUARD(sl_sldm_rekey(m, c.set_url ? c.set_url : sl_sldm_kms_url(m), sl_sldm_key_id(m), nw,
	                       nwl, &out, &out_len));
	SL_GUARD(sl_file_write_atomic(man, out, out_len, st.st_mode & 0777, true));
	if (sl_cli_json)
		sl_cli_print_json(json_pack("{s:s, s:s, s:i, s:i, s:s}", "dataset", c.dataset,
		                            "key_id", sl_sldm_key_id(m), "from_version", w[0],
		                            "to_version", nw[0], "kms_url",
		                            c.set_url ? c.set_url : sl_sldm_kms_url(m)));
	else if (!sl_cli_quiet)
		printf("%s: key %s version %u -> %u%s%s\n", c.dataset, sl_sldm_key_id(m), w[0],
		       nw[0], c.set_url ? ", KMS " : "", c.set_url ? c.set_url : "");
	rc = SL_OK;
out:
	free(man);
	free(w64);
	free(out);
	free(nw);
	json_decref(req);
	json_decref(res);
	sl_kms_free(k);
	sl_sldm_free(m);
	if (rc != SL_OK)
		return sl_cli_fail("rewrap", rc);
	return 0;
}
