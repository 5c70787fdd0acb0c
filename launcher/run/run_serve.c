/* seclaunch serve: the attested launch of `seclaunch run` (run_exec.c), then
 * the data service for every process that presents the step's token, until
 * SIGTERM/SIGINT/SIGHUP or the end of --until-pid; the wipe and the audit
 * record follow as after a job (docs/job-interface.md, "seclaunch serve"). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_int.h"
#include "seclaunch/proc.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

json_t *sl_run_serve_context(void)
{
	static const char *const slurm[][2] = {
	    {"slurm_job_id", "SLURM_JOB_ID"},
	    {"slurm_step_id", "SLURM_STEP_ID"},
	    {"slurm_array_job_id", "SLURM_ARRAY_JOB_ID"},
	    {"slurm_array_task_id", "SLURM_ARRAY_TASK_ID"},
	    {"slurm_restart_count", "SLURM_RESTART_COUNT"},
	};
	char host[256] = "";
	const char *node = getenv("SLURMD_NODENAME");
	json_t *c = json_object();

	if (c == NULL)
		return NULL;
	if (node == NULL || node[0] == '\0') {
		if (gethostname(host, sizeof(host) - 1) == 0)
			node = host;
	}
	if (node != NULL && node[0] != '\0')
		json_object_set_new(c, "node", json_string(node));
	for (size_t i = 0; i < sizeof(slurm) / sizeof(slurm[0]); i++) {
		const char *v = getenv(slurm[i][1]);
		/* a value that is not printable text is left out, not audited */
		json_t *js = v != NULL && v[0] != '\0' && strlen(v) < 64 ? json_string(v) : NULL;
		if (js != NULL)
			json_object_set_new(c, slurm[i][0], js);
	}
	return c;
}

/* The datasets as the tasks see them: no inherited descriptor (the tasks are
 * not seclaunch's children), every host dataset through the service. */
static json_t *tasks_data(const json_t *data)
{
	json_t *d = json_deep_copy(data), *e;
	const char *k;
	if (d == NULL)
		return NULL;
	json_object_foreach (d, k, e) {
		json_object_del(e, "fd");
		json_object_del(e, "path");
	}
	return d;
}

