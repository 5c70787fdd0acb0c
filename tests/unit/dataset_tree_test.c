/* Sharded datasets on disk: a tree (nested folders, empty files, a file
 * larger than a shard, modes) encrypted and restored byte for byte; a
 * folder of .tar files one per shard; and the refusals: a shard swapped,
 * missing, from another dataset, truncated; an edited manifest; a wrong
 * key; path collisions. Nothing appears at the target after a failure. */
#include <dirent.h>
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

#include "../../launcher/dataset/dataset_tree.h"
#include "../../launcher/stage/stream.h"
#include "seclaunch/secret.h"
#include "seclaunch/stage.h"
#include "seclaunch/util.h"
#include "testlib.h"

static char base[256];

static int setup(void **state)
{
	(void)state;
	if (sl_crypto_init() != SL_OK)
		return -1;
	snprintf(base, sizeof(base), "/tmp/sl-tree-test-XXXXXX");
	return mkdtemp(base) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) == 0 ? 0 : -1;
}

static void put(const char *rel, size_t n, mode_t mode, uint8_t seed)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	uint8_t *b = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(seed + i * 31 + (i >> 8));
	assert_int_equal(sl_write_all(fd, b, n, p), SL_OK);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
	free(b);
}

static void mkd(const char *rel)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static sl_secret *dek(void)
{
	sl_secret *k = NULL;
	assert_int_equal(sl_secret_random(SL_SLD_DEK_LEN, &k), SL_OK);
	return k;
}

static sl_err enc(sl_secret *k, const char *in_rel, const char *out_rel, const char *id,
                  uint64_t shard, sl_tree_stats *st)
{
	char in[512], out[512];
	snprintf(in, sizeof(in), "%s/%s", base, in_rel);
	snprintf(out, sizeof(out), "%s/%s", base, out_rel);
	const char *paths[] = {in};
	sl_tree_encrypt_opts o = {.paths = paths,
	                          .n_paths = 1,
	                          .out_dir = out,
	                          .quiet = true,
	                          .shard_size = shard,
	                          .p = {.dataset_id = id, .chunk_size = 64 << 10, .threads = 2}};
	return sl_tree_encrypt(k, &o, st);
}

static sl_err dec(sl_secret *k, const char *ds_rel, const char *out_rel, sl_tree_stats *st)
{
	char ds[512], out[512];
	sl_sldm *m = NULL;
	snprintf(ds, sizeof(ds), "%s/%s", base, ds_rel);
	snprintf(out, sizeof(out), "%s/%s", base, out_rel);
	sl_err rc = sl_tree_manifest(ds, NULL, &m);
	if (rc == SL_OK)
		rc = sl_tree_decrypt(ds, NULL, m, k, out, false, 2, st);
	sl_sldm_free(m);
	return rc;
}

static bool exists(const char *rel)
{
	char p[512];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	return lstat(p, &st) == 0;
}

/* No temporary folder left beside the targets. */
static void assert_no_partials(void)
{
	DIR *d = opendir(base);
	struct dirent *de;
	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		if (strstr(de->d_name, ".partial-") != NULL || strstr(de->d_name, ".old-") != NULL)
			fail_msg("left behind: %s", de->d_name);
	}
	closedir(d);
}

static int run(const char *cmd)
{
	char c[2048];
	snprintf(c, sizeof(c), "cd '%s' && %s", base, cmd);
	return system(c);
}

