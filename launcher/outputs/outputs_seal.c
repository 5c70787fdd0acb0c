/* Sealing and the outputs' life around the job (outputs.h): the in-memory
 * folder, checkpoint requests, the preemption watcher, the final seal,
 * uploads (shards, then the manifest, then LATEST), the wipe. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../dataset/dataset_tree.h"
#include "outputs_int.h"
#include "seclaunch/fsat.h"
#include "seclaunch/json.h"
#include "seclaunch/util.h"

/* The staging folder under root's TMPDIR (ciphertext awaiting upload). */
static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir); /* lint: trusted path (root's staging folder) */
	struct dirent *e;
	char p[4200];
	if (d != NULL) {
		while ((e = readdir(d)) != NULL) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			(void)unlink(p); /* lint: trusted path (root's staging folder) */
		}
		closedir(d);
	}
	(void)rmdir(dir); /* lint: trusted path (root's staging folder) */
}

/* What seal_one hands the tree: each complete shard is queued for upload
 * at once, while the next is sealed. */
struct seal_pipe {
	struct sl_outputs *O;
	struct out_one *o;
	sl_out_up *up;
};

static SL_RESULT shard_sealed(void *ctx, const char *dir, const char *name, int fd, uint64_t size)
{
	struct seal_pipe *sp = ctx;
	sl_err rc = SL_E_ATTEST;
	char p[4200];

	/* the lease rule holds between shards too: once it ended, no more */
	SL_ENSURE(!sl_report_lease_ended(sp->O->x.rep), SL_E_ATTEST,
	          "output %s: not sealed: the keys' lease ended (%s)", sp->o->name,
	          sl_report_lease_reason(sp->O->x.rep));
	SL_GUARD(sl_out_up_add(sp->up, name, fd, size));
	/* its descriptor keeps the ciphertext until the PUT; the name goes now */
	if (dir != NULL) {
		snprintf(p, sizeof(p), "%s/%s", dir, name);
		(void)unlink(p); /* lint: trusted path (root's staging folder) */
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT put_latest(struct sl_outputs *O, struct out_one *o, uint64_t seq)
{
	sl_err rc = SL_E_IO;
	char text[32], path[2200];
	sl_remote *r = NULL;
	int fd = -1;
	int n = snprintf(text, sizeof(text), "%llu\n", (unsigned long long)seq);
	if (!o->remote) {
		snprintf(path, sizeof(path), "%s/" LATEST, o->dest);
		return sl_file_write_atomic(path, text, (size_t)n, 0644, true);
	}
	/* a small object from a memory file: the upload path reads a descriptor */
	fd = memfd_create("latest", MFD_CLOEXEC);
	SL_ENSURE(fd >= 0, SL_E_SYSTEM, "memfd_create: %s", strerror(errno));
	SL_GUARD(sl_write_all(fd, text, (size_t)n, "LATEST"));
	SL_GUARD(sl_remote_open(o->dest, O->x.remote, &r));
	SL_GUARD(sl_remote_put(r, LATEST, fd, (uint64_t)n));
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	sl_remote_free(r);
	return rc;
}

/* Seals what the job wrote to NAME/ as the next checkpoint. Caller holds O->mu. */
static SL_RESULT seal_one(struct sl_outputs *O, struct out_one *o, const char *trigger)
{
	const sl_job_user *user = O->x.user;
	sl_err rc = SL_E_INTERNAL;
	char src[400], ck[40], outdir[2300], stage[400] = "", root[65] = "", msg[1024], url[2200];
	const char *paths[1] = {o->name};
	uint64_t bytes = 0, seq = o->next_seq;
	uint32_t files = 0;
	sl_tree_stats st;
	const char *tmp = getenv("TMPDIR");
	int sfd = -1;
	uint64_t shard_size = 0, uploads = SL_OUT_UPLOADS_DEFAULT, in_mem = 0;
	struct seal_pipe sp = {.O = O, .o = o};

	/* the output keys are under the lease of every key: once it ended,
	 * nothing more is sealed (what was sealed before stays) */
	SL_ENSURE(!sl_report_lease_ended(O->x.rep), SL_E_ATTEST,
	          "output %s: not sealed: the keys' lease ended (%s)", o->name,
	          sl_report_lease_reason(O->x.rep));
	/* the job's tree, reached only beneath the folder's descriptor */
	snprintf(src, sizeof(src), "%s/%s", O->dir.path, o->name);
	SL_GUARD(sl_fsat_open_dir(O->dir.fd, o->name, 0, O->dir.path, &sfd));
	SL_GUARD(sl_dir_usage(sfd, src, &bytes, &files));
	close(sfd);
	sfd = -1;
	SL_ENSURE(O->c->limit == 0 || bytes <= O->c->limit, SL_E_TOO_LARGE,
	          "output %s: the job wrote %llu bytes, over --output-limit %llu: not sealed",
	          o->name, (unsigned long long)bytes, (unsigned long long)O->c->limit);
	if (files == 0) {
		sl_report_say(O->x.rep, "output %s: nothing written (%s): nothing sealed", o->name,
		              trigger);
		return SL_OK;
	}
	snprintf(ck, sizeof(ck), "ckpt-%08llu", (unsigned long long)seq);
	if (o->remote) {
		/* ciphertext only: the shards in memory files (with
		 * SECLAUNCH_OUTPUT_STAGE_MEMORY=0 in files here) until uploaded,
		 * the manifest in this folder under root's TMPDIR */
		snprintf(stage, sizeof(stage), "%s/seclaunch-seal.XXXXXX",
		         tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
		SL_ENSURE(mkdtemp(stage) != NULL, SL_E_SYSTEM, "%s: %s", stage, strerror(errno));
		snprintf(outdir, sizeof(outdir), "%s/%s", stage, ck);
		shard_size = O->c->up_shard_size;
		uploads = O->c->up_uploads;
		/* each shard goes up as soon as it is sealed, while the next is */
		snprintf(url, sizeof(url), "%s%s/", o->dest, ck);
		O->x.remote->quiet = sl_cli_quiet;
		in_mem = O->c->up_in_mem;
		/* in memory files: at most a few shards ahead of the uploads */
		SL_GUARD(sl_out_up_start(url, O->x.remote, (unsigned)uploads,
		                         in_mem ? (size_t)uploads + SL_OUT_MEM_AHEAD : 0, &sp.up));
	} else {
		SL_GUARD(sl_out_mkdir_p(o->dest));
		snprintf(outdir, sizeof(outdir), "%s/%s", o->dest, ck);
	}
	sl_tree_encrypt_opts t = {
	    .paths = paths,
	    .n_paths = 1,
	    .out_dir = outdir,
	    .force = true,
	    .quiet = true,
	    .sequence = seq,
	    /* a staged copy lives only until it is uploaded: nothing to fsync */
	    .no_fsync = o->remote,
	    .shard_size = shard_size,
	    .shard_done = o->remote ? shard_sealed : NULL,
	    .shard_ctx = &sp,
	    .mem_shards = o->remote && in_mem,
	    .beneath = true,
	    .beneath_fd = O->dir.fd,
	    .beneath_name = O->dir.path,
	    /* under --user every file of the tree is that user's */
	    .owner_set = user->set,
	    .owner = user->uid,
	    .p = {.dataset_id = o->id,
	          .kms_url = O->x.kms_url,
	          .key_id = o->key.key_id,
	          .wrapped_dek = o->key.wrapped_dek,
	          .wrapped_dek_len = o->key.wrapped_dek_len,
	          .threads = O->x.threads},
	};
	SL_GUARD(sl_tree_encrypt(o->key.dek, &t, &st));
	/* the end wipes it anyway; now, it overlaps the uploads */
	if (O->final && sl_memdir_wipe_sub(&O->dir, o->name) != SL_OK)
		fprintf(stderr, "seclaunch %s: warning: %s\n", O->x.rep->cmd, sl_err_detail());
	if (o->remote) {
		/* every shard in the store before the manifest names them */
		SL_GUARD(sl_out_up_wait(sp.up));
		SL_GUARD(sl_out_up_put_manifest(sp.up, outdir));
	}
	SL_GUARD(put_latest(O, o, seq));
	o->sealed_seq = seq;
	o->next_seq = seq + 1;
	sl_hex_encode(st.root, sizeof(st.root), root);
	snprintf(o->sealed_root, sizeof(o->sealed_root), "%s", root);
	sl_report_note(O->x.rep, SL_AUDIT_EV_RUN_OUTPUT, o->id, o->key.key_id, SL_AUDIT_ALLOW, NULL,
	               json_pack("{s:s, s:s, s:I, s:s, s:s, s:I, s:i, s:i}", "output", o->name,
	                         "destination", o->policy_dest, "sequence", (json_int_t)seq,
	                         "trigger", trigger, "root", root, "bytes", (json_int_t)st.bytes,
	                         "files", (int)st.files, "shards", (int)st.shards));
	sl_report_say(O->x.rep,
	              "output %s: sealed checkpoint %llu (%u file%s, %llu bytes, %s) to %s",
	              o->name, (unsigned long long)seq, st.files, st.files == 1 ? "" : "s",
	              (unsigned long long)st.bytes, trigger, o->dest);
	rc = SL_OK;
out:
	if (sfd >= 0)
		close(sfd);
	/* every upload thread joined before the staging folder goes */
	sl_out_up_free(sp.up);
	if (stage[0] != '\0') {
		remove_dir(outdir);
		(void)rmdir(stage); /* lint: trusted path (root's staging folder) */
	}
	if (rc != SL_OK) {
		snprintf(msg, sizeof(msg), "%s", sl_err_detail());
		sl_report_note(O->x.rep, SL_AUDIT_EV_RUN_OUTPUT, o->id, o->key.key_id,
		               SL_AUDIT_ERROR, NULL,
		               json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:I}", "output", o->name,
		                         "destination", o->policy_dest, "sequence", (json_int_t)seq,
		                         "trigger", trigger, "error", sl_err_name(rc), "message",
		                         msg, "bytes", (json_int_t)bytes));
		(void)sl_err_set(rc, "%s", msg);
	}
	return rc;
}

static SL_RESULT seal_all(struct sl_outputs *O, const char *trigger)
{
	sl_err first = SL_OK;
	char msg[1024] = "";
	pthread_mutex_lock(&O->mu);
	for (size_t i = 0; i < O->n; i++) {
		sl_err rc = seal_one(O, &O->o[i], trigger);
		if (rc != SL_OK && first == SL_OK) {
			first = rc;
			snprintf(msg, sizeof(msg), "%s", sl_err_detail());
		}
	}
	pthread_mutex_unlock(&O->mu);
	if (first != SL_OK)
		(void)sl_err_set(first, "%s", msg);
	return first;
}

/* ---- checkpoint requests -------------------------------------------------- */

/* Seals every output and answers the nreq requests that asked (all those
 * that arrived before it began). */
static void checkpoint(struct sl_outputs *O, const char *how, uint64_t nreq)
{
	char text[1200];
	sl_err rc = seal_all(O, "checkpoint");
	O->requests += nreq;
	if (rc != SL_OK)
		fprintf(stderr, "seclaunch %s: checkpoint (%s) failed: %s\n", O->x.rep->cmd, how,
		        sl_err_detail());
	/* the job's answer: "N ok" or "N error: ..." (N counts requests) */
	int n = snprintf(text, sizeof(text), "%llu %s%s\n", (unsigned long long)O->requests,
	                 rc == SL_OK ? "ok" : "error: ", rc == SL_OK ? "" : sl_err_detail());
	/* in the job's folder: made beneath its descriptor and given the job's
	 * user on the new file's own descriptor, before the rename shows it */
	if (sl_fsat_write_atomic(O->dir.fd, CKPT_STATUS, text, (size_t)n, 0644,
	                         O->x.user->set ? O->x.user->uid : (uid_t)-1,
	                         O->x.user->set ? O->x.user->gid : (gid_t)-1, O->dir.path) != SL_OK)
		fprintf(stderr, "seclaunch %s: warning: %s\n", O->x.rep->cmd, sl_err_detail());
}

static void *watch_requests(void *arg)
{
	struct sl_outputs *O = arg;
	sigset_t us;
	int sfd, ifd;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	/* requests not answered yet, what asked first, and when the last
	 * checkpoint began: requests coalesce, at most one per interval */
	uint64_t pending = 0, last_ns = 0, gap_ns = O->c->ckpt_min_interval_ms * 1000000ull;
	const char *how = CKPT_REQ;
	bool ever = false;

	sigemptyset(&us);
	sigaddset(&us, SIGUSR2);
	sfd = signalfd(-1, &us, SFD_CLOEXEC);
	ifd = inotify_init1(IN_CLOEXEC);
	if (ifd >= 0) {
		/* the folder itself, whatever its name in a shared tmpfs is by now */
		char self[64];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", O->dir.fd);
		(void)inotify_add_watch(ifd, self, IN_CLOSE_WRITE | IN_MOVED_TO);
	}
	for (;;) {
		struct pollfd p[3] = {{O->stop[0], POLLIN, 0}, {sfd, POLLIN, 0}, {ifd, POLLIN, 0}};
		int wait_ms = -1;
		if (pending > 0) {
			uint64_t now = sl_now_ns(), due = ever ? last_ns + gap_ns : now;
			if (due <= now) {
				last_ns = now;
				ever = true;
				checkpoint(O, how, pending);
				pending = 0;
				continue;
			}
			wait_ms = (int)((due - now + 999999) / 1000000);
		}
		if (poll(p, 3, wait_ms) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents != 0)
			break;
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (pending++ == 0)
					how = "SIGUSR2";
			}
		}
		if (p[2].revents & POLLIN) {
			ssize_t len = read(ifd, buf, sizeof(buf));
			uint64_t want = 0;
			for (ssize_t off = 0; off < len;) {
				const struct inotify_event *ev = (const void *)(buf + off);
				if (ev->len > 0 && strcmp(ev->name, CKPT_REQ) == 0)
					want++;
				off += (ssize_t)sizeof(*ev) + ev->len;
			}
			if (want > 0) {
				(void)unlinkat(O->dir.fd, CKPT_REQ, 0);
				if (pending == 0)
					how = CKPT_REQ;
				pending += want;
			}
		}
	}
	if (sfd >= 0)
		close(sfd);
	if (ifd >= 0)
		close(ifd);
	return NULL;
}

