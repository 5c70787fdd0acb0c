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

#define FIELD(f) offsetof(kmsd_config, f), sizeof(((kmsd_config *)0)->f)
#define STR(n, f, fl)                                                                              \
	{                                                                                          \
		n, KMSD_SET_STR, FIELD(f), 0, 0, fl                                                \
	}
#define NUM(n, f, lo, hi, fl)                                                                      \
	{                                                                                          \
		n, KMSD_SET_UINT, FIELD(f), lo, hi, fl                                             \
	}
#define RESTART KMSD_SET_RESTART
/* Every setting once (daemon.h). A reload names the restart-only keys it
 * leaves unchanged in this order, the strings first. */
const struct kmsd_setting kmsd_settings[] = {
    STR("listen", listen, RESTART),
    STR("tls_cert", tls_cert, RESTART),
    STR("tls_key", tls_key, RESTART),
    STR("admin_token_file", admin_token_file, RESTART),
    STR("wrap_token_file", wrap_token_file, RESTART),
    STR("operate_token_file", operate_token_file, RESTART),
    STR("metrics_token_file", metrics_token_file, RESTART),
    STR("store", store, RESTART),
    STR("registry", registry_file, RESTART),
    STR("registry_key_file", registry_key_file, RESTART),
    STR("audit_log", audit_log, RESTART),
    STR("audit_key_file", audit_key_file, RESTART),
    STR("ek_ca_dir", ek_ca_dir, 0),
    STR("policy", policy, 0),
    STR("policy_pubkey", policy_pubkey, 0),
    STR("url_file", url_file, RESTART),
    STR("log_file", log_file, 0),
    STR("gcp_jwks", gcp_jwks, 0),
    STR("aws_trust_dir", aws_trust_dir, 0),
    STR("ak_ca_dir", ak_ca_dir, 0),
    STR("collateral_dir", collateral_dir, 0),
    STR("keystore", keystore_file, RESTART),
    STR("master_key_file", master_key_file, RESTART),
    STR("pkcs11_module", p11_module, RESTART),
    STR("pkcs11_token_label", p11_token_label, RESTART),
    STR("pkcs11_pin_file", p11_pin_file, RESTART),
    STR("aws_region", aws_region, 0),
    STR("aws_kms_endpoint", aws_kms_endpoint, 0),
    STR("aws_metadata_url", aws_metadata_url, 0),
    STR("state_dir", state_dir, RESTART | KMSD_SET_OPTION),
    {"accept_ek_without_cert", KMSD_SET_BOOL, FIELD(accept_ek_without_cert), 0, 0, 0},
    NUM("threads", threads, 1, 256, RESTART),
    NUM("workers", workers, 0, 1024, RESTART),
    NUM("store_pool", store_pool, 0, KMSD_STORE_POOL_MAX, RESTART),
    NUM("max_body", max_body, 1024, 16u << 20, 0),
    NUM("max_connections", max_connections, 1, 65536, RESTART),
    NUM("idle_timeout_s", idle_timeout_s, 1, 3600, RESTART),
    NUM("max_challenges", max_challenges, 1, 10000000, RESTART),
    NUM("challenge_ttl_s", challenge_ttl_s, 1, 600, RESTART),
    NUM("refusal_rate_per_min", refusal_rate_per_min, 0, 1000000, 0),
    {"kek_backend", KMSD_SET_BACKEND, FIELD(backend), 0, 0, RESTART},
    NUM("enroll_rate_per_min", enroll_rate_per_min, 0, 1000000, RESTART),
    NUM("audit_checkpoint_s", audit_checkpoint_s, 0, 86400, RESTART),
    NUM("audit_aggregate_s", audit_aggregate_s, 0, 3600, 0),
};
const size_t kmsd_nsettings = sizeof(kmsd_settings) / sizeof(kmsd_settings[0]);
#undef RESTART
#undef NUM
#undef STR
#undef FIELD

/* kek_backend's values, by enum kmsd_backend */
static const char *const BACKENDS[] = {"local", "pkcs11", "aws-kms"};
_Static_assert(sizeof(enum kmsd_backend) == sizeof(uint32_t), "kek_backend is read as 32 bits");

