/* The one error type of seclaunch.
 *
 * Every fallible function returns sl_err and is marked SL_MUST_USE. The code
 * says which class of failure happened (and so which exit code the CLI uses);
 * the thread-local detail message says what exactly failed and which file,
 * field, check or rule is at fault. Detail messages never contain secrets.
 */
#ifndef SECLAUNCH_ERROR_H
#define SECLAUNCH_ERROR_H

#include <stdarg.h>
#include <stdint.h>

#define SL_MUST_USE __attribute__((warn_unused_result))
/* The result type of every fallible function, must-use included (as s2n's
 * S2N_RESULT): `static SL_RESULT helper(...)`. A static helper declared
 * `static sl_err` is refused by scripts/lint. */
#define SL_RESULT SL_MUST_USE sl_err
#define SL_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Exit-code categories, exactly as DESIGN.md gives them. */
enum sl_category {
	SL_CAT_OK = 0,
	SL_CAT_USAGE = 1,
	SL_CAT_INPUT = 2,
	SL_CAT_ATTEST = 3,
	SL_CAT_POLICY = 4,
	SL_CAT_KMS = 5,
	SL_CAT_INTEGRITY = 6,
	SL_CAT_SYSTEM = 7,
};

/* X(name, category, message). Add codes inside their category's group. */
#define SL_ERROR_TABLE(X)                                                                          \
	X(SL_OK, SL_CAT_OK, "ok")                                                                  \
	/* usage */                                                                                \
	X(SL_E_USAGE, SL_CAT_USAGE, "usage error")                                                 \
	/* input / format */                                                                       \
	X(SL_E_INPUT, SL_CAT_INPUT, "invalid input")                                               \
	X(SL_E_FORMAT, SL_CAT_INPUT, "malformed data")                                             \
	X(SL_E_VERSION, SL_CAT_INPUT, "unsupported version")                                       \
	X(SL_E_TOO_LARGE, SL_CAT_INPUT, "input too large")                                         \
	X(SL_E_IO, SL_CAT_INPUT, "file error")                                                     \
	X(SL_E_EXISTS, SL_CAT_INPUT, "output exists")                                              \
	X(SL_E_PERM, SL_CAT_INPUT, "unsafe file permissions")                                      \
	/* attestation */                                                                          \
	X(SL_E_ATTEST, SL_CAT_ATTEST, "attestation failed")                                        \
	X(SL_E_ATTEST_SIG, SL_CAT_ATTEST, "evidence signature invalid")                            \
	X(SL_E_ATTEST_CHAIN, SL_CAT_ATTEST, "certificate chain invalid")                           \
	X(SL_E_ATTEST_BINDING, SL_CAT_ATTEST, "evidence not bound to this request")                \
	X(SL_E_ATTEST_UNTRUSTED, SL_CAT_ATTEST, "attestation key not trusted")                     \
	X(SL_E_ATTEST_FORMAT, SL_CAT_ATTEST, "malformed evidence")                                 \
	/* policy */                                                                               \
	X(SL_E_POLICY_DENIED, SL_CAT_POLICY, "policy denied")                                      \
	X(SL_E_POLICY_SIG, SL_CAT_POLICY, "policy signature invalid")                              \
	/* KMS */                                                                                  \
	X(SL_E_KMS_UNREACHABLE, SL_CAT_KMS, "KMS unreachable")                                     \
	X(SL_E_KMS_REFUSED, SL_CAT_KMS, "KMS refused the request")                                 \
	X(SL_E_KMS_PROTOCOL, SL_CAT_KMS, "KMS protocol error")                                     \
	X(SL_E_REMOTE_UNREACHABLE, SL_CAT_KMS, "remote storage unreachable")                       \
	X(SL_E_REMOTE_REFUSED, SL_CAT_KMS, "remote storage refused the request")                   \
	/* integrity */                                                                            \
	X(SL_E_INTEGRITY, SL_CAT_INTEGRITY, "integrity check failed")                              \
	X(SL_E_TRUNCATED, SL_CAT_INTEGRITY, "data truncated")                                      \
	X(SL_E_WRONG_KEY, SL_CAT_INTEGRITY, "wrong key")                                           \
	/* system */                                                                               \
	X(SL_E_SYSTEM, SL_CAT_SYSTEM, "system error")                                              \
	X(SL_E_NOMEM, SL_CAT_SYSTEM, "out of memory")                                              \
	X(SL_E_CRYPTO, SL_CAT_SYSTEM, "crypto library error")                                      \
	X(SL_E_TPM, SL_CAT_SYSTEM, "TPM error")                                                    \
	X(SL_E_GPU, SL_CAT_SYSTEM, "GPU error")                                                    \
	X(SL_E_INTERNAL, SL_CAT_SYSTEM, "internal error")

