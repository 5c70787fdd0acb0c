/* seclaunchd internals: request parsers (good and bad), ids, the wrapping
 * AAD, AES-GCM, the challenge table (single use, expiry, bounded), the local
 * keystore (round trip, AAD binding, tamper, truncation, wrong master key),
 * the AK registry (persistence, tamper), routing and metrics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../kms/daemon/daemon.h"
#include "seclaunch/audit.h"
#include "seclaunch/policy.h"
#include "testlib.h"

#define B(s) (const uint8_t *)(s), strlen(s)

static char tmpdir[256];

static int setup_dir(void **state)
{
	(void)state;
	tl_tmpdir(tmpdir, sizeof(tmpdir), "kms-test");
	return 0;
}

static int teardown_dir(void **state)
{
	(void)state;
	return tl_rmtree(tmpdir);
}

static void write_file(const char *name, const void *p, size_t n, mode_t mode)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	unlink(path);
	assert_int_equal(sl_file_write_atomic(path, p, n, mode, true), SL_OK);
}

static const char *in_dir(const char *name)
{
	static char path[4][512];
	static int i;
	i = (i + 1) % 4;
	snprintf(path[i], sizeof(path[i]), "%s/%s", tmpdir, name);
	return path[i];
}

/* ---- parsers ----------------------------------------------------------- */

static const char *release_json(const char *nonce, const char *keys)
{
	static char buf[20000];
	snprintf(buf, sizeof(buf),
	         "{\"nonce\":\"%s\",\"eph_pub\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\","
	         "\"policy_digest\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\","
	         "\"evidence\":[{\"kind\":\"tpm2\"}],\"keys\":%s}",
	         nonce, keys);
	return buf;
}

#define N32 "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
#define W61 "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="
#define W61B "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="
#define W61C "AwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="

static void test_parse_release_good(void **state)
{
	kmsd_release_req *r = NULL;
	(void)state;
	const char *j = release_json(N32, "[{\"key_id\":\"k.1\",\"dataset_id\":\"data set é\","
	                                  "\"wrapped_dek\":\"" W61 "\"}]");
	assert_int_equal(kmsd_parse_release(B(j), &r), SL_OK);
	assert_int_equal(r->nkeys, 1);
	assert_string_equal(r->keys[0].key_id, "k.1");
	assert_string_equal(r->keys[0].dataset_id, "data set é");
	assert_int_equal(r->keys[0].wrapped_len, SL_KMS_WRAPPED_DEK_LEN);
	assert_int_equal(r->keys[0].wrapped[0], 1);
	assert_true(json_is_array(r->identity) && json_array_size(r->identity) == 0);
	assert_true(json_is_object(r->job));
	kmsd_release_req_free(r);
}

/* A release that carries output keys beside the keys (or instead). */
static void test_parse_release_outputs(void **state)
{
	kmsd_release_req *r = NULL;
	char body[21000];
	(void)state;
	snprintf(body, sizeof(body),
	         "%.*s,\"outputs\":[{\"output_id\":\"model:r1\","
	         "\"destination\":\"s3://b/p/\"}]}",
	         (int)strlen(release_json(N32, "[]")) - 1, release_json(N32, "[]"));
	assert_int_equal(kmsd_parse_release(B(body), &r), SL_OK);
	assert_int_equal(r->nkeys, 0);
	assert_int_equal(r->noutputs, 1);
	assert_string_equal(r->outputs[0].output_id, "model:r1");
	assert_string_equal(r->outputs[0].destination, "s3://b/p/");
	kmsd_release_req_free(r);
	r = NULL;
	snprintf(
	    body, sizeof(body),
	    "%.*s,\"outputs\":[{\"output_id\":\"m:r\","
	    "\"destination\":\"s3://b/\"},{\"output_id\":\"m:r\",\"destination\":\"s3://c/\"}]}",
	    (int)strlen(release_json(N32, "[]")) - 1, release_json(N32, "[]"));
	expect_fail(kmsd_parse_release(B(body), &r), SL_E_INPUT, "repeats the output id");
	snprintf(body, sizeof(body), "%.*s,\"outputs\":[]}",
	         (int)strlen(release_json(N32, "[]")) - 1, release_json(N32, "[]"));
	expect_fail(kmsd_parse_release(B(body), &r), SL_E_INPUT, "outputs: must hold 1..16");
	snprintf(body, sizeof(body),
	         "%.*s,\"outputs\":[{\"output_id\":\"m:r\","
	         "\"destination\":\"s3://b c/\"}]}",
	         (int)strlen(release_json(N32, "[]")) - 1, release_json(N32, "[]"));
	expect_fail(kmsd_parse_release(B(body), &r), SL_E_INPUT, "destination");
	assert_null(r);
}

static void expect_release_err(const char *body, const char *needle)
{
	kmsd_release_req *r = NULL;
	expect_fail(kmsd_parse_release(B(body), &r), SL_E_INPUT, needle);
	assert_null(r);
}

static void test_parse_release_bad(void **state)
{
	char many[16384];
	size_t o;
	(void)state;
	expect_release_err("", "invalid JSON");
	expect_release_err("{", "invalid JSON");
	expect_release_err("[]", "must be a JSON object");
	expect_release_err("{}", "nonce: missing");
	expect_release_err("{\"nonce\":1}", "nonce: must be a string");
	expect_release_err("{\"nonce\":\"AAAA\"}", "nonce: must be 32 bytes");
	expect_release_err("{\"nonce\":\"" N32 "\",\"x\":1}", "unknown field \"x\"");
	expect_release_err("{\"nonce\":\"a\",\"nonce\":\"b\"}", "duplicate");
	expect_release_err(release_json(N32, "[]"), "keys: must hold 1..64");
	expect_release_err(release_json(N32, "{}"), "keys: must be an array");
	expect_release_err(release_json(N32, "[1]"), "keys[0]: must be an object");
	expect_release_err(release_json(N32, "[{\"key_id\":\"a/b\",\"dataset_id\":\"d\","
	                                     "\"wrapped_dek\":\"" W61 "\"}]"),
	                   "key_id: must be 1..128");
	expect_release_err(release_json(N32, "[{\"key_id\":\"..\",\"dataset_id\":\"d\","
	                                     "\"wrapped_dek\":\"" W61 "\"}]"),
	                   "key_id");
	expect_release_err(release_json(N32, "[{\"key_id\":\"k\",\"dataset_id\":\"a\\nb\","
	                                     "\"wrapped_dek\":\"" W61 "\"}]"),
	                   "dataset_id: must be 1..255 bytes");
	expect_release_err(release_json(N32, "[{\"key_id\":\"k\",\"dataset_id\":\"d\","
	                                     "\"wrapped_dek\":\"AAAA\"}]"),
	                   "wrapped_dek: must be 61 bytes");
	expect_release_err(release_json(N32, "[{\"key_id\":\"k\",\"dataset_id\":\"d\"}]"),
	                   "wrapped_dek: missing");
	expect_release_err(release_json(N32, "[{\"key_id\":\"k\",\"dataset_id\":\"d\",\"x\":1,"
	                                     "\"wrapped_dek\":\"" W61 "\"}]"),
	                   "unknown field \"x\"");
	/* key id with a NUL inside the JSON string */
	expect_release_err(release_json(N32, "[{\"key_id\":\"k\\u0000x\",\"dataset_id\":\"d\","
	                                     "\"wrapped_dek\":\"" W61 "\"}]"),
	                   "NUL");
	o = (size_t)snprintf(many, sizeof(many), "[");
	for (int i = 0; i < 65; i++)
		o += (size_t)snprintf(
		    many + o, sizeof(many) - o,
		    "%s{\"key_id\":\"k\",\"dataset_id\":\"d\",\"wrapped_dek\":\"" W61 "\"}",
		    i ? "," : "");
	snprintf(many + o, sizeof(many) - o, "]");
	expect_release_err(release_json(N32, many), "keys: must hold 1..64");
	/* evidence shapes */
	expect_release_err("{\"nonce\":\"" N32 "\",\"eph_pub\":\"" N32 "\",\"policy_digest\":\"" N32
	                   "\",\"evidence\":[],\"keys\":[]}",
	                   "evidence: must hold 1..8");
	expect_release_err("{\"nonce\":\"" N32 "\",\"eph_pub\":\"" N32 "\",\"policy_digest\":\"" N32
	                   "\",\"evidence\":[1],\"keys\":[]}",
	                   "evidence[0]: must be an object");
	expect_release_err("{\"nonce\":\"" N32 "\",\"eph_pub\":\"" N32 "\",\"policy_digest\":\"" N32
	                   "\",\"evidence\":[{}],\"identity\":{},\"keys\":[]}",
	                   "identity: must be an array");
	expect_release_err("{\"nonce\":\"" N32 "\",\"eph_pub\":\"" N32 "\",\"policy_digest\":\"" N32
	                   "\",\"evidence\":[{}],\"job\":[],\"keys\":[]}",
	                   "job: must be an object");
}

