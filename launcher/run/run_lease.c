/* The lease of the keys `seclaunch run` was given (docs/protocol.md,
 * Leases): the release answer carries it (expiry = release + the policy's
 * key_ttl); while the job runs, a thread renews it at half its life with a
 * fresh challenge and fresh evidence (the renew callback: sl_run_renew) (the workload register
 * quoted again, the GPU's CC state read again). A refused renewal, or none that succeeded by expiry
 * + --lease-grace, ends it: the stop descriptor becomes readable, supervise.c gives the job SIGTERM
 * and SIGKILL after --kill-grace, and run wipes and records run.lease_ended with the reason.
 *
 * The lease lasts past the job's end: the outputs are sealed with keys
 * under it (a shard is sealed only while it holds), so this thread renews
 * until the main thread stops it after the final seal.
 *
 * The audit writer is shared with the main thread and the data service's
 * (it serialises appends). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "run_int.h"
#include "seclaunch/json.h"
#include "seclaunch/util.h"

struct sl_run_lease {
	struct sl_run_lease_cfg c;
	bool armed; /* from the release's lease (sl_run_lease_stop_fd) */
	pthread_t th;
	bool running;
	int stop[2]; /* thread -> supervise: the job must stop */
	int ctl[2];  /* main -> thread: the job ended */
	sl_kms *kms; /* the thread's own connection */
	int64_t expires;
	unsigned ttl, renewals;
	sl_err code;          /* why it ended, as an error category */
	char reason[1200];    /* why, one line */
	json_t *reasons;      /* the KMS's reasons, when it refused */
	atomic_bool job_over; /* the job is gone (the outputs are being sealed) */
	bool ended_after_job; /* it ended then: no job was stopped */
	bool recorded;        /* run.lease_ended written */
};

static bool lease_times(const json_t *l, int64_t *exp, unsigned *ttl)
{
	const json_t *e = json_object_get(l, "expires_unix"), *t = json_object_get(l, "ttl");
	if (!json_is_integer(e) || !json_is_integer(t) || json_integer_value(t) <= 0)
		return false;
	*exp = (int64_t)json_integer_value(e);
	*ttl = (unsigned)json_integer_value(t);
	return true;
}

struct sl_run_lease *sl_run_lease_new(const struct sl_run_lease_cfg *c)
{
	struct sl_run_lease *L = calloc(1, sizeof(*L));
	if (L == NULL)
		return NULL;
	L->c = *c;
	L->stop[0] = L->stop[1] = L->ctl[0] = L->ctl[1] = -1;
	return L;
}

const int *sl_run_lease_stop_fd(struct sl_run_lease *L, const json_t *granted)
{
	if (L == NULL)
		return NULL;
	if (L->armed)
		return &L->stop[0];
	if (granted == NULL)
		return NULL; /* no key_ttl: no lease */
	if (!lease_times(granted, &L->expires, &L->ttl) || pipe2(L->stop, O_CLOEXEC) != 0 ||
	    pipe2(L->ctl, O_CLOEXEC) != 0) {
		/* a lease the run cannot keep is a lease that ends now */
		snprintf(L->reason, sizeof(L->reason), "the KMS's lease could not be kept: %s",
		         strerror(errno));
	}
	L->armed = true;
	return L->stop[0] >= 0 ? &L->stop[0] : NULL;
}

static void end(struct sl_run_lease *L, sl_err code, const char *fmt, ...) SL_PRINTF(3, 4);
static void end(struct sl_run_lease *L, sl_err code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(L->reason, sizeof(L->reason), fmt, ap);
	va_end(ap);
	L->code = code;
	L->ended_after_job = atomic_load(&L->job_over);
	sl_report_lease_end(L->c.rep, L->reason);
	fprintf(stderr, "seclaunch run: lease ended: %s: %s\n", L->reason,
	        L->ended_after_job ? "nothing more is sealed" : "stopping the job");
	if (write(L->stop[1], "x", 1) < 0) {
		/* the pipe is ours and empty: cannot fail short of a closed end */
	}
}

