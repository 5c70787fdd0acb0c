/* The evidence kinds (private to attest/). Each kind's file defines its
 * sl_evidence_kind; evidence.c lists them in sl_evidence_kinds[]. */
#ifndef SECLAUNCH_ATTEST_KINDS_H
#define SECLAUNCH_ATTEST_KINDS_H

#include "seclaunch/attest.h"

/* declare each kind here: extern const sl_evidence_kind sl_kind_tpm2; */
extern const sl_evidence_kind sl_kind_snp;
extern const sl_evidence_kind sl_kind_tdx;
extern const sl_evidence_kind sl_kind_tpm2;
extern const sl_evidence_kind sl_kind_azure;
extern const sl_evidence_kind sl_kind_nvgpu;
extern const sl_evidence_kind sl_kind_nitro;

#endif
