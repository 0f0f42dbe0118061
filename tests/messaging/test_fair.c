/* SPDX-License-Identifier: MIT */
/*
 * test_fair.c: one client cannot starve the others (docs/RELIABILITY.md,
 * "Fairness"). Raw clients over real sockets: the node's one loop is held
 * by a task while a flooding client's requests and another client's one
 * request reach its sockets, so that both connections are ready in the
 * same wake-up; the order in which the node's handler sees them (the held
 * messages of VERB_HOLD, in handling order) shows whether the flooding
 * connection gave up its turn at its read budget. The flooding client's
 * bytes reach the node first (its send queue empties before the other
 * client writes), so its socket is ready first. The rate limits: a
 * client, or an address, past its rate is held back while another client
 * is answered in full, and the pauses are counted. No time is measured.
 */
#include <linux/sockios.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/core.h>
#include <weft/loop.h>
#include <weft/messaging.h>

#include "cluster.h"
#include "rawpeer.h"

#define WAIT_MS 10000
/* VERB_HOLD keeps this many messages; it refuses the rest. */
#define HELD_MAX 64

static struct cluster cl;

/* The node's loop, held by hold_task until the test lets it go. */
static _Atomic bool loop_held, loop_release;

static int
group_setup(void **state)
{
	return test_setup(state);
}

static int
group_teardown(void **state)
{
	return test_teardown(state);
}

static void
hold_task(weft_loop *loop, int status, void *arg)
{
	uint64_t deadline = weft_now_ns() + (uint64_t)WAIT_MS * 1000000u;

	(void)loop;
	(void)arg;
	atomic_store(&loop_held, true);
	test_poke();
	/* Bounded: a test that fails before releasing frees the loop. */
	while (status == 0 && !atomic_load(&loop_release) &&
	       weft_now_ns() < deadline)
		sched_yield();
}

static bool
is_held(void *arg)
{
	(void)arg;
	return atomic_load(&loop_held);
}

static bool
all_handled(void *arg)
{
	return atomic_load(&cl.held_count) >= *(int *)arg;
}

static void
hold_node_loop(void)
{
	atomic_store(&loop_held, false);
	atomic_store(&loop_release, false);
	assert_int_equal(weft_loop_post(weft_loop_group_at(cl.groups[0], 0),
	                                hold_task, NULL),
	                 0);
	assert_true(test_wait(is_held, NULL, WAIT_MS));
}

/* Connects client id and makes one round trip, so that the node has
 * nothing more to write to it (no readiness but its reads to come). */
static void
client_in(rawpeer *p, const char *id)
{
	rp_env e;

	rp_connect(p, weft_msvc_port(cl.svc[0]), NULL, NULL);
	assert_int_equal(rp_handshake(p, "test", id, RP_CLIENT, 1, 0), 0);
	assert_true(rp_request(p, 1, VERB_ECHO, "hi", 2));
	assert_int_equal(rp_read_env(p, &e, WAIT_MS), 0);
	assert_int_equal(e.id, 1);
}

/* Sends n requests for VERB_HOLD carrying tag, in one write. */
static void
send_holds(rawpeer *p, char tag, int n)
{
	struct evbuffer *b = evbuffer_new();

	for (int i = 0; i < n; i++)
		rp_envelope(b, p->crc, 1 + (uint64_t)i, VERB_HOLD, RP_REQUEST,
		            weft_wall_ms() + WAIT_MS, &tag, 1);
	assert_true(rp_send(p, b));
	evbuffer_free(b);
}

/* Waits until the node's kernel holds all p sent (its send queue empty:
 * acknowledged), so that p's socket turned ready before the next one's. */
static void
wait_delivered(rawpeer *p)
{
	uint64_t deadline = weft_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	int unsent = 1;

	while (weft_now_ns() < deadline &&
	       ioctl(p->fd, SIOCOUTQ, &unsent) == 0 && unsent > 0)
		sched_yield();
	assert_int_equal(unsent, 0);
}

/* The position among the held messages of the first one tagged tag, or
 * -1. */
