/* SLD v1 decryption: open (key check, header MAC, size), random access to a
 * chunk, and in-order parallel decryption to a sink that only ever sees
 * authenticated bytes. The ciphertext comes from one of two sources behind
 * the same checks and the same chunk opening: a file (pread, through a
 * bounce buffer) or the caller's private memory (read in place). */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "seclaunch/util.h"
#include "sld_internal.h"

/* Where the ciphertext is: fd >= 0, a file (pread, or a mapping under a
 * read lease); else mem, len
 * bytes of the caller's memory (sl_sld_open_mem). */
struct src {
	int fd;
	const uint8_t *mem;
	uint64_t len;
};

struct sl_sld_reader {
	struct src src;
	char name[256];
	sl_sld_header *h;
	sl_secret *file_key;
	/* read lease held: chunks are authenticated and decrypted straight
	 * from a mapping of the file (see take_lease) */
	bool leased;
	atomic_bool lease_lost;
	int lfd; /* the reader's own open of the file, holding the lease */
};

static SL_RESULT check_size(const sl_sld_reader *r);

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/* Reading a chunk with pread copies it out of the page cache: about a
 * third of a thread's time next to the AEAD. Decrypting from a mapping of
 * the file instead is safe only while nobody can change the bytes between
 * the tag's GHASH and the CTR decryption, which read them separately: a
 * writer who knew a chunk's plaintext could otherwise make its own
 * plaintext pass the tag. A read lease gives exactly that: the kernel
 * grants it only while no descriptor anywhere has the file open for
 * writing (a shared writable mapping holds one), and an open for writing
 * or a truncate later blocks until the holder releases it (or
 * /proc/sys/fs/lease-break-time runs out) and marks it broken at once.
 * Each chunk is checked for the lease after it was authenticated and
 * before its plaintext is used: a lease still held then means no write
 * can have happened; a broken one means the chunk is discarded, the lease
 * released, and the file read with pread from there on (the writer waits
 * one chunk at most). Only on local filesystems whose every writer goes
 * through this kernel's inode (a network, FUSE or overlay filesystem can
 * change bytes without an open here). The break is signalled with SIGURG,
 * whose default is to be ignored; a process that handles SIGURG itself
 * reads with pread, as does one holding the file open for writing. */
static bool lease_fs(int fd)
{
	struct statfs sf;
	if (fstatfs(fd, &sf) != 0)
		return false;
	switch ((unsigned long)sf.f_type) {
	case EXT4_SUPER_MAGIC: /* also ext2 and ext3 */
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
		return true;
	default:
		return false;
	}
}

/* The lease is taken on an open file description of the reader's own
 * (the same inode, opened again through /proc/self/fd): a lease belongs to
 * a description, and one shared with another reader could be released or
 * taken again by it between this reader's checks. -1: no lease. */
static int take_lease(int fd)
{
	struct sigaction sa;
	struct stat a, b;
	char path[48];
	int lfd;

	if (!lease_fs(fd) || sigaction(SIGURG, NULL, &sa) != 0 || (sa.sa_flags & SA_SIGINFO) != 0 ||
	    (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN))
		return -1;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	lfd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY); /* lint: trusted path (our own fd) */
	if (lfd < 0)
		return -1;
	if (fstat(fd, &a) != 0 || fstat(lfd, &b) != 0 || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino || !S_ISREG(b.st_mode) || fcntl(lfd, F_SETSIG, SIGURG) != 0 ||
	    fcntl(lfd, F_SETLEASE, F_RDLCK) != 0) {
		close(lfd);
		return -1;
	}
	return lfd;
}

/* True while the read lease is unbroken; once it is not, it is released
 * so that the writer goes on, and every later chunk is read with pread. */
static bool lease_held(sl_sld_reader *r)
{
	if (!r->leased || atomic_load(&r->lease_lost))
		return false;
	if (fcntl(r->lfd, F_GETLEASE) == F_RDLCK)
		return true;
	if (!atomic_exchange(&r->lease_lost, true))
		(void)fcntl(r->lfd, F_SETLEASE, F_UNLCK);
	return false;
}

