/* Wrapping a raw SEV-SNP report or TDX quote collected elsewhere into
 * evidence JSON (`seclaunch evidence import`). No OpenSSL types here: the
 * launcher includes this header. */
#ifndef SECLAUNCH_ATTEST_SNP_IMPORT_H
#define SECLAUNCH_ATTEST_SNP_IMPORT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

typedef struct sl_blob {
	const uint8_t *p;
	size_t len;
	const char *name; /* for messages */
} sl_blob;

/* kind "sev-snp": report = the 1184-byte ATTESTATION_REPORT (or its hex),
 * certs = PEM bundles or DER certificates, filed under vcek/vlek/ask/asvk/ark
 * by their subject CN; kind "tdx": report = the quote, no certs (the quote
 * carries its PCK chain). The report is parsed (not verified) first. */
SL_MUST_USE sl_err sl_evidence_import(const char *kind, const uint8_t *report, size_t len,
                                      const sl_blob *certs, size_t ncerts, json_t **out);
/* Adds a TDX CCEL event log (the ACPI CCEL table's log area) to tdx evidence. */
SL_MUST_USE sl_err sl_evidence_add_ccel(json_t *ev, const uint8_t *log, size_t len);

#endif
