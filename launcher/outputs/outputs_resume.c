/* --resume NAME=SOURCE (outputs.h): the newest sealed checkpoint of NAME,
 * read in the datasets step, its key released by the launch's one attested
 * release, and restored into the output folder before the job starts. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../dataset/dataset_tree.h"
#include "../job/job.h"
#include "outputs_int.h"
#include "seclaunch/fsat.h"
#include "seclaunch/json.h"
#include "seclaunch/util.h"

/* The highest sequence this audit log saw sealed to, or resumed from, dest
 * for output name: what a rollback must not go below. */
static uint64_t audit_latest(const char *log, const char *name, const char *dest)
{
	char **files = NULL;
	size_t nf = 0;
	uint64_t best = 0;
	if (log == NULL || sl_audit_files(log, &files, &nf) != SL_OK)
		return 0;
	for (size_t i = 0; i < nf; i++) {
		FILE *f = fopen(files[i], "re");
		char *line = NULL;
		size_t cap = 0;
		ssize_t l;
		if (f == NULL)
			continue;
		while ((l = getline(&line, &cap, f)) > 0) {
			json_t *rec = NULL;
			if (line[l - 1] == '\n')
				l--;
			if (sl_audit_parse_line((const uint8_t *)line, (size_t)l, &rec) != SL_OK)
				continue;
			const char *ev = sl_json_getstr(rec, "event");
			const char *dec = sl_json_getstr(rec, "decision");
			json_t *d = json_object_get(rec, "details");
			const char *nm = sl_json_getstr(d, "output");
			const char *ds = sl_json_getstr(d, "destination");
			json_t *sq = json_object_get(d, "sequence");
			if (ev != NULL && dec != NULL && nm != NULL && ds != NULL &&
			    json_is_integer(sq) && strcmp(dec, SL_AUDIT_ALLOW) == 0 &&
			    (strcmp(ev, SL_AUDIT_EV_RUN_OUTPUT) == 0 ||
			     strcmp(ev, SL_AUDIT_EV_RUN_RESUME) == 0) &&
			    strcmp(nm, name) == 0 && strcmp(ds, dest) == 0 &&
			    (uint64_t)json_integer_value(sq) > best)
				best = (uint64_t)json_integer_value(sq);
			json_decref(rec);
		}
		free(line);
		fclose(f);
	}
	sl_audit_files_free(files, nf);
	return best;
}

struct owner {
	uid_t uid;
	gid_t gid;
};

/* Each restored entry given to the job's user by its name in a folder
 * opened beneath the output folder: never through a link. */
static SL_RESULT chown_one(void *ctx, sl_fsat_ent *e)
{
	const struct owner *w = ctx;
	if (e->kind == SL_FSAT_DIR_POST || e->kind == SL_FSAT_MOUNT)
		return SL_OK;
	if (fchownat(e->dirfd, e->name, w->uid, w->gid, AT_SYMLINK_NOFOLLOW) != 0 &&
	    errno != ENOENT)
		return sl_err_set(SL_E_SYSTEM, "%s: chown: %s", e->rel, strerror(errno));
	return SL_OK;
}

sl_err sl_out_resume_open(struct sl_outputs *O, struct out_one *o)
{
	const sl_job_user *user = O->x.user;
	sl_err rc = SL_E_INTERNAL;
	const char *src = sl_out_file_url_path(o->resume);
	bool remote = src != NULL && sl_remote_is_url(src);
	char base[2100] = "", ck[40];
	uint64_t seq = 0, seen;

	SL_ENSURE(src != NULL, SL_E_USAGE,
	          "--resume %s=%s: a file:// SOURCE names a folder of this machine (file:///PATH/)",
	          o->name, o->resume);
	snprintf(base, sizeof(base), "%s%s", src, remote && src[strlen(src) - 1] != '/' ? "/" : "");
	/* a folder the job's user named: root reads it only when that user
	 * can (the same gate as the datasets: root is no confused deputy) */
	if (!remote && user->set) {
		int ufd = -1;
		SL_GUARD(sl_user_open(user, base, &ufd));
		close(ufd);
	}
	SL_GUARD(sl_out_read_latest(O, base, remote, &seq));
	SL_ENSURE(seq > 0, SL_E_INPUT, "--resume %s=%s: no sealed checkpoint there (no %s)",
	          o->name, src, LATEST);
	snprintf(ck, sizeof(ck), "ckpt-%08llu", (unsigned long long)seq);
	if (remote) {
		snprintf(o->r.dir, sizeof(o->r.dir), "%s%s/", base, ck);
		O->x.remote->quiet = sl_cli_quiet;
		SL_GUARD(sl_remote_open(o->r.dir, O->x.remote, &o->r.rem));
	} else {
		snprintf(o->r.dir, sizeof(o->r.dir), "%s/%s", base, ck);
		if (user->set) {
			int ufd = -1;
			SL_GUARD(sl_user_open(user, o->r.dir, &ufd));
			close(ufd);
		}
	}
	SL_GUARD(sl_tree_manifest(o->r.dir, o->r.rem, &o->r.man));
	SL_ENSURE(strncmp(sl_sldm_dataset_id(o->r.man), o->name, strlen(o->name)) == 0 &&
	              sl_sldm_dataset_id(o->r.man)[strlen(o->name)] == ':',
	          SL_E_INTEGRITY, "%s: dataset '%s' is not a checkpoint of output %s", o->r.dir,
	          sl_sldm_dataset_id(o->r.man), o->name);
	{
		size_t wl = 0;
		(void)sl_sldm_wrapped_dek(o->r.man, &wl);
		SL_ENSURE(wl > 0, SL_E_INPUT, "%s: no KMS key reference", o->r.dir);
	}
	/* the manifest's sequence is checked against LATEST once authenticated;
	 * SOURCE as the records name it: the URL, or file:///ABSOLUTE/PATH/ */
	char abs[PATH_MAX];
	if (remote)
		snprintf(o->r.src, sizeof(o->r.src), "%s", base);
	else if (realpath(base, abs) != NULL) /* lint: trusted path (--resume SOURCE) */
		snprintf(o->r.src, sizeof(o->r.src), "file://%s/", abs);
	else
		snprintf(o->r.src, sizeof(o->r.src), "%s", base);
	seen = audit_latest(O->x.rep->audit_log, o->name, o->r.src);
	SL_ENSURE(seq >= seen, SL_E_INTEGRITY,
	          "%s: rollback: %s names checkpoint %llu but the audit log %s recorded "
	          "checkpoint %llu of output %s there",
	          src, LATEST, (unsigned long long)seq, O->x.rep->audit_log,
	          (unsigned long long)seen, o->name);
	o->r.seq = seq;
	rc = SL_OK;
out:
	if (rc != SL_OK) {
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", sl_err_detail());
		sl_report_note(O->x.rep, SL_AUDIT_EV_RUN_RESUME,
		               o->r.man != NULL ? sl_sldm_dataset_id(o->r.man) : NULL, NULL,
		               SL_AUDIT_ERROR, NULL,
		               json_pack("{s:s, s:s, s:I, s:s, s:s}", "output", o->name, "source",
		                         base[0] != '\0' ? base : o->resume, "sequence",
		                         (json_int_t)seq, "error", sl_err_name(rc), "message",
		                         msg));
		(void)sl_err_set(rc, "%s", msg);
	}
	return rc;
}

