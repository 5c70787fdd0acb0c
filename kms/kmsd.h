/* seclaunchd internals shared by every folder of kms/ (docs/architecture.md,
 * kms/): the configuration, the daemon log, the id rules. docs/seclaunchd.md
 * describes the configuration, docs/protocol.md the wire protocol. */
#ifndef SECLAUNCH_KMSD_H
#define SECLAUNCH_KMSD_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "seclaunch/claims.h"
#include "seclaunch/error.h"
#include "seclaunch/kms.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

/* ---- configuration (config.c) ----------------------------------------- */

enum kmsd_backend { KMSD_KEK_LOCAL, KMSD_KEK_PKCS11, KMSD_KEK_AWS };

typedef struct kmsd_config {
	bool dev;
	char *state_dir; /* --dev only */
	char *listen;    /* "HOST:PORT" */
	char *tls_cert;  /* PEM files */
	char *tls_key;
	char *admin_token_file; /* scope admin: everything */
	char *wrap_token_file;  /* optional scope tokens (docs/seclaunchd.md, Tokens) */
	char *operate_token_file;
	char *metrics_token_file;
	char *store;             /* state store: SQLite path or postgresql:// URI (store.h) */
	char *registry_file;     /* before the store: read by seclaunchd migrate only */
	char *registry_key_file; /* HMAC key that protects the AK rows */
	char *audit_log;
	char *audit_key_file; /* Ed25519 checkpoint key (audit.h); NULL: no checkpoints */
	char *ek_ca_dir;      /* EK certificates must chain to a CA here */
	bool accept_ek_without_cert;
	char *policy; /* signed policy (policy.h) */
	char *policy_pubkey;
	char *gcp_jwks; /* identity documents (identity.h) */
	char *aws_trust_dir;
	char *ak_ca_dir;      /* optional: AKs with a certificate chaining here count as trusted */
	char *collateral_dir; /* optional: SEV-SNP / TDX vendor certificates, TCB info, CRLs */
	char *url_file;       /* where the URL is written once listening */
	char *log_file;       /* daemon log; NULL: stderr (reopened on SIGHUP) */
	/* limits */
	unsigned threads;    /* libmicrohttpd's connection threads */
	unsigned workers;    /* request handler threads */
	unsigned store_pool; /* state store connections per process (0: twice the CPUs) */
	size_t max_body;
	unsigned max_connections;
	unsigned idle_timeout_s;
	size_t max_challenges;
	unsigned challenge_ttl_s;
	unsigned refusal_rate_per_min; /* refused releases per source and minute; 0: no limit */
	unsigned audit_aggregate_s;    /* window for summarising cheap refusals; 0: each in full */
	unsigned
	    audit_checkpoint_s; /* a signed checkpoint at most this long after a record; 0: off */
	unsigned enroll_rate_per_min; /* /v1/enroll requests per source and minute; 0: no limit */
	/* KEK backend */
	enum kmsd_backend backend;
	char *keystore_file;
	char *master_key_file;
	char *p11_module;
	char *p11_token_label;
	char *p11_pin_file;
	char *aws_region;       /* kek_backend "aws-kms" (kek_aws.c) */
	char *aws_kms_endpoint; /* NULL: https://kms.REGION.amazonaws.com */
	char *aws_metadata_url; /* NULL: http://169.254.169.254 (IMDSv2) */
} kmsd_config;

/* A DEK sealed to a client's ephemeral key (crypto_box_seal): what a release
 * hands out, and the only form a DEK takes between the key process and the
 * network process. */
#define KMSD_SEALED_LEN (SL_KMS_DEK_LEN + 48) /* crypto_box_SEALBYTES */
/* The second byte of a DEK wrapped by AWS KMS (kms/keys/kek_aws.c):
 * kek_version || KMSD_AWS_MARKER || CiphertextBlob; the parsers know it. */
#define KMSD_AWS_MARKER 0xA5

/* Key ids: [A-Za-z0-9._-]{1,128}; dataset ids: 1..255 bytes, no control characters. */
bool kmsd_valid_key_id(const char *s);
bool kmsd_valid_dataset_id(const char *s);

/* ---- daemon log (log.c) ------------------------------------------------ */

/* syslog priorities (the journal's <N> prefixes) */
enum kmsd_log_level {
	KMSD_LOG_ERR = 3,
	KMSD_LOG_WARNING = 4,
	KMSD_LOG_NOTICE = 5,
	KMSD_LOG_INFO = 6
};
/* path NULL: stderr. */
SL_MUST_USE sl_err kmsd_log_open(const char *path);
/* Opens the log file again (after logrotate moved it); stderr: nothing. */
SL_MUST_USE sl_err kmsd_log_reopen(void);
const char *kmsd_log_path(void);
void kmsd_log_close(void);
void kmsd_log(enum kmsd_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define KMSD_AUDIT_EV_RELOAD "kms.reload"   /* SIGHUP: "applied" or "refused" (details.error) */
#define KMSD_AUDIT_EV_AK_LIST "kms.ak.list" /* written only when refused */
#define KMSD_AUDIT_EV_METRICS "kms.metrics" /* written only when refused */

#endif
