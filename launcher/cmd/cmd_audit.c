/* seclaunch audit verify | export | keygen: the tamper-evident audit log. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "seclaunch/audit.h"
#include "seclaunch/json.h"

static void usage_audit(FILE *f)
{
	fprintf(f,
	        "Usage: seclaunch audit verify --pubkey K [OPTIONS] [LOG...]\n"
	        "       seclaunch audit export [--format jsonl|cef|ocsf|csv] [--since T] "
	        "[--until T]\n"
	        "                              [--event E] [--pubkey K] [--no-verify] "
	        "[-o OUT] [LOG...]\n"
	        "       seclaunch audit append [--checkpoint-key K] [--checkpoint-every N]\n"
	        "                              [--actor NAME] [--rotate-bytes N] < RECORDS.jsonl\n"
	        "       seclaunch audit keygen --secret-key F --public-key F.pub\n"
	        "\n"
	        "The audit log is JSON Lines, each record carrying the SHA-256 of the "
	        "line\n"
	        "before it, with Ed25519-signed checkpoints (docs/audit.md).\n"
	        "\n"
	        "LOG: the files of one log, oldest first. Without LOG: --audit-log FILE "
	        "or\n"
	        "$SECLAUNCH_AUDIT_LOG, with its rotated files (FILE.<20-digit seq>) "
	        "before it.\n"
	        "\n"
	        "verify: checks the whole chain and every checkpoint's signature and "
	        "names\n"
	        "the first bad line (FILE:LINE, seq, check). Exit 0 valid (warnings, "
	        "e.g. a\n"
	        "torn final line from a crash, on stderr), 6 tampered or truncated, 1 "
	        "usage,\n"
	        "2 unreadable file or key.\n"
	        "  --pubkey K                  checkpoint public key (from audit "
	        "keygen); required\n"
	        "                              unless --chain-only\n"
	        "  --chain-only                check the hash chain only, not the "
	        "signatures\n"
	        "                              (someone who rewrites the whole log is "
	        "not caught)\n"
	        "  --require-final-checkpoint  the log must end with a closing "
	        "checkpoint: use on\n"
	        "                              a log whose writers have exited; detects "
	        "truncation\n"
	        "  --anchor FILE               a copy of LOG.anchor kept elsewhere: the "
	        "log must\n"
	        "                              still hold that checkpoint (detects "
	        "truncation)\n"
	        "  --allow-partial             the first file may start after seq 1 "
	        "(older rotated\n"
	        "                              files archived or deleted)\n"
	        "  --allow-unsigned-tail[=N]   accept up to N records (default 100) that no\n"
	        "                              checkpoint signature covers, with a warning:\n"
	        "                              a live log, or one whose writer was killed;\n"
	        "                              without it --pubkey requires a signed head\n"
	        "  --with-rotated              add each LOG's rotated files before it\n"
	        "  --audit-log FILE            the log (default $SECLAUNCH_AUDIT_LOG)\n"
	        "  --json                      print the report as JSON on stdout (a "
	        "failure:\n"
	        "                              one {\"error\": {...}} object)\n"
	        "  -q, --quiet                 print nothing on success\n"
	        "\n"
	        "export: verifies first (as verify; --pubkey, --anchor, --allow-partial,\n"
	        "--allow-unsigned-tail, --require-final-checkpoint apply), says on stderr\n"
	        "what was verified, and refuses (exit 6) to export a broken chain.\n"
	        "  --format F      jsonl (default), cef, ocsf (1.3.0), csv (RFC 4180, "
	        "header row)\n"
	        "  --since T       records at or after T (RFC 3339 UTC, e.g. "
	        "2026-11-29T18:00:00Z\n"
	        "                  or 2026-11-29)\n"
	        "  --until T       records before T\n"
	        "  --event E       only event E; 'kms.*' selects every event starting "
	        "'kms.'\n"
	        "  --no-verify     export without verifying (says so on stderr)\n"
	        "  -o, --output F  write to F (default stdout); an existing F is kept "
	        "unless\n"
	        "                  --force\n"
	        "  --json          with -o: a summary {\"records\", ...} on stdout\n"
	        "\n"
	        "append: appends one record per stdin line, a JSON object with the fields\n"
	        "event (required), job_id, dataset_id, key_id, policy_digest, decision,\n"
	        "reasons, claims_digest, details; the log fills seq, time, host, actor, prev.\n"
	        "For scripts that take part in a run (and for tests).\n"
	        "  --audit-log FILE       the log (default $SECLAUNCH_AUDIT_LOG)\n"
	        "  --checkpoint-key K     sign checkpoints with K (0600; from audit keygen), one\n"
	        "                         every N records and a closing one at the end\n"
	        "  --checkpoint-every N   (default 100)\n"
	        "  --actor NAME           who appends (default 'seclaunch audit append')\n"
	        "  --rotate-bytes N       rotate the file once it reaches N bytes (0: never;\n"
	        "                         default 64 MiB)\n"
	        "\n"
	        "keygen: a new checkpoint key pair; the secret key file is mode 0600.\n"
	        "  --secret-key F  --public-key F.pub  [--force: replace existing files]\n"
	        "\n"
	        "Every subcommand takes -h/--help, -q/--quiet and --json (results as JSON\n"
	        "on stdout; a failure is one {\"error\": {\"code\", \"exit\", \"message\"}} "
	        "object).\n"
	        "Exit codes: docs/exit-codes.md.\n");
}

typedef struct args {
	const char *sub;
	sl_audit_verify_opts v;
	sl_audit_export_opts e;
	bool chain_only, rotated, no_verify;
	const char *out_path, *secret, *public;
	const char *ckey, *actor;
	unsigned every;
	unsigned long long rotate;
	bool has_rotate;
	const char *format;
	char **logs;
	size_t nlogs;
	char **operands;
	int noperands;
	struct sl_cli_shared sh;
} args;

static void warn_cb(void *ctx, const char *file, size_t line, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "seclaunch audit: warning: %s:%zu: %s\n", file, line, msg);
}

/* The files to read: LOG arguments as given (with their rotated files when
 * asked), else the configured log with its rotated files. */
