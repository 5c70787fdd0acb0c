/* Intel TDX DCAP quotes v4 and v5 (private to attest/).
 *
 * Layout: Intel TDX DCAP Quoting Library API, appendix "Quote Format" (v4)
 * and the v5 extension (body type + size before the TD report body, TD 1.5
 * body with TEE_TCB_SVN2 and MRSERVICETD). docs/evidence-tdx.md lists the
 * fields read. */
#ifndef SECLAUNCH_ATTEST_TDX_QUOTE_H
#define SECLAUNCH_ATTEST_TDX_QUOTE_H

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stdint.h>

#include "seclaunch/attest.h"

#define SL_TDX_HEADER_LEN 48
#define SL_TDX_BODY10_LEN 584
#define SL_TDX_BODY15_LEN 648
#define SL_TDX_QE_REPORT_LEN 384

typedef struct sl_tdx_body {
	uint8_t tee_tcb_svn[16];
	uint8_t mrseam[48];
	uint8_t mrsignerseam[48];
	uint8_t seam_attributes[8];
	uint8_t td_attributes[8];
	uint8_t xfam[8];
	uint8_t mrtd[48];
	uint8_t mrconfigid[48];
	uint8_t mrowner[48];
	uint8_t mrownerconfig[48];
	uint8_t rtmr[4][48];
	uint8_t report_data[64];
	bool v15; /* TD 1.5 body: the two fields below are valid */
	uint8_t tee_tcb_svn2[16];
	uint8_t mrservicetd[48];
} sl_tdx_body;

/* The SGX report body of the quoting enclave (fields we check). */
typedef struct sl_tdx_qe_report {
	uint8_t cpusvn[16];
	uint32_t miscselect;
	uint8_t attributes[16];
	uint8_t mrenclave[32];
	uint8_t mrsigner[32];
	uint16_t isvprodid;
	uint16_t isvsvn;
	uint8_t report_data[64];
} sl_tdx_qe_report;

typedef struct sl_tdx_quote {
	uint16_t version;
	uint16_t att_key_type;
	uint32_t tee_type;
	uint8_t qe_vendor_id[16];
	uint8_t user_data[20];
	uint16_t body_type; /* v5 only (2 = TD 1.0, 3 = TD 1.5); v4: 2 */
	sl_tdx_body body;
	/* views into the caller's buffer, valid while it lives */
	const uint8_t *signed_part; /* header [+ type + size] + body */
	size_t signed_len;
	const uint8_t *sig;           /* 64: r || s big-endian */
	const uint8_t *attest_key;    /* 64: x || y */
	const uint8_t *qe_report_raw; /* 384 */
	sl_tdx_qe_report qe_report;
	const uint8_t *qe_report_sig; /* 64 */
	const uint8_t *qe_auth;
	size_t qe_auth_len;
	const uint8_t *pck_chain; /* PEM, leaf first */
	size_t pck_chain_len;
} sl_tdx_quote;

/* Parses a quote; bytes after sig_data_len are ignored (some producers pad).
 * Failures are SL_E_ATTEST_FORMAT naming the field. */
SL_MUST_USE sl_err sl_tdx_quote_parse(const uint8_t *p, size_t len, sl_tdx_quote *q);

/* The SGX extension (1.2.840.113741.1.13.1) of a PCK certificate. */
typedef struct sl_pck_ext {
	uint8_t fmspc[6];
	uint8_t pceid[2];
	uint8_t cpusvn[16];
	uint8_t comp_svn[16]; /* SGX TCB components 1..16 */
	uint32_t pcesvn;
} sl_pck_ext;

SL_MUST_USE sl_err sl_pck_ext_parse_der(const uint8_t *der, size_t len, sl_pck_ext *out);
SL_MUST_USE sl_err sl_pck_ext_from_cert(const X509 *x, sl_pck_ext *out);

