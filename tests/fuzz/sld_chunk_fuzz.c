/* libFuzzer: the chunk decryption path. The input's first byte picks the
 * AEAD and the thread count; the rest is the chunk area of an SLD file
 * whose header is valid for a fixed key and salt (built with the library's
 * own writer, so the header MAC and key check pass and every input reaches
 * size checks, the pool, per-chunk authentication and the sink). Checks:
 * chunks reach the sink in order, a success covers every byte, a failure
 * is an integrity failure, random access agrees with the stream. */
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
};

static sl_err sink_fn(void *ctx, uint64_t i, const uint8_t *plain, size_t len)
{
	struct sink *s = ctx;
	(void)plain;
	if (i != s->next)
		abort(); /* out of order */
	s->next++;
	s->bytes += len;
	return SL_OK;
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

	sl_err rc = sl_sld_open(fd, "fuzz.sld", dek, &r);
	if (rc == SL_OK) {
		struct sink s = {0};
		rc = sl_sld_decrypt(r, threads, sink_fn, &s, NULL, NULL);
		if (rc == SL_OK && (s.next != chunks || s.bytes != plen))
			abort();
		if (rc != SL_OK && sl_err_exit_code(rc) != SL_CAT_INTEGRITY)
			abort();
		/* random access agrees with the stream */
		uint8_t *buf = malloc(CS + 16);
		for (uint64_t i = 0; buf != NULL && i < chunks && i < 4; i++) {
			size_t len;
			sl_err rc2 = sl_sld_read_chunk(r, i, buf, CS + 16, &len);
			if (rc == SL_OK && rc2 != SL_OK)
				abort();
		}
		free(buf);
		sl_sld_close(r);
	} else if (consistent || sl_err_exit_code(rc) != SL_CAT_INTEGRITY) {
		/* a consistent size must open; anything else is a size error */
		abort();
	}
	sl_sld_header_free(h);
	sld_keys_free(&keys);
	close(fd);
	return 0;
}
