/* SPDX-License-Identifier: MIT */
/*
 * test_sim.c: the cluster simulator (<weft/sim.h>): nodes talk through
 * its proxies, and each fault does to the traffic what it says.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <weft/sim.h>

#include "support/echo_verb.h"

#define VERB_ECHO 16
#define VERB_HOLD 17
#define VERB_SINK 18
#define VERB_ORDER 19
#define WAIT_MS 5000

/* ---- Nodes --------------------------------------------------------------- */

struct world {
	_Atomic int starts, stops;
	_Atomic int ups[WEFT_SIM_MAX], downs[WEFT_SIM_MAX];
	_Atomic int breaks[WEFT_SIM_MAX][WEFT_SIM_MAX]; /* a dialed b */
	_Atomic int sunk;                               /* one-way, arrived */
	/* VERB_ORDER: one-way messages numbered 1, 2, ... by one sender. */
	_Atomic uint32_t order_last;        /* the highest number arrived */
	_Atomic int order_seen, order_late; /* arrived; after a higher one */
	pthread_mutex_t lock;
	weft_msvc_msg *held;
};

static void
on_hold(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct world *w = arg;
	weft_msvc_msg *m = weft_msvc_msg_detach(msg);

	(void)svc;
	pthread_mutex_lock(&w->lock);
	if (w->held == NULL) {
		w->held = m;
		m = NULL;
	}
	pthread_mutex_unlock(&w->lock);
	if (m != NULL)
		weft_msvc_respond_error(m, WEFT_EBUSY, "one at a time");
}

static void
on_sink(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct world *w = arg;

	(void)svc;
	(void)msg;
	atomic_fetch_add(&w->sunk, 1);
}

static void
on_order(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct world *w = arg;
	uint32_t seq;

	(void)svc;
	if (weft_msvc_msg_len(msg) != sizeof(seq))
		return;
	memcpy(&seq, weft_msvc_msg_data(msg), sizeof(seq));
	atomic_fetch_add(&w->order_seen, 1);
	if (seq < atomic_load(&w->order_last))
		atomic_fetch_add(&w->order_late, 1);
	else
		atomic_store(&w->order_last, seq);
}

static void
on_break(weft_sim *sim, uint32_t a, uint32_t b, void *arg)
{
	struct world *w = arg;

	(void)sim;
	atomic_fetch_add(&w->breaks[a][b], 1);
}

static int
node_index(weft_msvc *svc)
{
	return weft_msvc_node_id(svc)[1] - '1';
}

static void
on_peer(weft_msvc *svc, weft_msvc_peer *peer, bool up, void *arg)
{
	struct world *w = arg;
	int to = weft_msvc_peer_id(peer)[1] - '1';

	(void)svc;
	atomic_fetch_add(up ? &w->ups[to] : &w->downs[to], 1);
	(void)node_index;
}

static int
on_start(weft_sim *sim, uint32_t node, weft_msvc *svc, void *arg)
{
	struct world *w = arg;
	int rv;

	(void)sim;
	atomic_fetch_add(&w->starts, 1);
	if ((rv = weft_msvc_register(svc, VERB_ECHO, "echo", weft_test_on_echo,
	                             w, WEFT_MSVC_CLIENTS)) != 0 ||
	    (rv = weft_msvc_register(svc, VERB_HOLD, "hold", on_hold, w,
	                             WEFT_MSVC_CLIENTS)) != 0 ||
	    (rv = weft_msvc_register(svc, VERB_SINK, "sink", on_sink, w,
	                             WEFT_MSVC_CLIENTS)) != 0 ||
	    (rv = weft_msvc_register(svc, VERB_ORDER, "order", on_order, w,
	                             WEFT_MSVC_INLINE)) != 0)
		return rv;
	/* Only n1 watches its peers. */
	return node == 0 ? weft_msvc_on_peer_event(svc, on_peer, w) : 0;
}

static void
on_stop(weft_sim *sim, uint32_t node, weft_msvc *svc, void *arg)
{
	struct world *w = arg;

	(void)sim;
	(void)node;
	(void)svc;
	atomic_fetch_add(&w->stops, 1);
}

/* The simulation of the running test, freed by the teardown if the test
 * failed before freeing it. */
struct fixture {
	struct world world;
	weft_sim *sim;
};

static struct fixture *current;

static int
setup(void **state)
{
	*state = current = calloc(1, sizeof(*current));
	return current == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	weft_sim_free(f->sim);
	free(f);
	current = NULL;
	return 0;
}