/* Writes the whole line to fd; false on failure. */
static bool write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static SL_RESULT announce(const struct sl_run_serve_in *in, const char *line)
{
	sl_err rc = SL_E_SYSTEM;
	int fd = -1;
	struct sl_run_serve *o = in->o;

	if (o->ready_file != NULL) {
		/* with --user, made by the job's user (whose file it is), so a
		 * folder on its path that the user can change misleads nobody */
		rc = sl_user_create(in->user->set ? in->user : NULL, o->ready_file, &fd);
		if (rc != SL_OK) {
			rc = sl_err_wrap(SL_E_SYSTEM, "--ready-file");
			goto out;
		}
		rc = SL_E_SYSTEM;
		SL_ENSURE(write_all(fd, line, strlen(line)), SL_E_IO, "--ready-file %s: %s",
		          o->ready_file, strerror(errno));
		close(fd);
		fd = -1;
	}
	if (o->ready_fd >= 0) {
		int rfd = o->ready_fd;
		bool ok = write_all(rfd, line, strlen(line));
		close(rfd);
		o->ready_fd = -1;
		SL_ENSURE(ok, SL_E_IO, "--ready-fd %d: %s", rfd, strerror(errno));
	}
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

sl_err sl_run_step_serve(const struct sl_run_serve_in *in, json_t *data, const char **why,
                         int *exit_code)
{
	sl_err rc = SL_E_INTERNAL;
	uint8_t raw[32];
	char token[65];
	char *line = NULL, *text = NULL;
	json_t *td = tasks_data(data), *ready = NULL;
	static char sigwhy[32];
	const char *socket = NULL;

	bool cut;
	SL_ENSURE(td != NULL, SL_E_NOMEM, "SECLAUNCH_DATA");
	/* the tasks' SECLAUNCH_DATA is this; past the limit they page the
	 * file lists from the service */
	SL_GUARD(sl_run_data_slim(in->rep, td, SL_RUN_DATA_ENV_MAX, &cut));
	sl_random(raw, sizeof(raw));
	sl_hex_encode(raw, sizeof(raw), token);
	SL_GUARD(in->data_service(in->ctx, data, token, &socket));
	ready = json_pack("{s:s, s:s, s:O, s:s?}", "socket", socket, "token", token, "data", td,
	                  "output_dir", sl_out_dir(in->out));
	SL_ENSURE(ready != NULL, SL_E_NOMEM, "ready line");
	text = json_dumps(ready, JSON_COMPACT | JSON_SORT_KEYS);
	SL_ENSURE(text != NULL && asprintf(&line, "%s\n", text) > 0, SL_E_NOMEM, "ready line");
	SL_GUARD(announce(in, line));
	sl_report_say(in->rep, "serving %zu dataset%s on %s", in->ndatasets,
	              in->ndatasets == 1 ? "" : "s", socket);
	/* keys released under key_ttl are a lease: renewed while serving; a
	 * refused or missed renewal stops serve as it stops a job */
	*exit_code = 0;
	/* armed from the release's lease first: started unarmed, it would
	 * never renew (nor end) */
	const int *lease_fd = sl_run_lease_stop_fd(in->lease, in->granted);
	sl_run_lease_start(in->lease);
	int sig = 0;
	for (;;) {
		sig = sl_supervise_take_pending();
		if (sig != 0) {
			snprintf(sigwhy, sizeof(sigwhy), "signal %d", sig);
			*why = sigwhy;
			break;
		}
		if (sl_out_preempt_noticed(in->out)) {
			*why = "preemption notice";
			break;
		}
		if (in->o->until_pid > 0 && !sl_proc_alive(in->o->until_pid)) {
			*why = "--until-pid ended";
			break;
		}
		struct pollfd pf = {.fd = lease_fd != NULL ? *lease_fd : -1, .events = POLLIN};
		if (poll(&pf, 1, 100) > 0 && pf.revents != 0) {
			*why = "lease ended";
			break;
		}
	}
	/* still renewed while the outputs are sealed (stopped after that) */
	sl_run_lease_job_over(in->lease);
	/* the outputs as after a job: no checkpoint from here on; a SIGTERM
	 * under --preempt-watch sigterm is a preemption (outputs.c) */
	sl_job_result res = {.forwarded = sig};
	sl_out_job_exited(in->out, &res);
	if (strcmp(*why, "lease ended") == 0)
		(void)sl_run_lease_end(in->lease, exit_code);
	rc = SL_OK;
out:
	sl_wipe(raw, sizeof(raw));
	sl_wipe(token, sizeof(token));
	json_decref(td);
	if (ready != NULL) {
		/* the token is in it */
		json_object_set_new(ready, "token", json_string(""));
		json_decref(ready);
	}
	if (line != NULL) {
		sl_wipe(line, strlen(line));
		free(line);
	}
	if (text != NULL) {
		sl_wipe(text, strlen(text));
		free(text);
	}
	return rc;
}

void sl_run_serve_failed(struct sl_run *o, sl_err rc, int exit_code, const char *message)
{
	int fd = o->serve.ready_fd;
	json_t *j;
	char *text;
	if (fd < 0)
		return;
	j = json_pack("{s:{s:s, s:i, s:s}}", "error", "code", sl_err_name(rc), "exit", exit_code,
	              "message", message);
	text = j != NULL ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	if (text != NULL) {
		(void)(write_all(fd, text, strlen(text)) && write_all(fd, "\n", 1));
		free(text);
	}
	json_decref(j);
	close(fd);
	o->serve.ready_fd = -1;
}
