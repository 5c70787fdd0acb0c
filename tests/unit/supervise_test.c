/* Job environment (allow-list, --env, --env-pass, SECLAUNCH_DATA) and job
 * supervision (exit status, signal death, exec failure, descriptors, process
 * group, signal forwarding, timeout with grace). Jobs are plain /bin/sh
 * commands that write what they see into files under a temp directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../launcher/job/job.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/sl-supervise.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	return sl_supervise_init() == SL_OK ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static char *slurp(const char *name)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	static char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; p != NULL && *p != '\0';) {
		if (strncmp(p, line, n) == 0 && (p[n] == '\n' || p[n] == '\0'))
			return true;
		p = strchr(p, '\n');
		p = p != NULL ? p + 1 : NULL;
	}
	return false;
}

static char *const base_env[] = {"PATH=/usr/bin:/bin",
                                 "HOME=/root",
                                 "LANG=C.UTF-8",
                                 "LC_ALL=C",
                                 "TERM=xterm",
                                 "TZ=UTC",
                                 "CUDA_VISIBLE_DEVICES=0",
                                 "NVIDIA_DRIVER_CAPABILITIES=compute",
                                 "CUDA_=x",
                                 "SECRET_TOKEN=hunter2",
                                 "LD_PRELOAD=/evil.so",
                                 "SECLAUNCH_TCTI=swtpm:port=1",
                                 "SECLAUNCH_DATA=forged",
                                 "AWS_SECRET_ACCESS_KEY=abc",
                                 NULL};

static void test_env_allow_list(void **state)
{
	(void)state;
	sl_job_env *e = NULL;
	char **v = NULL;
	assert_int_equal(sl_job_env_new(&e), SL_OK);
	assert_int_equal(sl_job_env_build(e, base_env, "{\"a\":{}}", &v), SL_OK);
	size_t n = 0;
	for (; v[n] != NULL; n++) {
		assert_null(strstr(v[n], "hunter2"));
		assert_null(strstr(v[n], "LD_PRELOAD"));
		assert_null(strstr(v[n], "SECLAUNCH_TCTI"));
		assert_null(strstr(v[n], "forged"));
		assert_null(strstr(v[n], "AWS_"));
		assert_false(strncmp(v[n], "CUDA_=", 6) == 0); /* a bare prefix is no name */
	}
	/* 8 allowed + SECLAUNCH_DATA (+ PYTHONPATH to seclaunch's own helper,
	 * as this test runs from a source checkout) */
	assert_int_equal(n, 9 + (sl_job_pyhelper_dir() != NULL));
	bool data = false, cuda = false, lc = false;
	for (size_t i = 0; i < n; i++) {
		data |= strcmp(v[i], "SECLAUNCH_DATA={\"a\":{}}") == 0;
		cuda |= strcmp(v[i], "CUDA_VISIBLE_DEVICES=0") == 0;
		lc |= strcmp(v[i], "LC_ALL=C") == 0;
	}
	assert_true(data && cuda && lc);
	sl_strv_free(v);
	sl_job_env_free(e);
}