static void stop_watchers(struct sl_outputs *O)
{
	if (O->th_started) {
		if (write(O->stop[1], "x", 1) != 1)
			fprintf(stderr,
			        "seclaunch run: warning: stopping the checkpoint watcher\n");
		pthread_join(O->th, NULL);
		O->th_started = false;
	}
	for (int i = 0; i < 2; i++)
		if (O->stop[i] >= 0) {
			close(O->stop[i]);
			O->stop[i] = -1;
		}
}

/* ---- the hooks --------------------------------------------------------------- */

sl_err sl_out_prepare(struct sl_outputs *O)
{
	sl_err rc = SL_E_INTERNAL;
	char env[600];

	if (O == NULL)
		return SL_OK;
	uid_t uid = O->x.user->set ? O->x.user->uid : geteuid();
	gid_t gid = O->x.user->set ? O->x.user->gid : getegid();
	SL_GUARD(sl_memdir_create(&O->dir, O->c->ns, O->c->limit, uid, gid));
	if (!O->dir.mounted && O->c->ns_why[0] != '\0')
		sl_report_say(O->x.rep, "%s: %s; using a %s", SL_OUT_ENV, O->c->ns_why,
		              O->dir.method);
	bool swap = sl_swap_active() && !O->dir.noswap;
	if (swap)
		sl_report_say(
		    O->x.rep,
		    "WARNING: swap is on: the kernel may write pages of %s (plaintext) to "
		    "swap; turn swap off or use encrypted swap",
		    SL_OUT_ENV);
	for (size_t i = 0; i < O->n; i++)
		if (O->o[i].resume != NULL)
			SL_GUARD(sl_out_resume(O, &O->o[i]));
	for (size_t i = 0; i < O->n; i++)
		SL_GUARD(sl_fsat_mkdir(O->dir.fd, O->o[i].name, 0700, uid, gid, O->dir.path, NULL));
	/* serve has no job environment: the folder goes to the tasks in its
	 * ready line (run_serve.c) */
	if (O->x.env != NULL) {
		snprintf(env, sizeof(env), "%s=%s", SL_OUT_ENV, O->dir.path);
		SL_GUARD(sl_job_env_own(O->x.env, env));
		snprintf(env, sizeof(env), "SECLAUNCH_PID=%d", (int)getpid());
		SL_GUARD(sl_job_env_own(O->x.env, env));
	}
	SL_ENSURE(pipe2(O->stop, O_CLOEXEC) == 0, SL_E_SYSTEM, "pipe: %s", strerror(errno));
	SL_ENSURE(pthread_create(&O->th, NULL, watch_requests, O) == 0, SL_E_SYSTEM,
	          "starting the checkpoint watcher");
	O->th_started = true;
	if (O->c->preempt == SL_PREEMPT_GCE || O->c->preempt == SL_PREEMPT_AWS) {
		sl_preempt_opts po = {.kind = O->c->preempt,
		                      .base = O->c->preempt_base,
		                      .signo = O->c->preempt_signal,
		                      .grace_s = O->c->preempt_grace_s};
		SL_GUARD(sl_preempt_start(&po, &O->pre));
	}
	sl_report_note(O->x.rep, SL_AUDIT_EV_RUN_OUTPUT, NULL, NULL, NULL, NULL,
	               json_pack("{s:s, s:s, s:b, s:I, s:s}", "stage", "ready", "folder",
	                         O->dir.method, "swap_on", swap, "limit", (json_int_t)O->c->limit,
	                         "preempt_watch",
	                         O->c->preempt == SL_PREEMPT_GCE       ? "gce"
	                         : O->c->preempt == SL_PREEMPT_AWS     ? "aws"
	                         : O->c->preempt == SL_PREEMPT_SIGTERM ? "sigterm"
	                                                               : "none"));
	sl_report_say(O->x.rep, "outputs in %s (%s)", O->dir.path, O->dir.method);
	rc = SL_OK;
out:
	return rc;
}

