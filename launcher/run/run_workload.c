/* The job's workload identity: computed before the challenge from what
 * will really run, extended into the workload register before evidence is
 * collected, and its log carried in the evidence (docs/claims.md,
 * "Workload identity").
 *
 * The executable is opened once, hashed through that descriptor, and that
 * descriptor is what the job is started from (execveat AT_EMPTY_PATH): a
 * file renamed or replaced by path after the measurement is not what runs.
 * A `#!` script is measured as its interpreter (opened and executed the same
 * way) plus the script; a script named on an interpreter's command line
 * (python3 train.py) is hashed too, found by the interpreter's own option
 * grammar (workload_script.c); where that cannot be told for certain the
 * script is "unknown". The interpreter opens a script again by
 * its name, so a script changed in place between the measurement and that
 * open is a gap: keep scripts on read-only storage or in the image. What a
 * script imports afterwards (modules, shared libraries, data) is not
 * measured; the image digest names that. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seclaunch/json.h"
#include "seclaunch/sld.h"
#include "seclaunch/sldm.h"
#include "seclaunch/util.h"
#include "seclaunch/workload.h"
#include "../outputs/outputs.h"
#include "workload_int.h"

void sl_wl_init(sl_wl *w)
{
	memset(w, 0, sizeof(*w));
	w->exe_fd = -1;
	w->log_fd = -1;
	w->inited = true;
}

void sl_wl_free(sl_wl *w)
{
	if (!w->inited)
		return;
	json_decref(w->event);
	json_decref(w->events);
	if (w->exe_fd >= 0)
		close(w->exe_fd);
	if (w->log_fd >= 0)
		close(w->log_fd);
	if (w->exec_argv != NULL) {
		for (size_t i = 0; w->exec_argv[i] != NULL; i++)
			free(w->exec_argv[i]);
		free(w->exec_argv);
	}
	memset(w, 0, sizeof(*w));
}

static SL_RESULT hash_fd(int fd, const char *name, char hex[65])
{
	crypto_hash_sha256_state st;
	uint8_t buf[65536], d[32];
	off_t off = 0;
	crypto_hash_sha256_init(&st);
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sl_err_set(SL_E_IO, "%s: reading to measure it: %s", name,
			                  strerror(errno));
		if (n == 0)
			break;
		crypto_hash_sha256_update(&st, buf, (unsigned long long)n);
		off += n;
	}
	crypto_hash_sha256_final(&st, d);
	sl_hex_encode(d, 32, hex);
	return SL_OK;
}

static SL_RESULT open_regular(const char *path, int *fd)
{
	struct stat st;
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return sl_err_set(SL_E_INPUT, "%s: cannot open to measure it: %s", path,
		                  strerror(errno));
	if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(*fd);
		*fd = -1;
		return sl_err_set(SL_E_INPUT, "%s: not a regular file", path);
	}
	return SL_OK;
}

static json_t *file_ref(const char *path, const char *hex)
{
	return json_pack("{s:s, s:s}", "path", path, "sha256", hex);
}

static char *xstrdup(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

/* "#!INTERP [ARG]" as the kernel reads it: *interp and *arg (or "") set
 * when the file starts so. */
