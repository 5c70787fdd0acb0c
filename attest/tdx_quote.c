/* TDX quote v4/v5 parser: header, TD report body (1.0 / 1.5), ECDSA quote
 * signature data, QE report certification data (type 6) wrapping the QE
 * report, its signature, the QE authentication data and the PCK chain (type 5). */
#include <string.h>

#include "tdx_quote.h"
#include "seclaunch/buf.h"

#define ATT_KEY_ECDSA_P256 2
#define TEE_TYPE_TDX 0x81
#define CERT_TYPE_PCK_CHAIN 5
#define CERT_TYPE_QE_REPORT 6
#define MAX_SIG_DATA (64 * 1024)

static SL_RESULT parse_body(sl_reader *r, sl_tdx_body *b, bool v15)
{
	sl_err rc = SL_E_ATTEST_FORMAT;

	SL_GUARD(sl_read_bytes(r, b->tee_tcb_svn, 16, "body.tee_tcb_svn"));
	SL_GUARD(sl_read_bytes(r, b->mrseam, 48, "body.mrseam"));
	SL_GUARD(sl_read_bytes(r, b->mrsignerseam, 48, "body.mrsignerseam"));
	SL_GUARD(sl_read_bytes(r, b->seam_attributes, 8, "body.seam_attributes"));
	SL_GUARD(sl_read_bytes(r, b->td_attributes, 8, "body.td_attributes"));
	SL_GUARD(sl_read_bytes(r, b->xfam, 8, "body.xfam"));
	SL_GUARD(sl_read_bytes(r, b->mrtd, 48, "body.mrtd"));
	SL_GUARD(sl_read_bytes(r, b->mrconfigid, 48, "body.mrconfigid"));
	SL_GUARD(sl_read_bytes(r, b->mrowner, 48, "body.mrowner"));
	SL_GUARD(sl_read_bytes(r, b->mrownerconfig, 48, "body.mrownerconfig"));
	for (int i = 0; i < 4; i++)
		SL_GUARD(sl_read_bytes(r, b->rtmr[i], 48, "body.rtmr"));
	SL_GUARD(sl_read_bytes(r, b->report_data, 64, "body.report_data"));
	b->v15 = v15;
	if (v15) {
		SL_GUARD(sl_read_bytes(r, b->tee_tcb_svn2, 16, "body.tee_tcb_svn2"));
		SL_GUARD(sl_read_bytes(r, b->mrservicetd, 48, "body.mrservicetd"));
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT parse_qe_report(sl_reader *r, sl_tdx_qe_report *q)
{
	sl_err rc = SL_E_ATTEST_FORMAT;

	SL_GUARD(sl_read_bytes(r, q->cpusvn, 16, "qe_report.cpusvn"));
	SL_GUARD(sl_read_u32le(r, &q->miscselect, "qe_report.miscselect"));
	SL_GUARD(sl_read_skip(r, 28, "qe_report.reserved1"));
	SL_GUARD(sl_read_bytes(r, q->attributes, 16, "qe_report.attributes"));
	SL_GUARD(sl_read_bytes(r, q->mrenclave, 32, "qe_report.mrenclave"));
	SL_GUARD(sl_read_skip(r, 32, "qe_report.reserved2"));
	SL_GUARD(sl_read_bytes(r, q->mrsigner, 32, "qe_report.mrsigner"));
	SL_GUARD(sl_read_skip(r, 96, "qe_report.reserved3"));
	SL_GUARD(sl_read_u16le(r, &q->isvprodid, "qe_report.isvprodid"));
	SL_GUARD(sl_read_u16le(r, &q->isvsvn, "qe_report.isvsvn"));
	SL_GUARD(sl_read_skip(r, 60, "qe_report.reserved4"));
	SL_GUARD(sl_read_bytes(r, q->report_data, 64, "qe_report.report_data"));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT parse_sig_data(sl_reader *r, sl_tdx_quote *q)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint16_t type = 0;
	uint32_t size = 0;
	sl_reader cd, qr, chain;

	SL_GUARD(sl_read_view(r, 64, &q->sig, "quote_signature"));
	SL_GUARD(sl_read_view(r, 64, &q->attest_key, "attestation_key"));
	SL_GUARD(sl_read_u16le(r, &type, "certification_data.type"));
	SL_ENSURE(type == CERT_TYPE_QE_REPORT, SL_E_ATTEST_FORMAT,
	          "TDX quote: certification_data.type %u, want 6 (QE report certification data)",
	          type);
	SL_GUARD(sl_read_u32le(r, &size, "certification_data.size"));
	SL_GUARD(sl_read_sub(r, size, &cd, "certification_data"));
	SL_GUARD(sl_read_view(&cd, SL_TDX_QE_REPORT_LEN, &q->qe_report_raw, "qe_report"));
	sl_reader_init(&qr, q->qe_report_raw, SL_TDX_QE_REPORT_LEN, "QE report");
	SL_GUARD(parse_qe_report(&qr, &q->qe_report));
	SL_GUARD(sl_read_view(&cd, 64, &q->qe_report_sig, "qe_report_signature"));
	uint16_t alen = 0;
	SL_GUARD(sl_read_u16le(&cd, &alen, "qe_auth_data.size"));
	q->qe_auth_len = alen;
	SL_GUARD(sl_read_view(&cd, alen, &q->qe_auth, "qe_auth_data"));
	SL_GUARD(sl_read_u16le(&cd, &type, "qe_certification_data.type"));
	SL_ENSURE(type == CERT_TYPE_PCK_CHAIN, SL_E_ATTEST_FORMAT,
	          "TDX quote: qe_certification_data.type %u, want 5 (PCK certificate chain)", type);
	SL_GUARD(sl_read_u32le(&cd, &size, "qe_certification_data.size"));
	SL_GUARD(sl_read_sub(&cd, size, &chain, "pck_cert_chain"));
	SL_GUARD(sl_read_view(&chain, size, &q->pck_chain, "pck_cert_chain"));
	q->pck_chain_len = size;
	SL_GUARD(sl_reader_expect_end(&cd));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_tdx_quote_parse(const uint8_t *p, size_t len, sl_tdx_quote *q)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r, sd;
	uint16_t rsv = 0;
	uint32_t sig_len = 0;

	memset(q, 0, sizeof(*q));
	sl_reader_init(&r, p, len, "TDX quote");
	SL_GUARD(sl_read_u16le(&r, &q->version, "header.version"));
	SL_ENSURE(q->version == 4 || q->version == 5, SL_E_ATTEST_FORMAT,
	          "TDX quote: header.version %u is not supported (4, 5)", q->version);
	SL_GUARD(sl_read_u16le(&r, &q->att_key_type, "header.att_key_type"));
	SL_ENSURE(q->att_key_type == ATT_KEY_ECDSA_P256, SL_E_ATTEST_FORMAT,
	          "TDX quote: header.att_key_type %u is not ECDSA P-256 (2)", q->att_key_type);
	SL_GUARD(sl_read_u32le(&r, &q->tee_type, "header.tee_type"));
	SL_ENSURE(q->tee_type == TEE_TYPE_TDX, SL_E_ATTEST_FORMAT,
	          "TDX quote: header.tee_type 0x%x is not TDX (0x81)", q->tee_type);
	SL_GUARD(sl_read_u16le(&r, &rsv, "header.reserved1"));
	SL_ENSURE(rsv == 0, SL_E_ATTEST_FORMAT, "TDX quote: header.reserved1 is not zero");
	SL_GUARD(sl_read_u16le(&r, &rsv, "header.reserved2"));
	SL_ENSURE(rsv == 0, SL_E_ATTEST_FORMAT, "TDX quote: header.reserved2 is not zero");
	SL_GUARD(sl_read_bytes(&r, q->qe_vendor_id, 16, "header.qe_vendor_id"));
	SL_GUARD(sl_read_bytes(&r, q->user_data, 20, "header.user_data"));
	q->body_type = 2;
	if (q->version == 5) {
		uint32_t bsize = 0;
		SL_GUARD(sl_read_u16le(&r, &q->body_type, "body_type"));
		SL_GUARD(sl_read_u32le(&r, &bsize, "body_size"));
		SL_ENSURE((q->body_type == 2 && bsize == SL_TDX_BODY10_LEN) ||
		              (q->body_type == 3 && bsize == SL_TDX_BODY15_LEN),
		          SL_E_ATTEST_FORMAT,
		          "TDX quote: body_type %u with body_size %u (want 2/584 or 3/648)",
		          q->body_type, bsize);
	}
	SL_GUARD(parse_body(&r, &q->body, q->body_type == 3));
	q->signed_part = p;
	q->signed_len = sl_reader_offset(&r);
	SL_GUARD(sl_read_u32le(&r, &sig_len, "signature_data_len"));
	SL_ENSURE(sig_len <= MAX_SIG_DATA, SL_E_ATTEST_FORMAT,
	          "TDX quote: signature_data_len %u too large", sig_len);
	SL_GUARD(sl_read_sub(&r, sig_len, &sd, "signature_data"));
	SL_GUARD(parse_sig_data(&sd, q));
	SL_GUARD(sl_reader_expect_end(&sd));
	rc = SL_OK;
out:
	if (rc != SL_OK && rc != SL_E_ATTEST_FORMAT)
		rc = sl_err_wrap(SL_E_ATTEST_FORMAT, "TDX quote");
	return rc;
}
