/* The messages and audit records of a run or a serve (report.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "report.h"

void sl_report_say(const struct sl_report *r, const char *fmt, ...)
{
	va_list ap;
	if (sl_cli_quiet)
		return;
	fprintf(stderr, "seclaunch %s: ", r->cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* The one builder of a run's records: the job, the policy in force and,
 * with claims, the launch's claims digest. */
static SL_RESULT append(struct sl_report *r, const char *event, const char *ds, const char *key,
                        const char *decision, json_t *reasons, json_t *details, bool claims)
{
	sl_audit_record rec = {
	    .event = event,
	    .job_id = r->job_id,
	    .dataset_id = ds,
	    .key_id = key,
	    .policy_digest = r->policy_digest,
	    .decision = decision,
	    .reasons = reasons,
	    .claims_digest = claims && r->claims_digest[0] != '\0' ? r->claims_digest : NULL,
	    .details = details,
	};
	bool lazy = r->defer && (decision == NULL || (strcmp(decision, SL_AUDIT_DENY) != 0 &&
	                                              strcmp(decision, SL_AUDIT_ERROR) != 0));
	return lazy ? sl_audit_append_deferred(r->audit, &rec) : sl_audit_append(r->audit, &rec);
}

sl_err sl_report_record(struct sl_report *r, const char *event, const char *ds, const char *key,
                        const char *decision, json_t *reasons, json_t *details)
{
	sl_err rc = SL_OK;
	if (r->audit != NULL) {
		rc = append(r, event, ds, key, decision, reasons, details, true);
		if (rc != SL_OK)
			rc = sl_err_wrap(rc, "audit log %s", r->audit_log);
	}
	json_decref(reasons);
	json_decref(details);
	return rc;
}

void sl_report_note(struct sl_report *r, const char *event, const char *ds, const char *key,
                    const char *decision, json_t *reasons, json_t *details)
{
	if (sl_report_record(r, event, ds, key, decision, reasons, details) != SL_OK)
		fprintf(stderr, "seclaunch %s: warning: %s\n", r->cmd, sl_err_detail());
}

void sl_report_lease_record(struct sl_report *r, const char *event, const char *decision,
                            json_t *reasons, json_t *details)
{
	if (r->audit != NULL &&
	    append(r, event, NULL, NULL, decision, reasons, details, false) != SL_OK)
		fprintf(stderr, "seclaunch run: warning: audit: %s\n", sl_err_detail());
	json_decref(details);
}

void sl_report_lease_end(struct sl_report *r, const char *reason)
{
	snprintf(r->lease_reason, sizeof(r->lease_reason), "%s", reason);
	__atomic_store_n(&r->lease_ended, true, __ATOMIC_RELEASE);
}

bool sl_report_lease_ended(const struct sl_report *r)
{
	return __atomic_load_n(&r->lease_ended, __ATOMIC_ACQUIRE);
}

const char *sl_report_lease_reason(const struct sl_report *r)
{
	return sl_report_lease_ended(r) ? r->lease_reason : "";
}
