/* Audit log: append/verify round trip, concurrent writers (threads and
 * processes) keeping one chain, rotation, torn lines, tampering, the line
 * parser's bad inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "seclaunch/audit.h"
#include "seclaunch/error.h"
#include "seclaunch/secret.h"

typedef struct fixture {
	char dir[64];
	char log[128];
	char sk[128];
	char pk[128];
	char sk2[128];
	char pk2[128];
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/sl-audit-XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->log, sizeof(f->log), "%s/audit.log", f->dir);
	snprintf(f->sk, sizeof(f->sk), "%s/ck.key", f->dir);
	snprintf(f->pk, sizeof(f->pk), "%s/ck.pub", f->dir);
	snprintf(f->sk2, sizeof(f->sk2), "%s/other.key", f->dir);
	snprintf(f->pk2, sizeof(f->pk2), "%s/other.pub", f->dir);
	if (sl_crypto_init() != SL_OK || sl_audit_keygen(f->sk, f->pk) != SL_OK ||
	    sl_audit_keygen(f->sk2, f->pk2) != SL_OK)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static void append_n(sl_audit *a, int n, const char *job)
{
	for (int i = 0; i < n; i++) {
		json_t *d = json_pack("{s:i}", "i", i);
		json_t *reasons = json_pack("[s]", "region eu-west-1 allowed");
		sl_audit_record r = {.event = SL_AUDIT_EV_RELEASE,
		                     .job_id = job,
		                     .dataset_id = "ds-1",
		                     .key_id = "k1",
		                     .decision = SL_AUDIT_ALLOW,
		                     .reasons = reasons,
		                     .details = d};
		assert_int_equal(sl_audit_append(a, &r), SL_OK);
		json_decref(d);
		json_decref(reasons);
	}
}

static sl_err verify1(const char *log, const char *pk, bool final, sl_audit_report *rep)
{
	const char *files[] = {log};
	/* a live log (final false) may end with records no checkpoint covers yet */
	sl_audit_verify_opts o = {.pubkey_path = pk,
	                          .require_final_checkpoint = final,
	                          .max_unsigned_tail =
	                              final ? 0 : SL_AUDIT_CHECKPOINT_EVERY_DEFAULT};
	return sl_audit_verify(files, 1, &o, rep);
}

static void test_roundtrip(void **state)
{
	fixture *f = *state;
	sl_audit *a = NULL;
	sl_audit_report rep;

	assert_int_equal(sl_audit_open(f->log, f->sk, "test", 3, &a), SL_OK);
	append_n(a, 10, "job-1");
	/* before close: valid as a live log, but not ending with a closing checkpoint */
	assert_int_equal(verify1(f->log, f->pk, false, &rep), SL_OK);
	assert_int_equal(rep.unsigned_tail, 1);
	/* with a public key and no allowance, the unsigned record fails */
	{
		const char *one[] = {f->log};
		sl_audit_verify_opts strict = {.pubkey_path = f->pk};
		assert_int_equal(sl_audit_verify(one, 1, &strict, &rep), SL_E_INTEGRITY);
		assert_non_null(strstr(sl_err_detail(), "(seq 13): unsigned-tail: the last 1"));
		strict.max_unsigned_tail = 1;
		assert_int_equal(sl_audit_verify(one, 1, &strict, &rep), SL_OK);
	}
	assert_int_equal(verify1(f->log, f->pk, true, &rep), SL_E_TRUNCATED);
	assert_int_equal(sl_audit_close(a), SL_OK);
	assert_int_equal(verify1(f->log, f->pk, true, &rep), SL_OK);
	/* 10 records, 3 interval checkpoints, 1 closing checkpoint */
	assert_int_equal(rep.records, 14);
	assert_int_equal(rep.checkpoints, 4);
	assert_int_equal(rep.first_seq, 1);
	assert_int_equal(rep.last_seq, 14);
	assert_true(rep.final_checkpoint);
	assert_int_equal(rep.unsigned_tail, 0);
	/* the anchor holds the closing checkpoint */
	char anchor[160];
	snprintf(anchor, sizeof(anchor), "%s.anchor", f->log);
	const char *files[] = {f->log};
	sl_audit_verify_opts o = {.pubkey_path = f->pk, .anchor_path = anchor};
	assert_int_equal(sl_audit_verify(files, 1, &o, &rep), SL_OK);
	/* the other key's public key: every checkpoint is by a different key */
	assert_int_equal(verify1(f->log, f->pk2, false, &rep), SL_E_WRONG_KEY);
	assert_non_null(strstr(sl_err_detail(), "audit.log:4 (seq 4)"));
	/* a second writer continues the same chain */
	assert_int_equal(sl_audit_open(f->log, f->sk, "test2", 100, &a), SL_OK);
	append_n(a, 2, "job-2");
	assert_int_equal(sl_audit_close(a), SL_OK);
	assert_int_equal(verify1(f->log, f->pk, true, &rep), SL_OK);
	assert_int_equal(rep.records, 17);
}

