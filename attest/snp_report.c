/* SEV-SNP ATTESTATION_REPORT parser. Every byte goes through sl_reader; the
 * field names in errors are the ABI specification's names in lower case. */
#include <string.h>

#include "snp_report.h"
#include "seclaunch/buf.h"

#define SIG_ALGO_ECDSA_P384_SHA384 1

static SL_RESULT read_tail(sl_reader *r, sl_snp_report *o)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t rsv = 0;

	SL_GUARD(sl_read_u64le(r, &o->committed_tcb, "committed_tcb"));
	SL_GUARD(sl_read_u8(r, &o->current_build, "current_build"));
	SL_GUARD(sl_read_u8(r, &o->current_minor, "current_minor"));
	SL_GUARD(sl_read_u8(r, &o->current_major, "current_major"));
	SL_GUARD(sl_read_u8(r, &rsv, "reserved 0x1eb"));
	SL_ENSURE(rsv == 0, SL_E_ATTEST_FORMAT, "SNP report: reserved byte 0x1eb is not zero");
	SL_GUARD(sl_read_u8(r, &o->committed_build, "committed_build"));
	SL_GUARD(sl_read_u8(r, &o->committed_minor, "committed_minor"));
	SL_GUARD(sl_read_u8(r, &o->committed_major, "committed_major"));
	SL_GUARD(sl_read_u8(r, &rsv, "reserved 0x1ef"));
	SL_ENSURE(rsv == 0, SL_E_ATTEST_FORMAT, "SNP report: reserved byte 0x1ef is not zero");
	SL_GUARD(sl_read_u64le(r, &o->launch_tcb, "launch_tcb"));
	if (o->version >= 5) {
		o->has_mit = true;
		SL_GUARD(sl_read_u64le(r, &o->launch_mit_vector, "launch_mit_vector"));
		SL_GUARD(sl_read_u64le(r, &o->current_mit_vector, "current_mit_vector"));
		SL_GUARD(sl_read_zeros(r, 0x2A0 - 0x208, "reserved 0x208..0x29f"));
	} else {
		SL_GUARD(sl_read_zeros(r, 0x2A0 - 0x1F8, "reserved 0x1f8..0x29f"));
	}
	SL_GUARD(sl_read_bytes(r, o->sig_r, sizeof(o->sig_r), "signature.r"));
	SL_GUARD(sl_read_bytes(r, o->sig_s, sizeof(o->sig_s), "signature.s"));
	SL_GUARD(sl_read_zeros(r, 512 - 144, "signature reserved"));
	SL_GUARD(sl_reader_expect_end(r));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_snp_report_parse(const uint8_t *p, size_t len, sl_snp_report *o)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r;
	uint32_t rsv32 = 0;

	memset(o, 0, sizeof(*o));
	SL_ENSURE(len == SL_SNP_REPORT_LEN, SL_E_ATTEST_FORMAT,
	          "SNP report: %zu bytes, an ATTESTATION_REPORT has %d", len, SL_SNP_REPORT_LEN);
	sl_reader_init(&r, p, len, "SNP report");
	SL_GUARD(sl_read_u32le(&r, &o->version, "version"));
	/* 2: original layout; 3 and 4: CPUID family/model/stepping at 0x188;
	 * 5: also LAUNCH_MIT_VECTOR / CURRENT_MIT_VECTOR at 0x1f8. */
	SL_ENSURE(o->version >= 2 && o->version <= 5, SL_E_ATTEST_FORMAT,
	          "SNP report: version %u is not supported (2..5)", o->version);
	SL_GUARD(sl_read_u32le(&r, &o->guest_svn, "guest_svn"));
	SL_GUARD(sl_read_u64le(&r, &o->policy, "policy"));
	/* bit 17 is reserved and must be one; bits 63:26 are reserved, zero */
	SL_ENSURE((o->policy >> 17 & 1) == 1, SL_E_ATTEST_FORMAT,
	          "SNP report: policy bit 17 (reserved, must be one) is zero");
	SL_ENSURE(o->policy >> 26 == 0, SL_E_ATTEST_FORMAT,
	          "SNP report: policy reserved bits 63:26 are not zero (0x%llx)",
	          (unsigned long long)o->policy);
	SL_GUARD(sl_read_bytes(&r, o->family_id, sizeof(o->family_id), "family_id"));
	SL_GUARD(sl_read_bytes(&r, o->image_id, sizeof(o->image_id), "image_id"));
	SL_GUARD(sl_read_u32le(&r, &o->vmpl, "vmpl"));
	SL_ENSURE(o->vmpl <= 3, SL_E_ATTEST_FORMAT, "SNP report: vmpl %u out of range 0..3",
	          o->vmpl);
	SL_GUARD(sl_read_u32le(&r, &o->sig_algo, "signature_algo"));
	SL_ENSURE(o->sig_algo == SIG_ALGO_ECDSA_P384_SHA384, SL_E_ATTEST_FORMAT,
	          "SNP report: signature_algo %u is not ECDSA P-384 with SHA-384 (1)", o->sig_algo);
	SL_GUARD(sl_read_u64le(&r, &o->current_tcb, "current_tcb"));
	SL_GUARD(sl_read_u64le(&r, &o->platform_info, "platform_info"));
	SL_GUARD(sl_read_u32le(&r, &o->key_info, "key_info"));
	SL_ENSURE(o->key_info >> 5 == 0, SL_E_ATTEST_FORMAT,
	          "SNP report: key_info reserved bits 31:5 are not zero (0x%x)", o->key_info);
	uint32_t key = o->key_info >> 2 & 7;
	SL_ENSURE(key == SL_SNP_KEY_VCEK || key == SL_SNP_KEY_VLEK || key == SL_SNP_KEY_NONE,
	          SL_E_ATTEST_FORMAT, "SNP report: signing_key %u is reserved", key);
	SL_GUARD(sl_read_u32le(&r, &rsv32, "reserved 0x4c"));
	SL_ENSURE(rsv32 == 0, SL_E_ATTEST_FORMAT, "SNP report: reserved 0x4c is not zero");
	SL_GUARD(sl_read_bytes(&r, o->report_data, sizeof(o->report_data), "report_data"));
	SL_GUARD(sl_read_bytes(&r, o->measurement, sizeof(o->measurement), "measurement"));
	SL_GUARD(sl_read_bytes(&r, o->host_data, sizeof(o->host_data), "host_data"));
	SL_GUARD(sl_read_bytes(&r, o->id_key_digest, sizeof(o->id_key_digest), "id_key_digest"));
	SL_GUARD(sl_read_bytes(&r, o->author_key_digest, sizeof(o->author_key_digest),
	                       "author_key_digest"));
	SL_GUARD(sl_read_bytes(&r, o->report_id, sizeof(o->report_id), "report_id"));
	SL_GUARD(sl_read_bytes(&r, o->report_id_ma, sizeof(o->report_id_ma), "report_id_ma"));
	SL_GUARD(sl_read_u64le(&r, &o->reported_tcb, "reported_tcb"));
	if (o->version >= 3) {
		o->has_cpuid = true;
		SL_GUARD(sl_read_u8(&r, &o->cpuid_fam, "cpuid_fam_id"));
		SL_GUARD(sl_read_u8(&r, &o->cpuid_model, "cpuid_mod_id"));
		SL_GUARD(sl_read_u8(&r, &o->cpuid_step, "cpuid_step"));
		SL_GUARD(sl_read_zeros(&r, 0x1A0 - 0x18B, "reserved 0x18b..0x19f"));
	} else {
		SL_GUARD(sl_read_zeros(&r, 0x1A0 - 0x188, "reserved 0x188..0x19f"));
	}
	SL_GUARD(sl_read_bytes(&r, o->chip_id, sizeof(o->chip_id), "chip_id"));
	SL_GUARD(read_tail(&r, o));
	rc = SL_OK;