/* The result of TCB info / QE identity evaluation. */
typedef struct sl_tdx_tcb {
	char status[40];        /* UpToDate, SWHardeningNeeded, ..., NotSupported */
	char qe_status[40];     /* from the QE identity, "" when not supplied */
	char module_status[40]; /* TDX module identity status, "" when not used */
	char tcb_date[32];
	bool stale; /* o->at is after a collateral's nextUpdate */
	char next_update[32];
} sl_tdx_tcb;

/* Evaluates a (verified) tcbInfo object against the PCK extension and the
 * TD's TEE_TCB_SVN (Intel's TCB level matching: first level whose SGX
 * components, PCE SVN and TDX components are all <= the platform's). */
SL_MUST_USE sl_err sl_tdx_tcb_eval(const json_t *tcbinfo, const sl_pck_ext *pck,
                                   const sl_tdx_body *b, sl_tdx_tcb *out);
/* True when TCB status a is worse than b (unknown statuses are worst). */
bool sl_tdx_status_worse(const char *a, const char *b);
/* Evaluates a (verified) TD_QE enclaveIdentity object against the QE report. */
SL_MUST_USE sl_err sl_tdx_qe_eval(const json_t *ident, const sl_tdx_qe_report *qe,
                                  char status[static 40]);
/* Splits a PCS collateral document {"<key>": {...}, "signature": "<hex>"}
 * (key "tcbInfo" or "enclaveIdentity"): signed_bytes and signed_len give the
 * exact bytes of the value of that member, which Intel signs (borrowed),
 * *body that value parsed from those bytes (new reference), sig the P-256
 * r || s. Duplicate keys and any other top-level member are refused. */
SL_MUST_USE sl_err sl_tdx_pcs_parse(const uint8_t *text, size_t len, const char *key,
                                    const char *file, json_t **body, const uint8_t **signed_bytes,
                                    size_t *signed_len, uint8_t sig[static 64]);
/* Finds, verifies (signature by the Intel TCB signing certificate among
 * certs, the certificates of dir, chained to the pinned root at the
 * collateral's issueDate) and evaluates the TCB info for pck->fmspc and the
 * TD_QE identity among the JSON files of dir. *found is false when the
 * directory holds no TCB info for this FMSPC. */
SL_MUST_USE sl_err sl_tdx_collateral_eval(const char *dir, STACK_OF(X509) * certs,
                                          STACK_OF(X509) * roots, time_t at, const sl_pck_ext *pck,
                                          const sl_tdx_body *b, const sl_tdx_qe_report *qe,
                                          bool *found, sl_tdx_tcb *out);

/* Verifies a raw quote (see tdx_verify.c) and adds the tdx.* claims.
 * check_binding as for SEV-SNP. rd_out (may be NULL) gets REPORTDATA. */
SL_MUST_USE sl_err sl_tdx_verify_quote(const uint8_t *quote, size_t len, const sl_verify_opts *o,
                                       bool check_binding, sl_claims *claims);

/* Replays a CCEL event log (TCG2 crypto-agile, SHA-384; MR index 1..4 =
 * RTMR0..3) into rtmr; *events counts the records read (tdx_ccel.c). */
SL_MUST_USE sl_err sl_tdx_ccel_replay(const uint8_t *log, size_t len, uint8_t rtmr[4][48],
                                      size_t *events);

/* Adds the tdx.* claims of a verified quote (tdx_claims.c). */
SL_MUST_USE sl_err sl_tdx_claims(const sl_tdx_quote *q, const sl_pck_ext *pck, sl_claims *c);

/* Verifies an ECDSA P-256 / SHA-256 signature given as r || s (64 bytes,
 * big-endian) with key (EVP_PKEY) over msg (tdx_p256.c). */
SL_MUST_USE sl_err sl_p256_verify(EVP_PKEY *key, const uint8_t sig[static 64], const uint8_t *msg,
                                  size_t len, const char *what);

#endif