bool sl_sld_reader_mapped(const sl_sld_reader *r)
{
	return r->leased && !atomic_load(&r->lease_lost);
}

/* A whole decryption holds the lease from its start to its end, no longer:
 * a reader kept open between reads (random access) never makes a writer
 * wait. The size is checked again under the lease: from then on nobody
 * can shrink the file under a mapping of it. */
static SL_RESULT lease_begin(sl_sld_reader *r)
{
	r->lfd = r->h->aead == SL_AEAD_AES_256_GCM && r->src.fd >= 0 ? take_lease(r->src.fd) : -1;
	r->leased = r->lfd >= 0;
	atomic_store(&r->lease_lost, false);
	sl_err rc = r->leased ? check_size(r) : SL_OK;
	if (rc != SL_OK)
		atomic_store(&r->lease_lost, true);
	return rc;
}

/* Closing the reader's own description releases its lease. */
static void lease_end(sl_sld_reader *r)
{
	if (r->lfd >= 0)
		close(r->lfd);
	r->lfd = -1;
}

static SL_RESULT check_size(const sl_sld_reader *r)
{
	sl_err rc = SL_E_IO;
	const sl_sld_header *h = r->h;
	struct stat st;
	uint64_t want = sl_sld_header_file_size(h), have = r->src.len;

	if (r->src.fd >= 0) {
		SL_ENSURE(fstat(r->src.fd, &st) == 0, SL_E_IO, "%s: stat: %s", r->name,
		          strerror(errno));
		SL_ENSURE(S_ISREG(st.st_mode), SL_E_INPUT,
		          "%s: not a regular file (decryption reads chunks at their offsets)",
		          r->name);
		have = (uint64_t)st.st_size;
	}
	if (have < want) {
		uint64_t k = have > h->len
		                 ? (have - h->len) / ((uint64_t)h->chunk_size + SL_AEAD_TAG_LEN)
		                 : 0;
		SL_FAIL(SL_E_TRUNCATED,
		        "%s: truncated: the file has %llu bytes, its header says %llu; "
		        "chunk %llu "
		        "of %llu is incomplete or missing",
		        r->name, (unsigned long long)have, (unsigned long long)want,
		        (unsigned long long)k, (unsigned long long)h->chunk_count);
	}
	SL_ENSURE(have == want, SL_E_INTEGRITY,
	          "%s: extended: %llu unexpected bytes after the last chunk (chunk "
	          "%llu); the "
	          "header says the file ends at %llu bytes",
	          r->name, (unsigned long long)(have - want),
	          (unsigned long long)(h->chunk_count - 1), (unsigned long long)want);
	rc = SL_OK;
out:
	return rc;
}

/* The header at the source's start (the same parser and errors for both). */
static SL_RESULT read_header(const struct src *src, const char *name, sl_sld_header **out)
{
	sl_err rc;
	if (src->fd >= 0)
		return sl_sld_header_read_fd(src->fd, name, out);
	rc = sl_sld_header_parse(
	    src->mem, src->len < SL_SLD_HEADER_MAX ? (size_t)src->len : SL_SLD_HEADER_MAX, out);
	if (rc != SL_OK)
		sl_err_wrap(rc, "%s", name);
	return rc;
}