static SL_RESULT shebang(int fd, const char *path, char *interp, size_t ni, char *arg, size_t na,
                         bool *is)
{
	char buf[256];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	*is = false;
	if (n < 2 || buf[0] != '#' || buf[1] != '!')
		return SL_OK;
	buf[n] = '\0';
	char *nl = strchr(buf, '\n');
	if (nl == NULL)
		return sl_err_set(SL_E_INPUT, "%s: #! line longer than %zu bytes", path,
		                  sizeof(buf) - 1);
	*nl = '\0';
	char *p = buf + 2;
	while (*p == ' ' || *p == '\t')
		p++;
	char *e = p;
	while (*e != '\0' && *e != ' ' && *e != '\t')
		e++;
	char *rest = e;
	if (*rest != '\0')
		*rest++ = '\0';
	while (*rest == ' ' || *rest == '\t')
		rest++;
	size_t rl = strlen(rest);
	while (rl > 0 && (rest[rl - 1] == ' ' || rest[rl - 1] == '\t' || rest[rl - 1] == '\r'))
		rest[--rl] = '\0';
	if (*p != '/')
		return sl_err_set(SL_E_INPUT, "%s: #! interpreter '%s' is not an absolute path",
		                  path, p);
	snprintf(interp, ni, "%s", p);
	snprintf(arg, na, "%s", rest);
	*is = true;
	return SL_OK;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

sl_err sl_wl_build(const sl_wl_in *in, sl_wl *w)
{
	sl_err rc = SL_E_NOMEM;
	char exe_hex[65], script_hex[65], interp[256], iarg[256], cwd[4096];
	const char *exe_path = in->exe, *script_path = NULL;
	json_t *argv = json_array(), *env = json_array(), *script = json_null(), *ev = NULL;
	int sfd = -1;
	bool is_sh = false, unknown = false;
	size_t n = 0;
	char **sorted = NULL;

	SL_ENSURE(argv != NULL && env != NULL, SL_E_NOMEM, "workload event");
	SL_GUARD(open_regular(in->exe, &w->exe_fd));
	SL_GUARD(shebang(w->exe_fd, in->exe, interp, sizeof(interp), iarg, sizeof(iarg), &is_sh));
	if (is_sh) {
		/* the script is measured through the descriptor it was found by;
		 * the interpreter is what the kernel would run, so it is what runs */
		SL_GUARD(hash_fd(w->exe_fd, in->exe, script_hex));
		script_path = in->exe;
		close(w->exe_fd);
		w->exe_fd = -1;
		SL_GUARD(open_regular(interp, &w->exe_fd));
		bool nested = false;
		char i2[8], a2[8];
		SL_GUARD(shebang(w->exe_fd, interp, i2, sizeof(i2), a2, sizeof(a2), &nested));
		SL_ENSURE(!nested, SL_E_INPUT,
		          "%s: its interpreter %s is itself a #! script (not measured)", in->exe,
		          interp);
		exe_path = interp;
		size_t argc = 0;
		while (in->argv[argc] != NULL)
			argc++;
		w->exec_argv = calloc(argc + 3, sizeof(char *));
		SL_ENSURE(w->exec_argv != NULL, SL_E_NOMEM, "argv");
		size_t k = 0;
		w->exec_argv[k++] = xstrdup(interp);
		if (iarg[0] != '\0')
			w->exec_argv[k++] = xstrdup(iarg);
		w->exec_argv[k++] = xstrdup(in->exe);
		for (size_t i = 1; i < argc; i++)
			w->exec_argv[k++] = xstrdup(in->argv[i]);
		for (size_t i = 0; i < k; i++)
			SL_ENSURE(w->exec_argv[i] != NULL, SL_E_NOMEM, "argv");
		if (sl_wl_script_env(interp, in->envp, w->script_why, sizeof(w->script_why)) !=
		    SL_WL_SCRIPT_FILE)
			unknown = true;
	} else {
		size_t at = 0;
		sl_wl_script_kind k = sl_wl_script(in->exe, in->argv, in->envp, &at, w->script_why,
		                                   sizeof(w->script_why));
		unknown = k == SL_WL_SCRIPT_UNKNOWN;
		if (k == SL_WL_SCRIPT_FILE) {
			script_path = in->argv[at];
			rc = open_regular(script_path, &sfd);
			/* not there (or a folder, which python and node run too): what
			 * the interpreter opens instead is not known */
			if (rc == SL_OK) {
				SL_GUARD(hash_fd(sfd, script_path, script_hex));
			} else {
				snprintf(w->script_why, sizeof(w->script_why),
				         "%s: the script %.200s is not a regular file seclaunch "
				         "can open",
				         in->exe, script_path);
				unknown = true;
			}
			sl_err_clear();
		}
	}
	SL_GUARD(hash_fd(w->exe_fd, exe_path, exe_hex));
	json_decref(script);
	/* "unknown": a policy that pins script_sha256 denies it */
	script = unknown               ? json_string("unknown")
	         : script_path != NULL ? file_ref(script_path, script_hex)
	                               : json_null();
	SL_ENSURE(script != NULL, SL_E_NOMEM, "workload event");
	if (!unknown)
		w->script_why[0] = '\0';
	for (size_t i = 0; in->argv[i] != NULL; i++)
		SL_ENSURE(json_array_append_new(argv, json_string(in->argv[i])) == 0, SL_E_INPUT,
		          "argv[%zu]: not valid UTF-8 (the workload event is JSON)", i);
	while (in->envp != NULL && in->envp[n] != NULL)
		n++;
	sorted = calloc(n + 1, sizeof(char *));
	SL_ENSURE(sorted != NULL, SL_E_NOMEM, "env");
	if (n > 0) /* serve measures an empty environment: envp may be NULL */
		memcpy(sorted, in->envp, n * sizeof(char *));
	qsort(sorted, n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < n; i++) {
		/* seclaunch's own variables say where staged data is, not what runs */
		if (strncmp(sorted[i], "SECLAUNCH_", 10) == 0)
			continue;
		SL_ENSURE(json_array_append_new(env, json_string(sorted[i])) == 0, SL_E_INPUT,
		          "environment: a value is not valid UTF-8 (the workload event is JSON)");
	}
	SL_ENSURE(getcwd(cwd, sizeof(cwd)) != NULL, SL_E_SYSTEM, "getcwd: %s", strerror(errno));
	ev = json_pack("{s:s, s:i, s:o, s:O, s:O, s:O, s:s, s:s, s:O, s:o, s:s}", "type",
	               "seclaunch.workload", "version", 1, "exe", file_ref(exe_path, exe_hex),
	               "script", script, "argv", argv, "env", env, "cwd", cwd, "image_digest",
	               in->image_digest != NULL ? in->image_digest : "", "datasets", in->datasets,
	               "outputs", in->outputs != NULL ? json_deep_copy(in->outputs) : json_array(),
	               "policy_digest", in->policy_hex);
	SL_ENSURE(ev != NULL, SL_E_NOMEM, "workload event");
	SL_GUARD(sl_workload_event_check(ev, "workload event"));
	SL_GUARD(sl_workload_identity(ev, w->identity));
	SL_GUARD(sl_workload_event_digest(ev, w->event_digest));
	w->event = ev;
	ev = NULL;
	rc = SL_OK;
out:
	if (rc != SL_OK && rc == SL_E_ATTEST_FORMAT)
		rc = sl_err_set(SL_E_INPUT, "%s", sl_err_detail());
	if (sfd >= 0)
		close(sfd);
	free(sorted);
	json_decref(argv);
	json_decref(env);
	json_decref(script);
	json_decref(ev);
	return rc;
}

void sl_wl_predict_pcr(const sl_wl *w, uint8_t out[static 32])
{
	uint8_t buf[64];
	memset(buf, 0, 32);
	memcpy(buf + 32, w->event_digest, 32);
	sl_sha256(buf, sizeof(buf), out);
}

/* Reads the locked log into w->events (empty file: no events). */
static SL_RESULT read_log(sl_wl *w)
{
	static const char *const fields[] = {"register", "events", NULL};
	sl_err rc = SL_E_ATTEST;
	struct stat st;
	char *buf = NULL;
	json_t *doc = NULL;
	json_error_t je;

	SL_ENSURE(fstat(w->log_fd, &st) == 0, SL_E_SYSTEM, "%s: %s", w->log_path, strerror(errno));
	SL_ENSURE(st.st_size < 64 * 1024 * 1024, SL_E_ATTEST, "%s: too large", w->log_path);
	if (st.st_size == 0) {
		w->events = json_array();
		return w->events != NULL ? SL_OK : sl_err_set(SL_E_NOMEM, "log");
	}
	buf = malloc((size_t)st.st_size);
	SL_ENSURE(buf != NULL, SL_E_NOMEM, "log");
	SL_ENSURE(pread(w->log_fd, buf, (size_t)st.st_size, 0) == st.st_size, SL_E_IO,
	          "%s: short read", w->log_path);
	doc = json_loadb(buf, (size_t)st.st_size, JSON_REJECT_DUPLICATES, &je);
	SL_ENSURE(json_is_object(doc), SL_E_ATTEST, "%s: not a workload log (%s)", w->log_path,
	          je.text);
	SL_GUARD(sl_json_only(doc, fields, SL_E_ATTEST, w->log_path));
	const char *reg = sl_json_getstr(doc, "register");
	SL_ENSURE(reg != NULL && strcmp(reg, w->reg) == 0, SL_E_ATTEST,
	          "%s: a log of register %s, not %s", w->log_path, reg ? reg : "?", w->reg);
	w->events = json_incref(json_object_get(doc, "events"));
	SL_ENSURE(json_is_array(w->events), SL_E_ATTEST, "%s: events missing", w->log_path);
	rc = SL_OK;
out:
	free(buf);
	json_decref(doc);
	return rc;
}

static SL_RESULT write_log(sl_wl *w)
{
	sl_err rc = SL_E_IO;
	json_t *doc = json_pack("{s:s, s:O}", "register", w->reg, "events", w->events);
	char *t = doc != NULL ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	SL_ENSURE(t != NULL, SL_E_NOMEM, "log");
	size_t len = strlen(t);
	/* no fsync: the log lives as long as the register's value, which a
	 * crash of this process does not reset and a reboot does */
	SL_ENSURE(ftruncate(w->log_fd, 0) == 0 && pwrite(w->log_fd, t, len, 0) == (ssize_t)len,
	          SL_E_IO, "%s: writing the workload log: %s", w->log_path, strerror(errno));
	rc = SL_OK;
out:
	free(t);
	json_decref(doc);
	return rc;
}

sl_err sl_wl_extend(sl_wl *w, const char *kind, const char *tcti, unsigned pcr,
                    const char *log_path)
{
	sl_err rc = SL_E_SYSTEM;
	const char *tsm = getenv("SECLAUNCH_TDX_MEASUREMENTS");
	bool tdx = strcmp(kind, "tdx") == 0;

	if (strcmp(kind, "tpm2") == 0) {
		SL_ENSURE(pcr <= 15, SL_E_USAGE,
		          "--workload-pcr %u: use 0..15 (16 and 23 can be reset, 17-22 are DRTM's)",
		          pcr);
		snprintf(w->reg, sizeof(w->reg), "pcr%u", pcr);
		snprintf(w->pcrs, sizeof(w->pcrs), "sha256:0,1,2,3,4,5,6,7%s%u", pcr > 7 ? "," : "",
		         pcr > 7 ? pcr : 0);
		if (pcr <= 7) /* already in the default selection */
			snprintf(w->pcrs, sizeof(w->pcrs), "sha256:0,1,2,3,4,5,6,7");
	} else if (tdx) {
		snprintf(w->reg, sizeof(w->reg), "rtmr3");
	} else {
		return SL_OK; /* no register this evidence kind quotes */
	}
	if (log_path == NULL)
		log_path = getenv("SECLAUNCH_WORKLOAD_LOG");
	if (log_path != NULL) {
		snprintf(w->log_path, sizeof(w->log_path), "%s", log_path);
	} else {
		/* one log per register and TPM (a TCTI names one), in a directory
		 * that goes away at reboot with the register's value */
		char dir[400], th[17];
		uint8_t d[32];
		const char *t = tdx ? "tdx" : (tcti != NULL ? tcti : getenv("SECLAUNCH_TCTI"));
		const char *xdg = getenv("XDG_RUNTIME_DIR");
		t = t != NULL ? t : "device:/dev/tpmrm0";
		sl_sha256(t, strlen(t), d);
		sl_hex_encode(d, 8, th);
		if (geteuid() == 0)
			snprintf(dir, sizeof(dir), "/run/seclaunch");
		else if (xdg != NULL && xdg[0] == '/')
			snprintf(dir, sizeof(dir), "%s/seclaunch", xdg);
		else
			snprintf(dir, sizeof(dir), "/tmp/seclaunch-%u", (unsigned)geteuid());
		(void)mkdir(dir, 0700);
		snprintf(w->log_path, sizeof(w->log_path), "%s/workload-%s-%s.json", dir, w->reg,
		         th);
	}
	w->log_fd = open(w->log_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	SL_ENSURE(w->log_fd >= 0, SL_E_SYSTEM,
	          "%s: %s (the workload log; --workload-log or $SECLAUNCH_WORKLOAD_LOG names "
	          "another)",
	          w->log_path, strerror(errno));
	/* held from the read to the write: the log and the register move together
	 * (quotes take it shared, sl_wl_refresh) */
	SL_ENSURE(flock(w->log_fd, LOCK_EX) == 0, SL_E_SYSTEM, "%s: lock: %s", w->log_path,
	          strerror(errno));
	SL_GUARD(read_log(w));
	SL_ENSURE(json_array_size(w->events) < SL_WORKLOAD_MAX_EVENTS, SL_E_SYSTEM,
	          "%s: %d jobs measured since boot: the register is full until a reboot",
	          w->log_path, SL_WORKLOAD_MAX_EVENTS);
	if (!tdx) {
		static const uint8_t zero[32];
		uint8_t have[32], want[32];
		char h1[65], h2[65];
		SL_GUARD(sl_workload_replay(w->events, false, want, 32));
		/* a register at zero: nothing extended since the TPM was reset (a
		 * reboot, a fresh simulator), the events logged before belong to
		 * another boot */
		rc = sl_workload_tpm_extend(tcti, pcr, want, zero, w->event_digest, have);
		if (rc == SL_E_ATTEST) {
			sl_hex_encode(have, 32, h1);
			sl_hex_encode(want, 32, h2);
			SL_FAIL(SL_E_ATTEST,
			        "PCR %u (sha256) holds %.16s... but the workload log %s replays to "
			        "%.16s...: something other than seclaunch extended it, or the log "
			        "was lost; choose another --workload-pcr (this one matches again "
			        "after a reboot)",
			        pcr, h1, w->log_path, h2);
		}
		SL_GUARD(rc);
		if (memcmp(have, zero, 32) == 0)
			json_array_clear(w->events);
	} else {
		uint8_t d48[SL_SHA384_LEN];
		char *t = NULL;
		SL_GUARD(sl_workload_canonical(w->event, &t));
		/* RTMRs are SHA-384 registers: the event's SHA-384 is extended */
		sl_sha384(t, strlen(t), d48);
		free(t);
		SL_GUARD(sl_workload_rtmr_extend(tsm, d48));
	}
	SL_ENSURE(json_array_append(w->events, w->event) == 0, SL_E_NOMEM, "log");
	w->index = json_array_size(w->events) - 1;
	SL_GUARD(write_log(w));
	rc = SL_OK;
out:
	if (w->log_fd >= 0)
		(void)flock(w->log_fd, LOCK_UN);
	return rc;
}

sl_err sl_wl_refresh(sl_wl *w)
{
	if (w->reg[0] == '\0' || w->log_fd < 0)
		return SL_OK;
	if (flock(w->log_fd, LOCK_SH) != 0)
		return sl_err_set(SL_E_SYSTEM, "%s: lock: %s", w->log_path, strerror(errno));
	json_decref(w->events);
	w->events = NULL;
	sl_err rc = read_log(w);
	if (rc == SL_OK && (w->index >= json_array_size(w->events) ||
	                    !json_equal(json_array_get(w->events, w->index), w->event)))
		rc = sl_err_set(SL_E_ATTEST, "%s: this job's event is no longer at [%zu]",
		                w->log_path, w->index);
	if (rc != SL_OK)
		sl_wl_unlock(w);
	return rc;
}

void sl_wl_unlock(sl_wl *w)
{
	if (w->log_fd >= 0)
		(void)flock(w->log_fd, LOCK_UN);
}

sl_err sl_wl_attach(const sl_wl *w, json_t *ev)
{
	if (w->reg[0] == '\0' || w->events == NULL)
		return SL_OK;
	json_t *l = json_pack("{s:s, s:o, s:I}", "register", w->reg, "events",
	                      json_deep_copy(w->events), "current", (json_int_t)w->index);
	if (l == NULL || json_object_set_new(ev, "workload_log", l) != 0)
		return sl_err_set(SL_E_NOMEM, "workload_log");
	return SL_OK;
}

sl_err sl_wl_dataset_entry(const char *path, json_t *list)
{
	sl_err rc = SL_E_INPUT;
	char mpath[4200], hex[65], root[72];
	uint8_t d[32];
	struct stat st;
	sl_sld_header *h = NULL;
	sl_sldm *m = NULL;
	const char *id;

	SL_ENSURE(stat(path, &st) == 0, SL_E_IO, "%s: %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		/* a sharded dataset: its root is the manifest's */
		snprintf(mpath, sizeof(mpath), "%s/manifest.sldm", path);
		SL_GUARD(sl_sldm_read_file(mpath, &m));
		sl_sldm_root(m, d);
		id = sl_sldm_dataset_id(m);
	} else {
		/* a single SLD file: its header's SHA-256 */
		SL_GUARD(sl_sld_header_read_file(path, &h));
		sl_sld_header_digest(h, d);
		id = sl_sld_header_dataset_id(h);
	}
	sl_hex_encode(d, 32, hex);
	snprintf(root, sizeof(root), "sha256:%s", hex);
	SL_ENSURE(json_array_append_new(list, json_pack("{s:s, s:s}", "id", id, "root", root)) == 0,
	          SL_E_NOMEM, "datasets");
	rc = SL_OK;
out:
	sl_sld_header_free(h);
	sl_sldm_free(m);
	return rc;
}

sl_err sl_wl_output_entries(const char *const *spec, size_t n, json_t *list)
{
	sl_err rc = SL_E_NOMEM;
	char dest[2048], pdest[2100], item[2400];
	bool remote;
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(spec[i], '=');
		SL_ENSURE(eq != NULL, SL_E_USAGE, "--output %s: NAME=DEST", spec[i]);
		SL_GUARD(
		    sl_out_destination(spec[i], dest, sizeof(dest), pdest, sizeof(pdest), &remote));
		snprintf(item, sizeof(item), "%.*s=%s", (int)(eq - spec[i]), spec[i], pdest);
		SL_ENSURE(json_array_append_new(list, json_string(item)) == 0, SL_E_NOMEM,
		          "outputs");
	}
	rc = SL_OK;
out:
	return rc;
}
