/* Staging: where a dataset's plaintext lives while the job runs.
 *
 * host: one memory file per dataset, never a path on disk or tmpfs.
 *   memfd_secret(2) when the kernel offers it and the size fits the
 *   locked-memory limit (the pages leave the kernel's direct map), else
 *   memfd_create(2) + mlock where the limit permits. A memfd is sealed before
 *   the job sees it (F_SEAL_GROW, F_SEAL_SHRINK, F_SEAL_FUTURE_WRITE,
 *   F_SEAL_SEAL: the job can neither resize nor write it, while seclaunch's own
 *   mapping, made before the seal, stays writable so the wipe can zero it).
 *   A memfd_secret file cannot be sealed: its size is fixed by the kernel once
 *   set, write(2) is not supported on it, /proc/self/fd/N cannot reopen it,
 *   and its mode is set to 0400; a job that maps its own fd writable changes
 *   only its own input (seclaunch never reads staged data back).
 * gpu (--stage gpu): a host stage as above, uploaded by the job itself in its
 *   own CUDA context with libseclaunch_data.so (sl_stage_gpu_handoff); with
 *   --gpu-decrypt the host stage holds the file key and the ciphertext
 *   (sl_stage_sld_gpu_decrypt).
 * gpu-ipc: device buffers (CUDA driver API, loaded with dlopen at run time),
 *   filled through a few pinned host buffers by asynchronous copies while the
 *   next chunk is decrypted, handed to the job by CUDA IPC handles.
 *
 * sl_stage_sld fills a host stage by decrypting each chunk straight into its
 * place in the mapping (sl_sld_decrypt_into; the mapping is seen by no one
 * before sl_stage_seal, and is wiped whole on failure), and a GPU stage
 * through the decryptor's in-order sink; sl_stage_write is the in-order
 * writer for both; sl_stage_seal ends writing (every byte must have been written);
 * sl_stage_wipe zeroes and releases everything (host memory zeroed and
 * unmapped, device memory cleared and freed) and is safe to call on every
 * path, more than once.
 */
#ifndef SECLAUNCH_STAGE_H
#define SECLAUNCH_STAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"
#include "seclaunch/secret.h"
#include "seclaunch/sld.h"

typedef enum sl_stage_where {
	SL_STAGE_AUTO = 0, /* gpu when a CUDA device is usable, else host */
	SL_STAGE_HOST,
	SL_STAGE_GPU,     /* host memory file; the job's own CUDA context uploads it */
	SL_STAGE_GPU_IPC, /* device buffers exported by CUDA IPC (where supported) */
	SL_STAGE_STREAM,  /* a sharded dataset shard by shard in a bounded window (stream.h) */
} sl_stage_where;

/* "auto" / "host" / "gpu" / "gpu-ipc" / "stream" -> where (SL_E_USAGE naming
 * the value otherwise). */
SL_MUST_USE sl_err sl_stage_where_parse(const char *s, sl_stage_where *out);

typedef struct sl_stage sl_stage;
struct sl_gpu_info; /* below */

/* A host staging area of exactly size bytes for dataset_id. force_memfd
 * skips memfd_secret (tests, and kernels where it misbehaves). */
SL_MUST_USE sl_err sl_stage_host_new(const char *dataset_id, uint64_t size, bool force_memfd,
                                     sl_stage **out);
/* Writes len bytes of authenticated plaintext at off (in-order sink; calls
 * for one stage are not concurrent). Out of range fails with SL_E_INTERNAL. */
SL_MUST_USE sl_err sl_stage_write(sl_stage *s, uint64_t off, const void *p, size_t len);
/* Ends writing: every byte must have been written; host: sealed / locked
 * down; gpu: every copy has completed. */
SL_MUST_USE sl_err sl_stage_seal(sl_stage *s);
/* Zeroes and releases the plaintext (idempotent). Fails only when zeroing
 * could not be confirmed (GPU memset error), naming it; memory is released
 * anyway. */
SL_MUST_USE sl_err sl_stage_wipe(sl_stage *s);
/* Wipes (ignoring the result) and frees. NULL-safe. */
void sl_stage_free(sl_stage *s);

/* The staging method used: "memfd_secret", "memfd+mlock", "memfd" (not
 * locked: the limit did not allow it), or "gpu". */
const char *sl_stage_method(const sl_stage *s);
const char *sl_stage_dataset_id(const sl_stage *s);
uint64_t sl_stage_size(const sl_stage *s);
/* Host: the memory file's descriptor (O_CLOEXEC; the supervisor hands it to
 * the job); -1 for gpu. */
int sl_stage_fd(const sl_stage *s);
/* Read-only view of staged host data for tests and self-checks; NULL for gpu. */
const uint8_t *sl_stage_host_view(const sl_stage *s);
bool sl_stage_wiped(const sl_stage *s);

/* This dataset's entry in SECLAUNCH_DATA (docs/job-interface.md), given the
 * descriptor number the job inherits it at (host):
 *   host: {"kind":"host","size":N,"fd":FD,"path":"/proc/self/fd/FD","method":M}
 *   with "gpu":{"device":D,"library":PATH} after sl_stage_gpu_handoff, and
 *   kind "sld" plus the SLD geometry after sl_stage_sld_gpu_decrypt;
 *   gpu-ipc: {"kind":"gpu","size":N,"device":D,"ipc_handle":"<hex>","method":"gpu-ipc"} */
SL_MUST_USE sl_err sl_stage_describe(const sl_stage *s, int job_fd, json_t **out);

