/* Which script an interpreter will read, from its command line and its
 * environment: the option grammar of python, the sh family (bash, sh,
 * dash), perl, ruby and node, as their own documentation states it
 * (python3 --help, bash(1), dash(1), perlrun(1), ruby(1), node(1)), and a
 * simple rule for zsh, ksh and Rscript.
 *
 * An option that takes an argument consumes it (attached, or the next
 * element, as that interpreter does), so `python3 --check-hash-based-pycs
 * always evil.py` names evil.py. Where the script cannot be told for
 * certain the answer is "unknown", never a guess: an option the table does
 * not know, code on the command line (-c, -e, -m, -r, --require), the
 * program from standard input (-, no script, -s, -i), a PATH search for
 * the script (-S), a change of directory, a debugger, or a variable of the
 * environment that makes the interpreter run other code or change its
 * options (PYTHONPATH, PERL5OPT, RUBYOPT, NODE_OPTIONS, BASH_ENV, ...).
 * A policy that pins script_sha256 denies "unknown". */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../job/job.h"
#include "workload_int.h"

enum cls {
	C_NONE = 0, /* end of a table */
	C_FLAG,     /* no argument */
	C_ARG,      /* an argument: the rest of the cluster, or else the next element */
	C_REST,     /* the rest of the cluster only (may be empty) */
	C_NEXT,     /* the next element; the cluster goes on (bash -o, -O) */
	C_OCT,      /* octal digits may follow; the cluster goes on (perl -0, -l) */
	C_EQ,       /* long only: a value after '=' only, never the next element */
	C_ANY,      /* long only: no value, or one after '=' */
	C_STOP,     /* the script cannot be told: why */
};

struct opt {
	const char *name; /* short: one character; long: the name ("x*": a prefix) */
	enum cls cls;
	const char *why;               /* C_STOP: the reason */
	bool (*ok)(const char *value); /* NULL: any value */
	bool noenv;                    /* python -E, -I: PYTHON* variables are ignored */
};

struct family {
	const char *name;
	const struct opt *shorts, *longs;
	bool dash_ends; /* "-" ends the options (sh) rather than naming stdin */
	bool plus;      /* +x clusters (sh) */
	enum { L1_NO, L1_YES, L1_AMBIGUOUS } single_long; /* -posix is --posix (bash) */
	bool underscore;            /* --max_old_space_size is --max-old-space-size (node) */
	const char *const *env_bad; /* "NAME" or "PREFIX*" */
	const char *const *env_ok;  /* exceptions to env_bad */
};

#define CODE_CMD "runs code given on the command line"
#define CODE_STDIN "reads commands from standard input"
#define EXITS "prints and exits"

/* ---- python (python3 --help) -------------------------------------------- */

/* -W action:message:category:module:lineno: a dotted category is imported */
static bool py_w_ok(const char *v)
{
	const char *p = v;
	for (int i = 0; i < 2 && p != NULL; i++) {
		p = strchr(p, ':');
		if (p != NULL)
			p++;
	}
	if (p == NULL)
		return true;
	size_t n = strcspn(p, ":");
	return memchr(p, '.', n) == NULL;
}

/* -X options that change no code path a job could use to run other code */
static bool py_x_ok(const char *v)
{
	static const char *const ok[] = {"faulthandler",
	                                 "showrefcount",
	                                 "tracemalloc",
	                                 "importtime",
	                                 "dev",
	                                 "utf8",
	                                 "warn_default_encoding",
	                                 "no_debug_ranges",
	                                 "frozen_modules",
	                                 "int_max_str_digits",
	                                 "perf",
	                                 "cpu_count",
	                                 "gil",
	                                 NULL};
	size_t n = strcspn(v, "=");
	for (size_t i = 0; ok[i] != NULL; i++)
		if (strlen(ok[i]) == n && strncmp(v, ok[i], n) == 0)
			return true;
	return false;
}