static void test_parse_admin(void **state)
{
	char id[SL_KMS_ID_MAX + 1], ds[SL_KMS_DATASET_ID_MAX + 1];
	sl_secret *dek = NULL;
	char longid[200], a129[130];
	(void)state;
	assert_int_equal(kmsd_parse_key_create(B("{\"id\":\"abc-1_2.x\"}"), id), SL_OK);
	assert_string_equal(id, "abc-1_2.x");
	assert_int_equal(kmsd_parse_key_create(B("{\"id\":\"\"}"), id), SL_E_INPUT);
	assert_int_equal(kmsd_parse_key_create(B("{\"id\":\"a b\"}"), id), SL_E_INPUT);
	assert_int_equal(kmsd_parse_key_create(B("{\"id\":5}"), id), SL_E_INPUT);
	assert_int_equal(kmsd_parse_key_create(B("{\"id\":\"a\",\"b\":1}"), id), SL_E_INPUT);
	memset(a129, 'a', 129);
	a129[129] = '\0';
	snprintf(longid, sizeof(longid), "{\"id\":\"%s\"}", a129);
	assert_int_equal(kmsd_parse_key_create(B(longid), id), SL_E_INPUT);

	assert_int_equal(kmsd_parse_wrap(B("{\"dataset_id\":\"d\",\"dek\":\"" N32 "\"}"), ds, &dek),
	                 SL_OK);
	assert_string_equal(ds, "d");
	assert_int_equal(sl_secret_len(dek), 32);
	sl_secret_free(dek);
	dek = NULL;
	assert_int_equal(kmsd_parse_wrap(B("{\"dataset_id\":\"d\",\"dek\":\"AAAA\"}"), ds, &dek),
	                 SL_E_INPUT);
	assert_null(dek);
	assert_non_null(strstr(sl_err_detail(), "dek: must be 32 bytes"));
	assert_int_equal(kmsd_parse_wrap(B("{\"dek\":\"" N32 "\"}"), ds, &dek), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "dataset_id: missing"));
	/* a wrap creates a dataset's key: its id must follow the naming rule
	 * (a release of an existing file's key stays lenient, above) */
	assert_int_equal(
	    kmsd_parse_wrap(B("{\"dataset_id\":\"sales 2026/EU\",\"dek\":\"" N32 "\"}"), ds, &dek),
	    SL_E_INPUT);
	assert_null(dek);
	assert_non_null(strstr(sl_err_detail(), "dataset_id: dataset id: ' ' at byte 5"));
	assert_int_equal(
	    kmsd_parse_wrap(B("{\"dataset_id\":\"../../etc\",\"dek\":\"" N32 "\"}"), ds, &dek),
	    SL_E_INPUT);
	assert_null(dek);

	assert_int_equal(kmsd_parse_challenge(B("")), SL_OK);
	assert_int_equal(kmsd_parse_challenge(B("{}")), SL_OK);
	assert_int_equal(kmsd_parse_challenge(B("{\"a\":1}")), SL_E_INPUT);
	assert_int_equal(kmsd_parse_challenge(B("[]")), SL_E_INPUT);
}

static void test_parse_enroll_token(void **state)
{
	int64_t t = 0;
	(void)state;
	assert_int_equal(kmsd_parse_enroll_token(B(""), &t), SL_OK);
	assert_int_equal(t, 3600);
	assert_int_equal(kmsd_parse_enroll_token(B("{}"), &t), SL_OK);
	assert_int_equal(t, 3600);
	assert_int_equal(kmsd_parse_enroll_token(B("{\"ttl_s\":1}"), &t), SL_OK);
	assert_int_equal(t, 1);
	assert_int_equal(kmsd_parse_enroll_token(B("{\"ttl_s\":604800}"), &t), SL_OK);
	assert_int_equal(t, 604800);
	const char *bad[] = {"{\"ttl_s\":0}",
	                     "{\"ttl_s\":604801}",
	                     "{\"ttl_s\":-5}",
	                     "{\"ttl_s\":1.5}",
	                     "{\"ttl_s\":\"60\"}",
	                     "{\"ttl_s\":1,\"x\":1}",
	                     "{\"ttl_s\":1,\"ttl_s\":2}",
	                     "[]",
	                     "{",
	                     "null"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(kmsd_parse_enroll_token(B(bad[i]), &t), SL_E_INPUT);
	assert_int_equal(kmsd_parse_enroll_token(B("{\"ttl_s\":0}"), &t), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "ttl_s: must be an integer from 1 to 604800"));
}

static void test_parse_enroll(void **state)
{
	kmsd_enroll_req e;
	kmsd_activate_req a;
	(void)state;
	assert_int_equal(kmsd_parse_enroll(B("{\"ek_pub\":\"AAAA\",\"ak_pub\":\"AAEC\"}"), &e),
	                 SL_OK);
	assert_int_equal(e.ek_pub_len, 3);
	assert_int_equal(e.ak_pub_len, 3);
	assert_null(e.ek_cert);
	kmsd_enroll_req_clear(&e);
	assert_int_equal(kmsd_parse_enroll(B("{\"ek_pub\":\"AAAA\"}"), &e), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "ak_pub: missing"));
	assert_int_equal(kmsd_parse_enroll(B("{\"ek_pub\":\"\",\"ak_pub\":\"AAAA\"}"), &e),
	                 SL_E_INPUT);
	assert_int_equal(
	    kmsd_parse_enroll(B("{\"ek_pub\":\"AAAA\",\"ak_pub\":\"AAAA\",\"ek_cert\":7}"), &e),
	    SL_E_INPUT);
	assert_int_equal(kmsd_parse_activate(B("{\"session\":\"AAAAAAAAAAAAAAAAAAAAAA==\","
	                                       "\"secret\":\"AAEC\"}"),
	                                     &a),
	                 SL_OK);
	assert_int_equal(sl_secret_len(a.secret), 3);
	sl_secret_free(a.secret);
	assert_int_equal(kmsd_parse_activate(B("{\"session\":\"AAAA\",\"secret\":\"AAEC\"}"), &a),
	                 SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "session: must be 16 bytes"));
}

static void test_aad_unambiguous(void **state)
{
	uint8_t a[KMSD_AAD_MAX], b[KMSD_AAD_MAX];
	(void)state;
	size_t na = kmsd_wrap_aad("ab", "c", a), nb = kmsd_wrap_aad("a", "bc", b);
	assert_int_equal(na, nb);
	assert_memory_not_equal(a, b, na);
	assert_int_equal(na, 2 + 2 + 2 + 1);
	assert_memory_equal(a,
	                    "\x00\x02"
	                    "ab"
	                    "\x00\x01"
	                    "c",
	                    na);
}

static void test_gcm(void **state)
{
	uint8_t key[32] = {1}, iv[12] = {2}, pt[40], ct[40], tag[16], back[40];
	(void)state;
	sl_random(pt, sizeof(pt));
	assert_int_equal(kmsd_gcm_seal(key, iv, B("aad"), pt, sizeof(pt), ct, tag), SL_OK);
	assert_int_equal(kmsd_gcm_open(key, iv, B("aad"), ct, sizeof(ct), tag, back), SL_OK);
	assert_memory_equal(pt, back, sizeof(pt));
	assert_int_equal(kmsd_gcm_open(key, iv, B("aaD"), ct, sizeof(ct), tag, back),
	                 SL_E_INTEGRITY);
	ct[3] ^= 1;
	assert_int_equal(kmsd_gcm_open(key, iv, B("aad"), ct, sizeof(ct), tag, back),
	                 SL_E_INTEGRITY);
}

/* ---- challenge table (over a SQLite state store) ----------------------- */

static kmsd_store *fresh_store(const char *name)
{
	kmsd_store *st = NULL;
	char wal[600], shm[600];
	snprintf(wal, sizeof(wal), "%s-wal", in_dir(name));
	snprintf(shm, sizeof(shm), "%s-shm", in_dir(name));
	unlink(in_dir(name));
	unlink(wal);
	unlink(shm);
	assert_int_equal(kmsd_store_open(in_dir(name), 2, &st), SL_OK);
	return st;
}

