/* AES-256-GCM arithmetic for SLD chunks, written once for two compilers:
 * the CUDA kernel (jobside/gcm_kernel.cu, nvcc) and the CPU (crypto/gcm_soft.c,
 * the test fake's kernel stand-in). Only fixed-width integers, no libc.
 *
 * The work is cut the way the GPU runs it, and the CPU runs the very same cut:
 *   - CTR: one thread per 16-byte block (keystream for counter 2 + j of the
 *     chunk's nonce, XORed into the ciphertext);
 *   - GHASH: one thread per segment of SLG_SEG_BLOCKS blocks of the chunk's
 *     GHASH input (AAD, ciphertext, lengths). Each computes its segment by
 *     Horner's rule and weighs it by H^(blocks after the segment); GHASH is the
 *     XOR of the weighted segments (the reduction);
 *   - tag: one thread per chunk: E_K(J0) XOR GHASH, compared in constant time
 *     with the chunk's stored tag. CTR writes zeros for a chunk whose tag
 *     failed, so no unauthenticated plaintext is ever produced.
 *
 * AES runs on a T-table; it and the S-box are passed in (host: the params and
 * a static table; device: copies in shared memory). Table lookups are not
 * constant time on a CPU: the CPU build is a reference for tests, seclaunch's
 * own decryption stays with OpenSSL. GHASH multiplies bit by bit, without
 * tables, in constant time. */
#ifndef SECLAUNCH_CRYPTO_GCM_ARITH_H
#define SECLAUNCH_CRYPTO_GCM_ARITH_H

#include <stdint.h>

#ifdef __CUDACC__
#define SLG_FN __host__ __device__ static inline
#define SLG_XOR64(p, v) atomicXor((unsigned long long *)(p), (unsigned long long)(v))
#else
#define SLG_FN static inline
#define SLG_XOR64(p, v) (*(p) ^= (v))
#endif

#define SLG_SEG_BLOCKS 64 /* GHASH blocks per thread */
#define SLG_AAD_LEN 41    /* SHA-256(header) || u64be(i) || final */
#define SLG_AAD_BLOCKS 3
#define SLG_TAG_LEN 16

#define SLG_SBOX_INIT                                                                              \
	0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab,  \
	    0x76, 0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c,    \
	    0xa4, 0x72, 0xc0, 0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5,    \
	    0xf1, 0x71, 0xd8, 0x31, 0x15, 0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07,    \
	    0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75, 0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a,    \
	    0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3, 0x2f, 0x84, 0x53, 0xd1, 0x00, 0xed, 0x20,    \
	    0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf, 0xd0, 0xef, 0xaa,    \
	    0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8, 0x51,    \
	    0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3,    \
	    0xd2, 0xcd, 0x0c, 0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64,    \
	    0x5d, 0x19, 0x73, 0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8,    \
	    0x14, 0xde, 0x5e, 0x0b, 0xdb, 0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2,    \
	    0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79, 0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e,    \
	    0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08, 0xba, 0x78, 0x25, 0x2e, 0x1c,    \
	    0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a, 0x70, 0x3e, 0xb5,    \
	    0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e, 0xe1,    \
	    0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28,    \
	    0xdf, 0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0,    \
	    0x54, 0xbb, 0x16

/* An element of GF(2^128) in GCM's bit order: hi holds bytes 0..7 big-endian. */
typedef struct {
	uint64_t hi, lo;
} slg_u128;

/* What every thread of a run needs, in device memory on the GPU. */
typedef struct {
	uint32_t rk[60];    /* AES-256 round keys, big-endian words */
	uint32_t te0[256];  /* the AES T-table (SubBytes and MixColumns of one byte) */
	slg_u128 h;         /* E_K(0^128) */
	uint8_t digest[32]; /* SHA-256 of the SLD header (AAD) */
} slg_params;

/* One batch: nchunks consecutive chunks of a file, ciphertext with tags as in
 * the file (stride chunk_size + 16), plaintext packed (stride chunk_size). */
typedef struct {
	uint64_t first_chunk; /* file index of the batch's first chunk */
	uint32_t nchunks;
	uint32_t chunk_size; /* plaintext bytes of a full chunk (multiple of 16) */
	uint32_t last_len;   /* plaintext bytes of the batch's last chunk */
	uint32_t final_last; /* 1: the batch's last chunk is the file's last */
} slg_batch;

SLG_FN uint64_t slg_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

SLG_FN void slg_put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* ---- AES-256 ------------------------------------------------------------ */
SLG_FN uint8_t slg_xtime(uint8_t x)
{
	return (uint8_t)((x << 1) ^ (((x >> 7) & 1) * 0x1b));
}

