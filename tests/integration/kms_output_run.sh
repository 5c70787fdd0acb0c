#!/usr/bin/env bash
# Output ids belong to the run that attested: /v1/output refuses an output
# id that is not NAME:RUN with RUN the request's job.id, and a run id whose
# output keys went to one machine is refused to another (403
# output_run_mismatch naming the rule), so no run is issued the output key
# of another run's output id (the KMS once gave one job a key for
# model:victimjob). The same run asking again (a retry) is served.
. "$(dirname "$0")/lib.sh"
build_probe || { echo "not ok - kms_probe did not build"; exit 1; }
cd "$T" || exit 1
start_kms "$T/kms" || exit 1
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
# the development policy names its own output key (dev-outputs, made at start)
start_swtpm tpmA
TA=$SWTPM_TCTI
check "enroll machine A" 0 "$SL" enroll "${K[@]}" -q
start_swtpm tpmB
TB=$SWTPM_TCTI
check "enroll machine B" 0 "$SL" enroll "${K[@]}" -q
probe() { # TCTI JOB_ID OUTPUT_ID
	SECLAUNCH_TCTI=$1 "$PROBE" "$KMS_URL" "$KMS_CA" output dev-outputs "$2" "$3" "file://$T/out/"
}
check "machine A, run 0a1b: model:0a1b is served" 0 probe "$TA" 0a1b model:0a1b
check_err "machine A, run 0a1b asks for model:victimjob: refused (4) naming the rule" 4 \
	"output_run_mismatch.*output id 'model:victimjob' is not of this run: output ids are NAME:RUN with RUN this request's job.id \('0a1b'\)" \
	probe "$TA" 0a1b model:victimjob
check_err "machine B claims run 0a1b: refused (4), the run belongs to another machine" 4 \
	"output_run_mismatch.*run '0a1b' belongs to another attested machine or workload" \
	probe "$TB" 0a1b model:0a1b
check_err "a request without a run (no job.id match possible): refused" 4 "output_run_mismatch" \
	probe "$TB" "" model:
check "machine A again for its run (a retry): served" 0 probe "$TA" 0a1b model:0a1b
check "machine B for a run of its own: served" 0 probe "$TB" 9f9f model:9f9f
assert "the refusals are audited as kms.output denials with the rule" \
	test "$(grep '"event":"kms.output"' "$KMS_STATE/audit.log" | grep '"decision":"deny"' | grep -c output_run_mismatch)" -ge 3
finish
