/* Core: error table, bounds-checked reader/writer, secret memory, encodings,
 * files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seclaunch/buf.h"
#include "seclaunch/error.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

static void test_error_exit_codes(void **state)
{
	(void)state;
	assert_int_equal(sl_err_exit_code(SL_OK), 0);
	assert_int_equal(sl_err_exit_code(SL_E_USAGE), 1);
	assert_int_equal(sl_err_exit_code(SL_E_FORMAT), 2);
	assert_int_equal(sl_err_exit_code(SL_E_VERSION), 2);
	assert_int_equal(sl_err_exit_code(SL_E_ATTEST_SIG), 3);
	assert_int_equal(sl_err_exit_code(SL_E_POLICY_DENIED), 4);
	assert_int_equal(sl_err_exit_code(SL_E_KMS_UNREACHABLE), 5);
	assert_int_equal(sl_err_exit_code(SL_E_INTEGRITY), 6);
	assert_int_equal(sl_err_exit_code(SL_E_WRONG_KEY), 6);
	assert_int_equal(sl_err_exit_code(SL_E_NOMEM), 7);
	assert_int_equal(sl_err_exit_code((sl_err)9999), 7);
	assert_string_equal(sl_err_name(SL_E_FORMAT), "SL_E_FORMAT");
	/* every code has a message and a category in 0..7 */
	for (int i = 0; i < SL_E__COUNT; i++) {
		assert_non_null(sl_err_message((sl_err)i));
		assert_true(sl_err_exit_code((sl_err)i) >= 0 && sl_err_exit_code((sl_err)i) <= 7);
	}
}

static void test_error_detail_and_wrap(void **state)
{
	(void)state;
	assert_int_equal(sl_err_set(SL_E_FORMAT, "field %s bad", "x"), SL_E_FORMAT);
	assert_string_equal(sl_err_detail(), "field x bad");
	assert_int_equal(sl_err_wrap(SL_E_IO, "reading %s", "f.sld"), SL_E_IO);
	assert_string_equal(sl_err_detail(), "reading f.sld: field x bad");
	sl_err_clear();
	assert_string_equal(sl_err_detail(), "");
}

static void test_reader_ints(void **state)
{
	(void)state;
	const uint8_t b[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
	                     0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
	                     0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f};
	sl_reader r;
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
	sl_reader_init(&r, b, sizeof(b), "t");
	assert_int_equal(sl_read_u8(&r, &u8, "a"), SL_OK);
	assert_int_equal(u8, 0x01);
	assert_int_equal(sl_read_u16be(&r, &u16, "b"), SL_OK);
	assert_int_equal(u16, 0x0203);
	assert_int_equal(sl_read_u16le(&r, &u16, "c"), SL_OK);
	assert_int_equal(u16, 0x0504);
	assert_int_equal(sl_read_u32be(&r, &u32, "d"), SL_OK);
	assert_int_equal(u32, 0x06070809);
	assert_int_equal(sl_read_u32le(&r, &u32, "e"), SL_OK);
	assert_int_equal(u32, 0x0d0c0b0a);
	assert_int_equal(sl_read_u64be(&r, &u64, "f"), SL_OK);
	assert_true(u64 == 0x0e0f101112131415ULL);
	assert_int_equal(sl_read_u64le(&r, &u64, "g"), SL_OK);
	assert_true(u64 == 0x1d1c1b1a19181716ULL);
	assert_int_equal(sl_reader_left(&r), 2);
	assert_int_equal(sl_reader_offset(&r), 29);
	/* every width fails one byte short, without moving the cursor */
	assert_int_equal(sl_read_u32be(&r, &u32, "h"), SL_E_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "t: h: need 4 bytes at offset 29, 2 left"));
	assert_int_equal(sl_reader_offset(&r), 29);
	assert_int_equal(sl_read_u64le(&r, &u64, "h"), SL_E_FORMAT);
	assert_int_equal(sl_read_u32le(&r, &u32, "h"), SL_E_FORMAT);
	assert_int_equal(sl_read_u16be(&r, &u16, "h"), SL_OK);
	assert_int_equal(sl_read_u8(&r, &u8, "h"), SL_E_FORMAT);
	assert_int_equal(sl_read_u16le(&r, &u16, "h"), SL_E_FORMAT);
	assert_int_equal(sl_read_u64be(&r, &u64, "h"), SL_E_FORMAT);
	assert_int_equal(sl_reader_expect_end(&r), SL_OK);
}

