/* Certificate helpers shared by the SEV-SNP, TDX and Azure verifiers
 * (private to attest/): parse PEM bundles or DER, SHA-256 fingerprints,
 * X.509 extension lookup by OID, chain verification at a fixed time, and
 * loading a collateral directory. Every failure names what was being read. */
#ifndef SECLAUNCH_ATTEST_X509_UTIL_H
#define SECLAUNCH_ATTEST_X509_UTIL_H

#include <openssl/x509.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "seclaunch/error.h"

/* Certificates and CRLs appended from one file or blob: a PEM bundle (any
 * number of CERTIFICATE / X509 CRL blocks), or a single DER certificate or CRL. */
SL_MUST_USE sl_err sl_x509_parse_blob(const uint8_t *p, size_t len, STACK_OF(X509) * certs,
                                      STACK_OF(X509_CRL) * crls, const char *what);
/* One DER certificate (the whole blob, nothing after it). */
SL_MUST_USE sl_err sl_x509_from_der(const uint8_t *p, size_t len, X509 **out, const char *what);
/* The same, kept parsed by the SHA-256 of the bytes (the blob cache): *out
 * is a shared reference, read only. */
SL_MUST_USE sl_err sl_x509_from_der_cached(const uint8_t *p, size_t len, X509 **out,
                                           const char *what);
/* Every *.pem, *.crt, *.cer, *.der file of dir (not recursive; at most 256
 * files of 1 MiB each). Other files are skipped; an unreadable or unparsable
 * certificate file fails naming it. */
SL_MUST_USE sl_err sl_x509_load_dir(const char *dir, STACK_OF(X509) * certs,
                                    STACK_OF(X509_CRL) * crls);

void sl_x509_fingerprint(X509 *x, uint8_t out[static 32]);
/* The subject's commonName ("" when absent), NUL-terminated in buf. */
void sl_x509_subject_cn(const X509 *x, char *buf, size_t n);

/* The extnValue contents of the extension with the dotted OID, NULL when absent. */
const ASN1_OCTET_STRING *sl_x509_ext(const X509 *x, const char *oid);
/* The extension as a DER INTEGER that fits in 0..UINT32_MAX. */
SL_MUST_USE sl_err sl_x509_ext_uint(const X509 *x, const char *oid, bool *present, uint32_t *v,
                                    const char *what);

/* Verifies leaf up to one of roots at time at (0 = now). untrusted may hold
 * any intermediates (also unrelated ones). On success *chain_out (if not
 * NULL) holds the built chain leaf..root (free with OSSL_STACK_OF_X509_free /
 * sk_X509_pop_free). Failure is SL_E_ATTEST_CHAIN naming what and OpenSSL's
 * reason and depth. */
SL_MUST_USE sl_err sl_x509_verify_chain(X509 *leaf, STACK_OF(X509) * untrusted,
                                        STACK_OF(X509) * roots, time_t at,
                                        STACK_OF(X509) * *chain_out, const char *what);
/* Checks a CRL: signed by issuer, and serial of cert not listed. Fails with
 * SL_E_ATTEST_CHAIN. *found says whether a CRL from that issuer was in crls. */
SL_MUST_USE sl_err sl_x509_check_crls(X509 *cert, X509 *issuer, STACK_OF(X509_CRL) * crls,
                                      bool *found, const char *what);

#endif
