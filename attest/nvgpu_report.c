/* NVIDIA GPU attestation report parser: SPDM 1.1 GET_MEASUREMENTS request,
 * MEASUREMENTS response with DMTF measurement blocks, NVIDIA opaque-data
 * TLVs and the ECDSA P-384 signature. Every byte goes through sl_reader. */
#include <stdbool.h>
#include <string.h>

#include "nvgpu_report.h"
#include "seclaunch/buf.h"

static SL_RESULT read_u24le(sl_reader *r, uint32_t *v, const char *field)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t b[3];
	SL_GUARD(sl_read_bytes(r, b, sizeof(b), field));
	*v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16;
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT parse_request(sl_reader *r, sl_nvgpu_report *o)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	SL_GUARD(sl_read_u8(r, &o->req_version, "request.spdm_version"));
	SL_GUARD(sl_read_u8(r, &o->req_code, "request.request_response_code"));
	SL_GUARD(sl_read_u8(r, &o->req_param1, "request.param1"));
	SL_GUARD(sl_read_u8(r, &o->req_param2, "request.param2"));
	SL_GUARD(sl_read_view(r, SL_NVGPU_NONCE_LEN, &o->req_nonce, "request.nonce"));
	SL_GUARD(sl_read_u8(r, &o->req_slot_id, "request.slot_id_param"));
	SL_ENSURE(o->req_version == SL_NVGPU_SPDM_VERSION, SL_E_ATTEST_FORMAT,
	          "GPU report: request.spdm_version 0x%02x is not 0x11 (SPDM 1.1)", o->req_version);
	SL_ENSURE(o->req_code == SL_NVGPU_GET_MEASUREMENTS, SL_E_ATTEST_FORMAT,
	          "GPU report: request.request_response_code 0x%02x is not GET_MEASUREMENTS (0xe0)",
	          o->req_code);
	/* bit 0 of param1: a signature was requested; without it nothing is signed */
	SL_ENSURE((o->req_param1 & 0x01) != 0, SL_E_ATTEST_FORMAT,
	          "GPU report: request.param1 0x%02x does not ask for a signature", o->req_param1);
	rc = SL_OK;
out:
	return rc;
}

