/* seclaunchd configuration: defaults, the JSON config file (unknown keys
 * are errors), and the --dev state directory. docs/seclaunchd.md lists every
 * key. */
#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon.h"
#include "seclaunch/audit.h"

void kmsd_config_defaults(kmsd_config *c)
{
	memset(c, 0, sizeof(*c));
	c->threads = 2;
	/* handlers mostly wait (the audit fsync, the store, the key process):
	 * the group commit's batch can only be as large as the number of
	 * handlers waiting at once */
	c->workers = 64;
	c->max_body = 256 * 1024;
	c->max_connections = 512;
	c->idle_timeout_s = 30;
	c->max_challenges = 65536;
	c->challenge_ttl_s = 60;
	c->refusal_rate_per_min = 60;
	c->enroll_rate_per_min = 30;
	c->audit_aggregate_s = 60;
	c->audit_checkpoint_s = 60;
	c->backend = KMSD_KEK_LOCAL;
}

json_t *kmsd_config_defaults_json(void)
{
	kmsd_config c;
	kmsd_config_defaults(&c);
	return json_pack(
	    "{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s}",
	    "accept_ek_without_cert", c.accept_ek_without_cert, "threads", (json_int_t)c.threads,
	    "workers", (json_int_t)c.workers, "store_pool", (json_int_t)c.store_pool, "max_body",
	    (json_int_t)c.max_body, "max_connections", (json_int_t)c.max_connections,
	    "idle_timeout_s", (json_int_t)c.idle_timeout_s, "max_challenges",
	    (json_int_t)c.max_challenges, "challenge_ttl_s", (json_int_t)c.challenge_ttl_s,
	    "refusal_rate_per_min", (json_int_t)c.refusal_rate_per_min, "enroll_rate_per_min",
	    (json_int_t)c.enroll_rate_per_min, "audit_aggregate_s", (json_int_t)c.audit_aggregate_s,
	    "audit_checkpoint_s", (json_int_t)c.audit_checkpoint_s, "kek_backend",
	    c.backend == KMSD_KEK_LOCAL ? "local" : "pkcs11");
}

void kmsd_config_free(kmsd_config *c)
{
	char **strs[] = {&c->state_dir,          &c->listen,
	                 &c->tls_cert,           &c->tls_key,
	                 &c->admin_token_file,   &c->registry_file,
	                 &c->registry_key_file,  &c->audit_log,
	                 &c->ek_ca_dir,          &c->policy,
	                 &c->policy_pubkey,      &c->url_file,
	                 &c->keystore_file,      &c->master_key_file,
	                 &c->p11_module,         &c->p11_token_label,
	                 &c->p11_pin_file,       &c->gcp_jwks,
	                 &c->aws_trust_dir,      &c->ak_ca_dir,
	                 &c->audit_key_file,     &c->collateral_dir,
	                 &c->log_file,           &c->wrap_token_file,
	                 &c->operate_token_file, &c->metrics_token_file,
	                 &c->aws_region,         &c->aws_kms_endpoint,
	                 &c->aws_metadata_url};
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		free(*strs[i]);
		*strs[i] = NULL;
	}
	free(c->store);
	c->store = NULL;
}

struct strkey {
	const char *name;
	size_t off;
};

#define S(n, f)                                                                                    \
	{                                                                                          \
		n, offsetof(kmsd_config, f)                                                        \
	}
static const struct strkey str_keys[] = {
    S("listen", listen),
    S("tls_cert", tls_cert),
    S("tls_key", tls_key),
    S("admin_token_file", admin_token_file),
    S("wrap_token_file", wrap_token_file),
    S("operate_token_file", operate_token_file),
    S("metrics_token_file", metrics_token_file),
    S("store", store),
    S("registry", registry_file),
    S("registry_key_file", registry_key_file),
    S("audit_log", audit_log),
    S("audit_key_file", audit_key_file),
    S("ek_ca_dir", ek_ca_dir),
    S("policy", policy),
    S("policy_pubkey", policy_pubkey),
    S("url_file", url_file),
    S("log_file", log_file),
    S("gcp_jwks", gcp_jwks),
    S("aws_trust_dir", aws_trust_dir),
    S("ak_ca_dir", ak_ca_dir),
    S("collateral_dir", collateral_dir),
    S("keystore", keystore_file),
    S("master_key_file", master_key_file),
    S("pkcs11_module", p11_module),
    S("pkcs11_token_label", p11_token_label),
    S("pkcs11_pin_file", p11_pin_file),
    S("aws_region", aws_region),
    S("aws_kms_endpoint", aws_kms_endpoint),
    S("aws_metadata_url", aws_metadata_url),
};
#undef S