#define SL_ERR_ENUM_(name, cat, msg) name,
typedef enum sl_err { SL_ERROR_TABLE(SL_ERR_ENUM_) SL_E__COUNT } sl_err;
#undef SL_ERR_ENUM_

/* Sets the thread's detail message and returns code (for `return sl_err_set(..)`). */
sl_err sl_err_set(sl_err code, const char *fmt, ...) SL_PRINTF(2, 3);
/* Prefixes the current detail with context ("reading F: <old detail>"). */
sl_err sl_err_wrap(sl_err code, const char *fmt, ...) SL_PRINTF(2, 3);
/* The detail of the last error on this thread ("" when none). */
const char *sl_err_detail(void);
void sl_err_clear(void);
/* The code's fixed message and name ("SL_E_FORMAT"), and its exit code. */
const char *sl_err_message(sl_err code);
const char *sl_err_name(sl_err code);
int sl_err_exit_code(sl_err code);

/* Foreign-library failures turned into our codes, with the library's own
 * reason appended to the detail. */
sl_err sl_err_ossl(sl_err code, const char *fmt, ...) SL_PRINTF(2, 3); /* drains OpenSSL's queue */
sl_err sl_err_tss(sl_err code, uint32_t tss_rc, const char *fmt, ...) SL_PRINTF(3, 4);
sl_err sl_err_curl(sl_err code, int curl_code, const char *fmt, ...) SL_PRINTF(3, 4);

/* Guard macros. They need `sl_err rc` in scope and an `out:` label; the
 * function presets rc to an error and sets rc = SL_OK just before out:. */
#define SL_GUARD(expr)                                                                             \
	do {                                                                                       \
		rc = (expr);                                                                       \
		if (rc != SL_OK)                                                                   \
			goto out;                                                                  \
	} while (0)

#define SL_ENSURE(cond, code, ...)                                                                 \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			rc = sl_err_set((code), __VA_ARGS__);                                      \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

#define SL_FAIL(code, ...)                                                                         \
	do {                                                                                       \
		rc = sl_err_set((code), __VA_ARGS__);                                              \
		goto out;                                                                          \
	} while (0)

/* OpenSSL: cond is the success test (e.g. `EVP_DigestInit_ex(...) == 1`). */
#define SL_GUARD_OSSL(cond, code, ...)                                                             \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			rc = sl_err_ossl((code), __VA_ARGS__);                                     \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

/* TSS2: expr yields a TSS2_RC; anything but 0 fails. */
#define SL_GUARD_TSS(expr, code, ...)                                                              \
	do {                                                                                       \
		uint32_t sl_tss_rc_ = (uint32_t)(expr);                                            \
		if (sl_tss_rc_ != 0) {                                                             \
			rc = sl_err_tss((code), sl_tss_rc_, __VA_ARGS__);                          \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

/* libcurl: expr yields a CURLcode; anything but CURLE_OK fails. */
#define SL_GUARD_CURL(expr, code, ...)                                                             \
	do {                                                                                       \
		int sl_curl_rc_ = (int)(expr);                                                     \
		if (sl_curl_rc_ != 0) {                                                            \
			rc = sl_err_curl((code), sl_curl_rc_, __VA_ARGS__);                        \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

/* libsodium: expr yields 0 on success (its convention). */
#define SL_GUARD_SODIUM(expr, code, ...)                                                           \
	do {                                                                                       \
		if ((expr) != 0) {                                                                 \
			rc = sl_err_set((code), __VA_ARGS__);                                      \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

#endif