static void test_env_set_and_pass(void **state)
{
	(void)state;
	sl_job_env *e = NULL;
	char **v = NULL;
	assert_int_equal(sl_job_env_new(&e), SL_OK);
	assert_int_equal(sl_job_env_pass(e, "SECRET_TOKEN"), SL_OK);
	assert_int_equal(sl_job_env_pass(e, "NOT_SET_ANYWHERE"), SL_OK);
	assert_int_equal(sl_job_env_set(e, "PATH=/opt/bin"), SL_OK);
	assert_int_equal(sl_job_env_set(e, "EPOCHS=3"), SL_OK);
	assert_int_equal(sl_job_env_set(e, "EPOCHS=4"), SL_OK); /* later wins */
	assert_int_equal(sl_job_env_set(e, "EMPTY="), SL_OK);
	/* refused: SECLAUNCH_DATA, bad names, no '=' */
	assert_int_equal(sl_job_env_set(e, "SECLAUNCH_DATA={}"), SL_E_USAGE);
	assert_non_null(strstr(sl_err_detail(), "SECLAUNCH_DATA"));
	assert_int_equal(sl_job_env_pass(e, "SECLAUNCH_DATA"), SL_E_USAGE);
	assert_int_equal(sl_job_env_set(e, "1X=2"), SL_E_USAGE);
	assert_int_equal(sl_job_env_set(e, "A-B=2"), SL_E_USAGE);
	assert_int_equal(sl_job_env_set(e, "NOVALUE"), SL_E_USAGE);
	assert_non_null(strstr(sl_err_detail(), "NOVALUE"));
	assert_int_equal(sl_job_env_pass(e, "A=B"), SL_E_USAGE);
	assert_int_equal(sl_job_env_build(e, base_env, NULL, &v), SL_OK);
	int path = 0, epochs = 0, secret = 0, empty = 0, data = 0;
	for (size_t i = 0; v[i] != NULL; i++) {
		path += strncmp(v[i], "PATH=", 5) == 0;
		assert_true(strncmp(v[i], "PATH=", 5) != 0 || strcmp(v[i], "PATH=/opt/bin") == 0);
		epochs += strcmp(v[i], "EPOCHS=4") == 0;
		assert_true(strcmp(v[i], "EPOCHS=3") != 0);
		secret += strcmp(v[i], "SECRET_TOKEN=hunter2") == 0;
		empty += strcmp(v[i], "EMPTY=") == 0;
		data += strncmp(v[i], "SECLAUNCH_DATA=", 15) == 0;
		assert_null(strstr(v[i], "NOT_SET_ANYWHERE"));
	}
	assert_int_equal(path, 1);
	assert_int_equal(epochs, 1);
	assert_int_equal(secret, 1);
	assert_int_equal(empty, 1);
	assert_int_equal(data, 0);
	sl_strv_free(v);
	sl_job_env_free(e);
}

/* Distributed-training variables pass by default, --clean-env drops them,
 * --env-pass takes shell patterns, and no SECLAUNCH_* variable of this
 * process passes even through "*" (only the ones seclaunch sets). */
static bool has(char **v, const char *kv)
{
	for (size_t i = 0; v[i] != NULL; i++)
		if (strcmp(v[i], kv) == 0)
			return true;
	return false;
}

static void test_env_distributed_and_patterns(void **state)
{
	(void)state;
	char *const env[] = {"PATH=/bin",
	                     "RANK=1",
	                     "WORLD_SIZE=4",
	                     "MASTER_ADDR=10.0.0.1",
	                     "SLURM_JOB_ID=77",
	                     "NCCL_DEBUG=INFO",
	                     "NCCL_IB_HCA=mlx5",
	                     "OTHER=1",
	                     "SECLAUNCH_TCTI=swtpm:port=1",
	                     "SECLAUNCH_AUDIT_KEY=/k",
	                     NULL};
	sl_job_env *e = NULL;
	char **v = NULL;

	assert_int_equal(sl_job_env_new(&e), SL_OK);
	assert_int_equal(sl_job_env_pass(e, "NCCL_*"), SL_OK);
	assert_int_equal(sl_job_env_pass(e, "SECLAUNCH_*"), SL_E_USAGE);
	assert_int_equal(sl_job_env_pass(e, "SECLAUNCH_DATA_SOCKET"), SL_E_USAGE);
	assert_int_equal(sl_job_env_pass(e, "A B"), SL_E_USAGE);
	assert_int_equal(sl_job_env_set(e, "SECLAUNCH_DATA_SOCKET=/x"), SL_E_USAGE);
	assert_int_equal(sl_job_env_own(e, "SECLAUNCH_DATA_SOCKET=/run/s.sock"), SL_OK);
	assert_int_equal(sl_job_env_build(e, env, "{}", &v), SL_OK);
	assert_true(has(v, "RANK=1") && has(v, "WORLD_SIZE=4") && has(v, "MASTER_ADDR=10.0.0.1"));
	assert_true(has(v, "SLURM_JOB_ID=77") && has(v, "NCCL_DEBUG=INFO") &&
	            has(v, "NCCL_IB_HCA=mlx5"));
	assert_true(has(v, "SECLAUNCH_DATA_SOCKET=/run/s.sock"));
	assert_false(has(v, "OTHER=1") || has(v, "SECLAUNCH_TCTI=swtpm:port=1") ||
	             has(v, "SECLAUNCH_AUDIT_KEY=/k"));
	sl_strv_free(v);
	v = NULL;
	/* "*" passes everything of the user's, still nothing of seclaunch's */
	assert_int_equal(sl_job_env_pass(e, "*"), SL_OK);
	sl_job_env_clean(e);
	assert_int_equal(sl_job_env_build(e, env, NULL, &v), SL_OK);
	assert_true(has(v, "OTHER=1") && has(v, "RANK=1"));
	assert_false(has(v, "SECLAUNCH_TCTI=swtpm:port=1") || has(v, "SECLAUNCH_AUDIT_KEY=/k"));
	sl_strv_free(v);
	sl_job_env_free(e);
	/* --clean-env without patterns: no distributed variables */
	assert_int_equal(sl_job_env_new(&e), SL_OK);
	sl_job_env_clean(e);
	assert_int_equal(sl_job_env_build(e, env, NULL, &v), SL_OK);
	assert_false(has(v, "RANK=1") || has(v, "SLURM_JOB_ID=77") ||
	             has(v, "MASTER_ADDR=10.0.0.1"));
	sl_strv_free(v);
	sl_job_env_free(e);
}

