/* The shared option layer and the error reporting of every subcommand. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

bool sl_cli_quiet;
bool sl_cli_json;

#define MAX_OPTS 64
#define MAX_SHORT 64

/* Keys of the shared long options that have no short letter. */
enum {
	K_JSON = 0x1000,
	K_KMS,
	K_KMS_CA,
	K_KMS_PIN,
	K_TCTI,
	K_AUDIT_LOG,
	K_FORCE,
};

static const struct {
	unsigned flag;
	struct option o;
} shared_opts[] = {
    {SL_SH_QUIET, {"quiet", no_argument, NULL, 'q'}},
    {SL_SH_JSON, {"json", no_argument, NULL, K_JSON}},
    {SL_SH_KMS, {"kms", required_argument, NULL, K_KMS}},
    {SL_SH_KMS_CA, {"kms-ca", required_argument, NULL, K_KMS_CA}},
    {SL_SH_KMS_PIN, {"kms-pin", required_argument, NULL, K_KMS_PIN}},
    {SL_SH_TCTI, {"tcti", required_argument, NULL, K_TCTI}},
    {SL_SH_AUDIT_LOG, {"audit-log", required_argument, NULL, K_AUDIT_LOG}},
    {SL_SH_OUT, {"output", required_argument, NULL, 'o'}},
    {SL_SH_OUT, {"out", required_argument, NULL, 'o'}},
    {SL_SH_FORCE, {"force", no_argument, NULL, K_FORCE}},
};
#define NSHARED (sizeof(shared_opts) / sizeof(shared_opts[0]))

static void print_error_json(sl_err rc, int exit_code, const char *message)
{
	json_t *j = json_pack("{s:{s:s, s:i, s:s}}", "error", "code", sl_err_name(rc), "exit",
	                      exit_code, "message", message);
	sl_cli_print_json(j);
}

void sl_cli_report(const char *cmd, sl_err rc, int exit_code, const char *message)
{
	if (sl_cli_json)
		print_error_json(rc, exit_code, message);
	else
		fprintf(stderr, "seclaunch %s: error: %s\n", cmd, message);
}

int sl_cli_fail(const char *cmd, sl_err rc)
{
	const char *detail = sl_err_detail();
	sl_cli_report(cmd, rc, sl_err_exit_code(rc),
	              detail[0] != '\0' ? detail : sl_err_message(rc));
	return sl_err_exit_code(rc);
}

int sl_cli_run(const struct sl_cli_spec *s, void *ctx, struct sl_cli_shared *sh, int argc,
               char **argv, int (*check)(void *ctx), int (*run)(void *ctx))
{
	int ret = sl_cli_parse(s, ctx, sh, argc, argv);
	if (ret >= 0)
		return ret;
	ret = check != NULL ? check(ctx) : 0;
	return ret != 0 ? ret : run(ctx);
}

int sl_cli_need_out(const char *cmd, const struct sl_cli_shared *sh, const char *missing)
{
	if (sh->out == NULL)
		return sl_cli_usage(cmd, "%s", missing);
	if (sl_cli_json && strcmp(sh->out, "-") == 0)
		return sl_cli_usage(cmd, "--json and -o - both want stdout");
	return 0;
}

int sl_cli_dashdash(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0)
			return i;
	return argc;
}

int sl_cli_usage(const char *cmd, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (sl_cli_json) {
		print_error_json(SL_E_USAGE, SL_CAT_USAGE, msg);
		return SL_CAT_USAGE;
	}
	fprintf(stderr, "seclaunch %s: %s\nTry 'seclaunch %s --help'.\n", cmd, msg, cmd);
	return SL_CAT_USAGE;
}

void sl_cli_print_json(json_t *j)
{
	if (j == NULL) {
		fputs("{\"error\":{\"code\":\"SL_E_NOMEM\",\"exit\":7,\"message\":\"out of "
		      "memory\"}}\n",
		      stdout);
		return;
	}
	json_dumpf(j, stdout, JSON_COMPACT | JSON_SORT_KEYS);
	fputc('\n', stdout);
	fflush(stdout);
	json_decref(j);
}

/* "seclaunch CMD: warning: ..." on stderr, once per process for each text. */
static void sl_cli_warn_once(const char *cmd, const char *fmt, ...)
{
	static char said[8][160];
	char msg[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < sizeof(said) / sizeof(said[0]); i++) {
		if (strcmp(said[i], msg) == 0)
			return;
		if (said[i][0] == '\0') {
			snprintf(said[i], sizeof(said[i]), "%s", msg);
			break;
		}
	}
	fprintf(stderr, "seclaunch %s: warning: %s\n", cmd, msg);
}

sl_err sl_cli_check_new(const char *path, bool force)
{
	struct stat st;
	if (force || path == NULL || strcmp(path, "-") == 0)
		return SL_OK;
	if (lstat(path, &st) == 0)
		return sl_err_set(SL_E_EXISTS, "%s: exists; --force replaces it", path);
	if (errno != ENOENT)
		return sl_err_set(SL_E_IO, "%s: %s", path, strerror(errno));
	return SL_OK;
}

