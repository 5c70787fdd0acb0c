/* The text forms vendors publish reports and quotes in (private to attest/):
 * raw binary, hex (xxd -p, virtee/sev) or base64 (standard or URL-safe),
 * with any whitespace or line breaks around or inside the text. */
#ifndef SECLAUNCH_ATTEST_IMPORT_FORMAT_H
#define SECLAUNCH_ATTEST_IMPORT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

/* Detects the form of p and decodes it into *out (malloc'd, also for
 * binary). *format is "binary", "hex", "base64" or "base64url". A byte that
 * is neither printable ASCII nor whitespace makes it binary; text that is
 * only hex digits is hex; text in the base64 alphabet is base64; other text
 * fails naming what and the forms accepted. max bounds the decoded size. */
SL_MUST_USE sl_err sl_import_decode(const uint8_t *p, size_t len, size_t max, uint8_t **out,
                                    size_t *outlen, const char **format, const char *what);

#endif
