/* The parsing discipline: strict JSON accessors (seclaunch/json.h) and the
 * reader's delimiter-bounded reads and validity precondition (seclaunch/buf.h).
 * Good input, and each way it can be wrong: unknown members, embedded NUL,
 * wrong types, wrong lengths, bad digits, missing delimiters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "seclaunch/buf.h"
#include "seclaunch/error.h"
#include "seclaunch/json.h"

#include "expect.h"

static json_t *parse(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
	if (j == NULL)
		fail_msg("test JSON does not parse: %s", e.text);
	return j;
}

static void test_only_fields(void **state)
{
	(void)state;
	const char *const allowed[] = {"a", "b", NULL};
	json_t *ok = parse("{\"a\":1,\"b\":\"x\"}");
	json_t *extra = parse("{\"a\":1,\"region_verified\":true}");
	json_t *empty = parse("{}");
	json_t *arr = parse("[1]");

	assert_null(sl_json_unknown(ok, allowed));
	assert_int_equal(sl_json_only(ok, allowed, SL_E_INPUT, "$.doc"), SL_OK);
	assert_int_equal(sl_json_only(empty, allowed, SL_E_INPUT, "$.doc"), SL_OK);
	assert_string_equal(sl_json_unknown(extra, allowed), "region_verified");
	expect_fail(sl_json_only(extra, allowed, SL_E_ATTEST_FORMAT, "$.identity[0]"),
	            SL_E_ATTEST_FORMAT, "$.identity[0]: unknown field \"region_verified\"",
	            "unknown member named with its path");
	expect_fail(sl_json_only(arr, allowed, SL_E_INPUT, "$.doc"), SL_E_INPUT,
	            "$.doc: not a JSON object", "array where an object is wanted");
	/* a NULL allowed list allows nothing */
	assert_string_equal(sl_json_unknown(ok, NULL), "a");
	/* the caller's code is kept */
	assert_int_equal(sl_json_only(extra, allowed, SL_E_KMS_PROTOCOL, NULL), SL_E_KMS_PROTOCOL);
	json_decref(ok);
	json_decref(extra);
	json_decref(empty);
	json_decref(arr);
}

static void test_strings(void **state)
{
	(void)state;
	json_t *o = parse("{\"s\":\"abc\",\"nul\":\"ab\\u0000cd\",\"n\":5,\"z\":null,\"e\":\"\"}");
	const char *s = NULL;

	assert_string_equal(sl_json_getstr(o, "s"), "abc");
	assert_string_equal(sl_json_strval(json_object_get(o, "s")), "abc");
	/* embedded NUL: json_string_value would give "ab" */
	assert_string_equal(json_string_value(json_object_get(o, "nul")), "ab");
	assert_null(sl_json_getstr(o, "nul"));
	assert_null(sl_json_getstr(o, "n"));
	assert_null(sl_json_getstr(o, "missing"));
	assert_null(sl_json_getstr(NULL, "s"));
	assert_null(sl_json_getstr(json_object_get(o, "s"), "s")); /* not an object */
	assert_string_equal(sl_json_getstr(o, "e"), "");

	assert_int_equal(sl_json_str(o, "s", 3, SL_E_INPUT, "$", &s), SL_OK);
	assert_string_equal(s, "abc");
	expect_fail(sl_json_str(o, "s", 2, SL_E_INPUT, "$", &s), SL_E_INPUT,
	            "$.s: longer than 2 bytes", "over the bound");
	assert_null(s);
	expect_fail(sl_json_str(o, "nul", 0, SL_E_INPUT, "$.req", &s), SL_E_INPUT,
	            "$.req.nul: contains a NUL character", "embedded NUL");
	expect_fail(sl_json_str(o, "n", 0, SL_E_FORMAT, "$", &s), SL_E_FORMAT, "$.n: not a string",
	            "number");
	expect_fail(sl_json_str(o, "missing", 0, SL_E_FORMAT, "$", &s), SL_E_FORMAT,
	            "$.missing: missing", "absent");
	expect_fail(sl_json_str(o, "z", 0, SL_E_FORMAT, "$", &s), SL_E_FORMAT, "$.z: missing",
	            "null where a string is required");
	assert_int_equal(sl_json_str_opt(o, "missing", 0, SL_E_FORMAT, "$", &s), SL_OK);
	assert_null(s);
	assert_int_equal(sl_json_str_opt(o, "z", 0, SL_E_FORMAT, "$", &s), SL_OK);
	assert_null(s);
	expect_fail(sl_json_str_opt(o, "nul", 0, SL_E_FORMAT, "$", &s), SL_E_FORMAT,
	            "contains a NUL", "optional, but present with a NUL");
	json_decref(o);
}

