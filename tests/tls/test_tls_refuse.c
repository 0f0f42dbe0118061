/* SPDX-License-Identifier: MIT */
/*
 * test_tls_refuse.c: who does not get in. A client without a certificate,
 * with one from another CA, or with an expired one is refused by the
 * server; a server with a bad certificate or the wrong name is refused by
 * the client; a plaintext client on a TLS port is dropped at once. Every
 * refusal is logged with its reason, and the server goes on serving.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <weft/transport.h>

#include "support/wait.h"
#include "tls_test.h"
#include "transport_int.h"

static weft_loop *loop;
static tt_pki pki;
static weft_tls_ctx *server_tls, *client_tls;

static int
setup(void **state)
{
	(void)state;
	tt_log_capture();
	if (tt_setup(&loop, &pki, &server_tls, &client_tls) != 0 ||
	    tt_issue(&pki, "foreign", "node-b", TT_OTHER, -60, 3600, false) !=
	        0 ||
	    tt_issue(&pki, "expired", "node-b", TT_CLUSTER, -7200, -3600,
	             false) != 0 ||
	    tt_issue(&pki, "self", "node-b", TT_SELF, -60, 3600, false) != 0)
		return -1;
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	tt_teardown(loop, &pki, server_tls, client_tls);
	weft_log_set_sink(NULL, NULL);
	return 0;
}

/* ---- Helpers ------------------------------------------------------------ */

/* echo_works checks that a good client still gets its echo. */
static void
echo_works(tt_server *s)
{
	tt_echo_check(loop, s->port, client_tls, 1000);
}

/*
 * refused_by_server connects with client's certificate and expects the
 * server to refuse it, logging why. With TLS 1.3 the client's handshake
 * ends before the server has judged its certificate, so the client may
 * see its channel open and then closed by the server's alert.
 */
static void
refused_by_server(weft_tls_ctx *client, const char *why)
{
	tt_server s;
	tt_client c;
	int rv;

	tt_log_clear();
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	rv = tt_client_connect(loop, s.port, client, "node-a", &c);
	if (rv == 0) {
		assert_int_equal(tt_send(&c, 0, 10), 0);
		assert_int_equal(tt_run_flag(loop, &c.inactive), 0);
		assert_int_equal(evbuffer_get_length(c.received), 0);
		assert_int_equal(c.error, WEFT_ETLS);
	} else {
		assert_int_equal(rv, WEFT_ETLS);
	}
	assert_int_equal(tt_run_failures(loop, &s, 1), 0);
	assert_int_equal(s.channels, 0);
	assert_true(tt_log_contains(why));
	tt_client_free(loop, &c);
	echo_works(&s);
	tt_server_stop(loop, &s);
}

/* refused_by_client expects the client to refuse the server's
 * certificate: the connect fails with WEFT_ETLS. */
static void
refused_by_client(const char *server_file, const char *name, const char *why)
{
	weft_tls_ctx *tls;
	tt_server s;
	tt_client c;

	tt_log_clear();
	assert_int_equal(tt_ctx(&pki, server_file, NULL, &tls), 0);
	assert_int_equal(tt_server_start(loop, tls, WEFT_TLS_MODE_REQUIRED, &s),
	                 0);
	assert_int_equal(tt_client_connect(loop, s.port, client_tls, name, &c),
	                 WEFT_ETLS);
	assert_null(c.ch);
	assert_true(tt_log_contains(why));
	tt_client_free(loop, &c);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(tls);
}

/* ---- Refused by the server ---------------------------------------------- */

static void
test_client_without_certificate_is_refused(void **state)
{
	weft_tls_ctx *anonymous;

	(void)state;
	assert_int_equal(tt_ctx(&pki, NULL, NULL, &anonymous), 0);
	refused_by_server(anonymous, "peer did not return a certificate");
	weft_tls_ctx_unref(anonymous);
}

static void
test_client_from_another_ca_is_refused(void **state)
{
	weft_tls_ctx *foreign;

	(void)state;
	assert_int_equal(tt_ctx(&pki, "foreign", NULL, &foreign), 0);
	refused_by_server(foreign, "unable to get local issuer certificate");
	weft_tls_ctx_unref(foreign);
}

static void
test_client_with_expired_certificate_is_refused(void **state)
{
	weft_tls_ctx *expired;

	(void)state;
	assert_int_equal(tt_ctx(&pki, "expired", NULL, &expired), 0);
	refused_by_server(expired, "certificate has expired");
	weft_tls_ctx_unref(expired);
}

static void
test_self_signed_client_is_refused(void **state)
{
	weft_tls_ctx *self;

	(void)state;
	assert_int_equal(tt_ctx(&pki, "self", NULL, &self), 0);
	refused_by_server(self, "self-signed certificate");
	weft_tls_ctx_unref(self);
}

/* ---- Refused by the client ---------------------------------------------- */

static void
test_server_with_expired_certificate_is_refused(void **state)
{
	(void)state;
	refused_by_client("expired", "node-b", "certificate has expired");
}