static SL_RESULT collect_logs(args *a, char **argv, int first, int argc)
{
	sl_err rc = SL_E_USAGE;
	char **files = NULL;
	size_t n = 0;

	if (first == argc) {
		const char *p = a->sh.audit_log;
		SL_ENSURE(p != NULL && p[0] != '\0', SL_E_USAGE,
		          "no log: give LOG, --audit-log FILE or set SECLAUNCH_AUDIT_LOG");
		return sl_audit_files(p, &a->logs, &a->nlogs);
	}
	for (int i = first; i < argc; i++) {
		size_t k = 1;
		if (a->rotated) {
			SL_GUARD(sl_audit_files(argv[i], &files, &n));
			k = n;
		}
		char **nl = realloc(a->logs, (a->nlogs + k) * sizeof(*nl));
		SL_ENSURE(nl != NULL, SL_E_NOMEM, "allocating the file list");
		a->logs = nl;
		for (size_t j = 0; j < k; j++) {
			a->logs[a->nlogs] = strdup(a->rotated ? files[j] : argv[i]);
			SL_ENSURE(a->logs[a->nlogs] != NULL, SL_E_NOMEM, "allocating");
			a->nlogs++;
		}
		sl_audit_files_free(files, n);
		files = NULL;
		n = 0;
	}
	rc = SL_OK;
out:
	sl_audit_files_free(files, n);
	return rc;
}

static void print_report(const args *a, const sl_audit_report *r, FILE *f)
{
	if (sl_cli_json) {
		json_t *o = json_pack(
		    "{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:b, s:b, s:s, s:i}", "valid", 1,
		    "records", (json_int_t)r->records, "checkpoints", (json_int_t)r->checkpoints,
		    "first_seq", (json_int_t)r->first_seq, "last_seq", (json_int_t)r->last_seq,
		    "last_checkpoint", (json_int_t)r->last_checkpoint, "unsigned_tail",
		    (json_int_t)r->unsigned_tail, "torn_lines", (json_int_t)r->torn_lines,
		    "torn_tail", r->torn_tail, "final_checkpoint", r->final_checkpoint,
		    "signatures_checked", r->signatures_checked, "head", r->head, "files",
		    (int)a->nlogs);
		json_dumpf(o, f, JSON_COMPACT | JSON_PRESERVE_ORDER);
		fputc('\n', f);
		json_decref(o);
		return;
	}
	fprintf(f,
	        "verified %llu records (seq %llu..%llu) in %zu file(s): hash chain "
	        "intact; ",
	        (unsigned long long)r->records, (unsigned long long)r->first_seq,
	        (unsigned long long)r->last_seq, a->nlogs);
	if (r->signatures_checked)
		fprintf(f, "%llu checkpoint signature(s) valid",
		        (unsigned long long)r->checkpoints);
	else
		fprintf(f, "checkpoint signatures NOT checked (no --pubkey)");
	if (r->final_checkpoint)
		fprintf(f, "; ends with a closing checkpoint");
	else if (r->unsigned_tail > 0)
		fprintf(f, "; %llu record(s) after the last checkpoint",
		        (unsigned long long)r->unsigned_tail);
	if (r->torn_lines > 0)
		fprintf(f, "; %llu torn line(s)%s", (unsigned long long)r->torn_lines,
		        r->torn_tail ? " at the end" : "");
	fprintf(f, "; head %.16s\n", r->head);
}

