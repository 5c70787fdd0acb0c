/* AWS Nitro Enclaves: the three real documents in $SL_VECTORS/aws-nitro
 * (README: each valid at its own timestamp) verify with the right claims;
 * a flipped bit in each signed part (payload, protected header, signature),
 * a certificate swapped from another document, another root, the current
 * time, a forged nonce and malformed CBOR are each refused naming the check;
 * policy refuses a debug-mode enclave unless a rule allows debugging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cbor.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../attest/nitro.h"
#include "seclaunch/attest.h"
#include "seclaunch/policy.h"
#include "seclaunch/util.h"
#include "testlib.h"

struct vec {
	const char *file;
	const char *module_id;
	uint64_t ts_ms;
	bool debug, has_nonce;
	const char *pcr0_prefix;
};

static const struct vec vecs[] = {
    {"evervault_2022-10-13_doc.cbor", "i-020b6af9246d90e92-enc0183d09086c24190", 1665651482136ull,
     false, true, "f4d48b81a460c9916d1e685119074bf24660afd3e34fae9fca0a0d28d9d5599936332687e6f6"},
    {"evervault_2022-10-12_debug_doc.cbor", "i-03ad7cdb817437eeb-enc0183cc7569b3f6e1",
     1665582606081ull, true, false, "000000000000"},
    {"evervault_2023-09-18_debug_doc.cbor", "i-0918f6c55e3b61d89-enc018aa8b8e2285d13",
     1695049410860ull, true, true, "000000000000"},
};
#define NVEC (sizeof(vecs) / sizeof(vecs[0]))

static uint8_t *load(const struct vec *v, size_t *len)
{
	return tl_vector_load(len, "aws-nitro/%s", v->file);
}

static time_t at_of(const struct vec *v)
{
	return (time_t)(v->ts_ms / 1000);
}

/* Verifies through the evidence kind (JSON, base64). */
static sl_err verify_ev(const uint8_t *doc, size_t len, time_t at, const uint8_t *expect,
                        size_t elen, sl_claims **out)
{
	sl_claims *c = NULL;
	char *b64 = NULL;
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_b64_encode(doc, len, &b64), SL_OK);
	json_t *ev = json_pack("{s:s, s:s}", "kind", "aws-nitro", "document", b64);
	free(b64);
	sl_verify_opts o = {
	    .expect = expect, .expect_len = elen, .no_binding = expect == NULL, .at = at};
	sl_err rc = sl_evidence_verify(ev, &o, c);
	json_decref(ev);
	if (out != NULL)
		*out = c;
	else
		sl_claims_free(c);
	return rc;
}

static void refused(const uint8_t *doc, size_t len, time_t at, sl_err want, const char *msg)
{
	sl_err rc = verify_ev(doc, len, at, NULL, 0, NULL);
	if (rc != want || strstr(sl_err_detail(), msg) == NULL)
		fail_msg("want %s '%s', got %s: %s", sl_err_name(want), msg, sl_err_name(rc),
		         sl_err_detail());
}

/* evidence import: binary, hex (xxd -p, wrapped) and base64 (wrapped) of a
 * document give the same evidence, naming the form read. */
static void test_import_forms(void **state)
{
	(void)state;
	size_t len = 0;
	uint8_t *doc = load(&vecs[0], &len);
	char *b64 = NULL, *hex = malloc(3 * len + 2), *wrapped = NULL;
	json_t *ev[3] = {NULL};
	const char *fmt[3] = {NULL};
	size_t k = 0;

	for (size_t i = 0; i < len; i++) {
		snprintf(hex + k, 3, "%02X", doc[i]);
		k += 2;
		if (i % 30 == 29)
			hex[k++] = '\n';
	}
	hex[k] = '\0';
	assert_int_equal(sl_b64_encode(doc, len, &b64), SL_OK);
	assert_true(asprintf(&wrapped, "  \n%.*s\n%s\n\n", 76, b64, b64 + 76) > 0);
	assert_int_equal(sl_evidence_import("aws-nitro", doc, len, NULL, 0, &ev[0], &fmt[0]),
	                 SL_OK);
	assert_int_equal(
	    sl_evidence_import("aws-nitro", (uint8_t *)hex, k, NULL, 0, &ev[1], &fmt[1]), SL_OK);
	assert_int_equal(sl_evidence_import("aws-nitro", (uint8_t *)wrapped, strlen(wrapped), NULL,
	                                    0, &ev[2], &fmt[2]),
	                 SL_OK);
	assert_string_equal(fmt[0], "binary");
	assert_string_equal(fmt[1], "hex");
	assert_string_equal(fmt[2], "base64");
	assert_true(json_equal(ev[0], ev[1]) && json_equal(ev[0], ev[2]));
	assert_string_equal(json_string_value(json_object_get(ev[0], "kind")), "aws-nitro");
	assert_string_equal(json_string_value(json_object_get(ev[0], "document")), b64);
	/* an imported document is parsed: a malformed one is refused */
	json_t *bad = NULL;
	assert_int_equal(sl_evidence_import("aws-nitro", doc, len - 1, NULL, 0, &bad, NULL),
	                 SL_E_ATTEST_FORMAT);
	static const char junk[] = "not hex, not base64!";
	assert_int_equal(sl_evidence_import("aws-nitro", (const uint8_t *)junk, strlen(junk), NULL,
	                                    0, &bad, NULL),
	                 SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "neither hex nor base64"));
	for (int i = 0; i < 3; i++)
		json_decref(ev[i]);
	free(hex);
	free(b64);
	free(wrapped);
	free(doc);
}

