/* Test and benchmark client for seclaunchd, built by the kms_* tests and
 * scripts/bench/30-kms.sh against libseclaunch.a. It drives the real client
 * API (include/seclaunch/kms_client.h) with real TPM quotes (SECLAUNCH_TCTI), and
 * can break one thing on purpose to exercise each refusal.
 *
 *   kms_probe URL CA release KEY_ID DATASET_ID WRAPPED_B64 [VARIANT]
 *     VARIANT: ok | reuse | unknown-nonce | expire:SECS | other-eph |
 *              digest | flip | dataset:OTHER
 *     prints the SHA-256 of the released DEK; exits with the error's code.
 *     $KMS_PROBE_WORKLOAD_LOG: carry that workload log (PCR 15 quoted).
 *   kms_probe URL CA body KEY_ID DATASET_ID WRAPPED_B64
 *     a fresh challenge and a quote bound to it: prints the release
 *     request's JSON body, unsent (to be replayed, at once, elsewhere).
 *   kms_probe URL CA output KEY_ID JOB_ID OUTPUT_ID DESTINATION
 *     one attested POST /v1/output for OUTPUT_ID under KEY_ID with job.id
 *     JOB_ID (any output id: a client that lies about its run); prints the
 *     key id; a refusal prints each reason's code and detail.
 *   kms_probe URL CA enroll-wrong
 *     starts a real enrollment, then answers with a credential that is not
 *     the activated one (must be refused).
 *   kms_probe URL CA health N CONCURRENCY
 *     the transport peer: N GET /v1/health from CONCURRENCY threads.
 *   kms_probe URL CA burst N CONCURRENCY KEYS_FILE
 *     KEYS_FILE lines: KEY_ID DATASET_ID WRAPPED_B64 DEK_SHA256_HEX.
 *     Prepares N challenges + quotes serially (the TPM is serial), then runs
 *     the N releases over CONCURRENCY keep-alive connections at once (curl
 *     multi, one client thread per CPU, at most 2); checks every DEK after
 *     the timed phase; prints releases/s, p50, p99 and the client's own CPU
 *     time per request.
 *     $KMS_PROBE_RATE=R: open loop instead: request i is due at i/R s after
 *     the start and goes out as soon as it is due and a connection is free;
 *     its latency counts from when it was due (waiting for a connection
 *     included), so a server that falls behind shows in p99 rather than
 *     in a slower request stream.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kmsc/kms_http.h"
#include "seclaunch/attest.h"
#include "seclaunch/tpm2.h"
#include "seclaunch/kms_client.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

struct job {
	sl_kms_challenge ch;
	uint8_t eph_pub[SL_EPH_PUB_LEN];
	sl_secret *eph_sk;
	json_t *evidence;
	size_t key; /* index into keys */
};

struct key {
	char id[256], ds[256];
	uint8_t *wrapped;
	size_t wrapped_len;
	char dek_sha[65];
};

static const char *g_url, *g_ca;
static struct job *g_jobs;
static struct key *g_keys;
static size_t g_njobs;

static int die(const char *what, sl_err rc)
{
	fprintf(stderr, "kms_probe: %s: %s\n", what,
	        sl_err_detail()[0] ? sl_err_detail() : sl_err_message(rc));
	return sl_err_exit_code(rc);
}

static sl_err prepare(sl_kms *k, struct job *j, bool other_eph)
{
	sl_err rc = SL_E_INTERNAL;
	uint8_t binding[SL_BINDING_LEN], pub[SL_EPH_PUB_LEN];
	json_t *ev = NULL;
	SL_GUARD(sl_kms_challenge_get(k, &j->ch));
	SL_GUARD(sl_kms_eph_keypair(j->eph_pub, &j->eph_sk));
	memcpy(pub, j->eph_pub, sizeof(pub));
	if (other_eph)
		pub[0] ^= 1; /* the evidence binds another ephemeral key */
	sl_binding_compute(j->ch.nonce, pub, j->ch.policy_digest, binding);
	/* KMS_PROBE_WORKLOAD_LOG: a workload log file to carry, PCR 15 quoted */
	const char *wl = getenv("KMS_PROBE_WORKLOAD_LOG");
	sl_collect_opts co = {.nonce = binding,
	                      .nonce_len = sizeof(binding),
	                      .pcrs = wl != NULL ? "sha256:0,1,2,3,4,5,6,7,15" : NULL};
	SL_GUARD(sl_evidence_collect("tpm2", &co, &ev));
	if (wl != NULL)
		json_object_set_new(ev, "workload_log", json_load_file(wl, 0, NULL));
	j->evidence = json_array();
	json_array_append_new(j->evidence, ev);
	rc = SL_OK;
out:
	return rc;
}

