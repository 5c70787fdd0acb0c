/* Sharded datasets in object storage: `https://HOST/PREFIX/`,
 * `s3://BUCKET/PREFIX/`, `gs://BUCKET/PREFIX/` (the folder that holds
 * manifest.sldm), read with libcurl only: HTTP range requests over several
 * connections at once, HTTP/2 where offered, retries with backoff and
 * jitter on connection errors, 429 and 5xx (never on other 4xx), a stall
 * timeout, TLS verification always on. S3 requests are signed with SigV4 by
 * libcurl; GCS uses its XML API with an OAuth bearer token (or HMAC keys
 * through SigV4). Only ciphertext crosses the network and nothing is
 * written to disk: objects land in the caller's descriptor (a memfd). */
#ifndef SECLAUNCH_LAUNCHER_REMOTE_H
#define SECLAUNCH_LAUNCHER_REMOTE_H

#include <getopt.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seclaunch/aws.h"
#include "seclaunch/error.h"

typedef struct sl_remote sl_remote;

typedef struct sl_remote_opts {
	const char *ca_file;          /* CA bundle for private CAs (NULL: the system's) */
	const char *s3_endpoint;      /* S3-compatible store: https://HOST[:PORT] */
	const char *gcs_endpoint;     /* default https://storage.googleapis.com */
	const char *aws_metadata_url; /* IMDSv2 base, default http://169.254.169.254 */
	const char *gcp_metadata_url; /* default http://metadata.google.internal */
	unsigned connections;         /* parallel range requests (default 4, max 64) */
	unsigned retries;             /* per range (default 4) */
	long stall_s;                 /* no byte for this long fails a request (default 30) */
	long deadline_s;              /* a request's deadline (default 120) plus the time its
	                                 bytes take at min_rate */
	uint64_t min_rate;            /* bytes/s averaged over rate_window_s, below which a
	                                 request is stopped; 0: no rate rule */
	bool min_rate_set;            /* min_rate was given (else SL_REMOTE_MIN_RATE_DEFAULT) */
	long rate_window_s;           /* default 10 */
	size_t range_size;            /* bytes per range request (default 8 MiB) */
	uint64_t part_size;           /* S3 multipart part size (default SL_REMOTE_PART_DEFAULT) */
	uint64_t multipart_min;       /* S3 objects larger than this go up in parts (default
	                                 SL_REMOTE_MULTIPART_MIN_DEFAULT) */
	bool quiet;
} sl_remote_opts;

/* True for https://, s3:// and gs:// names. */
bool sl_remote_is_url(const char *s);

/* Parses the URL (which must end with '/'; one is added otherwise) and
 * obtains credentials: S3 from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
 * AWS_SESSION_TOKEN, the shared credentials file (AWS_SHARED_CREDENTIALS_FILE
 * or ~/.aws/credentials, profile AWS_PROFILE; read as a key file is, so one
 * that group or others may read is refused, SL_E_PERM), or the instance metadata
 * service (IMDSv2); GCS from GOOGLE_OAUTH_ACCESS_TOKEN, HMAC keys
 * (SECLAUNCH_GCS_HMAC_ID / SECLAUNCH_GCS_HMAC_SECRET), or the metadata
 * server. Nothing is fetched from the store yet. */
SL_MUST_USE sl_err sl_remote_open(const char *url, const sl_remote_opts *o, sl_remote **out);
void sl_remote_free(sl_remote *r); /* NULL-safe; wipes the credentials */
/* The URL as given, for messages. */
const char *sl_remote_name(const sl_remote *r);

/* A whole small object (the manifest), at most max bytes. */
SL_MUST_USE sl_err sl_remote_get(sl_remote *r, const char *object, size_t max, uint8_t **data,
                                 size_t *len);
/* Exactly size bytes of object into fd at offsets 0..size (pwrite), by
 * parallel range requests; the store's Content-Range must name exactly
 * the range asked for and the object's total size must be size. */
/* The number in environment variable name, min..max (SL_E_USAGE naming
 * it otherwise); *v is left as it is when the variable is not set. */
SL_MUST_USE sl_err sl_remote_env_num(const char *name, uint64_t min, uint64_t max, uint64_t *v);
SL_MUST_USE sl_err sl_remote_fetch(sl_remote *r, const char *object, uint64_t size, int fd);
/* The same fetch (the same requests, checks, retries and errors) into
 * memory: exactly size bytes at mem[0..size), cap the memory's length
 * (size > cap is SL_E_INTERNAL before any request). A server sending more
 * than a range asked for is refused before a byte lands past the range;
 * fewer is a short range, retried as for a descriptor. */
SL_MUST_USE sl_err sl_remote_fetch_mem(sl_remote *r, const char *object, uint64_t size,
                                       uint8_t *mem, uint64_t cap);
/* While *flag is set, sl_remote_fetch stops within a second (SL_E_SYSTEM);
 * NULL: never. The flag must outlive its use (set NULL before freeing it). */
void sl_remote_set_abort(sl_remote *r, const atomic_bool *flag);

/* PUTs exactly size bytes of fd (read with pread from offset 0) as object;
 * retried with backoff on connection errors, 429 and 5xx (never on other
 * 4xx); 200, 201 or 204 only, and only once every byte was sent. S3 and GCS
 * HMAC requests are signed with SigV4 (payload UNSIGNED-PAYLOAD over TLS).
 * An S3 object larger than multipart_min (and than one part) goes up as a
 * multipart upload: parts of part_size bytes, `connections` of them at
 * once, each retried as a PUT is; the object exists only once
 * CompleteMultipartUpload succeeds, and any failure aborts the upload
 * (AbortMultipartUpload), so no object and no stored parts are left
 * behind. Smaller objects (a sealed output's shards) go up in one PUT:
 * a multipart upload costs three more requests and the store a second
 * pass over the bytes when it assembles the parts (s3rver: one thread,
 * slower than one PUT below a gigabyte on two cores). */