/* One measurement block: index, spec, size, then the DMTF value header. */
static SL_RESULT parse_block(sl_reader *rec, sl_nvgpu_block *b)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint16_t size = 0;
	sl_reader m;
	SL_GUARD(sl_read_u8(rec, &b->index, "measurement_block.index"));
	SL_GUARD(sl_read_u8(rec, &b->spec, "measurement_block.measurement_specification"));
	SL_GUARD(sl_read_u16le(rec, &size, "measurement_block.measurement_size"));
	SL_GUARD(sl_read_sub(rec, size, &m, "measurement_block.measurement"));
	SL_ENSURE(b->index != 0 && b->index != 0xFF, SL_E_ATTEST_FORMAT,
	          "GPU report: measurement_block.index %u is reserved", b->index);
	SL_ENSURE(b->spec == 0x01, SL_E_ATTEST_FORMAT,
	          "GPU report: measurement block %u: measurement_specification 0x%02x is not DMTF",
	          b->index, b->spec);
	SL_GUARD(sl_read_u8(&m, &b->value_type, "measurement.dmtf_value_type"));
	SL_GUARD(sl_read_u16le(&m, &b->value_len, "measurement.dmtf_value_size"));
	SL_GUARD(sl_read_view(&m, b->value_len, &b->value, "measurement.dmtf_value"));
	SL_GUARD(sl_reader_expect_end(&m));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT parse_record(sl_reader *r, sl_nvgpu_report *o)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader rec;
	bool seen[256] = {false};
	SL_GUARD(sl_read_u8(r, &o->num_blocks, "response.number_of_blocks"));
	SL_GUARD(read_u24le(r, &o->record_len, "response.measurement_record_length"));
	SL_GUARD(sl_read_sub(r, o->record_len, &rec, "response.measurement_record"));
	rec.what = "GPU measurement record";
	for (o->nblocks = 0; o->nblocks < o->num_blocks; o->nblocks++) {
		sl_nvgpu_block *b = &o->blocks[o->nblocks];
		SL_GUARD(parse_block(&rec, b));
		SL_ENSURE(!seen[b->index], SL_E_ATTEST_FORMAT,
		          "GPU report: measurement index %u appears twice", b->index);
		seen[b->index] = true;
	}
	SL_GUARD(sl_reader_expect_end(&rec));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT parse_opaque(sl_reader *r, sl_nvgpu_report *o)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader od;
	SL_GUARD(sl_read_u16le(r, &o->opaque_len, "response.opaque_length"));
	SL_GUARD(sl_read_sub(r, o->opaque_len, &od, "response.opaque_data"));
	od.what = "GPU opaque data";
	for (o->ntlvs = 0; sl_reader_left(&od) > 0; o->ntlvs++) {
		SL_ENSURE(o->ntlvs < SL_NVGPU_MAX_TLVS, SL_E_ATTEST_FORMAT,
		          "GPU report: more than %d opaque data fields", SL_NVGPU_MAX_TLVS);
		sl_nvgpu_tlv *t = &o->tlvs[o->ntlvs];
		SL_GUARD(sl_read_u16le(&od, &t->type, "opaque_field.data_type"));
		SL_GUARD(sl_read_u16le(&od, &t->len, "opaque_field.data_size"));
		SL_GUARD(sl_read_view(&od, t->len, &t->value, "opaque_field.data"));
		/* a second copy of a field would let a reader pick either */
		SL_ENSURE(sl_nvgpu_report_tlv(o, t->type) == NULL, SL_E_ATTEST_FORMAT,
		          "GPU report: opaque field type %u appears twice", t->type);
	}
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_nvgpu_report_parse(const uint8_t *p, size_t len, sl_nvgpu_report *o)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r;
	memset(o, 0, sizeof(*o));
	SL_ENSURE(len <= SL_NVGPU_MAX_REPORT, SL_E_ATTEST_FORMAT,
	          "GPU report: %zu bytes, more than %d", len, SL_NVGPU_MAX_REPORT);
	sl_reader_init(&r, p, len, "GPU report");
	SL_GUARD(parse_request(&r, o));
	SL_GUARD(sl_read_u8(&r, &o->rsp_version, "response.spdm_version"));
	SL_GUARD(sl_read_u8(&r, &o->rsp_code, "response.request_response_code"));
	SL_GUARD(sl_read_u8(&r, &o->rsp_param1, "response.param1"));
	SL_GUARD(sl_read_u8(&r, &o->rsp_param2, "response.param2"));
	SL_ENSURE(o->rsp_version == o->req_version, SL_E_ATTEST_FORMAT,
	          "GPU report: response.spdm_version 0x%02x differs from the request's 0x%02x",
	          o->rsp_version, o->req_version);
	SL_ENSURE(o->rsp_code == SL_NVGPU_MEASUREMENTS, SL_E_ATTEST_FORMAT,
	          "GPU report: response.request_response_code 0x%02x is not MEASUREMENTS (0x60)",
	          o->rsp_code);
	/* param2 bits 3..0: the slot whose key signed, which must be the one asked for */
	SL_ENSURE((o->rsp_param2 & 0x0F) == (o->req_slot_id & 0x0F), SL_E_ATTEST_FORMAT,
	          "GPU report: response.param2 slot %u differs from request.slot_id_param %u",
	          o->rsp_param2 & 0x0F, o->req_slot_id & 0x0F);
	SL_GUARD(parse_record(&r, o));
	SL_GUARD(sl_read_view(&r, SL_NVGPU_NONCE_LEN, &o->rsp_nonce, "response.nonce"));
	SL_GUARD(parse_opaque(&r, o));
	o->signed_data = p;
	o->signed_len = sl_reader_offset(&r);
	SL_GUARD(sl_read_view(&r, SL_NVGPU_SIG_LEN, &o->sig, "response.signature"));
	/* NVML hands the report in a fixed buffer; some captures keep zero bytes
	 * of it after the signature. They are not signed and never read, so only
	 * zeros are tolerated: any other byte is an addition. */
	o->trailing_zeros = sl_reader_left(&r);
	const uint8_t *tail = NULL;
	SL_GUARD(sl_read_view(&r, o->trailing_zeros, &tail, "trailing"));
	for (size_t i = 0; i < o->trailing_zeros; i++)
		SL_ENSURE(tail[i] == 0, SL_E_ATTEST_FORMAT,
		          "GPU report: %zu trailing bytes after the signature at offset %zu",
		          o->trailing_zeros, o->signed_len + SL_NVGPU_SIG_LEN);
	rc = SL_OK;
out:
	/* the reader reports input errors; in evidence they are malformed evidence */
	if (rc == SL_E_FORMAT)
		rc = SL_E_ATTEST_FORMAT;
	return rc;
}

const sl_nvgpu_tlv *sl_nvgpu_report_tlv(const sl_nvgpu_report *r, uint16_t type)
{
	for (size_t i = 0; i < r->ntlvs; i++) {
		if (r->tlvs[i].type == type)
			return &r->tlvs[i];
	}
	return NULL;
}

const sl_nvgpu_block *sl_nvgpu_report_block(const sl_nvgpu_report *r, uint8_t index)
{
	for (size_t i = 0; i < r->nblocks; i++) {
		if (r->blocks[i].index == index)
			return &r->blocks[i];
	}
	return NULL;
}
