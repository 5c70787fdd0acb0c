/* --stage gpu and --gpu-decrypt: a host stage that the job uploads itself,
 * in its own CUDA context, with libseclaunch_data.so. Needs no CUDA here:
 * the hand-off is what SECLAUNCH_DATA says about the host stage (its
 * "gpu" member, and for --gpu-decrypt the SLD geometry), kept with the
 * stage as data for sl_stage_describe. See include/seclaunch/stage.h. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "seclaunch/secret.h"
#include "seclaunch/sld.h"
#include "seclaunch/util.h"
#include "stage_int.h"

#define SL_GPU_KEY_AREA 4096 /* --gpu-decrypt: file key, zeros, then the SLD file */

/* $SECLAUNCH_DATA_LIB, else beside the installed or the built seclaunch. */
sl_err sl_stage_gpu_library(char *out, size_t n)
{
	sl_err rc = SL_E_GPU;
	const char *env = getenv("SECLAUNCH_DATA_LIB");
	char exe[PATH_MAX];
	/* installed; a build tree (bin/ beside build/); a build under build/
	 * with its own bin/ (make asan: build/asan/bin, build/asan/jobside) */
	static const char *const rel[] = {"/../lib/seclaunch/libseclaunch_data.so",
	                                  "/../build/jobside/libseclaunch_data.so",
	                                  "/../jobside/libseclaunch_data.so"};
	if (env != NULL && *env != '\0') {
		SL_ENSURE(realpath(env, out) != NULL && strlen(out) < n, SL_E_GPU,
		          "SECLAUNCH_DATA_LIB=%s: no such library", env);
		return SL_OK;
	}
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	SL_ENSURE(len > 0, SL_E_GPU, "finding libseclaunch_data.so: /proc/self/exe unreadable");
	exe[len] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash != NULL)
		*slash = '\0';
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char cand[PATH_MAX + 64];
		snprintf(cand, sizeof(cand), "%s%s", exe, rel[i]);
		if (realpath(cand, out) != NULL && access(out, R_OK) == 0)
			return SL_OK;
	}
	SL_FAIL(SL_E_GPU,
	        "the job-side GPU library libseclaunch_data.so is not installed beside %s "
	        "(set SECLAUNCH_DATA_LIB, or use --stage host)",
	        exe);
out:
	return rc;
}

/* s's hand-off: the members before "gpu" (the SLD geometry; may be NULL),
 * then "gpu": {"device", "library"}. Takes sld. */
static SL_RESULT handoff_set(sl_stage *s, const sl_gpu_info *gpu, json_t *sld)
{
	sl_err rc = SL_E_NOMEM;
	char library[PATH_MAX];
	json_t *o = sld != NULL ? sld : json_object(), *g = NULL;

	SL_ENSURE(o != NULL, SL_E_NOMEM, "dataset %s: GPU hand-off", s->dataset_id);
	SL_GUARD(sl_stage_gpu_library(library, sizeof(library)));
	g = json_pack("{s:i, s:s}", "device", gpu->device, "library", library);
	SL_ENSURE(g != NULL && json_object_set_new(o, "gpu", g) == 0, SL_E_NOMEM,
	          "dataset %s: GPU hand-off", s->dataset_id);
	json_decref(s->handoff);
	s->handoff = o;
	o = NULL;
	rc = SL_OK;
out:
	json_decref(o);
	return rc;
}

sl_err sl_stage_gpu_handoff(sl_stage *s, const sl_gpu_info *gpu)
{
	sl_err rc = SL_E_GPU;
	SL_ENSURE(gpu->usable && !gpu->devtools && !gpu->needs_ready, SL_E_GPU,
	          "dataset %s: no usable GPU: %s", s->dataset_id, gpu->reason);
	rc = handoff_set(s, gpu, NULL);
out:
	return rc;
}

/* --gpu-decrypt: the entry says "sld", with the plaintext's size and what
 * the job's decryptor needs of the header (checked here already). */