/* Rewrites line `lineno` (1-based) of path with repl (NULL: delete it). */
static void edit_line(const char *path, int lineno, const char *repl)
{
	FILE *in = fopen(path, "r");
	assert_non_null(in);
	char *buf = NULL;
	size_t cap = 0, total = 0;
	char *out = NULL;
	size_t outlen = 0;
	FILE *mem = open_memstream(&out, &outlen);
	ssize_t n;
	int i = 0;
	while ((n = getline(&buf, &cap, in)) > 0) {
		i++;
		total += (size_t)n;
		if (i == lineno) {
			if (repl != NULL)
				fprintf(mem, "%s\n", repl);
		} else {
			fwrite(buf, 1, (size_t)n, mem);
		}
	}
	fclose(in);
	fclose(mem);
	free(buf);
	in = fopen(path, "w");
	fwrite(out, 1, outlen, in);
	fclose(in);
	free(out);
	(void)total;
}

__attribute__((noinline)) static char *get_line(const char *path, int lineno)
{
	FILE *in = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0;
	ssize_t n = 0;
	for (int i = 0; i < lineno; i++)
		n = getline(&buf, &cap, in);
	fclose(in);
	assert_true(n > 0);
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

static void test_tamper(void **state)
{
	fixture *f = *state;
	sl_audit *a = NULL;
	sl_audit_report rep;
	char copy[200];

	assert_int_equal(sl_audit_open(f->log, f->sk, "test", 4, &a), SL_OK);
	append_n(a, 8, "job-1");
	assert_int_equal(sl_audit_close(a), SL_OK);
	snprintf(copy, sizeof(copy), "cp '%s' '%s.orig'", f->log, f->log);
	assert_int_equal(system(copy), 0);
	snprintf(copy, sizeof(copy), "cp '%s.orig' '%s'", f->log, f->log);

	/* an edited field in line 3: line 4's prev no longer matches */
	char *l3 = get_line(f->log, 3);
	char *p = strstr(l3, "ds-1");
	assert_non_null(p);
	p[3] = '2';
	edit_line(f->log, 3, l3);
	free(l3);
	assert_int_equal(verify1(f->log, f->pk, false, &rep), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "audit.log:4 (seq 4): prev"));
	assert_non_null(strstr(sl_err_detail(), "audit.log:3, seq 3"));

	/* a deleted line */
	assert_int_equal(system(copy), 0);
	edit_line(f->log, 3, NULL);
	assert_int_equal(verify1(f->log, f->pk, false, &rep), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "audit.log:3 (seq 4): seq"));

	/* two lines swapped */
	assert_int_equal(system(copy), 0);
	char *l2 = get_line(f->log, 2);
	char *l3b = get_line(f->log, 3);
	edit_line(f->log, 2, l3b);
	edit_line(f->log, 3, l2);
	free(l2);
	free(l3b);
	assert_int_equal(verify1(f->log, f->pk, false, &rep), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "audit.log:2 (seq 3): seq"));

	/* a forged checkpoint: line 5 is a checkpoint; re-sign it with another
	 * key by writing a log with that key and splicing its checkpoint in */
	assert_int_equal(system(copy), 0);
	char *cp = get_line(f->log, 5);
	assert_non_null(strstr(cp, "\"checkpoint\""));
	p = strstr(cp, "\"sig\":\"");
	assert_non_null(p);
	p[7] = p[7] == 'A' ? 'B' : 'A';
	edit_line(f->log, 5, cp);
	free(cp);
	assert_int_equal(verify1(f->log, f->pk, false, &rep), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "audit.log:5 (seq 5): checkpoint signature"));

	/* truncation after the closing checkpoint is caught only by the
	 * requirement or the anchor */
	assert_int_equal(system(copy), 0);
	edit_line(f->log, 11, NULL); /* 8 records + 2 interval + close = 11 lines */
	assert_int_equal(verify1(f->log, f->pk, false, &rep), SL_OK);
	assert_int_equal(verify1(f->log, f->pk, true, &rep), SL_E_TRUNCATED);
	assert_non_null(strstr(sl_err_detail(), "final-checkpoint"));
}