static void test_tree_round_trip(void **state)
{
	(void)state;
	sl_secret *k = dek();
	sl_tree_stats st;

	mkd("src");
	mkd("src/img");
	mkd("src/img/cats");
	mkd("src/empty-dir");
	put("src/a.csv", 1000, 0640, 1);
	put("src/img/cats/001.jpg", 70000, 0600, 2);
	put("src/img/cats/002.jpg", 0, 0644, 3);
	put("src/img/big.bin", 300000, 0755, 4); /* > 2 shards of 128 KiB */
	put("src/z", 5, 0444, 5);
	char ln[512];
	snprintf(ln, sizeof(ln), "%s/src/link", base);
	assert_int_equal(symlink("a.csv", ln), 0);

	assert_int_equal(enc(k, "src", "ds", "tree-1", 128 << 10, &st), SL_OK);
	assert_int_equal(st.files, 5); /* the link is skipped, said on stderr */
	assert_int_equal(st.skipped, 1);
	assert_int_equal(st.bytes, 1000 + 70000 + 300000 + 5);
	assert_true(st.shards >= 3);
	assert_true(exists("ds/manifest.sldm"));
	assert_true(exists("ds/shard-00000.sld"));
	assert_no_partials();

	sl_tree_stats st2;
	assert_int_equal(dec(k, "ds", "out", &st2), SL_OK);
	assert_memory_equal(st.root, st2.root, 32);
	assert_int_equal(run("diff -r src out 2>&1 | grep -v '^Only in src: link$' | "
	                     "grep -v '^Only in src: empty-dir$' | grep -q . && exit 1 || exit 0"),
	                 0);
	struct stat s;
	char p[512];
	snprintf(p, sizeof(p), "%s/out/img/big.bin", base);
	assert_int_equal(stat(p, &s), 0);
	assert_int_equal(s.st_mode & 0777, 0755);
	snprintf(p, sizeof(p), "%s/out/z", base);
	assert_int_equal(stat(p, &s), 0);
	assert_int_equal(s.st_mode & 0777, 0444);
	snprintf(p, sizeof(p), "%s/out/img/cats/002.jpg", base);
	assert_int_equal(stat(p, &s), 0);
	assert_int_equal(s.st_size, 0);

	/* same tree again: deterministic file table (same paths, order, shards) */
	sl_tree_stats st3;
	assert_int_equal(enc(k, "src", "ds-again", "tree-1", 128 << 10, &st3), SL_OK);
	assert_int_equal(st3.shards, st.shards);
	assert_int_equal(run("cmp -s ds/shard-00000.sld ds-again/shard-00000.sld"), 256);

	/* targets are never overwritten without force */
	assert_int_equal(enc(k, "src", "ds", "tree-1", 0, &st3), SL_E_EXISTS);
	assert_int_equal(dec(k, "ds", "out", &st2), SL_E_EXISTS);
	assert_no_partials();
	sl_secret_free(k);
}

static void expect_dec_fails(sl_secret *k, const char *ds, sl_err code, const char *needle)
{
	sl_tree_stats st;
	sl_err rc = dec(k, ds, "restored", &st);
	if (rc != code)
		fail_msg("%s: got %s (%s), want %s", ds, sl_err_name(rc), sl_err_detail(),
		         sl_err_name(code));
	if (needle != NULL && strstr(sl_err_detail(), needle) == NULL)
		fail_msg("%s: message \"%s\" does not name \"%s\"", ds, sl_err_detail(), needle);
	assert_false(exists("restored"));
	assert_no_partials();
}

static void test_tampering(void **state)
{
	(void)state;
	sl_secret *k = dek(), *k2 = dek();
	sl_tree_stats st;

	mkd("t");
	put("t/one", 100000, 0644, 9);
	put("t/two", 100000, 0644, 8);
	put("t/three", 100000, 0644, 7);
	assert_int_equal(enc(k, "t", "good", "tamper", 64 << 10, &st), SL_OK);
	assert_true(st.shards >= 3);
	/* another dataset with the same id and key, same sizes */
	put("t/one", 100000, 0644, 42);
	assert_int_equal(enc(k, "t", "other", "tamper", 64 << 10, &st), SL_OK);

	assert_int_equal(run("cp -a good swap && mv swap/shard-00000.sld x && "
	                     "mv swap/shard-00001.sld swap/shard-00000.sld && "
	                     "mv x swap/shard-00001.sld"),
	                 0);
	expect_dec_fails(k, "swap", SL_E_INTEGRITY, "shard 0 (shard-00000.sld)");
	assert_int_equal(run("cp -a good missing && rm missing/shard-00002.sld"), 0);
	expect_dec_fails(k, "missing", SL_E_TRUNCATED, "shard 2 (shard-00002.sld)");
	assert_int_equal(run("cp -a good foreign && cp other/shard-00000.sld foreign/"), 0);
	expect_dec_fails(k, "foreign", SL_E_INTEGRITY, "shard 0");
	assert_int_equal(run("cp -a good trunc && truncate -s -1 trunc/shard-00001.sld"), 0);
	expect_dec_fails(k, "trunc", SL_E_INTEGRITY, "shard 1");
	assert_int_equal(run("cp -a good flip"), 0);
	{
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/flip/shard-00001.sld", base);
		tl_flip_byte(p, 5000, 0x01);
	}
	expect_dec_fails(k, "flip", SL_E_INTEGRITY, "chunk");
	/* a manifest byte in the body (a file size) */
	assert_int_equal(run("cp -a good edited && printf 'Z' | dd of=edited/manifest.sldm "
	                     "bs=1 seek=60 conv=notrunc status=none"),
	                 0);
	{
		sl_tree_stats s2;
		sl_err rc = dec(k, "edited", "restored", &s2);
		assert_true(rc == SL_E_INTEGRITY || rc == SL_E_WRONG_KEY);
		assert_false(exists("restored"));
	}
	/* an older manifest presented with newer shards */
	assert_int_equal(run("cp -a good mixed && cp other/manifest.sldm mixed/"), 0);
	expect_dec_fails(k, "mixed", SL_E_INTEGRITY, "shard 0");
	/* an extra file in the folder is never read: still fine */
	assert_int_equal(run("cp -a good extra && cp other/shard-00000.sld extra/shard-09999.sld"),
	                 0);
	assert_int_equal(dec(k, "extra", "restored-extra", &st), SL_OK);
	expect_dec_fails(k2, "good", SL_E_WRONG_KEY, "key_check");
	sl_secret_free(k);
	sl_secret_free(k2);
}

