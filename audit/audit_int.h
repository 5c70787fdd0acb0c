/* Internals shared by the audit module's files (not a public header). */
#ifndef SECLAUNCH_AUDIT_INT_H
#define SECLAUNCH_AUDIT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "seclaunch/audit.h"
#include "seclaunch/buf.h"
#include "seclaunch/util.h"

#define AUDIT_HEX_LEN (2 * SL_SHA256_LEN)
#define AUDIT_KEYID_BYTES 8
#define AUDIT_KEYID_HEX (2 * AUDIT_KEYID_BYTES)
#define AUDIT_PK_LEN 32
#define AUDIT_SEED_LEN 32
#define AUDIT_SIG_LEN 64
/* Consecutive torn lines one recovery record may account for. */
#define AUDIT_MAX_TORN 16

/* prev of the first record of a log: SHA-256 hex of AUDIT_GENESIS_LABEL. */
#define AUDIT_GENESIS_LABEL "seclaunch audit log v1 genesis"
void audit_genesis_hex(char out[static AUDIT_HEX_LEN + 1]);

/* SHA-256 hex of a line's exact bytes. */
void audit_line_hash(const uint8_t *line, size_t len, char out[static AUDIT_HEX_LEN + 1]);

/* Checks that s is exactly n lower-case hex digits. */
bool audit_is_hex(const char *s, size_t n);

/* The bytes an Ed25519 checkpoint signature covers (docs/audit.md): a
 * domain label then each field length-prefixed. */
SL_MUST_USE sl_err audit_checkpoint_message(json_t *rec, sl_writer *w);
/* The same rules on a record the writer built, plus what the reader's JSON
 * parser would refuse in it (nesting depth, NUL bytes): a record that passes
 * renders to a line sl_audit_parse_line accepts (given its length fits). */
SL_MUST_USE sl_err audit_check_built(json_t *rec);

/* Key id: hex of the first 8 bytes of SHA-256(public key). */
void audit_key_id(const uint8_t pk[static AUDIT_PK_LEN], char out[static AUDIT_KEYID_HEX + 1]);

/* Reads a public key file (64 hex digits, optional trailing newline). */
SL_MUST_USE sl_err audit_read_pubkey(const char *path, uint8_t pk[static AUDIT_PK_LEN]);

/* Verifies a checkpoint record's signature with pk; names the key on mismatch. */
SL_MUST_USE sl_err audit_checkpoint_verify(json_t *rec, const uint8_t pk[static AUDIT_PK_LEN]);

/* Current time, RFC 3339 UTC with milliseconds; buf >= 32. */
void audit_now(char *buf, size_t n);

/* Streaming line reader over a file: each line without its newline, capped
 * at SL_AUDIT_MAX_LINE. The last line of a file may lack its newline
 * (unterminated = true). */
typedef struct audit_lines {
	FILE *f;
	const char *path;
	size_t lineno;
	uint8_t *buf;
	size_t cap;
	size_t len;
	bool unterminated;
	bool eof;
} audit_lines;

SL_MUST_USE sl_err audit_lines_open(audit_lines *l, const char *path);
/* *got is false at end of file. A line over the cap fails with SL_E_TOO_LARGE
 * naming "path:line". */
SL_MUST_USE sl_err audit_lines_next(audit_lines *l, bool *got);
void audit_lines_close(audit_lines *l);

/* The end of a log file as a writer sees it under the lock. */
typedef struct audit_tail {
	bool have;                    /* a parsable record was found */
	uint64_t seq;                 /* its seq (0 when none: the chain starts at genesis) */
	char hash[AUDIT_HEX_LEN + 1]; /* SHA-256 hex of its line (genesis when none) */
	bool need_newline;            /* the file does not end with a newline */
	size_t ntorn;                 /* unparsable lines after it, in file order */
	struct {
		char sha[AUDIT_HEX_LEN + 1];
		size_t bytes;
	} torn[AUDIT_MAX_TORN];
} audit_tail;

/* Reads backwards from the end of fd (path for messages) to the last
 * parsable record. */
SL_MUST_USE sl_err audit_scan_tail(int fd, const char *path, audit_tail *t);
/* seq of the first parsable record of the file at path (0 when none). */
SL_MUST_USE sl_err audit_first_seq(const char *path, uint64_t *seq);

/* Milliseconds since the epoch of a record's (validated) time field. */
int64_t audit_record_ms(json_t *rec);
/* String field of a record, or NULL for null/absent. */
const char *audit_str(json_t *rec, const char *key);

#endif
