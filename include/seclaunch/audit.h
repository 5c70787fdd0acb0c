/* The tamper-evident audit log (docs/audit.md is the full specification).
 *
 * One JSON object per line. Every record carries `prev`, the SHA-256 (hex) of
 * the exact bytes of the line before it (without its newline), so editing,
 * deleting, inserting or reordering lines breaks the chain. A writer that holds
 * the checkpoint key (Ed25519, from a 0600 file) appends a signed "checkpoint"
 * record every N records and when it closes, which lets a verifier with the
 * public key detect forged chains and, with --require-final-checkpoint or an
 * anchor, truncation.
 *
 * Writers: concurrent appends from the threads of a process are committed in
 * groups (one thread writes the waiting records with one write() on an
 * O_APPEND descriptor and one fsync; every append returns only once its own
 * record is durable), and processes serialise on flock("<path>.lock"); under
 * the lock the writer re-reads the last line of the log unless this handle
 * wrote last and the file is unchanged since (fstat: inode, size, times), so
 * any number of processes appending to the same file keep one chain. When the
 * file passes the rotation size it is
 * renamed to "<path>.<first seq, 20 digits>" and the next record, in a new
 * file, chains to the old file's last line.
 */
#ifndef SECLAUNCH_AUDIT_H
#define SECLAUNCH_AUDIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "seclaunch/error.h"

/* A line (record) longer than this is refused by writers and is an error
 * naming the line for readers. */
#define SL_AUDIT_MAX_LINE (1024u * 1024u)
/* Default size at which the live file is rotated (sl_audit_set_rotation). */
#define SL_AUDIT_ROTATE_DEFAULT (64ull * 1024u * 1024u)
/* Default number of records between signed checkpoints. */
#define SL_AUDIT_CHECKPOINT_EVERY_DEFAULT 100u

/* Event names used by seclaunch and seclaunchd. Other strings are allowed
 * (lower-case, dot-separated); docs/audit.md maps each to an OCSF class. */
#define SL_AUDIT_EV_CHECKPOINT "checkpoint"       /* written by this module */
#define SL_AUDIT_EV_RECOVERED "audit.recovered"   /* written by this module: torn line(s) skipped */
#define SL_AUDIT_EV_KMS_START "kms.start"         /* seclaunchd started (details: listen, policy) */
#define SL_AUDIT_EV_KMS_STOP "kms.stop"           /* seclaunchd stopping */
#define SL_AUDIT_EV_CHALLENGE "kms.challenge"     /* nonce issued */
#define SL_AUDIT_EV_ENROLL "kms.enroll"           /* enrollment started / activated */
#define SL_AUDIT_EV_KEY_CREATE "kms.key.create"   /* admin created a KEK */
#define SL_AUDIT_EV_KEY_WRAP "kms.key.wrap"       /* admin wrapped a DEK */
#define SL_AUDIT_EV_RELEASE "kms.release"         /* key release decision (allow / deny) */
#define SL_AUDIT_EV_RUN_START "run.start"         /* seclaunch run began */
#define SL_AUDIT_EV_RUN_PREFLIGHT "run.preflight" /* local policy decision */
#define SL_AUDIT_EV_RUN_RELEASE "run.release"     /* keys received from the KMS */
#define SL_AUDIT_EV_RUN_STAGE "run.stage"         /* data staged (host / gpu) */
#define SL_AUDIT_EV_RUN_JOB_START "run.job.start" /* job process started */
#define SL_AUDIT_EV_RUN_JOB_EXIT "run.job.exit"   /* job exited (details: status / signal) */
#define SL_AUDIT_EV_RUN_WIPE "run.wipe"           /* keys and staged plaintext wiped */
#define SL_AUDIT_EV_RUN_ERROR "run.error"         /* run failed before or around the job */
#define SL_AUDIT_EV_RENEW "kms.renew"             /* lease renewal decision (allow / deny) */
#define SL_AUDIT_EV_AK_REVOKE "kms.ak.revoke"     /* admin revoked an enrolled AK */
#define SL_AUDIT_EV_EK_READMIT "kms.ek.readmit"   /* admin re-admitted a revoked machine */
#define SL_AUDIT_EV_RUN_MEASURE "run.measure"     /* workload identity extended */
#define SL_AUDIT_EV_RUN_LEASE_RENEWED "run.lease_renewed" /* a renewal succeeded */
#define SL_AUDIT_EV_RUN_LEASE_ENDED "run.lease_ended"     /* lease denied or expired: job stopped */
#define SL_AUDIT_EV_RUN_DATA_REFUSED "run.data.refused"   /* data service: a peer was refused */
#define SL_AUDIT_EV_OUTPUT "kms.output"                   /* output key decision (allow / deny) */
#define SL_AUDIT_EV_RUN_OUTPUT_KEY "run.output.key"       /* output keys received (or refused) */
#define SL_AUDIT_EV_RUN_OUTPUT "run.output"               /* an output sealed (or failed to be) */
#define SL_AUDIT_EV_RUN_RESUME "run.resume"               /* a sealed checkpoint staged to resume */
#define SL_AUDIT_EV_RUN_PREEMPTED "run.preempted"         /* preemption notice acted on */

