/* Stream staging (`run --stage stream`): a sharded dataset of any size with
 * bounded memory. Shards are decrypted, each into a sealed memory file of
 * its own, by one thread that works ahead of the readers while the staged
 * shards fit in the window. A shard the job has released (every holder let
 * go of it) lingers, sealed, for the linger time so that a reader going
 * file by file (open, read, release) does not have it decrypted again for
 * every file; it is wiped and unmapped when the linger ends, when a reader
 * needs its room, or (never taken back within 100 ms) when staging ahead
 * does. Linger 0: wiped at once. Readers reach the shards through the data
 * service ("open_shard" / "release_shard"). */
#ifndef SECLAUNCH_LAUNCHER_STREAM_H
#define SECLAUNCH_LAUNCHER_STREAM_H

#include <stdint.h>

#include "../dataset/remote.h"
#include "seclaunch/secret.h"
#include "seclaunch/sldm.h"

typedef struct sl_stream sl_stream;

typedef struct sl_stream_stats {
	uint64_t window;      /* the limit */
	uint64_t peak;        /* most plaintext bytes staged at once */
	uint64_t staged;      /* shards decrypted (a shard read twice counts twice) */
	uint64_t wiped;       /* shards wiped after release */
	uint64_t reused;      /* shards taken back while they lingered */
	uint64_t refetched;   /* shards decrypted again after they were wiped */
	uint64_t not_ready;   /* acquires answered "not ready yet" */
	uint64_t wipe_failed; /* wipes that could not be confirmed */
} sl_stream_stats;

/* Authenticates the manifest with dek (copied: the caller may free its
 * own), then starts the staging thread. dfd: the dataset folder open (its
 * shards opened relative to it; dir names it in messages), or -1 and dir
 * NULL with remote (dfd, remote and m must outlive the stream). window: bytes of
 * plaintext staged at most; it must hold the largest shard. linger_ms: how
 * long a released shard stays staged (0: wiped at once). */
SL_MUST_USE sl_err sl_stream_new(int dfd, const char *dir, sl_remote *remote, const sl_sldm *m,
                                 sl_secret *dek, uint64_t window, unsigned linger_ms,
                                 unsigned threads, sl_stream **out);

/* Shard i for a reader: its sealed memory file (owned by the stream, valid
 * until the matching release) and length. *not_ready = 1 (and SL_OK) when
 * it is still being decrypted or waits for room in the window: it is asked
 * for now and the reader retries. A staging failure is returned to every
 * later call (the stream is then dead). */
SL_MUST_USE sl_err sl_stream_acquire(sl_stream *s, uint32_t i, int *fd, uint64_t *len,
                                     int *not_ready);
void sl_stream_release(sl_stream *s, uint32_t i);
void sl_stream_stats_get(sl_stream *s, sl_stream_stats *out);
/* The first staging error (SL_OK while none). */
sl_err sl_stream_error(sl_stream *s);
/* Stops the thread and wipes every staged shard (idempotent): SL_OK when
 * every wipe was confirmed. */
SL_MUST_USE sl_err sl_stream_wipe_all(sl_stream *s);
/* Wipes (as above) and frees. NULL-safe. */
void sl_stream_free(sl_stream *s);

#endif