static void test_vector_claims(void **state)
{
	(void)state;
	char want[32];
	for (size_t i = 0; i < NVEC; i++) {
		const struct vec *v = &vecs[i];
		size_t len = 0;
		uint8_t *doc = load(v, &len);
		sl_nitro_doc d;
		sl_claims *c = NULL;
		assert_int_equal(sl_nitro_doc_parse(doc, len, &d), SL_OK);
		assert_int_equal(d.nonce.present, v->has_nonce);
		if (v->has_nonce) {
			/* the nonce field carries the binding */
			if (verify_ev(doc, len, at_of(v), d.nonce.p, d.nonce.len, &c) != SL_OK)
				fail_msg("%s: %s", v->file, sl_err_detail());
			assert_string_equal(sl_claims_get(c, "binding"), "verified");
		} else {
			if (verify_ev(doc, len, at_of(v), NULL, 0, &c) != SL_OK)
				fail_msg("%s: %s", v->file, sl_err_detail());
			assert_string_equal(sl_claims_get(c, "binding"), "unchecked");
		}
		assert_string_equal(sl_claims_get(c, "tee.kind"), "aws-nitro");
		assert_string_equal(sl_claims_get(c, "nitro.module_id"), v->module_id);
		snprintf(want, sizeof(want), "%llu", (unsigned long long)v->ts_ms);
		assert_string_equal(sl_claims_get(c, "nitro.timestamp"), want);
		assert_string_equal(sl_claims_get(c, "nitro.debug"), v->debug ? "true" : "false");
		assert_non_null(sl_claims_get(c, "nitro.pcr0"));
		assert_int_equal(
		    strncmp(sl_claims_get(c, "nitro.pcr0"), v->pcr0_prefix, strlen(v->pcr0_prefix)),
		    0);
		for (int p = 0; p <= 8; p++) {
			char key[16];
			snprintf(key, sizeof(key), "nitro.pcr%d", p);
			assert_int_equal(strlen(sl_claims_get(c, key)), 96);
		}
		sl_claims_free(c);
		sl_nitro_doc_free(&d);
		free(doc);
	}
	/* README: PCR8 of the production document, user_data / public_key of one */
	size_t len = 0;
	uint8_t *doc = load(&vecs[0], &len);
	sl_claims *c = NULL;
	assert_int_equal(verify_ev(doc, len, at_of(&vecs[0]), NULL, 0, &c), SL_OK);
	assert_int_equal(strncmp(sl_claims_get(c, "nitro.pcr8"), "8790eb3c", 8), 0);
	sl_claims_free(c);
	free(doc);
	doc = load(&vecs[1], &len);
	assert_int_equal(verify_ev(doc, len, at_of(&vecs[1]), NULL, 0, &c), SL_OK);
	assert_string_equal(sl_claims_get(c, "nitro.user_data"), "68656c6c6f2c20776f726c6421");
	assert_string_equal(sl_claims_get(c, "nitro.public_key"),
	                    "6d7920737570657220736563726574206b6579");
	sl_claims_free(c);
	free(doc);
}

static size_t find(const uint8_t *hay, size_t n, const uint8_t *needle, size_t m)
{
	for (size_t i = 0; i + m <= n; i++)
		if (memcmp(hay + i, needle, m) == 0)
			return i;
	fail_msg("pattern not found");
	return 0;
}

