/* AWS credentials (core/aws_creds.c): the one reader of the standard
 * credential chain, for the launcher's S3 sources and seclaunchd's AWS KMS
 * backend. In order: the environment (AWS_ACCESS_KEY_ID /
 * AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN), the shared credentials file
 * (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, profile AWS_PROFILE or
 * "default"; read as a key file is: a file that group or others may read is
 * refused, SL_E_PERM), then the instance metadata service (IMDSv2: a session
 * token by PUT, then the role's credentials by GET with it). */
#ifndef SECLAUNCH_AWS_H
#define SECLAUNCH_AWS_H

#include <stddef.h>
#include <stdint.h>

#include "seclaunch/error.h"

/* Each a NUL-free string or NULL; wiped and freed by sl_aws_creds_wipe. */
typedef struct sl_aws_creds {
	char *id, *secret, *token;
} sl_aws_creds;
void sl_aws_creds_wipe(sl_aws_creds *c);

/* The shared credentials file's text (len bytes): the key = value lines of
 * section [profile]. Keys not found stay NULL. */
SL_MUST_USE sl_err sl_aws_parse_creds_file(const char *text, size_t len, const char *profile,
                                           sl_aws_creds *c);
/* The instance metadata service's credentials JSON: AccessKeyId,
 * SecretAccessKey and optional Token (SL_E_REMOTE_UNREACHABLE otherwise). */
SL_MUST_USE sl_err sl_aws_parse_imds(const uint8_t *json, size_t len, sl_aws_creds *c);

/* The shared credentials file; a file that is not there leaves c empty. */
SL_MUST_USE sl_err sl_aws_creds_file(sl_aws_creds *c);

/* The IMDSv2 token request: PUT base/latest/api/token with this header.
 * (Exposed so a unit test can check the request's shape.) */
#define SL_AWS_IMDS_TOKEN_PATH "/latest/api/token"
#define SL_AWS_IMDS_TOKEN_TTL_HEADER "X-aws-ec2-metadata-token-ttl-seconds: 300"
#define SL_AWS_IMDS_ROLE_PATH "/latest/meta-data/iam/security-credentials/"

/* The whole chain; SL_E_REMOTE_REFUSED naming every source when none gave
 * credentials (a credentials file that is unsafe or malformed: its error). */
SL_MUST_USE sl_err sl_aws_creds_chain(const char *imds_base, sl_aws_creds *c);

#endif
