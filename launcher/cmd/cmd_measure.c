/* seclaunch measure: the job identity before a job ever runs, and the
 * replay of a workload log in evidence (docs/claims.md, "Workload
 * identity").
 *   measure --predict --policy P [--env K=V] [--env-pass K] [--image-digest D]
 *           [--workload-pcr N] [DATA...] -- CMD [ARG...]
 *   measure --verify EVIDENCE.json [--nonce HEX | --no-binding] [--ak-pin PEM]
 *           [--trust DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "../job/job.h"
#include "seclaunch/attest.h"
#include "seclaunch/json.h"
#include "seclaunch/policy.h"
#include "seclaunch/util.h"
#include "seclaunch/workload.h"
#include "../outputs/outputs.h"
#include "../run/workload_int.h"

static void usage(FILE *f)
{
	fprintf(
	    f, "Usage: seclaunch measure --predict --policy P [options] [DATA...] -- CMD [ARG...]\n"
	       "       seclaunch measure --verify EVIDENCE.json [--nonce HEX | --no-binding]\n"
	       "                         [--ak-pin PEM | --trust DIR]\n\n"
	       "--predict prints the identity `seclaunch run` with the same job arguments\n"
	       "would measure: the identity digest (what a policy's workloads.identity lists),\n"
	       "the canonical event, its SHA-256, the value a fresh PCR reaches with it, and\n"
	       "the script an interpreter will read (python, sh/bash/dash, perl, ruby, node,\n"
	       "zsh, ksh, Rscript: found by the interpreter's option grammar; \"unknown\" where\n"
	       "that cannot be told: -c, -m, -e, stdin, an option or a variable such as\n"
	       "PYTHONPATH it does not know; a policy entry that pins script_sha256 denies it).\n"
	       "Nothing is run, nothing is extended.\n"
	       "--verify checks the evidence and replays its workload log against the quoted\n"
	       "register, printing every event; a log that does not replay is exit 3.\n\n"
	       "  --policy P            the policy the job will run under (its digest is in the\n"
	       "                        event; the identity digest leaves it out)\n"
	       "  --policy-pubkey K     verify P's minisign signature first\n"
	       "  --env K=V, --env-pass K, --clean-env, --user USER   as for run\n"
	       "  --image-digest D      the container image (sha256:HEX)\n"
	       "  --output NAME=DEST    an output as for run (its destination is in the event)\n"
	       "  --workload-pcr N      the PCR run extends (default 15)\n"
	       "  --nonce HEX           --verify: the binding the evidence must carry\n"
	       "  --no-binding          --verify: check signature and log only\n"
	       "  --ak-pin PEM, --trust DIR   --verify: trust in the TPM's AK\n"
	       "  --json                the result as JSON\n\n"
	       "Exit codes: 0 ok, 1 usage, 2 input, 3 the evidence or its log did not verify.\n");
}

enum {
	O_PREDICT = 256,
	O_VERIFY,
	O_POLICY,
	O_POLICY_PUB,
	O_ENV,
	O_ENV_PASS,
	O_USER,
	O_IMAGE,
	O_PCR,
	O_NONCE,
	O_NOBIND,
	O_PIN,
	O_TRUST,
	O_CLEAN_ENV,
	O_OUTPUT
};

static const struct sl_cli_opt opts[] = {
    {"predict", no_argument, O_PREDICT, NULL},
    {"verify", required_argument, O_VERIFY, NULL},
    {"policy", required_argument, O_POLICY, NULL},
    {"policy-pubkey", required_argument, O_POLICY_PUB, NULL},
    {"env", required_argument, O_ENV, NULL},
    {"env-pass", required_argument, O_ENV_PASS, NULL},
    {"user", required_argument, O_USER, NULL},
    {"image-digest", required_argument, O_IMAGE, NULL},
    {"workload-pcr", required_argument, O_PCR, NULL},
    {"nonce", required_argument, O_NONCE, NULL},
    {"no-binding", no_argument, O_NOBIND, NULL},
    {"ak-pin", required_argument, O_PIN, NULL},
    {"trust", required_argument, O_TRUST, NULL},
    {"clean-env", no_argument, O_CLEAN_ENV, NULL},
    {"output", required_argument, O_OUTPUT, NULL},
    {NULL, 0, 0, NULL},
};

struct mctx {
	bool predict;
	const char *verify, *policy, *pub, *user, *image, *nonce, *pin, *trust;
	bool nobind;
	unsigned pcr;
	sl_job_env *env;
	const char *outputs[SL_OUT_MAX]; /* --output NAME=DEST, as for run */
	size_t noutputs;
	char **args;
	int nargs;
	sl_err env_rc;
};

