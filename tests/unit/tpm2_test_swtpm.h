/* A real swtpm child for tpm2_test.c: state in a temp dir, server on a free
 * loopback port with its control channel on port + 1 (where the TSS swtpm
 * TCTI looks), stopped by pid. Tests skip when swtpm is not installed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct swtpm {
	pid_t pid;
	int port;
	char dir[64];
	char tcti[64];
} swtpm;

static bool port_free(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int s = socket(AF_INET, SOCK_STREAM, 0), ok;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = bind(s, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(s);
	return ok;
}

/* P with P and P + 1 free, below the ephemeral port range (busy machines
 * fill that with TIME_WAIT connections, which block a listener). Someone may
 * still take one before swtpm binds: swtpm then exits and swtpm_start tries
 * another pair. */
static int pick_port(void)
{
	static unsigned seed;
	if (seed == 0)
		seed = (unsigned)getpid();
	for (int i = 0; i < 2000; i++) {
		int p = 10000 + (int)(rand_r(&seed) % 22000);
		if (port_free(p) && port_free(p + 1))
			return p;
	}
	return -1;
}

/* Waits for port to accept, or for the child to exit (port taken). */
static bool wait_port(int port, pid_t pid)
{
	for (int i = 0; i < 200; i++) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		int s = socket(AF_INET, SOCK_STREAM, 0), ok;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ok = connect(s, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(s);
		if (ok)
			return true;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return false;
		usleep(50000);
	}
	return false;
}

static bool have_swtpm(void)
{
	return system("command -v swtpm >/dev/null 2>&1") == 0;
}

/* state: an existing state dir (swtpm_setup output) or NULL for a fresh one. */
static bool swtpm_start(swtpm *t, const char *state)
{
	char srv[96], ctl[96], st[96];

	memset(t, 0, sizeof(*t));
	if (state != NULL) {
		snprintf(t->dir, sizeof(t->dir), "%s", state);
	} else {
		snprintf(t->dir, sizeof(t->dir), "/tmp/sltpm2.XXXXXX");
		if (mkdtemp(t->dir) == NULL)
			return false;
	}
	for (int attempt = 0; attempt < 20; attempt++) {
		t->port = pick_port();
		if (t->port < 0)
			return false;
		snprintf(srv, sizeof(srv), "type=tcp,port=%d,bindaddr=127.0.0.1", t->port);
		snprintf(ctl, sizeof(ctl), "type=tcp,port=%d,bindaddr=127.0.0.1", t->port + 1);
		snprintf(st, sizeof(st), "dir=%s", t->dir);
		t->pid = fork();
		if (t->pid == 0) {
			int null = open("/dev/null", O_WRONLY);
			dup2(null, 1);
			dup2(null, 2);
			execlp("swtpm", "swtpm", "socket", "--tpm2", "--tpmstate", st, "--server",
			       srv, "--ctrl", ctl, "--flags", "not-need-init,startup-clear",
			       (char *)NULL);
			_exit(127);
		}
		if (t->pid < 0)
			return false;
		if (wait_port(t->port, t->pid)) {
			snprintf(t->tcti, sizeof(t->tcti), "swtpm:host=127.0.0.1,port=%d", t->port);
			return true;
		}
		kill(t->pid, SIGKILL);
		waitpid(t->pid, NULL, 0);
		t->pid = 0;
	}
	return false;
}

static void swtpm_stop(swtpm *t)
{
	char cmd[128];
	if (t->pid > 0) {
		kill(t->pid, SIGTERM);
		waitpid(t->pid, NULL, 0);
	}
	if (strncmp(t->dir, "/tmp/sltpm2.", 12) == 0) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", t->dir);
	}
	t->pid = 0;
}
