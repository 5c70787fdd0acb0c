/* Decrypting an SLD dataset straight into a stage: the decryptor's in-order
 * sink writes each authenticated chunk at its offset. */
#include <stdio.h>
#include <string.h>

#include "seclaunch/sld.h"
#include "seclaunch/stage.h"

struct sink_ctx {
	sl_stage *stage;
	const sl_sld_header *h;
	uint64_t off;
	int (*interrupted)(void);
};

static sl_err sink(void *ctx, uint64_t chunk_index, const uint8_t *plain, size_t len)
{
	struct sink_ctx *c = ctx;
	sl_err rc = sl_stage_write(c->stage, c->off, plain, len);
	if (rc != SL_OK)
		return sl_err_wrap(rc, "chunk %llu", (unsigned long long)chunk_index);
	c->off += len;
	if (c->interrupted != NULL) {
		int sig = c->interrupted();
		if (sig != 0)
			return sl_err_set(SL_E_SYSTEM, "interrupted by signal %d while staging",
			                  sig);
	}
	return SL_OK;
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
	SL_GUARD(sl_sld_decrypt(r, threads, sink, &c, NULL, NULL));
	SL_GUARD(sl_stage_seal(s));
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	sl_stage_free(s); /* wipes whatever part was staged */
	sl_sld_close(r);
	return rc;
}
