/* seclaunchd's state store (private to kms/): everything the service must
 * remember across restarts and share between replicas, behind one
 * interface with two implementations:
 *   - SQLite (store_sqlite.c): the embedded default, one file in WAL mode;
 *   - PostgreSQL (store_pg.c): several replicas sharing one database.
 * Transactions and unique constraints do the concurrency work: a key id, an
 * AK name, a KEK version, a challenge and an enrollment session are primary
 * keys, and a challenge is consumed by one conditional UPDATE, so two
 * replicas racing on the same row see exactly one winner.
 *
 * Failures of the store itself (a database that is down, a disk that is
 * full) are SL_E_SYSTEM with a detail that starts "state store:"; the
 * handlers answer 503 for them, never a grant and never a refusal that
 * would be recorded as a decision. docs/seclaunchd.md, "State store". */
#ifndef SECLAUNCH_KMS_STORE_H
#define SECLAUNCH_KMS_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "seclaunch/error.h"
#include "seclaunch/kms.h"

/* The schema this build reads and writes; a store of another version is
 * refused at start (naming both), except version 1, which is upgraded in
 * place (pending enrollments and enrollment tokens of version 1 carry no
 * row MAC and are dropped). */
#define KMSD_STORE_SCHEMA 2
#define KMSD_AK_NAME_MAX 66
#define KMSD_KEK_WRAPPED_MAX 128
#define KMSD_KEK_VERSION_MAX 255 /* the first byte of a wrapped DEK names it */

typedef struct kmsd_store kmsd_store;

/* spec: "postgresql://…" / "postgres://…" (libpq URI), "sqlite:PATH", or a
 * plain PATH (SQLite). pool: connections kept open (1..KMSD_STORE_POOL_MAX;
 * SQLite always 1). Callers beyond them wait in line, first come first
 * served, at most KMSD_STORE_WAIT_MS: then SL_E_SYSTEM "state store: all N
 * connections busy" (a 503, decided nothing). */
SL_MUST_USE sl_err kmsd_store_open(const char *spec, unsigned pool, kmsd_store **out);
void kmsd_store_close(kmsd_store *s);
struct kmsd_config;
#define KMSD_STORE_POOL_MAX 64
#define KMSD_STORE_WAIT_MS 5000
/* The connections of one process: the config's store_pool, or (0) twice
 * the CPUs, at least 2: a statement holds one for one round trip, and more
 * connections than the database's CPUs can run only contend there. */
unsigned kmsd_store_pool(const struct kmsd_config *c);
/* "sqlite" or "postgresql" */
const char *kmsd_store_kind(const kmsd_store *s);
/* Whether the last operation reached the store (for /v1/health). */
bool kmsd_store_healthy(kmsd_store *s);
/* SQLite only: an online, consistent copy into dest (the backup API);
 * SL_E_INPUT for PostgreSQL (use pg_dump). */
SL_MUST_USE sl_err kmsd_store_backup(kmsd_store *s, const char *dest);

/* ---- enrolled AKs ------------------------------------------------------ */

typedef struct kmsd_ak_row {
	uint8_t ek_sha256[32];
	uint8_t mac[32];
	int64_t enrolled;
	bool revoked;
	bool ek_revoked; /* read only: its EK is in ek_revocations */
} kmsd_ak_row;

/* Inserts the AK unless it is there (idempotent); *added says which. */
SL_MUST_USE sl_err kmsd_store_ak_put(kmsd_store *s, const uint8_t *name, size_t len,
                                     const kmsd_ak_row *row, bool *added);
/* *found false when absent. */
SL_MUST_USE sl_err kmsd_store_ak_get(kmsd_store *s, const uint8_t *name, size_t len,
                                     kmsd_ak_row *row, bool *found);
SL_MUST_USE sl_err kmsd_store_ak_revoke(kmsd_store *s, const uint8_t *name, size_t len,
                                        bool *found);
/* Calls fn once per enrolled AK, in name order: (name, len, row). */
typedef sl_err (*kmsd_ak_fn)(void *ctx, const uint8_t *name, size_t len, const kmsd_ak_row *row);
SL_MUST_USE sl_err kmsd_store_ak_list(kmsd_store *s, kmsd_ak_fn fn, void *ctx);
/* Replaces the row's MAC, only where it is still `was` (registry.c's move
 * of schema-1 MACs to the row format). */
SL_MUST_USE sl_err kmsd_store_ak_set_mac(kmsd_store *s, const uint8_t *name, size_t len,
                                         const uint8_t was[static 32],
                                         const uint8_t mac[static 32]);