static const struct opt py_short[] = {
    {"b", C_FLAG, NULL, NULL, false},
    {"B", C_FLAG, NULL, NULL, false},
    {"d", C_FLAG, NULL, NULL, false},
    {"E", C_FLAG, NULL, NULL, true},
    {"I", C_FLAG, NULL, NULL, true},
    {"O", C_FLAG, NULL, NULL, false},
    {"P", C_FLAG, NULL, NULL, false},
    {"q", C_FLAG, NULL, NULL, false},
    {"R", C_FLAG, NULL, NULL, false},
    {"s", C_FLAG, NULL, NULL, false},
    {"S", C_FLAG, NULL, NULL, false},
    {"t", C_FLAG, NULL, NULL, false},
    {"u", C_FLAG, NULL, NULL, false},
    {"v", C_FLAG, NULL, NULL, false},
    {"x", C_FLAG, NULL, NULL, false},
    {"W", C_ARG, "its warning category names a module to import", py_w_ok, false},
    {"X", C_ARG, "that -X option is not one seclaunch knows to be harmless", py_x_ok, false},
    {"c", C_STOP, CODE_CMD, NULL, false},
    {"m", C_STOP, "runs a module, not a script file", NULL, false},
    {"i", C_STOP, "reads commands from standard input after the script", NULL, false},
    {"h", C_STOP, EXITS, NULL, false},
    {"?", C_STOP, EXITS, NULL, false},
    {"V", C_STOP, EXITS, NULL, false},
    {NULL, C_NONE, NULL, NULL, false},
};

static const struct opt py_long[] = {
    {"check-hash-based-pycs", C_ARG, NULL, NULL, false},
    {"help*", C_STOP, EXITS, NULL, false},
    {"version", C_STOP, EXITS, NULL, false},
    {NULL, C_NONE, NULL, NULL, false},
};

/* PYTHON* variables that run no other code and load nothing else */
static const char *const py_env_bad[] = {"PYTHON*", NULL};
static const char *const py_env_ok[] = {"PYTHONUNBUFFERED",
                                        "PYTHONDONTWRITEBYTECODE",
                                        "PYTHONHASHSEED",
                                        "PYTHONIOENCODING",
                                        "PYTHONUTF8",
                                        "PYTHONFAULTHANDLER",
                                        "PYTHONNOUSERSITE",
                                        "PYTHONSAFEPATH",
                                        "PYTHONOPTIMIZE",
                                        "PYTHONDEVMODE",
                                        "PYTHONTRACEMALLOC",
                                        "PYTHONCOERCECLOCALE",
                                        "PYTHONWARNDEFAULTENCODING",
                                        "PYTHONNODEBUGRANGES",
                                        "PYTHONINTMAXSTRDIGITS",
                                        "PYTHONMALLOC",
                                        "PYTHONMALLOCSTATS",
                                        "PYTHONVERBOSE",
                                        NULL};

/* ---- bash, sh, dash (bash(1), dash(1)) ---------------------------------- */

static bool sh_shopt_ok(const char *v)
{
	/* extdebug at invocation runs the debugger profile first (bash(1)) */
	return strcmp(v, "extdebug") != 0;
}

static const struct opt sh_short[] = {
    {"a", C_FLAG, NULL, NULL, false},
    {"b", C_FLAG, NULL, NULL, false},
    {"e", C_FLAG, NULL, NULL, false},
    {"f", C_FLAG, NULL, NULL, false},
    {"h", C_FLAG, NULL, NULL, false},
    {"k", C_FLAG, NULL, NULL, false},
    {"m", C_FLAG, NULL, NULL, false},
    {"n", C_FLAG, NULL, NULL, false},
    {"p", C_FLAG, NULL, NULL, false},
    {"r", C_FLAG, NULL, NULL, false},
    {"t", C_FLAG, NULL, NULL, false},
    {"u", C_FLAG, NULL, NULL, false},
    {"v", C_FLAG, NULL, NULL, false},
    {"x", C_FLAG, NULL, NULL, false},
    {"B", C_FLAG, NULL, NULL, false},
    {"C", C_FLAG, NULL, NULL, false},
    {"E", C_FLAG, NULL, NULL, false},
    {"H", C_FLAG, NULL, NULL, false},
    {"I", C_FLAG, NULL, NULL, false},
    {"P", C_FLAG, NULL, NULL, false},
    {"T", C_FLAG, NULL, NULL, false},
    {"V", C_FLAG, NULL, NULL, false},
    {"o", C_NEXT, NULL, NULL, false},
    {"O", C_NEXT, "-O extdebug runs the debugger profile first", sh_shopt_ok, false},
    {"c", C_STOP, CODE_CMD, NULL, false},
    {"s", C_STOP, CODE_STDIN, NULL, false},
    {"i", C_STOP, "is interactive: it runs the user's startup files first", NULL, false},
    {"l", C_STOP, "is a login shell: it runs the user's profile first", NULL, false},
    {"D", C_STOP, EXITS, NULL, false},
    {NULL, C_NONE, NULL, NULL, false},
};

