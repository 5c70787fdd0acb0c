/* The state store's operations, written once over the driver interface
 * (store.h): a fixed set of parameterised statements, a bounded pool of
 * connections, the schema and its version check. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "state.h"

/* A caller waiting for a connection: the pool hands one to the longest
 * waiting first (its own condition variable, so nobody else wakes). */
struct waiter {
	pthread_cond_t cv;
	void *conn;
	struct waiter *next;
};

struct kmsd_store {
	const kmsd_store_driver *drv;
	pthread_mutex_t mu;
	void **conns; /* free connections: conns[0..nfree) */
	size_t nfree, n;
	struct waiter *head, **tail; /* the line, oldest first */
	bool healthy;
};

#define V_INT(x) ((kmsd_sqlv){.t = KMSD_SQLV_INT, .i = (int64_t)(x)})
#define V_BLOB(b, l) ((kmsd_sqlv){.t = KMSD_SQLV_BLOB, .p = (b), .n = (l)})
#define V_TEXT(s) ((kmsd_sqlv){.t = KMSD_SQLV_TEXT, .p = (s), .n = strlen(s)})
#define NARGS(a) (sizeof(a) / sizeof((a)[0]))

const char *kmsd_store_kind(const kmsd_store *s)
{
	return s->drv->name;
}

bool kmsd_store_healthy(kmsd_store *s)
{
	pthread_mutex_lock(&s->mu);
	bool h = s->healthy;
	pthread_mutex_unlock(&s->mu);
	return h;
}

/* Puts a connection back: to the oldest waiter, else among the free. */
static void give(kmsd_store *s, void *c)
{
	struct waiter *w = s->head;
	if (w != NULL) {
		s->head = w->next;
		if (s->head == NULL)
			s->tail = &s->head;
		w->conn = c;
		pthread_cond_signal(&w->cv);
	} else {
		s->conns[s->nfree++] = c;
	}
}

/* A free connection, or one in line behind the callers already waiting,
 * for at most KMSD_STORE_WAIT_MS. Called with mu held. */
static void *take(kmsd_store *s)
{
	struct waiter w = {.conn = NULL, .next = NULL};
	pthread_condattr_t a;
	struct timespec until;
	int e = 0;
	if (s->nfree > 0 && s->head == NULL)
		return s->conns[--s->nfree];
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&w.cv, &a);
	pthread_condattr_destroy(&a);
	/* in line until handed a connection or timed out: either way it has
	 * left the line before this returns */
	/* cppcheck-suppress autoVariables */
	*s->tail = &w;
	/* cppcheck-suppress autoVariables */
	s->tail = &w.next;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += KMSD_STORE_WAIT_MS / 1000;
	until.tv_nsec += (long)(KMSD_STORE_WAIT_MS % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (w.conn == NULL && e != ETIMEDOUT)
		e = pthread_cond_timedwait(&w.cv, &s->mu, &until);
	if (w.conn == NULL) {
		/* out of the line; nobody handed it anything */
		for (struct waiter **p = &s->head; *p != NULL; p = &(*p)->next) {
			if (*p == &w) {
				*p = w.next;
				if (s->tail == &w.next)
					s->tail = p;
				break;
			}
		}
	}
	pthread_cond_destroy(&w.cv);
	return w.conn;
}

static SL_RESULT acquire(kmsd_store *s, void **c)
{
	pthread_mutex_lock(&s->mu);
	*c = take(s);
	pthread_mutex_unlock(&s->mu);
	if (*c == NULL)
		return sl_err_set(SL_E_SYSTEM,
		                  "state store %s: all %zu connections stayed busy for %d ms "
		                  "(store_pool)",
		                  s->drv->name, s->n, KMSD_STORE_WAIT_MS);
	if (!s->drv->ready(*c)) {
		pthread_mutex_lock(&s->mu);
		s->healthy = false;
		give(s, *c);
		pthread_mutex_unlock(&s->mu);
		*c = NULL;
		return sl_err_set(SL_E_SYSTEM, "state store: %s is unavailable (reconnecting)",
		                  s->drv->name);
	}
	return SL_OK;
}

static void release(kmsd_store *s, void *c, sl_err rc)
{
	pthread_mutex_lock(&s->mu);
	s->healthy = rc != SL_E_SYSTEM;
	give(s, c);
	pthread_mutex_unlock(&s->mu);
}

static SL_RESULT durable(kmsd_store *s, void *c, bool on)
{
	return s->drv->durable != NULL ? s->drv->durable(c, on) : SL_OK;
}

/* Statements sent together on one pooled connection: one round trip
 * where the driver batches (each its own autocommit on SQLite, one
 * implicit transaction on PostgreSQL); durable: they must survive a crash
 * of the machine. */
static SL_RESULT run(kmsd_store *s, const kmsd_sql_stmt *st, size_t n, bool sync)
{
	void *c = NULL;
	sl_err rc = acquire(s, &c);
	if (rc != SL_OK)
		return rc;
	rc = sync ? durable(s, c, true) : SL_OK;
	if (rc == SL_OK && s->drv->batch != NULL && n > 1)
		rc = s->drv->batch(c, st, n);
	for (size_t i = 0; rc == SL_OK && (s->drv->batch == NULL || n == 1) && i < n; i++)
		rc = s->drv->exec(c, st[i].sql, st[i].args, st[i].nargs, st[i].fn, st[i].ctx,
		                  st[i].changes);
	if (sync && durable(s, c, false) != SL_OK && rc == SL_OK)
		rc = sl_err_set(SL_E_SYSTEM, "state store: synchronous mode");
	release(s, c, rc);
	return rc;
}

/* One statement on a pooled connection (autocommit). */
static SL_RESULT exec1(kmsd_store *s, const char *sql, const kmsd_sqlv *args, size_t nargs,
                       kmsd_sql_row_fn fn, void *ctx, int64_t *changes)
{
	const kmsd_sql_stmt st = {sql, args, nargs, fn, ctx, changes};
	return run(s, &st, 1, false);
}

/* One write that must survive a crash of the machine; *changed (when
 * asked): it changed a row. */
static SL_RESULT write1(kmsd_store *s, const char *sql, const kmsd_sqlv *args, size_t nargs,
                        bool *changed)
{
	int64_t ch = 0;
	const kmsd_sql_stmt st = {sql, args, nargs, NULL, NULL, &ch};
	sl_err rc = run(s, &st, 1, true);
	if (changed != NULL)
		*changed = rc == SL_OK && ch > 0;
	return rc;
}

static SL_RESULT one_int(void *ctx, const kmsd_sqlv *cols, size_t n)
{
	int64_t *out = ctx;
	if (n < 1 || cols[0].t != KMSD_SQLV_INT)
		return sl_err_set(SL_E_SYSTEM, "state store: expected an integer");
	*out = cols[0].i;
	return SL_OK;
}