SLG_FN uint32_t slg_be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

SLG_FN void slg_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

SLG_FN uint32_t slg_ror(uint32_t x, int n)
{
	return (x >> n) | (x << (32 - n));
}

SLG_FN void slg_aes256_expand(const uint8_t key[32], uint32_t rk[60], const uint8_t *sbox)
{
	uint8_t b[240];
	uint8_t rcon = 1;
	for (int i = 0; i < 32; i++)
		b[i] = key[i];
	for (int i = 8; i < 60; i++) {
		uint8_t t[4];
		for (int k = 0; k < 4; k++)
			t[k] = b[4 * (i - 1) + k];
		if (i % 8 == 0) {
			uint8_t t0 = t[0];
			t[0] = (uint8_t)(sbox[t[1]] ^ rcon);
			t[1] = sbox[t[2]];
			t[2] = sbox[t[3]];
			t[3] = sbox[t0];
			rcon = slg_xtime(rcon);
		} else if (i % 8 == 4) {
			for (int k = 0; k < 4; k++)
				t[k] = sbox[t[k]];
		}
		for (int k = 0; k < 4; k++)
			b[4 * i + k] = (uint8_t)(b[4 * (i - 8) + k] ^ t[k]);
	}
	for (int i = 0; i < 60; i++)
		rk[i] = slg_be32(b + 4 * i);
	for (int i = 0; i < 240; i++)
		b[i] = 0;
}

/* te0[x] = (2 S(x), S(x), S(x), 3 S(x)): a round is 16 lookups and XORs. */
SLG_FN void slg_te0_init(uint32_t te0[256], const uint8_t *sbox)
{
	for (int x = 0; x < 256; x++) {
		uint8_t s = sbox[x], s2 = slg_xtime(s);
		te0[x] = ((uint32_t)s2 << 24) | ((uint32_t)s << 16) | ((uint32_t)s << 8) |
		         (uint32_t)(uint8_t)(s2 ^ s);
	}
}

SLG_FN void slg_aes256_block(const uint32_t rk[60], const uint32_t *te0, const uint8_t *sbox,
                             const uint8_t in[16], uint8_t out[16])
{
	uint32_t s0 = slg_be32(in) ^ rk[0], s1 = slg_be32(in + 4) ^ rk[1];
	uint32_t s2 = slg_be32(in + 8) ^ rk[2], s3 = slg_be32(in + 12) ^ rk[3];
	for (int r = 1; r < 14; r++) {
		uint32_t t0 = te0[s0 >> 24] ^ slg_ror(te0[(s1 >> 16) & 0xff], 8) ^
		              slg_ror(te0[(s2 >> 8) & 0xff], 16) ^ slg_ror(te0[s3 & 0xff], 24) ^
		              rk[4 * r];
		uint32_t t1 = te0[s1 >> 24] ^ slg_ror(te0[(s2 >> 16) & 0xff], 8) ^
		              slg_ror(te0[(s3 >> 8) & 0xff], 16) ^ slg_ror(te0[s0 & 0xff], 24) ^
		              rk[4 * r + 1];
		uint32_t t2 = te0[s2 >> 24] ^ slg_ror(te0[(s3 >> 16) & 0xff], 8) ^
		              slg_ror(te0[(s0 >> 8) & 0xff], 16) ^ slg_ror(te0[s1 & 0xff], 24) ^
		              rk[4 * r + 2];
		uint32_t t3 = te0[s3 >> 24] ^ slg_ror(te0[(s0 >> 16) & 0xff], 8) ^
		              slg_ror(te0[(s1 >> 8) & 0xff], 16) ^ slg_ror(te0[s2 & 0xff], 24) ^
		              rk[4 * r + 3];
		s0 = t0, s1 = t1, s2 = t2, s3 = t3;
	}
	/* the last round has no MixColumns */
	uint32_t w[4] = {s0, s1, s2, s3};
	for (int c = 0; c < 4; c++) {
		uint32_t o = ((uint32_t)sbox[w[c] >> 24] << 24) |
		             ((uint32_t)sbox[(w[(c + 1) & 3] >> 16) & 0xff] << 16) |
		             ((uint32_t)sbox[(w[(c + 2) & 3] >> 8) & 0xff] << 8) |
		             (uint32_t)sbox[w[(c + 3) & 3] & 0xff];
		slg_put_be32(out + 4 * c, o ^ rk[56 + c]);
	}
}

