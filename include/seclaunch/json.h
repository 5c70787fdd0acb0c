/* Strict JSON accessors over jansson: one discipline for every document
 * seclaunch reads (evidence, collateral, policy, KMS requests and answers,
 * audit records).
 *
 *  - Members not in an allowed list are refused, naming the member and its
 *    path ("$.tcbInfo: unknown field \"x\"").
 *  - A string is a string only when it holds no NUL: jansson keeps "\u0000"
 *    inside values, and C would read "ab\u0000cd" as "ab".
 *  - Hex and base64 members decode to exactly the size of the caller's buffer.
 *
 * Errors name the path and the member; code is the caller's error (format
 * errors of evidence are SL_E_ATTEST_FORMAT, of requests SL_E_INPUT, ...).
 */
#ifndef SECLAUNCH_JSON_H
#define SECLAUNCH_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

/* The first member of obj whose name is not in allowed (NULL-terminated),
 * or NULL when every member is allowed (or obj is not an object). */
const char *sl_json_unknown(const json_t *obj, const char *const *allowed);
/* obj is an object whose members are all in allowed; else code naming path
 * and the first unknown member. */
SL_MUST_USE sl_err sl_json_only(const json_t *obj, const char *const *allowed, sl_err code,
                                const char *path);

/* The text of j when j is a string without an embedded NUL, else NULL. */
const char *sl_json_strval(const json_t *j);
/* sl_json_strval of member key of obj (obj may be NULL or not an object). */
const char *sl_json_getstr(const json_t *obj, const char *key);

/* Member key of obj: a NUL-free string of at most max bytes (0: any).
 * *out is borrowed from obj. */
SL_MUST_USE sl_err sl_json_str(const json_t *obj, const char *key, size_t max, sl_err code,
                               const char *path, const char **out);
/* As sl_json_str, but an absent member (or JSON null) gives *out = NULL. */
SL_MUST_USE sl_err sl_json_str_opt(const json_t *obj, const char *key, size_t max, sl_err code,
                                   const char *path, const char **out);

/* Member key of obj: hex (either case) or standard base64 (with padding)
 * of exactly len bytes, decoded into out. */
SL_MUST_USE sl_err sl_json_hex(const json_t *obj, const char *key, uint8_t *out, size_t len,
                               sl_err code, const char *path);
SL_MUST_USE sl_err sl_json_b64(const json_t *obj, const char *key, uint8_t *out, size_t len,
                               sl_err code, const char *path);

/* The same decoders over text of slen bytes (no NUL needed): exactly len
 * bytes or code naming what. */
SL_MUST_USE sl_err sl_hex_exact(const char *s, size_t slen, uint8_t *out, size_t len, sl_err code,
                                const char *what);
SL_MUST_USE sl_err sl_b64_exact(const char *s, size_t slen, uint8_t *out, size_t len, sl_err code,
                                const char *what);

#endif
