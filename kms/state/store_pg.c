/* The PostgreSQL driver of the state store (libpq): several seclaunchd
 * replicas share one database. Parameters and results travel in binary
 * (int8, bytea, text), so no value is ever spliced into SQL text. A
 * connection that breaks (the server restarted, the network dropped) is
 * reset before its next use; until that succeeds every operation fails,
 * and the handlers answer 503 (fail closed). Concurrent schema creation by
 * replicas starting together is serialised by an advisory lock. */
#include <arpa/inet.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

#define OID_BYTEA 17
#define OID_INT8 20
#define OID_INT4 23
#define OID_TEXT 25
#define MAX_ARGS 12
#define SCHEMA_LOCK_ID 0x5ec1a0c5

/* Statements are prepared once per connection (PQprepare) and found again
 * by their text; a reset connection has none and prepares them anew. */
#define STMT_CACHE 48

struct conn {
	PGconn *pg;
	bool broken;
	struct {
		const char *sql; /* the caller's static text */
		char name[8];
	} cache[STMT_CACHE];
	size_t ncache;
};

static void pg_disconnect(void *p)
{
	struct conn *c = p;
	if (c == NULL)
		return;
	PQfinish(c->pg);
	free(c);
}

static void no_notices(void *arg, const char *msg)
{
	(void)arg;
	(void)msg; /* "relation already exists, skipping" and the like */
}

static SL_RESULT pg_connect(const char *spec, void **out)
{
	static const char *const keys[] = {"dbname", "connect_timeout", "application_name", NULL};
	const char *vals[] = {spec, "5", "seclaunchd", NULL};
	struct conn *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return sl_err_set(SL_E_NOMEM, "state store");
	c->pg = PQconnectdbParams(keys, vals, 1);
	if (c->pg == NULL || PQstatus(c->pg) != CONNECTION_OK) {
		/* the message names host and port, never the password */
		sl_err rc = sl_err_set(SL_E_SYSTEM, "state store: PostgreSQL: %s",
		                       c->pg ? PQerrorMessage(c->pg) : "out of memory");
		pg_disconnect(c);
		return rc;
	}
	PQsetNoticeProcessor(c->pg, no_notices, NULL);
	*out = c;
	return SL_OK;
}

/* An idle pooled connection that the server closed (a restart, an idle
 * timeout, a terminated backend) still says CONNECTION_OK until it is
 * used; the server's goodbye is already readable on its socket, though,
 * and nothing else is expected there between statements. */
static bool pg_alive(struct conn *c)
{
	struct pollfd pf = {.fd = PQsocket(c->pg), .events = POLLIN};
	if (pf.fd < 0)
		return false;
	if (poll(&pf, 1, 0) == 0)
		return true;
	return PQconsumeInput(c->pg) == 1 && PQstatus(c->pg) == CONNECTION_OK &&
	       (pf.revents & (POLLHUP | POLLERR)) == 0;
}

static bool pg_ready(void *p)
{
	struct conn *c = p;
	if (!c->broken && PQstatus(c->pg) == CONNECTION_OK && pg_alive(c))
		return true;
	PQreset(c->pg);
	c->ncache = 0; /* a new session: nothing is prepared there */
	c->broken = PQstatus(c->pg) != CONNECTION_OK;
	return !c->broken;
}

static SL_RESULT result_err(struct conn *c, PGresult *r, const char *what)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg);
	if (state != NULL && strcmp(state, "23505") == 0)
		return sl_err_set(SL_E_EXISTS, "state store: %s: %s", what, msg);
	if (state != NULL && strcmp(state, "23503") == 0)
		return sl_err_set(SL_E_KMS_REFUSED, "the key was deleted meanwhile (%s)", msg);
	if (PQstatus(c->pg) != CONNECTION_OK || state == NULL || strncmp(state, "08", 2) == 0 ||
	    strncmp(state, "57", 2) == 0)
		c->broken = true;
	return sl_err_set(SL_E_SYSTEM, "state store: PostgreSQL %s: %s", what,
	                  msg && msg[0] ? msg : "connection lost");
}

/* "?" placeholders become $1, $2, ... (no statement here has a "?" in a
 * literal). */
static SL_RESULT numbered(const char *sql, char *out, size_t cap)
{
	size_t o = 0;
	unsigned n = 0;
	for (const char *p = sql; *p; p++) {
		if (o + 8 >= cap)
			return sl_err_set(SL_E_INTERNAL, "state store: statement too long");
		if (*p == '?')
			o += (size_t)snprintf(out + o, cap - o, "$%u", ++n);
		else
			out[o++] = *p;
	}
	out[o] = '\0';
	return SL_OK;
}

