/* The steps of `seclaunch run` that establish what this machine is:
 * challenge, ephemeral key, bound evidence (CPU and GPU), region identity,
 * GPU probe, claims. run_exec.c runs them in order. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cli/region_id.h"
#include "run_int.h"
#include "seclaunch/identity.h"
#include "seclaunch/tpm2.h"
#include "seclaunch/util.h"
#include "seclaunch/json.h"

static SL_RESULT sl_run_step_challenge(struct sl_run_st *s)
{
	sl_err rc = SL_E_INTERNAL;
	sl_kms_opts ko = {
	    .url = s->o->kms_url, .ca_file = s->o->kms_ca, .pinned_pubkey = s->o->kms_pin};
	char theirs[2 * SL_SHA256_LEN + 1];

	SL_GUARD(sl_kms_new(&ko, &s->kms));
	SL_GUARD(sl_kms_challenge_get(s->kms, &s->ch));
	/* seclaunchd would refuse the release anyway: say so now, naming both */
	sl_hex_encode(s->ch.policy_digest, SL_SHA256_LEN, theirs);
	SL_ENSURE(sl_ct_eq(s->ch.policy_digest, sl_policy_digest(s->policy), SL_SHA256_LEN),
	          SL_E_KMS_REFUSED,
	          "policy skew: %s has sha256 %s but the KMS at %s enforces sha256 %s",
	          s->o->policy_path, sl_policy_digest_hex(s->policy), s->o->kms_url, theirs);
	SL_GUARD(sl_kms_eph_keypair(s->eph_pub, &s->eph_sk));
	sl_binding_compute(s->ch.nonce, s->eph_pub, sl_policy_digest(s->policy), s->binding);
	rc = SL_OK;
out:
	return rc;
}

static void *challenge_thread(void *arg)
{
	struct sl_run_st *s = arg;
	uint64_t t = sl_now_ns();
	s->ch_async.rc = sl_run_step_challenge(s);
	if (s->ch_async.rc != SL_OK)
		snprintf(s->ch_async.detail, sizeof(s->ch_async.detail), "%s", sl_err_detail());
	s->ch_async.ns = sl_now_ns() - t;
	return NULL;
}

/* The challenge needs nothing the measurement makes and the measurement
 * needs no nonce (the register is extended before the quote, which is what
 * the nonce binds): the KMS round trip and the hashing, TPM extend and log
 * write overlap. The thread touches only s->kms, s->ch, s->eph_* and
 * s->binding until the join; signals stay blocked in it as in the rest. */
sl_err sl_run_challenge_begin(struct sl_run_st *s)
{
	int e = pthread_create(&s->ch_async.thread, NULL, challenge_thread, s);
	if (e != 0)
		return sl_err_set(SL_E_SYSTEM, "starting the challenge thread: %s", strerror(e));
	s->ch_async.started = true;
	return SL_OK;
}

void sl_run_challenge_join(struct sl_run_st *s)
{
	if (!s->ch_async.started)
		return;
	(void)pthread_join(s->ch_async.thread, NULL);
	s->ch_async.started = false;
}

sl_err sl_run_challenge_end(struct sl_run_st *s)
{
	if (!s->ch_async.started)
		return SL_OK;
	sl_run_challenge_join(s);
	if (s->ch_async.rc != SL_OK)
		return sl_err_set(s->ch_async.rc, "%s", s->ch_async.detail);
	return SL_OK;
}

/* A GPU in CC mode is attested with the same binding before it is set ready
 * and before any plaintext reaches it; the KMS verifies this evidence too. */
static SL_RESULT gpu_evidence(struct sl_run_st *s)
{
	sl_err rc = SL_E_INTERNAL;
	json_t *ev = NULL;
	sl_collect_opts co = {.nonce = s->binding, .nonce_len = SL_BINDING_LEN};
	sl_verify_opts vo = {
	    .expect = s->binding, .expect_len = SL_BINDING_LEN, .collateral_dir = s->o->collateral};

	SL_GUARD(sl_evidence_collect("nvidia-gpu", &co, &ev));
	rc = sl_evidence_verify(ev, &vo, s->claims);
	if (rc != SL_OK)
		SL_GUARD(sl_err_wrap(rc, "checking the GPU's own evidence"));
	SL_ENSURE(json_array_append(s->evidence, ev) == 0, SL_E_NOMEM, "evidence list");
	if (s->gpu.needs_ready)
		SL_GUARD(sl_gpu_set_ready(&s->gpu));
	sl_report_say(&s->rep, "GPU attested: nvidia-gpu evidence bound to the same nonce");
	rc = SL_OK;
out:
	json_decref(ev);
	return rc;
}

