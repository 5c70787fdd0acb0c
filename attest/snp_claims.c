/* The claims of a verified SEV-SNP report (docs/evidence-sev-snp.md). */
#include <stdio.h>

#include "snp_report.h"

static SL_RESULT set_bool(sl_claims *c, const char *key, uint64_t word, int bit)
{
	return sl_claims_set(c, key, (word >> bit & 1) ? "true" : "false");
}

static SL_RESULT set_tcb(sl_claims *c, const char *prefix, uint64_t raw, enum sl_snp_product p)
{
	sl_err rc = SL_E_INTERNAL;
	sl_snp_tcb t;
	char key[64];

	sl_snp_tcb_decode(raw, p, &t);
	SL_GUARD(sl_claims_setf(c, prefix, "%016llx", (unsigned long long)raw));
	snprintf(key, sizeof(key), "%s.bootloader", prefix);
	SL_GUARD(sl_claims_setf(c, key, "%u", t.bootloader));
	snprintf(key, sizeof(key), "%s.tee", prefix);
	SL_GUARD(sl_claims_setf(c, key, "%u", t.tee));
	snprintf(key, sizeof(key), "%s.snp", prefix);
	SL_GUARD(sl_claims_setf(c, key, "%u", t.snp));
	snprintf(key, sizeof(key), "%s.microcode", prefix);
	SL_GUARD(sl_claims_setf(c, key, "%u", t.microcode));
	if (p == SL_SNP_PRODUCT_TURIN) {
		snprintf(key, sizeof(key), "%s.fmc", prefix);
		SL_GUARD(sl_claims_setf(c, key, "%u", t.fmc));
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT policy_claims(const sl_snp_report *r, sl_claims *c)
{
	sl_err rc = SL_E_INTERNAL;
	uint64_t p = r->policy;

	SL_GUARD(sl_claims_setf(c, "snp.policy", "0x%llx", (unsigned long long)p));
	SL_GUARD(sl_claims_setf(c, "snp.policy.abi_minor", "%u", (unsigned)(p & 0xff)));
	SL_GUARD(sl_claims_setf(c, "snp.policy.abi_major", "%u", (unsigned)(p >> 8 & 0xff)));
	SL_GUARD(set_bool(c, "snp.policy.smt", p, 16));
	SL_GUARD(set_bool(c, "snp.policy.migrate_ma", p, 18));
	SL_GUARD(set_bool(c, "snp.policy.debug", p, 19));
	SL_GUARD(set_bool(c, "snp.policy.single_socket", p, 20));
	SL_GUARD(set_bool(c, "snp.policy.cxl_allow", p, 21));
	SL_GUARD(set_bool(c, "snp.policy.mem_aes_256_xts", p, 22));
	SL_GUARD(set_bool(c, "snp.policy.rapl_dis", p, 23));
	SL_GUARD(set_bool(c, "snp.policy.ciphertext_hiding", p, 24));
	SL_GUARD(set_bool(c, "snp.policy.page_swap_disable", p, 25));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT platform_claims(const sl_snp_report *r, sl_claims *c)
{
	sl_err rc = SL_E_INTERNAL;
	uint64_t p = r->platform_info;

	SL_GUARD(sl_claims_setf(c, "snp.platform_info", "0x%llx", (unsigned long long)p));
	SL_GUARD(set_bool(c, "snp.platform_info.smt_en", p, 0));
	SL_GUARD(set_bool(c, "snp.platform_info.tsme_en", p, 1));
	SL_GUARD(set_bool(c, "snp.platform_info.ecc_en", p, 2));
	SL_GUARD(set_bool(c, "snp.platform_info.rapl_dis", p, 3));
	SL_GUARD(set_bool(c, "snp.platform_info.ciphertext_hiding_en", p, 4));
	SL_GUARD(set_bool(c, "snp.platform_info.alias_check_complete", p, 5));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_snp_claims(const sl_snp_report *r, enum sl_snp_product p, sl_claims *c)
{
	sl_err rc = SL_E_INTERNAL;

	SL_GUARD(sl_claims_set(c, "tee.kind", "sev-snp"));
	SL_GUARD(sl_claims_set(c, "snp.product", sl_snp_product_name(p)));
	SL_GUARD(sl_claims_setf(c, "snp.version", "%u", r->version));
	SL_GUARD(sl_claims_setf(c, "snp.guest_svn", "%u", r->guest_svn));
	SL_GUARD(sl_claims_setf(c, "snp.vmpl", "%u", r->vmpl));
	SL_GUARD(sl_claims_set_hex(c, "snp.measurement", r->measurement, sizeof(r->measurement)));
	SL_GUARD(sl_claims_set_hex(c, "snp.host_data", r->host_data, sizeof(r->host_data)));
	SL_GUARD(
	    sl_claims_set_hex(c, "snp.id_key_digest", r->id_key_digest, sizeof(r->id_key_digest)));
	SL_GUARD(sl_claims_set_hex(c, "snp.author_key_digest", r->author_key_digest,
	                           sizeof(r->author_key_digest)));
	SL_GUARD(set_bool(c, "snp.author_key_en", r->key_info, 0));
	SL_GUARD(sl_claims_set_hex(c, "snp.report_id", r->report_id, sizeof(r->report_id)));
	SL_GUARD(
	    sl_claims_set_hex(c, "snp.report_id_ma", r->report_id_ma, sizeof(r->report_id_ma)));
	SL_GUARD(sl_claims_set_hex(c, "snp.family_id", r->family_id, sizeof(r->family_id)));
	SL_GUARD(sl_claims_set_hex(c, "snp.image_id", r->image_id, sizeof(r->image_id)));
	SL_GUARD(sl_claims_set_hex(c, "snp.report_data", r->report_data, sizeof(r->report_data)));
	SL_GUARD(sl_claims_set_hex(c, "snp.chip_id", r->chip_id, sizeof(r->chip_id)));
	SL_GUARD(policy_claims(r, c));
	SL_GUARD(platform_claims(r, c));
	SL_GUARD(set_tcb(c, "snp.reported_tcb", r->reported_tcb, p));
	SL_GUARD(set_tcb(c, "snp.committed_tcb", r->committed_tcb, p));
	SL_GUARD(set_tcb(c, "snp.current_tcb", r->current_tcb, p));
	SL_GUARD(set_tcb(c, "snp.launch_tcb", r->launch_tcb, p));
	SL_GUARD(sl_claims_setf(c, "snp.current_version", "%u.%u.%u", r->current_major,
	                        r->current_minor, r->current_build));
	SL_GUARD(sl_claims_setf(c, "snp.committed_version", "%u.%u.%u", r->committed_major,
	                        r->committed_minor, r->committed_build));
	if (r->has_cpuid) {
		SL_GUARD(sl_claims_setf(c, "snp.cpuid.family", "0x%02x", r->cpuid_fam));
		SL_GUARD(sl_claims_setf(c, "snp.cpuid.model", "0x%02x", r->cpuid_model));
		SL_GUARD(sl_claims_setf(c, "snp.cpuid.stepping", "0x%02x", r->cpuid_step));
	}
	if (r->has_mit) {
		SL_GUARD(sl_claims_setf(c, "snp.launch_mit_vector", "0x%llx",
		                        (unsigned long long)r->launch_mit_vector));
		SL_GUARD(sl_claims_setf(c, "snp.current_mit_vector", "0x%llx",
		                        (unsigned long long)r->current_mit_vector));
	}
	rc = SL_OK;
out:
	return rc;
}
