/* SPDX-License-Identifier: MIT */
/*
 * test_resolve.c: host names in weft_connect are resolved on the loop with
 * evdns, without blocking it, and again for every connect. A DNS server of
 * the test's own (tests/support/dns_server.c) answers, and holds its
 * answers when the test needs the loop to show it still runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <weft/loop.h>
#include <weft/transport.h>

#include "echo.h"
#include "support/dns_server.h"
#include "support/wait.h"

#define NAME "peer.weft.test"
#define WAIT_MS 10000

struct fixture {
	struct dns_server dns;
	weft_server *srv;
	uint16_t port;
	char address[128];
	atomic_int closed;
};

static int
accept_init(weft_channel *ch, void *arg)
{
	(void)ch;
	(void)arg;
	return 0;
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	weft_server_opts so = {.address = "127.0.0.1:0", .init = accept_init};

	assert_non_null(f);
	echo_loop_setup(NULL);
	dns_server_start(&f->dns, NAME, "127.0.0.1");
	assert_int_equal(setenv("WEFT_RESOLV_CONF", f->dns.resolv_conf, 1), 0);
	assert_int_equal(weft_server_new_on_loop(echo_loop, &so, &f->srv), 0);
	f->port = weft_server_port(f->srv);
	snprintf(f->address, sizeof(f->address), NAME ":%u", f->port);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	weft_server_close(f->srv, echo_server_closed, &f->closed);
	weft_test_run_until(echo_loop, weft_test_atomic_set, &f->closed,
	                    WAIT_MS);
	echo_loop_teardown(NULL);
	dns_server_stop(&f->dns);
	unsetenv("WEFT_RESOLV_CONF");
	free(f);
	return 0;
}

/* The order things happened in, for the test that holds the answer. */
struct order {
	struct dns_server *dns;
	echo_result connect;
	bool timer_fired;
	bool timer_before_connect;
};

static void
on_timer(weft_timer *t, void *arg)
{
	struct order *o = arg;

	(void)t;
	o->timer_fired = true;
	o->timer_before_connect = o->connect.calls == 0;
	/* Only now may the name resolve: had the connect blocked the loop
	 * in a resolver, this timer could never have run. */
	dns_server_hold(o->dns, false);
}

static void
test_name_resolves_without_blocking_the_loop(void **state)
{
	struct fixture *f = *state;
	struct order o = {.dns = &f->dns};
	weft_timer *t;

	dns_server_hold(&f->dns, true);
	assert_int_equal(weft_timer_new(echo_loop, on_timer, &o, &t), 0);
	assert_int_equal(weft_connect(echo_loop, f->address, NULL,
	                              echo_result_cb, &o.connect),
	                 0);
	assert_int_equal(weft_timer_start(t, 20, 0), 0);
	assert_int_equal(weft_test_run_until(echo_loop, echo_result_set,
	                                     &o.connect, WAIT_MS),
	                 0);
	assert_true(o.timer_fired);
	assert_true(o.timer_before_connect);
	assert_int_equal(o.connect.calls, 1);
	assert_int_equal(o.connect.status, 0);
	assert_true(dns_server_a_queries(&f->dns) >= 1);
	weft_channel_close(o.connect.ch);
	weft_timer_free(t);
}

/* Each connect asks again, so a changed record is followed: the first
 * answer points where nobody listens, the second at the server. */
static void
test_every_connect_resolves_again(void **state)
{
	struct fixture *f = *state;
	echo_result first = {0}, second = {0};
	int queries;

	dns_server_set_address(&f->dns, "127.0.0.2");
	assert_int_equal(
	    weft_connect(echo_loop, f->address, NULL, echo_result_cb, &first),
	    0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_result_set, &first, WAIT_MS),
	    0);
	assert_int_equal(first.status, WEFT_ECONNREFUSED);
	queries = dns_server_a_queries(&f->dns);
	assert_true(queries >= 1);
	dns_server_set_address(&f->dns, "127.0.0.1");
	assert_int_equal(
	    weft_connect(echo_loop, f->address, NULL, echo_result_cb, &second),
	    0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_result_set, &second, WAIT_MS),
	    0);
	assert_int_equal(second.status, 0);
	assert_true(dns_server_a_queries(&f->dns) > queries);
	weft_channel_close(second.ch);
}

