/* Exporting audit records: JSON Lines (the lines verbatim), CEF (ArcSight
 * Common Event Format), OCSF 1.3 JSON and CSV (RFC 4180). The mappings are
 * specified in docs/audit.md. */
#include <string.h>

#include "audit_int.h"
#include "seclaunch/json.h"

#define OCSF_VERSION "1.3.0"

sl_err sl_audit_format_parse(const char *name, sl_audit_format *out)
{
	static const struct {
		const char *name;
		sl_audit_format f;
	} t[] = {{"jsonl", SL_AUDIT_FMT_JSONL},
	         {"cef", SL_AUDIT_FMT_CEF},
	         {"ocsf", SL_AUDIT_FMT_OCSF},
	         {"csv", SL_AUDIT_FMT_CSV}};
	for (size_t i = 0; name != NULL && i < sizeof(t) / sizeof(t[0]); i++) {
		if (strcmp(name, t[i].name) == 0) {
			*out = t[i].f;
			return SL_OK;
		}
	}
	return sl_err_set(SL_E_USAGE, "--format: '%s' is not one of jsonl, cef, ocsf, csv",
	                  name != NULL ? name : "");
}

/* What each event is, for CEF's Name and OCSF's class. Unknown events fall
 * back to their prefix's row, then to the last row. */
typedef struct event_map {
	const char *event; /* exact, or a prefix ending in '.' */
	const char *name;
	int ocsf_class;
	int ocsf_activity;
	const char *ocsf_activity_name;
} event_map;

static const event_map events[] = {
    {SL_AUDIT_EV_KMS_START, "KMS started", 6002, 3, "Start"},
    {SL_AUDIT_EV_KMS_STOP, "KMS stopped", 6002, 4, "Stop"},
    {SL_AUDIT_EV_CHALLENGE, "Attestation nonce issued", 6003, 1, "Create"},
    {SL_AUDIT_EV_ENROLL, "TPM enrollment", 6003, 1, "Create"},
    {SL_AUDIT_EV_KEY_CREATE, "Key encryption key created", 3004, 1, "Create"},
    {SL_AUDIT_EV_KEY_WRAP, "Dataset key wrapped", 6003, 1, "Create"},
    {SL_AUDIT_EV_RELEASE, "Key release", 6003, 2, "Read"},
    {"kms.key.rotate", "Key encryption key rotated", 3004, 3, "Update"},
    {"kms.key.disable", "Key encryption key disabled", 3004, 3, "Update"},
    {"kms.key.enable", "Key encryption key enabled", 3004, 3, "Update"},
    {"kms.key.retire", "Key encryption key versions retired", 3004, 3, "Update"},
    {"kms.key.rewrap", "Dataset key rewrapped", 3004, 3, "Update"},
    {"kms.key.delete", "Key encryption key deleted", 3004, 4, "Delete"},
    {SL_AUDIT_EV_RUN_START, "Attested launch started", 6002, 3, "Start"},
    {SL_AUDIT_EV_RUN_RELEASE, "Keys received", 6003, 2, "Read"},
    {SL_AUDIT_EV_RUN_JOB_START, "Job started", 1007, 1, "Launch"},
    {SL_AUDIT_EV_RUN_JOB_EXIT, "Job exited", 1007, 2, "Terminate"},
    {SL_AUDIT_EV_RUN_PREFLIGHT, "Policy pre-flight", 0, 99, "Other"},
    {SL_AUDIT_EV_RUN_STAGE, "Data staged", 0, 99, "Other"},
    {SL_AUDIT_EV_RUN_WIPE, "Keys and data wiped", 0, 99, "Other"},
    {SL_AUDIT_EV_RUN_ERROR, "Launch failed", 0, 99, "Other"},
    {SL_AUDIT_EV_OUTPUT, "Output key issued", 6003, 1, "Create"},
    {SL_AUDIT_EV_RUN_OUTPUT, "Output sealed", 0, 99, "Other"},
    {SL_AUDIT_EV_RUN_PREEMPTED, "Preemption handled", 0, 99, "Other"},
    {SL_AUDIT_EV_CHECKPOINT, "Audit log checkpoint", 0, 99, "Other"},
    {SL_AUDIT_EV_RECOVERED, "Audit log torn line recovered", 0, 99, "Other"},
    {"kms.", "KMS event", 6003, 99, "Other"},
    {"run.", "Launch event", 0, 99, "Other"},
    {"", "seclaunch event", 0, 99, "Other"},
};

