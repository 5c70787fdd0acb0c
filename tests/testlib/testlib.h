/* Shared helpers of the unit tests (tests/unit/<mod>_test.c). The Makefile
 * compiles every test with -Itests/testlib and links testlib.o into it.
 * Include after <cmocka.h>:
 *
 *   #include "testlib.h"
 *
 * What is shared by only some tests (the SLD fixtures) is a header of its own
 * beside this one. */
#ifndef SECLAUNCH_TESTLIB_H
#define SECLAUNCH_TESTLIB_H

#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

/* expect_fail(CALL, WANT, NEEDLE[, WHAT]): CALL returned exactly WANT and,
 * unless NEEDLE is NULL, sl_err_detail() names NEEDLE (the field, rule or
 * check at fault). A failure reports the caller's line, the call's text and
 * WHAT (a label for a case in a loop). */
#define expect_fail(call, want, ...)                                                               \
	tl_expect_fail((call), (want), #call, __FILE__, __LINE__, __VA_ARGS__, NULL)

void tl_expect_fail(sl_err got, sl_err want, const char *call, const char *file, int line,
                    const char *needle, const char *what, ...);

/* The attestation vectors: $SL_VECTORS, else tests/vectors (the tests run from
 * the repository root). */
const char *tl_vectors(void);

/* buf := the vectors directory joined with the printf-style relative path;
 * returns buf. A path that does not fit fails the test. */
char *tl_vector_path(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The bytes of one vector file (relative path, printf-style); fails the test
 * when it cannot be read. The caller frees. */
uint8_t *tl_vector_load(size_t *len, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A fresh private directory $TMPDIR/sl-TAG.XXXXXX in buf (n >= 64); fails the
 * test when it cannot be made. Returns buf. */
char *tl_tmpdir(char *buf, size_t n, const char *tag);

/* Removes dir and everything under it (no links followed); 0 on success. */
int tl_rmtree(const char *dir);

/* XORs the byte at off of path with mask (non-zero, so the byte always
 * changes); fails the test when the file cannot be opened or is shorter. */
void tl_flip_byte(const char *path, long off, unsigned char mask);

#endif
