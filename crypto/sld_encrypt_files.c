/* Parallel SLD v1 encryption of files whose plaintext can be read at any
 * offset (sld.h: sl_sld_encrypt_files). The bytes are those of
 * sl_sld_encrypt; only the order of the work differs: each worker reads its
 * own chunk, seals it in place and writes it at its own offset, so reading,
 * sealing and writing all run on every thread and no chunk is copied
 * through a pipe or a single writer. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seclaunch/util.h"
#include "sld_internal.h"

/* Plaintext is read and sealed in pieces of this size: a piece sealed
 * right after its read is still in the core's cache (the size sld_decrypt.c
 * measured best for the reverse direction). */
#define PIECE ((size_t)1 << 20)

struct item {
	uint32_t file;
	uint64_t chunk;
};

struct par {
	const sl_sld_encrypt_params *p;
	const sl_sld_source *src;
	uint32_t n;
	const int *out_fd;
	sl_sld_header **h;
	struct sld_keys *keys;
	struct item *items;
	bool seekable;
	bool write_behind;
	uint64_t done, total;
};

struct wstate {
	sl_aead *a;
	uint32_t keyed; /* the file a is keyed for; UINT32_MAX: none */
	void *tls;
};

static SL_RESULT par_worker_init(void *ctx, void **ws)
{
	(void)ctx;
	struct wstate *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return sl_err_set(SL_E_NOMEM, "encryption worker");
	w->keyed = UINT32_MAX;
	*ws = w;
	return SL_OK;
}

static void par_worker_fini(void *ctx, void *ws)
{
	struct par *e = ctx;
	struct wstate *w = ws;
	if (w == NULL)
		return;
	sl_aead_free(w->a);
	if (w->tls != NULL && e->src->tls_free != NULL)
		e->src->tls_free(e->src->ctx, w->tls);
	free(w);
}

static uint64_t chunk_offset(const sl_sld_header *h, uint64_t i)
{
	return h->len + i * ((uint64_t)h->chunk_size + SL_AEAD_TAG_LEN);
}

