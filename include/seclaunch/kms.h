/* KMS protocol v1 constants shared by seclaunchd (kms/) and its client
 * (seclaunch/kms_client.h): sizes and identifier limits (docs/protocol.md). */
#ifndef SECLAUNCH_KMS_H
#define SECLAUNCH_KMS_H

#define SL_KMS_EPH_SK_LEN 32 /* X25519 secret key */
/* Wrapped DEK as seclaunchd returns it: version byte, 12-byte IV, 32-byte
 * ciphertext, 16-byte tag (docs/protocol.md, "Wrapping"). */
#define SL_KMS_WRAPPED_DEK_LEN 61
/* Any wrapped DEK, whichever KEK backend made it: the AWS KMS backend's
 * carry AWS's ciphertext blob (docs/protocol.md, "Wrapping"); the .sld
 * header's bound. */
#define SL_KMS_WRAPPED_DEK_MAX 1024
#define SL_KMS_DEK_LEN 32
#define SL_KMS_ID_MAX 128         /* key ids: 1..128 of [A-Za-z0-9._-] */
#define SL_KMS_DATASET_ID_MAX 255 /* dataset ids: 1..255 bytes of UTF-8, no control characters */

#endif
