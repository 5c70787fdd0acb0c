/* Private to `seclaunch run` (cmd_run.c parses, run_exec.c executes). */
#ifndef SECLAUNCH_LAUNCHER_RUN_INT_H
#define SECLAUNCH_LAUNCHER_RUN_INT_H

#include <stddef.h>

#include "job.h"
#include "seclaunch/stage.h"

#define SL_RUN_MAX_DATASETS 64

struct sl_run {
	const char *policy_path, *policy_sig, *policy_pub;
	const char *kms_url, *kms_ca;
	const char *tcti, *tee, *collateral;
	const char *cloud_identity, *gcp_jwks, *aws_certs, *region;
	const char *audit_log, *audit_key;
	char audit_log_buf[512];
	sl_stage_where where;
	unsigned timeout_s, threads;
	sl_job_env *env;
	char **datasets;
	size_t ndatasets;
	char **cmd;
};

/* Runs the whole launch; returns the exit code. */
int sl_run_execute(struct sl_run *r);

#endif