unsigned long long kmsd_setting_num(const kmsd_config *c, const struct kmsd_setting *s)
{
	const char *p = (const char *)c + s->off;
	if (s->size == sizeof(uint64_t)) {
		uint64_t v;
		memcpy(&v, p, sizeof(v));
		return v;
	}
	if (s->size == sizeof(uint32_t)) {
		uint32_t v;
		memcpy(&v, p, sizeof(v));
		return v;
	}
	bool b;
	memcpy(&b, p, sizeof(b));
	return b;
}

static void set_num(kmsd_config *c, const struct kmsd_setting *s, uint64_t u)
{
	char *p = (char *)c + s->off;
	if (s->size == sizeof(uint64_t)) {
		memcpy(p, &u, sizeof(u));
	} else if (s->size == sizeof(uint32_t)) {
		uint32_t v = (uint32_t)u;
		memcpy(p, &v, sizeof(v));
	} else {
		bool b = u != 0;
		memcpy(p, &b, sizeof(b));
	}
}

json_t *kmsd_config_defaults_json(void)
{
	kmsd_config c;
	json_t *o = json_object();
	kmsd_config_defaults(&c);
	for (size_t i = 0; o != NULL && i < kmsd_nsettings; i++) {
		const struct kmsd_setting *s = &kmsd_settings[i];
		unsigned long long u = kmsd_setting_num(&c, s);
		json_t *v = s->kind == KMSD_SET_BOOL      ? json_boolean(u)
		            : s->kind == KMSD_SET_UINT    ? json_integer((json_int_t)u)
		            : s->kind == KMSD_SET_BACKEND ? json_string(BACKENDS[u])
		                                          : NULL;
		if (s->kind != KMSD_SET_STR && json_object_set_new(o, s->name, v) != 0) {
			json_decref(o);
			o = NULL;
		}
	}
	return o;
}

void kmsd_config_free(kmsd_config *c)
{
	for (size_t i = 0; i < kmsd_nsettings; i++) {
		if (kmsd_settings[i].kind != KMSD_SET_STR)
			continue;
		char **p = (char **)((char *)c + kmsd_settings[i].off);
		free(*p);
		*p = NULL;
	}
}

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
	const struct kmsd_setting *s = NULL;
	uint64_t u = 0;
	for (size_t i = 0; s == NULL && i < kmsd_nsettings; i++)
		if (!(kmsd_settings[i].flags & KMSD_SET_OPTION) &&
		    strcmp(k, kmsd_settings[i].name) == 0)
			s = &kmsd_settings[i];
	SL_ENSURE(s != NULL, SL_E_INPUT, "%s: unknown key \"%.64s\"", path, k);
	switch (s->kind) {
	case KMSD_SET_STR: {
		char **dst = (char **)((char *)c + s->off);
		SL_ENSURE(json_is_string(v) && json_string_length(v) > 0, SL_E_INPUT,
		          "%s: \"%s\" must be a non-empty string", path, k);
		free(*dst);
		*dst = strdup(json_string_value(v));
		SL_ENSURE(*dst != NULL, SL_E_NOMEM, "config");
		break;
	}
	case KMSD_SET_BOOL:
		SL_ENSURE(json_is_boolean(v), SL_E_INPUT, "%s: \"%s\" must be true or false", path,
		          k);
		set_num(c, s, json_is_true(v));
		break;
	case KMSD_SET_UINT:
		SL_GUARD(set_uint(path, k, v, s->lo, s->hi, &u));
		set_num(c, s, u);
		break;
	case KMSD_SET_BACKEND: {
		const char *b = json_string_value(v);
		for (u = 0; b != NULL && u < sizeof(BACKENDS) / sizeof(BACKENDS[0]); u++)
			if (strcmp(b, BACKENDS[u]) == 0)
				break;
		SL_ENSURE(b != NULL && u < sizeof(BACKENDS) / sizeof(BACKENDS[0]), SL_E_INPUT,
		          "%s: \"kek_backend\" must be \"local\", \"pkcs11\" or \"aws-kms\"", path);
		set_num(c, s, u);
		break;
	}
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