static void test_tar_shards_and_collisions(void **state)
{
	(void)state;
	sl_secret *k = dek();
	sl_tree_stats st;
	char a[512], b[512], out[512];

	mkd("wds");
	put("wds/train-000.tar", 10240, 0644, 1);
	put("wds/train-001.tar", 20480, 0644, 2);
	put("wds/train-002.tar", 10240, 0644, 3);
	assert_int_equal(enc(k, "wds", "wds-ds", "wds", 0, &st), SL_OK);
	assert_int_equal(st.shards, 3);
	sl_sldm *m = NULL;
	snprintf(a, sizeof(a), "%s/wds-ds", base);
	assert_int_equal(sl_tree_manifest(a, NULL, &m), SL_OK);
	for (uint32_t i = 0; i < 3; i++) {
		assert_int_equal(sl_sldm_file_at(m, i).shard, i);
		assert_int_equal(sl_sldm_file_at(m, i).offset, 0);
	}
	sl_sldm_free(m);

	/* two inputs that would be the same dataset path */
	mkd("c1");
	mkd("c2");
	put("c1/same", 1, 0644, 1);
	put("c2/same", 1, 0644, 1);
	snprintf(a, sizeof(a), "%s/c1", base);
	snprintf(b, sizeof(b), "%s/c2", base);
	snprintf(out, sizeof(out), "%s/coll", base);
	const char *paths[] = {a, b};
	sl_tree_encrypt_opts o = {
	    .paths = paths, .n_paths = 2, .out_dir = out, .quiet = true, .p = {.dataset_id = "c"}};
	assert_int_equal(sl_tree_encrypt(k, &o, &st), SL_E_INPUT);
	assert_non_null(strstr(sl_err_detail(), "\"same\""));
	assert_false(exists("coll"));
	/* '-' with another input */
	const char *mixed[] = {"-", a};
	o.paths = mixed;
	assert_int_equal(sl_tree_encrypt(k, &o, &st), SL_E_USAGE);
	assert_no_partials();
	sl_secret_free(k);
}

/* A file that changes size while the tree is encrypted fails the run,
 * whether it changes before a worker opens it (a later shard group) or
 * after its bytes were read; nothing appears at the target. */
struct grow {
	const char *path;
	uint64_t at_done; /* grow once done reaches this (UINT64_MAX: at the end) */
	bool grown;
};

static void grow_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct grow *g = ctx;
	if (g->grown || done < (g->at_done == UINT64_MAX ? total : g->at_done))
		return;
	int fd = open(g->path, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "more", 4), 4);
	close(fd);
	g->grown = true;
}