/* A SELECT count(*): its one integer into *n. */
static SL_RESULT count1(kmsd_store *s, const char *sql, const kmsd_sqlv *args, size_t nargs,
                        size_t *n)
{
	int64_t v = 0;
	sl_err rc = exec1(s, sql, args, nargs, one_int, &v, NULL);
	*n = (size_t)v;
	return rc;
}

/* Ends a transaction opened by txn_begin: commits when rc is SL_OK, else
 * (or when the commit fails) rolls back; leaves synchronous mode and gives
 * the connection back. Returns the outcome. */
static SL_RESULT txn_end(kmsd_store *s, void *c, sl_err rc)
{
	if (rc == SL_OK)
		rc = s->drv->script(c, "COMMIT");
	if (rc != SL_OK)
		s->drv->rollback(c);
	if (durable(s, c, false) != SL_OK && rc == SL_OK)
		rc = sl_err_set(SL_E_SYSTEM, "state store: synchronous mode");
	release(s, c, rc);
	return rc;
}

/* Several statements that commit together and survive a crash of the
 * machine: a pooled connection in synchronous mode with a write
 * transaction open. On failure nothing is held (*c is NULL). */
static SL_RESULT txn_begin(kmsd_store *s, void **c)
{
	sl_err rc = acquire(s, c);
	if (rc != SL_OK)
		return rc;
	rc = durable(s, *c, true);
	if (rc == SL_OK)
		rc = s->drv->script(*c, s->drv->begin_sql);
	if (rc != SL_OK) {
		rc = txn_end(s, *c, rc);
		*c = NULL;
	}
	return rc;
}

static const char SQL_SCHEMA_GET[] = "SELECT v FROM meta WHERE k = 'schema'";
static const char SQL_SCHEMA_PUT[] = "INSERT INTO meta (k, v) VALUES ('schema', ?) "
                                     "ON CONFLICT (k) DO UPDATE SET v = excluded.v";

/* Schema 1 -> 2: pending enrollments and enrollment tokens gained a row MAC
 * under the registry key. Rows from before have none and grant nothing:
 * they are dropped with their tables (they live 60 s and at most a week),
 * which the schema then makes anew; the AK rows keep theirs (registry.c
 * moves their MACs to the row format at its first start). */
static SL_RESULT upgrade_v1(kmsd_store *s, void *c)
{
	static const char cnt[] = "SELECT (SELECT count(*) FROM pending) + "
	                          "(SELECT count(*) FROM enroll_tokens)";
	static const char eks[] = "INSERT INTO ek_revocations (ek_sha256, revoked, ak_name) "
	                          "SELECT ek_sha256, ?, name FROM aks WHERE revoked <> 0 "
	                          "ON CONFLICT (ek_sha256) DO NOTHING";
	kmsd_sqlv now[] = {V_INT(time(NULL))};
	int64_t n = 0;
	sl_err rc = s->drv->exec(c, cnt, NULL, 0, one_int, &n, NULL);
	if (rc == SL_OK)
		rc = s->drv->script(c, "DROP TABLE pending; DROP TABLE enroll_tokens");
	if (rc == SL_OK)
		rc = s->drv->script(c, s->drv->schema_sql);
	/* an AK revoked before names its machine too (schema 2's revocation) */
	if (rc == SL_OK)
		rc = s->drv->exec(c, eks, now, 1, NULL, NULL, NULL);
	if (rc == SL_OK)
		kmsd_log(KMSD_LOG_NOTICE,
		         "state store %s: schema 1 upgraded to %d; %lld pending enrollment(s) and "
		         "enrollment token(s) from before carried no row MAC and are no longer "
		         "honoured (issue new tokens)",
		         s->drv->name, KMSD_STORE_SCHEMA, (long long)n);
	return rc;
}

static SL_RESULT schema(kmsd_store *s, const char *spec)
{
	void *c = NULL;
	sl_err rc = acquire(s, &c);
	int64_t have = -1;
	kmsd_sqlv a[] = {V_INT(KMSD_STORE_SCHEMA)};
	if (rc != SL_OK)
		return rc;
	SL_GUARD(s->drv->script(c, s->drv->begin_sql));
	SL_GUARD(s->drv->schema_lock(c));
	SL_GUARD(s->drv->script(c, s->drv->schema_sql));
	SL_GUARD(s->drv->exec(c, SQL_SCHEMA_GET, NULL, 0, one_int, &have, NULL));
	if (have == 1)
		SL_GUARD(upgrade_v1(s, c));
	if (have < 0 || have == 1)
		SL_GUARD(s->drv->exec(c, SQL_SCHEMA_PUT, a, 1, NULL, NULL, NULL));
	else
		SL_ENSURE(have == KMSD_STORE_SCHEMA, SL_E_VERSION,
		          "state store %s: schema version %lld, this seclaunchd reads version %d "
		          "only: %s (not starting)",
		          s->drv->name, (long long)have, KMSD_STORE_SCHEMA,
		          have > KMSD_STORE_SCHEMA
		              ? "another replica was upgraded; upgrade this one to the same release"
		              : "upgrade the store with this release's seclaunchd migrate");
	SL_GUARD(s->drv->script(c, "COMMIT"));
	(void)spec;
	rc = SL_OK;
out:
	if (rc != SL_OK)
		s->drv->rollback(c);
	release(s, c, rc == SL_E_VERSION ? SL_OK : rc);
	return rc;
}

sl_err kmsd_store_open(const char *spec, unsigned pool, kmsd_store **out)
{
	sl_err rc = SL_E_NOMEM;
	kmsd_store *s = calloc(1, sizeof(*s));
	SL_ENSURE(s != NULL, SL_E_NOMEM, "state store");
	SL_ENSURE(spec != NULL && spec[0] != '\0', SL_E_INPUT, "config: \"store\" is empty");
	pthread_mutex_init(&s->mu, NULL);
	s->tail = &s->head;
	s->drv = strncmp(spec, "postgresql://", 13) == 0 || strncmp(spec, "postgres://", 11) == 0
	             ? &kmsd_store_pg
	             : &kmsd_store_sqlite;
	/* SQLite has one writer: one connection per process queues them on a
	 * mutex instead of in the busy handler's sleeps (which cost p99) */
	if (pool < 1 || s->drv == &kmsd_store_sqlite)
		pool = 1;
	if (pool > KMSD_STORE_POOL_MAX)
		pool = KMSD_STORE_POOL_MAX;
	s->conns = calloc(pool, sizeof(*s->conns));
	SL_ENSURE(s->conns != NULL, SL_E_NOMEM, "state store");
	s->n = pool;
	/* the first connection creates the schema before others open */
	for (size_t i = 0; i < pool; i++) {
		SL_GUARD(s->drv->connect(spec, &s->conns[i]));
		s->nfree++;
		if (i == 0)
			SL_GUARD(schema(s, spec));
	}
	s->healthy = true;
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	kmsd_store_close(s);
	return rc;
}

