/* kms/daemon/: seclaunchd's entry, configuration, SIGHUP reload, --dev
 * material and the migrate/backup tools. It may call every other folder:
 * main forks the key process (kms/keys/) and runs the server (kms/http/). */
#ifndef SECLAUNCH_KMS_DAEMON_H
#define SECLAUNCH_KMS_DAEMON_H

#include "../http/http.h"
#include "../keys/keys.h"

void kmsd_config_defaults(kmsd_config *c);
/* The settings of kmsd_config, one table for all that reads them: the
 * config file's keys and their checks (config.c), the defaults, freeing,
 * and the keys a reload keeps at their start-up value (reload.c). */
enum kmsd_setting_kind {
	KMSD_SET_STR,    /* char *, a non-empty string */
	KMSD_SET_UINT,   /* unsigned or size_t, in lo..hi */
	KMSD_SET_BOOL,   /* bool */
	KMSD_SET_BACKEND /* enum kmsd_backend, by name */
};
#define KMSD_SET_RESTART 1u /* fixed at start: a reload keeps the start-up value */
#define KMSD_SET_OPTION 2u  /* set by a command-line option, not a key of the file */
struct kmsd_setting {
	const char *name;
	enum kmsd_setting_kind kind;
	size_t off, size; /* the member of kmsd_config */
	uint64_t lo, hi;
	unsigned flags;
};
extern const struct kmsd_setting kmsd_settings[];
extern const size_t kmsd_nsettings;
/* A number, bool or backend setting's value in c. */
unsigned long long kmsd_setting_num(const kmsd_config *c, const struct kmsd_setting *s);
/* The defaults of the settings that have one, as the configuration file
 * spells them (`seclaunchd --print-defaults`; tests/integration/
 * conf_defaults.sh holds the packaged seclaunchd.conf and its man page to
 * them). NULL when out of memory. */
json_t *kmsd_config_defaults_json(void);
/* Overlays a JSON config file (unknown keys are errors naming the key). */
SL_MUST_USE sl_err kmsd_config_load(kmsd_config *c, const char *path);
/* --dev: fills every unset path under state_dir and creates what is missing
 * (TLS CA + server certificate, admin token, master key, registry key). */
SL_MUST_USE sl_err kmsd_config_dev(kmsd_config *c);
/* Checks that everything a production start needs is set. */
SL_MUST_USE sl_err kmsd_config_check(const kmsd_config *c);
void kmsd_config_free(kmsd_config *c);

/* statedir.c: the --dev state directory must be a real directory owned by
 * this user and writable by nobody else (SL_E_PERM naming the fix). */
SL_MUST_USE sl_err kmsd_state_dir_check(const char *dir);

/* devpolicy.c: the built-in development policy, written with a signature
 * and its public key into state_dir (policy.json, policy.json.minisig,
 * policy.pub) for clients, and loaded from there (sl_policy_is_dev). */
struct sl_policy;
SL_MUST_USE sl_err kmsd_devpolicy(const char *state_dir, struct sl_policy **out);

/* devca.c: a self-signed CA and a server certificate for 127.0.0.1/localhost. */
SL_MUST_USE sl_err kmsd_devca_create(const char *ca_pem, const char *cert_pem, const char *key_pem);

/* heap_wipe.c: jansson wipes every block before freeing it (request
 * bodies carry wrap DEKs and tokens). Called first in main. */
void kmsd_heap_wipe_install(void);

/* migrate.c: seclaunchd migrate | backup (argv[0] is the command). */
int kmsd_tool_main(int argc, char **argv);

/* What the command line asked for; a reload builds the config from it again. */
typedef struct kmsd_start_opts {
	const char *config, *state, *listen, *policy, *pubkey, *log_file;
	bool dev;
} kmsd_start_opts;
/* defaults, the config file, the command-line options, --dev's files, checks */
SL_MUST_USE sl_err kmsd_config_build(const kmsd_start_opts *o, kmsd_config *c);
/* The signed policy the config names, or the development policy in --dev. */
SL_MUST_USE sl_err kmsd_policy_load(const kmsd_config *c, struct sl_policy **out);
/* Makes (start, ctx->policy) the first generation; it takes ctx->policy. The
 * start-up config must outlive kmsd_live_stop(). */
SL_MUST_USE sl_err kmsd_live_start(kmsd_ctx *ctx, const kmsd_config *start,
                                   const kmsd_start_opts *o);
void kmsd_live_stop(void);
/* enter, leave and reload, for the server (ctx->live): enter gives a request
 * the current generation's config and policy, held until leave; reload
 * (SIGHUP) swaps in a rebuilt config + policy whole, or keeps the old ones and
 * says why, and never stops the service. */
extern const kmsd_live_ops kmsd_live;

/* keyproc_start.c: forks the key process (kmsd_keyproc_spawn) and attaches
 * the network process to it (kmsd_keyproc_attach). */
SL_MUST_USE sl_err kmsd_keyproc_start(const kmsd_config *cfg, unsigned channels,
                                      kmsd_keyproc **out);

#endif
