/* The daemon log: one line per event, "TIME LEVEL seclaunchd: message" with
 * an RFC 3339 UTC timestamp (milliseconds) and a syslog level name, written
 * with one write(2) under a lock so lines from different threads never mix.
 * Under systemd (JOURNAL_STREAM names our stderr) the line is
 * "<N>seclaunchd: message" instead: journald adds the time and reads N as the
 * priority (sd-daemon(3)). With a log file (config "log_file" or --log-file)
 * lines are appended to it and kmsd_log_reopen() opens it again (logrotate's
 * HUP); the file is never the journal. Nothing secret is ever logged. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kmsd.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_fd = -1;      /* the log file; -1: stderr */
static char *g_path;       /* the log file's path */
static int g_journal = -1; /* -1: not decided yet */

static const char *level_name(enum kmsd_log_level l)
{
	switch (l) {
	case KMSD_LOG_ERR:
		return "error";
	case KMSD_LOG_WARNING:
		return "warning";
	case KMSD_LOG_NOTICE:
		return "notice";
	case KMSD_LOG_INFO:
		return "info";
	}
	return "info";
}

/* systemd sets JOURNAL_STREAM=DEV:INODE of the stream it connected to
 * stderr; stderr redirected elsewhere keeps the plain format. */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	if (js == NULL || sscanf(js, "%llu:%llu", &dev, &ino) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) != 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static SL_RESULT open_file(const char *path, int *fd)
{
	*fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0640);
	if (*fd < 0)
		return sl_err_set(SL_E_IO, "log_file %s: cannot open: %s", path, strerror(errno));
	return SL_OK;
}

sl_err kmsd_log_open(const char *path)
{
	sl_err rc = SL_OK;
	int fd = -1;
	char *p = NULL;
	if (path != NULL) {
		p = strdup(path);
		if (p == NULL)
			return sl_err_set(SL_E_NOMEM, "log_file");
		rc = open_file(path, &fd);
		if (rc != SL_OK) {
			free(p);
			return rc;
		}
	}
	pthread_mutex_lock(&g_mu);
	if (g_fd >= 0)
		close(g_fd);
	free(g_path);
	g_fd = fd;
	g_path = p;
	pthread_mutex_unlock(&g_mu);
	return SL_OK;
}

sl_err kmsd_log_reopen(void)
{
	sl_err rc = SL_OK;
	int fd = -1;
	pthread_mutex_lock(&g_mu);
	if (g_path != NULL) {
		rc = open_file(g_path, &fd);
		if (rc == SL_OK) {
			close(g_fd);
			g_fd = fd;
		}
	}
	pthread_mutex_unlock(&g_mu);
	return rc;
}

const char *kmsd_log_path(void)
{
	return g_path;
}

void kmsd_log_close(void)
{
	pthread_mutex_lock(&g_mu);
	if (g_fd >= 0)
		close(g_fd);
	g_fd = -1;
	free(g_path);
	g_path = NULL;
	pthread_mutex_unlock(&g_mu);
}

void kmsd_logv(enum kmsd_log_level lvl, const char *fmt, va_list ap)
{
	char line[2048];
	size_t n = 0;
	int w;
	int fd;
	pthread_mutex_lock(&g_mu);
	fd = g_fd >= 0 ? g_fd : STDERR_FILENO;
	if (g_journal < 0)
		g_journal = stderr_is_journal();
	if (g_fd < 0 && g_journal) {
		w = snprintf(line, sizeof(line), "<%d>seclaunchd: ", (int)lvl);
	} else {
		struct timespec ts;
		struct tm tm;
		char when[32];
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		w = snprintf(line, sizeof(line), "%s.%03ldZ %s seclaunchd: ", when,
		             ts.tv_nsec / 1000000, level_name(lvl));
	}
	n = w > 0 ? (size_t)w : 0;
	w = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	if (w > 0)
		n += (size_t)w < sizeof(line) - n ? (size_t)w : sizeof(line) - n - 1;
	/* one event, one line: embedded newlines (libmicrohttpd's messages end
	 * with one) are folded */
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		n--;
	for (size_t i = 0; i < n; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	for (size_t off = 0; off < n;) {
		ssize_t k = write(fd, line + off, n - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		off += (size_t)k;
	}
	pthread_mutex_unlock(&g_mu);
}

void kmsd_log(enum kmsd_log_level lvl, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	kmsd_logv(lvl, fmt, ap);
	va_end(ap);
}