static int do_keygen(args *a)
{
	if (a->secret == NULL || a->public == NULL)
		return sl_cli_usage("audit keygen", "need --secret-key F and --public-key F.pub");
	sl_err rc = sl_cli_check_new(a->secret, a->sh.force);
	if (rc == SL_OK)
		rc = sl_cli_check_new(a->public, a->sh.force);
	/* the key files are made with O_EXCL: --force clears the way first */
	if (rc == SL_OK && a->sh.force) {
		(void)unlink(a->secret);
		(void)unlink(a->public);
	}
	if (rc == SL_OK)
		rc = sl_audit_keygen(a->secret, a->public);
	if (rc != SL_OK)
		return sl_cli_fail("audit keygen", rc);
	if (sl_cli_json)
		sl_cli_print_json(
		    json_pack("{s:s, s:s}", "secret_key", a->secret, "public_key", a->public));
	else if (!sl_cli_quiet)
		printf("wrote %s (secret, 0600) and %s (public)\n", a->secret, a->public);
	return 0;
}

static int do_verify(args *a)
{
	sl_audit_report rep;
	if (a->v.pubkey_path == NULL && !a->chain_only)
		return sl_cli_usage("audit verify",
		                    "--pubkey K is required (or --chain-only, which does not check "
		                    "signatures)");
	sl_err rc = sl_audit_verify((const char *const *)a->logs, a->nlogs, &a->v, &rep);
	if (rc != SL_OK)
		return sl_cli_fail("audit verify", rc);
	if (!sl_cli_quiet || sl_cli_json)
		print_report(a, &rep, stdout);
	return 0;
}

/* One input line: a JSON object with the record's own fields. */
static SL_RESULT append_line(sl_audit *log, const char *line, size_t len, size_t lineno)
{
	static const char *const keys[] = {
	    "event",    "job_id",  "dataset_id",    "key_id",  "policy_digest",
	    "decision", "reasons", "claims_digest", "details", NULL};
	sl_err rc = SL_E_INPUT;
	json_error_t jerr;
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	const char *k;
	json_t *v;
	sl_audit_record r;

	SL_ENSURE(json_is_object(o), SL_E_INPUT, "stdin:%zu: not a JSON object (%s)", lineno,
	          o == NULL ? jerr.text : "wrong type");
	k = sl_json_unknown(o, keys);
	SL_ENSURE(k == NULL, SL_E_INPUT, "stdin:%zu: unknown field '%.64s'", lineno, k);
	json_object_foreach (o, k, v) {
		SL_ENSURE(json_is_null(v) || json_is_string(v) || strcmp(k, "reasons") == 0 ||
		              strcmp(k, "details") == 0,
		          SL_E_INPUT, "stdin:%zu: field '%s' must be a string", lineno, k);
	}
	r = (sl_audit_record){
	    .event = sl_json_getstr(o, "event"),
	    .job_id = sl_json_getstr(o, "job_id"),
	    .dataset_id = sl_json_getstr(o, "dataset_id"),
	    .key_id = sl_json_getstr(o, "key_id"),
	    .policy_digest = sl_json_getstr(o, "policy_digest"),
	    .decision = sl_json_getstr(o, "decision"),
	    .reasons =
	        json_is_null(json_object_get(o, "reasons")) ? NULL : json_object_get(o, "reasons"),
	    .claims_digest = sl_json_getstr(o, "claims_digest"),
	    .details =
	        json_is_null(json_object_get(o, "details")) ? NULL : json_object_get(o, "details"),
	};
	SL_ENSURE(r.event != NULL, SL_E_INPUT, "stdin:%zu: field 'event' is required", lineno);
	rc = sl_audit_append(log, &r);
	if (rc != SL_OK)
		rc = sl_err_wrap(rc, "stdin:%zu", lineno);
out:
	json_decref(o);
	return rc;
}