static weft_sim *
sim_start(struct world *w, const weft_msvc_limits *limits)
{
	weft_sim_opts o = {.nodes = 3,
	                   .limits = limits,
	                   .seed = 42,
	                   .on_start = on_start,
	                   .on_stop = on_stop,
	                   .on_break = on_break,
	                   .arg = w};
	weft_sim *sim;

	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
	assert_int_equal(weft_sim_new(&o, &sim), 0);
	current->sim = sim;
	assert_int_equal(weft_sim_seed(sim), 42);
	assert_int_equal(atomic_load(&w->starts), 3);
	return sim;
}

static void
sim_stop(weft_sim *sim, struct world *w)
{
	weft_sim_free(sim);
	current->sim = NULL;
	assert_int_equal(atomic_load(&w->stops), atomic_load(&w->starts));
	pthread_mutex_destroy(&w->lock);
}

/* ---- Calls ----------------------------------------------------------------
 */

struct call {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int calls, status;
	uint64_t start_ns, end_ns;
};

static void
on_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct call *c = arg;

	(void)svc;
	(void)data;
	(void)len;
	pthread_mutex_lock(&c->lock);
	c->calls++;
	c->status = status;
	c->end_ns = weft_now_ns();
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void
call_start_with(struct call *c, weft_msvc *svc, uint32_t to, uint32_t verb,
                uint64_t timeout_ms, const void *data, size_t len)
{
	weft_msvc_call_opts o = {.timeout_ms = timeout_ms};
	char id[8];

	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->calls = 0;
	c->start_ns = weft_now_ns();
	snprintf(id, sizeof(id), "n%u", to + 1);
	assert_int_equal(weft_msvc_request(svc, weft_msvc_peer_find(svc, id),
	                                   verb, data, len, &o, on_reply, c),
	                 0);
}

static void
call_start(struct call *c, weft_msvc *svc, uint32_t to, uint32_t verb,
           uint64_t timeout_ms)
{
	call_start_with(c, svc, to, verb, timeout_ms, "ping", 4);
}

/* Waits for the one callback; returns its status. */
static int
call_end(struct call *c)
{
	struct timespec ts;
	int status;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&c->lock);
	while (c->calls == 0 &&
	       pthread_cond_timedwait(&c->cond, &c->lock, &ts) == 0)
		;
	assert_int_equal(c->calls, 1);
	status = c->status;
	pthread_mutex_unlock(&c->lock);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	return status;
}

static int
call(weft_sim *sim, uint32_t from, uint32_t to, uint64_t timeout_ms,
     uint64_t *took_ms)
{
	struct call c;
	int status;

	call_start(&c, weft_sim_node(sim, from), to, VERB_ECHO, timeout_ms);
	status = call_end(&c);
	if (took_ms != NULL)
		*took_ms = (c.end_ns - c.start_ns) / 1000000;
	return status;
}

/* The messaging service's default limits, for a test to change. */
static void
default_limits(weft_msvc_limits *l)
{
	weft_msvc_config *cfg;

	assert_int_equal(weft_msvc_config_new("x", &cfg), 0);
	*l = *weft_msvc_config_limits(cfg);
	weft_msvc_config_free(cfg);
}

/* Limits under which a silent peer is marked down within 300 ms (three
 * heartbeats of 100 ms) and redialled after 10 ms to reconnect_max_ms. */
static void
quick_down_limits(weft_msvc_limits *l, uint64_t reconnect_max_ms)
{
	default_limits(l);
	l->heartbeat_interval_ms = 100;
	l->heartbeat_misses = 3;
	l->reconnect_min_ms = 10;
	l->reconnect_max_ms = reconnect_max_ms;
	l->connect_timeout_ms = 1000;
}

/* Waits until *counter is at least n; false if it never gets there. */
static bool
wait_for(_Atomic int *counter, int n)
{
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;

	while (atomic_load(counter) < n && weft_now_ns() < deadline)
		nanosleep(&(struct timespec){0, 2000000}, NULL);
	return atomic_load(counter) >= n;
}

/* Calls until one succeeds (a link coming back, a node restarting). */
static bool
call_until_ok(weft_sim *sim, uint32_t from, uint32_t to)
{
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;

	while (weft_now_ns() < deadline)
		if (call(sim, from, to, 500, NULL) == 0)
			return true;
	return false;
}