static const struct opt sh_long[] = {
    {"debug", C_FLAG, NULL, NULL, false},
    {"noediting", C_FLAG, NULL, NULL, false},
    {"noprofile", C_FLAG, NULL, NULL, false},
    {"norc", C_FLAG, NULL, NULL, false},
    {"posix", C_FLAG, NULL, NULL, false},
    {"restricted", C_FLAG, NULL, NULL, false},
    {"verbose", C_FLAG, NULL, NULL, false},
    {"init-file", C_NEXT, NULL, NULL, false},
    {"rcfile", C_NEXT, NULL, NULL, false},
    {"login", C_STOP, "is a login shell: it runs the user's profile first", NULL, false},
    {"debugger", C_STOP, "runs the debugger profile first", NULL, false},
    {"help", C_STOP, EXITS, NULL, false},
    {"version", C_STOP, EXITS, NULL, false},
    {"dump-strings", C_STOP, EXITS, NULL, false},
    {"dump-po-strings", C_STOP, EXITS, NULL, false},
    {"pretty-print", C_STOP, EXITS, NULL, false},
    {NULL, C_NONE, NULL, NULL, false},
};

static const char *const sh_env_bad[] = {"BASH_ENV", "ENV",         "SHELLOPTS", "BASHOPTS",
                                         "PS4",      "BASH_FUNC_*", NULL};

/* ---- perl (perlrun(1)) -------------------------------------------------- */

/* -C: digits, or letters of the PERL_UNICODE set; the rest of the cluster */
static bool perl_c_ok(const char *v)
{
	return strspn(v, "0123456789") == strlen(v) || strspn(v, "IOEioeSADLa") == strlen(v);
}

static bool empty_ok(const char *v)
{
	return v[0] == '\0';
}

static const struct opt perl_short[] = {
    {"0", C_OCT, NULL, NULL, false},
    {"l", C_OCT, NULL, NULL, false},
    {"a", C_FLAG, NULL, NULL, false},
    {"c", C_FLAG, NULL, NULL, false},
    {"f", C_FLAG, NULL, NULL, false},
    {"n", C_FLAG, NULL, NULL, false},
    {"p", C_FLAG, NULL, NULL, false},
    {"s", C_FLAG, NULL, NULL, false},
    {"t", C_FLAG, NULL, NULL, false},
    {"T", C_FLAG, NULL, NULL, false},
    {"U", C_FLAG, NULL, NULL, false},
    {"w", C_FLAG, NULL, NULL, false},
    {"W", C_FLAG, NULL, NULL, false},
    {"X", C_FLAG, NULL, NULL, false},
    {"C", C_REST, "-C takes digits or letters of IOEioeSADLa", perl_c_ok, false},
    {"F", C_REST, NULL, NULL, false},
    {"i", C_REST, NULL, NULL, false},
    {"I", C_ARG, NULL, NULL, false},
    {"x", C_REST, "-x DIR changes the directory first", empty_ok, false},
    {"e", C_STOP, CODE_CMD, NULL, false},
    {"E", C_STOP, CODE_CMD, NULL, false},
    {"m", C_STOP, "loads a module named on the command line", NULL, false},
    {"M", C_STOP, "loads a module named on the command line", NULL, false},
    {"d", C_STOP, "runs under the debugger (commands from the terminal or a module)", NULL, false},
    {"D", C_STOP, "-D is not one seclaunch knows", NULL, false},
    {"S", C_STOP, "looks the script up in PATH", NULL, false},
    {"u", C_STOP, "dumps core instead of running", NULL, false},
    {"h", C_STOP, EXITS, NULL, false},
    {"v", C_STOP, EXITS, NULL, false},
    {"V", C_STOP, EXITS, NULL, false},
    {NULL, C_NONE, NULL, NULL, false},
};