/* Decrypts the SLD file open at fd (name for messages) with dek straight into
 * a new stage: on the GPU when gpu is non-NULL, else in host memory. Only
 * authenticated chunks reach the stage (sld.h's in-order sink); threads
 * decryption workers (0: online CPUs). interrupted (may be NULL) is polled
 * after each chunk: a non-zero return (a signal number) stops staging with
 * SL_E_SYSTEM "interrupted by signal N". On any error nothing is left
 * staged (*out stays NULL, the partial plaintext is wiped). */
SL_MUST_USE sl_err sl_stage_sld(int fd, const char *name, sl_secret *dek,
                                const struct sl_gpu_info *gpu, unsigned threads, bool force_memfd,
                                int (*interrupted)(void), sl_stage **out);

/* Stream buffers, reused across the shards of one dataset: a host stage of
 * cap bytes made once (locked, every page faulted in, and sealed against
 * the job's writes from the start, so its descriptor can be handed out
 * shard after shard), refilled per shard by sl_stage_sld_refill and
 * emptied by sl_stage_clear, which zeroes what the shard wrote in place and
 * keeps the pages. A job may still map a buffer it was given before, so a
 * refill goes through the decryptor's in-order sink: only authenticated
 * chunks ever reach the buffer. sl_stage_size is the current shard's
 * length (0 when empty); sl_stage_wipe and sl_stage_free end it as any
 * stage. */
SL_MUST_USE sl_err sl_stage_pool_new(const char *dataset_id, uint64_t cap, sl_stage **out);
/* Decrypts the SLD file at fd into the empty pooled stage s (its plaintext
 * must fit in the stage's cap); on any error s is left empty (zeroed). */
SL_MUST_USE sl_err sl_stage_sld_refill(int fd, const char *name, sl_secret *dek, unsigned threads,
                                       sl_sld_bufs *bufs, int (*interrupted)(void), sl_stage *s);
/* The same from len bytes of the caller's private memory holding the
 * whole SLD file (sl_sld_open_mem: no one else may write it meanwhile).
 * Both decrypt through the chunk buffers bufs (sl_sld_decrypt_bufs; NULL:
 * made and freed per refill). */
SL_MUST_USE sl_err sl_stage_sld_refill_mem(const uint8_t *base, size_t len, const char *name,
                                           sl_secret *dek, unsigned threads, sl_sld_bufs *bufs,
                                           int (*interrupted)(void), sl_stage *s);
/* Zeroes what the pooled stage holds and leaves it empty. */
SL_MUST_USE sl_err sl_stage_clear(sl_stage *s);

/* ---- GPU ------------------------------------------------------------- */

/* What the probe learned. cc: "on", "off" or "absent" (no NVML answer). */
typedef struct sl_gpu_info {
	bool usable;      /* a CUDA device can be used for staging */
	int device;       /* CUDA ordinal used */
	char name[96];    /* device name */
	char cc[8];       /* confidential-computing mode: on / off / absent */
	bool devtools;    /* CC dev-tools mode (never gets data) */
	bool cc_ready;    /* NVML says the GPUs are set ready for CC work */
	bool needs_ready; /* CC on, not ready yet: attest it, then sl_gpu_set_ready */
	char reason[200]; /* why not usable / the CC situation, one line */
} sl_gpu_info;

/* Probes libcuda.so.1 / libnvidia-ml.so.1 (dlopen). Never fails because a
 * GPU is absent: info->usable is false and info->reason says why. */
void sl_gpu_probe(sl_gpu_info *info);
/* For a GPU in CC mode that is not yet accepting work: called only after
 * its evidence (kind "nvidia-gpu", bound to this run) verified. Sets the
 * GPUs ready through NVML, then checks that CUDA can use the device. */
SL_MUST_USE sl_err sl_gpu_set_ready(sl_gpu_info *info);
/* --stage gpu-ipc: device buffer of size bytes on info->device with a small
 * ring of pinned host buffers of chunk bytes each, exported to the job by a
 * CUDA IPC handle. Refuses a dev-tools-mode GPU. */
SL_MUST_USE sl_err sl_stage_gpu_new(const char *dataset_id, uint64_t size, size_t chunk,
                                    const sl_gpu_info *info, sl_stage **out);

/* --stage gpu-ipc, before any key is asked for: SL_E_GPU with a message
 * that says so where CUDA IPC is unsupported (protected-PCIe CC mode). */
SL_MUST_USE sl_err sl_gpu_ipc_probe(const sl_gpu_info *info);

/* --stage gpu: s (a sealed host stage) is uploaded by the job itself with
 * libseclaunch_data.so, in its own CUDA context: its SECLAUNCH_DATA entry
 * gains "gpu": {"device", "library"}. SL_E_GPU when the library is missing. */
SL_MUST_USE sl_err sl_stage_gpu_handoff(sl_stage *s, const sl_gpu_info *gpu);

/* Where libseclaunch_data.so is ($SECLAUNCH_DATA_LIB, else beside the
 * installed or the built seclaunch); SL_E_GPU naming what is missing. */
SL_MUST_USE sl_err sl_stage_gpu_library(char *out, size_t n);

/* --gpu-decrypt: checks the SLD file open at fd as sl_stage_sld does (key
 * check, header MAC, size), then stages in a host memory file the file key
 * (bytes 0..31; zeros up to 4096) and the SLD file's ciphertext from 4096 on,
 * for the job's libseclaunch_data.so to decrypt on the GPU. Only
 * AES-256-GCM datasets. Host memory never holds plaintext. */
SL_MUST_USE sl_err sl_stage_sld_gpu_decrypt(int fd, const char *name, sl_secret *dek,
                                            const sl_gpu_info *gpu, bool force_memfd,
                                            int (*interrupted)(void), sl_stage **out);

#endif
