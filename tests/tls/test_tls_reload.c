/* SPDX-License-Identifier: MIT */
/*
 * test_tls_reload.c: certificates reloaded while traffic flows. New
 * connections get the new certificate, open ones carry on byte-exact, a
 * reload of broken files keeps what was loaded, and reloads from another
 * thread race safely with handshakes on a loop group.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "tls_test.h"

static weft_loop *loop;
static tt_pki pki;
static weft_tls_ctx *client_tls;

static int
setup(void **state)
{
	(void)state;
	tt_log_capture();
	return tt_setup(&loop, &pki, NULL, &client_tls);
}

static int
teardown(void **state)
{
	(void)state;
	tt_teardown(loop, &pki, NULL, client_tls);
	weft_log_set_sink(NULL, NULL);
	return 0;
}

/* install issues a certificate for name and moves it into srv.crt and
 * srv.key, as an operator would replace the files. */
static void
install(const char *name)
{
	char from[256], to[256];

	assert_int_equal(tt_node(&pki, "next", name), 0);
	assert_int_equal(
	    rename(tt_path(&pki, "next", "key", from, sizeof(from)),
	           tt_path(&pki, "srv", "key", to, sizeof(to))),
	    0);
	assert_int_equal(
	    rename(tt_path(&pki, "next", "crt", from, sizeof(from)),
	           tt_path(&pki, "srv", "crt", to, sizeof(to))),
	    0);
}

