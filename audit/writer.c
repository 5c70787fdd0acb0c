/* Appending to the audit log: one chain kept across threads (mutex),
 * processes (flock on "<path>.lock", a file that is never rotated, so the
 * lock stays the same while the log itself is renamed) and rotated files. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit_int.h"
#include "seclaunch/secret.h"

struct sl_audit {
	pthread_mutex_t mu;
	char *path;
	char *lock_path;
	char *anchor_path;
	char *actor;
	char host[256];
	int lockfd;
	int fd; /* the live file, reopened when it was rotated or replaced */
	dev_t dev;
	ino_t ino;
	sl_secret *sk; /* libsodium Ed25519 secret key (seed || pk) */
	uint8_t pk[AUDIT_PK_LEN];
	char key_id[AUDIT_KEYID_HEX + 1];
	unsigned every;
	unsigned since_cp;
	bool appended;
	uint64_t rotate_bytes;
};

static char *dup_cat(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 1);
	if (s != NULL) {
		memcpy(s, a, la);
		memcpy(s + la, b, lb + 1);
	}
	return s;
}

static sl_err load_key(sl_audit *a, const char *key_path)
{
	sl_err rc = SL_E_INPUT;
	sl_secret *seed = NULL;

	SL_GUARD(sl_secret_read_file(key_path, AUDIT_SEED_LEN, &seed));
	SL_ENSURE(sl_secret_len(seed) == AUDIT_SEED_LEN, SL_E_INPUT,
	          "%s: not an audit checkpoint key (want %d bytes, got %zu); make one with "
	          "'seclaunch audit keygen'",
	          key_path, AUDIT_SEED_LEN, sl_secret_len(seed));
	SL_GUARD(sl_secret_new(crypto_sign_SECRETKEYBYTES, &a->sk));
	SL_GUARD_SODIUM(
	    crypto_sign_seed_keypair(a->pk, sl_secret_data(a->sk), sl_secret_data(seed)),
	    SL_E_CRYPTO, "%s: Ed25519 key derivation failed", key_path);
	audit_key_id(a->pk, a->key_id);
	rc = SL_OK;
out:
	sl_secret_free(seed);
	return rc;
}

