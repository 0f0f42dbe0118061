/* SPDX-License-Identifier: MIT */
/*
 * test_tls_resume.c: dials to one server name that start together. The
 * first does the full handshake and the others wait for its ticket and
 * resume, keeping the peer's identity; a server that issues no tickets, a
 * handshake that never finishes and a failed first dial hold nobody past
 * their timeout; a session is offered only to the name it was verified
 * for, and never after a reload.
 */
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/wait.h"
#include "tls_test.h"

#define DIALS 4
/* A dial waits a quarter of its timeout at most for another's ticket:
 * long enough here for a busy machine's slowest full handshake. */
#define DIAL_TIMEOUT_MS 20000

static weft_loop *loop;
static tt_pki pki;
static weft_tls_ctx *server_tls;

static int
setup(void **state)
{
	(void)state;
	if (tt_setup(&loop, &pki, &server_tls, NULL) != 0 ||
	    tt_node(&pki, "node-b", "node-b") != 0)
		return -1;
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	tt_teardown(loop, &pki, server_tls, NULL);
	return 0;
}

/* A client context of its own, with nothing cached yet. */
static weft_tls_ctx *
fresh_client(void)
{
	weft_tls_ctx *ctx = NULL;

	assert_int_equal(tt_ctx(&pki, "node-b", NULL, &ctx), 0);
	return ctx;
}

struct dials {
	tt_client c[DIALS];
	int n;
};

static bool
all_connected(void *arg)
{
	struct dials *d = arg;
	int i;

	for (i = 0; i < d->n; i++)
		if (!d->c[i].connected)
			return false;
	return true;
}

/* dial_together starts n dials to port at once and runs the loop until
 * every connect callback ran. */
static void
dial_together(struct dials *d, int n, uint16_t port, weft_tls_ctx *tls,
              const char *name, uint64_t timeout_ms)
{
	int i;

	d->n = n;
	for (i = 0; i < n; i++)
		assert_int_equal(tt_client_start(loop, port, tls, name,
		                                 timeout_ms, &d->c[i]),
		                 0);
	assert_int_equal(
	    weft_test_run_until(loop, all_connected, d, TT_DEADLINE_MS), 0);
}

static void
dials_free(struct dials *d)
{
	int i;

	for (i = 0; i < d->n; i++)
		tt_client_free(loop, &d->c[i]);
}

static void
test_dials_to_one_name_resume_from_the_first(void **state)
{
	weft_tls_ctx *client = fresh_client();
	weft_tls_stats st;
	weft_tls_info info;
	struct dials d;
	tt_server s;
	int i, resumed = 0;

	(void)state;
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	dial_together(&d, DIALS, s.port, client, "node-a", DIAL_TIMEOUT_MS);
	for (i = 0; i < DIALS; i++) {
		assert_int_equal(d.c[i].status, 0);
		assert_int_equal(weft_tls_get_info(d.c[i].ch, &info), 0);
		resumed += info.resumed;
		/* A resumed connection carries the verified identity. */
		assert_int_equal(d.c[i].identity_rv, 0);
		assert_string_equal(d.c[i].identity, "node-a");
		assert_int_equal(weft_tls_peer_check(d.c[i].ch, "node-a"), 0);
		assert_int_equal(weft_tls_peer_check(d.c[i].ch, "node-z"),
		                 WEFT_EAUTH);
		assert_int_equal(tt_send(&d.c[i], 0, 100), 0);
		assert_int_equal(tt_run_bytes(loop, &d.c[i], 100), 0);
		assert_true(tt_check(&d.c[i], 100));
	}
	assert_int_equal(resumed, DIALS - 1);
	weft_tls_ctx_get_stats(client, &st);
	assert_int_equal(st.handshakes_completed, DIALS);
	assert_int_equal(st.handshakes_resumed, DIALS - 1);
	/* The server knows the client on resumed connections too. */
	assert_int_equal(s.channels, DIALS);
	assert_int_equal(s.identity_rv, 0);
	assert_string_equal(s.identity, "node-b");
	dials_free(&d);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(client);
}

/* The others wait a quarter of their timeout at most (2 s of 8): every
 * dial is up, each with a full handshake, inside its timeout. */
static void
test_a_server_without_tickets_gets_every_dial_up_in_full(void **state)
{
	weft_tls_opts no_tickets = {.no_resumption = true};
	weft_tls_ctx *client = fresh_client(), *quiet;
	weft_tls_stats st;
	struct dials d;
	tt_server s;
	int i;

	(void)state;
	assert_int_equal(tt_ctx(&pki, "node-a", &no_tickets, &quiet), 0);
	assert_int_equal(
	    tt_server_start(loop, quiet, WEFT_TLS_MODE_REQUIRED, &s), 0);
	dial_together(&d, DIALS, s.port, client, "node-a", 8000);
	for (i = 0; i < DIALS; i++) {
		assert_int_equal(d.c[i].status, 0);
		assert_int_equal(d.c[i].identity_rv, 0);
	}
	weft_tls_ctx_get_stats(client, &st);
	assert_int_equal(st.handshakes_completed, DIALS);
	assert_int_equal(st.handshakes_resumed, 0);
	dials_free(&d);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(quiet);
	weft_tls_ctx_unref(client);
}