void kmsd_store_close(kmsd_store *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->nfree; i++)
		s->drv->disconnect(s->conns[i]);
	free(s->conns);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

unsigned kmsd_store_pool(const kmsd_config *c)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = c->store_pool;
	if (n == 0)
		n = cpus > 1
		        ? (unsigned)(cpus < KMSD_STORE_POOL_MAX ? 2 * cpus : KMSD_STORE_POOL_MAX)
		        : 2;
	return n > KMSD_STORE_POOL_MAX ? KMSD_STORE_POOL_MAX : n;
}

sl_err kmsd_store_backup(kmsd_store *s, const char *dest)
{
	void *c = NULL;
	sl_err rc;
	if (s->drv->backup == NULL)
		return sl_err_set(SL_E_INPUT,
		                  "state store %s: back it up with pg_dump (docs/seclaunchd.md, "
		                  "Backup and restore)",
		                  s->drv->name);
	rc = acquire(s, &c);
	if (rc != SL_OK)
		return rc;
	rc = s->drv->backup(c, dest);
	release(s, c, SL_OK);
	return rc;
}

/* ---- AKs ---------------------------------------------------------------- */

static SL_RESULT copy32(const kmsd_sqlv *v, uint8_t out[static 32], const char *what)
{
	if (v->t != KMSD_SQLV_BLOB || v->n != 32)
		return sl_err_set(SL_E_INTEGRITY, "state store: %s is not 32 bytes", what);
	memcpy(out, v->p, 32);
	return SL_OK;
}

sl_err kmsd_store_ak_put(kmsd_store *s, const uint8_t *name, size_t len, const kmsd_ak_row *row,
                         bool *added)
{
	static const char sql[] = "INSERT INTO aks (name, ek_sha256, enrolled, revoked, mac) "
	                          "VALUES (?, ?, ?, 0, ?) ON CONFLICT (name) DO NOTHING";
	kmsd_sqlv a[] = {V_BLOB(name, len), V_BLOB(row->ek_sha256, 32), V_INT(row->enrolled),
	                 V_BLOB(row->mac, 32)};
	return write1(s, sql, a, NARGS(a), added);
}

/* whether the AK's machine (its EK) is revoked, as a column of an aks row */
#define SQL_EK_REVOKED "(SELECT count(*) FROM ek_revocations e WHERE e.ek_sha256 = a.ek_sha256)"

/* A row read into the caller's struct: whether there was one. */
struct got {
	void *row;
	bool found;
};

static SL_RESULT ak_row(void *ctx, const kmsd_sqlv *c, size_t n)
{
	sl_err rc;
	struct got *g = ctx;
	kmsd_ak_row *row = g->row;
	if (n != 5 || c[1].t != KMSD_SQLV_INT || c[2].t != KMSD_SQLV_INT || c[4].t != KMSD_SQLV_INT)
		return sl_err_set(SL_E_INTEGRITY, "state store: aks row");
	row->ek_revoked = c[4].i != 0;
	if ((rc = copy32(&c[0], row->ek_sha256, "aks.ek_sha256")) != SL_OK)
		return rc;
	row->enrolled = c[1].i;
	row->revoked = c[2].i != 0;
	if ((rc = copy32(&c[3], row->mac, "aks.mac")) != SL_OK)
		return rc;
	g->found = true;
	return SL_OK;
}

static const char SQL_AK_GET[] =
    "SELECT ek_sha256, enrolled, revoked, mac, " SQL_EK_REVOKED " FROM aks a WHERE name = ?";

sl_err kmsd_store_ak_get(kmsd_store *s, const uint8_t *name, size_t len, kmsd_ak_row *row,
                         bool *found)
{
	kmsd_sqlv a[] = {V_BLOB(name, len)};
	struct got g = {row, false};
	sl_err rc = exec1(s, SQL_AK_GET, a, 1, ak_row, &g, NULL);
	*found = g.found;
	return rc;
}

sl_err kmsd_store_ak_revoke(kmsd_store *s, const uint8_t *name, size_t len, bool *found)
{
	static const char sql[] = "UPDATE aks SET revoked = 1 WHERE name = ?";
	kmsd_sqlv a[] = {V_BLOB(name, len)};
	return write1(s, sql, a, 1, found);
}

struct ak_list {
	kmsd_ak_fn fn;
	void *ctx;
};

static SL_RESULT ak_list_row(void *ctx, const kmsd_sqlv *c, size_t n)
{
	struct ak_list *l = ctx;
	kmsd_ak_row row = {0};
	struct got g = {&row, false};
	if (n != 6 || c[0].t != KMSD_SQLV_BLOB || c[0].n == 0 || c[0].n > KMSD_AK_NAME_MAX)
		return sl_err_set(SL_E_INTEGRITY, "state store: aks row");
	sl_err rc = ak_row(&g, c + 1, n - 1);
	if (rc != SL_OK)
		return rc;
	return l->fn(l->ctx, c[0].p, c[0].n, &row);
}

sl_err kmsd_store_ak_list(kmsd_store *s, kmsd_ak_fn fn, void *ctx)
{
	static const char sql[] = "SELECT name, ek_sha256, enrolled, revoked, mac, " SQL_EK_REVOKED
	                          " FROM aks a ORDER BY name";
	struct ak_list l = {fn, ctx};
	return exec1(s, sql, NULL, 0, ak_list_row, &l, NULL);
}

sl_err kmsd_store_ak_set_mac(kmsd_store *s, const uint8_t *name, size_t len,
                             const uint8_t was[static 32], const uint8_t mac[static 32])
{
	static const char sql[] = "UPDATE aks SET mac = ? WHERE name = ? AND mac = ?";
	kmsd_sqlv a[] = {V_BLOB(mac, 32), V_BLOB(name, len), V_BLOB(was, 32)};
	return write1(s, sql, a, NARGS(a), NULL);
}

/* ---- revoked machines (EKs) ------------------------------------------------ */

sl_err kmsd_store_ek_revoke(kmsd_store *s, const uint8_t ek[static 32], const uint8_t *ak,
                            size_t ak_len, int64_t when, bool *added)
{
	static const char sql[] = "INSERT INTO ek_revocations (ek_sha256, revoked, ak_name) "
	                          "VALUES (?, ?, ?) ON CONFLICT (ek_sha256) DO NOTHING";
	kmsd_sqlv a[] = {V_BLOB(ek, 32), V_INT(when), V_BLOB(ak, ak_len)};
	return write1(s, sql, a, NARGS(a), added);
}

