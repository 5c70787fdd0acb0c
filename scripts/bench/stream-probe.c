/* scripts/bench/70-remote.sh's stream-staging probe (not a benchmark by
 * itself: run-bench runs *.sh only). Streams every shard of a local sharded
 * dataset through sl_stream (the code behind `run --stage stream`), in
 * order, a reader touching every byte through its own mapping and giving
 * the shard back, and prints its wall and CPU time (user, system) and peak
 * RSS. Built against libseclaunch.a. A dataset URL (https://…, with the CA
 * bundle CA) is streamed from the store, as `run --stage stream URL` does.
 *
 *   stream-probe KEYFILE DATASET_DIR|URL WINDOW_MIB [CA] */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "dataset/dataset_tree.h"
#include "seclaunch/secret.h"
#include "seclaunch/sldm.h"
#include "stage/stream.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double tv(struct timeval t)
{
	return (double)t.tv_sec + (double)t.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	sl_secret *dek = NULL;
	sl_sldm *m = NULL;
	sl_stream *st = NULL;
	sl_remote *r = NULL;
	int dfd = -1;
	uint64_t sum = 0, bytes = 0;

	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: stream-probe KEYFILE DATASET_DIR|URL WINDOW_MIB [CA]\n");
		return 1;
	}
	if (sl_crypto_init() != SL_OK || sl_secret_read_file(argv[1], 4096, &dek) != SL_OK)
		goto fail;
	double t0 = now();
	if (sl_remote_is_url(argv[2])) {
		sl_remote_opts o = {.ca_file = argc > 4 ? argv[4] : NULL, .quiet = true};
		if (sl_remote_open(argv[2], &o, &r) != SL_OK ||
		    sl_tree_manifest(NULL, r, &m) != SL_OK)
			goto fail;
	} else {
		dfd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || sl_tree_manifest_at(dfd, argv[2], &m) != SL_OK)
			goto fail;
	}
	if (sl_stream_new(dfd, r != NULL ? NULL : argv[2], r, m, dek,
	                  (uint64_t)atoll(argv[3]) << 20, 0, 0, &st) != SL_OK)
		goto fail;
	for (uint32_t i = 0; i < sl_sldm_shard_count(m); i++) {
		int fd = -1, not_ready = 1;
		uint64_t len = 0;
		for (;;) {
			if (sl_stream_acquire(st, i, &fd, &len, &not_ready) != SL_OK)
				goto fail;
			if (!not_ready)
				break;
			usleep(200);
		}
		const uint64_t *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			goto fail;
		for (uint64_t k = 0; k < len / 8; k++)
			sum += p[k];
		munmap((void *)p, len);
		bytes += len;
		sl_stream_release(st, i);
	}
	sl_stream_free(st);
	double t1 = now();
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("%llu %.4f %.4f %.4f %ld %llx\n", (unsigned long long)bytes, t1 - t0,
	       tv(ru.ru_utime), tv(ru.ru_stime), ru.ru_maxrss, (unsigned long long)sum);
	sl_sldm_free(m);
	sl_remote_free(r);
	sl_secret_free(dek);
	return 0;
fail:
	fprintf(stderr, "stream-probe: %s\n", sl_err_detail());
	return 2;
}