static void test_nonces(void **state)
{
	kmsd_store *st = fresh_store("nonces.db");
	kmsd_nonces *t = NULL;
	uint8_t n1[32], n2[32], n3[32], never[32];
	time_t exp;
	(void)state;
	assert_int_equal(kmsd_nonces_new(st, 2, 1, &t), SL_OK);
	assert_int_equal(kmsd_nonces_issue(t, n1, &exp), SL_OK);
	assert_true(exp >= time(NULL));
	assert_int_equal(kmsd_nonces_issue(t, n2, &exp), SL_OK);
	assert_memory_not_equal(n1, n2, 32);
	/* full of live nonces: refused, nothing evicted */
	assert_int_equal(kmsd_nonces_issue(t, n3, &exp), SL_E_KMS_REFUSED);
	assert_int_equal(kmsd_nonces_size(t), 2);
	assert_int_equal(kmsd_nonces_consume(t, n1), KMSD_NONCE_OK);
	assert_int_equal(kmsd_nonces_consume(t, n1), KMSD_NONCE_USED);
	sl_random(never, sizeof(never));
	assert_int_equal(kmsd_nonces_consume(t, never), KMSD_NONCE_UNKNOWN);
	/* a used nonce still holds its slot until it expires */
	assert_int_equal(kmsd_nonces_issue(t, n3, &exp), SL_E_KMS_REFUSED);
	usleep(1100 * 1000);
	assert_int_equal(kmsd_nonces_consume(t, n2), KMSD_NONCE_EXPIRED);
	/* expired entries make room again */
	assert_int_equal(kmsd_nonces_issue(t, n3, &exp), SL_OK);
	assert_int_equal(kmsd_nonces_consume(t, n3), KMSD_NONCE_OK);
	assert_int_equal(kmsd_nonces_consume(t, n1), KMSD_NONCE_UNKNOWN);
	kmsd_nonces_free(t);
	assert_int_equal(kmsd_nonces_new(st, 0, 60, &t), SL_E_INPUT);
	kmsd_store_close(st);
}

static void test_nonces_many(void **state)
{
	kmsd_store *st = fresh_store("nonces2.db");
	kmsd_nonces *t = NULL;
	uint8_t(*n)[32] = calloc(2000, 32);
	time_t exp;
	(void)state;
	assert_int_equal(kmsd_nonces_new(st, 5000, 60, &t), SL_OK);
	for (int i = 0; i < 2000; i++)
		assert_int_equal(kmsd_nonces_issue(t, n[i], &exp), SL_OK);
	for (int i = 1999; i >= 0; i--)
		assert_int_equal(kmsd_nonces_consume(t, n[i]), KMSD_NONCE_OK);
	for (int i = 0; i < 2000; i += 7)
		assert_int_equal(kmsd_nonces_consume(t, n[i]), KMSD_NONCE_USED);
	kmsd_nonces_free(t);
	kmsd_store_close(st);
	free(n);
}

/* Two handles on one store stand for two replicas: a nonce issued by one
 * and used on the other is refused on both afterwards. */
static void test_nonces_two_handles(void **state)
{
	kmsd_store *a = fresh_store("replicas.db"), *b = NULL;
	kmsd_nonces *ta = NULL, *tb = NULL;
	uint8_t n[32];
	time_t exp;
	(void)state;
	assert_int_equal(kmsd_store_open(in_dir("replicas.db"), 1, &b), SL_OK);
	assert_int_equal(kmsd_nonces_new(a, 10, 60, &ta), SL_OK);
	assert_int_equal(kmsd_nonces_new(b, 10, 60, &tb), SL_OK);
	assert_int_equal(kmsd_nonces_issue(ta, n, &exp), SL_OK);
	assert_int_equal(kmsd_nonces_consume(tb, n), KMSD_NONCE_OK);
	assert_int_equal(kmsd_nonces_consume(ta, n), KMSD_NONCE_USED);
	assert_int_equal(kmsd_nonces_consume(tb, n), KMSD_NONCE_USED);
	kmsd_nonces_free(ta);
	kmsd_nonces_free(tb);
	kmsd_store_close(a);
	kmsd_store_close(b);
}

/* ---- local keystore ------------------------------------------------------- */

static void make_master(void)
{
	uint8_t m[32];
	sl_random(m, sizeof(m));
	write_file("master.key", m, sizeof(m), 0600);
}

static size_t key_count(kmsd_store *st)
{
	size_t n = 0;
	assert_int_equal(kmsd_store_count(st, KMSD_T_KEYS, &n), SL_OK);
	return n;
}

static bool key_exists(kmsd_store *st, const char *id)
{
	kmsd_key_row row = {0};
	bool found = false;
	assert_int_equal(kmsd_store_key_get(st, id, &row, &found), SL_OK);
	return found;
}

static void test_keystore(void **state)
{
	kmsd_config c;
	kmsd_store *st = fresh_store("ks.db");
	kmsd_keys *k = NULL;
	uint8_t dek[32], out[SL_KMS_WRAPPED_DEK_MAX], back[32];
	size_t olen = 0;
	(void)state;
	make_master();
	kmsd_config_defaults(&c);
	c.master_key_file = strdup(in_dir("master.key"));
	assert_int_equal(kmsd_keys_open(&c, st, &k), SL_OK);
	assert_int_equal(key_count(st), 0);
	assert_int_equal(kmsd_keys_create(k, "k1"), SL_OK);
	assert_int_equal(kmsd_keys_create(k, "k1"), SL_E_EXISTS);
	assert_int_equal(kmsd_keys_create(k, "k2"), SL_OK);
	assert_true(key_exists(st, "k2"));
	assert_false(key_exists(st, "k3"));
	sl_random(dek, sizeof(dek));
	assert_int_equal(kmsd_keys_wrap(k, "k1", "ds-A", dek, out, &olen), SL_OK);
	assert_int_equal(olen, SL_KMS_WRAPPED_DEK_LEN);
	assert_int_equal(out[0], 1);
	kmsd_keys_close(k);
	k = NULL;

	/* reopen: the KEK persisted */
	assert_int_equal(kmsd_keys_open(&c, st, &k), SL_OK);
	assert_int_equal(key_count(st), 2);
	assert_int_equal(kmsd_keys_unwrap(k, "k1", "ds-A", out, olen, back), SL_OK);
	assert_memory_equal(dek, back, 32);
	/* bound to key id and dataset id */
	assert_int_equal(kmsd_keys_unwrap(k, "k1", "ds-B", out, olen, back), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "dataset 'ds-B'"));
	assert_int_equal(kmsd_keys_unwrap(k, "k2", "ds-A", out, olen, back), SL_E_INTEGRITY);
	assert_int_equal(kmsd_keys_unwrap(k, "k9", "ds-A", out, olen, back), SL_E_INPUT);
	assert_int_equal(kmsd_keys_unwrap(k, "k1", "ds-A", out, olen - 1, back), SL_E_INTEGRITY);
	/* the first byte names the KEK version: version 2 does not exist */
	out[0] = 2;
	assert_int_equal(kmsd_keys_unwrap(k, "k1", "ds-A", out, olen, back), SL_E_KMS_REFUSED);
	out[0] = 0;
	assert_int_equal(kmsd_keys_unwrap(k, "k1", "ds-A", out, olen, back), SL_E_INTEGRITY);
	out[0] = 1;
	out[30] ^= 0x80;
	assert_int_equal(kmsd_keys_unwrap(k, "k1", "ds-A", out, olen, back), SL_E_INTEGRITY);
	out[30] ^= 0x80;
	kmsd_keys_close(k);
	k = NULL;

	/* another master key: refused at open by the store's key-check value,
	 * naming the file (before any KEK row is tried) */
	make_master();
	assert_int_equal(kmsd_keys_open(&c, st, &k), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "master.key: not the master key this state store"));
	assert_null(k);
	chmod(in_dir("master.key"), 0644);
	assert_int_equal(kmsd_keys_open(&c, st, &k), SL_E_PERM);
	write_file("master.key", "short", 5, 0600);
	assert_int_equal(kmsd_keys_open(&c, st, &k), SL_E_INPUT);
	kmsd_config_free(&c);
	kmsd_store_close(st);
}

/* ---- configuration: one table of settings ------------------------------------- */

static sl_err load_conf(kmsd_config *c, const char *text)
{
	write_file("conf.json", text, strlen(text), 0600);
	kmsd_config_defaults(c);
	return kmsd_config_load(c, in_dir("conf.json"));
}

