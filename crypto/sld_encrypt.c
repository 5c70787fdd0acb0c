/* SLD v1 streaming encryption: header, then chunks sealed in parallel and
 * written in order. Input is read sequentially, so a pipe works. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "seclaunch/util.h"
#include "sld_internal.h"

struct enc {
	const sl_sld_header *h;
	sl_secret *file_key;
	int in_fd, out_fd;
	uint64_t done;
	const sl_sld_encrypt_params *p;
};

static SL_RESULT enc_worker_init(void *ctx, void **ws)
{
	struct enc *e = ctx;
	return sl_aead_new(e->h->aead, sl_secret_data(e->file_key), (sl_aead **)ws);
}

static void enc_worker_fini(void *ctx, void *ws)
{
	(void)ctx;
	sl_aead_free(ws);
}

static SL_RESULT enc_fill(void *ctx, uint64_t i, uint8_t *buf, size_t *len)
{
	sl_err rc = SL_E_IO;
	struct enc *e = ctx;
	size_t want = sl_sld_chunk_plain_len(e->h, i), got = 0;

	SL_GUARD(sl_read_full(e->in_fd, buf, want, &got, "input"));
	SL_ENSURE(got == want, SL_E_IO,
	          "input ended after %llu bytes; %llu were expected (did it shrink while "
	          "being read?)",
	          (unsigned long long)(i * (uint64_t)e->h->chunk_size + got),
	          (unsigned long long)e->h->plaintext_len);
	*len = want;
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT enc_work(void *ctx, void *ws, uint64_t i, uint8_t *buf, size_t *len)
{
	struct enc *e = ctx;
	uint8_t nonce[SL_AEAD_MAX_NONCE_LEN], aad[SLD_AAD_LEN];

	sld_chunk_nonce(e->h->aead, i, nonce);
	sld_chunk_aad(e->h->digest, i, i + 1 == e->h->chunk_count, aad);
	sl_err rc = sl_aead_seal(ws, nonce, aad, sizeof(aad), buf, *len, buf, buf + *len);
	if (rc == SL_OK)
		*len += SL_AEAD_TAG_LEN;
	return rc;
}

static SL_RESULT enc_emit(void *ctx, uint64_t i, const uint8_t *buf, size_t len)
{
	struct enc *e = ctx;
	sl_err rc = sl_write_all(e->out_fd, buf, len, "output");
	if (rc != SL_OK)
		return rc;
	e->done += len - SL_AEAD_TAG_LEN;
	if (e->p->progress != NULL)
		e->p->progress(e->p->progress_ctx, e->done, e->h->plaintext_len);
	(void)i;
	return SL_OK;
}

sl_err sl_sld_encrypt(sl_secret *dek, const sl_sld_encrypt_params *p, int in_fd,
                      uint64_t plaintext_len, int out_fd)
{
	sl_err rc = SL_E_INPUT;
	sl_sld_encrypt_params q = *p;
	struct sld_keys keys = {0};
	sl_sld_header *h = NULL;
	uint8_t salt[SL_SLD_SALT_LEN];

	SL_GUARD(sld_params_resolve(p, &q));
	sl_random(salt, sizeof(salt));
	SL_GUARD(sld_derive_keys(dek, salt, &keys));
	SL_GUARD(sld_header_build(&q, plaintext_len, salt, &keys, &h));
	SL_GUARD(sl_write_all(out_fd, h->raw, h->len, "output"));

	struct enc e = {
	    .h = h, .file_key = keys.file_key, .in_fd = in_fd, .out_fd = out_fd, .p = &q};
	struct sld_pool_ops ops = {
	    .ctx = &e,
	    .count = h->chunk_count,
	    .buf_size = (size_t)h->chunk_size + SL_AEAD_TAG_LEN,
	    .threads = q.threads,
	    .worker_init = enc_worker_init,
	    .worker_fini = enc_worker_fini,
	    .fill = enc_fill,
	    .work = enc_work,
	    .emit = enc_emit,
	};
	SL_GUARD(sld_pool_run(&ops));
	{
		/* the input must end where its announced length does */
		uint8_t extra;
		ssize_t n;
		do {
			n = read(in_fd, &extra, 1);
		} while (n < 0 && errno == EINTR);
		SL_ENSURE(n == 0, SL_E_IO,
		          "input is longer than the %llu bytes expected (did it grow while being "
		          "read?)",
		          (unsigned long long)plaintext_len);
	}
	rc = SL_OK;
out:
	sld_keys_free(&keys);
	sl_sld_header_free(h);
	return rc;
}
