/* Security review: secret bytes must not stay behind in freed heap memory.
 *
 * This program defines free(): the dynamic linker binds every caller to it
 * (seclaunch's own code, jansson, libcurl, the C library's stdio), and it
 * looks for a needle (bytes of a secret) in each block before handing it to
 * the C library's free. A test sets the needle, runs one operation, and
 * asserts that no freed block held it. realloc() is defined here too, as
 * malloc, copy and free, so that blocks it moves are looked at as well.
 * Under AddressSanitizer, which owns malloc and free, its free hook does the
 * same. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../launcher/cli/cli.h"
#include "seclaunch/identity.h"
#include "seclaunch/kms_client.h"
#include "seclaunch/minisign.h"
#include "seclaunch/secret.h"
#include "seclaunch/util.h"

#if defined(__SANITIZE_ADDRESS__)
#define NO_FREE_HOOK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_FREE_HOOK 1
#endif
#endif

static char needle[128];
static size_t needle_len;
static volatile int hits;
static char needle2[128]; /* a second secret, counted apart */
static size_t needle2_len;
static volatile int hits2;

/* Copies of freed blocks, for secrets only known once the call returns. */
#define SAVE_MAX 256
#define SAVE_BYTES 4096
static char saved[SAVE_MAX][SAVE_BYTES];
static size_t saved_len[SAVE_MAX];
static volatile int nsaved;
static volatile bool saving;

/* Counts the needles in a block about to be freed (and saves a copy). */
static void look(const void *p, size_t n)
{
	if (saving && nsaved < SAVE_MAX) {
		size_t k = n < SAVE_BYTES ? n : SAVE_BYTES;
		memcpy(saved[nsaved], p, k);
		saved_len[nsaved++] = k;
	}
	if (needle_len > 0 && memmem(p, n, needle, needle_len) != NULL)
		hits++;
	if (needle2_len > 0 && memmem(p, n, needle2, needle2_len) != NULL)
		hits2++;
}

#ifndef NO_FREE_HOOK
static void (*real_free)(void *);

static void *(*real_malloc)(size_t);

__attribute__((constructor)) static void hook_init(void)
{
	real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
}

/* The C library's realloc frees a moved block without calling free(): move
 * it here, so the old block is looked at too. */
void *realloc(void *p, size_t n)
{
	if (p == NULL)
		return real_malloc(n);
	size_t have = malloc_usable_size(p);
	void *q = real_malloc(n != 0 ? n : 1);
	if (q == NULL)
		return NULL;
	memcpy(q, p, have < n ? have : n);
	free(p);
	return q;
}

void free(void *p)
{
	if (p == NULL)
		return;
	if (real_free == NULL)
		return; /* only while dlsym resolves it: leak, never crash */
	look(p, malloc_usable_size(p));
	real_free(p);
}
#endif

#ifdef NO_FREE_HOOK
/* the sanitizer allocator's interface (no header ships with gcc) */
int __sanitizer_install_malloc_and_free_hooks(void (*m)(const volatile void *, size_t),
                                              void (*f)(const volatile void *));
size_t __sanitizer_get_allocated_size(const volatile void *p);

static void asan_malloc_hook(const volatile void *p, size_t n)
{
	(void)p;
	(void)n;
}

static void asan_free_hook(const volatile void *vp)
{
	const void *p = (const void *)vp;
	if (p != NULL)
		look(p, __sanitizer_get_allocated_size(vp));
}
#endif

static void install_hook(void)
{
#ifdef NO_FREE_HOOK
	/* both hooks are required, or none is installed */
	if (__sanitizer_install_malloc_and_free_hooks(asan_malloc_hook, asan_free_hook) == 0)
		abort();
#endif
}

static void watch(const char *s, size_t n)
{
	memcpy(needle, s, n);
	needle_len = n;
	hits = 0;
}

static void watch2(const char *s, size_t n)
{
	memcpy(needle2, s, n);
	needle2_len = n;
	hits2 = 0;
}

static void unwatch(void)
{
	needle_len = 0;
	needle2_len = 0;
}

/* A DEK-sized secret as base64, one byte too long for the 32-byte cap: it
 * decodes fully, then is refused; the decoded bytes must be wiped. */
