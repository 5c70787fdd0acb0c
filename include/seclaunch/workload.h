/* Workload identity: what a job is, as one canonical JSON event extended
 * into a measurement register, and the replay of the workload event log
 * that verifiers turn into workload.* claims (docs/claims.md).
 *
 * The event (version 1) names the executable and script by SHA-256, the
 * argument vector, the environment, the working directory, the image
 * digest, the dataset roots, the output destinations and the policy digest.
 * Its canonical text is jansson's compact dump with sorted keys; the event
 * digest (SHA-256 of that text for a TPM PCR, SHA-384 for a TDX RTMR) is
 * what is extended. The identity digest leaves the policy digest out, so a
 * policy can allow-list an identity without naming its own digest.
 */
#ifndef SECLAUNCH_WORKLOAD_H
#define SECLAUNCH_WORKLOAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/claims.h"
#include "seclaunch/error.h"

/* PCR 15: not extended by firmware, boot loader or kernel, not resettable
 * from locality 0 (16 and 23 are), and outside the PCRs 8-14 that grub and
 * shim use (docs/claims.md says why, and what systemd does with it). */
#define SL_WORKLOAD_PCR_DEFAULT 15u
#define SL_WORKLOAD_MAX_EVENTS 1024
#define SL_WORKLOAD_MAX_ARGS 4096

/* Checks the shape of an event (untrusted input): SL_E_ATTEST_FORMAT naming
 * the member at fault. */
SL_MUST_USE sl_err sl_workload_event_check(const json_t *ev, const char *path);
/* The canonical text (malloc'd, NUL-terminated) of a checked event. */
SL_MUST_USE sl_err sl_workload_canonical(const json_t *ev, char **text);
/* SHA-256 of the canonical text: what is extended into a PCR. */
SL_MUST_USE sl_err sl_workload_event_digest(const json_t *ev, uint8_t out[static 32]);
/* SHA-256 of the canonical text without "policy_digest": the job's identity. */
SL_MUST_USE sl_err sl_workload_identity(const json_t *ev, uint8_t out[static 32]);
/* The register a fresh (all-zero) register reaches after extending every
 * event of log in order: sha256 (32 bytes) or, with sha384 true, 48 bytes. */
SL_MUST_USE sl_err sl_workload_replay(const json_t *events, bool sha384, uint8_t *out,
                                      size_t out_len);
/* The claims of one event: workload.identity, workload.exe_sha256, ... */
SL_MUST_USE sl_err sl_workload_claims(const json_t *ev, sl_claims *claims);

/* Verifier side: when ev (verified evidence whose claims are in claims)
 * carries "workload_log", replays it against the quoted register (tpm2:
 * claim tpm.pcr.sha256.N, N 0..15 only; tdx: tdx.rtmr3) and sets the claims
 * of the newest event plus workload.events and workload.register. A log that
 * does not replay to the quoted value is SL_E_ATTEST. No log: no claims. */
SL_MUST_USE sl_err sl_workload_verify(const json_t *ev, sl_claims *claims);

/* TPM, on one connection: reads the sha256 bank of PCR pcr into before;
 * extends it by digest only when before equals expect or alt (either may
 * be NULL); SL_E_ATTEST (nothing extended) when it equals neither. */
SL_MUST_USE sl_err sl_workload_tpm_extend(const char *tcti, unsigned pcr, const uint8_t *expect,
                                          const uint8_t *alt, const uint8_t digest[static 32],
                                          uint8_t before[static 32]);
/* TDX: extends RTMR3 through the kernel's measurement interface under root
 * (NULL: /sys/class/misc/tdx_guest/measurements), file "rtmr3:sha384". */
#define SL_WORKLOAD_TDX_MEASUREMENTS "/sys/class/misc/tdx_guest/measurements"
bool sl_workload_rtmr_available(const char *root);
SL_MUST_USE sl_err sl_workload_rtmr_extend(const char *root, const uint8_t digest[static 48]);

#endif