static void test_reader_bounds(void **state)
{
	(void)state;
	const uint8_t b[] = {0x00, 0x03, 'a', 'b', 'c', 0x00, 0x00, 0x00, 0x10, 'x', 0, 0, 1};
	sl_reader r, sub;
	const uint8_t *v;
	uint8_t out[4];

	sl_reader_init(&r, b, sizeof(b), "t");
	assert_int_equal(sl_read_lp16be(&r, &sub, 3, "name"), SL_OK);
	assert_int_equal(sl_reader_left(&sub), 3);
	assert_int_equal(sl_read_view(&sub, 3, &v, "name"), SL_OK);
	assert_memory_equal(v, "abc", 3);
	assert_int_equal(sl_reader_expect_end(&sub), SL_OK);
	/* declared length 16 larger than what is left */
	sl_reader save = r;
	assert_int_equal(sl_read_lp32be(&r, &sub, 1024, "blob"), SL_E_FORMAT);
	r = save;
	/* declared length over the caller's cap */
	assert_int_equal(sl_read_lp32be(&r, &sub, 8, "blob"), SL_E_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "exceeds the limit 8"));
	r = save;
	assert_int_equal(sl_read_skip(&r, 4, "len"), SL_OK);
	assert_int_equal(sl_read_bytes(&r, out, 1, "x"), SL_OK);
	assert_int_equal(out[0], 'x');
	assert_int_equal(sl_read_zeros(&r, 3, "reserved"), SL_E_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "reserved byte at offset 12 is 0x01"));
	/* trailing bytes are reported */
	sl_reader_init(&r, b, sizeof(b), "t");
	assert_int_equal(sl_read_skip(&r, 10, "x"), SL_OK);
	assert_int_equal(sl_reader_expect_end(&r), SL_E_FORMAT);
	assert_non_null(strstr(sl_err_detail(), "3 trailing bytes at offset 10"));
	/* a huge n cannot wrap the offset */
	assert_int_equal(sl_read_skip(&r, SIZE_MAX, "x"), SL_E_FORMAT);
	assert_int_equal(sl_read_sub(&r, SIZE_MAX - 5, &sub, "x"), SL_E_FORMAT);
	/* lp8 and an empty/NULL reader */
	const uint8_t lp[] = {2, 'h', 'i'};
	sl_reader_init(&r, lp, sizeof(lp), "t");
	assert_int_equal(sl_read_lp8(&r, &sub, "s"), SL_OK);
	assert_int_equal(sl_reader_left(&sub), 2);
	sl_reader_init(&r, NULL, 100, "t");
	assert_int_equal(sl_reader_left(&r), 0);
	assert_int_equal(sl_read_u8(&r, out, "x"), SL_E_FORMAT);
}

static void test_writer(void **state)
{
	(void)state;
	uint8_t buf[8];
	sl_writer w;
	sl_writer_init_fixed(&w, buf, sizeof(buf));
	assert_int_equal(sl_write_u32be(&w, 0x01020304), SL_OK);
	assert_int_equal(sl_write_u16le(&w, 0x0506), SL_OK);
	assert_int_equal(sl_write_u8(&w, 7), SL_OK);
	assert_int_equal(sl_write_u16be(&w, 1), SL_E_INTERNAL); /* would overflow */
	assert_int_equal(w.len, 7);
	const uint8_t want[] = {1, 2, 3, 4, 6, 5, 7};
	assert_memory_equal(buf, want, 7);

	sl_writer_init(&w, 100);
	for (int i = 0; i < 12; i++)
		assert_int_equal(sl_write_u64le(&w, (uint64_t)i), SL_OK);
	assert_int_equal(w.len, 96);
	assert_int_equal(sl_write_u64be(&w, 1), SL_E_TOO_LARGE);
	assert_int_equal(sl_write_zeros(&w, 4), SL_OK);
	assert_int_equal(w.len, 100);
	assert_int_equal(sl_write_u32le(&w, 1), SL_E_TOO_LARGE);
	sl_reader r;
	uint64_t v;
	sl_reader_init(&r, w.data, w.len, "w");
	assert_int_equal(sl_read_skip(&r, 88, "x"), SL_OK);
	assert_int_equal(sl_read_u64le(&r, &v, "x"), SL_OK);
	assert_true(v == 11);
	sl_writer_free(&w);
	assert_null(w.data);
}

