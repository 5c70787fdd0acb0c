/* Private to launcher/stage/: the staging object and the table each backend
 * (stage_host.c: memory files; stage_gpu.c: CUDA device buffers) fills in.
 * stage.c owns the generic part and reaches a backend only through its
 * table; the backends call stage.c, never each other. */
#ifndef SECLAUNCH_LAUNCHER_STAGE_INT_H
#define SECLAUNCH_LAUNCHER_STAGE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/stage.h"

struct sl_stage_ops {
	/* Copies len bytes to off; stage.c checked that the stage is open for
	 * writing and that off is the next offset, in range. */
	SL_MUST_USE sl_err (*write)(sl_stage *s, uint64_t off, const void *p, size_t len);
	/* Every byte is written: lock the stage down (host) or complete every
	 * copy (gpu). Called once. */
	SL_MUST_USE sl_err (*seal)(sl_stage *s);
	/* The backend's members of the stage's SECLAUNCH_DATA entry ("kind"
	 * and what the job opens it by); stage.c set "size" and "method". */
	SL_MUST_USE sl_err (*describe)(const sl_stage *s, int job_fd, json_t *o);
	/* The one place the backend zeroes its plaintext; then releases all it
	 * holds, s->be included (set NULL). Called once, on every path (also
	 * with s->be NULL, when a constructor failed). */
	SL_MUST_USE sl_err (*wipe)(sl_stage *s);
	/* The descriptor the job inherits, and a read-only view (NULL entries
	 * or a wiped stage: -1 and NULL). */
	int (*fd)(const sl_stage *s);
	const uint8_t *(*view)(const sl_stage *s);
};

struct sl_stage {
	const struct sl_stage_ops *ops;
	void *be; /* the backend's own state */
	char *dataset_id;
	uint64_t size;
	uint64_t written; /* the sink is in order: the next offset expected */
	const char *method;
	bool sealed;
	bool pooled;  /* a host stream buffer: sealed at creation, refilled per shard */
	bool filling; /* pooled: a shard is being written (sl_stage_refill_begin) */
	bool wiped;
	/* members merged over the SECLAUNCH_DATA entry: a host stage the job
	 * uploads itself (--stage gpu, --gpu-decrypt: stage_handoff.c) */
	json_t *handoff;
};

/* A stage of size bytes for dataset_id run by ops, its backend state not
 * made yet (s->be NULL; the backend sets it, and on failure sl_stage_free
 * runs the backend's wipe). */
SL_MUST_USE sl_err sl_stage_new_(const struct sl_stage_ops *ops, const char *dataset_id,
                                 uint64_t size, sl_stage **out);

/* ---- host only (stage_host.c; other stages: no-ops or SL_E_INTERNAL) ---- */

/* Memfd: starts / stops (joins) a thread that fallocates the memory file
 * from the start, ahead of the workers (best effort: if it cannot start, the
 * workers allocate for themselves). Stopping is idempotent; wipe stops it. */
void sl_stage_host_alloc_start(sl_stage *s);
void sl_stage_host_alloc_stop(sl_stage *s);
/* Faults in [off, off + len) of the mapping on the calling thread. */
SL_MUST_USE sl_err sl_stage_host_prefault(sl_stage *s, uint64_t off, size_t len);
/* The writable mapping, for decryption in place (NULL: not a live host stage). */
uint8_t *sl_stage_host_map(sl_stage *s);
/* Pooled stages: a refill of size bytes begins (the stage is empty), and
 * ends once every byte was written. */
SL_MUST_USE sl_err sl_stage_refill_begin(sl_stage *s, uint64_t size);
SL_MUST_USE sl_err sl_stage_refill_end(sl_stage *s);

#endif
