/* Decrypting an SLD dataset straight into a stage. Host: every worker
 * decrypts its chunk straight into the stage's mapping (sl_sld_decrypt_into),
 * faulting in that chunk's pages itself first, so page allocation and
 * clearing run on all workers and the plaintext is written once. GPU: the
 * decryptor's in-order sink hands each authenticated chunk to the copies. */
#include <stdio.h>
#include <string.h>

#include <unistd.h>

#include "stage_tree.h"
#include "seclaunch/sld.h"
#include "seclaunch/sldm.h"
#include "seclaunch/stage.h"
#include "stage_int.h"

struct sink_ctx {
	sl_stage *stage;
	const sl_sld_header *h;
	uint64_t base; /* where this SLD file's plaintext starts in the stage */
	uint64_t off;
	int (*interrupted)(void);
};

static SL_RESULT interrupted_check(int (*interrupted)(void))
{
	int sig = interrupted != NULL ? interrupted() : 0;
	if (sig != 0)
		return sl_err_set(SL_E_SYSTEM, "interrupted by signal %d while staging", sig);
	return SL_OK;
}

static SL_RESULT sink(void *ctx, uint64_t chunk_index, const uint8_t *plain, size_t len)
{
	struct sink_ctx *c = ctx;
	sl_err rc = sl_stage_write(c->stage, c->off, plain, len);
	if (rc != SL_OK)
		return sl_err_wrap(rc, "chunk %llu", (unsigned long long)chunk_index);
	c->off += len;
	return interrupted_check(c->interrupted);
}

static SL_RESULT into_prepare(void *ctx, uint64_t chunk_index, uint64_t off, size_t len)
{
	struct sink_ctx *c = ctx;
	(void)chunk_index;
	return sl_stage_host_prefault(c->stage, c->base + off, len);
}

static SL_RESULT into_done(void *ctx, uint64_t chunk_index, uint64_t done_bytes)
{
	struct sink_ctx *c = ctx;
	(void)chunk_index;
	c->off = c->base + done_bytes;
	return interrupted_check(c->interrupted);
}

/* Host: decrypted in place in the mapping, which no one else can see until
 * sl_stage_seal and the job; on failure sl_stage_free wipes all of it. */
static SL_RESULT stage_host_into(sl_stage *s, sl_sld_reader *r, unsigned threads,
                                 struct sink_ctx *c)
{
	sl_err rc = SL_E_INTERNAL;
	sl_sld_into_ops ops = {.prepare = into_prepare, .done = into_done, .ctx = c};
	uint64_t len = sl_sld_header_plaintext_len(sl_sld_reader_header(r));

	uint8_t *map = sl_stage_host_map(s);