/* Round keys, T-table, H and the AAD digest for a file key. */
SLG_FN void slg_params_init(slg_params *p, const uint8_t key[32], const uint8_t digest[32],
                            const uint8_t *sbox)
{
	uint8_t zero[16] = {0}, h[16];
	slg_aes256_expand(key, p->rk, sbox);
	slg_te0_init(p->te0, sbox);
	slg_aes256_block(p->rk, p->te0, sbox, zero, h);
	p->h.hi = slg_be64(h);
	p->h.lo = slg_be64(h + 8);
	for (int i = 0; i < 32; i++)
		p->digest[i] = digest != 0 ? digest[i] : 0;
	for (int i = 0; i < 16; i++)
		h[i] = 0;
}

/* ---- GF(2^128) ---------------------------------------------------------- */
/* Constant time: no branch or index depends on the operands. */
SLG_FN slg_u128 slg_gmul(slg_u128 x, slg_u128 y)
{
	slg_u128 z = {0, 0}, v = y;
	for (int i = 0; i < 128; i++) {
		uint64_t bit = i < 64 ? (x.hi >> (63 - i)) & 1 : (x.lo >> (127 - i)) & 1;
		uint64_t m = (uint64_t)0 - bit;
		z.hi ^= v.hi & m;
		z.lo ^= v.lo & m;
		uint64_t carry = (uint64_t)0 - (v.lo & 1);
		v.lo = (v.lo >> 1) | (v.hi << 63);
		v.hi = (v.hi >> 1) ^ (0xe100000000000000ull & carry);
	}
	return z;
}

/* h^e; e = 0 gives GCM's one (the leftmost bit set). */
SLG_FN slg_u128 slg_gpow(slg_u128 h, uint64_t e)
{
	slg_u128 r = {0x8000000000000000ull, 0};
	slg_u128 b = h;
	while (e != 0) {
		if (e & 1)
			r = slg_gmul(r, b);
		e >>= 1;
		if (e != 0)
			b = slg_gmul(b, b);
	}
	return r;
}

/* ---- one chunk's geometry ---------------------------------------------- */
SLG_FN uint32_t slg_chunk_len(const slg_batch *b, uint32_t c)
{
	return c + 1 == b->nchunks ? b->last_len : b->chunk_size;
}

/* GHASH input blocks of a chunk of len bytes: AAD, ciphertext, lengths. */
SLG_FN uint64_t slg_ghash_blocks(uint32_t len)
{
	return SLG_AAD_BLOCKS + ((uint64_t)len + 15) / 16 + 1;
}

SLG_FN uint64_t slg_segs_per_chunk(const slg_batch *b)
{
	return (slg_ghash_blocks(b->chunk_size) + SLG_SEG_BLOCKS - 1) / SLG_SEG_BLOCKS;
}

/* Block k of chunk c's GHASH input. */
SLG_FN slg_u128 slg_ghash_input(const slg_params *p, const slg_batch *b, const uint8_t *src,
                                uint32_t c, uint64_t k)
{
	uint8_t blk[16];
	uint32_t len = slg_chunk_len(b, c);
	uint64_t nct = ((uint64_t)len + 15) / 16;
	for (int i = 0; i < 16; i++)
		blk[i] = 0;
	if (k < SLG_AAD_BLOCKS) {
		uint8_t aad[48];
		for (int i = 0; i < 32; i++)
			aad[i] = p->digest[i];
		slg_put_be64(aad + 32, b->first_chunk + c);
		aad[40] = (uint8_t)(b->final_last && c + 1 == b->nchunks);
		for (int i = SLG_AAD_LEN; i < 48; i++)
			aad[i] = 0;
		for (int i = 0; i < 16; i++)
			blk[i] = aad[16 * k + i];
	} else if (k < SLG_AAD_BLOCKS + nct) {
		const uint8_t *ct = src + (uint64_t)c * ((uint64_t)b->chunk_size + SLG_TAG_LEN);
		uint64_t off = (k - SLG_AAD_BLOCKS) * 16;
		uint64_t n = len - off < 16 ? len - off : 16;
		for (uint64_t i = 0; i < n; i++)
			blk[i] = ct[off + i];
	} else {
		slg_put_be64(blk, (uint64_t)SLG_AAD_LEN * 8);
		slg_put_be64(blk + 8, (uint64_t)len * 8);
	}
	slg_u128 x = {slg_be64(blk), slg_be64(blk + 8)};
	return x;
}

/* The counter block of chunk ci, counter value ctr (J0 has 1, data 2...). */
SLG_FN void slg_counter(uint64_t ci, uint32_t ctr, uint8_t out[16])
{
	out[0] = out[1] = out[2] = out[3] = 0;
	slg_put_be64(out + 4, ci);
	out[12] = (uint8_t)(ctr >> 24);
	out[13] = (uint8_t)(ctr >> 16);
	out[14] = (uint8_t)(ctr >> 8);
	out[15] = (uint8_t)ctr;
}