static sl_err release(sl_kms *k, struct job *j, const struct key *key, const char *ds,
                      const uint8_t *digest, char out_sha[65])
{
	sl_err rc;
	sl_secret *dek[1] = {NULL};
	uint8_t h[32];
	sl_kms_key_req kr = {.key_id = key->id,
	                     .dataset_id = ds,
	                     .wrapped_dek = key->wrapped,
	                     .wrapped_dek_len = key->wrapped_len};
	/* KMS_PROBE_IDENTITY: a JSON array of identity documents to send */
	const char *idt = getenv("KMS_PROBE_IDENTITY");
	json_t *identity = idt != NULL ? json_loads(idt, 0, NULL) : NULL;
	sl_kms_release_req rq = {.nonce = j->ch.nonce,
	                         .eph_pub = j->eph_pub,
	                         .policy_digest = digest,
	                         .evidence = j->evidence,
	                         .identity = identity,
	                         .keys = &kr,
	                         .nkeys = 1};
	rc = sl_kms_release(k, &rq, j->eph_sk, dek);
	json_decref(identity);
	if (rc != SL_OK)
		return rc;
	sl_sha256(sl_secret_data(dek[0]), sl_secret_len(dek[0]), h);
	sl_hex_encode(h, 32, out_sha);
	sl_secret_free(dek[0]);
	return SL_OK;
}

static int cmd_release(sl_kms *k, char **argv, int argc)
{
	struct key key = {0};
	struct job j = {0};
	const char *variant = argc > 3 ? argv[3] : "ok";
	const char *ds = argv[1], *what = "wrapped";
	uint8_t digest[32];
	char sha[65];
	int ret;
	sl_err rc;
	snprintf(key.id, sizeof(key.id), "%s", argv[0]);
	snprintf(key.ds, sizeof(key.ds), "%s", argv[1]);
	rc = sl_b64_decode(argv[2], 4096, &key.wrapped, &key.wrapped_len, "wrapped");
	if (rc != SL_OK)
		goto done;
	what = "prepare";
	rc = prepare(k, &j, strcmp(variant, "other-eph") == 0);
	if (rc != SL_OK)
		goto done;
	memcpy(digest, j.ch.policy_digest, 32);
	if (strcmp(variant, "unknown-nonce") == 0 || strcmp(variant, "digest") == 0) {
		/* evidence correctly bound to a nonce this server never issued, or to
		 * a policy digest other than the server's */
		if (variant[0] == 'u')
			sl_random(j.ch.nonce, SL_NONCE_LEN);
		else
			digest[0] ^= 1;
		uint8_t binding[SL_BINDING_LEN];
		json_t *ev = NULL;
		sl_binding_compute(j.ch.nonce, j.eph_pub, digest, binding);
		sl_collect_opts co = {.nonce = binding, .nonce_len = sizeof(binding)};
		what = "collect";
		if ((rc = sl_evidence_collect("tpm2", &co, &ev)) != SL_OK)
			goto done;
		json_decref(j.evidence);
		j.evidence = json_array();
		json_array_append_new(j.evidence, ev);
	} else if (strncmp(variant, "expire:", 7) == 0) {
		sleep((unsigned)strtoul(variant + 7, NULL, 10));
	} else if (strcmp(variant, "flip") == 0) {
		key.wrapped[key.wrapped_len / 2] ^= 0x01;
	} else if (strncmp(variant, "dataset:", 8) == 0) {
		ds = variant + 8;
	}
	what = "release";
	rc = release(k, &j, &key, ds, digest, sha);
	if (rc == SL_OK && strcmp(variant, "reuse") == 0) {
		printf("%s\n", sha);
		rc = release(k, &j, &key, ds, digest, sha);
	}
	if (rc == SL_OK)
		printf("%s\n", sha);
done:
	ret = rc == SL_OK ? 0 : die(what, rc);
	free(key.wrapped);
	json_decref(j.evidence);
	sl_secret_free(j.eph_sk);
	return ret;
}

