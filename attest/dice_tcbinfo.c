/* TCG DICE TcbInfo and NVIDIA Hopper's FWID extension, DER through
 * sl_reader: definite, minimal lengths only, one byte tags, every field
 * bounded by its parent. */
#include <string.h>

#include "dice_tcbinfo.h"
#include "seclaunch/secret.h"
#include "seclaunch/buf.h"

#define DER_INTEGER 0x02
#define DER_BIT_STRING 0x03
#define DER_OCTET_STRING 0x04
#define DER_OID 0x06
#define DER_SEQUENCE 0x30
#define CTX_PRIM 0x80 /* [n] IMPLICIT of a primitive type */
#define CTX_CONS 0xA0 /* [n] IMPLICIT of a constructed type */

/* SHA-384's OID content octets: 2.16.840.1.101.3.4.2.2 */
static const uint8_t oid_sha384[] = {0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02};

/* One TLV: its tag, and its value as a sub-reader. */
static SL_RESULT read_tlv(sl_reader *r, uint8_t *tag, sl_reader *val, const char *field)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t l0 = 0, b = 0;
	size_t len = 0;
	SL_GUARD(sl_read_u8(r, tag, field));
	SL_ENSURE((*tag & 0x1F) != 0x1F, SL_E_ATTEST_FORMAT,
	          "DICE TcbInfo: %s: multi-byte tag 0x%02x", field, *tag);
	SL_GUARD(sl_read_u8(r, &l0, field));
	if (l0 < 0x80) {
		len = l0;
	} else {
		size_t n = l0 & 0x7F;
		SL_ENSURE(n >= 1 && n <= 2, SL_E_ATTEST_FORMAT,
		          "DICE TcbInfo: %s: length form 0x%02x (indefinite or over 65535)", field,
		          l0);
		for (size_t i = 0; i < n; i++) {
			SL_GUARD(sl_read_u8(r, &b, field));
			SL_ENSURE(i > 0 || b != 0, SL_E_ATTEST_FORMAT,
			          "DICE TcbInfo: %s: length not minimally encoded", field);
			len = len << 8 | b;
		}
		SL_ENSURE(len >= 0x80, SL_E_ATTEST_FORMAT,
		          "DICE TcbInfo: %s: length not minimally encoded", field);
	}
	SL_GUARD(sl_read_sub(r, len, val, field));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT expect_tlv(sl_reader *r, uint8_t want, sl_reader *val, const char *field)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	uint8_t tag = 0;
	SL_GUARD(read_tlv(r, &tag, val, field));
	SL_ENSURE(tag == want, SL_E_ATTEST_FORMAT, "DICE TcbInfo: %s: tag 0x%02x, not 0x%02x",
	          field, tag, want);
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT view_all(sl_reader *v, sl_dice_bytes *b, const char *field)
{
	b->len = sl_reader_left(v);
	return sl_read_view(v, b->len, &b->p, field);
}

/* A non-negative DER INTEGER that fits 64 bits. */
static SL_RESULT read_uint(sl_reader *v, uint64_t *out, const char *field)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	size_t n = sl_reader_left(v);
	const uint8_t *p = NULL;
	SL_GUARD(sl_read_view(v, n, &p, field));
	SL_ENSURE(n >= 1, SL_E_ATTEST_FORMAT, "DICE TcbInfo: %s: empty INTEGER", field);
	SL_ENSURE((p[0] & 0x80) == 0, SL_E_ATTEST_FORMAT, "DICE TcbInfo: %s: negative", field);
	SL_ENSURE(n == 1 || p[0] != 0 || (p[1] & 0x80) != 0, SL_E_ATTEST_FORMAT,
	          "DICE TcbInfo: %s: INTEGER not minimally encoded", field);
	SL_ENSURE(n <= 8 || (n == 9 && p[0] == 0), SL_E_ATTEST_FORMAT,
	          "DICE TcbInfo: %s: over 64 bits", field);
	*out = 0;
	for (size_t i = 0; i < n; i++)
		*out = *out << 8 | p[i];
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT read_bits(sl_reader *v, sl_dice_bytes *b, const char *field)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	SL_GUARD(view_all(v, b, field));
	SL_ENSURE(b->len >= 1 && b->p[0] <= 7 && (b->len > 1 || b->p[0] == 0), SL_E_ATTEST_FORMAT,
	          "DICE TcbInfo: %s: not a BIT STRING", field);
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT read_fwid(sl_reader *r, sl_dice_fwid *f, const char *field)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader seq, v;
	SL_GUARD(expect_tlv(r, DER_SEQUENCE, &seq, field));
	SL_GUARD(expect_tlv(&seq, DER_OID, &v, "FWID.hashAlg"));
	SL_GUARD(view_all(&v, &f->alg, "FWID.hashAlg"));
	SL_ENSURE(f->alg.len > 0, SL_E_ATTEST_FORMAT, "DICE TcbInfo: FWID.hashAlg: empty OID");
	SL_GUARD(expect_tlv(&seq, DER_OCTET_STRING, &v, "FWID.digest"));
	SL_GUARD(view_all(&v, &f->digest, "FWID.digest"));
	SL_GUARD(sl_reader_expect_end(&seq));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT read_fwids(sl_reader *v, sl_dice_tcbinfo *t)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	while (sl_reader_left(v) > 0) {
		SL_ENSURE(t->nfwids < SL_DICE_MAX_FWIDS, SL_E_ATTEST_FORMAT,
		          "DICE TcbInfo: fwids: more than %d entries", SL_DICE_MAX_FWIDS);
		SL_GUARD(read_fwid(v, &t->fwids[t->nfwids], "fwids[]"));
		t->nfwids++;
	}
	SL_ENSURE(t->nfwids > 0, SL_E_ATTEST_FORMAT, "DICE TcbInfo: fwids: empty list");
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT read_field(unsigned n, sl_reader *v, sl_dice_tcbinfo *t)
{
	switch (n) {
	case 0:
		return view_all(v, &t->vendor, "vendor");
	case 1:
		return view_all(v, &t->model, "model");
	case 2:
		return view_all(v, &t->version, "version");
	case 3:
		t->has_svn = true;
		return read_uint(v, &t->svn, "svn");
	case 4:
		t->has_layer = true;
		return read_uint(v, &t->layer, "layer");
	case 5:
		t->has_index = true;
		return read_uint(v, &t->index, "index");
	case 6:
		return read_fwids(v, t);
	case 7:
		return read_bits(v, &t->flags, "flags");
	case 8:
		return view_all(v, &t->vendor_info, "vendorInfo");
	case 9:
		return view_all(v, &t->type, "type");
	case 10:
		return read_bits(v, &t->flags_mask, "flagsMask");
	default: /* 11, integrityRegisters: a list this verifier does not use */
		return sl_read_skip(v, sl_reader_left(v), "integrityRegisters");
	}
}

