/* Claims of a verified NVIDIA GPU report (docs/evidence-nvidia-gpu.md lists
 * them with their sources). Only signed fields can make a claim favourable:
 * the driver's unsigned settings may only make gpu.cc / gpu.devtools worse. */
#include <ctype.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>

#include "nvgpu_int.h"
#include "x509_util.h"

#define OID_NV_SAN_DEVICE "1.3.6.1.4.1.412.274.1"

sl_err sl_nvgpu_vbios_string(const uint8_t *v, size_t len, char out[static 16])
{
	if (len != 8)
		return sl_err_set(SL_E_ATTEST_FORMAT,
		                  "GPU report: opaque VBIOS_VERSION is %zu bytes, not 8", len);
	/* the field is little-endian: the low 32-bit word printed as four
	 * hex pairs, most significant first, then byte 4 (the OEM revision) */
	snprintf(out, 16, "%02x.%02x.%02x.%02x.%02x", v[3], v[2], v[1], v[0], v[4]);
	return SL_OK;
}

/* A NUL-padded ASCII opaque field as a claim; anything unprintable fails. */
static SL_RESULT set_ascii(sl_claims *c, const char *key, const sl_nvgpu_tlv *t, const char *field)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	char buf[65];
	size_t n = 0;
	if (t == NULL)
		return SL_OK;
	while (n < t->len && t->value[n] != 0)
		n++;
	SL_ENSURE(n > 0 && n < sizeof(buf), SL_E_ATTEST_FORMAT,
	          "GPU report: opaque %s is empty or longer than %zu characters", field,
	          sizeof(buf) - 1);
	for (size_t i = n; i < t->len; i++)
		SL_ENSURE(t->value[i] == 0, SL_E_ATTEST_FORMAT,
		          "GPU report: opaque %s has bytes after its terminating NUL", field);
	for (size_t i = 0; i < n; i++) {
		SL_ENSURE(isprint(t->value[i]) && t->value[i] < 0x80, SL_E_ATTEST_FORMAT,
		          "GPU report: opaque %s is not printable ASCII", field);
		buf[i] = (char)t->value[i];
	}
	buf[n] = '\0';
	SL_GUARD(sl_claims_set(c, key, buf));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT set_hex(sl_claims *c, const char *key, const sl_nvgpu_tlv *t)
{
	if (t == NULL)
		return SL_OK;
	return sl_claims_set_hex(c, key, t->value, t->len);
}

/* GH100 is Hopper, GB100/GB20x Blackwell; the leaf's CN names the chip
 * ("GH100 A01 GSP FMC LF"), and the CN is inside the verified chain. */
static const char *arch_of(X509 *leaf)
{
	char cn[128];
	sl_x509_subject_cn(leaf, cn, sizeof(cn));
	if (strncmp(cn, "GH1", 3) == 0)
		return "hopper";
	if (strncmp(cn, "GB1", 3) == 0 || strncmp(cn, "GB2", 3) == 0)
		return "blackwell";
	return "unknown";
}

/* The device ID in the leaf's subjectAltName otherName
 * 1.3.6.1.4.1.412.274.1 ("NVIDIA:GH100:48B02D92494BADF4"): its last part. */
static SL_RESULT set_ueid(X509 *leaf, sl_claims *c)
{
	sl_err rc = SL_E_INTERNAL;
	GENERAL_NAMES *names = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
	char oid[64], val[96];
	for (int i = 0; names != NULL && i < sk_GENERAL_NAME_num(names); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
		if (g->type != GEN_OTHERNAME)
			continue;
		OBJ_obj2txt(oid, sizeof(oid), g->d.otherName->type_id, 1);
		const ASN1_TYPE *v = g->d.otherName->value;
		if (strcmp(oid, OID_NV_SAN_DEVICE) != 0 || v == NULL ||
		    (v->type != V_ASN1_UTF8STRING && v->type != V_ASN1_PRINTABLESTRING &&
		     v->type != V_ASN1_IA5STRING))
			continue;
		int n = ASN1_STRING_length(v->value.asn1_string);
		if (n <= 0 || (size_t)n >= sizeof(val))
			continue;
		memcpy(val, ASN1_STRING_get0_data(v->value.asn1_string), (size_t)n);
		val[n] = '\0';
		const char *id = strrchr(val, ':') ? strrchr(val, ':') + 1 : val;
		bool hex = id[0] != '\0';
		for (const char *p = id; *p; p++)
			hex = hex && isxdigit((unsigned char)*p);
		if (!hex)
			continue;
		char low[96];
		size_t k = 0;
		for (; id[k] && k + 1 < sizeof(low); k++)
			low[k] = (char)tolower((unsigned char)id[k]);
		low[k] = '\0';
		SL_GUARD(sl_claims_set(c, "gpu.ueid", low));
		break;
	}
	rc = SL_OK;
out:
	ERR_clear_error();
	GENERAL_NAMES_free(names);
	return rc;
}

