/* configfs-tsm collection and the SNP certificate table (see snp_tsm.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snp_tsm.h"
#include "seclaunch/buf.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

#define MAX_BLOB (64 * 1024)

/* Creates a fresh entry directory under root (mode 0700) and writes its path. */
static SL_RESULT sl_tsm_entry_create(const char *root, char *path, size_t n)
{
	uint8_t rnd[8];
	char hex[17];

	sl_random(rnd, sizeof(rnd));
	sl_hex_encode(rnd, sizeof(rnd), hex);
	int k = snprintf(path, n, "%s/seclaunch-%s", root, hex);
	if (k < 0 || (size_t)k >= n)
		return sl_err_set(SL_E_ATTEST, "configfs-tsm %s: path too long", root);
	if (mkdir(path, 0700) != 0)
		return sl_err_set(SL_E_ATTEST, "configfs-tsm: cannot create %s: %s", path,
		                  strerror(errno));
	return SL_OK;
}

/* Removes it again (configfs removes the attributes with it). */
static void sl_tsm_entry_remove(const char *path)
{
	(void)rmdir(path);
}

static SL_RESULT attr_path(const char *entry, const char *name, char *buf, size_t n)
{
	int k = snprintf(buf, n, "%s/%s", entry, name);
	if (k < 0 || (size_t)k >= n)
		return sl_err_set(SL_E_ATTEST, "configfs-tsm %s: path too long", entry);
	return SL_OK;
}

static SL_RESULT read_attr(const char *entry, const char *name, size_t max, uint8_t **out,
                           size_t *len)
{
	char p[4096];
	sl_err rc = attr_path(entry, name, p, sizeof(p));
	if (rc != SL_OK)
		return rc;
	rc = sl_file_read(p, max, out, len);
	if (rc != SL_OK)
		return sl_err_wrap(SL_E_ATTEST, "configfs-tsm");
	return SL_OK;
}

static SL_RESULT read_generation(const char *entry, unsigned long *gen)
{
	uint8_t *b = NULL;
	size_t len = 0;
	sl_err rc = read_attr(entry, "generation", 32, &b, &len);
	if (rc != SL_OK)
		return rc;
	char *end = NULL;
	errno = 0;
	*gen = strtoul((const char *)b, &end, 10);
	bool ok = errno == 0 && end != (char *)b && (*end == '\n' || *end == '\0');
	free(b);
	if (!ok)
		return sl_err_set(SL_E_ATTEST, "configfs-tsm %s/generation: not a number", entry);
	return SL_OK;
}

sl_err sl_tsm_entry_report(const char *entry, const char *want_provider,
                           const uint8_t inblob[static 64], uint8_t **out, size_t *outlen,
                           uint8_t **aux, size_t *auxlen)
{
	sl_err rc = SL_E_ATTEST;
	uint8_t *prov = NULL;
	size_t plen = 0;
	unsigned long g0 = 0, g1 = 0;
	char p[4096];
	int fd = -1;

	*out = NULL;
	*outlen = 0;
	if (aux != NULL) {
		*aux = NULL;
		*auxlen = 0;
	}
	SL_GUARD(read_attr(entry, "provider", 64, &prov, &plen));
	while (plen > 0 && prov[plen - 1] == '\n')
		prov[--plen] = '\0';
	SL_ENSURE(strcmp((char *)prov, want_provider) == 0, SL_E_ATTEST,
	          "configfs-tsm %s: provider is '%.32s', want '%s'", entry, (char *)prov,
	          want_provider);
	SL_GUARD(read_generation(entry, &g0));
	SL_GUARD(attr_path(entry, "inblob", p, sizeof(p)));
	fd = open(p, O_WRONLY | O_CLOEXEC | O_CREAT, 0600);
	SL_ENSURE(fd >= 0, SL_E_ATTEST, "configfs-tsm: cannot open %s: %s", p, strerror(errno));
	SL_GUARD(sl_write_all(fd, inblob, 64, p));
	SL_ENSURE(close(fd) == 0, SL_E_ATTEST, "configfs-tsm: writing %s: %s", p, strerror(errno));
	fd = -1;
	SL_GUARD(read_attr(entry, "outblob", MAX_BLOB, out, outlen));
	/* no certificates from the host is not an error: collateral may hold them */
	if (aux != NULL && read_attr(entry, "auxblob", MAX_BLOB, aux, auxlen) != SL_OK) {
		*aux = NULL;
		*auxlen = 0;
	}
	SL_GUARD(read_generation(entry, &g1));
	SL_ENSURE(g1 == g0 + 1, SL_E_ATTEST,
	          "configfs-tsm %s: generation went from %lu to %lu: another writer raced this "
	          "report",
	          entry, g0, g1);
	SL_ENSURE(*outlen > 0, SL_E_ATTEST, "configfs-tsm %s/outblob: empty", entry);
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	free(prov);
	if (rc != SL_OK) {
		free(*out);
		*out = NULL;
		if (aux != NULL) {
			free(*aux);
			*aux = NULL;
		}
	}
	return rc;
}