static const struct opt no_long[] = {{NULL, C_NONE, NULL, NULL, false}};

static const char *const perl_env_bad[] = {"PERL*", NULL};
static const char *const perl_env_ok[] = {"PERL_HASH_SEED", "PERL_PERTURB_KEYS", "PERL_UNICODE",
                                          "PERL_BADLANG",   "PERL_SIGNALS",      NULL};

/* ---- ruby (ruby(1)) ----------------------------------------------------- */

/* -W[level] or -W:category; ruby goes on after a level's digit */
static bool ruby_w_ok(const char *v)
{
	return v[0] == '\0' || v[0] == ':' || (v[0] >= '0' && v[0] <= '2' && v[1] == '\0');
}

static const struct opt ruby_short[] = {
    {"0", C_OCT, NULL, NULL, false},
    {"a", C_FLAG, NULL, NULL, false},
    {"c", C_FLAG, NULL, NULL, false},
    {"d", C_FLAG, NULL, NULL, false},
    {"l", C_FLAG, NULL, NULL, false},
    {"n", C_FLAG, NULL, NULL, false},
    {"p", C_FLAG, NULL, NULL, false},
    {"s", C_FLAG, NULL, NULL, false},
    {"U", C_FLAG, NULL, NULL, false},
    {"v", C_FLAG, NULL, NULL, false},
    {"w", C_FLAG, NULL, NULL, false},
    {"y", C_FLAG, NULL, NULL, false},
    {"E", C_ARG, NULL, NULL, false},
    {"I", C_ARG, NULL, NULL, false},
    {"F", C_REST, NULL, NULL, false},
    {"i", C_REST, NULL, NULL, false},
    {"x", C_REST, "-x DIR changes the directory first", empty_ok, false},
    {"W", C_REST, "-W takes a level 0-2 or :category", ruby_w_ok, false},
    {"T", C_OCT, NULL, NULL, false},
    {"C", C_STOP, "changes the directory before it opens the script", NULL, false},
    {"e", C_STOP, CODE_CMD, NULL, false},
    {"r", C_STOP, "loads a library named on the command line", NULL, false},
    {"S", C_STOP, "looks the script up in PATH", NULL, false},
    {"K", C_STOP, "-K is not one seclaunch knows", NULL, false},
    {"h", C_STOP, EXITS, NULL, false},
    {NULL, C_NONE, NULL, NULL, false},
};

static const struct opt ruby_long[] = {
    {"enable", C_ARG, NULL, NULL, false},
    {"disable", C_ARG, NULL, NULL, false},
    {"enable-*", C_ANY, NULL, NULL, false},
    {"disable-*", C_ANY, NULL, NULL, false},
    {"encoding", C_ARG, NULL, NULL, false},
    {"external-encoding", C_ARG, NULL, NULL, false},
    {"internal-encoding", C_ARG, NULL, NULL, false},
    {"backtrace-limit", C_ARG, NULL, NULL, false},
    {"verbose", C_FLAG, NULL, NULL, false},
    {"yjit", C_FLAG, NULL, NULL, false},
    {"yjit-*", C_ANY, NULL, NULL, false},
    {"jit", C_FLAG, NULL, NULL, false},
    {"dump", C_STOP, EXITS, NULL, false},
    {"help", C_STOP, EXITS, NULL, false},
    {"version", C_STOP, EXITS, NULL, false},
    {"copyright", C_STOP, EXITS, NULL, false},
    {NULL, C_NONE, NULL, NULL, false},
};

static const char *const ruby_env_bad[] = {"RUBYOPT",  "RUBYLIB",   "RUBYLIB_PREFIX",
                                           "RUBYPATH", "RUBYSHELL", NULL};

/* ---- node (node(1)) ------------------------------------------------------ */

static const struct opt node_short[] = {
    {"e", C_STOP, CODE_CMD, NULL, false},
    {"p", C_STOP, CODE_CMD, NULL, false},
    {"r", C_STOP, "loads a module named on the command line first", NULL, false},
    {"i", C_STOP, "opens the REPL (commands from standard input)", NULL, false},
    {"c", C_STOP, "checks the syntax only", NULL, false},
    {"C", C_STOP, "-C is not one seclaunch knows", NULL, false},
    {"h", C_STOP, EXITS, NULL, false},
    {"v", C_STOP, EXITS, NULL, false},
    {NULL, C_NONE, NULL, NULL, false},
};

