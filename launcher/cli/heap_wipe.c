/* The libraries that carry secrets for the launcher keep their own heap
 * copies: libcurl builds each request (the admin token's Authorization
 * header, a wrap's DEK in the body) in buffers it frees unwiped, and
 * jansson's parser and serialiser grow text buffers the same way. Both let
 * the program choose their allocator: these wipe a block before freeing it.
 * Installed at start, before either library allocates. */
#include <curl/curl.h>
#include <jansson.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "seclaunch/secret.h"

static void wipe_free(void *p)
{
	if (p == NULL)
		return;
	sl_wipe(p, malloc_usable_size(p));
	free(p);
}

/* realloc would free a moved block unwiped: move it by hand */
static void *wipe_realloc(void *p, size_t n)
{
	if (p == NULL)
		return malloc(n);
	size_t have = malloc_usable_size(p);
	if (n != 0 && n <= have)
		return p;
	void *q = malloc(n != 0 ? n : 1);
	if (q == NULL)
		return NULL;
	memcpy(q, p, have < n ? have : n);
	wipe_free(p);
	return q;
}

static char *wipe_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = malloc(n);
	if (d != NULL)
		memcpy(d, s, n);
	return d;
}

sl_err sl_heap_wipe_install(void)
{
	json_set_alloc_funcs(malloc, wipe_free);
	/* takes effect only as libcurl's first initialisation in the process */
	if (curl_global_init_mem(CURL_GLOBAL_DEFAULT, malloc, wipe_free, wipe_realloc, wipe_strdup,
	                         calloc) != CURLE_OK)
		return sl_err_set(SL_E_SYSTEM, "initialising libcurl");
	return SL_OK;
}
