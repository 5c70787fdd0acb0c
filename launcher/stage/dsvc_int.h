/* The data service's insides, shared by its admission and poll loop
 * (data_service.c) and its answers (dsvc_answer.c), which call nothing of
 * data_service.c. */
#ifndef SECLAUNCH_LAUNCHER_DSVC_INT_H
#define SECLAUNCH_LAUNCHER_DSVC_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "data_service.h"
#include "seclaunch/secret.h"

struct dataset {
	char *id;
	int fd; /* -1 for a stream dataset */
	json_t *info;
	sl_dsvc_stream_ops ops;
};

/* A shard a connection holds (stream datasets). */
struct hold {
	size_t ds;
	uint32_t shard;
};

enum conn_state {
	C_PRE,  /* serve: no request with the token yet (pre-auth pool) */
	C_IN,   /* admitted: holds a slot */
	C_SHUT, /* refused: answers go no further; closed after LINGER_MS */
};

struct conn {
	int fd;
	enum conn_state st;
	bool gone; /* to be closed at the end of this round */
	pid_t pid; /* SO_PEERCRED at accept */
	uid_t uid;
	int64_t since; /* C_PRE: accepted; C_IN: last request; C_SHUT: refused */
	struct hold *holds;
	size_t n, cap;
};

/* Refusals as the hook hears them: a burst is cut to a few and a summary. */
struct reports {
	int64_t window_end;
	unsigned told;      /* in this window */
	uint64_t held_back; /* in this window, not told one by one */
	pid_t pid;          /* the last held back */
	uid_t uid;
	const char *why;
};

struct sl_dsvc {
	sl_dsvc_opts o;
	char dir[108];
	char path[108];
	/* the socket's folder and the made folder's parent, opened once: the
	 * socket is bound, chowned and removed through them, never by a path
	 * the job's user could redirect once it owns the folder */
	int dfd, pdfd;
	char base[108]; /* the socket's name in dfd */
	char dname[64]; /* the made folder's name in pdfd */
	int lfd;
	int wake[2]; /* stop pipe */
	struct dataset *ds;
	size_t n_ds;
	pthread_t thread;
	bool running;
	bool made_dir;
	pthread_mutex_t mu;
	uint64_t served, refused;
	pid_t self;
	sl_secret *token; /* serve: the step's token (NULL: run's descendant check) */
	unsigned preauth_ms, idle_ms;
	struct reports rep; /* service thread only */
};

/* Sends o (taken) as one message, with pass_fd attached when >= 0; a peer
 * that does not read is not waited for. */
void sl_dsvc_send(int fd, json_t *o, int pass_fd);
/* {"ok": false, "error": code, "message": msg} */
json_t *sl_dsvc_error(const char *code, const char *msg);
/* Answers rq (parsed, its token checked) on c. */
void sl_dsvc_answer(sl_dsvc *s, struct conn *c, const sl_dsvc_req *rq);
/* Gives back every shard c holds (when it closes). */
void sl_dsvc_release_all(sl_dsvc *s, struct conn *c);

#endif