static int cmd_output(sl_kms *k, char **argv)
{
	struct job j = {0};
	sl_kms_output_key key = {0};
	json_t *job = json_pack("{s:s}", "id", argv[1]);
	const char *what = "prepare";
	sl_err rc = prepare(k, &j, false);
	if (rc == SL_OK) {
		sl_kms_output_want w = {argv[2], argv[3], argv[0]};
		sl_kms_output_req req = {.nonce = j.ch.nonce,
		                         .eph_pub = j.eph_pub,
		                         .policy_digest = j.ch.policy_digest,
		                         .evidence = j.evidence,
		                         .job = job,
		                         .outputs = &w,
		                         .noutputs = 1};
		what = "output";
		rc = sl_kms_output(k, &req, j.eph_sk, &key);
	}
	if (rc == SL_OK) {
		printf("%s\n", key.key_id);
		sl_secret_free(key.dek);
	} else {
		const json_t *p = sl_kms_last_problem(k), *r;
		size_t i;
		json_array_foreach (json_object_get(p, "reasons"), i, r)
			fprintf(stderr, "reason: [%s] %s\n",
			        json_string_value(json_object_get(r, "code")),
			        json_string_value(json_object_get(r, "detail")));
	}
	json_decref(job);
	json_decref(j.evidence);
	sl_secret_free(j.eph_sk);
	return rc == SL_OK ? 0 : die(what, rc);
}

static int cmd_enroll_wrong(sl_kms *k)
{
	sl_err rc = SL_E_INTERNAL;
	sl_tpm2_key_opts ko = {0};
	sl_tpm2_material m = {0};
	json_t *req = json_object(), *res = NULL, *act = NULL, *res2 = NULL;
	char *ek = NULL, *ak = NULL, *sec = NULL;
	uint8_t wrong[32];
	SL_GUARD(sl_tpm2_enrollment_material(&ko, &m));
	SL_GUARD(sl_b64_encode(m.ek_public, m.ek_public_len, &ek));
	SL_GUARD(sl_b64_encode(m.ak_public, m.ak_public_len, &ak));
	json_object_set_new(req, "ek_pub", json_string(ek));
	json_object_set_new(req, "ak_pub", json_string(ak));
	SL_GUARD(sl_kms_call(k, "/v1/enroll", req, false, KMS_RETRY_ALL, &res));
	sl_random(wrong, sizeof(wrong));
	SL_GUARD(sl_b64_encode(wrong, sizeof(wrong), &sec));
	act = json_pack("{s:O, s:s}", "session", json_object_get(res, "session"), "secret", sec);
	SL_GUARD(sl_kms_call(k, "/v1/enroll/activate", act, false, KMS_RETRY_ALL, &res2));
	rc = SL_OK;
out:
	free(ek);
	free(ak);
	free(sec);
	json_decref(req);
	json_decref(res);
	json_decref(act);
	json_decref(res2);
	sl_tpm2_material_free(&m);
	return rc == SL_OK ? 0 : die("enroll", rc);
}

/* The timed phase: one client thread drives CONCURRENCY keep-alive TLS
 * connections with curl's multi interface, so the client's own scheduling
 * does not crowd the server on a small machine. Each request body was built
 * before the phase; each answer is checked after it (the sealed DEK opens
 * with that request's ephemeral key and is the DEK wrapped for that
 * dataset). */
struct slot {
	CURL *h;
	size_t job;
	uint64_t t0;
	char *buf;
	size_t len;
};

static bool g_health;
static char **g_bodies;
/* Each release's answer, kept to be checked once the timed phase is over
 * (opening the sealed DEK is the client's work, not the service's: doing it
 * in the timed phase would take CPU from the server on a small machine). */
static char **g_answers;
static size_t *g_answer_len;

/* open loop (KMS_PROBE_RATE): request i is due at g_t0 + i * g_gap_ns */
static double g_gap_ns;
static uint64_t g_t0;

