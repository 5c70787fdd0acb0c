/* Shared by attest/cloud_identity*.c (private to attest/). */
#ifndef SECLAUNCH_ATTEST_CLOUD_IDENTITY_INT_H
#define SECLAUNCH_ATTEST_CLOUD_IDENTITY_INT_H

#include <openssl/evp.h>
#include <time.h>

#include "seclaunch/identity.h"

#define SL_IDENTITY_DEFAULT_SKEW 60

static inline time_t sl_identity_now(const sl_identity_opts *o)
{
	return o != NULL && o->at != 0 ? o->at : time(NULL);
}

/* RSASSA-PKCS1-v1_5 / SHA-256 over msg; SL_E_ATTEST_SIG naming what on mismatch. */
SL_MUST_USE sl_err sl_identity_rs256_verify(EVP_PKEY *key, const uint8_t *msg, size_t len,
                                            const uint8_t *sig, size_t sig_len, const char *what);

#endif