/* Values for sl_audit_record.decision. */
#define SL_AUDIT_ALLOW "allow"
#define SL_AUDIT_DENY "deny"
#define SL_AUDIT_ERROR "error"

/* One record to append. Every pointer is borrowed for the duration of the
 * call; NULL writes JSON null. The module fills seq, time, host, actor and
 * prev. Nothing secret may go into a record. */
typedef struct sl_audit_record {
	const char *event;         /* required, e.g. SL_AUDIT_EV_RELEASE */
	const char *job_id;        /* the job (seclaunch run's id), or NULL */
	const char *dataset_id;    /* or NULL */
	const char *key_id;        /* or NULL */
	const char *policy_digest; /* SHA-256 hex of the policy in force, or NULL */
	const char *decision;      /* SL_AUDIT_ALLOW / SL_AUDIT_DENY / SL_AUDIT_ERROR, or NULL */
	json_t *reasons;           /* JSON array (of strings or objects), or NULL */
	const char *claims_digest; /* SHA-256 hex of the claims the decision used, or NULL */
	json_t *details;           /* JSON object with event-specific fields, or NULL */
} sl_audit_record;

typedef struct sl_audit sl_audit;

/* Opens (creating, mode 0600) the log at path for appending.
 * checkpoint_key_path: the Ed25519 secret key file written by
 *   sl_audit_keygen (must be 0600), or NULL for a log without checkpoints.
 * actor: who writes ("seclaunchd", "seclaunch run"); NULL: "uid:<euid>".
 * checkpoint_every: records of this handle between checkpoints (0: default).
 * Nothing is written until the first append. */
SL_MUST_USE sl_err sl_audit_open(const char *path, const char *checkpoint_key_path,
                                 const char *actor, unsigned checkpoint_every, sl_audit **out);
/* Rotation threshold in bytes (0: never rotate). Default SL_AUDIT_ROTATE_DEFAULT. */
void sl_audit_set_rotation(sl_audit *a, uint64_t max_bytes);
/* Appends one record (and a checkpoint when one is due). Thread-safe and
 * multi-process safe; returns only after the record is fsync'd (concurrent
 * callers share one write and fsync). */
SL_MUST_USE sl_err sl_audit_append(sl_audit *a, const sl_audit_record *r);
/* The same, but returns once the record is written (chained, in order)
 * without waiting for its fsync: the next durable append, checkpoint,
 * sl_audit_sync or sl_audit_close makes it durable. For records of steps
 * whose effects stay inside the process until a later durable record (a
 * crash of the process loses nothing; a power loss before the sync can
 * lose the deferred tail, never leave a gap, since all lines go out in
 * order through one descriptor). */
SL_MUST_USE sl_err sl_audit_append_deferred(sl_audit *a, const sl_audit_record *r);
/* fsyncs what deferred appends of this handle wrote (no-op when nothing is
 * pending). NULL-safe. */
SL_MUST_USE sl_err sl_audit_sync(sl_audit *a);
/* Shorthand for append with only event, job_id, decision and details set. */
SL_MUST_USE sl_err sl_audit_event(sl_audit *a, const char *event, const char *job_id,
                                  const char *decision, json_t *details);
/* Appends a signed checkpoint now (no-op without a key). */
SL_MUST_USE sl_err sl_audit_checkpoint(sl_audit *a);
/* Whether records were appended since the last checkpoint (false without a
 * key): a long-running writer checkpoints them on a timer, so a live log
 * verifies without waiting for the next hundred records or the stop. */
bool sl_audit_unsealed(sl_audit *a);
/* Writes the closing checkpoint (when a key is set) and frees the handle.
 * NULL-safe. The handle is freed even when the checkpoint fails. */
SL_MUST_USE sl_err sl_audit_close(sl_audit *a);

/* Writes a new checkpoint key pair: the secret key (32-byte Ed25519 seed,
 * mode 0600) and the public key (one line of 64 hex digits, mode 0644).
 * Refuses to overwrite existing files. */
SL_MUST_USE sl_err sl_audit_keygen(const char *secret_key_path, const char *public_key_path);

/* Lists the files of a log in chain order: the rotated "<path>.<seq>" files
 * (ascending) followed by path itself. *out is malloc'd (free each and the
 * array with sl_audit_files_free). */
