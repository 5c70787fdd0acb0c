/* Sealed outputs: the POST /v1/output parser (good and bad), the policy's
 * choice of the output's KEK, and run's --output/--resume/--preempt options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../kms/http/http.h"
#include "../../launcher/outputs/outputs.h"
#include "seclaunch/policy.h"
#include "testlib.h"

#define B(s) (const uint8_t *)(s), strlen(s)
#define N32 "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

static const char *body(const char *extra)
{
	static char buf[8192];
	snprintf(buf, sizeof(buf),
	         "{\"nonce\":\"" N32 "\",\"eph_pub\":\"" N32 "\",\"policy_digest\":\"" N32 "\","
	         "\"evidence\":[{\"kind\":\"tpm2\"}]%s}",
	         extra);
	return buf;
}

static void test_parse_output_good(void **state)
{
	kmsd_output_req *r = NULL;
	(void)state;
	const char *j = body(",\"inputs\":[\"in-1\",\"in-2\"],\"outputs\":["
	                     "{\"output_id\":\"model:00ff\",\"destination\":\"s3://b/p/\"},"
	                     "{\"output_id\":\"opt:00ff\",\"destination\":\"file:///c/\","
	                     "\"key_id\":\"k.1\"}]");
	assert_int_equal(kmsd_parse_output(B(j), &r), SL_OK);
	assert_int_equal(r->noutputs, 2);
	assert_int_equal(r->ninputs, 2);
	assert_string_equal(r->outputs[0].output_id, "model:00ff");
	assert_string_equal(r->outputs[0].destination, "s3://b/p/");
	assert_string_equal(r->outputs[0].key_id, "");
	assert_string_equal(r->outputs[1].key_id, "k.1");
	assert_string_equal(r->inputs[1], "in-2");
	assert_int_equal(r->att->nkeys, 0);
	assert_true(json_is_object(r->att->job));
	kmsd_output_req_free(r);
}

static void test_parse_output_bad(void **state)
{
	static const struct {
		const char *extra, *needle;
	} cases[] = {
	    {"", "outputs: missing"},
	    {",\"outputs\":[]", "outputs: must hold 1..16"},
	    {",\"outputs\":[{\"output_id\":\"a\",\"destination\":\"x y\"}]",
	     "outputs[0].destination: must be 1..2048 printable"},
	    {",\"outputs\":[{\"output_id\":\"a\"}]", "outputs[0]"},
	    {",\"outputs\":[{\"output_id\":\"a\",\"destination\":\"d\",\"extra\":1}]",
	     "unknown field \"extra\""},
	    {",\"outputs\":[{\"output_id\":\"a\",\"destination\":\"d\"},"
	     "{\"output_id\":\"a\",\"destination\":\"e\"}]",
	     "outputs[1]: repeats the output id of outputs[0]"},
	    {",\"inputs\":[\"x\",\"x\"],\"outputs\":[{\"output_id\":\"a\",\"destination\":\"d\"}]",
	     "inputs[1]: repeats inputs[0]"},
	    {",\"inputs\":\"x\",\"outputs\":[{\"output_id\":\"a\",\"destination\":\"d\"}]",
	     "inputs: must be an array"},
	    {",\"keys\":[],\"outputs\":[{\"output_id\":\"a\",\"destination\":\"d\"}]",
	     "unknown field \"keys\""},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		kmsd_output_req *r = NULL;
		expect_fail(kmsd_parse_output(B(body(cases[i].extra)), &r), SL_E_INPUT,
		            cases[i].needle);
		assert_null(r);
	}
	kmsd_output_req *r = NULL;
	expect_fail(kmsd_parse_output(B("{\"outputs\":[]}"), &r), SL_E_INPUT, "nonce");
	assert_null(r);
}

static void test_policy_output_key(void **state)
{
	static const char pol[] =
	    "{\"version\":1,\"datasets\":[{\"id\":\"*\",\"allowed_regions\":[\"eu\"],"
	    "\"tee_kinds\":[\"tpm2\"]}],"
	    "\"keys\":{\"kek-ckpt\":[\"model:*\"],\"kek-a\":[\"both:*\"],\"kek-b\":[\"both:*\"]}}";
	sl_policy *p = NULL, *dev = NULL;
	const char *key = NULL;
	(void)state;
	assert_int_equal(sl_policy_load(B(pol), &p), SL_OK);
	assert_int_equal(sl_policy_output_key(p, "model:0011", &key), SL_OK);
	assert_string_equal(key, "kek-ckpt");
	expect_fail(sl_policy_output_key(p, "other:0011", &key), SL_E_POLICY_DENIED,
	            "no key may serve output 'other:0011'");
	expect_fail(sl_policy_output_key(p, "both:1", &key), SL_E_POLICY_DENIED,
	            "2 keys may serve output 'both:1'");
	assert_int_equal(sl_policy_dev(&dev), SL_OK);
	/* the development policy seals every output under its one key */
	assert_int_equal(sl_policy_output_key(dev, "model:1", &key), SL_OK);
	assert_string_equal(key, SL_POLICY_DEV_OUTPUT_KEY);
	sl_policy_free(p);
	sl_policy_free(dev);
}

