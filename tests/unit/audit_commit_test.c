/* Audit log group commit: many threads of one process appending at once are
 * written in batches (one write and one fsync per batch), yet the log is one
 * valid chain holding every record exactly once, in each thread's order; a
 * bad record fails alone; another handle writing between batches is noticed
 * (the writer re-reads the tail instead of trusting its own); and a writer
 * killed with SIGKILL in the middle of a burst leaves a log that verifies
 * and that the next writer continues; deferred appends are written at once,
 * in order, and survive their writer's death. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "seclaunch/audit.h"
#include "seclaunch/error.h"
#include "seclaunch/secret.h"

#define THREADS 16
#define PER_THREAD 150

typedef struct fixture {
	char dir[64];
	char log[128];
	char sk[128];
	char pk[128];
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/sl-auditgc-XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->log, sizeof(f->log), "%s/audit.log", f->dir);
	snprintf(f->sk, sizeof(f->sk), "%s/ck.key", f->dir);
	snprintf(f->pk, sizeof(f->pk), "%s/ck.pub", f->dir);
	if (sl_crypto_init() != SL_OK || sl_audit_keygen(f->sk, f->pk) != SL_OK)
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

/* Reads the log and marks seen[t][i] for every "run.stage" record with
 * details {"t": t, "i": i}; fails on a duplicate or on a thread's records
 * out of order. Returns the number of such records. */
static size_t scan_records(const char *log, int nthreads, int per, unsigned char *seen)
{
	FILE *fp = fopen(log, "r");
	char *line = NULL;
	size_t cap = 0, count = 0;
	int last[THREADS];
	assert_non_null(fp);
	for (int t = 0; t < THREADS; t++)
		last[t] = -1;
	while (getline(&line, &cap, fp) > 0) {
		json_t *rec = json_loads(line, 0, NULL);
		if (rec == NULL)
			continue; /* a torn tail (the crash test) */
		const char *ev = json_string_value(json_object_get(rec, "event"));
		json_t *d = json_object_get(rec, "details");
		if (ev != NULL && strcmp(ev, SL_AUDIT_EV_RUN_STAGE) == 0) {
			int t = (int)json_integer_value(json_object_get(d, "t"));
			int i = (int)json_integer_value(json_object_get(d, "i"));
			assert_true(t >= 0 && t < nthreads && i >= 0 && i < per);
			assert_int_equal(seen[t * per + i], 0);
			seen[t * per + i] = 1;
			/* each thread's appends return in order, so they are chained in order */
			assert_true(i > last[t]);
			last[t] = i;
			count++;
		}
		json_decref(rec);
	}
	free(line);
	fclose(fp);
	return count;
}

struct worker {
	sl_audit *a;
	int t;
	int per;
	int bad; /* appends of an invalid record that failed as they must */
};

static void *worker_main(void *p)
{
	struct worker *w = p;
	for (int i = 0; i < w->per; i++) {
		json_t *d = json_pack("{s:i, s:i}", "t", w->t, "i", i);
		sl_audit_record r = {.event = SL_AUDIT_EV_RUN_STAGE, .job_id = "gc", .details = d};
		sl_err rc = sl_audit_append(w->a, &r);
		json_decref(d);
		if (rc != SL_OK)
			return (void *)1;
		if (i % 25 == 7) {
			/* a record the writer refuses, in the middle of others' batches:
			 * it fails alone and leaves no trace in the chain */
			sl_audit_record bad = {.event = SL_AUDIT_EV_RUN_STAGE,
			                       .policy_digest = "not-hex"};
			if (sl_audit_append(w->a, &bad) != SL_E_FORMAT ||
			    strstr(sl_err_detail(), "policy_digest") == NULL)
				return (void *)2;
			w->bad++;
		}
	}
	return NULL;
}

static void test_many_threads(void **state)
{
	fixture *f = *state;
	sl_audit *a = NULL;
	sl_audit_report rep;
	pthread_t th[THREADS];
	struct worker w[THREADS];
	unsigned char *seen = calloc(THREADS * PER_THREAD, 1);

	assert_int_equal(sl_audit_open(f->log, f->sk, "gc", 50, &a), SL_OK);
	for (int t = 0; t < THREADS; t++) {
		w[t] = (struct worker){.a = a, .t = t, .per = PER_THREAD};
		assert_int_equal(pthread_create(&th[t], NULL, worker_main, &w[t]), 0);
	}
	for (int t = 0; t < THREADS; t++) {
		void *ret;
		pthread_join(th[t], &ret);
		assert_null(ret);
		assert_int_equal(w[t].bad, PER_THREAD / 25);
	}
	assert_int_equal(sl_audit_close(a), SL_OK);
	assert_int_equal(verify1(f->log, f->pk, true, &rep), SL_OK);
	/* every record once, a checkpoint after every 50th, one at close */
	assert_int_equal(rep.records, THREADS * PER_THREAD + THREADS * PER_THREAD / 50 + 1);
	assert_int_equal(rep.checkpoints, THREADS * PER_THREAD / 50 + 1);
	assert_int_equal(rep.torn_lines, 0);
	assert_int_equal(scan_records(f->log, THREADS, PER_THREAD, seen), THREADS * PER_THREAD);
	for (int k = 0; k < THREADS * PER_THREAD; k++)
		assert_int_equal(seen[k], 1);
	free(seen);
}

/* Two handles on one log in one process (as two processes would be): each
 * must notice the other's appends between its own and chain to them. */