static void test_secret(void **state)
{
	(void)state;
	sl_secret *s = NULL, *t = NULL;
	assert_int_equal(sl_crypto_init(), SL_OK);
	assert_int_equal(sl_secret_random(32, &s), SL_OK);
	assert_int_equal(sl_secret_len(s), 32);
	assert_int_equal(sl_secret_from(sl_secret_data(s), 32, &t), SL_OK);
	assert_true(sl_ct_eq(sl_secret_data(s), sl_secret_data(t), 32));
	sl_secret_data(t)[31] ^= 1;
	assert_false(sl_ct_eq(sl_secret_data(s), sl_secret_data(t), 32));
	sl_secret_truncate(t, 16);
	assert_int_equal(sl_secret_len(t), 16);
	sl_secret_readonly(s);
	assert_int_equal(sl_secret_data(s)[0], sl_secret_data(s)[0]);
	sl_secret_readwrite(s);
	sl_secret_data(s)[0] = 0;
	sl_secret_free(s);
	sl_secret_free(t);
	sl_secret_free(NULL);
	assert_int_equal(sl_secret_new(0, &s), SL_OK);
	assert_int_equal(sl_secret_len(s), 0);
	sl_secret_free(s);
	uint8_t z[16] = {1, 2, 3};
	sl_wipe(z, sizeof(z));
	for (size_t i = 0; i < sizeof(z); i++)
		assert_int_equal(z[i], 0);
}

static char tmpdir[64];