static void test_config_table(void **state)
{
	kmsd_config c;
	(void)state;
	/* a key of each kind lands in its member */
	assert_int_equal(load_conf(&c, "{\"listen\": \"127.0.0.1:9\", \"keystore\": \"ks\", "
	                               "\"accept_ek_without_cert\": true, \"threads\": 7, "
	                               "\"max_body\": 4096, \"kek_backend\": \"aws-kms\"}"),
	                 SL_OK);
	assert_string_equal(c.listen, "127.0.0.1:9");
	assert_string_equal(c.keystore_file, "ks");
	assert_true(c.accept_ek_without_cert);
	assert_int_equal(c.threads, 7);
	assert_int_equal(c.max_body, 4096);
	assert_int_equal(c.backend, KMSD_KEK_AWS);
	assert_int_equal(c.workers, 64); /* a default stays */
	kmsd_config_free(&c);
	assert_null(c.listen);
	assert_null(c.keystore_file);
	/* each check names the key */
	assert_int_equal(load_conf(&c, "{\"threads\": 0}"), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "\"threads\" must be an integer in 1..256"));
	kmsd_config_free(&c);
	assert_int_equal(load_conf(&c, "{\"tls_cert\": \"\"}"), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "\"tls_cert\" must be a non-empty string"));
	kmsd_config_free(&c);
	assert_int_equal(load_conf(&c, "{\"kek_backend\": \"hsm\"}"), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "\"kek_backend\" must be \"local\""));
	kmsd_config_free(&c);
	assert_int_equal(load_conf(&c, "{\"debug_allowed\": true}"), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "unknown key \"debug_allowed\""));
	kmsd_config_free(&c);
	/* state_dir comes from --state only */
	assert_int_equal(load_conf(&c, "{\"state_dir\": \"/tmp\"}"), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "unknown key \"state_dir\""));
	kmsd_config_free(&c);
	/* every setting with a default is in --print-defaults, no string one */
	json_t *d = kmsd_config_defaults_json();
	assert_non_null(d);
	size_t want = 0;
	for (size_t i = 0; i < kmsd_nsettings; i++) {
		bool str = kmsd_settings[i].kind == KMSD_SET_STR;
		want += !str;
		assert_true((json_object_get(d, kmsd_settings[i].name) != NULL) == !str);
	}
	assert_int_equal(json_object_size(d), want);
	assert_string_equal(json_string_value(json_object_get(d, "kek_backend")), "local");
	assert_int_equal(json_integer_value(json_object_get(d, "max_connections")), 512);
	json_decref(d);
}

/* ---- key process (privilege separation) --------------------------------------- */

static void test_keyproc(void **state)
{
	kmsd_config c;
	kmsd_keyproc *kp = NULL;
	kmsd_store *st = fresh_store("kp.db");
	kmsd_kek *net = NULL;
	uint8_t dek[32], wrapped[SL_KMS_WRAPPED_DEK_LEN], sealed[KMSD_SEALED_LEN], back[32];
	uint8_t wmax[SL_KMS_WRAPPED_DEK_MAX];
	size_t wl = 0;
	uint8_t pk[32], sk[32];
	unsigned v = 0;
	(void)state;
	make_master();
	kmsd_config_defaults(&c);
	c.master_key_file = strdup(in_dir("master.key"));
	c.store = strdup(in_dir("kp.db"));
	assert_int_equal(kmsd_keyproc_start(&c, 1, &kp), SL_OK);
	assert_true(kmsd_keyproc_pid(kp) > 0);
	assert_int_equal(kmsd_kek_open_remote(kp, st, &net), SL_OK);
	assert_int_equal(kmsd_kek_create(net, "k1"), SL_OK);
	assert_int_equal(kmsd_kek_create(net, "k1"), SL_E_EXISTS);
	sl_random(dek, sizeof(dek));
	assert_int_equal(kmsd_kek_wrap(net, "k1", "ds", dek, wmax, &wl), SL_OK);
	assert_int_equal(wl, SL_KMS_WRAPPED_DEK_LEN);
	memcpy(wrapped, wmax, sizeof(wrapped));
	/* the network side has no unwrap, only unwrap-and-seal: kms/http/ has
	 * no such function and may not link kms/keys/'s (scripts/check-layers) */
	crypto_box_keypair(pk, sk);
	assert_int_equal(
	    kmsd_kek_unwrap_seal(net, "k1", "ds", wrapped, sizeof(wrapped), pk, sealed), SL_OK);
	assert_int_equal(crypto_box_seal_open(back, sealed, sizeof(sealed), pk, sk), 0);
	assert_memory_equal(back, dek, 32);
	assert_int_equal(
	    kmsd_kek_unwrap_seal(net, "k1", "other", wrapped, sizeof(wrapped), pk, sealed),
	    SL_E_INTEGRITY);
	assert_int_equal(kmsd_kek_rotate(net, "k1", &v), SL_OK);
	assert_int_equal(v, 2);
	/* an output key: born in the key process, handed out wrapped and sealed */
	uint8_t w2[SL_KMS_WRAPPED_DEK_MAX], s2[KMSD_SEALED_LEN];
	size_t w2l = 0;
	assert_int_equal(kmsd_kek_new_sealed(net, "k1", "out-1", pk, w2, &w2l, s2), SL_OK);
	assert_int_equal(w2l, SL_KMS_WRAPPED_DEK_LEN);
	assert_int_equal(w2[0], 2);
	assert_int_equal(crypto_box_seal_open(back, s2, sizeof(s2), pk, sk), 0);
	assert_int_equal(kmsd_kek_unwrap_seal(net, "k1", "out-1", w2, w2l, pk, sealed), SL_OK);
	assert_int_equal(crypto_box_seal_open(dek, sealed, sizeof(sealed), pk, sk), 0);
	assert_memory_equal(back, dek, 32);
	/* a request outside the table (an invalid id) ends the channel's service */
	assert_int_equal(kmsd_kek_create(net, "not a key id"), SL_E_SYSTEM);
	assert_non_null(strstr(sl_err_detail(), "channel lost"));
	assert_int_equal(kmsd_kek_create(net, "k2"), SL_E_SYSTEM);
	kmsd_kek_close(net);
	kmsd_keyproc_stop(kp);
	kmsd_store_close(st);
	kmsd_config_free(&c);
}

/* ---- registry --------------------------------------------------------------- */

static void test_registry(void **state)
{
	kmsd_store *st = fresh_store("reg.db");
	kmsd_registry *r = NULL;
	uint8_t key[32], name[34] = {0x00, 0x0b}, other[34] = {0x00, 0x0b, 1}, ek[32] = {0};
	enum kmsd_ak_status as;
	(void)state;
	sl_random(key, sizeof(key));
	write_file("reg.key", key, sizeof(key), 0600);
	assert_int_equal(kmsd_registry_open(st, in_dir("reg.key"), &r), SL_OK);
	assert_false(kmsd_registry_has(r, name, sizeof(name)));
	assert_int_equal(kmsd_registry_add(r, name, sizeof(name), ek), SL_OK);
	assert_int_equal(kmsd_registry_add(r, name, sizeof(name), ek), SL_OK);
	assert_int_equal(kmsd_registry_count(r), 1);
	assert_true(kmsd_registry_has(r, name, sizeof(name)));
	assert_false(kmsd_registry_has(r, other, sizeof(other)));
	assert_false(kmsd_registry_has(r, name, 33));
	kmsd_registry_close(r);
	r = NULL;
	assert_int_equal(kmsd_registry_open(st, in_dir("reg.key"), &r), SL_OK);
	assert_true(kmsd_registry_has(r, name, sizeof(name)));
	/* a row written by someone without the registry key does not count */
	kmsd_ak_row forged = {.enrolled = 1};
	assert_int_equal(kmsd_store_ak_put(st, other, sizeof(other), &forged, NULL), SL_OK);
	assert_false(kmsd_registry_has(r, other, sizeof(other)));
	assert_int_equal(kmsd_registry_lookup(r, other, sizeof(other), &as), SL_E_INTEGRITY);
	assert_int_equal(as, KMSD_AK_FORGED);
	assert_non_null(strstr(sl_err_detail(), "does not verify under the registry key"));
	/* revocation */
	bool was = true;
	assert_int_equal(kmsd_registry_revoke(r, name, sizeof(name), &was), SL_OK);
	assert_false(was);
	assert_false(kmsd_registry_has(r, name, sizeof(name)));
	assert_true(kmsd_registry_revoked(r, name, sizeof(name)));
	assert_int_equal(kmsd_registry_lookup(r, name, sizeof(name), &as), SL_OK);
	assert_int_equal(as, KMSD_AK_REVOKED);
	/* a second revocation says so and writes nothing */
	assert_int_equal(kmsd_registry_revoke(r, name, sizeof(name), &was), SL_OK);
	assert_true(was);
	/* enrolling it again does not lift it */
	assert_int_equal(kmsd_registry_add(r, name, sizeof(name), ek), SL_OK);
	assert_true(kmsd_registry_revoked(r, name, sizeof(name)));
	/* the list: both rows in name order, the forged one not verified */
	json_t *l = kmsd_registry_list(r);
	assert_non_null(l);
	assert_int_equal(json_array_size(l), 2);
	size_t li;
	json_t *le;
	int revoked_rows = 0, unverified = 0;
	json_array_foreach (l, li, le) {
		revoked_rows += json_is_true(json_object_get(le, "revoked"));
		unverified += json_is_false(json_object_get(le, "verified"));
	}
	assert_int_equal(revoked_rows, 1);
	assert_int_equal(unverified, 1);
	json_decref(l);
	uint8_t third[34] = {0x00, 0x0b, 3};
	assert_int_equal(kmsd_registry_revoke(r, third, sizeof(third), &was), SL_E_INPUT);
	kmsd_registry_close(r);
	kmsd_store_close(st);
}

