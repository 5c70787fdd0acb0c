/* The SQLite driver of the state store: one database file in WAL mode
 * (readers never wait for the writer), busy timeout so that several
 * connections and processes on one host queue instead of failing, write
 * transactions taken IMMEDIATE so two writers never deadlock on a lock
 * upgrade; synchronous=FULL for what must survive a crash of the machine
 * (keys, KEK versions, AKs, tokens: store.c asks for it), NORMAL for the
 * challenges, whose loss in a power cut costs nothing but a retry (a kill
 * of the process loses nothing either way). Statements are prepared once per
 * connection and cached by their text. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state.h"

#define STMT_CACHE 48

struct conn {
	sqlite3 *db;
	char *path;
	struct {
		const char *sql; /* the caller's static text: compared by pointer */
		sqlite3_stmt *st;
	} cache[STMT_CACHE];
	size_t ncache;
};

static SL_RESULT fail(struct conn *c, const char *what)
{
	int code = sqlite3_extended_errcode(c->db);
	if ((code & 0xff) == SQLITE_CONSTRAINT &&
	    (code == SQLITE_CONSTRAINT_PRIMARYKEY || code == SQLITE_CONSTRAINT_UNIQUE))
		return sl_err_set(SL_E_EXISTS, "state store: %s: %s", what, sqlite3_errmsg(c->db));
	if (code == SQLITE_CONSTRAINT_FOREIGNKEY)
		return sl_err_set(SL_E_KMS_REFUSED, "the key was deleted meanwhile (%s)",
		                  sqlite3_errmsg(c->db));
	return sl_err_set(SL_E_SYSTEM, "state store: %s (%s): %s", c->path, what,
	                  sqlite3_errmsg(c->db));
}

static SL_RESULT run_text(void *p, const char *sql)
{
	struct conn *c = p;
	char *msg = NULL;
	if (sqlite3_exec(c->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		sl_err rc = sl_err_set(SL_E_SYSTEM, "state store: %s: %s", c->path,
		                       msg ? msg : sqlite3_errmsg(c->db));
		sqlite3_free(msg);
		return rc;
	}
	return SL_OK;
}

static void sq_disconnect(void *p)
{
	struct conn *c = p;
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->ncache; i++)
		sqlite3_finalize(c->cache[i].st);
	sqlite3_close(c->db);
	free(c->path);
	free(c);
}

/* Run as root, SQLite hands its journal and WAL files to the database
 * file's owner with fchown: a call the service's sandbox does not allow
 * (SystemCallFilter=~@privileged) and that seclaunchd does not need (the
 * state directory is the service user's). */
static int no_fchown(int fd, uid_t uid, gid_t gid)
{
	(void)fd;
	(void)uid;
	(void)gid;
	return 0;
}

static void vfs_once(void)
{
	sqlite3_vfs *v = sqlite3_vfs_find(NULL);
	if (v != NULL && v->iVersion >= 3 && v->xSetSystemCall != NULL)
		(void)v->xSetSystemCall(v, "fchown", (sqlite3_syscall_ptr)no_fchown);
}

/* The write-ahead log and the shared-memory index hold the latest rows
 * until a checkpoint: SQLite opens them by name beside the database (and
 * follows a link there), so they answer to the key-file rule too. Absent
 * ones are made by SQLite with the database's mode. */
static SL_RESULT side_files_check(const char *path)
{
	static const char *const ext[] = {"-wal", "-shm", "-journal"};
	sl_err rc = SL_OK;
	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]) && rc == SL_OK; i++) {
		char side[4096];
		struct stat st;
		int fd;
		if ((size_t)snprintf(side, sizeof(side), "%s%s", path, ext[i]) >= sizeof(side))
			return sl_err_set(SL_E_INPUT, "%s: state store path too long", path);
		fd = open(side, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
		if (fd < 0) {
			if (errno != ENOENT)
				rc = sl_private_file_open_error(side, "state store file");
			continue;
		}
		rc = sl_private_file_check(fd, side, "state store file", &st);
		close(fd);
	}
	return rc;
}

