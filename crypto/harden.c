/* Process hardening at the start of every binary, time and hash helpers. */
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "seclaunch/secret.h"
#include "seclaunch/util.h"

sl_err sl_harden_process(void)
{
	struct rlimit no_core = {0, 0};

	umask(077);
	/* no core dumps, no ptrace attach by same-uid processes */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		return sl_err_set(SL_E_SYSTEM, "prctl(PR_SET_DUMPABLE) failed");
	if (setrlimit(RLIMIT_CORE, &no_core) != 0)
		return sl_err_set(SL_E_SYSTEM, "setrlimit(RLIMIT_CORE) failed");
	return sl_crypto_init();
}

/* SHA256() fetches the implementation from the provider on every call
 * (OpenSSL 3), which costs more than hashing a certificate: fetched once. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

void sl_sha256(const void *p, size_t len, uint8_t out[static SL_SHA256_LEN])
{
	pthread_once(&sha256_once, sha256_fetch);
	if (sha256_md == NULL || EVP_Digest(p, len, out, NULL, sha256_md, NULL) != 1)
		SHA256(p, len, out);
}

void sl_sha384(const void *p, size_t len, uint8_t out[static SL_SHA384_LEN])
{
	SHA384(p, len, out);
}

void sl_binding_compute(const uint8_t nonce[static SL_NONCE_LEN],
                        const uint8_t eph_pub[static SL_EPH_PUB_LEN],
                        const uint8_t policy_digest[static SL_SHA256_LEN],
                        uint8_t out[static SL_BINDING_LEN])
{
	static const char label[] = "seclaunch-bind-v1";
	uint8_t m[sizeof(label) - 1 + SL_NONCE_LEN + SL_EPH_PUB_LEN + SL_SHA256_LEN];
	size_t o = 0;

	memcpy(m + o, label, sizeof(label) - 1);
	o += sizeof(label) - 1;
	memcpy(m + o, nonce, SL_NONCE_LEN);
	o += SL_NONCE_LEN;
	memcpy(m + o, eph_pub, SL_EPH_PUB_LEN);
	o += SL_EPH_PUB_LEN;
	memcpy(m + o, policy_digest, SL_SHA256_LEN);
	o += SL_SHA256_LEN;
	SHA256(m, o, out);
}

void sl_time_rfc3339(time_t t, char *buf, size_t n)
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

sl_err sl_time_parse_rfc3339(const char *s, time_t *out, const char *field)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (end == NULL)
		return sl_err_set(SL_E_INPUT, "%s: '%s' is not an RFC 3339 time", field, s);
	if (*end == '.') { /* fractional seconds: ignored */
		end++;
		while (*end >= '0' && *end <= '9')
			end++;
	}
	if (strcmp(end, "Z") != 0 && strcmp(end, "+00:00") != 0)
		return sl_err_set(SL_E_INPUT, "%s: '%s' must be UTC (end in Z)", field, s);
	*out = timegm(&tm);
	return SL_OK;
}

uint64_t sl_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
