/* $.datasets[i].workloads: which jobs may receive the dataset's key.
 *
 * A list of alternatives; the job (its workload.* claims, replayed from the
 * workload event log of verified evidence) must match one of them. An
 * alternative allows by full identity digest ("identity": [hex]) or by
 * components, each a list: "exe_sha256", "script_sha256" (hex or "none";
 * a script the launcher could not tell is "unknown" and matches no pin),
 * "image_digest" ("sha256:hex"), "argv" (one glob per argument, positional:
 * the job has exactly as many arguments), "env" (globs: every variable of
 * the job's environment matches one of them). A deny names, per
 * alternative, each component that differed. */
#include <stdio.h>
#include <string.h>

#include "policy_int.h"
#include "seclaunch/json.h"
#include "seclaunch/util.h"

#define TEXT_LEN 900

static const char *const FIELDS[] = {"identity", "exe_sha256", "script_sha256", "image_digest",
                                     "argv",     "env",        "description",   NULL};

static SL_RESULT check_list(const json_t *v, const char *path, const char *field)
{
	size_t i;
	json_t *e;
	if (!json_is_array(v) || json_array_size(v) == 0)
		return sl_policy_verr(path, "must be a non-empty array of strings");
	json_array_foreach (v, i, e) {
		const char *s = sl_json_strval(e);
		if (s == NULL)
			return sl_policy_verr(path, "[%zu] must be a string", i);
		bool ok = true;
		if (strcmp(field, "identity") == 0 || strcmp(field, "exe_sha256") == 0)
			ok = sl_hex_is_lower(s, 64);
		else if (strcmp(field, "script_sha256") == 0)
			ok = sl_hex_is_lower(s, 64) || strcmp(s, "none") == 0;
		else if (strcmp(field, "image_digest") == 0)
			ok = strncmp(s, "sha256:", 7) == 0 && sl_hex_is_lower(s + 7, 64);
		if (!ok)
			return sl_policy_verr(path, "[%zu] '%.80s' is not a %s", i, s,
			                      strcmp(field, "image_digest") == 0
			                          ? "sha256: digest (64 lower-case hex digits)"
			                          : "SHA-256 (64 lower-case hex digits)");
	}
	return SL_OK;
}

sl_err sl_policy_check_workloads(struct vctx *c, const json_t *v, const char *path)
{
	sl_err rc = SL_E_INPUT;
	char p[PATH_MAX_LEN];
	size_t i;
	json_t *alt;

	SL_GUARD(sl_policy_want_type(v, JSON_ARRAY, path, "an array of allowed workloads"));
	if (json_array_size(v) == 0)
		NOTE(
		    sl_policy_verr(path, "an empty list allows no job; leave it out to allow any"));
	json_array_foreach (v, i, alt) {
		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		if (!json_is_object(alt)) {
			NOTE(sl_policy_want_type(alt, JSON_OBJECT, p, "an object"));
			continue;
		}
		NOTE(sl_policy_only_fields(alt, p, FIELDS));
		bool any = false;
		for (size_t f = 0; FIELDS[f] != NULL; f++) {
			const json_t *m = json_object_get(alt, FIELDS[f]);
			char q[PATH_MAX_LEN + 32];
			if (m == NULL || strcmp(FIELDS[f], "description") == 0)
				continue;
			any = true;
			snprintf(q, sizeof(q), "%s.%s", p, FIELDS[f]);
			NOTE(check_list(m, q, FIELDS[f]));
		}
		if (!any)
			NOTE(sl_policy_verr(p, "names nothing to match (identity, exe_sha256, "
			                       "script_sha256, image_digest, argv or env)"));
	}
	rc = SL_OK;
out:
	return rc;
}

static bool in_list(const json_t *l, const char *s)
{
	size_t i;
	json_t *e;
	json_array_foreach (l, i, e)
		if (s != NULL && strcmp(sl_json_strval(e), s) == 0)
			return true;
	return false;
}

static void short_list(const json_t *l, char *buf, size_t n)
{
	size_t i, o = 0;
	json_t *e;
	buf[0] = '\0';
	json_array_foreach (l, i, e) {
		if (o + 24 >= n) {
			snprintf(buf + o, n - o, ", ...");
			return;
		}
		o += (size_t)snprintf(buf + o, n - o, "%s%.16s%s", i ? ", " : "", sl_json_strval(e),
		                      strlen(sl_json_strval(e)) > 16 ? "..." : "");
	}
}