/* --json is honoured even for a mistake made before it on the line. */
static void prescan_json(const struct sl_cli_spec *s, int argc, char **argv)
{
	if ((s->shared & SL_SH_JSON) == 0)
		return;
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--json") == 0)
			sl_cli_json = true;
}

static int on_shared(struct sl_cli_shared *sh, int key, char *arg)
{
	switch (key) {
	case 'q':
		sl_cli_quiet = true;
		return 1;
	case 'o':
		sh->out = arg;
		return 1;
	case K_JSON:
		sl_cli_json = true;
		return 1;
	case K_KMS:
		sh->kms = arg;
		return 1;
	case K_KMS_CA:
		sh->kms_ca = arg;
		return 1;
	case K_KMS_PIN:
		sh->kms_pin = arg;
		return 1;
	case K_TCTI:
		sh->tcti = arg;
		return 1;
	case K_AUDIT_LOG:
		sh->audit_log = arg;
		return 1;
	case K_FORCE:
		sh->force = true;
		return 1;
	default:
		return 0;
	}
}

static const char *env_or_null(const char *name)
{
	const char *v = getenv(name);
	return v != NULL && v[0] != '\0' ? v : NULL;
}

/* The option getopt stopped at: the long option of tok when tok is one
 * (optopt is 0, a key >= 256, or that option's own key), else -<optopt>. */
static void name_mistake(const struct option *lo, const char *tok, int optopt_, char *out, size_t n)
{
	if (strncmp(tok, "--", 2) == 0) {
		size_t len = strcspn(tok + 2, "=");
		bool is_long = optopt_ == 0 || optopt_ >= 256;
		for (const struct option *o = lo; !is_long && o->name != NULL; o++)
			is_long = o->val == optopt_ && strlen(o->name) == len &&
			          strncmp(o->name, tok + 2, len) == 0;
		if (is_long) {
			snprintf(out, n, "--%.*s", (int)(len < 64 ? len : 64), tok + 2);
			return;
		}
	}
	snprintf(out, n, "-%c", optopt_ > 32 && optopt_ < 127 ? optopt_ : '?');
}

/* The getopt tables of s: short options so, long options lo (with dep[i]
 * the new name when lo[i] is a deprecated alias). Returns false when s has
 * more options than the tables hold. */
static bool build_tables(const struct sl_cli_spec *s, struct option lo[MAX_OPTS],
                         const char *dep[MAX_OPTS], const char *vals[MAX_OPTS], char so[MAX_SHORT])
{
	size_t n = 0, sn = 0;
	if (s->posix)
		so[sn++] = '+';
	/* ':' first: a missing argument is told apart from an unknown option */
	so[sn++] = ':';
	so[sn++] = 'h';
	if (s->shared & SL_SH_QUIET)
		so[sn++] = 'q';
	if (s->shared & SL_SH_OUT) {
		so[sn++] = 'o';
		so[sn++] = ':';
	}
	for (const char *p = s->shortopts; p != NULL && *p != '\0'; p++) {
		if (sn + 1 >= MAX_SHORT)
			return false;
		so[sn++] = *p;
	}
	so[sn] = '\0';
	for (size_t i = 0; i < NSHARED; i++) {
		if (s->shared & shared_opts[i].flag) {
			dep[n] = NULL;
			vals[n] = NULL;
			lo[n++] = shared_opts[i].o;
		}
	}
	for (const struct sl_cli_opt *o = s->opts; o != NULL && o->name != NULL; o++) {
		if (n + 2 >= MAX_OPTS)
			return false;
		dep[n] = o->deprecated_for;
		vals[n] = o->values;
		lo[n++] = (struct option){o->name, o->has_arg, NULL, o->key};
	}
	dep[n] = NULL;
	vals[n] = NULL;
	lo[n++] = (struct option){"help", no_argument, NULL, 'h'};
	lo[n] = (struct option){NULL, 0, NULL, 0};
	return true;
}

/* The environment stands in for a shared flag that was not given. */
static void env_fallbacks(const struct sl_cli_spec *s, struct sl_cli_shared *sh)
{
	if ((s->shared & SL_SH_KMS_CA) && sh->kms_ca == NULL)
		sh->kms_ca = env_or_null("SECLAUNCH_KMS_CA");
	if ((s->shared & SL_SH_TCTI) && sh->tcti == NULL)
		sh->tcti = env_or_null("SECLAUNCH_TCTI");
	if ((s->shared & SL_SH_AUDIT_LOG) && sh->audit_log == NULL)
		sh->audit_log = env_or_null("SECLAUNCH_AUDIT_LOG");
}

/* arg's word (up to a '=') is one of the '|'-separated words of values. */
static bool value_listed(const char *values, const char *arg)
{
	size_t alen = strcspn(arg, "=");
	for (const char *p = values; *p != '\0';) {
		size_t len = strcspn(p, "|");
		if (len == alen && strncmp(p, arg, len) == 0)
			return true;
		p += len + (p[len] == '|');
	}
	return false;
}

