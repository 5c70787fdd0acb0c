/* nvidia-gpu evidence: the SPDM report parser and verifier against the two
 * real H100 reports in $SL_VECTORS/nvidia-gpu (README there gives each
 * expected result), fields and claims checked against bytes read here at
 * offsets computed from the layout, the README's broken chains, structural
 * mutations one field at a time, every truncation, the feature-flag
 * mapping, the driver's unsigned settings, and collection without NVML. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../attest/kinds.h"
#include "../../attest/nvgpu_int.h"
#include "../../attest/nvgpu_report.h"
#include "../../attest/x509_util.h"
#include "seclaunch/attest.h"
#include "seclaunch/util.h"
#include "testlib.h"

#define T2025 1748736000 /* 2025-06-01T00:00:00Z */

struct blob {
	uint8_t *p;
	size_t len;
};

static struct blob load(const char *name)
{
	struct blob b = {0};
	b.p = tl_vector_load(&b.len, "nvidia-gpu/%s", name);
	return b;
}

static STACK_OF(X509) * chain(const char *name)
{
	struct blob b = load(name);
	STACK_OF(X509) *s = sk_X509_new_null();
	assert_non_null(s);
	assert_int_equal(sl_x509_parse_blob(b.p, b.len, s, NULL, name), SL_OK);
	free(b.p);
	return s;
}

static void free_chain(STACK_OF(X509) * s)
{
	sk_X509_pop_free(s, X509_free);
}

static uint32_t le16(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

/* Offsets by the layout, independent of the parser: request 37 bytes;
 * response header 4; block count at 41; record length (u24) at 42; the
 * record at 45; then nonce 32, opaque length 2, opaque data, signature. */
struct layout {
	size_t record, record_len, rsp_nonce, opaque, opaque_len, sig;
};

static struct layout layout_of(const struct blob *b)
{
	struct layout l;
	l.record = 45;
	l.record_len = b->p[42] | (size_t)b->p[43] << 8 | (size_t)b->p[44] << 16;
	l.rsp_nonce = l.record + l.record_len;
	l.opaque_len = le16(b->p + l.rsp_nonce + 32);
	l.opaque = l.rsp_nonce + 34;
	l.sig = l.opaque + l.opaque_len;
	return l;
}

static void hex(const uint8_t *p, size_t n, char *out)
{
	sl_hex_encode(p, n, out);
}

/* ---- parser ---------------------------------------------------------- */

static void parse_report1(void **state)
{
	(void)state;
	struct blob b = load("hopperAttestationReport.bin");
	struct layout l = layout_of(&b);
	sl_nvgpu_report *r = calloc(1, sizeof(*r));
	assert_int_equal(sl_nvgpu_report_parse(b.p, b.len, r), SL_OK);
	assert_int_equal(r->req_version, 0x11);
	assert_int_equal(r->req_code, 0xE0);
	assert_memory_equal(r->req_nonce, b.p + 4, 32);
	assert_int_equal(r->rsp_code, 0x60);
	assert_int_equal(r->num_blocks, b.p[41]);
	assert_int_equal(r->nblocks, 64);
	assert_int_equal(r->record_len, l.record_len);
	assert_int_equal(r->record_len, 3520); /* README */
	assert_memory_equal(r->rsp_nonce, b.p + l.rsp_nonce, 32);
	assert_int_equal(r->opaque_len, 422);  /* README */
	assert_int_equal(r->signed_len, 4021); /* README: signature at offset 4021 */
	assert_int_equal(r->signed_len, l.sig);
	assert_ptr_equal(r->sig, b.p + l.sig);
	assert_int_equal(r->trailing_zeros, 0);
	/* block k (1-based) of 48-byte digests: 4 + 3 header bytes, 55 in all */
	for (unsigned k = 1; k <= 64; k++) {
		const sl_nvgpu_block *blk = sl_nvgpu_report_block(r, (uint8_t)k);
		assert_non_null(blk);
		assert_int_equal(blk->value_len, 48);
		assert_ptr_equal(blk->value, b.p + l.record + (k - 1) * 55 + 7);
	}
	const sl_nvgpu_tlv *t = sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_DRIVER_VERSION);
	assert_non_null(t);
	assert_int_equal(t->len, 10);
	assert_memory_equal(t->value, "550.90.07", 10);
	assert_null(sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_FEATURE_FLAG));
	free(r);
	free(b.p);
}

