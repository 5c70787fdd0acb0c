/* Progress line for encrypt/decrypt (see progress.h). */
#include <stdio.h>
#include <unistd.h>

#include "cli.h"
#include "progress.h"
#include "seclaunch/util.h"

#define REDRAW_NS 100000000ull /* 10 redraws a second at most */

void sl_progress_init(struct sl_progress *p, const char *label)
{
	p->on = !sl_cli_quiet && isatty(STDERR_FILENO);
	p->label = label;
	p->start_ns = p->last_ns = sl_now_ns();
	p->drawn = false;
}

static void human(double bytes, char *buf, size_t n)
{
	const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	while (bytes >= 1024 && u < 4) {
		bytes /= 1024;
		u++;
	}
	snprintf(buf, n, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
}

void sl_progress_update(void *ctx, uint64_t done, uint64_t total)
{
	struct sl_progress *p = ctx;
	uint64_t now = sl_now_ns();
	char d[32], t[32], r[32], eta[32] = "--:--";

	if (!p->on || (now - p->last_ns < REDRAW_NS && done < total))
		return;
	p->last_ns = now;
	double secs = (double)(now - p->start_ns) / 1e9;
	double rate = secs > 0 ? (double)done / secs : 0;
	human((double)done, d, sizeof(d));
	human((double)total, t, sizeof(t));
	human(rate, r, sizeof(r));
	if (rate > 0 && total >= done) {
		unsigned long s = (unsigned long)((double)(total - done) / rate);
		snprintf(eta, sizeof(eta), "%lu:%02lu", s / 60, s % 60);
	}
	fprintf(stderr, "\r%s %s / %s (%3.0f%%) %s/s ETA %s   ", p->label, d, t,
	        total > 0 ? 100.0 * (double)done / (double)total : 100.0, r, eta);
	p->drawn = true;
}

void sl_progress_end(struct sl_progress *p)
{
	if (p->on && p->drawn)
		fputc('\n', stderr);
	p->drawn = false;
}
