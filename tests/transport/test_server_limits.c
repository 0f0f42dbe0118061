/* SPDX-License-Identifier: MIT */
/*
 * test_server_limits.c: a server out of file descriptors pauses its
 * accepts again and again, and says so in one line for the lot, not one
 * line per pause (every 100 ms); at max_channels a newcomer is let in when
 * a pending connection can make room for it, and refused when every
 * channel is established.
 */
#include <errno.h>
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
#include <sys/time.h>
#include <sys/wait.h>

#include <cmocka.h>

#include <weft/loop.h>
#include <weft/transport.h>

#include "echo.h"
#include "support/wait.h"

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
	weft_loop_run_until(loop, weft_test_never, NULL, 1100);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	weft_log_set_sink(NULL, NULL);
	close(ctl);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(atomic_load(&pause_lines) >= 1);
	assert_true(atomic_load(&pause_lines) <= 2);
	weft_server_close(srv, NULL, NULL);
	weft_loop_free(loop);
}

/* A blocking TCP connection to port from the loopback address src, with
 * 2 s timeouts. */
static int
connect_from(uint16_t port, const char *src)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons(port)};
	struct sockaddr_in from = {.sin_family = AF_INET};
	struct timeval tv = {2, 0};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(inet_pton(AF_INET, src, &from.sin_addr), 1);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	assert_int_equal(bind(fd, (struct sockaddr *)&from, sizeof(from)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* True if fd's connection echoes a few bytes back. */
static bool
echoes(int fd)
{
	char buf[8];
	size_t got = 0;
	ssize_t n;

	if (write(fd, "weft", 4) != 4)
		return false;
	while (got < 4 && (n = read(fd, buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)n;
	return got == 4 && memcmp(buf, "weft", 4) == 0;
}

/* True if fd's connection was closed by the server. */
static bool
closed_by_server(int fd)
{
	char c;
	ssize_t n = read(fd, &c, 1);

	return n == 0 || (n < 0 && errno == ECONNRESET);
}

static weft_server_stats
stats_of(weft_server *srv)
{
	weft_server_stats st;

	weft_server_get_stats(srv, &st);
	return st;
}

/* Waits up to 2 s until srv counts n channels open. */
static void
wait_open(weft_server *srv, uint64_t n)
{
	for (int i = 0; i < 400 && stats_of(srv).channels_open != n; i++)
		usleep(5000);
	assert_int_equal(stats_of(srv).channels_open, n);
}

/* An echo server whose channels prove themselves at once. */
static int
established_init(weft_channel *ch, void *arg)
{
	int rv = echo_server_init(ch, arg);

	if (rv == 0)
		weft_server_establish(ch);
	return rv;
}

/*
 * max_channels is reached by connections that never finish their
 * handshake (one host's): a newcomer from elsewhere is let in, and the
 * oldest of that host makes room for it, instead of the newcomer being
 * closed at once.
 */
static void
test_a_newcomer_at_max_channels_is_let_in_while_some_are_pending(void **state)
{
	echo_server es = {0};
	weft_server_opts o = {.address = "127.0.0.1:0",
	                      .init = echo_server_init,
	                      .init_arg = &es,
	                      .max_channels = 4,
	                      .max_pending = 8};
	weft_server_stats st;
	weft_server *srv;
	weft_loop *loop;
	int held[4], fresh, i;

	(void)state;
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(weft_loop_start(loop), 0);
	assert_int_equal(weft_server_new_on_loop(loop, &o, &srv), 0);
	for (i = 0; i < 4; i++) {
		held[i] = connect_from(weft_server_port(srv), "127.0.0.2");
		wait_open(srv, (uint64_t)i + 1);
	}
	fresh = connect_from(weft_server_port(srv), "127.0.0.3");
	assert_true(echoes(fresh));
	assert_true(closed_by_server(held[0]));
	for (i = 1; i < 4; i++)
		assert_true(echoes(held[i]));
	st = stats_of(srv);
	assert_int_equal(st.rejected, 0);
	assert_int_equal(st.evicted, 1);
	assert_int_equal(st.channels_open, 4);
	for (i = 0; i < 4; i++)
		close(held[i]);
	close(fresh);
	weft_server_close(srv, NULL, NULL);
	weft_loop_free(loop);
}

/*
 * max_channels is reached by established channels: nothing can make
 * room, so a newcomer is closed at once; once one of them goes, the next
 * newcomer is let in (accepting was not left paused).
 */
static void
test_a_newcomer_at_max_channels_of_established_ones_is_refused(void **state)
{
	echo_server es = {0};
	weft_server_opts o = {.address = "127.0.0.1:0",
	                      .init = established_init,
	                      .init_arg = &es,
	                      .max_channels = 2,
	                      .max_pending = 8};
	weft_server *srv;
	weft_loop *loop;
	int held[2], fresh, i;

	(void)state;
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(weft_loop_start(loop), 0);
	assert_int_equal(weft_server_new_on_loop(loop, &o, &srv), 0);
	for (i = 0; i < 2; i++) {
		held[i] = connect_from(weft_server_port(srv), "127.0.0.2");
		assert_true(echoes(held[i]));
	}
	fresh = connect_from(weft_server_port(srv), "127.0.0.3");
	assert_true(closed_by_server(fresh));
	close(fresh);
	assert_int_equal(stats_of(srv).rejected, 1);
	close(held[0]);
	wait_open(srv, 1);
	fresh = connect_from(weft_server_port(srv), "127.0.0.3");
	assert_true(echoes(fresh));
	assert_int_equal(stats_of(srv).evicted, 0);
	close(fresh);
	close(held[1]);
	weft_server_close(srv, NULL, NULL);
	weft_loop_free(loop);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_out_of_descriptors_pauses_in_one_line),
	    cmocka_unit_test(
	        test_a_newcomer_at_max_channels_is_let_in_while_some_are_pending),
	    cmocka_unit_test(
	        test_a_newcomer_at_max_channels_of_established_ones_is_refused),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