static void
test_server_from_another_ca_is_refused(void **state)
{
	(void)state;
	refused_by_client("foreign", "node-b",
	                  "unable to get local issuer certificate");
}

static void
test_server_with_the_wrong_name_is_refused(void **state)
{
	(void)state;
	/* A valid cluster certificate, but not the node we dialed. */
	refused_by_client("node-a", "node-x", "hostname mismatch");
}

/* ---- Plaintext on a TLS port -------------------------------------------- */

static void
test_plaintext_client_on_tls_port_is_dropped_quickly(void **state)
{
	static const char hello[] = "\0\0\0\x13WEFT plaintext hello\n";
	tt_server s;
	uint64_t start;
	int fd;

	(void)state;
	tt_log_clear();
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	fd = tt_raw_connect(s.port);
	start = weft_now_ns();
	assert_int_equal(send(fd, hello, sizeof(hello) - 1, 0),
	                 (ssize_t)sizeof(hello) - 1);
	assert_int_equal(weft_test_run_until(loop, tt_raw_closed, &fd, 5000),
	                 0);
	/* Dropped on its first bytes, long before the handshake timeout. */
	assert_true(weft_now_ns() - start < 2000000000ull);
	assert_true(tt_log_contains("wrong version number"));
	close(fd);
	assert_int_equal(s.channels, 0);
	echo_works(&s);
	tt_server_stop(loop, &s);
}

static void
test_silent_client_is_dropped_at_the_handshake_timeout(void **state)
{
	tt_server s;
	uint64_t start, took;
	int fd;

	(void)state;
	assert_int_equal(tt_server_start_timeout(
	                     loop, server_tls, WEFT_TLS_MODE_REQUIRED, 200, &s),
	                 0);
	fd = tt_raw_connect(s.port);
	start = weft_now_ns();
	assert_int_equal(weft_test_run_until(loop, tt_raw_closed, &fd, 5000),
	                 0);
	took = weft_now_ns() - start;
	assert_true(took >= 150000000ull && took < 3000000000ull);
	close(fd);
	echo_works(&s);
	tt_server_stop(loop, &s);
}

/* ---- Garbage after the handshake ----------------------------------------- */

static bool
client_drained(void *arg)
{
	tt_client *c = arg;

	/* Pending bytes count a record half written too. */
	return weft_channel_pending_write_bytes(c->ch) == 0;
}

static bool
server_saw_error(void *arg)
{
	tt_server *s = arg;

	return s->error != 0 && s->inactive > 0;
}

/* Bytes that look like an application data record but are not. */
static void
write_bogus_record(tt_client *c)
{
	unsigned char rec[5 + 64] = {0x17, 0x03, 0x03, 0x00, 64};
	int fd = weft__channel_fd(c->ch);

	memset(rec + 5, 0xa5, 64);
	assert_int_equal(write(fd, rec, sizeof(rec)), (ssize_t)sizeof(rec));
}

static void
test_garbage_after_the_handshake_closes_with_the_reason(void **state)
{
	tt_server s;
	tt_client c;
	int i;

	(void)state;
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	/* Alone, and behind records the server reads in one go. */
	for (i = 0; i < 2; i++) {
		tt_log_clear();
		s.error = 0;
		s.inactive = 0;
		assert_int_equal(
		    tt_client_connect(loop, s.port, client_tls, "node-a", &c),
		    0);
		if (i == 1) {
			assert_int_equal(tt_send(&c, 0, 256 << 10), 0);
			assert_int_equal(
			    weft_test_run_until(loop, client_drained, &c, 5000),
			    0);
		}
		write_bogus_record(&c);
		assert_int_equal(
		    weft_test_run_until(loop, server_saw_error, &s, 5000), 0);
		assert_int_equal(s.error, WEFT_ETLS);
		assert_true(tt_log_contains("TLS: error:"));
		assert_true(tt_log_contains("bad record mac") ||
		            tt_log_contains("decryption failed"));
		assert_int_equal(tt_run_flag(loop, &c.inactive), 0);
		tt_client_free(loop, &c);
	}
	echo_works(&s);
	tt_server_stop(loop, &s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_client_without_certificate_is_refused),
	    cmocka_unit_test(test_client_from_another_ca_is_refused),
	    cmocka_unit_test(test_client_with_expired_certificate_is_refused),
	    cmocka_unit_test(test_self_signed_client_is_refused),
	    cmocka_unit_test(test_server_with_expired_certificate_is_refused),
	    cmocka_unit_test(test_server_from_another_ca_is_refused),
	    cmocka_unit_test(test_server_with_the_wrong_name_is_refused),
	    cmocka_unit_test(
	        test_plaintext_client_on_tls_port_is_dropped_quickly),
	    cmocka_unit_test(
	        test_silent_client_is_dropped_at_the_handshake_timeout),
	    cmocka_unit_test(
	        test_garbage_after_the_handshake_closes_with_the_reason),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
