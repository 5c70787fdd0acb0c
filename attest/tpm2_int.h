/* Private to attest/tpm2_*.c: strict unmarshalling, keys, hashes, certificates. */
#ifndef SECLAUNCH_ATTEST_TPM2_INT_H
#define SECLAUNCH_ATTEST_TPM2_INT_H

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tpm2_types.h>

#include "seclaunch/attest.h"
#include "seclaunch/buf.h"
#include "seclaunch/tpm2.h"

/* Caps on what an evidence object may carry. */
#define SL_TPM2_BLOB_MAX 4096           /* TPMS_ATTEST, TPMT_SIGNATURE, TPM2B_PUBLIC */
#define SL_TPM2_CERT_MAX 16384          /* one DER certificate */
#define SL_TPM2_EVENTLOG_MAX (8u << 20) /* measured-boot event log */

/* ---- strict unmarshalling (tpm2_public.c): whole input, no trailing bytes */
SL_MUST_USE sl_err sl_tpm2_mu_public(const uint8_t *p, size_t len, TPM2B_PUBLIC *out,
                                     const char *what);
SL_MUST_USE sl_err sl_tpm2_mu_attest(const uint8_t *p, size_t len, TPMS_ATTEST *out);
SL_MUST_USE sl_err sl_tpm2_mu_signature(const uint8_t *p, size_t len, TPMT_SIGNATURE *out);
/* Marshals a TPM2B_PUBLIC (with size prefix) into malloc'd memory. */
SL_MUST_USE sl_err sl_tpm2_marshal_public(const TPM2B_PUBLIC *pub, uint8_t **out, size_t *len);

/* ---- hashes */
const EVP_MD *sl_tpm2_md(TPM2_ALG_ID alg);            /* NULL when not supported */
const char *sl_tpm2_hash_name(TPM2_ALG_ID alg);       /* "sha256", NULL when not supported */
TPM2_ALG_ID sl_tpm2_hash_from_name(const char *name); /* TPM2_ALG_ERROR when unknown */
SL_MUST_USE sl_err sl_tpm2_digest(TPM2_ALG_ID alg, const void *p, size_t len, uint8_t *out,
                                  size_t *out_len);

/* ---- keys (tpm2_public.c) */
/* The name of an unmarshalled public area (marshals it again: MU is canonical). */
SL_MUST_USE sl_err sl_tpm2_tpmt_name(const TPMT_PUBLIC *pub, uint8_t name[static SL_TPM2_NAME_MAX],
                                     size_t *name_len);
SL_MUST_USE sl_err sl_tpm2_public_pkey(const TPMT_PUBLIC *pub, EVP_PKEY **out);
/* Restricted-signing check of an unmarshalled AK (see sl_tpm2_ak_check). */
SL_MUST_USE sl_err sl_tpm2_ak_check_tpmt(const TPMT_PUBLIC *pub);
/* Verifies sig over msg with key. The hash is the signature's own. */
SL_MUST_USE sl_err sl_tpm2_sig_verify(EVP_PKEY *key, const TPMT_SIGNATURE *sig, const uint8_t *msg,
                                      size_t len);

/* ---- certificates (tpm2_cert.c) */
SL_MUST_USE sl_err sl_tpm2_x509_parse(const uint8_t *p, size_t len, X509 **out, const char *what);
/* Verifies cert against every certificate (PEM or DER) in ca_dir at time at
 * (0 = now) and requires its key to equal key (when non-NULL). */
SL_MUST_USE sl_err sl_tpm2_cert_verify(X509 *cert, const char *ca_dir, time_t at, EVP_PKEY *key,
                                       const char *what);

/* ---- ESAPI (tpm2_esys.c) */
typedef struct sl_tpm2_conn {
	ESYS_CONTEXT *esys;
	TSS2_TCTI_CONTEXT *tcti;
} sl_tpm2_conn;

const char *sl_tpm2_tcti_string(const char *tcti);
SL_MUST_USE sl_err sl_tpm2_connect(const char *tcti, sl_tpm2_conn *c);
void sl_tpm2_disconnect(sl_tpm2_conn *c);
/* A transient EK from the TCG template (flush it with Esys_FlushContext). */
SL_MUST_USE sl_err sl_tpm2_ek_create(sl_tpm2_conn *c, sl_tpm2_alg alg, ESYS_TR *ek,
                                     TPM2B_PUBLIC **ek_pub);
/* A policy session satisfied by PolicySecret(endorsement hierarchy). */
SL_MUST_USE sl_err sl_tpm2_ek_session(sl_tpm2_conn *c, ESYS_TR *session);
/* The AK at its persistent handle, created on first use when create is
 * true (SL_E_TPM naming the handle when absent otherwise). *ak is an ESYS_TR
 * for the persistent object: release it with Esys_TR_Close, never flush. */
SL_MUST_USE sl_err sl_tpm2_ak_load(sl_tpm2_conn *c, const sl_tpm2_key_opts *o, bool create,
                                   ESYS_TR *ak, TPM2B_PUBLIC **ak_pub, uint32_t *handle);
/* Reads an NV index whole; *out = NULL when the index is not defined. */
SL_MUST_USE sl_err sl_tpm2_nv_read(sl_tpm2_conn *c, uint32_t index, uint8_t **out, size_t *len);
/* The same for an index known to be defined (sl_tpm2_nv_present). */
SL_MUST_USE sl_err sl_tpm2_nv_read_defined(sl_tpm2_conn *c, uint32_t index, uint8_t **out,
                                           size_t *len);
/* present[i]: whether NV index idx[i] is defined, for all n with one
 * TPM2_GetCapability as a rule. */
SL_MUST_USE sl_err sl_tpm2_nv_present(sl_tpm2_conn *c, const uint32_t *idx, size_t n,
                                      bool *present);

/* ---- event log (tpm2_eventlog.c) */
typedef struct sl_tpm2_pcrs {
	/* value[bank][pcr]; set[bank] bit i when PCR i is present */
	TPM2_ALG_ID alg[TPM2_NUM_PCR_BANKS];
	uint32_t set[TPM2_NUM_PCR_BANKS];
	uint8_t value[TPM2_NUM_PCR_BANKS][24][64];
	size_t nbanks;
} sl_tpm2_pcrs;

/* Replays log into every bank of pcrs whose algorithm the log carries and
 * requires each PCR that has events to equal the quoted value. Sets claims
 * tpm.eventlog.* and tpm.secure_boot. */
SL_MUST_USE sl_err sl_tpm2_eventlog_check(const uint8_t *log, size_t len, const sl_tpm2_pcrs *pcrs,
                                          sl_claims *claims);
/* Parses only (fuzz target / format check). */
SL_MUST_USE sl_err sl_tpm2_eventlog_parse(const uint8_t *log, size_t len);

/* ---- evidence JSON helpers (tpm2_collect.c) */
SL_MUST_USE sl_err sl_tpm2_json_put_b64(json_t *obj, const char *key, const uint8_t *p, size_t len);
/* {"sha256": {"0": "hex", ...}, ...} of the PCRs set in p */
SL_MUST_USE sl_err sl_tpm2_pcrs_json(const sl_tpm2_pcrs *p, json_t **out);

/* ---- quote verification (tpm2_verify.c) */
SL_MUST_USE sl_err sl_tpm2_verify_evidence(const json_t *ev, const sl_verify_opts *o,
                                           sl_claims *claims);

#endif