static void test_b64_decode_refused_is_wiped(void **state)
{
	(void)state;
	uint8_t secret[33];
	char *b64 = NULL;
	uint8_t *out = NULL;
	size_t len = 0;
	for (size_t i = 0; i < sizeof(secret); i++)
		secret[i] = (uint8_t)(0xA0 + i);
	assert_int_equal(sl_b64_encode(secret, sizeof(secret), &b64), SL_OK);
	watch((const char *)secret + 4, 24);
	assert_int_equal(sl_b64_decode(b64, 32, &out, &len, "dek"), SL_E_TOO_LARGE);
	unwatch();
	assert_int_equal(hits, 0);
	/* a valid prefix and then a bad character: the prefix decoded */
	char bad[64];
	snprintf(bad, sizeof(bad), "%.40s*AAA", b64);
	watch((const char *)secret + 4, 24);
	assert_int_equal(sl_b64_decode(bad, 64, &out, &len, "dek"), SL_E_FORMAT);
	unwatch();
	assert_int_equal(hits, 0);
	free(b64);
}

static void test_hex_decode_refused_is_wiped(void **state)
{
	(void)state;
	uint8_t secret[32];
	char hex[2 * sizeof(secret) + 8];
	uint8_t *out = NULL;
	size_t len = 0;
	for (size_t i = 0; i < sizeof(secret); i++)
		secret[i] = (uint8_t)(0x51 + 3 * i);
	sl_hex_encode(secret, sizeof(secret), hex);
	hex[60] = 'x'; /* bad digit after 30 decoded bytes */
	watch((const char *)secret + 2, 24);
	assert_int_equal(sl_hex_decode_alloc(hex, 64, &out, &len, "key"), SL_E_INPUT);
	unwatch();
	assert_int_equal(hits, 0);
}

/* A wrap request carries the DEK as base64: the client's copies of it (the
 * encoded member, the serialised body) are wiped, also when the KMS cannot
 * be reached (nothing listens on port 1). */
static void test_kms_wrap_body_is_wiped(void **state)
{
	(void)state;
	char dir[] = "/tmp/review-test.XXXXXX", tok[64];
	uint8_t raw[SL_KMS_DEK_LEN];
	char *b64 = NULL;
	sl_secret *dek = NULL;
	sl_kms *k = NULL;
	uint8_t *wrapped = NULL;
	size_t wl = 0;
	assert_non_null(mkdtemp(dir));
	snprintf(tok, sizeof(tok), "%s/token", dir);
	int fd = open(tok, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "review-admin-token-0123456789\n", 30), 30);
	close(fd);
	for (size_t i = 0; i < sizeof(raw); i++)
		raw[i] = (uint8_t)(0x10 + 7 * i);
	assert_int_equal(sl_b64_encode(raw, sizeof(raw), &b64), SL_OK);
	assert_int_equal(sl_secret_from(raw, sizeof(raw), &dek), SL_OK);
	sl_kms_opts ko = {.url = "https://127.0.0.1:1",
	                  .admin_token_file = tok,
	                  .connect_timeout_ms = 1000,
	                  .total_timeout_ms = 2000,
	                  .max_attempts = 1};
	assert_int_equal(sl_kms_new(&ko, &k), SL_OK);
	watch(b64, 16);
	assert_int_equal(sl_kms_wrap(k, "kek-1", "ds-1", dek, &wrapped, &wl), SL_E_KMS_UNREACHABLE);
	unwatch();
	assert_int_equal(hits, 0);
	/* and the admin token */
	watch("review-admin-token-0123456789", 29);
	sl_kms_free(k);
	unwatch();
	assert_int_equal(hits, 0);
	sl_secret_free(dek);
	free(b64);
	unlink(tok);
	rmdir(dir);
}

/* `policy sign` reads the key's password from the terminal: stdio's buffer
 * for /dev/tty must not keep it. The child gets a pseudo-terminal as its
 * controlling terminal; the parent types the password at the prompt. */