/* Appends to why what of alt the claims differ in; true when none. */
static bool match_alt(const sl_claims *c, const json_t *alt, char *why, size_t n)
{
	static const struct {
		const char *field, *claim, *name;
	} digests[] = {{"identity", "workload.identity", "identity"},
	               {"exe_sha256", "workload.exe_sha256", "executable"},
	               {"script_sha256", "workload.script_sha256", "script"},
	               {"image_digest", "workload.image_digest", "image digest"}};
	char list[300];
	size_t o = 0;
	why[0] = '\0';
#define WHY(...)                                                                                   \
	do {                                                                                       \
		if (o < n)                                                                         \
			o += (size_t)snprintf(why + o, n - o, "%s", o ? "; " : "");                \
		if (o < n)                                                                         \
			o += (size_t)snprintf(why + o, n - o, __VA_ARGS__);                        \
	} while (0)
	for (size_t i = 0; i < sizeof(digests) / sizeof(digests[0]); i++) {
		const json_t *l = json_object_get(alt, digests[i].field);
		const char *have = sl_claims_get(c, digests[i].claim);
		if (l != NULL && have != NULL && strcmp(have, "unknown") == 0) {
			/* never a match, whatever the list holds */
			WHY("%s unknown: seclaunch could not tell which script the interpreter "
			    "runs (%s is \"unknown\"; see `seclaunch measure --predict`), and "
			    "this entry pins it",
			    digests[i].name, digests[i].claim);
			continue;
		}
		if (l == NULL || in_list(l, have))
			continue;
		short_list(l, list, sizeof(list));
		WHY("%s differs: %s is %.24s%s, allowed [%s]", digests[i].name, digests[i].claim,
		    have != NULL && have[0] != '\0' ? have : "(none)",
		    have != NULL && strlen(have) > 24 ? "..." : "", list);
	}
	const json_t *pats = json_object_get(alt, "argv");
	if (pats != NULL) {
		json_t *argv = json_loads(sl_claims_get(c, "workload.argv") ?: "[]", 0, NULL);
		size_t na = json_array_size(argv), np = json_array_size(pats);
		if (na != np) {
			WHY("argv differs: the job has %zu argument%s, the pattern %zu", na,
			    na == 1 ? "" : "s", np);
		} else {
			for (size_t i = 0; i < na; i++) {
				const char *a = sl_json_strval(json_array_get(argv, i));
				const char *pt = sl_json_strval(json_array_get(pats, i));
				if (a == NULL || !sl_policy_glob(pt, a)) {
					WHY("argv[%zu] differs: '%.60s' does not match '%.60s'", i,
					    a ? a : "?", pt);
					break;
				}
			}
		}
		json_decref(argv);
	}
	pats = json_object_get(alt, "env");
	if (pats != NULL) {
		json_t *env = json_loads(sl_claims_get(c, "workload.env") ?: "[]", 0, NULL);
		size_t i, j;
		json_t *e, *pt;
		json_array_foreach (env, i, e) {
			bool ok = false;
			json_array_foreach (pats, j, pt)
				ok = ok || sl_policy_glob(sl_json_strval(pt), sl_json_strval(e));
			if (!ok) {
				const char *kv = sl_json_strval(e);
				const char *eq = strchr(kv, '=');
				WHY("env differs: %.*s is not allowed with this value",
				    (int)(eq ? (size_t)(eq - kv) : strlen(kv)), kv);
				break;
			}
		}
		json_decref(env);
	}
#undef WHY
	return why[0] == '\0';
}

void sl_policy_eval_workloads(const sl_claims *c, const json_t *rule, const char *rpath,
                              sl_policy_note_fn note, void *d)
{
	const json_t *alts = json_object_get(rule, "workloads");
	char path[PATH_MAX_LEN + 16], text[TEXT_LEN];
	size_t i;
	json_t *alt;
	if (alts == NULL)
		return;
	snprintf(path, sizeof(path), "%s.workloads", rpath);
	const char *id = sl_claims_get(c, "workload.identity");
	if (id == NULL) {
		note(d, false, path,
		     "no measured workload (claim workload.identity missing: the evidence carries "
		     "no workload event log)");
		return;
	}
	json_array_foreach (alts, i, alt) {
		snprintf(path, sizeof(path), "%s.workloads[%zu]", rpath, i);
		if (match_alt(c, alt, text, sizeof(text))) {
			char msg[200];
			snprintf(msg, sizeof(msg), "workload %.16s... is allowed", id);
			note(d, true, path, msg);
			return;
		}
	}
	/* no alternative matched: each one says what differed */
	json_array_foreach (alts, i, alt) {
		snprintf(path, sizeof(path), "%s.workloads[%zu]", rpath, i);
		(void)match_alt(c, alt, text, sizeof(text));
		note(d, false, path, text);
	}
}
