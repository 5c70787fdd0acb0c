/* Small shared helpers: files, encodings, process hardening, time. */
#ifndef SECLAUNCH_UTIL_H
#define SECLAUNCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "seclaunch/error.h"

#define SL_VERSION "0.1.0"

/* At the start of every binary: umask 077, PR_SET_DUMPABLE 0, RLIMIT_CORE 0,
 * libsodium initialised. */
SL_MUST_USE sl_err sl_harden_process(void);

/* Reads a whole (non-secret) file of at most max bytes into malloc'd memory,
 * NUL-terminated for convenience (the NUL is not counted in *len). A larger
 * file fails with SL_E_TOO_LARGE naming the path and the cap; "-" is stdin. */
SL_MUST_USE sl_err sl_file_read(const char *path, size_t max, uint8_t **out, size_t *len);
/* Writes a file atomically: temp file in the same directory, fsync, rename,
 * fsync of the directory. mode applies to the new file. Existing files are
 * replaced only when replace is true (SL_E_EXISTS otherwise). */
SL_MUST_USE sl_err sl_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
                                        bool replace);
/* An output that is a stream, not a file: true when path itself (not a
 * symlink to it) is a FIFO or a character device. Such a path is written with
 * sl_output_open_stream; any other existing path is an existing file. */
bool sl_output_is_stream(const char *path);
/* Opens the FIFO or character device at path for writing, checked on the
 * descriptor rather than the path: opened O_PATH|O_NOFOLLOW (a symlink is
 * refused), fstat'd, and only then reopened for writing (so opening has no
 * side effect on what is refused). It must be a FIFO or character device
 * owned by the caller (euid), or /dev/null; never a terminal. A FIFO waits
 * for its reader. Refusals are SL_E_EXISTS naming the owner. */
SL_MUST_USE sl_err sl_output_open_stream(const char *path, int *fd_out);
/* Writes all of p to fd, retrying on EINTR and short writes. */
SL_MUST_USE sl_err sl_write_all(int fd, const void *p, size_t len, const char *what);
/* Reads exactly len bytes or until EOF; *got says how many. */
SL_MUST_USE sl_err sl_read_full(int fd, void *p, size_t len, size_t *got, const char *what);
/* The same at offset off (pread: the file position does not move). */
SL_MUST_USE sl_err sl_pread_full(int fd, void *p, size_t len, uint64_t off, size_t *got,
                                 const char *what);

/* Lower-case hex. out must hold 2*len+1 chars. */
void sl_hex_encode(const uint8_t *in, size_t len, char *out);
/* True when s (NULL: false) is exactly n lower-case hex digits. */
bool sl_hex_is_lower(const char *s, size_t n);
/* Decodes exactly want bytes of hex (SL_E_INPUT naming field otherwise). */
SL_MUST_USE sl_err sl_hex_decode(const char *hex, uint8_t *out, size_t want, const char *field);
/* Decodes hex of any even length up to max bytes into malloc'd memory. */
SL_MUST_USE sl_err sl_hex_decode_alloc(const char *hex, size_t max, uint8_t **out, size_t *len,
                                       const char *field);
/* Standard base64 with padding (RFC 4648 section 4), malloc'd, NUL-terminated. */
SL_MUST_USE sl_err sl_b64_encode(const uint8_t *in, size_t len, char **out);
/* Decodes standard base64 (padding required, no whitespace) of at most max bytes. */
SL_MUST_USE sl_err sl_b64_decode(const char *in, size_t max, uint8_t **out, size_t *len,
                                 const char *field);
/* The same for public bytes only (evidence, certificates): on ASCII it
 * accepts and refuses exactly what sl_b64_decode does (and it refuses every
 * byte above 0x7f, some of which libsodium takes for alphabet characters),
 * faster, but its time depends on the input: never for keys, DEKs or tokens. */
SL_MUST_USE sl_err sl_b64_decode_public(const char *in, size_t max, uint8_t **out, size_t *len,
                                        const char *field);
/* The URL-safe unpadded variant (JWT). */
SL_MUST_USE sl_err sl_b64url_decode(const char *in, size_t inlen, size_t max, uint8_t **out,
                                    size_t *len, const char *field);

/* RFC 3339 UTC, "2026-11-29T18:55:04Z" (buf >= 21) / with milliseconds (buf >= 25). */
void sl_time_rfc3339(time_t t, char *buf, size_t n);
SL_MUST_USE sl_err sl_time_parse_rfc3339(const char *s, time_t *out, const char *field);
/* Monotonic clock in nanoseconds. */
uint64_t sl_now_ns(void);

/* SHA-256 (OpenSSL). */
#define SL_SHA256_LEN 32
void sl_sha256(const void *p, size_t len, uint8_t out[static SL_SHA256_LEN]);
/* SHA-384 (OpenSSL): what TDX RTMRs extend. */
#define SL_SHA384_LEN 48
void sl_sha384(const void *p, size_t len, uint8_t out[static SL_SHA384_LEN]);

/* binding = SHA-256("seclaunch-bind-v1" || nonce || eph_pub || policy_digest) */
#define SL_NONCE_LEN 32
#define SL_EPH_PUB_LEN 32
#define SL_BINDING_LEN 32
void sl_binding_compute(const uint8_t nonce[static SL_NONCE_LEN],
                        const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                        const uint8_t policy_digest[static SL_SHA256_LEN],
                        uint8_t out[static SL_BINDING_LEN]);

/* The dataset naming rule: 1..SL_DATASET_ID_MAX characters of
 * [A-Za-z0-9._:-], the first a letter or digit (docs/format-sld.md). ASCII
 * only, no space, '/', '*' or leading '.'/'-': an id is safe in a file
 * name, a URL, an audit or CSV field, and unambiguous in a policy pattern.
 * Creating (encrypt, a KMS wrap, a policy) is strict; reading an existing
 * SLD file or releasing its key accepts its older id. pattern: also allows
 * '*' (anywhere), for policy id patterns. SL_E_INPUT "WHAT: dataset id: ' '
 * at byte 5 is not allowed (...)". */
#define SL_DATASET_ID_MAX 128
SL_MUST_USE sl_err sl_dataset_id_check(const char *id, bool pattern, const char *what);
bool sl_dataset_id_valid(const char *id);

#endif
