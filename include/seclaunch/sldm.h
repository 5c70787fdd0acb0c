/* SLDM v1: the manifest of a sharded dataset (docs/format-sld.md, part II).
 *
 * A sharded dataset is a folder: `manifest.sldm` and SLD v1 shards. The
 * manifest lists every shard (name, index, plaintext length, file size,
 * SHA-256 of its SLD header, which every chunk's associated data hashes)
 * and every original file (relative path, mode, size, shard, offset). It is
 * authenticated under the dataset's DEK (key check + HMAC), and the SHA-256
 * of its authenticated bytes is the dataset root: the one digest that names
 * the dataset's whole content in release requests, audit records and claims.
 *
 * The key reference (KMS URL, key id, wrapped DEK) sits after the MAC, so a
 * dataset can be moved to another KEK version or KMS by rewriting the
 * manifest's last bytes only (sl_sldm_rekey): shards and the root stay.
 */
#ifndef SECLAUNCH_SLDM_H
#define SECLAUNCH_SLDM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/crypto.h"
#include "seclaunch/error.h"
#include "seclaunch/secret.h"
#include "seclaunch/sld.h"

#define SL_SLDM_VERSION 1
#define SL_SLDM_NAME "manifest.sldm"
#define SL_SLDM_MAX ((size_t)256 << 20)
#define SL_SLDM_SHARDS_MAX ((uint32_t)1 << 20)
#define SL_SLDM_FILES_MAX ((uint32_t)1 << 24)
#define SL_SLDM_PATH_MAX 4096
#define SL_SLDM_SHARD_NAME_MAX 255
#define SL_SLDM_ROOT_LEN 32

typedef struct sl_sldm sl_sldm;

typedef struct sl_sldm_shard {
	uint32_t index;
	const char *name; /* a plain file name in the dataset folder */
	uint64_t plaintext_len;
	uint64_t file_size;           /* the SLD file's size on disk */
	const uint8_t *header_sha256; /* 32 bytes */
} sl_sldm_shard;

typedef struct sl_sldm_file {
	const char *path; /* relative, '/'-separated, validated by sl_sldm_path_check */
	uint32_t mode;    /* permission bits only (0..0777) */
	uint64_t size;
	uint32_t shard;
	uint64_t offset; /* in the shard's plaintext */
} sl_sldm_file;

/* Parses a whole manifest (structure only; nothing is authenticated yet).
 * A wrong magic is SL_E_FORMAT, another version SL_E_VERSION, a short one
 * SL_E_TRUNCATED, any other damage SL_E_INTEGRITY naming the field, shard
 * or path ("manifest.files[3].path: ..."). */
SL_MUST_USE sl_err sl_sldm_parse(const uint8_t *p, size_t len, sl_sldm **out);
SL_MUST_USE sl_err sl_sldm_read_file(const char *path, sl_sldm **out);
void sl_sldm_free(sl_sldm *m); /* NULL-safe */

/* Checks the key check (SL_E_WRONG_KEY) and the MAC (SL_E_INTEGRITY) with
 * the dataset's DEK. Until this succeeds nothing in the manifest is to be
 * believed but its key reference. */
SL_MUST_USE sl_err sl_sldm_authenticate(const sl_sldm *m, sl_secret *dek);

const char *sl_sldm_dataset_id(const sl_sldm *m);
const char *sl_sldm_kms_url(const sl_sldm *m); /* "" for a local key file */
const char *sl_sldm_key_id(const sl_sldm *m);
const uint8_t *sl_sldm_wrapped_dek(const sl_sldm *m, size_t *len);
sl_aead_id sl_sldm_aead(const sl_sldm *m);
uint32_t sl_sldm_chunk_size(const sl_sldm *m);
uint64_t sl_sldm_sequence(const sl_sldm *m);
uint32_t sl_sldm_shard_count(const sl_sldm *m);
uint32_t sl_sldm_file_count(const sl_sldm *m);
uint64_t sl_sldm_plaintext_len(const sl_sldm *m); /* all shards */
sl_sldm_shard sl_sldm_shard_at(const sl_sldm *m, uint32_t i);
sl_sldm_file sl_sldm_file_at(const sl_sldm *m, uint32_t i);
/* SL_E_INPUT naming the path when no file has it. */
SL_MUST_USE sl_err sl_sldm_find_file(const sl_sldm *m, const char *path, uint32_t *idx);
void sl_sldm_root(const sl_sldm *m, uint8_t out[static SL_SLDM_ROOT_LEN]);
/* The manifest as JSON (seclaunch inspect): everything, the root as hex. */
json_t *sl_sldm_json(const sl_sldm *m);

/* Checks that an opened shard is the one the manifest lists at position i:
 * header digest, dataset id, AEAD, chunk size, plaintext length and file
 * size, and that it carries no key reference of its own. SL_E_INTEGRITY
 * naming the shard otherwise ("shard 2 (shard-00002.sld): ..."). */
SL_MUST_USE sl_err sl_sldm_check_shard(const sl_sldm *m, uint32_t i, const sl_sld_header *h,
                                       uint64_t file_size);

/* The one rule for paths inside a dataset: 1..4096 bytes of printable
 * UTF-8, relative, '/'-separated, no empty, "." or ".." component.
 * SL_E_INPUT naming the path and what is wrong. */
SL_MUST_USE sl_err sl_sldm_path_check(const char *path);

/* ---- writing ---------------------------------------------------------- */

typedef struct sl_sldm_builder sl_sldm_builder;

SL_MUST_USE sl_err sl_sldm_builder_new(const char *dataset_id, sl_aead_id aead, uint32_t chunk_size,
                                       uint64_t sequence, sl_sldm_builder **out);
void sl_sldm_builder_free(sl_sldm_builder *b); /* NULL-safe */
/* Shards are added in index order, each once its SLD file is complete. */
SL_MUST_USE sl_err sl_sldm_builder_add_shard(sl_sldm_builder *b, const char *name,
                                             const sl_sld_header *h, uint64_t file_size);
/* Files are added in the order of their bytes (shard, then offset). */
SL_MUST_USE sl_err sl_sldm_builder_add_file(sl_sldm_builder *b, const char *path, uint32_t mode,
                                            uint64_t size, uint32_t shard, uint64_t offset);
/* Serialises, authenticates under dek (fresh salt) and checks the result by
 * parsing it back. The key reference is all NULL/0 for a local key file. */
SL_MUST_USE sl_err sl_sldm_builder_finish(sl_sldm_builder *b, sl_secret *dek, const char *kms_url,
                                          const char *key_id, const uint8_t *wrapped_dek,
                                          size_t wrapped_dek_len, uint8_t **out, size_t *out_len);

/* The same manifest with another key reference (a rewrap or a new KMS
 * URL): no key needed, authenticated bytes and root unchanged. */
SL_MUST_USE sl_err sl_sldm_rekey(const sl_sldm *m, const char *kms_url, const char *key_id,
                                 const uint8_t *wrapped_dek, size_t wrapped_dek_len, uint8_t **out,
                                 size_t *out_len);

#endif