SL_MUST_USE sl_err sl_audit_files(const char *path, char ***out, size_t *n);
void sl_audit_files_free(char **files, size_t n);

/* Verification. */
typedef void (*sl_audit_warn_fn)(void *ctx, const char *file, size_t line, const char *msg);

typedef struct sl_audit_verify_opts {
	const char *pubkey_path;       /* NULL: chain only (checkpoint signatures NOT checked) */
	const char *anchor_path;       /* NULL: none; else the log must contain this checkpoint */
	bool require_final_checkpoint; /* the last record must be a closing checkpoint */
	bool allow_partial; /* the first file may start after seq 1 (earlier files gone) */
	/* With a public key, every record must be covered by a valid checkpoint
	 * (the log ends with one): records after the last valid checkpoint, or a
	 * log with none at all, are SL_E_INTEGRITY, since anyone can write an
	 * unsigned chain. A live log (a writer still running, or one killed
	 * before its closing checkpoint) has such a tail: up to this many records
	 * are then accepted, with a warning (0: none, the default). */
	uint64_t max_unsigned_tail;
	sl_audit_warn_fn warn; /* torn lines, unsigned tail, ...; NULL: ignored */
	void *warn_ctx;
} sl_audit_verify_opts;

typedef struct sl_audit_report {
	uint64_t records;         /* lines verified as records (checkpoints included) */
	uint64_t checkpoints;     /* checkpoints whose signature verified (0 without a key) */
	uint64_t first_seq;       /* seq of the first record, 0 when the log is empty */
	uint64_t last_seq;        /* seq of the last record */
	uint64_t last_checkpoint; /* seq of the last checkpoint record (0: none) */
	uint64_t unsigned_tail;   /* records after the last checkpoint */
	uint64_t torn_lines;      /* torn lines (recovered mid-log or at the end) */
	bool torn_tail;           /* the last line was torn (crash mid-write) */
	bool final_checkpoint;    /* the log ends with a closing checkpoint */
	bool signatures_checked;  /* a public key was given */
	char head[65];            /* SHA-256 hex of the last record's line */
} sl_audit_report;

/* --allow-unsigned-tail[=N]: arg NULL gives SL_AUDIT_CHECKPOINT_EVERY_DEFAULT
 * (one writer's interval at the default); else N in 1..10^9. SL_E_USAGE
 * naming the flag otherwise. */
SL_MUST_USE sl_err sl_audit_tail_limit_parse(const char *arg, uint64_t *out);

/* Verifies the files in order as one chain. On failure returns SL_E_INTEGRITY
 * (or SL_E_TRUNCATED, SL_E_WRONG_KEY, SL_E_FORMAT, SL_E_TOO_LARGE, SL_E_IO)
 * with a detail naming the first bad line: "FILE:LINE (seq N): CHECK: what".
 * report (optional) is filled as far as verification got. */
SL_MUST_USE sl_err sl_audit_verify(const char *const *paths, size_t n,
                                   const sl_audit_verify_opts *opts, sl_audit_report *report);

/* Export. */
typedef enum sl_audit_format {
	SL_AUDIT_FMT_JSONL,
	SL_AUDIT_FMT_CEF,
	SL_AUDIT_FMT_OCSF,
	SL_AUDIT_FMT_CSV,
} sl_audit_format;

SL_MUST_USE sl_err sl_audit_format_parse(const char *name, sl_audit_format *out);

typedef struct sl_audit_export_opts {
	sl_audit_format format;
	bool has_since, has_until;
	int64_t since_ms, until_ms; /* ms since the epoch: since <= time < until */
	const char *event;          /* only records with this event (NULL: all) */
	bool verify;                /* verify the chain first; refuse a broken chain */
	sl_audit_verify_opts verify_opts;
} sl_audit_export_opts;

/* Writes the selected records to out. With opts->verify the whole chain is
 * verified first (report filled) and nothing is written if it is broken. */
SL_MUST_USE sl_err sl_audit_export(const char *const *paths, size_t n,
                                   const sl_audit_export_opts *opts, FILE *out,
                                   sl_audit_report *report);

/* Parses one line (untrusted bytes, no newline) as a record and checks every
 * field's type and form. *out (optional) receives the parsed object (caller
 * json_decref's it). Used by verify/export; exposed for the fuzz target. */
SL_MUST_USE sl_err sl_audit_parse_line(const uint8_t *line, size_t len, json_t **out);

/* RFC 3339 UTC with milliseconds ("2026-11-29T18:55:04.123Z") <-> ms since epoch. */
SL_MUST_USE sl_err sl_audit_time_parse(const char *s, int64_t *ms, const char *field);

#endif