void sl_out_job_started(struct sl_outputs *O, pid_t pid)
{
	if (O != NULL && O->pre != NULL)
		sl_preempt_set_job(O->pre, pid);
}

void sl_out_job_exited(struct sl_outputs *O, const struct sl_job_result *res)
{
	if (O == NULL)
		return;
	/* no checkpoint once the job is gone: the final seal is next */
	stop_watchers(O);
	O->forwarded = res->forwarded;
}

/* The outputs' keys and plaintext wiped; what a lease renewal reads of
 * them (ids, destinations, the resumed manifests) stays until free_all. */
static void wipe_secrets(struct sl_outputs *O)
{
	stop_watchers(O);
	sl_preempt_free(O->pre);
	O->pre = NULL;
	for (size_t i = 0; i < O->n; i++) {
		sl_secret_free(O->o[i].key.dek);
		O->o[i].key.dek = NULL;
		sl_secret_free(O->o[i].r.dek);
		O->o[i].r.dek = NULL;
	}
	if (sl_memdir_wipe(&O->dir) != SL_OK)
		fprintf(stderr, "seclaunch %s: warning: %s\n", O->x.rep->cmd, sl_err_detail());
}

static void free_all(struct sl_outputs **Op)
{
	struct sl_outputs *O = *Op;
	wipe_secrets(O);
	for (size_t i = 0; i < O->n; i++)
		sl_out_resume_free(&O->o[i]);
	pthread_mutex_destroy(&O->mu);
	free(O);
	*Op = NULL;
}