static void test_other_writer_between(void **state)
{
	fixture *f = *state;
	sl_audit *a = NULL, *b = NULL;
	sl_audit_report rep;

	assert_int_equal(sl_audit_open(f->log, f->sk, "a", 0, &a), SL_OK);
	assert_int_equal(sl_audit_open(f->log, f->sk, "b", 0, &b), SL_OK);
	for (int i = 0; i < 6; i++) {
		sl_audit_record r = {.event = SL_AUDIT_EV_RUN_STAGE, .job_id = "x"};
		assert_int_equal(sl_audit_append(i % 3 == 2 ? b : a, &r), SL_OK);
		assert_int_equal(verify1(f->log, f->pk, false, &rep), SL_OK);
		assert_int_equal(rep.records, (uint64_t)i + 1);
	}
	assert_int_equal(sl_audit_close(b), SL_OK);
	assert_int_equal(sl_audit_close(a), SL_OK);
	assert_int_equal(verify1(f->log, f->pk, true, &rep), SL_OK);
	assert_int_equal(rep.records, 8);
}

static off_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : 0;
}

/* A child process appends from many threads without end; it is killed
 * with SIGKILL once the log has grown. What it left must verify (at most a
 * torn tail is reported), every record in it once; the next writer chains
 * on and the log verifies again. */
static void test_kill9_mid_burst(void **state)
{
	fixture *f = *state;
	sl_audit_report rep;
	sl_audit *a = NULL;
	unsigned char *seen = calloc(8 * 1000000, 1);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		sl_audit *ca = NULL;
		pthread_t th[8];
		struct worker w[8];
		if (sl_audit_open(f->log, f->sk, "doomed", 20, &ca) != SL_OK)
			_exit(2);
		for (int t = 0; t < 8; t++) {
			w[t] = (struct worker){.a = ca, .t = t, .per = 1000000};
			if (pthread_create(&th[t], NULL, worker_main, &w[t]) != 0)
				_exit(3);
		}
		for (int t = 0; t < 8; t++)
			pthread_join(th[t], NULL);
		_exit(4); /* not reached before the kill */
	}
	struct timespec ms10 = {0, 10 * 1000 * 1000};
	for (int i = 0; i < 1000 && file_size(f->log) < 200 * 1024; i++)
		nanosleep(&ms10, NULL);
	assert_true(file_size(f->log) >= 200 * 1024);
	kill(pid, SIGKILL);
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

	assert_int_equal(verify1(f->log, f->pk, false, &rep), SL_OK);
	assert_true(rep.torn_lines <= 1);
	assert_true(rep.records > 100);
	size_t n = scan_records(f->log, 8, 1000000, seen);
	assert_true(n > 50);
	/* the next writer continues the chain (recording a torn tail if any) */
	assert_int_equal(sl_audit_open(f->log, f->sk, "after", 0, &a), SL_OK);
	sl_audit_record r = {.event = SL_AUDIT_EV_RUN_WIPE, .job_id = "after"};
	assert_int_equal(sl_audit_append(a, &r), SL_OK);
	assert_int_equal(sl_audit_close(a), SL_OK);
	assert_int_equal(verify1(f->log, f->pk, true, &rep), SL_OK);
	free(seen);
}

/* Deferred appends (seclaunch run's launch records, fsync'd together before
 * the job starts): each is written at once, in order and chained, also
 * between another handle's durable appends and across a checkpoint falling
 * due in a deferred batch; a process that dies before syncing leaves them
 * all in the file (only a power loss could take the unsynced tail); sync
 * and close with nothing pending are no-ops. */
static void test_deferred(void **state)
{
	fixture *f = *state;
	sl_audit *a = NULL, *b = NULL;
	sl_audit_report rep;

	assert_int_equal(sl_audit_sync(NULL), SL_OK);
	assert_int_equal(sl_audit_open(f->log, f->sk, "a", 3, &a), SL_OK);
	assert_int_equal(sl_audit_open(f->log, f->sk, "b", 0, &b), SL_OK);
	assert_int_equal(sl_audit_sync(a), SL_OK); /* nothing written yet */
	for (int i = 0; i < 7; i++) {
		sl_audit_record r = {.event = SL_AUDIT_EV_RUN_STAGE, .job_id = "d"};
		if (i == 4)
			assert_int_equal(sl_audit_append(b, &r), SL_OK);
		else
			assert_int_equal(sl_audit_append_deferred(a, &r), SL_OK);
		/* on file at once (an interval checkpoint after every 3rd of a's) */
		assert_int_equal(verify1(f->log, f->pk, false, &rep), SL_OK);
		assert_int_equal(rep.records - rep.checkpoints, (uint64_t)i + 1);
	}
	assert_true(rep.checkpoints >= 2);
	assert_int_equal(sl_audit_sync(a), SL_OK);
	assert_int_equal(sl_audit_sync(a), SL_OK);
	assert_int_equal(sl_audit_close(b), SL_OK);
	assert_int_equal(sl_audit_close(a), SL_OK);
	assert_int_equal(verify1(f->log, f->pk, true, &rep), SL_OK);
	assert_int_equal(rep.records - rep.checkpoints, 7);

	/* a writer that dies with deferred records unsynced loses none */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		sl_audit *ca = NULL;
		if (sl_audit_open(f->log, f->sk, "dies", 0, &ca) != SL_OK)
			_exit(2);
		for (int i = 0; i < 5; i++) {
			sl_audit_record r = {.event = SL_AUDIT_EV_RUN_START, .job_id = "dies"};
			if (sl_audit_append_deferred(ca, &r) != SL_OK)
				_exit(3);
		}
		kill(getpid(), SIGKILL);
		_exit(4);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	assert_int_equal(verify1(f->log, f->pk, false, &rep), SL_OK);
	assert_int_equal(rep.records - rep.checkpoints, 12);
	assert_int_equal(rep.torn_lines, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_many_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_other_writer_between, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_kill9_mid_burst, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_deferred, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