static int setup_tmp(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/slcore.XXXXXX");
	return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown_tmp(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_secret_read_file(void **state)
{
	(void)state;
	char p[128];
	sl_secret *s = NULL;
	snprintf(p, sizeof(p), "%s/key", tmpdir);
	int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789abcdef", 16), 16);
	close(fd);
	assert_int_equal(sl_secret_read_file(p, 32, &s), SL_OK);
	assert_int_equal(sl_secret_len(s), 16);
	assert_memory_equal(sl_secret_data(s), "0123456789abcdef", 16);
	sl_secret_free(s);
	/* larger than the cap */
	assert_int_equal(sl_secret_read_file(p, 8, &s), SL_E_TOO_LARGE);
	/* group-readable key file is refused, naming the mode */
	assert_int_equal(chmod(p, 0640), 0);
	assert_int_equal(sl_secret_read_file(p, 32, &s), SL_E_PERM);
	assert_non_null(strstr(sl_err_detail(), "mode 0640"));
	assert_int_equal(chmod(p, 0604), 0);
	assert_int_equal(sl_secret_read_file(p, 32, &s), SL_E_PERM);
	/* missing file, directory */
	assert_int_equal(sl_secret_read_file("/nonexistent/key", 32, &s), SL_E_IO);
	assert_int_equal(sl_secret_read_file(tmpdir, 32, &s), SL_E_IO);
}

/* root may use a client token file another user owns (a packaged admin.token,
 * owner _seclaunchd) when it is owner-only; seclaunchd's own read stays strict */
static void test_client_token_owner(void **state)
{
	(void)state;
	char p[128], l[128];
	sl_secret *s = NULL;
	if (geteuid() != 0)
		skip();
	snprintf(p, sizeof(p), "%s/admin.token", tmpdir);
	snprintf(l, sizeof(l), "%s/token.link", tmpdir);
	int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789abcdef0123\n", 21), 21);
	close(fd);
	assert_int_equal(chown(p, 65534, 65534), 0);
	assert_int_equal(sl_secret_read_client_token(p, &s), SL_OK);
	assert_string_equal((const char *)sl_secret_data(s), "0123456789abcdef0123");
	sl_secret_free(s);
	s = NULL;
	/* the server's scope tokens: the owner decides who is admin, so not there */
	assert_int_equal(sl_secret_read_token(p, &s), SL_E_PERM);
	assert_non_null(strstr(sl_err_detail(), "owned by uid 65534"));
	/* group-readable: refused, naming the mode, whoever owns it */
	assert_int_equal(chmod(p, 0640), 0);
	assert_int_equal(sl_secret_read_client_token(p, &s), SL_E_PERM);
	assert_non_null(strstr(sl_err_detail(), "mode 0640"));
	/* never through a link */
	assert_int_equal(chmod(p, 0600), 0);
	assert_int_equal(symlink(p, l), 0);
	assert_int_equal(sl_secret_read_client_token(l, &s), SL_E_PERM);
	assert_non_null(strstr(sl_err_detail(), "symbolic link"));
	assert_null(s);
}

static void test_file_read_write(void **state)
{
	(void)state;
	char p[128];
	uint8_t *data = NULL;
	size_t len = 0;
	struct stat st;
	snprintf(p, sizeof(p), "%s/out.json", tmpdir);
	assert_int_equal(sl_file_write_atomic(p, "hello", 5, 0640, false), SL_OK);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	/* no overwrite without replace */
	assert_int_equal(sl_file_write_atomic(p, "other", 5, 0600, false), SL_E_EXISTS);
	assert_int_equal(sl_file_read(p, 100, &data, &len), SL_OK);
	assert_int_equal(len, 5);
	assert_string_equal((char *)data, "hello");
	free(data);
	assert_int_equal(sl_file_write_atomic(p, "replaced", 8, 0600, true), SL_OK);
	assert_int_equal(sl_file_read(p, 100, &data, &len), SL_OK);
	assert_string_equal((char *)data, "replaced");
	free(data);
	/* the cap is enforced exactly */
	assert_int_equal(sl_file_read(p, 8, &data, &len), SL_OK);
	free(data);
	assert_int_equal(sl_file_read(p, 7, &data, &len), SL_E_TOO_LARGE);
	assert_non_null(strstr(sl_err_detail(), "7-byte limit"));
	assert_int_equal(sl_file_read("/nonexistent", 7, &data, &len), SL_E_IO);
	/* no temporary files are left behind */
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "test $(ls -A %s | grep -c tmp) -eq 0", tmpdir);
	assert_int_equal(system(cmd), 0);
}

static void test_encodings(void **state)
{
	(void)state;
	const uint8_t b[] = {0x00, 0xff, 0x10, 0xab};
	char hex[9];
	uint8_t back[4];
	sl_hex_encode(b, 4, hex);
	assert_string_equal(hex, "00ff10ab");
	assert_int_equal(sl_hex_decode("00FF10ab", back, 4, "n"), SL_OK);
	assert_memory_equal(back, b, 4);
	assert_int_equal(sl_hex_decode("00ff10", back, 4, "--nonce"), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "--nonce"));
	assert_int_equal(sl_hex_decode("00ff10zz", back, 4, "n"), SL_E_INPUT);
	assert_int_equal(sl_hex_decode("00ff10ab00", back, 4, "n"), SL_E_INPUT);

	char *s = NULL;
	uint8_t *d = NULL;
	size_t n = 0;
	assert_int_equal(sl_b64_encode((const uint8_t *)"foobar", 6, &s), SL_OK);
	assert_string_equal(s, "Zm9vYmFy");
	free(s);
	assert_int_equal(sl_b64_encode((const uint8_t *)"fo", 2, &s), SL_OK);
	assert_string_equal(s, "Zm8=");
	assert_int_equal(sl_b64_decode(s, 10, &d, &n, "x"), SL_OK);
	assert_int_equal(n, 2);
	assert_memory_equal(d, "fo", 2);
	free(d);
	free(s);
	assert_int_equal(sl_b64_decode("Zm8", 10, &d, &n, "x"), SL_E_FORMAT);   /* no padding */
	assert_int_equal(sl_b64_decode("Zm9v!", 10, &d, &n, "x"), SL_E_FORMAT); /* bad char */
	assert_int_equal(sl_b64_decode("Zm9vYmFy", 5, &d, &n, "field"), SL_E_TOO_LARGE);
	assert_non_null(strstr(sl_err_detail(), "field"));
	assert_int_equal(sl_b64url_decode("Zm8", 3, 10, &d, &n, "x"), SL_OK);
	assert_int_equal(n, 2);
	free(d);
	assert_int_equal(sl_b64url_decode("Zm+v", 4, 10, &d, &n, "x"), SL_E_FORMAT);
}

/* The public decoder and the constant-time one agree on every ASCII input: what
 * one accepts the other accepts with the same bytes, what one refuses the
 * other refuses with the same code. Fixed edge cases, then random strings
 * over the alphabet, '=' and a few other characters, and mutations of
 * valid encodings (lengths 0..40). */
static void b64_same(const char *in, size_t max)
{
	uint8_t *a = NULL, *b = NULL;
	size_t na = 0, nb = 0;
	sl_err ra = sl_b64_decode(in, max, &a, &na, "x");
	sl_err rb = sl_b64_decode_public(in, max, &b, &nb, "x");
	if (ra != rb)
		fail_msg("'%s': sodium %d, public %d", in, (int)ra, (int)rb);
	if (ra == SL_OK) {
		assert_int_equal(na, nb);
		assert_memory_equal(a, b, na);
	}
	free(a);
	free(b);
}

