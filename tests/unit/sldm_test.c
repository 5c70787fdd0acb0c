/* SLDM v1 manifest: a dataset of real SLD shards built and read back, the
 * root, re-keying, every byte of the authenticated part flipped, wrong key,
 * truncation, shards swapped / from another dataset, and the path rule. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "seclaunch/crypto.h"
#include "seclaunch/sld.h"
#include "seclaunch/sldm.h"
#include "seclaunch/util.h"

#include "sld_fixture.h"

#define N_SHARDS 3

struct dataset {
	sl_secret *dek;
	sl_sld_header *hdr[N_SHARDS];
	size_t size[N_SHARDS];
	uint8_t *manifest;
	size_t manifest_len;
};

/* Three shards of 100, 0 and 70000 bytes holding files a.txt, dir/b.bin
 * (both in shard 0), empty (shard 1), dir/sub/c (shard 2). */
static void make_dataset(struct dataset *d, const char *id)
{
	static const size_t lens[N_SHARDS] = {100, 0, 70000};
	sl_sldm_builder *b = NULL;
	sl_sld_encrypt_params p = {.dataset_id = id, .chunk_size = CS};

	memset(d, 0, sizeof(*d));
	d->dek = new_dek();
	assert_int_equal(sl_sldm_builder_new(id, SL_AEAD_NONE, CS, 7, &b), SL_OK);
	for (int i = 0; i < N_SHARDS; i++) {
		uint8_t *plain = random_bytes(lens[i]);
		int fd = encrypt_to_fd(d->dek, plain, lens[i], &p);
		char name[32];
		uint8_t *bytes = fd_bytes(fd, &d->size[i]);
		assert_int_equal(sl_sld_header_parse(bytes, d->size[i], &d->hdr[i]), SL_OK);
		free(bytes);
		snprintf(name, sizeof(name), "shard-%05d.sld", i);
		assert_int_equal(sl_sldm_builder_add_shard(b, name, d->hdr[i], d->size[i]), SL_OK);
		close(fd);
		free(plain);
	}
	assert_int_equal(sl_sldm_builder_add_file(b, "a.txt", 0644, 60, 0, 0), SL_OK);
	assert_int_equal(sl_sldm_builder_add_file(b, "dir/b.bin", 0600, 40, 0, 60), SL_OK);
	assert_int_equal(sl_sldm_builder_add_file(b, "empty", 0640, 0, 1, 0), SL_OK);
	assert_int_equal(sl_sldm_builder_add_file(b, "dir/sub/c", 0755, 70000, 2, 0), SL_OK);
	const uint8_t wrapped[] = {9, 8, 7, 6, 5, 4, 3, 2, 1};
	assert_int_equal(sl_sldm_builder_finish(b, d->dek, "https://kms.example:8443", "team/k1",
	                                        wrapped, sizeof(wrapped), &d->manifest,
	                                        &d->manifest_len),
	                 SL_OK);
	sl_sldm_builder_free(b);
}

static void free_dataset(struct dataset *d)
{
	sl_secret_free(d->dek);
	for (int i = 0; i < N_SHARDS; i++)
		sl_sld_header_free(d->hdr[i]);
	free(d->manifest);
}