/* `--complete`: the options of s, and the values of those that list them. */
static int print_completion(const struct option *lo, const char *const *vals)
{
	for (size_t i = 0; lo[i].name != NULL; i++) {
		printf("opt --%s", lo[i].name);
		for (const char *p = vals[i]; p != NULL && *p != '\0';) {
			size_t len = strcspn(p, "|");
			printf(" %.*s", (int)len, p);
			p += len + (p[len] == '|');
		}
		putchar('\n');
	}
	return 0;
}

int sl_cli_parse(const struct sl_cli_spec *s, void *ctx, struct sl_cli_shared *sh, int argc,
                 char **argv)
{
	struct option lo[MAX_OPTS];
	const char *dep[MAX_OPTS], *vals[MAX_OPTS];
	char so[MAX_SHORT];
	int c, li, ret;

	memset(sh, 0, sizeof(*sh));
	prescan_json(s, argc, argv);
	if (!build_tables(s, lo, dep, vals, so))
		return sl_cli_fail(s->name, sl_err_set(SL_E_INTERNAL, "too many options"));
	if (argc == 2 && strcmp(argv[1], "--complete") == 0)
		return print_completion(lo, vals);
	optind = 1;
	opterr = 0;
	for (;;) {
		li = -1;
		c = getopt_long(argc, argv, so, lo, &li);
		if (c == -1)
			break;
		if (c == '?' || c == ':') {
			char what[80];
			name_mistake(lo, argv[optind - 1], optopt, what, sizeof(what));
			return sl_cli_usage(s->name,
			                    c == ':' ? "option '%s' needs an argument"
			                             : "unknown option '%s'",
			                    what);
		}
		if (c == 'h') {
			s->help(stdout);
			return 0;
		}
		if (li < 0)
			for (int k = 0; lo[k].name != NULL; k++)
				if (lo[k].val == c)
					li = k;
		if (li >= 0 && dep[li] != NULL)
			sl_cli_warn_once(s->name, "--%s is deprecated; use --%s", lo[li].name,
			                 dep[li]);
		if (li >= 0 && vals[li] != NULL && optarg != NULL &&
		    !value_listed(vals[li], optarg)) {
			char list[256];
			size_t n = 0;
			for (const char *p = vals[li]; *p != '\0' && n + 3 < sizeof(list); p++) {
				if (*p == '|') {
					list[n++] = ',';
					list[n++] = ' ';
				} else {
					list[n++] = *p;
				}
			}
			list[n] = '\0';
			return sl_cli_usage(s->name, "--%s: '%s' is not one of %s", lo[li].name,
			                    optarg, list);
		}
		if (on_shared(sh, c, optarg))
			continue;
		ret = s->on_option != NULL ? s->on_option(ctx, c, optarg)
		                           : sl_cli_usage(s->name, "unknown option");
		if (ret != 0)
			return ret;
	}
	if (s->on_args != NULL) {
		ret = s->on_args(ctx, argc - optind, argv + optind);
		if (ret != 0)
			return ret;
	} else if (optind < argc) {
		return sl_cli_usage(s->name, "unexpected argument '%s'", argv[optind]);
	}
	env_fallbacks(s, sh);
	return -1;
}

int sl_cli_dispatch(const char *cmd, const struct sl_cli_verb *verbs, void (*help)(FILE *f),
                    int argc, char **argv)
{
	char names[256];
	size_t o = 0;
	if (argc < 2) {
		help(stderr);
		return SL_CAT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		help(stdout);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--complete") == 0) {
		for (const struct sl_cli_verb *v = verbs; v->name != NULL; v++)
			printf("verb %s\n", v->name);
		return 0;
	}
	for (const struct sl_cli_verb *v = verbs; v->name != NULL; v++) {
		if (strcmp(argv[1], v->name) == 0)
			return v->fn(v, argc - 1, argv + 1);
		o += (size_t)snprintf(names + o, o < sizeof(names) ? sizeof(names) - o : 0, "%s%s",
		                      o ? ", " : "", v->name);
	}
	for (int i = 2; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--json") == 0)
			sl_cli_json = true;
	return sl_cli_usage(cmd, "unknown subcommand '%s' (%s)", argv[1], names);
}

/* "4M", "64K", "4MiB", "65536" -> bytes; 0 on a malformed value. */
uint64_t sl_cli_parse_size(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || s[0] == '-')
		return 0;
	unsigned shift = 0;
	if (*end == 'K' || *end == 'k')
		shift = 10, end++;
	else if (*end == 'M' || *end == 'm')
		shift = 20, end++;
	else if (*end == 'G' || *end == 'g')
		shift = 30, end++;
	if (shift != 0 && strcmp(end, "iB") == 0)
		end += 2;
	else if (shift != 0 && (strcmp(end, "B") == 0 || strcmp(end, "b") == 0))
		end += 1;
	if (*end != '\0' || v > (UINT64_MAX >> shift))
		return 0;
	return (uint64_t)v << shift;
}
