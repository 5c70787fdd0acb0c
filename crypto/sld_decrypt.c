/* SLD v1 decryption: open (key check, header MAC, size), random access to a
 * chunk, and in-order parallel decryption to a sink that only ever sees
 * authenticated bytes. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seclaunch/util.h"
#include "sld_internal.h"

struct sl_sld_reader {
	int fd;
	char name[256];
	sl_sld_header *h;
	sl_secret *file_key;
};

unsigned sl_sld_default_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;
	/* a CPU affinity mask (taskset, cgroup cpusets) may allow fewer */
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0 &&
	    CPU_COUNT(&set) < n)
		n = CPU_COUNT(&set);
	if (n < 1)
		n = 1;
	if (n > SL_SLD_THREADS_MAX)
		n = SL_SLD_THREADS_MAX;
	return (unsigned)n;
}

static sl_err check_size(const sl_sld_reader *r)
{
	sl_err rc = SL_E_IO;
	const sl_sld_header *h = r->h;
	struct stat st;
	uint64_t want = sl_sld_header_file_size(h), have;

	SL_ENSURE(fstat(r->fd, &st) == 0, SL_E_IO, "%s: stat: %s", r->name, strerror(errno));
	SL_ENSURE(S_ISREG(st.st_mode), SL_E_INPUT,
	          "%s: not a regular file (decryption reads chunks at their offsets)", r->name);
	have = (uint64_t)st.st_size;
	if (have < want) {
		uint64_t k = have > h->len
		                 ? (have - h->len) / ((uint64_t)h->chunk_size + SL_AEAD_TAG_LEN)
		                 : 0;
		SL_FAIL(SL_E_TRUNCATED,
		        "%s: truncated: the file has %llu bytes, its header says %llu; "
		        "chunk %llu "
		        "of %llu is incomplete or missing",
		        r->name, (unsigned long long)have, (unsigned long long)want,
		        (unsigned long long)k, (unsigned long long)h->chunk_count);
	}
	SL_ENSURE(have == want, SL_E_INTEGRITY,
	          "%s: extended: %llu unexpected bytes after the last chunk (chunk "
	          "%llu); the "
	          "header says the file ends at %llu bytes",
	          r->name, (unsigned long long)(have - want),
	          (unsigned long long)(h->chunk_count - 1), (unsigned long long)want);
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_sld_open(int fd, const char *name, sl_secret *dek, sl_sld_reader **out)
{
	sl_err rc = SL_E_NOMEM;
	struct sld_keys keys = {0};
	uint8_t mac[SLD_MAC_LEN];
	sl_sld_reader *r = calloc(1, sizeof(*r));

	SL_ENSURE(r != NULL, SL_E_NOMEM, "allocating an SLD reader");
	r->fd = fd;
	snprintf(r->name, sizeof(r->name), "%s", name);
	SL_GUARD(sl_sld_header_read_fd(fd, name, &r->h));
	SL_GUARD(sld_derive_keys(dek, r->h->salt, &keys));
	SL_ENSURE(sl_ct_eq(keys.key_check, r->h->key_check, SLD_KEY_CHECK_LEN), SL_E_WRONG_KEY,
	          "%s: wrong key: this key did not encrypt this file "
	          "(header.key_check does not "
	          "match; or header.salt / header.key_check were altered)",
	          name);
	SL_GUARD(sl_hmac_sha256(sl_secret_data(keys.mac_key), 32, r->h->raw,
	                        r->h->len - SLD_MAC_LEN, mac));
	SL_ENSURE(sl_ct_eq(mac, r->h->mac, SLD_MAC_LEN), SL_E_INTEGRITY,
	          "%s: header authentication failed: the header was altered "
	          "(header.header_mac "
	          "does not match)",
	          name);
	SL_GUARD(check_size(r));
	/* workers read disjoint chunks out of order: ask for wide readahead */
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	r->file_key = keys.file_key;
	keys.file_key = NULL;
	*out = r;
	r = NULL;
	rc = SL_OK;
out:
	sld_keys_free(&keys);
	sl_sld_close(r);
	return rc;
}

void sl_sld_close(sl_sld_reader *r)
{
	if (r == NULL)
		return;
	sl_secret_free(r->file_key);
	sl_sld_header_free(r->h);
	free(r);
}

const sl_sld_header *sl_sld_reader_header(const sl_sld_reader *r)
{
	return r->h;
}

/* Reads, authenticates and decrypts chunk i in place in buf. */
static sl_err chunk_open(sl_sld_reader *r, sl_aead *a, uint64_t i, uint8_t *buf, size_t *len)
{
	sl_err rc = SL_E_IO;
	const sl_sld_header *h = r->h;
	size_t plen = sl_sld_chunk_plain_len(h, i), want = plen + SL_AEAD_TAG_LEN, got = 0;
	off_t off = (off_t)(h->len + i * ((uint64_t)h->chunk_size + SL_AEAD_TAG_LEN));
	uint8_t nonce[SL_AEAD_MAX_NONCE_LEN], aad[SLD_AAD_LEN];

	while (got < want) {
		ssize_t n = pread(r->fd, buf + got, want - got, off + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		SL_ENSURE(n >= 0, SL_E_IO, "%s: chunk %llu: read: %s", r->name,
		          (unsigned long long)i, strerror(errno));
		SL_ENSURE(n > 0, SL_E_TRUNCATED, "%s: chunk %llu: truncated (the file shrank)",
		          r->name, (unsigned long long)i);
		got += (size_t)n;
	}
	sld_chunk_nonce(h->aead, i, nonce);
	sld_chunk_aad(h->digest, i, i + 1 == h->chunk_count, aad);
	rc = sl_aead_open(a, nonce, aad, sizeof(aad), buf, plen, buf + plen, buf);
	if (rc == SL_E_INTEGRITY)
		SL_FAIL(SL_E_INTEGRITY,
		        "%s: chunk %llu of %llu: authentication failed (the chunk was altered, "
		        "moved or taken from another file)",
		        r->name, (unsigned long long)i, (unsigned long long)h->chunk_count);
	if (rc != SL_OK)
		goto out;
	*len = plen;
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_sld_read_chunk(sl_sld_reader *r, uint64_t i, uint8_t *buf, size_t cap, size_t *len)
{
	sl_err rc = SL_E_INPUT;
	sl_aead *a = NULL;

	SL_ENSURE(i < r->h->chunk_count, SL_E_INPUT, "%s: chunk %llu: the file has %llu chunks",
	          r->name, (unsigned long long)i, (unsigned long long)r->h->chunk_count);
	SL_ENSURE(cap >= (size_t)r->h->chunk_size + SL_AEAD_TAG_LEN, SL_E_INTERNAL,
	          "chunk buffer of %zu bytes; %zu needed", cap,
	          (size_t)r->h->chunk_size + SL_AEAD_TAG_LEN);
	SL_GUARD(sl_aead_new(r->h->aead, sl_secret_data(r->file_key), &a));
	SL_GUARD(chunk_open(r, a, i, buf, len));
	rc = SL_OK;
out:
	sl_aead_free(a);
	return rc;
}

struct dec {
	sl_sld_reader *r;
	sl_sld_sink_fn sink;
	void *sink_ctx;
	sl_sld_progress_fn progress;
	void *progress_ctx;
	uint64_t done;
};

static sl_err dec_worker_init(void *ctx, void **ws)
{
	struct dec *d = ctx;
	return sl_aead_new(d->r->h->aead, sl_secret_data(d->r->file_key), (sl_aead **)ws);
}

static void dec_worker_fini(void *ctx, void *ws)
{
	(void)ctx;
	sl_aead_free(ws);
}

static sl_err dec_work(void *ctx, void *ws, uint64_t i, uint8_t *buf, size_t *len)
{
	struct dec *d = ctx;
	return chunk_open(d->r, ws, i, buf, len);
}

static sl_err dec_emit(void *ctx, uint64_t i, const uint8_t *buf, size_t len)
{
	struct dec *d = ctx;
	sl_err rc = d->sink(d->sink_ctx, i, buf, len);
	if (rc != SL_OK)
		return rc;
	d->done += len;
	if (d->progress != NULL)
		d->progress(d->progress_ctx, d->done, d->r->h->plaintext_len);
	return SL_OK;
}

sl_err sl_sld_decrypt(sl_sld_reader *r, unsigned threads, sl_sld_sink_fn sink, void *sink_ctx,
                      sl_sld_progress_fn progress, void *progress_ctx)
{
	struct dec d = {.r = r,
	                .sink = sink,
	                .sink_ctx = sink_ctx,
	                .progress = progress,
	                .progress_ctx = progress_ctx};
	if (threads == 0)
		threads = sl_sld_default_threads();
	if (threads > SL_SLD_THREADS_MAX)
		return sl_err_set(SL_E_INPUT, "threads: %u, at most %d", threads,
		                  SL_SLD_THREADS_MAX);
	struct sld_pool_ops ops = {
	    .ctx = &d,
	    .count = r->h->chunk_count,
	    .buf_size = (size_t)r->h->chunk_size + SL_AEAD_TAG_LEN,
	    .threads = threads,
	    .worker_init = dec_worker_init,
	    .worker_fini = dec_worker_fini,
	    .fill = NULL,
	    .work = dec_work,
	    .emit = dec_emit,
	};
	return sld_pool_run(&ops);
}
