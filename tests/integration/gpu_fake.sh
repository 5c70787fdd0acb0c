#!/usr/bin/env bash
# The GPU data path end to end on the CPU stand-in for libcuda.so.1
# (build/tests/fakecuda/): `seclaunch run --stage gpu` hands the job
# host-staged data and libseclaunch_data.so, which the job (the Python
# helper, ctypes) uploads in its own context through the pinned pool;
# `--gpu-decrypt` stages only ciphertext and the job's library decrypts on
# the "device" (the kernels run on the CPU); a tampered chunk fails the job
# with exit 6; the policy's `gpu_decrypt: false` refuses --gpu-decrypt before
# any key is released; `--stage gpu-ipc` is refused, naming CUDA IPC, where
# the driver cannot export handles, and otherwise stages and wipes (every
# device buffer zero when freed); a lease ends the job when the GPU's
# confidential-computing mode changes (an NVML stand-in). Proves the
# pipeline's logic, not CUDA's.
. "$(dirname "$0")/lib.sh"

for tool in swtpm minisign python3; do
	if ! command -v "$tool" >/dev/null; then
		skip gpu_fake "$tool not installed"
		finish
	fi
done
FAKE=$SL_BUILD/tests/fakecuda/libcuda.so.1
JLIB=$SL_BUILD/jobside/libseclaunch_data.so
if [ ! -x "$SL" ] || [ ! -x "$SLD" ] || [ ! -f "$FAKE" ] || [ ! -f "$JLIB" ]; then
	skip gpu_fake "seclaunch, seclaunchd, the fake libcuda or libseclaunch_data.so not built"
	finish
fi
PTX=$SL_BUILD/jobside/gcm_kernel.ptx
if [ ! -f "$PTX" ]; then # no nvcc here: the fake only needs the entry names
	PTX=$T/gcm_kernel.ptx
	printf '.entry sl_gcm_ghash\n.entry sl_gcm_tag\n.entry sl_gcm_ctr\n' >"$PTX"
fi