/* The document with its COSE parts replaced (NULL: kept), serialized. */
static uint8_t *rebuild(const uint8_t *doc, size_t len, const uint8_t *prot, size_t plen,
                        const uint8_t *payload, size_t paylen, size_t *outlen)
{
	struct cbor_load_result res;
	cbor_item_t *a = cbor_load(doc, len, &res);
	assert_non_null(a);
	cbor_item_t **it = cbor_array_handle(a);
	cbor_item_t *n = cbor_new_definite_array(4);
	cbor_item_t *p0 = prot ? cbor_build_bytestring(prot, plen) : cbor_incref(it[0]);
	cbor_item_t *p2 = payload ? cbor_build_bytestring(payload, paylen) : cbor_incref(it[2]);
	assert_true(cbor_array_push(n, p0) && cbor_array_push(n, it[1]) && cbor_array_push(n, p2) &&
	            cbor_array_push(n, it[3]));
	cbor_decref(&p0);
	cbor_decref(&p2);
	unsigned char *buf = NULL;
	size_t cap = 0;
	*outlen = cbor_serialize_alloc(n, &buf, &cap);
	assert_true(*outlen > 0);
	cbor_decref(&n);
	cbor_decref(&a);
	return buf;
}

/* The payload map of doc with key set to the value of the same key in src
 * (or, when src is NULL, to value). */
static uint8_t *payload_with(const uint8_t *doc, size_t len, const char *key, const uint8_t *src,
                             size_t srclen, cbor_item_t *value, size_t *outlen)
{
	sl_nitro_doc d, s;
	struct cbor_load_result res;
	assert_int_equal(sl_nitro_doc_parse(doc, len, &d), SL_OK);
	cbor_item_t *m = cbor_load(d.payload.p, d.payload.len, &res);
	cbor_item_t *sm = NULL;
	if (src != NULL) {
		assert_int_equal(sl_nitro_doc_parse(src, srclen, &s), SL_OK);
		sm = cbor_load(s.payload.p, s.payload.len, &res);
		sl_nitro_doc_free(&s);
	}
	cbor_item_t *n = cbor_new_definite_map(cbor_map_size(m));
	struct cbor_pair *pp = cbor_map_handle(m);
	for (size_t i = 0; i < cbor_map_size(m); i++) {
		cbor_item_t *v = pp[i].value;
		bool hit = cbor_string_length(pp[i].key) == strlen(key) &&
		           memcmp(cbor_string_handle(pp[i].key), key, strlen(key)) == 0;
		if (hit && sm != NULL) {
			struct cbor_pair *sp = cbor_map_handle(sm);
			for (size_t j = 0; j < cbor_map_size(sm); j++)
				if (cbor_string_length(sp[j].key) == strlen(key) &&
				    memcmp(cbor_string_handle(sp[j].key), key, strlen(key)) == 0)
					v = sp[j].value;
		} else if (hit) {
			v = value;
		}
		assert_true(cbor_map_add(n, (struct cbor_pair){.key = pp[i].key, .value = v}));
	}
	unsigned char *pl = NULL;
	size_t cap = 0, pllen = cbor_serialize_alloc(n, &pl, &cap);
	assert_true(pllen > 0);
	uint8_t *out = rebuild(doc, len, NULL, 0, pl, pllen, outlen);
	free(pl);
	cbor_decref(&n);
	cbor_decref(&m);
	if (sm != NULL)
		cbor_decref(&sm);
	sl_nitro_doc_free(&d);
	return out;
}

