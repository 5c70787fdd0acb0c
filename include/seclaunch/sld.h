/* SLD v1: the encrypted dataset file (docs/format-sld.md has every byte).
 *
 * A header (dataset id, key reference, salt, key check, header MAC) and
 * fixed-size chunks, each sealed with a per-file key derived from the DEK.
 * Decryption hands a sink only authenticated bytes, in chunk order, from a
 * pool of worker threads with bounded memory; chunk i can also be read on
 * its own. Nothing here obtains keys: callers pass the DEK (from a key file
 * or from the KMS) as an sl_secret.
 */
#ifndef SECLAUNCH_SLD_H
#define SECLAUNCH_SLD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/crypto.h"
#include "seclaunch/error.h"
#include "seclaunch/secret.h"

#define SL_SLD_VERSION 1
#define SL_SLD_MAGIC_LEN 8
#define SL_SLD_DEK_LEN 32
#define SL_SLD_SALT_LEN 32
#define SL_SLD_CHUNK_MIN ((uint32_t)64 << 10)
#define SL_SLD_CHUNK_MAX ((uint32_t)64 << 20)
#define SL_SLD_CHUNK_DEFAULT ((uint32_t)4 << 20)
#define SL_SLD_DATASET_ID_MAX 255
#define SL_SLD_KMS_URL_MAX 2048
#define SL_SLD_KEY_ID_MAX 255
#define SL_SLD_WRAPPED_DEK_MAX 1024
#define SL_SLD_HEADER_MAX ((size_t)64 << 10)
#define SL_SLD_THREADS_MAX 1024

/* ---- header (no key needed) ------------------------------------------- */

typedef struct sl_sld_header sl_sld_header;

/* Parses a header from the start of p (p may hold more than the header:
 * the first bytes of a file). Errors name the field: a wrong magic is
 * SL_E_FORMAT ("not an SLD file"), another version or an unknown critical
 * extension SL_E_VERSION, a short buffer SL_E_TRUNCATED, any other damage
 * after a valid magic and version SL_E_INTEGRITY ("header.chunk_size: ..."):
 * a v1 writer never produces it, so the file was altered. */
SL_MUST_USE sl_err sl_sld_header_parse(const uint8_t *p, size_t len, sl_sld_header **out);
/* Reads and parses the header at offset 0 of fd (name is for messages). */
SL_MUST_USE sl_err sl_sld_header_read_fd(int fd, const char *name, sl_sld_header **out);
SL_MUST_USE sl_err sl_sld_header_read_file(const char *path, sl_sld_header **out);
void sl_sld_header_free(sl_sld_header *h); /* NULL-safe */

/* The fields, as parsed. Strings are NUL-terminated; absent ones are "". */
size_t sl_sld_header_len(const sl_sld_header *h);
sl_aead_id sl_sld_header_aead(const sl_sld_header *h);
uint32_t sl_sld_header_chunk_size(const sl_sld_header *h);
uint64_t sl_sld_header_plaintext_len(const sl_sld_header *h);
uint64_t sl_sld_header_chunk_count(const sl_sld_header *h);
const char *sl_sld_header_dataset_id(const sl_sld_header *h);
const char *sl_sld_header_kms_url(const sl_sld_header *h);
const char *sl_sld_header_key_id(const sl_sld_header *h);
const uint8_t *sl_sld_header_wrapped_dek(const sl_sld_header *h, size_t *len);
const uint8_t *sl_sld_header_salt(const sl_sld_header *h); /* SL_SLD_SALT_LEN bytes */
/* The raw header bytes (exactly sl_sld_header_len) and their SHA-256. */
const uint8_t *sl_sld_header_bytes(const sl_sld_header *h);
void sl_sld_header_digest(const sl_sld_header *h, uint8_t out[static 32]);
/* The total file size the header implies (header + chunks + tags). */
uint64_t sl_sld_header_file_size(const sl_sld_header *h);
/* Plaintext length of chunk i (i < chunk count). */
size_t sl_sld_chunk_plain_len(const sl_sld_header *h, uint64_t i);
/* Everything above as a JSON object (seclaunch inspect); NULL on no memory. */
json_t *sl_sld_header_json(const sl_sld_header *h);

/* ---- encryption ------------------------------------------------------- */

/* Called on the calling thread after each chunk is written / delivered. */
typedef void (*sl_sld_progress_fn)(void *ctx, uint64_t done_bytes, uint64_t total_bytes);

typedef struct sl_sld_encrypt_params {
	const char *dataset_id; /* required, UTF-8, 1..255 bytes */
	sl_aead_id aead;        /* SL_AEAD_NONE = AES-256-GCM */
	uint32_t chunk_size;    /* 0 = SL_SLD_CHUNK_DEFAULT; power of two in [MIN, MAX] */
	/* key reference: all NULL / 0 for a local key file */
	const char *kms_url;
	const char *key_id;
	const uint8_t *wrapped_dek;
	size_t wrapped_dek_len;
	unsigned threads; /* 0 = online CPUs */
	sl_sld_progress_fn progress;
	void *progress_ctx;
} sl_sld_encrypt_params;

