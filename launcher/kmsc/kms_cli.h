/* KMS paths of the data owner's commands (encrypt / decrypt --kms). */
#ifndef SECLAUNCH_LAUNCHER_KMS_CLI_H
#define SECLAUNCH_LAUNCHER_KMS_CLI_H

#include "../cli/region_id.h"
#include "seclaunch/kms_client.h"
#include "seclaunch/sld.h"

/* encrypt / decrypt: the key comes from exactly one of --key-file and --kms
 * (either may be NULL). 0 or the usage exit code (cmd names the message). */
int sl_kms_cli_key_source(const char *cmd, const char *key_file, const char *kms);

/* encrypt --kms: a fresh DEK made here (secret memory), wrapped by
 * seclaunchd under key_id for dataset_id. ko names the KMS (url, CA, pin,
 * admin token file). */
SL_MUST_USE sl_err sl_kms_cli_new_dek(const sl_kms_opts *ko, const char *key_id,
                                      const char *dataset_id, sl_secret **dek,
                                      uint8_t wrapped[static SL_KMS_WRAPPED_DEK_MAX],
                                      size_t *wrapped_len);

/* decrypt --kms: challenge -> evidence (TPM at tcti; NULL: default) and the
 * region identity rid names, both bound to (nonce, eph_pub, policy digest)
 * -> release of the header's wrapped DEK -> opened in secret memory. */
SL_MUST_USE sl_err sl_kms_cli_release_dek(const sl_kms_opts *ko, const char *tcti,
                                          const struct sl_region_id *rid, const sl_sld_header *h,
                                          sl_secret **dek);

/* The same for a key reference given field by field (a sharded dataset's
 * manifest). */
SL_MUST_USE sl_err sl_kms_cli_release_ref(const sl_kms_opts *ko, const char *tcti,
                                          const struct sl_region_id *rid, const sl_kms_key_req *ref,
                                          sl_secret **dek);

#endif
