/* Prometheus metrics: request counts and latency histograms per route,
 * releases, keys released, denials by reason, gauges for the challenge
 * table, the AK registry and the KEK count. Lock-free counters. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02,
                                 0.05,   0.1,   0.25,   0.5,   1.0,  2.5};
#define NB (sizeof(buckets) / sizeof(buckets[0]))

static const char *const route_names[KMSD_R__COUNT] = {
    "challenge",       "release",     "output",    "enroll",
    "enroll_activate", "keys_create", "keys_wrap", "health",
    "metrics",         "renew",       "aks",       "other"};

#define DENIAL_NAME_(n, s) s,
static const char *const denial_names[KMSD_D__COUNT] = {KMSD_DENIALS(DENIAL_NAME_)};
#undef DENIAL_NAME_

struct kmsd_metrics {
	atomic_ullong req[KMSD_R__COUNT][6]; /* by status class 1xx..5xx (index 1..5) */
	atomic_ullong hist[KMSD_R__COUNT][NB + 1];
	atomic_ullong sum_ns[KMSD_R__COUNT];
	atomic_ullong releases, keys_released;
	atomic_ullong denials[KMSD_D__COUNT];
	atomic_ullong counters[KMSD_C__COUNT];
};

static const struct {
	const char *name, *help;
} counter_info[KMSD_C__COUNT] = {
    {"seclaunchd_evidence_verified_total", "Evidence items handed to a verifier."},
    {"seclaunchd_audit_aggregated_total",
     "Refusals counted into an audit summary record instead of a record each."},
    {"seclaunchd_audit_unrecorded_total",
     "Decisions answered 503 because their audit record could not be written."},
};

void kmsd_metrics_count(kmsd_metrics *m, enum kmsd_counter c)
{
	if (m != NULL && c < KMSD_C__COUNT)
		atomic_fetch_add(&m->counters[c], 1);
}

const char *kmsd_denial_code(enum kmsd_denial d)
{
	return d < KMSD_D__COUNT ? denial_names[d] : "unknown";
}

sl_err kmsd_metrics_new(kmsd_metrics **out)
{
	*out = calloc(1, sizeof(**out));
	return *out != NULL ? SL_OK : sl_err_set(SL_E_NOMEM, "metrics");
}

void kmsd_metrics_free(kmsd_metrics *m)
{
	free(m);
}

void kmsd_metrics_request(kmsd_metrics *m, enum kmsd_route r, unsigned status, uint64_t ns)
{
	unsigned cls = status / 100;
	double s = (double)ns / 1e9;
	size_t b = 0;
	if (cls > 5)
		cls = 5;
	while (b < NB && s > buckets[b])
		b++;
	atomic_fetch_add(&m->req[r][cls], 1);
	atomic_fetch_add(&m->hist[r][b], 1);
	atomic_fetch_add(&m->sum_ns[r], ns);
}

void kmsd_metrics_release(kmsd_metrics *m, size_t nkeys)
{
	atomic_fetch_add(&m->releases, 1);
	atomic_fetch_add(&m->keys_released, nkeys);
}

void kmsd_metrics_denial(kmsd_metrics *m, enum kmsd_denial d)
{
	if (m != NULL)
		atomic_fetch_add(&m->denials[d], 1);
}

sl_err kmsd_metrics_render(kmsd_metrics *m, size_t challenges, size_t aks, size_t keys, char **out)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL)
		return sl_err_set(SL_E_NOMEM, "metrics");
	fprintf(f,
	        "# HELP seclaunchd_releases_total Key releases granted.\n"
	        "# TYPE seclaunchd_releases_total counter\n"
	        "seclaunchd_releases_total %llu\n",
	        (unsigned long long)atomic_load(&m->releases));
	fprintf(f,
	        "# HELP seclaunchd_keys_released_total DEKs released (all releases).\n"
	        "# TYPE seclaunchd_keys_released_total counter\n"
	        "seclaunchd_keys_released_total %llu\n",
	        (unsigned long long)atomic_load(&m->keys_released));
	fprintf(f, "# HELP seclaunchd_denials_total Release denials by reason.\n"
	           "# TYPE seclaunchd_denials_total counter\n");
	for (int d = 0; d < KMSD_D__COUNT; d++)
		fprintf(f, "seclaunchd_denials_total{reason=\"%s\"} %llu\n", denial_names[d],
		        (unsigned long long)atomic_load(&m->denials[d]));
	for (int c = 0; c < KMSD_C__COUNT; c++)
		fprintf(f, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", counter_info[c].name,
		        counter_info[c].help, counter_info[c].name, counter_info[c].name,
		        (unsigned long long)atomic_load(&m->counters[c]));
	fprintf(f,
	        "# HELP seclaunchd_challenges Live entries in the challenge table.\n"
	        "# TYPE seclaunchd_challenges gauge\nseclaunchd_challenges %zu\n",
	        challenges);
	fprintf(f,
	        "# HELP seclaunchd_enrolled_aks Enrolled attestation keys.\n"
	        "# TYPE seclaunchd_enrolled_aks gauge\nseclaunchd_enrolled_aks %zu\n",
	        aks);
	fprintf(f,
	        "# HELP seclaunchd_keks Key-encryption keys in the backend.\n"
	        "# TYPE seclaunchd_keks gauge\nseclaunchd_keks %zu\n",
	        keys);
	fprintf(f, "# HELP seclaunchd_requests_total HTTP requests by route and status class.\n"
	           "# TYPE seclaunchd_requests_total counter\n");
	for (int r = 0; r < KMSD_R__COUNT; r++) {
		for (int c = 1; c <= 5; c++) {
			unsigned long long v = atomic_load(&m->req[r][c]);
			if (v > 0)
				fprintf(
				    f,
				    "seclaunchd_requests_total{route=\"%s\",code=\"%dxx\"} %llu\n",
				    route_names[r], c, v);
		}
	}
	fprintf(f, "# HELP seclaunchd_request_duration_seconds Request latency.\n"
	           "# TYPE seclaunchd_request_duration_seconds histogram\n");
	for (int r = 0; r < KMSD_R__COUNT; r++) {
		unsigned long long cum = 0;
		for (size_t b = 0; b <= NB; b++) {
			cum += atomic_load(&m->hist[r][b]);
			if (b < NB)
				fprintf(f,
				        "seclaunchd_request_duration_seconds_bucket{route=\"%s\","
				        "le=\"%g\"} "
				        "%llu\n",
				        route_names[r], buckets[b], cum);
			else
				fprintf(f,
				        "seclaunchd_request_duration_seconds_bucket{route=\"%s\","
				        "le=\"+Inf\"} "
				        "%llu\n",
				        route_names[r], cum);
		}
		fprintf(f, "seclaunchd_request_duration_seconds_sum{route=\"%s\"} %.6f\n",
		        route_names[r], (double)atomic_load(&m->sum_ns[r]) / 1e9);
		fprintf(f, "seclaunchd_request_duration_seconds_count{route=\"%s\"} %llu\n",
		        route_names[r], cum);
	}
	if (fclose(f) != 0 || buf == NULL) {
		free(buf);
		return sl_err_set(SL_E_NOMEM, "metrics");
	}
	*out = buf;
	return SL_OK;
}
