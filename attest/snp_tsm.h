/* configfs-tsm report collection (Linux >= 6.7, Documentation/ABI/testing/
 * configfs-tsm) shared by the SEV-SNP and TDX kinds, and the SNP
 * certificate table of auxblob / SNP_GET_EXT_REPORT (GHCB spec, cert_table). */
#ifndef SECLAUNCH_ATTEST_SNP_TSM_H
#define SECLAUNCH_ATTEST_SNP_TSM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

#define SL_TSM_DEFAULT_ROOT "/sys/kernel/config/tsm/report"

/* In entry: checks provider == want_provider, reads generation, writes the
 * 64-byte inblob, reads outblob and (if aux != NULL) auxblob, reads
 * generation again and requires exactly one increment (our own write), so a
 * concurrent writer cannot hand us a report for their inblob. */
SL_MUST_USE sl_err sl_tsm_entry_report(const char *entry, const char *want_provider,
                                       const uint8_t inblob[static 64], uint8_t **out,
                                       size_t *outlen, uint8_t **aux, size_t *auxlen);
/* All of the above: create, report, remove. */
SL_MUST_USE sl_err sl_tsm_report(const char *root, const char *want_provider,
                                 const uint8_t inblob[static 64], uint8_t **out, size_t *outlen,
                                 uint8_t **aux, size_t *auxlen);

/* The SNP certificate table (GUID, offset, length entries ending with a zero
 * entry) into an evidence "certs" object {"vcek","vlek","ask","asvk","ark": b64}.
 * Unknown GUIDs are skipped. */
SL_MUST_USE sl_err sl_snp_cert_table_to_json(const uint8_t *p, size_t len, json_t *certs);

#endif