static SL_RESULT sq_connect(const char *spec, void **out)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, vfs_once);
	sl_err rc = SL_E_NOMEM;
	struct conn *c = calloc(1, sizeof(*c));
	const char *path = strncmp(spec, "sqlite:", 7) == 0 ? spec + 7 : spec;
	struct stat st;
	int fd;
	SL_ENSURE(c != NULL, SL_E_NOMEM, "state store");
	c->path = strdup(path);
	SL_ENSURE(c->path != NULL && path[0] != '\0', SL_E_INPUT, "store: empty SQLite path");
	/* the file holds wrapped KEKs and enrollments: private from the first byte */
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		rc = sl_private_file_open_error(path, "state store file");
		goto out;
	}
	rc = sl_private_file_check(fd, path, "state store file", &st);
	close(fd);
	if (rc != SL_OK)
		goto out;
	SL_GUARD(side_files_check(path));
	if (sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
	    SQLITE_OK) {
		rc = sl_err_set(SL_E_IO, "%s: state store: %s", path,
		                c->db ? sqlite3_errmsg(c->db) : "cannot open");
		goto out;
	}
	sqlite3_extended_result_codes(c->db, 1);
	sqlite3_busy_timeout(c->db, 10000);
	SL_GUARD(run_text(c, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
	                     "PRAGMA foreign_keys=ON; PRAGMA secure_delete=ON"));
	*out = c;
	c = NULL;
	rc = SL_OK;
out:
	sq_disconnect(c);
	return rc;
}

static bool sq_ready(void *p)
{
	return p != NULL;
}

static SL_RESULT prepared(struct conn *c, const char *sql, sqlite3_stmt **st)
{
	for (size_t i = 0; i < c->ncache; i++) {
		if (c->cache[i].sql == sql) {
			*st = c->cache[i].st;
			return SL_OK;
		}
	}
	if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
		return fail(c, "prepare");
	if (c->ncache < STMT_CACHE) {
		c->cache[c->ncache].sql = sql;
		c->cache[c->ncache].st = *st;
		c->ncache++;
	}
	return SL_OK;
}

static bool cached(struct conn *c, sqlite3_stmt *st)
{
	for (size_t i = 0; i < c->ncache; i++)
		if (c->cache[i].st == st)
			return true;
	return false;
}

static SL_RESULT sq_exec(void *p, const char *sql, const kmsd_sqlv *args, size_t nargs,
                         kmsd_sql_row_fn fn, void *ctx, int64_t *changes)
{
	struct conn *c = p;
	sqlite3_stmt *st = NULL;
	sl_err rc = SL_E_SYSTEM;
	int step;
	SL_GUARD(prepared(c, sql, &st));
	for (size_t i = 0; i < nargs; i++) {
		int b = SQLITE_OK, k = (int)i + 1;
		switch (args[i].t) {
		case KMSD_SQLV_NULL:
			b = sqlite3_bind_null(st, k);
			break;
		case KMSD_SQLV_INT:
			b = sqlite3_bind_int64(st, k, args[i].i);
			break;
		case KMSD_SQLV_BLOB:
			b = sqlite3_bind_blob(st, k, args[i].p, (int)args[i].n, SQLITE_STATIC);
			break;
		case KMSD_SQLV_TEXT:
			b = sqlite3_bind_text(st, k, args[i].p, (int)args[i].n, SQLITE_STATIC);
			break;
		}
		if (b != SQLITE_OK) {
			rc = fail(c, "bind");
			goto out;
		}
	}
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		kmsd_sqlv cols[16];
		int n = sqlite3_column_count(st);
		if (n > 16)
			n = 16;
		for (int i = 0; i < n; i++) {
			memset(&cols[i], 0, sizeof(cols[i]));
			switch (sqlite3_column_type(st, i)) {
			case SQLITE_INTEGER:
				cols[i].t = KMSD_SQLV_INT;
				cols[i].i = sqlite3_column_int64(st, i);
				break;
			case SQLITE_BLOB:
				cols[i].t = KMSD_SQLV_BLOB;
				cols[i].p = sqlite3_column_blob(st, i);
				cols[i].n = (size_t)sqlite3_column_bytes(st, i);
				break;
			case SQLITE_TEXT:
				cols[i].t = KMSD_SQLV_TEXT;
				cols[i].p = sqlite3_column_text(st, i);
				cols[i].n = (size_t)sqlite3_column_bytes(st, i);
				break;
			default:
				cols[i].t = KMSD_SQLV_NULL;
			}
		}
		if (fn != NULL && (rc = fn(ctx, cols, (size_t)n)) != SL_OK)
			goto out;
	}
	if (step != SQLITE_DONE) {
		rc = fail(c, "step");
		goto out;
	}
	if (changes != NULL)
		*changes = sqlite3_changes64(c->db);
	rc = SL_OK;
out:
	if (st != NULL) {
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		if (!cached(c, st))
			sqlite3_finalize(st);
	}
	return rc;
}

static void sq_rollback(void *p)
{
	struct conn *c = p;
	if (!sqlite3_get_autocommit(c->db))
		(void)sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
}