static void parse_report2_trailing_zero(void **state)
{
	(void)state;
	struct blob b = load("hopper_coco_report1.bin");
	struct layout l = layout_of(&b);
	sl_nvgpu_report *r = calloc(1, sizeof(*r));
	assert_int_equal(sl_nvgpu_report_parse(b.p, b.len, r), SL_OK);
	assert_int_equal(r->signed_len, 4033); /* README */
	assert_int_equal(r->signed_len, l.sig);
	assert_int_equal(r->opaque_len, 434);
	assert_int_equal(r->trailing_zeros, 1);
	const sl_nvgpu_tlv *t = sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_FEATURE_FLAG);
	assert_non_null(t);
	free(r);
	free(b.p);
}

static void parse_every_truncation(void **state)
{
	(void)state;
	struct blob b = load("hopperAttestationReport.bin");
	sl_nvgpu_report *r = calloc(1, sizeof(*r));
	for (size_t n = 0; n < b.len; n++)
		assert_int_equal(sl_nvgpu_report_parse(b.p, n, r), SL_E_ATTEST_FORMAT);
	free(r);
	free(b.p);
}

/* One field changed at a time; each must fail naming it. */
static void parse_mutations(void **state)
{
	(void)state;
	struct blob b = load("hopperAttestationReport.bin");
	struct layout l = layout_of(&b);
	sl_nvgpu_report *r = calloc(1, sizeof(*r));
	uint8_t *m = malloc(b.len + 8);
	struct {
		size_t off;
		uint8_t val;
		const char *needle;
	} cases[] = {
	    {0, 0x12, "request.spdm_version"},
	    {1, 0xE1, "GET_MEASUREMENTS"},
	    {2, 0x00, "does not ask for a signature"},
	    {37, 0x12, "response.spdm_version"},
	    {38, 0x61, "MEASUREMENTS (0x60)"},
	    {40, 0x01, "slot 1 differs"},
	    {41, 65, "need"},                      /* one block more than the record holds */
	    {41, 63, "trailing bytes"},            /* one fewer: record not consumed */
	    {42, 0xC1, "trailing bytes"},          /* record length one more */
	    {45 + 55, 1, "index 1 appears twice"}, /* block 2 says index 1 */
	    {45, 0, "index 0 is reserved"},
	    {46, 0x02, "not DMTF"},
	    {47, 0x32, "need"},                               /* measurement_size 50 */
	    {50, 0x2f, "trailing bytes"},                     /* DMTF size 47 in a 51-byte block */
	    {l.opaque + 4 + 8, 0x03, "type 3 appears twice"}, /* 2nd field (board id) typed 3 */
	    {l.opaque + 4 + 8 + 3, 0xff, "need"},             /* 2nd field longer than the rest */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(m, b.p, b.len);
		m[cases[i].off] = cases[i].val;
		char what[64];
		snprintf(what, sizeof(what), "case %zu (offset %zu)", i, cases[i].off);
		expect_fail(sl_nvgpu_report_parse(m, b.len, r), SL_E_ATTEST_FORMAT, cases[i].needle,
		            what);
	}
	/* opaque length one larger: a lone byte where a field header should be */
	memcpy(m, b.p, b.len);
	m[l.rsp_nonce + 32] = (uint8_t)(m[l.rsp_nonce + 32] + 1);
	expect_fail(sl_nvgpu_report_parse(m, b.len, r), SL_E_ATTEST_FORMAT,
	            "opaque_field.data_type");
	/* trailing: zero bytes pass, anything else fails */
	memcpy(m, b.p, b.len);
	memset(m + b.len, 0, 8);
	assert_int_equal(sl_nvgpu_report_parse(m, b.len + 8, r), SL_OK);
	assert_int_equal(r->trailing_zeros, 8);
	m[b.len + 7] = 1;
	expect_fail(sl_nvgpu_report_parse(m, b.len + 8, r), SL_E_ATTEST_FORMAT,
	            "trailing bytes after the signature");
	uint8_t *big = calloc(1, SL_NVGPU_MAX_REPORT + 1);
	memcpy(big, b.p, b.len);
	expect_fail(sl_nvgpu_report_parse(big, SL_NVGPU_MAX_REPORT + 1, r), SL_E_ATTEST_FORMAT,
	            "more than 8192");
	free(big);
	free(m);
	free(r);
	free(b.p);
}

