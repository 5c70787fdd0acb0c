/* Shared between the nvidia-gpu evidence files (private to attest/). */
#ifndef SECLAUNCH_ATTEST_NVGPU_INT_H
#define SECLAUNCH_ATTEST_NVGPU_INT_H

#include <openssl/x509.h>

#include "dice_tcbinfo.h"
#include "nvgpu_report.h"
#include "seclaunch/attest.h"

/* Test copies of the programs only (tests/fakecuda/nvgpu_testroot.c, linked
 * into build/tests/nvgpu-testroot/, never into bin/ or libseclaunch.a): one
 * more root fingerprint pinned beside NVIDIA's, for the chains the fake
 * NVML's test CA makes. A weak reference: where nothing defines it (every
 * product build) it is NULL, and no input, file or environment variable can
 * add a GPU root. */
extern bool sl_nvgpu_test_root(uint8_t fp[static 32]) __attribute__((weak));

/* Verifies a raw report with its certificate chain (leaf first) and adds
 * the gpu.* claims and binding to c (used by the kind and by tests). */
SL_MUST_USE sl_err sl_nvgpu_verify_parts(const uint8_t *report, size_t rlen, STACK_OF(X509) * certs,
                                         const sl_verify_opts *o, sl_claims *c);
/* Claims of a verified report and its leaf certificate. */
SL_MUST_USE sl_err sl_nvgpu_claims(const sl_nvgpu_report *r, X509 *leaf, sl_claims *c);
/* gpu.cert.tcb.* of the leaf's DICE TcbInfo (vendor, model, version, svn). */
SL_MUST_USE sl_err sl_nvgpu_tcb_claims(const sl_dice_tcbinfo *t, sl_claims *c);
/* The driver's unsigned settings object of the evidence (may be NULL). */
SL_MUST_USE sl_err sl_nvgpu_driver_claims(const json_t *driver, sl_claims *c);
/* "96.00.9f.00.01" from the 8-byte VBIOS version field. */
SL_MUST_USE sl_err sl_nvgpu_vbios_string(const uint8_t *v, size_t len, char out[static 16]);

/* One verified GPU's claims (gpu.* as sl_nvgpu_verify_parts and the driver
 * object give them) join the set in dst (nvgpu_set.c): refused when the GPU
 * is already there, answers another nonce, or runs in another mode. */
SL_MUST_USE sl_err sl_nvgpu_set_add(sl_claims *dst, const sl_claims *one);
/* Merges src into dst; a GPU set in src (gpu.count, gpu.<i>.*) joins GPU by
 * GPU through sl_nvgpu_set_add, the rest as sl_claims_merge does. */
SL_MUST_USE sl_err sl_nvgpu_set_merge(sl_claims *dst, const sl_claims *src);

bool sl_nvgpu_available(const sl_collect_opts *o);
SL_MUST_USE sl_err sl_nvgpu_collect(const sl_collect_opts *o, json_t **out);

#endif
