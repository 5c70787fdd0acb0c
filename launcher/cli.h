/* The seclaunch CLI: one file per subcommand (cmd_<name>.c), each exporting
 * `int cmd_<name>(int argc, char **argv)` that returns the process exit code.
 * argv[0] is the subcommand name; parse the rest with getopt_long. */
#ifndef SECLAUNCH_LAUNCHER_CLI_H
#define SECLAUNCH_LAUNCHER_CLI_H

#include <stdbool.h>

#include "seclaunch/error.h"

struct sl_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary; /* one line for `seclaunch --help` */
};

/* Shared flags, set by the subcommand's parser. */
extern bool sl_cli_quiet; /* -q */
extern bool sl_cli_json;  /* --json */

/* Prints "seclaunch CMD: error: <detail>" on stderr and returns rc's exit code. */
int sl_cli_fail(const char *cmd, sl_err rc);
/* Prints a usage error (and "try --help") and returns 1. */
int sl_cli_usage(const char *cmd, const char *fmt, ...) SL_PRINTF(2, 3);
/* libcurl and jansson wipe each heap block before freeing it (heap_wipe.c);
 * call first thing in main, before either library allocates. */
SL_MUST_USE sl_err sl_heap_wipe_install(void);

/* Subcommands (add yours here and to the table in main.c). */
int cmd_version(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_encrypt(int argc, char **argv);
int cmd_decrypt(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_attest(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_enroll(int argc, char **argv);
int cmd_key(int argc, char **argv);
int cmd_evidence(int argc, char **argv);

#endif