static void test_torn_line(void **state)
{
	fixture *f = *state;
	sl_audit *a = NULL;
	sl_audit_report rep;

	assert_int_equal(sl_audit_open(f->log, f->sk, "test", 100, &a), SL_OK);
	append_n(a, 3, "job-1");
	/* a crash mid-write: half a line, no newline */
	FILE *fp = fopen(f->log, "a");
	fputs("{\"seq\":4,\"time\":\"2026-", fp);
	fclose(fp);
	assert_int_equal(verify1(f->log, f->pk, false, &rep), SL_OK);
	assert_true(rep.torn_tail);
	assert_int_equal(rep.records, 3);
	assert_int_equal(verify1(f->log, f->pk, true, &rep), SL_E_TRUNCATED);
	/* the next append records the torn line and continues the chain */
	append_n(a, 2, "job-1");
	assert_int_equal(sl_audit_close(a), SL_OK);
	assert_int_equal(verify1(f->log, f->pk, true, &rep), SL_OK);
	assert_false(rep.torn_tail);
	assert_int_equal(rep.torn_lines, 1);
	assert_int_equal(rep.records, 7); /* 3 + recovered + 2 + close */
	/* changing the torn bytes afterwards is detected */
	char *l4 = get_line(f->log, 4);
	l4[2] = 'x';
	edit_line(f->log, 4, l4);
	free(l4);
	assert_int_equal(verify1(f->log, f->pk, false, &rep), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "audit.log:4: torn line"));
}

struct thread_arg {
	sl_audit *a;
	int id;
};

static void *thread_main(void *p)
{
	struct thread_arg *t = p;
	char job[32];
	snprintf(job, sizeof(job), "job-%d", t->id);
	for (int i = 0; i < 25; i++) {
		sl_audit_record r = {.event = SL_AUDIT_EV_RUN_STAGE, .job_id = job};
		if (sl_audit_append(t->a, &r) != SL_OK)
			return (void *)1;
	}
	return NULL;
}

