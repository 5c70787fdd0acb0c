/* The reporting of a run or a serve: its messages on stderr and its audit
 * records, one context the launch fills in as it goes and the parts it
 * drives (outputs, the lease, serve) take instead of the whole run state.
 * Every audit record of a run is built here. */
#ifndef SECLAUNCH_LAUNCHER_REPORT_H
#define SECLAUNCH_LAUNCHER_REPORT_H

#include <jansson.h>
#include <stdbool.h>

#include "seclaunch/audit.h"
#include "seclaunch/error.h"

#define SL_REPORT_REASON_MAX 1200

struct sl_report {
	const char *cmd;           /* "run" or "serve": names every message */
	sl_audit *audit;           /* the run's audit log (NULL: none) */
	const char *audit_log;     /* its path, for messages */
	char job_id[17];           /* this run's 16 hex digits */
	const char *policy_digest; /* hex, once the policy is verified (NULL before) */
	char claims_digest[65];    /* hex, once the claims are made ("" before) */
	/* until the job starts: records are written at once and fsync'd
	 * together just before it (sl_audit_sync); a refusal or an error is
	 * durable at once */
	bool defer;
	/* the keys' lease (run_lease.c sets them, any thread reads them
	 * through sl_report_lease_ended / _reason) */
	bool lease_ended;
	char lease_reason[SL_REPORT_REASON_MAX];
};

/* "seclaunch CMD: ..." on stderr, but under -q. */
void sl_report_say(const struct sl_report *r, const char *fmt, ...) SL_PRINTF(2, 3);
/* Appends one record to the run's audit log (none: nothing); reasons and
 * details are consumed (json_decref). */
SL_MUST_USE sl_err sl_report_record(struct sl_report *r, const char *event, const char *ds,
                                    const char *key, const char *decision, json_t *reasons,
                                    json_t *details);
/* The same, for a record whose failure is not the run's: a warning on stderr. */
void sl_report_note(struct sl_report *r, const char *event, const char *ds, const char *key,
                    const char *decision, json_t *reasons, json_t *details);
/* The lease's records (its renewal thread, the job's end): written at once,
 * without the launch's claims digest (a renewal's claims are its own); a
 * failure is a warning. reasons is borrowed, details consumed. */
void sl_report_lease_record(struct sl_report *r, const char *event, const char *decision,
                            json_t *reasons, json_t *details);
/* The lease ended (refused or missed renewal): from then on no key of the
 * run is used, no output sealed. Any thread. */
void sl_report_lease_end(struct sl_report *r, const char *reason);
bool sl_report_lease_ended(const struct sl_report *r);
/* Why it ended ("" while it has not). */
const char *sl_report_lease_reason(const struct sl_report *r);

#endif
