/* A machine's GPUs as one set: every verified GPU report joins the set in
 * the claims, as gpu.<i>.* (its own claims) with gpu.count, and only when
 * it is bound to the same nonce as the others, is a GPU not yet in the set
 * (device id, certificate serial), and runs in the same mode. The gpu.*
 * claims without an index describe the set: a value every GPU shares, or
 * "mixed"; gpu.devtools and gpu.binding keep their weakest value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvgpu_int.h"

#define MAX_GPUS 64

static bool indexed(const char *key)
{
	return strncmp(key, "gpu.", 4) == 0 && key[4] >= '0' && key[4] <= '9';
}

static bool set_level(const char *key)
{
	return strncmp(key, "gpu.", 4) != 0 || indexed(key) || strcmp(key, "gpu.count") == 0;
}

static size_t count_of(const sl_claims *c)
{
	const char *s = sl_claims_get(c, "gpu.count");
	if (s == NULL)
		return 0;
	char *end = NULL;
	unsigned long n = strtoul(s, &end, 10);
	return end != s && *end == '\0' && n <= MAX_GPUS ? (size_t)n : MAX_GPUS + 1;
}

static const char *nz(const char *s)
{
	return s != NULL ? s : "(none)";
}

static const char *gpu_claim(const sl_claims *c, size_t i, const char *suffix)
{
	char key[160];
	snprintf(key, sizeof(key), "gpu.%zu.%s", i, suffix);
	return sl_claims_get(c, key);
}

static bool same(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

static SL_RESULT check_joins(const sl_claims *dst, size_t n, const sl_claims *one)
{
	sl_err rc = SL_E_ATTEST;
	const char *nonce = sl_claims_get(one, "gpu.nonce");
	const char *ueid = sl_claims_get(one, "gpu.ueid");
	const char *serial = sl_claims_get(one, "gpu.cert.serial");
	SL_ENSURE(n < MAX_GPUS, SL_E_ATTEST, "GPU evidence set: more than %d GPUs", MAX_GPUS);
	if (n == 0)
		return SL_OK;
	SL_ENSURE(same(nonce, gpu_claim(dst, 0, "nonce")), SL_E_ATTEST_BINDING,
	          "GPU evidence set: GPU %zu's report is bound to nonce %.16s..., GPU 0's to "
	          "%.16s...: every GPU of a set answers the same nonce",
	          n, nz(nonce), nz(gpu_claim(dst, 0, "nonce")));
	for (size_t i = 0; i < n; i++) {
		SL_ENSURE(!same(ueid, gpu_claim(dst, i, "ueid")), SL_E_ATTEST,
		          "GPU evidence set: GPU %zu is GPU %zu again (device id %s): each GPU "
		          "counts once",
		          n, i, ueid);
		SL_ENSURE(
		    !same(serial, gpu_claim(dst, i, "cert.serial")), SL_E_ATTEST,
		    "GPU evidence set: GPU %zu is GPU %zu again (attestation certificate %s): "
		    "each GPU counts once",
		    n, i, serial);
	}
	const char *cc = sl_claims_get(one, "gpu.cc"), *cc0 = gpu_claim(dst, 0, "cc");
	SL_ENSURE(same(cc, cc0), SL_E_ATTEST,
	          "GPU evidence set: GPU %zu has gpu.cc=%s, GPU 0 gpu.cc=%s: a set does not mix "
	          "confidential-computing modes",
	          n, nz(cc), nz(cc0));
	const char *m = sl_claims_get(one, "gpu.mode"), *m0 = gpu_claim(dst, 0, "mode");
	SL_ENSURE((m == NULL && m0 == NULL) || same(m, m0), SL_E_ATTEST,
	          "GPU evidence set: GPU %zu is in mode %s, GPU 0 in %s: a set does not mix modes",
	          n, nz(m), nz(m0));
	rc = SL_OK;
out:
	return rc;
}

/* The set's value of one un-indexed claim after GPU n joined with v. */
static const char *set_value(const char *key, const char *cur, const char *v, size_t n)
{
	if (n == 0)
		return v;
	if (strcmp(key, "gpu.devtools") == 0)
		return same(cur, "true") ? cur : v;
	if (strcmp(key, "gpu.binding") == 0)
		return same(cur, "unchecked") ? cur : v;
	return same(cur, v) ? cur : "mixed";
}