static void test_env_default_path(void **state)
{
	(void)state;
	sl_job_env *e = NULL;
	char **v = NULL;
	char *const none[] = {"FOO=1", NULL};
	assert_int_equal(sl_job_env_new(&e), SL_OK);
	assert_int_equal(sl_job_env_build(e, none, NULL, &v), SL_OK);
	assert_string_equal(v[0], "PATH=/usr/local/bin:/usr/bin:/bin");
	if (sl_job_pyhelper_dir() != NULL) {
		/* a source checkout's job finds seclaunch_data (job_env.c) */
		assert_non_null(v[1]);
		assert_int_equal(strncmp(v[1], "PYTHONPATH=", 11), 0);
		assert_string_equal(v[1] + 11, sl_job_pyhelper_dir());
		assert_null(v[2]);
	} else {
		assert_null(v[1]);
	}
	sl_strv_free(v);
	sl_job_env_free(e);
}

static char *const job_env[] = {"PATH=/usr/bin:/bin", "SECLAUNCH_DATA={}", NULL};

static sl_job_result run_sh(const char *script, unsigned timeout, unsigned grace, const int *fds,
                            size_t nfds, void (*started)(pid_t, void *))
{
	char *const argv[] = {"/bin/sh", "-c", (char *)script, "sh", dir, NULL};
	sl_job_spec sp = {.argv = argv,
	                  .envp = job_env,
	                  .fds = fds,
	                  .nfds = nfds,
	                  .timeout_s = timeout,
	                  .grace_s = grace,
	                  .started = started};
	sl_job_result r;
	assert_int_equal(sl_job_run(&sp, &r), SL_OK);
	return r;
}

static void test_exit_status(void **state)
{
	(void)state;
	sl_job_result r = run_sh("exit 3", 0, 0, NULL, 0, NULL);
	assert_int_equal(r.exit_code, 3);
	assert_false(r.signaled);
	r = run_sh("exit 0", 0, 0, NULL, 0, NULL);
	assert_int_equal(r.exit_code, 0);
}

static void test_signal_death(void **state)
{
	(void)state;
	sl_job_result r = run_sh("kill -SEGV $$", 0, 0, NULL, 0, NULL);
	assert_true(r.signaled);
	assert_int_equal(r.signo, SIGSEGV);
	assert_int_equal(r.exit_code, 128 + SIGSEGV);
}

