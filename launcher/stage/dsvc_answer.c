/* The data service's answers (data_service.h, dsvc_int.h): what an admitted
 * peer's request gets, and the shards a connection holds. */
#include <string.h>
#include <sys/socket.h>

#include "dsvc_int.h"

void sl_dsvc_send(int fd, json_t *o, int pass_fd)
{
	char *text = json_dumps(o, JSON_COMPACT);
	struct iovec iov;
	struct msghdr mh = {0};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;

	json_decref(o);
	if (text == NULL)
		return;
	iov.iov_base = text;
	iov.iov_len = strlen(text);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (pass_fd >= 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
	}
	(void)sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	free(text);
}

json_t *sl_dsvc_error(const char *code, const char *msg)
{
	return json_pack("{s:b,s:s,s:s}", "ok", 0, "error", code, "message", msg);
}

static const struct dataset *find(const sl_dsvc *s, const char *id)
{
	for (size_t i = 0; i < s->n_ds; i++)
		if (strcmp(s->ds[i].id, id) == 0)
			return &s->ds[i];
	return NULL;
}

static size_t ds_index(const sl_dsvc *s, const struct dataset *d)
{
	return (size_t)(d - s->ds);
}

static void count_served(sl_dsvc *s)
{
	pthread_mutex_lock(&s->mu);
	s->served++;
	pthread_mutex_unlock(&s->mu);
}

static bool hold_add(struct conn *c, size_t ds, uint32_t shard)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 16;
		struct hold *h = realloc(c->holds, cap * sizeof(*h));
		if (h == NULL)
			return false;
		c->holds = h;
		c->cap = cap;
	}
	c->holds[c->n++] = (struct hold){ds, shard};
	return true;
}

static bool hold_drop(struct conn *c, size_t ds, uint32_t shard)
{
	for (size_t i = 0; i < c->n; i++) {
		if (c->holds[i].ds == ds && c->holds[i].shard == shard) {
			c->holds[i] = c->holds[--c->n];
			return true;
		}
	}
	return false;
}

/* A connection's holds go back when it closes. */
void sl_dsvc_release_all(sl_dsvc *s, struct conn *c)
{
	for (size_t i = 0; i < c->n; i++) {
		struct dataset *d = &s->ds[c->holds[i].ds];
		d->ops.release(d->ops.ctx, c->holds[i].shard);
	}
	free(c->holds);
	*c = (struct conn){0};
}

/* open_shard / release_shard of a stream dataset. */
static void answer_shard(sl_dsvc *s, int fd, struct conn *c, struct dataset *d, const char *op,
                         json_int_t shard)
{
	if (d->ops.acquire == NULL || shard < 0 || shard > UINT32_MAX) {
		sl_dsvc_send(
		    fd, sl_dsvc_error("bad-request", "not a stream dataset, or no such shard"), -1);
		return;
	}
	if (strcmp(op, "release_shard") == 0) {
		if (!hold_drop(c, ds_index(s, d), (uint32_t)shard)) {
			sl_dsvc_send(
			    fd,
			    sl_dsvc_error("not-held", "this connection does not hold that shard"),
			    -1);
			return;
		}
		d->ops.release(d->ops.ctx, (uint32_t)shard);
		sl_dsvc_send(fd, json_pack("{s:b}", "ok", 1), -1);
		return;
	}
	int sfd = -1, not_ready = 0;
	uint64_t len = 0;
	sl_err rc = d->ops.acquire(d->ops.ctx, (uint32_t)shard, &sfd, &len, &not_ready);
	if (rc != SL_OK) {
		sl_dsvc_send(fd, sl_dsvc_error("stage-failed", sl_err_detail()), -1);
		return;
	}
	if (not_ready) {
		sl_dsvc_send(
		    fd, json_pack("{s:b,s:s,s:i}", "ok", 0, "error", "not-ready", "retry_ms", 20),
		    -1);
		return;
	}
	if (!hold_add(c, ds_index(s, d), (uint32_t)shard)) {
		d->ops.release(d->ops.ctx, (uint32_t)shard);
		sl_dsvc_send(fd, sl_dsvc_error("busy", "out of memory"), -1);
		return;
	}
	sl_dsvc_send(fd,
	             json_pack("{s:b,s:s,s:I,s:I}", "ok", 1, "dataset", d->id, "shard", shard,
	                       "size", (json_int_t)len),
	             sfd);
	count_served(s);
}