/* ---- strays -------------------------------------------------------------------- */

struct strays {
	struct sl_outputs *O;
	json_t *names;
};

static SL_RESULT stray_entry(void *ctx, sl_fsat_ent *e)
{
	struct strays *st = ctx;
	bool declared = false;
	if (e->kind == SL_FSAT_DIR)
		e->skip = true; /* the top level only */
	if (e->kind == SL_FSAT_DIR_POST || strncmp(e->name, ".seclaunch-", 11) == 0)
		return SL_OK;
	for (size_t i = 0; i < st->O->n && !declared; i++)
		declared = e->kind == SL_FSAT_DIR && strcmp(e->name, st->O->o[i].name) == 0;
	if (!declared)
		json_array_append_new(
		    st->names, json_sprintf("%s%s", e->name, e->kind == SL_FSAT_DIR ? "/" : ""));
	return SL_OK;
}

/* Names, on stderr and in a run.output record, what the job left at the top
 * of the folder outside every output (model.bin instead of model/model.bin):
 * it is wiped with the folder, never sealed. true when there was any. */
static bool report_strays(struct sl_outputs *O, bool fatal)
{
	struct strays st = {.O = O, .names = json_array()};
	char outs[SL_OUT_MAX * (SL_OUT_NAME_MAX + 2) + 1] = "";
	size_t used = 0, i;
	json_t *n, *msgs = json_array();
	for (i = 0; i < O->n; i++) {
		int w =
		    snprintf(outs + used, sizeof(outs) - used, "%s%s", i ? ", " : "", O->o[i].name);
		if (w > 0 && (size_t)w < sizeof(outs) - used)
			used += (size_t)w;
	}
	if (st.names == NULL || msgs == NULL ||
	    sl_fsat_walk(O->dir.fd, 0, 2, true, stray_entry, &st, O->dir.path) != SL_OK)
		fprintf(stderr,
		        "seclaunch %s: warning: looking for files outside every output: %s\n",
		        O->x.rep->cmd, sl_err_detail());
	bool any = json_array_size(st.names) > 0;
	json_array_foreach (st.names, i, n) {
		json_t *m = json_sprintf("%s is outside every output (%s): not sealed",
		                         json_string_value(n), outs);
		sl_report_say(O->x.rep, "%s", json_string_value(m));
		json_array_append_new(msgs, m);
	}
	if (any)
		sl_report_note(O->x.rep, SL_AUDIT_EV_RUN_OUTPUT, NULL, NULL,
		               fatal ? SL_AUDIT_ERROR : NULL, NULL,
		               json_pack("{s:s, s:O, s:O, s:b}", "stage", "strays", "strays",
		                         st.names, "messages", msgs, "sealed_any", !fatal));
	json_decref(st.names);
	json_decref(msgs);
	return any;
}