static void
test_unknown_name_fails_with_eaddr(void **state)
{
	struct fixture *f = *state;
	echo_result r = {0};
	char address[128];

	snprintf(address, sizeof(address), "nobody.weft.test:%u", f->port);
	assert_int_equal(
	    weft_connect(echo_loop, address, NULL, echo_result_cb, &r), 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_result_set, &r, WAIT_MS), 0);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, WEFT_EADDR);
}

struct queries {
	struct dns_server *dns;
	int at_least;
};

static bool
queries_reached(void *arg)
{
	struct queries *q = arg;

	return dns_server_a_queries(q->dns) >= q->at_least;
}

/* A resolution in flight ends with the connect: cancelled, timed out, or
 * its loop freed; the callback runs once and nothing leaks. */
static void
test_connect_ends_while_the_name_resolves(void **state)
{
	struct fixture *f = *state;
	weft_connect_opts quick = {.timeout_ms = 100};
	echo_result canceled = {0}, timed_out = {0}, freed = {0};
	weft_connect_req *req;
	int before = dns_server_a_queries(&f->dns);

	dns_server_hold(&f->dns, true);
	assert_int_equal(weft_connect_start(echo_loop, f->address, NULL,
	                                    echo_result_cb, &canceled, &req),
	                 0);
	assert_int_equal(weft_connect(echo_loop, f->address, &quick,
	                              echo_result_cb, &timed_out),
	                 0);
	/* Both are resolving once the server has both queries. */
	assert_int_equal(weft_test_run_until(
	                     echo_loop, queries_reached,
	                     &(struct queries){&f->dns, before + 2}, WAIT_MS),
	                 0);
	weft_connect_cancel(req);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_result_set, &canceled, WAIT_MS),
	    0);
	assert_int_equal(canceled.status, WEFT_ECANCELED);
	assert_int_equal(weft_test_run_until(echo_loop, echo_result_set,
	                                     &timed_out, WAIT_MS),
	                 0);
	assert_int_equal(timed_out.status, WEFT_ETIMEDOUT);
	before = dns_server_a_queries(&f->dns);
	assert_int_equal(
	    weft_connect(echo_loop, f->address, NULL, echo_result_cb, &freed),
	    0);
	assert_int_equal(weft_test_run_until(
	                     echo_loop, queries_reached,
	                     &(struct queries){&f->dns, before + 1}, WAIT_MS),
	                 0);
	/* The server is closed, and the loop freed, with the name still
	 * resolving: the connect ends with ESHUTDOWN. */
	weft_server_close(f->srv, echo_server_closed, &f->closed);
	weft_test_run_until(echo_loop, weft_test_atomic_set, &f->closed,
	                    WAIT_MS);
	f->srv = NULL;
	echo_loop_teardown(NULL);
	assert_int_equal(freed.calls, 1);
	assert_int_equal(freed.status, WEFT_ESHUTDOWN);
	dns_server_hold(&f->dns, false);
	echo_loop_setup(NULL);
	{
		weft_server_opts so = {.address = "127.0.0.1:0",
		                       .init = accept_init};

		atomic_store(&f->closed, 0);
		assert_int_equal(
		    weft_server_new_on_loop(echo_loop, &so, &f->srv), 0);
	}
	assert_int_equal(canceled.calls, 1);
	assert_int_equal(timed_out.calls, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_name_resolves_without_blocking_the_loop, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_every_connect_resolves_again,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unknown_name_fails_with_eaddr,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_connect_ends_while_the_name_resolves, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