/* Reads exactly plaintext_len bytes from in_fd (sequential reads; a pipe
 * works) and writes the whole SLD file to out_fd (sequential writes).
 * dek is SL_SLD_DEK_LEN bytes. Memory stays bounded (about 2 x threads
 * chunks). Fails with SL_E_IO if in_fd ends early or has more data. */
SL_MUST_USE sl_err sl_sld_encrypt(sl_secret *dek, const sl_sld_encrypt_params *p, int in_fd,
                                  uint64_t plaintext_len, int out_fd);

/* Plaintext for sl_sld_encrypt_files: fills buf with the len bytes of
 * file's plaintext at offset off. Called from several worker threads at
 * once; *tls is the calling thread's own slot (NULL at first), released
 * with tls_free when that thread is done. */
typedef struct sl_sld_source {
	void *ctx;
	sl_err (*read_at)(void *ctx, void **tls, uint32_t file, uint64_t off, uint8_t *buf,
	                  size_t len);
	void (*tls_free)(void *ctx, void *tls); /* may be NULL */
} sl_sld_source;

/* Start the kernel's write-back of each chunk as soon as it is written
 * (sync_file_range), so that a final fsync finds little left to write. */
#define SL_SLD_WRITE_BEHIND 1u
/* Write in order with write(2) even to a regular file (n must be 1): for a
 * descriptor whose offset is not ours to choose, such as standard output. */
#define SL_SLD_IN_ORDER 2u

/* Encrypts n SLD files at once, byte for byte what sl_sld_encrypt writes
 * for the same salt: file k has plaintext_len[k] bytes read from src and
 * goes to out_fd[k]. Each of p->threads workers (the calling thread is
 * one) reads a chunk's plaintext into private memory, seals it in place
 * and writes it at its own offset (pwrite: every out_fd must be a regular
 * file; with n == 1 any other descriptor, or SL_SLD_IN_ORDER, is written
 * in order from the calling thread).
 * Chunks are taken round-robin across the files, so that writes to several
 * files proceed side by side. headers (optional) receives each file's
 * parsed header; the caller frees them. Nothing is fsynced. */
SL_MUST_USE sl_err sl_sld_encrypt_files(sl_secret *dek, const sl_sld_encrypt_params *p, uint32_t n,
                                        const uint64_t *plaintext_len, const int *out_fd,
                                        const sl_sld_source *src, unsigned flags,
                                        sl_sld_header **headers);

/* ---- decryption ------------------------------------------------------- */

typedef struct sl_sld_reader sl_sld_reader;

/* Opens an SLD file for decryption with dek: parses the header, checks the
 * key check value (SL_E_WRONG_KEY), the header MAC (SL_E_INTEGRITY naming
 * the header) and the file size against the header (SL_E_TRUNCATED, or
 * SL_E_INTEGRITY for extra bytes). fd must support pread; it is not closed
 * by the reader and must stay open while the reader is used. */
SL_MUST_USE sl_err sl_sld_open(int fd, const char *name, sl_secret *dek, sl_sld_reader **out);
/* The same over len bytes of memory at base (the whole SLD file): the same
 * checks and errors (a len short of the header's file size is
 * SL_E_TRUNCATED, a longer one SL_E_INTEGRITY "extended"), and chunks are
 * authenticated and decrypted straight from base into their destination,
 * with no read and no bounce buffer. base must be the caller's private
 * memory that nothing writes while the reader is used (sld_decrypt.c says
 * why); it must outlive the reader. */
SL_MUST_USE sl_err sl_sld_open_mem(const uint8_t *base, size_t len, const char *name,
                                   sl_secret *dek, sl_sld_reader **out);
/* Whether the running or last sl_sld_decrypt / sl_sld_decrypt_into of r
 * read every chunk from a mapping of the file. Where the kernel grants a
 * read lease (a read-only descriptor of a file on a local filesystem that
 * nobody has open for writing), a whole decryption holds it and decrypts
 * AES-256-GCM chunks from a mapping; an open for writing elsewhere breaks
 * it, and the rest is read with pread (sld_decrypt.c, take_lease). */
bool sl_sld_reader_mapped(const sl_sld_reader *r);
void sl_sld_close(sl_sld_reader *r); /* NULL-safe; wipes the keys */
const sl_sld_header *sl_sld_reader_header(const sl_sld_reader *r);
/* A copy of the file key (HKDF of the DEK and the salt, 32 bytes) for
 * decryption elsewhere (run --gpu-decrypt hands it to the job's process,
 * SECURITY.md "GPU"). The caller owns and frees *out. */
SL_MUST_USE sl_err sl_sld_export_file_key(const sl_sld_reader *r, sl_secret **out);

/* Random access: authenticates and decrypts chunk i into buf, which must
 * hold at least chunk_size + SL_AEAD_TAG_LEN bytes (decryption runs in
 * place). *len is the plaintext length. Thread-safe (pread, own context).
 * A failure is SL_E_INTEGRITY naming the chunk, and buf holds no plaintext. */
