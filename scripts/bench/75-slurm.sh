#!/usr/bin/env bash
# Slurm step start with the SPANK plugin (a single-host cluster of Debian's
# slurmctld, slurmd and munged, tests/integration/slurm_lib.bash; swtpm and
# seclaunchd --dev on loopback). Prints figures beside their peers in the
# same run; asserts nothing.
# (1) `srun -n 2 true` without and with --seclaunch-* (the node's attested
#     launch included: challenge, TPM quote, release, staging of a small
#     sharded dataset, the wipe at step end): median of SL_BENCH_SLURM_N
#     (default 10) each, and the ratio.
# (2) The per-node cost as more tasks share it: 1, 2 and 8 tasks on the
#     node (--overcommit), median step time, time per task, and the KMS's
#     release count per step (it stays 1).
set -uo pipefail
. "$(dirname "$0")/lib.bash"
. "$ROOT/tests/integration/run_lib.bash"
. "$ROOT/tests/integration/slurm_lib.bash"
SO=${SL_BUILD:-$ROOT/build}/slurm/spank_seclaunch.so
N=${SL_BENCH_SLURM_N:-10}
if missing=$(slurm_missing); then
	echo "75-slurm: skipped: $missing is not installed"
	exit 0
fi
if [ ! -e "$SO" ]; then
	echo "75-slurm: skipped: $SO was not built (libslurm-dev)"
	exit 0
fi
cd "$T" || die "no temp dir"
chmod 0755 "$T"
ms() { python3 -c "import sys; print('%.0f' % (float(sys.argv[1]) * 1000 / float(sys.argv[2] if len(sys.argv) > 2 else 1)))" "$@"; }

start_swtpm tpm >/dev/null || die "swtpm did not start"
start_kms "$T/kms" || die "seclaunchd did not start"
KMSA=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
"$SL" enroll "${KMSA[@]}" --tcti "$SWTPM_TCTI" -q || die "enroll failed"
"$SL" key create "${KMSA[@]}" --admin-token-file "$KMS_TOKEN" --id ds-key -q || die "key create failed"
mkdir src
for i in $(seq 0 7); do head -c 524288 /dev/urandom >"src/f$i.bin"; done
"$SL" encrypt "${KMSA[@]}" --key-id ds-key --admin-token-file "$KMS_TOKEN" \
	--dataset-id bench-1 --shard-size 1M -q src -o ds || die "encrypt failed"
start_slurm "optional $SO seclaunch=$SL tcti=$SWTPM_TCTI audit_log=$T/serve-audit.log" ||
	die "slurm did not start"
SA=(--seclaunch-policy="$KMS_STATE/policy.json" --seclaunch-pubkey="$KMS_STATE/policy.pub"
	--seclaunch-kms="$KMS_URL" --seclaunch-kms-ca="$KMS_CA" --seclaunch-data="$T/ds"
	--seclaunch-stage=host)
releases() { grep -c '"event":"kms.release"' "$KMS_STATE/audit.log"; }

echo "step start, single-host cluster, 4 MiB sharded dataset (8 files, 4 shards), median of $N"
srun -n 2 true >/dev/null 2>&1 # the first step warms slurmd up
base=$(median_of "$N" srun -n 2 true) || die "srun failed"
r0=$(releases)
with=$(median_of "$N" srun -n 2 "${SA[@]}" true) || die "srun with the plugin failed"
r1=$(releases)
printf '  %-44s %8s ms\n' "srun -n 2 true" "$(ms "$base")"
printf '  %-44s %8s ms   (%s x; releases per step: %s)\n' "srun -n 2 --seclaunch-... true" \
	"$(ms "$with")" "$(ratio "$with" "$base" 1)" "$(python3 -c "print(($r1 - $r0) / $N)")"
printf '  %-44s %8s ms\n' "cost of the node's attested launch" \
	"$(python3 -c "print('%.0f' % (($with - $base) * 1000))")"

echo "per-node cost as tasks share it (--overcommit on 2 CPUs), median of $N"
for n in 1 2 8; do
	b=$(median_of "$N" srun -n "$n" -O true) || die "srun -n $n failed"
	r0=$(releases)
	w=$(median_of "$N" srun -n "$n" -O "${SA[@]}" true) || die "srun -n $n with the plugin failed"
	r1=$(releases)
	printf '  %d task%s: %6s ms without, %6s ms with (%s ms per task), releases per step %s\n' \
		"$n" "$([ "$n" = 1 ] && echo " " || echo s)" "$(ms "$b")" "$(ms "$w")" "$(ms "$w" "$n")" \
		"$(python3 -c "print(($r1 - $r0) / $N)")"
done
