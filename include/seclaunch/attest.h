/* Attestation evidence: collect and verify, one kind table, one claim set.
 *
 * Every verifier turns evidence into the same normalised claim set
 * (seclaunch/claims.h, docs/claims.md). Policy evaluates claims only,
 * never raw evidence. Evidence is a JSON object (docs/evidence.md) whose
 * "kind" names its entry in the kind table.
 */
#ifndef SECLAUNCH_ATTEST_H
#define SECLAUNCH_ATTEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "seclaunch/claims.h"
#include "seclaunch/error.h"

/* ---- evidence -------------------------------------------------------- */

typedef struct sl_collect_opts {
	const char *tcti;          /* NULL: $SECLAUNCH_TCTI, else device:/dev/tpmrm0 */
	const uint8_t *nonce;      /* qualifyingData / REPORT_DATA prefix (the binding) */
	size_t nonce_len;          /* 1..64 */
	const char *pcrs;          /* TPM PCR selection, NULL: "sha256:0,1,2,3,4,5,6,7" */
	const char *export_ak_pem; /* TPM: also write the AK public key here (PEM) */
	const char *tsm_root;      /* configfs-tsm root; NULL: /sys/kernel/config/tsm/report */
} sl_collect_opts;

typedef struct sl_verify_opts {
	/* The expected binding. TPM: qualifyingData must equal it exactly.
	 * SEV-SNP/TDX: REPORT_DATA must equal it, zero-padded to 64 bytes. */
	const uint8_t *expect;
	size_t expect_len;
	bool no_binding;            /* check signatures/chains only; claims say binding=unchecked */
	const char *ak_pin_pem;     /* TPM: trust exactly this AK public key (PEM file) */
	const char *trust_dir;      /* CA certificates (PEM files) for AK/EK certificates */
	const char *collateral_dir; /* SNP/TDX vendor certificates, TCB info, CRLs */
	time_t at;                  /* verification time for certificates; 0 = now */
	/* Enrolled-AK registry (seclaunchd): true when the AK (by TPM name) is enrolled. */
	bool (*ak_enrolled)(const uint8_t *ak_name, size_t len, void *ctx);
	void *ak_enrolled_ctx;
} sl_verify_opts;

typedef struct sl_evidence_kind {
	const char *name; /* "tpm2", "sev-snp", "tdx" */
	/* true when this kind can be collected here (for --tee auto) */
	bool (*available)(const sl_collect_opts *o);
	SL_MUST_USE sl_err (*collect)(const sl_collect_opts *o, json_t **out);
	/* Adds this evidence's claims to claims (including tee.kind and binding). */
	SL_MUST_USE sl_err (*verify)(const json_t *ev, const sl_verify_opts *o, sl_claims *claims);
} sl_evidence_kind;

const sl_evidence_kind *sl_evidence_kind_find(const char *name);
/* kind "auto" picks the first available of sev-snp, tdx, tpm2. */
SL_MUST_USE sl_err sl_evidence_collect(const char *kind, const sl_collect_opts *o, json_t **out);
/* Merges the claims of one verified evidence item (src) into a request's
 * (dst), as sl_claims_merge does, except that GPUs join as one set: each GPU
 * once, one nonce, one mode (refused otherwise, nothing merged). */
SL_MUST_USE sl_err sl_evidence_merge(sl_claims *dst, const sl_claims *src);
/* Verifies one evidence object by its "kind" into claims. */
SL_MUST_USE sl_err sl_evidence_verify(const json_t *ev, const sl_verify_opts *o, sl_claims *claims);
/* The process's verification cache (SEV-SNP and TDX: certificate chains,
 * CRL and collateral signatures that passed, keyed by the SHA-256 of the
 * exact bytes, held for the time in which they pass; docs/attestation.md):
 * lookups that were served and that were not. */
void sl_verify_cache_stats(uint64_t *hits, uint64_t *misses);
/* Empties it and zeroes the counts; off: keep nothing from now on. */
void sl_verify_cache_reset(bool off);

/* ---- import ---------------------------------------------------------- */

/* A raw SEV-SNP report or TDX quote collected elsewhere, wrapped into
 * evidence JSON (`seclaunch evidence import`). */
typedef struct sl_blob {
	const uint8_t *p;
	size_t len;
	const char *name; /* for messages */
} sl_blob;

/* kind "sev-snp": report = the 1184-byte ATTESTATION_REPORT, certs = PEM
 * bundles or DER certificates, filed under vcek/vlek/ask/asvk/ark by their
 * subject CN; kind "tdx": report = the quote, no certs (the quote carries its
 * PCK chain); kind "aws-nitro": report = the Nitro Enclaves attestation
 * document (COSE_Sign1), no certs (it carries its cabundle); kind
 * "azure-cvm": the attester's JSON. sev-snp, tdx and aws-nitro reports may be
 * binary, hex or base64 text; *format (when not NULL) says which was read
 * (NULL for azure-cvm). The report is parsed (not verified) first. */
SL_MUST_USE sl_err sl_evidence_import(const char *kind, const uint8_t *report, size_t len,
                                      const sl_blob *certs, size_t ncerts, json_t **out,
                                      const char **format);
/* Adds a TDX CCEL event log (the ACPI CCEL table's log area) to tdx evidence. */
SL_MUST_USE sl_err sl_evidence_add_ccel(json_t *ev, const uint8_t *log, size_t len);

#endif