/* node's own options with a value take it after '=' or as the next
 * element; V8's are taken after '=' only here (whether node hands V8 the
 * next element is not something to guess on) */
static const struct opt node_long[] = {
    {"title", C_ARG, NULL, NULL, false},
    {"unhandled-rejections", C_ARG, NULL, NULL, false},
    {"dns-result-order", C_ARG, NULL, NULL, false},
    {"diagnostic-dir", C_ARG, NULL, NULL, false},
    {"redirect-warnings", C_ARG, NULL, NULL, false},
    {"max-old-space-size", C_EQ, NULL, NULL, false},
    {"max-semi-space-size", C_EQ, NULL, NULL, false},
    {"stack-size", C_EQ, NULL, NULL, false},
    {"stack-trace-limit", C_EQ, NULL, NULL, false},
    {"no-warnings", C_FLAG, NULL, NULL, false},
    {"no-deprecation", C_FLAG, NULL, NULL, false},
    {"trace-warnings", C_FLAG, NULL, NULL, false},
    {"trace-deprecation", C_FLAG, NULL, NULL, false},
    {"throw-deprecation", C_FLAG, NULL, NULL, false},
    {"pending-deprecation", C_FLAG, NULL, NULL, false},
    {"trace-uncaught", C_FLAG, NULL, NULL, false},
    {"enable-source-maps", C_FLAG, NULL, NULL, false},
    {"abort-on-uncaught-exception", C_FLAG, NULL, NULL, false},
    {"preserve-symlinks", C_FLAG, NULL, NULL, false},
    {"preserve-symlinks-main", C_FLAG, NULL, NULL, false},
    {"frozen-intrinsics", C_FLAG, NULL, NULL, false},
    {"disallow-code-generation-from-strings", C_FLAG, NULL, NULL, false},
    {"zero-fill-buffers", C_FLAG, NULL, NULL, false},
    {"jitless", C_FLAG, NULL, NULL, false},
    {"expose-gc", C_FLAG, NULL, NULL, false},
    {"use-openssl-ca", C_FLAG, NULL, NULL, false},
    {"use-bundled-ca", C_FLAG, NULL, NULL, false},
    {"eval", C_STOP, CODE_CMD, NULL, false},
    {"print", C_STOP, CODE_CMD, NULL, false},
    {"require", C_STOP, "loads a module named on the command line first", NULL, false},
    {"import", C_STOP, "loads a module named on the command line first", NULL, false},
    {"loader", C_STOP, "loads a module loader named on the command line", NULL, false},
    {"experimental-loader", C_STOP, "loads a module loader named on the command line", NULL, false},
    {"inspect*", C_STOP, "opens a debugger port", NULL, false},
    {"interactive", C_STOP, "opens the REPL (commands from standard input)", NULL, false},
    {"help", C_STOP, EXITS, NULL, false},
    {"version", C_STOP, EXITS, NULL, false},
    {NULL, C_NONE, NULL, NULL, false},
};

static const char *const node_env_bad[] = {"NODE_*", NULL};
static const char *const node_env_ok[] = {"NODE_ENV", "NODE_NO_WARNINGS", "NODE_DEBUG",
                                          "NODE_PENDING_DEPRECATION", NULL};

/* ---- zsh, ksh, Rscript: the first argument, when it is not an option ---- */

static const struct opt rscript_long[] = {
    {"help", C_STOP, EXITS, NULL, false},
    {"version", C_STOP, EXITS, NULL, false},
    {"file*", C_STOP, "names another file to run", NULL, false},
    {"args", C_STOP, "ends R's options", NULL, false},
    {"restore", C_STOP, "restores a saved workspace (its functions run)", NULL, false},
    {"*", C_ANY, NULL, NULL, false}, /* Rscript's and R's options: --name[=value] */
    {NULL, C_NONE, NULL, NULL, false},
};
static const struct opt rscript_short[] = {{"e", C_STOP, CODE_CMD, NULL, false},
                                           {NULL, C_NONE, NULL, NULL, false}};
static const struct opt no_short[] = {{NULL, C_NONE, NULL, NULL, false}};

