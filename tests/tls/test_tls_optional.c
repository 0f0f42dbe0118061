/*
 * test_tls_optional.c: a server in optional mode tells TLS clients from
 * plaintext ones by their first byte and serves both; a client that says
 * nothing, or leaves before its first byte, is dropped.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "tls_test.h"

static weft_loop *loop;
static tt_pki pki;
static weft_tls_ctx *server_tls, *client_tls;

static int
setup(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_IGN);
	if (weft_loop_new(&loop) != 0 || tt_pki_new(&pki) != 0 ||
	    tt_node(&pki, "node-a", "node-a") != 0 ||
	    tt_node(&pki, "node-b", "node-b") != 0 ||
	    tt_ctx(&pki, "node-a", NULL, &server_tls) != 0 ||
	    tt_ctx(&pki, "node-b", NULL, &client_tls) != 0)
		return -1;
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	weft_loop_free(loop);
	weft_tls_ctx_unref(server_tls);
	weft_tls_ctx_unref(client_tls);
	tt_pki_free(&pki);
	return 0;
}

struct failures_wait {
	tt_server *s;
	uint64_t n;
};

static bool
failures_reached(void *arg)
{
	struct failures_wait *w = arg;
	weft_server_stats st;

	weft_server_get_stats(w->s->srv, &st);
	return st.setup_failures >= w->n;
}

/* echo sends n bytes on a new client and checks they come back. */
static void
echo(tt_server *s, weft_tls_ctx *tls, size_t n, bool expect_tls)
{
	tt_client c;

	assert_int_equal(tt_client_connect(loop, s->port, tls, "node-a", &c),
	                 0);
	assert_int_equal(weft_tls_is_active(c.ch), expect_tls);
	assert_int_equal(tt_send(&c, 0, n), 0);
	assert_int_equal(tt_run_bytes(loop, &c, n), 0);
	assert_true(tt_check(&c, n));
	tt_client_free(loop, &c);
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
	echo(&s, client_tls, 100000, true);
	assert_int_equal(s.tls_channels, 1);
	assert_int_equal(s.identity_rv, 0);
	assert_string_equal(s.identity, "node-b");

	echo(&s, NULL, 100000, false);
	assert_int_equal(s.channels, 2);
	assert_int_equal(s.tls_channels, 1);
	/* A plaintext peer has no identity to match. */
	assert_int_equal(s.identity_rv, WEFT_EINVAL);

	echo(&s, client_tls, 1000, true);
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
	struct failures_wait w = {&s, 1};

	(void)state;
	assert_int_equal(tt_ctx(&pki, NULL, NULL, &anonymous), 0);
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_OPTIONAL, &s), 0);
	if (tt_client_connect(loop, s.port, anonymous, "node-a", &c) == 0)
		assert_int_equal(tt_run_flag(loop, &c.inactive), 0);
	assert_int_equal(tt_run_until(loop, failures_reached, &w, 5000), 0);
	assert_int_equal(s.channels, 0);
	tt_client_free(loop, &c);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(anonymous);
}

static int
raw_connect(uint16_t port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

static bool
raw_closed(void *arg)
{
	int fd = *(int *)arg;
	char buf[512];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		;
	return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

static void
test_silent_and_vanishing_clients_are_dropped(void **state)
{
	tt_server s;
	struct failures_wait w = {&s, 1};
	int fd;

	(void)state;
	assert_int_equal(tt_server_start_timeout(
	                     loop, server_tls, WEFT_TLS_MODE_OPTIONAL, 200, &s),
	                 0);
	/* Says nothing: dropped at the deadline. */
	fd = raw_connect(s.port);
	assert_int_equal(tt_run_until(loop, raw_closed, &fd, 5000), 0);
	close(fd);
	assert_int_equal(tt_run_until(loop, failures_reached, &w, 5000), 0);
	/* Leaves before its first byte. */
	fd = raw_connect(s.port);
	close(fd);
	w.n = 2;
	assert_int_equal(tt_run_until(loop, failures_reached, &w, 5000), 0);
	echo(&s, NULL, 10, false);
	echo(&s, client_tls, 10, true);
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
