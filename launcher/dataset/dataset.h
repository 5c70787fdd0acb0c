/* One dataset of a launch (run, serve): an SLD file, a local dataset folder
 * or a dataset URL, opened once with the rights of the job's user; its key
 * reference (header or manifest), its root digest, its store when remote.
 * The launch adds its released key and how it is staged, and wipes both
 * (run_exec.c); sl_dataset_free releases what opening took. */
#ifndef SECLAUNCH_LAUNCHER_DATASET_H
#define SECLAUNCH_LAUNCHER_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../job/job.h"
#include "remote.h"
#include "seclaunch/error.h"
#include "seclaunch/secret.h"
#include "seclaunch/sld.h"
#include "seclaunch/sldm.h"

struct sl_stage;
struct sl_stream;

typedef struct sl_dataset {
	const char *path;   /* as given (the operand) */
	int fd;             /* an SLD file, opened as the job's user (-1: none) */
	int dfd;            /* a local dataset folder, the same (-1: none) */
	sl_sld_header *hdr; /* an SLD file, or NULL: */
	sl_sldm *man;       /* a sharded dataset's manifest */
	sl_remote *rem;     /* its store, when remote */
	char root[65];      /* manifest root / SLD header SHA-256, hex */
	/* the launch's: the released key until staged, how it is staged */
	sl_secret *dek;
	bool streamed; /* shard by shard (--stage stream) */
	struct sl_stream *stream;
	struct sl_stage *stage;
} sl_dataset;

/* Nothing open (descriptors -1): what sl_dataset_free takes. */
void sl_dataset_init(sl_dataset *d);
/* Opens path: a dataset URL (remote options ro), else as user (NULL or
 * !set: this process) a folder (its manifest) or an SLD file (its header);
 * the root digest. Every later read goes through what it opened. */
SL_MUST_USE sl_err sl_dataset_open(sl_dataset *d, const char *path, const sl_job_user *user,
                                   sl_remote_opts *ro);
/* Its id, KMS key id, wrapped DEK and plaintext size, from the manifest or
 * the SLD header. */
const char *sl_dataset_id(const sl_dataset *d);
const char *sl_dataset_key_id(const sl_dataset *d);
const uint8_t *sl_dataset_wrapped_dek(const sl_dataset *d, size_t *len);
uint64_t sl_dataset_size(const sl_dataset *d);
/* Where its ciphertext is read from by name (NULL: a remote store). */
const char *sl_dataset_local_path(const sl_dataset *d);
/* The SLD file's descriptor closed (its data is staged). */
void sl_dataset_close_file(sl_dataset *d);
/* Releases what sl_dataset_open took (descriptors, header or manifest,
 * store); the key and the stage are the launch's, wiped before. */
void sl_dataset_free(sl_dataset *d);

#endif