static const char *const zsh_env_bad[] = {"ZDOTDIR", "ENV", NULL};
static const char *const r_env_bad[] = {"R_PROFILE*", "R_ENVIRON*", "R_LIBS*", NULL};
static const char *const none[] = {NULL};

static const struct family families[] = {
    {"python", py_short, py_long, false, false, L1_NO, false, py_env_bad, py_env_ok},
    {"pypy", py_short, py_long, false, false, L1_NO, false, py_env_bad, py_env_ok},
    {"bash", sh_short, sh_long, true, true, L1_YES, false, sh_env_bad, none},
    /* sh is bash or dash: bash's long options (dash refuses them), and a
     * -word that bash would read as one is ambiguous */
    {"sh", sh_short, sh_long, true, true, L1_AMBIGUOUS, false, sh_env_bad, none},
    {"dash", sh_short, no_long, true, true, L1_NO, false, sh_env_bad, none},
    {"perl", perl_short, no_long, false, false, L1_NO, false, perl_env_bad, perl_env_ok},
    {"ruby", ruby_short, ruby_long, false, false, L1_NO, false, ruby_env_bad, none},
    {"node", node_short, node_long, false, false, L1_NO, true, node_env_bad, node_env_ok},
    {"nodejs", node_short, node_long, false, false, L1_NO, true, node_env_bad, node_env_ok},
    {"zsh", no_short, no_long, false, false, L1_NO, false, zsh_env_bad, none},
    {"ksh", no_short, no_long, false, false, L1_NO, false, zsh_env_bad, none},
    {"mksh", no_short, no_long, false, false, L1_NO, false, zsh_env_bad, none},
    {"Rscript", rscript_short, rscript_long, false, false, L1_NO, false, r_env_bad, none},
};

/* name, or name and a version (python3, python3.12, perl5.36, python3.13t) */
static bool name_is(const char *b, const char *name)
{
	size_t n = strlen(name);
	if (strncmp(b, name, n) != 0)
		return false;
	b += n;
	b += strspn(b, "0123456789.");
	return b[0] == '\0' || (b[1] == '\0' && strchr("dmtw", b[0]) != NULL);
}

static const struct family *family_of(const char *exe)
{
	const char *s = strrchr(exe, '/');
	const char *b = s != NULL ? s + 1 : exe;
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		if (name_is(b, families[i].name))
			return &families[i];
	return NULL;
}

static const struct opt *find_short(const struct opt *t, char c)
{
	for (; t->name != NULL; t++)
		if (t->name[0] == c)
			return t;
	return NULL;
}

/* name: n characters (no '='); entries ending in '*' match a prefix */
static const struct opt *find_long(const struct opt *t, const char *name, size_t n)
{
	for (; t->name != NULL; t++) {
		size_t l = strlen(t->name);
		if (l > 0 && t->name[l - 1] == '*') {
			if (n >= l - 1 && strncmp(name, t->name, l - 1) == 0)
				return t;
		} else if (l == n && strncmp(name, t->name, n) == 0) {
			return t;
		}
	}
	return NULL;
}

static bool env_match(const char *const *list, const char *kv, size_t n)
{
	for (size_t i = 0; list[i] != NULL; i++) {
		size_t l = strlen(list[i]);
		if (l > 0 && list[i][l - 1] == '*') {
			if (n >= l - 1 && strncmp(kv, list[i], l - 1) == 0)
				return true;
		} else if (l == n && strncmp(kv, list[i], n) == 0) {
			return true;
		}
	}
	return false;
}

/* PYTHONPATH=<the helper folder of this source build> is seclaunch's own
 * (job_env.c): it adds that one known folder, whose value the event's env
 * records, ahead of python's own path. Any other value is the user's. */
static bool own_pythonpath(const struct family *f, const char *kv)
{
	const char *dir = sl_job_pyhelper_dir();
	return dir != NULL && f->env_ok == py_env_ok && strncmp(kv, "PYTHONPATH=", 11) == 0 &&
	       strcmp(kv + 11, dir) == 0;
}

