/* Secret memory: keys, DEKs, unsealed data and tokens live only here.
 *
 * sl_secret buffers come from libsodium's guarded allocator: guard pages
 * around the data, mlock where the limit allows, excluded from core dumps,
 * wiped on free. Compare MACs, digests and tokens with sl_ct_eq.
 */
#ifndef SECLAUNCH_SECRET_H
#define SECLAUNCH_SECRET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

typedef struct sl_secret sl_secret;

/* Initialises libsodium once; every binary calls it at start (sl_harden does). */
SL_MUST_USE sl_err sl_crypto_init(void);

SL_MUST_USE sl_err sl_secret_new(size_t len, sl_secret **out);
/* A secret filled from the system CSPRNG. */
SL_MUST_USE sl_err sl_secret_random(size_t len, sl_secret **out);
/* A copy of len bytes at p (the caller wipes its own copy). */
SL_MUST_USE sl_err sl_secret_from(const void *p, size_t len, sl_secret **out);
/* Reads a whole file (at most max bytes) straight into secret memory. The
 * file must be a regular file, owned by the caller or root, and not readable
 * or writable by group or others (SL_E_PERM otherwise, naming the mode). */
SL_MUST_USE sl_err sl_secret_read_file(const char *path, size_t max, sl_secret **out);
/* A bearer token file (seclaunchd's scope tokens, the clients' --admin-token-file):
 * read as sl_secret_read_file does, trailing newline / CR / spaces dropped; the
 * rest must be at least SL_TOKEN_MIN printable ASCII characters without spaces
 * (SL_E_INPUT naming the file and the rule). *out holds the token and a NUL. */
#define SL_TOKEN_MIN 16
#define SL_TOKEN_MAX 4096
SL_MUST_USE sl_err sl_secret_read_token(const char *path, sl_secret **out);
/* A client's token file (--admin-token-file, --enroll-token-file): as
 * sl_secret_read_token, except that root may read one owned by any user (a
 * packaged admin.token owned by _seclaunchd); mode 0600 (no group or other
 * access), a regular file, no symbolic link, as always. */
SL_MUST_USE sl_err sl_secret_read_client_token(const char *path, sl_secret **out);
/* The key-file rule, on a file opened with O_NOFOLLOW: a regular file, owned
 * by this user or root, that group and others can neither read nor write
 * (SL_E_PERM naming path, what it is, the mode or owner, and the fix; *st
 * filled). sl_secret_read_file applies it to every key file, seclaunchd to
 * its state store. */
struct stat;
SL_MUST_USE sl_err sl_private_file_check(int fd, const char *path, const char *what,
                                         struct stat *st);
/* The error for a failed O_NOFOLLOW open of such a file: SL_E_PERM for a
 * symbolic link (ELOOP), SL_E_IO otherwise; both name the path. */
SL_MUST_USE sl_err sl_private_file_open_error(const char *path, const char *what);
void sl_secret_free(sl_secret *s); /* NULL-safe; wipes */
uint8_t *sl_secret_data(sl_secret *s);
size_t sl_secret_len(const sl_secret *s);
/* Shrinks the visible length (e.g. after reading less than allocated). */
void sl_secret_truncate(sl_secret *s, size_t len);
/* Makes the secret read-only (mprotect) / writable again. */
void sl_secret_readonly(sl_secret *s);
void sl_secret_readwrite(sl_secret *s);

/* Constant-time equality of two equal-length byte strings. */
bool sl_ct_eq(const void *a, const void *b, size_t len);
/* Wipes memory in a way the compiler cannot elide. */
void sl_wipe(void *p, size_t len);
/* Fills p with CSPRNG bytes (for nonces, salts: non-secret randomness too). */
void sl_random(void *p, size_t len);

#endif
