/* SPDX-License-Identifier: MIT */
/*
 * test_order.c: a member's order across its reconnections
 * (docs/RELIABILITY.md section 2.1), over real sockets: rawpeer.c speaks
 * for a member and opens its connections of one class and index one after
 * another, as a member that redials does; the node must close the older
 * one as soon as it accepts the newer, and leave every other connection
 * alone. (tests/sim/test_sim.c holds a connection's bytes back in a proxy
 * and releases them after the redial.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <event2/buffer.h>

#include "cluster.h"
#include "rawpeer.h"

#define WAIT_MS 10000
/* How long a connection that should stay open is watched. */
#define OPEN_MS 300
#define SMALL 1
#define LARGE 2

static struct cluster cl;

static void
tune(weft_msvc_limits *l)
{
	l->connect_timeout_ms = 8000;
	l->request_timeout_ms = 8000;
}

static uint64_t
superseded(void)
{
	weft_msvc_stats st;

	weft_msvc_get_stats(cl.svc[0], &st);
	return st.superseded_connections;
}

/* n1's sink has counted n messages. */
static bool
sunk(void *arg)
{
	return atomic_load(&cl.sink_count[0]) >= *(uint64_t *)arg;
}

/* Sends VERB_SINK message seq on p and waits until n1 has it. */
static void
sink(rawpeer *p, uint64_t seq)
{
	struct evbuffer *b = evbuffer_new();
	uint64_t want = seq + 1;

	rp_envelope(b, p->crc, 0, VERB_SINK, RP_ONEWAY, 0, &seq, sizeof(seq));
	assert_true(rp_send(p, b));
	evbuffer_free(b);
	assert_true(test_wait(sunk, &want, WAIT_MS));
}

static void
connect_as(rawpeer *p, const char *id, int role, int cls, int index)
{
	rp_connect(p, weft_msvc_port(cl.svc[0]), NULL, NULL);
	assert_int_equal(rp_handshake(p, "test", id, role, cls, index), 0);
}

/* n2 (here a raw peer speaking for it) redials its small connection 0:
 * n1 closes the older one, and the connections of another index or
 * class stay. */
static void
test_a_newer_connection_supersedes_the_older(void **state)
{
	rawpeer old, now, other_index, other_class;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, tune), 0);
	connect_as(&old, "n2", RP_MEMBER, SMALL, 0);
	sink(&old, 0);
	connect_as(&now, "n2", RP_MEMBER, SMALL, 0);
	assert_true(rp_closed(&old, WAIT_MS));
	assert_int_equal(superseded(), 1);
	sink(&now, 1);
	connect_as(&other_index, "n2", RP_MEMBER, SMALL, 1);
	connect_as(&other_class, "n2", RP_MEMBER, LARGE, 0);
	sink(&now, 2);
	sink(&other_index, 3);
	sink(&other_class, 4);
	assert_false(rp_closed(&now, OPEN_MS));
	assert_int_equal(superseded(), 1);
	assert_int_equal(atomic_load(&cl.sink_disorder[0]), 0);
	rp_close(&old);
	rp_close(&now);
	rp_close(&other_index);
	rp_close(&other_class);
	cluster_stop(&cl);
}

/* A client id may be shared by several processes: its connections are
 * never superseded. */
static void
test_clients_are_not_superseded(void **state)
{
	rawpeer a, b;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, tune), 0);
	connect_as(&a, "c1", RP_CLIENT, SMALL, 0);
	sink(&a, 0);
	connect_as(&b, "c1", RP_CLIENT, SMALL, 0);
	sink(&b, 1);
	sink(&a, 2);
	assert_false(rp_closed(&a, OPEN_MS));
	assert_int_equal(superseded(), 0);
	rp_close(&a);
	rp_close(&b);
	cluster_stop(&cl);
}

/* Connections are ordered per index in a table of 64 a class, the most a
 * class may have: an index past it is refused. */
static void
test_an_index_past_the_table_is_refused(void **state)
{
	rawpeer p;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, tune), 0);
	rp_connect(&p, weft_msvc_port(cl.svc[0]), NULL, NULL);
	assert_int_equal(rp_handshake(&p, "test", "n2", RP_MEMBER, SMALL, 64),
	                 8 /* BAD_CLASS */);
	rp_close(&p);
	connect_as(&p, "n2", RP_MEMBER, SMALL, 63);
	sink(&p, 0);
	rp_close(&p);
	cluster_stop(&cl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_newer_connection_supersedes_the_older),
	    cmocka_unit_test(test_clients_are_not_superseded),
	    cmocka_unit_test(test_an_index_past_the_table_is_refused),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