/* Reads one line (without its newline) into *buf (SL_AUDIT_MAX_LINE + 2
 * bytes, allocated on first use); *n = SL_AUDIT_MAX_LINE + 1 means "too long".
 * *eof is set when the input ended. */
static SL_RESULT read_line(FILE *in, char **buf, size_t *n, bool *eof)
{
	int c;
	*n = 0;
	if (*buf == NULL && (*buf = malloc(SL_AUDIT_MAX_LINE + 2)) == NULL)
		return sl_err_set(SL_E_NOMEM, "stdin: line buffer");
	while ((c = getc(in)) != EOF && c != '\n') {
		if (*n <= SL_AUDIT_MAX_LINE)
			(*buf)[(*n)++] = (char)c;
	}
	if (ferror(in))
		return sl_err_set(SL_E_IO, "stdin: read error");
	*eof = c == EOF;
	return SL_OK;
}

static int do_append(args *a)
{
	sl_audit *log = NULL;
	char *line = NULL;
	size_t n = 0, lineno = 0;
	sl_err rc;
	const char *path = a->sh.audit_log;

	if (path == NULL || path[0] == '\0')
		return sl_cli_usage("audit append",
		                    "no log: --audit-log FILE or SECLAUNCH_AUDIT_LOG");
	rc = sl_audit_open(path, a->ckey, a->actor != NULL ? a->actor : "seclaunch audit append",
	                   a->every, &log);
	if (rc != SL_OK)
		return sl_cli_fail("audit append", rc);
	if (a->has_rotate)
		sl_audit_set_rotation(log, a->rotate);
	for (;;) {
		bool eof = false;
		/* a bounded line: input over the record cap is refused, not buffered */
		rc = read_line(stdin, &line, &n, &eof);
		if (rc != SL_OK || (eof && n == 0))
			break;
		lineno++;
		if (n == SL_AUDIT_MAX_LINE + 1) {
			rc = sl_err_set(SL_E_TOO_LARGE, "stdin:%zu: line over %u bytes", lineno,
			                SL_AUDIT_MAX_LINE);
			break;
		}
		while (n > 0 && line[n - 1] == '\r')
			n--;
		if (n > 0) {
			rc = append_line(log, line, n, lineno);
			if (rc != SL_OK)
				break;
		}
		if (eof)
			break;
	}
	free(line);
	/* the closing checkpoint is written even after a bad input line */
	sl_err crc = sl_audit_close(log);
	if (rc == SL_OK)
		rc = crc;
	if (rc != SL_OK)
		return sl_cli_fail("audit append", rc);
	if (sl_cli_json)
		sl_cli_print_json(
		    json_pack("{s:s, s:I}", "audit_log", path, "appended", (json_int_t)lineno));
	return 0;
}

static int do_export(args *a)
{
	sl_audit_report rep;
	FILE *out = stdout;
	sl_err rc;

	if (a->format != NULL) {
		rc = sl_audit_format_parse(a->format, &a->e.format);
		if (rc != SL_OK)
			return sl_cli_usage("audit export", "%s", sl_err_detail());
	}
	a->e.verify = !a->no_verify;
	a->e.verify_opts = a->v;
	if (a->out_path != NULL) {
		rc = sl_cli_check_new(a->out_path, a->sh.force);
		if (rc != SL_OK)
			return sl_cli_fail("audit export", rc);
		out = fopen(a->out_path, a->sh.force ? "we" : "wxe");
		if (out == NULL)
			return sl_cli_fail("audit export",
			                   sl_err_set(SL_E_IO, "%s: cannot create: %s", a->out_path,
			                              strerror(errno)));
	}
	rc = sl_audit_export((const char *const *)a->logs, a->nlogs, &a->e, out, &rep);
	if (out != stdout && fclose(out) != 0 && rc == SL_OK)
		rc = sl_err_set(SL_E_IO, "%s: write failed", a->out_path);
	if (rc != SL_OK) {
		if (out != stdout)
			remove(a->out_path);
		if (a->e.verify && sl_err_exit_code(rc) == SL_CAT_INTEGRITY)
			return sl_cli_fail("audit export (refusing to export a broken chain; "
			                   "--no-verify exports it anyway)",
			                   rc);
		return sl_cli_fail("audit export", rc);
	}
	if (sl_cli_json) {
		if (a->no_verify)
			sl_cli_print_json(
			    json_pack("{s:s, s:b}", "output", a->out_path, "verified", 0));
		else
			print_report(a, &rep, stdout);
	} else if (a->no_verify) {
		fprintf(stderr, "seclaunch audit export: NOT verified (--no-verify)\n");
	} else if (!sl_cli_quiet) {
		fprintf(stderr, "seclaunch audit export: ");
		bool j = sl_cli_json;
		sl_cli_json = false;
		print_report(a, &rep, stderr);
		sl_cli_json = j;
	}
	return 0;
}