/* The AK public key of tpm2 evidence as a PEM file at path, to pin it for
 * the local check. Not secret, and it lives only for that check: written
 * without the fsyncs of an atomic write. */
static SL_RESULT pin_ak(const json_t *ev, const char *path)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	const char *b64 = sl_json_getstr(ev, "ak_public");
	uint8_t *raw = NULL;
	size_t len = 0;
	char *pem = NULL;
	int fd = -1;

	SL_ENSURE(b64 != NULL, SL_E_ATTEST_FORMAT, "tpm2 evidence: ak_public missing");
	SL_GUARD(sl_b64_decode(b64, 4096, &raw, &len, "evidence.ak_public"));
	SL_GUARD(sl_tpm2_public_to_pem(raw, len, &pem));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	SL_ENSURE(fd >= 0, SL_E_SYSTEM, "%s: %s", path, strerror(errno));
	SL_GUARD(sl_write_all(fd, pem, strlen(pem), path));
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	free(raw);
	free(pem);
	return rc;
}

/* Collects evidence bound to the binding and verifies it here too, so the
 * pre-flight sees the same claims the KMS will. The AK's public key goes
 * through a private temporary directory (it is not secret). */
sl_err sl_run_step_evidence(struct sl_run_st *s)
{
	sl_err rc = SL_E_INTERNAL;
	const char *tmp = getenv("TMPDIR");
	char dir[256], ak[300];
	json_t *ev = NULL;

	snprintf(dir, sizeof(dir), "%s/seclaunch-run.XXXXXX",
	         tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
	SL_ENSURE(mkdtemp(dir) != NULL, SL_E_SYSTEM, "mkdtemp %s: %s", dir, strerror(errno));
	snprintf(ak, sizeof(ak), "%s/ak.pem", dir);
	SL_GUARD(sl_run_collect(s, s->binding, &ev));
	SL_GUARD(sl_claims_new(&s->claims));
	const char *evkind = sl_json_getstr(ev, "kind");
	if (evkind != NULL && strcmp(evkind, "tpm2") == 0)
		SL_GUARD(pin_ak(ev, ak));
	sl_verify_opts vo = {.expect = s->binding,
	                     .expect_len = SL_BINDING_LEN,
	                     .ak_pin_pem = access(ak, R_OK) == 0 ? ak : NULL,
	                     .collateral_dir = s->o->collateral};
	rc = sl_evidence_verify(ev, &vo, s->claims);
	if (rc != SL_OK)
		SL_GUARD(sl_err_wrap(rc, "checking this machine's own evidence"));
	s->evidence = json_array();
	SL_ENSURE(s->evidence != NULL && json_array_append(s->evidence, ev) == 0, SL_E_NOMEM,
	          "evidence list");
	const char *kind = sl_claims_get(s->claims, "tee.kind");
	sl_report_say(&s->rep, "attested: %s evidence bound to the KMS nonce",
	              kind != NULL ? kind : s->o->tee);
	if (s->use_gpu && strcmp(s->gpu.cc, "on") == 0)
		SL_GUARD(gpu_evidence(s));
	rc = SL_OK;
out:
	json_decref(ev);
	(void)unlink(ak);
	(void)rmdir(dir);
	return rc;
}

sl_err sl_run_step_identity(struct sl_run_st *s)
{
	sl_err rc = SL_E_INTERNAL;
	json_t *doc = NULL;

	struct sl_region_id rid = {.cloud_identity = s->o->cloud_identity,
	                           .gcp_jwks = s->o->gcp_jwks,
	                           .aws_trust = s->o->aws_certs,
	                           .region = s->o->region};

	s->identity = json_array();
	SL_ENSURE(s->identity != NULL, SL_E_NOMEM, "identity list");
	SL_GUARD(sl_region_id_collect(&rid, s->binding, s->claims, &doc));
	if (s->o->region != NULL && sl_policy_allow_unverified_region(s->policy))
		sl_report_say(&s->rep,
		              "WARNING: region %s is UNVERIFIED (given with --region, signed by "
		              "nobody); "
		              "it counts only because the policy sets allow_unverified_region: "
		              "development use only",
		              s->o->region);
	if (doc != NULL) {
		SL_ENSURE(json_array_append(s->identity, doc) == 0, SL_E_NOMEM, "identity list");
		const char *p = sl_claims_get(s->claims, "cloud.provider");
		const char *g = sl_claims_get(s->claims, "cloud.region");
		sl_report_say(
		    &s->rep, "region %s:%s (%s)", p != NULL ? p : "?", g != NULL ? g : "?",
		    sl_claims_get(s->claims, "cloud.region_verified") != NULL &&
		            strcmp(sl_claims_get(s->claims, "cloud.region_verified"), "true") == 0
		        ? "verified"
		        : "unverified");
	}
	rc = SL_OK;
out:
	json_decref(doc);
	return rc;
}

/* Probed before anything is asked of the KMS, so `--stage gpu` without a
 * usable GPU fails at once. Host staging gives no GPU any data: absent. */
sl_err sl_run_step_gpu(struct sl_run_st *s)
{
	sl_err rc = SL_E_INTERNAL;
	memset(&s->gpu, 0, sizeof(s->gpu));
	snprintf(s->gpu.cc, sizeof(s->gpu.cc), "absent");
	SL_ENSURE(!s->o->gpu_decrypt ||
	              (s->o->where != SL_STAGE_HOST && s->o->where != SL_STAGE_GPU_IPC &&
	               s->o->where != SL_STAGE_STREAM),
	          SL_E_USAGE, "--gpu-decrypt goes with --stage gpu or auto, not --stage %s",
	          s->o->where == SL_STAGE_HOST     ? "host"
	          : s->o->where == SL_STAGE_STREAM ? "stream"
	                                           : "gpu-ipc");
	/* host and stream staging give no GPU any data */
	if (s->o->where != SL_STAGE_HOST && s->o->where != SL_STAGE_STREAM) {
		sl_gpu_probe(&s->gpu);
		SL_ENSURE(s->gpu.usable || s->o->where == SL_STAGE_AUTO || s->o->gpu_decrypt,
		          SL_E_GPU, "--stage %s: no usable GPU: %s",
		          s->o->where == SL_STAGE_GPU_IPC ? "gpu-ipc" : "gpu", s->gpu.reason);
		SL_ENSURE(s->gpu.usable || !s->o->gpu_decrypt, SL_E_GPU,
		          "--gpu-decrypt: no usable GPU: %s", s->gpu.reason);
		/* before any key is asked for: IPC may be missing (protected-PCIe CC) */
		if (s->o->where == SL_STAGE_GPU_IPC && !s->gpu.needs_ready)
			SL_GUARD(sl_gpu_ipc_probe(&s->gpu));
		/* the job uploads with libseclaunch_data.so: it must be there */
		char lib[4096];
		if (s->gpu.usable && s->o->where != SL_STAGE_GPU_IPC &&
		    sl_stage_gpu_library(lib, sizeof(lib)) != SL_OK) {
			snprintf(s->gpu.reason, sizeof(s->gpu.reason), "%s", sl_err_detail());
			SL_ENSURE(s->o->where == SL_STAGE_AUTO && !s->o->gpu_decrypt, SL_E_GPU,
			          "%s", s->gpu.reason);
			s->gpu.usable = false;
		}
		s->use_gpu = s->gpu.usable;
		if (!s->use_gpu) {
			/* a CPU-only machine is no news: the probe's reason only with -v */
			if (s->o->verbose)
				sl_report_say(&s->rep, "staging in host memory: %s", s->gpu.reason);
			else
				sl_report_say(&s->rep, "staging in host memory");
			snprintf(s->gpu.cc, sizeof(s->gpu.cc), "absent");
		} else {
			sl_report_say(&s->rep, "GPU %s: %s", s->gpu.name, s->gpu.reason);
		}
	}
	rc = SL_OK;
out:
	return rc;
}

/* The GPU's state becomes claims (gpu.cc on/off/absent) that the policy's
 * require_gpu_cc decides on; then the digest of everything the pre-flight
 * will judge. */
sl_err sl_run_step_claims(struct sl_run_st *s)
{
	sl_err rc = SL_E_INTERNAL;
	uint8_t d[32];
	/* the GPU's verified evidence, when there is some, said it already */
	if (sl_claims_get(s->claims, "gpu.cc") == NULL)
		SL_GUARD(sl_claims_set(s->claims, "gpu.cc", s->gpu.cc));
	if (s->use_gpu && sl_claims_get(s->claims, "gpu.devtools") == NULL)
		SL_GUARD(
		    sl_claims_set(s->claims, "gpu.devtools", s->gpu.devtools ? "true" : "false"));
	sl_claims_digest(s->claims, d);
	sl_hex_encode(d, sizeof(d), s->rep.claims_digest);
	rc = SL_OK;
out:
	return rc;
}
