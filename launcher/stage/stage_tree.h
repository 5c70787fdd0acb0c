/* Staging a sharded dataset (stage_sld.c): a tree the dataset handle
 * opened, decrypted into one stage. */
#ifndef SECLAUNCH_STAGE_TREE_H
#define SECLAUNCH_STAGE_TREE_H

#include "../dataset/dataset_tree.h"
#include "seclaunch/stage.h"

/* A sharded dataset staged whole, as sl_stage_sld does for one SLD file:
 * the manifest authenticated with dek, then every shard opened, checked and
 * decrypted into its place in one stage (the shards' plaintexts back to
 * back, so a file's bytes sit at its dataset offset). The shards come from
 * the folder open as dfd (dir: its name in messages), or from remote. */
SL_MUST_USE sl_err sl_stage_sldm(int dfd, const char *dir, sl_remote *remote, const sl_sldm *m,
                                 sl_secret *dek, const sl_gpu_info *gpu, unsigned threads,
                                 bool force_memfd, int (*interrupted)(void), sl_stage **out);

#endif