static SL_RESULT set_uint(const char *path, const char *k, json_t *v, uint64_t lo, uint64_t hi,
                          uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)lo ||
	    json_integer_value(v) > (json_int_t)hi)
		return sl_err_set(SL_E_INPUT, "%s: \"%s\" must be an integer in %llu..%llu", path,
		                  k, (unsigned long long)lo, (unsigned long long)hi);
	*out = (uint64_t)json_integer_value(v);
	return SL_OK;
}

static SL_RESULT apply(kmsd_config *c, const char *path, const char *k, json_t *v)
{
	sl_err rc = SL_E_INPUT;
	uint64_t u = 0;
	for (size_t i = 0; i < sizeof(str_keys) / sizeof(str_keys[0]); i++) {
		if (strcmp(k, str_keys[i].name) != 0)
			continue;
		char **dst = (char **)((char *)c + str_keys[i].off);
		SL_ENSURE(json_is_string(v) && json_string_length(v) > 0, SL_E_INPUT,
		          "%s: \"%s\" must be a non-empty string", path, k);
		free(*dst);
		*dst = strdup(json_string_value(v));
		SL_ENSURE(*dst != NULL, SL_E_NOMEM, "config");
		return SL_OK;
	}
	if (strcmp(k, "accept_ek_without_cert") == 0) {
		SL_ENSURE(json_is_boolean(v), SL_E_INPUT, "%s: \"%s\" must be true or false", path,
		          k);
		c->accept_ek_without_cert = json_is_true(v);
	} else if (strcmp(k, "threads") == 0) {
		SL_GUARD(set_uint(path, k, v, 1, 256, &u));
		c->threads = (unsigned)u;
	} else if (strcmp(k, "workers") == 0) {
		SL_GUARD(set_uint(path, k, v, 0, 1024, &u));
		c->workers = (unsigned)u;
	} else if (strcmp(k, "store_pool") == 0) {
		SL_GUARD(set_uint(path, k, v, 0, KMSD_STORE_POOL_MAX, &u));
		c->store_pool = (unsigned)u;
	} else if (strcmp(k, "max_body") == 0) {
		SL_GUARD(set_uint(path, k, v, 1024, 16u << 20, &u));
		c->max_body = (size_t)u;
	} else if (strcmp(k, "max_connections") == 0) {
		SL_GUARD(set_uint(path, k, v, 1, 65536, &u));
		c->max_connections = (unsigned)u;
	} else if (strcmp(k, "idle_timeout_s") == 0) {
		SL_GUARD(set_uint(path, k, v, 1, 3600, &u));
		c->idle_timeout_s = (unsigned)u;
	} else if (strcmp(k, "max_challenges") == 0) {
		SL_GUARD(set_uint(path, k, v, 1, 10000000, &u));
		c->max_challenges = (size_t)u;
	} else if (strcmp(k, "challenge_ttl_s") == 0) {
		SL_GUARD(set_uint(path, k, v, 1, 600, &u));
		c->challenge_ttl_s = (unsigned)u;
	} else if (strcmp(k, "refusal_rate_per_min") == 0) {
		SL_GUARD(set_uint(path, k, v, 0, 1000000, &u));
		c->refusal_rate_per_min = (unsigned)u;
	} else if (strcmp(k, "enroll_rate_per_min") == 0) {
		SL_GUARD(set_uint(path, k, v, 0, 1000000, &u));
		c->enroll_rate_per_min = (unsigned)u;
	} else if (strcmp(k, "audit_checkpoint_s") == 0) {
		SL_GUARD(set_uint(path, k, v, 0, 86400, &u));
		c->audit_checkpoint_s = (unsigned)u;
	} else if (strcmp(k, "audit_aggregate_s") == 0) {
		SL_GUARD(set_uint(path, k, v, 0, 3600, &u));
		c->audit_aggregate_s = (unsigned)u;
	} else if (strcmp(k, "kek_backend") == 0) {
		const char *s = json_string_value(v);
		SL_ENSURE(s != NULL && (strcmp(s, "local") == 0 || strcmp(s, "pkcs11") == 0 ||
		                        strcmp(s, "aws-kms") == 0),
		          SL_E_INPUT,
		          "%s: \"kek_backend\" must be \"local\", \"pkcs11\" or \"aws-kms\"", path);
		c->backend = strcmp(s, "local") == 0    ? KMSD_KEK_LOCAL
		             : strcmp(s, "pkcs11") == 0 ? KMSD_KEK_PKCS11
		                                        : KMSD_KEK_AWS;
	} else {
		SL_FAIL(SL_E_INPUT, "%s: unknown key \"%.64s\"", path, k);
	}
	rc = SL_OK;
out:
	return rc;
}

