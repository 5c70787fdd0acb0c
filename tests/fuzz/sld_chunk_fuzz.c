/* libFuzzer: the chunk decryption path. The input's first byte picks the
 * AEAD and the thread count; the rest is the chunk area of an SLD file
 * whose header is valid for a fixed key and salt (built with the library's
 * own writer, so the header MAC and key check pass and every input reaches
 * size checks, the pool, per-chunk authentication and the sink), read
 * both from a file (sl_sld_open) and from memory (sl_sld_open_mem, chunks
 * authenticated in place). Checks: chunks reach the sink in order, a
 * success covers every byte, a failure is an integrity failure, random
 * access agrees with the stream, and memory gives what the file gives
 * (the same result, error text and plaintext). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../crypto/sld_internal.h"
#include "seclaunch/util.h"

#define CS SL_SLD_CHUNK_MIN

struct sink {
	uint64_t next;
	uint64_t bytes;
	uint8_t digest[32]; /* hash chain over the chunks' plaintext */
};

static sl_err sink_fn(void *ctx, uint64_t i, const uint8_t *plain, size_t len)
{
	struct sink *s = ctx;
	(void)plain;
	if (i != s->next)
		abort(); /* out of order */
	s->next++;
	s->bytes += len;
	uint8_t in[32 + 32];
	memcpy(in, s->digest, 32);
	memset(in + 32, 0, 32);
	if (len > 0)
		sl_sha256(plain, len, in + 32);
	sl_sha256(in, sizeof(in), s->digest);
	return SL_OK;
}

/* The whole run over one opened reader (or its open error): result, error
 * text, what reached the sink. */
struct outcome {
	sl_err open_rc, rc;
	char detail[512];
	struct sink s;
};

static void run_reader(sl_err open_rc, sl_sld_reader *r, unsigned threads, uint64_t chunks,
                       uint64_t plen, struct outcome *o)
{
	o->open_rc = open_rc;
	o->rc = open_rc;
	if (open_rc == SL_OK) {
		o->rc = sl_sld_decrypt(r, threads, sink_fn, &o->s, NULL, NULL);
		if (o->rc == SL_OK && (o->s.next != chunks || o->s.bytes != plen))
			abort();
		if (o->rc != SL_OK && sl_err_exit_code(o->rc) != SL_CAT_INTEGRITY)
			abort();
		/* random access agrees with the stream; a failed chunk leaves
		 * no plaintext behind (the buffer is wiped) */
		uint8_t *buf = malloc(CS + 16);
		for (uint64_t i = 0; buf != NULL && i < chunks && i < 4; i++) {
			size_t len;
			memset(buf, 0xAA, CS + 16);
			sl_err rc2 = sl_sld_read_chunk(r, i, buf, CS + 16, &len);
			if (o->rc == SL_OK && rc2 != SL_OK)
				abort();
			for (size_t k = 0;
			     rc2 != SL_OK && k < sl_sld_chunk_plain_len(sl_sld_reader_header(r), i);
			     k++)
				if (buf[k] != 0)
					abort();
		}
		free(buf);
	}
	snprintf(o->detail, sizeof(o->detail), "%s", o->rc != SL_OK ? sl_err_detail() : "");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static sl_secret *dek;
	static const uint8_t salt[SL_SLD_SALT_LEN] = {0xa5, 0xa5, 0xa5, 0xa5};
	if (dek == NULL) {
		if (sl_crypto_init() != SL_OK || sl_secret_new(SL_SLD_DEK_LEN, &dek) != SL_OK)
			abort();
		memset(sl_secret_data(dek), 0x5a, SL_SLD_DEK_LEN);
	}
	if (size < 1)
		return 0;
	sl_aead_id aead = (data[0] & 1) ? SL_AEAD_XCHACHA20_POLY1305 : SL_AEAD_AES_256_GCM;
	unsigned threads = 1 + ((data[0] >> 1) & 3);
	const uint8_t *body = data + 1;
	size_t blen = size - 1;

	/* the plaintext length that makes the file size consistent, if any */
	uint64_t chunks = blen / (CS + 16) + (blen % (CS + 16) != 0);
	if (chunks == 0)
		chunks = 1;
	if (blen < 16 * chunks)
		return 0;
	uint64_t plen = blen - 16 * chunks;
	bool consistent = sld_chunk_count(plen, CS) == chunks;

	struct sld_keys keys = {0};
	sl_sld_header *h = NULL;
	sl_sld_reader *r = NULL;
	sl_sld_encrypt_params p = {.dataset_id = "fuzz", .aead = aead, .chunk_size = CS};
	int fd = memfd_create("fuzz.sld", MFD_CLOEXEC);
	if (fd < 0 || sld_derive_keys(dek, salt, &keys) != SL_OK ||
	    sld_header_build(&p, consistent ? plen : 0, salt, &keys, &h) != SL_OK)
		abort();
	if (sl_write_all(fd, sl_sld_header_bytes(h), sl_sld_header_len(h), "fuzz") != SL_OK ||
	    sl_write_all(fd, body, blen, "fuzz") != SL_OK)
		abort();

	/* the same bytes from a file and from memory of exactly their size */
	struct outcome of = {0}, om = {0};
	sl_err rc = sl_sld_open(fd, "fuzz.sld", dek, &r);
	run_reader(rc, r, threads, chunks, plen, &of);
	sl_sld_close(r);
	r = NULL;
	size_t mlen = sl_sld_header_len(h) + blen;
	uint8_t *mem = malloc(mlen);
	if (mem == NULL)
		abort();
	memcpy(mem, sl_sld_header_bytes(h), sl_sld_header_len(h));
	memcpy(mem + sl_sld_header_len(h), body, blen);
	rc = sl_sld_open_mem(mem, mlen, "fuzz.sld", dek, &r);
	run_reader(rc, r, threads, chunks, plen, &om);
	sl_sld_close(r);
	free(mem);
	if (of.open_rc != om.open_rc || of.rc != om.rc || strcmp(of.detail, om.detail) != 0 ||
	    of.s.next != om.s.next || of.s.bytes != om.s.bytes ||
	    !sl_ct_eq(of.s.digest, om.s.digest, 32))
		abort(); /* memory must give what the file gives */
	if (of.open_rc != SL_OK && (consistent || sl_err_exit_code(of.open_rc) != SL_CAT_INTEGRITY))
		/* a consistent size must open; anything else is a size error */
		abort();
	sl_sld_header_free(h);
	sld_keys_free(&keys);
	close(fd);
	return 0;
}
