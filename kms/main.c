/* seclaunchd: the attested key-release service.
 *   seclaunchd --config FILE
 *   seclaunchd --dev --state DIR [--listen 127.0.0.1:PORT] [--policy P --policy-pubkey K]
 * docs/seclaunchd.md describes the configuration, docs/protocol.md the API. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kmsd.h"
#include "seclaunch/audit.h"
#include "seclaunch/policy.h"
#include "store.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "Usage: seclaunchd --config FILE\n"
	        "       seclaunchd --dev --state DIR [--listen HOST:PORT] [--config FILE]\n"
	        "                  [--policy P --policy-pubkey K]\n"
	        "       seclaunchd migrate --from-state DIR [--config FILE]\n"
	        "       seclaunchd backup --to FILE (--config FILE | --dev --state DIR)\n\n"
	        "The attested key-release service: releases dataset keys only to machines whose\n"
	        "evidence verifies, whose AK is enrolled, and whom the policy allows.\n\n"
	        "  --config FILE         JSON configuration (docs/seclaunchd.md); with --dev it\n"
	        "                        overrides the development defaults\n"
	        "  --dev                 development mode: creates in DIR a TLS CA + server\n"
	        "                        certificate (ca.pem), admin.token (0600), a local\n"
	        "                        keystore, an audit log; writes DIR/url once listening;\n"
	        "                        accepts EKs without a certificate; without --policy\n"
	        "                        uses the built-in development policy\n"
	        "  --state DIR           state directory for --dev\n"
	        "  --listen HOST:PORT    address to listen on (port 0: pick a free one;\n"
	        "                        --dev default 127.0.0.1:0)\n"
	        "  --policy P            signed policy (minisign signature in P.minisig)\n"
	        "  --policy-pubkey K     the compliance team's minisign public key\n"
	        "  --version             print the version\n"
	        "  -h, --help            this text\n\n"
	        "Stops gracefully on SIGTERM or SIGINT. Exit codes: 0 stopped, 1 usage,\n"
	        "2 bad configuration or files, 4 policy signature invalid, 6 keystore or registry\n"
	        "integrity failure, 7 system error.\n");
}

static sl_err set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = strdup(v);
	return *dst != NULL ? SL_OK : sl_err_set(SL_E_NOMEM, "options");
}

static sl_err load_admin_token(kmsd_ctx *ctx, const char *path)
{
	sl_err rc = SL_E_INPUT;
	sl_secret *t = NULL;
	size_t n;
	SL_GUARD(sl_secret_read_file(path, 4096, &t));
	n = sl_secret_len(t);
	while (n > 0 && (sl_secret_data(t)[n - 1] == '\n' || sl_secret_data(t)[n - 1] == '\r' ||
	                 sl_secret_data(t)[n - 1] == ' '))
		n--;
	SL_ENSURE(n >= 16, SL_E_INPUT, "%s: admin token shorter than 16 characters", path);
	sl_sha256(sl_secret_data(t), n, ctx->admin_token_sha256);
	rc = SL_OK;
out:
	sl_secret_free(t);
	return rc;
}

static sl_err run(kmsd_config *cfg)
{
	sl_err rc = SL_E_INTERNAL;
	kmsd_ctx ctx = {.cfg = cfg};
	if (cfg->policy != NULL) {
		SL_GUARD(sl_policy_load_signed(cfg->policy, NULL, cfg->policy_pubkey, &ctx.policy));
		SL_ENSURE(cfg->dev || !sl_policy_is_dev(ctx.policy), SL_E_INPUT,
		          "%s: the built-in development policy (it releases any key); only "
		          "seclaunchd --dev takes it",
		          cfg->policy);
	} else {
		SL_ENSURE(cfg->dev, SL_E_INPUT,
		          "config: \"policy\" and \"policy_pubkey\" are required outside --dev");
		SL_GUARD(kmsd_devpolicy(cfg->state_dir, &ctx.policy));
		fprintf(stderr,
		        "seclaunchd: WARNING: development policy in force: any key is released "
		        "to any enrolled AK (every audit record says so)\n"
		        "seclaunchd: development policy signed for clients: seclaunch run "
		        "--policy %s/policy.json --policy-pubkey %s/policy.pub\n",
		        cfg->state_dir, cfg->state_dir);
	}
	fprintf(stderr, "seclaunchd: policy %s\n", sl_policy_digest_hex(ctx.policy));
	SL_GUARD(load_admin_token(&ctx, cfg->admin_token_file));
	/* the key process first: it alone reads the master key or the PIN */
	SL_GUARD(kmsd_keyproc_start(cfg, kmsd_store_pool(cfg), &ctx.keyproc));
	SL_GUARD(kmsd_store_open(cfg->store, kmsd_store_pool(cfg), &ctx.store));
	fprintf(stderr, "seclaunchd: state store %s; KEKs in process %d\n",
	        kmsd_store_kind(ctx.store), (int)kmsd_keyproc_pid(ctx.keyproc));
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
		fprintf(stderr,
		        "seclaunchd: WARNING: enrollment accepts any TPM: EK certificates are "
		        "not required (accept_ek_without_cert%s)\n",
		        cfg->dev ? ", --dev" : "");
	/* no audit log, no service (exit 7 when it cannot be written) */
	rc = sl_audit_open(cfg->audit_log, cfg->audit_key_file, "seclaunchd", 0, &ctx.audit);
	if (rc != SL_OK) {
		rc = sl_err_wrap(rc == SL_E_IO ? SL_E_SYSTEM : rc, "audit log %s (not starting)",
		                 cfg->audit_log);
		goto out;
	}
	SL_GUARD(kmsd_serve(&ctx));
	rc = SL_OK;
