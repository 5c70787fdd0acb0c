/* Appending to the audit log: one chain kept across threads (group commit),
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

/* One append waiting for its batch (lives on the appending thread's stack). */
struct pending {
	const sl_audit_record *r; /* NULL: a checkpoint request */
	char *body;               /* r's fields from host to details, rendered (prepare_body) */
	const char *cp_reason;    /* forced checkpoint reason, or NULL */
	bool deferred;            /* written now, fsync'd by a later durable batch */
	bool done;                /* set (under mu) once the batch that held it is durable */
	sl_err rc;
	char detail[512];
	struct pending *next;
};

struct sl_audit {
	/* mu guards the queue of pending appends and the leader flag; io guards
	 * everything below that touches the files (held by the one leader while
	 * it writes a batch, and by the setters) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct pending *head, *tail;
	bool leading;
	pthread_mutex_t io;
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
	bool unsynced; /* lines of deferred appends written to fd, not yet fsync'd */
	uint64_t rotate_bytes;
	/* The chain's end as this process left it after its last write: valid
	 * only while the live file is still the same inode with the size and
	 * times fstat reported right after that write, i.e. nobody else has
	 * written since (checked under the lock before every batch). */
	bool cache_ok;
	uint64_t cache_seq;
	char cache_hash[AUDIT_HEX_LEN + 1];
	dev_t cache_dev;
	ino_t cache_ino;
	off_t cache_size;
	struct timespec cache_mtim, cache_ctim;
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

static SL_RESULT load_key(sl_audit *a, const char *key_path)
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
	SL_ENSURE(pthread_mutex_init(&a->mu, NULL) == 0 && pthread_mutex_init(&a->io, NULL) == 0 &&
	              pthread_cond_init(&a->cv, NULL) == 0,
	          SL_E_SYSTEM, "audit: mutex");
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
	pthread_mutex_lock(&a->io);
	a->rotate_bytes = max_bytes;
	pthread_mutex_unlock(&a->io);
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

static SL_RESULT fsync_dir(const char *path)
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

/* Deferred lines still in the page cache go to disk before their
 * descriptor is closed (rotation, a file replaced by another process). */
static SL_RESULT sync_pending(sl_audit *a)
{
	if (!a->unsynced || a->fd < 0)
		return SL_OK;
	if (fsync(a->fd) != 0)
		return sl_err_set(SL_E_IO, "%s: fsync: %s", a->path, strerror(errno));
	a->unsynced = false;
	return SL_OK;
}

/* Makes a->fd the file now at a->path (it may have been rotated away by
 * another process since the last append). Called under the lock. */
static SL_RESULT open_live(sl_audit *a)
{
	sl_err rc = SL_E_IO;
	struct stat st;
	bool created = false;

	if (a->fd >= 0) {
		if (stat(a->path, &st) == 0 && st.st_dev == a->dev && st.st_ino == a->ino)
			return SL_OK;
		SL_GUARD(sync_pending(a));
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
static SL_RESULT find_tail(sl_audit *a, audit_tail *t)
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

/* The fields of a record from host to details, in the documented order,
 * added to o. details is stolen (the caller picks its value). */
static void add_body_fields(json_t *o, const sl_audit *a, const sl_audit_record *r, json_t *details)
{
	json_object_set_new(o, "host", json_string(a->host));
	json_object_set_new(o, "actor", json_string(a->actor));
	json_object_set_new(o, "event", json_string(r->event));
	json_object_set_new(o, "job_id", str_or_null(r->job_id));
	json_object_set_new(o, "dataset_id", str_or_null(r->dataset_id));
	json_object_set_new(o, "key_id", str_or_null(r->key_id));
	json_object_set_new(o, "policy_digest", str_or_null(r->policy_digest));
	json_object_set_new(o, "decision", str_or_null(r->decision));
	json_object_set_new(o, "reasons",
	                    r->reasons != NULL ? json_incref(r->reasons) : json_null());
	json_object_set_new(o, "claims_digest", str_or_null(r->claims_digest));
	json_object_set_new(o, "details", details);
}

/* Builds one record line (no newline) into w, chained to *prev, and moves
 * prev/seq on. details is borrowed. */
static SL_RESULT emit(sl_audit *a, audit_tail *t, const sl_audit_record *r, json_t *details,
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
	add_body_fields(o, a, r,
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

/* The part of a record that does not depend on its place in the chain
 * (host ... details, without the braces), rendered and checked by the
 * appending thread itself, outside the lock, so the one thread that writes
 * a batch only has to put seq, time and prev around each. The check is the
 * readers' rules on the record with stand-in seq, time and prev (which the
 * writer makes itself, always well-formed), without rendering and parsing
 * it again. */
/* the stand-in line, {"seq":1,"time":"NOW",BODY,"prev":"GENESIS"}, less
 * NOW, BODY and GENESIS */
#define STANDIN_FRAME "{\"seq\":1,\"time\":\"\",,\"prev\":\"\"}"
static SL_RESULT prepare_body(sl_audit *a, const sl_audit_record *r, char **out)
{
	sl_err rc = SL_E_NOMEM;
	json_t *o = json_object();
	char *obj = NULL, now[40], gen[AUDIT_HEX_LEN + 1];
	size_t n, line_len;

	*out = NULL;
	SL_ENSURE(o != NULL, SL_E_NOMEM, "audit: building a record");
	/* insertion order is the documented field order */
	/* details only read here (rendered once): shared, not copied */
	add_body_fields(o, a, r, r->details != NULL ? json_incref(r->details) : json_null());
	obj = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	SL_ENSURE(obj != NULL, SL_E_INPUT,
	          "audit: record for event '%s' cannot be encoded (invalid UTF-8?)", r->event);
	n = strlen(obj);
	SL_ENSURE(n >= 2 && obj[0] == '{' && obj[n - 1] == '}', SL_E_INTERNAL,
	          "audit: unexpected encoding of a record");
	audit_now(now, sizeof(now));
	audit_genesis_hex(gen);
	/* a writer never writes what a reader would refuse: the reader's rules
	 * on the record as built, with stand-in seq, time and prev (the tree
	 * walk stands for the reader's JSON parser: jansson renders any other
	 * tree to text it parses back), and the reader's line limit on the
	 * stand-in line's length */
	json_object_set_new(o, "seq", json_integer(1));
	json_object_set_new(o, "time", json_string(now));
	json_object_set_new(o, "prev", json_string(gen));
	rc = audit_check_built(o);
	line_len = sizeof(STANDIN_FRAME) - 1 + strlen(now) + n - 2 + strlen(gen);
	if (rc == SL_OK && line_len > SL_AUDIT_MAX_LINE)
		rc = sl_err_set(SL_E_TOO_LARGE, "line of %zu bytes (at most %u)", line_len,
		                SL_AUDIT_MAX_LINE);
	if (rc != SL_OK) {
		rc = sl_err_wrap(rc, "audit: refusing to write event '%s'", r->event);
		goto out;
	}
	memmove(obj, obj + 1, n - 2);
	obj[n - 2] = '\0';
	*out = obj;
	obj = NULL;
	rc = SL_OK;
out:
	free(obj);
	json_decref(o);
	return rc;
}

/* One prepared record's line: seq, time, the body, prev; moves the chain on. */
static SL_RESULT emit_prepared(audit_tail *t, const char *body, sl_writer *w)
{
	sl_err rc = SL_E_NOMEM;
	char now[40], *line = NULL;
	int n;

	audit_now(now, sizeof(now));
	n = asprintf(&line, "{\"seq\":%llu,\"time\":\"%s\",%s,\"prev\":\"%s\"}",
	             (unsigned long long)(t->seq + 1), now, body, t->hash);
	SL_ENSURE(n > 0, SL_E_NOMEM, "audit: building a record");
	SL_ENSURE((size_t)n <= SL_AUDIT_MAX_LINE, SL_E_TOO_LARGE,
	          "audit: a record of %d bytes is over the %u-byte line limit", n,
	          SL_AUDIT_MAX_LINE);
	SL_GUARD(sl_write_bytes(w, line, (size_t)n));
	SL_GUARD(sl_write_u8(w, '\n'));
	audit_line_hash((const uint8_t *)line, (size_t)n, t->hash);
	t->seq++;
	rc = SL_OK;
out:
	free(line);
	return rc;
}

static SL_RESULT emit_recovered(sl_audit *a, audit_tail *t, sl_writer *w)
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

static SL_RESULT write_anchor(sl_audit *a, const char *line)
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

static SL_RESULT lock_file(sl_audit *a)
{
	while (flock(a->lockfd, LOCK_EX) != 0) {
		if (errno != EINTR)
			return sl_err_set(SL_E_IO, "%s: flock: %s", a->lock_path, strerror(errno));
	}
	return SL_OK;
}

/* Renames the live file to "<path>.<first seq>"; the next append starts a
 * new file chained to its last line. Called under the lock. */
static SL_RESULT rotate(sl_audit *a)
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
	SL_GUARD(sync_pending(a));
	close(a->fd);
	a->fd = -1;
	rc = SL_OK;
out:
	free(name);
	return rc;
}

/* Where the chain continues: this process's own last write when nothing has
 * touched the live file since (no re-read), else the files' tail. Called
 * under the lock. */
static SL_RESULT load_tail(sl_audit *a, audit_tail *t)
{
	struct stat st;

	if (a->cache_ok && fstat(a->fd, &st) == 0 && st.st_dev == a->cache_dev &&
	    st.st_ino == a->cache_ino && st.st_size == a->cache_size &&
	    st.st_mtim.tv_sec == a->cache_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == a->cache_mtim.tv_nsec &&
	    st.st_ctim.tv_sec == a->cache_ctim.tv_sec &&
	    st.st_ctim.tv_nsec == a->cache_ctim.tv_nsec) {
		memset(t, 0, sizeof(*t));
		t->have = true;
		t->seq = a->cache_seq;
		memcpy(t->hash, a->cache_hash, sizeof(t->hash));
		return SL_OK;
	}
	a->cache_ok = false;
	return find_tail(a, t);
}

static void remember_tail(sl_audit *a, const audit_tail *t)
{
	struct stat st;

	a->cache_ok = false;
	if (a->fd < 0 || fstat(a->fd, &st) != 0)
		return;
	a->cache_seq = t->seq;
	memcpy(a->cache_hash, t->hash, sizeof(a->cache_hash));
	a->cache_dev = st.st_dev;
	a->cache_ino = st.st_ino;
	a->cache_size = st.st_size;
	a->cache_mtim = st.st_mtim;
	a->cache_ctim = st.st_ctim;
	a->cache_ok = true;
}

static void fail_entry(struct pending *q, sl_err rc)
{
	q->rc = rc;
	snprintf(q->detail, sizeof(q->detail), "%s",
	         sl_err_detail()[0] ? sl_err_detail() : sl_err_message(rc));
}

/* One entry's lines (its record, then a checkpoint when due or asked for)
 * into w; on failure nothing of it is kept and the chain state is as before.
 * *cp_line receives the checkpoint line, if one was written. */
static SL_RESULT emit_entry(sl_audit *a, audit_tail *t, const struct pending *q, sl_writer *w,
                            char **cp_line, bool *closed)
{
	sl_err rc = SL_E_NOMEM;
	static const sl_audit_record cp = {.event = SL_AUDIT_EV_CHECKPOINT};
	const char *reason = q->cp_reason;
	sl_writer one;
	audit_tail saved = *t;
	unsigned since = a->since_cp;
	char *line = NULL;

	sl_writer_init(&one, 4 * (size_t)SL_AUDIT_MAX_LINE);
	if (q->r != NULL) {
		SL_GUARD(emit_prepared(t, q->body, &one));
		since++;
		if (a->sk != NULL && reason == NULL && since >= a->every)
			reason = "interval";
	}
	if (a->sk != NULL && reason != NULL) {
		SL_GUARD(emit(a, t, &cp, NULL, true, reason, &one, &line));
		since = 0;
	}
	SL_GUARD(sl_write_bytes(w, one.data, one.len));
	a->since_cp = since;
	if (q->r != NULL)
		a->appended = true;
	if (line != NULL) {
		free(*cp_line);
		*cp_line = line;
		line = NULL;
		*closed = strcmp(reason, "close") == 0;
	} else if (q->r != NULL) {
		*closed = false;
	}
	rc = SL_OK;
out:
	if (rc != SL_OK)
		*t = saved;
	free(line);
	sl_writer_free(&one);
	return rc;
}

/* The leader's work: every entry of the batch, in queue order, chained and
 * written with one write() and made durable with one fsync, under the lock.
 * Each entry's rc says whether its own lines are durable. Called with io. */
static void write_batch(sl_audit *a, struct pending *batch)
{
	sl_err rc = SL_E_IO;
	audit_tail t;
	sl_writer w;
	char *cp_line = NULL;
	struct stat st;
	bool locked = false, closed = false, sync = false;
	static const sl_audit_record cp = {.event = SL_AUDIT_EV_CHECKPOINT};

	sl_writer_init(&w, 0);
	for (struct pending *q = batch; q != NULL; q = q->next)
		q->rc = SL_OK;
	SL_GUARD(lock_file(a));
	locked = true;
	SL_GUARD(open_live(a));
	SL_GUARD(load_tail(a, &t));
	/* from here on the file changes: the cached end is stale until the
	 * batch is durable */
	a->cache_ok = false;
	if (t.need_newline)
		SL_GUARD(sl_write_u8(&w, '\n'));
	if (t.ntorn > 0)
		SL_GUARD(emit_recovered(a, &t, &w));
	for (struct pending *q = batch; q != NULL; q = q->next) {
		sl_err qrc = emit_entry(a, &t, q, &w, &cp_line, &closed);
		if (qrc != SL_OK)
			fail_entry(q, qrc);
		sync |= !q->deferred;
	}
	/* a checkpoint is synced at once whatever asked for it: the anchor
	 * written next must never name lines a crash could take away */
	sync |= cp_line != NULL;
	if (w.len > 0) {
		SL_GUARD(sl_write_all(a->fd, w.data, w.len, a->path));
		if (!sync)
			a->unsynced = true;
	}
	if (sync && (w.len > 0 || a->unsynced)) {
		SL_ENSURE(fsync(a->fd) == 0, SL_E_IO, "%s: fsync: %s", a->path, strerror(errno));
		a->unsynced = false;
	}
	if (cp_line != NULL && a->anchor_path != NULL)
		SL_GUARD(write_anchor(a, cp_line));
	if (a->rotate_bytes > 0 && fstat(a->fd, &st) == 0 &&
	    (uint64_t)st.st_size >= a->rotate_bytes) {
		if (a->sk != NULL && !closed) {
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
	} else {
		remember_tail(a, &t);
	}
	rc = SL_OK;
out:
	if (rc != SL_OK) {
		/* a failure of the batch as a whole (lock, tail, write, fsync,
		 * anchor, rotation) is every entry's failure */
		for (struct pending *q = batch; q != NULL; q = q->next)
			if (q->rc == SL_OK)
				fail_entry(q, rc);
		a->cache_ok = false;
	}
	if (locked)
		flock(a->lockfd, LOCK_UN);
	free(cp_line);
	sl_writer_free(&w);
}

/* Group commit: the entry joins the queue; the first thread to find no
 * leader takes the whole queue and writes it as one batch while later
 * arrivals wait for the next one. Every caller returns only once the batch
 * holding its entry is durable (or failed). */
static SL_RESULT submit(sl_audit *a, const sl_audit_record *r, const char *cp_reason, bool deferred)
{
	struct pending me = {.r = r, .cp_reason = cp_reason, .deferred = deferred};

	if (r != NULL) {
		sl_err rc = prepare_body(a, r, &me.body);
		if (rc != SL_OK)
			return rc; /* refused alone, before it could hold anyone up */
	}
	pthread_mutex_lock(&a->mu);
	/* the queue links entries on their threads' stacks: each thread waits
	 * until its entry is done and unlinked before returning */
	if (a->tail != NULL)
		a->tail->next = &me;
	else
		/* cppcheck-suppress autoVariables */
		a->head = &me;
	/* cppcheck-suppress autoVariables */
	a->tail = &me;
	while (!me.done && a->leading)
		pthread_cond_wait(&a->cv, &a->mu);
	if (!me.done) {
		struct pending *batch = a->head, *q, *next;
		a->head = a->tail = NULL;
		a->leading = true;
		pthread_mutex_unlock(&a->mu);
		pthread_mutex_lock(&a->io);
		write_batch(a, batch);
		pthread_mutex_unlock(&a->io);
		pthread_mutex_lock(&a->mu);
		/* each entry lives on its thread's stack: read next before done */
		for (q = batch; q != NULL; q = next) {
			next = q->next;
			q->done = true;
		}
		a->leading = false;
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
	free(me.body);
	if (me.rc != SL_OK)
		return sl_err_set(me.rc, "%s", me.detail);
	return SL_OK;
}

static SL_RESULT append(sl_audit *a, const sl_audit_record *r, bool deferred)
{
	if (a == NULL || r == NULL || r->event == NULL)
		return sl_err_set(SL_E_USAGE, "audit: append needs a log and an event");
	if (strcmp(r->event, SL_AUDIT_EV_CHECKPOINT) == 0 ||
	    strcmp(r->event, SL_AUDIT_EV_RECOVERED) == 0)
		return sl_err_set(SL_E_USAGE, "audit: event '%s' is written by the log itself",
		                  r->event);
	return submit(a, r, NULL, deferred);
}

sl_err sl_audit_append(sl_audit *a, const sl_audit_record *r)
{
	return append(a, r, false);
}

sl_err sl_audit_append_deferred(sl_audit *a, const sl_audit_record *r)
{
	return append(a, r, true);
}

sl_err sl_audit_sync(sl_audit *a)
{
	sl_err rc = SL_OK;
	if (a == NULL)
		return SL_OK;
	pthread_mutex_lock(&a->io);
	rc = sync_pending(a);
	pthread_mutex_unlock(&a->io);
	return rc;
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
	return submit(a, NULL, "request", false);
}

bool sl_audit_unsealed(sl_audit *a)
{
	if (a == NULL || a->sk == NULL)
		return false;
	pthread_mutex_lock(&a->io);
	bool r = a->since_cp > 0;
	pthread_mutex_unlock(&a->io);
	return r;
}

sl_err sl_audit_close(sl_audit *a)
{
	sl_err rc = SL_OK;
	if (a == NULL)
		return SL_OK;
	pthread_mutex_lock(&a->io);
	bool appended = a->appended;
	pthread_mutex_unlock(&a->io);
	if (a->sk != NULL && appended)
		rc = submit(a, NULL, "close", false);
	sl_err srx = sl_audit_sync(a); /* deferred lines without a closing checkpoint */
	if (rc == SL_OK)
		rc = srx;
	if (a->fd >= 0)
		close(a->fd);
	if (a->lockfd >= 0)
		close(a->lockfd);
	sl_secret_free(a->sk);
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->io);
	pthread_mutex_destroy(&a->mu);
	free(a->path);
	free(a->lock_path);
	free(a->anchor_path);
	free(a->actor);
	free(a);
	return rc;
}
