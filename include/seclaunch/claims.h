/* The normalised claim set: a flat, sorted key -> string map (docs/claims.md).
 *
 * Every attestation verifier writes one; policy evaluates it; seclaunchd and
 * the launcher carry it. It lives in core/, below attest/ and policy/, so a
 * module that only reads claims need not depend on attestation.
 */
#ifndef SECLAUNCH_CLAIMS_H
#define SECLAUNCH_CLAIMS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

typedef struct sl_claims sl_claims;

SL_MUST_USE sl_err sl_claims_new(sl_claims **out);
void sl_claims_free(sl_claims *c);
/* Sets key to value (replacing an earlier value). Keys are [a-z0-9._-]+. */
SL_MUST_USE sl_err sl_claims_set(sl_claims *c, const char *key, const char *value);
SL_MUST_USE sl_err sl_claims_setf(sl_claims *c, const char *key, const char *fmt, ...)
    SL_PRINTF(3, 4);
/* Sets key to the lower-case hex of len bytes. */
SL_MUST_USE sl_err sl_claims_set_hex(sl_claims *c, const char *key, const uint8_t *p, size_t len);
/* NULL when absent. */
const char *sl_claims_get(const sl_claims *c, const char *key);
size_t sl_claims_count(const sl_claims *c);
const char *sl_claims_key(const sl_claims *c, size_t i); /* sorted by key */
const char *sl_claims_value(const sl_claims *c, size_t i);
/* Copies every claim of src into dst (src wins on equal keys). */
SL_MUST_USE sl_err sl_claims_merge(sl_claims *dst, const sl_claims *src);
/* A JSON object {key: value, ...} (new reference) and back. from_json
 * rejects non-string values and bad keys, naming them. */
SL_MUST_USE sl_err sl_claims_to_json(const sl_claims *c, json_t **out);
SL_MUST_USE sl_err sl_claims_from_json(const json_t *obj, sl_claims **out);
/* SHA-256 of the canonical JSON text (sorted keys, compact). */
void sl_claims_digest(const sl_claims *c, uint8_t out[static 32]);
/* The same digest of claims already rendered by sl_claims_to_json (a caller
 * that needs both renders them once). */
void sl_claims_json_digest(const json_t *claims, uint8_t out[static 32]);

#endif
