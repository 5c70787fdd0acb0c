/* The parsers of what remote sources send (launcher/dataset/remote_parse.c):
 * Content-Range values, the AWS shared credentials file, the AWS instance
 * metadata credentials and the GCP metadata token; lies and malformed
 * input refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../launcher/dataset/remote.h"

static void test_content_range(void **state)
{
	(void)state;
	uint64_t a, b, t;
	assert_true(sl_remote_content_range(" bytes 0-8388607/268435456", &a, &b, &t));
	assert_true(a == 0 && b == 8388607 && t == 268435456);
	assert_true(sl_remote_content_range("bytes 5-5/6 ", &a, &b, &t));
	assert_true(a == 5 && b == 5 && t == 6);
	const char *bad[] = {
	    "",
	    "bytes */100",                                       /* unsatisfied range */
	    "bytes 0-9/*",                                       /* unknown total */
	    "bytes 9-0/10",                                      /* reversed */
	    "bytes 0-10/10",                                     /* past the end */
	    "bytes -1-9/10",                                     /* a sign */
	    "bytes 0-9/10abc",                                   /* trailing junk */
	    "bytes 0-9/10/11",                                   /* trailing junk */
	    "items 0-9/10",                                      /* another unit */
	    "bytes 0-9",                                         /* no total */
	    "bytes 0-18446744073709551616/18446744073709551617", /* overflow */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (sl_remote_content_range(bad[i], &a, &b, &t))
			fail_msg("accepted \"%s\"", bad[i]);
}

static void test_aws_file(void **state)
{
	(void)state;
	const char text[] = "# a comment\n"
	                    "[other]\n"
	                    "aws_access_key_id = WRONG\n"
	                    "  [default]  \r\n"
	                    "aws_access_key_id = AKIDEXAMPLE\r\n"
	                    "aws_secret_access_key=wJalr/XUtnFEMI=K7\n"
	                    "region = eu-west-1\n"
	                    "[defaultx]\n"
	                    "aws_session_token = NOTTHIS\n";
	sl_remote_creds c = {0};
	assert_int_equal(sl_remote_parse_aws_file(text, strlen(text), "default", &c), SL_OK);
	assert_string_equal(c.id, "AKIDEXAMPLE");
	assert_string_equal(c.secret, "wJalr/XUtnFEMI=K7");
	assert_null(c.token);
	sl_remote_creds_wipe(&c);
	assert_int_equal(sl_remote_parse_aws_file(text, strlen(text), "other", &c), SL_OK);
	assert_string_equal(c.id, "WRONG");
	assert_null(c.secret);
	sl_remote_creds_wipe(&c);
	assert_null(c.id);
	/* a NUL inside the file is refused, not read as the line's end */
	const char nul[] = "[default]\naws_access_key_id = A\0B\n";
	assert_int_equal(sl_remote_parse_aws_file(nul, sizeof(nul) - 1, "default", &c), SL_E_INPUT);
	sl_remote_creds_wipe(&c);
}

static void test_imds(void **state)
{
	(void)state;
	sl_remote_creds c = {0};
	const char ok[] =
	    "{\"Code\":\"Success\",\"AccessKeyId\":\"ASIA\",\"SecretAccessKey\":\"s\","
	    "\"Token\":\"t\"}";
	assert_int_equal(sl_remote_parse_imds((const uint8_t *)ok, strlen(ok), &c), SL_OK);
	assert_string_equal(c.id, "ASIA");
	assert_string_equal(c.secret, "s");
	assert_string_equal(c.token, "t");
	sl_remote_creds_wipe(&c);
	const char *bad[] = {
	    "",
	    "[]",
	    "{\"AccessKeyId\":\"A\"}",
	    "{\"AccessKeyId\":\"A\",\"SecretAccessKey\":1}",
	    "{\"AccessKeyId\":\"A\\u0000B\",\"SecretAccessKey\":\"s\"}",
	    "{\"AccessKeyId\":\"A\",\"AccessKeyId\":\"B\",\"SecretAccessKey\":\"s\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(sl_remote_parse_imds((const uint8_t *)bad[i], strlen(bad[i]), &c),
		                 SL_E_REMOTE_UNREACHABLE);
		assert_null(c.id);
	}
}

