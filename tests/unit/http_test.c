/* The HTTP fetch helper (core/http.c) against a real HTTP server on a
 * loopback socket (a thread of this test answering one canned response per
 * connection): body and status, the size cap, 429 with Retry-After, other
 * statuses, a refused connection, a protocol outside the allow-list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "seclaunch/error.h"
#include "seclaunch/http.h"

#include "expect.h"

struct server {
	int fd;
	int port;
	const char *response; /* whole HTTP response */
	size_t response_len;
	char request[2048];
	pthread_t th;
};

static void *serve_one(void *arg)
{
	struct server *s = arg;
	int c = accept(s->fd, NULL, NULL);
	if (c < 0)
		return NULL;
	size_t n = 0;
	/* read the request head */
	while (n < sizeof(s->request) - 1) {
		ssize_t k = read(c, s->request + n, sizeof(s->request) - 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
		s->request[n] = '\0';
		if (strstr(s->request, "\r\n\r\n") != NULL)
			break;
	}
	size_t off = 0;
	while (off < s->response_len) {
		ssize_t k = write(c, s->response + off, s->response_len - off);
		if (k <= 0)
			break;
		off += (size_t)k;
	}
	close(c);
	return NULL;
}

static void start(struct server *s, const char *response, size_t len)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	memset(s->request, 0, sizeof(s->request));
	s->response = response;
	s->response_len = len;
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->fd >= 0);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->fd, 4), 0);
	assert_int_equal(getsockname(s->fd, (struct sockaddr *)&a, &al), 0);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&s->th, NULL, serve_one, s), 0);
}

static void stop(struct server *s)
{
	shutdown(s->fd, SHUT_RDWR);
	pthread_join(s->th, NULL);
	close(s->fd);
}

static sl_err get(const struct server *s, size_t max, const char *method, sl_http_resp *r)
{
	char url[64];
	static const char *const hdr[] = {"Metadata-Flavor: Google", NULL};
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/doc", s->port);
	sl_http_req q = {.what = "test server",
	                 .url = url,
	                 .method = method,
	                 .headers = hdr,
	                 .protocols = "http",
	                 .connect_timeout_ms = 2000,
	                 .total_timeout_ms = 5000,
	                 .max_bytes = max,
	                 .no_proxy = true,
	                 .fail = SL_E_ATTEST,
	                 .fail_format = SL_E_ATTEST_FORMAT,
	                 .want_body = true};
	return sl_http_fetch(&q, r);
}

static void test_ok(void **state)
{
	(void)state;
	struct server s;
	sl_http_resp r;
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
	                         "hello";
	start(&s, ok, sizeof(ok) - 1);
	assert_int_equal(get(&s, 0, "PUT", &r), SL_OK);
	stop(&s);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body.len, 5);
	assert_string_equal((const char *)r.body.p, "hello"); /* NUL-terminated */
	/* the method and the headers went out */
	assert_non_null(strstr(s.request, "PUT /doc HTTP/1.1"));
	assert_non_null(strstr(s.request, "Metadata-Flavor: Google"));
	sl_http_resp_free(&r);
	assert_null(r.body.p);
}

static void test_errors(void **state)
{
	(void)state;
	struct server s;
	sl_http_resp r;
	static const char big[] = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
	                          "0123456789abcdefghij"; /* no length: the cap stops it */
	static const char biglen[] =
	    "HTTP/1.1 200 OK\r\nContent-Length: 20\r\nConnection: close\r\n"
	    "\r\n0123456789abcdefghij";
	static const char busy[] = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 42\r\n"
	                           "Content-Length: 0\r\nConnection: close\r\n\r\n";
	static const char missing[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
	                              "Connection: close\r\n\r\n";
	static const char empty[] =
	    "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

	start(&s, big, sizeof(big) - 1);
	expect_fail(get(&s, 10, NULL, &r), SL_E_ATTEST_FORMAT, "answer larger than 10 bytes",
	            "streamed body over the cap");
	stop(&s);
	assert_null(r.body.p);
	start(&s, biglen, sizeof(biglen) - 1);
	expect_fail(get(&s, 10, NULL, &r), SL_E_ATTEST_FORMAT, "answer larger than 10 bytes",
	            "declared length over the cap");
	stop(&s);
	start(&s, busy, sizeof(busy) - 1);
	expect_fail(get(&s, 0, NULL, &r), SL_E_ATTEST, "rate limited (429), retry after 42 s",
	            "429");
	stop(&s);
	start(&s, missing, sizeof(missing) - 1);
	expect_fail(get(&s, 0, NULL, &r), SL_E_ATTEST, "/doc: HTTP 404", "404");
	stop(&s);
	start(&s, empty, sizeof(empty) - 1);
	expect_fail(get(&s, 0, NULL, &r), SL_E_ATTEST_FORMAT, "empty response", "empty body");
	stop(&s);

	/* nothing listens: curl's reason, named */
	start(&s, empty, sizeof(empty) - 1);
	stop(&s); /* the port is closed again */
	expect_fail(get(&s, 0, NULL, &r), SL_E_ATTEST,
	            "test server http://127.0.0.1:", "refused connection");
	assert_non_null(strstr(sl_err_detail(), "onnect"));

	/* a scheme outside the allow-list is never fetched */
	sl_http_req q = {.what = "KDS", .url = "file:///etc/hostname", .fail = SL_E_IO};
	expect_fail(sl_http_fetch(&q, &r), SL_E_IO, "KDS file:///etc/hostname", "file:// URL");
}

static void test_body_cap(void **state)
{
	(void)state;
	sl_http_body b = {.max = 10};
	char six[] = "abcdef";
	assert_int_equal(sl_http_body_write(six, 1, 6, &b), 6);
	assert_int_equal(sl_http_body_write(six, 2, 2, &b), 4);
	assert_int_equal(b.len, 10);
	assert_false(b.overflow);
	assert_string_equal((const char *)b.p, "abcdefabcd");
	assert_int_equal(sl_http_body_write(six, 1, 1, &b), 0); /* one past the cap */
	assert_true(b.overflow);
	assert_int_equal(b.len, 10);
	assert_int_equal(sl_http_body_write(six, SIZE_MAX / 2, 4, &b), 0); /* size * n overflows */
	sl_http_body_reset(&b);
	assert_null(b.p);
	assert_int_equal(b.len, 0);
	assert_false(b.overflow);
	assert_int_equal(b.max, 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ok),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_body_cap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
