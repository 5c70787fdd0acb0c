#!/usr/bin/env bash
# The SPANK plugin's privilege boundary on a real single-host Slurm cluster
# (slurm_lib.bash), with steps submitted by an unprivileged user (nobody):
# a --seclaunch-* value cannot inject an option into root's seclaunch serve
# (--ready-file= into a root-only folder, --audit-log= out of the
# administrator's log); a value that begins with '-' fails the step with a
# message; what the administrator set in plugstack.conf (policy, public
# key, KMS, CA) a step cannot change; a dataset the step's user cannot read
# is refused before any KMS request (serve opens it as that user), one it
# can read is served.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/run_lib.bash"
. "$(dirname "$0")/slurm_lib.bash"

SO=${SL_BUILD:-$SL_ROOT/build}/slurm/spank_seclaunch.so
if missing=$(slurm_missing); then
	skip slurm_boundary "$missing is not installed (slurmd, slurmctld, slurm-client, munge)"
	finish
fi
if [ ! -e "$SO" ]; then
	skip slurm_boundary "$SO was not built (no /usr/include/slurm/spank.h: libslurm-dev)"
	finish
fi
for tool in swtpm minisign setpriv; do
	command -v "$tool" >/dev/null || {
		skip slurm_boundary "$tool not installed"
		finish
	}
done
id nobody >/dev/null 2>&1 || {
	skip slurm_boundary "no user nobody"
	finish
}
cd "$T" || exit 1
chmod 0755 "$T"

start_tpm tpm || exit 1
mkdir src
for i in $(seq 0 3); do head -c $((20000 + i * 1000)) /dev/urandom >"src/part-$i.bin"; done
serve_setup slurm_boundary step /usr/bin/true --ok
chmod -R a+rX "$T/ds"
ALOG=$T/serve-audit.log
WLOG=$T/wl.log
admin() { # [KEY=VALUE...]: the administrator's plugstack.conf line
	printf 'required %s seclaunch=%s tcti=%s audit_log=%s workload_log=%s timeout=120 %s\n' \
		"$SO" "$SL" "$SWTPM_TCTI" "$ALOG" "$WLOG" "$*" >"$SLURM_DIR/plugstack.conf"
}
start_slurm "" || exit 1
admin
# nobody submits: munged's socket and slurm.conf must be reachable
chmod 0755 "$SLURM_DIR" "$SLURM_DIR/munge"
AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
check "nobody can submit a step (srun -n 1 id -u)" 0 "${AS_NOBODY[@]}" srun -n 1 id -u
SA=(--seclaunch-policy="$T/policy.json" --seclaunch-pubkey="$T/policy.pub"
	--seclaunch-kms="$KMS_URL" --seclaunch-kms-ca="$KMS_CA"
	--seclaunch-stage=host --seclaunch-region=gcp:europe-west4)
releases() { grep -c '"event":"kms.release"' "$KMS_STATE/audit.log"; }
starts() { cat "$ALOG" 2>/dev/null | grep -c '"event":"run.start"'; }

# ---- a step of nobody's, its dataset readable by nobody: served, audited where
# the administrator said -------------------------------------------------------
s0=$(starts)
check "nobody's step over a dataset nobody can read: exit 0" 0 \
	"${AS_NOBODY[@]}" srun -n 1 "${SA[@]}" --seclaunch-data="$T/ds" /usr/bin/true
assert "... its serve's records are in the administrator's audit_log" test "$(starts)" -gt "$s0"

# ---- option injection through --seclaunch-data ----------------------------------
mkdir -m 0700 "$T/rootonly"
mkdir -m 1777 "$T/pub"
rel0=$(releases)
s0=$(starts)
check_err "--seclaunch-data=DS,--ready-file=ROOTONLY/x: refused, exit 1, the value named" 1 \
	"seclaunch-data=--ready-file=$T/rootonly/x: refused" \
	"${AS_NOBODY[@]}" srun -n 1 "${SA[@]}" --seclaunch-data="$T/ds,--ready-file=$T/rootonly/x" /usr/bin/true
