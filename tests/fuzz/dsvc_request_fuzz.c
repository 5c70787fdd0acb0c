/* The data service's request parser (launcher/stage/data_service.c) under serve's
 * token admission: each input is one request on a new connection to a real
 * service (a host dataset and a stream dataset). The service must answer
 * with one JSON object or cut the peer off, never crash; a descriptor comes
 * only with an "ok" answer to a request that carried the token. */
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../launcher/stage/data_service.h"
#include "seclaunch/secret.h"

#define TOKEN "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"

static sl_dsvc *svc;

static sl_err acquire(void *ctx, uint32_t shard, int *fd, uint64_t *len, int *not_ready)
{
	(void)ctx;
	*fd = -1;
	*len = 0;
	*not_ready = shard != 0;
	if (shard == 0) {
		*fd = memfd_create("shard", MFD_CLOEXEC);
		*len = 0;
	}
	return *fd >= 0 || *not_ready ? SL_OK : sl_err_set(SL_E_SYSTEM, "memfd");
}

static void release(void *ctx, uint32_t shard)
{
	(void)ctx;
	(void)shard;
}

static void init(void)
{
	sl_dsvc_opts o = {.job_uid = getuid(), .job_gid = getgid(), .token = TOKEN};
	sl_dsvc_stream_ops ops = {.acquire = acquire, .release = release};
	int fd = memfd_create("one", MFD_CLOEXEC);
	json_t *info = json_pack("{s:s,s:i}", "kind", "host", "size", 4);
	if (sl_crypto_init() != SL_OK || fd < 0 || write(fd, "data", 4) != 4 ||
	    sl_dsvc_new(&o, &svc) != SL_OK || sl_dsvc_add(svc, "one", fd, info) != SL_OK ||
	    sl_dsvc_add_stream(svc, "two", info, &ops) != SL_OK || sl_dsvc_serve(svc) != SL_OK)
		abort();
	json_decref(info);
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char buf[SL_DSVC_MSG_MAX + 1];
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} u;
	if (svc == NULL)
		init();
	if (size == 0 || size > SL_DSVC_MSG_MAX)
		return 0;
	int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sl_dsvc_path(svc));
	if (c < 0 || connect(c, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		abort();
	(void)send(c, data, size, MSG_NOSIGNAL);
	struct pollfd pf = {.fd = c, .events = POLLIN};
	/* every request is answered; 30 s, not less: on a loaded machine the
	 * service thread can wait seconds for a CPU (a 5 s limit fired there once,
	 * and the input ran clean alone) */
	if (poll(&pf, 1, 30000) != 1)
		abort();
	struct iovec iov = {buf, sizeof(buf) - 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
	ssize_t n = recvmsg(c, &mh, MSG_CMSG_CLOEXEC);
	int got = -1;
	struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (cm != NULL && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&got, CMSG_DATA(cm), sizeof(int));
	if (n > 0) {
		json_t *a = json_loadb(buf, (size_t)n, 0, NULL);
		if (a == NULL || !json_is_object(a))
			abort();
		bool ok = json_is_true(json_object_get(a, "ok"));
		/* a descriptor only with ok, and ok only with the token */
		if ((got >= 0 && !ok) ||
		    (ok && memmem(data, size, TOKEN, sizeof(TOKEN) - 1) == NULL))
			abort();
		json_decref(a);
	}
	if (got >= 0)
		close(got);
	close(c);
	return 0;
}
