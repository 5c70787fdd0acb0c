/* seclaunchd: the attested key-release service.
 *   seclaunchd --config FILE
 *   seclaunchd --dev --state DIR [--listen 127.0.0.1:PORT] [--policy P --policy-pubkey K]
 * docs/seclaunchd.md describes the configuration, docs/protocol.md the API. */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/wait.h>

#include "daemon.h"
#include "seclaunch/audit.h"
#include "seclaunch/policy.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "Usage: seclaunchd --config FILE [--log-file FILE]\n"
	        "       seclaunchd --dev --state DIR [--listen HOST:PORT] [--config FILE]\n"
	        "                  [--policy P --policy-pubkey K] [--log-file FILE]\n"
	        "       seclaunchd migrate --from-state DIR [--config FILE]\n"
	        "       seclaunchd backup --to FILE (--config FILE | --dev --state DIR)\n\n"
	        "The attested key-release service: releases dataset keys only to machines whose\n"
	        "evidence verifies, whose AK is enrolled, and whom the policy allows.\n\n"
	        "  --config FILE         JSON configuration (docs/seclaunchd.md); with --dev it\n"
	        "                        overrides the development defaults\n"
	        "  --dev                 development mode: creates in DIR a TLS CA + server\n"
	        "                        certificate (ca.pem), the scope tokens admin.token,\n"
	        "                        wrap.token, operate.token, metrics.token (0600), the\n"
	        "                        state store, an audit log; writes DIR/url once\n"
	        "                        listening;\n"
	        "                        accepts EKs without a certificate; without --policy\n"
	        "                        uses the built-in development policy, which seals\n"
	        "                        every output under the key dev-outputs (made at start)\n"
	        "  --state DIR           state directory for --dev\n"
	        "  --listen HOST:PORT    address to listen on (port 0: pick a free one;\n"
	        "                        --dev default 127.0.0.1:0)\n"
	        "  --policy P            signed policy (minisign signature in P.minisig)\n"
	        "  --policy-pubkey K     the compliance team's minisign public key\n"
	        "  --log-file FILE       append the daemon log to FILE (reopened on SIGHUP)\n"
	        "                        instead of stderr\n"
	        "  --print-defaults      print the default of each setting that has one (JSON)\n"
	        "  --version             print the version\n"
	        "  -h, --help            this text\n\n"
	        "Stops gracefully on SIGTERM or SIGINT. SIGHUP reloads the configuration and\n"
	        "the policy (a bad one is refused and the old one stays) and reopens the log.\n"
	        "SIGUSR1 seals the audit log's latest records with a signed checkpoint now\n"
	        "(audit_checkpoint_s, default 60, does it on a timer).\n"
	        "Exit codes: 0 stopped, 1 usage, 2 bad configuration or files (a key file or\n"
	        "the state store readable by others, owned by another user, or a symbolic\n"
	        "link), 4 policy signature invalid, 6 state store integrity failure (another\n"
	        "master key or registry key than the state store was made with), 7 system\n"
	        "error.\n");
}

/* The key process died or was restarted (its monitor, keyproc.c): logged
 * and audited; /v1/health reports it meanwhile. */