sl_err sl_dice_tcbinfo_parse(const uint8_t *der, size_t len, sl_dice_tcbinfo *t)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r, seq, v;
	int last = -1;

	memset(t, 0, sizeof(*t));
	SL_ENSURE(der != NULL && len <= SL_DICE_MAX_DER, SL_E_ATTEST_FORMAT,
	          "DICE TcbInfo: %zu bytes, more than %d", len, SL_DICE_MAX_DER);
	sl_reader_init(&r, der, len, "DICE TcbInfo");
	SL_GUARD(expect_tlv(&r, DER_SEQUENCE, &seq, "DiceTcbInfo"));
	SL_GUARD(sl_reader_expect_end(&r));
	while (sl_reader_left(&seq) > 0) {
		uint8_t tag = 0;
		SL_GUARD(read_tlv(&seq, &tag, &v, "DiceTcbInfo field"));
		unsigned n = tag & 0x1F;
		/* fwids and integrityRegisters are constructed, the rest primitive */
		bool cons = n == 6 || n == 11;
		SL_ENSURE((tag & 0xE0) == (cons ? CTX_CONS : CTX_PRIM) && n <= 11,
		          SL_E_ATTEST_FORMAT, "DICE TcbInfo: unexpected field tag 0x%02x", tag);
		SL_ENSURE((int)n > last, SL_E_ATTEST_FORMAT,
		          "DICE TcbInfo: field [%u] repeated or out of order", n);
		last = (int)n;
		SL_GUARD(read_field(n, &v, t));
		SL_GUARD(sl_reader_expect_end(&v));
	}
	rc = SL_OK;
out:
	if (rc == SL_E_FORMAT)
		rc = SL_E_ATTEST_FORMAT;
	return rc;
}

sl_err sl_dice_nv_hopper_parse(const uint8_t *der, size_t len, sl_dice_fwid *fwid)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r, seq, v;
	uint64_t version = 0;

	memset(fwid, 0, sizeof(*fwid));
	SL_ENSURE(der != NULL && len <= SL_DICE_MAX_DER, SL_E_ATTEST_FORMAT,
	          "GPU FWID extension: %zu bytes, more than %d", len, SL_DICE_MAX_DER);
	sl_reader_init(&r, der, len, "GPU FWID extension");
	SL_GUARD(expect_tlv(&r, DER_SEQUENCE, &seq, "FWID extension"));
	SL_GUARD(sl_reader_expect_end(&r));
	SL_GUARD(expect_tlv(&seq, DER_INTEGER, &v, "FWID extension.version"));
	SL_GUARD(read_uint(&v, &version, "FWID extension.version"));
	SL_GUARD(expect_tlv(&seq, DER_SEQUENCE, &v, "FWID extension.key"));
	SL_GUARD(read_fwid(&seq, fwid, "FWID extension.fwid"));
	SL_GUARD(sl_reader_expect_end(&seq));
	rc = SL_OK;
out:
	if (rc == SL_E_FORMAT)
		rc = SL_E_ATTEST_FORMAT;
	return rc;
}

bool sl_dice_is_standard(const uint8_t *der, size_t len)
{
	sl_reader r, seq;
	uint8_t tag = 0;
	sl_reader_init(&r, der, len, "DICE TcbInfo");
	if (read_tlv(&r, &tag, &seq, "DiceTcbInfo") != SL_OK || tag != DER_SEQUENCE)
		return false;
	/* an empty DiceTcbInfo (every field absent) is standard too */
	if (sl_reader_left(&seq) == 0)
		return true;
	if (sl_read_u8(&seq, &tag, "DiceTcbInfo field") != SL_OK)
		return false;
	return (tag & 0xC0) == 0x80;
}

bool sl_dice_fwid_is_sha384(const sl_dice_fwid *f)
{
	return f->alg.p != NULL && f->alg.len == sizeof(oid_sha384) &&
	       sl_ct_eq(f->alg.p, oid_sha384, sizeof(oid_sha384)) && f->digest.p != NULL &&
	       f->digest.len == 48;
}
