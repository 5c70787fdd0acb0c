/* TCG DICE TcbInfo: the extensions of the real Blackwell and H100 leaves
 * ($SL_VECTORS/nvidia-gpu), a DER with every field, every truncation, and
 * one broken rule at a time (tag order, repeats, lengths, INTEGERs, BIT
 * STRINGs, FWID shape, trailing bytes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>

#include "../../attest/dice_tcbinfo.h"
#include "../../attest/x509_util.h"
#include "testlib.h"

/* The extension oid of the first certificate of a vector chain, copied out. */
static uint8_t *leaf_ext(const char *chain, const char *oid, size_t *len)
{
	size_t n = 0;
	uint8_t *pem = tl_vector_load(&n, "nvidia-gpu/%s", chain);
	STACK_OF(X509) *s = sk_X509_new_null();
	assert_int_equal(sl_x509_parse_blob(pem, n, s, NULL, chain), SL_OK);
	const ASN1_OCTET_STRING *e = sl_x509_ext(sk_X509_value(s, 0), oid);
	assert_non_null(e);
	*len = (size_t)ASN1_STRING_length(e);
	uint8_t *out = malloc(*len);
	memcpy(out, ASN1_STRING_get0_data(e), *len);
	sk_X509_pop_free(s, X509_free);
	free(pem);
	return out;
}

static void blackwell_leaf(void **state)
{
	(void)state;
	size_t len = 0;
	uint8_t *der = leaf_ext("blackwell_cert_chain_case1.txt", SL_DICE_OID_TCBINFO_1, &len);
	sl_dice_tcbinfo t;
	static const uint8_t fwid0[8] = {0x9b, 0x92, 0xcc, 0x3e, 0x53, 0xb9, 0x26, 0x52};
	assert_true(sl_dice_is_standard(der, len));
	assert_int_equal(sl_dice_tcbinfo_parse(der, len, &t), SL_OK);
	assert_int_equal(t.vendor.len, 6);
	assert_memory_equal(t.vendor.p, "NVIDIA", 6);
	assert_int_equal(t.model.len, 13);
	assert_memory_equal(t.model.p, "GB20X A01 GSP", 13);
	assert_memory_equal(t.version.p, "02", 2);
	assert_true(t.has_svn && t.has_layer && t.has_index);
	assert_int_equal(t.svn, 2);
	assert_int_equal(t.layer, 0);
	assert_int_equal(t.index, 0);
	assert_int_equal(t.nfwids, 2);
	assert_true(sl_dice_fwid_is_sha384(&t.fwids[0]));
	assert_memory_equal(t.fwids[0].digest.p, fwid0, sizeof(fwid0));
	assert_true(sl_dice_fwid_is_sha384(&t.fwids[1])); /* the all-zero second entry */
	assert_int_equal(t.flags.len, 5);
	assert_int_equal(t.vendor_info.len, 1);
	assert_int_equal(t.type.len, 1);
	assert_null(t.flags_mask.p);
	/* every field borrows the input */
	assert_true(t.fwids[0].digest.p > der && t.fwids[0].digest.p + 48 <= der + len);
	/* not Hopper's layout */
	sl_dice_fwid f;
	assert_int_equal(sl_dice_nv_hopper_parse(der, len, &f), SL_E_ATTEST_FORMAT);
	for (size_t n = 0; n < len; n++)
		assert_int_equal(sl_dice_tcbinfo_parse(der, n, &t), SL_E_ATTEST_FORMAT);
	free(der);
}

