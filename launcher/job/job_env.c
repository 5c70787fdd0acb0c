/* The job's clean environment: an allow-list, the variables of distributed
 * training (unless --clean-env), --env, --env-pass (names or shell
 * patterns) and SECLAUNCH_DATA / SECLAUNCH_DATA_SOCKET. Nothing else of
 * seclaunch's environment (tokens, TCTI strings, proxies, LD_* from the
 * caller) reaches the job, and no SECLAUNCH_* variable ever does unless
 * seclaunch sets it. */
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job.h"

#define DATA_VAR "SECLAUNCH_DATA"
#define OWN_PREFIX "SECLAUNCH_"

struct sl_job_env {
	char **set; /* "K=V" from --env */
	size_t nset;
	char **pass; /* names or patterns from --env-pass */
	size_t npass;
	char **user; /* HOME, USER, LOGNAME of --user (before --env) */
	size_t nuser;
	char **own; /* seclaunch's own: SECLAUNCH_DATA_SOCKET, ... (last) */
	size_t nown;
	bool clean; /* --clean-env: no distributed-training defaults */
};

static const char *const allow_exact[] = {"PATH", "HOME", "LANG", "TERM", "TZ"};
static const char *const allow_prefix[] = {"LC_", "CUDA_", "NVIDIA_"};
/* Distributed training (torchrun, Slurm, OpenMP): passed unless --clean-env
 * (docs/job-interface.md). */
static const char *const dist_exact[] = {
    "RANK",        "WORLD_SIZE",      "LOCAL_RANK",  "LOCAL_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT",     "GROUP_RANK",  "ROLE_RANK",
    "NODE_RANK",   "OMP_NUM_THREADS", "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES"};
static const char *const dist_prefix[] = {"SLURM_"};