static void vbios_format(void **state)
{
	(void)state;
	char out[16];
	const uint8_t v1[8] = {0x00, 0x9f, 0x00, 0x96, 0x01, 0, 0, 0};
	assert_int_equal(sl_nvgpu_vbios_string(v1, 8, out), SL_OK);
	assert_string_equal(out, "96.00.9f.00.01"); /* the vectors' claims file */
	assert_int_equal(sl_nvgpu_vbios_string(v1, 7, out), SL_E_ATTEST_FORMAT);
}

/* ---- verification ------------------------------------------------------ */

static sl_err verify(const struct blob *b, const char *chain_name, const uint8_t *expect,
                     size_t elen, bool no_binding, sl_claims **out)
{
	STACK_OF(X509) *s = chain(chain_name);
	sl_verify_opts o = {
	    .expect = expect, .expect_len = elen, .no_binding = no_binding, .at = T2025};
	sl_claims *c = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	sl_err rc = sl_nvgpu_verify_parts(b->p, b->len, s, &o, c);
	free_chain(s);
	if (out != NULL)
		*out = c;
	else
		sl_claims_free(c);
	return rc;
}

static void verify_report1(void **state)
{
	(void)state;
	struct blob b = load("hopperAttestationReport.bin");
	struct layout l = layout_of(&b);
	sl_claims *c = NULL;
	char h[200], key[40];
	assert_int_equal(verify(&b, "hopper_cert_chain_case1.txt", b.p + 4, 32, false, &c), SL_OK);
	assert_string_equal(sl_claims_get(c, "gpu.kind"), "nvidia");
	assert_string_equal(sl_claims_get(c, "gpu.arch"), "hopper");
	assert_string_equal(sl_claims_get(c, "binding"), "verified");
	assert_string_equal(sl_claims_get(c, "gpu.cc"), "unknown");
	assert_string_equal(sl_claims_get(c, "gpu.devtools"), "unknown");
	assert_null(sl_claims_get(c, "gpu.mode"));
	assert_string_equal(sl_claims_get(c, "gpu.driver_version"), "550.90.07");
	assert_string_equal(sl_claims_get(c, "gpu.vbios_version"), "96.00.9f.00.01");
	assert_string_equal(sl_claims_get(c, "gpu.measurements"), "64");
	hex(b.p + 4, 32, h);
	assert_string_equal(sl_claims_get(c, "gpu.nonce"), h);
	for (unsigned k = 1; k <= 64; k++) {
		snprintf(key, sizeof(key), "gpu.measurement.%u", k);
		hex(b.p + l.record + (k - 1) * 55 + 7, 48, h);
		assert_string_equal(sl_claims_get(c, key), h);
	}
	assert_string_equal(
	    sl_claims_get(c, "gpu.fwid"),
	    "f5c384aebb579217a2c66b17ed0f28e6a9b8d639041acd7b4721cec004f7275494ba94bb5"
	    "cdfdb3055ee051762b1f75d");
	assert_string_equal(sl_claims_get(c, "gpu.cert.serial"),
	                    "53c22ba15e5d68088282da074ed9fb37aa585771");
	assert_string_equal(sl_claims_get(c, "gpu.ueid"), "48b02d92494badf4");
	assert_string_equal(sl_claims_get(c, "gpu.board_id"), "b1030000");
	assert_string_equal(sl_claims_get(c, "gpu.chip_sku"), "882");
	assert_string_equal(sl_claims_get(c, "gpu.project"), "1010");
	assert_null(sl_claims_get(c, "tee.kind")); /* GPU claims never stand in for the CPU's */
	sl_claims_free(c);
	free(b.p);
}

static void verify_report2(void **state)
{
	(void)state;
	struct blob b = load("hopper_coco_report1.bin");
	sl_claims *c = NULL;
	assert_int_equal(verify(&b, "hopper_coco_certs1.txt", b.p + 4, 32, false, &c), SL_OK);
	assert_string_equal(sl_claims_get(c, "gpu.cc"), "on");
	/* FEATURE_FLAG 0: single-GPU passthrough, as NVIDIA's verifier reads it */
	assert_string_equal(sl_claims_get(c, "gpu.mode"), "cc-single-gpu");
	assert_string_equal(sl_claims_get(c, "gpu.driver_version"), "580.95.05");
	sl_claims_free(c);
	free(b.p);
}