static int on_option(void *c, int key, char *arg)
{
	struct mctx *m = c;
	sl_err rc = SL_OK;
	switch (key) {
	case O_PREDICT:
		m->predict = true;
		break;
	case O_VERIFY:
		m->verify = arg;
		break;
	case O_POLICY:
		m->policy = arg;
		break;
	case O_POLICY_PUB:
		m->pub = arg;
		break;
	case O_ENV:
		rc = sl_job_env_set(m->env, arg);
		break;
	case O_ENV_PASS:
		rc = sl_job_env_pass(m->env, arg);
		break;
	case O_USER:
		m->user = arg;
		break;
	case O_IMAGE:
		m->image = arg;
		break;
	case O_PCR: {
		char *end = NULL;
		unsigned long v = strtoul(arg, &end, 10);
		if (arg[0] < '0' || arg[0] > '9' || *end != '\0' || v > 15)
			return sl_cli_usage("measure", "--workload-pcr: '%s' is not 0..15", arg);
		m->pcr = (unsigned)v;
		break;
	}
	case O_NONCE:
		m->nonce = arg;
		break;
	case O_NOBIND:
		m->nobind = true;
		break;
	case O_PIN:
		m->pin = arg;
		break;
	case O_TRUST:
		m->trust = arg;
		break;
	case O_OUTPUT:
		if (m->noutputs == SL_OUT_MAX)
			return sl_cli_usage("measure", "--output: at most %d", SL_OUT_MAX);
		if (strchr(arg, '=') == NULL || arg[0] == '=')
			return sl_cli_usage("measure", "--output %s: NAME=DEST", arg);
		m->outputs[m->noutputs++] = arg;
		break;
	case O_CLEAN_ENV:
		sl_job_env_clean(m->env);
		break;
	default:
		return sl_cli_usage("measure", "unknown option");
	}
	return rc == SL_OK ? 0 : sl_cli_usage("measure", "%s", sl_err_detail());
}

static int on_args(void *c, int argc, char **argv)
{
	((struct mctx *)c)->args = argv;
	((struct mctx *)c)->nargs = argc;
	return 0;
}

static const struct sl_cli_spec spec = {
    .name = "measure",
    .shared = SL_SH_QUIET | SL_SH_JSON,
    .opts = opts,
    .help = usage,
    .on_option = on_option,
    .on_args = on_args,
};

static int predict(struct mctx *m, char **cmd)
{
	extern char **environ;
	sl_err rc = SL_E_INTERNAL;
	sl_policy *pol = NULL;
	json_t *ds = json_array(), *outs = json_array();
	char **envp = NULL, exe[4096], id[65], ed[65], pv[65], *text = NULL;
	sl_job_user u;
	sl_wl w;
	uint8_t fresh[32];
	int code;

	memset(&u, 0, sizeof(u));
	sl_wl_init(&w);
	SL_ENSURE(ds != NULL, SL_E_NOMEM, "datasets");
	if (m->pub != NULL) {
		SL_GUARD(sl_policy_load_signed(m->policy, NULL, m->pub, &pol));
	} else {
		uint8_t *buf = NULL;
		size_t len = 0;
		SL_GUARD(sl_file_read(m->policy, SL_POLICY_MAX_BYTES, &buf, &len));
		rc = sl_policy_load(buf, len, &pol);
		free(buf);
		SL_GUARD(rc);
	}
	for (int i = 0; i < m->nargs; i++)
		SL_GUARD(sl_wl_dataset_entry(m->args[i], ds));
	SL_ENSURE(outs != NULL, SL_E_NOMEM, "outputs");
	SL_GUARD(sl_wl_output_entries(m->outputs, m->noutputs, outs));
	if (m->user != NULL) {
		SL_GUARD(sl_job_user_parse(m->user, &u));
		if (u.set)
			SL_GUARD(sl_job_env_user(m->env, u.name, u.home));
	}
	SL_GUARD(sl_job_env_build(m->env, environ, NULL, &envp));
	code = sl_job_resolve(cmd[0], envp, &u, exe, sizeof(exe));
	SL_ENSURE(code == 0, SL_E_INPUT, "%s", sl_err_detail());
	sl_wl_in in = {.argv = cmd,
	               .exe = exe,
	               .envp = envp,
	               .image_digest = m->image,
	               .datasets = ds,
	               .outputs = outs,
	               .policy_hex = sl_policy_digest_hex(pol)};
	SL_GUARD(sl_wl_build(&in, &w));
	SL_GUARD(sl_workload_canonical(w.event, &text));
	sl_hex_encode(w.identity, 32, id);
	sl_hex_encode(w.event_digest, 32, ed);
	sl_wl_predict_pcr(&w, fresh);
	char regname[16];
	snprintf(regname, sizeof(regname), "pcr%u", m->pcr);
	sl_hex_encode(fresh, 32, pv);
	if (sl_cli_json) {
		/* "claims": the workload.* claims a verifier would replay, for
		 * `policy explain --claims` (merged with the machine's own) */
		sl_claims *c = NULL;
		json_t *cj = NULL;
		SL_GUARD(sl_claims_new(&c));
		rc = sl_workload_claims(w.event, c);
		if (rc == SL_OK)
			rc = sl_claims_to_json(c, &cj);
		sl_claims_free(c);
		SL_GUARD(rc);
		sl_cli_print_json(json_pack("{s:s, s:O, s:s, s:s, s:s, s:o, s:s}", "identity", id,
		                            "event", w.event, "event_sha256", ed, "register",
		                            regname, "fresh_value", pv, "claims", cj,
		                            "script_unknown", w.script_why));
	} else {
		printf("identity      %s\n", id);
		printf("event_sha256  %s\n", ed);
		printf("pcr%u fresh    %s  (sha256 bank, after this one event)\n", m->pcr, pv);
		const json_t *sc = json_object_get(w.event, "script");
		if (json_is_object(sc))
			printf("script        %s  %s\n", sl_json_getstr(sc, "sha256"),
			       sl_json_getstr(sc, "path"));
		else if (json_is_string(sc))
			printf("script        unknown: %s (a policy entry that pins script_sha256 "
			       "denies this job)\n",
			       w.script_why);
		else
			printf("script        none (not an interpreter seclaunch knows)\n");
		printf("event         %s\n", text);
	}
	rc = SL_OK;
out:
	free(text);
	sl_wl_free(&w);
	sl_strv_free(envp);
	json_decref(ds);
	json_decref(outs);
	sl_policy_free(pol);
	return rc == SL_OK ? 0 : sl_cli_fail("measure", rc);
}