/* ---- options -> checks -> run: one option table, a verb table -------- */

enum {
	OPT_PUBKEY = 256,
	OPT_CHAIN_ONLY,
	OPT_FINAL,
	OPT_ANCHOR,
	OPT_PARTIAL,
	OPT_ROTATED,
	OPT_FORMAT,
	OPT_SINCE,
	OPT_UNTIL,
	OPT_EVENT,
	OPT_NO_VERIFY,
	OPT_SECRET,
	OPT_PUBLIC,
	OPT_CKEY,
	OPT_EVERY,
	OPT_ACTOR,
	OPT_ROTATE,
	OPT_UNSIGNED_TAIL,
};

/* What verify checks; export verifies the same way first. */
#define VERIFY_OPTS                                                                                \
	{"pubkey", required_argument, OPT_PUBKEY, NULL},                                           \
	    {"chain-only", no_argument, OPT_CHAIN_ONLY, NULL},                                     \
	    {"require-final-checkpoint", no_argument, OPT_FINAL, NULL},                            \
	    {"anchor", required_argument, OPT_ANCHOR, NULL},                                       \
	    {"allow-partial", no_argument, OPT_PARTIAL, NULL},                                     \
	    {"allow-unsigned-tail", optional_argument, OPT_UNSIGNED_TAIL, NULL},                   \
	{                                                                                          \
		"with-rotated", no_argument, OPT_ROTATED, NULL                                     \
	}

static const struct sl_cli_opt verify_opts[] = {VERIFY_OPTS, {NULL, 0, 0, NULL}};
static const struct sl_cli_opt export_opts[] = {
    VERIFY_OPTS,
    {"format", required_argument, OPT_FORMAT, NULL, SL_CLI_FORMAT_VALUES},
    {"since", required_argument, OPT_SINCE, NULL},
    {"until", required_argument, OPT_UNTIL, NULL},
    {"event", required_argument, OPT_EVENT, NULL},
    {"no-verify", no_argument, OPT_NO_VERIFY, NULL},
    {NULL, 0, 0, NULL},
};
static const struct sl_cli_opt append_opts[] = {
    {"checkpoint-key", required_argument, OPT_CKEY, NULL},
    {"checkpoint-every", required_argument, OPT_EVERY, NULL},
    {"actor", required_argument, OPT_ACTOR, NULL},
    {"rotate-bytes", required_argument, OPT_ROTATE, NULL},
    {NULL, 0, 0, NULL},
};
static const struct sl_cli_opt keygen_opts[] = {
    {"secret-key", required_argument, OPT_SECRET, NULL},
    {"public-key", required_argument, OPT_PUBLIC, NULL},
    {NULL, 0, 0, NULL},
};

static int parse_number(int key, const char *arg, args *a)
{
	char *end = NULL;
	unsigned long long v = strtoull(arg, &end, 10);
	if (end == arg || *end != '\0' || arg[0] == '-' ||
	    (key == OPT_EVERY && (v == 0 || v > 1000000)))
		return sl_cli_usage("audit", "%s: '%s' is not a valid number",
		                    key == OPT_EVERY ? "--checkpoint-every" : "--rotate-bytes",
		                    arg);
	if (key == OPT_EVERY) {
		a->every = (unsigned)v;
	} else {
		a->rotate = v;
		a->has_rotate = true;
	}
	return 0;
}

