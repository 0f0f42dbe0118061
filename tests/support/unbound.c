/* SPDX-License-Identifier: MIT */
/* unbound.c: see unbound.h. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/ports.h"
#include "unbound.h"

#define UNBOUND "/usr/sbin/unbound"
#define UNBOUND_CONTROL "/usr/sbin/unbound-control"
#define START_TRIES 100 /* of 50 ms: 5 s for unbound to answer */
#define STOP_TRIES 100  /* of 50 ms */

extern char **environ;

static void
sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

bool
unbound_available(void)
{
	return access(UNBOUND, X_OK) == 0 && access(UNBOUND_CONTROL, X_OK) == 0;
}

/* Runs argv with its output in the server's log; its exit status, or
 * -1. */
static int
run_in(struct unbound_server *u, char *const argv[], const char *in, pid_t *bg)
{
	posix_spawn_file_actions_t fa;
	char log[128];
	pid_t pid;
	int status, rv;

	snprintf(log, sizeof(log), "%s/out.log", u->dir);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, in, O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, log,
	                                 O_WRONLY | O_CREAT | O_APPEND, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	rv = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rv != 0)
		return -1;
	if (bg != NULL) {
		*bg = pid;
		return 0;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int
run(struct unbound_server *u, char *const argv[], pid_t *bg)
{
	return run_in(u, argv, "/dev/null", bg);
}

static int
control(struct unbound_server *u, const char *cmd, const char *arg)
{
	char *const argv[] = {(char *)UNBOUND_CONTROL,
	                      "-c",
	                      u->conf,
	                      (char *)cmd,
	                      (char *)arg,
	                      NULL};

	return run(u, argv, NULL) == 0 ? 0 : -1;
}

static void
write_conf(struct unbound_server *u, const char *zone,
           const char *const *records, size_t n)
{
	FILE *f;
	size_t i;

	snprintf(u->conf, sizeof(u->conf), "%s/unbound.conf", u->dir);
	assert_non_null(f = fopen(u->conf, "w"));
	fprintf(f,
	        "server:\n"
	        "  interface: 127.0.0.1@%u\n"
	        "  port: %u\n"
	        "  do-ip6: no\n"
	        "  do-daemonize: no\n"
	        "  username: \"\"\n"
	        "  chroot: \"\"\n"
	        "  directory: \"%s\"\n"
	        "  pidfile: \"%s/unbound.pid\"\n"
	        "  logfile: \"%s/unbound.log\"\n"
	        "  use-syslog: no\n"
	        "  verbosity: 1\n"
	        "  num-threads: 1\n"
	        "  outgoing-range: 16\n"
	        "  module-config: \"iterator\"\n"
	        "  access-control: 127.0.0.0/8 allow\n"
	        "  local-zone: \"%s.\" static\n",
	        u->port, u->port, u->dir, u->dir, u->dir, zone);
	for (i = 0; i < n; i++)
		fprintf(f, "  local-data: \"%s\"\n", records[i]);
	fprintf(f,
	        "remote-control:\n"
	        "  control-enable: yes\n"
	        "  control-interface: \"%s/control.sock\"\n",
	        u->dir);
	assert_int_equal(fclose(f), 0);
}

void
unbound_start(struct unbound_server *u, const char *zone,
              const char *const *records, size_t n)
{
	char *argv[] = {(char *)UNBOUND, "-d", "-c", u->conf, NULL};
	FILE *f;
	int i;

	memset(u, 0, sizeof(*u));
	snprintf(u->dir, sizeof(u->dir), "/tmp/weft-unbound-XXXXXX");
	assert_non_null(mkdtemp(u->dir));
	u->port = weft_test_free_port();
	snprintf(u->servers, sizeof(u->servers), "127.0.0.1:%u", u->port);
	write_conf(u, zone, records, n);
	snprintf(u->resolv_conf, sizeof(u->resolv_conf), "%s/resolv.conf",
	         u->dir);
	assert_non_null(f = fopen(u->resolv_conf, "w"));
	fprintf(f, "nameserver %s\n", u->servers);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(run(u, argv, &u->pid), 0);
	for (i = 0; i < START_TRIES; i++) {
		if (control(u, "status", NULL) == 0)
			return;
		sleep_ms(50);
	}
	fail_msg("unbound did not start: see %s/unbound.log", u->dir);
}

int
unbound_add(struct unbound_server *u, const char *record)
{
	return control(u, "local_data", record);
}

int
unbound_add_many(struct unbound_server *u, const char *const *records, size_t n)
{
	char *const argv[] = {(char *)UNBOUND_CONTROL, "-c", u->conf,
	                      "local_datas", NULL};
	char path[128];
	FILE *f;
	size_t i;
	int rv;

	snprintf(path, sizeof(path), "%s/records.txt", u->dir);
	if ((f = fopen(path, "w")) == NULL)
		return -1;
	for (i = 0; i < n; i++)
		fprintf(f, "%s\n", records[i]);
	if (fclose(f) != 0)
		return -1;
	rv = run_in(u, argv, path, NULL);
	unlink(path);
	return rv == 0 ? 0 : -1;
}

int
unbound_remove(struct unbound_server *u, const char *name)
{
	return control(u, "local_data_remove", name);
}

void
unbound_stop(struct unbound_server *u)
{
	int i, status;

	if (u->pid <= 0)
		return;
	kill(u->pid, SIGTERM);
	for (i = 0; i < STOP_TRIES; i++) {
		if (waitpid(u->pid, &status, WNOHANG) == u->pid)
			break;
		sleep_ms(50);
	}
	if (i == STOP_TRIES) {
		kill(u->pid, SIGKILL);
		waitpid(u->pid, &status, 0);
	}
	u->pid = 0;
}

void
unbound_free(struct unbound_server *u)
{
	char *const argv[] = {"/bin/rm", "-rf", u->dir, NULL};

	unbound_stop(u);
	if (u->dir[0] != '\0')
		run(u, argv, NULL);
	u->dir[0] = '\0';
}