static void verify_negatives(void **state)
{
	(void)state;
	struct blob b = load("hopperAttestationReport.bin");
	struct layout l = layout_of(&b);
	const uint8_t *n = b.p + 4;
	uint8_t other[32];
	expect_fail(verify(&b, "hopper_coco_certs1.txt", n, 32, false, NULL), SL_E_ATTEST_CHAIN,
	            "FWID does not equal");
	expect_fail(verify(&b, "hopper_cert_chain_case2.txt", n, 32, false, NULL),
	            SL_E_ATTEST_CHAIN, "at least the GPU's attestation certificate and the root");
	expect_fail(verify(&b, "hopper_cert_chain_case3.txt", n, 32, false, NULL),
	            SL_E_ATTEST_CHAIN, "certificate chain invalid");
	expect_fail(verify(&b, "hopper_cert_chain_case4.txt", n, 32, false, NULL),
	            SL_E_ATTEST_CHAIN, "no FWID extension");
	memcpy(other, n, 32);
	other[31] ^= 1;
	expect_fail(verify(&b, "hopper_cert_chain_case1.txt", other, 32, false, NULL),
	            SL_E_ATTEST_BINDING, "request.nonce does not equal");
	/* a shorter binding is zero-padded, not compared as a prefix */
	expect_fail(verify(&b, "hopper_cert_chain_case1.txt", n, 31, false, NULL),
	            SL_E_ATTEST_BINDING, "request.nonce does not equal");
	uint8_t longer[33] = {0};
	memcpy(longer, n, 32);
	expect_fail(verify(&b, "hopper_cert_chain_case1.txt", longer, 33, false, NULL),
	            SL_E_ATTEST_BINDING, "does not fit the 32-byte SPDM nonce");
	/* signed bytes: a measurement, the nonce (binding unchecked), the signature */
	size_t offs[] = {l.record + 7 + 3, 4 + 17, l.sig + 5, l.sig + 90, l.rsp_nonce + 1};
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		b.p[offs[i]] ^= 0x10;
		expect_fail(verify(&b, "hopper_cert_chain_case1.txt", NULL, 0, true, NULL),
		            SL_E_ATTEST_SIG, "does not verify");
		b.p[offs[i]] ^= 0x10;
	}
	assert_int_equal(verify(&b, "hopper_cert_chain_case1.txt", NULL, 0, true, NULL), SL_OK);
	free(b.p);
}

/* The two real Blackwell (GB202) captures: the FWID comes from the standard
 * DICE TcbInfo under 2.23.133.5.4.1.1, the first entry of its fwids. */