static sl_wl_script_kind env_check(const struct family *f, char *const *envp, char *why,
                                   size_t whyn)
{
	for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
		const char *eq = strchr(envp[i], '=');
		size_t n = eq != NULL ? (size_t)(eq - envp[i]) : strlen(envp[i]);
		if (own_pythonpath(f, envp[i]))
			continue;
		if (env_match(f->env_bad, envp[i], n) && !env_match(f->env_ok, envp[i], n)) {
			snprintf(why, whyn,
			         "%s: the environment sets %.*s, which makes it run or load other "
			         "code or change its options",
			         f->name, (int)(n > 64 ? 64 : n), envp[i]);
			return SL_WL_SCRIPT_UNKNOWN;
		}
	}
	return SL_WL_SCRIPT_FILE;
}

#define STOP(...)                                                                                  \
	do {                                                                                       \
		snprintf(why, whyn, __VA_ARGS__);                                                  \
		return SL_WL_SCRIPT_UNKNOWN;                                                       \
	} while (0)

/* One option o met as shown ("-c", "--name"), with what follows it in
 * its cluster (short) or after '=' (long, NULL: no '='); may take the next
 * element argv[*i + 1]. *cluster_done: the rest of the cluster was its value. */
static sl_wl_script_kind take(const struct family *f, const struct opt *o, const char *shown,
                              bool islong, const char *attached, char *const *argv, size_t *i,
                              bool *cluster_done, bool *noenv, char *why, size_t whyn)
{
	const char *val = NULL;
	*cluster_done = false;
	if (o->noenv)
		*noenv = true;
	if (islong && attached != NULL && (o->cls == C_FLAG || o->cls == C_NEXT))
		STOP("%s: option %s=... (it takes %s)", f->name, shown,
		     o->cls == C_FLAG ? "no value" : "its value as the next argument");
	switch (o->cls) {
	case C_FLAG:
	case C_OCT:
	case C_NONE:
		return SL_WL_SCRIPT_FILE;
	case C_ANY:
		*cluster_done = true;
		return SL_WL_SCRIPT_FILE;
	case C_STOP:
		STOP("%s: option %s %s", f->name, shown, o->why);
	case C_EQ:
		if (attached == NULL)
			STOP("%s: option %s without '=VALUE' (a separate value is not followed)",
			     f->name, shown);
		val = attached;
		break;
	case C_REST:
		val = attached != NULL ? attached : "";
		*cluster_done = true;
		break;
	case C_ARG:
		*cluster_done = true;
		if (attached != NULL && (islong || attached[0] != '\0')) {
			val = attached;
			break;
		}
		/* no value attached: the next element */
		/* fall through */
	case C_NEXT:
		if (argv[*i + 1] == NULL)
			STOP("%s: option %s lacks its argument", f->name, shown);
		val = argv[++*i];
		break;
	}
	if (o->ok != NULL && !o->ok(val))
		STOP("%s: option %s %.60s: %s", f->name, shown, val,
		     o->why != NULL ? o->why : "not a value seclaunch knows");
	return SL_WL_SCRIPT_FILE;
}

/* "--name[=value]" or, for bash, "-name": a long option at argv[*i] */
static sl_wl_script_kind long_opt(const struct family *f, const struct opt *o, const char *name,
                                  const char *eq, char *const *argv, size_t *i, bool *noenv,
                                  char *why, size_t whyn)
{
	char shown[80];
	bool done;
	snprintf(shown, sizeof(shown), "--%.60s", name);
	return take(f, o, shown, true, eq != NULL ? eq + 1 : NULL, argv, i, &done, noenv, why,
	            whyn);
}

