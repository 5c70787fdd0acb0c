/* The key process's request table. Privilege separation (after OpenSSH's
 * monitor): the KEK operations run in a separate process, forked at start before anything touches
 * the network, the master key or the PKCS#11 PIN. The network-facing process talks to it over
 * SOCK_SEQPACKET socketpairs (one per channel, each served by its own thread) with fixed-size
 * messages from a fixed request table:
 *
 *   op            request                          answer
 *   CREATE        key id, AWS key to adopt or ""   -
 *   ROTATE        key id                           the new version
 *   SET_STATE     key id, 1 enable / 0 disable     - (the store's state and the
 *                                                  backend's: AWS Enable/DisableKey)
 *   DELETE        key id, 1 force / 0              references counted, deleted
 *                                                  (the store's rows, the cached
 *                                                  KEKs, AWS ScheduleKeyDeletion)
 *   WRAP          key id, dataset id, DEK          wrapped DEK (61 bytes; AWS KMS:
 *                                                  up to 1024)
 *   UNWRAP_SEAL   key id, dataset id, wrapped DEK, the DEK sealed to eph_pub
 *                 eph_pub                          (crypto_box_seal, 80 bytes)
 *   REWRAP        key id, dataset id, wrapped DEK  wrapped DEK (61 bytes)
 *   NEW_SEALED    key id, dataset id, eph_pub      a fresh random DEK, wrapped and
 *                                                  sealed to eph_pub (61 + 80 bytes):
 *                                                  output keys are born here
 *
 * There is no "unwrap" that returns a DEK: the network process only ever
 * sees DEKs already sealed to the client's ephemeral key. It never holds a
 * KEK, the master key or the PIN. A request that is not in the table, or
 * that is malformed (a length, an id that is not NUL-terminated or not
 * valid), ends the key process's service of that channel: the network
 * process is then presumed compromised, and its releases fail closed.
 *
 * The key process keeps its own state-store connections, dies with its
 * parent (PR_SET_PDEATHSIG), and ends when every channel is closed.
 *
 * Supervision: the process forked at start is a small single-threaded
 * monitor (seclaunchd-kmon) that holds the far ends of the channels and
 * forks the key process from them. When the key process dies (a crash, a
 * kill -9) the channels stay open, and the monitor forks a new one after a
 * backoff (0.1 s doubling to 10 s, reset after a minute up), telling the
 * network process over a status pipe, which logs and audits it and reports
 * it in /v1/health. A request in flight when it died answers 503 (every
 * request carries a sequence number, so a late answer is never taken for
 * another's). A key process that ends because a request was malformed or
 * outside the table (the network process is presumed compromised) is not
 * restarted: the monitor exits, every channel closes, releases fail. */
#ifndef SECLAUNCH_KMS_KEYPROC_TABLE_H
#define SECLAUNCH_KMS_KEYPROC_TABLE_H

/* Both halves include this header and nothing else of each other: the
 * server half is kms/keys/keyproc.c (the key process and its monitor), the
 * client half kms/http/kek_client.c (the network process), as OpenSSH's
 * monitor.c and monitor_wrap.c share monitor.h. */
#include <stdint.h>

#include "kmsd.h"

/* The sizes of a KEK row come from the state store's header, which each
 * half has from its folder's header (included first). */
#ifndef KMSD_KEK_WRAPPED_MAX
#error "include keys.h or http.h (state/store.h) before keyproc_table.h"
#endif

enum kp_op {
	KP_CREATE = 1,
	KP_ROTATE,
	KP_WRAP,
	KP_UNWRAP_SEAL,
	KP_REWRAP,
	KP_NEW_SEALED,
	KP_SET_STATE,
	KP_DELETE
};
#define KP_OP_LAST KP_DELETE

/* the key process's exit status when a request was malformed: not restarted */
#define KP_EXIT_REFUSED 9
/* how long the network side waits for an answer */
#define KP_TIMEOUT_MS 10000

struct kp_req {
	uint32_t op;
	uint32_t seq;
	char id[SL_KMS_ID_MAX + 1];
	char ds[SL_KMS_DATASET_ID_MAX + 1];
	uint8_t wrapped[SL_KMS_WRAPPED_DEK_MAX];
	uint32_t wrapped_len;
	uint32_t arg; /* SET_STATE: enable; DELETE: force */
	char aws_key[KMSD_KEK_WRAPPED_MAX + 1];
	uint8_t eph_pub[SL_EPH_PUB_LEN];
	uint8_t dek[SL_KMS_DEK_LEN];
};

struct kp_res {
	int32_t rc;
	uint32_t seq;
	uint32_t version;
	uint32_t out_len;
	uint32_t wrapped_len; /* NEW_SEALED: the wrapped DEK's part of out */
	uint8_t out[SL_KMS_WRAPPED_DEK_MAX + KMSD_SEALED_LEN];
	char detail[480];
};

/* what the monitor tells the network process */
struct kp_status {
	int32_t up;     /* 1: a key process serves; 0: it died; -1: the monitor ends */
	int32_t pid;    /* the key process */
	int32_t status; /* wait status of the one that died */
};

#endif