static void keyproc_event(void *arg, int state, int pid, int status)
{
	kmsd_ctx *ctx = arg;
	char what[200];
	if (state == -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return; /* the service stops */
	if (state == 1)
		snprintf(what, sizeof(what), "key process restarted (pid %d)", pid);
	else if (WIFSIGNALED(status))
		snprintf(what, sizeof(what), "key process %d killed by signal %d%s", pid,
		         WTERMSIG(status), state == 0 ? ": restarting" : "");
	else
		snprintf(what, sizeof(what), "key process %d exited with status %d%s", pid,
		         WIFEXITED(status) ? WEXITSTATUS(status) : status,
		         state == 0 ? ": restarting" : "");
	if (state == -1)
		snprintf(what + strlen(what), sizeof(what) - strlen(what),
		         "; not restarted: releases fail until seclaunchd restarts");
	kmsd_log(state == 1 ? KMSD_LOG_NOTICE : KMSD_LOG_ERR, "%s", what);
	if (ctx->audit != NULL &&
	    !kmsd_audit(ctx, state == 1 ? "kms.keyproc.restart" : "kms.keyproc.exit", NULL, NULL,
	                state == 1 ? SL_AUDIT_ALLOW : SL_AUDIT_ERROR, NULL, NULL,
	                json_pack("{s:s, s:i}", "event", what, "pid", pid)))
		kmsd_log(KMSD_LOG_ERR, "audit: %s", sl_err_detail());
}

/* The development policy seals every output under one key: made here once,
 * kept across restarts, so that `seclaunch run --output` works at once. */
/* Channels to the key process: one per handler, up to 24 (a channel is a
 * thread there; its store connections are capped by store_pool). */
static unsigned keyproc_channels(const kmsd_config *c)
{
	unsigned n = c->workers > 0 ? c->workers : c->threads;
	return n < 1 ? 1 : n > 24 ? 24 : n;
}

static SL_RESULT dev_output_key(kmsd_ctx *ctx)
{
	sl_err rc = kmsd_kek_create(ctx->kek, SL_POLICY_DEV_OUTPUT_KEY);
	if (rc == SL_E_EXISTS)
		rc = SL_OK;
	else if (rc == SL_OK &&
	         !kmsd_audit(ctx, SL_AUDIT_EV_KEY_CREATE, SL_POLICY_DEV_OUTPUT_KEY, NULL,
	                     SL_AUDIT_ALLOW, NULL, NULL,
	                     json_pack("{s:s}", "reason", "development policy output key")))
		rc = sl_err_wrap(SL_E_SYSTEM, "audit log %s", ctx->cfg->audit_log);
	if (rc != SL_OK)
		return sl_err_wrap(rc, "key '%s' of the development policy",
		                   SL_POLICY_DEV_OUTPUT_KEY);
	kmsd_log(KMSD_LOG_NOTICE,
	         "development policy: outputs (seclaunch run --output NAME=DEST, any "
	         "destination) are sealed under key '%s'",
	         SL_POLICY_DEV_OUTPUT_KEY);
	return SL_OK;
}

static SL_RESULT run(kmsd_config *cfg, const kmsd_start_opts *opts)
{
	sl_err rc = SL_E_INTERNAL;
	kmsd_ctx ctx = {.cfg = cfg, .live = &kmsd_live};
	bool live = false;
	SL_GUARD(kmsd_policy_load(cfg, &ctx.policy));
	if (sl_policy_is_dev(ctx.policy))
		kmsd_log(KMSD_LOG_WARNING,
		         "development policy in force: any key is released to any enrolled AK "
		         "(every audit record says so)");
	else if (sl_policy_allow_unverified_region(ctx.policy))
		kmsd_log(KMSD_LOG_WARNING,
		         "policy %s sets allow_unverified_region: a region claim that no signed "
		         "identity document verified counts (development only; the kms.start "
		         "record says so)",
		         cfg->policy);
	if (cfg->policy == NULL)
		kmsd_log(KMSD_LOG_NOTICE,
		         "development policy signed for clients: seclaunch run --policy "
		         "%s/policy.json --policy-pubkey %s/policy.pub",
		         cfg->state_dir, cfg->state_dir);
	kmsd_log(KMSD_LOG_NOTICE, "policy %s", sl_policy_digest_hex(ctx.policy));
	SL_GUARD(kmsd_tokens_load(&ctx, cfg));
	/* the key process first: it alone reads the master key or the PIN */
	SL_GUARD(kmsd_keyproc_start(cfg, keyproc_channels(cfg), &ctx.keyproc));
	SL_GUARD(kmsd_store_open(cfg->store, kmsd_store_pool(cfg), &ctx.store));
	kmsd_log(KMSD_LOG_NOTICE, "state store %s (%u connections); KEKs in process %d",
	         kmsd_store_kind(ctx.store), kmsd_store_pool(cfg),
	         (int)kmsd_keyproc_pid(ctx.keyproc));
	SL_GUARD(kmsd_kek_open_remote(ctx.keyproc, ctx.store, &ctx.kek));
	SL_GUARD(kmsd_registry_open(ctx.store, cfg->registry_key_file, &ctx.registry));
	SL_GUARD(
	    kmsd_nonces_new(ctx.store, cfg->max_challenges, cfg->challenge_ttl_s, &ctx.nonces));
	SL_GUARD(kmsd_metrics_new(&ctx.metrics));
	SL_GUARD(
	    kmsd_refusals_new(cfg->refusal_rate_per_min, cfg->audit_aggregate_s, &ctx.refusals));
	if (cfg->enroll_rate_per_min > 0)
		SL_GUARD(kmsd_refusals_new(cfg->enroll_rate_per_min, 0, &ctx.enroll_limit));
	if (cfg->accept_ek_without_cert)
		kmsd_log(KMSD_LOG_WARNING,
		         "enrollment accepts any TPM: EK certificates are "
		         "not required (accept_ek_without_cert%s)",
		         cfg->dev ? ", --dev" : "");
	/* no audit log, no service (exit 7 when it cannot be written) */
	rc = sl_audit_open(cfg->audit_log, cfg->audit_key_file, "seclaunchd", 0, &ctx.audit);
	if (rc != SL_OK) {
		rc = sl_err_wrap(rc == SL_E_IO ? SL_E_SYSTEM : rc, "audit log %s (not starting)",
		                 cfg->audit_log);
		goto out;
	}
	if (sl_policy_is_dev(ctx.policy))
		SL_GUARD(dev_output_key(&ctx));
	SL_GUARD(kmsd_keyproc_watch(ctx.keyproc, keyproc_event, &ctx));
	SL_GUARD(kmsd_live_start(&ctx, cfg, opts));
	live = true;
	SL_GUARD(kmsd_serve(&ctx));
	rc = SL_OK;
out:
	/* before the audit log closes: its watch thread may write to it */
	kmsd_keyproc_stop(ctx.keyproc);
	ctx.keyproc = NULL;
	if (ctx.audit != NULL && sl_audit_close(ctx.audit) != SL_OK && rc == SL_OK)
		kmsd_log(KMSD_LOG_ERR, "audit close: %s", sl_err_detail());
	if (live)
		kmsd_live_stop();
	kmsd_refusals_free(ctx.refusals);
	kmsd_refusals_free(ctx.enroll_limit);
	kmsd_metrics_free(ctx.metrics);
	kmsd_nonces_free(ctx.nonces);
	kmsd_registry_close(ctx.registry);
	kmsd_kek_close(ctx.kek);
	kmsd_store_close(ctx.store);
	sl_policy_free(ctx.policy);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"dev", no_argument, NULL, 'd'},
	    {"state", required_argument, NULL, 's'},
	    {"listen", required_argument, NULL, 'l'},
	    {"policy", required_argument, NULL, 'p'},
	    {"policy-pubkey", required_argument, NULL, 'k'},
	    {"log-file", required_argument, NULL, 'L'},
	    {"version", no_argument, NULL, 'V'},
	    {"print-defaults", no_argument, NULL, 'D'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	kmsd_config cfg;
	kmsd_start_opts o = {0};
	sl_err rc = sl_harden_process();
	kmsd_heap_wipe_install();
	int c;
	sigset_t hup;
	/* a HUP during start-up (systemctl reload, logrotate) waits for the
	 * server's signal loop instead of killing the process; threads started
	 * later inherit the mask */
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	sigaddset(&hup, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &hup, NULL);
	if (rc != SL_OK) {
		fprintf(stderr, "seclaunchd: %s\n", sl_err_detail());
		return sl_err_exit_code(rc);
	}
	if (argc > 1 && (strcmp(argv[1], "migrate") == 0 || strcmp(argv[1], "backup") == 0))
		return kmsd_tool_main(argc - 1, argv + 1);
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o.config = optarg;
			break;
		case 'd':
			o.dev = true;
			break;
		case 's':
			o.state = optarg;
			break;
		case 'l':
			o.listen = optarg;
			break;
		case 'p':
			o.policy = optarg;
			break;
		case 'k':
			o.pubkey = optarg;
			break;
		case 'L':
			o.log_file = optarg;
			break;
		case 'V':
			printf("seclaunchd %s\n", SL_VERSION);
			return 0;
		case 'D': {
			json_t *d = kmsd_config_defaults_json();
			if (d == NULL ||
			    json_dumpf(d, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) != 0) {
				json_decref(d);
				fprintf(stderr, "seclaunchd: --print-defaults: out of memory\n");
				return SL_CAT_SYSTEM;
			}
			json_decref(d);
			putchar('\n');
			return 0;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return SL_CAT_USAGE;
		}
	}
	if (optind != argc || (!o.dev && o.config == NULL) || (o.dev && o.state == NULL) ||
	    (!o.dev && o.state != NULL) || ((o.policy == NULL) != (o.pubkey == NULL))) {
		fprintf(stderr, "seclaunchd: %s\n",
		        optind != argc ? "unexpected argument"
		        : !o.dev && o.config == NULL
		            ? "--config FILE or --dev --state DIR is required"
		        : o.dev && o.state == NULL  ? "--dev needs --state DIR"
		        : !o.dev && o.state != NULL ? "--state goes with --dev"
		                                    : "--policy and --policy-pubkey go together");
		usage(stderr);
		return SL_CAT_USAGE;
	}
	rc = kmsd_config_build(&o, &cfg);
	if (rc == SL_OK)
		rc = kmsd_log_open(cfg.log_file);
	if (rc == SL_OK)
		rc = run(&cfg, &o);
	if (rc != SL_OK)
		kmsd_log(KMSD_LOG_ERR, "%s",
		         sl_err_detail()[0] ? sl_err_detail() : sl_err_message(rc));
	kmsd_config_free(&cfg);
	kmsd_log_close();
	return rc == SL_OK ? 0 : sl_err_exit_code(rc);
}
