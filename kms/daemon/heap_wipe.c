/* jansson keeps its own heap copies of what it parses and serialises: a
 * wrap request's DEK and the admin token pass through it in seclaunchd. It
 * lets the program choose its allocator: this one wipes a block before
 * freeing it (as the launcher's does). libmicrohttpd has no allocator hook:
 * its per-connection memory pool is an anonymous mapping returned to the
 * kernel when the connection closes (docs/seclaunchd.md, "Privilege
 * separation"). */
#include <jansson.h>
#include <malloc.h>
#include <stdlib.h>

#include "daemon.h"

static void wipe_free(void *p)
{
	if (p == NULL)
		return;
	sl_wipe(p, malloc_usable_size(p));
	free(p);
}

void kmsd_heap_wipe_install(void)
{
	json_set_alloc_funcs(malloc, wipe_free);
}