/* A line whose first non-blank character is '#' is a comment: blanked, so the
 * parser's line numbers stay right. A JSON string cannot span lines, so such
 * a line is never inside one. */
static void blank_comments(uint8_t *b, size_t n)
{
	bool bol = true, comment = false;
	for (size_t i = 0; i < n; i++) {
		if (b[i] == '\n') {
			bol = true;
			comment = false;
		} else if (bol && b[i] == '#') {
			comment = true;
			bol = false;
		} else if (b[i] != ' ' && b[i] != '\t') {
			bol = false;
		}
		if (comment)
			b[i] = ' ';
	}
}

sl_err kmsd_config_load(kmsd_config *c, const char *path)
{
	sl_err rc = SL_E_INPUT;
	uint8_t *buf = NULL;
	size_t len = 0;
	json_t *root = NULL, *v;
	json_error_t je;
	const char *k;
	SL_GUARD(sl_file_read(path, 1 << 20, &buf, &len));
	blank_comments(buf, len);
	root = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &je);
	SL_ENSURE(root != NULL, SL_E_INPUT, "%s: line %d: %s", path, je.line, je.text);
	SL_ENSURE(json_is_object(root), SL_E_INPUT, "%s: must be a JSON object", path);
	json_object_foreach (root, k, v)
		SL_GUARD(apply(c, path, k, v));
	rc = SL_OK;
out:
	json_decref(root);
	free(buf);
	return rc;
}

static SL_RESULT dev_path(kmsd_config *c, char **field, const char *name)
{
	if (*field != NULL)
		return SL_OK;
	if (asprintf(field, "%s/%s", c->state_dir, name) < 0) {
		*field = NULL;
		return sl_err_set(SL_E_NOMEM, "config");
	}
	return SL_OK;
}

static bool exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

/* A 0600 file of 32 random bytes (raw), or hex text when hex is set. */
static SL_RESULT make_secret_file(const char *path, bool hex)
{
	sl_err rc = SL_E_NOMEM;
	sl_secret *s = NULL, *h = NULL;
	if (exists(path))
		return SL_OK;
	SL_GUARD(sl_secret_random(32, &s));
	if (hex) {
		SL_GUARD(sl_secret_new(65, &h));
		sl_hex_encode(sl_secret_data(s), 32, (char *)sl_secret_data(h));
		sl_secret_data(h)[64] = '\n';
		SL_GUARD(sl_file_write_atomic(path, sl_secret_data(h), 65, 0600, false));
	} else {
		SL_GUARD(sl_file_write_atomic(path, sl_secret_data(s), 32, 0600, false));
	}
	rc = SL_OK;
out:
	sl_secret_free(s);
	sl_secret_free(h);
	return rc;
}

