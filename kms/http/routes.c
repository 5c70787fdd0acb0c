/* Request routing: method and path to a handler (pure dispatch: the server
 * and the fuzz target call it). The helpers the handlers share are
 * responses.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "seclaunch/json.h"
#include "seclaunch/audit.h"
#include "seclaunch/policy.h"

static bool is(const kmsd_request *req, const char *method, const char *path)
{
	return strcmp(req->path, path) == 0 && strcmp(req->method, method) == 0;
}

static void not_allowed(kmsd_response *res, const char *allow)
{
	char d[64];
	snprintf(d, sizeof(d), "use %s", allow);
	kmsd_problem(res, 405, "method-not-allowed", "Method Not Allowed", d, NULL);
	json_object_set_new(res->json, "allow", json_string(allow));
}

/* /v1/keys/{id}[/{action}] (the key lifecycle, handlers_keys.c) */
static enum kmsd_route key_route(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res,
                                 const char *rest)
{
	char id[SL_KMS_ID_MAX + 1], action[16];
	const char *slash = strchr(rest, '/');
	size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
	if (n == 0 || n > SL_KMS_ID_MAX ||
	    (slash && (strlen(slash + 1) == 0 || strlen(slash + 1) >= sizeof(action) ||
	               strchr(slash + 1, '/') != NULL))) {
		kmsd_problem(res, 404, "not-found", "Not Found", "no such key endpoint", NULL);
		return KMSD_R_KEYS;
	}
	memcpy(id, rest, n);
	id[n] = '\0';
	if (slash)
		snprintf(action, sizeof(action), "%s", slash + 1);
	kmsd_handle_key_admin(ctx, req, id, slash ? action : NULL, res);
	return KMSD_R_KEYS;
}

enum kmsd_route kmsd_dispatch(kmsd_ctx *ctx, const kmsd_request *req, kmsd_response *res)
{
	static const char keys_prefix[] = "/v1/keys/";
	static const char wrap_suffix[] = "/wrap";
	static const struct {
		const char *method, *path;
		enum kmsd_route route;
		void (*fn)(kmsd_ctx *, const kmsd_request *, kmsd_response *);
	} table[] = {
	    {"POST", "/v1/challenge", KMSD_R_CHALLENGE, kmsd_handle_challenge},
	    {"POST", "/v1/release", KMSD_R_RELEASE, kmsd_handle_release},
	    {"POST", "/v1/output", KMSD_R_OUTPUT, kmsd_handle_output},
	    {"POST", "/v1/enroll", KMSD_R_ENROLL, kmsd_handle_enroll},
	    {"POST", "/v1/enroll/activate", KMSD_R_ACTIVATE, kmsd_handle_activate},
	    {"POST", "/v1/enroll/tokens", KMSD_R_ENROLL, kmsd_handle_enroll_token},
	    {"POST", "/v1/keys", KMSD_R_KEYS, kmsd_handle_key_create},
	    {"POST", "/v1/renew", KMSD_R_RENEW, kmsd_handle_renew},
	    {"GET", "/v1/aks", KMSD_R_AKS, kmsd_handle_aks_list},
	    {"POST", "/v1/aks/revoke", KMSD_R_AKS, kmsd_handle_aks_revoke},
	    {"POST", "/v1/eks/readmit", KMSD_R_AKS, kmsd_handle_eks_readmit},
	    {"GET", "/v1/health", KMSD_R_HEALTH, kmsd_handle_health},
	    {"GET", "/metrics", KMSD_R_METRICS, kmsd_handle_metrics},
	};
	size_t plen = strlen(req->path);
	/* summaries of closed windows go out with the next request of any kind */
	kmsd_flush_refusals(ctx, false);
	if (strcmp(req->path, "/v1/keys") == 0 && strcmp(req->method, "GET") == 0) {
		kmsd_handle_key_admin(ctx, req, NULL, NULL, res);
		return KMSD_R_KEYS;
	}
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (is(req, table[i].method, table[i].path)) {
			table[i].fn(ctx, req, res);
			return table[i].route;
		}
		if (strcmp(req->path, table[i].path) == 0) {
			not_allowed(res, table[i].method);
			return table[i].route;
		}
	}
	if (strncmp(req->path, keys_prefix, sizeof(keys_prefix) - 1) == 0 &&
	    plen > sizeof(keys_prefix) - 1 + sizeof(wrap_suffix) - 1 &&
	    strcmp(req->path + plen - (sizeof(wrap_suffix) - 1), wrap_suffix) == 0) {
		char id[SL_KMS_ID_MAX + 1];
		size_t n = plen - (sizeof(keys_prefix) - 1) - (sizeof(wrap_suffix) - 1);
		if (strcmp(req->method, "POST") != 0) {
			not_allowed(res, "POST");
			return KMSD_R_WRAP;
		}
		/* a key id too long is not valid: the handler authenticates, then refuses it */
		if (n > SL_KMS_ID_MAX)
			n = 0;
		memcpy(id, req->path + sizeof(keys_prefix) - 1, n);
		id[n] = '\0';
		kmsd_handle_wrap(ctx, req, id, res);
		return KMSD_R_WRAP;
	}
	if (strncmp(req->path, keys_prefix, sizeof(keys_prefix) - 1) == 0)
		return key_route(ctx, req, res, req->path + sizeof(keys_prefix) - 1);
	kmsd_problem(res, 404, "not-found", "Not Found", "no such endpoint (see docs/protocol.md)",
	             NULL);
	return KMSD_R_OTHER;
}