sl_err kmsd_store_ek_readmit(kmsd_store *s, const uint8_t ek[static 32], bool *found)
{
	static const char sql[] = "DELETE FROM ek_revocations WHERE ek_sha256 = ?";
	kmsd_sqlv a[] = {V_BLOB(ek, 32)};
	return write1(s, sql, a, 1, found);
}

sl_err kmsd_store_ek_revoked(kmsd_store *s, const uint8_t ek[static 32], bool *revoked)
{
	static const char sql[] = "SELECT count(*) FROM ek_revocations WHERE ek_sha256 = ?";
	kmsd_sqlv a[] = {V_BLOB(ek, 32)};
	size_t n = 0;
	sl_err rc = count1(s, sql, a, 1, &n);
	*revoked = rc != SL_OK || n > 0; /* a store that cannot say admits no one */
	return rc;
}

struct ek_list {
	kmsd_ek_fn fn;
	void *ctx;
};

static SL_RESULT ek_list_row(void *ctx, const kmsd_sqlv *c, size_t n)
{
	struct ek_list *l = ctx;
	uint8_t ek[32];
	sl_err rc;
	if (n != 3 || c[1].t != KMSD_SQLV_INT ||
	    (c[2].t != KMSD_SQLV_BLOB && c[2].t != KMSD_SQLV_NULL) || c[2].n > KMSD_AK_NAME_MAX)
		return sl_err_set(SL_E_INTEGRITY, "state store: ek_revocations row");
	if ((rc = copy32(&c[0], ek, "ek_revocations.ek_sha256")) != SL_OK)
		return rc;
	return l->fn(l->ctx, ek, c[1].i, c[2].p, c[2].n);
}

sl_err kmsd_store_ek_list(kmsd_store *s, kmsd_ek_fn fn, void *ctx)
{
	static const char sql[] = "SELECT ek_sha256, revoked, ak_name FROM ek_revocations "
	                          "ORDER BY ek_sha256";
	struct ek_list l = {fn, ctx};
	return exec1(s, sql, NULL, 0, ek_list_row, &l, NULL);
}

/* ---- key-check values ------------------------------------------------------ */

static SL_RESULT kcv_row(void *ctx, const kmsd_sqlv *c, size_t n)
{
	if (n != 1)
		return sl_err_set(SL_E_INTEGRITY, "state store: keychecks row");
	return copy32(&c[0], ctx, "keychecks.kcv");
}

sl_err kmsd_store_keycheck(kmsd_store *s, const char *name, const uint8_t kcv[static 32],
                           uint8_t have[static 32], bool *written)
{
	static const char put[] = "INSERT INTO keychecks (name, kcv) VALUES (?, ?) "
	                          "ON CONFLICT (name) DO NOTHING";
	static const char get[] = "SELECT kcv FROM keychecks WHERE name = ?";
	kmsd_sqlv a[] = {V_TEXT(name), V_BLOB(kcv, 32)};
	sl_err rc = write1(s, put, a, NARGS(a), written);
	if (rc == SL_OK)
		rc = exec1(s, get, a, 1, kcv_row, have, NULL);
	return rc;
}

/* ---- keys ----------------------------------------------------------------- */

sl_err kmsd_store_key_create(kmsd_store *s, const char *id, const char *backend,
                             const uint8_t *wrapped, size_t wlen, int64_t now)
{
	static const char k_sql[] = "INSERT INTO keys (id, backend, state, created, current) "
	                            "VALUES (?, ?, 0, ?, 1)";
	static const char v_sql[] = "INSERT INTO kek_versions (key_id, version, wrapped, created, "
	                            "retired) VALUES (?, 1, ?, ?, 0)";
	kmsd_sqlv ka[] = {V_TEXT(id), V_TEXT(backend), V_INT(now)};
	kmsd_sqlv va[] = {V_TEXT(id),
	                  wrapped ? V_BLOB(wrapped, wlen) : (kmsd_sqlv){.t = KMSD_SQLV_NULL},
	                  V_INT(now)};
	void *c = NULL;
	sl_err rc = txn_begin(s, &c);
	if (rc != SL_OK)
		return rc;
	rc = s->drv->exec(c, k_sql, ka, NARGS(ka), NULL, NULL, NULL);
	if (rc == SL_E_EXISTS)
		rc = sl_err_set(SL_E_EXISTS, "key '%s' already exists", id);
	if (rc != SL_OK)
		goto out;
	SL_GUARD(s->drv->exec(c, v_sql, va, NARGS(va), NULL, NULL, NULL));
out:
	return txn_end(s, c, rc);
}

static SL_RESULT key_row(void *ctx, const kmsd_sqlv *c, size_t n)
{
	struct got *g = ctx;
	kmsd_key_row *row = g->row;
	if (n != 4 || c[0].t != KMSD_SQLV_TEXT || c[0].n >= sizeof(row->backend) ||
	    c[1].t != KMSD_SQLV_INT || c[2].t != KMSD_SQLV_INT || c[3].t != KMSD_SQLV_INT ||
	    c[3].i < 1 || c[3].i > KMSD_KEK_VERSION_MAX)
		return sl_err_set(SL_E_INTEGRITY, "state store: keys row");
	memcpy(row->backend, c[0].p, c[0].n);
	row->backend[c[0].n] = '\0';
	row->state = c[1].i == 0 ? KMSD_KEY_ENABLED : KMSD_KEY_DISABLED;
	row->created = c[2].i;
	row->current = (unsigned)c[3].i;
	g->found = true;
	return SL_OK;
}

static const char SQL_KEY_GET[] = "SELECT backend, state, created, current FROM keys WHERE id = ?";

sl_err kmsd_store_key_get(kmsd_store *s, const char *id, kmsd_key_row *row, bool *found)
{
	kmsd_sqlv a[] = {V_TEXT(id)};
	struct got g = {row, false};
	sl_err rc = exec1(s, SQL_KEY_GET, a, 1, key_row, &g, NULL);
	*found = g.found;
	return rc;
}

struct kek_get {
	uint8_t *wrapped;
	size_t *wlen;
	bool *retired;
	bool found;
};

static SL_RESULT kek_row(void *ctx, const kmsd_sqlv *c, size_t n)
{
	struct kek_get *g = ctx;
	if (n != 2 || c[1].t != KMSD_SQLV_INT ||
	    (c[0].t != KMSD_SQLV_NULL &&
	     (c[0].t != KMSD_SQLV_BLOB || c[0].n > KMSD_KEK_WRAPPED_MAX)))
		return sl_err_set(SL_E_INTEGRITY, "state store: kek_versions row");
	*g->wlen = c[0].t == KMSD_SQLV_BLOB ? c[0].n : 0;
	if (*g->wlen > 0)
		memcpy(g->wrapped, c[0].p, c[0].n);
	*g->retired = c[1].i != 0;
	g->found = true;
	return SL_OK;
}