static int verify(struct mctx *m)
{
	sl_err rc = SL_E_INTERNAL;
	json_t *ev = NULL;
	json_error_t je;
	sl_claims *c = NULL;
	uint8_t *nonce = NULL;
	size_t nl = 0;

	ev = json_load_file(m->verify, JSON_REJECT_DUPLICATES, &je);
	SL_ENSURE(json_is_object(ev), SL_E_FORMAT, "%s: %s", m->verify,
	          ev == NULL ? je.text : "not a JSON object");
	SL_ENSURE(json_object_get(ev, "workload_log") != NULL, SL_E_ATTEST,
	          "%s: carries no workload_log", m->verify);
	if (m->nonce != NULL)
		SL_GUARD(sl_hex_decode_alloc(m->nonce, 64, &nonce, &nl, "--nonce"));
	sl_verify_opts vo = {.expect = nonce,
	                     .expect_len = nl,
	                     .no_binding = m->nonce == NULL,
	                     .ak_pin_pem = m->pin,
	                     .trust_dir = m->trust};
	SL_GUARD(sl_claims_new(&c));
	SL_GUARD(sl_evidence_verify(ev, &vo, c));
	const json_t *events = json_object_get(json_object_get(ev, "workload_log"), "events");
	const char *reg = sl_claims_get(c, "workload.register");
	if (sl_cli_json) {
		json_t *cl = NULL;
		SL_GUARD(sl_claims_to_json(c, &cl));
		sl_cli_print_json(json_pack("{s:s, s:O, s:o}", "register", reg ? reg : "", "events",
		                            events, "claims", cl));
	} else {
		size_t i;
		json_t *e;
		uint8_t d[32], idd[32];
		char h[65], hi[65];
		json_array_foreach (events, i, e) {
			SL_GUARD(sl_workload_event_digest(e, d));
			SL_GUARD(sl_workload_identity(e, idd));
			sl_hex_encode(d, 32, h);
			sl_hex_encode(idd, 32, hi);
			char *argv = json_dumps(json_object_get(e, "argv"), JSON_COMPACT);
			printf("[%zu] event %.16s... identity %.16s... exe %.16s... argv %s\n", i,
			       h, hi, sl_json_getstr(json_object_get(e, "exe"), "sha256"),
			       argv ? argv : "?");
			free(argv);
		}
		printf("replays to the quoted %s: ok (%s binding)\n", reg ? reg : "register",
		       m->nonce ? "checked" : "unchecked");
		printf("workload.identity %s\n", sl_claims_get(c, "workload.identity"));
	}
	rc = SL_OK;
out:
	free(nonce);
	sl_claims_free(c);
	json_decref(ev);
	return rc == SL_OK ? 0 : sl_cli_fail("measure", rc);
}

int cmd_measure(int argc, char **argv)
{
	struct mctx m = {.pcr = SL_WORKLOAD_PCR_DEFAULT};
	struct sl_cli_shared sh;
	int dd = sl_cli_dashdash(argc, argv), ret;
	if (sl_job_env_new(&m.env) != SL_OK)
		return sl_cli_fail("measure", SL_E_NOMEM);
	ret = sl_cli_parse(&spec, &m, &sh, dd, argv);
	if (ret < 0) {
		if (m.predict == (m.verify != NULL))
			ret = sl_cli_usage("measure", "give one of --predict or --verify");
		else if (m.verify != NULL)
			ret = m.nargs != 0 || dd < argc
			          ? sl_cli_usage("measure", "--verify takes no other arguments")
			          : verify(&m);
		else if (m.policy == NULL)
			ret = sl_cli_usage("measure", "--predict needs --policy P");
		else if (dd >= argc - 1)
			ret = sl_cli_usage("measure", "no command: end with -- CMD [ARG...]");
		else
			ret = predict(&m, argv + dd + 1);
	}
	sl_job_env_free(m.env);
	return ret;
}
