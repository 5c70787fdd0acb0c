/* A progress line on stderr for long encrypt/decrypt runs: bytes, rate,
 * ETA. Shown only when stderr is a terminal and -q was not given. */
#ifndef SECLAUNCH_LAUNCHER_PROGRESS_H
#define SECLAUNCH_LAUNCHER_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct sl_progress {
	bool on;
	const char *label;
	uint64_t start_ns;
	uint64_t last_ns;
	bool drawn;
};

void sl_progress_init(struct sl_progress *p, const char *label);
/* An sl_sld_progress_fn: ctx is the struct sl_progress. */
void sl_progress_update(void *ctx, uint64_t done, uint64_t total);
/* Ends the line (after success or failure). */
void sl_progress_end(struct sl_progress *p);

#endif