static void test_policy_password_tty_is_wiped(void **state)
{
	(void)state;
	static const char pw[] = "review-Needle-Passw0rd";
	static const char pol[] = "{\"version\":1,\"datasets\":[{\"id\":\"d\",\"allowed_regions\":"
	                          "[\"aws:eu-west-1\"],\"tee_kinds\":[\"sev-snp\"]}]}";
	char dir[] = "/tmp/review-test.XXXXXX", key[64], pfile[64];
	char *sec = NULL, *pub = NULL;
	sl_minisign_pubkey pk;
	assert_non_null(mkdtemp(dir));
	snprintf(key, sizeof(key), "%s/k.key", dir);
	snprintf(pfile, sizeof(pfile), "%s/p.json", dir);
	/* small scrypt limits: the test is about where the password goes */
	assert_int_equal(sl_minisign_keygen(pw, 1, 1 << 16, &sec, &pub, &pk), SL_OK);
	assert_int_equal(sl_file_write_atomic(key, sec, strlen(sec), 0600, false), SL_OK);
	assert_int_equal(sl_file_write_atomic(pfile, pol, strlen(pol), 0644, false), SL_OK);
	sl_wipe(sec, strlen(sec));
	free(sec);
	free(pub);

	int m = posix_openpt(O_RDWR | O_NOCTTY);
	assert_true(m >= 0);
	assert_int_equal(grantpt(m), 0);
	assert_int_equal(unlockpt(m), 0);
	const char *sname = ptsname(m);
	assert_non_null(sname);
	char slave[64];
	snprintf(slave, sizeof(slave), "%s", sname);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(m);
		if (setsid() < 0)
			_exit(90);
		int s = open(slave, O_RDWR); /* becomes the controlling terminal */
		if (s < 0)
			_exit(91);
		unsetenv("SECLAUNCH_POLICY_PASSWORD_FILE");
		alarm(60);
		char *args[] = {"policy", "sign", "--secret-key", key, "--policy", pfile, NULL};
		watch(pw, strlen(pw));
		int rc = cmd_policy(6, args);
		unwatch();
		_exit(hits != 0 ? 100 : rc);
	}
	/* wait for the prompt (echo is off by then), then type */
	char buf[256];
	size_t got = 0;
	while (got < sizeof(buf) - 1) {
		ssize_t n = read(m, buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		buf[got] = '\0';
		if (strstr(buf, "Password: ") != NULL)
			break;
	}
	assert_non_null(strstr(buf, "Password: "));
	usleep(100000);
	assert_int_equal(write(m, pw, strlen(pw)), (ssize_t)strlen(pw));
	assert_int_equal(write(m, "\n", 1), 1);
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	close(m);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0); /* 100: the password was left in freed memory */
	char sig[80];
	snprintf(sig, sizeof(sig), "%s.minisig", pfile);
	unlink(sig);
	unlink(pfile);
	unlink(key);
	rmdir(dir);
}

/* One HTTP exchange on a loopback listener: reads the request (headers and
 * a Content-Length body), answers 200 with a small JSON body. */
static void *http_once(void *arg)
{
	int ls = *(int *)arg, c = accept(ls, NULL, NULL);
	char buf[8192];
	size_t got = 0;
	if (c < 0)
		return NULL;
	for (;;) {
		ssize_t n = read(c, buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		buf[got] = '\0';
		char *end = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "Content-Length:");
		if (end != NULL &&
		    (cl == NULL || got - (size_t)(end + 4 - buf) >= strtoul(cl + 15, NULL, 10)))
			break;
	}
	static const char ans[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	                          "Content-Length: 2\r\nConnection: close\r\n\r\n{}";
	if (write(c, ans, sizeof(ans) - 1) < 0) {
		/* the client sees the failure */
	}
	close(c);
	return NULL;
}

static size_t sink(char *p, size_t sz, size_t n, void *ctx)
{
	(void)p;
	(void)ctx;
	return sz * n;
}

/* In a child: optionally install the wiping allocators, then a POST with a
 * bearer token and a secret body through libcurl, and a JSON text with the
 * secret parsed and serialised by jansson. Exit status: 0 nothing left,
 * 1 the token, 2 the body, 4 the JSON secret left in freed memory (or'd),
 * 64+ setup failure. */
static int heap_child(bool install)
{
	static const char token[] = "Review-Bearer-Token-4f1d2c3b";
	static const char secret[] = "Review-Body-Secret-9a8b7c6d";
	int code = 0;
	if (install && sl_heap_wipe_install() != SL_OK)
		return 64;
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 1) != 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &al) != 0)
		return 65;
	pthread_t th;
	if (pthread_create(&th, NULL, http_once, &ls) != 0)
		return 66;
	char url[64], auth[128], body[128];
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/v1/keys/k/wrap", ntohs(a.sin_port));
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	snprintf(body, sizeof(body), "{\"dataset_id\":\"d\",\"dek\":\"%s\"}", secret);
	CURL *c = curl_easy_init();
	struct curl_slist *h = curl_slist_append(NULL, auth);
	if (c == NULL || h == NULL)
		return 67;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	watch(token, strlen(token));
	watch2(secret, strlen(secret));
	CURLcode cc = curl_easy_perform(c);
	curl_easy_cleanup(c);
	unwatch();
	curl_slist_free_all(h); /* our own copy: not the point here */
	pthread_join(th, NULL);
	close(ls);
	if (cc != CURLE_OK)
		return 68;
	if (hits > 0)
		code |= 1;
	if (hits2 > 0)
		code |= 2;
	/* jansson: parse a text holding the secret and serialise it again */
	watch(secret, strlen(secret));
	json_t *j = json_loads(body, 0, NULL);
	char *out = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
	if (out == NULL)
		return 69;
	size_t ol = strlen(out);
	json_t *v = json_object_get(j, "dek");
	sl_wipe((char *)json_string_value(v), json_string_length(v));
	json_decref(j);
	sl_wipe(out, ol);
	free(out);
	unwatch();
	if (hits > 0)
		code |= 4;
	return code;
}

