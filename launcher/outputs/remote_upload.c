/* Uploads to remote sources (remote.h): one PUT, or for an S3 object larger
 * than the multipart threshold a multipart upload with its parts sent in parallel
 * (CreateMultipartUpload, UploadPart x N on `connections` threads,
 * CompleteMultipartUpload; AbortMultipartUpload on any failure). Every
 * request goes through sl_remote_request: SigV4 by libcurl, the stall, rate
 * and deadline rules, retries with backoff on connection errors, 429 and
 * 5xx. */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../dataset/remote.h"
#include "../dataset/remote_int.h"
#include "seclaunch/util.h"

/* the payload is ciphertext, authenticated by its own format; TLS carries
 * it, so S3 is not asked to hash it a second time */
static const char *const unsigned_payload[] = {"x-amz-content-sha256: UNSIGNED-PAYLOAD", NULL};

#define ANSWER_MAX ((size_t)64 * 1024)

struct part {
	char etag[160];
	bool done;
};

struct mpu {
	sl_remote *r;
	const char *what;
	char url[4096];  /* the object's URL */
	char id_q[1024]; /* the upload id, escaped for a query */
	int fd;
	uint64_t size, part_size;
	unsigned nparts;
	struct part *parts;
	pthread_mutex_t mu;
	unsigned next;      /* the next part to send */
	atomic_bool failed; /* stops the other senders after a part failed */
	sl_err rc;
	char errmsg[1024];
};

static SL_RESULT single_put(sl_remote *r, const char *url, const char *what, int fd, uint64_t size)
{
	struct sl_remote_upsrc up = {.fd = fd, .size = size};
	return sl_remote_request(r, url, true, "PUT", r->sigv4[0] != '\0' ? unsigned_payload : NULL,
	                         &up, ANSWER_MAX, what, NULL, NULL, NULL);
}

static SL_RESULT create_upload(struct mpu *u)
{
	sl_err rc = SL_E_REMOTE_UNREACHABLE;
	char url[4200], id[768];
	uint8_t *ans = NULL;
	size_t al = 0;
	char *esc = NULL;

	snprintf(url, sizeof(url), "%s?uploads=", u->url);
	SL_GUARD(sl_remote_request(u->r, url, true, "POST", NULL, NULL, ANSWER_MAX, u->what, NULL,
	                           &ans, &al));
	SL_ENSURE(ans != NULL && sl_remote_xml_text(ans, al, "UploadId", id, sizeof(id)),
	          SL_E_REMOTE_UNREACHABLE,
	          "%s: CreateMultipartUpload: the answer holds no usable UploadId", u->what);
	esc = curl_easy_escape(NULL, id, 0);
	SL_ENSURE(esc != NULL && strlen(esc) < sizeof(u->id_q), SL_E_REMOTE_UNREACHABLE,
	          "%s: CreateMultipartUpload: UploadId too long", u->what);
	snprintf(u->id_q, sizeof(u->id_q), "%s", esc);
	rc = SL_OK;
out:
	curl_free(esc);
	free(ans);
	return rc;
}

static SL_RESULT send_part(struct mpu *u, unsigned k)
{
	sl_err rc = SL_E_REMOTE_UNREACHABLE;
	char url[6000], what[1400];
	uint64_t off = (uint64_t)k * u->part_size;
	struct sl_remote_upsrc up = {.fd = u->fd, .base = off};
	struct sl_remote_answer a = {0};

	up.size = u->size - off < u->part_size ? u->size - off : u->part_size;
	snprintf(url, sizeof(url), "%s?partNumber=%u&uploadId=%s", u->url, k + 1, u->id_q);
	snprintf(what, sizeof(what), "%s: part %u of %u", u->what, k + 1, u->nparts);
	SL_GUARD(sl_remote_request(u->r, url, true, "PUT", unsigned_payload, &up, ANSWER_MAX, what,
	                           &a, NULL, NULL));
	SL_ENSURE(sl_remote_etag_ok(a.etag), SL_E_REMOTE_UNREACHABLE,
	          "%s: the store's answer has no usable ETag", what);
	snprintf(u->parts[k].etag, sizeof(u->parts[k].etag), "%s", a.etag);
	u->parts[k].done = true;
	rc = SL_OK;
out:
	return rc;
}