sl_err kmsd_config_dev(kmsd_config *c)
{
	sl_err rc = SL_E_IO;
	char *ca = NULL;
	SL_ENSURE(c->state_dir != NULL, SL_E_USAGE, "--dev needs --state DIR");
	SL_ENSURE(mkdir(c->state_dir, 0700) == 0 || errno == EEXIST, SL_E_IO, "%s: mkdir: %s",
	          c->state_dir, strerror(errno));
	SL_GUARD(kmsd_state_dir_check(c->state_dir));
	if (c->listen == NULL) {
		c->listen = strdup("127.0.0.1:0");
		SL_ENSURE(c->listen != NULL, SL_E_NOMEM, "config");
	}
	SL_GUARD(dev_path(c, &c->url_file, "url"));
	SL_GUARD(dev_path(c, &c->admin_token_file, "admin.token"));
	SL_GUARD(dev_path(c, &c->wrap_token_file, "wrap.token"));
	SL_GUARD(dev_path(c, &c->operate_token_file, "operate.token"));
	SL_GUARD(dev_path(c, &c->metrics_token_file, "metrics.token"));
	SL_GUARD(dev_path(c, &c->store, "state.db"));
	SL_GUARD(dev_path(c, &c->registry_file, "registry.json"));
	SL_GUARD(dev_path(c, &c->registry_key_file, "registry.key"));
	SL_GUARD(dev_path(c, &c->audit_log, "audit.log"));
	if (c->audit_key_file == NULL) {
		char *pub = NULL;
		SL_GUARD(dev_path(c, &c->audit_key_file, "audit.key"));
		SL_ENSURE(asprintf(&pub, "%s/audit.pub", c->state_dir) >= 0, SL_E_NOMEM, "config");
		if (!exists(c->audit_key_file))
			rc = sl_audit_keygen(c->audit_key_file, pub);
		else
			rc = SL_OK;
		free(pub);
		if (rc != SL_OK)
			goto out;
	}
	SL_GUARD(dev_path(c, &c->keystore_file, "keystore"));
	SL_GUARD(dev_path(c, &c->master_key_file, "master.key"));
	SL_GUARD(make_secret_file(c->admin_token_file, true));
	SL_GUARD(make_secret_file(c->wrap_token_file, true));
	SL_GUARD(make_secret_file(c->operate_token_file, true));
	SL_GUARD(make_secret_file(c->metrics_token_file, true));
	SL_GUARD(make_secret_file(c->registry_key_file, false));
	if (c->backend == KMSD_KEK_LOCAL)
		SL_GUARD(make_secret_file(c->master_key_file, false));
	if (c->ek_ca_dir == NULL)
		c->accept_ek_without_cert = true;
	if (c->tls_cert == NULL || c->tls_key == NULL) {
		SL_GUARD(dev_path(c, &c->tls_cert, "server.pem"));
		SL_GUARD(dev_path(c, &c->tls_key, "server.key"));
		SL_ENSURE(asprintf(&ca, "%s/ca.pem", c->state_dir) >= 0, SL_E_NOMEM, "config");
		if (!exists(ca) || !exists(c->tls_cert) || !exists(c->tls_key))
			SL_GUARD(kmsd_devca_create(ca, c->tls_cert, c->tls_key));
	}
	rc = SL_OK;
out:
	free(ca);
	return rc;
}

sl_err kmsd_config_check(const kmsd_config *c)
{
	sl_err rc = SL_E_INPUT;
	struct {
		const char *name;
		const char *v;
	} need[] = {
	    {"listen", c->listen},       {"tls_cert", c->tls_cert},
	    {"tls_key", c->tls_key},     {"admin_token_file", c->admin_token_file},
	    {"store", c->store},         {"registry_key_file", c->registry_key_file},
	    {"audit_log", c->audit_log},
	};
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		SL_ENSURE(need[i].v != NULL, SL_E_INPUT, "config: \"%s\" is required",
		          need[i].name);
	if (c->backend == KMSD_KEK_LOCAL) {
		SL_ENSURE(c->master_key_file != NULL, SL_E_INPUT,
		          "config: kek_backend \"local\" needs \"master_key_file\"");
	} else if (c->backend == KMSD_KEK_AWS) {
		SL_ENSURE(c->aws_region != NULL, SL_E_INPUT,
		          "config: kek_backend \"aws-kms\" needs \"aws_region\"");
		if (c->aws_kms_endpoint != NULL)
			SL_GUARD(kmsd_aws_endpoint_check(c->aws_kms_endpoint));
	} else {
		SL_ENSURE(c->p11_module != NULL && c->p11_token_label != NULL &&
		              c->p11_pin_file != NULL,
		          SL_E_INPUT,
		          "config: kek_backend \"pkcs11\" needs \"pkcs11_module\", "
		          "\"pkcs11_token_label\" and \"pkcs11_pin_file\"");
	}
	SL_ENSURE(c->ek_ca_dir != NULL || c->accept_ek_without_cert, SL_E_INPUT,
	          "config: \"ek_ca_dir\" is required (or \"accept_ek_without_cert\": true)");
	SL_ENSURE((c->policy == NULL) == (c->policy_pubkey == NULL), SL_E_INPUT,
	          "config: \"policy\" and \"policy_pubkey\" go together");
	rc = SL_OK;
out:
	return rc;
}
