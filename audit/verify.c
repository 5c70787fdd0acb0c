/* Verifying an audit log: the files, in order, are one stream of lines that
 * must form one hash chain (docs/audit.md, "Verification"). The first bad
 * line is named as "FILE:LINE (seq N): CHECK: what". */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "audit_int.h"

typedef struct garbage {
	char sha[AUDIT_HEX_LEN + 1];
	size_t bytes;
	const char *file;
	size_t line;
	bool unterminated;
	char why[160];
} garbage;

typedef struct vstate {
	const sl_audit_verify_opts *o;
	sl_audit_report *rep;
	bool have_pk;
	uint8_t pk[AUDIT_PK_LEN];
	bool started;
	uint64_t expect_seq;
	char expect_prev[AUDIT_HEX_LEN + 1];
	const char *prev_file; /* where the last record was */
	size_t prev_line;
	bool prev_unterminated;
	size_t ngarb;
	garbage garb[AUDIT_MAX_TORN];
	bool have_anchor;
	uint64_t anchor_seq;
	char anchor_hash[AUDIT_HEX_LEN + 1];
	bool anchor_seen;
} vstate;

static void warn(vstate *v, const char *file, size_t line, const char *fmt, ...) SL_PRINTF(4, 5);
static void warn(vstate *v, const char *file, size_t line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	if (v->o->warn == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	v->o->warn(v->o->warn_ctx, file, line, msg);
}

static SL_RESULT load_anchor(vstate *v, const char *path)
{
	sl_err rc = SL_E_INPUT;
	uint8_t *data = NULL;
	size_t len = 0;
	json_t *rec = NULL;

	SL_GUARD(sl_file_read(path, SL_AUDIT_MAX_LINE + 2, &data, &len));
	while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r'))
		len--;
	rc = sl_audit_parse_line(data, len, &rec);
	if (rc != SL_OK) {
		rc = sl_err_wrap(rc, "anchor %s", path);
		goto out;
	}
	SL_ENSURE(strcmp(audit_str(rec, "event"), SL_AUDIT_EV_CHECKPOINT) == 0, SL_E_INPUT,
	          "anchor %s: not a checkpoint record", path);
	rc = audit_checkpoint_verify(rec, v->pk);
	if (rc != SL_OK) {
		rc = sl_err_wrap(rc, "anchor %s", path);
		goto out;
	}
	v->have_anchor = true;
	v->anchor_seq = (uint64_t)json_integer_value(json_object_get(rec, "seq"));
	audit_line_hash(data, len, v->anchor_hash);
	rc = SL_OK;
out:
	json_decref(rec);
	free(data);
	return rc;
}

/* A recovery record must list exactly the unparsable lines before it. */
static SL_RESULT check_recovery(vstate *v, json_t *rec, const char *file, size_t line, uint64_t seq)
{
	sl_err rc = SL_E_INTEGRITY;
	const char *ev = audit_str(rec, "event");
	json_t *torn = json_object_get(json_object_get(rec, "details"), "torn");

	if (v->ngarb == 0) {
		SL_ENSURE(strcmp(ev, SL_AUDIT_EV_RECOVERED) != 0, SL_E_INTEGRITY,
		          "%s:%zu (seq %llu): recovery: a recovery record with no torn "
		          "line before it",
		          file, line, (unsigned long long)seq);
		return SL_OK;
	}
	garbage *g = &v->garb[0];
	SL_ENSURE(strcmp(ev, SL_AUDIT_EV_RECOVERED) == 0 && json_array_size(torn) == v->ngarb,
	          SL_E_INTEGRITY,
	          "%s:%zu: parse: unparsable line (%s), and the next record (%s:%zu, "
	          "seq %llu) "
	          "does not account for it as a torn line",
	          g->file, g->line, g->why, file, line, (unsigned long long)seq);
	for (size_t i = 0; i < v->ngarb; i++) {
		json_t *t = json_array_get(torn, i);
		g = &v->garb[i];
		SL_ENSURE(strcmp(audit_str(t, "sha256"), g->sha) == 0 &&
		              (size_t)json_integer_value(json_object_get(t, "bytes")) == g->bytes,
		          SL_E_INTEGRITY,
		          "%s:%zu: torn line: its bytes differ from what the recovery record "
		          "(%s:%zu, seq %llu) recorded",
		          g->file, g->line, file, line, (unsigned long long)seq);
		warn(v, g->file, g->line,
		     "torn line (%zu bytes, an interrupted write), recovered by seq %llu", g->bytes,
		     (unsigned long long)seq);
	}
	v->rep->torn_lines += v->ngarb;
	v->ngarb = 0;
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT check_record(vstate *v, json_t *rec, const uint8_t *bytes, size_t len,
                              const char *file, size_t line)
{
	sl_err rc = SL_E_INTEGRITY;
	sl_audit_report *rep = v->rep;
	uint64_t seq = (uint64_t)json_integer_value(json_object_get(rec, "seq"));
	const char *prev = audit_str(rec, "prev");
	const char *ev = audit_str(rec, "event");
	char genesis[AUDIT_HEX_LEN + 1];

	SL_GUARD(check_recovery(v, rec, file, line, seq));
	audit_genesis_hex(genesis);
	if (!v->started) {
		if (seq == 1) {
			SL_ENSURE(
			    strcmp(prev, genesis) == 0, SL_E_INTEGRITY,
			    "%s:%zu (seq 1): prev: the first record's prev is not the genesis "
			    "value",
			    file, line);
		} else {
			SL_ENSURE(v->o->allow_partial, SL_E_TRUNCATED,
			          "%s:%zu (seq %llu): start: the chain does not start at seq 1: "
			          "earlier records or rotated files are missing (give them, or "
			          "--allow-partial)",
			          file, line, (unsigned long long)seq);
			warn(v, file, line,
			     "the chain starts at seq %llu; records before it are not verified "
			     "(--allow-partial)",
			     (unsigned long long)seq);
		}
		v->started = true;
		rep->first_seq = seq;
	} else {
		SL_ENSURE(seq <= v->expect_seq, SL_E_INTEGRITY,
		          "%s:%zu (seq %llu): seq: expected seq %llu after %s:%zu: %llu record(s) "
		          "missing here (deleted, or reordered lines?)",
		          file, line, (unsigned long long)seq, (unsigned long long)v->expect_seq,
		          v->prev_file, v->prev_line, (unsigned long long)(seq - v->expect_seq));
		SL_ENSURE(seq == v->expect_seq, SL_E_INTEGRITY,
		          "%s:%zu (seq %llu): seq: expected seq %llu after %s:%zu: a "
		          "duplicate or "
		          "out-of-order record (inserted or swapped lines?)",
		          file, line, (unsigned long long)seq, (unsigned long long)v->expect_seq,
		          v->prev_file, v->prev_line);
		SL_ENSURE(strcmp(prev, v->expect_prev) == 0, SL_E_INTEGRITY,
		          "%s:%zu (seq %llu): prev: does not match the SHA-256 of the line "
		          "before "
		          "(%s:%zu, seq %llu): that line was edited, or lines were removed or "
		          "inserted between them",
		          file, line, (unsigned long long)seq, v->prev_file, v->prev_line,
		          (unsigned long long)seq - 1);
	}
	if (strcmp(ev, SL_AUDIT_EV_CHECKPOINT) == 0) {
		if (v->have_pk) {
			rc = audit_checkpoint_verify(rec, v->pk);
			if (rc != SL_OK) {
				rc = sl_err_wrap(rc, "%s:%zu (seq %llu)", file, line,
				                 (unsigned long long)seq);
				goto out;
			}
			rep->checkpoints++;
		}
		rep->last_checkpoint = seq;
		rep->unsigned_tail = 0;
		rep->final_checkpoint =
		    strcmp(audit_str(json_object_get(rec, "details"), "reason"), "close") == 0;
	} else {
		rep->unsigned_tail++;
		rep->final_checkpoint = false;
	}
	audit_line_hash(bytes, len, v->expect_prev);
	if (v->have_anchor && seq == v->anchor_seq) {
		SL_ENSURE(strcmp(v->expect_prev, v->anchor_hash) == 0, SL_E_INTEGRITY,
		          "%s:%zu (seq %llu): anchor: this line differs from the anchor's "
		          "checkpoint for seq %llu",
		          file, line, (unsigned long long)seq, (unsigned long long)seq);
		v->anchor_seen = true;
	}
	v->expect_seq = seq + 1;
	v->prev_file = file;
	v->prev_line = line;
	rep->records++;
	rep->last_seq = seq;
	memcpy(rep->head, v->expect_prev, sizeof(rep->head));
	rc = SL_OK;
out:
	return rc;
}

/* With a public key the head must be signed: a chain alone proves nothing
 * against whoever can write the file (they recompute every hash), so records
 * no valid checkpoint covers pass only within max_unsigned_tail. */
static SL_RESULT check_unsigned_tail(vstate *v, const char *f)
{
	sl_err rc = SL_E_INTEGRITY;
	sl_audit_report *rep = v->rep;
	unsigned long long n = rep->unsigned_tail, last = rep->last_seq;
	unsigned long long first = last - n + 1, max = v->o->max_unsigned_tail;

	if (rep->checkpoints == 0) {
		SL_ENSURE(n <= max, SL_E_INTEGRITY,
		          "%s:%zu (seq %llu): unsigned-tail: no checkpoint signature covers "
		          "any of the %llu record(s) (seq %llu..%llu): anyone who can write the "
		          "file can forge such a chain (%s)",
		          f, v->prev_line, last, n, first, last,
		          max == 0 ? "--allow-unsigned-tail accepts a short unsigned log"
		                   : "more than --allow-unsigned-tail allows");
		warn(v, f, v->prev_line,
		     "no checkpoint signature covers any of the %llu record(s) (seq %llu..%llu): "
		     "they are NOT authenticated, only chained (--allow-unsigned-tail)",
		     n, first, last);
	} else {
		SL_ENSURE(n <= max, SL_E_INTEGRITY,
		          "%s:%zu (seq %llu): unsigned-tail: the last %llu record(s) (seq "
		          "%llu..%llu) follow the last checkpoint (seq %llu) and no signature "
		          "covers them: appended by anyone, or a writer that has not closed "
		          "the log (%s)",
		          f, v->prev_line, last, n, first, last,
		          (unsigned long long)rep->last_checkpoint,
		          max == 0 ? "--allow-unsigned-tail accepts a live log's tail"
		                   : "more than --allow-unsigned-tail allows");
		warn(v, f, v->prev_line,
		     "the last %llu record(s) (seq %llu..%llu) follow the last checkpoint "
		     "and are not covered by a signature (--allow-unsigned-tail)",
		     n, first, last);
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT finish(vstate *v)
{
	sl_err rc = SL_E_INTEGRITY;
	sl_audit_report *rep = v->rep;
	const char *f = v->prev_file != NULL ? v->prev_file : "log";

	if (v->ngarb > 0) {
		garbage *g = &v->garb[0];
		rep->torn_tail = true;
		rep->torn_lines += v->ngarb;
		SL_ENSURE(!v->o->require_final_checkpoint, SL_E_TRUNCATED,
		          "%s:%zu: final-checkpoint: the log ends with a torn line (%s), not a "
		          "closing checkpoint",
		          g->file, g->line, g->why);
		for (size_t i = 0; i < v->ngarb; i++)
			warn(v, v->garb[i].file, v->garb[i].line,
			     "torn final line (%zu bytes%s: %s): a write was interrupted; the "
			     "%llu "
			     "records before it verify",
			     v->garb[i].bytes, v->garb[i].unterminated ? ", no newline" : "",
			     v->garb[i].why, (unsigned long long)rep->records);
	} else if (v->prev_unterminated) {
		warn(v, v->prev_file, v->prev_line, "the last line has no newline");
	}
	if (v->have_anchor && !v->anchor_seen && rep->records > 0 &&
	    v->anchor_seq < rep->first_seq) {
		/* --allow-partial: the anchor lies in a file that was not given */
		warn(v, f, v->prev_line,
		     "anchor not checked: its checkpoint (seq %llu) is before the first record "
		     "given (seq %llu)",
		     (unsigned long long)v->anchor_seq, (unsigned long long)rep->first_seq);
	} else if (v->have_anchor && !v->anchor_seen)
		SL_FAIL(SL_E_TRUNCATED,
		        "%s:%zu (seq %llu): anchor: the log ends before the anchor's "
		        "checkpoint at "
		        "seq %llu: records were removed from the end",
		        f, v->prev_line, (unsigned long long)rep->last_seq,
		        (unsigned long long)v->anchor_seq);
	if (v->o->require_final_checkpoint)
		SL_ENSURE(rep->records > 0 && rep->final_checkpoint, SL_E_TRUNCATED,
		          "%s:%zu (seq %llu): final-checkpoint: the log does not end with "
		          "a closing "
		          "checkpoint (last checkpoint: seq %llu): truncated, or the "
		          "writer has not "
		          "closed it",
		          f, v->prev_line, (unsigned long long)rep->last_seq,
		          (unsigned long long)rep->last_checkpoint);
	if (rep->unsigned_tail > 0 && v->have_pk)
		SL_GUARD(check_unsigned_tail(v, f));
	SL_ENSURE(rep->records > 0 || !v->have_pk || v->o->max_unsigned_tail > 0, SL_E_INTEGRITY,
	          "%s: unsigned-tail: the log holds no record, so no checkpoint signature "
	          "covers it (emptied, or never written; --allow-unsigned-tail accepts it)",
	          f);
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_audit_verify(const char *const *paths, size_t n, const sl_audit_verify_opts *opts,
                       sl_audit_report *report)
{
	sl_err rc = SL_E_USAGE;
	sl_audit_verify_opts none = {0};
	sl_audit_report local;
	vstate *v = calloc(1, sizeof(*v));
	audit_lines l = {0};
	json_t *rec = NULL;
	bool got = false;

	SL_ENSURE(v != NULL, SL_E_NOMEM, "audit verify: allocating");
	v->o = opts != NULL ? opts : &none;
	v->rep = report != NULL ? report : &local;
	memset(v->rep, 0, sizeof(*v->rep));
	SL_ENSURE(paths != NULL && n > 0, SL_E_USAGE, "audit verify: no log files");
	SL_ENSURE(v->o->pubkey_path != NULL ||
	              (!v->o->require_final_checkpoint && v->o->anchor_path == NULL),
	          SL_E_USAGE,
	          "audit verify: --require-final-checkpoint and --anchor need the "
	          "public key");
	if (v->o->pubkey_path != NULL) {
		SL_GUARD(audit_read_pubkey(v->o->pubkey_path, v->pk));
		v->have_pk = true;
		v->rep->signatures_checked = true;
	}
	if (v->o->anchor_path != NULL)
		SL_GUARD(load_anchor(v, v->o->anchor_path));
	for (size_t i = 0; i < n; i++) {
		SL_GUARD(audit_lines_open(&l, paths[i]));
		for (;;) {
			rc = audit_lines_next(&l, &got);
			if (rc == SL_E_TOO_LARGE) /* a line over the cap breaks the log */
				rc = SL_E_INTEGRITY;
			SL_GUARD(rc);
			if (!got)
				break;
			rc = sl_audit_parse_line(l.buf, l.len, &rec);
			if (rc == SL_E_TOO_LARGE || rc == SL_E_NOMEM) {
				rc = sl_err_wrap(rc == SL_E_NOMEM ? rc : SL_E_INTEGRITY,
				                 "%s:%zu: parse", paths[i], l.lineno);
				goto out;
			}
			if (rc != SL_OK) {
				/* maybe a torn line: judged by what follows it */
				SL_ENSURE(v->ngarb < AUDIT_MAX_TORN, SL_E_INTEGRITY,
				          "%s:%zu: parse: unparsable line (%s)", v->garb[0].file,
				          v->garb[0].line, v->garb[0].why);
				garbage *g = &v->garb[v->ngarb++];
				audit_line_hash(l.buf, l.len, g->sha);
				g->bytes = l.len;
				g->file = paths[i];
				g->line = l.lineno;
				g->unterminated = l.unterminated;
				snprintf(g->why, sizeof(g->why), "%s", sl_err_detail());
				sl_err_clear();
				continue;
			}
			SL_GUARD(check_record(v, rec, l.buf, l.len, paths[i], l.lineno));
			v->prev_unterminated = l.unterminated;
			json_decref(rec);
			rec = NULL;
		}
		audit_lines_close(&l);
	}
	if (v->prev_file == NULL) /* no record: errors name the last file */
		v->prev_file = paths[n - 1];
	SL_GUARD(finish(v));
	rc = SL_OK;
out:
	json_decref(rec);
	audit_lines_close(&l);
	free(v);
	return rc;
}

sl_err sl_audit_tail_limit_parse(const char *arg, uint64_t *out)
{
	char *end = NULL;
	unsigned long long n;
	if (arg == NULL) {
		*out = SL_AUDIT_CHECKPOINT_EVERY_DEFAULT;
		return SL_OK;
	}
	errno = 0;
	n = strtoull(arg, &end, 10);
	if (arg[0] < '0' || arg[0] > '9' || *end != '\0' || errno != 0 || n == 0 ||
	    n > 1000000000ULL)
		return sl_err_set(
		    SL_E_USAGE,
		    "--allow-unsigned-tail=%.32s: want a number of records, 1..1000000000", arg);
	*out = n;
	return SL_OK;
}