/* One sender: takes parts in order until none is left or one failed. */
static void *sender_main(void *arg)
{
	struct mpu *u = arg;
	for (;;) {
		pthread_mutex_lock(&u->mu);
		unsigned k =
		    u->next < u->nparts && !atomic_load(&u->failed) ? u->next++ : u->nparts;
		pthread_mutex_unlock(&u->mu);
		if (k >= u->nparts)
			break;
		sl_err rc = send_part(u, k);
		if (rc != SL_OK) {
			pthread_mutex_lock(&u->mu);
			if (!atomic_exchange(&u->failed, true)) {
				u->rc = rc;
				snprintf(u->errmsg, sizeof(u->errmsg), "%s", sl_err_detail());
			}
			pthread_mutex_unlock(&u->mu);
			break;
		}
	}
	return NULL;
}

static SL_RESULT send_parts(struct mpu *u, unsigned threads)
{
	sl_err rc = SL_E_SYSTEM;
	pthread_t tid[64];
	unsigned started = 0;

	if (threads > u->nparts)
		threads = u->nparts;
	if (threads > sizeof(tid) / sizeof(tid[0]))
		threads = sizeof(tid) / sizeof(tid[0]);
	/* the calling thread sends too: threads - 1 more */
	for (unsigned t = 1; t < threads; t++) {
		if (pthread_create(&tid[started], NULL, sender_main, u) != 0)
			break; /* fewer senders: slower, not wrong */
		started++;
	}
	(void)sender_main(u);
	for (unsigned t = 0; t < started; t++)
		pthread_join(tid[t], NULL);
	if (atomic_load(&u->failed))
		SL_FAIL(u->rc, "%s", u->errmsg);
	for (unsigned k = 0; k < u->nparts; k++)
		SL_ENSURE(u->parts[k].done, SL_E_INTERNAL, "%s: part %u was not sent", u->what,
		          k + 1);
	rc = SL_OK;
out:
	return rc;
}

/* The CompleteMultipartUpload body, in a memory file (the request reads a
 * descriptor). */
static SL_RESULT complete_body(const struct mpu *u, int *fd, uint64_t *len)
{
	sl_err rc = SL_E_SYSTEM;
	char line[256];
	int f = memfd_create("s3-complete", MFD_CLOEXEC);
	uint64_t n = 0;

	SL_ENSURE(f >= 0, SL_E_SYSTEM, "memfd_create: %s", strerror(errno));
	static const char head[] = "<CompleteMultipartUpload "
	                           "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
	SL_GUARD(sl_write_all(f, head, sizeof(head) - 1, "CompleteMultipartUpload"));
	n += sizeof(head) - 1;
	for (unsigned k = 0; k < u->nparts; k++) {
		int l = snprintf(line, sizeof(line),
		                 "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>", k + 1,
		                 u->parts[k].etag);
		SL_ENSURE(l > 0 && (size_t)l < sizeof(line), SL_E_INTERNAL, "part %u", k + 1);
		SL_GUARD(sl_write_all(f, line, (size_t)l, "CompleteMultipartUpload"));
		n += (uint64_t)l;
	}
	static const char tail[] = "</CompleteMultipartUpload>";
	SL_GUARD(sl_write_all(f, tail, sizeof(tail) - 1, "CompleteMultipartUpload"));
	n += sizeof(tail) - 1;
	*fd = f;
	*len = n;
	f = -1;
	rc = SL_OK;
out:
	if (f >= 0)
		close(f);
	return rc;
}