sl_err sl_nvgpu_set_add(sl_claims *dst, const sl_claims *one)
{
	sl_err rc = SL_E_ATTEST;
	sl_claims *rest = NULL;
	char key[160];
	size_t n = count_of(dst);

	SL_ENSURE(n <= MAX_GPUS, SL_E_ATTEST, "GPU evidence set: gpu.count is not 0..%d", MAX_GPUS);
	SL_GUARD(check_joins(dst, n, one));
	SL_GUARD(sl_claims_new(&rest));
	for (size_t i = 0; i < sl_claims_count(one); i++) {
		const char *k = sl_claims_key(one, i), *v = sl_claims_value(one, i);
		if (set_level(k)) {
			if (strncmp(k, "gpu.", 4) != 0)
				SL_GUARD(sl_claims_set(rest, k, v));
			continue;
		}
		snprintf(key, sizeof(key), "gpu.%zu.%s", n, k + 4);
		SL_GUARD(sl_claims_set(dst, key, v));
		SL_GUARD(sl_claims_set(dst, k, set_value(k, sl_claims_get(dst, k), v, n)));
	}
	/* what an earlier GPU had and this one lacks is no longer shared */
	for (size_t i = 0; n > 0 && i < sl_claims_count(dst); i++) {
		const char *k = sl_claims_key(dst, i);
		if (!set_level(k) && sl_claims_get(one, k) == NULL)
			SL_GUARD(sl_claims_set(dst, k, "mixed"));
	}
	SL_GUARD(sl_claims_setf(dst, "gpu.count", "%zu", n + 1));
	SL_GUARD(sl_claims_merge(dst, rest));
	rc = SL_OK;
out:
	sl_claims_free(rest);
	return rc;
}

sl_err sl_nvgpu_set_merge(sl_claims *dst, const sl_claims *src)
{
	sl_err rc = SL_E_ATTEST;
	sl_claims *one = NULL, *rest = NULL;
	char prefix[32];
	size_t m = count_of(src);

	if (m == 0)
		return sl_claims_merge(dst, src);
	SL_ENSURE(m <= MAX_GPUS, SL_E_ATTEST, "GPU evidence set: gpu.count is not 0..%d", MAX_GPUS);
	for (size_t g = 0; g < m; g++) {
		int plen = snprintf(prefix, sizeof(prefix), "gpu.%zu.", g);
		SL_GUARD(sl_claims_new(&one));
		for (size_t i = 0; i < sl_claims_count(src); i++) {
			const char *k = sl_claims_key(src, i);
			char key[160];
			if (strncmp(k, prefix, (size_t)plen) != 0)
				continue;
			snprintf(key, sizeof(key), "gpu.%s", k + plen);
			SL_GUARD(sl_claims_set(one, key, sl_claims_value(src, i)));
		}
		SL_GUARD(sl_nvgpu_set_add(dst, one));
		sl_claims_free(one);
		one = NULL;
	}
	SL_GUARD(sl_claims_new(&rest));
	for (size_t i = 0; i < sl_claims_count(src); i++) {
		if (strncmp(sl_claims_key(src, i), "gpu.", 4) != 0)
			SL_GUARD(
			    sl_claims_set(rest, sl_claims_key(src, i), sl_claims_value(src, i)));
	}
	SL_GUARD(sl_claims_merge(dst, rest));
	rc = SL_OK;
out:
	sl_claims_free(one);
	sl_claims_free(rest);
	return rc;
}