SL_MUST_USE sl_err sl_remote_put(sl_remote *r, const char *object, int fd, uint64_t size);

/* S3's limits on a part (the last may be smaller) and on their number. */
#define SL_REMOTE_PART_MIN ((uint64_t)5 << 20)
#define SL_REMOTE_PART_MAX ((uint64_t)5 << 30)
#define SL_REMOTE_PART_DEFAULT ((uint64_t)32 << 20)
#define SL_REMOTE_PARTS_MAX 10000u
#define SL_REMOTE_MULTIPART_MIN_DEFAULT ((uint64_t)1 << 30)

/* The text of the first <tag>…</tag> in an XML answer of S3 into out (at
 * most cap - 1 bytes, none of them '<', '>', '&', '"', a control byte or a
 * space); false when there is none or it does not fit. */
bool sl_remote_xml_text(const uint8_t *doc, size_t len, const char *tag, char *out, size_t cap);
/* An ETag as S3 sends it: quoted or bare, printable, no '<', '>' or '&'. */
bool sl_remote_etag_ok(const char *v);

#define SL_REMOTE_MIN_RATE_DEFAULT 65536u

/* The options of every command that reads a dataset URL. */
enum {
	SL_REMOTE_O_CA_FILE = 0x2100,
	SL_REMOTE_O_S3_ENDPOINT,
	SL_REMOTE_O_CONNECTIONS,
	SL_REMOTE_O_DEADLINE,
	SL_REMOTE_O_MIN_RATE,
	SL_REMOTE_O_RATE_WINDOW
};
/* clang-format off */
#define SL_REMOTE_OPTS                                                                             \
	{"ca-file", required_argument, SL_REMOTE_O_CA_FILE, NULL},                                 \
	{"s3-endpoint", required_argument, SL_REMOTE_O_S3_ENDPOINT, NULL},                         \
	{"connections", required_argument, SL_REMOTE_O_CONNECTIONS, NULL},                         \
	{"remote-deadline", required_argument, SL_REMOTE_O_DEADLINE, NULL},                        \
	{"remote-min-rate", required_argument, SL_REMOTE_O_MIN_RATE, NULL},                        \
	{"remote-rate-window", required_argument, SL_REMOTE_O_RATE_WINDOW, NULL}
/* clang-format on */
#define SL_REMOTE_HELP                                                                             \
	"Datasets in object storage (DATASET is https://HOST/PREFIX/, s3://BUCKET/PREFIX/\n"       \
	"or gs://BUCKET/PREFIX/, the folder that holds manifest.sldm):\n"                          \
	"  --ca-file FILE         CA bundle for the store's TLS certificate\n"                     \
	"  --s3-endpoint URL      an S3-compatible store (https://HOST[:PORT]; path-style\n"       \
	"                         when HOST is an address)\n"                                      \
	"  --connections N        parallel range requests (default 4)\n"                           \
	"  --remote-min-rate B    stop (and retry) a request slower than B bytes/s on\n"           \
	"                         average over the window (default 65536; 0: no rate rule)\n"      \
	"  --remote-rate-window S that window in seconds (default 10, 1..60)\n"                    \
	"  --remote-deadline S    stop (and retry) a request still running after S seconds\n"      \
	"                         plus its bytes at the minimum rate (default 120)\n"              \
	"                         (also $SECLAUNCH_REMOTE_MIN_RATE, _RATE_WINDOW_S, "              \
	"_DEADLINE_S;\n"                                                                           \
	"                         a request with no new byte for 30 s, "                           \
	"$SECLAUNCH_REMOTE_STALL_S,\n"                                                             \
	"                         is stopped too)\n"

/* Takes key/arg when it is one of SL_REMOTE_OPTS: 1, or -1 for a bad
 * value (the message in sl_err_detail()); 0 when not one of them. */
int sl_remote_option(sl_remote_opts *o, int key, const char *arg);

/* The parsers of what a server or a credentials source sends (pure, so
 * they can be fuzzed alone; remote_parse.c). */

/* A Content-Range header value (after the colon): "bytes A-B/TOTAL",
 * spaces around it allowed, nothing else; A <= B < TOTAL. */
bool sl_remote_content_range(const char *v, uint64_t *a, uint64_t *b, uint64_t *total);
/* AWS credentials, each a NUL-free string or NULL (free with wiping): the
 * one reader is core's (seclaunch/aws.h); these names stay for the fuzz
 * target. */
typedef sl_aws_creds sl_remote_creds;
void sl_remote_creds_wipe(sl_remote_creds *c);
/* The shared credentials file's text (len bytes): the key = value lines
 * of section [profile]. Keys not found stay NULL. */
SL_MUST_USE sl_err sl_remote_parse_aws_file(const char *text, size_t len, const char *profile,
                                            sl_remote_creds *c);
/* The instance metadata service's credentials JSON: AccessKeyId,
 * SecretAccessKey and optional Token. */
SL_MUST_USE sl_err sl_remote_parse_imds(const uint8_t *json, size_t len, sl_remote_creds *c);
/* The GCP metadata server's token JSON: access_token, no line break in it.
 * *token is a new string (wipe it). */
SL_MUST_USE sl_err sl_remote_parse_gcp_token(const uint8_t *json, size_t len, char **token);

#endif
