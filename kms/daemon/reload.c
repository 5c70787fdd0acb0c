/* The live configuration and policy, and SIGHUP.
 *
 * What a request sees (the policy and the reloadable configuration keys) is
 * one generation: a config and the policy verified under it, reference
 * counted. A request takes the current generation when its handler starts
 * and keeps it to the end, so a reload never changes the policy in the middle
 * of a decision, and the decision, its audit record and the challenge's
 * policy_digest all name the same policy. A reload builds the whole next
 * generation aside (config file, command-line options, policy signature and
 * validation) and swaps it in only when all of it is good; otherwise the old
 * generation stays in force and the daemon log and an audit record say why.
 *
 * Keys that need a restart (what the listening socket, TLS, the KEK backend,
 * the audit log, the registry and the thread and connection tables were
 * built from) keep the value seclaunchd started with; a changed one is named
 * in a warning. docs/seclaunchd.md lists both sets. */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "seclaunch/audit.h"
#include "seclaunch/policy.h"

struct kmsd_gen {
	kmsd_config *cfg; /* owned unless it is the start-up config */
	bool owns_cfg;
	sl_policy *policy; /* owned */
	unsigned refs;     /* under g_mu; the current generation holds one */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static kmsd_gen *g_cur;
static const kmsd_config *g_start; /* the start-up config (restart-only keys) */
static kmsd_start_opts g_opts;

static void gen_free(kmsd_gen *g)
{
	if (g == NULL)
		return;
	sl_policy_free(g->policy);
	if (g->owns_cfg) {
		kmsd_config_free(g->cfg);
		free(g->cfg);
	}
	free(g);
}

sl_err kmsd_config_build(const kmsd_start_opts *o, kmsd_config *c)
{
	sl_err rc = SL_OK;
	struct {
		char **dst;
		const char *v;
	} over[] = {{&c->state_dir, o->state},
	            {&c->listen, o->listen},
	            {&c->policy, o->policy},
	            {&c->policy_pubkey, o->pubkey},
	            {&c->log_file, o->log_file}};
	kmsd_config_defaults(c);
	c->dev = o->dev;
	if (o->config != NULL)
		SL_GUARD(kmsd_config_load(c, o->config));
	for (size_t i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
		if (over[i].v == NULL)
			continue;
		free(*over[i].dst);
		*over[i].dst = strdup(over[i].v);
		SL_ENSURE(*over[i].dst != NULL, SL_E_NOMEM, "options");
	}
	if (o->dev)
		SL_GUARD(kmsd_config_dev(c));
	SL_GUARD(kmsd_config_check(c));
out:
	return rc;
}

sl_err kmsd_policy_load(const kmsd_config *c, sl_policy **out)
{
	sl_err rc;
	if (c->policy != NULL) {
		rc = sl_policy_load_signed(c->policy, NULL, c->policy_pubkey, out);
		if (rc == SL_OK && !c->dev && sl_policy_is_dev(*out)) {
			sl_policy_free(*out);
			*out = NULL;
			return sl_err_set(
			    SL_E_INPUT,
			    "%s: the built-in development policy (it releases any key); "
			    "only seclaunchd --dev takes it",
			    c->policy);
		}
		return rc;
	}
	if (!c->dev)
		return sl_err_set(
		    SL_E_INPUT,
		    "config: \"policy\" and \"policy_pubkey\" are required outside --dev");
	/* the development policy, signed, in the state directory: what clients
	 * bind to stays the same across restarts and reloads */
	return kmsd_devpolicy(c->state_dir, out);
}

sl_err kmsd_live_start(kmsd_ctx *ctx, const kmsd_config *start, const kmsd_start_opts *o)
{
	kmsd_gen *g = calloc(1, sizeof(*g));
	if (g == NULL)
		return sl_err_set(SL_E_NOMEM, "live configuration");
	g->cfg = (kmsd_config *)start;
	g->owns_cfg = false;
	g->policy = ctx->policy;
	g->refs = 1;
	ctx->policy = NULL; /* the generation owns it now */
	pthread_mutex_lock(&g_mu);
	g_cur = g;
	g_start = start;
	g_opts = *o;
	pthread_mutex_unlock(&g_mu);
	return SL_OK;
}

/* req = base with the current generation's config and policy, held until
 * kmsd_live_leave. */
static kmsd_gen *kmsd_live_enter(const kmsd_ctx *base, kmsd_ctx *req)
{
	kmsd_gen *g;
	*req = *base;
	pthread_mutex_lock(&g_mu);
	g = g_cur;
	if (g != NULL)
		g->refs++;
	pthread_mutex_unlock(&g_mu);
	if (g != NULL) {
		req->cfg = g->cfg;
		req->policy = g->policy;
	}
	return g;
}

static void kmsd_live_leave(kmsd_gen *g)
{
	bool last;
	if (g == NULL)
		return;
	pthread_mutex_lock(&g_mu);
	last = --g->refs == 0;
	pthread_mutex_unlock(&g_mu);
	if (last)
		gen_free(g);
}

void kmsd_live_stop(void)
{
	kmsd_gen *g;
	pthread_mutex_lock(&g_mu);
	g = g_cur;
	g_cur = NULL;
	pthread_mutex_unlock(&g_mu);
	kmsd_live_leave(g);
}

static bool str_differs(const char *a, const char *b)
{
	return (a == NULL) != (b == NULL) || (a != NULL && strcmp(a, b) != 0);
}

/* A restart-only string key: the start-up value back into c, with a warning
 * when the new configuration changed it. */
static SL_RESULT keep_str(kmsd_config *c, const kmsd_config *s, const struct kmsd_setting *k)
{
	char **dst = (char **)((char *)c + k->off);
	char *const *was = (char *const *)((const char *)s + k->off);
	if (!str_differs(*dst, *was))
		return SL_OK;
	kmsd_log(KMSD_LOG_WARNING,
	         "reload: \"%s\" changed; it takes effect only after a restart (still %s)", k->name,
	         *was != NULL ? *was : "unset");
	free(*dst);
	*dst = NULL;
	if (*was != NULL && (*dst = strdup(*was)) == NULL)
		return sl_err_set(SL_E_NOMEM, "reload");
	return SL_OK;
}

/* Puts the start-up value of every restart-only key into c, warning about
 * each one the new configuration changes: the strings, then the others. */
static SL_RESULT keep_restart_keys(kmsd_config *c, const kmsd_config *s)
{
	for (size_t i = 0; i < kmsd_nsettings; i++) {
		const struct kmsd_setting *k = &kmsd_settings[i];
		if ((k->flags & KMSD_SET_RESTART) && k->kind == KMSD_SET_STR) {
			sl_err rc = keep_str(c, s, k);
			if (rc != SL_OK)
				return rc;
		}
	}
	for (size_t i = 0; i < kmsd_nsettings; i++) {
		const struct kmsd_setting *k = &kmsd_settings[i];
		if (!(k->flags & KMSD_SET_RESTART) || k->kind == KMSD_SET_STR)
			continue;
		unsigned long long was = kmsd_setting_num(s, k);
		if (kmsd_setting_num(c, k) != was)
			kmsd_log(KMSD_LOG_WARNING,
			         "reload: \"%s\" changed; it takes effect only after a restart "
			         "(still %llu)",
			         k->name, was);
		memcpy((char *)c + k->off, (const char *)s + k->off, k->size);
	}
	c->dev = s->dev;
	return SL_OK;
}

/* SIGHUP: reopen the log; rebuild config + policy and swap them in whole, or
 * keep the old ones and say why (log + audit record). Never stops the service. */
static void kmsd_reload(kmsd_ctx *ctx)
{
	kmsd_config *c = calloc(1, sizeof(*c));
	kmsd_gen *g = NULL, *old = NULL, *cur;
	kmsd_ctx rc_ctx;
	sl_policy *p = NULL;
	char why[512] = "out of memory";
	bool log_ok;
	char old_digest[2 * SL_POLICY_DIGEST_LEN + 1];

	/* the log file first: logrotate's HUP must work whatever else fails */
	log_ok = kmsd_log_reopen() == SL_OK;
	if (!log_ok)
		kmsd_log(KMSD_LOG_ERR, "reload: %s", sl_err_detail());
	kmsd_log(KMSD_LOG_NOTICE, "SIGHUP: reloading %s",
	         g_opts.config != NULL   ? g_opts.config
	         : g_opts.policy != NULL ? g_opts.policy
	                                 : "the development configuration");
	if (c == NULL)
		goto refused;
	if (kmsd_config_build(&g_opts, c) != SL_OK || keep_restart_keys(c, g_start) != SL_OK ||
	    kmsd_policy_load(c, &p) != SL_OK) {
		snprintf(why, sizeof(why), "%s", sl_err_detail()[0] ? sl_err_detail() : "failed");
		goto refused;
	}
	/* a new log file, or back to stderr */
	if (str_differs(c->log_file, kmsd_log_path()) && kmsd_log_open(c->log_file) != SL_OK) {
		snprintf(why, sizeof(why), "%s", sl_err_detail());
		goto refused;
	}
	g = calloc(1, sizeof(*g));
	if (g == NULL)
		goto refused;
	g->cfg = c;
	g->owns_cfg = true;
	g->policy = p;
	g->refs = 1;
	c = NULL;
	p = NULL;
	pthread_mutex_lock(&g_mu);
	old = g_cur;
	g_cur = g;
	pthread_mutex_unlock(&g_mu);
	snprintf(old_digest, sizeof(old_digest), "%s",
	         old != NULL ? sl_policy_digest_hex(old->policy) : "none");
	kmsd_server_set_limits(g->cfg);
	kmsd_log(KMSD_LOG_NOTICE, "reload: policy %s in force (was %s)%s",
	         sl_policy_digest_hex(g->policy), old_digest,
	         sl_policy_is_dev(g->policy) ? " (development policy)"
	         : sl_policy_allow_unverified_region(g->policy)
	             ? " (allow_unverified_region: a region claim no signed identity document "
	               "verified counts; development only)"
	             : "");
	cur = kmsd_live_enter(ctx, &rc_ctx);
	kmsd_audit(
	    &rc_ctx, KMSD_AUDIT_EV_RELOAD, NULL, NULL, "applied", NULL, NULL,
	    json_pack("{s:s, s:s}", "previous_policy_digest", old_digest, "signal", "SIGHUP"));
	kmsd_live_leave(cur);
	kmsd_live_leave(old);
	return;
refused:
	kmsd_log(KMSD_LOG_ERR,
	         "reload refused, the previous configuration and policy stay in force: %s", why);
	cur = kmsd_live_enter(ctx, &rc_ctx);
	kmsd_audit(&rc_ctx, KMSD_AUDIT_EV_RELOAD, NULL, NULL, "refused", NULL, NULL,
	           json_pack("{s:s, s:s?, s:s}", "error", why, "config", g_opts.config,
	                     "policy_digest_in_force",
	                     rc_ctx.policy != NULL ? sl_policy_digest_hex(rc_ctx.policy) : "none"));
	kmsd_live_leave(cur);
	sl_policy_free(p);
	if (c != NULL) {
		kmsd_config_free(c);
		free(c);
	}
}

const kmsd_live_ops kmsd_live = {
    .enter = kmsd_live_enter, .leave = kmsd_live_leave, .reload = kmsd_reload};
