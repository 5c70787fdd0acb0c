#!/usr/bin/env bash
# `policy explain --claims` takes several files of one machine and job (the
# evidence's `verify --json`, the job's `measure --predict --json`) as one
# claim set: a decision that needs claims from both is explained as allowed
# only with both; two files that give one claim two values are refused
# (exit 2, naming the file and the claim).
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
cat >p.json <<'EOF2'
{"version": 1, "allow_unverified_region": true, "keys": {"k": ["d-*"]},
 "datasets": [
  {"id": "d-wl", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
   "workloads": [{"identity": ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]}]}]}
EOF2
"$SL" policy keygen --secret-key pk --public-key pk.pub -W >/dev/null 2>&1
check "sign" 0 "$SL" policy sign --secret-key pk --policy p.json
printf '{"binding": "verified", "tee.kind": "tpm2", "cloud.provider": "gcp", "cloud.region": "europe-west4"}' >machine.json
printf '{"claims": {"workload.identity": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "tee.kind": "tpm2"}}' >job.json
printf '{"workload.identity": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "tee.kind": "sev-snp"}' >other.json
X=(policy explain --policy p.json --policy-pubkey pk.pub --key k --dataset d-wl)
check "the machine's claims alone: denied (no measured workload), exit 4" 4 \
	"$SL" "${X[@]}" --claims machine.json
check "the machine's and the job's claims together: allowed" 0 \
	"$SL" "${X[@]}" --claims machine.json --claims job.json
check_err "two files that disagree on a claim: refused, exit 2, naming both" 2 \
	"--claims other.json: claim tee.kind is 'sev-snp' there and 'tpm2' in an earlier --claims file" \
	"$SL" "${X[@]}" --claims machine.json --claims other.json
check_err "more than 8 files: usage, exit 1" 1 "at most 8" \
	"$SL" "${X[@]}" $(for i in $(seq 9); do printf -- '--claims machine.json '; done)
finish
