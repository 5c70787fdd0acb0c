/* KMS paths of the data owner's commands (encrypt / decrypt --kms). */
#ifndef SECLAUNCH_LAUNCHER_KMS_CLI_H
#define SECLAUNCH_LAUNCHER_KMS_CLI_H

#include "seclaunch/kms_client.h"
#include "seclaunch/sld.h"

/* encrypt --kms: a fresh DEK made here (secret memory), wrapped by
 * seclaunchd under key_id for dataset_id. ca NULL: $SECLAUNCH_KMS_CA. */
SL_MUST_USE sl_err sl_kms_cli_new_dek(const char *url, const char *ca, const char *token_file,
                                      const char *key_id, const char *dataset_id, sl_secret **dek,
                                      uint8_t wrapped[static SL_KMS_WRAPPED_DEK_LEN]);

/* decrypt --kms: challenge -> evidence bound to (nonce, eph_pub, policy
 * digest) -> release of the header's wrapped DEK -> opened in secret memory. */
SL_MUST_USE sl_err sl_kms_cli_release_dek(const char *url, const char *ca, const sl_sld_header *h,
                                          sl_secret **dek);

#endif
