/* AMD SEV-SNP ATTESTATION_REPORT parsing and verification (private to attest/).
 *
 * Layout: AMD SEV-SNP ABI specification (56860), "ATTESTATION_REPORT
 * Structure". docs/evidence-sev-snp.md lists the fields read per version. */
#ifndef SECLAUNCH_ATTEST_SNP_REPORT_H
#define SECLAUNCH_ATTEST_SNP_REPORT_H

#include <openssl/x509.h>
#include <stdbool.h>
#include <stdint.h>

#include "seclaunch/attest.h"

#define SL_SNP_REPORT_LEN 1184
#define SL_SNP_SIGNED_LEN 0x2A0 /* the signature covers bytes 0x000..0x29F */
#define SL_SNP_REPORT_DATA_LEN 64

enum sl_snp_product {
	SL_SNP_PRODUCT_UNKNOWN = 0,
	SL_SNP_PRODUCT_MILAN,
	SL_SNP_PRODUCT_GENOA,
	SL_SNP_PRODUCT_TURIN,
};

enum sl_snp_signing_key {
	SL_SNP_KEY_VCEK = 0,
	SL_SNP_KEY_VLEK = 1,
	SL_SNP_KEY_NONE = 7,
};

/* TCB_VERSION, decoded for a product (Turin moved the fields and added FMC). */
typedef struct sl_snp_tcb {
	uint8_t bootloader, tee, snp, microcode, fmc;
} sl_snp_tcb;

typedef struct sl_snp_report {
	uint32_t version;
	uint32_t guest_svn;
	uint64_t policy;
	uint8_t family_id[16];
	uint8_t image_id[16];
	uint32_t vmpl;
	uint32_t sig_algo;
	uint64_t current_tcb;
	uint64_t platform_info;
	uint32_t key_info; /* author_key_en bit 0, mask_chip_key bit 1, signing_key bits 4:2 */
	uint8_t report_data[SL_SNP_REPORT_DATA_LEN];
	uint8_t measurement[48];
	uint8_t host_data[32];
	uint8_t id_key_digest[48];
	uint8_t author_key_digest[48];
	uint8_t report_id[32];
	uint8_t report_id_ma[32];
	uint64_t reported_tcb;
	bool has_cpuid; /* version >= 3 */
	uint8_t cpuid_fam, cpuid_model, cpuid_step;
	uint8_t chip_id[64];
	uint64_t committed_tcb;
	uint8_t current_build, current_minor, current_major;
	uint8_t committed_build, committed_minor, committed_major;
	uint64_t launch_tcb;
	bool has_mit; /* version >= 5 */
	uint64_t launch_mit_vector, current_mit_vector;
	uint8_t sig_r[72], sig_s[72]; /* little-endian */
} sl_snp_report;

/* Parses exactly SL_SNP_REPORT_LEN bytes; unknown versions, a signature
 * algorithm other than ECDSA P-384/SHA-384 and nonzero reserved fields fail
 * with SL_E_ATTEST_FORMAT naming the field. */
SL_MUST_USE sl_err sl_snp_report_parse(const uint8_t *p, size_t len, sl_snp_report *out);

/* The product the report's CPUID says (version >= 3), else UNKNOWN. */
enum sl_snp_product sl_snp_product_from_cpuid(const sl_snp_report *r);
const char *sl_snp_product_name(enum sl_snp_product p);
void sl_snp_tcb_decode(uint64_t raw, enum sl_snp_product p, sl_snp_tcb *out);

/* Verifies a raw report: signature with the VCEK/VLEK, the chain to a pinned
 * ARK at o->at, hwID and TCB extensions against the report. Certificates
 * come from o->collateral_dir first, then from ev_certs (may be NULL).
 * check_binding: report_data must equal o->expect zero-padded (unless
 * o->no_binding); Azure passes false and checks report_data itself. Adds the
 * snp.* claims and tee.kind. */
SL_MUST_USE sl_err sl_snp_verify_report(const uint8_t *report, size_t len,
                                        STACK_OF(X509) * ev_certs, const sl_verify_opts *o,
                                        bool check_binding, sl_claims *claims);

/* Adds the report's claims (snp.*, tee.kind) for product p (snp_claims.c). */
SL_MUST_USE sl_err sl_snp_claims(const sl_snp_report *r, enum sl_snp_product p, sl_claims *c);

/* The evidence's "certs" object (vcek, vlek, ask, asvk, ark: base64 DER)
 * appended to st; absent is fine, unknown keys fail (snp_evidence.c). */
SL_MUST_USE sl_err sl_snp_ev_certs(const json_t *ev, STACK_OF(X509) * st);

/* When SECLAUNCH_AMD_KDS is set: fetches the report's VCEK and its product's
 * cert chain from AMD KDS into dir (the cache) unless already there
 * (snp_kds.c). A no-op otherwise. */
SL_MUST_USE sl_err sl_snp_kds_fetch(const char *dir, const sl_snp_report *r);

/* Shared binding check for 64-byte REPORT_DATA fields (SNP and TDX): equal
 * to o->expect zero-padded, or binding=unchecked when o->no_binding. */
SL_MUST_USE sl_err sl_tee_check_report_data(const uint8_t rd[static 64], const sl_verify_opts *o,
                                            const char *what, sl_claims *claims);

#endif