sl_err sl_tsm_report(const char *root, const char *want_provider, const uint8_t inblob[static 64],
                     uint8_t **out, size_t *outlen, uint8_t **aux, size_t *auxlen)
{
	char entry[4096];
	sl_err rc = sl_tsm_entry_create(root, entry, sizeof(entry));
	if (rc != SL_OK)
		return rc;
	rc = sl_tsm_entry_report(entry, want_provider, inblob, out, outlen, aux, auxlen);
	sl_tsm_entry_remove(entry);
	return rc;
}

/* GUIDs of the GHCB certificate table. Hosts write them in RFC 4122 byte
 * order (as AMD's tools, libuuid's uuid_parse, do); the mixed-endian
 * (UEFI) form is accepted as well. */
static const struct {
	const char *name;
	uint8_t guid[16];
} cert_guids[] = {
    /* 63da758d-e664-4564-adc5-f4b93be8accd */
    {"vcek",
     {0x63, 0xda, 0x75, 0x8d, 0xe6, 0x64, 0x45, 0x64, 0xad, 0xc5, 0xf4, 0xb9, 0x3b, 0xe8, 0xac,
      0xcd}},
    {"vcek",
     {0x8d, 0x75, 0xda, 0x63, 0x64, 0xe6, 0x64, 0x45, 0xad, 0xc5, 0xf4, 0xb9, 0x3b, 0xe8, 0xac,
      0xcd}},
    /* a8074bc2-a25a-483e-aae6-39c045a0b8a1 */
    {"vlek",
     {0xa8, 0x07, 0x4b, 0xc2, 0xa2, 0x5a, 0x48, 0x3e, 0xaa, 0xe6, 0x39, 0xc0, 0x45, 0xa0, 0xb8,
      0xa1}},
    {"vlek",
     {0xc2, 0x4b, 0x07, 0xa8, 0x5a, 0xa2, 0x3e, 0x48, 0xaa, 0xe6, 0x39, 0xc0, 0x45, 0xa0, 0xb8,
      0xa1}},
    /* 4ab7b379-bbac-4fe4-a02f-05aef327c782 */
    {"ask",
     {0x4a, 0xb7, 0xb3, 0x79, 0xbb, 0xac, 0x4f, 0xe4, 0xa0, 0x2f, 0x05, 0xae, 0xf3, 0x27, 0xc7,
      0x82}},
    {"ask",
     {0x79, 0xb3, 0xb7, 0x4a, 0xac, 0xbb, 0xe4, 0x4f, 0xa0, 0x2f, 0x05, 0xae, 0xf3, 0x27, 0xc7,
      0x82}},
    /* c0b406a4-a803-4952-9743-3fb6014cd0ae */
    {"ark",
     {0xc0, 0xb4, 0x06, 0xa4, 0xa8, 0x03, 0x49, 0x52, 0x97, 0x43, 0x3f, 0xb6, 0x01, 0x4c, 0xd0,
      0xae}},
    {"ark",
     {0xa4, 0x06, 0xb4, 0xc0, 0x03, 0xa8, 0x52, 0x49, 0x97, 0x43, 0x3f, 0xb6, 0x01, 0x4c, 0xd0,
      0xae}},
};

sl_err sl_snp_cert_table_to_json(const uint8_t *p, size_t len, json_t *certs)
{
	sl_err rc = SL_E_ATTEST_FORMAT;
	sl_reader r;
	char *b64 = NULL;
	static const uint8_t zero[16] = {0};

	sl_reader_init(&r, p, len, "SNP certificate table");
	for (int n = 0;; n++) {
		const uint8_t *guid = NULL;
		uint32_t off = 0, clen = 0;
		SL_ENSURE(n < 64, SL_E_ATTEST_FORMAT,
		          "SNP certificate table: more than 64 entries");
		SL_GUARD(sl_read_view(&r, 16, &guid, "cert_table.guid"));
		SL_GUARD(sl_read_u32le(&r, &off, "cert_table.offset"));
		SL_GUARD(sl_read_u32le(&r, &clen, "cert_table.length"));
		if (memcmp(guid, zero, 16) == 0 && off == 0 && clen == 0)
			break;
		SL_ENSURE(off <= len && clen <= len - off, SL_E_ATTEST_FORMAT,
		          "SNP certificate table: entry %d (offset %u, length %u) outside the %zu "
		          "bytes",
		          n, off, clen, len);
		for (size_t i = 0; i < sizeof(cert_guids) / sizeof(cert_guids[0]); i++) {
			if (memcmp(guid, cert_guids[i].guid, 16) != 0)
				continue;
			sl_reader cr;
			const uint8_t *der = NULL;
			sl_reader_init(&cr, p, len, "SNP certificate table");
			SL_GUARD(sl_read_skip(&cr, off, "cert_table entry"));
			SL_GUARD(sl_read_view(&cr, clen, &der, "cert_table entry"));
			SL_GUARD(sl_b64_encode(der, clen, &b64));
			SL_ENSURE(
			    json_object_set_new(certs, cert_guids[i].name, json_string(b64)) == 0,
			    SL_E_NOMEM, "SNP certificate table");
			free(b64);
			b64 = NULL;
		}
	}
	rc = SL_OK;
out:
	free(b64);
	if (rc == SL_E_FORMAT)
		rc = sl_err_wrap(SL_E_ATTEST_FORMAT, "auxblob");
	return rc;
}