static void test_threads(void **state)
{
	fixture *f = *state;
	sl_audit *a = NULL;
	sl_audit_report rep;
	pthread_t th[8];
	struct thread_arg args[8];

	assert_int_equal(sl_audit_open(f->log, f->sk, "threads", 10, &a), SL_OK);
	for (int i = 0; i < 8; i++) {
		args[i] = (struct thread_arg){a, i};
		assert_int_equal(pthread_create(&th[i], NULL, thread_main, &args[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		void *ret;
		pthread_join(th[i], &ret);
		assert_null(ret);
	}
	assert_int_equal(sl_audit_close(a), SL_OK);
	assert_int_equal(verify1(f->log, f->pk, true, &rep), SL_OK);
	/* 200 records, a checkpoint after every 10th, one at close */
	assert_int_equal(rep.records, 200 + 20 + 1);
	assert_int_equal(rep.checkpoints, 21);
}

static void test_processes(void **state)
{
	fixture *f = *state;
	sl_audit_report rep;
	pid_t pids[2];

	for (int p = 0; p < 2; p++) {
		pids[p] = fork();
		assert_true(pids[p] >= 0);
		if (pids[p] == 0) {
			sl_audit *a = NULL;
			char job[16];
			snprintf(job, sizeof(job), "proc-%d", p);
			if (sl_audit_open(f->log, f->sk, job, 7, &a) != SL_OK)
				_exit(2);
			for (int i = 0; i < 40; i++) {
				sl_audit_record r = {.event = SL_AUDIT_EV_RUN_STAGE, .job_id = job};
				if (sl_audit_append(a, &r) != SL_OK)
					_exit(3);
			}
			_exit(sl_audit_close(a) == SL_OK ? 0 : 4);
		}
	}
	for (int p = 0; p < 2; p++) {
		int st = 0;
		assert_int_equal(waitpid(pids[p], &st, 0), pids[p]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	assert_int_equal(verify1(f->log, f->pk, false, &rep), SL_OK);
	/* 80 records, 5 interval checkpoints per process, 2 closing ones */
	assert_int_equal(rep.records, 80 + 10 + 2);
	assert_int_equal(rep.checkpoints, 12);
}

static void test_rotation(void **state)
{
	fixture *f = *state;
	sl_audit *a = NULL;
	sl_audit_report rep;
	char **files = NULL;
	size_t n = 0;

	assert_int_equal(sl_audit_open(f->log, f->sk, "rotate", 5, &a), SL_OK);
	sl_audit_set_rotation(a, 3000);
	append_n(a, 20, "job-r");
	assert_int_equal(sl_audit_close(a), SL_OK);
	assert_int_equal(sl_audit_files(f->log, &files, &n), SL_OK);
	assert_true(n >= 3);
	assert_string_equal(files[n - 1], f->log);
	assert_non_null(strstr(files[0], "audit.log.00000000000000000001"));
	sl_audit_verify_opts o = {.pubkey_path = f->pk, .require_final_checkpoint = true};
	assert_int_equal(sl_audit_verify((const char *const *)files, n, &o, &rep), SL_OK);
	assert_int_equal(rep.first_seq, 1);
	/* only the live file: the start of the chain is missing */
	assert_int_equal(sl_audit_verify((const char *const *)&files[n - 1], 1, &o, &rep),
	                 SL_E_TRUNCATED);
	assert_non_null(strstr(sl_err_detail(), "start"));
	o.allow_partial = true;
	assert_int_equal(sl_audit_verify((const char *const *)&files[n - 1], 1, &o, &rep), SL_OK);
	/* the middle file left out: the chain breaks at the next file's first line */
	o.allow_partial = false;
	const char *gap[] = {files[0], files[n - 1]};
	assert_int_equal(sl_audit_verify(gap, 2, &o, &rep), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), ":1 (seq"));
	/* files out of order */
	const char *swapped[] = {files[1], files[0]};
	o.allow_partial = true;
	assert_int_equal(sl_audit_verify(swapped, 2, &o, &rep), SL_E_INTEGRITY);
	sl_audit_files_free(files, n);
}

/* Processes that rotate the log under each other still keep one chain: the
 * lock file is never renamed, and a writer whose file was rotated away
 * reopens the new one. */
static void test_processes_rotating(void **state)
{
	fixture *f = *state;
	sl_audit_report rep;
	pid_t pids[3];
	char **files = NULL;
	size_t n = 0;

	for (int p = 0; p < 3; p++) {
		pids[p] = fork();
		assert_true(pids[p] >= 0);
		if (pids[p] == 0) {
			sl_audit *a = NULL;
			if (sl_audit_open(f->log, f->sk, "rotating", 4, &a) != SL_OK)
				_exit(2);
			sl_audit_set_rotation(a, 2500);
			for (int i = 0; i < 30; i++) {
				sl_audit_record r = {.event = SL_AUDIT_EV_CHALLENGE};
				if (sl_audit_append(a, &r) != SL_OK)
					_exit(3);
			}
			_exit(sl_audit_close(a) == SL_OK ? 0 : 4);
		}
	}
	for (int p = 0; p < 3; p++) {
		int st = 0;
		assert_int_equal(waitpid(pids[p], &st, 0), pids[p]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	assert_int_equal(sl_audit_files(f->log, &files, &n), SL_OK);
	assert_true(n >= 5);
	sl_audit_verify_opts o = {.pubkey_path = f->pk};
	assert_int_equal(sl_audit_verify((const char *const *)files, n, &o, &rep), SL_OK);
	/* 90 records; the rest are checkpoints (interval, rotate, close), all
	 * signed: each rotated file ends with its "rotate" checkpoint */
	assert_int_equal(rep.first_seq, 1);
	assert_int_equal(rep.records - rep.checkpoints, 90);
	assert_true(rep.checkpoints >= 3 + (n - 1));
	sl_audit_files_free(files, n);
}

static void test_event_and_export(void **state)
{
	fixture *f = *state;
	sl_audit *a = NULL;
	char *buf = NULL;
	size_t len = 0;
	const char *files[] = {f->log};

	assert_int_equal(sl_audit_open(f->log, f->sk, "a=b|c", 100, &a), SL_OK);
	json_t *d = json_pack("{s:s}", "note", "x=1\\y\nz");
	assert_int_equal(sl_audit_event(a, SL_AUDIT_EV_RUN_ERROR, "job|1", SL_AUDIT_ERROR, d),
	                 SL_OK);
	json_decref(d);
	assert_int_equal(sl_audit_close(a), SL_OK);
	sl_audit_export_opts eo = {.format = SL_AUDIT_FMT_CEF,
	                           .verify = true,
	                           .event = SL_AUDIT_EV_RUN_ERROR,
	                           .verify_opts = {.pubkey_path = f->pk}};
	FILE *m = open_memstream(&buf, &len);
	assert_int_equal(sl_audit_export(files, 1, &eo, m, NULL), SL_OK);
	fclose(m);
	/* header: pipes escaped; extension: '=', '\\' and newlines escaped */
	assert_non_null(strstr(buf, "CEF:0|seclaunch|seclaunch|"));
	assert_non_null(strstr(buf, "|run.error|Launch failed|5|rt="));
	assert_non_null(strstr(buf, " suser=a\\=b|c "));
	assert_non_null(strstr(buf, " cs1Label=jobId cs1=job|1"));
	assert_non_null(strstr(buf, " msg={\"note\":\"x\\=1\\\\\\\\y\\\\nz\"}"));
	assert_null(strchr(buf, '\r'));
	assert_ptr_equal(strchr(buf, '\n'), buf + len - 1);
	free(buf);
}

static void test_parse_line_bad(void **state)
{
	(void)state;
	const char *good = "{\"seq\":1,\"time\":\"2026-11-29T18:55:04.123Z\",\"host\":\"h\","
	                   "\"actor\":\"a\",\"event\":\"kms.release\",\"job_id\":null,"
	                   "\"dataset_id\":null,\"key_id\":null,\"policy_digest\":null,"
	                   "\"decision\":\"allow\",\"reasons\":[],\"claims_digest\":null,"
	                   "\"details\":null,\"prev\":\"" /* 64 hex */
	                   "0000000000000000000000000000000000000000000000000000000000000000\"}";
	json_t *rec = NULL;
	assert_int_equal(sl_audit_parse_line((const uint8_t *)good, strlen(good), &rec), SL_OK);
	json_decref(rec);
	static const char *const bad[] = {
	    "",
	    "[]",
	    "{\"seq\":1}",
	    "not json",
	    /* duplicate key */
	    "{\"seq\":1,\"seq\":2}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sl_audit_parse_line((const uint8_t *)bad[i], strlen(bad[i]), NULL),
		                 SL_E_FORMAT);
	/* one field at a time made wrong */
	struct {
		const char *from, *to, *names;
	} subs[] = {
	    {"\"seq\":1", "\"seq\":0", "seq"},
	    {"\"seq\":1", "\"seq\":\"1\"", "seq"},
	    {"18:55:04.123Z", "18:55:04.123+01:00", "time"},
	    {"2026-11-29", "2026-02-30", "time"},
	    {"\"event\":\"kms.release\"", "\"event\":\"KMS release\"", "event"},
	    {"\"reasons\":[]", "\"reasons\":\"x\"", "reasons"},
	    {"\"details\":null", "\"details\":[]", "details"},
	    {"\"prev\":\"0", "\"prev\":\"A", "prev"},
	    {"\"host\":\"h\"", "\"host\":\"h\",\"extra\":1", "extra"},
	    {"\"policy_digest\":null", "\"policy_digest\":\"abc\"", "policy_digest"},
	};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		char line[1024];
		const char *p = strstr(good, subs[i].from);
		assert_non_null(p);
		snprintf(line, sizeof(line), "%.*s%s%s", (int)(p - good), good, subs[i].to,
		         p + strlen(subs[i].from));
		assert_int_equal(sl_audit_parse_line((const uint8_t *)line, strlen(line), NULL),
		                 subs[i].names[0] == 't' ? SL_E_INPUT : SL_E_FORMAT);
		assert_non_null(strstr(sl_err_detail(), subs[i].names));
	}
	/* the size cap */
	size_t big = SL_AUDIT_MAX_LINE + 1;
	uint8_t *b = malloc(big);
	memset(b, ' ', big);
	assert_int_equal(sl_audit_parse_line(b, big, NULL), SL_E_TOO_LARGE);
	free(b);
}

/* details nested `levels` arrays deep under details.x: the innermost array
 * is at level 2 + levels of the record. */
static json_t *nested(size_t levels)
{
	json_t *v = json_array();
	for (size_t i = 1; i < levels; i++) {
		json_t *outer = json_array();
		json_array_append_new(outer, v);
		v = outer;
	}
	return json_pack("{s:o}", "x", v);
}

/* The line a reader would see for a record with these details. */
static char *line_with(json_t *details)
{
	json_t *o =
	    json_pack("{s:i, s:s, s:s, s:s, s:s, s:n, s:n, s:n, s:n, s:n, s:n, s:n, s:O, "
	              "s:s}",
	              "seq", 1, "time", "2026-11-29T18:55:04.123Z", "host", "h", "actor", "a",
	              "event", SL_AUDIT_EV_RELEASE, "job_id", "dataset_id", "key_id",
	              "policy_digest", "decision", "reasons", "claims_digest", "details", details,
	              "prev", "0000000000000000000000000000000000000000000000000000000000000000");
	char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return line;
}

/* The writer checks a record with the reader's rules without parsing it
 * back: what it accepts, the reader accepts, and what the reader's parser
 * would refuse (too deep, a NUL in a string or a key) it refuses. */
static void test_writer_matches_reader(void **state)
{
	fixture *f = *state;
	sl_audit *a = NULL;
	sl_audit_record r = {.event = SL_AUDIT_EV_RELEASE};
	char *line = NULL;
	assert_int_equal(sl_audit_open(f->log, NULL, NULL, 0, &a), SL_OK);
	/* at the parser's depth limit: written, and the reader takes the line */
	r.details = nested(2046);
	line = line_with(r.details);
	assert_int_equal(sl_audit_parse_line((const uint8_t *)line, strlen(line), NULL), SL_OK);
	free(line);
	assert_int_equal(sl_audit_append(a, &r), SL_OK);
	json_decref(r.details);
	/* one level more: the reader refuses the line, so the writer refuses it */
	r.details = nested(2047);
	line = line_with(r.details);
	assert_int_equal(sl_audit_parse_line((const uint8_t *)line, strlen(line), NULL),
	                 SL_E_FORMAT);
	free(line);
	assert_int_equal(sl_audit_append(a, &r), SL_E_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "deeper"));
	json_decref(r.details);
	/* a NUL in a string value */
	r.details = json_pack("{s:s#}", "s", "a\0b", (size_t)3);
	line = line_with(r.details);
	assert_int_equal(sl_audit_parse_line((const uint8_t *)line, strlen(line), NULL),
	                 SL_E_FORMAT);
	free(line);
	assert_int_equal(sl_audit_append(a, &r), SL_E_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "NUL"));
	json_decref(r.details);
	/* a NUL in an object key */
	r.details = json_object();
	assert_int_equal(json_object_setn_new(r.details, "k\0x", 3, json_true()), 0);
	line = line_with(r.details);
	assert_int_equal(sl_audit_parse_line((const uint8_t *)line, strlen(line), NULL),
	                 SL_E_FORMAT);
	free(line);
	assert_int_equal(sl_audit_append(a, &r), SL_E_FORMAT);
	json_decref(r.details);
	/* over the line limit */
	char *big = malloc(SL_AUDIT_MAX_LINE);
	memset(big, 'x', SL_AUDIT_MAX_LINE - 1);
	big[SL_AUDIT_MAX_LINE - 1] = '\0';
	r.details = json_pack("{s:s}", "big", big);
	free(big);
	assert_int_equal(sl_audit_append(a, &r), SL_E_TOO_LARGE);
	json_decref(r.details);
	/* a field the reader's rules refuse, inside an otherwise good record */
	r.details = NULL;
	r.claims_digest = "ABC";
	assert_int_equal(sl_audit_append(a, &r), SL_E_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "claims_digest"));
	assert_int_equal(sl_audit_close(a), SL_OK);
	/* the one record written reads back: every line of the log parses */
	FILE *fp = fopen(f->log, "r");
	assert_non_null(fp);
	size_t cap = 0, lines = 0;
	ssize_t n;
	char *buf = NULL;
	while ((n = getline(&buf, &cap, fp)) > 0) {
		assert_int_equal(sl_audit_parse_line((const uint8_t *)buf, (size_t)n - 1, NULL),
		                 SL_OK);
		lines++;
	}
	assert_int_equal(lines, 1);
	free(buf);
	fclose(fp);
}

static void test_time_parse(void **state)
{
	(void)state;
	int64_t ms = 0;
	assert_int_equal(sl_audit_time_parse("1970-01-01T00:00:01.5Z", &ms, "t"), SL_OK);
	assert_int_equal(ms, 1500);
	assert_int_equal(sl_audit_time_parse("2026-11-29", &ms, "t"), SL_OK);
	assert_int_equal(ms, 1795910400000LL);
	assert_int_equal(sl_audit_time_parse("2026-11-29T00:00:00", &ms, "t"), SL_E_INPUT);
	assert_int_equal(sl_audit_time_parse("2026-13-01T00:00:00Z", &ms, "t"), SL_E_INPUT);
	assert_int_equal(sl_audit_time_parse("2026-11-29T00:00:00.1234567890Z", &ms, "t"),
	                 SL_E_INPUT);
}

static void test_append_refuses(void **state)
{
	fixture *f = *state;
	sl_audit *a = NULL;
	assert_int_equal(sl_audit_open(f->log, NULL, NULL, 0, &a), SL_OK);
	sl_audit_record r = {.event = SL_AUDIT_EV_CHECKPOINT};
	assert_int_equal(sl_audit_append(a, &r), SL_E_USAGE);
	r.event = "Bad Event";
	assert_int_equal(sl_audit_append(a, &r), SL_E_FORMAT);
	r.event = SL_AUDIT_EV_RELEASE;
	r.policy_digest = "not-hex";
	assert_int_equal(sl_audit_append(a, &r), SL_E_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "policy_digest"));
	assert_int_equal(sl_audit_close(a), SL_OK);
	/* a key file readable by others is refused */
	chmod(f->sk, 0644);
	assert_int_equal(sl_audit_open(f->log, f->sk, NULL, 0, &a), SL_E_PERM);
	chmod(f->sk, 0600);
	/* keygen never overwrites */
	assert_int_equal(sl_audit_keygen(f->sk, f->pk), SL_E_EXISTS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tamper, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_torn_line, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_processes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rotation, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_append_refuses, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_processes_rotating, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_event_and_export, setup, teardown),
	    cmocka_unit_test(test_parse_line_bad),
	    cmocka_unit_test_setup_teardown(test_writer_matches_reader, setup, teardown),
	    cmocka_unit_test(test_time_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
