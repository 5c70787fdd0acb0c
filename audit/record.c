/* The audit record: parsing and checking one line (untrusted bytes), hashes,
 * times, and the streaming line reader used by verify and export. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit_int.h"
#include "seclaunch/json.h"

#define MAX_SHORT_FIELD 1024 /* host, actor, ids: generous, but bounded */
#define MAX_EVENT 128

void audit_genesis_hex(char out[static AUDIT_HEX_LEN + 1])
{
	audit_line_hash((const uint8_t *)AUDIT_GENESIS_LABEL, strlen(AUDIT_GENESIS_LABEL), out);
}

void audit_line_hash(const uint8_t *line, size_t len, char out[static AUDIT_HEX_LEN + 1])
{
	uint8_t d[SL_SHA256_LEN];
	sl_sha256(line, len, d);
	sl_hex_encode(d, sizeof(d), out);
}

bool audit_is_hex(const char *s, size_t n)
{
	if (s == NULL || strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
	}
	return true;
}

void audit_now(char *buf, size_t n)
{
	struct timespec ts;
	struct tm tm;
	char base[24];
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, n, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

static bool digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static int num(const char *s, size_t n)
{
	int v = 0;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (s[i] - '0');
	return v;
}

/* "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z". Parsed by position rather
 * than strptime so that nothing but this exact form is accepted. */
sl_err sl_audit_time_parse(const char *s, int64_t *ms, const char *field)
{
	sl_err rc = SL_E_INPUT;
	struct tm tm;
	size_t len = s != NULL ? strlen(s) : 0;
	int frac_ms = 0;

	memset(&tm, 0, sizeof(tm));
	SL_ENSURE(len >= 10 && digits(s, 4) && s[4] == '-' && digits(s + 5, 2) && s[7] == '-' &&
	              digits(s + 8, 2),
	          SL_E_INPUT, "%s: '%s' is not an RFC 3339 UTC time (2026-11-29T18:55:04.123Z)",
	          field, s != NULL ? s : "");
	tm.tm_year = num(s, 4) - 1900;
	tm.tm_mon = num(s + 5, 2) - 1;
	tm.tm_mday = num(s + 8, 2);
	if (len > 10) {
		SL_ENSURE(len >= 20 && (s[10] == 'T' || s[10] == 't') && digits(s + 11, 2) &&
		              s[13] == ':' && digits(s + 14, 2) && s[16] == ':' &&
		              digits(s + 17, 2),
		          SL_E_INPUT, "%s: '%s' is not an RFC 3339 UTC time", field, s);
		tm.tm_hour = num(s + 11, 2);
		tm.tm_min = num(s + 14, 2);
		tm.tm_sec = num(s + 17, 2);
		size_t i = 19;
		if (s[i] == '.') {
			size_t start = ++i;
			while (i < len && s[i] >= '0' && s[i] <= '9')
				i++;
			SL_ENSURE(i > start && i - start <= 9, SL_E_INPUT,
			          "%s: '%s': bad fractional seconds", field, s);
			for (size_t k = 0; k < 3; k++)
				frac_ms = frac_ms * 10 + (start + k < i ? s[start + k] - '0' : 0);
		}
		SL_ENSURE(i + 1 == len && (s[i] == 'Z' || s[i] == 'z'), SL_E_INPUT,
		          "%s: '%s' must be UTC and end in Z", field, s);
	}
	SL_ENSURE(tm.tm_mon >= 0 && tm.tm_mon < 12 && tm.tm_mday >= 1 && tm.tm_mday <= 31 &&
	              tm.tm_hour < 24 && tm.tm_min < 60 && tm.tm_sec <= 60,
	          SL_E_INPUT, "%s: '%s': field out of range", field, s);
	{
		struct tm check = tm;
		time_t t = timegm(&check);
		/* timegm normalises 31 Feb into March: refuse dates that moved */
		SL_ENSURE(check.tm_mday == tm.tm_mday && check.tm_mon == tm.tm_mon, SL_E_INPUT,
		          "%s: '%s': no such date", field, s);
		*ms = (int64_t)t * 1000 + frac_ms;
	}
	rc = SL_OK;
out:
	return rc;
}

const char *audit_str(json_t *rec, const char *key)
{
	return sl_json_getstr(rec, key);
}

int64_t audit_record_ms(json_t *rec)
{
	int64_t ms = 0;
	if (sl_audit_time_parse(audit_str(rec, "time"), &ms, "time") != SL_OK)
		return 0;
	return ms;
}

static const char *const record_keys[] = {
    "seq",     "time",          "host",    "actor",         "event",
    "job_id",  "dataset_id",    "key_id",  "policy_digest", "decision",
    "reasons", "claims_digest", "details", "prev",          NULL,
};

/* A required string field with a length bound; nullable ones may be null. */
static SL_RESULT check_str(json_t *rec, const char *key, bool nullable, size_t max)
{
	json_t *v = json_object_get(rec, key);
	if (v == NULL)
		return sl_err_set(SL_E_FORMAT, "field '%s' is missing", key);
	if (json_is_null(v) && nullable)
		return SL_OK;
	if (!json_is_string(v))
		return sl_err_set(SL_E_FORMAT, "field '%s' must be a string%s", key,
		                  nullable ? " or null" : "");
	if (json_string_length(v) > max || strlen(json_string_value(v)) != json_string_length(v))
		return sl_err_set(SL_E_FORMAT, "field '%s' is longer than %zu bytes or holds NUL",
		                  key, max);
	return SL_OK;
}

static SL_RESULT check_digest(json_t *rec, const char *key, bool nullable)
{
	json_t *v = json_object_get(rec, key);
	if (v == NULL)
		return sl_err_set(SL_E_FORMAT, "field '%s' is missing", key);
	if (json_is_null(v) && nullable)
		return SL_OK;
	if (!audit_is_hex(json_string_value(v), AUDIT_HEX_LEN))
		return sl_err_set(SL_E_FORMAT, "field '%s' must be 64 lower-case hex digits", key);
	return SL_OK;
}

static SL_RESULT check_event(const char *ev)
{
	size_t n = ev != NULL ? strlen(ev) : 0;
	if (n == 0 || n > MAX_EVENT)
		return sl_err_set(SL_E_FORMAT, "field 'event' must be 1..%d characters", MAX_EVENT);
	for (size_t i = 0; i < n; i++) {
		char c = ev[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return sl_err_set(SL_E_FORMAT,
			                  "field 'event': '%c' not allowed (a-z 0-9 . _ -)", c);
	}
	return SL_OK;
}

/* A checkpoint carries nothing but its signature details. */
static SL_RESULT check_checkpoint(json_t *rec)
{
	static const char *const must_null[] = {"job_id",        "dataset_id", "key_id",
	                                        "policy_digest", "decision",   "reasons",
	                                        "claims_digest"};
	json_t *d = json_object_get(rec, "details");
	for (size_t i = 0; i < sizeof(must_null) / sizeof(must_null[0]); i++)
		if (!json_is_null(json_object_get(rec, must_null[i])))
			return sl_err_set(SL_E_FORMAT, "checkpoint: field '%s' must be null",
			                  must_null[i]);
	if (!json_is_object(d) || json_object_size(d) != 3)
		return sl_err_set(SL_E_FORMAT,
		                  "checkpoint: details must be {reason, key_id, sig} and no more");
	const char *reason = sl_json_getstr(d, "reason");
	if (reason == NULL || (strcmp(reason, "interval") != 0 && strcmp(reason, "close") != 0 &&
	                       strcmp(reason, "rotate") != 0 && strcmp(reason, "request") != 0))
		return sl_err_set(
		    SL_E_FORMAT,
		    "checkpoint: details.reason must be interval|close|rotate|request");
	if (!audit_is_hex(sl_json_getstr(d, "key_id"), AUDIT_KEYID_HEX))
		return sl_err_set(SL_E_FORMAT, "checkpoint: details.key_id must be 16 hex digits");
	const char *sig = sl_json_getstr(d, "sig");
	if (sig == NULL || strlen(sig) != 88)
		return sl_err_set(SL_E_FORMAT,
		                  "checkpoint: details.sig must be 64 bytes in base64");
	return SL_OK;
}

static SL_RESULT check_recovered(json_t *rec)
{
	json_t *torn = json_object_get(json_object_get(rec, "details"), "torn");
	size_t i;
	json_t *t;
	if (!json_is_array(torn) || json_array_size(torn) == 0 ||
	    json_array_size(torn) > AUDIT_MAX_TORN)
		return sl_err_set(SL_E_FORMAT,
		                  "audit.recovered: details.torn must be an array of "
		                  "1..%d {sha256, bytes}",
		                  AUDIT_MAX_TORN);
	json_array_foreach (torn, i, t) {
		json_t *b = json_object_get(t, "bytes");
		if (!audit_is_hex(sl_json_getstr(t, "sha256"), AUDIT_HEX_LEN) ||
		    !json_is_integer(b) || json_integer_value(b) < 0 ||
		    json_integer_value(b) > (json_int_t)SL_AUDIT_MAX_LINE)
			return sl_err_set(
			    SL_E_FORMAT,
			    "audit.recovered: details.torn[%zu] must be {sha256, bytes}", i);
	}
	return SL_OK;
}

/* What the reader's parser would refuse in a tree the writer built: nesting
 * deeper than jansson's parser limit, a NUL in a string or an object key
 * (rendered as \u0000, which the parser refuses). depth: the level of v (the
 * record itself is 1). */
static SL_RESULT check_tree(const json_t *v, size_t depth)
{
	const char *k;
	size_t klen, i;
	json_t *m;
	if (json_is_string(v))
		return memchr(json_string_value(v), '\0', json_string_length(v)) == NULL
		           ? SL_OK
		           : sl_err_set(SL_E_FORMAT, "a string holds a NUL byte");
	if (!json_is_object(v) && !json_is_array(v))
		return SL_OK;
	if (depth > JSON_PARSER_MAX_DEPTH)
		return sl_err_set(SL_E_FORMAT, "nested deeper than %d levels",
		                  JSON_PARSER_MAX_DEPTH);
	if (json_is_array(v)) {
		json_array_foreach (v, i, m)
			if (check_tree(m, depth + 1) != SL_OK)
				return SL_E_FORMAT;
		return SL_OK;
	}
	json_object_keylen_foreach((json_t *)v, k, klen, m)
	{
		if (memchr(k, '\0', klen) != NULL)
			return sl_err_set(SL_E_FORMAT, "an object key holds a NUL byte");
		if (check_tree(m, depth + 1) != SL_OK)
			return SL_E_FORMAT;
	}
	return SL_OK;
}

static SL_RESULT audit_check_record(json_t *rec);

sl_err audit_check_built(json_t *rec)
{
	sl_err rc = check_tree(rec, 1);
	return rc != SL_OK ? rc : audit_check_record(rec);
}

sl_err sl_audit_parse_line(const uint8_t *line, size_t len, json_t **out)
{
	sl_err rc = SL_E_FORMAT;
	json_error_t jerr;
	json_t *rec = NULL;

	SL_ENSURE(len <= SL_AUDIT_MAX_LINE, SL_E_TOO_LARGE, "line of %zu bytes (at most %u)", len,
	          SL_AUDIT_MAX_LINE);
	rec = json_loadb((const char *)line, len, JSON_REJECT_DUPLICATES, &jerr);
	SL_ENSURE(rec != NULL, SL_E_FORMAT, "not JSON: %s at column %d", jerr.text, jerr.column);
	SL_GUARD(audit_check_record(rec));
	if (out != NULL) {
		*out = rec;
		rec = NULL;
	}
	rc = SL_OK;
out:
	json_decref(rec);
	return rc;
}

/* The field rules a reader applies to a parsed record (sl_audit_parse_line). */
static SL_RESULT audit_check_record(json_t *rec)
{
	sl_err rc = SL_E_FORMAT;
	const char *key;
	json_t *v;
	int64_t ms;

	SL_ENSURE(json_is_object(rec), SL_E_FORMAT, "not a JSON object");
	key = sl_json_unknown(rec, record_keys);
	SL_ENSURE(key == NULL, SL_E_FORMAT, "unknown field '%.64s'", key);
	v = json_object_get(rec, "seq");
	SL_ENSURE(json_is_integer(v) && json_integer_value(v) >= 1, SL_E_FORMAT,
	          "field 'seq' must be an integer >= 1");
	SL_GUARD(check_str(rec, "time", false, 40));
	SL_GUARD(sl_audit_time_parse(audit_str(rec, "time"), &ms, "field 'time'"));
	SL_GUARD(check_str(rec, "host", false, MAX_SHORT_FIELD));
	SL_GUARD(check_str(rec, "actor", false, MAX_SHORT_FIELD));
	SL_GUARD(check_str(rec, "event", false, MAX_EVENT));
	SL_GUARD(check_event(audit_str(rec, "event")));
	SL_GUARD(check_str(rec, "job_id", true, MAX_SHORT_FIELD));
	SL_GUARD(check_str(rec, "dataset_id", true, MAX_SHORT_FIELD));
	SL_GUARD(check_str(rec, "key_id", true, MAX_SHORT_FIELD));
	SL_GUARD(check_digest(rec, "policy_digest", true));
	SL_GUARD(check_str(rec, "decision", true, 32));
	v = json_object_get(rec, "reasons");
	SL_ENSURE(v != NULL && (json_is_null(v) || json_is_array(v)), SL_E_FORMAT,
	          "field 'reasons' must be an array or null");
	SL_GUARD(check_digest(rec, "claims_digest", true));
	v = json_object_get(rec, "details");
	SL_ENSURE(v != NULL && (json_is_null(v) || json_is_object(v)), SL_E_FORMAT,
	          "field 'details' must be an object or null");
	SL_GUARD(check_digest(rec, "prev", false));
	if (strcmp(audit_str(rec, "event"), SL_AUDIT_EV_CHECKPOINT) == 0)
		SL_GUARD(check_checkpoint(rec));
	else if (strcmp(audit_str(rec, "event"), SL_AUDIT_EV_RECOVERED) == 0)
		SL_GUARD(check_recovered(rec));
	rc = SL_OK;
out:
	return rc;
}

sl_err audit_lines_open(audit_lines *l, const char *path)
{
	memset(l, 0, sizeof(*l));
	l->path = path;
	l->f = fopen(path, "rbe");
	if (l->f == NULL)
		return sl_err_set(SL_E_IO, "%s: cannot open: %s", path, strerror(errno));
	return SL_OK;
}

sl_err audit_lines_next(audit_lines *l, bool *got)
{
	sl_err rc = SL_E_IO;
	int c;

	*got = false;
	l->len = 0;
	l->unterminated = false;
	if (l->eof)
		return SL_OK;
	/* getc_unlocked on a buffered FILE (one thread owns it): the cap is enforced byte by byte,
	 * so a line can never grow the buffer past SL_AUDIT_MAX_LINE + 1. */
	while ((c = getc_unlocked(l->f)) != EOF && c != '\n') {
		if (l->len == SL_AUDIT_MAX_LINE)
			SL_FAIL(SL_E_TOO_LARGE, "%s:%zu: line longer than %u bytes", l->path,
			        l->lineno + 1, SL_AUDIT_MAX_LINE);
		if (l->len == l->cap) {
			size_t ncap = l->cap == 0 ? 4096 : l->cap * 2;
			if (ncap > SL_AUDIT_MAX_LINE)
				ncap = SL_AUDIT_MAX_LINE;
			uint8_t *nb = realloc(l->buf, ncap);
			SL_ENSURE(nb != NULL, SL_E_NOMEM, "%s: line buffer", l->path);
			l->buf = nb;
			l->cap = ncap;
		}
		l->buf[l->len++] = (uint8_t)c;
	}
	SL_ENSURE(!ferror(l->f), SL_E_IO, "%s:%zu: read error", l->path, l->lineno + 1);
	if (c == EOF) {
		l->eof = true;
		if (l->len == 0) {
			rc = SL_OK;
			goto out;
		}
		l->unterminated = true;
	}
	l->lineno++;
	*got = true;
	rc = SL_OK;
out:
	return rc;
}

void audit_lines_close(audit_lines *l)
{
	if (l->f != NULL)
		fclose(l->f);
	free(l->buf);
	memset(l, 0, sizeof(*l));
}