	SL_ENSURE(s->written == c->base && !s->sealed && !s->wiped && len <= s->size - c->base,
	          SL_E_INTERNAL, "dataset %s: staging out of order", s->dataset_id);
	sl_stage_host_alloc_start(s);
	rc = sl_sld_decrypt_into(r, threads, map + c->base, (size_t)len, &ops);
	sl_stage_host_alloc_stop(s);
	SL_GUARD(rc);
	s->written = c->base + len;
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_stage_sld(int fd, const char *name, sl_secret *dek, const sl_gpu_info *gpu,
                    unsigned threads, bool force_memfd, int (*interrupted)(void), sl_stage **out)
{
	sl_err rc = SL_E_INTERNAL;
	sl_sld_reader *r = NULL;
	sl_stage *s = NULL;
	const sl_sld_header *h;
	struct sink_ctx c;

	*out = NULL;
	SL_GUARD(sl_sld_open(fd, name, dek, &r));
	h = sl_sld_reader_header(r);
	if (gpu != NULL)
		SL_GUARD(sl_stage_gpu_new(sl_sld_header_dataset_id(h),
		                          sl_sld_header_plaintext_len(h),
		                          sl_sld_header_chunk_size(h), gpu, &s));
	else
		SL_GUARD(sl_stage_host_new(sl_sld_header_dataset_id(h),
		                           sl_sld_header_plaintext_len(h), force_memfd, &s));
	c = (struct sink_ctx){.stage = s, .h = h, .interrupted = interrupted};
	if (gpu != NULL)
		SL_GUARD(sl_sld_decrypt(r, threads, sink, &c, NULL, NULL));
	else
		SL_GUARD(stage_host_into(s, r, threads, &c));
	SL_GUARD(sl_stage_seal(s));
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	sl_stage_free(s); /* wipes whatever part was staged */
	sl_sld_close(r);
	return rc;
}

/* Refills the pooled stage s from an opened reader (a file or memory). */
static SL_RESULT refill(sl_sld_reader *r, unsigned threads, sl_sld_bufs *bufs,
                        int (*interrupted)(void), sl_stage *s)
{
	sl_err rc = SL_E_INTERNAL;
	struct sink_ctx c;

	SL_GUARD(sl_stage_refill_begin(s, sl_sld_header_plaintext_len(sl_sld_reader_header(r))));
	c = (struct sink_ctx){.stage = s, .h = sl_sld_reader_header(r), .interrupted = interrupted};
	/* the in-order sink, not decryption in place: a job may still map this
	 * buffer from an earlier shard, and must never see a chunk before its
	 * tag is checked */
	SL_GUARD(sl_sld_decrypt_bufs(r, threads, bufs, sink, &c, NULL, NULL));
	SL_GUARD(sl_stage_refill_end(s));
	rc = SL_OK;
out:
	return rc;
}

/* Refills s from the reader that `opened` says was opened (or not), then
 * closes it; a failed refill leaves the buffer emptied. */
static SL_RESULT refill_from(sl_err opened, sl_sld_reader *r, unsigned threads, sl_sld_bufs *bufs,
                             int (*interrupted)(void), sl_stage *s)
{
	sl_err rc = opened;
	if (rc == SL_OK)
		rc = refill(r, threads, bufs, interrupted, s);
	if (rc != SL_OK && s->pooled && !s->wiped)
		(void)!sl_stage_clear(s);
	sl_sld_close(r);
	return rc;
}

sl_err sl_stage_sld_refill(int fd, const char *name, sl_secret *dek, unsigned threads,
                           sl_sld_bufs *bufs, int (*interrupted)(void), sl_stage *s)
{
	sl_sld_reader *r = NULL;
	sl_err rc = sl_sld_open(fd, name, dek, &r);
	return refill_from(rc, r, threads, bufs, interrupted, s);
}

sl_err sl_stage_sld_refill_mem(const uint8_t *base, size_t len, const char *name, sl_secret *dek,
                               unsigned threads, sl_sld_bufs *bufs, int (*interrupted)(void),
                               sl_stage *s)
{
	sl_sld_reader *r = NULL;
	sl_err rc = sl_sld_open_mem(base, len, name, dek, &r);
	return refill_from(rc, r, threads, bufs, interrupted, s);
}

sl_err sl_stage_sldm(int dfd, const char *dir, sl_remote *remote, const sl_sldm *m, sl_secret *dek,
                     const sl_gpu_info *gpu, unsigned threads, bool force_memfd,
                     int (*interrupted)(void), sl_stage **out)
{
	sl_err rc = SL_E_INTERNAL;
	sl_sld_reader *r = NULL;
	sl_stage *s = NULL;
	sl_sld_bufs *bufs = NULL; /* the GPU path's chunk buffers, kept across shards */
	sl_shards shards;
	char name[4096];
	int fd = -1;
	uint64_t base = 0;

	*out = NULL;
	sl_shards_begin(&shards, dfd, dir, remote, m);
	/* nothing in the manifest counts before it authenticates */
	SL_GUARD(sl_sldm_authenticate(m, dek));
	if (gpu != NULL) {
		SL_GUARD(sl_sld_bufs_new(&bufs));
		SL_GUARD(sl_stage_gpu_new(sl_sldm_dataset_id(m), sl_sldm_plaintext_len(m),
		                          sl_sldm_chunk_size(m), gpu, &s));
	} else {
		SL_GUARD(sl_stage_host_new(sl_sldm_dataset_id(m), sl_sldm_plaintext_len(m),
		                           force_memfd, &s));
	}
	for (uint32_t i = 0; i < sl_sldm_shard_count(m); i++) {
		SL_GUARD(interrupted_check(interrupted));
		SL_GUARD(sl_shards_open(&shards, i, &fd, name, sizeof(name)));
		SL_GUARD(sl_sld_open(fd, name, dek, &r));
		struct sink_ctx c = {.stage = s,
		                     .h = sl_sld_reader_header(r),
		                     .base = base,
		                     .off = base,
		                     .interrupted = interrupted};
		if (gpu != NULL)
			SL_GUARD(sl_sld_decrypt_bufs(r, threads, bufs, sink, &c, NULL, NULL));
		else
			SL_GUARD(stage_host_into(s, r, threads, &c));
		base += sl_sld_header_plaintext_len(c.h);
		sl_sld_close(r);
		r = NULL;
		close(fd);
		fd = -1;
	}
	SL_GUARD(sl_stage_seal(s));
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	sl_shards_end(&shards);
	sl_stage_free(s); /* wipes whatever part was staged */
	sl_sld_close(r);
	sl_sld_bufs_free(bufs);
	if (fd >= 0)
		close(fd);
	return rc;
}
