/* The seclaunch CLI: one file per subcommand (cmd_<name>.c), each exporting
 * `int cmd_<name>(int argc, char **argv)` that returns the process exit code.
 * argv[0] is the subcommand name.
 *
 * One option layer (cli.c), in tpm2-tools' tpm2_options shape: a command
 * declares its own options (one table line each) and which shared flags it
 * accepts; sl_cli_parse() parses both, calls the command's on_option for its
 * own and on_args for the operands, reports every mistake in one line, and
 * fills struct sl_cli_shared. A command is then options -> checks -> run(ctx). */
#ifndef SECLAUNCH_LAUNCHER_CLI_H
#define SECLAUNCH_LAUNCHER_CLI_H

#include <stdbool.h>
#include <getopt.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "seclaunch/error.h"

struct sl_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary; /* one line for `seclaunch --help` */
};

/* The shared flags. Each is parsed here and nowhere else; a command names
 * those that mean something to it. */
enum sl_cli_shared_flag {
	SL_SH_QUIET = 1u << 0,     /* -q, --quiet */
	SL_SH_JSON = 1u << 1,      /* --json: results (and a failure) as JSON on stdout */
	SL_SH_KMS = 1u << 2,       /* --kms URL */
	SL_SH_KMS_CA = 1u << 3,    /* --kms-ca FILE, else $SECLAUNCH_KMS_CA */
	SL_SH_KMS_PIN = 1u << 4,   /* --kms-pin PIN */
	SL_SH_TCTI = 1u << 5,      /* --tcti T, else $SECLAUNCH_TCTI */
	SL_SH_AUDIT_LOG = 1u << 6, /* --audit-log FILE, else $SECLAUNCH_AUDIT_LOG */
	SL_SH_OUT = 1u << 7,       /* -o, --output FILE (--out is the same flag) */
	SL_SH_FORCE = 1u << 8,     /* --force: replace an existing output file */
	SL_SH_KMS_ALL = SL_SH_KMS | SL_SH_KMS_CA | SL_SH_KMS_PIN,
};

/* What the shared flags said (environment fallbacks applied). */
struct sl_cli_shared {
	const char *kms, *kms_ca, *kms_pin, *tcti, *audit_log, *out;
	bool force;
};

/* One of a command's own options. key: a short option letter (listed in the
 * spec's shortopts as well) or a value >= 256. deprecated_for: set on an old
 * name kept as a hidden alias; it warns once and then acts as key. values:
 * the only words its argument may be ("auto|gpu|host"; the part before a
 * '=' is the word, so "gce=URL" is gce), or NULL for any. sl_cli_parse
 * refuses any other word, and the shell completion offers exactly these
 * (`seclaunch CMD [VERB] --complete`, read by scripts/docgen). */
/* The values of the options that take one of a few words, for the option
 * tables (each parser's own words; tests/unit/cli_test.c checks that every
 * word here is one its parser takes). */
#define SL_CLI_STAGE_VALUES "auto|host|gpu|gpu-ipc|stream"
#define SL_CLI_TEE_VALUES "auto|tpm2|sev-snp|tdx|nvidia-gpu|aws-nitro"
#define SL_CLI_AEAD_VALUES "aes-256-gcm|xchacha20-poly1305"
#define SL_CLI_FORMAT_VALUES "jsonl|cef|ocsf|csv"
#define SL_CLI_PREEMPT_VALUES "sigterm|gce|aws"

struct sl_cli_opt {
	const char *name;
	int has_arg; /* no_argument / required_argument of getopt.h */
	int key;
	const char *deprecated_for;
	const char *values;
};

struct sl_cli_spec {
	const char *name;              /* "decrypt", "policy explain": names every message */
	unsigned shared;               /* SL_SH_* it accepts */
	const char *shortopts;         /* its own short options ("Wt:"), or NULL */
	const struct sl_cli_opt *opts; /* its own long options, ended by {NULL}; or NULL */
	void (*help)(FILE *f);         /* what --help prints */
	/* Called for each of its own options; returns 0 or an exit code. */
	int (*on_option)(void *ctx, int key, char *arg);
	/* Called once with the operands; returns 0 or an exit code. NULL: none allowed. */
	int (*on_args)(void *ctx, int argc, char **argv);
	/* options end at the first operand (POSIX; no GNU permutation): an
	 * operand that looks like an option (a dataset path "--ready-file=x"
	 * handed on by a privileged caller) stays an operand */
	bool posix;
};

