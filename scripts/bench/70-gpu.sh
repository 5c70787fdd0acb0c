#!/usr/bin/env bash
# The CPU side of the GPU data path: host-decrypt staging (SLD decryption
# into a host memory file, every CPU, OpenSSL), its rate and host CPU
# seconds per GiB, which bound the host-decrypt path on a GPU machine when
# they are below its pinned H2D bandwidth. The GPU figures (pinned H2D
# limit, GPU AES-256-GCM, GPU-decrypt staging) need a GPU: scripts/gpu-check.
# SL_BENCH_SIZE_MB overrides the 1024 MiB size. Not a test.
set -euo pipefail
SL_ROOT=${SL_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
tool=$SL_ROOT/${BUILD:-build}/tests/gpu_check
[ -x "$tool" ] || { echo "70-gpu: $tool not built (make unit-build)"; exit 1; }
"$tool" cpu "${SL_BENCH_SIZE_MB:-1024}"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
	echo "a GPU is present: scripts/gpu-check measures the GPU side"
else
	echo "no NVIDIA GPU here: the GPU side is not measured (scripts/gpu-check on a GPU machine)"
fi
