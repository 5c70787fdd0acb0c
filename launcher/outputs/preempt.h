/* Spot / preemptible VM notices (preempt.c): a thread watches GCE's
 * instance/preempted (wait-for-change) or AWS's spot/instance-action
 * (IMDSv2); on notice it sends the job's process group the preemption
 * signal and, when the job has not exited after the grace period, SIGKILL.
 * Private to the launcher. */
#ifndef SECLAUNCH_LAUNCHER_PREEMPT_H
#define SECLAUNCH_LAUNCHER_PREEMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "outputs.h"
#include "seclaunch/error.h"

typedef struct sl_preempt sl_preempt;

typedef struct sl_preempt_opts {
	enum sl_preempt_kind kind; /* SL_PREEMPT_GCE or SL_PREEMPT_AWS */
	const char *base;          /* metadata base URL ("": the provider's) */
	int signo;                 /* sent to the job's group on notice */
	unsigned grace_s;          /* then SIGKILL */
} sl_preempt_opts;

SL_MUST_USE sl_err sl_preempt_start(const sl_preempt_opts *o, sl_preempt **out);
/* The job's process group (its pid); a notice that came first is acted on now. */
void sl_preempt_set_job(sl_preempt *p, pid_t pgid);
/* Whether a notice came; what said so ("gce", "aws") and when (monotonic s). */
bool sl_preempt_noticed(sl_preempt *p, char *source, size_t n, double *when);
/* Stops watching and joins the thread (NULL-safe). */
void sl_preempt_free(sl_preempt *p);

double sl_preempt_now(void); /* CLOCK_MONOTONIC seconds */

#endif