static const event_map *map_event(const char *ev)
{
	size_t n = sizeof(events) / sizeof(events[0]);
	for (size_t i = 0; i < n; i++)
		if (strcmp(events[i].event, ev) == 0)
			return &events[i];
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(events[i].event);
		if (l > 0 && events[i].event[l - 1] == '.' && strncmp(ev, events[i].event, l) == 0)
			return &events[i];
	}
	return &events[n - 1];
}

static void put_escaped(FILE *out, const char *s, const char *specials, bool newlines_escaped)
{
	for (; *s != '\0'; s++) {
		if (*s == '\n' || *s == '\r') {
			if (newlines_escaped)
				fputs(*s == '\n' ? "\\n" : "\\r", out);
			else
				fputc(' ', out); /* the CEF header has no escape for them */
		} else {
			if (strchr(specials, *s) != NULL)
				fputc('\\', out);
			fputc(*s, out);
		}
	}
}

/* CEF header fields escape backslash and pipe. */
static void cef_hdr(FILE *out, const char *s)
{
	put_escaped(out, s, "\\|", false);
	fputc('|', out);
}

/* CEF extension values escape backslash, equals sign, CR and LF. */
static void cef_ext(FILE *out, const char *key, const char *val)
{
	if (val == NULL)
		return;
	fprintf(out, " %s=", key);
	put_escaped(out, val, "\\=", true);
}

/* reasons as one string: strings as they are, anything else as JSON, "; "
 * between them. Returns malloc'd memory or NULL when there are none. */