static void
write_file(const char *file, const char *ext, const char *text)
{
	char path[256];
	FILE *f = fopen(tt_path(&pki, file, ext, path, sizeof(path)), "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* identity_of_new_client connects once and returns the server's
 * identity as the client sees it. */
static void
identity_of_new_client(uint16_t port, char *buf, size_t len)
{
	tt_client c;

	/* No server name: the name check would refuse node-a2. */
	assert_int_equal(tt_client_connect(loop, port, client_tls, NULL, &c),
	                 0);
	assert_int_equal(c.identity_rv, 0);
	snprintf(buf, len, "%s", c.identity);
	assert_int_equal(tt_send(&c, 0, 10), 0);
	assert_int_equal(tt_run_bytes(loop, &c, 10), 0);
	assert_true(tt_check(&c, 10));
	tt_client_free(loop, &c);
}

static void
test_reload_while_traffic_flows(void **state)
{
	const size_t chunk = 256 << 10;
	weft_tls_ctx *server_tls;
	weft_tls_stats st;
	char who[128];
	tt_server s;
	tt_client a;
	uint64_t sent = 0;
	int i;

	(void)state;
	install("node-a");
	assert_int_equal(tt_ctx(&pki, "srv", NULL, &server_tls), 0);
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	assert_int_equal(tt_client_connect(loop, s.port, client_tls, NULL, &a),
	                 0);
	assert_string_equal(a.identity, "node-a");
	for (i = 0; i < 4; i++) {
		assert_int_equal(tt_send(&a, sent, chunk), 0);
		sent += chunk;
	}
	/* Part of it is on its way back when the certificate changes. */
	assert_int_equal(tt_run_bytes(loop, &a, chunk), 0);
	assert_true(evbuffer_get_length(a.received) < sent);
	install("node-a2");
	assert_int_equal(weft_tls_ctx_reload(server_tls), 0);
	identity_of_new_client(s.port, who, sizeof(who));
	assert_string_equal(who, "node-a2");

	/* The connection from before goes on with what it had. */
	for (i = 0; i < 4; i++) {
		assert_int_equal(tt_send(&a, sent, chunk), 0);
		sent += chunk;
	}
	assert_int_equal(tt_run_bytes(loop, &a, sent), 0);
	assert_true(tt_check(&a, sent));
	assert_int_equal(a.error, 0);
	assert_int_equal(weft_tls_peer_identity(a.ch, who, sizeof(who)), 0);
	assert_string_equal(who, "node-a");
	tt_client_free(loop, &a);

	weft_tls_ctx_get_stats(server_tls, &st);
	assert_int_equal(st.reloads, 1);
	assert_int_equal(st.reload_failures, 0);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(server_tls);
}

static void
test_broken_reload_keeps_the_old_certificate(void **state)
{
	char who[128], from[256], to[256];
	weft_tls_ctx *server_tls;
	weft_tls_stats st;
	tt_server s;

	(void)state;
	install("node-a");
	assert_int_equal(tt_ctx(&pki, "srv", NULL, &server_tls), 0);
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);

	/* A certificate file that is not one. */
	tt_log_clear();
	write_file("srv", "crt", "not a certificate\n");
	assert_int_equal(weft_tls_ctx_reload(server_tls), WEFT_ECONFIG);
	assert_true(tt_log_contains("srv.crt"));
	assert_true(tt_log_contains("keeping the certificates"));
	identity_of_new_client(s.port, who, sizeof(who));
	assert_string_equal(who, "node-a");

	/* A new certificate next to the old key. */
	tt_log_clear();
	assert_int_equal(tt_node(&pki, "next", "node-a3"), 0);
	assert_int_equal(
	    rename(tt_path(&pki, "next", "crt", from, sizeof(from)),
	           tt_path(&pki, "srv", "crt", to, sizeof(to))),
	    0);
	assert_int_equal(weft_tls_ctx_reload(server_tls), WEFT_ECONFIG);
	assert_true(tt_log_contains("key values mismatch"));
	identity_of_new_client(s.port, who, sizeof(who));
	assert_string_equal(who, "node-a");

	/* Fixed: the next reload takes. */
	install("node-a4");
	assert_int_equal(weft_tls_ctx_reload(server_tls), 0);
	identity_of_new_client(s.port, who, sizeof(who));
	assert_string_equal(who, "node-a4");

	weft_tls_ctx_get_stats(server_tls, &st);
	assert_int_equal(st.reloads, 1);
	assert_int_equal(st.reload_failures, 2);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(server_tls);
}

/* ---- Reloads from another thread ---------------------------------------- */

struct reloader {
	weft_tls_ctx *tls;
	atomic_bool stop;
	int reloads;
	int failures;
};

static void *
reload_loop(void *arg)
{
	struct reloader *r = arg;

	/* Bounded: the files are read each time. */
	while (!atomic_load(&r->stop) && r->reloads + r->failures < 50) {
		if (weft_tls_ctx_reload(r->tls) == 0)
			r->reloads++;
		else
			r->failures++;
	}
	return NULL;
}

static void
test_reloads_race_with_handshakes_on_a_group(void **state)
{
	struct reloader r = {0};
	weft_loop_group *group;
	weft_tls_ctx *server_tls;
	pthread_t thread;
	weft_server *srv;
	char who[128];
	int i;

	(void)state;
	install("node-a");
	assert_int_equal(tt_ctx(&pki, "srv", NULL, &server_tls), 0);
	assert_int_equal(weft_loop_group_new(2, &group), 0);
	assert_int_equal(tt_group_server_new(group, server_tls, &srv), 0);
	r.tls = server_tls;
	assert_int_equal(pthread_create(&thread, NULL, reload_loop, &r), 0);
	for (i = 0; i < 20; i++) {
		identity_of_new_client(weft_server_port(srv), who, sizeof(who));
		assert_string_equal(who, "node-a");
	}
	atomic_store(&r.stop, true);
	pthread_join(thread, NULL);
	assert_true(r.reloads > 0);
	assert_int_equal(r.failures, 0);
	weft_server_close(srv, NULL, NULL);
	weft_loop_group_free(group);
	weft_tls_ctx_unref(server_tls);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reload_while_traffic_flows),
	    cmocka_unit_test(test_broken_reload_keeps_the_old_certificate),
	    cmocka_unit_test(test_reloads_race_with_handshakes_on_a_group),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