static bool valid_name(const char *k, size_t n)
{
	if (n == 0 || (k[0] >= '0' && k[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = k[i];
		if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9')))
			return false;
	}
	return true;
}

static bool in_lists(const char *k, size_t n, const char *const *exact, size_t ne,
                     const char *const *prefix, size_t np)
{
	for (size_t i = 0; i < ne; i++)
		if (strlen(exact[i]) == n && strncmp(k, exact[i], n) == 0)
			return true;
	for (size_t i = 0; i < np; i++) {
		size_t pl = strlen(prefix[i]);
		if (n > pl && strncmp(k, prefix[i], pl) == 0)
			return true;
	}
	return false;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static bool allowed(const sl_job_env *e, const char *k, size_t n)
{
	/* seclaunch's own variables (its TCTI, keys' paths, tokens) never pass */
	if (n >= strlen(OWN_PREFIX) && strncmp(k, OWN_PREFIX, strlen(OWN_PREFIX)) == 0)
		return false;
	if (in_lists(k, n, allow_exact, N(allow_exact), allow_prefix, N(allow_prefix)))
		return true;
	if (!e->clean && in_lists(k, n, dist_exact, N(dist_exact), dist_prefix, N(dist_prefix)))
		return true;
	char name[256];
	if (n >= sizeof(name))
		return false;
	memcpy(name, k, n);
	name[n] = '\0';
	for (size_t j = 0; j < e->npass; j++)
		if (fnmatch(e->pass[j], name, 0) == 0)
			return true;
	return false;
}

/* A name, or a shell pattern of name characters and * ? [ ] ! */
static bool valid_pattern(const char *p)
{
	size_t n = strlen(p);
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (!(c == '_' || c == '*' || c == '?' || c == '[' || c == ']' || c == '!' ||
		      c == '-' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9')))
			return false;
	}
	return true;
}

sl_err sl_job_env_new(sl_job_env **out)
{
	*out = calloc(1, sizeof(**out));
	return *out != NULL ? SL_OK : sl_err_set(SL_E_NOMEM, "allocating the job environment");
}

void sl_job_env_free(sl_job_env *e)
{
	if (e == NULL)
		return;
	for (size_t i = 0; i < e->nset; i++)
		free(e->set[i]);
	for (size_t i = 0; i < e->npass; i++)
		free(e->pass[i]);
	for (size_t i = 0; i < e->nuser; i++)
		free(e->user[i]);
	for (size_t i = 0; i < e->nown; i++)
		free(e->own[i]);
	free(e->own);
	free(e->set);
	free(e->pass);
	free(e->user);
	free(e);
}

static SL_RESULT push(char ***v, size_t *n, const char *s)
{
	char **nv = realloc(*v, (*n + 1) * sizeof(char *));
	if (nv == NULL)
		return sl_err_set(SL_E_NOMEM, "allocating the job environment");
	*v = nv;
	nv[*n] = strdup(s);
	if (nv[*n] == NULL)
		return sl_err_set(SL_E_NOMEM, "allocating the job environment");
	(*n)++;
	return SL_OK;
}

sl_err sl_job_env_set(sl_job_env *e, const char *kv)
{
	const char *eq = strchr(kv, '=');
	if (eq == NULL || !valid_name(kv, (size_t)(eq - kv)))
		return sl_err_set(SL_E_USAGE,
		                  "--env '%s': want NAME=VALUE with NAME of [A-Za-z0-9_]", kv);
	if ((size_t)(eq - kv) >= strlen(DATA_VAR) && strncmp(kv, DATA_VAR, strlen(DATA_VAR)) == 0)
		return sl_err_set(SL_E_USAGE, "--env: %.*s is set by seclaunch only",
		                  (int)(eq - kv), kv);
	return push(&e->set, &e->nset, kv);
}

sl_err sl_job_env_pass(sl_job_env *e, const char *key)
{
	if (!valid_pattern(key))
		return sl_err_set(SL_E_USAGE,
		                  "--env-pass '%s': not a variable name or a pattern of one "
		                  "(letters, digits, _, and * ? [ ])",
		                  key);
	if (strncmp(key, OWN_PREFIX, strlen(OWN_PREFIX)) == 0)
		return sl_err_set(
		    SL_E_USAGE,
		    "--env-pass: %s: seclaunch's own variables (%s*) never pass to the "
		    "job",
		    key, OWN_PREFIX);
	return push(&e->pass, &e->npass, key);
}

void sl_job_env_clean(sl_job_env *e)
{
	e->clean = true;
}

sl_err sl_job_env_own(sl_job_env *e, const char *kv)
{
	return push(&e->own, &e->nown, kv);
}

sl_err sl_job_env_user(sl_job_env *e, const char *name, const char *home)
{
	sl_err rc = SL_E_NOMEM;
	char *kv = NULL;
	const char *const keys[] = {"USER", "LOGNAME"};
	for (size_t i = 0; i < 2; i++) {
		SL_ENSURE(asprintf(&kv, "%s=%s", keys[i], name) >= 0, SL_E_NOMEM,
		          "job environment");
		SL_GUARD(push(&e->user, &e->nuser, kv));
		free(kv);
		kv = NULL;
	}
	SL_ENSURE(asprintf(&kv, "HOME=%s", home) >= 0, SL_E_NOMEM, "job environment");
	SL_GUARD(push(&e->user, &e->nuser, kv));
	rc = SL_OK;
out:
	free(kv);
	return rc;
}

/* Index of the entry for name k (length n) in v, or -1. */
static long find(char **v, size_t cnt, const char *k, size_t n)
{
	for (size_t i = 0; i < cnt; i++)
		if (strncmp(v[i], k, n) == 0 && v[i][n] == '=')
			return (long)i;
	return -1;
}

/* Adds or replaces "K=V". */
static SL_RESULT put(char ***v, size_t *cnt, const char *kv)
{
	size_t n = (size_t)(strchr(kv, '=') - kv);
	long at = find(*v, *cnt, kv, n);
	if (at < 0)
		return push(v, cnt, kv);
	char *dup = strdup(kv);
	if (dup == NULL)
		return sl_err_set(SL_E_NOMEM, "allocating the job environment");
	free((*v)[at]);
	(*v)[at] = dup;
	return SL_OK;
}

const char *sl_job_pyhelper_dir(void)
{
	static char dir[PATH_MAX];
	static int found = -1;
	char exe[PATH_MAX], cand[PATH_MAX + 32], real[PATH_MAX];
	struct stat st;
	if (found >= 0)
		return found ? dir : NULL;
	found = 0;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash == NULL)
		return NULL;
	*slash = '\0';
	/* a source tree's bin/ (or build/asan/bin/) only: the folder above
	 * holds launcher/main.c; an installed /usr/bin/seclaunch has none */
	for (int up = 1; up <= 3; up++) {
		size_t o = (size_t)snprintf(cand, sizeof(cand), "%s", exe);
		for (int i = 0; i < up && o < sizeof(cand); i++)
			o += (size_t)snprintf(cand + o, sizeof(cand) - o, "/..");
		if (o + sizeof("/jobside/python/seclaunch_data.py") > sizeof(cand))
			return NULL;
		snprintf(cand + o, sizeof(cand) - o, "/launcher/main.c");
		if (stat(cand, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		snprintf(cand + o, sizeof(cand) - o, "/jobside/python/seclaunch_data.py");
		if (realpath(cand, real) == NULL || stat(real, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		*strrchr(real, '/') = '\0';
		snprintf(dir, sizeof(dir), "%s", real);
		found = 1;
		return dir;
	}
	return NULL;
}

sl_err sl_job_env_build(const sl_job_env *e, char *const *envp, const char *data_json, char ***out)
{
	sl_err rc = SL_E_NOMEM;
	char **v = NULL, *tmp = NULL;
	size_t cnt = 0;

	for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
		const char *eq = strchr(envp[i], '=');
		if (eq == NULL)
			continue;
		size_t n = (size_t)(eq - envp[i]);
		if (allowed(e, envp[i], n))
			SL_GUARD(put(&v, &cnt, envp[i]));
	}
	if (find(v, cnt, "PATH", 4) < 0)
		SL_GUARD(put(&v, &cnt, "PATH=/usr/local/bin:/usr/bin:/bin"));
	for (size_t i = 0; i < e->nuser; i++)
		SL_GUARD(put(&v, &cnt, e->user[i]));
	for (size_t i = 0; i < e->nset; i++)
		SL_GUARD(put(&v, &cnt, e->set[i]));
	/* a source build's job finds seclaunch_data as an installed one does */
	const char *py = sl_job_pyhelper_dir();
	if (py != NULL && find(v, cnt, "PYTHONPATH", 10) < 0) {
		SL_ENSURE(asprintf(&tmp, "PYTHONPATH=%s", py) >= 0, SL_E_NOMEM,
		          "allocating the job environment");
		SL_GUARD(put(&v, &cnt, tmp));
		free(tmp);
		tmp = NULL;
	}
	if (data_json != NULL) {
		SL_ENSURE(asprintf(&tmp, "%s=%s", DATA_VAR, data_json) >= 0, SL_E_NOMEM,
		          "allocating the job environment");
		SL_GUARD(put(&v, &cnt, tmp));
	}
	for (size_t i = 0; i < e->nown; i++)
		SL_GUARD(put(&v, &cnt, e->own[i]));
	char **nv = realloc(v, (cnt + 1) * sizeof(char *));
	SL_ENSURE(nv != NULL, SL_E_NOMEM, "allocating the job environment");
	v = nv;
	v[cnt] = NULL;
	*out = v;
	v = NULL;
	rc = SL_OK;
out:
	free(tmp);
	if (v != NULL) {
		for (size_t i = 0; i < cnt; i++)
			free(v[i]);
		free(v);
	}
	return rc;
}

void sl_strv_free(char **v)
{
	if (v == NULL)
		return;
	for (size_t i = 0; v[i] != NULL; i++)
		free(v[i]);
	free(v);
}