static void test_round_trip(void **state)
{
	(void)state;
	struct dataset d;
	sl_sldm *m = NULL;
	size_t wl = 0;

	make_dataset(&d, "imaging-eu");
	assert_int_equal(sl_sldm_parse(d.manifest, d.manifest_len, &m), SL_OK);
	assert_int_equal(sl_sldm_authenticate(m, d.dek), SL_OK);
	assert_string_equal(sl_sldm_dataset_id(m), "imaging-eu");
	assert_string_equal(sl_sldm_kms_url(m), "https://kms.example:8443");
	assert_string_equal(sl_sldm_key_id(m), "team/k1");
	assert_int_equal(sl_sldm_wrapped_dek(m, &wl)[0], 9);
	assert_int_equal(wl, 9);
	assert_int_equal(sl_sldm_sequence(m), 7);
	assert_int_equal(sl_sldm_chunk_size(m), CS);
	assert_int_equal(sl_sldm_aead(m), SL_AEAD_AES_256_GCM);
	assert_int_equal(sl_sldm_shard_count(m), N_SHARDS);
	assert_int_equal(sl_sldm_file_count(m), 4);
	assert_int_equal(sl_sldm_plaintext_len(m), 70100);
	sl_sldm_file f = sl_sldm_file_at(m, 3);
	assert_string_equal(f.path, "dir/sub/c");
	assert_int_equal(f.mode, 0755);
	assert_int_equal(f.size, 70000);
	assert_int_equal(f.shard, 2);
	sl_sldm_shard s = sl_sldm_shard_at(m, 1);
	assert_string_equal(s.name, "shard-00001.sld");
	assert_int_equal(s.plaintext_len, 0);
	uint32_t idx = 99;
	assert_int_equal(sl_sldm_find_file(m, "dir/b.bin", &idx), SL_OK);
	assert_int_equal(idx, 1);
	assert_int_equal(sl_sldm_find_file(m, "nope", &idx), SL_E_INPUT);
	for (uint32_t i = 0; i < N_SHARDS; i++)
		assert_int_equal(sl_sldm_check_shard(m, i, d.hdr[i], d.size[i]), SL_OK);

	/* the root is the SHA-256 of everything up to and including the MAC */
	uint8_t root[32], want[32];
	sl_sldm_root(m, root);
	size_t auth = d.manifest_len - (2 + 24 + 1 + 7 + 2 + 9);
	sl_sha256(d.manifest, auth, want);
	assert_memory_equal(root, want, 32);

	json_t *j = sl_sldm_json(m);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "dataset_id")), "imaging-eu");
	assert_int_equal(json_array_size(json_object_get(j, "files")), 4);
	json_decref(j);
	sl_sldm_free(m);
	free_dataset(&d);
}

/* A new key reference keeps the authenticated bytes and the root. */
static void test_rekey(void **state)
{
	(void)state;
	struct dataset d;
	sl_sldm *m = NULL, *m2 = NULL;
	uint8_t *out = NULL, r1[32], r2[32];
	size_t out_len = 0;
	const uint8_t w2[] = {1, 1, 2, 3, 5, 8, 13};

	make_dataset(&d, "ds");
	assert_int_equal(sl_sldm_parse(d.manifest, d.manifest_len, &m), SL_OK);
	assert_int_equal(
	    sl_sldm_rekey(m, "https://kms2.example", "team/k1@v2", w2, sizeof(w2), &out, &out_len),
	    SL_OK);
	assert_int_equal(sl_sldm_parse(out, out_len, &m2), SL_OK);
	assert_int_equal(sl_sldm_authenticate(m2, d.dek), SL_OK);
	assert_string_equal(sl_sldm_kms_url(m2), "https://kms2.example");
	sl_sldm_root(m, r1);
	sl_sldm_root(m2, r2);
	assert_memory_equal(r1, r2, 32);
	/* half a key reference is refused */
	free(out);
	out = NULL;
	assert_int_equal(sl_sldm_rekey(m, "https://kms2.example", NULL, NULL, 0, &out, &out_len),
	                 SL_E_INPUT);
	assert_null(out);
	/* to a local key: no reference at all */
	assert_int_equal(sl_sldm_rekey(m, NULL, NULL, NULL, 0, &out, &out_len), SL_OK);
	free(out);
	sl_sldm_free(m);
	sl_sldm_free(m2);
	free_dataset(&d);
}

/* Every byte of the authenticated part flipped: parse or authenticate
 * refuses (never both succeed). Key-reference bytes are outside the MAC:
 * a flip there either fails the parse or changes only the reference. */