/* One statement's parameters in libpq's binary form. */
struct params {
	Oid types[MAX_ARGS];
	const char *vals[MAX_ARGS];
	int lens[MAX_ARGS], fmts[MAX_ARGS];
	uint8_t ints[MAX_ARGS][8];
};

static SL_RESULT bind_params(const kmsd_sqlv *args, size_t nargs, struct params *b)
{
	if (nargs > MAX_ARGS)
		return sl_err_set(SL_E_INTERNAL, "state store: %zu parameters", nargs);
	for (size_t i = 0; i < nargs; i++) {
		b->fmts[i] = 1;
		switch (args[i].t) {
		case KMSD_SQLV_NULL:
			b->types[i] = 0;
			b->vals[i] = NULL;
			b->lens[i] = 0;
			break;
		case KMSD_SQLV_INT:
			for (int k = 0; k < 8; k++)
				b->ints[i][k] = (uint8_t)((uint64_t)args[i].i >> (56 - 8 * k));
			b->types[i] = OID_INT8;
			b->vals[i] = (const char *)b->ints[i];
			b->lens[i] = 8;
			break;
		case KMSD_SQLV_BLOB:
		case KMSD_SQLV_TEXT:
			b->types[i] = args[i].t == KMSD_SQLV_BLOB ? OID_BYTEA : OID_TEXT;
			/* libpq takes no NULL pointer for an empty value */
			b->vals[i] = args[i].n > 0 ? args[i].p : "";
			b->lens[i] = (int)args[i].n;
			break;
		}
	}
	return SL_OK;
}

/* The statement's name on this connection, prepared now if it was not;
 * NULL (and SL_OK) when the cache is full: it is then sent unprepared. The
 * parameter types are those of the first use (a NULL lets the server infer
 * the column's). */
static SL_RESULT prepared(struct conn *c, const char *sql, const struct params *b, size_t nargs,
                          const char **name)
{
	char text[2048];
	PGresult *r;
	sl_err rc = SL_OK;
	*name = NULL;
	for (size_t i = 0; i < c->ncache; i++) {
		if (c->cache[i].sql == sql) {
			*name = c->cache[i].name;
			return SL_OK;
		}
	}
	if (c->ncache == STMT_CACHE)
		return SL_OK;
	SL_GUARD(numbered(sql, text, sizeof(text)));
	snprintf(c->cache[c->ncache].name, sizeof(c->cache[c->ncache].name), "s%zu", c->ncache);
	r = PQprepare(c->pg, c->cache[c->ncache].name, text, (int)nargs, b->types);
	if (r == NULL || PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = result_err(c, r, "prepare");
	PQclear(r);
	if (rc != SL_OK)
		return rc;
	c->cache[c->ncache].sql = sql;
	*name = c->cache[c->ncache++].name;
out:
	return rc;
}

/* Sends one statement, prepared (name) or not (NULL). */
static SL_RESULT send_one(struct conn *c, const kmsd_sql_stmt *st, const char *name)
{
	struct params b;
	char text[2048];
	sl_err rc;
	SL_GUARD(bind_params(st->args, st->nargs, &b));
	if (name == NULL)
		SL_GUARD(numbered(st->sql, text, sizeof(text)));
	if ((name != NULL
	         ? PQsendQueryPrepared(c->pg, name, (int)st->nargs, b.vals, b.lens, b.fmts, 1)
	         : PQsendQueryParams(c->pg, text, (int)st->nargs, b.types, b.vals, b.lens, b.fmts,
	                             1)) != 1)
		rc = result_err(c, NULL, "send");
out:
	return rc;
}

/* The name of each statement, prepared first where it was not (PQprepare
 * waits for its answer: never inside a pipeline). */
static SL_RESULT prepare_all(struct conn *c, const kmsd_sql_stmt *st, size_t n, const char **names)
{
	struct params b;
	sl_err rc = SL_OK;
	for (size_t i = 0; i < n && rc == SL_OK; i++) {
		rc = bind_params(st[i].args, st[i].nargs, &b);
		if (rc == SL_OK)
			rc = prepared(c, st[i].sql, &b, st[i].nargs, &names[i]);
	}
	return rc;
}

static uint64_t be64(const uint8_t *b)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return v;
}