/* ---- revoked machines: an EK (its SHA-256) no AK may enroll through ------- */

/* Idempotent; ak: the AK whose revocation named the machine. */
SL_MUST_USE sl_err kmsd_store_ek_revoke(kmsd_store *s, const uint8_t ek[static 32],
                                        const uint8_t *ak, size_t ak_len, int64_t when,
                                        bool *added);
/* An admin's re-admission: the row goes (*found: it was there). */
SL_MUST_USE sl_err kmsd_store_ek_readmit(kmsd_store *s, const uint8_t ek[static 32], bool *found);
/* *revoked is true too when the store fails. */
SL_MUST_USE sl_err kmsd_store_ek_revoked(kmsd_store *s, const uint8_t ek[static 32], bool *revoked);
typedef sl_err (*kmsd_ek_fn)(void *ctx, const uint8_t ek[static 32], int64_t revoked,
                             const uint8_t *ak, size_t ak_len);
SL_MUST_USE sl_err kmsd_store_ek_list(kmsd_store *s, kmsd_ek_fn fn, void *ctx);

/* ---- key-check values (one per secret file the store depends on) --------- */

/* Records kcv under name unless a value is there (*written says which) and
 * returns the value the store holds in have. */
SL_MUST_USE sl_err kmsd_store_keycheck(kmsd_store *s, const char *name,
                                       const uint8_t kcv[static 32], uint8_t have[static 32],
                                       bool *written);

/* ---- keys and KEK versions -------------------------------------------- */

enum kmsd_key_state { KMSD_KEY_ENABLED = 0, KMSD_KEY_DISABLED = 1 };

typedef struct kmsd_key_row {
	char backend[16]; /* "local" | "pkcs11" */
	enum kmsd_key_state state;
	int64_t created;
	unsigned current; /* the version new wraps use */
} kmsd_key_row;

/* Creates key id with version 1 (wrapped: the KEK under the master key;
 * NULL for a backend that keeps the key itself). SL_E_EXISTS when taken. */
SL_MUST_USE sl_err kmsd_store_key_create(kmsd_store *s, const char *id, const char *backend,
                                         const uint8_t *wrapped, size_t wlen, int64_t now);
SL_MUST_USE sl_err kmsd_store_key_get(kmsd_store *s, const char *id, kmsd_key_row *row,
                                      bool *found);
/* The key, whether `version` (0: the current one) exists and is not
 * retired, and that version's wrapped KEK (wlen 0 for a backend that keeps
 * it) — one round trip: every wrap and unwrap asks, so a disable,
 * retirement or delete on one replica takes effect on all at once, and a
 * key deleted and made again under the same id is told apart from the old
 * one by its wrapped KEK (a fresh random KEK and IV). */
SL_MUST_USE sl_err kmsd_store_key_use(kmsd_store *s, const char *id, unsigned version,
                                      kmsd_key_row *row, bool *version_ok,
                                      uint8_t wrapped[static KMSD_KEK_WRAPPED_MAX], size_t *wlen,
                                      bool *found);
/* One version's wrapped KEK (wlen 0 for a backend that keeps it). */
SL_MUST_USE sl_err kmsd_store_kek_get(kmsd_store *s, const char *id, unsigned version,
                                      uint8_t wrapped[static KMSD_KEK_WRAPPED_MAX], size_t *wlen,
                                      bool *retired, bool *found);
/* Adds version `version` (which must be current + 1) and makes it current,
 * in one transaction; SL_E_EXISTS when another rotation won the race. */
SL_MUST_USE sl_err kmsd_store_kek_add(kmsd_store *s, const char *id, unsigned version,
                                      const uint8_t *wrapped, size_t wlen, int64_t now);
/* Marks versions below `below` retired (they no longer unwrap). */
SL_MUST_USE sl_err kmsd_store_kek_retire(kmsd_store *s, const char *id, unsigned below, size_t *n);
SL_MUST_USE sl_err kmsd_store_key_set_state(kmsd_store *s, const char *id, enum kmsd_key_state st,
                                            bool *found);
/* Deletes the key, its versions and references in one transaction that
 * holds the key's row from the count to the delete; with references and
 * not force, deletes nothing. *refs: the references counted; *deleted:
 * whether it was deleted (false: unknown key, or refused). */
SL_MUST_USE sl_err kmsd_store_key_delete(kmsd_store *s, const char *id, bool force, size_t *refs,
                                         bool *deleted);
