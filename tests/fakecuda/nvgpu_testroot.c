/* Linked only into the test copies of the programs
 * (build/tests/nvgpu-testroot/seclaunch, seclaunchd), never into bin/ or
 * libseclaunch.a: pins, beside NVIDIA's root, the root whose SHA-256 is in
 * $SECLAUNCH_TEST_NVGPU_ROOT_SHA256 (64 hex digits; tests/fakecuda/mkgpus.sh
 * writes it), so the fake NVML's GPUs verify end to end. attest/nvgpu_int.h
 * declares the weak hook this defines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../attest/nvgpu_int.h"

bool sl_nvgpu_test_root(uint8_t fp[static 32])
{
	const char *hex = getenv("SECLAUNCH_TEST_NVGPU_ROOT_SHA256");
	if (hex == NULL || strlen(hex) != 64)
		return false;
	for (size_t i = 0; i < 32; i++) {
		unsigned v = 0;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return false;
		fp[i] = (uint8_t)v;
	}
	return true;
}