/* An entry as "list" gives it: without the lists that may not fit one
 * message ("files", "shards"; a reader pages them), with their counts. */
static json_t *list_entry(const json_t *info)
{
	json_t *e = json_deep_copy(info);
	if (e == NULL)
		return NULL;
	static const char *const lists[] = {"files", "shards"};
	static const char *const counts[] = {"file_count", "shard_count"};
	bool cut = false;
	for (size_t i = 0; i < 2; i++) {
		const json_t *a = json_object_get(e, lists[i]);
		if (json_is_array(a)) {
			json_object_set_new(e, counts[i],
			                    json_integer((json_int_t)json_array_size(a)));
			json_object_del(e, lists[i]);
			cut = true;
		}
	}
	if (cut)
		json_object_set_new(e, "files_from", json_string("service"));
	return e;
}

/* files / shards: a page of the dataset's list from req->start. */
static void answer_page(int fd, const struct dataset *d, const sl_dsvc_req *rq)
{
	const char *key = rq->op == SL_DSVC_OP_FILES ? "files" : "shards";
	const json_t *all = json_object_get(d->info, key);
	size_t total = json_is_array(all) ? json_array_size(all) : 0;
	uint64_t next = 0;
	json_t *page = all != NULL ? sl_dsvc_page(all, rq->start, SL_DSVC_PAGE_MAX - 256, &next)
	                           : json_array();
	if (page == NULL) {
		sl_dsvc_send(fd, sl_dsvc_error("busy", "out of memory"), -1);
		return;
	}
	json_t *ans = json_pack("{s:b,s:s,s:I,s:I,s:o}", "ok", 1, "dataset", d->id, "total",
	                        (json_int_t)total, "start", (json_int_t)rq->start, key, page);
	if (ans != NULL && next != 0)
		json_object_set_new(ans, "next", json_integer((json_int_t)next));
	sl_dsvc_send(fd, ans, -1);
}

/* One request (sl_dsvc_parse) of an admitted peer: list, open,
 * open_shard / release_shard of a stream dataset, files / shards (a page of
 * a dataset's lists). */
void sl_dsvc_answer(sl_dsvc *s, struct conn *c, const sl_dsvc_req *rq)
{
	int fd = c->fd;
	json_t *ans;

	if (rq->op == SL_DSVC_OP_LIST) {
		ans = json_object();
		json_t *all = json_object();
		for (size_t i = 0; i < s->n_ds; i++)
			json_object_set_new(all, s->ds[i].id, list_entry(s->ds[i].info));
		json_object_set_new(ans, "ok", json_true());
		json_object_set_new(ans, "datasets", all);
		sl_dsvc_send(fd, ans, -1);
		return;
	}
	struct dataset *d = (struct dataset *)find(s, rq->dataset);
	if (d == NULL) {
		sl_dsvc_send(fd, sl_dsvc_error("unknown-dataset", rq->dataset), -1);
	} else if (rq->op == SL_DSVC_OP_FILES || rq->op == SL_DSVC_OP_SHARDS) {
		answer_page(fd, d, rq);
	} else if (rq->op == SL_DSVC_OP_OPEN && d->fd >= 0) {
		ans = json_pack("{s:b,s:s,s:o}", "ok", 1, "dataset", d->id, "info",
		                list_entry(d->info));
		sl_dsvc_send(fd, ans, d->fd);
		count_served(s);
	} else if (rq->op == SL_DSVC_OP_OPEN_SHARD || rq->op == SL_DSVC_OP_RELEASE_SHARD) {
		answer_shard(s, fd, c, d,
		             rq->op == SL_DSVC_OP_OPEN_SHARD ? "open_shard" : "release_shard",
		             rq->shard);
	} else {
		sl_dsvc_send(
		    fd, sl_dsvc_error("bad-request", "open of a stream dataset (use open_shard)"),
		    -1);
	}
}
