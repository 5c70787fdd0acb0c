/* Private to launcher/stage_*.c: the staging object shared by host and GPU. */
#ifndef SECLAUNCH_LAUNCHER_STAGE_INT_H
#define SECLAUNCH_LAUNCHER_STAGE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/stage.h"

struct sl_gpu_stage; /* stage_gpu.c */

struct sl_stage {
	char *dataset_id;
	uint64_t size;
	uint64_t written; /* the sink is in order: the next offset expected */
	const char *method;
	bool sealed;
	bool wiped;
	/* host */
	int fd;
	uint8_t *map;
	size_t map_len;
	bool locked;  /* memfd: mlock2(MLOCK_ONFAULT) over the whole mapping took */
	bool huge;    /* memfd: 2 MiB pages asked for (shmem THP enabled by the admin) */
	bool pooled;  /* a stream buffer: sealed at creation, refilled per shard */
	bool filling; /* pooled: a shard is being written (sl_stage_refill_begin) */
	/* memfd: the thread that allocates the file's pages ahead of the workers */
	pthread_t alloc_tid;
	bool alloc_running;
	atomic_bool alloc_stop;
	/* gpu */
	struct sl_gpu_stage *gpu;
	/* a host stage the job uploads itself (--stage gpu, --gpu-decrypt) */
	struct sl_gpu_job *gpu_job;
};

/* Host memfd: starts / stops (joins) a thread that fallocates the memory file
 * from the start, ahead of the workers (best effort: if it cannot start, the
 * workers allocate for themselves). Stopping is idempotent; wipe stops it. */
void sl_stage_host_alloc_start(sl_stage *s);
void sl_stage_host_alloc_stop(sl_stage *s);
/* Pooled stages: a refill of size bytes begins (the stage is empty), and
 * ends once every byte was written. */
SL_MUST_USE sl_err sl_stage_refill_begin(sl_stage *s, uint64_t size);
SL_MUST_USE sl_err sl_stage_refill_end(sl_stage *s);
/* Host: faults in [off, off + len) of the mapping on the calling thread. */
SL_MUST_USE sl_err sl_stage_host_prefault(sl_stage *s, uint64_t off, size_t len);

SL_MUST_USE sl_err sl_gpu_stage_write(struct sl_gpu_stage *g, uint64_t off, const uint8_t *p,
                                      size_t len);
SL_MUST_USE sl_err sl_gpu_stage_finish(struct sl_gpu_stage *g);
/* Clears and frees device and pinned memory; the result says whether the
 * clearing was confirmed. */
SL_MUST_USE sl_err sl_gpu_stage_wipe(struct sl_gpu_stage *g);
SL_MUST_USE sl_err sl_gpu_stage_describe(const struct sl_gpu_stage *g, json_t *obj);
/* A host stage's GPU hand-off in SECLAUNCH_DATA (no-op without one). */
SL_MUST_USE sl_err sl_gpu_job_describe(const sl_stage *s, json_t *obj);
void sl_gpu_job_free(struct sl_gpu_job *j);

#endif
