/* Optional fetch of VCEKs and cert chains from AMD's Key Distribution
 * Service into the collateral directory, which then serves as the cache.
 * Off unless SECLAUNCH_AMD_KDS names the service (https://kdsintf.amd.com;
 * plain http only to a loopback host, for tests). Never retried in a loop:
 * KDS rate-limits, so a 429 fails with its Retry-After and the cache keeps
 * later verifications off the network. VLEKs are not served without CSP
 * credentials and are not fetched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snp_report.h"
#include "seclaunch/http.h"
#include "seclaunch/util.h"

#define KDS_MAX (64 * 1024)

static bool allowed_base(const char *u)
{
	return strncmp(u, "https://", 8) == 0 || strncmp(u, "http://127.0.0.1:", 17) == 0 ||
	       strncmp(u, "http://localhost:", 17) == 0;
}

/* Fetches url into path unless path exists already. */
static SL_RESULT fetch_to(const char *url, const char *path)
{
	sl_err rc = SL_E_ATTEST_UNTRUSTED;
	sl_http_resp r = {0};
	const sl_http_req req = {
	    .what = "AMD KDS",
	    .url = url,
	    .protocols = "https,http", /* http only to loopback: allowed_base */
	    .total_timeout_ms = 15000,
	    .max_bytes = KDS_MAX,
	    .fail = SL_E_ATTEST_UNTRUSTED,
	};

	if (access(path, F_OK) == 0)
		return SL_OK;
	SL_GUARD(sl_http_fetch(&req, &r));
	rc = sl_file_write_atomic(path, r.body.p, r.body.len, 0644, false);
	if (rc == SL_E_EXISTS) /* another verifier cached it meanwhile */
		rc = SL_OK;
out:
	sl_http_resp_free(&r);
	return rc;
}

static SL_RESULT fetch_product(const char *base, const char *dir, const sl_snp_report *r,
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