sl_err sl_audit_open(const char *path, const char *checkpoint_key_path, const char *actor,
                     unsigned checkpoint_every, sl_audit **out)
{
	sl_err rc = SL_E_NOMEM;
	sl_audit *a = calloc(1, sizeof(*a));
	char uidbuf[32];

	SL_ENSURE(a != NULL, SL_E_NOMEM, "audit: allocating the log handle");
	a->lockfd = a->fd = -1;
	SL_ENSURE(pthread_mutex_init(&a->mu, NULL) == 0, SL_E_SYSTEM, "audit: mutex");
	SL_ENSURE(path != NULL && path[0] != '\0', SL_E_USAGE, "audit: no log path");
	snprintf(uidbuf, sizeof(uidbuf), "uid:%u", (unsigned)geteuid());
	a->path = strdup(path);
	a->lock_path = dup_cat(path, ".lock");
	a->actor = strdup(actor != NULL ? actor : uidbuf);
	SL_ENSURE(a->path != NULL && a->lock_path != NULL && a->actor != NULL, SL_E_NOMEM,
	          "audit: allocating");
	if (gethostname(a->host, sizeof(a->host) - 1) != 0)
		snprintf(a->host, sizeof(a->host), "unknown");
	a->every = checkpoint_every != 0 ? checkpoint_every : SL_AUDIT_CHECKPOINT_EVERY_DEFAULT;
	a->rotate_bytes = SL_AUDIT_ROTATE_DEFAULT;
	if (checkpoint_key_path != NULL) {
		SL_GUARD(load_key(a, checkpoint_key_path));
		a->anchor_path = dup_cat(path, ".anchor");
		SL_ENSURE(a->anchor_path != NULL, SL_E_NOMEM, "audit: allocating");
	}
	a->lockfd = open(a->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	SL_ENSURE(a->lockfd >= 0, SL_E_IO, "%s: cannot open the audit lock file: %s", a->lock_path,
	          strerror(errno));
	*out = a;
	a = NULL;
	rc = SL_OK;
out:
	if (a != NULL) {
		sl_secret_free(a->sk);
		if (a->lockfd >= 0)
			close(a->lockfd);
		free(a->path);
		free(a->lock_path);
		free(a->anchor_path);
		free(a->actor);
		free(a);
	}
	return rc;
}

void sl_audit_set_rotation(sl_audit *a, uint64_t max_bytes)
{
	pthread_mutex_lock(&a->mu);
	a->rotate_bytes = max_bytes;
	pthread_mutex_unlock(&a->mu);
}

sl_err sl_audit_set_anchor(sl_audit *a, const char *anchor_path)
{
	char *p = NULL;
	if (anchor_path != NULL && (p = strdup(anchor_path)) == NULL)
		return sl_err_set(SL_E_NOMEM, "audit: allocating");
	pthread_mutex_lock(&a->mu);
	free(a->anchor_path);
	a->anchor_path = p;
	pthread_mutex_unlock(&a->mu);
	return SL_OK;
}

static void dir_of(const char *path, char *dir, size_t n)
{
	const char *slash = strrchr(path, '/');
	if (slash == NULL)
		snprintf(dir, n, ".");
	else if (slash == path)
		snprintf(dir, n, "/");
	else
		snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

static sl_err fsync_dir(const char *path)
{
	char dir[4096];
	dir_of(path, dir, sizeof(dir));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sl_err_set(SL_E_IO, "%s: cannot open directory: %s", dir, strerror(errno));
	int r = fsync(dfd);
	close(dfd);
	if (r != 0)
		return sl_err_set(SL_E_IO, "%s: fsync: %s", dir, strerror(errno));
	return SL_OK;
}

/* Makes a->fd the file now at a->path (it may have been rotated away by
 * another process since the last append). Called under the lock. */
static sl_err open_live(sl_audit *a)
{
	sl_err rc = SL_E_IO;
	struct stat st;
	bool created = false;

	if (a->fd >= 0) {
		if (stat(a->path, &st) == 0 && st.st_dev == a->dev && st.st_ino == a->ino)
			return SL_OK;
		close(a->fd);
		a->fd = -1;
	}
	a->fd = open(a->path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	if (a->fd < 0 && errno == ENOENT) {
		a->fd = open(a->path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		             0600);
		created = true;
	}
	SL_ENSURE(a->fd >= 0, SL_E_IO, "%s: cannot open the audit log: %s", a->path,
	          strerror(errno));
	SL_ENSURE(fstat(a->fd, &st) == 0 && S_ISREG(st.st_mode), SL_E_IO, "%s: not a regular file",
	          a->path);
	a->dev = st.st_dev;
	a->ino = st.st_ino;
	if (created)
		SL_GUARD(fsync_dir(a->path));
	rc = SL_OK;
out:
	return rc;
}

/* Where the chain continues: the live file's tail, or, when the live file
 * holds no record yet, the last rotated file's. */
static sl_err find_tail(sl_audit *a, audit_tail *t)
{
	sl_err rc = SL_E_IO;
	char **files = NULL;
	size_t n = 0;
	audit_tail prev;

	SL_GUARD(audit_scan_tail(a->fd, a->path, t));
	if (t->have)
		return SL_OK;
	SL_GUARD(sl_audit_files(a->path, &files, &n));
	/* files ends with the live path; the one before it is the newest rotated */
	if (n >= 2) {
		int fd = open(files[n - 2], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		SL_ENSURE(fd >= 0, SL_E_IO, "%s: cannot open: %s", files[n - 2], strerror(errno));
		rc = audit_scan_tail(fd, files[n - 2], &prev);
		close(fd);
		SL_GUARD(rc);
		SL_ENSURE(prev.ntorn + t->ntorn <= AUDIT_MAX_TORN, SL_E_FORMAT,
		          "%s: too many torn lines to recover", a->path);
		/* stream order: the rotated file's torn lines come first */
		memmove(&t->torn[prev.ntorn], &t->torn[0], t->ntorn * sizeof(t->torn[0]));
		memcpy(&t->torn[0], &prev.torn[0], prev.ntorn * sizeof(t->torn[0]));
		t->ntorn += prev.ntorn;
		t->have = prev.have;
		t->seq = prev.seq;
		memcpy(t->hash, prev.hash, sizeof(t->hash));
	}
	rc = SL_OK;
out:
	sl_audit_files_free(files, n);
	return rc;
}

static json_t *str_or_null(const char *s)
{
	return s != NULL ? json_string(s) : json_null();
}

/* Builds one record line (no newline) into w, chained to *prev, and moves
 * prev/seq on. details is borrowed. */
static sl_err emit(sl_audit *a, audit_tail *t, const sl_audit_record *r, json_t *details,
                   bool checkpoint, const char *cp_reason, sl_writer *w, char **line_out)
{
	sl_err rc = SL_E_NOMEM;
	json_t *o = json_object();
	char now[40];
	char *line = NULL;
	sl_writer msg;

	sl_writer_init(&msg, 64 * 1024);
	SL_ENSURE(o != NULL, SL_E_NOMEM, "audit: building a record");
	audit_now(now, sizeof(now));
	/* insertion order is the documented field order */
	json_object_set_new(o, "seq", json_integer((json_int_t)(t->seq + 1)));
	json_object_set_new(o, "time", json_string(now));
	json_object_set_new(o, "host", json_string(a->host));
	json_object_set_new(o, "actor", json_string(a->actor));
	json_object_set_new(o, "event", json_string(r->event));
	json_object_set_new(o, "job_id", str_or_null(r->job_id));
	json_object_set_new(o, "dataset_id", str_or_null(r->dataset_id));
	json_object_set_new(o, "key_id", str_or_null(r->key_id));
	json_object_set_new(o, "policy_digest", str_or_null(r->policy_digest));
	json_object_set_new(o, "decision", str_or_null(r->decision));
	json_object_set_new(o, "reasons",
	                    r->reasons != NULL ? json_deep_copy(r->reasons) : json_null());
	json_object_set_new(o, "claims_digest", str_or_null(r->claims_digest));
	json_object_set_new(o, "details",
	                    details != NULL ? json_deep_copy(details)
	                                    : (checkpoint ? json_object() : json_null()));
	json_object_set_new(o, "prev", json_string(t->hash));
	if (checkpoint) {
		json_t *d = json_object_get(o, "details");
		uint8_t sig[AUDIT_SIG_LEN];
		char *sig64 = NULL;
		json_object_set_new(d, "reason", json_string(cp_reason));
		json_object_set_new(d, "key_id", json_string(a->key_id));
		SL_GUARD(audit_checkpoint_message(o, &msg));
		SL_GUARD_SODIUM(
		    crypto_sign_detached(sig, NULL, msg.data, msg.len, sl_secret_data(a->sk)),
		    SL_E_CRYPTO, "audit: signing a checkpoint");
		SL_GUARD(sl_b64_encode(sig, sizeof(sig), &sig64));
		json_object_set_new(d, "sig", json_string(sig64));
		free(sig64);
	}
	line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	SL_ENSURE(line != NULL, SL_E_INPUT,
	          "audit: record for event '%s' cannot be encoded (invalid UTF-8?)",
	          r->event != NULL ? r->event : "(null)");
	/* a writer never writes what a reader would refuse */
	rc = sl_audit_parse_line((const uint8_t *)line, strlen(line), NULL);
	if (rc != SL_OK) {
		rc = sl_err_wrap(rc, "audit: refusing to write event '%s'",
		                 r->event != NULL ? r->event : "(null)");
		goto out;
	}
	SL_GUARD(sl_write_bytes(w, line, strlen(line)));
	SL_GUARD(sl_write_u8(w, '\n'));
	audit_line_hash((const uint8_t *)line, strlen(line), t->hash);
	t->seq++;
	if (line_out != NULL) {
		*line_out = line;
		line = NULL;
	}
	rc = SL_OK;
out:
	sl_writer_free(&msg);
	free(line);
	json_decref(o);
	return rc;
}

static sl_err emit_recovered(sl_audit *a, audit_tail *t, sl_writer *w)
{
	sl_err rc = SL_E_NOMEM;
	json_t *d = json_object(), *arr = json_array();
	sl_audit_record r = {.event = SL_AUDIT_EV_RECOVERED};

	SL_ENSURE(d != NULL && arr != NULL, SL_E_NOMEM, "audit: building a record");
	for (size_t i = 0; i < t->ntorn; i++) {
		json_t *e = json_object();
		SL_ENSURE(e != NULL, SL_E_NOMEM, "audit: building a record");
		json_object_set_new(e, "sha256", json_string(t->torn[i].sha));
		json_object_set_new(e, "bytes", json_integer((json_int_t)t->torn[i].bytes));
		json_array_append_new(arr, e);
	}
	json_object_set(d, "torn", arr);
	SL_GUARD(emit(a, t, &r, d, false, NULL, w, NULL));
	t->ntorn = 0;
	rc = SL_OK;
out:
	json_decref(arr);
	json_decref(d);
	return rc;
}

static sl_err write_anchor(sl_audit *a, const char *line)
{
	sl_err rc = SL_E_NOMEM;
	size_t n = strlen(line);
	char *buf = malloc(n + 2);
	SL_ENSURE(buf != NULL, SL_E_NOMEM, "audit: anchor");
	memcpy(buf, line, n);
	buf[n] = '\n';
	SL_GUARD(sl_file_write_atomic(a->anchor_path, buf, n + 1, 0600, true));
	rc = SL_OK;
out:
	free(buf);
	return rc;
}

static sl_err lock_file(sl_audit *a)
{
	while (flock(a->lockfd, LOCK_EX) != 0) {
		if (errno != EINTR)
			return sl_err_set(SL_E_IO, "%s: flock: %s", a->lock_path, strerror(errno));
	}
	return SL_OK;
}

/* Renames the live file to "<path>.<first seq>"; the next append starts a
 * new file chained to its last line. Called under the lock. */
static sl_err rotate(sl_audit *a)
{
	sl_err rc = SL_E_IO;
	uint64_t first = 0;
	char *name = NULL;
	struct stat st;

	SL_GUARD(audit_first_seq(a->path, &first));
	SL_ENSURE(asprintf(&name, "%s.%020llu", a->path, (unsigned long long)first) > 0, SL_E_NOMEM,
	          "audit: rotation name");
	SL_ENSURE(lstat(name, &st) != 0 && errno == ENOENT, SL_E_EXISTS,
	          "%s: exists; not rotating over it", name);
	SL_ENSURE(rename(a->path, name) == 0, SL_E_IO, "rotating %s to %s: %s", a->path, name,
	          strerror(errno));
	SL_GUARD(fsync_dir(a->path));
	close(a->fd);
	a->fd = -1;
	rc = SL_OK;
out:
	free(name);
	return rc;
}

/* The one write path: record r (NULL: none), then a checkpoint when due or
 * forced (cp_reason != NULL). */
static sl_err append_locked(sl_audit *a, const sl_audit_record *r, const char *cp_reason)
{
	sl_err rc = SL_E_IO;
	audit_tail t;
	sl_writer w;
	char *cp_line = NULL;
	struct stat st;
	bool locked = false;
	static const sl_audit_record cp = {.event = SL_AUDIT_EV_CHECKPOINT};

	sl_writer_init(&w, 4 * (size_t)SL_AUDIT_MAX_LINE);
	pthread_mutex_lock(&a->mu);
	SL_GUARD(lock_file(a));
	locked = true;
	SL_GUARD(open_live(a));
	SL_GUARD(find_tail(a, &t));
	if (t.need_newline)
		SL_GUARD(sl_write_u8(&w, '\n'));
	if (t.ntorn > 0)
		SL_GUARD(emit_recovered(a, &t, &w));
	if (r != NULL) {
		SL_GUARD(emit(a, &t, r, r->details, false, NULL, &w, NULL));
		a->since_cp++;
		a->appended = true;
		if (a->sk != NULL && cp_reason == NULL && a->since_cp >= a->every)
			cp_reason = "interval";
	}
	if (a->sk != NULL && cp_reason != NULL) {
		SL_GUARD(emit(a, &t, &cp, NULL, true, cp_reason, &w, &cp_line));
		a->since_cp = 0;
	}
	if (w.len > 0) {
		SL_GUARD(sl_write_all(a->fd, w.data, w.len, a->path));
		SL_ENSURE(fsync(a->fd) == 0, SL_E_IO, "%s: fsync: %s", a->path, strerror(errno));
	}
	if (cp_line != NULL && a->anchor_path != NULL)
		SL_GUARD(write_anchor(a, cp_line));
	if (a->rotate_bytes > 0 && fstat(a->fd, &st) == 0 &&
	    (uint64_t)st.st_size >= a->rotate_bytes) {
		if (a->sk != NULL && (cp_reason == NULL || strcmp(cp_reason, "close") != 0)) {
			sl_writer_free(&w);
			sl_writer_init(&w, 4 * (size_t)SL_AUDIT_MAX_LINE);
			free(cp_line);
			cp_line = NULL;
			SL_GUARD(emit(a, &t, &cp, NULL, true, "rotate", &w, &cp_line));
			SL_GUARD(sl_write_all(a->fd, w.data, w.len, a->path));
			SL_ENSURE(fsync(a->fd) == 0, SL_E_IO, "%s: fsync: %s", a->path,
			          strerror(errno));
			a->since_cp = 0;
			if (a->anchor_path != NULL)
				SL_GUARD(write_anchor(a, cp_line));
		}
		SL_GUARD(rotate(a));
	}
	rc = SL_OK;
out:
	if (locked)
		flock(a->lockfd, LOCK_UN);
	pthread_mutex_unlock(&a->mu);
	free(cp_line);
	sl_writer_free(&w);
	return rc;
}

sl_err sl_audit_append(sl_audit *a, const sl_audit_record *r)
{
	if (a == NULL || r == NULL || r->event == NULL)
		return sl_err_set(SL_E_USAGE, "audit: append needs a log and an event");
	if (strcmp(r->event, SL_AUDIT_EV_CHECKPOINT) == 0 ||
	    strcmp(r->event, SL_AUDIT_EV_RECOVERED) == 0)
		return sl_err_set(SL_E_USAGE, "audit: event '%s' is written by the log itself",
		                  r->event);
	return append_locked(a, r, NULL);
}

sl_err sl_audit_event(sl_audit *a, const char *event, const char *job_id, const char *decision,
                      json_t *details)
{
	sl_audit_record r = {
	    .event = event, .job_id = job_id, .decision = decision, .details = details};
	return sl_audit_append(a, &r);
}

sl_err sl_audit_checkpoint(sl_audit *a)
{
	if (a == NULL || a->sk == NULL)
		return SL_OK;
	return append_locked(a, NULL, "request");
}

sl_err sl_audit_close(sl_audit *a)
{
	sl_err rc = SL_OK;
	if (a == NULL)
		return SL_OK;
	if (a->sk != NULL && a->appended)
		rc = append_locked(a, NULL, "close");
	if (a->fd >= 0)
		close(a->fd);
	if (a->lockfd >= 0)
		close(a->lockfd);
	sl_secret_free(a->sk);
	pthread_mutex_destroy(&a->mu);
	free(a->path);
	free(a->lock_path);
	free(a->anchor_path);
	free(a->actor);
	free(a);
	return rc;
}