start_swtpm tpm || { echo "not ok - no swtpm"; exit 1; }
minisign -G -W -p "$T/p.pub" -s "$T/p.key" >/dev/null 2>&1
cat >"$T/policy.json" <<'JSON'
{"version": 1, "description": "gpu_fake test policy", "allow_unverified_region": true,
 "keys": {"gpu-key": ["gpu-ds", "no-gpu-dec", "gpu-lease"]},
 "datasets": [{"id": "gpu-ds", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"]},
              {"id": "no-gpu-dec", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
               "gpu_decrypt": false},
              {"id": "gpu-lease", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"],
               "key_ttl": 2}]}
JSON
minisign -S -s "$T/p.key" -m "$T/policy.json" -t gpu >/dev/null 2>&1
start_kms "$T/kms" --policy "$T/policy.json" --policy-pubkey "$T/p.pub" || exit 1
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll" 0 "$SL" enroll "${K[@]}" --tcti "$SWTPM_TCTI"
check "key create" 0 "$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id gpu-key
head -c $((9 * 1024 * 1024 + 12345)) /dev/urandom >"$T/plain"
want=$(sha256sum <"$T/plain" | cut -d' ' -f1)
check "encrypt" 0 "$SL" encrypt "${K[@]}" --key-id gpu-key --admin-token-file "$KMS_TOKEN" \
	--dataset-id gpu-ds --chunk-size 1M -q "$T/plain" -o "$T/gpu.sld"
check "encrypt (gpu_decrypt: false)" 0 "$SL" encrypt "${K[@]}" --key-id gpu-key \
	--admin-token-file "$KMS_TOKEN" --dataset-id no-gpu-dec -q "$T/plain" -o "$T/nogpu.sld"
check "encrypt (key_ttl: a lease)" 0 "$SL" encrypt "${K[@]}" --key-id gpu-key \
	--admin-token-file "$KMS_TOKEN" --dataset-id gpu-lease -q "$T/plain" -o "$T/lease.sld"
sldhash=$(sha256sum <"$T/gpu.sld" | cut -d' ' -f1)
rm -f "$T/plain"

# the job: uploads through the library, reads the "device" back (the fake's
# device pointers are host addresses), frees (clears) the buffer
cat >"$T/job.py" <<'PY'
import ctypes, hashlib, os, sys
import seclaunch_data as sd
ds = sd.get(sys.argv[1])
if ds.kind == "sld":  # host memory holds the key area and the SLD file as it is on disk
    mv = ds.memoryview if False else None
    import mmap
    m = mmap.mmap(ds.entry["fd"], ds.entry["file_size"], prot=mmap.PROT_READ)
    print("hostfile", hashlib.sha256(m[4096:]).hexdigest())
try:
    buf = ds.to_device()
except sd.SeclaunchDataIntegrityError as e:
    print("integrity:", e, file=sys.stderr)
    sys.exit(e.exit_code)
data = ctypes.string_at(buf.ptr, buf.size)
print(ds.kind, hashlib.sha256(data).hexdigest(), buf.stats["copies"], buf.stats["max_copy"],
      buf.stats["kernel_launches"])
buf.free()
PY
RUNA=(--policy "$T/policy.json" --policy-pubkey "$T/p.pub" "${K[@]}" --tcti "$SWTPM_TCTI"
	--region gcp:europe-west4 --audit-log "$T/audit.log"
	--env "PYTHONPATH=$SL_ROOT/jobside/python" --env PYTHONDONTWRITEBYTECODE=1
	--env "SECLAUNCH_LIBCUDA=$FAKE" --env "SECLAUNCH_GCM_PTX=$PTX" --env "FAKECUDA_REPORT=$T/job.report")
export SECLAUNCH_LIBCUDA=$FAKE FAKECUDA_REPORT=$T/run.report

check "--stage gpu: the job uploads host-staged data in its own context" 0 \
	"$SL" run "${RUNA[@]}" --stage gpu "$T/gpu.sld" -- python3 "$T/job.py" gpu-ds
assert "--stage gpu: the device holds the plaintext (pinned pool, 8 MiB copies)" \
	grep -q "^host $want 2 8388608 0\$" "$T/out"
assert "--stage gpu: audited as an upload by the job" \
	grep -q '"run.stage".*"gpu":"upload by the job"' "$T/audit.log"
assert "--stage gpu: no cuMemHostRegister, no pinned buffer reused early, all zero when freed" \
	grep -qzE 'live=0.*freed_nonzero=0.*live_pinned=0.*pinned_freed_nonzero=0.*hostregister=0.*reuse_violations=0' "$T/job.report"

check "--gpu-decrypt: ciphertext staged, decrypted on the device" 0 \
	"$SL" run "${RUNA[@]}" --stage gpu --gpu-decrypt "$T/gpu.sld" -- python3 "$T/job.py" gpu-ds
assert "--gpu-decrypt: host memory holds the SLD file (ciphertext) only" \
	grep -q "^hostfile $sldhash\$" "$T/out"
assert "--gpu-decrypt: the device holds the plaintext" grep -q "^sld $want " "$T/out"
assert "--gpu-decrypt: every device buffer (round keys included) zero when freed" \
	grep -qzE 'live=0.*freed_nonzero=0.*live_pinned=0.*pinned_freed_nonzero=0.*hostregister=0' "$T/job.report"
assert "--gpu-decrypt: the audit log says the file key went to the job" \
	grep -q '"run.stage".*"gpu":"decrypt (file key to the job)"' "$T/audit.log"

# a flipped byte in chunk 3's ciphertext: the header still verifies, the tag does not
cp "$T/gpu.sld" "$T/bad.sld"
hl=$("$SL" inspect "$T/bad.sld" | python3 -c 'import json,sys; print(json.load(sys.stdin)["header_len"])')
off=$((hl + 3 * (1048576 + 16) + 1000))
flip "$T/bad.sld" "$T/bad.sld" "$off" 0x5a
check_err "--gpu-decrypt: a tampered chunk fails the job with exit 6" 6 \
	"chunk 3: authentication failed on the GPU" \
	"$SL" run "${RUNA[@]}" --stage gpu --gpu-decrypt "$T/bad.sld" -- python3 "$T/job.py" gpu-ds
assert "--gpu-decrypt tampered: nothing left on the device, all zero when freed" \
	grep -qzE 'live=0.*freed_nonzero=0' "$T/job.report"

: >"$T/audit.log"
check_err "gpu_decrypt: false refuses --gpu-decrypt (policy, exit 4)" 4 "gpu_decrypt" \
	"$SL" run "${RUNA[@]}" --stage gpu --gpu-decrypt "$T/nogpu.sld" -- python3 "$T/job.py" no-gpu-dec
assert "gpu_decrypt: false: no key released" bash -c "! grep -q '\"run.release\"' '$T/audit.log'"
check "gpu_decrypt: false still allows --stage gpu" 0 \
	"$SL" run "${RUNA[@]}" --stage gpu "$T/nogpu.sld" -- python3 "$T/job.py" no-gpu-dec

check_err "--gpu-decrypt with --stage host: usage error" 1 "--gpu-decrypt goes with" \
	"$SL" run "${RUNA[@]}" --stage host --gpu-decrypt "$T/gpu.sld" -- true

: >"$T/audit.log"
check_err "--stage gpu-ipc where CUDA IPC is missing: refused, saying so" 7 \
	"CUDA IPC is not available.*use --stage gpu" \
	env FAKECUDA_FAIL=ipc:1 "$SL" run "${RUNA[@]}" --stage gpu-ipc "$T/gpu.sld" -- true
assert "--stage gpu-ipc refused before any key is released" \
	bash -c "! grep -q '\"run.release\"' '$T/audit.log'"
check "--stage gpu-ipc: staged by seclaunch, handle in SECLAUNCH_DATA" 0 \
	"$SL" run "${RUNA[@]}" --stage gpu-ipc "$T/gpu.sld" -- \
	python3 -c 'import seclaunch_data as sd; d = sd.get("gpu-ds"); print(d.kind, d.method, len(d.entry["ipc_handle"]))'
assert "--stage gpu-ipc: the job sees a gpu-ipc entry" grep -q "^gpu gpu-ipc 128\$" "$T/out"
assert "--stage gpu-ipc: seclaunch's device buffer zero when freed, pinned buffers too" \
	grep -qzE 'allocs=[1-9].*live=0.*freed_nonzero=0.*live_pinned=0.*pinned_freed_nonzero=0' "$T/run.report"

# The GPU's confidential-computing mode is read again at every renewal of
# the lease (NVML: here the stand-in, whose mode a file sets): when it is no
# longer what it was at the release, the job is stopped and its data wiped
# as after a refused renewal (exit 3).
FAKENVML=$SL_BUILD/tests/fakecuda/libnvidia-ml.so.1
if [ ! -f "$FAKENVML" ]; then
	skip "lease: GPU CC mode changed -> stopped" "the NVML stand-in is not built"
else
	echo off >"$T/cc"
	rm -f "$T/gl.mark"
	LD_LIBRARY_PATH=$(dirname "$FAKENVML") FAKENVML_CC=$T/cc "$SL" run "${RUNA[@]}" --stage gpu \
		--kill-grace 1 "$T/lease.sld" -- python3 -c \
		"import os, time; open('$T/gl.mark', 'w').write(str(os.getpid())); time.sleep(60)" \
		>"$T/gl.out" 2>&1 &
	GL=$!
	for _ in $(seq 300); do [ -s "$T/gl.mark" ] && break; sleep 0.05; done
	assert "lease: the job started on the GPU (CC off)" test -s "$T/gl.mark"
	grep -q '"run.lease_renewed"' "$T/audit.log" || sleep 1.5
	assert "lease: renewed while the GPU's mode stays" grep -q '"run.lease_renewed"' "$T/audit.log"
	echo on >"$T/cc"
	rc=124
	for _ in $(seq 100); do
		kill -0 "$GL" 2>/dev/null || { wait "$GL"; rc=$?; break; }
		sleep 0.1
	done
	[ "$rc" = 124 ] && kill "$GL"
	assert "lease: GPU CC mode changed -> the job stopped, exit 3 (rc $rc)" test "$rc" -eq 3
	assert "lease: the job is gone" bash -c "! kill -0 $(cat "$T/gl.mark" 2>/dev/null || echo 0) 2>/dev/null"
	assert "lease: run.lease_ended names the GPU's mode change, then the wipe" \
		bash -c "grep '\"run.lease_ended\"' '$T/audit.log' | tail -1 | grep -q 'confidential-computing mode changed from off to on' && tail -n 1 '$T/audit.log' | grep -q '\"run.wipe\".*\"all_zeroed\":true'"
fi
finish