static void test_tamper(void **state)
{
	(void)state;
	const struct vec *v = &vecs[0];
	size_t len = 0, blen = 0;
	uint8_t *doc = load(v, &len), *bad = malloc(len + 64);
	time_t at = at_of(v);
	sl_nitro_doc d;
	assert_int_equal(sl_nitro_doc_parse(doc, len, &d), SL_OK);

	/* payload: a bit of PCR0, of the module id, of the nonce */
	const uint8_t *targets[] = {d.pcr[0], (const uint8_t *)v->module_id, d.nonce.p};
	const size_t tlen[] = {48, strlen(v->module_id), d.nonce.len};
	for (size_t t = 0; t < 3; t++) {
		memcpy(bad, doc, len);
		bad[find(doc, len, targets[t], tlen[t]) + 5] ^= 0x01;
		refused(bad, len, at, SL_E_ATTEST_SIG, "does not verify");
	}
	/* protected header: alg -35 -> -36 is refused; an added header is signed */
	memcpy(bad, doc, len);
	assert_int_equal(bad[5], 0x22);
	bad[5] ^= 0x01;
	refused(bad, len, at, SL_E_ATTEST_FORMAT, "alg is not ES384");
	static const uint8_t prot_kid[] = {0xa2, 0x01, 0x38, 0x22, 0x04, 0x41, 0x00};
	uint8_t *b2 = rebuild(doc, len, prot_kid, sizeof(prot_kid), NULL, 0, &blen);
	refused(b2, blen, at, SL_E_ATTEST_SIG, "does not verify");
	free(b2);
	/* the signature: r and s */
	memcpy(bad, doc, len);
	bad[len - 90] ^= 0x80;
	refused(bad, len, at, SL_E_ATTEST_SIG, "does not verify");
	memcpy(bad, doc, len);
	bad[len - 1] ^= 0x01;
	refused(bad, len, at, SL_E_ATTEST_SIG, "does not verify");
	/* verified now: the leaf lived three hours in 2022 */
	refused(doc, len, 0, SL_E_ATTEST_CHAIN, "expired");
	/* a nonce other than the document's */
	uint8_t other[256];
	memcpy(other, d.nonce.p, 256);
	other[0] ^= 1;
	assert_int_equal(verify_ev(doc, len, at, other, 256, NULL), SL_E_ATTEST_BINDING);
	assert_non_null(strstr(sl_err_detail(), "nonce"));
	assert_int_equal(verify_ev(doc, len, at, d.nonce.p, 32, NULL), SL_E_ATTEST_BINDING);
	/* a document without a nonce cannot carry a binding */
	size_t dl = 0;
	uint8_t *dbg = load(&vecs[1], &dl);
	assert_int_equal(verify_ev(dbg, dl, at_of(&vecs[1]), other, 32, NULL), SL_E_ATTEST_BINDING);
	assert_non_null(strstr(sl_err_detail(), "nonce is absent"));
	free(dbg);
	sl_nitro_doc_free(&d);
	free(bad);
	free(doc);
}

static void test_swapped_chain(void **state)
{
	(void)state;
	size_t la = 0, lb = 0, n = 0;
	uint8_t *a = load(&vecs[0], &la), *b = load(&vecs[2], &lb), *x;
	time_t at = at_of(&vecs[0]);
	/* another document's leaf: it does not chain through this cabundle */
	x = payload_with(a, la, "certificate", b, lb, NULL, &n);
	refused(x, n, at, SL_E_ATTEST_CHAIN, "Nitro document.certificate");
	free(x);
	/* another document's whole chain, verified at its time: the timestamp is
	 * outside it; with that timestamp too, the signature is not the leaf's */
	sl_nitro_doc db;
	assert_int_equal(sl_nitro_doc_parse(b, lb, &db), SL_OK);
	uint8_t *x1 = payload_with(a, la, "certificate", b, lb, NULL, &n);
	uint8_t *x2 = payload_with(x1, n, "cabundle", b, lb, NULL, &n);
	refused(x2, n, at_of(&vecs[2]), SL_E_ATTEST_CHAIN, "outside the leaf");
	cbor_item_t *ts = cbor_build_uint64(vecs[2].ts_ms);
	uint8_t *x3 = payload_with(x2, n, "timestamp", NULL, 0, ts, &n);
	refused(x3, n, at_of(&vecs[2]), SL_E_ATTEST_SIG, "does not verify");
	cbor_decref(&ts);
	free(x1);
	free(x2);
	free(x3);
	sl_nitro_doc_free(&db);
	/* the root: another pinned fingerprint, or cabundle[0] replaced */
	uint8_t fp[32];
	memcpy(fp, sl_nitro_root_sha256, 32);
	fp[31] ^= 1;
	sl_claims *c = NULL;
	sl_verify_opts o = {.no_binding = true, .at = at};
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_nitro_verify_doc(a, la, fp, &o, c), SL_E_ATTEST_UNTRUSTED);
	assert_non_null(strstr(sl_err_detail(), "not the pinned AWS Nitro Enclaves root"));
	assert_int_equal(sl_nitro_verify_doc(a, la, sl_nitro_root_sha256, &o, c), SL_OK);
	sl_claims_free(c);
	sl_nitro_doc d;
	assert_int_equal(sl_nitro_doc_parse(a, la, &d), SL_OK);
	cbor_item_t *cab = cbor_new_definite_array(d.ncabundle);
	for (size_t i = 0; i < d.ncabundle; i++) {
		size_t k = i == 0 ? 1 : i; /* the next CA twice, the root gone */
		cbor_item_t *e = cbor_build_bytestring(d.cabundle[k].p, d.cabundle[k].len);
		assert_true(cbor_array_push(cab, e));
		cbor_decref(&e);
	}
	x = payload_with(a, la, "cabundle", NULL, 0, cab, &n);
	refused(x, n, at, SL_E_ATTEST_UNTRUSTED, "cabundle[0] is not the pinned");
	free(x);
	cbor_decref(&cab);
	sl_nitro_doc_free(&d);
	free(a);
	free(b);
}

