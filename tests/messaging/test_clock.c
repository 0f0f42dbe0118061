/* SPDX-License-Identifier: MIT */
/*
 * test_clock.c: a 3-node cluster in one process with one node's wall
 * clock shifted (weft_msvc_opts.clock_offset_ms) by +-1 s, +-5 s, +-60 s
 * and +-1 h, and a client shifted as far: no peer is marked down, every
 * request is served, nothing expires on arrival, and each node reports
 * the shifted node's offset (and flags it past max_clock_skew).
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
#include "support/wait.h"

#define NODES 3
#define SHIFTED 2 /* n3 */
/* Requests each way per round, a round every ROUND_MS: long enough for
 * heartbeats (every 100 ms, 3 misses) to mark a node down many times
 * over when its clock makes them expire. */
#define ROUNDS 30
#define ROUND_MS 50
/* How far an estimate may be from the true offset over loopback. */
#define SLACK_MS 50

static struct cluster cl;

static void
tune(weft_msvc_limits *l)
{
	l->heartbeat_interval_ms = 100;
	l->heartbeat_misses = 3;
	l->request_timeout_ms = 1000;
}

static bool
all_up(void *arg)
{
	struct cluster *c = arg;

	return atomic_load(&c->ups) >= c->n * (c->n - 1);
}

static weft_msvc *
client_start(weft_loop_group **group, int64_t offset_ms)
{
	weft_msvc_opts o = {.clock_offset_ms = offset_ms};
	weft_msvc *client;
	char id[16];
	int i;

	assert_int_equal(weft_loop_group_new(1, group), 0);
	assert_int_equal(
	    weft_msvc_new(*group, cl.cfg, "skewed-client", &o, &client), 0);
	assert_int_equal(weft_msvc_start(client), 0);
	for (i = 0; i < NODES; i++) {
		snprintf(id, sizeof(id), "n%d", i + 1);
		weft_msvc_set_peer_addr(client, id, "127.0.0.1",
		                        weft_msvc_port(cl.svc[i]));
	}
	return client;
}

static void
one_round(weft_msvc *client, struct tally *t)
{
	int i, j;

	for (i = 0; i < NODES; i++)
		for (j = 0; j < NODES; j++)
			if (i != j)
				assert_int_equal(
				    weft_msvc_request(
				        cl.svc[i], cluster_peer(&cl, i, j),
				        VERB_ECHO, "x", 1, NULL, tally_cb, t),
				    0);
	/* The client asks a node whose clock is right and the shifted one. */
	assert_int_equal(
	    weft_msvc_request(client, weft_msvc_peer_find(client, "n1"),
	                      VERB_ECHO, "c", 1, NULL, tally_cb, t),
	    0);
	assert_int_equal(
	    weft_msvc_request(client, weft_msvc_peer_find(client, "n3"),
	                      VERB_ECHO, "c", 1, NULL, tally_cb, t),
	    0);
}

/* from's estimate of to's clock is want ms ahead of its own, and flagged
 * says whether it is past max_clock_skew (-1: either, at the bound). */
static void
check_offset(int from, int to, int64_t want, int flagged)
{
	weft_msvc_peer_stats ps;

	weft_msvc_peer_get_stats(cluster_peer(&cl, from, to), &ps);
	if (!ps.clock_measured || ps.clock_offset_ms < want - SLACK_MS ||
	    ps.clock_offset_ms > want + SLACK_MS ||
	    (flagged >= 0 && ps.clock_skew_exceeded != (flagged == 1)))
		fail_msg("n%d's view of n%d: measured %d offset %lld ms "
		         "(want %lld), flagged %d (want %d)",
		         from + 1, to + 1, ps.clock_measured,
		         (long long)ps.clock_offset_ms, (long long)want,
		         ps.clock_skew_exceeded, flagged);
}

/* What one run saw, gathered before the cluster stops. */
struct health {
	int ups, downs, served, want, timed_out, expired, peer_down;
	uint64_t expired_on_arrival, peer_downs;
};

static void
run_shifted(int64_t offset_ms)
{
	struct cluster_opts o = {.tune = tune};
	struct tally t = {.want = ROUNDS * (NODES * (NODES - 1) + 2)};
	struct health h = {.want = t.want};
	weft_loop_group *group;
	weft_msvc *client;
	weft_msvc_stats st;
	/* The default max_clock_skew is 1 s: +-1 s is at the bound. */
	int flagged = offset_ms >= 5000 || offset_ms <= -5000 ? 1 : -1;
	int i, r;

	o.clock_offset_ms[SHIFTED] = offset_ms;
	assert_int_equal(cluster_start_with(&cl, NODES, &o), 0);
	client = client_start(&group, offset_ms);
	for (r = 0; r < ROUNDS; r++) {
		one_round(client, &t);
		test_wait(weft_test_never, NULL, ROUND_MS);
	}
	assert_true(test_wait(tally_complete, &t, 5000));
	/* Each node saw each other come up once: no flapping. */
	test_wait(all_up, &cl, 5000);
	h.ups = atomic_load(&cl.ups);
	h.downs = atomic_load(&cl.downs);
	h.served = atomic_load(&t.ok);
	h.timed_out = atomic_load(&t.status_counts[-WEFT_ETIMEDOUT]);
	h.expired = atomic_load(&t.status_counts[-WEFT_EEXPIRED]);
	h.peer_down = atomic_load(&t.status_counts[-WEFT_EPEERDOWN]);
	for (i = 0; i < NODES; i++) {
		weft_msvc_get_stats(cl.svc[i], &st);
		h.expired_on_arrival += st.expired_on_arrival;
		h.peer_downs += st.peer_downs;
	}
	printf("clock %+lld ms: peers up %d, down %d; requests %d of %d "
	       "served, %d timed out, %d peer down, %d expired; %llu "
	       "expired on arrival\n",
	       (long long)offset_ms, h.ups, h.downs, h.served, h.want,
	       h.timed_out, h.peer_down, h.expired,
	       (unsigned long long)h.expired_on_arrival);
	if (h.served == h.want && h.downs == 0 && h.peer_downs == 0 &&
	    h.ups == NODES * (NODES - 1) && h.expired_on_arrival == 0) {
		/* Every node sees n3 offset_ms ahead, and n3 sees them
		 * behind. */
		check_offset(0, SHIFTED, offset_ms, flagged);
		check_offset(1, SHIFTED, offset_ms, flagged);
		check_offset(SHIFTED, 0, -offset_ms, flagged);
		check_offset(0, 1, 0, 0);
	}
	weft_msvc_stop(client, 1000);
	weft_msvc_free(client);
	weft_loop_group_free(group);
	cluster_stop(&cl);
	assert_int_equal(h.served, h.want);
	assert_int_equal(h.downs, 0);
	assert_int_equal(h.peer_downs, 0);
	assert_int_equal(h.ups, NODES * (NODES - 1));
	assert_int_equal(h.expired_on_arrival, 0);
}