/* Every granting row under the one row MAC: a pending enrollment, an
 * enrollment token and an AK written by someone without the registry key
 * grant nothing; revocation names the machine (EK) until re-admitted; a
 * schema-1 AK MAC moves to the row MAC; another registry key is refused. */
static void test_registry_rows(void **state)
{
	kmsd_store *st = fresh_store("rows.db");
	kmsd_registry *r = NULL;
	uint8_t key[32], sess[16] = {1}, other_sess[16] = {2}, hash[32] = {3}, fake[32] = {4};
	uint8_t ak1[34] = {0x00, 0x0b, 1}, ak2[34] = {0x00, 0x0b, 2}, ak3[34] = {0x00, 0x0b, 3};
	uint8_t ek[32] = {9}, ek_other[32] = {8};
	enum kmsd_grant g;
	enum kmsd_ak_status as;
	bool was = false, rv = false;
	(void)state;
	sl_random(key, sizeof(key));
	write_file("rows.key", key, sizeof(key), 0600);
	/* an AK row with the schema-1 MAC, from before the row MAC */
	{
		static const char tag[] = "seclaunch-ak-v1";
		kmsd_ak_row old = {.enrolled = 1700000000};
		crypto_auth_hmacsha256_state h;
		uint8_t l = sizeof(ak3), when[8];
		memcpy(old.ek_sha256, ek_other, 32);
		for (int i = 0; i < 8; i++)
			when[i] = (uint8_t)((uint64_t)old.enrolled >> (56 - 8 * i));
		crypto_auth_hmacsha256_init(&h, key, 32);
		crypto_auth_hmacsha256_update(&h, (const uint8_t *)tag, sizeof(tag) - 1);
		crypto_auth_hmacsha256_update(&h, &l, 1);
		crypto_auth_hmacsha256_update(&h, ak3, sizeof(ak3));
		crypto_auth_hmacsha256_update(&h, old.ek_sha256, 32);
		crypto_auth_hmacsha256_update(&h, when, 8);
		crypto_auth_hmacsha256_final(&h, old.mac);
		assert_int_equal(kmsd_store_ak_put(st, ak3, sizeof(ak3), &old, NULL), SL_OK);
	}
	assert_int_equal(kmsd_registry_open(st, in_dir("rows.key"), &r), SL_OK);
	assert_true(kmsd_registry_has(r, ak3, sizeof(ak3))); /* moved to the row MAC */

	/* pending: the honest row answers once; a forged one never */
	kmsd_pending_row p = {.ak_name_len = sizeof(ak1), .expires = time(NULL) + 60}, q;
	memcpy(p.ak_name, ak1, sizeof(ak1));
	memcpy(p.ek_sha256, ek, 32);
	assert_int_equal(kmsd_registry_pending_put(r, sess, &p), SL_OK);
	assert_int_equal(kmsd_registry_pending_take(r, sess, &q, &g), SL_OK);
	assert_int_equal(g, KMSD_GRANT_OK);
	assert_memory_equal(q.ak_name, ak1, sizeof(ak1));
	assert_int_equal(kmsd_registry_pending_take(r, sess, &q, &g), SL_OK);
	assert_int_equal(g, KMSD_GRANT_NONE);
	memset(p.mac, 0xa5, 32);
	assert_int_equal(kmsd_store_pending_put(st, sess, &p), SL_OK);
	assert_int_equal(kmsd_registry_pending_take(r, sess, &q, &g), SL_OK);
	assert_int_equal(g, KMSD_GRANT_FORGED);
	/* an honest row's MAC copied to another session does not verify there */
	assert_int_equal(kmsd_registry_pending_put(r, sess, &p), SL_OK);
	assert_int_equal(kmsd_store_pending_put(st, other_sess, &p), SL_OK);
	assert_int_equal(kmsd_registry_pending_take(r, other_sess, &q, &g), SL_OK);
	assert_int_equal(g, KMSD_GRANT_FORGED);
	/* nor with a later expiry */
	assert_int_equal(kmsd_registry_pending_take(r, sess, &q, &g), SL_OK);
	q.expires += 3600;
	assert_int_equal(kmsd_store_pending_put(st, sess, &q), SL_OK);
	assert_int_equal(kmsd_registry_pending_take(r, sess, &q, &g), SL_OK);
	assert_int_equal(g, KMSD_GRANT_FORGED);

	/* tokens: the honest one works once; a forged one is refused as such */
	assert_int_equal(kmsd_registry_token_put(r, hash, time(NULL) + 60), SL_OK);
	assert_int_equal(kmsd_registry_token_use(r, hash, time(NULL), &g), SL_OK);
	assert_int_equal(g, KMSD_GRANT_OK);
	assert_int_equal(kmsd_registry_token_use(r, hash, time(NULL), &g), SL_OK);
	assert_int_equal(g, KMSD_GRANT_NONE);
	assert_int_equal(kmsd_store_etoken_put(st, fake, time(NULL) + 60, key), SL_OK);
	assert_int_equal(kmsd_registry_token_use(r, fake, time(NULL), &g), SL_OK);
	assert_int_equal(g, KMSD_GRANT_FORGED);

	/* revocation names the machine: ak2 of the same EK is refused too */
	assert_int_equal(kmsd_registry_add(r, ak1, sizeof(ak1), ek), SL_OK);
	assert_int_equal(kmsd_registry_add(r, ak2, sizeof(ak2), ek), SL_OK);
	assert_int_equal(kmsd_registry_revoke(r, ak1, sizeof(ak1), &was), SL_OK);
	assert_false(was);
	assert_int_equal(kmsd_registry_ek_revoked(r, ek, &rv), SL_OK);
	assert_true(rv);
	assert_int_equal(kmsd_registry_lookup(r, ak2, sizeof(ak2), &as), SL_OK);
	assert_int_equal(as, KMSD_AK_REVOKED);
	assert_true(kmsd_registry_has(r, ak3, sizeof(ak3))); /* another machine */
	json_t *e = kmsd_registry_eks_revoked(r);
	assert_int_equal(json_array_size(e), 1);
	json_decref(e);
	/* re-admitted: ak2 releases again; ak1 stays revoked itself */
	assert_int_equal(kmsd_registry_ek_readmit(r, ek, &was), SL_OK);
	assert_true(was);
	assert_int_equal(kmsd_registry_ek_readmit(r, ek, &was), SL_OK);
	assert_false(was);
	assert_true(kmsd_registry_has(r, ak2, sizeof(ak2)));
	assert_true(kmsd_registry_revoked(r, ak1, sizeof(ak1)));
	kmsd_registry_close(r);
	r = NULL;

	/* another registry key than the store was made with: refused at open */
	uint8_t key2[32];
	sl_random(key2, sizeof(key2));
	write_file("rows2.key", key2, sizeof(key2), 0600);
	assert_int_equal(kmsd_registry_open(st, in_dir("rows2.key"), &r), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "rows2.key: not the registry key"));
	assert_null(r);
	kmsd_store_close(st);
}

/* The same evidence item, identity document or key twice: 400 naming the
 * index (it would be verified, or released, twice). */
