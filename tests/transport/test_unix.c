/* SPDX-License-Identifier: MIT */
/*
 * test_unix.c: Unix-domain servers and clients: echo over a path and an
 * abstract name, stale and live socket files, removal on close.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "echo.h"
#include "support/wait.h"

#define DEADLINE_MS 20000

static char path[96];
static char address[128];

static int
setup(void **state)
{
	snprintf(path, sizeof(path), "/tmp/weft-test-unix-%ld.sock",
	         (long)getpid());
	snprintf(address, sizeof(address), "unix:%s", path);
	unlink(path);
	return echo_loop_setup(state);
}

static int
teardown(void **state)
{
	echo_loop_teardown(state);
	unlink(path);
	return 0;
}

static void
close_server(weft_server *srv)
{
	atomic_int closed = 0;

	weft_server_close(srv, echo_server_closed, &closed);
	assert_int_equal(weft_test_run_until(echo_loop, weft_test_atomic_set,
	                                     &closed, DEADLINE_MS),
	                 0);
}

static weft_server *
start_server(const char *addr, echo_server *es, int expect)
{
	weft_server_opts opts = {
	    .address = addr,
	    .init = echo_server_init,
	    .init_arg = es,
	};
	weft_server *srv = NULL;

	assert_int_equal(weft_server_new_on_loop(echo_loop, &opts, &srv),
	                 expect);
	return srv;
}

static void
echo_through(const char *addr, uint64_t msgs)
{
	echo_client c = {.msgs_total = msgs};
	weft_connect_opts opts = {.init = echo_client_init, .init_arg = &c};

	assert_int_equal(
	    weft_connect(echo_loop, addr, &opts, echo_client_connected, &c), 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_client_done, &c, DEADLINE_MS),
	    0);
	assert_int_equal(c.connect_status, 0);
	assert_false(c.inactive);
	assert_int_equal(c.bytes_recv, c.bytes_sent);
	assert_int_equal(c.mismatches, 0);
	assert_string_equal(weft_channel_peer(c.ch), addr);
	weft_channel_close(c.ch);
	assert_int_equal(weft_test_run_until(echo_loop, weft_test_flag_set,
	                                     &c.inactive, DEADLINE_MS),
	                 0);
}

static void
test_unix_echo_and_file_removed_on_close(void **state)
{
	echo_server es = {0};
	weft_server *srv;
	struct stat st;

	(void)state;
	srv = start_server(address, &es, 0);
	assert_string_equal(weft_server_address(srv), address);
	assert_int_equal(weft_server_port(srv), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	echo_through(address, 20000);
	close_server(srv);
	assert_int_equal(stat(path, &st), -1);
	assert_int_equal(errno, ENOENT);
}

static void
test_abstract_unix_echo(void **state)
{
	echo_server es = {0};
	char name[64];
	weft_server *srv;

	(void)state;
	snprintf(name, sizeof(name), "unix:@weft-test-%ld", (long)getpid());
	srv = start_server(name, &es, 0);
	echo_through(name, 1000);
	close_server(srv);
}

static void
test_stale_socket_file_is_replaced(void **state)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	echo_server es = {0};
	weft_server *srv;
	int fd;

	(void)state;
	/* A socket file nobody listens on, as a crashed server leaves. */
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(fd);
	srv = start_server(address, &es, 0);
	echo_through(address, 100);
	close_server(srv);
}

static void
test_live_socket_is_in_use(void **state)
{
	echo_server es = {0};
	weft_server *first, *second;
	struct stat st;

	(void)state;
	first = start_server(address, &es, 0);
	second = start_server(address, &es, WEFT_EADDRINUSE);
	assert_null(second);
	/* The failed server must not remove the first one's file. */
	assert_int_equal(stat(path, &st), 0);
	echo_through(address, 100);
	close_server(first);
}

static void
test_regular_file_is_not_replaced(void **state)
{
	echo_server es = {0};
	FILE *f = fopen(path, "w");

	(void)state;
	assert_non_null(f);
	fclose(f);
	assert_null(start_server(address, &es, WEFT_EADDRINUSE));
	assert_int_equal(access(path, F_OK), 0);
}

static void
test_connect_to_missing_path_is_refused(void **state)
{
	echo_result r = {0};

	(void)state;
	assert_int_equal(
	    weft_connect(echo_loop, address, NULL, echo_result_cb, &r), 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_result_set, &r, DEADLINE_MS),
	    0);
	assert_int_equal(r.status, WEFT_ECONNREFUSED);
	assert_int_equal(r.calls, 1);
}

static void
test_too_long_path_is_a_bad_address(void **state)
{
	char long_address[256];
	echo_result r = {0};

	(void)state;
	memset(long_address, 'x', sizeof(long_address) - 1);
	long_address[sizeof(long_address) - 1] = '\0';
	memcpy(long_address, "unix:/", 6);
	assert_int_equal(
	    weft_connect(echo_loop, long_address, NULL, echo_result_cb, &r),
	    WEFT_EADDR);
	assert_int_equal(weft_address_check(long_address), WEFT_EADDR);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_unix_echo_and_file_removed_on_close, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_abstract_unix_echo, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_stale_socket_file_is_replaced,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_live_socket_is_in_use, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_regular_file_is_not_replaced,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_connect_to_missing_path_is_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_too_long_path_is_a_bad_address,
	                                    setup, teardown),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
