/* SPDX-License-Identifier: MIT */
/*
 * test_tls_echo.c: a TLS echo server and client with mutual
 * authentication: many small messages and one of 16 MiB come back
 * byte-exact, each side sees the other's identity, a second connection
 * resumes the session, and a graceful close sends close_notify.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <weft/stream.h>

#include "tls_test.h"

static weft_loop *loop;
static tt_pki pki;
static weft_tls_ctx *server_tls, *client_tls;

static int
setup(void **state)
{
	(void)state;
	if (tt_setup(&loop, &pki, &server_tls, &client_tls) != 0 ||
	    tt_issue(&pki, "cn-only", "node-c", TT_CLUSTER, -60, 3600, true) !=
	        0)
		return -1;
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	tt_teardown(loop, &pki, server_tls, client_tls);
	return 0;
}

static void
test_small_messages_come_back_byte_exact(void **state)
{
	const uint64_t msgs = 20000;
	tt_server s;
	tt_client c;
	uint64_t off = 0, i;
	size_t n;

	(void)state;
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	assert_int_equal(
	    tt_client_connect(loop, s.port, client_tls, "node-a", &c), 0);
	assert_true(weft_tls_is_active(c.ch));
	/* The transport's own TLS stream carries it, with no handler. */
	assert_string_equal(weft_channel_stream(c.ch)->ops->name, "tls");
	assert_null(weft_pipeline_get(c.ch, "weft.tls"));
	for (i = 0; i < msgs; i++) {
		n = 1 + (size_t)(i * 7919 % 97);
		assert_int_equal(tt_send(&c, off, n), 0);
		off += n;
	}
	assert_int_equal(tt_run_bytes(loop, &c, off), 0);
	assert_true(tt_check(&c, off));
	assert_int_equal(s.channels, 1);
	assert_int_equal(s.tls_channels, 1);
	/* Each side knows who is at the other end. */
	assert_int_equal(c.identity_rv, 0);
	assert_string_equal(c.identity, "node-a");
	assert_int_equal(s.identity_rv, 0);
	assert_string_equal(s.identity, "node-b");
	tt_client_free(loop, &c);
	tt_server_stop(loop, &s);
}

static void
test_16mib_message_comes_back_byte_exact(void **state)
{
	const size_t big = 16u << 20;
	tt_server s;
	tt_client c;

	(void)state;
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	assert_int_equal(
	    tt_client_connect(loop, s.port, client_tls, "node-a", &c), 0);
	assert_int_equal(tt_send(&c, 0, big), 0);
	assert_int_equal(tt_run_bytes(loop, &c, big), 0);
	assert_true(tt_check(&c, big));
	assert_int_equal(c.error, 0);
	tt_client_free(loop, &c);
	tt_server_stop(loop, &s);
}

static void
test_second_connection_resumes_the_session(void **state)
{
	weft_tls_ctx *fresh;
	weft_tls_stats stats;
	weft_tls_info info;
	tt_server s;
	tt_client c;
	int i;

	(void)state;
	/* A context of its own, with nothing cached yet. */
	assert_int_equal(tt_ctx(&pki, "node-b", NULL, &fresh), 0);
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(
		    tt_client_connect(loop, s.port, fresh, "node-a", &c), 0);
		/* The ticket arrives after the handshake: read something. */
		assert_int_equal(tt_send(&c, 0, 100), 0);
		assert_int_equal(tt_run_bytes(loop, &c, 100), 0);
		assert_int_equal(weft_tls_get_info(c.ch, &info), 0);
		assert_string_equal(info.version, "TLSv1.3");
		assert_int_equal(info.resumed, i == 1);
		/* A resumed session still knows the peer. */
		assert_int_equal(c.identity_rv, 0);
		assert_string_equal(c.identity, "node-a");
		tt_client_free(loop, &c);
	}
	assert_int_equal(s.identity_rv, 0);
	assert_string_equal(s.identity, "node-b");
	weft_tls_ctx_get_stats(fresh, &stats);
	assert_int_equal(stats.handshakes_started, 2);
	assert_int_equal(stats.handshakes_completed, 2);
	assert_int_equal(stats.handshakes_resumed, 1);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(fresh);
}

static void
test_graceful_close_sends_close_notify(void **state)
{
	tt_server s;
	tt_client c;

	(void)state;
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	s.close_after = 64 << 10;
	assert_int_equal(
	    tt_client_connect(loop, s.port, client_tls, "node-a", &c), 0);
	assert_int_equal(tt_send(&c, 0, 64 << 10), 0);
	assert_int_equal(tt_run_flag(loop, &c.inactive), 0);
	/* Every byte, then close_notify, and no error. */
	assert_true(tt_check(&c, 64 << 10));
	assert_true(c.got_close_notify);
	assert_int_equal(c.error, 0);
	tt_client_free(loop, &c);
	tt_server_stop(loop, &s);
}

static void
test_peer_check_matches_dns_names_then_cn(void **state)
{
	weft_tls_ctx *cn_tls;
	tt_server s;
	tt_client c;

	(void)state;
	assert_int_equal(tt_ctx(&pki, "cn-only", NULL, &cn_tls), 0);
	assert_int_equal(
	    tt_server_start(loop, cn_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	assert_int_equal(
	    tt_client_connect(loop, s.port, client_tls, "node-c", &c), 0);
	assert_int_equal(c.identity_rv, 0);
	assert_string_equal(c.identity, "node-c");
	assert_int_equal(weft_tls_peer_check(c.ch, "node-c"), 0);
	assert_int_equal(weft_tls_peer_check(c.ch, "node-a"), WEFT_EAUTH);
	assert_int_equal(weft_tls_peer_check(c.ch, "node-"), WEFT_EAUTH);
	char small[4];
	assert_int_equal(weft_tls_peer_identity(c.ch, small, sizeof(small)),
	                 WEFT_ETOOBIG);
	tt_client_free(loop, &c);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(cn_tls);

	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	assert_int_equal(
	    tt_client_connect(loop, s.port, client_tls, "node-a", &c), 0);
	assert_int_equal(weft_tls_peer_check(c.ch, "node-a"), 0);
	assert_int_equal(weft_tls_peer_check(c.ch, "node-b"), WEFT_EAUTH);
	tt_client_free(loop, &c);
	tt_server_stop(loop, &s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_small_messages_come_back_byte_exact),
	    cmocka_unit_test(test_16mib_message_comes_back_byte_exact),
	    cmocka_unit_test(test_second_connection_resumes_the_session),
	    cmocka_unit_test(test_graceful_close_sends_close_notify),
	    cmocka_unit_test(test_peer_check_matches_dns_names_then_cn),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