static void test_parse_release_repeats(void **state)
{
	kmsd_release_req *r = NULL;
	(void)state;
	const char *k1 = "{\"key_id\":\"k\",\"dataset_id\":\"d\",\"wrapped_dek\":\"" W61 "\"}";
	const char *k2 = "{\"key_id\":\"k\",\"dataset_id\":\"d2\",\"wrapped_dek\":\"" W61 "\"}";
	const char *k3 = "{\"key_id\":\"k\",\"dataset_id\":\"d2\",\"wrapped_dek\":\"" W61B "\"}";
	const char *k4 = "{\"key_id\":\"k2\",\"dataset_id\":\"d\",\"wrapped_dek\":\"" W61C "\"}";
	char keys[2048], body[4096];
	snprintf(keys, sizeof(keys), "[%s,%s,%s]", k1, k4, k1);
	expect_release_err(release_json(N32, keys), "keys[2]: repeats keys[0]");
	/* same key and dataset, different bytes: still the same key twice */
	snprintf(keys, sizeof(keys), "[%s,%s]", k2, k3);
	expect_release_err(release_json(N32, keys), "keys[1]: repeats keys[0]");
	/* the same wrapped DEK under two dataset ids */
	snprintf(keys, sizeof(keys), "[%s,%s]", k1, k2);
	expect_release_err(release_json(N32, keys), "keys[1]: wrapped_dek repeats keys[0]");
	/* distinct keys pass */
	snprintf(keys, sizeof(keys), "[%s,%s]", k1, k3);
	assert_int_equal(kmsd_parse_release(B(release_json(N32, keys)), &r), SL_OK);
	assert_int_equal(r->nkeys, 2);
	kmsd_release_req_free(r);
	r = NULL;
	snprintf(body, sizeof(body),
	         "{\"nonce\":\"" N32 "\",\"eph_pub\":\"" N32 "\",\"policy_digest\":\"" N32
	         "\",\"evidence\":[{\"kind\":\"tpm2\",\"a\":1},{\"kind\":\"sev-snp\"},"
	         "{\"a\":1,\"kind\":\"tpm2\"}],\"keys\":[%s]}",
	         k1);
	expect_release_err(body, "evidence[2]: repeats evidence[0]");
	snprintf(body, sizeof(body),
	         "{\"nonce\":\"" N32 "\",\"eph_pub\":\"" N32 "\",\"policy_digest\":\"" N32
	         "\",\"evidence\":[{\"kind\":\"tpm2\"}],\"identity\":[{\"kind\":\"unsigned\","
	         "\"region\":\"aws:eu-west-1\"},{\"kind\":\"unsigned\",\"region\":"
	         "\"aws:eu-west-1\"}],\"keys\":[%s]}",
	         k1);
	expect_release_err(body, "identity[1]: repeats identity[0]");
}

/* ---- refusals: rate limit and audit aggregation ------------------------------ */

static void test_refusals(void **state)
{
	kmsd_refusals *t = NULL;
	unsigned retry = 0;
	(void)state;
	assert_int_equal(kmsd_refusals_new(3, 3600, &t), SL_OK);
	/* a source nobody refused is admitted; three refusals use up its tokens */
	assert_true(kmsd_refusals_admit(t, "10.0.0.1", &retry));
	for (int i = 0; i < 3; i++) {
		assert_true(kmsd_refusals_admit(t, "10.0.0.1", &retry));
		kmsd_refusals_charge(t, "10.0.0.1");
	}
	assert_false(kmsd_refusals_admit(t, "10.0.0.1", &retry));
	/* one token a 20 s at 3 a minute */
	assert_true(retry >= 1 && retry <= 20);
	/* another source is not affected */
	assert_true(kmsd_refusals_admit(t, "10.0.0.2", &retry));
	/* aggregation: the first of a (source, reason) in full, the rest counted */
	assert_true(kmsd_refusals_note(t, "10.0.0.1", "nonce_unknown"));
	assert_false(kmsd_refusals_note(t, "10.0.0.1", "nonce_unknown"));
	assert_false(kmsd_refusals_note(t, "10.0.0.1", "nonce_unknown"));
	assert_true(kmsd_refusals_note(t, "10.0.0.1", "nonce_reused"));
	assert_true(kmsd_refusals_note(t, "10.0.0.2", "nonce_unknown"));
	/* refusals decided on verified evidence are never aggregated */
	assert_true(kmsd_refusals_note(t, "10.0.0.1", "policy_denied"));
	assert_true(kmsd_refusals_note(t, "10.0.0.1", "policy_denied"));
	/* the window is open: nothing due unless forced (at stop) */
	assert_null(kmsd_refusals_take(t, false));
	json_t *sums = kmsd_refusals_take(t, true);
	assert_non_null(sums);
	assert_int_equal(json_array_size(sums), 1);
	json_t *s0 = json_array_get(sums, 0);
	assert_string_equal(json_string_value(json_object_get(s0, "source")), "10.0.0.1");
	assert_string_equal(json_string_value(json_object_get(s0, "reason")), "nonce_unknown");
	assert_int_equal(json_integer_value(json_object_get(s0, "count")), 2);
	/* a summary that could not be written is kept */
	kmsd_refusals_putback(t, sums);
	sums = kmsd_refusals_take(t, true);
	assert_non_null(sums);
	assert_int_equal(json_array_size(sums), 1);
	json_decref(sums);
	assert_null(kmsd_refusals_take(t, true));
	/* after the forced close a new window starts with a full record */
	assert_true(kmsd_refusals_note(t, "10.0.0.1", "nonce_unknown"));
	kmsd_refusals_free(t);
	/* rate 0: no limit; window 0: every refusal in full */
	assert_int_equal(kmsd_refusals_new(0, 0, &t), SL_OK);
	for (int i = 0; i < 100; i++)
		kmsd_refusals_charge(t, "10.0.0.1");
	assert_true(kmsd_refusals_admit(t, "10.0.0.1", &retry));
	assert_true(kmsd_refusals_note(t, "10.0.0.1", "nonce_unknown"));
	assert_true(kmsd_refusals_note(t, "10.0.0.1", "nonce_unknown"));
	kmsd_refusals_free(t);
}

/* A window that closes by time yields its summary without forcing. */
static void test_refusals_window(void **state)
{
	kmsd_refusals *t = NULL;
	(void)state;
	assert_int_equal(kmsd_refusals_new(60, 1, &t), SL_OK);
	assert_true(kmsd_refusals_note(t, "::1", "rate_limited"));
	assert_false(kmsd_refusals_note(t, "::1", "rate_limited"));
	usleep(1100 * 1000);
	json_t *sums = kmsd_refusals_take(t, false);
	assert_non_null(sums);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(sums, 0), "count")), 1);
	json_decref(sums);
	kmsd_refusals_free(t);
}

/* ---- --dev state directory and development policy ----------------------------- */

static void test_state_dir(void **state)
{
	char dir[600], file[600];
	(void)state;
	snprintf(dir, sizeof(dir), "%s/state", tmpdir);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(kmsd_state_dir_check(dir), SL_OK);
	assert_int_equal(chmod(dir, 0755), 0);
	assert_int_equal(kmsd_state_dir_check(dir), SL_OK);
	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(kmsd_state_dir_check(dir), SL_E_PERM);
	assert_non_null(strstr(sl_err_detail(), "mode 0777"));
	assert_non_null(strstr(sl_err_detail(), "chmod 700"));
	assert_non_null(strstr(sl_err_detail(), dir));
	assert_int_equal(chmod(dir, 0770), 0);
	assert_int_equal(kmsd_state_dir_check(dir), SL_E_PERM);
	assert_int_equal(chmod(dir, 0700), 0);
	if (geteuid() == 0) {
		assert_int_equal(chown(dir, 4242, 4242), 0);
		assert_int_equal(kmsd_state_dir_check(dir), SL_E_PERM);
		assert_non_null(strstr(sl_err_detail(), "owned by uid 4242"));
		assert_int_equal(chown(dir, 0, 0), 0);
	}
	snprintf(file, sizeof(file), "%s/state/f", tmpdir);
	write_file("state/f", "x", 1, 0600);
	assert_int_equal(kmsd_state_dir_check(file), SL_E_PERM);
	assert_non_null(strstr(sl_err_detail(), "not a directory"));
}

static void test_devpolicy(void **state)
{
	char dir[600], pol[700], pub[700], sig[700];
	sl_policy *p = NULL, *q = NULL, *dev = NULL;
	(void)state;
	snprintf(dir, sizeof(dir), "%s/devpol", tmpdir);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(kmsd_devpolicy(dir, &p), SL_OK);
	assert_true(sl_policy_is_dev(p));
	assert_int_equal(sl_policy_dev(&dev), SL_OK);
	/* the digest a client binds is the one the service enforces */
	assert_memory_equal(sl_policy_digest(p), sl_policy_digest(dev), SL_POLICY_DIGEST_LEN);
	snprintf(pol, sizeof(pol), "%s/policy.json", dir);
	snprintf(sig, sizeof(sig), "%s/policy.json.minisig", dir);
	snprintf(pub, sizeof(pub), "%s/policy.pub", dir);
	assert_int_equal(sl_policy_load_signed(pol, NULL, pub, &q), SL_OK);
	assert_true(sl_policy_is_dev(q));
	assert_true(sl_policy_signed(q));
	sl_policy_free(q);
	q = NULL;
	/* a restart keeps files that still verify (clients' copies stay valid) */
	uint8_t *pk1 = NULL, *pk2 = NULL;
	size_t n1 = 0, n2 = 0;
	assert_int_equal(sl_file_read(pub, 4096, &pk1, &n1), SL_OK);
	sl_policy_free(p);
	p = NULL;
	assert_int_equal(kmsd_devpolicy(dir, &p), SL_OK);
	assert_int_equal(sl_file_read(pub, 4096, &pk2, &n2), SL_OK);
	assert_int_equal(n1, n2);
	assert_memory_equal(pk1, pk2, n1);
	free(pk2);
	pk2 = NULL;
	/* a signature that no longer verifies is replaced, under a new key */
	assert_int_equal(sl_file_write_atomic(sig, "junk\n", 5, 0644, true), SL_OK);
	sl_policy_free(p);
	p = NULL;
	assert_int_equal(kmsd_devpolicy(dir, &p), SL_OK);
	assert_true(sl_policy_is_dev(p));
	assert_int_equal(sl_file_read(pub, 4096, &pk2, &n2), SL_OK);
	assert_false(n1 == n2 && memcmp(pk1, pk2, n1) == 0);
	free(pk1);
	free(pk2);
	/* a policy.json changed after signing is refused */
	assert_int_equal(sl_file_write_atomic(pol, "{\"version\": 1}\n", 15, 0644, true), SL_OK);
	assert_int_not_equal(sl_policy_load_signed(pol, NULL, pub, &q), SL_OK);
	assert_null(q);
	sl_policy_free(p);
	sl_policy_free(dev);
}