static void test_gcp_token(void **state)
{
	(void)state;
	char *t = NULL;
	const char ok[] = "{\"access_token\":\"ya29.x\",\"expires_in\":3599}";
	assert_int_equal(sl_remote_parse_gcp_token((const uint8_t *)ok, strlen(ok), &t), SL_OK);
	assert_string_equal(t, "ya29.x");
	free(t);
	const char *bad[] = {"{}", "{\"access_token\":\"\"}", "{\"access_token\":\"a\\r\\nX: y\"}",
	                     "{\"access_token\":7}", "nope"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(
		    sl_remote_parse_gcp_token((const uint8_t *)bad[i], strlen(bad[i]), &t),
		    SL_E_REMOTE_REFUSED);
		assert_null(t);
	}
}

/* S3's XML answers (CreateMultipartUpload, a failed completion) and the
 * ETag of an UploadPart: what goes into our next request's query or XML
 * body unescaped must hold nothing that breaks out of it. */
static void test_s3_answers(void **state)
{
	(void)state;
	char v[64];
	const char *init =
	    "<?xml version=\"1.0\"?>\n<InitiateMultipartUploadResult><Bucket>b</Bucket>"
	    "<UploadId>a.b-c_d~e+f/g=</UploadId></InitiateMultipartUploadResult>";
	assert_true(
	    sl_remote_xml_text((const uint8_t *)init, strlen(init), "UploadId", v, sizeof(v)));
	assert_string_equal(v, "a.b-c_d~e+f/g=");
	assert_true(
	    sl_remote_xml_text((const uint8_t *)init, strlen(init), "Bucket", v, sizeof(v)));
	assert_string_equal(v, "b");
	const char *bad[] = {
	    "<UploadId></UploadId>",          /* empty */
	    "<UploadId>a&amp;b</UploadId>",   /* an entity */
	    "<UploadId>a\"b</UploadId>",      /* a quote */
	    "<UploadId>a b</UploadId>",       /* a space */
	    "<UploadId>a\r\nX: y</UploadId>", /* a line break */
	    "<UploadId>abc",                  /* not closed */
	    "<UploadId>abc</Upload>",         /* closed by another tag */
	    "<UploadId>abc<x/></UploadId>",   /* markup inside */
	    "<Other>abc</Other>",             /* none */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (sl_remote_xml_text((const uint8_t *)bad[i], strlen(bad[i]), "UploadId", v,
		                       sizeof(v)))
			fail_msg("accepted \"%s\"", bad[i]);
	char big[200];
	memset(big, 'x', sizeof(big));
	memcpy(big, "<Code>", 6);
	memcpy(big + sizeof(big) - 7, "</Code>", 7);
	assert_false(sl_remote_xml_text((const uint8_t *)big, sizeof(big), "Code", v, sizeof(v)));

	assert_true(sl_remote_etag_ok("\"b54357faf0632cce46e942fa68356b38\""));
	assert_true(sl_remote_etag_ok("\"3858f62230ac3c915f300c664312c11f-9\""));
	assert_true(sl_remote_etag_ok("b54357faf0632cce46e942fa68356b38"));
	const char *bad_etag[] = {"",        "\"",      "\"\"",    "\"a",       "a\"b",
	                          "\"a<b\"", "\"a&b\"", "\"a b\"", "\"a\r\nb\""};
	for (size_t i = 0; i < sizeof(bad_etag) / sizeof(bad_etag[0]); i++)
		if (sl_remote_etag_ok(bad_etag[i]))
			fail_msg("accepted ETag \"%s\"", bad_etag[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_content_range), cmocka_unit_test(test_s3_answers),
	    cmocka_unit_test(test_aws_file),      cmocka_unit_test(test_imds),
	    cmocka_unit_test(test_gcp_token),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