static void test_exec_failure(void **state)
{
	(void)state;
	char *const argv[] = {"/nonexistent/train.py", NULL};
	sl_job_spec sp = {.argv = argv, .envp = job_env};
	sl_job_result r;
	assert_int_equal(sl_job_run(&sp, &r), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "/nonexistent/train.py"));
	char *const argv2[] = {"no-such-command-anywhere", NULL};
	sp.argv = argv2;
	assert_int_equal(sl_job_run(&sp, &r), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "No such file"));
}

/* Only 0, 1, 2 and the staged descriptors reach the job, at their numbers,
 * in the job's own process group, with exactly the environment given. */
static void test_fds_pgrp_env(void **state)
{
	(void)state;
	/* high numbers, so the descriptor ls opens for itself (3) is told apart */
	int keep = fcntl(open("/dev/null", O_RDONLY | O_CLOEXEC), F_DUPFD_CLOEXEC, 30);
	int leak = fcntl(open("/dev/null", O_RDONLY), F_DUPFD, 40); /* not CLOEXEC */
	int leak2 = fcntl(open("/dev/zero", O_RDONLY), F_DUPFD, 50);
	assert_true(keep >= 30 && leak >= 40 && leak2 >= 50);
	sl_job_result r = run_sh("ls /proc/self/fd > \"$1/fds\"; "
	                         "cut -d' ' -f5 /proc/self/stat > \"$1/pgid\"; "
	                         "echo $$ > \"$1/pid\"; "
	                         "tr '\\0' '\\n' < /proc/$$/environ > \"$1/env\"",
	                         0, 0, &keep, 1, NULL);
	assert_int_equal(r.exit_code, 0);
	char want[16];
	snprintf(want, sizeof(want), "%d", keep);
	char *fds = slurp("fds");
	assert_true(has_line(fds, "0") && has_line(fds, "1") && has_line(fds, "2"));
	assert_true(has_line(fds, want));
	snprintf(want, sizeof(want), "%d", leak);
	assert_false(has_line(fds, want));
	snprintf(want, sizeof(want), "%d", leak2);
	assert_false(has_line(fds, want));
	/* ls's own directory fd is the only other one */
	size_t lines = 0;
	for (const char *p = fds; *p; p++)
		lines += *p == '\n';
	assert_int_equal(lines, 5);
	char pid[32];
	snprintf(pid, sizeof(pid), "%s", slurp("pid"));
	assert_int_equal(atoi(pid), r.pid);
	/* ls runs in the shell's group: the job's own group, led by the job */
	assert_int_equal(atoi(slurp("pgid")), r.pid);
	char *env = slurp("env");
	assert_true(has_line(env, "PATH=/usr/bin:/bin"));
	assert_true(has_line(env, "SECLAUNCH_DATA={}"));
	close(keep);
	close(leak);
	close(leak2);
}

static void send_term(pid_t pid, void *ctx)
{
	(void)pid;
	(void)ctx;
	kill(getpid(), SIGTERM); /* as if someone signalled seclaunch */
}

static void test_forward_sigterm(void **state)
{
	(void)state;
	sl_job_result r = run_sh("sleep 30", 0, 0, NULL, 0, send_term);
	assert_int_equal(r.forwarded, SIGTERM);
	assert_true(r.signaled);
	assert_int_equal(r.exit_code, 143);
	assert_int_equal(sl_supervise_take_pending(), 0); /* consumed, not left pending */
}

static void test_timeout_and_grace(void **state)
{
	(void)state;
	sl_job_result r = run_sh("sleep 30", 1, 1, NULL, 0, NULL);
	assert_true(r.timed_out);
	assert_false(r.killed);
	assert_int_equal(r.exit_code, 143);
	/* a job that ignores SIGTERM is killed after the grace period */
	r = run_sh("trap '' TERM; sleep 30 & wait; sleep 30", 1, 1, NULL, 0, NULL);
	assert_true(r.timed_out);
	assert_true(r.killed);
	assert_int_equal(r.exit_code, 137);
}