/* [{"id","backend","state","current","versions":[{"version","created","retired"}],
 *   "created"}] for every key (or only `id` when set). */
SL_MUST_USE sl_err kmsd_store_key_list(kmsd_store *s, const char *id, json_t **out);

/* ---- references: which dataset (root) was wrapped under which version ---- */

SL_MUST_USE sl_err kmsd_store_ref_note(kmsd_store *s, const char *id, unsigned version,
                                       const char *dataset_id, int64_t now);
/* The dataset now references only `version` of the key (after a rewrap). */
SL_MUST_USE sl_err kmsd_store_ref_move(kmsd_store *s, const char *id, unsigned version,
                                       const char *dataset_id, int64_t now);
/* References to versions below `below` (what retiring them would break). */
SL_MUST_USE sl_err kmsd_store_ref_count_below(kmsd_store *s, const char *id, unsigned below,
                                              size_t *n);

/* ---- challenges ---------------------------------------------------------- */

enum kmsd_challenge_result {
	KMSD_CH_OK,
	KMSD_CH_UNKNOWN,
	KMSD_CH_USED,
	KMSD_CH_EXPIRED,
};
SL_MUST_USE sl_err kmsd_store_challenge_put(kmsd_store *s, const uint8_t nonce[static 32],
                                            int64_t expires);
/* What a release reads besides its challenge, asked for in the same round
 * trip as the challenge's use (kmsd_store_challenge_read): the rows of the
 * AKs the evidence names (unverified names: the caller takes a row only for
 * the name it verified, and checks its MAC as registry.c does) and of the
 * keys the request names. */
#define KMSD_READ_AKS 4
#define KMSD_READ_KEYS 64
typedef struct kmsd_release_read {
	size_t nak, nkeys; /* asked for */
	struct {
		uint8_t name[KMSD_AK_NAME_MAX];
		size_t len;
		kmsd_ak_row row;
		bool read, found; /* read: answered here (else ask the store again) */
	} ak[KMSD_READ_AKS];
	struct {
		const char *id;
		kmsd_key_row row;
		bool read, found;
	} key[KMSD_READ_KEYS];
} kmsd_release_read;
/* Marks the challenge used (any presentation uses it up, on any replica) and
 * says what it was before, and reads the rows rd asks for, in one round trip;
 * rd may be NULL. A row that does not parse is left unread. */
SL_MUST_USE sl_err kmsd_store_challenge_read(kmsd_store *s, const uint8_t nonce[static 32],
                                             int64_t now, enum kmsd_challenge_result *res,
                                             kmsd_release_read *rd);
/* Gives back a nonce this replica used for a request that ended with no
 * decision (503): the identical request, retried, is then decided. */
SL_MUST_USE sl_err kmsd_store_challenge_unuse(kmsd_store *s, const uint8_t nonce[static 32]);
/* Deletes challenges that expired before `before`; *live: the rest. */
SL_MUST_USE sl_err kmsd_store_challenge_purge(kmsd_store *s, int64_t before, size_t *live);

/* ---- pending enrollments -------------------------------------------------- */

typedef struct kmsd_pending_row {
	uint8_t ak_name[KMSD_AK_NAME_MAX];
	size_t ak_name_len;
	uint8_t ek_sha256[32];
	uint8_t cred_sha256[32]; /* the credential itself is never stored */
	int64_t expires;
	uint8_t mac[32]; /* the row MAC (registry.c); all zero when none was stored */
} kmsd_pending_row;

SL_MUST_USE sl_err kmsd_store_pending_put(kmsd_store *s, const uint8_t session[static 16],
                                          const kmsd_pending_row *row);
/* Removes and returns it (single use, whichever replica asks). */
SL_MUST_USE sl_err kmsd_store_pending_take(kmsd_store *s, const uint8_t session[static 16],
                                           kmsd_pending_row *row, bool *found);
SL_MUST_USE sl_err kmsd_store_pending_purge(kmsd_store *s, int64_t now, size_t *live);

/* ---- enrollment tokens (single use, admin-issued; only the SHA-256 kept) -- */

SL_MUST_USE sl_err kmsd_store_etoken_put(kmsd_store *s, const uint8_t hash[static 32],
                                         int64_t expires, const uint8_t mac[static 32]);
/* *found: it existed, was unused and unexpired, and is now used; then
 * *expires and mac are the row's, for the caller to verify (registry.c). */
SL_MUST_USE sl_err kmsd_store_etoken_use(kmsd_store *s, const uint8_t hash[static 32], int64_t now,
                                         bool *found, int64_t *expires, uint8_t mac[static 32]);