static void test_changed_while_encrypting(void **state)
{
	(void)state;
	sl_secret *k = dek();
	sl_tree_stats st;
	char in[512], out[512], victim[512];
	uint64_t when[2] = {1, UINT64_MAX};
	const char *file[2] = {"grow/f19", "grow/f00"};

	mkd("grow");
	for (int i = 0; i < 20; i++) {
		char rel[64];
		snprintf(rel, sizeof(rel), "grow/f%02d", i);
		put(rel, 64 << 10, 0644, (uint8_t)i); /* one shard each: 3 groups of 8 */
	}
	for (int c = 0; c < 2; c++) {
		snprintf(in, sizeof(in), "%s/grow", base);
		snprintf(out, sizeof(out), "%s/grown-%d", base, c);
		snprintf(victim, sizeof(victim), "%s/%s", base, file[c]);
		struct grow g = {.path = victim, .at_done = when[c]};
		const char *paths[] = {in};
		sl_tree_encrypt_opts o = {.paths = paths,
		                          .n_paths = 1,
		                          .out_dir = out,
		                          .quiet = true,
		                          .shard_size = 64 << 10,
		                          .p = {.dataset_id = "grow",
		                                .chunk_size = 64 << 10,
		                                .threads = 2,
		                                .progress = grow_progress,
		                                .progress_ctx = &g}};
		sl_err rc = sl_tree_encrypt(k, &o, &st);
		assert_true(g.grown);
		if (rc != SL_E_IO || strstr(sl_err_detail(), "changed size") == NULL ||
		    strstr(sl_err_detail(), file[c]) == NULL)
			fail_msg("case %d: got %s (%s)", c, sl_err_name(rc), sl_err_detail());
		assert_false(exists(c == 0 ? "grown-0" : "grown-1"));
		assert_no_partials();
	}
	sl_secret_free(k);
}

/* Stream staging's linger: a shard every reader released stays staged
 * (taken back without decrypting it again) until the linger ends or its
 * room is needed; a lingering shard nobody took back gives way to staging
 * ahead, one taken back does not; a reader's demand evicts either; linger 0
 * wipes at once. */
static sl_stream_stats stats_of(sl_stream *s)
{
	sl_stream_stats st;
	sl_stream_stats_get(s, &st);
	return st;
}

/* Polls until shard i is served (SL_OK, not_ready 0), at most 10 s. */
static void acquire_ready(sl_stream *s, uint32_t i)
{
	int fd = -1, nr = 1;
	uint64_t len = 0;
	for (int k = 0; k < 1000 && nr; k++) {
		assert_int_equal(sl_stream_acquire(s, i, &fd, &len, &nr), SL_OK);
		if (nr)
			usleep(10000);
	}
	assert_int_equal(nr, 0);
	assert_true(fd >= 0 && len > 0);
}

#define WAIT_UNTIL(cond)                                                                           \
	do {                                                                                       \
		for (int k_ = 0; k_ < 1000 && !(cond); k_++)                                       \
			usleep(10000);                                                             \
		assert_true(cond);                                                                 \
	} while (0)

static void test_stream_linger(void **state)
{
	(void)state;
	sl_secret *k = dek();
	sl_tree_stats ts;
	sl_sldm *m = NULL;
	sl_stream *s = NULL;
	char ds[512];
	int fd = -1, nr = 0;
	uint64_t len = 0;

	mkd("lg");
	put("lg/a", 100000, 0644, 1);
	put("lg/b", 100000, 0644, 2);
	put("lg/c", 100000, 0644, 3);
	assert_int_equal(enc(k, "lg", "lg-ds", "lg-1", 120000, &ts), SL_OK);
	snprintf(ds, sizeof(ds), "%s/lg-ds", base);
	assert_int_equal(sl_tree_manifest(ds, NULL, &m), SL_OK);
	assert_int_equal(sl_sldm_shard_count(m), 3);
	int dfd = open(ds, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);

	/* room for two shards; a long linger */
	assert_int_equal(sl_stream_new(dfd, ds, NULL, m, k, 250000, 60000, 2, &s), SL_OK);
	WAIT_UNTIL(stats_of(s).staged == 2);
	acquire_ready(s, 0);
	sl_stream_release(s, 0);
	assert_int_equal(stats_of(s).wiped, 0);
	/* taken back while it lingers: served at once, not decrypted again */
	assert_int_equal(sl_stream_acquire(s, 0, &fd, &len, &nr), SL_OK);
	assert_int_equal(nr, 0);
	assert_int_equal(stats_of(s).reused, 1);
	assert_int_equal(stats_of(s).staged, 2);
	sl_stream_release(s, 0);
	/* shard 1 released and never taken back gives way to staging shard 2
	 * ahead; shard 0, taken back before, keeps its place */
	acquire_ready(s, 1);
	sl_stream_release(s, 1);
	WAIT_UNTIL(stats_of(s).staged == 3);
	assert_int_equal(stats_of(s).wiped, 1);
	assert_int_equal(sl_stream_acquire(s, 0, &fd, &len, &nr), SL_OK);
	assert_int_equal(nr, 0);
	assert_int_equal(stats_of(s).reused, 2);
	sl_stream_release(s, 0);
	/* a reader's demand evicts a lingering shard whatever its history */
	acquire_ready(s, 1);
	assert_int_equal(stats_of(s).staged, 4);
	assert_true(stats_of(s).peak <= 250000);
	sl_stream_release(s, 1);
	assert_int_equal(sl_stream_wipe_all(s), SL_OK);
	sl_stream_free(s);

	/* the linger ends: the shard is wiped with nobody asking */
	assert_int_equal(sl_stream_new(dfd, ds, NULL, m, k, 1 << 20, 200, 2, &s), SL_OK);
	acquire_ready(s, 0);
	sl_stream_release(s, 0);
	WAIT_UNTIL(stats_of(s).wiped == 1);
	assert_int_equal(sl_stream_acquire(s, 0, &fd, &len, &nr), SL_OK);
	assert_int_equal(nr, 1); /* decrypted again */
	sl_stream_free(s);

	/* linger 0: wiped at the release */
	assert_int_equal(sl_stream_new(dfd, ds, NULL, m, k, 1 << 20, 0, 2, &s), SL_OK);
	acquire_ready(s, 0);
	sl_stream_release(s, 0);
	assert_int_equal(stats_of(s).wiped, 1);
	assert_int_equal(stats_of(s).reused, 0);
	sl_stream_free(s);

	close(dfd);
	sl_sldm_free(m);
	sl_secret_free(k);
}