static int on_option(void *ctx, int key, char *arg)
{
	args *a = ctx;
	switch (key) {
	case OPT_PUBKEY:
		a->v.pubkey_path = arg;
		break;
	case OPT_CHAIN_ONLY:
		a->chain_only = true;
		break;
	case OPT_FINAL:
		a->v.require_final_checkpoint = true;
		break;
	case OPT_ANCHOR:
		a->v.anchor_path = arg;
		break;
	case OPT_PARTIAL:
		a->v.allow_partial = true;
		break;
	case OPT_UNSIGNED_TAIL:
		if (sl_audit_tail_limit_parse(arg, &a->v.max_unsigned_tail) != SL_OK)
			return sl_cli_usage("audit", "%s", sl_err_detail());
		break;
	case OPT_ROTATED:
		a->rotated = true;
		break;
	case OPT_FORMAT:
		a->format = arg;
		break;
	case OPT_SINCE:
	case OPT_UNTIL:
		if (sl_audit_time_parse(arg, key == OPT_SINCE ? &a->e.since_ms : &a->e.until_ms,
		                        key == OPT_SINCE ? "--since" : "--until") != SL_OK)
			return sl_cli_usage("audit", "%s", sl_err_detail());
		if (key == OPT_SINCE)
			a->e.has_since = true;
		else
			a->e.has_until = true;
		break;
	case OPT_EVENT:
		a->e.event = arg;
		break;
	case OPT_NO_VERIFY:
		a->no_verify = true;
		break;
	case OPT_SECRET:
		a->secret = arg;
		break;
	case OPT_PUBLIC:
		a->public = arg;
		break;
	case OPT_CKEY:
		a->ckey = arg;
		break;
	case OPT_ACTOR:
		a->actor = arg;
		break;
	case OPT_EVERY:
	case OPT_ROTATE:
		return parse_number(key, arg, a);
	default:
		return sl_cli_usage("audit", "unknown option");
	}
	return 0;
}

static int on_args(void *ctx, int argc, char **argv)
{
	args *a = ctx;
	a->operands = argv;
	a->noperands = argc;
	return 0;
}

/* verify and export read LOG files: the checks, then the file list. */
static int with_logs(args *a, int (*fn)(args *a))
{
	int ret;
	sl_err rc;
	if (a->chain_only && a->v.pubkey_path != NULL)
		return sl_cli_usage(a->sub, "--chain-only and --pubkey contradict each other");
	rc = collect_logs(a, a->operands, 0, a->noperands);
	if (rc != SL_OK)
		ret = rc == SL_E_USAGE ? sl_cli_usage(a->sub, "%s", sl_err_detail())
		                       : sl_cli_fail(a->sub, rc);
	else
		ret = fn(a);
	for (size_t i = 0; i < a->nlogs; i++)
		free(a->logs[i]);
	free(a->logs);
	return ret;
}

static int run_verify(args *a)
{
	return with_logs(a, do_verify);
}

static int run_export(args *a)
{
	a->out_path = a->sh.out;
	if (sl_cli_json && a->out_path == NULL)
		return sl_cli_usage(a->sub, "--json and the export both want stdout: give -o FILE");
	return with_logs(a, do_export);
}

static int run_append(args *a)
{
	if (a->noperands != 0)
		return sl_cli_usage(a->sub, "reads records from stdin; no arguments");
	return do_append(a);
}

static int run_keygen(args *a)
{
	if (a->noperands != 0)
		return sl_cli_usage(a->sub, "takes no arguments");
	return do_keygen(a);
}

#define SH_RESULT (SL_SH_QUIET | SL_SH_JSON)

static const struct audit_verb {
	struct sl_cli_spec spec;
	int (*run)(args *a);
} audit_verbs[] = {
    {{"audit verify", SH_RESULT | SL_SH_AUDIT_LOG, NULL, verify_opts, usage_audit, on_option,
      on_args},
     run_verify},
    {{"audit export", SH_RESULT | SL_SH_AUDIT_LOG | SL_SH_OUT | SL_SH_FORCE, NULL, export_opts,
      usage_audit, on_option, on_args},
     run_export},
    {{"audit append", SH_RESULT | SL_SH_AUDIT_LOG, NULL, append_opts, usage_audit, on_option,
      on_args},
     run_append},
    {{"audit keygen", SH_RESULT | SL_SH_FORCE, NULL, keygen_opts, usage_audit, on_option, on_args},
     run_keygen},
};

static int run_verb(const struct sl_cli_verb *verb, int argc, char **argv)
{
	const struct audit_verb *v = verb->data;
	args a;
	memset(&a, 0, sizeof(a));
	a.v.warn = warn_cb;
	a.sub = v->spec.name;
	int ret = sl_cli_parse(&v->spec, &a, &a.sh, argc, argv);
	if (ret >= 0)
		return ret;
	return v->run(&a);
}

static const struct sl_cli_verb verbs[] = {
    {"verify", run_verb, &audit_verbs[0]},
    {"export", run_verb, &audit_verbs[1]},
    {"append", run_verb, &audit_verbs[2]},
    {"keygen", run_verb, &audit_verbs[3]},
    {NULL, NULL, NULL},
};

int cmd_audit(int argc, char **argv)
{
	return sl_cli_dispatch("audit", verbs, usage_audit, argc, argv);
}