static SL_RESULT set_serial(X509 *leaf, sl_claims *c)
{
	sl_err rc = SL_E_CRYPTO;
	BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf), NULL);
	char *hex = NULL;
	SL_GUARD_OSSL(bn != NULL && (hex = BN_bn2hex(bn)) != NULL, SL_E_NOMEM, "GPU cert serial");
	for (char *p = hex; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	SL_GUARD(sl_claims_set(c, "gpu.cert.serial", hex));
	rc = SL_OK;
out:
	OPENSSL_free(hex);
	BN_free(bn);
	return rc;
}

/* FEATURE_FLAG (newer firmware): 0 single-GPU passthrough ("SPT"), 1
 * multi-GPU passthrough ("MPT"), both confidential computing, 2 protected
 * PCIe ("PPCIE", a mode that excludes CC): as NVIDIA's verifiers and trustee
 * decode it; the real single-GPU Blackwell and H100 captures carry 0.
 * Without it the report cannot tell: unknown. */
static SL_RESULT set_mode(const sl_nvgpu_report *r, sl_claims *c)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	const sl_nvgpu_tlv *t = sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_FEATURE_FLAG);
	const char *cc = "unknown", *mode = NULL;
	if (t != NULL) {
		uint64_t v = 0;
		SL_ENSURE(t->len >= 1 && t->len <= 8, SL_E_ATTEST_FORMAT,
		          "GPU report: opaque FEATURE_FLAG is %u bytes", t->len);
		for (size_t i = t->len; i-- > 0;)
			v = v << 8 | t->value[i];
		if (v == 0)
			cc = "on", mode = "cc-single-gpu";
		else if (v == 1)
			cc = "on", mode = "cc-multi-gpu";
		else if (v == 2)
			cc = "off", mode = "protected-pcie";
		else
			mode = "unknown";
	}
	SL_GUARD(sl_claims_set(c, "gpu.cc", cc));
	if (mode != NULL)
		SL_GUARD(sl_claims_set(c, "gpu.mode", mode));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_nvgpu_claims(const sl_nvgpu_report *r, X509 *leaf, sl_claims *c)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	char key[40], vb[16];

	SL_GUARD(sl_claims_set(c, "gpu.kind", "nvidia"));
	SL_GUARD(sl_claims_set(c, "gpu.arch", arch_of(leaf)));
	SL_GUARD(set_mode(r, c));
	/* no signed field of the report carries the dev-tools setting */
	SL_GUARD(sl_claims_set(c, "gpu.devtools", "unknown"));
	SL_GUARD(sl_claims_set_hex(c, "gpu.nonce", r->req_nonce, SL_NVGPU_NONCE_LEN));
	SL_GUARD(sl_claims_setf(c, "gpu.measurements", "%zu", r->nblocks));
	for (size_t i = 0; i < r->nblocks; i++) {
		snprintf(key, sizeof(key), "gpu.measurement.%u", r->blocks[i].index);
		SL_GUARD(sl_claims_set_hex(c, key, r->blocks[i].value, r->blocks[i].value_len));
	}
	SL_GUARD(set_ascii(c, "gpu.driver_version",
	                   sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_DRIVER_VERSION), "DRIVER_VERSION"));
	const sl_nvgpu_tlv *t = sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_VBIOS_VERSION);
	if (t != NULL) {
		SL_GUARD(sl_nvgpu_vbios_string(t->value, t->len, vb));
		SL_GUARD(sl_claims_set(c, "gpu.vbios_version", vb));
	}
	SL_GUARD(set_ascii(c, "gpu.chip_sku", sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_CHIP_SKU),
	                   "CHIP_SKU"));
	SL_GUARD(
	    set_ascii(c, "gpu.project", sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_PROJECT), "PROJECT"));
	SL_GUARD(set_ascii(c, "gpu.project_sku", sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_PROJECT_SKU),
	                   "PROJECT_SKU"));
	SL_GUARD(set_hex(c, "gpu.board_id", sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_BOARD_ID)));
	SL_GUARD(set_hex(c, "gpu.fwid", sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_FWID)));
	SL_GUARD(set_serial(leaf, c));
	SL_GUARD(set_ueid(leaf, c));
	rc = SL_OK;