/* ---- the three per-thread steps ---------------------------------------- */

/* GHASH thread t of a batch: segment t % segs of chunk t / segs, weighed and
 * XORed into acc[2c], acc[2c+1] (zeroed before the batch). */
SLG_FN void slg_ghash_thread(const slg_params *p, const slg_batch *b, const uint8_t *src,
                             uint64_t *acc, uint64_t t)
{
	uint64_t segs = slg_segs_per_chunk(b);
	uint32_t c = (uint32_t)(t / segs);
	uint64_t s = t % segs;
	if (c >= b->nchunks)
		return;
	uint64_t m = slg_ghash_blocks(slg_chunk_len(b, c));
	uint64_t first = s * SLG_SEG_BLOCKS;
	if (first >= m)
		return;
	uint64_t end = first + SLG_SEG_BLOCKS < m ? first + SLG_SEG_BLOCKS : m;
	slg_u128 y = {0, 0};
	for (uint64_t k = first; k < end; k++) {
		slg_u128 x = slg_ghash_input(p, b, src, c, k);
		y.hi ^= x.hi;
		y.lo ^= x.lo;
		y = slg_gmul(y, p->h);
	}
	y = slg_gmul(y, slg_gpow(p->h, m - end));
	SLG_XOR64(&acc[2 * (uint64_t)c], y.hi);
	SLG_XOR64(&acc[2 * (uint64_t)c + 1], y.lo);
}

/* Tag thread c: ok[c] = 1 when the stored tag matches (constant time), 0
 * otherwise; the accumulator is zeroed for the next batch. */
SLG_FN void slg_tag_thread(const slg_params *p, const uint32_t *te0, const uint8_t *sbox,
                           const slg_batch *b, const uint8_t *src, uint64_t *acc, uint32_t *ok,
                           uint32_t c)
{
	if (c >= b->nchunks)
		return;
	uint8_t j0[16], ek[16];
	uint32_t len = slg_chunk_len(b, c);
	const uint8_t *tag =
	    src + (uint64_t)c * ((uint64_t)b->chunk_size + SLG_TAG_LEN) + (uint64_t)len;
	slg_counter(b->first_chunk + c, 1, j0);
	slg_aes256_block(p->rk, te0, sbox, j0, ek);
	uint64_t d = (slg_be64(ek) ^ acc[2 * (uint64_t)c] ^ slg_be64(tag)) |
	             (slg_be64(ek + 8) ^ acc[2 * (uint64_t)c + 1] ^ slg_be64(tag + 8));
	acc[2 * (uint64_t)c] = 0;
	acc[2 * (uint64_t)c + 1] = 0;
	ok[b->first_chunk + c] = (uint32_t)(((d | ((uint64_t)0 - d)) >> 63) ^ 1);
}

/* CTR thread t: 16-byte block t % (chunk_size / 16) of chunk t / that;
 * plaintext only where ok says the chunk's tag verified, zeros otherwise. */
SLG_FN void slg_ctr_thread(const slg_params *p, const uint32_t *te0, const uint8_t *sbox,
                           const slg_batch *b, const uint8_t *src, uint8_t *dst, const uint32_t *ok,
                           uint64_t t)
{
	uint64_t bpc = b->chunk_size / 16;
	uint32_t c = (uint32_t)(t / bpc);
	uint64_t j = t % bpc;
	if (c >= b->nchunks)
		return;
	uint32_t len = slg_chunk_len(b, c);
	uint64_t off = j * 16;
	if (off >= len)
		return;
	uint64_t n = len - off < 16 ? len - off : 16;
	const uint8_t *ct = src + (uint64_t)c * ((uint64_t)b->chunk_size + SLG_TAG_LEN) + off;
	uint8_t *pt = dst + (uint64_t)c * b->chunk_size + off;
	uint8_t cb[16], ks[16];
	slg_counter(b->first_chunk + c, (uint32_t)(2 + j), cb);
	slg_aes256_block(p->rk, te0, sbox, cb, ks);
	uint8_t keep = (uint8_t)(0 - (ok[b->first_chunk + c] & 1));
	for (uint64_t i = 0; i < n; i++)
		pt[i] = (uint8_t)((ct[i] ^ ks[i]) & keep);
}

/* Thread counts of a batch for the GHASH and CTR steps. */
SLG_FN uint64_t slg_ghash_threads(const slg_batch *b)
{
	return (uint64_t)b->nchunks * slg_segs_per_chunk(b);
}

SLG_FN uint64_t slg_ctr_threads(const slg_batch *b)
{
	return (uint64_t)b->nchunks * (b->chunk_size / 16);
}

#endif