static sl_wl_script_kind parse(const struct family *f, char *const *argv, size_t *index,
                               bool *noenv, char *why, size_t whyn)
{
	sl_wl_script_kind k;
	size_t i = 1;
	for (; argv[i] != NULL; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(a, "-") == 0) {
			if (f->dash_ends) {
				i++;
				break;
			}
			STOP("%s: '-' %s", f->name, CODE_STDIN);
		}
		if (a[0] == '-' && a[1] == '-') {
			char name[128];
			const char *eq = strchr(a + 2, '=');
			size_t n = eq != NULL ? (size_t)(eq - a - 2) : strlen(a + 2);
			if (n >= sizeof(name))
				STOP("%s: option %.60s... is not one seclaunch knows", f->name, a);
			memcpy(name, a + 2, n);
			name[n] = '\0';
			for (size_t j = 0; f->underscore && j < n; j++)
				if (name[j] == '_')
					name[j] = '-';
			const struct opt *o = find_long(f->longs, name, n);
			if (o == NULL)
				STOP("%s: option --%s is not one seclaunch knows", f->name, name);
			k = long_opt(f, o, name, eq, argv, &i, noenv, why, whyn);
			if (k != SL_WL_SCRIPT_FILE)
				return k;
			continue;
		}
		if (a[0] != '-' && !(f->plus && a[0] == '+'))
			break;
		if (f->single_long != L1_NO && a[0] == '-') {
			/* bash reads -posix as --posix; dash reads it as -p -o six */
			const struct opt *o = find_long(f->longs, a + 1, strlen(a + 1));
			if (o != NULL && f->single_long == L1_AMBIGUOUS)
				STOP("%s: option %s means --%s to bash and a cluster of short "
				     "options "
				     "to dash",
				     f->name, a, a + 1);
			if (o != NULL) {
				k = long_opt(f, o, a + 1, NULL, argv, &i, noenv, why, whyn);
				if (k != SL_WL_SCRIPT_FILE)
					return k;
				continue;
			}
		}
		/* a cluster of short options: -uOc, -eo pipefail, +x */
		for (size_t j = 1; a[j] != '\0'; j++) {
			char shown[4] = {a[0], a[j], '\0', '\0'};
			const struct opt *o = find_short(f->shorts, a[j]);
			bool done = false;
			if (o == NULL)
				STOP("%s: option %s is not one seclaunch knows", f->name, shown);
			if (o->cls == C_OCT) {
				/* perl -0xHEX, -0777, -l015; ruby -0, -T1 */
				if (a[j] == '0' && a[j + 1] == 'x')
					j += 1 + strspn(a + j + 2, "0123456789abcdefABCDEF");
				else
					j += strspn(a + j + 1, "01234567");
				continue;
			}
			k = take(f, o, shown, false, a + j + 1, argv, &i, &done, noenv, why, whyn);
			if (k != SL_WL_SCRIPT_FILE)
				return k;
			if (done)
				break;
		}
	}
	if (argv[i] == NULL)
		STOP("%s: no script on its command line (it %s)", f->name, CODE_STDIN);
	if (strcmp(argv[i], "-") == 0 && !f->dash_ends)
		STOP("%s: '-' %s", f->name, CODE_STDIN);
	*index = i;
	return SL_WL_SCRIPT_FILE;
}

/* The simple rule (zsh, ksh): the first argument when it is not an option */
static bool simple(const struct family *f)
{
	return f->shorts == no_short && f->longs == no_long;
}

sl_wl_script_kind sl_wl_script(const char *exe, char *const *argv, char *const *envp, size_t *index,
                               char *why, size_t whyn)
{
	const struct family *f = family_of(exe);
	bool noenv = false;
	char rp[4096];
	/* a link under another name to an interpreter is that interpreter */
	if (f == NULL && realpath(exe, rp) != NULL)
		f = family_of(rp);
	why[0] = '\0';
	*index = 0;
	if (f == NULL || argv == NULL || argv[0] == NULL)
		return SL_WL_SCRIPT_NONE;
	if (simple(f)) {
		const char *a = argv[1];
		if (a != NULL && strcmp(a, "--") == 0)
			a = argv[2];
		if (a == NULL || a[0] == '-' || a[0] == '+')
			STOP("%s: %s (seclaunch reads only `%s SCRIPT ARG...`)", f->name,
			     a == NULL ? "no script on its command line"
			               : "options before the script",
			     f->name);
		*index = a == argv[1] ? 1 : 2;
	} else {
		sl_wl_script_kind k = parse(f, argv, index, &noenv, why, whyn);
		if (k != SL_WL_SCRIPT_FILE)
			return k;
	}
	if (noenv)
		return SL_WL_SCRIPT_FILE;
	return env_check(f, envp, why, whyn);
}

sl_wl_script_kind sl_wl_script_env(const char *interp, char *const *envp, char *why, size_t whyn)
{
	const struct family *f = family_of(interp);
	why[0] = '\0';
	if (f == NULL)
		return SL_WL_SCRIPT_FILE;
	return env_check(f, envp, why, whyn);
}