out:
	return rc;
}

/* "driver": {"cc": "on"|"off", "devtools": bool, "multi_gpu_mode":
 * "none"|"protected-pcie"|"nvle"|"other"}
 * as NVML reported it while collecting. Unsigned: recorded as gpu.driver.*,
 * and allowed only to lower gpu.cc (off) or raise gpu.devtools (true). */
static bool multi_gpu_mode_known(const char *s)
{
	static const char *const modes[] = {"none", "protected-pcie", "nvle", "other"};
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (strcmp(s, modes[i]) == 0)
			return true;
	}
	return false;
}

sl_err sl_nvgpu_driver_claims(const json_t *driver, sl_claims *c)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	const char *key;
	json_t *v;
	if (driver == NULL)
		return SL_OK;
	SL_ENSURE(json_is_object(driver), SL_E_ATTEST_FORMAT, "evidence.driver: not an object");
	json_object_foreach ((json_t *)driver, key, v) {
		if (strcmp(key, "cc") == 0) {
			const char *s = json_string_value(v);
			SL_ENSURE(s != NULL && (strcmp(s, "on") == 0 || strcmp(s, "off") == 0),
			          SL_E_ATTEST_FORMAT, "evidence.driver.cc: not \"on\" or \"off\"");
			SL_GUARD(sl_claims_set(c, "gpu.driver.cc", s));
			if (strcmp(s, "off") == 0)
				SL_GUARD(sl_claims_set(c, "gpu.cc", "off"));
		} else if (strcmp(key, "devtools") == 0) {
			SL_ENSURE(json_is_boolean(v), SL_E_ATTEST_FORMAT,
			          "evidence.driver.devtools: not a boolean");
			SL_GUARD(sl_claims_set(c, "gpu.driver.devtools",
			                       json_is_true(v) ? "true" : "false"));
			if (json_is_true(v))
				SL_GUARD(sl_claims_set(c, "gpu.devtools", "true"));
		} else if (strcmp(key, "multi_gpu_mode") == 0) {
			const char *s = json_string_value(v);
			SL_ENSURE(
			    s != NULL && multi_gpu_mode_known(s), SL_E_ATTEST_FORMAT,
			    "evidence.driver.multi_gpu_mode: not none, protected-pcie, nvle or "
			    "other");
			SL_GUARD(sl_claims_set(c, "gpu.driver.multi_gpu_mode", s));
		} else {
			SL_FAIL(SL_E_ATTEST_FORMAT, "evidence.driver: unknown field '%.32s'", key);
		}
	}
	rc = SL_OK;
out:
	return rc;
}

/* A TcbInfo string as a claim when it is short printable ASCII; anything
 * else is left out (the certificate is NVIDIA's, but says nothing policy
 * needs in another form). */
static SL_RESULT set_tcb_str(sl_claims *c, const char *key, const sl_dice_bytes *b)
{
	char buf[65];
	if (b->p == NULL || b->len == 0 || b->len >= sizeof(buf))
		return SL_OK;
	for (size_t i = 0; i < b->len; i++) {
		if (b->p[i] >= 0x80 || !isprint(b->p[i]))
			return SL_OK;
		buf[i] = (char)b->p[i];
	}
	buf[b->len] = '\0';
	return sl_claims_set(c, key, buf);
}

sl_err sl_nvgpu_tcb_claims(const sl_dice_tcbinfo *t, sl_claims *c)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	SL_GUARD(set_tcb_str(c, "gpu.cert.tcb.vendor", &t->vendor));
	SL_GUARD(set_tcb_str(c, "gpu.cert.tcb.model", &t->model));
	SL_GUARD(set_tcb_str(c, "gpu.cert.tcb.version", &t->version));
	if (t->has_svn)
		SL_GUARD(sl_claims_setf(c, "gpu.cert.tcb.svn", "%llu", (unsigned long long)t->svn));
	rc = SL_OK;
out:
	return rc;
}