out:
	if (rc != SL_OK && rc != SL_E_ATTEST_FORMAT)
		rc = sl_err_wrap(SL_E_ATTEST_FORMAT, "SNP report");
	return rc;
}

enum sl_snp_product sl_snp_product_from_cpuid(const sl_snp_report *r)
{
	if (!r->has_cpuid)
		return SL_SNP_PRODUCT_UNKNOWN;
	/* family 19h: models 00h-0Fh Milan, 10h-1Fh and A0h-AFh Genoa (incl.
	 * Bergamo/Siena); family 1Ah: models 00h-1Fh Turin */
	if (r->cpuid_fam == 0x19 && r->cpuid_model <= 0x0F)
		return SL_SNP_PRODUCT_MILAN;
	if (r->cpuid_fam == 0x19 && ((r->cpuid_model >= 0x10 && r->cpuid_model <= 0x1F) ||
	                             (r->cpuid_model >= 0xA0 && r->cpuid_model <= 0xAF)))
		return SL_SNP_PRODUCT_GENOA;
	if (r->cpuid_fam == 0x1A && r->cpuid_model <= 0x1F)
		return SL_SNP_PRODUCT_TURIN;
	return SL_SNP_PRODUCT_UNKNOWN;
}

const char *sl_snp_product_name(enum sl_snp_product p)
{
	switch (p) {
	case SL_SNP_PRODUCT_MILAN:
		return "Milan";
	case SL_SNP_PRODUCT_GENOA:
		return "Genoa";
	case SL_SNP_PRODUCT_TURIN:
		return "Turin";
	default:
		return "unknown";
	}
}

void sl_snp_tcb_decode(uint64_t raw, enum sl_snp_product p, sl_snp_tcb *t)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(raw >> (8 * i));
	memset(t, 0, sizeof(*t));
	if (p == SL_SNP_PRODUCT_TURIN) {
		/* Turin: fmc, bootloader, tee, snp, reserved[3], microcode */
		t->fmc = b[0];
		t->bootloader = b[1];
		t->tee = b[2];
		t->snp = b[3];
		t->microcode = b[7];
	} else {
		/* Milan/Genoa: bootloader, tee, reserved[4], snp, microcode */
		t->bootloader = b[0];
		t->tee = b[1];
		t->snp = b[6];
		t->microcode = b[7];
	}
}