/* The wrap's policy check: the $.keys map alone. */
static void test_policy_key_check(void **state)
{
	static const char pol[] =
	    "{\"version\":1,\"datasets\":[{\"id\":\"*\",\"allowed_regions\":[\"eu\"],"
	    "\"tee_kinds\":[\"tpm2\"]}],"
	    "\"keys\":{\"kek-clinical\":[\"clinical-*\"],\"kek-all\":[\"*\"]}}";
	sl_policy *p = NULL, *dev = NULL;
	(void)state;
	assert_int_equal(sl_policy_load(B(pol), &p), SL_OK);
	assert_int_equal(sl_policy_key_check(p, "kek-clinical", "clinical-7"), SL_OK);
	assert_int_equal(sl_policy_key_check(p, "kek-all", "anything"), SL_OK);
	assert_int_equal(sl_policy_key_check(p, "kek-clinical", "public-1"), SL_E_POLICY_DENIED);
	assert_non_null(strstr(sl_err_detail(),
	                       "$.keys.kek-clinical: key 'kek-clinical' may not "
	                       "serve dataset 'public-1' (it serves [clinical-*])"));
	assert_int_equal(sl_policy_key_check(p, "kek-other", "clinical-7"), SL_E_POLICY_DENIED);
	assert_non_null(strstr(sl_err_detail(), "key 'kek-other' is not in the policy"));
	assert_int_equal(sl_policy_dev(&dev), SL_OK);
	assert_int_equal(sl_policy_key_check(dev, "kek-other", "x"), SL_OK);
	sl_policy_free(p);
	sl_policy_free(dev);
}

/* ---- routing and metrics ------------------------------------------------------ */

static void test_dispatch(void **state)
{
	kmsd_ctx ctx = {0};
	kmsd_response res = {0};
	kmsd_request req = {
	    .method = "GET", .path = "/nope", .body = (const uint8_t *)"", .len = 0};
	(void)state;
	assert_int_equal(kmsd_dispatch(&ctx, &req, &res), KMSD_R_OTHER);
	assert_int_equal(res.status, 404);
	assert_true(res.problem);
	assert_string_equal(json_string_value(json_object_get(res.json, "type")),
	                    "urn:seclaunch:kms:not-found");
	json_decref(res.json);
	memset(&res, 0, sizeof(res));
	req.path = "/v1/release";
	assert_int_equal(kmsd_dispatch(&ctx, &req, &res), KMSD_R_RELEASE);
	assert_int_equal(res.status, 405);
	json_decref(res.json);
	memset(&res, 0, sizeof(res));
	req.path = "/v1/keys/x/wrap";
	assert_int_equal(kmsd_dispatch(&ctx, &req, &res), KMSD_R_WRAP);
	assert_int_equal(res.status, 405);
	json_decref(res.json);
	memset(&res, 0, sizeof(res));
	/* admin routes need the token before anything else */
	sl_sha256("right-token-0123", 16, ctx.token_sha256[KMSD_SCOPE_ADMIN]);
	ctx.token_set[KMSD_SCOPE_ADMIN] = true;
	req.method = "POST";
	req.path = "/v1/keys";
	req.authorization = "Bearer wrong-token-0123";
	assert_int_equal(kmsd_dispatch(&ctx, &req, &res), KMSD_R_KEYS);
	assert_int_equal(res.status, 401);
	json_decref(res.json);
	memset(&res, 0, sizeof(res));
	req.authorization = NULL;
	req.path = "/v1/keys/k1/wrap";
	assert_int_equal(kmsd_dispatch(&ctx, &req, &res), KMSD_R_WRAP);
	assert_int_equal(res.status, 401);
	json_decref(res.json);
}

/* Each scope token on each endpoint class: admin everywhere; wrap on wrap,
 * rewrap and the key GETs; operate on AK and enrollment-token endpoints;
 * metrics on /metrics; everything else 403 naming both scopes. */
static const char *const scope_tok[KMSD_SCOPE__COUNT] = {
    [KMSD_SCOPE_METRICS] = "metrics-token-0123456",
    [KMSD_SCOPE_WRAP] = "wrap-token-0123456789",
    [KMSD_SCOPE_OPERATE] = "operate-token-0123456",
    [KMSD_SCOPE_ADMIN] = "admin-token-012345678"};

/* The status of one request with scope s's token (refused: 401/403; a 403
 * names the token's scope and what was needed). */
static unsigned scoped(kmsd_ctx *ctx, int s, const char *method, const char *path, const char *need)
{
	char auth[64];
	kmsd_response res = {0};
	snprintf(auth, sizeof(auth), "Bearer %s", scope_tok[s]);
	kmsd_request req = {.method = method,
	                    .path = path,
	                    .body = (const uint8_t *)"{",
	                    .len = 1,
	                    .authorization = auth};
	(void)kmsd_dispatch(ctx, &req, &res);
	if (res.status == 403) {
		char want[200];
		const char *d = json_string_value(json_object_get(res.json, "detail"));
		snprintf(want, sizeof(want), "this token has scope %s; ", kmsd_scope_name(s));
		assert_non_null(d);
		assert_non_null(strstr(d, want));
		snprintf(want, sizeof(want), " needs %s", need);
		assert_non_null(strstr(d, want));
	}
	unsigned st = res.status;
	json_decref(res.json);
	free(res.text);
	return st;
}

