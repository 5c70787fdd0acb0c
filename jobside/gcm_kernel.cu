/* AES-256-GCM decryption of SLD chunks on the GPU (run --gpu-decrypt).
 * The arithmetic and the cut into threads are crypto/gcm_arith.h, the same
 * code crypto/gcm_soft.c compiles for the CPU and tests/unit/gcm_soft_test.c
 * checks against OpenSSL. Built to PTX by nvcc when a CUDA toolkit exists,
 * loaded by libseclaunch_data.so with cuModuleLoadData; launched per batch
 * on one stream in the order GHASH, tag, CTR. */
#include "../crypto/gcm_arith.h"

__constant__ uint8_t slg_sbox_c[256] = {SLG_SBOX_INIT};

/* The S-box and the T-table in shared memory: constant memory serialises
 * divergent reads. */
#define SBOX_SHARED(p)                                                                             \
	__shared__ uint8_t sbox[256];                                                              \
	__shared__ uint32_t te0[256];                                                              \
	for (unsigned i = threadIdx.x; i < 256; i += blockDim.x) {                                 \
		sbox[i] = slg_sbox_c[i];                                                           \
		te0[i] = (p)->te0[i];                                                              \
	}                                                                                          \
	__syncthreads()

extern "C" __global__ void sl_gcm_ghash(const slg_params *p, slg_batch b, const uint8_t *src,
                                        uint64_t *acc)
{
	uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (t < slg_ghash_threads(&b))
		slg_ghash_thread(p, &b, src, acc, t);
}

extern "C" __global__ void sl_gcm_tag(const slg_params *p, slg_batch b, const uint8_t *src,
                                      uint64_t *acc, uint32_t *ok)
{
	SBOX_SHARED(p);
	uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (t < b.nchunks)
		slg_tag_thread(p, te0, sbox, &b, src, acc, ok, (uint32_t)t);
}

extern "C" __global__ void sl_gcm_ctr(const slg_params *p, slg_batch b, const uint8_t *src,
                                      uint8_t *dst, const uint32_t *ok)
{
	SBOX_SHARED(p);
	uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (t < slg_ctr_threads(&b))
		slg_ctr_thread(p, te0, sbox, &b, src, dst, ok, t);
}
