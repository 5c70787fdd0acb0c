/* seclaunchd's maintenance commands on the state store:
 *   seclaunchd migrate --from-state DIR [--config FILE]
 *     imports the files of releases before the state store: the AK registry
 *     (registry.json, its MAC checked under the registry key) and the local
 *     keystore (keystore, authenticated under the master key). Every key
 *     becomes version 1 of itself, so every DEK wrapped before still opens.
 *     Idempotent: what the store already holds is left alone and counted; a
 *     key id the store holds under another KEK stops it (exit 2 naming it).
 *   seclaunchd backup --to FILE [--config FILE | --dev --state DIR]
 *     an online, consistent copy of a SQLite store (the backup API).
 * Without --config both act on DIR's --dev layout (state.db, master.key,
 * registry.key). docs/seclaunchd.md, "State store". */
#include <errno.h>
#include <getopt.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon.h"
#include "seclaunch/buf.h"
#include "seclaunch/json.h"

#define KS_MAGIC "SLKS"
#define KS_HDR 24
#define KS_MAX_KEYS 100000
#define KS_MAX_FILE (KS_HDR + 4 + (size_t)KS_MAX_KEYS * (1 + SL_KMS_ID_MAX + 32) + 16)
#define REG_MAX_FILE (16u << 20)

struct counts {
	size_t aks, aks_had, keys, keys_had;
};

static bool exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

/* registry.json: {"version":1,"aks":[{"name","ek_sha256","enrolled"}],"mac"} */
static SL_RESULT import_registry(kmsd_store *st, const char *path, const char *key_file,
                                 struct counts *n)
{
	sl_err rc = SL_E_INTEGRITY;
	uint8_t *buf = NULL, mac[32];
	size_t len = 0;
	json_t *root = NULL, *aks;
	json_error_t je;
	char want[65], have[65];
	const char *m;
	char *text = NULL;
	sl_secret *key = NULL;
	kmsd_registry *reg = NULL;
	SL_GUARD(sl_secret_read_file(key_file, 64, &key));
	SL_ENSURE(sl_secret_len(key) == 32, SL_E_INPUT, "%s: registry key must be 32 bytes",
	          key_file);
	SL_GUARD(sl_file_read(path, REG_MAX_FILE, &buf, &len));
	root = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &je);
	SL_ENSURE(root != NULL && json_is_object(root), SL_E_INTEGRITY,
	          "%s: registry is not valid JSON (truncated or edited): %s", path, je.text);
	m = sl_json_getstr(root, "mac");
	SL_ENSURE(m != NULL && strlen(m) == 64, SL_E_INTEGRITY, "%s: registry has no valid \"mac\"",
	          path);
	memcpy(have, m, 65);
	json_object_del(root, "mac");
	text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
	SL_ENSURE(text != NULL, SL_E_NOMEM, "registry");
	crypto_auth_hmacsha256(mac, (const uint8_t *)text, strlen(text), sl_secret_data(key));
	sl_hex_encode(mac, 32, want);
	SL_ENSURE(sl_ct_eq(have, want, 64), SL_E_INTEGRITY,
	          "%s: registry MAC does not verify (edited, or another registry key)", path);
	aks = json_object_get(root, "aks");
	SL_ENSURE(json_is_array(aks), SL_E_INTEGRITY, "%s: \"aks\" is not an array", path);
	SL_GUARD(kmsd_registry_open(st, key_file, &reg));
	for (size_t i = 0; i < json_array_size(aks); i++) {
		const char *h = sl_json_getstr(json_array_get(aks, i), "name");
		const char *e = sl_json_getstr(json_array_get(aks, i), "ek_sha256");
		uint8_t *name = NULL, ek[32];
		size_t nl = 0;
		enum kmsd_ak_status was = KMSD_AK_UNKNOWN;
		SL_ENSURE(h != NULL && e != NULL && strlen(e) == 64, SL_E_INTEGRITY,
		          "%s: aks[%zu] needs \"name\" and \"ek_sha256\"", path, i);
		SL_GUARD(sl_hex_decode_alloc(h, KMSD_AK_NAME_MAX, &name, &nl, "aks[].name"));
		rc = sl_hex_decode(e, ek, 32, "aks[].ek_sha256");
		if (rc == SL_OK)
			rc = kmsd_registry_lookup(reg, name, nl, &was);
		if (rc == SL_OK && was == KMSD_AK_UNKNOWN)
			rc = kmsd_registry_add(reg, name, nl, ek);
		free(name);
		if (rc != SL_OK)
			goto out;
		if (was == KMSD_AK_UNKNOWN)
			n->aks++;
		else
			n->aks_had++;
	}
	rc = SL_OK;
out:
	kmsd_registry_close(reg);
	sl_secret_free(key);
	free(text);
	json_decref(root);
	free(buf);
	return rc;
}

struct same_kek {
	const uint8_t *kek;
	bool same;
};