static uint64_t due(size_t job)
{
	return g_t0 + (uint64_t)((double)job * g_gap_ns);
}

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
	struct slot *s = ctx;
	char *nb = realloc(s->buf, s->len + size * n + 1);
	if (nb == NULL)
		return 0;
	s->buf = nb;
	memcpy(s->buf + s->len, p, size * n);
	s->len += size * n;
	s->buf[s->len] = '\0';
	return size * n;
}

static bool check_answer(size_t i, const char *body, size_t len)
{
	struct job *j = &g_jobs[i];
	const struct key *key = &g_keys[j->key];
	json_t *r = json_loadb(body, len, 0, NULL);
	const char *sealed = json_string_value(
	    json_object_get(json_array_get(json_object_get(r, "keys"), 0), "sealed"));
	uint8_t *raw = NULL, dek[32], h[32];
	size_t rl = 0;
	char hex[65];
	bool ok = sealed != NULL && sl_b64_decode(sealed, 128, &raw, &rl, "sealed") == SL_OK &&
	          rl == 32 + crypto_box_SEALBYTES;
	if (ok)
		ok = crypto_box_seal_open(dek, raw, rl, j->eph_pub, sl_secret_data(j->eph_sk)) == 0;
	if (ok) {
		sl_sha256(dek, sizeof(dek), h);
		sl_hex_encode(h, 32, hex);
		ok = strcmp(hex, key->dek_sha) == 0;
		sl_wipe(dek, sizeof(dek));
	}
	if (!ok)
		fprintf(stderr, "kms_probe: release %zu (key %s, %s): %.300s\n", i, key->id,
		        key->ds, body);
	free(raw);
	json_decref(r);
	return ok;
}