sl_err kmsd_store_kek_get(kmsd_store *s, const char *id, unsigned version,
                          uint8_t wrapped[static KMSD_KEK_WRAPPED_MAX], size_t *wlen, bool *retired,
                          bool *found)
{
	static const char sql[] = "SELECT wrapped, retired FROM kek_versions "
	                          "WHERE key_id = ? AND version = ?";
	kmsd_sqlv a[] = {V_TEXT(id), V_INT(version)};
	struct kek_get g = {wrapped, wlen, retired, false};
	sl_err rc = exec1(s, sql, a, NARGS(a), kek_row, &g, NULL);
	*found = g.found;
	return rc;
}

sl_err kmsd_store_kek_add(kmsd_store *s, const char *id, unsigned version, const uint8_t *wrapped,
                          size_t wlen, int64_t now)
{
	static const char v_sql[] = "INSERT INTO kek_versions (key_id, version, wrapped, created, "
	                            "retired) VALUES (?, ?, ?, ?, 0)";
	static const char k_sql[] = "UPDATE keys SET current = ? WHERE id = ? AND current = ?";
	kmsd_sqlv va[] = {V_TEXT(id), V_INT(version),
	                  wrapped ? V_BLOB(wrapped, wlen) : (kmsd_sqlv){.t = KMSD_SQLV_NULL},
	                  V_INT(now)};
	kmsd_sqlv ka[] = {V_INT(version), V_TEXT(id), V_INT(version - 1)};
	int64_t ch = 0;
	void *c = NULL;
	sl_err rc = txn_begin(s, &c);
	if (rc != SL_OK)
		return rc;
	SL_GUARD(s->drv->exec(c, v_sql, va, NARGS(va), NULL, NULL, NULL));
	SL_GUARD(s->drv->exec(c, k_sql, ka, NARGS(ka), NULL, NULL, &ch));
	SL_ENSURE(ch == 1, SL_E_EXISTS, "key '%s': another rotation made version %u first", id,
	          version);
out:
	return txn_end(s, c, rc);
}

sl_err kmsd_store_kek_retire(kmsd_store *s, const char *id, unsigned below, size_t *n)
{
	static const char sql[] = "UPDATE kek_versions SET retired = 1 "
	                          "WHERE key_id = ? AND version < ? AND retired = 0";
	kmsd_sqlv a[] = {V_TEXT(id), V_INT(below)};
	int64_t ch = 0;
	const kmsd_sql_stmt st = {sql, a, NARGS(a), NULL, NULL, &ch};
	sl_err rc = run(s, &st, 1, true);
	*n = (size_t)ch;
	return rc;
}

sl_err kmsd_store_key_set_state(kmsd_store *s, const char *id, enum kmsd_key_state st, bool *found)
{
	static const char sql[] = "UPDATE keys SET state = ? WHERE id = ?";
	kmsd_sqlv a[] = {V_INT(st), V_TEXT(id)};
	return write1(s, sql, a, NARGS(a), found);
}

sl_err kmsd_store_key_delete(kmsd_store *s, const char *id, bool force, size_t *refs, bool *deleted)
{
	/* one transaction that holds the key's row from the reference count to
	 * the delete: a wrap noting a reference meanwhile either commits first
	 * (and is counted) or finds the key gone (its insert's foreign key) */
	static const char c_sql[] = "SELECT count(*) FROM key_refs WHERE key_id = ?";
	static const char r_sql[] = "DELETE FROM key_refs WHERE key_id = ?";
	static const char v_sql[] = "DELETE FROM kek_versions WHERE key_id = ?";
	static const char k_sql[] = "DELETE FROM keys WHERE id = ?";
	kmsd_sqlv a[] = {V_TEXT(id)};
	int64_t ch = 0, n = 0, have = 0;
	void *c = NULL;
	sl_err rc;
	*refs = 0;
	*deleted = false;
	rc = txn_begin(s, &c);
	if (rc != SL_OK)
		return rc;
	SL_GUARD(s->drv->exec(c, s->drv->lock_key_sql, a, 1, one_int, &have, NULL));
	SL_GUARD(s->drv->exec(c, c_sql, a, 1, one_int, &n, NULL));
	*refs = (size_t)n;
	if (have == 0 || (n > 0 && !force))
		goto out; /* nothing to delete, or refused: commits nothing */
	SL_GUARD(s->drv->exec(c, r_sql, a, 1, NULL, NULL, NULL));
	SL_GUARD(s->drv->exec(c, v_sql, a, 1, NULL, NULL, NULL));
	SL_GUARD(s->drv->exec(c, k_sql, a, 1, NULL, NULL, &ch));
out:
	rc = txn_end(s, c, rc);
	if (rc == SL_OK)
		*deleted = ch > 0;
	return rc;
}

static SL_RESULT list_key(void *ctx, const kmsd_sqlv *c, size_t n)
{
	json_t *arr = ctx;
	if (n != 5 || c[0].t != KMSD_SQLV_TEXT || c[1].t != KMSD_SQLV_TEXT ||
	    c[2].t != KMSD_SQLV_INT || c[3].t != KMSD_SQLV_INT || c[4].t != KMSD_SQLV_INT)
		return sl_err_set(SL_E_INTEGRITY, "state store: keys row");
	json_t *o = json_pack("{s:s%, s:s%, s:s, s:I, s:I, s:[]}", "id", (const char *)c[0].p,
	                      c[0].n, "backend", (const char *)c[1].p, c[1].n, "state",
	                      c[2].i == 0 ? "enabled" : "disabled", "created", (json_int_t)c[3].i,
	                      "current_version", (json_int_t)c[4].i, "versions");
	if (o == NULL || json_array_append_new(arr, o) != 0)
		return sl_err_set(SL_E_NOMEM, "key list");
	return SL_OK;
}

static SL_RESULT list_version(void *ctx, const kmsd_sqlv *c, size_t n)
{
	json_t *arr = ctx;
	if (n != 4 || c[0].t != KMSD_SQLV_TEXT || c[1].t != KMSD_SQLV_INT ||
	    c[2].t != KMSD_SQLV_INT || c[3].t != KMSD_SQLV_INT)
		return sl_err_set(SL_E_INTEGRITY, "state store: kek_versions row");
	for (size_t i = json_array_size(arr); i-- > 0;) {
		json_t *k = json_array_get(arr, i);
		const char *id = json_string_value(json_object_get(k, "id"));
		if (id == NULL || strlen(id) != c[0].n || memcmp(id, c[0].p, c[0].n) != 0)
			continue;
		json_array_append_new(json_object_get(k, "versions"),
		                      json_pack("{s:I, s:I, s:b}", "version", (json_int_t)c[1].i,
		                                "created", (json_int_t)c[2].i, "retired",
		                                c[3].i != 0));
		break;
	}
	return SL_OK;
}