static void hopper_leaf(void **state)
{
	(void)state;
	size_t len = 0;
	uint8_t *der = leaf_ext("hopper_cert_chain_case1.txt", SL_DICE_OID_TCBINFO, &len);
	static const uint8_t fwid0[8] = {0xf5, 0xc3, 0x84, 0xae, 0xbb, 0x57, 0x92, 0x17};
	sl_dice_fwid f;
	sl_dice_tcbinfo t;
	assert_false(sl_dice_is_standard(der, len));
	assert_int_equal(sl_dice_nv_hopper_parse(der, len, &f), SL_OK);
	assert_true(sl_dice_fwid_is_sha384(&f));
	assert_memory_equal(f.digest.p, fwid0, sizeof(fwid0));
	assert_ptr_equal(f.digest.p, der + len - 48);
	assert_int_equal(sl_dice_tcbinfo_parse(der, len, &t), SL_E_ATTEST_FORMAT);
	for (size_t n = 0; n < len; n++)
		assert_int_equal(sl_dice_nv_hopper_parse(der, n, &f), SL_E_ATTEST_FORMAT);
	free(der);
}

/* vendor "V", model "M", version "1", svn 5, layer 1, index 0, one FWID
 * {1.2, "abc"}, flags, vendorInfo, type, flagsMask, integrityRegisters {} */
static const uint8_t full[] = {
    0x30, 0x2e, 0x80, 0x01, 'V',  0x81, 0x01, 'M',  0x82, 0x01, '1',  0x83, 0x01, 0x05, 0x84, 0x01,
    0x01, 0x85, 0x01, 0x00, 0xa6, 0x0a, 0x30, 0x08, 0x06, 0x01, 0x2a, 0x04, 0x03, 'a',  'b',  'c',
    0x87, 0x02, 0x00, 0x01, 0x88, 0x01, 0x00, 0x89, 0x01, 0x00, 0x8a, 0x02, 0x00, 0xff, 0xab, 0x00,
};

static void full_layout(void **state)
{
	(void)state;
	sl_dice_tcbinfo t;
	assert_int_equal(sl_dice_tcbinfo_parse(full, sizeof(full), &t), SL_OK);
	assert_int_equal(t.svn, 5);
	assert_int_equal(t.layer, 1);
	assert_int_equal(t.nfwids, 1);
	assert_int_equal(t.fwids[0].digest.len, 3);
	assert_false(sl_dice_fwid_is_sha384(&t.fwids[0]));
	assert_int_equal(t.flags_mask.len, 2);
	/* every field absent is a valid (empty) DiceTcbInfo */
	static const uint8_t empty[] = {0x30, 0x00};
	assert_int_equal(sl_dice_tcbinfo_parse(empty, sizeof(empty), &t), SL_OK);
	assert_int_equal(t.nfwids, 0);
	assert_false(t.has_svn);
}