static void test_hex_b64(void **state)
{
	(void)state;
	uint8_t out[4], big[32];
	json_t *o = parse("{\"h\":\"00fFa1b2\",\"short\":\"00ff\",\"long\":\"00ffa1b2c3\","
	                  "\"odd\":\"00ffa1b\",\"bad\":\"00ffa1zz\",\"b\":\"AAECAw==\","
	                  "\"bnopad\":\"AAECAw\",\"bbad\":\"AA*CAw==\",\"b5\":\"AAECAwQ=\","
	                  "\"hnul\":\"00ff\\u0000000\"}");

	assert_int_equal(sl_json_hex(o, "h", out, 4, SL_E_INPUT, "$"), SL_OK);
	assert_memory_equal(out, "\x00\xff\xa1\xb2", 4);
	expect_fail(sl_json_hex(o, "short", out, 4, SL_E_INPUT, "$"), SL_E_INPUT,
	            "$.short: want 8 hex digits (4 bytes), got 4", "too short");
	expect_fail(sl_json_hex(o, "long", out, 4, SL_E_INPUT, "$"), SL_E_INPUT, "got 10",
	            "too long");
	expect_fail(sl_json_hex(o, "odd", out, 4, SL_E_INPUT, "$"), SL_E_INPUT, "got 7",
	            "odd length");
	expect_fail(sl_json_hex(o, "bad", out, 4, SL_E_INPUT, "$"), SL_E_INPUT,
	            "$.bad: not hex at character 6", "bad digit");
	expect_fail(sl_json_hex(o, "hnul", out, 4, SL_E_INPUT, "$"), SL_E_INPUT, "contains a NUL",
	            "NUL inside the hex");
	expect_fail(sl_json_hex(o, "missing", out, 4, SL_E_INPUT, "$"), SL_E_INPUT, "missing",
	            "absent");

	assert_int_equal(sl_json_b64(o, "b", out, 4, SL_E_KMS_PROTOCOL, "$"), SL_OK);
	assert_memory_equal(out, "\x00\x01\x02\x03", 4);
	expect_fail(sl_json_b64(o, "b5", out, 4, SL_E_KMS_PROTOCOL, "$"), SL_E_KMS_PROTOCOL,
	            "$.b5: not base64 of 4 bytes", "5 bytes in as many characters as 4");
	expect_fail(sl_json_b64(o, "b", big, 32, SL_E_KMS_PROTOCOL, "$"), SL_E_KMS_PROTOCOL,
	            "want 32 bytes", "4 bytes for 32");
	expect_fail(sl_json_b64(o, "bnopad", out, 4, SL_E_KMS_PROTOCOL, "$"), SL_E_KMS_PROTOCOL,
	            "got 6", "padding missing");
	expect_fail(sl_json_b64(o, "bbad", out, 4, SL_E_KMS_PROTOCOL, "$"), SL_E_KMS_PROTOCOL,
	            "not base64 of 4 bytes", "bad character");
	/* over raw text with its length: a NUL inside is not a short string */
	assert_int_equal(sl_hex_exact("0a0b", 4, out, 2, SL_E_INPUT, "x"), SL_OK);
	expect_fail(sl_hex_exact("0a\0b", 4, out, 2, SL_E_INPUT, "x"), SL_E_INPUT, "not hex",
	            "raw NUL");
	expect_fail(sl_b64_exact(NULL, 0, out, 4, SL_E_INPUT, "x"), SL_E_INPUT, "want 4 bytes",
	            "NULL text");
	json_decref(o);
}

