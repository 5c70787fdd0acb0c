/* NVIDIA GPU attestation report (private to attest/): an SPDM 1.1
 * GET_MEASUREMENTS request followed by its signed MEASUREMENTS response
 * (docs/evidence-nvidia-gpu.md has the byte layout). The parser walks the
 * structure field by field through sl_reader; pointers in the parsed report
 * borrow the caller's buffer. */
#ifndef SECLAUNCH_ATTEST_NVGPU_REPORT_H
#define SECLAUNCH_ATTEST_NVGPU_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

#define SL_NVGPU_SPDM_VERSION 0x11 /* SPDM 1.1 */
#define SL_NVGPU_GET_MEASUREMENTS 0xE0
#define SL_NVGPU_MEASUREMENTS 0x60
#define SL_NVGPU_NONCE_LEN 32
#define SL_NVGPU_REQUEST_LEN 37 /* 4 header + nonce + slot id */
#define SL_NVGPU_SIG_LEN 96     /* ECDSA P-384 r || s */
#define SL_NVGPU_MAX_BLOCKS 255 /* the response's block count is one byte */
#define SL_NVGPU_MAX_TLVS 64
#define SL_NVGPU_MAX_REPORT 8192 /* NVML's report buffer */

/* NVIDIA opaque-data field types (the TLVs after the response nonce). */
enum {
	SL_NVGPU_OPQ_CERT_ISSUER_NAME = 1,
	SL_NVGPU_OPQ_CERT_AKI = 2,
	SL_NVGPU_OPQ_DRIVER_VERSION = 3,
	SL_NVGPU_OPQ_GPU_INFO = 4,
	SL_NVGPU_OPQ_SKU = 5,
	SL_NVGPU_OPQ_VBIOS_VERSION = 6,
	SL_NVGPU_OPQ_NVDEC0_STATUS = 11,
	SL_NVGPU_OPQ_MSRSCNT = 12,
	SL_NVGPU_OPQ_CPRINFO = 13,
	SL_NVGPU_OPQ_BOARD_ID = 14,
	SL_NVGPU_OPQ_CHIP_SKU = 15,
	SL_NVGPU_OPQ_CHIP_SKU_MOD = 16,
	SL_NVGPU_OPQ_PROJECT = 17,
	SL_NVGPU_OPQ_PROJECT_SKU = 18,
	SL_NVGPU_OPQ_PROJECT_SKU_MOD = 19,
	SL_NVGPU_OPQ_FWID = 20,
	SL_NVGPU_OPQ_PROTECTED_PCIE_STATUS = 21,
	SL_NVGPU_OPQ_OPAQUE_DATA_VERSION = 34,
	SL_NVGPU_OPQ_CHIP_INFO = 35,
	SL_NVGPU_OPQ_FEATURE_FLAG = 36,
};

typedef struct sl_nvgpu_block {
	uint8_t index;      /* measurement index, 1..254 */
	uint8_t spec;       /* MeasurementSpecification: 0x01 = DMTF */
	uint8_t value_type; /* DMTFSpecMeasurementValueType */
	uint16_t value_len;
	const uint8_t *value;
} sl_nvgpu_block;

typedef struct sl_nvgpu_tlv {
	uint16_t type;
	uint16_t len;
	const uint8_t *value;
} sl_nvgpu_tlv;

typedef struct sl_nvgpu_report {
	/* request */
	uint8_t req_version, req_code, req_param1, req_param2;
	const uint8_t *req_nonce; /* SL_NVGPU_NONCE_LEN */
	uint8_t req_slot_id;
	/* response */
	uint8_t rsp_version, rsp_code, rsp_param1, rsp_param2;
	uint8_t num_blocks;
	uint32_t record_len; /* u24 */
	sl_nvgpu_block blocks[SL_NVGPU_MAX_BLOCKS];
	size_t nblocks;
	const uint8_t *rsp_nonce; /* the responder's own nonce */
	uint16_t opaque_len;
	sl_nvgpu_tlv tlvs[SL_NVGPU_MAX_TLVS];
	size_t ntlvs;
	/* what the signature covers: request || response up to the signature */
	const uint8_t *signed_data;
	size_t signed_len;
	const uint8_t *sig;    /* SL_NVGPU_SIG_LEN */
	size_t trailing_zeros; /* zero padding after the signature (not signed) */
} sl_nvgpu_report;

/* Parses and checks the structure (versions, codes, lengths, no duplicate
 * measurement index or opaque type). Bytes after the signature must be zero
 * padding; anything else fails with "trailing bytes". */
SL_MUST_USE sl_err sl_nvgpu_report_parse(const uint8_t *p, size_t len, sl_nvgpu_report *r);
/* The opaque field of that type, NULL when absent. */
const sl_nvgpu_tlv *sl_nvgpu_report_tlv(const sl_nvgpu_report *r, uint16_t type);
/* The measurement block with that index, NULL when absent. */
const sl_nvgpu_block *sl_nvgpu_report_block(const sl_nvgpu_report *r, uint8_t index);

#endif
