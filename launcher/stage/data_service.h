/* The data service: staged datasets handed to every process of the job over
 * a Unix socket (docs/job-interface.md, "The data service").
 *
 * seclaunch owns the staged memory files. A process of the job connects to
 * the socket (its path is in SECLAUNCH_DATA_SOCKET), asks for a dataset by
 * id, and receives a descriptor of its memory file by SCM_RIGHTS. Each peer
 * is checked by SO_PEERCRED before it is answered: the job's uid, and a
 * process that descends from this seclaunch (the job and everything it
 * started, also when reparented to seclaunch as subreaper); under `seclaunch
 * serve`, the job's uid and the step's token in every request. Anyone else
 * gets an error and is reported through the refusal hook (to the audit log).
 */
#ifndef SECLAUNCH_LAUNCHER_DATA_SERVICE_H
#define SECLAUNCH_LAUNCHER_DATA_SERVICE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "seclaunch/error.h"

#define SL_DSVC_ENV "SECLAUNCH_DATA_SOCKET"
#define SL_DSVC_MSG_MAX 4096
/* The most bytes of JSON one "files" / "shards" answer carries (a page):
 * well under a SOCK_SEQPACKET message's limit and the 64 KiB the Python
 * helper reads at once. */
#define SL_DSVC_PAGE_MAX 32768

/* Admission (docs/job-interface.md, "Admission and limits"): the most
 * admitted connections at once, of them from one process (pid at connect),
 * and the connections serve holds while they have not yet sent a request
 * with the token (a pool of their own: they never take an admitted slot). */
#define SL_DSVC_SLOTS 256
#define SL_DSVC_SLOTS_PER_PID 64
#define SL_DSVC_PREAUTH_SLOTS 32
/* Defaults of sl_dsvc_opts.preauth_ms and .idle_ms. */
#define SL_DSVC_PREAUTH_MS 2000
#define SL_DSVC_IDLE_MS 600000

typedef struct sl_dsvc sl_dsvc;

/* Called on the service thread for each refused peer. */
typedef void (*sl_dsvc_refused_fn)(void *ctx, pid_t pid, uid_t uid, const char *why);

typedef struct sl_dsvc_opts {
	uid_t job_uid; /* the uid every peer must have */
	gid_t job_gid; /* owner group of the socket folder */
	/* parent of the private socket folder (NULL: $XDG_RUNTIME_DIR when the
	 * job runs as the caller, else /tmp) */
	const char *dir;
	const char *path; /* the socket's exact path instead (serve --socket; must not exist) */
	/* serve's admission (docs/job-interface.md): every request carries this
	 * token (64 hex digits), compared in constant time, and the peer need not
	 * descend from this process (the tasks of a Slurm step or torchrun are
	 * not seclaunch's children); the uid check stays. NULL: run's check
	 * (the job's uid and a descendant of this process). */
	const char *token;
	/* serve: a connection that has not sent a request with the token this
	 * long after it connected is refused and closed (0: SL_DSVC_PREAUTH_MS) */
	unsigned preauth_ms;
	/* an admitted connection that holds no shard and has asked nothing this
	 * long is closed (0: SL_DSVC_IDLE_MS); the Python helper reconnects */
	unsigned idle_ms;
	/* each refused peer, on the service thread; a burst past a few is told
	 * as one summary (the count stays exact: sl_dsvc_refusals) */
	sl_dsvc_refused_fn refused;
	void *refused_ctx;
} sl_dsvc_opts;

/* Creates the socket (in a new 0700 folder owned by job_uid) and nothing
 * else; datasets are added next, then sl_dsvc_serve starts answering. */
SL_MUST_USE sl_err sl_dsvc_new(const sl_dsvc_opts *o, sl_dsvc **out);
/* fd is dup'ed; info is a JSON object describing the dataset (size,
 * method, files...) and is sent to clients as given (a reference is
 * taken). */
SL_MUST_USE sl_err sl_dsvc_add(sl_dsvc *s, const char *dataset_id, int fd, json_t *info);
/* A dataset staged shard by shard (stream.h): readers ask for a shard
 * ("open_shard") and give it back ("release_shard"); a connection's holds
 * are given back when it closes. acquire sets *not_ready when the shard is
 * not staged yet (the reader is told to retry). */
typedef struct sl_dsvc_stream_ops {
	sl_err (*acquire)(void *ctx, uint32_t shard, int *fd, uint64_t *len, int *not_ready);
	void (*release)(void *ctx, uint32_t shard);
	void *ctx;
} sl_dsvc_stream_ops;
SL_MUST_USE sl_err sl_dsvc_add_stream(sl_dsvc *s, const char *dataset_id, json_t *info,
                                      const sl_dsvc_stream_ops *ops);

/* One request, as sl_dsvc_parse reads it (docs/job-interface.md, "The
 * data service"). */
typedef enum sl_dsvc_op {
	SL_DSVC_OP_LIST,
	SL_DSVC_OP_OPEN,
	SL_DSVC_OP_OPEN_SHARD,
	SL_DSVC_OP_RELEASE_SHARD,
	SL_DSVC_OP_FILES,
	SL_DSVC_OP_SHARDS,
} sl_dsvc_op;

typedef struct sl_dsvc_req {
	sl_dsvc_op op;
	char dataset[256]; /* "" for list */
	uint32_t shard;    /* open_shard, release_shard */
	uint64_t start;    /* files, shards: the first entry of the page (default 0) */
	bool has_token;    /* "token": the step's token (seclaunch serve); wipe the request */
	char token[129];
} sl_dsvc_req;

/* Parses one request message from a peer (untrusted bytes): a JSON object
 * with exactly the members its op takes, and optionally "token" (at most
 * 128 characters; whether one is needed is the service's to check). SL_E_INPUT naming the member or
 * rule at fault otherwise. Pure: no service state, no I/O. */
SL_MUST_USE sl_err sl_dsvc_parse(const char *msg, size_t len, sl_dsvc_req *out);
/* A page of arr (a JSON array) from index start: the entries whose compact
 * JSON fits in budget bytes in all (at least one, so a page always moves
 * on), as a new array; *next is the index after the page, or 0 when the
 * page reaches the end. NULL when out of memory. */
json_t *sl_dsvc_page(const json_t *arr, uint64_t start, size_t budget, uint64_t *next);

/* Starts the service thread. */
SL_MUST_USE sl_err sl_dsvc_serve(sl_dsvc *s);
const char *sl_dsvc_path(const sl_dsvc *s);
/* Number of descriptors handed out and of peers refused so far. */
uint64_t sl_dsvc_served(const sl_dsvc *s);
uint64_t sl_dsvc_refusals(const sl_dsvc *s);
/* Stops the thread, closes every connection and descriptor, removes the
 * socket and its folder. NULL-safe. */
void sl_dsvc_free(sl_dsvc *s);

#endif