SL_MUST_USE sl_err sl_sld_read_chunk(sl_sld_reader *r, uint64_t i, uint8_t *buf, size_t cap,
                                     size_t *len);

/* Receives chunks in order, each only after it authenticated. plain is
 * valid during the call only (the buffer is reused for later chunks and
 * wiped when decryption ends). A non-OK return stops decryption and is
 * returned by sl_sld_decrypt. */
typedef sl_err (*sl_sld_sink_fn)(void *ctx, uint64_t chunk_index, const uint8_t *plain, size_t len);

/* Decrypts every chunk on threads threads (0 = online CPUs; the calling
 * thread is one of them and calls sink and progress), in order, to sink.
 * Memory: at most 2 x threads chunk buffers, wiped before free, and a
 * 1 MiB read buffer per thread (ciphertext only; none for a reader over
 * memory, which is read in place). The
 * first failing chunk stops the run (SL_E_INTEGRITY "chunk N: ..."); the
 * sink has then received exactly the chunks before it. */
SL_MUST_USE sl_err sl_sld_decrypt(sl_sld_reader *r, unsigned threads, sl_sld_sink_fn sink,
                                  void *sink_ctx, sl_sld_progress_fn progress, void *progress_ctx);

/* Chunk buffers kept from one decryption to the next, for a caller that
 * decrypts file after file on one thread (a stream's shards): the chunk
 * buffers are made (allocated, locked, faulted in) once rather than per
 * file. Each decryption still zeroes them before it returns, so they hold
 * no plaintext between files; sl_sld_bufs_free frees them. One decryption
 * at a time may use a set. */
typedef struct sl_sld_bufs sl_sld_bufs;
SL_MUST_USE sl_err sl_sld_bufs_new(sl_sld_bufs **out);
void sl_sld_bufs_free(sl_sld_bufs *b);

/* sl_sld_decrypt with its chunk buffers taken from (and given back to)
 * bufs; NULL makes and frees them in this call, as sl_sld_decrypt does. */
SL_MUST_USE sl_err sl_sld_decrypt_bufs(sl_sld_reader *r, unsigned threads, sl_sld_bufs *bufs,
                                       sl_sld_sink_fn sink, void *sink_ctx,
                                       sl_sld_progress_fn progress, void *progress_ctx);

/* Hooks of sl_sld_decrypt_into; each may be NULL. A non-OK return stops
 * decryption and is returned. */
typedef struct sl_sld_into_ops {
	/* On the worker thread that will write chunk chunk_index, before it
	 * writes dst[off, off + len): e.g. to fault in (and so lock) those
	 * pages there, so page set-up runs on every worker. */
	sl_err (*prepare)(void *ctx, uint64_t chunk_index, uint64_t off, size_t len);
	/* On the calling thread, in chunk order, once chunk_index has been
	 * authenticated; done_bytes counts the plaintext bytes up to its end. */
	sl_err (*done)(void *ctx, uint64_t chunk_index, uint64_t done_bytes);
	void *ctx;
} sl_sld_into_ops;

/* Decrypts every chunk straight into dst, which holds exactly the plaintext
 * length (dst_len; SL_E_INTERNAL otherwise): each of threads workers (0 =
 * online CPUs; the calling thread is one) reads a chunk's ciphertext into
 * private memory and decrypts it into its place in dst, so the plaintext is
 * written once and never copied. A chunk's plaintext is in dst before its
 * tag has been checked: dst must be memory no one else can read until this
 * returns. On failure (the first failing chunk in order, as for
 * sl_sld_decrypt) no failing chunk's bytes are left in dst, but the caller
 * must still wipe all of dst and use none of it. */
SL_MUST_USE sl_err sl_sld_decrypt_into(sl_sld_reader *r, unsigned threads, uint8_t *dst,
                                       uint64_t dst_len, const sl_sld_into_ops *into);

/* Online CPUs (at least 1, at most SL_SLD_THREADS_MAX). */
unsigned sl_sld_default_threads(void);

/* ---- output files that appear only when complete ------------------------ */

/* An unnamed file (O_TMPFILE) in path's directory, linked to path only by
 * sl_sld_outfile_commit; freed uncommitted, nothing is left behind. With
 * force false an existing path is refused (SL_E_EXISTS), at open and again
 * at commit; with force true it is replaced atomically (rename). */
typedef struct sl_sld_outfile sl_sld_outfile;
SL_MUST_USE sl_err sl_sld_outfile_open(const char *path, bool force, sl_sld_outfile **out);
int sl_sld_outfile_fd(const sl_sld_outfile *o);
/* fsyncs the data, links it into place, fsyncs the directory. */
SL_MUST_USE sl_err sl_sld_outfile_commit(sl_sld_outfile *o);
void sl_sld_outfile_free(sl_sld_outfile *o); /* NULL-safe; discards if not committed */

#endif