static SL_RESULT sq_durable(void *p, bool on)
{
	return run_text(p, on ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
}

static SL_RESULT sq_schema_lock(void *p)
{
	(void)p; /* BEGIN IMMEDIATE already holds the write lock */
	return SL_OK;
}

/* The online backup API: a consistent snapshot while the service runs. */
static SL_RESULT sq_backup(void *p, const char *dest)
{
	struct conn *c = p;
	sqlite3 *to = NULL;
	sqlite3_backup *b = NULL;
	sl_err rc = SL_E_IO;
	int fd = open(dest, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	SL_ENSURE(fd >= 0, SL_E_IO, "%s: backup: %s", dest, strerror(errno));
	close(fd);
	SL_ENSURE(sqlite3_open_v2(dest, &to, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK, SL_E_IO,
	          "%s: backup: %s", dest, to ? sqlite3_errmsg(to) : "cannot open");
	b = sqlite3_backup_init(to, "main", c->db, "main");
	SL_ENSURE(b != NULL, SL_E_IO, "%s: backup: %s", dest, sqlite3_errmsg(to));
	int st;
	while ((st = sqlite3_backup_step(b, 256)) == SQLITE_OK || st == SQLITE_BUSY ||
	       st == SQLITE_LOCKED)
		sqlite3_sleep(5);
	SL_ENSURE(st == SQLITE_DONE, SL_E_IO, "%s: backup: %s", dest, sqlite3_errstr(st));
	rc = SL_OK;
out:
	if (b != NULL)
		sqlite3_backup_finish(b);
	sqlite3_close(to);
	if (rc != SL_OK && fd >= 0)
		unlink(dest);
	return rc;
}

const kmsd_store_driver kmsd_store_sqlite = {
    .name = "sqlite",
    /* BEGIN IMMEDIATE holds the write lock: the count alone */
    .lock_key_sql = "SELECT count(*) FROM keys WHERE id = ?",
    .schema_sql = "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);"
                  "CREATE TABLE IF NOT EXISTS aks (name BLOB PRIMARY KEY, ek_sha256 BLOB NOT NULL,"
                  " enrolled INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0,"
                  " mac BLOB NOT NULL);"
                  "CREATE TABLE IF NOT EXISTS keys (id TEXT PRIMARY KEY, backend TEXT NOT NULL,"
                  " state INTEGER NOT NULL DEFAULT 0, created INTEGER NOT NULL,"
                  " current INTEGER NOT NULL);"
                  "CREATE TABLE IF NOT EXISTS kek_versions (key_id TEXT NOT NULL"
                  " REFERENCES keys(id) ON DELETE CASCADE, version INTEGER NOT NULL,"
                  " wrapped BLOB, created INTEGER NOT NULL, retired INTEGER NOT NULL DEFAULT 0,"
                  " PRIMARY KEY (key_id, version));"
                  "CREATE TABLE IF NOT EXISTS key_refs (key_id TEXT NOT NULL"
                  " REFERENCES keys(id) ON DELETE CASCADE, version INTEGER NOT NULL,"
                  " dataset_id TEXT NOT NULL, noted INTEGER NOT NULL,"
                  " PRIMARY KEY (key_id, version, dataset_id));"
                  "CREATE TABLE IF NOT EXISTS challenges (nonce BLOB PRIMARY KEY,"
                  " expires INTEGER NOT NULL, used INTEGER NOT NULL DEFAULT 0);"
                  "CREATE INDEX IF NOT EXISTS challenges_expires ON challenges (expires);"
                  "CREATE TABLE IF NOT EXISTS pending (session BLOB PRIMARY KEY,"
                  " ak_name BLOB NOT NULL, ek_sha256 BLOB NOT NULL, cred_sha256 BLOB NOT NULL,"
                  " expires INTEGER NOT NULL, mac BLOB NOT NULL);"
                  "CREATE TABLE IF NOT EXISTS enroll_tokens (hash BLOB PRIMARY KEY,"
                  " expires INTEGER NOT NULL, used INTEGER NOT NULL DEFAULT 0, mac BLOB NOT NULL);"
                  "CREATE TABLE IF NOT EXISTS ek_revocations (ek_sha256 BLOB PRIMARY KEY,"
                  " revoked INTEGER NOT NULL, ak_name BLOB);"
                  "CREATE TABLE IF NOT EXISTS keychecks (name TEXT PRIMARY KEY, kcv BLOB NOT NULL);"
                  "CREATE TABLE IF NOT EXISTS output_runs (run_id TEXT PRIMARY KEY,"
                  " subject BLOB NOT NULL, created INTEGER NOT NULL);",
    .connect = sq_connect,
    .disconnect = sq_disconnect,
    .ready = sq_ready,
    .exec = sq_exec,
    .script = run_text,
    .begin_sql = "BEGIN IMMEDIATE",
    .rollback = sq_rollback,
    .schema_lock = sq_schema_lock,
    .durable = sq_durable,
    .backup = sq_backup,
};