static void verify_blackwell(void **state)
{
	(void)state;
	struct {
		const char *report, *chain, *serial, *ueid, *vbios;
	} v[] = {
	    {"blackwellAttestationReport.bin", "blackwell_cert_chain_case1.txt",
	     "47998610bf499ac0121fe43825e060ff14e852ed", "48b02d28458fddf9", "98.02.81.00.01"},
	    {"blackwell_coco_report.bin", "blackwell_coco_certs.txt",
	     "5fd2b54bc1d236de792b254f6d2a28117f25ff22", "48b02d7b1b9fe9ba", "98.02.74.00.01"},
	};
	for (size_t i = 0; i < 2; i++) {
		struct blob b = load(v[i].report);
		sl_claims *c = NULL;
		char h[80];
		assert_int_equal(verify(&b, v[i].chain, b.p + 4, 32, false, &c), SL_OK);
		assert_string_equal(sl_claims_get(c, "gpu.arch"), "blackwell");
		assert_string_equal(sl_claims_get(c, "binding"), "verified");
		hex(b.p + 4, 32, h);
		assert_string_equal(sl_claims_get(c, "gpu.nonce"), h);
		assert_string_equal(
		    sl_claims_get(c, "gpu.fwid"),
		    "9b92cc3e53b9265259e1abde163653288c2474fcafd8e5c0fd62ce9c9036fb6"
		    "2723fe3715b50f4ac27c68b62e2fd9240");
		assert_string_equal(sl_claims_get(c, "gpu.cert.serial"), v[i].serial);
		assert_string_equal(sl_claims_get(c, "gpu.ueid"), v[i].ueid);
		assert_string_equal(sl_claims_get(c, "gpu.cert.tcb.vendor"), "NVIDIA");
		assert_string_equal(sl_claims_get(c, "gpu.cert.tcb.model"), "GB20X A01 GSP");
		assert_string_equal(sl_claims_get(c, "gpu.cert.tcb.version"), "02");
		assert_string_equal(sl_claims_get(c, "gpu.cert.tcb.svn"), "2");
		assert_string_equal(sl_claims_get(c, "gpu.cc"), "on");
		assert_string_equal(sl_claims_get(c, "gpu.mode"), "cc-single-gpu");
		assert_string_equal(sl_claims_get(c, "gpu.driver_version"), "595.58.03");
		assert_string_equal(sl_claims_get(c, "gpu.vbios_version"), v[i].vbios);
		assert_string_equal(sl_claims_get(c, "gpu.measurements"), "64");
		sl_claims_free(c);
		free(b.p);
	}
	/* the same FWID on both GPUs: only the signature tells the keys apart */
	struct blob b = load("blackwellAttestationReport.bin");
	expect_fail(verify(&b, "blackwell_coco_certs.txt", b.p + 4, 32, false, NULL),
	            SL_E_ATTEST_SIG, "does not verify");
	expect_fail(verify(&b, "hopper_cert_chain_case1.txt", b.p + 4, 32, false, NULL),
	            SL_E_ATTEST_CHAIN, "FWID does not equal");
	b.p[4] ^= 1;
	expect_fail(verify(&b, "blackwell_cert_chain_case1.txt", NULL, 0, true, NULL),
	            SL_E_ATTEST_SIG, "does not verify");
	free(b.p);
}

/* FEATURE_FLAG values through the claims of a parsed (unsigned) copy of
 * report 2: the mapping alone, with the real leaf for the certificate claims. */
static void feature_flag_mapping(void **state)
{
	(void)state;
	struct blob b = load("hopper_coco_report1.bin");
	sl_nvgpu_report *r = calloc(1, sizeof(*r));
	STACK_OF(X509) *s = chain("hopper_coco_certs1.txt");
	struct {
		uint8_t v;
		const char *cc, *mode;
	} cases[] = {{0, "on", "cc-single-gpu"},
	             {1, "on", "cc-multi-gpu"},
	             {2, "off", "protected-pcie"},
	             {7, "unknown", "unknown"}};
	assert_int_equal(sl_nvgpu_report_parse(b.p, b.len, r), SL_OK);
	uint8_t *ff = (uint8_t *)sl_nvgpu_report_tlv(r, SL_NVGPU_OPQ_FEATURE_FLAG)->value;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sl_claims *c = NULL;
		ff[0] = cases[i].v;
		assert_int_equal(sl_claims_new(&c), SL_OK);
		assert_int_equal(sl_nvgpu_claims(r, sk_X509_value(s, 0), c), SL_OK);
		assert_string_equal(sl_claims_get(c, "gpu.cc"), cases[i].cc);
		assert_string_equal(sl_claims_get(c, "gpu.mode"), cases[i].mode);
		sl_claims_free(c);
	}
	free_chain(s);
	free(r);
	free(b.p);
}

static void driver_settings(void **state)
{
	(void)state;
	sl_claims *c = NULL;
	json_error_t je;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_claims_set(c, "gpu.cc", "on"), SL_OK);
	assert_int_equal(sl_claims_set(c, "gpu.devtools", "unknown"), SL_OK);
	json_t *d =
	    json_loads("{\"cc\":\"on\",\"devtools\":false,\"multi_gpu_mode\":\"none\"}", 0, &je);
	assert_int_equal(sl_nvgpu_driver_claims(d, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "gpu.devtools"), "unknown"); /* never "false" */
	assert_string_equal(sl_claims_get(c, "gpu.driver.devtools"), "false");
	json_decref(d);
	d = json_loads("{\"cc\":\"off\",\"devtools\":true}", 0, &je);
	assert_int_equal(sl_nvgpu_driver_claims(d, c), SL_OK);
	assert_string_equal(sl_claims_get(c, "gpu.cc"), "off");
	assert_string_equal(sl_claims_get(c, "gpu.devtools"), "true");
	json_decref(d);
	const char *bad[] = {"[]",
	                     "{\"cc\":true}",
	                     "{\"cc\":\"maybe\"}",
	                     "{\"devtools\":\"no\"}",
	                     "{\"multi_gpu_mode\":\"x y\"}",
	                     "{\"other\":1}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		d = json_loads(bad[i], JSON_DECODE_ANY, &je);
		assert_non_null(d);
		assert_int_equal(sl_nvgpu_driver_claims(d, c), SL_E_ATTEST_FORMAT);
		json_decref(d);
	}
	sl_claims_free(c);
}

