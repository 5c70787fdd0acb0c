/* Optional fetch of VCEKs and cert chains from AMD's Key Distribution
 * Service into the collateral directory, which then serves as the cache.
 * Off unless SECLAUNCH_AMD_KDS names the service (https://kdsintf.amd.com;
 * plain http only to a loopback host, for tests). Never retried in a loop:
 * KDS rate-limits, so a 429 fails with its Retry-After and the cache keeps
 * later verifications off the network. VLEKs are not served without CSP
 * credentials and are not fetched. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snp_report.h"
#include "seclaunch/util.h"

#define KDS_MAX (64 * 1024)

struct body {
	uint8_t buf[KDS_MAX];
	size_t len;
	bool too_big;
};

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
	struct body *b = ctx;
	size_t k = size * n;
	if (k > sizeof(b->buf) - b->len) {
		b->too_big = true;
		return 0;
	}
	memcpy(b->buf + b->len, p, k);
	b->len += k;
	return k;
}

static bool allowed_base(const char *u)
{
	return strncmp(u, "https://", 8) == 0 || strncmp(u, "http://127.0.0.1:", 17) == 0 ||
	       strncmp(u, "http://localhost:", 17) == 0;
}

/* (sl_err_curl lives in the launcher: attest/ reports curl errors itself) */
static CURLcode setup(CURL *c, const char *url, struct body *b)
{
	CURLcode cc = curl_easy_setopt(c, CURLOPT_URL, url);
	if (cc == CURLE_OK)
		cc = curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https,http");
	if (cc == CURLE_OK)
		cc = curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	if (cc == CURLE_OK)
		cc = curl_easy_setopt(c, CURLOPT_TIMEOUT, 15L);
	if (cc == CURLE_OK)
		cc = curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	if (cc == CURLE_OK)
		cc = curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	return cc;
}

static sl_err get(const char *url, struct body *b)
{
	sl_err rc = SL_E_ATTEST_UNTRUSTED;
	CURL *c = curl_easy_init();
	long status = 0;
	curl_off_t retry = 0;

	b->len = 0;
	b->too_big = false;
	SL_ENSURE(c != NULL, SL_E_NOMEM, "AMD KDS: curl");
	CURLcode cc = setup(c, url, b);
	SL_ENSURE(cc == CURLE_OK, SL_E_INTERNAL, "AMD KDS: curl option: %s",
	          curl_easy_strerror(cc));
	cc = curl_easy_perform(c);
	SL_ENSURE(!b->too_big, SL_E_ATTEST_UNTRUSTED, "AMD KDS %s: answer over %d bytes", url,
	          KDS_MAX);
	SL_ENSURE(cc == CURLE_OK, SL_E_ATTEST_UNTRUSTED, "AMD KDS %s: %s", url,
	          curl_easy_strerror(cc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (status == 429) {
		curl_easy_getinfo(c, CURLINFO_RETRY_AFTER, &retry);
		SL_FAIL(SL_E_ATTEST_UNTRUSTED, "AMD KDS %s: rate limited (429), retry after %lld s",
		        url, (long long)retry);
	}
	SL_ENSURE(status == 200, SL_E_ATTEST_UNTRUSTED, "AMD KDS %s: HTTP %ld", url, status);
	rc = SL_OK;
out:
	curl_easy_cleanup(c);
	return rc;
}

/* Fetches url into path unless path exists already. */
static sl_err fetch_to(const char *url, const char *path)
{
	struct body *b = NULL;
	sl_err rc = SL_E_ATTEST_UNTRUSTED;

	if (access(path, F_OK) == 0)
		return SL_OK;
	b = malloc(sizeof(*b));
	SL_ENSURE(b != NULL, SL_E_NOMEM, "AMD KDS");
	SL_GUARD(get(url, b));
	rc = sl_file_write_atomic(path, b->buf, b->len, 0644, false);
	if (rc == SL_E_EXISTS) /* another verifier cached it meanwhile */
		rc = SL_OK;
out:
	free(b);
	return rc;
}

static sl_err fetch_product(const char *base, const char *dir, const sl_snp_report *r,
                            enum sl_snp_product p)
{
	sl_err rc = SL_E_ATTEST_UNTRUSTED;
	char hwid[129], url[1024], path[4096];
	sl_snp_tcb t;
	const char *name = sl_snp_product_name(p);

	/* Turin VCEKs are indexed by the first 8 bytes of CHIP_ID */
	sl_hex_encode(r->chip_id, p == SL_SNP_PRODUCT_TURIN ? 8 : 64, hwid);
	sl_snp_tcb_decode(r->reported_tcb, p, &t);
	int n =
	    p == SL_SNP_PRODUCT_TURIN
	        ? snprintf(url, sizeof(url),
	                   "%s/vcek/v1/%s/%s?fmcSPL=%u&blSPL=%u&teeSPL=%u&snpSPL=%u&ucodeSPL=%u",
	                   base, name, hwid, t.fmc, t.bootloader, t.tee, t.snp, t.microcode)
	        : snprintf(url, sizeof(url),
	                   "%s/vcek/v1/%s/%s?blSPL=%u&teeSPL=%u&snpSPL=%u&ucodeSPL=%u", base, name,
	                   hwid, t.bootloader, t.tee, t.snp, t.microcode);
	SL_ENSURE(n > 0 && (size_t)n < sizeof(url), SL_E_USAGE, "SECLAUNCH_AMD_KDS: URL too long");
	n = snprintf(path, sizeof(path), "%s/kds_vcek_%s_%.16s_%016llx.der", dir, name, hwid,
	             (unsigned long long)r->reported_tcb);
	SL_ENSURE(n > 0 && (size_t)n < sizeof(path), SL_E_IO, "collateral path too long");
	SL_GUARD(fetch_to(url, path));
	snprintf(url, sizeof(url), "%s/vcek/v1/%s/cert_chain", base, name);
	n = snprintf(path, sizeof(path), "%s/kds_%s_cert_chain.pem", dir, name);
	SL_ENSURE(n > 0 && (size_t)n < sizeof(path), SL_E_IO, "collateral path too long");
	SL_GUARD(fetch_to(url, path));
	rc = SL_OK;
out:
	return rc;
}

sl_err sl_snp_kds_fetch(const char *dir, const sl_snp_report *r)
{
	const char *base = getenv("SECLAUNCH_AMD_KDS");
	if (base == NULL || base[0] == '\0')
		return SL_OK;
	if (!allowed_base(base) || strlen(base) > 256)
		return sl_err_set(
		    SL_E_USAGE, "SECLAUNCH_AMD_KDS: want an https:// URL (http only to a loopback "
		                "host)");
	enum sl_snp_product p = sl_snp_product_from_cpuid(r);
	if (p != SL_SNP_PRODUCT_UNKNOWN)
		return fetch_product(base, dir, r, p);
	/* a version 2 report does not say its product: KDS answers 404 for a wrong one */
	sl_err rc = fetch_product(base, dir, r, SL_SNP_PRODUCT_MILAN);
	if (rc != SL_OK)
		rc = fetch_product(base, dir, r, SL_SNP_PRODUCT_GENOA);
	return rc;
}
