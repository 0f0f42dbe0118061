/* SPDX-License-Identifier: MIT */
/*
 * test_tls_optional.c: a server in optional mode tells TLS clients from
 * plaintext ones by their first byte and serves both; a client that says
 * nothing, or leaves before its first byte, is dropped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "support/wait.h"
#include "tls_test.h"

static weft_loop *loop;
static tt_pki pki;
static weft_tls_ctx *server_tls, *client_tls;

static int
setup(void **state)
{
	(void)state;
	return tt_setup(&loop, &pki, &server_tls, &client_tls);
}

static int
teardown(void **state)
{
	(void)state;
	tt_teardown(loop, &pki, server_tls, client_tls);
	return 0;
}

static void
test_tls_and_plaintext_clients_are_both_served(void **state)
{
	weft_tls_stats before, after;
	tt_server s;

	(void)state;
	weft_tls_ctx_get_stats(server_tls, &before);
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_OPTIONAL, &s), 0);
	tt_echo_check(loop, s.port, client_tls, 100000);
	assert_int_equal(s.tls_channels, 1);
	assert_int_equal(s.identity_rv, 0);
	assert_string_equal(s.identity, "node-b");

	tt_echo_check(loop, s.port, NULL, 100000);
	assert_int_equal(s.channels, 2);
	assert_int_equal(s.tls_channels, 1);
	/* A plaintext peer has no identity to match. */
	assert_int_equal(s.identity_rv, WEFT_EINVAL);

	tt_echo_check(loop, s.port, client_tls, 1000);
	weft_tls_ctx_get_stats(server_tls, &after);
	assert_int_equal(after.plaintext_accepted - before.plaintext_accepted,
	                 1);
	tt_server_stop(loop, &s);
}

static void
test_optional_mode_still_refuses_bad_certificates(void **state)
{
	weft_tls_ctx *anonymous;
	tt_server s;
	tt_client c;

	(void)state;
	assert_int_equal(tt_ctx(&pki, NULL, NULL, &anonymous), 0);
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_OPTIONAL, &s), 0);
	if (tt_client_connect(loop, s.port, anonymous, "node-a", &c) == 0)
		assert_int_equal(tt_run_flag(loop, &c.inactive), 0);
	assert_int_equal(tt_run_failures(loop, &s, 1), 0);
	assert_int_equal(s.channels, 0);
	tt_client_free(loop, &c);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(anonymous);
}

static void
test_silent_and_vanishing_clients_are_dropped(void **state)
{
	tt_server s;
	int fd;

	(void)state;
	assert_int_equal(tt_server_start_timeout(
	                     loop, server_tls, WEFT_TLS_MODE_OPTIONAL, 200, &s),
	                 0);
	/* Says nothing: dropped at the deadline. */
	fd = tt_raw_connect(s.port);
	assert_int_equal(weft_test_run_until(loop, tt_raw_closed, &fd, 5000),
	                 0);
	close(fd);
	assert_int_equal(tt_run_failures(loop, &s, 1), 0);
	/* Leaves before its first byte. */
	fd = tt_raw_connect(s.port);
	close(fd);
	assert_int_equal(tt_run_failures(loop, &s, 2), 0);
	tt_echo_check(loop, s.port, NULL, 10);
	tt_echo_check(loop, s.port, client_tls, 10);
	tt_server_stop(loop, &s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tls_and_plaintext_clients_are_both_served),
	    cmocka_unit_test(test_optional_mode_still_refuses_bad_certificates),
	    cmocka_unit_test(test_silent_and_vanishing_clients_are_dropped),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