/* ---- the kind ------------------------------------------------------------ */

static void kind_table(void **state)
{
	(void)state;
	const sl_evidence_kind *k = sl_evidence_kind_find("nvidia-gpu");
	sl_collect_opts o = {0};
	assert_non_null(k);
	assert_ptr_equal(k, &sl_kind_nvgpu);
	assert_false(k->available(&o)); /* --tee auto never picks GPU evidence */
}

static void collect_without_driver(void **state)
{
	(void)state;
	uint8_t nonce[33] = {1};
	sl_collect_opts o = {.nonce = nonce, .nonce_len = 33};
	json_t *ev = (json_t *)1;
	expect_fail(sl_evidence_collect("nvidia-gpu", &o, &ev), SL_E_USAGE, "1..32 bytes");
	assert_null(ev);
	o.nonce_len = 32;
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (lib != NULL) {
		dlclose(lib);
		skip();
	}
	expect_fail(sl_evidence_collect("nvidia-gpu", &o, &ev), SL_E_GPU,
	            "no NVIDIA driver (libnvidia-ml.so.1 not found)");
	assert_null(ev);
}

static void evidence_json(void **state)
{
	(void)state;
	struct blob r = load("hopperAttestationReport.bin");
	struct blob c = load("hopper_cert_chain_case1.txt");
	char *rb = NULL, *cb = NULL;
	sl_claims *cl = NULL;
	sl_verify_opts o = {.expect = r.p + 4, .expect_len = 32, .at = T2025};
	assert_int_equal(sl_b64_encode(r.p, r.len, &rb), SL_OK);
	assert_int_equal(sl_b64_encode(c.p, c.len, &cb), SL_OK);
	json_t *ev = json_pack("{s:s, s:s, s:s}", "kind", "nvidia-gpu", "report", rb, "certs", cb);
	assert_int_equal(sl_claims_new(&cl), SL_OK);
	assert_int_equal(sl_evidence_verify(ev, &o, cl), SL_OK);
	assert_string_equal(sl_claims_get(cl, "gpu.kind"), "nvidia");
	/* a failed verification adds no claim */
	sl_claims_free(cl);
	assert_int_equal(sl_claims_new(&cl), SL_OK);
	o.expect_len = 31;
	assert_int_equal(sl_evidence_verify(ev, &o, cl), SL_E_ATTEST_BINDING);
	assert_int_equal(sl_claims_count(cl), 0);
	json_object_set_new(ev, "report", json_string("not base64!"));
	assert_int_equal(sl_evidence_verify(ev, &o, cl), SL_E_ATTEST_FORMAT);
	json_object_del(ev, "report");
	expect_fail(sl_evidence_verify(ev, &o, cl), SL_E_ATTEST_FORMAT, "evidence.report");
	sl_claims_free(cl);
	json_decref(ev);
	free(rb);
	free(cb);
	free(r.p);
	free(c.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(parse_report1),          cmocka_unit_test(parse_report2_trailing_zero),
	    cmocka_unit_test(parse_every_truncation), cmocka_unit_test(parse_mutations),
	    cmocka_unit_test(vbios_format),           cmocka_unit_test(verify_report1),
	    cmocka_unit_test(verify_report2),         cmocka_unit_test(verify_negatives),
	    cmocka_unit_test(verify_blackwell),       cmocka_unit_test(feature_flag_mapping),
	    cmocka_unit_test(driver_settings),        cmocka_unit_test(kind_table),
	    cmocka_unit_test(collect_without_driver), cmocka_unit_test(evidence_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