static void test_every_byte_flipped(void **state)
{
	(void)state;
	struct dataset d;
	sl_sldm *m = NULL;
	uint8_t root[32];

	make_dataset(&d, "flip");
	assert_int_equal(sl_sldm_parse(d.manifest, d.manifest_len, &m), SL_OK);
	sl_sldm_root(m, root);
	sl_sldm_free(m);
	size_t auth = d.manifest_len - (2 + 24 + 1 + 7 + 2 + 9);
	for (size_t i = 0; i < d.manifest_len; i++) {
		uint8_t *c = malloc(d.manifest_len);
		memcpy(c, d.manifest, d.manifest_len);
		c[i] ^= 0x01;
		m = NULL;
		sl_err rc = sl_sldm_parse(c, d.manifest_len, &m);
		if (rc == SL_OK) {
			sl_err ar = sl_sldm_authenticate(m, d.dek);
			if (i < auth) {
				if (ar == SL_OK)
					fail_msg("byte %zu flipped: manifest still authenticates",
					         i);
				assert_true(ar == SL_E_INTEGRITY || ar == SL_E_WRONG_KEY);
			} else {
				uint8_t r2[32];
				sl_sldm_root(m, r2);
				assert_memory_equal(root, r2, 32);
			}
		} else {
			assert_true(rc == SL_E_INTEGRITY || rc == SL_E_FORMAT ||
			            rc == SL_E_VERSION || rc == SL_E_TRUNCATED ||
			            rc == SL_E_TOO_LARGE);
			assert_null(m);
		}
		sl_sldm_free(m);
		free(c);
	}
	free_dataset(&d);
}

static void test_truncated_and_extended(void **state)
{
	(void)state;
	struct dataset d;
	sl_sldm *m = NULL;

	make_dataset(&d, "trunc");
	for (size_t n = 0; n < d.manifest_len; n++) {
		sl_err rc = sl_sldm_parse(d.manifest, n, &m);
		assert_int_not_equal(rc, SL_OK);
		assert_null(m);
	}
	uint8_t *c = malloc(d.manifest_len + 1);
	memcpy(c, d.manifest, d.manifest_len);
	c[d.manifest_len] = 0;
	assert_int_equal(sl_sldm_parse(c, d.manifest_len + 1, &m), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "trailing"));
	/* not a manifest at all: an SLD file's first bytes */
	uint8_t sld_magic[] = {0x89, 'S', 'L', 'D', '\r', '\n', 0x1a, '\n', 0, 1};
	assert_int_equal(sl_sldm_parse(sld_magic, sizeof(sld_magic), &m), SL_E_FORMAT);
	/* a later version */
	memcpy(c, d.manifest, d.manifest_len);
	c[9] = 2;
	assert_int_equal(sl_sldm_parse(c, d.manifest_len, &m), SL_E_VERSION);
	free(c);
	free_dataset(&d);
}

static void test_wrong_key(void **state)
{
	(void)state;
	struct dataset d;
	sl_sldm *m = NULL;
	sl_secret *other = new_dek();

	make_dataset(&d, "wk");
	assert_int_equal(sl_sldm_parse(d.manifest, d.manifest_len, &m), SL_OK);
	assert_int_equal(sl_sldm_authenticate(m, other), SL_E_WRONG_KEY);
	assert_non_null(strstr(sl_err_detail(), "key_check"));
	sl_sldm_free(m);
	sl_secret_free(other);
	free_dataset(&d);
}

/* Shards swapped between positions, from another dataset, of another size. */
static void test_shard_checks(void **state)
{
	(void)state;
	struct dataset d, e;
	sl_sldm *m = NULL;

	make_dataset(&d, "same-id");
	make_dataset(&e, "same-id");
	assert_int_equal(sl_sldm_parse(d.manifest, d.manifest_len, &m), SL_OK);
	assert_int_equal(sl_sldm_check_shard(m, 0, d.hdr[2], d.size[2]), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "shard 0 (shard-00000.sld)"));
	/* another dataset with the same id and sizes: the header digest differs */
	assert_int_equal(sl_sldm_check_shard(m, 2, e.hdr[2], e.size[2]), SL_E_INTEGRITY);
	assert_non_null(strstr(sl_err_detail(), "shard 2"));
	/* the right header, a file of another size (extended / truncated) */
	assert_int_equal(sl_sldm_check_shard(m, 1, d.hdr[1], d.size[1] + 1), SL_E_INTEGRITY);
	assert_int_equal(sl_sldm_check_shard(m, 3, d.hdr[1], d.size[1]), SL_E_INTEGRITY);
	sl_sldm_free(m);
	free_dataset(&d);
	free_dataset(&e);
}