static SL_RESULT same_kek(const uint8_t kek[static 32], void *ctx)
{
	struct same_kek *s = ctx;
	s->same = sl_ct_eq(kek, s->kek, 32);
	if (!s->same)
		sl_err_set(SL_E_INPUT, "version 1 differs from the file's");
	return SL_OK;
}

/* keystore: "SLKS" | 1 | 000 | iv[12] | u32be n | ct[n] | tag[16], AAD = the
 * 24 header bytes; plaintext u32be count | count x (u8 len | id | kek[32]). */
static SL_RESULT import_keystore(kmsd_store *st, const char *path, const char *master_file,
                                 struct counts *n)
{
	sl_err rc = SL_E_INTEGRITY;
	uint8_t *buf = NULL;
	size_t len = 0;
	sl_secret *pt = NULL, *master = NULL;
	kmsd_keystore *ks = NULL;
	sl_reader r, p;
	const uint8_t *iv, *ct, *tag;
	uint32_t clen, count;
	uint8_t ver;
	SL_GUARD(sl_secret_read_file(master_file, 64, &master));
	SL_ENSURE(sl_secret_len(master) == 32, SL_E_INPUT, "%s: master key must be 32 bytes",
	          master_file);
	SL_GUARD(sl_file_read(path, KS_MAX_FILE, &buf, &len));
	SL_ENSURE(len >= KS_HDR + 16 && memcmp(buf, KS_MAGIC, 4) == 0, SL_E_INTEGRITY,
	          "%s: not a seclaunchd keystore (bad magic or truncated)", path);
	sl_reader_init(&r, buf, len, path);
	SL_GUARD(sl_read_skip(&r, 4, "magic"));
	SL_GUARD(sl_read_u8(&r, &ver, "version"));
	SL_ENSURE(ver == 1, SL_E_VERSION, "%s: keystore version %u", path, ver);
	SL_GUARD(sl_read_zeros(&r, 3, "reserved"));
	SL_GUARD(sl_read_view(&r, KMSD_GCM_IV, &iv, "iv"));
	SL_GUARD(sl_read_u32be(&r, &clen, "ciphertext length"));
	SL_ENSURE(sl_reader_left(&r) == (size_t)clen + 16, SL_E_INTEGRITY,
	          "%s: keystore truncated or extended", path);
	SL_GUARD(sl_read_view(&r, clen, &ct, "ciphertext"));
	SL_GUARD(sl_read_view(&r, 16, &tag, "tag"));
	SL_GUARD(sl_secret_new(clen > 0 ? clen : 1, &pt));
	rc = kmsd_gcm_open(sl_secret_data(master), iv, buf, KS_HDR, ct, clen, tag,
	                   sl_secret_data(pt));
	SL_ENSURE(rc == SL_OK, SL_E_INTEGRITY,
	          "%s: keystore does not authenticate under the master key (tampered, or another "
	          "master key)",
	          path);
	SL_GUARD(kmsd_keystore_open(st, master_file, &ks));
	sl_reader_init(&p, sl_secret_data(pt), clen, "keystore");
	SL_GUARD(sl_read_u32be(&p, &count, "count"));
	SL_ENSURE(count <= KS_MAX_KEYS, SL_E_FORMAT, "%s: %u keys", path, count);
	for (uint32_t i = 0; i < count; i++) {
		sl_reader sub;
		const uint8_t *idp, *kek;
		char id[SL_KMS_ID_MAX + 1];
		uint8_t wrapped[60];
		SL_GUARD(sl_read_lp8(&p, &sub, "key id"));
		SL_ENSURE(sub.len >= 1 && sub.len <= SL_KMS_ID_MAX, SL_E_FORMAT,
		          "%s: entry %u id length", path, i);
		SL_GUARD(sl_read_view(&sub, sl_reader_left(&sub), &idp, "key id"));
		memcpy(id, idp, sub.len);
		id[sub.len] = '\0';
		SL_ENSURE(kmsd_valid_key_id(id), SL_E_FORMAT, "%s: entry %u: invalid id", path, i);
		SL_GUARD(sl_read_view(&p, 32, &kek, "kek"));
		SL_GUARD(kmsd_keystore_seal(ks, id, 1, kek, wrapped));
		rc = kmsd_store_key_create(st, id, "local", wrapped, sizeof(wrapped),
		                           (int64_t)time(NULL));
		sl_wipe(wrapped, sizeof(wrapped));
		if (rc == SL_E_EXISTS) {
			/* the same id under another KEK would leave every DEK the file's
			 * KEK wrapped unreadable: only the same key counts as there */
			struct same_kek sk = {kek, false};
			uint8_t row[KMSD_KEK_WRAPPED_MAX];
			size_t rlen = 0;
			bool retired = false, found = false;
			if (kmsd_store_kek_get(st, id, 1, row, &rlen, &retired, &found) != SL_OK ||
			    !found ||
			    kmsd_keystore_with(ks, id, 1, row, rlen, same_kek, &sk) != SL_OK ||
			    !sk.same)
				SL_FAIL(
				    SL_E_INPUT,
				    "%s: key '%s' is in the store already under another KEK "
				    "(%s); nothing of it was imported: the datasets wrapped under "
				    "the file's key '%s' would not open. Rename one of them (or "
				    "import into an empty store)",
				    path, id, sl_err_detail(), id);
			n->keys_had++;
			continue;
		}
		if (rc != SL_OK)
			goto out;
		n->keys++;
	}
	SL_GUARD(sl_reader_expect_end(&p));
	rc = SL_OK;
out:
	kmsd_keystore_close(ks);
	sl_secret_free(pt);
	sl_secret_free(master);
	free(buf);
	return rc;
}

