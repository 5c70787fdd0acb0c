/* Inside the remote-source module: the handle and the one-request helper
 * that remote.c (reads, credentials) and remote_upload.c (PUTs, S3
 * multipart uploads) share. remote_upload.c uses remote.c, never the other
 * way round. Not a public header. */
#ifndef SECLAUNCH_LAUNCHER_REMOTE_INT_H
#define SECLAUNCH_LAUNCHER_REMOTE_INT_H

#include "remote.h"
#include "seclaunch/secret.h"

enum sl_remote_kind { K_HTTPS, K_S3, K_GCS };

struct sl_remote {
	sl_remote_opts o;
	enum sl_remote_kind kind;
	char name[1024];          /* as given */
	char base[2048];          /* object URL prefix, ends with '/' */
	char sigv4[128];          /* CURLOPT_AWS_SIGV4 provider string, "" for none */
	sl_secret *userpwd;       /* "KEYID:SECRET" for SigV4 */
	sl_secret *header;        /* one extra header: session token or bearer token */
	const atomic_bool *abort; /* set: a fetch stops within a second */
};

/* size bytes of fd from offset base, sent as a request's body. */
struct sl_remote_upsrc {
	int fd;
	uint64_t base, off, size;
	bool io_error;
};

/* What a request's answer said beside its body. */
struct sl_remote_answer {
	long status;
	char etag[160]; /* the ETag header, "" when none (or longer than this) */
};

SL_MUST_USE sl_err sl_remote_request(const sl_remote *r, const char *url, bool tls_only,
                                     const char *method, const char *const *headers,
                                     const struct sl_remote_upsrc *up, size_t max, const char *what,
                                     struct sl_remote_answer *ans, uint8_t **out, size_t *out_len);
/* base + object, once object is a plain name. */
SL_MUST_USE sl_err sl_remote_object_url(const sl_remote *r, const char *object, char *url,
                                        size_t cap);
/* Sleeps before retry number attempt (exponential, with jitter). */
void sl_remote_backoff(unsigned attempt);

#endif
