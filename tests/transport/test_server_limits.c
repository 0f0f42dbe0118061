/* SPDX-License-Identifier: MIT */
/*
 * test_server_limits.c: a server out of file descriptors pauses its
 * accepts again and again, and says so in one line for the lot, not one
 * line per pause (every 100 ms).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cmocka.h>

#include <weft/loop.h>
#include <weft/transport.h>

#include "echo.h"

static _Atomic int pause_lines;

static void
count_pauses(enum weft_log_level level, const char *line, void *arg)
{
	(void)arg;
	if (level >= WEFT_LOG_WARN && strstr(line, "pausing accepts") != NULL)
		atomic_fetch_add(&pause_lines, 1);
}

/* The descriptors this process has open. */
static int
open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory itself */
}

/* A child that opens n connections to port and holds them until its
 * stdin closes. */
static pid_t
hold_connections(uint16_t port, int n, int *ctl)
{
	int fds[2];
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	if ((pid = fork()) == 0) {
		struct sockaddr_in sa = {.sin_family = AF_INET,
		                         .sin_port = htons(port)};
		char c;

		close(fds[1]);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		for (int i = 0; i < n; i++) {
			int fd = socket(AF_INET, SOCK_STREAM, 0);

			if (fd >= 0)
				connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		}
		while (read(fds[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(fds[0]);
	*ctl = fds[1];
	return pid;
}

static bool
never(void *arg)
{
	(void)arg;
	return false;
}

static void
test_out_of_descriptors_pauses_in_one_line(void **state)
{
	echo_server es = {0};
	weft_server_opts o = {.address = "127.0.0.1:0",
	                      .init = echo_server_init,
	                      .init_arg = &es};
	struct rlimit old, low;
	weft_server *srv;
	weft_loop *loop;
	int ctl, status;
	pid_t child;

	(void)state;
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(weft_server_new_on_loop(loop, &o, &srv), 0);
	weft_log_set_sink(count_pauses, NULL);
	/* Room for a few channels only; the child asks for many more. */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)open_fds() + 4;
	child = hold_connections(weft_server_port(srv), 40, &ctl);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	/* About ten pauses of 100 ms each. */
	weft_loop_run_until(loop, never, NULL, 1100);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	weft_log_set_sink(NULL, NULL);
	close(ctl);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(atomic_load(&pause_lines) >= 1);
	assert_true(atomic_load(&pause_lines) <= 2);
	weft_server_close(srv, NULL, NULL);
	weft_loop_free(loop);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_out_of_descriptors_pauses_in_one_line),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