#define SHIFT_TEST(name, ms)                                                   \
	static void name(void **state)                                         \
	{                                                                      \
		(void)state;                                                   \
		run_shifted(ms);                                               \
	}
SHIFT_TEST(test_ahead_1s, 1000)
SHIFT_TEST(test_behind_1s, -1000)
SHIFT_TEST(test_ahead_5s, 5000)
SHIFT_TEST(test_behind_5s, -5000)
SHIFT_TEST(test_ahead_60s, 60000)
SHIFT_TEST(test_behind_60s, -60000)
SHIFT_TEST(test_ahead_1h, 3600000)
SHIFT_TEST(test_behind_1h, -3600000)

/* A client on a raw socket whose clock is shift_ms off asks n1 three
 * times: every request is answered, and each answer carries the
 * request's own expires_at (in the client's clock), as before. */
static void
raw_client_asks(int64_t shift_ms)
{
	struct evbuffer *b = evbuffer_new();
	uint64_t created, expires;
	rawpeer p;
	rp_env e;
	int i;

	rp_connect(&p, weft_msvc_port(cl.svc[0]), NULL, NULL);
	assert_int_equal(rp_handshake(&p, "test", "raw-client", RP_CLIENT,
	                              WEFT_MSVC_SMALL, 0),
	                 0);
	for (i = 0; i < 3; i++) {
		created = weft_wall_ms() + (uint64_t)shift_ms;
		expires = created + 1000;
		rp_envelope_at(b, p.crc, 100 + (uint64_t)i, VERB_ECHO,
		               RP_REQUEST, created, expires, "hi", 2);
		assert_true(rp_send(&p, b));
		if (rp_read_env(&p, &e, 3000) != 0)
			fail_msg("clock %+lld ms: request %d not answered",
			         (long long)shift_ms, i);
		assert_int_equal(e.id, 100 + (uint64_t)i);
		assert_int_equal(e.flags, RP_RESPONSE);
		assert_int_equal(e.expires_ms, expires);
	}
	rp_close(&p);
	evbuffer_free(b);
}

static void
test_raw_clients_with_skewed_clocks(void **state)
{
	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune), 0);
	raw_client_asks(-3600000);
	raw_client_asks(-5000);
	raw_client_asks(-1000);
	raw_client_asks(5000);
	raw_client_asks(3600000);
	cluster_stop(&cl);
}

/* A client that lies about its clock (the largest stamps there are) only
 * misleads the judging of its own deadlines: the node keeps serving, and
 * answers an honest client. */
static void
test_a_lying_clock_harms_only_its_sender(void **state)
{
	struct evbuffer *b = evbuffer_new();
	rawpeer liar;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune), 0);
	rp_connect(&liar, weft_msvc_port(cl.svc[0]), NULL, NULL);
	assert_int_equal(
	    rp_handshake(&liar, "test", "liar", RP_CLIENT, WEFT_MSVC_SMALL, 0),
	    0);
	rp_envelope_at(b, liar.crc, 1, VERB_ECHO, RP_REQUEST, UINT64_MAX,
	               UINT64_MAX, "x", 1);
	rp_envelope_at(b, liar.crc, 2, VERB_ECHO, RP_REQUEST, 1, 2, "x", 1);
	rp_envelope_at(b, liar.crc, 3, VERB_ECHO, RP_REQUEST, UINT64_MAX, 1,
	               "x", 1);
	assert_true(rp_send(&liar, b));
	raw_client_asks(0);
	rp_close(&liar);
	evbuffer_free(b);
	cluster_stop(&cl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ahead_1s),
	    cmocka_unit_test(test_behind_1s),
	    cmocka_unit_test(test_ahead_5s),
	    cmocka_unit_test(test_behind_5s),
	    cmocka_unit_test(test_ahead_60s),
	    cmocka_unit_test(test_behind_60s),
	    cmocka_unit_test(test_ahead_1h),
	    cmocka_unit_test(test_behind_1h),
	    cmocka_unit_test(test_raw_clients_with_skewed_clocks),
	    cmocka_unit_test(test_a_lying_clock_harms_only_its_sender),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