static void test_malformed(void **state)
{
	(void)state;
	size_t len = 0, n = 0;
	uint8_t *doc = load(&vecs[0], &len), *bad = malloc(len + 16);
	time_t at = at_of(&vecs[0]);
	sl_nitro_doc d;
	/* tag 18 (COSE_Sign1) is accepted, another tag is not */
	bad[0] = 0xd2;
	memcpy(bad + 1, doc, len);
	assert_int_equal(verify_ev(bad, len + 1, at, NULL, 0, NULL), SL_OK);
	bad[0] = 0xd3;
	refused(bad, len + 1, at, SL_E_ATTEST_FORMAT, "tag 19");
	/* truncated, trailing bytes */
	refused(doc, len - 1, at, SL_E_ATTEST_FORMAT, "Nitro document");
	memcpy(bad, doc, len);
	bad[len] = 0;
	refused(bad, len + 1, at, SL_E_ATTEST_FORMAT, "trailing");
	/* indefinite lengths, a huge declared array, deep nesting, reserved info */
	static const uint8_t indef[] = {0x9f, 0x40, 0xa0, 0x40, 0x40, 0xff};
	assert_int_equal(sl_nitro_doc_parse(indef, sizeof(indef), &d), SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "indefinite"));
	static const uint8_t huge[] = {0x9b, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x40};
	assert_int_equal(sl_nitro_doc_parse(huge, sizeof(huge), &d), SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "entries"));
	uint8_t deep[64];
	memset(deep, 0x81, sizeof(deep));
	deep[63] = 0x00;
	assert_int_equal(sl_nitro_doc_parse(deep, sizeof(deep), &d), SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "deeper"));
	static const uint8_t resv[] = {0x1c};
	assert_int_equal(sl_nitro_doc_parse(resv, sizeof(resv), &d), SL_E_ATTEST_FORMAT);
	/* payload fields: PCR index 32, a 47-byte PCR, a wrong digest, an unknown key */
	assert_int_equal(sl_nitro_doc_parse(doc, len, &d), SL_OK);
	cbor_item_t *pcrs = cbor_new_definite_map(1);
	uint8_t z[48] = {0};
	cbor_item_t *k32 = cbor_build_uint8(32), *v48 = cbor_build_bytestring(z, 48);
	assert_true(cbor_map_add(pcrs, (struct cbor_pair){.key = k32, .value = v48}));
	uint8_t *x = payload_with(doc, len, "pcrs", NULL, 0, pcrs, &n);
	refused(x, n, at, SL_E_ATTEST_FORMAT, "0..31");
	free(x);
	cbor_decref(&pcrs);
	cbor_decref(&k32);
	cbor_decref(&v48);
	pcrs = cbor_new_definite_map(1);
	k32 = cbor_build_uint8(0);
	v48 = cbor_build_bytestring(z, 47);
	assert_true(cbor_map_add(pcrs, (struct cbor_pair){.key = k32, .value = v48}));
	x = payload_with(doc, len, "pcrs", NULL, 0, pcrs, &n);
	refused(x, n, at, SL_E_ATTEST_FORMAT, "47 bytes");
	free(x);
	cbor_decref(&pcrs);
	cbor_decref(&k32);
	cbor_decref(&v48);
	cbor_item_t *dg = cbor_build_string("SHA256");
	x = payload_with(doc, len, "digest", NULL, 0, dg, &n);
	refused(x, n, at, SL_E_ATTEST_FORMAT, "document.digest");
	free(x);
	cbor_decref(&dg);
	cbor_item_t *num = cbor_build_uint8(7);
	x = payload_with(doc, len, "module_id", NULL, 0, num, &n);
	refused(x, n, at, SL_E_ATTEST_FORMAT, "document.module_id");
	free(x);
	cbor_decref(&num);
	sl_nitro_doc_free(&d);
	/* the evidence object: unknown field, bad base64 */
	json_t *ev = json_pack("{s:s, s:s, s:s}", "kind", "aws-nitro", "document", "AAAA", "x", "");
	sl_claims *c = NULL;
	sl_verify_opts o = {.no_binding = true, .at = at};
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_evidence_verify(ev, &o, c), SL_E_ATTEST_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "evidence.x"));
	json_decref(ev);
	sl_claims_free(c);
	free(bad);
	free(doc);
}