/* listen_silent listens on 127.0.0.1 and never answers: the kernel
 * completes the TCP connection, no TLS ever follows. */
static int
listen_silent(uint16_t *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* The first dial's handshake never finishes: each dial ends with its own
 * timeout, and the name's next dials start afresh (one leads, the rest
 * resume from it). */
static void
test_a_handshake_that_never_finishes_holds_no_dial_forever(void **state)
{
	weft_tls_ctx *client = fresh_client();
	weft_tls_stats st;
	struct dials d;
	tt_server s;
	uint16_t port;
	int fd, i;

	(void)state;
	fd = listen_silent(&port);
	dial_together(&d, DIALS, port, client, "node-a", 300);
	for (i = 0; i < DIALS; i++)
		assert_int_equal(d.c[i].status, WEFT_ETIMEDOUT);
	dials_free(&d);
	close(fd);
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	dial_together(&d, DIALS, s.port, client, "node-a", DIAL_TIMEOUT_MS);
	for (i = 0; i < DIALS; i++)
		assert_int_equal(d.c[i].status, 0);
	weft_tls_ctx_get_stats(client, &st);
	assert_int_equal(st.handshakes_completed, DIALS);
	assert_int_equal(st.handshakes_resumed, DIALS - 1);
	dials_free(&d);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(client);
}

/* A first dial that fails (the server's certificate does not name it)
 * sends the ones that waited for it to their own full handshakes, which
 * fail the same way: no session reached them. */
static void
test_a_failed_first_dial_lets_the_others_go_in_full(void **state)
{
	weft_tls_ctx *client = fresh_client();
	weft_tls_stats st;
	struct dials d;
	tt_server s;
	int i;

	(void)state;
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	dial_together(&d, DIALS, s.port, client, "node-z", DIAL_TIMEOUT_MS);
	for (i = 0; i < DIALS; i++)
		assert_int_equal(d.c[i].status, WEFT_ETLS);
	weft_tls_ctx_get_stats(client, &st);
	assert_int_equal(st.handshakes_completed, 0);
	assert_int_equal(st.handshakes_resumed, 0);
	dials_free(&d);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(client);
}

/* connect_and_read dials name, reads 100 bytes back (the ticket comes
 * first) and closes. Returns the connect status. */
static int
connect_and_read(uint16_t port, weft_tls_ctx *tls, const char *name)
{
	tt_client c;
	int rv = tt_client_connect(loop, port, tls, name, &c);

	if (rv == 0) {
		assert_int_equal(tt_send(&c, 0, 100), 0);
		assert_int_equal(tt_run_bytes(loop, &c, 100), 0);
	}
	tt_client_free(loop, &c);
	return rv;
}

/* A ticket from node-a's server is kept for node-a: a dial to the same
 * address under another name does a full handshake, which checks the
 * certificate and fails; a reload of the context (a new CA perhaps)
 * starts with nothing to offer. */
static void
test_a_session_is_offered_only_to_its_name_and_generation(void **state)
{
	weft_tls_ctx *client = fresh_client();
	weft_tls_stats st;
	tt_server s;

	(void)state;
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	assert_int_equal(connect_and_read(s.port, client, "node-a"), 0);
	assert_int_equal(connect_and_read(s.port, client, "node-z"), WEFT_ETLS);
	weft_tls_ctx_get_stats(client, &st);
	assert_int_equal(st.handshakes_completed, 1);
	assert_int_equal(st.handshakes_resumed, 0);
	assert_int_equal(connect_and_read(s.port, client, "node-a"), 0);
	weft_tls_ctx_get_stats(client, &st);
	assert_int_equal(st.handshakes_resumed, 1);
	assert_int_equal(weft_tls_ctx_reload(client), 0);
	assert_int_equal(connect_and_read(s.port, client, "node-a"), 0);
	weft_tls_ctx_get_stats(client, &st);
	assert_int_equal(st.handshakes_completed, 3);
	assert_int_equal(st.handshakes_resumed, 1);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(client);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dials_to_one_name_resume_from_the_first),
	    cmocka_unit_test(
	        test_a_server_without_tickets_gets_every_dial_up_in_full),
	    cmocka_unit_test(
	        test_a_handshake_that_never_finishes_holds_no_dial_forever),
	    cmocka_unit_test(
	        test_a_failed_first_dial_lets_the_others_go_in_full),
	    cmocka_unit_test(
	        test_a_session_is_offered_only_to_its_name_and_generation),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