static void test_b64_public_matches(void **state)
{
	(void)state;
	static const char *const fixed[] = {
	    "",         "=",        "==",       "A",        "AA",          "AA=",
	    "AA==",     "AA===",    "AAA",      "AAA=",     "AAA==",       "AAAA",
	    "AAAA=",    "AB==",     "AAB=",     "Zm8=",     "Zm9=",        "Zm9v",
	    "Zm9vYg==", "Zm9vYh==", "Zm9vYmE=", "Zm9vYmF=", "Zm9v YmFy",   "Zm9v\nYmFy",
	    "Zm=8",     "=Zm8",     "-_-_",     "+/+/",     "Zm9vYmFy\x01"};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		b64_same(fixed[i], 64);
	b64_same("Zm9vYmFy", 5);
	b64_same("Zm9vYmFy", 6);
	b64_same("Zm9vYg==", 0);
	/* bytes above 0x7f: libsodium's decoder reads them as signed char and
	 * takes some for alphabet characters; the public one refuses them all */
	uint8_t *d = NULL;
	size_t dn = 0;
	char hi[] = "Zm9vYmE=";
	for (int c = 0x80; c <= 0xff; c++) {
		hi[3] = (char)c;
		assert_int_equal(sl_b64_decode_public(hi, 64, &d, &dn, "x"), SL_E_FORMAT);
	}

	static const char set[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/==== -_\n\x7f";
	uint8_t raw[32];
	char buf[64];
	for (int round = 0; round < 20000; round++) {
		size_t n = randombytes_uniform(41);
		if (round % 2 == 0) {
			for (size_t i = 0; i < n; i++)
				buf[i] = set[randombytes_uniform(sizeof(set) - 1)];
			buf[n] = '\0';
		} else {
			char *e = NULL;
			size_t rl = randombytes_uniform(sizeof(raw) - 2);
			randombytes_buf(raw, rl);
			assert_int_equal(sl_b64_encode(raw, rl, &e), SL_OK);
			snprintf(buf, sizeof(buf), "%s", e);
			free(e);
			size_t bl = strlen(buf);
			if (bl > 0 && round % 4 == 1)
				buf[randombytes_uniform((uint32_t)bl)] =
				    set[randombytes_uniform(sizeof(set) - 1)];
			else if (bl > 0)
				buf[randombytes_uniform((uint32_t)bl)] = '\0';
		}
		b64_same(buf, 64);
	}
}

static void test_time_and_hash(void **state)
{
	(void)state;
	char buf[32];
	time_t t;
	sl_time_rfc3339(0, buf, sizeof(buf));
	assert_string_equal(buf, "1970-01-01T00:00:00Z");
	assert_int_equal(sl_time_parse_rfc3339("2025-06-01T00:00:00Z", &t, "--at"), SL_OK);
	assert_true(t == 1748736000);
	assert_int_equal(sl_time_parse_rfc3339("2025-06-01T00:00:00.123Z", &t, "--at"), SL_OK);
	assert_int_equal(sl_time_parse_rfc3339("2025-06-01", &t, "--at"), SL_E_INPUT);
	assert_int_equal(sl_time_parse_rfc3339("2025-06-01T00:00:00+02:00", &t, "--at"),
	                 SL_E_INPUT);
	/* SHA-256("abc") */
	uint8_t h[32];
	char hx[65];
	sl_sha256("abc", 3, h);
	sl_hex_encode(h, 32, hx);
	assert_string_equal(hx, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	/* the binding changes with each input */
	uint8_t nonce[32] = {0}, pub[32] = {0}, pd[32] = {0}, b1[32], b2[32];
	sl_binding_compute(nonce, pub, pd, b1);
	pub[0] = 1;
	sl_binding_compute(nonce, pub, pd, b2);
	assert_false(sl_ct_eq(b1, b2, 32));
	pub[0] = 0;
	pd[31] = 1;
	sl_binding_compute(nonce, pub, pd, b2);
	assert_false(sl_ct_eq(b1, b2, 32));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_error_exit_codes),
	    cmocka_unit_test(test_error_detail_and_wrap),
	    cmocka_unit_test(test_reader_ints),
	    cmocka_unit_test(test_reader_bounds),
	    cmocka_unit_test(test_writer),
	    cmocka_unit_test(test_secret),
	    cmocka_unit_test(test_secret_read_file),
	    cmocka_unit_test(test_client_token_owner),
	    cmocka_unit_test(test_file_read_write),
	    cmocka_unit_test(test_encodings),
	    cmocka_unit_test(test_b64_public_matches),
	    cmocka_unit_test(test_time_and_hash),
	};
	return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
