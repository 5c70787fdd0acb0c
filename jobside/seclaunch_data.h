/* libseclaunch_data.so: puts a dataset `seclaunch run` staged onto the GPU
 * from inside the job's own process and CUDA context (docs/job-interface.md,
 * "GPU"). No CUDA IPC: the job's context allocates (or the caller hands in)
 * the device buffer, and the library fills it from the host-staged memory
 * file through a pool of cuMemHostAlloc pinned buffers (never
 * cuMemHostRegister, which confidential-computing mode refuses), two
 * streams, copies of at least 8 MiB, a pinned buffer reused only after its
 * copy's event completed, every pinned buffer zeroed before it is freed.
 *
 * With `seclaunch run --gpu-decrypt` the memory file holds the SLD
 * ciphertext and the file key: chunks are copied as ciphertext and
 * decrypted by an AES-256-GCM kernel (gcm_kernel.ptx, beside the library),
 * each chunk's tag verified on the device before it counts; a failing tag
 * clears the device buffer and fails with SLDATA_E_INTEGRITY (6).
 *
 * The CUDA driver is loaded with dlopen("libcuda.so.1") (or
 * $SECLAUNCH_LIBCUDA): the library links no CUDA library. Errors are
 * returned as SLDATA_* codes (the seclaunch exit codes), the message from
 * sldata_last_error() (thread-local). */
#ifndef SECLAUNCH_DATA_H
#define SECLAUNCH_DATA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
	SLDATA_OK = 0,
	SLDATA_E_USAGE = 1,     /* bad argument, unknown dataset */
	SLDATA_E_INPUT = 2,     /* SECLAUNCH_DATA or the data service's answer malformed */
	SLDATA_E_INTEGRITY = 6, /* a chunk's tag failed (GPU decryption) */
	SLDATA_E_SYSTEM = 7,    /* CUDA, memory, the data service unreachable */
	SLDATA_E_CANCELLED = 8, /* sldata_cancel() was called */
};

typedef struct sldata sldata;

/* Opens dataset_id: its SECLAUNCH_DATA entry when it has a descriptor,
 * else from the data service ($SECLAUNCH_DATA_SOCKET). */
int sldata_open(const char *dataset_id, sldata **out);
/* Opens a host-staged plaintext memory file of size bytes (the descriptor
 * is duplicated; the caller keeps its own). */
int sldata_open_fd(int fd, uint64_t size, sldata **out);
void sldata_close(sldata *d); /* NULL-safe; wipes the key of a --gpu-decrypt dataset */

uint64_t sldata_size(const sldata *d); /* plaintext bytes */
/* 1 when the dataset is decrypted on the GPU (--gpu-decrypt). */
int sldata_gpu_decrypt(const sldata *d);

/* Fills device memory with the plaintext. dptr 0: the library allocates
 * sldata_size bytes on device (in the calling thread's current context, or
 * device's primary context, which PyTorch and CuPy use) and returns it in
 * *out (free it with sldata_device_free); else dptr is the caller's buffer
 * of at least sldata_size bytes in the current context. On failure nothing
 * the library allocated is left, and the caller's buffer is cleared. */
int sldata_to_device(sldata *d, int device, uint64_t dptr, uint64_t *out);
/* Zeroes len bytes at dptr and waits until that is done. */
int sldata_device_clear(uint64_t dptr, uint64_t len);
/* Clears, then frees a buffer sldata_to_device allocated. */
int sldata_device_free(uint64_t dptr, uint64_t len);

/* Stops a fill in progress at the next copy (async-signal-safe): it clears
 * what it wrote and returns SLDATA_E_CANCELLED. */
void sldata_cancel(void);

typedef struct sldata_stats {
	uint64_t bytes_copied; /* host to device, ciphertext with tags when decrypting */
	uint64_t copies;
	uint64_t min_copy, max_copy;
	uint32_t pinned_buffers;
	uint32_t streams;
	uint64_t kernel_launches;
	double seconds; /* wall time of the last sldata_to_device */
} sldata_stats;
void sldata_get_stats(const sldata *d, sldata_stats *out);

const char *sldata_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