static SL_RESULT dev_file(const char *dir, const char *name, char **out)
{
	if (asprintf(out, "%s/%s", dir, name) < 0)
		return sl_err_set(SL_E_NOMEM, "path");
	return SL_OK;
}

static void tool_usage(FILE *f)
{
	fprintf(f, "Usage: seclaunchd migrate --from-state DIR [--config FILE]\n"
	           "       seclaunchd backup --to FILE (--config FILE | --dev --state DIR)\n");
}

int kmsd_tool_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"from-state", required_argument, NULL, 'f'},
	    {"config", required_argument, NULL, 'c'},
	    {"state", required_argument, NULL, 's'},
	    {"dev", no_argument, NULL, 'd'},
	    {"to", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *cmd = argv[0], *from = NULL, *config = NULL, *state = NULL, *to = NULL;
	kmsd_config cfg;
	kmsd_store *st = NULL;
	struct counts n = {0};
	char *reg = NULL, *ks = NULL;
	sl_err rc = SL_OK;
	int c;
	bool migrate = strcmp(cmd, "migrate") == 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			from = optarg;
			break;
		case 'c':
			config = optarg;
			break;
		case 's':
			state = optarg;
			break;
		case 'd':
			break;
		case 't':
			to = optarg;
			break;
		case 'h':
			tool_usage(stdout);
			return 0;
		default:
			tool_usage(stderr);
			return SL_CAT_USAGE;
		}
	}
	if (optind != argc || (migrate && from == NULL) || (!migrate && to == NULL) ||
	    (!migrate && config == NULL && state == NULL)) {
		fprintf(stderr, "seclaunchd %s: %s\n", cmd,
		        migrate ? "--from-state DIR is required"
		                : "--to FILE and a store are required");
		tool_usage(stderr);
		return SL_CAT_USAGE;
	}
	kmsd_config_defaults(&cfg);
	if (config != NULL)
		rc = kmsd_config_load(&cfg, config);
	if (config == NULL) {
		const char *dir = migrate ? from : state;
		if (rc == SL_OK)
			rc = dev_file(dir, "state.db", &cfg.store);
		if (rc == SL_OK)
			rc = dev_file(dir, "master.key", &cfg.master_key_file);
		if (rc == SL_OK)
			rc = dev_file(dir, "registry.key", &cfg.registry_key_file);
	}
	if (rc == SL_OK && (cfg.store == NULL || cfg.registry_key_file == NULL))
		rc = sl_err_set(SL_E_INPUT,
		                "config: \"store\" and \"registry_key_file\" are required");
	if (rc == SL_OK)
		rc = kmsd_store_open(cfg.store, 1, &st);
	if (rc == SL_OK && !migrate) {
		rc = kmsd_store_backup(st, to);
		if (rc == SL_OK)
			printf("seclaunchd backup: %s store copied to %s\n", kmsd_store_kind(st),
			       to);
		goto done;
	}
	if (rc == SL_OK)
		rc = cfg.registry_file ? (reg = strdup(cfg.registry_file)) ? SL_OK : SL_E_NOMEM
		                       : dev_file(from, "registry.json", &reg);
	if (rc == SL_OK)
		rc = cfg.keystore_file ? (ks = strdup(cfg.keystore_file)) ? SL_OK : SL_E_NOMEM
		                       : dev_file(from, "keystore", &ks);
	if (rc == SL_OK && exists(reg))
		rc = import_registry(st, reg, cfg.registry_key_file, &n);
	if (rc == SL_OK && exists(ks)) {
		if (cfg.master_key_file == NULL)
			rc = sl_err_set(SL_E_INPUT,
			                "config: \"master_key_file\" is required to import %s", ks);
		else
			rc = import_keystore(st, ks, cfg.master_key_file, &n);
	}
	if (rc == SL_OK)
		printf(
		    "seclaunchd migrate: into the %s store: %zu AKs imported (%zu already there), "
		    "%zu keys imported (%zu already there)\n",
		    kmsd_store_kind(st), n.aks, n.aks_had, n.keys, n.keys_had);
done:
	kmsd_store_close(st);
	free(reg);
	free(ks);
	kmsd_config_free(&cfg);
	if (rc != SL_OK) {
		fprintf(stderr, "seclaunchd %s: error: %s\n", cmd,
		        sl_err_detail()[0] ? sl_err_detail() : sl_err_message(rc));
		return sl_err_exit_code(rc);
	}
	return 0;
}