/* Parses argv[1..argc) for the command s. Returns -1 to go on, or the exit
 * code to return now (0 after --help). Sets sl_cli_quiet and sl_cli_json.
 * A lone hidden `--complete` prints one "opt --NAME [VALUE...]" line per
 * option for the shell completion (scripts/docgen) and returns 0. */
int sl_cli_parse(const struct sl_cli_spec *s, void *ctx, struct sl_cli_shared *sh, int argc,
                 char **argv);

/* A command's whole course: sl_cli_parse, then check(ctx) (NULL: none) and,
 * when that returns 0, run(ctx). Returns the exit code. */
int sl_cli_run(const struct sl_cli_spec *s, void *ctx, struct sl_cli_shared *sh, int argc,
               char **argv, int (*check)(void *ctx), int (*run)(void *ctx));
/* -o was given (else a usage error saying `missing`) and, under --json, is
 * not "-" (both would want stdout). 0 or the usage exit code. */
int sl_cli_need_out(const char *cmd, const struct sl_cli_shared *sh, const char *missing);

/* The index of the first "--" in argv[1..argc) (argc when there is none):
 * the options end there and a command to run follows. */
int sl_cli_dashdash(int argc, char **argv);

/* A command with sub-verbs (policy, audit, key, evidence): the verb table. */
struct sl_cli_verb {
	const char *name;
	int (*fn)(const struct sl_cli_verb *v, int argc, char **argv); /* argv[0]: the verb */
	const void *data;                                              /* the verb's own */
};
/* Finds argv[1] in verbs and runs it with argv + 1; "--help"/"-h"/none print
 * help (the latter on stderr, exit 1); an unknown verb is a usage error.
 * `CMD --complete` (hidden; for scripts/docgen) prints "verb NAME" lines. */
int sl_cli_dispatch(const char *cmd, const struct sl_cli_verb *verbs, void (*help)(FILE *f),
                    int argc, char **argv);

/* Shared flags, set by sl_cli_parse. */
extern bool sl_cli_quiet; /* -q */
extern bool sl_cli_json;  /* --json */

/* Prints "seclaunch CMD: error: <detail>" on stderr (under --json: one
 * {"error":{"code","exit","message"}} object on stdout instead) and returns
 * rc's exit code. */
int sl_cli_fail(const char *cmd, sl_err rc);
/* The same with the message and exit code given (run's failure path, whose
 * exit code can be a signal's 128+n). */
void sl_cli_report(const char *cmd, sl_err rc, int exit_code, const char *message);
/* The same for a usage error (with "try --help"); returns 1. */
int sl_cli_usage(const char *cmd, const char *fmt, ...) SL_PRINTF(2, 3);
/* Prints j (compact, one line) on stdout; frees it. For --json results. */
void sl_cli_print_json(json_t *j);
/* SL_E_EXISTS naming path and --force when path exists and force is off. */
SL_MUST_USE sl_err sl_cli_check_new(const char *path, bool force);
/* libcurl and jansson wipe each heap block before freeing it (heap_wipe.c);
 * call first thing in main, before either library allocates. */
SL_MUST_USE sl_err sl_heap_wipe_install(void);

/* Subcommands (add yours here and to the table in main.c). */
int cmd_version(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_encrypt(int argc, char **argv);
int cmd_decrypt(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_attest(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_enroll(int argc, char **argv);
int cmd_enroll_admin(int argc, char **argv);
int cmd_measure(int argc, char **argv);
int cmd_key(int argc, char **argv);
int cmd_rewrap(int argc, char **argv);
int cmd_evidence(int argc, char **argv);

/* "4M", "64K", "4MiB", "1G", "65536" -> bytes; 0 on a malformed value. */
uint64_t sl_cli_parse_size(const char *s);

#endif