void sl_out_resume_free(struct out_one *o)
{
	sl_secret_free(o->r.dek);
	o->r.dek = NULL;
	sl_sldm_free(o->r.man);
	o->r.man = NULL;
	sl_remote_free(o->r.rem);
	o->r.rem = NULL;
}

sl_err sl_out_resume(struct sl_outputs *O, struct out_one *o)
{
	const sl_job_user *user = O->x.user;
	sl_err rc = SL_E_INTERNAL;
	const char *src = o->resume, *dir = o->r.dir;
	char restore[400], final[400], root[65] = "";
	uint64_t seq = o->r.seq;
	sl_sldm *m = o->r.man;
	sl_tree_stats st;

	SL_ENSURE(m != NULL && o->r.dek != NULL, SL_E_INTERNAL,
	          "--resume %s: no checkpoint key released", o->name);
	SL_GUARD(sl_sldm_authenticate(m, o->r.dek));
	SL_ENSURE(sl_sldm_sequence(m) == seq, SL_E_INTEGRITY,
	          "%s: %s names checkpoint %llu but its manifest says sequence %llu (an older "
	          "checkpoint presented as the newest)",
	          dir, LATEST, (unsigned long long)seq, (unsigned long long)sl_sldm_sequence(m));
	snprintf(restore, sizeof(restore), "%s/" RESTORE, O->dir.path);
	snprintf(final, sizeof(final), "%s/%s", O->dir.path, o->name);
	SL_GUARD(sl_tree_decrypt(dir, o->r.rem, m, o->r.dek, restore, true, O->x.threads, &st));
	/* the checkpoint's key has done its one job */
	sl_secret_free(o->r.dek);
	o->r.dek = NULL;
	SL_ENSURE(renameat(O->dir.fd, RESTORE, O->dir.fd, o->name) == 0, SL_E_SYSTEM, "%s: %s",
	          final, strerror(errno));
	{
		struct owner w = {user->set ? user->uid : geteuid(),
		                  user->set ? user->gid : getegid()};
		int nfd = -1;
		SL_GUARD(sl_fsat_open_dir(O->dir.fd, o->name, 0, O->dir.path, &nfd));
		rc = fchown(nfd, w.uid, w.gid) == 0
		         ? sl_fsat_walk(nfd, 0, 0, false, chown_one, &w, final)
		         : sl_err_set(SL_E_SYSTEM, "%s: chown: %s", final, strerror(errno));
		close(nfd);
		SL_GUARD(rc);
	}
	sl_hex_encode(st.root, sizeof(st.root), root);
	if (seq + 1 > o->next_seq)
		o->next_seq = seq + 1;
	sl_report_note(O->x.rep, SL_AUDIT_EV_RUN_RESUME, sl_sldm_dataset_id(m), sl_sldm_key_id(m),
	               SL_AUDIT_ALLOW, NULL,
	               json_pack("{s:s, s:s, s:I, s:s, s:I, s:I}", "output", o->name, "destination",
	                         o->r.src, "sequence", (json_int_t)seq, "root", root, "files",
	                         (json_int_t)st.files, "bytes", (json_int_t)st.bytes));
	sl_report_say(O->x.rep, "resumed %s from checkpoint %llu of %s (%u file%s, %llu bytes)",
	              o->name, (unsigned long long)seq, src, st.files, st.files == 1 ? "" : "s",
	              (unsigned long long)st.bytes);
	rc = SL_OK;
out:
	if (rc != SL_OK) {
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", sl_err_detail());
		sl_report_note(O->x.rep, SL_AUDIT_EV_RUN_RESUME,
		               m != NULL ? sl_sldm_dataset_id(m) : NULL, NULL, SL_AUDIT_ERROR, NULL,
		               json_pack("{s:s, s:s, s:I, s:s, s:s}", "output", o->name, "source",
		                         src, "sequence", (json_int_t)seq, "error", sl_err_name(rc),
		                         "message", msg));
		(void)sl_err_set(rc, "%s", msg);
	}
	return rc;
}