static SL_RESULT reader_open(const struct src *src, const char *name, sl_secret *dek,
                             sl_sld_reader **out)
{
	sl_err rc = SL_E_NOMEM;
	struct sld_keys keys = {0};
	uint8_t mac[SLD_MAC_LEN];
	sl_sld_reader *r = calloc(1, sizeof(*r));

	SL_ENSURE(r != NULL, SL_E_NOMEM, "allocating an SLD reader");
	r->src = *src;
	r->lfd = -1;
	snprintf(r->name, sizeof(r->name), "%s", name);
	SL_GUARD(read_header(src, name, &r->h));
	SL_GUARD(sld_derive_keys(dek, r->h->salt, &keys));
	SL_ENSURE(sl_ct_eq(keys.key_check, r->h->key_check, SLD_KEY_CHECK_LEN), SL_E_WRONG_KEY,
	          "%s: wrong key: this key did not encrypt this file "
	          "(header.key_check does not "
	          "match; or header.salt / header.key_check were altered)",
	          name);
	SL_GUARD(sl_hmac_sha256(sl_secret_data(keys.mac_key), 32, r->h->raw,
	                        r->h->len - SLD_MAC_LEN, mac));
	SL_ENSURE(sl_ct_eq(mac, r->h->mac, SLD_MAC_LEN), SL_E_INTEGRITY,
	          "%s: header authentication failed: the header was altered "
	          "(header.header_mac "
	          "does not match)",
	          name);
	SL_GUARD(check_size(r));
	/* workers read disjoint chunks out of order: ask for wide readahead */
	if (src->fd >= 0)
		(void)posix_fadvise(src->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	r->file_key = keys.file_key;
	keys.file_key = NULL;
	*out = r;
	r = NULL;
	rc = SL_OK;
out:
	sld_keys_free(&keys);
	sl_sld_close(r);
	return rc;
}

sl_err sl_sld_open(int fd, const char *name, sl_secret *dek, sl_sld_reader **out)
{
	struct src src = {.fd = fd};
	if (fd < 0)
		return sl_err_set(SL_E_INTERNAL, "%s: no descriptor", name);
	return reader_open(&src, name, dek, out);
}

sl_err sl_sld_open_mem(const uint8_t *base, size_t len, const char *name, sl_secret *dek,
                       sl_sld_reader **out)
{
	struct src src = {.fd = -1, .mem = base, .len = len};
	if (base == NULL && len > 0)
		return sl_err_set(SL_E_INTERNAL, "%s: no memory", name);
	if (base == NULL)
		src.mem = (const uint8_t *)""; /* an empty buffer: parsed as truncated */
	return reader_open(&src, name, dek, out);
}

sl_err sl_sld_export_file_key(const sl_sld_reader *r, sl_secret **out)
{
	return sl_secret_from(sl_secret_data(r->file_key), sl_secret_len(r->file_key), out);
}

void sl_sld_close(sl_sld_reader *r)
{
	if (r == NULL)
		return;
	sl_secret_free(r->file_key);
	sl_sld_header_free(r->h);
	free(r);
}

const sl_sld_header *sl_sld_reader_header(const sl_sld_reader *r)
{
	return r->h;
}

/* Ciphertext is read in pieces of this size into a per-worker bounce
 * buffer and decrypted from there straight to its destination: the piece is
 * still in the core's cache when it is decrypted, and the kernel's copy out
 * of the page cache writes into lines that are already cached. Measured on
 * a 2-core Zen 4 guest, 1 GiB, 2 threads: kernel time 185 ms with whole
 * 4 MiB chunks read at once, 148 / 142 / 140 ms with 256 KiB / 512 KiB /
 * 1 MiB pieces (1 MiB also had the best wall time). */
#define PIECE ((size_t)1 << 20)
#define BOUNCE_LEN (PIECE + SL_AEAD_TAG_LEN)

/* Reads exactly the bytes iov describes at off (preadv, resumed after
 * short reads); the file shrinking under us is SL_E_TRUNCATED. */
static SL_RESULT read_exact(sl_sld_reader *r, uint64_t i, struct iovec *iov, int n, off_t off)
{
	sl_err rc = SL_E_IO;

	while (n > 0) {
		ssize_t got = preadv(r->src.fd, iov, n, off);
		if (got < 0 && errno == EINTR)
			continue;
		SL_ENSURE(got >= 0, SL_E_IO, "%s: chunk %llu: read: %s", r->name,
		          (unsigned long long)i, strerror(errno));
		SL_ENSURE(got > 0, SL_E_TRUNCATED, "%s: chunk %llu: truncated (the file shrank)",
		          r->name, (unsigned long long)i);
		off += got;
		while (n > 0 && (size_t)got >= iov->iov_len) {
			got -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + got;
			iov->iov_len -= (size_t)got;
		}
	}
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT chunk_failed(const sl_sld_reader *r, uint64_t i)
{
	return sl_err_set(SL_E_INTEGRITY,
	                  "%s: chunk %llu of %llu: authentication failed (the chunk was altered, "
	                  "moved or taken from another file)",
	                  r->name, (unsigned long long)i, (unsigned long long)r->h->chunk_count);
}

/* AES-256-GCM through the bounce buffer: each byte of ciphertext is read
 * once into private memory and authenticated and decrypted from there. */
static SL_RESULT chunk_open_streamed(sl_sld_reader *r, sl_aead *a, uint64_t i, uint8_t *dst,
                                     size_t plen, uint8_t *bounce)
{
	sl_err rc = SL_E_IO;
	const sl_sld_header *h = r->h;
	off_t off = (off_t)(h->len + i * ((uint64_t)h->chunk_size + SL_AEAD_TAG_LEN));
	uint8_t nonce[SL_AEAD_MAX_NONCE_LEN], aad[SLD_AAD_LEN];
	size_t done = 0;

	sld_chunk_nonce(h->aead, i, nonce);
	sld_chunk_aad(h->digest, i, i + 1 == h->chunk_count, aad);
	SL_GUARD(sld_gcm_open_begin(a, nonce, aad, sizeof(aad)));
	for (;;) {
		size_t k = plen - done < PIECE ? plen - done : PIECE;
		bool last = done + k == plen;
		struct iovec iov = {.iov_base = bounce,
		                    .iov_len = k + (last ? SL_AEAD_TAG_LEN : 0)};
		SL_GUARD(read_exact(r, i, &iov, 1, off + (off_t)done));
		if (k > 0)
			SL_GUARD(sld_gcm_open_update(a, bounce, k, dst + done));
		done += k;
		if (last) {
			rc = sld_gcm_open_final(a, bounce + k);
			break;
		}
	}
	if (rc == SL_E_INTEGRITY)
		rc = chunk_failed(r, i);
out:
	if (rc != SL_OK && plen > 0)
		sl_wipe(dst, plen); /* decrypted before its tag was checked */
	return rc;
}

/* AES-256-GCM straight from a mapping of the chunk, under the read lease
 * (take_lease). *reread: the mapping could not be made or filled (an I/O
 * error shows here rather than as SIGBUS, MADV_POPULATE_READ) or the lease
 * broke before the verdict; dst then holds no plaintext and the caller
 * reads the chunk with pread. */
static SL_RESULT chunk_open_mapped(sl_sld_reader *r, sl_aead *a, uint64_t i, uint8_t *dst,
                                   size_t plen, bool *reread)
{
	sl_err rc = SL_E_IO;
	const sl_sld_header *h = r->h;
	uint64_t off = h->len + i * ((uint64_t)h->chunk_size + SL_AEAD_TAG_LEN);
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), at = off / page * page;
	size_t len = (size_t)(off - at) + plen + SL_AEAD_TAG_LEN;
	uint8_t nonce[SL_AEAD_MAX_NONCE_LEN], aad[SLD_AAD_LEN];
	uint8_t *m = mmap(NULL, len, PROT_READ, MAP_SHARED, r->lfd, (off_t)at);

	*reread = true;
	if (m == MAP_FAILED)
		return SL_E_IO;
	if (madvise(m, len, MADV_POPULATE_READ) != 0)
		goto out;
	const uint8_t *c = m + (off - at);
	sld_chunk_nonce(h->aead, i, nonce);
	sld_chunk_aad(h->digest, i, i + 1 == h->chunk_count, aad);
	SL_GUARD(sld_gcm_open_begin(a, nonce, aad, sizeof(aad)));
	if (plen > 0)
		SL_GUARD(sld_gcm_open_update(a, c, plen, dst));
	rc = sld_gcm_open_final(a, c + plen);
	/* a verdict counts only if no write can have come before it */
	*reread = !lease_held(r);
	if (!*reread && rc == SL_E_INTEGRITY)
		rc = chunk_failed(r, i);
out:
	if (rc != SL_OK && plen > 0)
		sl_wipe(dst, plen);
	(void)munmap(m, len);
	return rc;
}

/* The whole chunk read at once into dst (and its tag beside it), then
 * opened in place: XChaCha20-Poly1305, which has no streaming form, and
 * callers without a bounce buffer. */
static SL_RESULT chunk_open_whole(sl_sld_reader *r, sl_aead *a, uint64_t i, uint8_t *dst,
                                  size_t plen)
{
	sl_err rc = SL_E_IO;
	const sl_sld_header *h = r->h;
	off_t off = (off_t)(h->len + i * ((uint64_t)h->chunk_size + SL_AEAD_TAG_LEN));
	uint8_t nonce[SL_AEAD_MAX_NONCE_LEN], aad[SLD_AAD_LEN], tag[SL_AEAD_TAG_LEN];
	struct iovec iov[2] = {{.iov_base = dst, .iov_len = plen},
	                       {.iov_base = tag, .iov_len = sizeof(tag)}};

	SL_GUARD(read_exact(r, i, plen > 0 ? iov : iov + 1, plen > 0 ? 2 : 1, off));
	sld_chunk_nonce(h->aead, i, nonce);
	sld_chunk_aad(h->digest, i, i + 1 == h->chunk_count, aad);
	/* sl_aead_open wipes dst itself when the tag does not match */
	rc = sl_aead_open(a, nonce, aad, sizeof(aad), dst, plen, tag, dst);
	if (rc == SL_E_INTEGRITY)
		rc = chunk_failed(r, i);
out:
	return rc;
}

/* Chunk i authenticated and decrypted straight from the caller's memory
 * into dst, one pass, no copy: the ciphertext is read where it lies.
 *
 * Why memory needs no bounce while a file does: AES-GCM reads the
 * ciphertext twice (GHASH for the tag, CTR for the plaintext), and a file
 * can have another writer (a shared mapping, another process with the file
 * open) that changes bytes between the two reads, so that the tag checks
 * one text and dst receives another; the fd path therefore copies each
 * piece once into private memory and works only on that copy, unless a
 * read lease proves there is no writer (take_lease). The memory
 * of sl_sld_open_mem is the caller's own (stream staging: a memory file
 * the process created, never passed to the job or anyone else, mapped
 * only by it, and written only by a fetch that has finished before the
 * reader opens it): no one else can write it, so both reads see the same
 * bytes. dst is private until the call returns (as for the fd path), and
 * sl_aead_open wipes it when the tag does not match. */
static SL_RESULT chunk_open_mem(sl_sld_reader *r, sl_aead *a, uint64_t i, uint8_t *dst, size_t plen)
{
	sl_err rc = SL_E_INTERNAL;
	const sl_sld_header *h = r->h;
	uint64_t off = h->len + i * ((uint64_t)h->chunk_size + SL_AEAD_TAG_LEN);
	uint8_t nonce[SL_AEAD_MAX_NONCE_LEN], aad[SLD_AAD_LEN];

	/* check_size held the length to the header's file size at open */
	SL_ENSURE(off + plen + SL_AEAD_TAG_LEN <= r->src.len, SL_E_INTERNAL,
	          "%s: chunk %llu lies past the end of memory", r->name, (unsigned long long)i);
	sld_chunk_nonce(h->aead, i, nonce);
	sld_chunk_aad(h->digest, i, i + 1 == h->chunk_count, aad);
	rc = sl_aead_open(a, nonce, aad, sizeof(aad), r->src.mem + off, plen,
	                  r->src.mem + off + plen, dst);
	if (rc == SL_E_INTEGRITY)
		rc = chunk_failed(r, i);
out:
	return rc;
}

/* Reads, authenticates and decrypts chunk i into dst (its plaintext length
 * in bytes). On failure dst holds no plaintext. */
static SL_RESULT chunk_open(sl_sld_reader *r, sl_aead *a, uint64_t i, uint8_t *dst, uint8_t *bounce,
                            size_t *len)
{
	size_t plen = sl_sld_chunk_plain_len(r->h, i);
	bool gcm = sl_aead_id_of(a) == SL_AEAD_AES_256_GCM, reread = true;
	sl_err rc = SL_OK;
	if (r->src.fd < 0) {
		rc = chunk_open_mem(r, a, i, dst, plen);
		reread = false;
	} else if (gcm && lease_held(r)) {
		rc = chunk_open_mapped(r, a, i, dst, plen, &reread);
	}
	if (reread)
		rc = bounce != NULL && gcm ? chunk_open_streamed(r, a, i, dst, plen, bounce)
		                           : chunk_open_whole(r, a, i, dst, plen);
	if (rc == SL_OK)
		*len = plen;
	return rc;
}

sl_err sl_sld_read_chunk(sl_sld_reader *r, uint64_t i, uint8_t *buf, size_t cap, size_t *len)
{
	sl_err rc = SL_E_INPUT;
	sl_aead *a = NULL;

	SL_ENSURE(i < r->h->chunk_count, SL_E_INPUT, "%s: chunk %llu: the file has %llu chunks",
	          r->name, (unsigned long long)i, (unsigned long long)r->h->chunk_count);
	SL_ENSURE(cap >= (size_t)r->h->chunk_size + SL_AEAD_TAG_LEN, SL_E_INTERNAL,
	          "chunk buffer of %zu bytes; %zu needed", cap,
	          (size_t)r->h->chunk_size + SL_AEAD_TAG_LEN);
	SL_GUARD(sl_aead_new(r->h->aead, sl_secret_data(r->file_key), &a));
	SL_GUARD(chunk_open(r, a, i, buf, NULL, len));
	rc = SL_OK;
out:
	sl_aead_free(a);
	return rc;
}

struct dec {
	sl_sld_reader *r;
	sl_sld_sink_fn sink;
	void *sink_ctx;
	sl_sld_progress_fn progress;
	void *progress_ctx;
	/* sl_sld_decrypt_into */
	uint8_t *dst;
	const sl_sld_into_ops *into;
	uint64_t done;
};

/* Per worker: its AEAD context and its bounce buffer (ciphertext only). */
struct dec_worker {
	sl_aead *a;
	uint8_t *bounce;
};

static SL_RESULT dec_worker_init(void *ctx, void **ws)
{
	sl_err rc = SL_E_NOMEM;
	struct dec *d = ctx;
	struct dec_worker *w = calloc(1, sizeof(*w));

	SL_ENSURE(w != NULL, SL_E_NOMEM, "allocating a decryption worker");
	SL_GUARD(sl_aead_new(d->r->h->aead, sl_secret_data(d->r->file_key), &w->a));
	/* memory is read in place: a bounce only for a file */
	if (d->r->h->aead == SL_AEAD_AES_256_GCM && d->r->src.fd >= 0) {
		SL_ENSURE(posix_memalign((void **)&w->bounce, 4096, BOUNCE_LEN) == 0, SL_E_NOMEM,
		          "allocating a read buffer");
		memset(w->bounce, 0, BOUNCE_LEN); /* fault it in before the timed work */
	}
	*ws = w;
	w = NULL;
	rc = SL_OK;
out:
	if (w != NULL) {
		sl_aead_free(w->a);
		free(w);
	}
	return rc;
}

static void dec_worker_fini(void *ctx, void *ws)
{
	struct dec_worker *w = ws;
	(void)ctx;
	sl_aead_free(w->a);
	free(w->bounce);
	free(w);
}

static SL_RESULT dec_work(void *ctx, void *ws, uint64_t i, uint8_t *buf, size_t *len)
{
	struct dec *d = ctx;
	struct dec_worker *w = ws;
	return chunk_open(d->r, w->a, i, buf, w->bounce, len);
}

static SL_RESULT dec_emit(void *ctx, uint64_t i, const uint8_t *buf, size_t len)
{
	struct dec *d = ctx;
	sl_err rc = d->sink(d->sink_ctx, i, buf, len);
	if (rc != SL_OK)
		return rc;
	d->done += len;
	if (d->progress != NULL)
		d->progress(d->progress_ctx, d->done, d->r->h->plaintext_len);
	return SL_OK;
}

static SL_RESULT check_threads(unsigned *threads)
{
	if (*threads == 0)
		*threads = sl_sld_default_threads();
	if (*threads > SL_SLD_THREADS_MAX)
		return sl_err_set(SL_E_INPUT, "threads: %u, at most %d", *threads,
		                  SL_SLD_THREADS_MAX);
	return SL_OK;
}

sl_err sl_sld_decrypt(sl_sld_reader *r, unsigned threads, sl_sld_sink_fn sink, void *sink_ctx,
                      sl_sld_progress_fn progress, void *progress_ctx)
{
	return sl_sld_decrypt_bufs(r, threads, NULL, sink, sink_ctx, progress, progress_ctx);
}

sl_err sl_sld_decrypt_bufs(sl_sld_reader *r, unsigned threads, sl_sld_bufs *bufs,
                           sl_sld_sink_fn sink, void *sink_ctx, sl_sld_progress_fn progress,
                           void *progress_ctx)
{
	struct dec d = {.r = r,
	                .sink = sink,
	                .sink_ctx = sink_ctx,
	                .progress = progress,
	                .progress_ctx = progress_ctx};
	sl_err rc = check_threads(&threads);
	if (rc != SL_OK)
		return rc;
	struct sld_pool_ops ops = {
	    .ctx = &d,
	    .count = r->h->chunk_count,
	    .buf_size = (size_t)r->h->chunk_size + SL_AEAD_TAG_LEN,
	    .threads = threads,
	    .worker_init = dec_worker_init,
	    .worker_fini = dec_worker_fini,
	    .fill = NULL,
	    .work = dec_work,
	    .emit = dec_emit,
	    .keep = bufs,
	};
	if ((rc = lease_begin(r)) == SL_OK)
		rc = sld_pool_run(&ops);
	lease_end(r);
	return rc;
}

/* Chunk i decrypted into its place in the destination. */
static SL_RESULT into_work(void *ctx, void *ws, uint64_t i, uint8_t *buf, size_t *len)
{
	sl_err rc = SL_E_INTERNAL;
	struct dec *d = ctx;
	struct dec_worker *w = ws;
	uint64_t off = i * (uint64_t)d->r->h->chunk_size;
	size_t plen = sl_sld_chunk_plain_len(d->r->h, i);
	uint8_t tag_only[1] = {0}; /* an empty chunk writes nothing: any valid pointer will do */

	(void)buf;
	if (d->into->prepare != NULL && plen > 0)
		SL_GUARD(d->into->prepare(d->into->ctx, i, off, plen));
	SL_GUARD(chunk_open(d->r, w->a, i, plen > 0 ? d->dst + off : tag_only, w->bounce, len));
	rc = SL_OK;
out:
	return rc;
}

static SL_RESULT into_emit(void *ctx, uint64_t i, const uint8_t *buf, size_t len)
{
	struct dec *d = ctx;
	(void)buf;
	d->done += len;
	if (d->into->done != NULL)
		return d->into->done(d->into->ctx, i, d->done);
	return SL_OK;
}

sl_err sl_sld_decrypt_into(sl_sld_reader *r, unsigned threads, uint8_t *dst, uint64_t dst_len,
                           const sl_sld_into_ops *into)
{
	static const sl_sld_into_ops none = {0};
	struct dec d = {.r = r, .dst = dst, .into = into != NULL ? into : &none};
	sl_err rc = check_threads(&threads);
	if (rc != SL_OK)
		return rc;
	if (dst_len != r->h->plaintext_len || (dst == NULL && dst_len > 0))
		return sl_err_set(
		    SL_E_INTERNAL, "%s: destination of %llu bytes for %llu bytes of plaintext",
		    r->name, (unsigned long long)dst_len, (unsigned long long)r->h->plaintext_len);
	struct sld_pool_ops ops = {
	    .ctx = &d,
	    .count = r->h->chunk_count,
	    .buf_size = 0,
	    .threads = threads,
	    .worker_init = dec_worker_init,
	    .worker_fini = dec_worker_fini,
	    .fill = NULL,
	    .work = into_work,
	    .emit = into_emit,
	};
	if ((rc = lease_begin(r)) == SL_OK)
		rc = sld_pool_run(&ops);
	lease_end(r);
	return rc;
}
