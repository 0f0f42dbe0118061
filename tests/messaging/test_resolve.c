/* SPDX-License-Identifier: MIT */
/*
 * test_resolve.c: a member whose host is a name is dialed through evdns,
 * without blocking the loop, and the name is resolved again when the
 * connection is dialed anew after the peer restarted. The name is served
 * by a DNS server of the test's own (tests/support/dns_server.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <weft/messaging.h>

#include "support/dns_server.h"
#include "support/echo_verb.h"

#define NAME "b.weft.test"
#define VERB_ECHO 16
#define WAIT_MS 10000

/* Node b of a two-node cluster whose b is NAME:port; it listens on
 * 127.0.0.1 (a name that only our DNS server knows cannot be bound). */
static weft_msvc *
start_b(weft_loop_group *group, uint16_t port, uint16_t a_port)
{
	weft_msvc_opts opts = {.listen_host = "127.0.0.1"};
	weft_msvc_config *cfg;
	weft_msvc *svc;

	assert_int_equal(weft_msvc_config_new("resolve", &cfg), 0);
	assert_int_equal(
	    weft_msvc_config_add_node(cfg, "a", "127.0.0.1", a_port), 0);
	assert_int_equal(weft_msvc_config_add_node(cfg, "b", NAME, port), 0);
	weft_msvc_config_limits(cfg)->reconnect_max_ms = 100;
	assert_int_equal(weft_msvc_new(group, cfg, "b", &opts, &svc), 0);
	weft_msvc_config_free(cfg);
	assert_int_equal(weft_msvc_register(svc, VERB_ECHO, "echo",
	                                    weft_test_on_echo, NULL,
	                                    WEFT_MSVC_INLINE),
	                 0);
	assert_int_equal(weft_msvc_start(svc), 0);
	return svc;
}

/* Calls b until it answers (a reconnect may take a few back-offs). */
static int
call_until_answered(weft_msvc *a, weft_msvc_peer *b)
{
	weft_msvc_call_opts quick = {.timeout_ms = 500};
	int i, rv = WEFT_ETIMEDOUT;

	/* A call to a peer known down fails at once: wait for it to be up
	 * before the next one. */
	for (i = 0; i < 40 && rv != 0; i++) {
		rv = weft_msvc_call(a, b, VERB_ECHO, "hi", 2, &quick, NULL);
		if (rv == WEFT_EPEERDOWN)
			(void)weft_msvc_peer_wait_up(a, b, 250);
	}
	return rv;
}

static void
test_a_named_peer_is_resolved_again_on_reconnect(void **state)
{
	struct dns_server dns;
	weft_loop_group *ga, *gb;
	weft_msvc_config *cfg;
	weft_msvc *a, *b;
	weft_msvc_peer *pb;
	uint16_t b_port;
	int first;

	(void)state;
	dns_server_start(&dns, NAME, "127.0.0.1");
	assert_int_equal(setenv("WEFT_RESOLV_CONF", dns.resolv_conf, 1), 0);
	assert_int_equal(weft_loop_group_new(1, &ga), 0);
	assert_int_equal(weft_loop_group_new(1, &gb), 0);
	assert_int_equal(weft_msvc_config_new("resolve", &cfg), 0);
	assert_int_equal(weft_msvc_config_add_node(cfg, "a", "127.0.0.1", 0),
	                 0);
	assert_int_equal(weft_msvc_config_add_node(cfg, "b", NAME, 1), 0);
	weft_msvc_config_limits(cfg)->reconnect_max_ms = 100;
	assert_int_equal(weft_msvc_new(ga, cfg, "a", NULL, &a), 0);
	weft_msvc_config_free(cfg);
	assert_int_equal(weft_msvc_start(a), 0);

	b = start_b(gb, 0, weft_msvc_port(a));
	b_port = weft_msvc_port(b);
	assert_int_equal(weft_msvc_set_peer_addr(a, "b", NAME, b_port), 0);
	pb = weft_msvc_peer_find(a, "b");
	assert_int_equal(weft_msvc_peer_wait_up(a, pb, WAIT_MS), 0);
	assert_int_equal(call_until_answered(a, pb), 0);
	first = dns_server_a_queries(&dns);
	assert_true(first >= 1);

	/* b restarts on the same port: a's connections die, and every one
	 * it dials again looks the name up again. */
	weft_msvc_stop(b, 0);
	weft_msvc_free(b);
	b = start_b(gb, b_port, weft_msvc_port(a));
	assert_int_equal(call_until_answered(a, pb), 0);
	assert_true(dns_server_a_queries(&dns) > first);

	weft_msvc_stop(a, 0);
	weft_msvc_stop(b, 0);
	weft_msvc_free(a);
	weft_msvc_free(b);
	weft_loop_group_free(ga);
	weft_loop_group_free(gb);
	dns_server_stop(&dns);
	unsetenv("WEFT_RESOLV_CONF");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_named_peer_is_resolved_again_on_reconnect),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