static SL_RESULT complete_upload(struct mpu *u)
{
	sl_err rc = SL_E_REMOTE_UNREACHABLE;
	char url[6000], code[128];
	uint8_t *ans = NULL;
	size_t al = 0;
	int fd = -1;
	uint64_t len = 0;

	SL_GUARD(complete_body(u, &fd, &len));
	struct sl_remote_upsrc up = {.fd = fd, .size = len};
	snprintf(url, sizeof(url), "%s?uploadId=%s", u->url, u->id_q);
	SL_GUARD(sl_remote_request(u->r, url, true, "POST", unsigned_payload, &up, ANSWER_MAX,
	                           u->what, NULL, &ans, &al));
	/* S3 may answer 200 and still fail the completion, in the body */
	SL_ENSURE(ans == NULL || !sl_remote_xml_text(ans, al, "Code", code, sizeof(code)),
	          SL_E_REMOTE_UNREACHABLE, "%s: CompleteMultipartUpload failed: %s", u->what, code);
	rc = SL_OK;
out:
	if (fd >= 0)
		close(fd);
	free(ans);
	return rc;
}

/* Best effort: the caller reports the failure that led here. */
static void abort_upload(struct mpu *u, sl_err keep)
{
	char url[6000], msg[1024];
	snprintf(url, sizeof(url), "%s?uploadId=%s", u->url, u->id_q);
	snprintf(msg, sizeof(msg), "%s", sl_err_detail());
	if (sl_remote_request(u->r, url, true, "DELETE", NULL, NULL, ANSWER_MAX, u->what, NULL,
	                      NULL, NULL) != SL_OK &&
	    !u->r->o.quiet)
		fprintf(stderr,
		        "seclaunch: %s: AbortMultipartUpload failed (%s); the store keeps the "
		        "parts until its lifecycle rule removes them\n",
		        u->what, sl_err_detail());
	(void)sl_err_set(keep, "%s", msg);
}

static SL_RESULT multipart_put(sl_remote *r, const char *url, const char *what, int fd,
                               uint64_t size, uint64_t part_size)
{
	sl_err rc = SL_E_NOMEM;
	struct mpu u = {.r = r, .what = what, .fd = fd, .size = size, .part_size = part_size};
	bool created = false;
	unsigned threads = r->o.connections > 0 ? r->o.connections : 4;

	snprintf(u.url, sizeof(u.url), "%s", url);
	u.nparts = (unsigned)((size + part_size - 1) / part_size);
	u.parts = calloc(u.nparts, sizeof(*u.parts));
	SL_ENSURE(u.parts != NULL, SL_E_NOMEM, "%s: %u parts", what, u.nparts);
	pthread_mutex_init(&u.mu, NULL);
	SL_GUARD(create_upload(&u));
	created = true;
	SL_GUARD(send_parts(&u, threads));
	SL_GUARD(complete_upload(&u));
	rc = SL_OK;
out:
	if (rc != SL_OK && created)
		abort_upload(&u, rc);
	if (u.parts != NULL)
		pthread_mutex_destroy(&u.mu);
	free(u.parts);
	return rc;
}

sl_err sl_remote_put(sl_remote *r, const char *object, int fd, uint64_t size)
{
	sl_err rc = SL_E_INPUT;
	char url[4096], what[1200];
	uint64_t ps = r->o.part_size > 0 ? r->o.part_size : SL_REMOTE_PART_DEFAULT;

	SL_GUARD(sl_remote_object_url(r, object, url, sizeof(url)));
	snprintf(what, sizeof(what), "PUT %s%s", r->name, object);
	/* S3 allows at most 10000 parts: bigger parts for a bigger object */
	if (size / ps >= SL_REMOTE_PARTS_MAX)
		ps = (size + SL_REMOTE_PARTS_MAX - 1) / SL_REMOTE_PARTS_MAX;
	uint64_t mp_min =
	    r->o.multipart_min > 0 ? r->o.multipart_min : SL_REMOTE_MULTIPART_MIN_DEFAULT;
	/* one PUT up to the threshold: a store assembles parts with a second
	 * pass over every byte */
	if (r->kind == K_S3 && size > ps && size > mp_min)
		SL_GUARD(multipart_put(r, url, what, fd, size, ps));
	else
		SL_GUARD(single_put(r, url, what, fd, size));
	rc = SL_OK;
out:
	return rc;
}
