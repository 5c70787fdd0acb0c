/* Azure confidential VM evidence (private to attest/): the HCL report the
 * paravisor stores in vTPM NV index 0x01400001, holding the hardware report
 * (SEV-SNP ATTESTATION_REPORT, or a TDX TDREPORT whose quote comes
 * separately) and the runtime data JSON (vTPM AK and EK public keys as JWKs,
 * VM configuration) whose SHA-256 is the hardware report's report_data. */
#ifndef SECLAUNCH_ATTEST_AZURE_HCL_H
#define SECLAUNCH_ATTEST_AZURE_HCL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/attest.h"

#define SL_HCL_HEADER_LEN 32
#define SL_HCL_HW_REPORT_LEN 1184
#define SL_HCL_TDREPORT_LEN 1024
#define SL_HCL_REPORT_TYPE_SNP 2
#define SL_HCL_REPORT_TYPE_TDX 4

typedef struct sl_hcl_report {
	uint32_t version; /* 1 or 2 */
	uint32_t report_type;
	const uint8_t *hw_report; /* SL_HCL_HW_REPORT_LEN bytes */
	const uint8_t *runtime;   /* variable_data: the runtime JSON (no NUL padding) */
	size_t runtime_len;
	uint8_t report_data[64]; /* SNP report_data / TDREPORT report_data */
} sl_hcl_report;

/* Parses an HCL report (views into p). SL_E_ATTEST_FORMAT naming the field. */
SL_MUST_USE sl_err sl_hcl_parse(const uint8_t *p, size_t len, sl_hcl_report *out);

/* Verifies an "azure-cvm" evidence object (docs/evidence-azure-cvm.md in
 * docs/evidence-sev-snp.md): hardware report, runtime data binding, the vTPM
 * AK from the runtime data, and the vTPM quote by that AK with the binding. */
SL_MUST_USE sl_err sl_azure_verify(const json_t *ev, const sl_verify_opts *o, sl_claims *claims);

/* Converts evidence as the CoCo attestation agent writes it (az-snp-vtpm /
 * az-tdx-vtpm, versions 0..2: byte arrays, hex, base64url) into "azure-cvm"
 * evidence JSON. */
SL_MUST_USE sl_err sl_azure_import(const json_t *in, json_t **out);

#endif