static SL_RESULT list_refs(void *ctx, const kmsd_sqlv *c, size_t n)
{
	json_t *arr = ctx;
	if (n != 2 || c[0].t != KMSD_SQLV_TEXT || c[1].t != KMSD_SQLV_INT)
		return sl_err_set(SL_E_INTEGRITY, "state store: key_refs row");
	for (size_t i = json_array_size(arr); i-- > 0;) {
		json_t *k = json_array_get(arr, i);
		const char *id = json_string_value(json_object_get(k, "id"));
		if (id != NULL && strlen(id) == c[0].n && memcmp(id, c[0].p, c[0].n) == 0) {
			json_object_set_new(k, "references", json_integer(c[1].i));
			break;
		}
	}
	return SL_OK;
}

sl_err kmsd_store_key_list(kmsd_store *s, const char *id, json_t **out)
{
	static const char k_all[] = "SELECT id, backend, state, created, current FROM keys "
	                            "ORDER BY id";
	static const char k_one[] = "SELECT id, backend, state, created, current FROM keys "
	                            "WHERE id = ?";
	static const char v_all[] = "SELECT key_id, version, created, retired FROM kek_versions "
	                            "ORDER BY key_id, version";
	static const char v_one[] = "SELECT key_id, version, created, retired FROM kek_versions "
	                            "WHERE key_id = ? ORDER BY version";
	static const char r_all[] = "SELECT key_id, count(*) FROM key_refs GROUP BY key_id";
	static const char r_one[] = "SELECT key_id, count(*) FROM key_refs WHERE key_id = ? "
	                            "GROUP BY key_id";
	kmsd_sqlv a[] = {V_TEXT(id ? id : "")};
	size_t na = id ? 1 : 0;
	json_t *arr = json_array();
	sl_err rc = SL_E_NOMEM;
	SL_ENSURE(arr != NULL, SL_E_NOMEM, "key list");
	SL_GUARD(exec1(s, id ? k_one : k_all, a, na, list_key, arr, NULL));
	SL_GUARD(exec1(s, id ? v_one : v_all, a, na, list_version, arr, NULL));
	SL_GUARD(exec1(s, id ? r_one : r_all, a, na, list_refs, arr, NULL));
	for (size_t i = 0; i < json_array_size(arr); i++)
		if (json_object_get(json_array_get(arr, i), "references") == NULL)
			json_object_set_new(json_array_get(arr, i), "references", json_integer(0));
	*out = arr;
	arr = NULL;
	rc = SL_OK;
out:
	json_decref(arr);
	return rc;
}

sl_err kmsd_store_ref_note(kmsd_store *s, const char *id, unsigned version, const char *dataset_id,
                           int64_t now)
{
	static const char sql[] = "INSERT INTO key_refs (key_id, version, dataset_id, noted) "
	                          "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING";
	kmsd_sqlv a[] = {V_TEXT(id), V_INT(version), V_TEXT(dataset_id), V_INT(now)};
	return write1(s, sql, a, NARGS(a), NULL);
}

/* ---- challenges ---------------------------------------------------------- */

sl_err kmsd_store_challenge_put(kmsd_store *s, const uint8_t nonce[static 32], int64_t expires)
{
	static const char sql[] = "INSERT INTO challenges (nonce, expires, used) VALUES (?, ?, 0)";
	kmsd_sqlv a[] = {V_BLOB(nonce, 32), V_INT(expires)};
	return exec1(s, sql, a, NARGS(a), NULL, NULL, NULL);
}

struct use {
	int64_t expires;
	bool took, seen;
};

/* the conditional UPDATE's row: this use took it */
static SL_RESULT took_row(void *ctx, const kmsd_sqlv *c, size_t n)
{
	struct use *u = ctx;
	if (n != 1 || c[0].t != KMSD_SQLV_INT)
		return sl_err_set(SL_E_INTEGRITY, "state store: challenges row");
	u->expires = c[0].i;
	u->took = u->seen = true;
	return SL_OK;
}

/* the row that says whether it exists (and, from a driver's one-statement
 * use, what the use took: expires or NULL first) */
static SL_RESULT seen_row(void *ctx, const kmsd_sqlv *c, size_t n)
{
	struct use *u = ctx;
	if (n < 1 || n > 2 || c[n - 1].t != KMSD_SQLV_INT ||
	    (n == 2 && c[0].t != KMSD_SQLV_INT && c[0].t != KMSD_SQLV_NULL))
		return sl_err_set(SL_E_INTEGRITY, "state store: challenges row");
	if (n == 2 && c[0].t == KMSD_SQLV_INT) {
		u->expires = c[0].i;
		u->took = true;
	}
	u->seen = u->seen || c[n - 1].i > 0;
	return SL_OK;
}

/* A row read ahead for a caller that can ask again: one that does not
 * parse marks it unread (the caller's own lookup then reports it) instead
 * of failing the statements around it. */
struct ahead {
	kmsd_sql_row_fn fn;
	void *ctx;
	bool bad;
};

static SL_RESULT ahead_row(void *ctx, const kmsd_sqlv *c, size_t n)
{
	struct ahead *a = ctx;
	if (a->fn(a->ctx, c, n) != SL_OK) {
		a->bad = true;
		sl_err_clear();
	}
	return SL_OK;
}