/* file:///PATH/ is the folder PATH: the same destination, the same string
 * for the policy */
static void test_destination_file_url(void **state)
{
	char d1[2048], p1[2100], d2[2048], p2[2100];
	bool r1 = true, r2 = true;
	(void)state;
	assert_int_equal(
	    sl_out_destination("model=file:///data/models/", d1, sizeof(d1), p1, sizeof(p1), &r1),
	    SL_OK);
	assert_int_equal(
	    sl_out_destination("model=/data/models/", d2, sizeof(d2), p2, sizeof(p2), &r2), SL_OK);
	assert_false(r1);
	assert_false(r2);
	assert_string_equal(d1, "/data/models");
	assert_string_equal(d1, d2);
	assert_string_equal(p1, "file:///data/models/");
	assert_string_equal(p1, p2);
	assert_int_equal(sl_out_destination("model=file://localhost/data/models", d1, sizeof(d1),
	                                    p1, sizeof(p1), &r1),
	                 SL_OK);
	assert_string_equal(p1, "file:///data/models/");
	expect_fail(
	    sl_out_destination("model=file://other/data/", d1, sizeof(d1), p1, sizeof(p1), &r1),
	    SL_E_USAGE, "a folder of this machine");
	expect_fail(
	    sl_out_destination("model=file:///data/../etc/", d1, sizeof(d1), p1, sizeof(p1), &r1),
	    SL_E_USAGE, "no . or ..");
	expect_fail(sl_out_destination("model=ftp://h/x/", d1, sizeof(d1), p1, sizeof(p1), &r1),
	            SL_E_USAGE, "DEST is a folder");
	assert_string_equal(sl_out_file_url_path("file:///x/"), "/x/");
	assert_string_equal(sl_out_file_url_path("s3://b/p/"), "s3://b/p/");
	assert_null(sl_out_file_url_path("file://h/x"));
}