/* One byte of full[] changed (or a byte appended); each must fail, naming why. */
static void broken_rules(void **state)
{
	(void)state;
	struct {
		size_t off;
		uint8_t v;
		const char *why;
	} cases[] = {
	    {2, 0x81, "out of order"},          /* vendor tagged [1]: [1] then [1] */
	    {5, 0x80, "out of order"},          /* model tagged [0] after [0] */
	    {2, 0xa0, "unexpected field tag"},  /* vendor constructed */
	    {20, 0x86, "unexpected field tag"}, /* fwids primitive */
	    {46, 0xac, "unexpected field tag"}, /* [12] */
	    {2, 0x9f, "multi-byte tag"},        /* high tag number form */
	    {1, 0x80, "indefinite"},            /* indefinite length */
	    {13, 0x85, "negative"},             /* svn 0x85 */
	    {12, 0x40, "need"},                 /* svn's length overruns the SEQUENCE */
	    {34, 0x08, "not a BIT STRING"},     /* flags: 8 unused bits */
	    {24, 0x02, "tag 0x02"},             /* FWID.hashAlg not an OID */
	    {27, 0x0c, "tag 0x0c"},             /* FWID.digest not an OCTET STRING */
	    {1, 0x2d, "trailing bytes"},        /* the SEQUENCE one byte short */
	};
	uint8_t m[sizeof(full) + 4];
	sl_dice_tcbinfo t;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(m, full, sizeof(full));
		m[cases[i].off] = cases[i].v;
		expect_fail(sl_dice_tcbinfo_parse(m, sizeof(full), &t), SL_E_ATTEST_FORMAT,
		            cases[i].why);
	}
	/* a byte after the SEQUENCE */
	memcpy(m, full, sizeof(full));
	m[sizeof(full)] = 0;
	expect_fail(sl_dice_tcbinfo_parse(m, sizeof(full) + 1, &t), SL_E_ATTEST_FORMAT,
	            "trailing bytes");
	/* lengths: long form for a short length, a leading zero, three octets */
	static const uint8_t long_short[] = {0x30, 0x81, 0x03, 0x80, 0x01, 'V'};
	expect_fail(sl_dice_tcbinfo_parse(long_short, sizeof(long_short), &t), SL_E_ATTEST_FORMAT,
	            "minimally");
	static const uint8_t lead0[] = {0x30, 0x82, 0x00, 0x03, 0x80, 0x01, 'V'};
	expect_fail(sl_dice_tcbinfo_parse(lead0, sizeof(lead0), &t), SL_E_ATTEST_FORMAT,
	            "minimally");
	static const uint8_t three[] = {0x30, 0x83, 0x00, 0x00, 0x03, 0x80, 0x01, 'V'};
	expect_fail(sl_dice_tcbinfo_parse(three, sizeof(three), &t), SL_E_ATTEST_FORMAT,
	            "over 65535");
	/* INTEGER: non-minimal, too wide, empty */
	static const uint8_t svn00[] = {0x30, 0x04, 0x83, 0x02, 0x00, 0x05};
	expect_fail(sl_dice_tcbinfo_parse(svn00, sizeof(svn00), &t), SL_E_ATTEST_FORMAT,
	            "not minimally");
	static const uint8_t svn9[] = {0x30, 0x0b, 0x83, 0x09, 1, 0, 0, 0, 0, 0, 0, 0, 0};
	expect_fail(sl_dice_tcbinfo_parse(svn9, sizeof(svn9), &t), SL_E_ATTEST_FORMAT,
	            "over 64 bits");
	static const uint8_t svn0[] = {0x30, 0x02, 0x83, 0x00};
	expect_fail(sl_dice_tcbinfo_parse(svn0, sizeof(svn0), &t), SL_E_ATTEST_FORMAT,
	            "empty INTEGER");
	/* fwids: empty list; an FWID with a third element; more than the cap */
	static const uint8_t nofw[] = {0x30, 0x02, 0xa6, 0x00};
	expect_fail(sl_dice_tcbinfo_parse(nofw, sizeof(nofw), &t), SL_E_ATTEST_FORMAT,
	            "empty list");
	static const uint8_t fw3[] = {0x30, 0x0c, 0xa6, 0x0a, 0x30, 0x08, 0x06,
	                              0x01, 0x2a, 0x04, 0x01, 'a',  0x05, 0x00};
	expect_fail(sl_dice_tcbinfo_parse(fw3, sizeof(fw3), &t), SL_E_ATTEST_FORMAT,
	            "trailing bytes");
	uint8_t many[2 + 2 + 9 * 7];
	size_t k = 0;
	many[k++] = 0x30;
	many[k++] = (uint8_t)(sizeof(many) - 2);
	many[k++] = 0xa6;
	many[k++] = (uint8_t)(sizeof(many) - 4);
	for (int i = 0; i < 9; i++) {
		static const uint8_t one[] = {0x30, 0x05, 0x06, 0x01, 0x2a, 0x04, 0x00};
		memcpy(many + k, one, sizeof(one));
		k += sizeof(one);
	}
	expect_fail(sl_dice_tcbinfo_parse(many, sizeof(many), &t), SL_E_ATTEST_FORMAT,
	            "more than 8 entries");
	/* not a SEQUENCE at all, and nothing */
	expect_fail(sl_dice_tcbinfo_parse(full + 2, 3, &t), SL_E_ATTEST_FORMAT, "tag 0x80");
	assert_int_equal(sl_dice_tcbinfo_parse(full, 0, &t), SL_E_ATTEST_FORMAT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(blackwell_leaf),
	    cmocka_unit_test(hopper_leaf),
	    cmocka_unit_test(full_layout),
	    cmocka_unit_test(broken_rules),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