sl_err kmsd_store_challenge_read(kmsd_store *s, const uint8_t nonce[static 32], int64_t now,
                                 enum kmsd_challenge_result *res, kmsd_release_read *rd)
{
	/* one conditional UPDATE: of two replicas presenting the same nonce at
	 * once, exactly one sees used = 0 (the driver's one statement holds the
	 * same UPDATE) */
	static const char use_sql[] = "UPDATE challenges SET used = 1 WHERE nonce = ? AND used = 0 "
	                              "RETURNING expires";
	static const char seen_sql[] = "SELECT count(*) FROM challenges WHERE nonce = ?";
	kmsd_sqlv a[] = {V_BLOB(nonce, 32), V_BLOB(nonce, 32)};
	kmsd_sqlv ak[KMSD_READ_AKS], key[KMSD_READ_KEYS];
	struct got ag[KMSD_READ_AKS];
	struct got kg[KMSD_READ_KEYS];
	struct ahead ah[KMSD_READ_AKS + KMSD_READ_KEYS];
	kmsd_sql_stmt st[KMSD_BATCH_MAX];
	struct use u = {0};
	kmsd_release_read none;
	size_t n = 0, nak, nkeys;
	sl_err rc;
	if (rd == NULL) {
		none.nak = none.nkeys = 0;
		rd = &none;
	}
	nak = rd->nak;
	nkeys = rd->nkeys;
	if (nak > KMSD_READ_AKS || nkeys > KMSD_READ_KEYS)
		return sl_err_set(SL_E_INTERNAL, "state store: %zu AKs, %zu keys", nak, nkeys);
	if (s->drv->challenge_use_sql != NULL) {
		st[n++] = (kmsd_sql_stmt){s->drv->challenge_use_sql, a, 2, seen_row, &u, NULL};
	} else {
		st[n++] = (kmsd_sql_stmt){use_sql, a, 1, took_row, &u, NULL};
		st[n++] = (kmsd_sql_stmt){seen_sql, a, 1, seen_row, &u, NULL};
	}
	for (size_t i = 0; i < nak; i++) {
		ak[i] = V_BLOB(rd->ak[i].name, rd->ak[i].len);
		ag[i] = (struct got){&rd->ak[i].row, false};
		ah[i] = (struct ahead){ak_row, &ag[i], false};
		st[n++] = (kmsd_sql_stmt){SQL_AK_GET, &ak[i], 1, ahead_row, &ah[i], NULL};
	}
	for (size_t i = 0; i < nkeys; i++) {
		key[i] = V_TEXT(rd->key[i].id);
		kg[i] = (struct got){&rd->key[i].row, false};
		ah[nak + i] = (struct ahead){key_row, &kg[i], false};
		st[n++] = (kmsd_sql_stmt){SQL_KEY_GET, &key[i], 1, ahead_row, &ah[nak + i], NULL};
	}
	rc = run(s, st, n, false);
	if (rc != SL_OK)
		return rc;
	*res = u.took   ? (u.expires > now ? KMSD_CH_OK : KMSD_CH_EXPIRED)
	       : u.seen ? KMSD_CH_USED
	                : KMSD_CH_UNKNOWN;
	for (size_t i = 0; i < nak; i++) {
		rd->ak[i].found = ag[i].found;
		rd->ak[i].read = !ah[i].bad;
	}
	for (size_t i = 0; i < nkeys; i++) {
		rd->key[i].found = kg[i].found;
		rd->key[i].read = !ah[nak + i].bad;
	}
	return SL_OK;
}

sl_err kmsd_store_challenge_unuse(kmsd_store *s, const uint8_t nonce[static 32])
{
	static const char sql[] = "UPDATE challenges SET used = 0 WHERE nonce = ? AND used = 1";
	kmsd_sqlv a[] = {V_BLOB(nonce, 32)};
	return exec1(s, sql, a, 1, NULL, NULL, NULL);
}

/* Deletes the expired rows (del, one time argument), then counts the rest. */
static SL_RESULT purge_count(kmsd_store *s, const char *del, const char *cnt, int64_t t,
                             size_t *live)
{
	kmsd_sqlv a[] = {V_INT(t)};
	sl_err rc = exec1(s, del, a, 1, NULL, NULL, NULL);
	if (rc != SL_OK)
		return rc;
	return count1(s, cnt, NULL, 0, live);
}

sl_err kmsd_store_challenge_purge(kmsd_store *s, int64_t before, size_t *live)
{
	return purge_count(s, "DELETE FROM challenges WHERE expires < ?",
	                   "SELECT count(*) FROM challenges", before, live);
}

/* ---- pending enrollments -------------------------------------------------- */

sl_err kmsd_store_pending_put(kmsd_store *s, const uint8_t session[static 16],
                              const kmsd_pending_row *row)
{
	static const char sql[] = "INSERT INTO pending (session, ak_name, ek_sha256, cred_sha256, "
	                          "expires, mac) VALUES (?, ?, ?, ?, ?, ?)";
	kmsd_sqlv a[] = {V_BLOB(session, 16),        V_BLOB(row->ak_name, row->ak_name_len),
	                 V_BLOB(row->ek_sha256, 32), V_BLOB(row->cred_sha256, 32),
	                 V_INT(row->expires),        V_BLOB(row->mac, 32)};
	return exec1(s, sql, a, NARGS(a), NULL, NULL, NULL);
}

static SL_RESULT take_row(void *ctx, const kmsd_sqlv *c, size_t n)
{
	sl_err rc;
	struct got *t = ctx;
	kmsd_pending_row *row = t->row;
	if (n != 5 || c[0].t != KMSD_SQLV_BLOB || c[0].n == 0 || c[0].n > KMSD_AK_NAME_MAX ||
	    c[3].t != KMSD_SQLV_INT)
		return sl_err_set(SL_E_INTEGRITY, "state store: pending row");
	/* a MAC of another length is kept as all zero: it never verifies */
	memset(row->mac, 0, 32);
	if (c[4].t == KMSD_SQLV_BLOB && c[4].n == 32)
		memcpy(row->mac, c[4].p, 32);
	memcpy(row->ak_name, c[0].p, c[0].n);
	row->ak_name_len = c[0].n;
	if ((rc = copy32(&c[1], row->ek_sha256, "pending.ek_sha256")) != SL_OK)
		return rc;
	if ((rc = copy32(&c[2], row->cred_sha256, "pending.cred_sha256")) != SL_OK)
		return rc;
	row->expires = c[3].i;
	t->found = true;
	return SL_OK;
}

sl_err kmsd_store_pending_take(kmsd_store *s, const uint8_t session[static 16],
                               kmsd_pending_row *row, bool *found)
{
	static const char sql[] = "DELETE FROM pending WHERE session = ? "
	                          "RETURNING ak_name, ek_sha256, cred_sha256, expires, mac";
	kmsd_sqlv a[] = {V_BLOB(session, 16)};
	struct got t = {row, false};
	sl_err rc = exec1(s, sql, a, 1, take_row, &t, NULL);
	*found = t.found;
	return rc;
}

sl_err kmsd_store_pending_purge(kmsd_store *s, int64_t now, size_t *live)
{
	return purge_count(s, "DELETE FROM pending WHERE expires <= ?",
	                   "SELECT count(*) FROM pending", now, live);
}

sl_err kmsd_store_count(kmsd_store *s, enum kmsd_store_table t, size_t *n)
{
	static const char *const sql[] = {
	    [KMSD_T_AKS] = "SELECT count(*) FROM aks",
	    [KMSD_T_KEYS] = "SELECT count(*) FROM keys",
	    [KMSD_T_CHALLENGES] = "SELECT count(*) FROM challenges",
	    [KMSD_T_PENDING] = "SELECT count(*) FROM pending",
	};
	return count1(s, sql[t], NULL, 0, n);
}

struct key_use {
	kmsd_key_row *row;
	bool *version_ok;
	uint8_t *wrapped;
	size_t *wlen;
	bool found;
};