static void start(CURLM *m, struct slot *s, size_t job)
{
	char url[512];
	s->job = job;
	s->len = 0;
	snprintf(url, sizeof(url), "%s%s", g_url, g_health ? "/v1/health" : "/v1/release");
	curl_easy_setopt(s->h, CURLOPT_URL, url);
	if (!g_health) {
		curl_easy_setopt(s->h, CURLOPT_POSTFIELDS, g_bodies[job]);
		curl_easy_setopt(s->h, CURLOPT_POSTFIELDSIZE, (long)strlen(g_bodies[job]));
	}
	s->t0 = g_gap_ns > 0 ? due(job) : sl_now_ns();
	curl_multi_add_handle(m, s->h);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t *g_lat;
static atomic_size_t g_next;
static atomic_int g_fails;

/* The next job number, if one is left (and, in the open loop, due). */
static bool take(size_t *job)
{
	size_t j = atomic_load(&g_next);
	while (j < g_njobs) {
		if (g_gap_ns > 0 && due(j) > sl_now_ns())
			return false;
		if (atomic_compare_exchange_weak(&g_next, &j, j + 1)) {
			*job = j;
			return true;
		}
	}
	return false;
}

static pthread_barrier_t g_barrier;

/* Opens every connection (TLS handshake) with a GET /v1/health before the
 * timed phase, so the figures are those of steady keep-alive traffic. */
static void warm_up(CURLM *m, struct slot *slots, size_t conc)
{
	char url[512];
	int running = 1;
	snprintf(url, sizeof(url), "%s/v1/health", g_url);
	for (size_t i = 0; i < conc; i++) {
		curl_easy_setopt(slots[i].h, CURLOPT_URL, url);
		curl_easy_setopt(slots[i].h, CURLOPT_HTTPGET, 1L);
		curl_multi_add_handle(m, slots[i].h);
	}
	while (running > 0) {
		curl_multi_perform(m, &running);
		if (running > 0)
			curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	for (size_t i = 0; i < conc; i++) {
		curl_multi_remove_handle(m, slots[i].h);
		slots[i].len = 0;
	}
	int q;
	while (curl_multi_info_read(m, &q) != NULL)
		;
}

/* Moves *i to the next free connection at or after it; false if none. */
static bool take_free(const bool *busy, size_t conc, size_t *i)
{
	while (*i < conc && busy[*i])
		(*i)++;
	return *i < conc;
}

/* One client thread: conc connections on one curl multi handle, taking job
 * numbers from the shared counter until none are left. */
static void *drive(void *arg)
{
	size_t conc = *(size_t *)arg, active = 0;
	CURLM *m = curl_multi_init();
	struct slot *slots = calloc(conc, sizeof(*slots));
	struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
	hdr = curl_slist_append(hdr, "Expect:");
	for (size_t i = 0; i < conc; i++) {
		CURL *h = curl_easy_init();
		slots[i].h = h;
		curl_easy_setopt(h, CURLOPT_CAINFO, g_ca);
		curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &slots[i]);
		curl_easy_setopt(h, CURLOPT_PRIVATE, &slots[i]);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
	}
	warm_up(m, slots, conc);
	pthread_barrier_wait(&g_barrier);
	pthread_barrier_wait(&g_barrier); /* g_t0 is set */
	bool *busy = calloc(conc, sizeof(*busy));
	for (;;) {
		size_t j;
		/* every free connection takes a request, if one is due */
		for (size_t i = 0; i < conc && take_free(busy, conc, &i) && take(&j); i++) {
			busy[i] = true;
			start(m, &slots[i], j);
			active++;
		}
		if (active == 0 && atomic_load(&g_next) >= g_njobs)
			break;
		int running, q;
		CURLMsg *msg;
		bool freed = false;
		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &q)) != NULL) {
			struct slot *sl;
			long status = 0;
			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&sl);
			curl_easy_getinfo(sl->h, CURLINFO_RESPONSE_CODE, &status);
			g_lat[sl->job] = sl_now_ns() - sl->t0;
			bool ok = msg->data.result == CURLE_OK && status == 200;
			if (ok && !g_health) {
				g_answers[sl->job] = sl->buf != NULL ? sl->buf : strdup("");
				g_answer_len[sl->job] = sl->len;
				sl->buf = NULL;
				sl->len = 0;
			}
			if (!ok) {
				atomic_fetch_add(&g_fails, 1);
				if (msg->data.result != CURLE_OK || status != 200)
					fprintf(stderr,
					        "kms_probe: request %zu: %s, HTTP %ld: %.300s\n",
					        sl->job, curl_easy_strerror(msg->data.result),
					        status, sl->buf ? sl->buf : "");
			}
			curl_multi_remove_handle(m, sl->h);
			active--;
			busy[sl - slots] = false;
			freed = true;
		}
		if (freed)
			continue; /* the free connections take the next requests first */
		/* closed loop: poll until an answer; open loop: at most until the
		 * next request is due */
		int wait_ms = 100;
		size_t nx = atomic_load(&g_next);
		if (g_gap_ns > 0 && nx < g_njobs && active < conc) {
			uint64_t now = sl_now_ns(), d = due(nx);
			wait_ms = d <= now ? 0 : (int)((d - now + 999999u) / 1000000u);
		}
		if (wait_ms > 0)
			curl_multi_poll(m, NULL, 0, wait_ms, NULL);
	}
	free(busy);
	for (size_t i = 0; i < conc; i++) {
		curl_easy_cleanup(slots[i].h);
		free(slots[i].buf);
	}
	curl_slist_free_all(hdr);
	curl_multi_cleanup(m);
	free(slots);
	return NULL;
}

/* CPU time (user + system) of this process so far, in ns: the client's own
 * share of the machine during the timed phase. */
static uint64_t cpu_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