assert "... root made no file in the root-only folder" test ! -e "$T/rootonly/x"
check_err "--seclaunch-data=DS,--audit-log=MINE: refused, exit 1" 1 \
	"seclaunch-data=--audit-log=$T/pub/my.log: refused" \
	"${AS_NOBODY[@]}" srun -n 1 "${SA[@]}" --seclaunch-data="$T/ds,--audit-log=$T/pub/my.log" /usr/bin/true
assert "... no record went to the user's file" test ! -e "$T/pub/my.log"
assert "... nothing was released, no serve started" test "$(releases)" = "$rel0" -a "$(starts)" = "$s0"
check_err "a value that begins with '-' (--seclaunch-region=-x): refused with a message, exit 1" 1 \
	"seclaunch-region=--audit-log=$T/pub/r.log: refused: a value may not be empty or begin with '-'" \
	"${AS_NOBODY[@]}" srun -n 1 "${SA[@]}" --seclaunch-region="--audit-log=$T/pub/r.log" \
	--seclaunch-data="$T/ds" /usr/bin/true
assert "... no file made" test ! -e "$T/pub/r.log"
check_err "an output spec that begins with '-': refused, exit 1" 1 "seclaunch-output=--kms=.*refused" \
	"${AS_NOBODY[@]}" srun -n 1 "${SA[@]}" --seclaunch-output="model=$T/dest,--kms=https://127.0.0.1:9" \
	--seclaunch-data="$T/ds" /usr/bin/true

# ---- a dataset the step's user cannot read (root 0600 in a 0700 folder) ----------
mkdir -m 0700 "$T/vault"
cp -r "$T/ds" "$T/vault/private"
chmod -R go-rwx "$T/vault/private"
rel0=$(releases)
check_err "nobody's step naming a root-only dataset: exit 2, the job's user cannot read it" 2 \
	"$T/vault/private: cannot open: the job's user nobody .*cannot read it" \
	"${AS_NOBODY[@]}" srun -n 1 "${SA[@]}" --seclaunch-data="$T/vault/private" /usr/bin/true
assert "... no release request reached the KMS" test "$(releases)" = "$rel0"

# ---- the administrator's settings are the cluster's ------------------------------
admin "policy=$T/policy.json" "pubkey=$T/policy.pub" "kms=$KMS_URL" "kms_ca=$KMS_CA"
UA=(--seclaunch-stage=host --seclaunch-region=gcp:europe-west4 --seclaunch-data="$T/ds")
check "plugstack.conf sets policy, pubkey, kms, kms_ca: a step giving only its data runs" 0 \
	"${AS_NOBODY[@]}" srun -n 1 "${UA[@]}" /usr/bin/true
check "... a step repeating the same values runs" 0 \
	"${AS_NOBODY[@]}" srun -n 1 "${UA[@]}" --seclaunch-kms="$KMS_URL" /usr/bin/true
rel0=$(releases)
check_err "--seclaunch-kms=another: refused (exit 1), naming kms=" 1 "administrator set kms= in plugstack.conf" \
	"${AS_NOBODY[@]}" srun -n 1 "${UA[@]}" --seclaunch-kms=https://127.0.0.1:9 /usr/bin/true
check_err "--seclaunch-kms-ca=another: refused (exit 1)" 1 "administrator set kms_ca=" \
	"${AS_NOBODY[@]}" srun -n 1 "${UA[@]}" --seclaunch-kms-ca="$T/pub/ca.pem" /usr/bin/true
echo '{}' >"$T/pub/mine.json"
check_err "--seclaunch-policy=another: refused (exit 1)" 1 "administrator set policy=" \
	"${AS_NOBODY[@]}" srun -n 1 "${UA[@]}" --seclaunch-policy="$T/pub/mine.json" /usr/bin/true
check_err "--seclaunch-pubkey=another: refused (exit 1)" 1 "administrator set pubkey=" \
	"${AS_NOBODY[@]}" srun -n 1 "${UA[@]}" --seclaunch-pubkey="$T/pub/mine.pub" /usr/bin/true
check_err "--seclaunch-policy-sig=another: refused (exit 1)" 1 "cannot change its signature" \
	"${AS_NOBODY[@]}" srun -n 1 "${UA[@]}" --seclaunch-policy-sig="$T/pub/mine.sig" /usr/bin/true
assert "... nothing was released for the refused steps" test "$(releases)" = "$rel0"
finish