int sl_out_finish(struct sl_outputs **Op, int job_code)
{
	struct sl_outputs *O = *Op;
	char source[16] = "sigterm", msg[1024];
	double when = 0;
	int code = job_code;

	if (O == NULL)
		return job_code;
	bool noticed = sl_preempt_noticed(O->pre, source, sizeof(source), &when);
	sl_preempt_free(O->pre);
	O->pre = NULL;
	bool preempted = noticed || (O->c->preempt != SL_PREEMPT_NONE && O->forwarded == SIGTERM);
	if (sl_report_lease_ended(O->x.rep)) {
		/* the lease ended the job (run.lease_ended says why, the exit
		 * status is its): the outputs are wiped unsealed */
		json_t *list = json_array();
		for (size_t i = 0; i < O->n; i++)
			json_array_append_new(
			    list, json_pack("{s:s, s:s, s:I}", "output", O->o[i].name,
			                    "destination", O->o[i].policy_dest, "sealed_sequence",
			                    (json_int_t)O->o[i].sealed_seq));
		sl_report_note(O->x.rep, SL_AUDIT_EV_RUN_OUTPUT, NULL, NULL, SL_AUDIT_DENY,
		               json_pack("[s]", "the keys' lease ended: nothing more is sealed"),
		               json_pack("{s:s, s:o}", "stage", "final", "outputs", list));
		sl_report_say(
		    O->x.rep,
		    "the lease ended: outputs wiped, not sealed (earlier checkpoints stay)");
		wipe_secrets(O);
		return job_code;
	}
	O->final = true;
	sl_err rc = seal_all(O, preempted ? "preemption" : "exit");
	snprintf(msg, sizeof(msg), "%s", rc != SL_OK ? sl_err_detail() : "");
	bool sealed_any = false;
	for (size_t i = 0; i < O->n; i++)
		sealed_any |= O->o[i].sealed_seq != 0;
	/* nothing sealed but something written beside the outputs: the job
	 * wrote to the wrong place, and a success would hide it */
	if (report_strays(O, !sealed_any) && !sealed_any && rc == SL_OK && code == 0) {
		rc = SL_E_INPUT;
		snprintf(msg, sizeof(msg),
		         "no output sealed anything, and the job wrote only outside every "
		         "output (into %s/NAME/ for --output NAME=DEST)",
		         SL_OUT_ENV);
	}
	if (preempted) {
		json_t *saved = json_array();
		for (size_t i = 0; i < O->n; i++)
			json_array_append_new(saved, json_pack("{s:s, s:s, s:I, s:s}", "output",
			                                       O->o[i].name, "destination",
			                                       O->o[i].policy_dest, "sequence",
			                                       (json_int_t)O->o[i].sealed_seq,
			                                       "root", O->o[i].sealed_root));
		double took = noticed ? sl_preempt_now() - when : 0;
		sl_report_note(O->x.rep, SL_AUDIT_EV_RUN_PREEMPTED, NULL, NULL,
		               rc == SL_OK ? SL_AUDIT_ALLOW : SL_AUDIT_ERROR, NULL,
		               json_pack("{s:s, s:o, s:i, s:i, s:i, s:f, s:b, s:s?}", "notice",
		                         source, "saved", saved, "job_exit_code", job_code,
		                         "signal", noticed ? O->c->preempt_signal : SIGTERM,
		                         "grace_s", (int)O->c->preempt_grace_s,
		                         "notice_to_sealed_s", took, "all_saved", rc == SL_OK,
		                         "error", rc == SL_OK ? NULL : msg));
		if (rc == SL_OK) {
			sl_report_say(O->x.rep, "preempted (%s): outputs sealed%s; exit %d", source,
			              noticed ? "" : " after SIGTERM", SL_OUT_PREEMPTED_EXIT);
			code = SL_OUT_PREEMPTED_EXIT;
		}
	}
	const char *cmd = O->x.rep->cmd;
	wipe_secrets(O);
	if (rc != SL_OK) {
		code = sl_err_exit_code(rc);
		sl_cli_report(cmd, rc, code, msg);
	}
	return code;
}

const char *sl_out_dir(const struct sl_outputs *O)
{
	return O != NULL && O->dir.path[0] != '\0' ? O->dir.path : NULL;
}

bool sl_out_preempt_noticed(struct sl_outputs *O)
{
	char source[16];
	double when;
	return O != NULL && O->pre != NULL &&
	       sl_preempt_noticed(O->pre, source, sizeof(source), &when);
}

void sl_out_abort(struct sl_outputs **O)
{
	if (*O != NULL)
		free_all(O);
}
