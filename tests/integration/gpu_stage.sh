#!/usr/bin/env bash
# GPU staging on a real GPU. Without libcuda.so.1 and a device: `--stage
# gpu` is refused before anything is asked of the KMS (exit 7, naming the
# dlopen failure) and `--stage auto` falls back to host memory; the GPU round
# trip is skipped with the reason (tests/integration/gpu_fake.sh runs the
# same path on the CPU stand-in). With a GPU: --stage gpu (the job uploads
# through libseclaunch_data.so), --gpu-decrypt (when the kernel was built) and
# --stage gpu-ipc (skipped where CUDA IPC is refused) are read back with
# cuMemcpyDtoH and must hash to the plaintext.
. "$(dirname "$0")/lib.sh"

for tool in swtpm minisign python3; do
	if ! command -v "$tool" >/dev/null; then
		skip gpu_stage "$tool not installed"
		finish
	fi
done
if ! "$SL" run --help >/dev/null 2>&1 || [ ! -x "$SLD" ]; then
	skip gpu_stage "seclaunch run or seclaunchd not built"
	finish
fi

have_gpu=0
why="no libcuda.so.1 (no NVIDIA driver on this machine)"
if python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then
	n=$(python3 -c '
import ctypes
c = ctypes.CDLL("libcuda.so.1"); n = ctypes.c_int(0)
print(n.value if c.cuInit(0) == 0 and c.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0)')
	if [ "${n:-0}" -gt 0 ]; then have_gpu=1; else why="libcuda.so.1 loads but no CUDA device is usable"; fi
fi

start_swtpm tpm || { echo "not ok - no swtpm"; exit 1; }
minisign -G -W -p "$T/p.pub" -s "$T/p.key" >/dev/null 2>&1
cat >"$T/policy.json" <<'EOF'
{"version": 1, "description": "gpu_stage test policy", "allow_unverified_region": true,
 "keys": {"gpu-key": ["gpu-ds"]},
 "datasets": [{"id": "gpu-ds", "allowed_regions": ["gcp:europe-west4"], "tee_kinds": ["tpm2"]}]}
EOF
minisign -S -s "$T/p.key" -m "$T/policy.json" -t gpu >/dev/null 2>&1
start_kms "$T/kms" --policy "$T/policy.json" --policy-pubkey "$T/p.pub" || exit 1
K=(--kms "$KMS_URL" --kms-ca "$KMS_CA")
check "enroll" 0 "$SL" enroll "${K[@]}" --tcti "$SWTPM_TCTI"
check "key create" 0 "$SL" key create "${K[@]}" --admin-token-file "$KMS_TOKEN" --id gpu-key
head -c $((3 * 1024 * 1024 + 5)) /dev/urandom >"$T/plain"
want=$(sha256sum <"$T/plain" | cut -d' ' -f1)
check "encrypt" 0 "$SL" encrypt "${K[@]}" --key-id gpu-key --admin-token-file "$KMS_TOKEN" \
	--dataset-id gpu-ds --chunk-size 64K -q "$T/plain" -o "$T/gpu.sld"
rm -f "$T/plain"
RUNA=(--policy "$T/policy.json" --policy-pubkey "$T/p.pub" "${K[@]}" --tcti "$SWTPM_TCTI"
	--region gcp:europe-west4 --audit-log "$T/audit.log" --env "PYTHONPATH=$SL_ROOT/jobside/python" --env PYTHONDONTWRITEBYTECODE=1)

cat >"$T/job.py" <<'EOF'
import ctypes, hashlib, sys
import seclaunch_data as sd
ds = sd.get("gpu-ds")
if ds.kind == "host" and "gpu" not in ds.entry:
    print(ds.kind, ds.method, hashlib.sha256(ds.memoryview()).hexdigest())
    sys.exit(0)
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
dtoh = getattr(cu, "cuMemcpyDtoH_v2", None) or cu.cuMemcpyDtoH
buf = ctypes.create_string_buffer(max(ds.size, 1))
if ds.kind in ("host", "sld"):  # --stage gpu / --gpu-decrypt: this context uploads
    try:
        d = ds.to_device()
    except sd.SeclaunchDataIntegrityError as e:
        print(e, file=sys.stderr)
        sys.exit(e.exit_code)
    assert dtoh(buf, ctypes.c_ulonglong(d.ptr), ctypes.c_size_t(ds.size)) == 0
    d.free()
    print(ds.kind, "upload", hashlib.sha256(buf.raw[:ds.size]).hexdigest(), d.stats["copies"])
    sys.exit(0)
class H(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]
ptr = ctypes.c_ulonglong()
open_ipc = getattr(cu, "cuIpcOpenMemHandle_v2", None) or cu.cuIpcOpenMemHandle
rc = open_ipc(ctypes.byref(ptr), H(bytes.fromhex(ds.entry["ipc_handle"])), 1)
assert rc == 0, "cuIpcOpenMemHandle: %d" % rc
assert dtoh(buf, ptr, ctypes.c_size_t(ds.size)) == 0
print(ds.kind, ds.method, hashlib.sha256(buf.raw[:ds.size]).hexdigest())
EOF

if [ "$have_gpu" = 0 ]; then
	check_err "--stage gpu without a GPU: refused, naming why" 7 "no usable GPU.*libcuda" \
		"$SL" run "${RUNA[@]}" --stage gpu "$T/gpu.sld" -- python3 "$T/job.py"
	assert "--stage gpu without a GPU: nothing asked of the KMS" \
		bash -c "! grep -q '\"run.release\"' '$T/audit.log'"
	check "--stage auto without a GPU: host staging" 0 \
		"$SL" run "${RUNA[@]}" --stage auto -v "$T/gpu.sld" -- python3 "$T/job.py"
	assert "--stage auto: job read the plaintext from host memory" \
		grep -q "^host .* $want\$" "$T/out"
	assert "--stage auto -v: the fallback is explained" grep -q "staging in host memory: .*libcuda" "$T/err"
	skip "gpu round trip" "$why"
	finish
fi

check "--stage gpu: the job uploads in its own context (libseclaunch_data.so)" 0 \
	"$SL" run "${RUNA[@]}" --stage gpu "$T/gpu.sld" -- python3 "$T/job.py"
cat "$T/err"
assert "gpu: the hash of the device buffer is the plaintext's" grep -q "^host upload $want " "$T/out"
assert "gpu: staging and wipe recorded" \
	bash -c "grep -q '\"run.stage\"' '$T/audit.log' && grep -q '\"run.wipe\"' '$T/audit.log'"
if [ -f "$SL_BUILD/jobside/gcm_kernel.ptx" ]; then
	check "--gpu-decrypt: decrypted on the GPU" 0 \
		"$SL" run "${RUNA[@]}" --stage gpu --gpu-decrypt "$T/gpu.sld" -- python3 "$T/job.py"
	assert "--gpu-decrypt: the device buffer is the plaintext" grep -q "^sld upload $want " "$T/out"
else
	skip "--gpu-decrypt" "the GCM kernel was not built (no nvcc)"
fi
"$SL" run "${RUNA[@]}" --stage gpu-ipc "$T/gpu.sld" -- python3 "$T/job.py" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -eq 7 ] && grep -q "CUDA IPC is not available" "$T/err"; then
	skip "--stage gpu-ipc" "$(grep -o 'CUDA IPC is not available[^;]*' "$T/err" | head -n1)"
else
	assert "--stage gpu-ipc: the job reads the plaintext through the IPC handle" \
		grep -q "^gpu gpu-ipc $want\$" "$T/out"
fi
finish