out:
	if (ctx.audit != NULL && sl_audit_close(ctx.audit) != SL_OK && rc == SL_OK)
		fprintf(stderr, "seclaunchd: audit close: %s\n", sl_err_detail());
	kmsd_refusals_free(ctx.refusals);
	kmsd_refusals_free(ctx.enroll_limit);
	kmsd_metrics_free(ctx.metrics);
	kmsd_nonces_free(ctx.nonces);
	kmsd_registry_close(ctx.registry);
	kmsd_kek_close(ctx.kek);
	kmsd_keyproc_stop(ctx.keyproc);
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
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	kmsd_config cfg;
	const char *config = NULL, *state = NULL, *listen = NULL, *policy = NULL, *pubkey = NULL;
	bool dev = false;
	sl_err rc = sl_harden_process();
	kmsd_heap_wipe_install();
	int c;
	if (rc != SL_OK) {
		fprintf(stderr, "seclaunchd: %s\n", sl_err_detail());
		return sl_err_exit_code(rc);
	}
	if (argc > 1 && (strcmp(argv[1], "migrate") == 0 || strcmp(argv[1], "backup") == 0))
		return kmsd_tool_main(argc - 1, argv + 1);
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'd':
			dev = true;
			break;
		case 's':
			state = optarg;
			break;
		case 'l':
			listen = optarg;
			break;
		case 'p':
			policy = optarg;
			break;
		case 'k':
			pubkey = optarg;
			break;
		case 'V':
			printf("seclaunchd %s\n", SL_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return SL_CAT_USAGE;
		}
	}
	if (optind != argc || (!dev && config == NULL) || (dev && state == NULL) ||
	    (!dev && state != NULL) || ((policy == NULL) != (pubkey == NULL))) {
		fprintf(stderr, "seclaunchd: %s\n",
		        optind != argc           ? "unexpected argument"
		        : !dev && config == NULL ? "--config FILE or --dev --state DIR is required"
		        : dev && state == NULL   ? "--dev needs --state DIR"
		        : !dev && state != NULL  ? "--state goes with --dev"
		                                 : "--policy and --policy-pubkey go together");
		usage(stderr);
		return SL_CAT_USAGE;
	}
	kmsd_config_defaults(&cfg);
	cfg.dev = dev;
	if (config != NULL)
		rc = kmsd_config_load(&cfg, config);
	if (rc == SL_OK && state != NULL)
		rc = set_str(&cfg.state_dir, state);
	if (rc == SL_OK && listen != NULL)
		rc = set_str(&cfg.listen, listen);
	if (rc == SL_OK && policy != NULL)
		rc = set_str(&cfg.policy, policy);
	if (rc == SL_OK && pubkey != NULL)
		rc = set_str(&cfg.policy_pubkey, pubkey);
	if (rc == SL_OK && dev)
		rc = kmsd_config_dev(&cfg);
	if (rc == SL_OK)
		rc = kmsd_config_check(&cfg);
	if (rc == SL_OK)
		rc = run(&cfg);
	kmsd_config_free(&cfg);
	if (rc != SL_OK) {
		fprintf(stderr, "seclaunchd: error: %s\n",
		        sl_err_detail()[0] ? sl_err_detail() : sl_err_message(rc));
		return sl_err_exit_code(rc);
	}
	return 0;
}
