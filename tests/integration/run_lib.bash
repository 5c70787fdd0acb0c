# Setup shared by the scripts that launch jobs through seclaunch run / serve
# (the general helpers are in tests/testlib/lib.bash, sourced here).
. "$(dirname "${BASH_SOURCE[0]}")/../testlib/lib.bash"

# Skips the test NAME (and ends it) unless every TOOL is installed; then
# enters $T and sets PY: Debian's python3 (with python3-numpy and
# python3-torch from install-deps) when there is one, else the first on PATH.
job_prologue() { # NAME TOOL...
	local name=$1 tool
	shift
	for tool in "$@"; do
		if ! command -v "$tool" >/dev/null; then
			skip "$name" "$tool not installed"
			finish
		fi
	done
	cd "$T" || exit 1
	PY=/usr/bin/python3
	[ -x "$PY" ] || PY=$(python3 -c "import sys; print(sys.executable)")
}

# A seclaunchd started with start_kms's OPTIONS, the TPM of start_tpm
# enrolled, the key ds-key created; sets KMSA (the client's --kms options).
kms_enrolled() { # [OPTION...]
	start_kms "$T/kms" "$@" || exit 1
	KMSA=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
	check "enroll the TPM" 0 "$SL" enroll "${KMSA[@]}" --tcti "$SWTPM_TCTI" -q
	check "create a key" 0 "$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id ds-key -q
}

# For seclaunch serve and the SPANK plugin: a policy signed with a new key
# ($T/policy.key, .pub) for datasets PREFIX-1 and model:* (outputs to
# file://$T/dest*) and PREFIX-wl (the workload EXE ARG), in region
# gcp:europe-west4 with unverified regions allowed; a seclaunchd holding it
# (kms_enrolled) with the outputs' key ckpt-key too; src/ (the caller's
# files *.bin) summed into want.sums and encrypted as PREFIX-1 into ds/ in
# 64 KiB shards.
serve_setup() { # NAME PREFIX EXE ARG
	local sha dests
	minisign -G -W -p "$T/policy.pub" -s "$T/policy.key" >/dev/null 2>&1
	sha=$(sha256sum "$3" | cut -d' ' -f1)
	dests="{\"url\": \"file://$T/dest*\", \"region\": \"gcp:europe-west4\"}"
	cat >"$T/policy.json" <<EOF2
{
  "version": 1,
  "description": "$1 test policy (development: unverified regions)",
  "allow_unverified_region": true,
  "keys": {"ds-key": ["$2-*"], "ckpt-key": ["model:*"]},
  "datasets": [
    {"id": "$2-1", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
     "output_destinations": [$dests]},
    {"id": "model:*", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
     "output_destinations": [$dests]},
    {"id": "$2-wl", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
     "workloads": [{"exe_sha256": ["$sha"], "argv": ["$3", "$4"]}]}
  ]
}
EOF2
	minisign -S -s "$T/policy.key" -m "$T/policy.json" -t "$1" >/dev/null 2>&1
	kms_enrolled --policy "$T/policy.json" --policy-pubkey "$T/policy.pub"
	check "create the outputs' key" 0 "$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id ckpt-key -q
	(cd src && sha256sum ./*.bin | sed 's# \./# #') >want.sums
	check "encrypt a sharded dataset" 0 "$SL" encrypt "${KMSA[@]}" --key-id ds-key \
		--admin-token-file "$KMS_TOKEN" --dataset-id "$2-1" --shard-size 64K -q src -o ds
}
