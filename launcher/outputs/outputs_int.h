/* Private to outputs*.c. */
#ifndef SECLAUNCH_LAUNCHER_OUTPUTS_INT_H
#define SECLAUNCH_LAUNCHER_OUTPUTS_INT_H

#include <pthread.h>
#include <jansson.h>

#include "../cli/report.h"
#include "outputs.h"
#include "preempt.h"
#include "seclaunch/kms_client.h"
#include "seclaunch/sldm.h"

#define LATEST "LATEST"
#define CKPT_REQ ".seclaunch-checkpoint-request"
#define CKPT_STATUS ".seclaunch-checkpoint"
#define RESTORE ".seclaunch-restore"

struct out_one {
	char name[SL_OUT_NAME_MAX + 1];
	char dest[2048];        /* a folder, or a URL ending in '/' */
	char policy_dest[2100]; /* what output_destinations match: the URL, or file://ABS/ */
	bool remote;
	char id[SL_KMS_DATASET_ID_MAX + 1]; /* NAME:JOBID */
	sl_kms_output_key key;
	uint64_t next_seq;
	uint64_t sealed_seq; /* the last one sealed by this run (0: none) */
	char sealed_root[2 * SL_SLDM_ROOT_LEN + 1];
	const char *resume; /* SOURCE, or NULL */
	/* --resume, read in the datasets step; its DEK comes in the launch's
	 * release beside the inputs' */
	struct {
		sl_sldm *man;   /* the newest checkpoint's manifest (NULL: none) */
		sl_remote *rem; /* its store, when remote */
		char dir[2200]; /* its folder or URL */
		char src[4200]; /* SOURCE as the records name it */
		uint64_t seq;   /* LATEST there */
		sl_secret *dek; /* released */
	} r;
};

struct sl_outputs {
	struct sl_out_ctx x;  /* what they take of the launch */
	struct sl_out_cfg *c; /* x.c */
	struct out_one o[SL_OUT_MAX];
	size_t n;
	sl_memdir dir;
	pthread_mutex_t mu;
	pthread_t th;
	bool th_started;
	int stop[2];
	uint64_t requests;
	sl_preempt *pre;
	int forwarded;
	/* the final seal: the job is gone, so an output's plaintext is wiped
	 * as soon as it is sealed, while its shards are still going up (an
	 * upload that fails then loses nothing the end would have kept) */
	bool final;
};

/* outputs_dest.c: the sequence LATEST names at dest (0: none yet); a
 * local DEST made with its parents. */
SL_MUST_USE sl_err sl_out_read_latest(struct sl_outputs *O, const char *dest, bool remote,
                                      uint64_t *seq);
SL_MUST_USE sl_err sl_out_mkdir_p(const char *path);
/* outputs_resume.c: open reads LATEST and the manifest at SOURCE (before
 * any attestation: what the launch's release asks for); resume restores
 * it with the released DEK. */
SL_MUST_USE sl_err sl_out_resume_open(struct sl_outputs *O, struct out_one *o);
SL_MUST_USE sl_err sl_out_resume(struct sl_outputs *O, struct out_one *o);
void sl_out_resume_free(struct out_one *o);

/* outputs_upload.c: a sealed output's shards PUT while the rest is
 * sealed, by up to `threads` uploads at once. add queues one (its
 * descriptor dup'd), first waiting while max_pending of them are queued or
 * under way (0: never; what bounds the memory of shards staged in memory
 * files), and returns the first failure of any PUT so far; wait
 * joins every thread after the last PUT and returns that failure; free
 * stops what is not under way yet, joins every thread and closes what is
 * left (NULL-safe). */
#define SL_OUT_UPLOADS_MAX 8u
#define SL_OUT_UPLOADS_DEFAULT 4u
/* shards sealed ahead of the uploads, beyond one per upload, when staged
 * in memory files */
#define SL_OUT_MEM_AHEAD 4u
/* a remote output's shard: small enough that the first PUT starts soon
 * and several go up at once, large enough to keep requests few */
#define SL_OUT_REMOTE_SHARD ((uint64_t)64 << 20)
typedef struct sl_out_up sl_out_up;
SL_MUST_USE sl_err sl_out_up_start(const char *url, const sl_remote_opts *ro, unsigned threads,
                                   size_t max_pending, sl_out_up **out);
SL_MUST_USE sl_err sl_out_up_add(sl_out_up *u, const char *name, int fd, uint64_t size);
SL_MUST_USE sl_err sl_out_up_wait(sl_out_up *u);
/* After wait: DIR/manifest.sldm, once every shard is in the store. */
SL_MUST_USE sl_err sl_out_up_put_manifest(sl_out_up *u, const char *dir);
/* A number from the environment (for measuring and tests), min..max
 * (SL_E_USAGE otherwise), def when unset. */
SL_MUST_USE sl_err sl_out_env_num(const char *name, uint64_t min, uint64_t max, uint64_t def,
                                  uint64_t *v);
void sl_out_up_free(sl_out_up *u);

#endif