static SL_RESULT key_use_row(void *ctx, const kmsd_sqlv *c, size_t n)
{
	struct key_use *u = ctx;
	struct got g = {u->row, false};
	sl_err rc;
	if (n != 6 || (c[5].t != KMSD_SQLV_NULL &&
	               (c[5].t != KMSD_SQLV_BLOB || c[5].n > KMSD_KEK_WRAPPED_MAX)))
		return sl_err_set(SL_E_INTEGRITY, "state store: keys row");
	if ((rc = key_row(&g, c, 4)) != SL_OK)
		return rc;
	*u->version_ok = c[4].t == KMSD_SQLV_INT && c[4].i == 0;
	*u->wlen = c[5].t == KMSD_SQLV_BLOB ? c[5].n : 0;
	if (*u->wlen > 0)
		memcpy(u->wrapped, c[5].p, c[5].n);
	u->found = true;
	return SL_OK;
}

sl_err kmsd_store_key_use(kmsd_store *s, const char *id, unsigned version, kmsd_key_row *row,
                          bool *version_ok, uint8_t wrapped[static KMSD_KEK_WRAPPED_MAX],
                          size_t *wlen, bool *found)
{
	/* version 0: the current one (what a new wrap uses) */
	static const char sql[] = "SELECT k.backend, k.state, k.created, k.current, v.retired, "
	                          "v.wrapped FROM keys k LEFT JOIN kek_versions v "
	                          "ON v.key_id = k.id AND v.version = COALESCE(NULLIF(?, 0), "
	                          "k.current) WHERE k.id = ?";
	kmsd_sqlv a[] = {V_INT(version), V_TEXT(id)};
	struct key_use u = {row, version_ok, wrapped, wlen, false};
	*version_ok = false;
	*wlen = 0;
	sl_err rc = exec1(s, sql, a, NARGS(a), key_use_row, &u, NULL);
	*found = u.found;
	return rc;
}

sl_err kmsd_store_ref_move(kmsd_store *s, const char *id, unsigned version, const char *dataset_id,
                           int64_t now)
{
	static const char del[] = "DELETE FROM key_refs WHERE key_id = ? AND dataset_id = ? "
	                          "AND version <> ?";
	static const char ins[] = "INSERT INTO key_refs (key_id, version, dataset_id, noted) "
	                          "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING";
	kmsd_sqlv da[] = {V_TEXT(id), V_TEXT(dataset_id), V_INT(version)};
	kmsd_sqlv ia[] = {V_TEXT(id), V_INT(version), V_TEXT(dataset_id), V_INT(now)};
	void *c = NULL;
	sl_err rc = txn_begin(s, &c);
	if (rc != SL_OK)
		return rc;
	SL_GUARD(s->drv->exec(c, del, da, NARGS(da), NULL, NULL, NULL));
	SL_GUARD(s->drv->exec(c, ins, ia, NARGS(ia), NULL, NULL, NULL));
out:
	return txn_end(s, c, rc);
}

sl_err kmsd_store_ref_count_below(kmsd_store *s, const char *id, unsigned below, size_t *n)
{
	static const char sql[] = "SELECT count(*) FROM key_refs WHERE key_id = ? AND version < ?";
	kmsd_sqlv a[] = {V_TEXT(id), V_INT(below)};
	return count1(s, sql, a, NARGS(a), n);
}

sl_err kmsd_store_etoken_put(kmsd_store *s, const uint8_t hash[static 32], int64_t expires,
                             const uint8_t mac[static 32])
{
	static const char sql[] =
	    "INSERT INTO enroll_tokens (hash, expires, used, mac) VALUES (?, ?, 0, ?)";
	kmsd_sqlv a[] = {V_BLOB(hash, 32), V_INT(expires), V_BLOB(mac, 32)};
	return write1(s, sql, a, NARGS(a), NULL);
}

struct etoken_use {
	int64_t *expires;
	uint8_t *mac;
	bool found;
};

static SL_RESULT etoken_row(void *ctx, const kmsd_sqlv *c, size_t n)
{
	struct etoken_use *u = ctx;
	if (n != 2 || c[0].t != KMSD_SQLV_INT)
		return sl_err_set(SL_E_INTEGRITY, "state store: enroll_tokens row");
	*u->expires = c[0].i;
	memset(u->mac, 0, 32); /* a MAC of another length never verifies */
	if (c[1].t == KMSD_SQLV_BLOB && c[1].n == 32)
		memcpy(u->mac, c[1].p, 32);
	u->found = true;
	return SL_OK;
}

sl_err kmsd_store_etoken_use(kmsd_store *s, const uint8_t hash[static 32], int64_t now, bool *found,
                             int64_t *expires, uint8_t mac[static 32])
{
	/* one conditional UPDATE: of two replicas presenting it at once, one wins */
	static const char sql[] = "UPDATE enroll_tokens SET used = 1 "
	                          "WHERE hash = ? AND used = 0 AND expires > ? "
	                          "RETURNING expires, mac";
	kmsd_sqlv a[] = {V_BLOB(hash, 32), V_INT(now)};
	struct etoken_use u = {expires, mac, false};
	const kmsd_sql_stmt st = {sql, a, NARGS(a), etoken_row, &u, NULL};
	sl_err rc = run(s, &st, 1, true);
	*found = rc == SL_OK && u.found;
	return rc;
}

struct run_get {
	uint8_t subject[32];
	bool found;
};

static SL_RESULT run_row(void *ctx, const kmsd_sqlv *c, size_t n)
{
	struct run_get *g = ctx;
	if (n != 1 || c[0].t != KMSD_SQLV_BLOB || c[0].n != 32)
		return sl_err_set(SL_E_INTEGRITY, "state store: output_runs row");
	memcpy(g->subject, c[0].p, 32);
	g->found = true;
	return SL_OK;
}

sl_err kmsd_store_run_bind(kmsd_store *s, const char *run_id, const uint8_t subject[static 32],
                           int64_t now, bool *same)
{
	/* the first binding wins (a unique key, on every replica); then read it */
	static const char ins[] = "INSERT INTO output_runs (run_id, subject, created) "
	                          "VALUES (?, ?, ?) ON CONFLICT (run_id) DO NOTHING";
	static const char sel[] = "SELECT subject FROM output_runs WHERE run_id = ?";
	kmsd_sqlv a[] = {V_TEXT(run_id), V_BLOB(subject, 32), V_INT(now)};
	kmsd_sqlv b[] = {V_TEXT(run_id)};
	struct run_get g = {{0}, false};
	*same = false;
	sl_err rc = write1(s, ins, a, NARGS(a), NULL);
	if (rc == SL_OK)
		rc = exec1(s, sel, b, NARGS(b), run_row, &g, NULL);
	if (rc == SL_OK && !g.found)
		rc = sl_err_set(SL_E_SYSTEM, "state store: output run '%s' not kept", run_id);
	*same = rc == SL_OK && sl_ct_eq(g.subject, subject, 32);
	return rc;
}