/* Waits up to ms for the job's end; true when it ended. */
static bool wait_ctl(struct sl_run_lease *L, int64_t ms)
{
	struct pollfd p = {.fd = L->ctl[0], .events = POLLIN};
	if (ms < 0)
		ms = 0;
	int r = poll(&p, 1, ms > 600000 ? 600000 : (int)ms);
	return r > 0;
}

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void *renewer(void *arg)
{
	struct sl_run_lease *L = arg;
	struct sl_report *rep = L->c.rep;
	unsigned grace = L->c.grace_s;
	char last[600] = "";
	for (;;) {
		/* renew at half the lease's life; after a failure, every second */
		int64_t at = L->expires * 1000 - (int64_t)L->ttl * 500;
		if (last[0] != '\0')
			at = now_ms() + 1000;
		if (wait_ctl(L, at - now_ms()))
			return NULL;
		if (now_ms() >= (L->expires + grace) * 1000) {
			end(L, SL_E_KMS_UNREACHABLE,
			    "no renewal succeeded by the lease's expiry + %u s grace (last "
			    "attempt: "
			    "%s)",
			    grace, last[0] ? last : "none");
			return NULL;
		}
		json_t *lease = NULL;
		uint64_t t0 = sl_now_ns();
		sl_err rc = L->c.renew(L->c.ctx, L->kms, L->renewals + 1, &lease);
		if (rc == SL_OK) {
			L->renewals++;
			last[0] = '\0';
			if (lease == NULL) {
				sl_report_lease_record(
				    rep, SL_AUDIT_EV_RUN_LEASE_RENEWED, SL_AUDIT_ALLOW, NULL,
				    json_pack("{s:i, s:n}", "renewal", (int)L->renewals, "lease"));
				sl_report_say(
				    rep, "the policy in force sets no key_ttl any more: no lease");
				return NULL;
			}
			(void)lease_times(lease, &L->expires, &L->ttl);
			sl_report_lease_record(
			    rep, SL_AUDIT_EV_RUN_LEASE_RENEWED, SL_AUDIT_ALLOW, NULL,
			    json_pack("{s:i, s:O, s:f}", "renewal", (int)L->renewals, "lease",
			              lease, "ms", (double)(sl_now_ns() - t0) / 1e6));
			json_decref(lease);
			continue;
		}
		const json_t *prob = sl_kms_last_problem(L->kms);
		const json_t *reasons = prob != NULL ? json_object_get(prob, "reasons") : NULL;
		if ((rc == SL_E_POLICY_DENIED || rc == SL_E_ATTEST) && reasons != NULL) {
			L->reasons = json_deep_copy(reasons);
			end(L, rc, "the KMS refused the renewal: %s", sl_err_detail());
			return NULL;
		}
		if (sl_err_exit_code(rc) == 3 || sl_err_exit_code(rc) == 7) {
			/* this machine could not prove itself again (GPU, TPM, register) */
			end(L, rc, "renewal: %s", sl_err_detail());
			return NULL;
		}
		snprintf(last, sizeof(last), "%s", sl_err_detail());
		sl_report_say(rep, "lease renewal failed (%s); retrying until expiry + %u s", last,
		              grace);
	}
}

void sl_run_lease_start(struct sl_run_lease *L)
{
	if (L == NULL || !L->armed)
		return;
	if (L->stop[0] < 0 || L->ctl[0] < 0) {
		end(L, SL_E_SYSTEM, "%s", L->reason);
		return;
	}
	sl_kms_opts ko = {.url = L->c.kms_url,
	                  .ca_file = L->c.kms_ca,
	                  .pinned_pubkey = L->c.kms_pin,
	                  .connect_timeout_ms = 2000,
	                  .total_timeout_ms = 10000,
	                  .max_attempts = 1};
	if (sl_kms_new(&ko, &L->kms) != SL_OK || pthread_create(&L->th, NULL, renewer, L) != 0) {
		end(L, SL_E_SYSTEM, "the lease renewal could not start: %s", sl_err_detail());
		return;
	}
	L->running = true;
	sl_report_say(L->c.rep, "lease: %u s, renewed every %u s while the job runs", L->ttl,
	              L->ttl / 2 > 0 ? L->ttl / 2 : 1);
}

void sl_run_lease_stop(struct sl_run_lease *L)
{
	if (L == NULL || !L->running)
		return;
	if (write(L->ctl[1], "x", 1) < 0) {
		/* see end() */
	}
	pthread_join(L->th, NULL);
	L->running = false;
}

void sl_run_lease_job_over(struct sl_run_lease *L)
{
	if (L != NULL)
		atomic_store(&L->job_over, true);
}

bool sl_run_lease_end(struct sl_run_lease *L, int *exit_code)
{
	if (L == NULL || !L->armed || !sl_report_lease_ended(L->c.rep))
		return false;
	*exit_code = sl_err_exit_code(L->code);
	if (L->recorded)
		return true;
	L->recorded = true;
	sl_report_lease_record(L->c.rep, SL_AUDIT_EV_RUN_LEASE_ENDED, SL_AUDIT_DENY, L->reasons,
	                       json_pack("{s:s, s:i, s:i, s:I}", "reason", L->reason, "exit_code",
	                                 *exit_code, "renewals", (int)L->renewals, "expires_unix",
	                                 (json_int_t)L->expires));
	if (L->ended_after_job)
		sl_report_say(L->c.rep, "the lease ended (%s) after the job's end", L->reason);
	else
		sl_report_say(L->c.rep, "the lease ended (%s); the job was stopped; exit %d",
		              L->reason, *exit_code);
	return true;
}

void sl_run_lease_free(struct sl_run_lease *L)
{
	if (L == NULL)
		return;
	sl_run_lease_stop(L);
	for (int i = 0; i < 2; i++) {
		if (L->stop[i] >= 0)
			close(L->stop[i]);
		if (L->ctl[i] >= 0)
			close(L->ctl[i]);
	}
	sl_kms_free(L->kms);
	json_decref(L->reasons);
	free(L);
}