/* Stream buffers: with a window of one shard, every shard is staged in the
 * same buffer (the same memory file, zeroed in place between shards, not
 * freed and faulted again), each read back exactly. A shard whose chunk was
 * altered fails the stream (integrity), and the buffer a reader still maps
 * from an earlier shard then holds zeros, no byte of the failed shard. */
static uint64_t shard_sum(int fd, uint64_t len, ino_t *ino)
{
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	*ino = st.st_ino;
	assert_true((uint64_t)st.st_size >= len);
	uint8_t *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	uint64_t sum = 0;
	for (uint64_t i = 0; i < len; i++)
		sum = sum * 31 + p[i];
	munmap(p, len);
	return sum;
}

/* A dataset of one file of `bytes` (seed `seed`) in shards of 100000
 * bytes, sealed into base/NAME-ds: its path in ds, its manifest in *m;
 * returns the folder's descriptor. */
static int one_file_ds(sl_secret *k, const char *name, size_t bytes, int seed, char *ds, size_t cap,
                       sl_sldm **m)
{
	sl_tree_stats ts;
	char src[64], id[64], out[64];
	snprintf(src, sizeof(src), "%s/a", name);
	snprintf(id, sizeof(id), "%s-1", name);
	snprintf(out, sizeof(out), "%s-ds", name);
	mkd(name);
	put(src, bytes, 0644, seed);
	assert_int_equal(enc(k, name, out, id, 100000, &ts), SL_OK);
	snprintf(ds, cap, "%s/%s", base, out);
	assert_int_equal(sl_tree_manifest(ds, NULL, m), SL_OK);
	int dfd = open(ds, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	return dfd;
}

/* A shard's bytes from base/ds/FILE, read whole into *len bytes. */
static uint8_t *slurp(const char *ds, const char *file, uint64_t *len)
{
	char p[1024];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", ds, file);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0 && fstat(fd, &st) == 0);
	uint8_t *b = malloc((size_t)st.st_size);
	assert_non_null(b);
	assert_int_equal(read(fd, b, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (uint64_t)st.st_size;
	return b;
}

static void expect_mem_check(const sl_sldm *m, uint32_t i, const uint8_t *p, uint64_t len,
                             sl_err code, const char *needle)
{
	sl_err rc = sl_tree_check_shard_mem(m, i, "https://store/ds/x.sld", p, len);
	if (rc != code)
		fail_msg("shard %u: got %s (%s), want %s", i, sl_err_name(rc),
		         rc != SL_OK ? sl_err_detail() : "", sl_err_name(code));
	if (needle != NULL && strstr(sl_err_detail(), needle) == NULL)
		fail_msg("shard %u: message \"%s\" does not name \"%s\"", i, sl_err_detail(),
		         needle);
}

/* The header check of a shard fetched into memory (the stream's remote
 * shards): the same refusals as a shard opened from the folder. */
static void test_check_shard_mem(void **state)
{
	(void)state;
	sl_secret *k = dek();
	sl_sldm *m = NULL;
	char ds[512];
	uint64_t l0 = 0, l1 = 0;

	int dfd = one_file_ds(k, "cm", 300000, 3, ds, sizeof(ds), &m);
	uint8_t *s0 = slurp(ds, "shard-00000.sld", &l0), *s1 = slurp(ds, "shard-00001.sld", &l1);
	expect_mem_check(m, 0, s0, l0, SL_OK, NULL);
	expect_mem_check(m, 1, s1, l1, SL_OK, NULL);
	/* shard 1 presented as shard 0 */
	expect_mem_check(m, 0, s1, l1, SL_E_INTEGRITY, "shard 0");
	/* a byte less than the manifest says */
	expect_mem_check(m, 0, s0, l0 - 1, SL_E_INTEGRITY, "shard 0");
	/* shorter than a header */
	expect_mem_check(m, 0, s0, 10, SL_E_INTEGRITY, "shard 0 (shard-00000.sld)");
	/* a garbled magic: the parse fails, named as the shard and the file */
	s0[0] ^= 0x01;
	expect_mem_check(m, 0, s0, l0, SL_E_INTEGRITY, "shard 0 (shard-00000.sld)");
	expect_mem_check(m, 0, s0, l0, SL_E_INTEGRITY, "https://store/ds/x.sld");
	s0[0] ^= 0x01;
	/* a header byte changed past the magic: the manifest's header digest */
	s0[40] ^= 0x01;
	expect_mem_check(m, 0, s0, l0, SL_E_INTEGRITY, "shard 0");
	free(s0);
	free(s1);
	close(dfd);
	sl_sldm_free(m);
	sl_secret_free(k);
}

static void test_stream_buffers_reused(void **state)
{
	(void)state;
	sl_secret *k = dek();
	sl_sldm *m = NULL;
	sl_stream *s = NULL;
	char ds[512], cmd[1200];
	int fd = -1, nr = 1;
	uint64_t len = 0, sums[4];
	ino_t ino0 = 0, ino = 0;

	int dfd = one_file_ds(k, "rb", 400000, 7, ds, sizeof(ds), &m);
	assert_true(sl_sldm_shard_count(m) >= 4);

	/* the same bytes as staged one by one, fresh each time (sl_stage_sld) */
	for (uint32_t i = 0; i < 4; i++) {
		int sfd = -1;
		char name[600];
		sl_stage *st = NULL;
		assert_int_equal(
		    sl_tree_open_shard_at(dfd, ds, NULL, m, i, &sfd, name, sizeof(name)), SL_OK);
		assert_int_equal(sl_stage_sld(sfd, name, k, NULL, 2, false, NULL, &st), SL_OK);
		sums[i] = shard_sum(sl_stage_fd(st), sl_stage_size(st), &ino);
		sl_stage_free(st);
		close(sfd);
	}

	/* a window of one shard: one buffer for all of them */
	assert_int_equal(sl_stream_new(dfd, ds, NULL, m, k, 100000, 0, 2, &s), SL_OK);
	for (uint32_t i = 0; i < 4; i++) {
		acquire_ready(s, i);
		assert_int_equal(sl_stream_acquire(s, i, &fd, &len, &nr), SL_OK);
		assert_int_equal(nr, 0);
		assert_true(sums[i] == shard_sum(fd, len, &ino));
		if (i == 0)
			ino0 = ino;
		assert_true(ino == ino0); /* the same memory file, refilled */
		sl_stream_release(s, i);
		sl_stream_release(s, i);
	}
	assert_int_equal(stats_of(s).wiped, 4);
	assert_true(stats_of(s).peak <= 100000);
	assert_int_equal(sl_stream_wipe_all(s), SL_OK);
	sl_stream_free(s);

	/* shard 2 altered: shards 0 and 1 are served, shard 2 fails the stream */
	snprintf(cmd, sizeof(cmd),
	         "cp -r '%s' '%s-t' && printf '\\001' | dd of='%s-t/shard-00002.sld' bs=1 "
	         "seek=$(($(stat -c %%s '%s-t/shard-00002.sld') - 30)) conv=notrunc status=none",
	         ds, ds, ds, ds);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s-t", ds);
	int tfd = open(cmd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(tfd >= 0);
	assert_int_equal(sl_stream_new(tfd, cmd, NULL, m, k, 100000, 0, 2, &s), SL_OK);
	acquire_ready(s, 0);
	sl_stream_release(s, 0);
	acquire_ready(s, 1);
	assert_int_equal(sl_stream_acquire(s, 1, &fd, &len, &nr), SL_OK);
	/* a reader that keeps its mapping of the buffer past its release */
	const uint8_t *stale = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(stale != MAP_FAILED);
	uint64_t stale_len = len;
	sl_stream_release(s, 1);
	sl_stream_release(s, 1);
	sl_err rc = SL_OK;
	for (int t = 0; t < 1000; t++) {
		rc = sl_stream_acquire(s, 2, &fd, &len, &nr);
		if (rc != SL_OK || !nr)
			break;
		usleep(10000);
	}
	assert_int_equal(rc, SL_E_INTEGRITY);
	for (uint64_t i = 0; i < stale_len; i++)
		if (stale[i] != 0)
			fail_msg(
			    "byte %llu of the reused buffer is not zero after the failed shard",
			    (unsigned long long)i);
	munmap((void *)stale, stale_len);
	sl_stream_free(s);
	close(tfd);

	close(dfd);
	sl_sldm_free(m);
	sl_secret_free(k);
}

/* A shard staged ahead that gave way to a reader's demand is not staged
 * ahead again into the room that reader leaves (only when a reader asks
 * for it): a shuffled reader would otherwise push the same shards out and
 * have them decrypted over and over. Window of three shards, linger 0:
 * 0, 1, 2 are staged ahead; the reader demands 5 (2 gives way), reads it
 * and releases it; staging ahead goes on with 3, not 2 again. */
static void test_stream_gave_way(void **state)
{
	(void)state;
	sl_secret *k = dek();
	sl_sldm *m = NULL;
	sl_stream *s = NULL;
	char ds[512];

	int dfd = one_file_ds(k, "gw", 600000, 9, ds, sizeof(ds), &m);
	assert_true(sl_sldm_shard_count(m) >= 6);
	assert_int_equal(sl_stream_new(dfd, ds, NULL, m, k, 300000, 0, 2, &s), SL_OK);
	WAIT_UNTIL(stats_of(s).staged == 3); /* 0, 1, 2: the window is full */
	usleep(100000);
	assert_int_equal(stats_of(s).staged, 3);
	acquire_ready(s, 5); /* 2, the farthest ahead, gives way */
	sl_stream_release(s, 5);
	WAIT_UNTIL(stats_of(s).staged == 5); /* 5, then one more staged ahead */
	usleep(100000);
	assert_int_equal(stats_of(s).staged, 5);
	assert_int_equal(stats_of(s).refetched, 0); /* 3, not 2 again */
	/* asked for, 2 is staged again */
	acquire_ready(s, 2);
	sl_stream_release(s, 2);
	assert_int_equal(stats_of(s).refetched, 1);
	assert_int_equal(sl_stream_wipe_all(s), SL_OK);
	sl_stream_free(s);
	close(dfd);
	sl_sldm_free(m);
	sl_secret_free(k);
}

/* ---- the per-shard callback (sealed outputs upload each shard as it is
 * done) ---------------------------------------------------------------- */

struct done_log {
	unsigned calls, fail_at;
	char names[16][32];
	bool sizes_ok, unlink, dir_null;
};

/* Copies each shard out through its descriptor into base/side/, then
 * (like the outputs' uploader) unlinks it from the folder being built. */
static sl_err on_shard(void *ctx, const char *dir, const char *name, int fd, uint64_t size)
{
	struct done_log *d = ctx;
	char p[1024];
	struct stat st;
	if (d->calls == d->fail_at)
		return sl_err_set(SL_E_REMOTE_REFUSED, "PUT %s: HTTP 403 (test)", name);
	if (d->calls < 16)
		snprintf(d->names[d->calls], sizeof(d->names[0]), "%s", name);
	d->calls++;
	d->sizes_ok &= fstat(fd, &st) == 0 && (uint64_t)st.st_size == size;
	uint8_t *b = malloc(size + 1);
	size_t got = 0;
	if (b == NULL || sl_pread_full(fd, b, (size_t)size, 0, &got, name) != SL_OK || got != size)
		d->sizes_ok = false;
	snprintf(p, sizeof(p), "%s/side/%s", base, name);
	int out = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (out < 0 || b == NULL || sl_write_all(out, b, (size_t)size, p) != SL_OK)
		d->sizes_ok = false;
	if (out >= 0)
		close(out);
	free(b);
	if (dir == NULL) {
		d->dir_null = true;
		return SL_OK;
	}
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (d->unlink && unlink(p) != 0)
		d->sizes_ok = false;
	return SL_OK;
}

static sl_err enc_cb(sl_secret *k, const char *in_rel, const char *out_rel, uint64_t shard,
                     struct done_log *d, bool mem, sl_tree_stats *st)
{
	char in[512], out[512];
	snprintf(in, sizeof(in), "%s/%s", base, in_rel);
	snprintf(out, sizeof(out), "%s/%s", base, out_rel);
	const char *paths[] = {in};
	sl_tree_encrypt_opts o = {
	    .paths = paths,
	    .n_paths = 1,
	    .out_dir = out,
	    .quiet = true,
	    .no_fsync = true,
	    .shard_size = shard,
	    .shard_done = on_shard,
	    .shard_ctx = d,
	    .mem_shards = mem,
	    .p = {.dataset_id = "cb-1", .chunk_size = 64 << 10, .threads = 2}};
	return sl_tree_encrypt(k, &o, st);
}

static void test_shard_done_callback(void **state)
{
	(void)state;
	sl_secret *k = dek();
	sl_tree_stats st, st2;
	struct done_log d = {.fail_at = UINT32_MAX, .sizes_ok = true, .unlink = true};

	mkd("cbsrc");
	mkd("side");
	put("cbsrc/a.bin", 300000, 0644, 7);
	put("cbsrc/b.bin", 200000, 0600, 8);
	assert_int_equal(enc_cb(k, "cbsrc", "cbds", 128 << 10, &d, false, &st), SL_OK);
	/* once per shard, in order, each complete when it was handed on */
	assert_int_equal(d.calls, st.shards);
	assert_true(st.shards >= 4);
	assert_true(d.sizes_ok);
	uint32_t shards = st.shards;
	for (unsigned i = 0; i < d.calls && i < 16; i++) {
		char want[32];
		snprintf(want, sizeof(want), "shard-%05u.sld", i);
		assert_string_equal(d.names[i], want);
	}
	/* the callee took every shard away: the folder holds the manifest */
	assert_true(exists("cbds/manifest.sldm"));
	assert_false(exists("cbds/shard-00000.sld"));
	assert_no_partials();
	/* what it was handed is the dataset, byte for byte */
	assert_int_equal(run("cp side/*.sld cbds/"), 0);
	assert_int_equal(dec(k, "cbds", "cbout", &st2), SL_OK);
	assert_memory_equal(st.root, st2.root, 32);
	assert_int_equal(run("diff -r cbsrc cbout"), 0);

	/* a failing callback (a refused upload) stops the sealing with its
	 * error: nothing sealed after it, no target, no partial folder */
	struct done_log f = {.fail_at = 1, .sizes_ok = true, .unlink = false};
	assert_int_equal(run("rm -f side/*"), 0);
	assert_int_equal(enc_cb(k, "cbsrc", "cbfail", 128 << 10, &f, false, &st),
	                 SL_E_REMOTE_REFUSED);
	assert_non_null(strstr(sl_err_detail(), "shard-00001.sld"));
	assert_int_equal(f.calls, 1);
	assert_false(exists("cbfail"));
	assert_false(exists("side/shard-00002.sld"));
	assert_no_partials();

	/* shards as memory files: never named on disk, handed on the same */
	struct done_log m = {.fail_at = UINT32_MAX, .sizes_ok = true};
	assert_int_equal(run("rm -f side/*"), 0);
	assert_int_equal(enc_cb(k, "cbsrc", "cbmem", 128 << 10, &m, true, &st), SL_OK);
	assert_int_equal(m.calls, shards);
	assert_true(m.sizes_ok && m.dir_null);
	assert_false(exists("cbmem/shard-00000.sld"));
	assert_int_equal(run("cp side/*.sld cbmem/"), 0);
	assert_int_equal(dec(k, "cbmem", "cbmemout", &st2), SL_OK);
	assert_int_equal(run("diff -r cbsrc cbmemout"), 0);
	assert_no_partials();

	/* without a callback the same tree seals to the same shards' layout */
	assert_int_equal(enc(k, "cbsrc", "cbplain", "cb-1", 128 << 10, &st2), SL_OK);
	assert_int_equal(st2.shards, shards);
	sl_secret_free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tree_round_trip),
	    cmocka_unit_test(test_shard_done_callback),
	    cmocka_unit_test(test_tampering),
	    cmocka_unit_test(test_tar_shards_and_collisions),
	    cmocka_unit_test(test_changed_while_encrypting),
	    cmocka_unit_test(test_stream_linger),
	    cmocka_unit_test(test_check_shard_mem),
	    cmocka_unit_test(test_stream_buffers_reused),
	    cmocka_unit_test(test_stream_gave_way),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