static json_t *sld_geometry(const sl_sld_header *h, uint64_t file_size)
{
	uint8_t digest[32];
	char hex[65];
	sl_sld_header_digest(h, digest);
	sl_hex_encode(digest, sizeof(digest), hex);
	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:s}", "kind", "sld", "size",
	                 (json_int_t)sl_sld_header_plaintext_len(h), "file_size",
	                 (json_int_t)file_size, "header_len", (json_int_t)sl_sld_header_len(h),
	                 "chunk_size", (json_int_t)sl_sld_header_chunk_size(h), "chunk_count",
	                 (json_int_t)sl_sld_header_chunk_count(h), "header_sha256", hex);
}

sl_err sl_stage_sld_gpu_decrypt(int fd, const char *name, sl_secret *dek, const sl_gpu_info *gpu,
                                bool force_memfd, int (*interrupted)(void), sl_stage **out)
{
	sl_err rc = SL_E_GPU;
	sl_sld_reader *r = NULL;
	sl_secret *key = NULL;
	sl_stage *s = NULL;
	uint8_t *buf = NULL, zeros[SL_GPU_KEY_AREA] = {0};
	const size_t bufsz = (size_t)4 << 20;

	*out = NULL;
	SL_ENSURE(gpu->usable && !gpu->devtools && !gpu->needs_ready, SL_E_GPU,
	          "%s: --gpu-decrypt: no usable GPU: %s", name, gpu->reason);
	/* the key check, the header MAC and the file's size, as for host staging */
	SL_GUARD(sl_sld_open(fd, name, dek, &r));
	const sl_sld_header *h = sl_sld_reader_header(r);
	SL_ENSURE(sl_sld_header_aead(h) == SL_AEAD_AES_256_GCM, SL_E_INPUT,
	          "%s: --gpu-decrypt needs an AES-256-GCM dataset (this one is %s)", name,
	          sl_aead_name(sl_sld_header_aead(h)));
	uint64_t fsize = sl_sld_header_file_size(h);
	SL_GUARD(sl_stage_host_new(sl_sld_header_dataset_id(h), SL_GPU_KEY_AREA + fsize,
	                           force_memfd, &s));
	SL_GUARD(sl_sld_export_file_key(r, &key));
	SL_GUARD(sl_stage_write(s, 0, sl_secret_data(key), sl_secret_len(key)));
	SL_GUARD(
	    sl_stage_write(s, sl_secret_len(key), zeros, SL_GPU_KEY_AREA - sl_secret_len(key)));
	buf = malloc(bufsz);
	SL_ENSURE(buf != NULL, SL_E_NOMEM, "%s: staging ciphertext", name);
	for (uint64_t off = 0; off < fsize;) {
		size_t want = fsize - off < bufsz ? (size_t)(fsize - off) : bufsz;
		ssize_t got = pread(fd, buf, want, (off_t)off);
		SL_ENSURE(got > 0, SL_E_IO, "%s: reading at %llu: %s", name,
		          (unsigned long long)off,
		          got < 0 ? strerror(errno) : "unexpected end of file");
		SL_GUARD(sl_stage_write(s, SL_GPU_KEY_AREA + off, buf, (size_t)got));
		off += (uint64_t)got;
		int sig = interrupted != NULL ? interrupted() : 0;
		SL_ENSURE(sig == 0, SL_E_SYSTEM, "interrupted by signal %d", sig);
	}
	SL_GUARD(sl_stage_seal(s));
	json_t *sld = sld_geometry(h, sl_stage_size(s));
	SL_ENSURE(sld != NULL, SL_E_NOMEM, "%s: GPU hand-off", name);
	SL_GUARD(handoff_set(s, gpu, sld));
	*out = s;
	s = NULL;
	rc = SL_OK;
out:
	sl_stage_free(s); /* wipes the key area too */
	sl_secret_free(key);
	sl_sld_close(r);
	free(buf);
	return rc;
}
