/* HCL report parser (layout: docs/evidence-sev-snp.md, "Azure"). */
#include <string.h>

#include "azure_hcl.h"
#include "seclaunch/buf.h"

#define HCL_REQUEST_TYPE_ATTEST 2
#define HASH_TYPE_SHA256 1
#define TDREPORT_REPORT_DATA_OFF 128

sl_err sl_hcl_parse(const uint8_t *p, size_t len, sl_hcl_report *o)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r, igvm, td;
	const uint8_t *magic = NULL;
	uint32_t size = 0, req = 0, status = 0, dsize = 0, ver = 0, hash = 0, vsize = 0;

	memset(o, 0, sizeof(*o));
	sl_reader_init(&r, p, len, "HCL report");
	SL_GUARD(sl_read_view(&r, 4, &magic, "header.signature"));
	SL_ENSURE(memcmp(magic, "HCLA", 4) == 0, SL_E_ATTEST_FORMAT,
	          "HCL report: header.signature is not \"HCLA\"");
	SL_GUARD(sl_read_u32le(&r, &o->version, "header.version"));
	SL_ENSURE(o->version == 1 || o->version == 2, SL_E_ATTEST_FORMAT,
	          "HCL report: header.version %u is not supported (1, 2)", o->version);
	SL_GUARD(sl_read_u32le(&r, &size, "header.report_size"));
	SL_GUARD(sl_read_u32le(&r, &req, "header.request_type"));
	SL_ENSURE(req == HCL_REQUEST_TYPE_ATTEST, SL_E_ATTEST_FORMAT,
	          "HCL report: header.request_type %u is not an attestation request (2)", req);
	SL_GUARD(sl_read_u32le(&r, &status, "header.status"));
	SL_ENSURE(status == 0, SL_E_ATTEST_FORMAT, "HCL report: header.status %u (failed)", status);
	SL_GUARD(sl_read_skip(&r, 12, "header.reserved"));
	SL_GUARD(sl_read_view(&r, SL_HCL_HW_REPORT_LEN, &o->hw_report, "hw_report"));
	SL_GUARD(sl_read_u32le(&r, &dsize, "igvm.data_size"));
	SL_ENSURE(dsize >= 20, SL_E_ATTEST_FORMAT, "HCL report: igvm.data_size %u too small",
	          dsize);
	SL_GUARD(sl_read_sub(&r, dsize - 4, &igvm, "igvm request data"));
	SL_GUARD(sl_read_u32le(&igvm, &ver, "igvm.version"));
	SL_GUARD(sl_read_u32le(&igvm, &o->report_type, "igvm.report_type"));
	SL_ENSURE(o->report_type == SL_HCL_REPORT_TYPE_SNP ||
	              o->report_type == SL_HCL_REPORT_TYPE_TDX,
	          SL_E_ATTEST_FORMAT, "HCL report: igvm.report_type %u (want 2 SNP or 4 TDX)",
	          o->report_type);
	SL_GUARD(sl_read_u32le(&igvm, &hash, "igvm.report_data_hash_type"));
	SL_ENSURE(hash == HASH_TYPE_SHA256, SL_E_ATTEST_FORMAT,
	          "HCL report: igvm.report_data_hash_type %u is not SHA-256 (1)", hash);
	SL_GUARD(sl_read_u32le(&igvm, &vsize, "igvm.variable_data_size"));
	SL_GUARD(sl_read_view(&igvm, vsize, &o->runtime, "igvm.variable_data"));
	o->runtime_len = vsize;
	if (o->report_type == SL_HCL_REPORT_TYPE_SNP) {
		memcpy(o->report_data, o->hw_report + 0x50, 64);
	} else {
		sl_reader_init(&td, o->hw_report, SL_HCL_HW_REPORT_LEN, "TDREPORT");
		SL_GUARD(sl_read_skip(&td, TDREPORT_REPORT_DATA_OFF, "tdreport"));
		SL_GUARD(sl_read_bytes(&td, o->report_data, 64, "tdreport.report_data"));
		SL_GUARD(sl_read_skip(&td, SL_HCL_TDREPORT_LEN - TDREPORT_REPORT_DATA_OFF - 64,
		                      "tdreport"));
		SL_GUARD(sl_read_zeros(&td, SL_HCL_HW_REPORT_LEN - SL_HCL_TDREPORT_LEN,
		                       "hw_report padding after the TDREPORT"));
	}
	rc = SL_OK;
out:
	if (rc != SL_OK && rc != SL_E_ATTEST_FORMAT)
		rc = sl_err_wrap(SL_E_ATTEST_FORMAT, "HCL report");
	return rc;
}
