/* The CPU build of the GPU's AES-256-GCM (include/seclaunch/gcm_soft.h). */
#include <stdlib.h>
#include <string.h>

#include "gcm_arith.h"
#include "seclaunch/gcm_soft.h"
#include "seclaunch/secret.h"

static const uint8_t sbox[256] = {SLG_SBOX_INIT};

static void params_init(slg_params *p, const uint8_t key[32])
{
	memset(p, 0, sizeof(*p));
	slg_params_init(p, key, NULL, sbox);
}

static slg_u128 load_block(const uint8_t *p, size_t n)
{
	uint8_t b[16] = {0};
	memcpy(b, p, n);
	return (slg_u128){slg_be64(b), slg_be64(b + 8)};
}

/* Generic GHASH input: AAD blocks, ciphertext blocks, the lengths block. */
static slg_u128 generic_block(const uint8_t *aad, size_t aad_len, const uint8_t *ct, size_t len,
                              uint64_t k)
{
	uint64_t na = (aad_len + 15) / 16, nc = (len + 15) / 16;
	if (k < na) {
		size_t off = (size_t)k * 16;
		return load_block(aad + off, aad_len - off < 16 ? aad_len - off : 16);
	}
	if (k < na + nc) {
		size_t off = (size_t)(k - na) * 16;
		return load_block(ct + off, len - off < 16 ? len - off : 16);
	}
	return (slg_u128){(uint64_t)aad_len * 8, (uint64_t)len * 8};
}

/* GHASH cut as the kernel cuts it: segments by Horner, weighed by H^(blocks
 * after them), XORed together. */
static slg_u128 generic_ghash(const slg_params *p, const uint8_t *aad, size_t aad_len,
                              const uint8_t *ct, size_t len)
{
	uint64_t m = (aad_len + 15) / 16 + (len + 15) / 16 + 1;
	slg_u128 acc = {0, 0};
	for (uint64_t first = 0; first < m; first += SLG_SEG_BLOCKS) {
		uint64_t end = first + SLG_SEG_BLOCKS < m ? first + SLG_SEG_BLOCKS : m;
		slg_u128 y = {0, 0};
		for (uint64_t k = first; k < end; k++) {
			slg_u128 x = generic_block(aad, aad_len, ct, len, k);
			y.hi ^= x.hi, y.lo ^= x.lo;
			y = slg_gmul(y, p->h);
		}
		y = slg_gmul(y, slg_gpow(p->h, m - end));
		acc.hi ^= y.hi, acc.lo ^= y.lo;
	}
	return acc;
}

static void ctr_block(const slg_params *p, const uint8_t nonce[12], uint32_t ctr, uint8_t ks[16])
{
	uint8_t cb[16];
	memcpy(cb, nonce, 12);
	cb[12] = (uint8_t)(ctr >> 24), cb[13] = (uint8_t)(ctr >> 16);
	cb[14] = (uint8_t)(ctr >> 8), cb[15] = (uint8_t)ctr;
	slg_aes256_block(p->rk, p->te0, sbox, cb, ks);
}

static void ctr_xor(const slg_params *p, const uint8_t nonce[12], const uint8_t *in, size_t len,
                    uint8_t *out)
{
	uint8_t ks[16];
	for (size_t off = 0, j = 0; off < len; off += 16, j++) {
		ctr_block(p, nonce, (uint32_t)(2 + j), ks);
		for (size_t i = 0; i < 16 && off + i < len; i++)
			out[off + i] = (uint8_t)(in[off + i] ^ ks[i]);
	}
	sl_wipe(ks, sizeof(ks));
}

static void make_tag(const slg_params *p, const uint8_t nonce[12], slg_u128 s, uint8_t tag[16])
{
	uint8_t ek[16];
	ctr_block(p, nonce, 1, ek);
	slg_put_be64(tag, slg_be64(ek) ^ s.hi);
	slg_put_be64(tag + 8, slg_be64(ek + 8) ^ s.lo);
	sl_wipe(ek, sizeof(ek));
}

void sl_gcm_soft_seal(const uint8_t key[static 32], const uint8_t nonce[static 12],
                      const uint8_t *aad, size_t aad_len, const uint8_t *pt, size_t len,
                      uint8_t *ct, uint8_t tag[static 16])
{
	slg_params p;
	params_init(&p, key);
	ctr_xor(&p, nonce, pt, len, ct);
	make_tag(&p, nonce, generic_ghash(&p, aad, aad_len, ct, len), tag);
	sl_wipe(&p, sizeof(p));
}

sl_err sl_gcm_soft_open(const uint8_t key[static 32], const uint8_t nonce[static 12],
                        const uint8_t *aad, size_t aad_len, const uint8_t *ct, size_t len,
                        const uint8_t tag[static 16], uint8_t *out)
{
	sl_err rc = SL_E_INTEGRITY;
	slg_params p;
	uint8_t want[16];
	params_init(&p, key);
	make_tag(&p, nonce, generic_ghash(&p, aad, aad_len, ct, len), want);
	if (!sl_ct_eq(want, tag, 16)) {
		if (len > 0)
			memset(out, 0, len);
		rc = sl_err_set(SL_E_INTEGRITY, "AES-256-GCM tag mismatch");
		goto out;
	}
	ctr_xor(&p, nonce, ct, len, out);
	rc = SL_OK;
out:
	sl_wipe(&p, sizeof(p));
	sl_wipe(want, sizeof(want));
	return rc;
}

sl_err sl_gcm_soft_sld(const uint8_t key[static 32], const uint8_t digest[static 32],
                       uint64_t first, uint32_t n, uint32_t chunk_size, uint32_t last_len,
                       bool final_last, const uint8_t *src, uint8_t *dst, uint32_t *ok)
{
	sl_err rc = SL_E_INTEGRITY;
	slg_params p;
	uint64_t *acc = NULL;
	slg_batch b = {.first_chunk = first,
	               .nchunks = n,
	               .chunk_size = chunk_size,
	               .last_len = last_len,
	               .final_last = final_last ? 1 : 0};

	SL_ENSURE(n > 0 && chunk_size >= 16 && chunk_size % 16 == 0 && last_len <= chunk_size,
	          SL_E_INTERNAL, "GCM batch: bad geometry");
	params_init(&p, key);
	memcpy(p.digest, digest, 32);
	acc = calloc(2 * (size_t)n, sizeof(*acc));
	SL_ENSURE(acc != NULL, SL_E_NOMEM, "GCM batch: allocating accumulators");
	/* the order the device runs them in: GHASH, tags, CTR */
	for (uint64_t t = 0; t < slg_ghash_threads(&b); t++)
		slg_ghash_thread(&p, &b, src, acc, t);
	for (uint32_t c = 0; c < n; c++)
		slg_tag_thread(&p, p.te0, sbox, &b, src, acc, ok, c);
	for (uint64_t t = 0; t < slg_ctr_threads(&b); t++)
		slg_ctr_thread(&p, p.te0, sbox, &b, src, dst, ok, t);
	for (uint32_t c = 0; c < n; c++)
		SL_ENSURE(ok[first + c] == 1, SL_E_INTEGRITY,
		          "chunk %llu: authentication failed (tampered, reordered or wrong key)",
		          (unsigned long long)(first + c));
	rc = SL_OK;
out:
	sl_wipe(&p, sizeof(p));
	free(acc);
	return rc;
}