static void test_pending_before_start(void **state)
{
	(void)state;
	assert_int_equal(sl_supervise_take_pending(), 0);
	kill(getpid(), SIGHUP);
	assert_int_equal(sl_supervise_take_pending(), SIGHUP);
	assert_int_equal(sl_supervise_take_pending(), 0);
}

/* once the job has set its trap (it touches dir/trapped then) */
static void await_trap(void)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/trapped", dir);
	for (int i = 0; i < 500 && access(p, F_OK) != 0; i++)
		usleep(10000);
	unlink(p);
}

static void trapped_term(pid_t pid, void *ctx)
{
	(void)pid;
	(void)ctx;
	await_trap();
	kill(getpid(), SIGTERM);
}

static void send_term_then_int(pid_t pid, void *ctx)
{
	(void)pid;
	(void)ctx;
	await_trap();
	/* two different signals: two of one kind pending at once are one */
	kill(getpid(), SIGTERM);
	kill(getpid(), SIGINT);
}

/* A job that ignores SIGINT and SIGTERM: the second one starts the grace
 * period, then SIGKILL. */
static void test_second_signal_escalates(void **state)
{
	(void)state;
	sl_job_result r = run_sh("trap '' INT TERM; : >\"$1/trapped\"; sleep 30 & wait; sleep 30",
	                         0, 1, NULL, 0, send_term_then_int);
	assert_true(r.escalated);
	assert_true(r.killed);
	assert_false(r.timed_out);
	assert_int_equal(r.exit_code, 137);
	/* one signal alone is only forwarded */
	r = run_sh("trap 'exit 5' TERM; : >\"$1/trapped\"; sleep 30 & wait", 0, 1, NULL, 0,
	           trapped_term);
	assert_false(r.escalated);
	assert_false(r.killed);
	assert_int_equal(r.exit_code, 5);
}

/* gone(name): the pid written to dir/name no longer runs */
static bool gone(const char *name)
{
	pid_t p = (pid_t)atoi(slurp(name));
	assert_true(p > 0);
	return kill(p, 0) != 0;
}

static const char escape[] =
    "setsid sh -c 'trap \"\" TERM HUP; sleep 30 & echo $! > \"$1/gc\"; wait' sh \"$1\" "
    "</dev/null >/dev/null 2>&1 & "
    "i=0; while [ ! -s \"$1/gc\" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done";

static void escape_case(bool no_cgroup)
{
	char *const argv[] = {"/bin/sh", "-c", (char *)escape, "sh", dir, NULL};
	sl_job_spec sp = {.argv = argv, .envp = job_env, .grace_s = 1, .no_cgroup = no_cgroup};
	sl_job_result r;
	char p[128];
	snprintf(p, sizeof(p), "%s/gc", dir);
	unlink(p);
	assert_int_equal(sl_job_run(&sp, &r), SL_OK);
	assert_int_equal(r.exit_code, 0);
	assert_true(gone("gc"));
	assert_true(r.leftover >= 1);
	if (no_cgroup)
		assert_string_equal(r.containment, "subreaper");
}

/* setsid + double fork: nothing of the job outlives it, under either
 * containment. */
static void test_escaped_descendant_killed(void **state)
{
	(void)state;
	escape_case(false);
	escape_case(true);
}

/* The job starts inside its own cgroup (created in it by clone3, or moved
 * into it by the child before exec where clone3 cannot): its first
 * instruction already runs there. */
static void test_job_starts_in_its_cgroup(void **state)
{
	(void)state;
	char *const argv[] = {"/bin/sh", "-c", "cat /proc/self/cgroup > \"$1/cg\"",
	                      "sh",      dir,  NULL};
	sl_job_spec sp = {.argv = argv, .envp = job_env, .grace_s = 1, .name = "cgtest"};
	sl_job_result r;
	assert_int_equal(sl_job_run(&sp, &r), SL_OK);
	assert_int_equal(r.exit_code, 0);
	if (strcmp(r.containment, "cgroup") != 0) {
		fprintf(stderr, "# skip: no writable cgroup v2 here (%s)\n", r.containment);
		return;
	}
	const char *cg = strstr(slurp("cg"), "0::");
	assert_non_null(cg);
	assert_non_null(strstr(cg, "/seclaunch-cgtest\n"));
}