/* The connections are spread over one client thread per CPU (at most 2). */
static int run_multi(size_t n, size_t conc, const char *what)
{
	size_t nth = conc >= 2 ? 2 : 1, share[2] = {conc - conc / 2, conc / 2};
	pthread_t th[2];
	uint64_t t0, wall, cpu0, cpu;
	int mixups = 0;
	if (nth == 1)
		share[0] = conc;
	g_njobs = n;
	g_lat = calloc(n, sizeof(*g_lat));
	g_answers = calloc(n, sizeof(*g_answers));
	g_answer_len = calloc(n, sizeof(*g_answer_len));
	atomic_store(&g_next, 0);
	atomic_store(&g_fails, 0);
	pthread_barrier_init(&g_barrier, NULL, (unsigned)nth + 1);
	for (size_t i = 0; i < nth; i++)
		pthread_create(&th[i], NULL, drive, &share[i]);
	pthread_barrier_wait(&g_barrier);
	t0 = sl_now_ns();
	g_t0 = t0;
	cpu0 = cpu_ns();
	pthread_barrier_wait(&g_barrier);
	for (size_t i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	wall = sl_now_ns() - t0;
	cpu = cpu_ns() - cpu0;
	/* every answer received is checked (a missing one already counts as a
	 * failure) */
	for (size_t i = 0; !g_health && i < n; i++) {
		if (g_answers[i] != NULL && !check_answer(i, g_answers[i], g_answer_len[i]))
			mixups++;
		free(g_answers[i]);
	}
	pthread_barrier_destroy(&g_barrier);
	qsort(g_lat, n, sizeof(*g_lat), cmp_u64);
	int errors = atomic_load(&g_fails);
	atomic_fetch_add(&g_fails, mixups);
	printf("%s concurrency=%zu offered_per_s=%.0f requests=%zu errors=%d mixups=%d failed=%d "
	       "wall_s=%.3f per_s=%.0f p50_ms=%.2f p99_ms=%.2f client_cpu_ms_per_request=%.3f\n",
	       what, conc, g_gap_ns > 0 ? 1e9 / g_gap_ns : 0.0, n, errors, mixups,
	       atomic_load(&g_fails), (double)wall / 1e9, (double)n / ((double)wall / 1e9),
	       (double)g_lat[n / 2] / 1e6,
	       (double)g_lat[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] / 1e6,
	       (double)cpu / 1e6 / (double)n);
	free(g_lat);
	free(g_answers);
	free(g_answer_len);
	return atomic_load(&g_fails) == 0 ? 0 : 1;
}

static int cmd_health(char **argv)
{
	size_t n = strtoul(argv[0], NULL, 10), conc = strtoul(argv[1], NULL, 10);
	if (n == 0 || conc == 0)
		return fprintf(stderr, "kms_probe: health N CONC\n"), 1;
	g_health = true;
	g_jobs = calloc(n, sizeof(*g_jobs));
	int ret = run_multi(n, conc, "health");
	free(g_jobs);
	return ret;
}

/* The JSON body of job i's release request. */
static char *release_body(const struct job *j, const struct key *key)
{
	char *n = NULL, *e = NULL, *d = NULL, *w = NULL, *out = NULL;
	if (sl_b64_encode(j->ch.nonce, 32, &n) == SL_OK &&
	    sl_b64_encode(j->eph_pub, 32, &e) == SL_OK &&
	    sl_b64_encode(j->ch.policy_digest, 32, &d) == SL_OK &&
	    sl_b64_encode(key->wrapped, key->wrapped_len, &w) == SL_OK) {
		json_t *o =
		    json_pack("{s:s, s:s, s:s, s:O, s:[{s:s, s:s, s:s}]}", "nonce", n, "eph_pub", e,
		              "policy_digest", d, "evidence", j->evidence, "keys", "key_id",
		              key->id, "dataset_id", key->ds, "wrapped_dek", w);
		out = json_dumps(o, JSON_COMPACT);
		json_decref(o);
	}
	free(n);
	free(e);
	free(d);
	free(w);
	return out;
}

static int cmd_burst(sl_kms *k, char **argv)
{
	size_t n = strtoul(argv[0], NULL, 10), conc = strtoul(argv[1], NULL, 10), nkeys = 0;
	FILE *f = fopen(argv[2], "r");
	char line[1024];
	uint64_t t0;
	int ret;
	if (f == NULL || n == 0 || conc == 0)
		return fprintf(stderr, "kms_probe: burst N CONC KEYS_FILE\n"), 1;
	g_keys = calloc(4096, sizeof(*g_keys));
	while (nkeys < 4096 && fgets(line, sizeof(line), f) != NULL) {
		char w[512];
		struct key *key = &g_keys[nkeys];
		if (sscanf(line, "%255s %255s %511s %64s", key->id, key->ds, w, key->dek_sha) != 4)
			continue;
		if (sl_b64_decode(w, 4096, &key->wrapped, &key->wrapped_len, "wrapped") != SL_OK)
			return die("keys file", SL_E_INPUT);
		nkeys++;
	}
	fclose(f);
	if (nkeys == 0)
		return fprintf(stderr, "kms_probe: no keys\n"), 1;
	g_jobs = calloc(n, sizeof(*g_jobs));
	g_bodies = calloc(n, sizeof(*g_bodies));
	g_njobs = n;
	t0 = sl_now_ns();
	for (size_t i = 0; i < n; i++) {
		sl_err rc = prepare(k, &g_jobs[i], false);
		if (rc != SL_OK)
			return die("prepare", rc);
		g_jobs[i].key = i % nkeys;
		g_bodies[i] = release_body(&g_jobs[i], &g_keys[g_jobs[i].key]);
		if (g_bodies[i] == NULL)
			return die("request body", SL_E_NOMEM);
	}
	fprintf(stderr, "kms_probe: prepared %zu challenges + quotes in %.1f s\n", n,
	        (double)(sl_now_ns() - t0) / 1e9);
	/* KMS_PROBE_GO=FILE: several probes start their timed phases together */
	const char *go = getenv("KMS_PROBE_GO");
	while (go != NULL && access(go, F_OK) != 0)
		usleep(2000);
	const char *rate = getenv("KMS_PROBE_RATE");
	g_gap_ns = rate != NULL && strtod(rate, NULL) > 0 ? 1e9 / strtod(rate, NULL) : 0;
	ret = run_multi(n, conc, "release");
	for (size_t i = 0; i < n; i++) {
		free(g_bodies[i]);
		json_decref(g_jobs[i].evidence);
		sl_secret_free(g_jobs[i].eph_sk);
	}
	for (size_t i = 0; i < nkeys; i++)
		free(g_keys[i].wrapped);
	free(g_bodies);
	free(g_jobs);
	free(g_keys);
	return ret;
}

static int cmd_body(sl_kms *k, char **argv)
{
	struct key key = {0};
	struct job j = {0};
	char *body = NULL;
	sl_err rc;
	snprintf(key.id, sizeof(key.id), "%s", argv[0]);
	snprintf(key.ds, sizeof(key.ds), "%s", argv[1]);
	rc = sl_b64_decode(argv[2], 4096, &key.wrapped, &key.wrapped_len, "wrapped");
	if (rc == SL_OK)
		rc = prepare(k, &j, false);
	if (rc == SL_OK && (body = release_body(&j, &key)) == NULL)
		rc = sl_err_set(SL_E_NOMEM, "body");
	if (rc == SL_OK)
		printf("%s\n", body);
	free(body);
	free(key.wrapped);
	json_decref(j.evidence);
	sl_secret_free(j.eph_sk);
	return rc == SL_OK ? 0 : die("body", rc);
}

int main(int argc, char **argv)
{
	sl_kms *k = NULL;
	sl_err rc = sl_crypto_init();
	if (rc != SL_OK || argc < 4)
		return fprintf(stderr, "usage: kms_probe URL CA release|burst ...\n"), 1;
	g_url = argv[1];
	g_ca = argv[2];
	sl_kms_opts ko = {.url = g_url, .ca_file = g_ca};
	if ((rc = sl_kms_new(&ko, &k)) != SL_OK)
		return die("client", rc);
	int ret;
	if (strcmp(argv[3], "release") == 0 && argc >= 7)
		ret = cmd_release(k, argv + 4, argc - 4);
	else if (strcmp(argv[3], "body") == 0 && argc >= 7)
		ret = cmd_body(k, argv + 4);
	else if (strcmp(argv[3], "output") == 0 && argc >= 8)
		ret = cmd_output(k, argv + 4);
	else if (strcmp(argv[3], "enroll-wrong") == 0)
		ret = cmd_enroll_wrong(k);
	else if (strcmp(argv[3], "health") == 0 && argc >= 6)
		ret = cmd_health(argv + 4);
	else if (strcmp(argv[3], "burst") == 0 && argc >= 7)
		ret = cmd_burst(k, argv + 4);
	else
		ret = (fprintf(stderr, "kms_probe: bad arguments\n"), 1);
	sl_kms_free(k);
	return ret;
}