static SL_RESULT par_work(void *ctx, void *ws, uint64_t k, uint8_t *buf, size_t *len)
{
	sl_err rc = SL_E_IO;
	struct par *e = ctx;
	struct wstate *w = ws;
	const struct item *it = &e->items[k];
	const sl_sld_header *h = e->h[it->file];
	uint8_t nonce[SL_AEAD_MAX_NONCE_LEN], aad[SLD_AAD_LEN];
	size_t plen = sl_sld_chunk_plain_len(h, it->chunk);

	if (w->keyed != it->file) {
		sl_aead_free(w->a);
		w->a = NULL;
		w->keyed = UINT32_MAX;
		SL_GUARD(sl_aead_new(h->aead, sl_secret_data(e->keys[it->file].file_key), &w->a));
		w->keyed = it->file;
	}
	uint64_t at = it->chunk * (uint64_t)h->chunk_size;
	sld_chunk_nonce(h->aead, it->chunk, nonce);
	sld_chunk_aad(h->digest, it->chunk, it->chunk + 1 == h->chunk_count, aad);
	if (h->aead == SL_AEAD_AES_256_GCM) {
		/* each piece is sealed right after its read, while it is in cache */
		SL_GUARD(sld_gcm_seal_begin(w->a, nonce, aad, sizeof(aad)));
		for (size_t done = 0; done < plen;) {
			size_t n = plen - done < PIECE ? plen - done : PIECE;
			SL_GUARD(e->src->read_at(e->src->ctx, &w->tls, it->file, at + done,
			                         buf + done, n));
			SL_GUARD(sld_gcm_seal_update(w->a, buf + done, n, buf + done));
			done += n;
		}
		SL_GUARD(sld_gcm_seal_final(w->a, buf + plen));
	} else {
		SL_GUARD(e->src->read_at(e->src->ctx, &w->tls, it->file, at, buf, plen));
		SL_GUARD(sl_aead_seal(w->a, nonce, aad, sizeof(aad), buf, plen, buf, buf + plen));
	}
	*len = plen + SL_AEAD_TAG_LEN;
	if (e->seekable) {
		int fd = e->out_fd[it->file];
		uint64_t off = chunk_offset(h, it->chunk), put = 0;
		while (put < *len) {
			ssize_t m = pwrite(fd, buf + put, *len - put, (off_t)(off + put));
			if (m < 0 && errno == EINTR)
				continue;
			SL_ENSURE(m > 0, SL_E_IO, "output: write: %s",
			          m < 0 ? strerror(errno) : "no progress");
			put += (uint64_t)m;
		}
		/* only a hint: a failure leaves the work to the final fsync */
		if (e->write_behind)
			(void)sync_file_range(fd, (off_t)off, (off_t)*len, SYNC_FILE_RANGE_WRITE);
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT par_emit(void *ctx, uint64_t k, const uint8_t *buf, size_t len)
{
	struct par *e = ctx;
	if (!e->seekable) {
		sl_err rc = sl_write_all(e->out_fd[0], buf, len, "output");
		if (rc != SL_OK)
			return rc;
	}
	e->done += len - SL_AEAD_TAG_LEN;
	if (e->p->progress != NULL)
		e->p->progress(e->p->progress_ctx, e->done, e->total);
	(void)k;
	return SL_OK;
}

static SL_RESULT write_at(int fd, const uint8_t *b, size_t len, uint64_t off)
{
	while (len > 0) {
		ssize_t m = pwrite(fd, b, len, (off_t)off);
		if (m < 0 && errno == EINTR)
			continue;
		if (m <= 0)
			return sl_err_set(SL_E_IO, "output: write: %s",
			                  m < 0 ? strerror(errno) : "no progress");
		b += m, len -= (size_t)m, off += (uint64_t)m;
	}
	return SL_OK;
}

sl_err sl_sld_encrypt_files(sl_secret *dek, const sl_sld_encrypt_params *p, uint32_t n,
                            const uint64_t *plaintext_len, const int *out_fd,
                            const sl_sld_source *src, unsigned flags, sl_sld_header **headers)
{
	sl_err rc = SL_E_INPUT;
	sl_sld_encrypt_params q = *p;
	struct par e = {.p = &q, .src = src, .n = n, .out_fd = out_fd};
	uint64_t count = 0;

	SL_ENSURE(n > 0, SL_E_INTERNAL, "no file to encrypt");
	SL_GUARD(sld_params_resolve(p, &q));
	e.h = calloc(n, sizeof(*e.h));
	e.keys = calloc(n, sizeof(*e.keys));
	SL_ENSURE(e.h != NULL && e.keys != NULL, SL_E_NOMEM, "encryption state");
	e.seekable = (flags & SL_SLD_IN_ORDER) == 0;
	for (uint32_t k = 0; k < n; k++) {
		struct stat st;
		e.seekable &= fstat(out_fd[k], &st) == 0 && S_ISREG(st.st_mode);
	}
	SL_ENSURE(e.seekable || n == 1, SL_E_INTERNAL, "several outputs that are not files");
	e.write_behind = e.seekable && (flags & SL_SLD_WRITE_BEHIND) != 0;
	for (uint32_t k = 0; k < n; k++) {
		uint8_t salt[SL_SLD_SALT_LEN];
		sl_random(salt, sizeof(salt));
		SL_GUARD(sld_derive_keys(dek, salt, &e.keys[k]));
		SL_GUARD(sld_header_build(&q, plaintext_len[k], salt, &e.keys[k], &e.h[k]));
		if (e.seekable)
			SL_GUARD(write_at(out_fd[k], e.h[k]->raw, e.h[k]->len, 0));
		else
			SL_GUARD(sl_write_all(out_fd[k], e.h[k]->raw, e.h[k]->len, "output"));
		count += e.h[k]->chunk_count;
		e.total += plaintext_len[k];
	}
	e.items = calloc(count, sizeof(*e.items));
	SL_ENSURE(e.items != NULL, SL_E_NOMEM, "encryption plan (%llu chunks)",
	          (unsigned long long)count);
	/* round-robin over the files: neighbouring chunks go to different files,
	 * so parallel writes rarely wait on one file's lock */
	for (uint64_t c = 0, k = 0; k < count; c++)
		for (uint32_t f = 0; f < n; f++)
			if (c < e.h[f]->chunk_count)
				e.items[k++] = (struct item){f, c};
	struct sld_pool_ops ops = {
	    .ctx = &e,
	    .count = count,
	    .buf_size = (size_t)q.chunk_size + SL_AEAD_TAG_LEN,
	    .threads = q.threads,
	    .worker_init = par_worker_init,
	    .worker_fini = par_worker_fini,
	    .work = par_work,
	    .emit = par_emit,
	};
	SL_GUARD(sld_pool_run(&ops));
	if (headers != NULL)
		for (uint32_t k = 0; k < n; k++) {
			headers[k] = e.h[k];
			e.h[k] = NULL;
		}
	rc = SL_OK;
out:
	for (uint32_t k = 0; e.keys != NULL && k < n; k++)
		sld_keys_free(&e.keys[k]);
	for (uint32_t k = 0; e.h != NULL && k < n; k++)
		sl_sld_header_free(e.h[k]);
	free(e.keys);
	free(e.h);
	free(e.items);
	return rc;
}