/* A statement's result: its rows through st->fn, its count of changes. */
static SL_RESULT rows(struct conn *c, PGresult *r, const kmsd_sql_stmt *st)
{
	sl_err rc = SL_E_SYSTEM;
	ExecStatusType es = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
	if (es != PGRES_COMMAND_OK && es != PGRES_TUPLES_OK)
		return result_err(c, r, "statement");
	for (int row = 0; row < PQntuples(r) && st->fn != NULL; row++) {
		kmsd_sqlv cols[16];
		int n = PQnfields(r);
		if (n > 16)
			n = 16;
		for (int i = 0; i < n; i++) {
			const uint8_t *v = (const uint8_t *)PQgetvalue(r, row, i);
			int len = PQgetlength(r, row, i);
			memset(&cols[i], 0, sizeof(cols[i]));
			if (PQgetisnull(r, row, i))
				continue;
			switch (PQftype(r, i)) {
			case OID_INT8:
				SL_ENSURE(len == 8, SL_E_SYSTEM, "state store: int8 of %d bytes",
				          len);
				cols[i].t = KMSD_SQLV_INT;
				cols[i].i = (int64_t)be64(v);
				break;
			case OID_INT4:
				SL_ENSURE(len == 4, SL_E_SYSTEM, "state store: int4 of %d bytes",
				          len);
				cols[i].t = KMSD_SQLV_INT;
				cols[i].i = (int32_t)((uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 |
				                      (uint32_t)v[2] << 8 | v[3]);
				break;
			case OID_TEXT:
				cols[i].t = KMSD_SQLV_TEXT;
				cols[i].p = v;
				cols[i].n = (size_t)len;
				break;
			default:
				cols[i].t = KMSD_SQLV_BLOB;
				cols[i].p = v;
				cols[i].n = (size_t)len;
			}
		}
		SL_GUARD(st->fn(st->ctx, cols, (size_t)n));
	}
	if (st->changes != NULL) {
		const char *t = PQcmdTuples(r);
		*st->changes = t && t[0] ? strtoll(t, NULL, 10) : 0;
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT pg_exec(void *p, const char *sql, const kmsd_sqlv *args, size_t nargs,
                         kmsd_sql_row_fn fn, void *ctx, int64_t *changes)
{
	struct conn *c = p;
	const kmsd_sql_stmt st = {sql, args, nargs, fn, ctx, changes};
	const char *name = NULL;
	sl_err rc;
	PGresult *r, *more;
	SL_GUARD(prepare_all(c, &st, 1, &name));
	SL_GUARD(send_one(c, &st, name));
	r = PQgetResult(c->pg);
	rc = rows(c, r, &st);
	PQclear(r);
	/* the end of the answer (a NULL); anything else there breaks the session */
	while ((more = PQgetResult(c->pg)) != NULL) {
		PQclear(more);
		c->broken = true;
	}
out:
	return rc;
}

/* Several statements in one round trip (libpq's pipeline mode): all sent,
 * one sync, then the answers read in order. Between the syncs they are one
 * implicit transaction (or part of the open one): a statement that fails
 * aborts the ones after it, and the first error is the one reported. */
static SL_RESULT pg_batch(void *p, const kmsd_sql_stmt *st, size_t n)
{
	struct conn *c = p;
	const char *names[KMSD_BATCH_MAX];
	sl_err rc = SL_OK, first;
	size_t sent = 0;
	PGresult *r;
	if (n > KMSD_BATCH_MAX)
		return sl_err_set(SL_E_INTERNAL, "state store: %zu statements in one batch", n);
	SL_GUARD(prepare_all(c, st, n, names));
	if (PQenterPipelineMode(c->pg) != 1)
		return result_err(c, NULL, "pipeline");
	while (sent < n && rc == SL_OK)
		if ((rc = send_one(c, &st[sent], names[sent])) == SL_OK)
			sent++;
	if (PQpipelineSync(c->pg) != 1 && rc == SL_OK)
		rc = result_err(c, NULL, "pipeline sync");
	first = rc;
	for (size_t i = 0; i < sent && !c->broken; i++) {
		r = PQgetResult(c->pg);
		if (r == NULL) {
			rc = result_err(c, NULL, "pipeline");
			c->broken = true;
			break;
		}
		rc = PQresultStatus(r) == PGRES_PIPELINE_ABORTED
		         ? sl_err_set(SL_E_SYSTEM, "state store: PostgreSQL: statement aborted")
		         : rows(c, r, &st[i]);
		PQclear(r);
		if (first == SL_OK)
			first = rc;
		/* each statement's answer ends with a NULL */
		while ((r = PQgetResult(c->pg)) != NULL)
			PQclear(r);
	}
	/* then the sync's own answer */
	while (!c->broken && (r = PQgetResult(c->pg)) != NULL) {
		bool sync = PQresultStatus(r) == PGRES_PIPELINE_SYNC;
		PQclear(r);
		if (sync)
			break;
	}
	if (PQexitPipelineMode(c->pg) != 1)
		c->broken = true;
	if (c->broken && first == SL_OK)
		first = sl_err_set(SL_E_SYSTEM, "state store: PostgreSQL: connection lost");
	rc = first;
out:
	return rc;
}

static SL_RESULT simple(void *p, const char *sql)
{
	struct conn *c = p;
	PGresult *r = PQexec(c->pg, sql);
	sl_err rc = SL_OK;
	if (r == NULL ||
	    (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK))
		rc = result_err(c, r, sql);
	PQclear(r);
	return rc;
}

static void pg_rollback(void *p)
{
	struct conn *c = p;
	char keep[1024];
	if (PQtransactionStatus(c->pg) == PQTRANS_IDLE)
		return;
	/* the error that led here stays the one reported; a ROLLBACK that fails
	 * leaves the connection unusable, and pg_ready resets it */
	snprintf(keep, sizeof(keep), "%s", sl_err_detail());
	if (simple(c, "ROLLBACK") != SL_OK) {
		c->broken = true;
		(void)sl_err_set(SL_E_INTERNAL, "%s", keep);
	}
}

static SL_RESULT pg_schema_lock(void *p)
{
	char sql[64];
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_xact_lock(%d)", SCHEMA_LOCK_ID);
	return simple(p, sql);
}

const kmsd_store_driver kmsd_store_pg = {
    .name = "postgresql",
    .lock_key_sql = "SELECT count(*) FROM (SELECT id FROM keys WHERE id = ? FOR UPDATE) l",
    /* the UPDATE and whether the row exists, in one statement (the outer
     * SELECT sees the row as it was before the UPDATE: it exists either way) */
    .challenge_use_sql = "WITH u AS (UPDATE challenges SET used = 1 WHERE nonce = ? AND used = 0 "
                         "RETURNING expires) SELECT (SELECT expires FROM u), "
                         "(SELECT count(*) FROM challenges WHERE nonce = ?)",
    .schema_sql =
        "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v BIGINT NOT NULL);"
        "CREATE TABLE IF NOT EXISTS aks (name BYTEA PRIMARY KEY, ek_sha256 BYTEA NOT NULL,"
        " enrolled BIGINT NOT NULL, revoked BIGINT NOT NULL DEFAULT 0,"
        " mac BYTEA NOT NULL);"
        "CREATE TABLE IF NOT EXISTS keys (id TEXT PRIMARY KEY, backend TEXT NOT NULL,"
        " state BIGINT NOT NULL DEFAULT 0, created BIGINT NOT NULL,"
        " current BIGINT NOT NULL);"
        "CREATE TABLE IF NOT EXISTS kek_versions (key_id TEXT NOT NULL"
        " REFERENCES keys(id) ON DELETE CASCADE, version BIGINT NOT NULL,"
        " wrapped BYTEA, created BIGINT NOT NULL, retired BIGINT NOT NULL DEFAULT 0,"
        " PRIMARY KEY (key_id, version));"
        "CREATE TABLE IF NOT EXISTS key_refs (key_id TEXT NOT NULL"
        " REFERENCES keys(id) ON DELETE CASCADE, version BIGINT NOT NULL,"
        " dataset_id TEXT NOT NULL, noted BIGINT NOT NULL,"
        " PRIMARY KEY (key_id, version, dataset_id));"
        "CREATE TABLE IF NOT EXISTS challenges (nonce BYTEA PRIMARY KEY,"
        " expires BIGINT NOT NULL, used BIGINT NOT NULL DEFAULT 0);"
        "CREATE INDEX IF NOT EXISTS challenges_expires ON challenges (expires);"
        "CREATE TABLE IF NOT EXISTS pending (session BYTEA PRIMARY KEY,"
        " ak_name BYTEA NOT NULL, ek_sha256 BYTEA NOT NULL, cred_sha256 BYTEA NOT NULL,"
        " expires BIGINT NOT NULL, mac BYTEA NOT NULL);"
        "CREATE TABLE IF NOT EXISTS enroll_tokens (hash BYTEA PRIMARY KEY,"
        " expires BIGINT NOT NULL, used BIGINT NOT NULL DEFAULT 0, mac BYTEA NOT NULL);"
        "CREATE TABLE IF NOT EXISTS ek_revocations (ek_sha256 BYTEA PRIMARY KEY,"
        " revoked BIGINT NOT NULL, ak_name BYTEA);"
        "CREATE TABLE IF NOT EXISTS keychecks (name TEXT PRIMARY KEY, kcv BYTEA NOT NULL);"
        "CREATE TABLE IF NOT EXISTS output_runs (run_id TEXT PRIMARY KEY,"
        " subject BYTEA NOT NULL, created BIGINT NOT NULL);",
    .connect = pg_connect,
    .disconnect = pg_disconnect,
    .ready = pg_ready,
    .exec = pg_exec,
    .batch = pg_batch,
    .script = simple,
    .begin_sql = "BEGIN",
    .rollback = pg_rollback,
    .schema_lock = pg_schema_lock,
    .backup = NULL,
};