static void
sleep_ms(long ms)
{
	nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

/* ---- Tests ----------------------------------------------------------------
 */

static void
test_nodes_talk_through_the_proxies(void **state)
{
	struct world *w = &current->world;
	weft_sim *sim = sim_start(w, NULL);
	weft_msvc_stats st;
	weft_msvc *client;
	uint32_t c;
	struct call cl;

	(void)state;
	assert_int_equal(weft_sim_node_count(sim), 3);
	assert_int_equal(call(sim, 0, 1, 0, NULL), 0);
	assert_int_equal(call(sim, 2, 0, 0, NULL), 0);
	/* The node saw a connection from the proxy, not from n1. */
	weft_msvc_get_stats(weft_sim_node(sim, 1), &st);
	assert_true(st.connections_accepted >= 1);
	assert_int_equal(weft_sim_client_new(sim, "c1", &c, &client), 0);
	assert_int_equal(c, 3);
	assert_int_equal(weft_sim_client_new(sim, "n2", &c, &client),
	                 WEFT_EINVAL);
	call_start(&cl, client, 1, VERB_ECHO, 0);
	assert_int_equal(call_end(&cl), 0);
	sim_stop(sim, w);
}

static void
test_delay_holds_bytes_back(void **state)
{
	struct world *w = &current->world;
	weft_sim *sim = sim_start(w, NULL);
	uint64_t took;

	(void)state;
	assert_int_equal(call(sim, 0, 1, 0, NULL), 0);
	/* Requests go n1 -> n2, answers on n2's own connection n2 -> n1. */
	/* Less than the 3 heartbeats n1 may miss before n2 is down. */
	assert_int_equal(weft_sim_delay(sim, 1, 0, 150, 150), 0);
	assert_int_equal(call(sim, 0, 1, 0, &took), 0);
	assert_true(took >= 150);
	assert_int_equal(weft_sim_delay(sim, 1, 0, 0, 0), 0);
	assert_int_equal(weft_sim_delay(sim, 0, 0, 1, 1), WEFT_EINVAL);
	assert_int_equal(weft_sim_delay(sim, 0, 9, 1, 1), WEFT_EINVAL);
	sim_stop(sim, w);
}

static void
test_stall_times_requests_out_until_healed(void **state)
{
	struct world *w = &current->world;
	weft_sim *sim = sim_start(w, NULL);

	(void)state;
	assert_int_equal(call(sim, 0, 1, 0, NULL), 0);
	assert_int_equal(weft_sim_stall(sim, 0, 1, true), 0);
	assert_int_equal(call(sim, 0, 1, 200, NULL), WEFT_ETIMEDOUT);
	/* Other pairs still work. (Between n1 and n2 nothing does once
	 * their heartbeats notice: n1's answers to n2 go on n1's own
	 * connection to n2, stalled too.) */
	assert_int_equal(call(sim, 0, 2, 0, NULL), 0);
	assert_int_equal(call(sim, 2, 1, 0, NULL), 0);
	weft_sim_heal(sim);
	assert_true(call_until_ok(sim, 0, 1));
	sim_stop(sim, w);
}

/* Sends VERB_ORDER messages first..last from n1 to n2, each retried
 * while n2 is known down; false if one could not be sent in time. */
static bool
send_numbered(weft_sim *sim, uint32_t first, uint32_t last)
{
	weft_msvc *n1 = weft_sim_node(sim, 0);
	weft_msvc_peer *n2 = weft_msvc_peer_find(n1, "n2");
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	uint32_t seq;

	for (seq = first; seq <= last; seq++)
		while (weft_msvc_send(n1, n2, VERB_ORDER, &seq, sizeof(seq),
		                      NULL) != 0)
			if (weft_now_ns() > deadline)
				return false;
			else
				sleep_ms(5);
	return true;
}

/*
 * A hold past the heartbeat timeout: n1 marks n2 down, redials and sends
 * on its new connections, and the held bytes of the old one arrive after
 * those. n2 must not deliver them then: per (peer, class, index) FIFO
 * across reconnections (docs/RELIABILITY.md). It drops them, counted.
 */
static void
hold_and_release(const weft_msvc_limits *limits)
{
	struct world *w = &current->world;
	weft_sim *sim = sim_start(w, limits);
	weft_msvc_stats st;

	assert_true(send_numbered(sim, 1, 50));
	assert_true(wait_for(&w->order_seen, 50));
	assert_int_equal(weft_sim_hold(sim, 0, 1, true), 0);
	/* Written on n1's connection of the small class, and held. */
	assert_true(send_numbered(sim, 51, 150));
	/* Three heartbeats missed: n2 is down; then up on new connections,
	 * which the hold lets through. */
	assert_true(wait_for(&w->downs[1], 1));
	assert_true(wait_for(&w->ups[1], 2));
	assert_true(send_numbered(sim, 151, 200));
	assert_true(wait_for(&w->order_seen, 100));
	assert_int_equal(atomic_load(&w->order_last), 200);
	assert_int_equal(weft_sim_hold(sim, 0, 1, false), 0);
	/* The held bytes, then the old connection's end, reach n2. */
	sleep_ms(500);
	assert_int_equal(atomic_load(&w->order_late), 0);
	weft_msvc_get_stats(weft_sim_node(sim, 1), &st);
	assert_true(st.superseded_connections >= 1);
	/* Nothing is delivered twice, and what was dropped is counted. */
	assert_true(atomic_load(&w->order_seen) <= 200);
	sim_stop(sim, w);
}

static void
test_hold_keeps_order_across_a_reconnection(void **state)
{
	(void)state;
	hold_and_release(NULL);
}

/* The same with four loops a node: the old connection and the new one
 * may be on different loops, and the old one is closed on its own. */
static void
test_hold_keeps_order_across_loops(void **state)
{
	weft_msvc_limits l;

	(void)state;
	quick_down_limits(&l, 200);
	l.loops = 4;
	l.worker_threads = 1;
	hold_and_release(&l);
}

static void
test_drop_fails_what_was_on_the_connection(void **state)
{
	struct world *w = &current->world;
	weft_sim *sim = sim_start(w, NULL);
	struct call c;

	(void)state;
	assert_int_equal(call(sim, 0, 1, 0, NULL), 0);
	call_start(&c, weft_sim_node(sim, 0), 1, VERB_HOLD, 3000);
	while (1) {
		pthread_mutex_lock(&w->lock);
		if (w->held != NULL)
			break;
		pthread_mutex_unlock(&w->lock);
		sleep_ms(1);
	}
	pthread_mutex_unlock(&w->lock);
	assert_int_equal(weft_sim_drop(sim, 0, 1), 0);
	assert_int_equal(call_end(&c), WEFT_EPEERDOWN);
	/* The held request's connection was n1's, dialed to n2. */
	assert_true(wait_for(&w->breaks[0][1], 1));
	/* Well before its timeout. */
	assert_true(c.end_ns - c.start_ns < 2500 * 1000000ull);
	weft_msvc_respond(w->held, "late", 4);
	assert_true(call_until_ok(sim, 0, 1));
	sim_stop(sim, w);
}

static void
test_pause_makes_a_node_miss_its_heartbeats(void **state)
{
	struct world *w = &current->world;
	weft_sim *sim = sim_start(w, NULL);
	uint64_t deadline;

	(void)state;
	assert_int_equal(call(sim, 0, 1, 0, NULL), 0);
	assert_int_equal(weft_sim_pause(sim, 1, true), 0);
	deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	while (atomic_load(&w->downs[1]) == 0 && weft_now_ns() < deadline)
		sleep_ms(5);
	assert_int_equal(atomic_load(&w->downs[1]), 1);
	assert_int_equal(call(sim, 0, 1, 200, NULL) != 0, true);
	assert_int_equal(weft_sim_pause(sim, 1, false), 0);
	assert_true(call_until_ok(sim, 0, 1));
	assert_true(atomic_load(&w->ups[1]) >= 2);
	sim_stop(sim, w);
}

static void
test_corruption_is_caught_by_the_crc(void **state)
{
	struct world *w = &current->world;
	weft_sim *sim = sim_start(w, NULL);
	weft_msvc_stats st;
	int i;

	(void)state;
	assert_int_equal(call(sim, 0, 1, 0, NULL), 0);
	assert_int_equal(weft_sim_corrupt(sim, 0, 1, 1000000), 0);
	for (i = 0; i < 5; i++)
		assert_int_not_equal(call(sim, 0, 1, 200, NULL), 0);
	weft_msvc_get_stats(weft_sim_node(sim, 1), &st);
	assert_true(st.bad_frames + st.handshakes_refused +
	                st.oversized_frames + st.bad_envelopes >
	            0);
	assert_int_equal(weft_sim_corrupt(sim, 0, 1, 0), 0);
	assert_true(call_until_ok(sim, 0, 1));
	sim_stop(sim, w);
}

/*
 * Bytes damaged while a fault lasted may be found only after it ended: a
 * paused node reads them when it resumes. The connection's close is then
 * reported as a break, so that a ledger of messages excuses what was
 * written on it meanwhile, after the fault's end. (Seen in test_burn: a
 * one-way message lost that no fault record excused.)
 */
static void
test_damage_found_after_the_fault_is_a_break(void **state)
{
	struct world *w = &current->world;
	static char payload[4096];
	weft_msvc_call_opts o = {.key = 0};
	weft_msvc_limits l;
	weft_msvc *n1;
	weft_sim *sim;

	(void)state;
	default_limits(&l);
	/* Nobody is marked down for the pause; a frame whose length the
	 * damage made up is refused or times out soon. */
	l.heartbeat_interval_ms = 100;
	l.heartbeat_misses = 1000;
	l.reconnect_min_ms = 10;
	l.reconnect_max_ms = 100;
	l.max_frame_bytes = 64u << 10;
	l.frame_timeout_ms = 200;
	sim = sim_start(w, &l);
	n1 = weft_sim_node(sim, 0);
	assert_int_equal(call(sim, 0, 1, 0, NULL), 0);
	assert_int_equal(weft_sim_pause(sim, 1, true), 0);
	assert_int_equal(weft_sim_corrupt(sim, 0, 1, 20000), 0);
	assert_int_equal(weft_msvc_send(n1, weft_msvc_peer_find(n1, "n2"),
	                                VERB_SINK, payload, sizeof(payload),
	                                &o),
	                 0);
	/* Through the proxy (damaged as it reads), into the paused node's
	 * socket: with room for a sanitizer's slower loops. */
	sleep_ms(300);
	assert_int_equal(weft_sim_corrupt(sim, 0, 1, 0), 0);
	/* The fault is over, and nothing has closed yet. */
	assert_int_equal(atomic_load(&w->breaks[0][1]), 0);
	assert_int_equal(weft_msvc_send(n1, weft_msvc_peer_find(n1, "n2"),
	                                VERB_SINK, payload, sizeof(payload),
	                                &o),
	                 0);
	sleep_ms(100);
	assert_int_equal(weft_sim_pause(sim, 1, false), 0);
	/* n2 finds the damage and closes the connection: a break, later than
	 * both messages were sent, and neither arrived. */
	assert_true(wait_for(&w->breaks[0][1], 1));
	assert_int_equal(atomic_load(&w->sunk), 0);
	assert_true(call_until_ok(sim, 0, 1));
	sim_stop(sim, w);
}

/*
 * A connection its sender closed lingers while its peer does not take its
 * bytes (the channel's linger). Here a hold past the heartbeat timeout
 * makes n1 mark n2 down and close its connections to n2: the large one,
 * full of held bytes, lingers, while n1's new urgent connection (a hold
 * lets new connections through) marks n2 up again. A one-way message sent
 * then must wait for the next large connection: written into the closing
 * one it was dropped, with no fault after it was sent to excuse it. (Found
 * while tracing test_burn: 213 one-way messages went into such
 * connections in 40 runs of one seed.)
 */
#define FILL_BYTES (4u << 20)
#define FILLS 8

static void
test_send_while_a_closed_connection_lingers_is_not_lost(void **state)
{
	static char big[FILL_BYTES];
	struct world *w = &current->world;
	weft_msvc_call_opts o = {.key = 0};
	weft_msvc_limits l;
	weft_msvc_peer *n2;
	weft_msvc *n1;
	weft_sim *sim;
	int i;

	(void)state;
	quick_down_limits(&l, 100);
	l.outbound_queue_bytes = 2 * FILLS * FILL_BYTES;
	sim = sim_start(w, &l);
	n1 = weft_sim_node(sim, 0);
	n2 = weft_msvc_peer_find(n1, "n2");
	/* n2 is up, and n1's large connection to it is open. */
	assert_int_equal(weft_msvc_send(n1, n2, VERB_SINK, big, FILL_BYTES, &o),
	                 0);
	assert_true(wait_for(&w->sunk, 1));
	assert_true(wait_for(&w->ups[1], 1));
	/* More than the sockets and the proxy take: the rest stays in the
	 * channel, so that its close lingers. */
	assert_int_equal(weft_sim_hold(sim, 0, 1, true), 0);
	for (i = 0; i < FILLS; i++)
		assert_int_equal(
		    weft_msvc_send(n1, n2, VERB_SINK, big, FILL_BYTES, &o), 0);
	assert_true(wait_for(&w->downs[1], 1));
	assert_true(wait_for(&w->ups[1], 2));
	/* n2 is up, and the closed large connection still lingers. */
	assert_int_equal(weft_msvc_send(n1, n2, VERB_SINK, big, FILL_BYTES, &o),
	                 0);
	assert_true(wait_for(&w->sunk, 2));
	sim_stop(sim, w);
}

static void
test_restart_changes_limits(void **state)
{
	struct world *w = &current->world;
	static char big[8192];
	weft_msvc_limits l;
	weft_msvc_stats st;
	struct call c;
	weft_sim *sim;
	int i;

	(void)state;
	default_limits(&l);
	l.heartbeat_interval_ms = 100;
	l.reconnect_min_ms = 10;
	l.reconnect_max_ms = 100;
	sim = sim_start(w, &l);
	assert_int_equal(call(sim, 0, 1, 0, NULL), 0);
	/* Down: its proxies refuse, so requests fail. */
	assert_int_equal(weft_sim_node_stop(sim, 1), 0);
	assert_null(weft_sim_node(sim, 1));
	assert_int_not_equal(call(sim, 0, 1, 300, NULL), 0);
	assert_int_equal(weft_sim_node_start(sim, 1, NULL), 0);
	assert_int_equal(weft_sim_node_start(sim, 1, NULL), WEFT_EBUSY);
	assert_true(call_until_ok(sim, 0, 1));
	/* Back with limits that an 8 KiB request breaks: its frames fit
	 * the new frame limit (a sender cuts its chunks to the frames the
	 * peer announces), the message does not fit the message limit. */
	l.max_frame_bytes = 2048;
	l.large_message_bytes = 1024;
	l.max_message_bytes = 4096;
	assert_int_equal(weft_sim_restart(sim, 1, &l), 0);
	assert_int_equal(atomic_load(&w->starts), 5);
	assert_true(call_until_ok(sim, 0, 1));
	/* Refused as oversized. A request may also fail on a connection that
	 * still led to the node's previous run (its proxy learns of the close
	 * late): then it is sent again, a few times at most. */
	for (i = 0; i < 10; i++) {
		call_start_with(&c, weft_sim_node(sim, 0), 1, VERB_ECHO, 500,
		                big, sizeof(big));
		assert_int_not_equal(call_end(&c), 0);
		weft_msvc_get_stats(weft_sim_node(sim, 1), &st);
		if (st.bad_chunks >= 1)
			break;
	}
	assert_true(st.bad_chunks >= 1);
	sim_stop(sim, w);
}

static void
test_a_seed_gives_one_schedule(void **state)
{
	weft_sim_chaos c = {.kinds = (1u << WEFT_SIM_FAULT_KINDS) - 1};
	weft_sim_fault a[64], b[64];
	size_t i, kinds = 0;

	(void)state;
	weft_sim_schedule(7, 3, &c, a, 64);
	weft_sim_schedule(7, 3, &c, b, 64);
	assert_memory_equal(a, b, sizeof(a));
	for (i = 0; i < 64; i++) {
		assert_true(a[i].a < 3 && a[i].b < 3 && a[i].a != a[i].b);
		assert_true(i == 0 || a[i].at_ms > a[i - 1].at_ms);
		kinds |= 1u << a[i].kind;
	}
	assert_int_equal(kinds, (1u << WEFT_SIM_FAULT_KINDS) - 1);
	weft_sim_schedule(8, 3, &c, b, 64);
	assert_true(memcmp(a, b, sizeof(a)) != 0);
	assert_string_equal(weft_sim_fault_name(WEFT_SIM_STALL), "stall");
}

struct seen {
	_Atomic int starts, ends;
};

static void
count_fault(weft_sim *sim, const weft_sim_fault *f, void *arg)
{
	struct seen *s = arg;

	(void)sim;
	atomic_fetch_add(f->ending ? &s->ends : &s->starts, 1);
}

static void
test_chaos_fires_and_heals(void **state)
{
	struct world *w = &current->world;
	weft_sim *sim = sim_start(w, NULL);
	struct seen s = {0};
	weft_sim_chaos c = {.mean_gap_ms = 20,
	                    .max_fault_ms = 100,
	                    .on_fault = count_fault,
	                    .arg = &s};
	uint64_t fired;

	(void)state;
	assert_int_equal(weft_sim_chaos_start(sim, &c), 0);
	assert_int_equal(weft_sim_chaos_start(sim, &c), WEFT_EBUSY);
	sleep_ms(500);
	fired = weft_sim_chaos_stop(sim);
	assert_true(fired > 5);
	assert_int_equal(atomic_load(&s.starts), (int)fired);
	/* Every fault that lasts was lifted (drops do not). */
	assert_true(atomic_load(&s.ends) <= atomic_load(&s.starts));
	assert_true(call_until_ok(sim, 0, 1));
	assert_true(call_until_ok(sim, 2, 0));
	sim_stop(sim, w);
}

/* The restarts the chaos tells: each node's last one, whether it gave
 * the node tighter limits (1) or the ones it had (0); -1: none yet. */
struct restarts {
	_Atomic int starts;
	_Atomic int tight[3];
};

static void
note_restart(weft_sim *sim, const weft_sim_fault *f, void *arg)
{
	struct restarts *r = arg;

	(void)sim;
	if (f->ending)
		return;
	if (f->kind == WEFT_SIM_RESTART && f->a < 3)
		atomic_store(&r->tight[f->a], (int)(f->param & 1));
	atomic_fetch_add(&r->starts, 1);
}

/*
 * A restart that left a node with other limits is undone when the chaos
 * stops: the node restarts with the limits it had. That restart loses
 * what was on its way to and from the node as any restart does, so it is
 * told as one. (Seen in test_burn, seed 0x1a24876e6a0a715: one-way
 * messages from a node paused at the end of a round, written when the
 * stop resumed it, lost by that restart, which its ledger never heard
 * of.)
 */
static void
test_chaos_stop_tells_the_restart_that_restores_limits(void **state)
{
	struct world *w = &current->world;
	struct restarts r = {.tight = {-1, -1, -1}};
	/* Faults 1 to 3 s apart: one has long ended before the next. */
	weft_sim_chaos c = {.mean_gap_ms = 2000,
	                    .kinds = 1u << WEFT_SIM_RESTART,
	                    .on_fault = note_restart,
	                    .arg = &r};
	weft_sim_fault plan[8];
	uint64_t deadline, fired;
	weft_sim *sim;
	uint32_t n;
	size_t k;

	(void)state;
	/* The first restart of the schedule that tightens the limits. */
	weft_sim_schedule(42, 3, &c, plan, 8);
	for (k = 0; k < 8 && !(plan[k].param & 1); k++)
		;
	assert_true(k < 8);
	sim = sim_start(w, NULL);
	assert_int_equal(weft_sim_chaos_start(sim, &c), 0);
	deadline = weft_now_ns() + (plan[k].at_ms + WAIT_MS) * 1000000ull;
	while (atomic_load(&r.starts) <= (int)k && weft_now_ns() < deadline)
		sleep_ms(2);
	assert_int_equal(atomic_load(&r.starts), (int)k + 1);
	assert_int_equal(atomic_load(&r.tight[plan[k].a]), 1);
	/* Stopped well before the next fault: the node restarts with the
	 * limits it had (and so does any other a restart left tight), and
	 * that is told and counted. */
	fired = weft_sim_chaos_stop(sim);
	assert_true(fired >= k + 2);
	assert_int_equal(atomic_load(&r.starts), (int)fired);
	for (n = 0; n < 3; n++)
		assert_int_not_equal(atomic_load(&r.tight[n]), 1);
	assert_true(call_until_ok(sim, (plan[k].a + 1) % 3, plan[k].a));
	sim_stop(sim, w);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_nodes_talk_through_the_proxies,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_delay_holds_bytes_back, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(
	        test_stall_times_requests_out_until_healed, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_hold_keeps_order_across_a_reconnection, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hold_keeps_order_across_loops,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_drop_fails_what_was_on_the_connection, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_pause_makes_a_node_miss_its_heartbeats, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_corruption_is_caught_by_the_crc, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_damage_found_after_the_fault_is_a_break, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_send_while_a_closed_connection_lingers_is_not_lost, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(test_restart_changes_limits, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_a_seed_gives_one_schedule,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_chaos_fires_and_heals, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(
	        test_chaos_stop_tells_the_restart_that_restores_limits, setup,
	        teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
