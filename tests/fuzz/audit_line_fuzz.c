/* Fuzz target: the audit log reader. The input is parsed as one line
 * (sl_audit_parse_line) and also read as a whole log file: verified (with a
 * fixed public key, so signed checkpoints in the corpus reach the signature
 * check) and exported in every format without verification. */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "seclaunch/audit.h"
#include "seclaunch/error.h"
#include "seclaunch/secret.h"

/* The public key of the 32-byte seed 0x01 01 ... 01, which made the signed
 * logs in tests/fuzz/corpus/audit_line/. */
static const char fuzz_pub[] = "8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c\n";

static int memfile(const void *p, size_t n, char path[static 32])
{
	int fd = memfd_create("audit-fuzz", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (n > 0 && write(fd, p, n) != (ssize_t)n) {
		close(fd);
		return -1;
	}
	snprintf(path, 32, "/proc/self/fd/%d", fd);
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *devnull;
	static int keyfd = -1;
	static char keypath[32];
	char logpath[32];
	json_t *rec = NULL;

	if (devnull == NULL) {
		if (sl_crypto_init() != SL_OK)
			return 0;
		devnull = fopen("/dev/null", "w");
		keyfd = memfile(fuzz_pub, sizeof(fuzz_pub) - 1, keypath);
		if (devnull == NULL || keyfd < 0)
			return 0;
	}
	if (sl_audit_parse_line(data, size, &rec) == SL_OK)
		json_decref(rec);

	int fd = memfile(data, size, logpath);
	if (fd < 0)
		return 0;
	const char *files[] = {logpath};
	sl_audit_report rep;
	sl_audit_verify_opts vo = {.pubkey_path = keypath, .allow_partial = (size & 1) != 0};
	(void)sl_audit_verify(files, 1, &vo, &rep);
	vo.require_final_checkpoint = true;
	(void)sl_audit_verify(files, 1, &vo, &rep);
	for (int f = SL_AUDIT_FMT_JSONL; f <= SL_AUDIT_FMT_CSV; f++) {
		sl_audit_export_opts eo = {.format = (sl_audit_format)f,
		                           .verify = false,
		                           .event = (size & 2) ? "kms.*" : NULL,
		                           .has_since = (size & 4) != 0,
		                           .since_ms = 1700000000000LL};
		(void)sl_audit_export(files, 1, &eo, devnull, NULL);
	}
	close(fd);
	sl_err_clear();
	return 0;
}