static void test_scopes(void **state)
{
	kmsd_ctx ctx = {0};
	kmsd_config cfg;
	(void)state;
	/* the token files: one reader, one rule (16 characters at least) */
	kmsd_config_defaults(&cfg);
	write_file("admin.tok", scope_tok[KMSD_SCOPE_ADMIN], strlen(scope_tok[KMSD_SCOPE_ADMIN]),
	           0600);
	write_file("wrap.tok", "wrap-token-0123456789\n", 22, 0600);
	write_file("short.tok", "fifteen-chars-x", 15, 0600);
	write_file("same.tok", scope_tok[KMSD_SCOPE_ADMIN], strlen(scope_tok[KMSD_SCOPE_ADMIN]),
	           0600);
	cfg.admin_token_file = strdup(in_dir("admin.tok"));
	cfg.wrap_token_file = strdup(in_dir("short.tok"));
	assert_int_equal(kmsd_tokens_load(&ctx, &cfg), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "wrap_token_file"));
	assert_non_null(strstr(sl_err_detail(), "at least 16"));
	free(cfg.wrap_token_file);
	cfg.wrap_token_file = strdup(in_dir("same.tok"));
	assert_int_equal(kmsd_tokens_load(&ctx, &cfg), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "hold the same token"));
	free(cfg.wrap_token_file);
	cfg.wrap_token_file = strdup(in_dir("wrap.tok"));
	assert_int_equal(kmsd_tokens_load(&ctx, &cfg), SL_OK);
	assert_true(ctx.token_set[KMSD_SCOPE_WRAP] && ctx.token_set[KMSD_SCOPE_ADMIN]);
	assert_false(ctx.token_set[KMSD_SCOPE_OPERATE]);
	/* what the allowed requests reach: a store, a registry, KEKs, metrics */
	uint8_t rk[32];
	sl_random(rk, sizeof(rk));
	write_file("scopes-reg.key", rk, sizeof(rk), 0600);
	make_master();
	cfg.master_key_file = strdup(in_dir("master.key"));
	ctx.store = fresh_store("scopes.db");
	assert_int_equal(kmsd_registry_open(ctx.store, in_dir("scopes-reg.key"), &ctx.registry),
	                 SL_OK);
	cfg.store = strdup(in_dir("scopes.db"));
	assert_int_equal(kmsd_keyproc_start(&cfg, 1, &ctx.keyproc), SL_OK);
	assert_int_equal(kmsd_kek_open_remote(ctx.keyproc, ctx.store, &ctx.kek), SL_OK);
	assert_int_equal(kmsd_metrics_new(&ctx.metrics), SL_OK);
	assert_int_equal(kmsd_nonces_new(ctx.store, 16, 60, &ctx.nonces), SL_OK);
	for (int s = 0; s < KMSD_SCOPE__COUNT; s++) {
		sl_sha256(scope_tok[s], strlen(scope_tok[s]), ctx.token_sha256[s]);
		ctx.token_set[s] = true;
	}
	static const struct {
		const char *method, *path;
		enum kmsd_scope need;
	} ep[] = {
	    {"POST", "/v1/keys", KMSD_SCOPE_ADMIN},
	    {"POST", "/v1/keys/k1/rotate", KMSD_SCOPE_ADMIN},
	    {"POST", "/v1/keys/k1/disable", KMSD_SCOPE_ADMIN},
	    {"POST", "/v1/keys/k1/enable", KMSD_SCOPE_ADMIN},
	    {"POST", "/v1/keys/k1/retire", KMSD_SCOPE_ADMIN},
	    {"POST", "/v1/keys/k1/delete", KMSD_SCOPE_ADMIN},
	    {"POST", "/v1/keys/k1/wrap", KMSD_SCOPE_WRAP},
	    {"POST", "/v1/keys/k1/rewrap", KMSD_SCOPE_WRAP},
	    {"GET", "/v1/keys", KMSD_SCOPE_WRAP},
	    {"GET", "/v1/keys/k1", KMSD_SCOPE_WRAP},
	    {"POST", "/v1/enroll/tokens", KMSD_SCOPE_OPERATE},
	    {"GET", "/v1/aks", KMSD_SCOPE_OPERATE},
	    {"POST", "/v1/aks/revoke", KMSD_SCOPE_OPERATE},
	    {"GET", "/metrics", KMSD_SCOPE_METRICS},
	};
	for (size_t i = 0; i < sizeof(ep) / sizeof(ep[0]); i++) {
		for (int s = 0; s < KMSD_SCOPE__COUNT; s++) {
			unsigned st =
			    scoped(&ctx, s, ep[i].method, ep[i].path, kmsd_scope_name(ep[i].need));
			bool allowed = s == (int)ep[i].need || s == KMSD_SCOPE_ADMIN;
			if (allowed ? st == 401 || st == 403 : st != 403)
				fail_msg("%s %s with scope %s: %u", ep[i].method, ep[i].path,
				         kmsd_scope_name(s), st);
		}
	}
	/* a token that is none of them: 401 */
	kmsd_response res = {0};
	kmsd_request req = {.method = "GET",
	                    .path = "/metrics",
	                    .body = (const uint8_t *)"",
	                    .authorization = "Bearer not-a-token-0123456789"};
	(void)kmsd_dispatch(&ctx, &req, &res);
	assert_int_equal(res.status, 401);
	json_decref(res.json);
	kmsd_nonces_free(ctx.nonces);
	kmsd_metrics_free(ctx.metrics);
	kmsd_kek_close(ctx.kek);
	kmsd_keyproc_stop(ctx.keyproc);
	kmsd_registry_close(ctx.registry);
	kmsd_store_close(ctx.store);
	kmsd_config_free(&cfg);
}

static void test_metrics(void **state)
{
	kmsd_metrics *m = NULL;
	char *text = NULL;
	(void)state;
	assert_int_equal(kmsd_metrics_new(&m), SL_OK);
	kmsd_metrics_request(m, KMSD_R_RELEASE, 200, 1500000);
	kmsd_metrics_request(m, KMSD_R_RELEASE, 403, 30000000);
	kmsd_metrics_release(m, 3);
	kmsd_metrics_denial(m, KMSD_D_NONCE_USED);
	assert_int_equal(kmsd_metrics_render(m, 7, 2, 5, &text), SL_OK);
	assert_non_null(strstr(text, "seclaunchd_releases_total 1\n"));
	assert_non_null(strstr(text, "seclaunchd_keys_released_total 3\n"));
	assert_non_null(strstr(text, "seclaunchd_denials_total{reason=\"nonce_reused\"} 1\n"));
	assert_non_null(strstr(text, "seclaunchd_challenges 7\n"));
	assert_non_null(strstr(text, "route=\"release\",code=\"4xx\"} 1\n"));
	assert_non_null(strstr(
	    text,
	    "seclaunchd_request_duration_seconds_bucket{route=\"release\",le=\"0.0025\"} 1\n"));
	assert_non_null(strstr(
	    text, "seclaunchd_request_duration_seconds_bucket{route=\"release\",le=\"+Inf\"} 2\n"));
	free(text);
	kmsd_metrics_free(m);
}

/* ---- audit: a grant that cannot be recorded is not given -------------------- */

static void test_audit_fail_closed(void **state)
{
	kmsd_ctx ctx = {0};
	sl_audit *a = NULL;
	(void)state;
	/* a release's "job" object is copied into the audit record: it is capped */
	{
		static char body[40000];
		char *big = malloc(KMSD_MAX_JOB + 2);
		assert_non_null(big);
		memset(big, 'x', KMSD_MAX_JOB + 1);
		big[KMSD_MAX_JOB + 1] = '\0';
		snprintf(body, sizeof(body),
		         "{\"nonce\":\"" N32 "\",\"eph_pub\":\"" N32 "\",\"policy_digest\":\"" N32
		         "\",\"evidence\":[{\"kind\":\"tpm2\"}],\"job\":{\"x\":\"%s\"},"
		         "\"keys\":[{\"key_id\":\"k\",\"dataset_id\":\"d\",\"wrapped_dek\":\"" W61
		         "\"}]}",
		         big);
		free(big);
		expect_release_err(body, "job:");
	}
	/* kmsd_audit says whether the record was written */
	assert_int_equal(sl_audit_open(in_dir("audit.log"), NULL, "seclaunchd", 0, &a), SL_OK);
	ctx.audit = a;
	assert_true(kmsd_audit(&ctx, "kms.key.wrap", "k", "d", "allow", NULL, NULL, NULL));
	size_t n = (size_t)2 << 20; /* over the writer's 1 MiB line limit */
	char *huge = malloc(n + 1);
	assert_non_null(huge);
	memset(huge, 'y', n);
	huge[n] = '\0';
	assert_false(kmsd_audit(&ctx, "kms.key.wrap", "k", "d", "allow", NULL, NULL,
	                        json_pack("{s:s}", "x", huge)));
	free(huge);
	/* the 503 answer grants nothing and says why */
	kmsd_response res = {0};
	kmsd_audit_failed(&ctx, &res, "wrap");
	assert_int_equal(res.status, 503);
	assert_true(res.retry_after > 0);
	assert_null(json_object_get(res.json, "wrapped_dek"));
	assert_non_null(strstr(json_string_value(json_object_get(res.json, "detail")),
	                       "audit record could not be written"));
	json_decref(res.json);
	assert_int_equal(sl_audit_close(a), SL_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_release_good),
	    cmocka_unit_test(test_parse_release_bad),
	    cmocka_unit_test(test_parse_release_outputs),
	    cmocka_unit_test(test_parse_release_repeats),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_refusals_window),
	    cmocka_unit_test(test_state_dir),
	    cmocka_unit_test(test_devpolicy),
	    cmocka_unit_test(test_policy_key_check),
	    cmocka_unit_test(test_parse_admin),
	    cmocka_unit_test(test_parse_enroll_token),
	    cmocka_unit_test(test_parse_enroll),
	    cmocka_unit_test(test_aad_unambiguous),
	    cmocka_unit_test(test_gcm),
	    cmocka_unit_test(test_nonces),
	    cmocka_unit_test(test_nonces_many),
	    cmocka_unit_test(test_nonces_two_handles),
	    cmocka_unit_test(test_config_table),
	    cmocka_unit_test(test_keystore),
	    cmocka_unit_test(test_keyproc),
	    cmocka_unit_test(test_registry),
	    cmocka_unit_test(test_registry_rows),
	    cmocka_unit_test(test_dispatch),
	    cmocka_unit_test(test_scopes),
	    cmocka_unit_test(test_metrics),
	    cmocka_unit_test(test_audit_fail_closed),
	};
	if (sl_crypto_init() != SL_OK)
		return 1;
	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