static const char POLICY[] =
    "{\"version\":1,\"allow_unverified_region\":true,\"datasets\":[{\"id\":\"d\","
    "\"allowed_regions\":[\"aws:us-east-1\"],"
    "\"tee_kinds\":[\"aws-nitro\"],%s"
    "\"measurements\":{\"aws-nitro\":{\"pcr0\":[\"%s\"]}}}]}";

static sl_decision *decide(const struct vec *v, const char *extra, const char *pcr0)
{
	size_t len = 0;
	uint8_t *doc = load(v, &len);
	sl_claims *c = NULL;
	sl_policy *p = NULL;
	sl_decision *d = NULL;
	char *text = NULL;
	sl_nitro_doc nd;
	assert_int_equal(sl_nitro_doc_parse(doc, len, &nd), SL_OK);
	assert_int_equal(verify_ev(doc, len, at_of(v), nd.nonce.p, nd.nonce.len, &c), SL_OK);
	sl_nitro_doc_free(&nd);
	assert_true(asprintf(&text, POLICY, extra,
	                     pcr0 != NULL ? pcr0 : sl_claims_get(c, "nitro.pcr0")) > 0);
	if (sl_policy_load((const uint8_t *)text, strlen(text), &p) != SL_OK)
		fail_msg("policy: %s", sl_err_detail());
	assert_int_equal(sl_claims_set(c, "cloud.provider", "aws"), SL_OK);
	assert_int_equal(sl_claims_set(c, "cloud.region", "us-east-1"), SL_OK);
	sl_policy_request req = {"d", NULL, NULL, 0};
	assert_int_equal(sl_policy_evaluate(p, c, &req, &d), SL_OK);
	sl_policy_free(p);
	sl_claims_free(c);
	free(text);
	free(doc);
	return d;
}

static bool has_reason(const sl_decision *d, const char *s)
{
	for (size_t i = 0; i < sl_decision_reason_count(d); i++)
		if (strstr(sl_decision_reason(d, i), s) != NULL)
			return true;
	return false;
}

static void test_policy(void **state)
{
	(void)state;
	/* production enclave, its PCR0 pinned: allowed */
	sl_decision *d = decide(&vecs[0], "", NULL);
	if (!sl_decision_allowed(d))
		fail_msg("denied: %s", sl_decision_reason(d, 0));
	sl_decision_free(d);
	/* another PCR0: denied, naming the measurement */
	d = decide(&vecs[0], "",
	           "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	           "00112233445566778899aabbccddeeff");
	assert_false(sl_decision_allowed(d));
	assert_true(has_reason(d, "measurements.aws-nitro.pcr0"));
	sl_decision_free(d);
	/* debug-mode enclave (PCR0 zeros) even with PCR0 pinned: the rule forbids it */
	d = decide(&vecs[2], "", NULL);
	assert_false(sl_decision_allowed(d));
	assert_true(has_reason(d, "nitro.debug=true"));
	sl_decision_free(d);
	d = decide(&vecs[2], "\"debug_allowed\":true,", NULL);
	if (!sl_decision_allowed(d))
		fail_msg("denied: %s", sl_decision_reason(d, 0));
	sl_decision_free(d);
	/* a bad measurement name is refused at load */
	static const char bad[] = "{\"version\":1,\"datasets\":[{\"id\":\"d\",\"allowed_regions\":"
	                          "[\"eu\"],\"tee_kinds\":"
	                          "[\"aws-nitro\"],\"measurements\":{\"aws-nitro\":{\"pcr32\":"
	                          "[\"00\"]}}}]}";
	sl_policy *p = NULL;
	assert_int_equal(sl_policy_load((const uint8_t *)bad, strlen(bad), &p), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "pcr0..pcr31"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_import_forms), cmocka_unit_test(test_vector_claims),
	    cmocka_unit_test(test_tamper),       cmocka_unit_test(test_swapped_chain),
	    cmocka_unit_test(test_malformed),    cmocka_unit_test(test_policy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
