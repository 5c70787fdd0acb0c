/* Sharded datasets on local disk: encrypt files, folders or a stream into
 * DIR/manifest.sldm + DIR/shard-NNNNN.sld (docs/format-sld.md part II), and
 * restore a dataset folder's tree. The caller obtains the DEK. */
#ifndef SECLAUNCH_LAUNCHER_DATASET_TREE_H
#define SECLAUNCH_LAUNCHER_DATASET_TREE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "remote.h"
#include "seclaunch/sld.h"
#include "seclaunch/sldm.h"

#define SL_TREE_SHARD_DEFAULT ((uint64_t)256 << 20)

typedef struct sl_tree_encrypt_opts {
	const char *const *paths; /* files, folders, or one "-" alone */
	size_t n_paths;
	const char *out_dir;  /* appears only once complete */
	bool force;           /* replace an existing out_dir */
	bool follow_symlinks; /* else symlinks are skipped, each said on stderr */
	bool quiet;
	uint64_t shard_size;     /* 0 = SL_TREE_SHARD_DEFAULT */
	const char *stream_name; /* path of "-" in the dataset (default "stdin") */
	uint64_t sequence;       /* the manifest's sequence (0 for encrypt; outputs count up) */
	/* no fsync of the shards: a copy that only lives until it is uploaded
	 * (the default writes each chunk behind and fsyncs each shard once) */
	bool no_fsync;
	/* paths are folders beneath the folder beneath_fd (named beneath_name
	 * in messages), opened without following any link or leaving its file
	 * system, as is every file below them (follow_symlinks is ignored):
	 * the tree of a less privileged user (sealed outputs) */
	bool beneath;
	int beneath_fd;
	const char *beneath_name;
	/* skip (said like a link) files not owned by owner: a hard link to
	 * someone else's file is not the tree owner's to seal */
	bool owner_set;
	uid_t owner;
	/* called once each shard file is complete (written, fsynced unless
	 * no_fsync, closed after the call), in shard order, from the thread
	 * that sealed it: the folder being built (dir), the shard's name in
	 * it, the file open as fd (the callee dups what it keeps) and its
	 * size. The callee may unlink dir/name: the manifest needs nothing
	 * more of it. A failure stops the sealing and is what
	 * sl_tree_encrypt returns. With a callback the shards are sealed one
	 * at a time (every thread on one), so each is done as early as it can
	 * be; NULL: none. */
	sl_err (*shard_done)(void *ctx, const char *dir, const char *name, int fd, uint64_t size);
	void *shard_ctx;
	/* with shard_done: each shard is a memory file, never named on disk
	 * (dir is NULL in the call); out_dir receives the manifest alone */
	bool mem_shards;
	/* dataset id, AEAD, chunk size, threads; its key reference goes into
	 * the manifest, never into a shard */
	sl_sld_encrypt_params p;
} sl_tree_encrypt_opts;

typedef struct sl_tree_stats {
	uint64_t bytes;
	uint32_t files;
	uint32_t shards;
	uint32_t skipped;
	uint8_t root[SL_SLDM_ROOT_LEN];
} sl_tree_stats;

SL_MUST_USE sl_err sl_tree_encrypt(sl_secret *dek, const sl_tree_encrypt_opts *o,
                                   sl_tree_stats *stats);

/* True when path is a folder holding manifest.sldm. */
bool sl_tree_is_dataset(const char *path);

/* Reads DIR/manifest.sldm, or the manifest at a remote URL when remote is
 * not NULL (structure only: the key reference is what the caller needs to
 * obtain the DEK). */
SL_MUST_USE sl_err sl_tree_manifest(const char *dir, sl_remote *remote, sl_sldm **out);
/* The same for a local folder open as dfd (dir names it in messages): the
 * manifest opened relative to it, no link followed. The path form opens
 * the folder and calls this. */
SL_MUST_USE sl_err sl_tree_manifest_at(int dfd, const char *dir, sl_sldm **out);

/* Authenticates the manifest, checks and decrypts every shard, and writes
 * the files under out_dir (which appears only once every file is complete;
 * force replaces an existing one). Paths are checked again before anything
 * is created. Shards come from dir, or from remote when it is not NULL
 * (each fetched as ciphertext into memory, then checked and decrypted). */
SL_MUST_USE sl_err sl_tree_decrypt(const char *dir, sl_remote *remote, const sl_sldm *m,
                                   sl_secret *dek, const char *out_dir, bool force,
                                   unsigned threads, sl_tree_stats *stats);

/* A dataset's shards opened in order, for decryption one after another.
 * From a store, opening shard i starts the fetch of shard i + 1 on a
 * thread of its own, so that the network and the caller's decryption of i
 * overlap (two shards' ciphertext in memory at most); only that thread
 * uses remote while it runs. sl_shards_end (always, once begun) stops a
 * fetch still running within a second, waits for it and drops what it
 * fetched. Local shards are opened when asked for, relative to dfd (the
 * caller's, left open; dir names it in messages). begin sets remote's
 * abort flag (sl_remote_set_abort), end clears it. */
typedef struct sl_shards {
	int dfd;
	const char *dir;
	sl_remote *remote;
	const sl_sldm *m;
	atomic_bool stop;
	bool running;
	pthread_t thr;
	uint32_t ahead_i;
	int ahead_fd;
	sl_err ahead_rc;
	char ahead_err[1024];
	char ahead_name[4096];
} sl_shards;
void sl_shards_begin(sl_shards *s, int dfd, const char *dir, sl_remote *remote, const sl_sldm *m);
/* Shard i (checked as sl_tree_open_shard checks it): *fd to close. */
SL_MUST_USE sl_err sl_shards_open(sl_shards *s, uint32_t i, int *fd, char *name, size_t cap);
void sl_shards_end(sl_shards *s);

/* Opens shard i of the dataset (from dir, or fetched from remote into a
 * memory file) and checks it against the manifest (header digest, dataset
 * id, sizes): an fd ready for sl_sld_open; name receives what to call it. */
SL_MUST_USE sl_err sl_tree_open_shard(const char *dir, sl_remote *remote, const sl_sldm *m,
                                      uint32_t i, int *fd, char *name, size_t name_cap);
/* Shard i's header checked against the manifest, as sl_tree_open_shard
 * checks it, for a shard fetched into memory: p holds its whole file of size
 * bytes; name names it in errors. */
SL_MUST_USE sl_err sl_tree_check_shard_mem(const sl_sldm *m, uint32_t i, const char *name,
                                           const uint8_t *p, uint64_t size);
/* The same with the folder open as dfd (-1 with remote): the shard opened
 * relative to it (openat, no link followed); what the path form calls. */
SL_MUST_USE sl_err sl_tree_open_shard_at(int dfd, const char *dir, sl_remote *remote,
                                         const sl_sldm *m, uint32_t i, int *fd, char *name,
                                         size_t name_cap);

#endif