static void test_read_until(void **state)
{
	(void)state;
	const char *jwt = "aGVhZA.cGF5.c2ln";
	sl_reader r, p;
	const uint8_t *v = NULL;

	sl_reader_init(&r, jwt, strlen(jwt), "JWT");
	assert_int_equal(sl_read_until(&r, '.', &p, "header"), SL_OK);
	assert_int_equal(sl_reader_left(&p), 6);
	assert_int_equal(sl_read_view(&p, 6, &v, "header"), SL_OK);
	assert_memory_equal(v, "aGVhZA", 6);
	assert_int_equal(sl_reader_offset(&r), 7); /* past the delimiter */
	assert_int_equal(sl_read_until(&r, '.', &p, "payload"), SL_OK);
	assert_int_equal(sl_reader_left(&p), 4);
	/* no third '.': read_until fails naming the field, the reader is unmoved */
	size_t at = sl_reader_offset(&r);
	expect_fail(sl_read_until(&r, '.', &p, "signature"), SL_E_FORMAT,
	            "JWT: signature: no 0x2e delimiter after offset 12", "missing delimiter");
	assert_int_equal(sl_reader_offset(&r), at);
	/* read_token takes the rest */
	assert_int_equal(sl_read_token(&r, '.', &p, "signature"), SL_OK);
	assert_int_equal(sl_reader_left(&p), 4);
	assert_int_equal(sl_reader_left(&r), 0);
	assert_int_equal(sl_reader_expect_end(&r), SL_OK);

	/* an empty field, a delimiter at the very end, and an embedded NUL */
	const uint8_t raw[] = {'.', 'a', 0, 'b', '\n'};
	sl_reader_init(&r, raw, sizeof(raw), "line");
	assert_int_equal(sl_read_until(&r, '.', &p, "empty"), SL_OK);
	assert_int_equal(sl_reader_left(&p), 0);
	assert_int_equal(sl_read_until(&r, '\n', &p, "line"), SL_OK);
	assert_int_equal(sl_reader_left(&p), 3); /* the NUL is a byte like any other */
	assert_int_equal(sl_reader_left(&r), 0);
	expect_fail(sl_read_until(&r, '\n', &p, "next"), SL_E_FORMAT, "no 0x0a delimiter",
	            "empty reader");
	assert_int_equal(sl_read_token(&r, '\n', &p, "next"), SL_OK);
	assert_int_equal(sl_reader_left(&p), 0);
	/* sub-readers stay inside their parent */
	sl_reader_init(&r, "ab.cd", 5, "x");
	assert_int_equal(sl_read_until(&r, '.', &p, "a"), SL_OK);
	expect_fail(sl_read_skip(&p, 3, "past"), SL_E_FORMAT, "need 3 bytes", "past the sub");
}

static void test_validate(void **state)
{
	(void)state;
	sl_reader r, p;
	uint8_t b = 0;
	const char *text = "abc";

	sl_reader_init(&r, text, 3, "v");
	assert_true(sl_reader_valid(&r));
	assert_int_equal(sl_reader_validate(&r), SL_OK);
	sl_reader_init(&r, NULL, 10, "v"); /* no data: an empty reader */
	assert_true(sl_reader_valid(&r));
	assert_int_equal(sl_reader_left(&r), 0);
	/* a reader whose fields were written past the API */
	sl_reader_init(&r, text, 3, "v");
	r.off = 4;
	assert_false(sl_reader_valid(&r));
	assert_int_equal(sl_reader_left(&r), 0);
	expect_fail(sl_read_u8(&r, &b, "byte"), SL_E_INTERNAL, "v: reader state is inconsistent",
	            "offset past the end");
	expect_fail(sl_read_until(&r, 'c', &p, "x"), SL_E_INTERNAL, "inconsistent", "until");
	expect_fail(sl_reader_expect_end(&r), SL_E_INTERNAL, "inconsistent", "expect_end");
	r.off = 0;
	r.data = NULL;
	expect_fail(sl_read_u8(&r, &b, "byte"), SL_E_INTERNAL, "inconsistent", "NULL data");
	assert_false(sl_reader_valid(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_only_fields), cmocka_unit_test(test_strings),
	    cmocka_unit_test(test_hex_b64),     cmocka_unit_test(test_read_until),
	    cmocka_unit_test(test_validate),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