static void test_path_rule(void **state)
{
	(void)state;
	const char *good[] = {"a", "a/b", "données/x.npy", "a..b", ".hidden", "x/.y/z", "a b"};
	const char *bad[] = {"",    "/etc/passwd", "../x", "a/../b", "a//b",  "a/",       "./a",
	                     "a/.", "..",          ".",    "a\tb",   "a\x7f", "\xc0\xaf", "\xff"};
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		assert_int_equal(sl_sldm_path_check(good[i]), SL_OK);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		if (sl_sldm_path_check(bad[i]) != SL_E_INPUT)
			fail_msg("path \"%s\" accepted", bad[i]);
		assert_non_null(strstr(sl_err_detail(), "path"));
	}
	char *longp = malloc(SL_SLDM_PATH_MAX + 2);
	memset(longp, 'a', SL_SLDM_PATH_MAX + 1);
	longp[SL_SLDM_PATH_MAX + 1] = '\0';
	assert_int_equal(sl_sldm_path_check(longp), SL_E_INPUT);
	longp[SL_SLDM_PATH_MAX] = '\0';
	assert_int_equal(sl_sldm_path_check(longp), SL_OK);
	free(longp);
}

/* Builds a one-shard manifest with the given files; returns finish's code. */
static sl_err build_with(const char *const *paths, const uint64_t *offs, const uint64_t *sizes,
                         size_t n)
{
	sl_secret *dek = new_dek();
	sl_sldm_builder *b = NULL;
	sl_sld_header *h = NULL;
	sl_sld_encrypt_params p = {.dataset_id = "files", .chunk_size = CS};
	uint8_t plain[100] = {0}, *out = NULL;
	size_t out_len = 0;
	int fd = encrypt_to_fd(dek, plain, sizeof(plain), &p);

	assert_int_equal(sl_sld_header_read_fd(fd, "s", &h), SL_OK);
	assert_int_equal(sl_sldm_builder_new("files", SL_AEAD_NONE, CS, 0, &b), SL_OK);
	assert_int_equal(sl_sldm_builder_add_shard(b, "s0.sld", h, fd_size(fd)), SL_OK);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(sl_sldm_builder_add_file(b, paths[i], 0644, sizes[i], 0, offs[i]),
		                 SL_OK);
	sl_err rc = sl_sldm_builder_finish(b, dek, NULL, NULL, NULL, 0, &out, &out_len);
	if (rc != SL_OK)
		assert_null(out);
	free(out);
	sl_sldm_builder_free(b);
	sl_sld_header_free(h);
	sl_secret_free(dek);
	close(fd);
	return rc;
}

static void test_file_table_rules(void **state)
{
	(void)state;
	const char *dup[] = {"x", "y", "x"};
	const char *dirfile[] = {"a", "a/b"};
	const char *ok[] = {"a/b", "a.b", "a/c"};
	const uint64_t offs3[] = {0, 10, 20}, sizes3[] = {10, 10, 10};
	const uint64_t offs2[] = {0, 10}, sizes2[] = {10, 10};
	const uint64_t past[] = {95}, psz[] = {10};
	const uint64_t overlap_o[] = {0, 5}, overlap_s[] = {10, 10};

	assert_int_equal(build_with(ok, offs3, sizes3, 3), SL_OK);
	assert_int_equal(build_with(dup, offs3, sizes3, 3), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "appears twice"));
	assert_int_equal(build_with(dirfile, offs2, sizes2, 2), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "also the directory"));
	assert_int_equal(build_with(ok, past, psz, 1), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "past the end of the dataset"));
	assert_int_equal(build_with(ok, overlap_o, overlap_s, 2), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "previous file"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_rekey),
	    cmocka_unit_test(test_every_byte_flipped),
	    cmocka_unit_test(test_truncated_and_extended),
	    cmocka_unit_test(test_wrong_key),
	    cmocka_unit_test(test_shard_checks),
	    cmocka_unit_test(test_path_rule),
	    cmocka_unit_test(test_file_table_rules),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