static void test_options(void **state)
{
	struct sl_out_cfg c;
	(void)state;
	memset(&c, 0, sizeof(c));
	assert_int_equal(sl_out_option(&c, SL_OUT_O_OUTPUT, "model=s3://b/p/"), 1);
	assert_int_equal(sl_out_option(&c, SL_OUT_O_RESUME, "model=s3://b/p/"), 1);
	assert_int_equal(sl_out_option(&c, SL_OUT_O_LIMIT, "512M"), 1);
	assert_true(c.limit == (uint64_t)512 << 20);
	assert_int_equal(sl_out_option(&c, SL_OUT_O_PREEMPT_WATCH, "gce=http://127.0.0.1:9"), 1);
	assert_int_equal(c.preempt, SL_PREEMPT_GCE);
	assert_string_equal(c.preempt_base, "http://127.0.0.1:9");
	assert_int_equal(sl_out_option(&c, SL_OUT_O_PREEMPT_SIGNAL, "SIGUSR1"), 1);
	assert_int_equal(c.preempt_signal, SIGUSR1);
	assert_int_equal(sl_out_check(&c), SL_OK);
	assert_int_equal(c.preempt_grace_s, 25);
	assert_int_equal(sl_out_option(&c, 12345, "x"), 0);

	assert_int_equal(sl_out_option(&c, SL_OUT_O_OUTPUT, "=x"), -1);
	assert_int_equal(sl_out_option(&c, SL_OUT_O_OUTPUT, "-bad=x"), -1);
	assert_int_equal(sl_out_option(&c, SL_OUT_O_OUTPUT, "name="), -1);
	assert_int_equal(sl_out_option(&c, SL_OUT_O_LIMIT, "12Q"), -1);
	assert_int_equal(sl_out_option(&c, SL_OUT_O_LIMIT, "0"), -1);
	assert_int_equal(sl_out_option(&c, SL_OUT_O_PREEMPT_WATCH, "azure"), -1);
	assert_int_equal(sl_out_option(&c, SL_OUT_O_PREEMPT_WATCH, "gce=file:///x"), -1);
	assert_int_equal(sl_out_option(&c, SL_OUT_O_PREEMPT_SIGNAL, "KILL"), -1);
	assert_int_equal(sl_out_option(&c, SL_OUT_O_PREEMPT_SIGNAL, "9"), -1);
	assert_int_equal(sl_out_option(&c, SL_OUT_O_PREEMPT_GRACE, "3601"), -1);

	struct sl_out_cfg d;
	memset(&d, 0, sizeof(d));
	assert_int_equal(sl_out_option(&d, SL_OUT_O_RESUME, "model=/x"), 1);
	expect_fail(sl_out_check(&d), SL_E_USAGE, "no --output model to resume into");
	memset(&d, 0, sizeof(d));
	assert_int_equal(sl_out_option(&d, SL_OUT_O_OUTPUT, "m=/x"), 1);
	assert_int_equal(sl_out_option(&d, SL_OUT_O_OUTPUT, "m=/y"), 1);
	expect_fail(sl_out_check(&d), SL_E_USAGE, "--output m given twice");
	memset(&d, 0, sizeof(d));
	assert_int_equal(sl_out_option(&d, SL_OUT_O_PREEMPT_WATCH, "sigterm"), 1);
	expect_fail(sl_out_check(&d), SL_E_USAGE, "no --output to save");
}

/* One output's plaintext wiped once it is finally sealed: its files
 * zeroed (a descriptor kept open reads zeros) and removed, its folder left
 * empty, the other outputs' files untouched. */
static void test_memdir_wipe_sub(void **state)
{
	(void)state;
	sl_memdir d = {.fd = -1};
	char p[512];
	uint8_t buf[4096], zero[4096] = {0};
	struct stat st;
	assert_int_equal(sl_memdir_create(&d, false, 0, getuid(), getgid()), SL_OK);
	const char *dirs[] = {"model", "model/sub", "other"};
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", d.path, dirs[i]);
		assert_int_equal(mkdir(p, 0700), 0);
	}
	const char *files[] = {"model/a.bin", "model/sub/b.bin", "other/c.bin"};
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s/%s", d.path, files[i]);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
		assert_true(fd >= 0);
		memset(buf, 'A' + (int)i, sizeof(buf));
		assert_int_equal(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
		close(fd);
	}
	snprintf(p, sizeof(p), "%s/model/sub/b.bin", d.path);
	int kept = open(p, O_RDONLY);
	assert_true(kept >= 0);

	assert_int_equal(sl_memdir_wipe_sub(&d, "model"), SL_OK);
	assert_int_equal(pread(kept, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	assert_memory_equal(buf, zero, sizeof(buf));
	close(kept);
	snprintf(p, sizeof(p), "%s/model", d.path);
	assert_int_equal(stat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/model/a.bin", d.path);
	assert_int_not_equal(stat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/model/sub", d.path);
	assert_int_not_equal(stat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/other/c.bin", d.path);
	int fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	assert_int_equal(buf[0], 'C');
	close(fd);
	/* a name that is not a folder beneath it is refused */
	assert_int_not_equal(sl_memdir_wipe_sub(&d, "../x"), SL_OK);

	char path[sizeof(d.path)];
	snprintf(path, sizeof(path), "%s", d.path);
	assert_int_equal(sl_memdir_wipe(&d), SL_OK);
	assert_int_not_equal(stat(path, &st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_output_good), cmocka_unit_test(test_parse_output_bad),
	    cmocka_unit_test(test_policy_output_key), cmocka_unit_test(test_destination_file_url),
	    cmocka_unit_test(test_options),           cmocka_unit_test(test_memdir_wipe_sub),
	};
	if (sl_crypto_init() != SL_OK)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