static int
first_held(char tag)
{
	for (int k = 0; k < HELD_MAX; k++) {
		weft_msvc_msg *m = atomic_load(&cl.held[k]);

		if (m != NULL && *(const char *)weft_msvc_msg_data(m) == tag)
			return k;
	}
	return -1;
}

static void
answer_all_held(void)
{
	for (int k = 0; k < HELD_MAX; k++) {
		weft_msvc_msg *m = atomic_exchange(&cl.held[k], NULL);

		if (m != NULL)
			weft_msvc_respond(m, "ok", 2);
	}
	atomic_store(&cl.held_count, 0);
}

static uint32_t client_budget, client_rate, address_rate, nloops = 1;
static size_t inflight_bytes;

static void
tune(weft_msvc_limits *l)
{
	l->loops = nloops;
	l->request_timeout_ms = 8000;
	l->client_read_budget = client_budget;
	l->client_rate = client_rate;
	l->address_rate = address_rate;
	l->inbound_inflight_bytes = inflight_bytes;
}

/*
 * One try: client a has flood frames ready and client b one, in the same
 * wake-up. Returns where b's request was handled among the held messages,
 * or -1 when the node happened to serve b's socket first (its readiness
 * came first after all: nothing to judge).
 */
static int
flood_once(rawpeer *a, rawpeer *b, int flood)
{
	int want = flood + 1, at;

	hold_node_loop();
	send_holds(a, 'a', flood);
	wait_delivered(a);
	send_holds(b, 'b', 1);
	atomic_store(&loop_release, true);
	assert_true(test_wait(all_handled, &want, WAIT_MS));
	at = first_held('a') == 0 ? first_held('b') : -1;
	answer_all_held();
	return at;
}

/*
 * With client_read_budget set to configured (0: the default), whose value
 * is budget, b's request is handled within a's first turn plus one, and
 * the turns a gave up are counted. Tries until a's socket was served
 * first (at most 8 times).
 */
static void
check_flood_yields(uint32_t configured, uint32_t budget, int flood)
{
	weft_msvc_stats st;
	rawpeer a, b;
	int at = -1;

	client_budget = configured;
	assert_int_equal(cluster_start(&cl, 1, tune), 0);
	client_in(&a, "flooder");
	client_in(&b, "other");
	for (int tries = 0; tries < 8 && at < 0; tries++)
		at = flood_once(&a, &b, flood);
	assert_true(at > 0);
	assert_true(at <= (int)budget);
	weft_msvc_get_stats(cl.svc[0], &st);
	assert_true(st.read_yields >= (uint64_t)(flood - 1) / budget);
	rp_close(&a);
	rp_close(&b);
	cluster_stop(&cl);
}

/* The default client budget (32) against 60 frames. */
static void
test_flooding_client_yields_to_another_in_the_same_wake_up(void **state)
{
	(void)state;
	check_flood_yields(0, 32, 60);
}

/* A budget of 4 from the configuration: b goes fifth at the latest. */
static void
test_configured_read_budget_bounds_a_turn(void **state)
{
	(void)state;
	check_flood_yields(4, 4, 60);
}

/* ---- Rate limits ------------------------------------------------------- */

/* The limited client's requests, and the rate (messages/s) both tests
 * set: its last answer is due about (LIMITED - RATE) / RATE s after the
 * first ones. */
#define LIMITED 100
#define RATE 20

/* Connects client id from address src (NULL: 127.0.0.1), handshakes. */
static void
client_from(rawpeer *p, const char *src, const char *id)
{
	assert_true(rp_connect_from(p, weft_msvc_port(cl.svc[0]),
	                            src ? src : "127.0.0.1", 0));
	assert_int_equal(rp_handshake(p, "test", id, RP_CLIENT, 1, 0), 0);
}

/* Sends n echo requests in one write. */
static void
send_echoes(rawpeer *p, int n)
{
	struct evbuffer *b = evbuffer_new();

	for (int i = 0; i < n; i++)
		rp_envelope(b, p->crc, 1 + (uint64_t)i, VERB_ECHO, RP_REQUEST,
		            weft_wall_ms() + WAIT_MS, "r", 1);
	assert_true(rp_send(p, b));
	evbuffer_free(b);
}

