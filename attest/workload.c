/* The workload event: its checks, canonical form, digests and claims, and
 * the replay of a workload event log against the quoted register
 * (include/seclaunch/workload.h, docs/claims.md). The log comes from the
 * client: every byte of it is checked here before it counts. */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seclaunch/json.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"
#include "seclaunch/workload.h"

#define F SL_E_ATTEST_FORMAT
#define STR_MAX 65536

static SL_RESULT file_ref(const json_t *o, const char *path)
{
	static const char *const fields[] = {"path", "sha256", NULL};
	sl_err rc = F;
	const char *p = NULL, *h = NULL;
	SL_ENSURE(json_is_object(o), F, "%s: must be an object", path);
	SL_GUARD(sl_json_only(o, fields, F, path));
	SL_GUARD(sl_json_str(o, "path", 4096, F, path, &p));
	SL_GUARD(sl_json_str(o, "sha256", 64, F, path, &h));
	SL_ENSURE(sl_hex_is_lower(h, 64), F, "%s.sha256: must be 64 lower-case hex digits", path);
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT str_array(const json_t *a, const char *path, size_t max)
{
	sl_err rc = F;
	size_t i;
	json_t *e;
	SL_ENSURE(json_is_array(a), F, "%s: must be an array of strings", path);
	SL_ENSURE(json_array_size(a) <= max, F, "%s: more than %zu entries", path, max);
	json_array_foreach (a, i, e)
		SL_ENSURE(sl_json_strval(e) != NULL && strlen(sl_json_strval(e)) <= STR_MAX, F,
		          "%s[%zu]: must be a string without NUL", path, i);
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_workload_event_check(const json_t *ev, const char *path)
{
	static const char *const fields[] = {"type",     "version", "exe",           "script",
	                                     "argv",     "env",     "cwd",           "image_digest",
	                                     "datasets", "outputs", "policy_digest", NULL};
	static const char *const ds_fields[] = {"id", "root", NULL};
	sl_err rc = F;
	char p[160];
	const char *s = NULL;
	const json_t *v;
	size_t i;
	json_t *e;

	SL_ENSURE(json_is_object(ev), F, "%s: must be an object", path);
	SL_GUARD(sl_json_only(ev, fields, F, path));
	SL_GUARD(sl_json_str(ev, "type", 64, F, path, &s));
	SL_ENSURE(strcmp(s, "seclaunch.workload") == 0, F,
	          "%s.type: must be \"seclaunch.workload\"", path);
	v = json_object_get(ev, "version");
	SL_ENSURE(json_is_integer(v) && json_integer_value(v) == 1, SL_E_VERSION,
	          "%s.version: only version 1 is known", path);
	snprintf(p, sizeof(p), "%s.exe", path);
	SL_GUARD(file_ref(json_object_get(ev, "exe"), p));
	v = json_object_get(ev, "script");
	snprintf(p, sizeof(p), "%s.script", path);
	SL_ENSURE(v != NULL, F, "%s: missing (null when there is none)", p);
	if (json_is_string(v))
		SL_ENSURE(strcmp(json_string_value(v), "unknown") == 0, F,
		          "%s: a string must be \"unknown\" (the script could not be told)", p);
	else if (!json_is_null(v))
		SL_GUARD(file_ref(v, p));
	snprintf(p, sizeof(p), "%s.argv", path);
	SL_GUARD(str_array(json_object_get(ev, "argv"), p, SL_WORKLOAD_MAX_ARGS));
	SL_ENSURE(json_array_size(json_object_get(ev, "argv")) >= 1, F, "%s: empty", p);
	snprintf(p, sizeof(p), "%s.env", path);
	SL_GUARD(str_array(json_object_get(ev, "env"), p, SL_WORKLOAD_MAX_ARGS));
	SL_GUARD(sl_json_str(ev, "cwd", 4096, F, path, &s));
	SL_GUARD(sl_json_str(ev, "image_digest", 80, F, path, &s));
	SL_ENSURE(s[0] == '\0' || (strncmp(s, "sha256:", 7) == 0 && sl_hex_is_lower(s + 7, 64)), F,
	          "%s.image_digest: must be \"\" or sha256: and 64 lower-case hex digits", path);
	snprintf(p, sizeof(p), "%s.datasets", path);
	v = json_object_get(ev, "datasets");
	SL_ENSURE(json_is_array(v) && json_array_size(v) <= 64, F,
	          "%s: must be an array of at most 64 {id, root}", p);
	json_array_foreach (v, i, e) {
		char q[200];
		snprintf(q, sizeof(q), "%s[%zu]", p, i);
		SL_ENSURE(json_is_object(e), F, "%s: must be an object", q);
		SL_GUARD(sl_json_only(e, ds_fields, F, q));
		SL_GUARD(sl_json_str(e, "id", 255, F, q, &s));
		SL_GUARD(sl_json_str(e, "root", 80, F, q, &s));
		SL_ENSURE(strncmp(s, "sha256:", 7) == 0 && sl_hex_is_lower(s + 7, 64), F,
		          "%s.root: must be sha256: and 64 lower-case hex digits", q);
	}
	snprintf(p, sizeof(p), "%s.outputs", path);
	SL_GUARD(str_array(json_object_get(ev, "outputs"), p, 64));
	SL_GUARD(sl_json_str(ev, "policy_digest", 64, F, path, &s));
	SL_ENSURE(sl_hex_is_lower(s, 64), F, "%s.policy_digest: must be 64 lower-case hex digits",
	          path);
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_workload_canonical(const json_t *ev, char **text)
{
	/* compact, sorted keys, UTF-8 as is: the form docs/claims.md defines */
	*text = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);
	return *text != NULL ? SL_OK : sl_err_set(SL_E_NOMEM, "workload event text");
}

static SL_RESULT digest_md(const json_t *ev, const EVP_MD *md, uint8_t *out)
{
	char *t = NULL;
	unsigned int n = 0;
	sl_err rc = sl_workload_canonical(ev, &t);
	if (rc != SL_OK)
		return rc;
	rc = EVP_Digest(t, strlen(t), out, &n, md, NULL) == 1 ? SL_OK
	                                                      : sl_err_set(SL_E_CRYPTO, "digest");
	free(t);
	return rc;
}

sl_err sl_workload_event_digest(const json_t *ev, uint8_t out[static 32])
{
	return digest_md(ev, EVP_sha256(), out);
}

sl_err sl_workload_identity(const json_t *ev, uint8_t out[static 32])
{
	json_t *c = json_copy((json_t *)ev);
	if (c == NULL)
		return sl_err_set(SL_E_NOMEM, "workload identity");
	json_object_del(c, "policy_digest");
	sl_err rc = digest_md(c, EVP_sha256(), out);
	json_decref(c);
	return rc;
}

sl_err sl_workload_replay(const json_t *events, bool sha384, uint8_t *out, size_t out_len)
{
	sl_err rc = F;
	const EVP_MD *md = sha384 ? EVP_sha384() : EVP_sha256();
	size_t dl = sha384 ? 48 : 32, i;
	uint8_t reg[96], d[48];
	unsigned int n = 0;
	json_t *e;
	char p[64];

	SL_ENSURE(out_len == dl, SL_E_INTERNAL, "replay: output of %zu bytes", dl);
	SL_ENSURE(json_is_array(events) && json_array_size(events) <= SL_WORKLOAD_MAX_EVENTS, F,
	          "workload_log.events: must be an array of at most %d events",
	          SL_WORKLOAD_MAX_EVENTS);
	memset(reg, 0, sizeof(reg));
	json_array_foreach (events, i, e) {
		snprintf(p, sizeof(p), "workload_log.events[%zu]", i);
		SL_GUARD(sl_workload_event_check(e, p));
		SL_GUARD(digest_md(e, md, d));
		memcpy(reg + dl, d, dl);
		SL_ENSURE(EVP_Digest(reg, 2 * dl, reg, &n, md, NULL) == 1, SL_E_CRYPTO, "replay");
	}
	memcpy(out, reg, dl);
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT set_json(sl_claims *c, const char *key, const json_t *v)
{
	char *t = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	if (t == NULL)
		return sl_err_set(SL_E_NOMEM, "%s", key);
	sl_err rc = sl_claims_set(c, key, t);
	free(t);
	return rc;
}

sl_err sl_workload_claims(const json_t *ev, sl_claims *claims)
{
	sl_err rc = SL_E_NOMEM;
	uint8_t id[32], ed[32];
	const json_t *script = json_object_get(ev, "script");

	SL_GUARD(sl_workload_event_check(ev, "workload event"));
	SL_GUARD(sl_workload_identity(ev, id));
	SL_GUARD(sl_workload_event_digest(ev, ed));
	SL_GUARD(sl_claims_set_hex(claims, "workload.identity", id, 32));
	SL_GUARD(sl_claims_set_hex(claims, "workload.event_sha256", ed, 32));
	SL_GUARD(sl_claims_set(claims, "workload.exe_path",
	                       sl_json_getstr(json_object_get(ev, "exe"), "path")));
	SL_GUARD(sl_claims_set(claims, "workload.exe_sha256",
	                       sl_json_getstr(json_object_get(ev, "exe"), "sha256")));
	/* null: no interpreter, no script; "unknown": an interpreter whose
	 * script could not be told (workload.script_sha256 "unknown", which no
	 * policy pin matches) */
	SL_GUARD(sl_claims_set(claims, "workload.script_path",
	                       json_is_object(script) ? sl_json_getstr(script, "path") : ""));
	SL_GUARD(sl_claims_set(claims, "workload.script_sha256",
	                       json_is_object(script)   ? sl_json_getstr(script, "sha256")
	                       : json_is_string(script) ? "unknown"
	                                                : "none"));
	SL_GUARD(set_json(claims, "workload.argv", json_object_get(ev, "argv")));
	SL_GUARD(set_json(claims, "workload.env", json_object_get(ev, "env")));
	SL_GUARD(sl_claims_set(claims, "workload.cwd", sl_json_getstr(ev, "cwd")));
	SL_GUARD(
	    sl_claims_set(claims, "workload.image_digest", sl_json_getstr(ev, "image_digest")));
	SL_GUARD(set_json(claims, "workload.datasets", json_object_get(ev, "datasets")));
	SL_GUARD(set_json(claims, "workload.outputs", json_object_get(ev, "outputs")));
	SL_GUARD(
	    sl_claims_set(claims, "workload.policy_digest", sl_json_getstr(ev, "policy_digest")));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_workload_verify(const json_t *ev, sl_claims *claims)
{
	static const char *const fields[] = {"register", "events", "current", NULL};
	sl_err rc = F;
	const json_t *log = json_object_get(ev, "workload_log"), *events, *cur;
	const char *reg = NULL, *kind = sl_json_getstr(ev, "kind"), *quoted;
	char ckey[48], hex[97];
	uint8_t val[48];
	bool tdx = false;
	unsigned pcr = 0;

	if (log == NULL)
		return SL_OK;
	SL_ENSURE(json_is_object(log), F, "evidence.workload_log: must be an object");
	SL_GUARD(sl_json_only(log, fields, F, "evidence.workload_log"));
	SL_GUARD(sl_json_str(log, "register", 16, F, "evidence.workload_log", &reg));
	if (kind != NULL && strcmp(kind, "tpm2") == 0) {
		char extra;
		/* 16 and 23 are resettable from locality 0, and 17-22 belong to
		 * DRTM: a log replayed from zero proves nothing there */
		SL_ENSURE(sscanf(reg, "pcr%u%c", &pcr, &extra) == 1 && pcr <= 15, F,
		          "evidence.workload_log.register: '%s' is not pcr0..pcr15 (a PCR that "
		          "cannot be reset)",
		          reg);
		snprintf(ckey, sizeof(ckey), "tpm.pcr.sha256.%u", pcr);
	} else if (kind != NULL && strcmp(kind, "tdx") == 0) {
		SL_ENSURE(strcmp(reg, "rtmr3") == 0, F,
		          "evidence.workload_log.register: TDX workload logs extend rtmr3");
		snprintf(ckey, sizeof(ckey), "tdx.rtmr3");
		tdx = true;
	} else {
		SL_FAIL(F, "evidence.workload_log: not supported for evidence kind '%s'",
		        kind != NULL ? kind : "?");
	}
	quoted = sl_claims_get(claims, ckey);
	SL_ENSURE(quoted != NULL, SL_E_ATTEST,
	          "evidence.workload_log: the evidence does not quote %s (claim %s missing)", reg,
	          ckey);
	events = json_object_get(log, "events");
	SL_GUARD(sl_workload_replay(events, tdx, val, tdx ? 48 : 32));
	sl_hex_encode(val, tdx ? 48 : 32, hex);
	SL_ENSURE(strlen(quoted) == strlen(hex) && sl_ct_eq(quoted, hex, strlen(hex)), SL_E_ATTEST,
	          "evidence.workload_log: %zu event%s replay to %s %.16s..., but the quoted %s is "
	          "%.16s... (the log was edited, reordered or truncated, or the register was "
	          "extended by something else)",
	          json_array_size(events), json_array_size(events) == 1 ? "" : "s", reg, hex, reg,
	          quoted);
	SL_ENSURE(json_array_size(events) > 0, SL_E_ATTEST,
	          "evidence.workload_log: no events (nothing was measured)");
	/* the client says which event is its job's (default: the newest); it
	 * can only name one the register really holds */
	size_t idx = json_array_size(events) - 1;
	if ((cur = json_object_get(log, "current")) != NULL) {
		SL_ENSURE(json_is_integer(cur) && json_integer_value(cur) >= 0 &&
		              (size_t)json_integer_value(cur) < json_array_size(events),
		          F, "evidence.workload_log.current: not an index of events");
		idx = (size_t)json_integer_value(cur);
	}
	SL_GUARD(sl_workload_claims(json_array_get(events, idx), claims));
	SL_GUARD(sl_claims_setf(claims, "workload.events", "%zu", json_array_size(events)));
	SL_GUARD(sl_claims_setf(claims, "workload.register", "%s:%s", tdx ? "tdx" : "tpm2", reg));
	rc = SL_OK;
out:
	return rc;
}
