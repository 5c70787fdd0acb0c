/* Sealed outputs of `seclaunch run` (outputs.h; docs/job-interface.md).
 *
 * Each --output NAME=DEST is a sharded dataset with the id NAME:JOBID
 * (JOBID: this run's 16 hex digits), written to DEST as
 *   DEST/ckpt-SSSSSSSS/manifest.sldm + shard-NNNNN.sld   (sequence S)
 *   DEST/LATEST                                          ("S\n", last)
 * Shards go first, then the manifest, then LATEST: a checkpoint that
 * LATEST does not name was never complete. Its DEK comes from the KMS in
 * the launch's one attested release ("outputs"), wrapped under the KEK the
 * policy names for the output id, under the lease of every key; the manifest carries that wrapped
 * DEK, so a checkpoint is read back (--resume, decrypt --kms) by an ordinary attested release. */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../dataset/dataset_tree.h"
#include "outputs_int.h"
#include "preempt.h"
#include "seclaunch/json.h"
#include "seclaunch/util.h"

/* ---- options ------------------------------------------------------------ */

static bool name_ok(const char *s, size_t n)
{
	if (n == 0 || n > SL_OUT_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum =
		    (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
			return false;
	}
	return true;
}

static SL_RESULT split(const char *opt, const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (eq == NULL || !name_ok(arg, (size_t)(eq - arg)) || eq[1] == '\0')
		return sl_err_set(SL_E_USAGE,
		                  "--%s %s: want NAME=DEST, NAME 1..%d of [A-Za-z0-9._-] starting "
		                  "with a letter or digit",
		                  opt, arg, SL_OUT_NAME_MAX);
	return SL_OK;
}

static bool parse_size(const char *s, uint64_t *out)
{
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;
	if (s[0] < '0' || s[0] > '9' || errno != 0)
		return false;
	switch (*end) {
	case '\0':
		break;
	case 'K':
	case 'k':
		shift = 10;
		break;
	case 'M':
	case 'm':
		shift = 20;
		break;
	case 'G':
	case 'g':
		shift = 30;
		break;
	case 'T':
	case 't':
		shift = 40;
		break;
	default:
		return false;
	}
	if (*end != '\0' && end[1] != '\0')
		return false;
	if (v == 0 || v > (UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

static int parse_signal(const char *s)
{
	static const struct {
		const char *n;
		int v;
	} names[] = {{"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},
	             {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"QUIT", SIGQUIT}};
	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].n) == 0)
			return names[i].v;
	char *end = NULL;
	long v = strtol(s, &end, 10);
	return s[0] >= '0' && s[0] <= '9' && *end == '\0' && v >= 1 && v <= 64 && v != SIGKILL &&
	               v != SIGSTOP
	           ? (int)v
	           : 0;
}

int sl_out_option(struct sl_out_cfg *c, int key, const char *arg)
{
	switch (key) {
	case SL_OUT_O_OUTPUT:
	case SL_OUT_O_RESUME: {
		bool out = key == SL_OUT_O_OUTPUT;
		if (split(out ? "output" : "resume", arg) != SL_OK)
			return -1;
		if ((out ? c->n : c->nresume) >= SL_OUT_MAX) {
			(void)sl_err_set(SL_E_USAGE, "at most %d --%s", SL_OUT_MAX,
			                 out ? "output" : "resume");
			return -1;
		}
		if (out)
			c->spec[c->n++] = arg;
		else
			c->resume[c->nresume++] = arg;
		return 1;
	}
	case SL_OUT_O_LIMIT:
		if (!parse_size(arg, &c->limit)) {
			(void)sl_err_set(SL_E_USAGE,
			                 "--output-limit %s: not a size (N, NK, NM, NG)", arg);
			return -1;
		}
		return 1;
	case SL_OUT_O_PREEMPT_WATCH: {
		const char *eq = strchr(arg, '=');
		size_t kl = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
		if (kl == 7 && strncmp(arg, "sigterm", 7) == 0 && eq == NULL)
			c->preempt = SL_PREEMPT_SIGTERM;
		else if (kl == 3 && strncmp(arg, "gce", 3) == 0)
			c->preempt = SL_PREEMPT_GCE;
		else if (kl == 3 && strncmp(arg, "aws", 3) == 0)
			c->preempt = SL_PREEMPT_AWS;
		else {
			(void)sl_err_set(SL_E_USAGE,
			                 "--preempt-watch %s: want sigterm, gce[=URL] or aws[=URL]",
			                 arg);
			return -1;
		}
		if (eq != NULL) {
			if ((strncmp(eq + 1, "http://", 7) != 0 &&
			     strncmp(eq + 1, "https://", 8) != 0) ||
			    strlen(eq + 1) >= sizeof(c->preempt_base)) {
				(void)sl_err_set(SL_E_USAGE,
				                 "--preempt-watch %s: URL must be http(s)://", arg);
				return -1;
			}
			snprintf(c->preempt_base, sizeof(c->preempt_base), "%s", eq + 1);
		}
		return 1;
	}
	case SL_OUT_O_PREEMPT_SIGNAL:
		c->preempt_signal = parse_signal(arg);
		if (c->preempt_signal == 0) {
			(void)sl_err_set(
			    SL_E_USAGE,
			    "--preempt-signal %s: want TERM, INT, HUP, USR1, USR2, QUIT "
			    "or a number",
			    arg);
			return -1;
		}
		c->preempt_signal_set = true;
		return 1;
	case SL_OUT_O_PREEMPT_GRACE: {
		char *end = NULL;
		unsigned long v = strtoul(arg, &end, 10);
		if (arg[0] < '0' || arg[0] > '9' || *end != '\0' || v > 3600) {
			(void)sl_err_set(SL_E_USAGE, "--preempt-grace %s: want 0..3600 seconds",
			                 arg);
			return -1;
		}
		c->preempt_grace_s = (unsigned)v;
		c->preempt_grace_set = true;
		return 1;
	}
	case SL_OUT_O_CKPT_MIN_INTERVAL: {
		char *end = NULL;
		errno = 0;
		double v = strtod(arg, &end);
		if (arg[0] < '0' || arg[0] > '9' || *end != '\0' || errno != 0 || !(v <= 3600)) {
			(void)sl_err_set(SL_E_USAGE,
			                 "--checkpoint-min-interval %s: want 0..3600 seconds", arg);
			return -1;
		}
		c->ckpt_min_interval_ms = (uint64_t)(v * 1000 + 0.5);
		c->ckpt_min_interval_set = true;
		return 1;
	}
	default:
		return 0;
	}
}

sl_err sl_out_check(struct sl_out_cfg *c)
{
	sl_err rc = SL_OK;
	for (size_t i = 0; i < c->n; i++)
		for (size_t j = 0; j < i; j++) {
			size_t a = (size_t)(strchr(c->spec[i], '=') - c->spec[i]);
			if (a == (size_t)(strchr(c->spec[j], '=') - c->spec[j]) &&
			    strncmp(c->spec[i], c->spec[j], a) == 0)
				return sl_err_set(SL_E_USAGE, "--output %.*s given twice", (int)a,
				                  c->spec[i]);
		}
	for (size_t i = 0; i < c->nresume; i++) {
		size_t a = (size_t)(strchr(c->resume[i], '=') - c->resume[i]);
		bool found = false;
		for (size_t j = 0; j < c->n && !found; j++)
			found = strncmp(c->spec[j], c->resume[i], a) == 0 && c->spec[j][a] == '=';
		if (!found)
			return sl_err_set(SL_E_USAGE,
			                  "--resume %s: no --output %.*s to resume into",
			                  c->resume[i], (int)a, c->resume[i]);
	}
	if (!c->preempt_signal_set)
		c->preempt_signal = SIGTERM;
	if (!c->preempt_grace_set)
		c->preempt_grace_s = 25;
	if (!c->ckpt_min_interval_set)
		c->ckpt_min_interval_ms = 1000;
	if (c->preempt != SL_PREEMPT_NONE && c->n == 0)
		return sl_err_set(SL_E_USAGE, "--preempt-watch: no --output to save");
	if (c->n == 0)
		return SL_OK;
	/* read now, once: the seal runs after the job, too late to refuse */
	SL_GUARD(sl_out_env_num("SECLAUNCH_OUTPUT_SHARD_SIZE", SL_SLD_CHUNK_MIN, (uint64_t)1 << 40,
	                        SL_OUT_REMOTE_SHARD, &c->up_shard_size));
	SL_GUARD(sl_out_env_num("SECLAUNCH_OUTPUT_UPLOADS", 1, SL_OUT_UPLOADS_MAX,
	                        SL_OUT_UPLOADS_DEFAULT, &c->up_uploads));
	SL_GUARD(sl_out_env_num("SECLAUNCH_OUTPUT_STAGE_MEMORY", 0, 1, 1, &c->up_in_mem));
	return SL_OK;
out:
	return sl_err_wrap(rc, "--output");
}

/* ---- pre-flight ---------------------------------------------------------- */

/* What the job reads: the inputs and the resumed checkpoints (the KMS
 * judges every key of the release as read, docs/protocol.md). */
static size_t input_ids(const struct sl_outputs *O, const char *const *inputs, size_t ninputs,
                        const char **ids)
{
	size_t n = 0;
	for (size_t i = 0; i < ninputs; i++)
		ids[n++] = inputs[i];
	for (size_t i = 0; i < O->n; i++)
		if (O->o[i].r.man != NULL)
			ids[n++] = sl_sldm_dataset_id(O->o[i].r.man);
	return n;
}

static SL_RESULT describe(struct sl_outputs *O)
{
	sl_err rc = SL_E_USAGE;
	for (size_t i = 0; i < O->c->n; i++) {
		struct out_one *o = &O->o[i];
		const char *spec = O->c->spec[i], *eq = strchr(spec, '=');
		snprintf(o->name, sizeof(o->name), "%.*s", (int)(eq - spec), spec);
		snprintf(o->id, sizeof(o->id), "%s:%s", o->name, O->x.rep->job_id);
		SL_GUARD(sl_out_destination(spec, o->dest, sizeof(o->dest), o->policy_dest,
		                            sizeof(o->policy_dest), &o->remote));
		for (size_t j = 0; j < O->c->nresume; j++) {
			const char *r = O->c->resume[j];
			size_t a = strlen(o->name);
			if (strncmp(r, o->name, a) == 0 && r[a] == '=')
				o->resume = r + a + 1;
		}
	}
	O->n = O->c->n;
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_out_open(const struct sl_out_ctx *x, struct sl_outputs **out)
{
	sl_err rc = SL_E_INTERNAL;
	struct sl_outputs *O = NULL;
	sigset_t us;

	*out = NULL;
	if (x->c->n == 0)
		return SL_OK;
	/* checkpoint requests by signal are read by the watcher thread alone */
	sigemptyset(&us);
	sigaddset(&us, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &us, NULL);
	O = calloc(1, sizeof(*O));
	SL_ENSURE(O != NULL, SL_E_NOMEM, "outputs");
	O->x = *x;
	O->c = x->c;
	O->stop[0] = O->stop[1] = -1;
	pthread_mutex_init(&O->mu, NULL);
	*out = O;
	SL_GUARD(describe(O));
	/* a run that does not resume continues after what DEST already holds,
	 * so sequences only grow there */
	for (size_t i = 0; i < O->n; i++) {
		uint64_t seq = 0;
		SL_GUARD(sl_out_read_latest(O, O->o[i].dest, O->o[i].remote, &seq));
		O->o[i].next_seq = seq + 1;
	}
	for (size_t i = 0; i < O->n; i++)
		if (O->o[i].resume != NULL)
			SL_GUARD(sl_out_resume_open(O, &O->o[i]));
	rc = SL_OK;
out:
	return rc;
}

size_t sl_out_resume_keys(const struct sl_outputs *O, sl_kms_key_req *keys)
{
	size_t n = 0;
	for (size_t i = 0; O != NULL && i < O->n; i++) {
		const sl_sldm *m = O->o[i].r.man;
		if (m == NULL)
			continue;
		keys[n].key_id = sl_sldm_key_id(m);
		keys[n].dataset_id = sl_sldm_dataset_id(m);
		keys[n].wrapped_dek = sl_sldm_wrapped_dek(m, &keys[n].wrapped_dek_len);
		n++;
	}
	return n;
}

size_t sl_out_wants(const struct sl_outputs *O, sl_kms_output_want *want)
{
	size_t n = 0;
	for (size_t i = 0; O != NULL && i < O->n; i++, n++)
		want[n] = (sl_kms_output_want){O->o[i].id, O->o[i].policy_dest, NULL};
	return n;
}

void sl_out_released(struct sl_outputs *O, sl_secret *resume_deks[], sl_kms_output_key keys[])
{
	size_t r = 0;
	if (O == NULL)
		return;
	json_t *list = json_array();
	for (size_t i = 0; i < O->n; i++) {
		if (O->o[i].r.man != NULL) {
			O->o[i].r.dek = resume_deks[r];
			resume_deks[r++] = NULL;
		}
		O->o[i].key = keys[i];
		keys[i].dek = NULL;
		json_array_append_new(list, json_pack("{s:s, s:s, s:s}", "output", O->o[i].name,
		                                      "output_id", O->o[i].id, "destination",
		                                      O->o[i].policy_dest));
	}
	sl_report_note(O->x.rep, SL_AUDIT_EV_RUN_OUTPUT_KEY, NULL, NULL, SL_AUDIT_ALLOW, NULL,
	               json_pack("{s:o}", "outputs", list));
	sl_report_say(O->x.rep, "KMS issued %zu output key%s in the same release", O->n,
	              O->n == 1 ? "" : "s");
}

sl_err sl_out_preflight(struct sl_outputs *O, const sl_policy *policy, const sl_claims *claims,
                        const char *const *inputs, size_t ninputs, bool *explained)
{
	sl_err rc = SL_E_INTERNAL;
	sl_decision *d = NULL;
	const char **ids = NULL;
	bool denied = false;

	if (O == NULL)
		return SL_OK;
	ids = calloc(ninputs + SL_OUT_MAX, sizeof(*ids));
	SL_ENSURE(ids != NULL, SL_E_NOMEM, "outputs");
	size_t nin = input_ids(O, inputs, ninputs, ids);
	for (size_t i = 0; i < O->n; i++) {
		struct out_one *o = &O->o[i];
		const char *key = NULL, *dest[1] = {o->policy_dest};
		json_t *reasons = json_array();
		bool ok = true;
		if (sl_policy_output_key(policy, o->id, &key) != SL_OK) {
			json_array_append_new(reasons, json_string(sl_err_detail()));
			ok = false;
		}
		for (size_t j = 0; j <= nin && key != NULL; j++) {
			sl_policy_request pr = {.dataset_id = j == 0 ? o->id : ids[j - 1],
			                        .key_id = j == 0 ? key : NULL,
			                        .outputs = dest,
			                        .n_outputs = 1};
			sl_decision_free(d);
			d = NULL;
			SL_GUARD(sl_policy_evaluate(policy, claims, &pr, &d));
			for (size_t k = 0; k < sl_decision_reason_count(d); k++) {
				char line[1400];
				snprintf(line, sizeof(line), "%s%s%s%s",
				         j == 0 ? "output " : "input ", pr.dataset_id, ": ",
				         sl_decision_reason(d, k));
				json_array_append_new(reasons, json_string(line));
			}
			ok &= sl_decision_allowed(d);
		}
		sl_report_note(
		    O->x.rep, SL_AUDIT_EV_RUN_PREFLIGHT, o->id, key,
		    ok ? SL_AUDIT_ALLOW : SL_AUDIT_DENY, ok ? NULL : json_incref(reasons),
		    json_pack("{s:s, s:s}", "output", o->name, "destination", o->policy_dest));
		if (!ok) {
			size_t k;
			json_t *r;
			fprintf(stderr, "seclaunch %s: the policy denies output %s -> %s:\n",
			        O->x.rep->cmd, o->name, o->policy_dest);
			json_array_foreach (reasons, k, r) {
				fprintf(stderr, "  - %s\n", json_string_value(r));
			}
			denied = true;
		}
		json_decref(reasons);
	}
	if (denied) {
		fprintf(stderr, "  nothing was fetched from the KMS and nothing was written\n");
		*explained = true;
		SL_FAIL(SL_E_POLICY_DENIED, "the policy denies an output destination");
	}
	sl_report_say(O->x.rep, "pre-flight: the policy allows %zu output%s here", O->n,
	              O->n == 1 ? "" : "s");
	rc = SL_OK;
out:
	free(ids);
	sl_decision_free(d);
	return rc;
}