/* Reads answers from p, waiting up to timeout_ms for each, until n came
 * or one did not; returns how many came. */
static int
read_answers(rawpeer *p, int n, int timeout_ms)
{
	rp_env e;
	int got = 0;

	while (got < n && rp_read_env(p, &e, timeout_ms) == 0) {
		assert_int_equal(e.flags & (RP_RESPONSE | RP_ERROR),
		                 RP_RESPONSE);
		got++;
	}
	return got;
}

/* Waits up to WAIT_MS for the node to count a client held back. */
static bool
rate_limited_soon(void)
{
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	weft_msvc_stats st;

	for (;;) {
		weft_msvc_get_stats(cl.svc[0], &st);
		if (st.rate_limited >= 1 || weft_now_ns() >= deadline)
			return st.rate_limited >= 1;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
}

/*
 * Client a sends LIMITED requests at once, past its limit of RATE a
 * second; client b (from address b_src) sends 5. b is answered in full
 * while a is still held back (slowed, not refused: a is answered in full
 * later), and a's pauses are counted.
 */
static void
check_rate_limit(const char *b_src)
{
	struct cluster_opts o = {.tune = tune, .loops = 2};
	rawpeer a, b;
	int a_early;

	/* Two loops: the clients' buckets are kept on theirs, the address
	 * buckets across them. */
	nloops = 2;
	assert_int_equal(cluster_start_with(&cl, 1, &o), 0);
	client_from(&a, NULL, "flooder");
	client_from(&b, b_src, "other");
	send_echoes(&a, LIMITED);
	wait_delivered(&a);
	send_echoes(&b, 5);
	assert_int_equal(read_answers(&b, 5, WAIT_MS), 5);
	a_early = read_answers(&a, LIMITED, 0);
	assert_true(a_early < LIMITED);
	/* a's pause is counted when the node reads past a's allowance,
	 * which a slow run (a sanitizer's) may not have done yet. */
	assert_true(rate_limited_soon());
	assert_int_equal(read_answers(&a, LIMITED - a_early, WAIT_MS),
	                 LIMITED - a_early);
	rp_close(&a);
	rp_close(&b);
	cluster_stop(&cl);
	client_rate = address_rate = 0;
	nloops = 1;
}

/* client_rate: the limited client is slowed; another one from the same
 * address, within its own limit, is not. */
static void
test_client_over_its_rate_is_slowed_and_counted(void **state)
{
	(void)state;
	client_rate = RATE;
	check_rate_limit(NULL);
}

/* address_rate: the flooding address is slowed; a client from another
 * address is not. */
static void
test_address_over_its_rate_is_slowed_and_counted(void **state)
{
	(void)state;
	address_rate = RATE;
	check_rate_limit("127.0.0.2");
}

/* ---- Room for members in the inbound budget ---------------------------- */

#define ROOM_LIMIT (64u << 10)
#define ROOM_CHUNK 4096

static bool
client_paused(void *arg)
{
	weft_msvc_stats st;

	(void)arg;
	weft_msvc_get_stats(cl.svc[0], &st);
	return st.read_pauses >= 1;
}

static bool
slow_done(void *arg)
{
	return atomic_load(&cl.slow_running) >= *(int *)arg;
}

/*
 * A client fills the node's inbound budget with requests its blocking
 * handler holds: it is paused at the budget, and a member's
 * request is still read and answered while the client's are held. Then
 * everything is released and answered.
 */
static void
test_members_are_read_while_clients_hold_the_inbound_budget(void **state)
{
	static uint8_t chunk[ROOM_CHUNK];
	struct cluster_opts o = {.tune = tune};
	struct tally t = {.want = 1};
	struct evbuffer *b = evbuffer_new();
	int sent = 2 * ROOM_LIMIT / ROOM_CHUNK;
	weft_msvc_stats st;
	rawpeer a;

	(void)state;
	inflight_bytes = ROOM_LIMIT;
	atomic_store(&cl.slow_release, false);
	atomic_store(&cl.slow_running, 0);
	assert_int_equal(cluster_start_with(&cl, 2, &o), 0);
	client_from(&a, NULL, "filler");
	for (int i = 0; i < sent; i++)
		rp_envelope(b, a.crc, 1 + (uint64_t)i, VERB_SLOW, RP_REQUEST,
		            weft_wall_ms() + WAIT_MS, chunk, sizeof(chunk));
	assert_true(rp_send(&a, b));
	assert_true(test_wait(client_paused, NULL, WAIT_MS));
	weft_msvc_get_stats(cl.svc[0], &st);
	assert_true(st.inflight_bytes <= ROOM_LIMIT);
	/* n2's request to n1 is read and answered meanwhile. */
	assert_int_equal(weft_msvc_request(cl.svc[1], cluster_peer(&cl, 1, 0),
	                                   VERB_ECHO, "m", 1, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, WAIT_MS));
	assert_int_equal(atomic_load(&t.ok), 1);
	atomic_store(&cl.slow_release, true);
	assert_true(test_wait(slow_done, &sent, WAIT_MS));
	assert_int_equal(read_answers(&a, sent, WAIT_MS), sent);
	evbuffer_free(b);
	rp_close(&a);
	cluster_stop(&cl);
	inflight_bytes = 0;
}

/* ---- Configuration ---------------------------------------------------- */

#define CONF_HEAD                                                              \
	"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n[limits]\n"

/* The keys, their defaults, and their bounds with the line named. */
static void
test_fairness_keys_parse_with_defaults_and_bounds(void **state)
{
	static const struct {
		const char *line, *expect;
	} bad[] = {
	    {"client_read_budget = 0\n",
	     "bad.ini:7: [limits] client_read_budget: must not be 0"},
	    {"member_read_budget = 65537\n",
	     "bad.ini:7: [limits] member_read_budget: 65537 is out of range "
	     "(1 to 65536)"},
	    {"address_rate = 10000001\n",
	     "bad.ini:7: [limits] address_rate: 10000001 is out of range "
	     "(0 to 10000000)"},
	};
	const weft_msvc_limits *l;
	weft_msvc_config *cfg = NULL;
	char text[512], err[256];

	(void)state;
	assert_int_equal(
	    weft_msvc_config_parse(CONF_HEAD, "ok.ini", &cfg, err, sizeof(err)),
	    0);
	l = weft_msvc_config_limits_const(cfg);
	assert_int_equal(l->client_read_budget, 32);
	assert_int_equal(l->member_read_budget, 256);
	assert_int_equal(l->client_rate, 0);
	assert_int_equal(l->address_rate, 0);
	weft_msvc_config_free(cfg);
	snprintf(text, sizeof(text), "%s%s", CONF_HEAD,
	         "client_read_budget = 8\nmember_read_budget = 65536\n"
	         "client_rate = 100\naddress_rate = 0\n");
	assert_int_equal(
	    weft_msvc_config_parse(text, "ok.ini", &cfg, err, sizeof(err)), 0);
	l = weft_msvc_config_limits_const(cfg);
	assert_int_equal(l->client_read_budget, 8);
	assert_int_equal(l->member_read_budget, 65536);
	assert_int_equal(l->client_rate, 100);
	weft_msvc_config_free(cfg);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "%s%s", CONF_HEAD, bad[i].line);
		cfg = NULL;
		assert_int_not_equal(weft_msvc_config_parse(text, "bad.ini",
		                                            &cfg, err,
		                                            sizeof(err)),
		                     0);
		assert_null(cfg);
		assert_non_null(strstr(err, bad[i].expect));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
	        test_flooding_client_yields_to_another_in_the_same_wake_up),
	    cmocka_unit_test(test_configured_read_budget_bounds_a_turn),
	    cmocka_unit_test(test_client_over_its_rate_is_slowed_and_counted),
	    cmocka_unit_test(test_address_over_its_rate_is_slowed_and_counted),
	    cmocka_unit_test(
	        test_members_are_read_while_clients_hold_the_inbound_budget),
	    cmocka_unit_test(test_fairness_keys_parse_with_defaults_and_bounds),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