static char *reasons_text(json_t *rec)
{
	json_t *r = json_object_get(rec, "reasons");
	size_t i;
	json_t *e;
	char *buf = NULL;
	size_t len = 0;
	FILE *m;

	if (!json_is_array(r) || json_array_size(r) == 0)
		return NULL;
	m = open_memstream(&buf, &len);
	if (m == NULL)
		return NULL;
	json_array_foreach (r, i, e) {
		if (i > 0)
			fputs("; ", m);
		if (json_is_string(e)) {
			fputs(json_string_value(e), m);
		} else {
			char *j =
			    json_dumps(e, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
			if (j != NULL)
				fputs(j, m);
			free(j);
		}
	}
	fclose(m);
	return buf;
}

static char *json_text(json_t *rec, const char *key)
{
	json_t *v = json_object_get(rec, key);
	if (v == NULL || json_is_null(v))
		return NULL;
	return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
}

static int severity_cef(json_t *rec)
{
	const char *d = audit_str(rec, "decision");
	if (d != NULL && strcmp(d, SL_AUDIT_DENY) == 0)
		return 7;
	if (d != NULL && strcmp(d, SL_AUDIT_ERROR) == 0)
		return 5;
	return 3;
}

static void write_cef(FILE *out, json_t *rec)
{
	const char *ev = audit_str(rec, "event");
	const char *d = audit_str(rec, "decision");
	char num[32], *reasons = reasons_text(rec), *details = json_text(rec, "details");

	fputs("CEF:0|", out);
	cef_hdr(out, "seclaunch");
	cef_hdr(out, "seclaunch");
	cef_hdr(out, SL_VERSION);
	cef_hdr(out, ev);
	cef_hdr(out, map_event(ev)->name);
	fprintf(out, "%d|", severity_cef(rec));
	snprintf(num, sizeof(num), "%lld", (long long)audit_record_ms(rec));
	fprintf(out, "rt=%s", num);
	snprintf(num, sizeof(num), "%lld",
	         (long long)json_integer_value(json_object_get(rec, "seq")));
	cef_ext(out, "externalId", num);
	cef_ext(out, "dvchost", audit_str(rec, "host"));
	cef_ext(out, "suser", audit_str(rec, "actor"));
	cef_ext(out, "act", d);
	if (d != NULL)
		cef_ext(out, "outcome", strcmp(d, SL_AUDIT_ALLOW) == 0 ? "success" : "failure");
	cef_ext(out, "reason", reasons);
	static const char *const cs[][2] = {{"job_id", "jobId"},
	                                    {"dataset_id", "datasetId"},
	                                    {"key_id", "keyId"},
	                                    {"policy_digest", "policyDigest"},
	                                    {"claims_digest", "claimsDigest"},
	                                    {"prev", "prevHash"}};
	for (size_t i = 0; i < 6; i++) {
		const char *v = audit_str(rec, cs[i][0]);
		char key[16];
		if (v == NULL)
			continue;
		snprintf(key, sizeof(key), "cs%zuLabel", i + 1);
		cef_ext(out, key, cs[i][1]);
		snprintf(key, sizeof(key), "cs%zu", i + 1);
		cef_ext(out, key, v);
	}
	/* a seclaunchd release / enrollment record's subject (docs/audit.md) */
	json_t *sub = json_object_get(json_object_get(rec, "details"), "subject");
	if (json_is_object(sub)) {
		char kinds[128] = "", region[160];
		json_t *k = json_object_get(sub, "tee_kinds");
		size_t kl = 0;
		for (size_t i = 0; i < json_array_size(k); i++) {
			const char *v = sl_json_strval(json_array_get(k, i));
			int n =
			    v ? snprintf(kinds + kl, sizeof(kinds) - kl, "%s%s", kl ? "," : "", v)
			      : 0;
			if (n > 0 && (size_t)n < sizeof(kinds) - kl)
				kl += (size_t)n;
			else
				kinds[kl] = '\0';
		}
		cef_ext(out, "src", audit_str(sub, "client"));
		cef_ext(out, "deviceExternalId", audit_str(sub, "ak_name"));
		if (audit_str(sub, "region") != NULL) {
			snprintf(region, sizeof(region), "%s (%s)", audit_str(sub, "region"),
			         json_is_true(json_object_get(sub, "region_verified"))
			             ? "verified"
			             : "unverified");
			cef_ext(out, "flexString1Label", "region");
			cef_ext(out, "flexString1", region);
		}
		if (kinds[0]) {
			cef_ext(out, "flexString2Label", "teeKinds");
			cef_ext(out, "flexString2", kinds);
		}
	}
	cef_ext(out, "msg", details);
	fputc('\n', out);
	free(reasons);
	free(details);
}

/* A spreadsheet runs a cell starting with one of these as a formula
 * (=HYPERLINK(...), +cmd|..., -2+3, @SUM(...)); tab and CR can hide such a
 * start. Record fields come from requests, so an unauthenticated client can
 * plant one (a dataset_id, a job_id): OWASP's CSV-injection advice is to
 * prefix the cell with a single quote, which spreadsheets show as text. */
static bool csv_formula_start(const char *s)
{
	return s[0] != '\0' && strchr("=+-@\t\r", s[0]) != NULL;
}

/* RFC 4180: a field with a comma, quote, CR or LF is quoted, quotes doubled;
 * a field that a spreadsheet would run as a formula gets a leading '. */
static void csv_field(FILE *out, const char *s, bool last)
{
	if (s != NULL) {
		bool neuter = csv_formula_start(s);
		if (strpbrk(s, ",\"\r\n") != NULL) {
			fputc('"', out);
			if (neuter)
				fputc('\'', out);
			for (; *s != '\0'; s++) {
				if (*s == '"')
					fputc('"', out);
				fputc(*s, out);
			}
			fputc('"', out);
		} else {
			if (neuter)
				fputc('\'', out);
			fputs(s, out);
		}
	}
	fputs(last ? "\r\n" : ",", out);
}

static const char *const csv_cols[] = {
    "seq",    "time",          "host",     "actor",   "event",         "job_id",  "dataset_id",
    "key_id", "policy_digest", "decision", "reasons", "claims_digest", "details", "prev",
};
#define NCOLS (sizeof(csv_cols) / sizeof(csv_cols[0]))

static void write_csv(FILE *out, json_t *rec)
{
	for (size_t i = 0; i < NCOLS; i++) {
		json_t *v = json_object_get(rec, csv_cols[i]);
		char *text = NULL;
		if (json_is_string(v))
			text = strdup(json_string_value(v));
		else if (v != NULL && !json_is_null(v))
			text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
		csv_field(out, text, i + 1 == NCOLS);
		free(text);
	}
}

static int ocsf_severity(json_t *rec)
{
	const char *d = audit_str(rec, "decision");
	if (d != NULL && strcmp(d, SL_AUDIT_DENY) == 0)
		return 3; /* Medium */
	if (d != NULL && strcmp(d, SL_AUDIT_ERROR) == 0)
		return 4; /* High */
	return 1;         /* Informational */
}

static const char *ocsf_class_name(int cls)
{
	switch (cls) {
	case 1007:
		return "Process Activity";
	case 3004:
		return "Entity Management";
	case 6002:
		return "Application Lifecycle";
	case 6003:
		return "API Activity";
	default:
		return "Base Event";
	}
}

/* OCSF's hostname_t: dot-separated labels of letters, digits and inner
 * hyphens. A host name that is not one goes to the endpoint's `name`. */
static bool ocsf_hostname(const char *s)
{
	size_t label = 0;
	if (s == NULL || *s == '\0')
		return false;
	for (const char *p = s; *p != '\0'; p++) {
		bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		             (*p >= '0' && *p <= '9');
		if (*p == '.') {
			if (label == 0 || p[-1] == '-')
				return false;
			label = 0;
		} else if (alnum || (*p == '-' && label > 0)) {
			label++;
		} else {
			return false;
		}
	}
	return label > 0 && s[strlen(s) - 1] != '-';
}

/* {hostname: host} (or {name: host}) plus `extra`'s members */
static json_t *ocsf_endpoint(const char *host)
{
	json_t *e = json_object();
	if (e != NULL && host != NULL && *host != '\0')
		json_object_set_new(e, ocsf_hostname(host) ? "hostname" : "name",
		                    json_string(host));
	return e;
}

/* The class an event is exported as. A class is used only when the record
 * holds what the class requires (OCSF 1.3.0): API Activity the caller's
 * endpoint (for a seclaunchd record, details.subject.client; for the
 * launcher, which calls the KMS, its own host), Entity Management the
 * entity (key_id), Process Activity the process (details.pid). A record
 * without it is a Base Event, so nothing is invented. */
static int ocsf_class(const event_map *m, json_t *rec, const char *client)
{
	const char *ev = audit_str(rec, "event");
	json_t *det = json_object_get(rec, "details");
	switch (m->ocsf_class) {
	case 6003:
		if (strncmp(ev, "kms.", 4) == 0 && client == NULL)
			return 0;
		return 6003;
	case 3004:
		return audit_str(rec, "key_id") != NULL ? 3004 : 0;
	case 1007:
		return json_is_integer(json_object_get(det, "pid")) ? 1007 : 0;
	default:
		return m->ocsf_class;
	}
}

/* The class-specific attributes. Where device and actor come from the host
 * profile (Application Lifecycle, Entity Management) it is declared in
 * metadata.profiles; Process Activity takes them itself; API Activity takes
 * actor, not device; Base Event neither (the record stays in `unmapped`). */
static void ocsf_class_attrs(json_t *o, json_t *md, int cls, json_t *rec, const char *client)
{
	const char *ev = audit_str(rec, "event"), *host = audit_str(rec, "host");
	json_t *det = json_object_get(rec, "details");
	bool kms = strncmp(ev, "kms.", 4) == 0;

	if (cls == 0)
		return;
	json_object_set_new(o, "actor",
	                    json_pack("{s:{s:s?}, s:s}", "user", "name", audit_str(rec, "actor"),
	                              "app_name", "seclaunch"));
	if (cls != 6003)
		json_object_set_new(o, "device", ocsf_endpoint(host));
	if (cls == 6002 || cls == 3004)
		json_object_set_new(md, "profiles", json_pack("[s]", "host"));
	if (json_is_object(json_object_get(o, "device")))
		json_object_set_new(json_object_get(o, "device"), "type_id", json_integer(0));
	if (cls == 6003) {
		json_object_set_new(o, "api", json_pack("{s:s}", "operation", ev));
		if (kms) {
			/* seclaunchd wrote it: the KMS is the destination, the client
			 * the source */
			json_object_set_new(o, "src_endpoint", json_pack("{s:s}", "ip", client));
			json_object_set_new(o, "dst_endpoint", ocsf_endpoint(host));
		} else {
			json_t *src = ocsf_endpoint(host);
			if (client != NULL)
				json_object_set_new(src, "ip", json_string(client));
			json_object_set_new(o, "src_endpoint", src);
		}
	} else if (cls == 6002) {
		json_object_set_new(o, "app",
		                    json_pack("{s:s, s:s, s:s}", "name",
		                              kms ? "seclaunchd" : "seclaunch", "vendor_name",
		                              "seclaunch", "version", SL_VERSION));
	} else if (cls == 3004) {
		json_object_set_new(
		    o, "entity",
		    json_pack("{s:s, s:s}", "uid", audit_str(rec, "key_id"), "type", "KEK"));
	} else if (cls == 1007) {
		json_t *proc = json_pack("{s:O}", "pid", json_object_get(det, "pid"));
		if (audit_str(det, "command") != NULL)
			json_object_set_new(proc, "cmd_line",
			                    json_string(audit_str(det, "command")));
		json_object_set_new(o, "process", proc);
		json_t *code = json_object_get(det, "exit_code");
		if (json_is_integer(code))
			json_object_set(o, "exit_code", code);
	}
}

static SL_RESULT write_ocsf(FILE *out, json_t *rec)
{
	sl_err rc = SL_E_NOMEM;
	const char *ev = audit_str(rec, "event");
	const char *d = audit_str(rec, "decision");
	const event_map *m = map_event(ev);
	char *reasons = reasons_text(rec), *text = NULL;
	char uid[32];
	int status = 0; /* Unknown */
	int sev = ocsf_severity(rec);
	json_t *o = NULL, *md = NULL;
	/* a seclaunchd record's subject: the client's address is the source
	 * endpoint; the rest of the subject (AK name, TEE kinds, region) has no
	 * OCSF attribute in these classes and stays in unmapped.details.subject */
	json_t *sub = json_object_get(json_object_get(rec, "details"), "subject");
	const char *client = json_is_object(sub) ? audit_str(sub, "client") : NULL;
	int cls = ocsf_class(m, rec, client);
	int act = cls == m->ocsf_class ? m->ocsf_activity : 99;

	if (d != NULL)
		status = strcmp(d, SL_AUDIT_ALLOW) == 0 ? 1 : 2;
	snprintf(uid, sizeof(uid), "%lld",
	         (long long)json_integer_value(json_object_get(rec, "seq")));
	o = json_object();
	md = json_pack("{s:s, s:s, s:s, s:s?, s:{s:s, s:s, s:s}}", "version", OCSF_VERSION, "uid",
	               uid, "log_name", "seclaunch-audit", "original_time", audit_str(rec, "time"),
	               "product", "name", "seclaunch", "vendor_name", "seclaunch", "version",
	               SL_VERSION);
	SL_ENSURE(o != NULL && md != NULL, SL_E_NOMEM, "OCSF: building the event");
	json_object_set_new(o, "class_uid", json_integer(cls));
	json_object_set_new(o, "class_name", json_string(ocsf_class_name(cls)));
	json_object_set_new(o, "category_uid", json_integer(cls / 1000));
	json_object_set_new(o, "activity_id", json_integer(act));
	/* 99 Other: OCSF wants the source's own activity name there */
	json_object_set_new(o, "activity_name",
	                    json_string(act == 99 ? ev : m->ocsf_activity_name));
	json_object_set_new(o, "type_uid", json_integer((json_int_t)cls * 100 + act));
	json_object_set_new(o, "time", json_integer((json_int_t)audit_record_ms(rec)));
	json_object_set_new(o, "message", json_string(m->name));
	json_object_set_new(o, "severity_id", json_integer(sev));
	json_object_set_new(o, "severity",
	                    json_string(sev == 1   ? "Informational"
	                                : sev == 3 ? "Medium"
	                                           : "High"));
	json_object_set_new(o, "status_id", json_integer(status));
	json_object_set_new(o, "status",
	                    json_string(status == 1   ? "Success"
	                                : status == 2 ? "Failure"
	                                              : "Unknown"));
	if (reasons != NULL)
		json_object_set_new(o, "status_detail", json_string(reasons));
	ocsf_class_attrs(o, md, cls, rec, client);
	json_object_set(o, "metadata", md);
	json_object_set(o, "unmapped", rec);
	text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	SL_ENSURE(text != NULL, SL_E_NOMEM, "OCSF: encoding the event");
	fputs(text, out);
	fputc('\n', out);
	rc = SL_OK;
out:
	free(text);
	free(reasons);
	json_decref(md);
	json_decref(o);
	return rc;
}

static bool selected(const sl_audit_export_opts *o, json_t *rec)
{
	int64_t ms = audit_record_ms(rec);
	if (o->has_since && ms < o->since_ms)
		return false;
	if (o->has_until && ms >= o->until_ms)
		return false;
	if (o->event != NULL) {
		const char *ev = audit_str(rec, "event");
		size_t l = strlen(o->event);
		/* "kms.*" selects every event that starts with "kms." */
		if (l >= 2 && strcmp(o->event + l - 2, ".*") == 0)
			return strncmp(ev, o->event, l - 1) == 0;
		return strcmp(ev, o->event) == 0;
	}
	return true;
}

sl_err sl_audit_export(const char *const *paths, size_t n, const sl_audit_export_opts *opts,
                       FILE *out, sl_audit_report *report)
{
	sl_err rc = SL_E_USAGE;
	audit_lines l = {0};
	json_t *rec = NULL;
	bool got = false;

	SL_ENSURE(opts != NULL && out != NULL, SL_E_USAGE, "audit export: no options");
	if (opts->verify)
		SL_GUARD(sl_audit_verify(paths, n, &opts->verify_opts, report));
	if (opts->format == SL_AUDIT_FMT_CSV) {
		for (size_t i = 0; i < NCOLS; i++)
			csv_field(out, csv_cols[i], i + 1 == NCOLS);
	}
	for (size_t i = 0; i < n; i++) {
		SL_GUARD(audit_lines_open(&l, paths[i]));
		for (;;) {
			SL_GUARD(audit_lines_next(&l, &got));
			if (!got)
				break;
			if (sl_audit_parse_line(l.buf, l.len, &rec) != SL_OK) {
				/* torn lines: verification already reported them */
				if (!opts->verify && opts->verify_opts.warn != NULL)
					opts->verify_opts.warn(opts->verify_opts.warn_ctx, paths[i],
					                       l.lineno, sl_err_detail());
				sl_err_clear();
				continue;
			}
			if (selected(opts, rec)) {
				switch (opts->format) {
				case SL_AUDIT_FMT_JSONL:
					fwrite(l.buf, 1, l.len, out);
					fputc('\n', out);
					break;
				case SL_AUDIT_FMT_CEF:
					write_cef(out, rec);
					break;
				case SL_AUDIT_FMT_OCSF:
					SL_GUARD(write_ocsf(out, rec));
					break;
				case SL_AUDIT_FMT_CSV:
					write_csv(out, rec);
					break;
				}
			}
			json_decref(rec);
			rec = NULL;
		}
		audit_lines_close(&l);
	}
	SL_ENSURE(fflush(out) == 0 && !ferror(out), SL_E_IO, "audit export: writing the output");
	rc = SL_OK;
out:
	json_decref(rec);
	audit_lines_close(&l);
	return rc;
}