/* ---- output runs: the attested subject a run's output ids belong to -------- */

/* Binds run_id to subject (a digest of who attested: handlers_output.c) on
 * its first use, on any replica; *same: the run is bound to this subject
 * (now or before), false when another subject holds it. */
SL_MUST_USE sl_err kmsd_store_run_bind(kmsd_store *s, const char *run_id,
                                       const uint8_t subject[static 32], int64_t now, bool *same);

/* ---- counts (metrics) ---------------------------------------------------- */

enum kmsd_store_table { KMSD_T_AKS, KMSD_T_KEYS, KMSD_T_CHALLENGES, KMSD_T_PENDING };
SL_MUST_USE sl_err kmsd_store_count(kmsd_store *s, enum kmsd_store_table t, size_t *n);

/* ---- the driver interface (store_sqlite.c, store_pg.c) -------------------- */

enum kmsd_sqlv_type { KMSD_SQLV_NULL, KMSD_SQLV_INT, KMSD_SQLV_BLOB, KMSD_SQLV_TEXT };
typedef struct kmsd_sqlv {
	enum kmsd_sqlv_type t;
	int64_t i;
	const void *p;
	size_t n;
} kmsd_sqlv;

/* Called once per result row; a non-OK return stops the statement. */
typedef sl_err (*kmsd_sql_row_fn)(void *ctx, const kmsd_sqlv *cols, size_t ncols);

/* One statement of a batch: exec's arguments. */
typedef struct kmsd_sql_stmt {
	const char *sql;
	const kmsd_sqlv *args;
	size_t nargs;
	kmsd_sql_row_fn fn;
	void *ctx;
	int64_t *changes;
} kmsd_sql_stmt;
#define KMSD_BATCH_MAX (2 + KMSD_READ_AKS + KMSD_READ_KEYS)

typedef struct kmsd_store_driver {
	const char *name;
	/* DDL run (in one transaction, under the driver's schema lock) at open */
	const char *schema_sql;
	/* in a write transaction: count(*) of the keys row with id ?, locked
	 * against concurrent writers until the transaction ends (FOR UPDATE;
	 * a plain count where the transaction holds the database's write lock) */
	const char *lock_key_sql;
	SL_MUST_USE sl_err (*connect)(const char *spec, void **conn);
	void (*disconnect)(void *conn);
	/* true when the connection is usable (reconnects a broken one) */
	bool (*ready)(void *conn);
	/* sql (static text: drivers keep it prepared, found by its address)
	 * uses ? placeholders; SL_E_EXISTS on a unique violation;
	 * SL_E_KMS_REFUSED on a foreign key violation (the key a row refers to
	 * was deleted meanwhile);
	 * SL_E_SYSTEM "state store: ..." otherwise. changes: rows affected. */
	SL_MUST_USE sl_err (*exec)(void *conn, const char *sql, const kmsd_sqlv *args, size_t nargs,
	                           kmsd_sql_row_fn fn, void *ctx, int64_t *changes);
	/* statements sent together and answered together, in order (one
	 * round trip: PostgreSQL's pipeline), each as exec, the first error
	 * returned; outside a transaction they are one implicit transaction.
	 * At most KMSD_BATCH_MAX. NULL: store.c runs them one by one. */
	SL_MUST_USE sl_err (*batch)(void *conn, const kmsd_sql_stmt *st, size_t n);
	/* one statement that uses a challenge (nonce ?) and says what it was:
	 * one row (expires if this use took it, else NULL; whether it exists).
	 * NULL: store.c's conditional UPDATE and a SELECT after it */
	const char *challenge_use_sql;
	/* statements without parameters (the schema, BEGIN, COMMIT) */
	SL_MUST_USE sl_err (*script)(void *conn, const char *sql);
	/* what begins a write transaction; ROLLBACK (keeps the error that led
	 * there); the schema lock */
	const char *begin_sql;
	void (*rollback)(void *conn);
	SL_MUST_USE sl_err (*schema_lock)(void *conn);
	/* durable: the next commits reach stable storage before they return
	 * (SQLite synchronous=FULL); otherwise a crash of the machine, not of
	 * the process, may lose the last ones (challenges). NULL: always. */
	SL_MUST_USE sl_err (*durable)(void *conn, bool on);
	SL_MUST_USE sl_err (*backup)(void *conn, const char *dest); /* NULL: not supported */
} kmsd_store_driver;

extern const kmsd_store_driver kmsd_store_sqlite;
extern const kmsd_store_driver kmsd_store_pg;

#endif