static void test_resolve(void **state)
{
	(void)state;
	char out[256], bin1[128], bin2[128], path[300], f[160];
	snprintf(bin1, sizeof(bin1), "%s/b1", dir);
	snprintf(bin2, sizeof(bin2), "%s/b2", dir);
	assert_int_equal(mkdir(bin1, 0755), 0);
	assert_int_equal(mkdir(bin2, 0755), 0);
	snprintf(f, sizeof(f), "%s/tool", bin1);
	FILE *fp = fopen(f, "w");
	assert_non_null(fp);
	fclose(fp);
	assert_int_equal(chmod(f, 0644), 0);
	snprintf(path, sizeof(path), "PATH=%s:%s", bin1, bin2);
	char *const env[] = {path, NULL};
	/* only a file that cannot be executed: 126, naming it */
	assert_int_equal(sl_job_resolve("tool", env, NULL, out, sizeof(out)), 126);
	assert_non_null(strstr(sl_err_detail(), f));
	/* an executable one later in PATH wins, as with execvp */
	snprintf(f, sizeof(f), "%s/tool", bin2);
	fp = fopen(f, "w");
	assert_non_null(fp);
	fclose(fp);
	assert_int_equal(chmod(f, 0755), 0);
	assert_int_equal(sl_job_resolve("tool", env, NULL, out, sizeof(out)), 0);
	assert_string_equal(out, f);
	assert_int_equal(sl_job_resolve("no-such-tool", env, NULL, out, sizeof(out)), 127);
	assert_non_null(strstr(sl_err_detail(), "not found in the job's PATH"));
	assert_int_equal(sl_job_resolve("/nonexistent/x", env, NULL, out, sizeof(out)), 127);
	assert_int_equal(sl_job_resolve(dir, env, NULL, out, sizeof(out)), 126);
	assert_int_equal(sl_job_resolve("", env, NULL, out, sizeof(out)), 127);
}

static void test_user_parse(void **state)
{
	(void)state;
	sl_job_user u;
	assert_int_equal(sl_job_user_parse("no-such-user-xyz", &u), SL_E_USAGE);
	assert_int_equal(sl_job_user_parse(":", &u), SL_E_USAGE);
	assert_int_equal(sl_job_user_parse("root:", &u), SL_E_USAGE);
	assert_int_equal(sl_job_user_parse("root:no-such-group-xyz", &u), SL_E_USAGE);
	if (geteuid() == 0) {
		assert_int_equal(sl_job_user_parse("65534", &u), SL_OK);
		assert_true(u.set);
		assert_int_equal(u.uid, 65534);
		assert_int_equal(sl_job_user_parse("0:0", &u), SL_OK);
		assert_int_equal(u.gid, 0);
		assert_int_equal(u.ngroups, 1);
	} else {
		assert_int_equal(sl_job_user_parse("root", &u), SL_E_USAGE);
		assert_non_null(strstr(sl_err_detail(), "only root"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_env_allow_list),
	    cmocka_unit_test(test_env_set_and_pass),
	    cmocka_unit_test(test_env_default_path),
	    cmocka_unit_test(test_env_distributed_and_patterns),
	    cmocka_unit_test(test_exit_status),
	    cmocka_unit_test(test_signal_death),
	    cmocka_unit_test(test_exec_failure),
	    cmocka_unit_test(test_fds_pgrp_env),
	    cmocka_unit_test(test_forward_sigterm),
	    cmocka_unit_test(test_timeout_and_grace),
	    cmocka_unit_test(test_pending_before_start),
	    cmocka_unit_test(test_second_signal_escalates),
	    cmocka_unit_test(test_escaped_descendant_killed),
	    cmocka_unit_test(test_job_starts_in_its_cgroup),
	    cmocka_unit_test(test_resolve),
	    cmocka_unit_test(test_user_parse),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