static int run_heap_child(bool install)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(heap_child(install));
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* Without the wiping allocators libcurl and jansson do leave the secrets
 * (so the check can see them); with them, nothing is left. */
static void test_library_heaps_are_wiped(void **state)
{
	(void)state;
	int without = run_heap_child(false);
	assert_true(without < 64);
	assert_int_equal(without & 3, 3); /* curl kept token and body */
	assert_int_equal(without & 4, 4); /* jansson kept the JSON secret */
	assert_int_equal(run_heap_child(true), 0);
}

/* Whether a saved freed block holds s. */
static bool saved_has(const char *s, size_t n)
{
	for (int i = 0; i < nsaved; i++)
		if (memmem(saved[i], saved_len[i], s, n) != NULL)
			return true;
	return false;
}

/* An unencrypted minisign secret key (policy keygen -W) is the key itself
 * in base64: formatting it must not leave copies in freed memory. */
static void test_minisign_keygen_text_is_wiped(void **state)
{
	(void)state;
	char *sec = NULL, *pub = NULL;
	sl_minisign_pubkey pk;
	nsaved = 0;
	saving = true;
	assert_int_equal(sl_minisign_keygen(NULL, 0, 0, &sec, &pub, &pk), SL_OK);
	saving = false;
	const char *line = strchr(sec, '\n');
	assert_non_null(line);
	assert_true(strlen(line) > 100);
	/* bytes 80..104 of the base64 line: inside the Ed25519 secret key */
	assert_false(saved_has(line + 1 + 80, 24));
	sl_wipe(sec, strlen(sec));
	free(sec);
	free(pub);
}

/* seclaunchd verifies every identity document of a request into one claim
 * set: documents naming different places must not let the last one win. */
static void test_identity_documents_must_agree(void **state)
{
	(void)state;
	sl_claims *c = NULL;
	json_t *a = json_pack("{s:s, s:s}", "kind", "unsigned", "region", "aws:eu-west-1");
	json_t *b = json_pack("{s:s, s:s}", "kind", "unsigned", "region", "aws:us-east-1");
	json_t *g = json_pack("{s:s, s:s}", "kind", "unsigned", "region", "gcp:eu-west-1");
	assert_int_equal(sl_claims_new(&c), SL_OK);
	assert_int_equal(sl_identity_verify(a, NULL, c), SL_OK);
	assert_int_equal(sl_identity_verify(a, NULL, c), SL_OK); /* the same place again */
	assert_int_equal(sl_identity_verify(b, NULL, c), SL_E_ATTEST);
	assert_non_null(
	    strstr(sl_err_detail(), "cloud.region 'us-east-1' contradicts 'eu-west-1'"));
	assert_int_equal(sl_identity_verify(g, NULL, c), SL_E_ATTEST);
	assert_non_null(strstr(sl_err_detail(), "cloud.provider 'gcp' contradicts 'aws'"));
	assert_string_equal(sl_claims_get(c, "cloud.region"), "eu-west-1");
	assert_string_equal(sl_claims_get(c, "cloud.provider"), "aws");
	sl_claims_free(c);
	json_decref(a);
	json_decref(b);
	json_decref(g);
}

int main(void)
{
	if (sl_crypto_init() != SL_OK)
		return 1;
	install_hook();
	const struct CMUnitTest tests[] = {
	    /* first: its children must be the first to initialise libcurl
	     * (curl_global_init_mem takes effect only then) */
	    cmocka_unit_test(test_library_heaps_are_wiped),
	    cmocka_unit_test(test_b64_decode_refused_is_wiped),
	    cmocka_unit_test(test_hex_decode_refused_is_wiped),
	    cmocka_unit_test(test_kms_wrap_body_is_wiped),
	    cmocka_unit_test(test_policy_password_tty_is_wiped),
	    cmocka_unit_test(test_minisign_keygen_text_is_wiped),
	    cmocka_unit_test(test_identity_documents_must_agree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
