/* SPDX-License-Identifier: MIT */
/*
 * test_debug.c: what is in flight (weft_msvc_snapshot_async and its
 * kin, services/messaging/debug.c): the connections of a cluster with
 * their classes and directions, a held request at its caller and at its
 * handler until it is answered, a worker's handler, the JSON form, slow
 * calls' log lines, and snapshots taken while the loops carry traffic.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/core.h>
#include <weft/messaging.h>

#include "cluster.h"
#include "support/json_check.h"

#define WAIT_MS 10000

static struct cluster cl;

static weft_msvc_snapshot *
take(int node)
{
	weft_msvc_snapshot *s = NULL;

	assert_int_equal(weft_msvc_snapshot_take(cl.svc[node], WAIT_MS, &s), 0);
	assert_non_null(s);
	return s;
}

/* The connection of snap to peer of class cls in direction out, or
 * NULL. */
static const weft_msvc_conn_info *
find_conn(const weft_msvc_snapshot *snap, const char *peer, int cls, bool out)
{
	size_t i;

	for (i = 0; i < weft_msvc_snapshot_conn_count(snap); i++) {
		const weft_msvc_conn_info *c =
		    weft_msvc_snapshot_conn_at(snap, i);

		if (strcmp(c->peer, peer) == 0 && c->cls == cls &&
		    c->outbound == out)
			return c;
	}
	return NULL;
}

/* The request of snap of verb, handled here (inbound) or not; NULL. */
static const weft_msvc_req_info *
find_req(const weft_msvc_snapshot *snap, uint32_t verb, bool inbound)
{
	size_t i;

	for (i = 0; i < weft_msvc_snapshot_req_count(snap); i++) {
		const weft_msvc_req_info *r =
		    weft_msvc_snapshot_req_at(snap, i);

		if (r->verb == verb && r->inbound == inbound)
			return r;
	}
	return NULL;
}

static void
echo(int from, int to)
{
	struct tally t = {.want = 1};

	assert_int_equal(
	    weft_msvc_request(cl.svc[from], cluster_peer(&cl, from, to),
	                      VERB_ECHO, "hi", 2, NULL, tally_cb, &t),
	    0);
	assert_true(test_wait(tally_complete, &t, WAIT_MS));
	assert_int_equal(atomic_load(&t.ok), 1);
}

static bool
count_reached(void *arg)
{
	return atomic_load(&cl.held_count) >= *(int *)arg;
}

static bool
slow_started(void *arg)
{
	return atomic_load(&cl.slow_running) >= *(int *)arg;
}

static bool
time_passed(void *arg)
{
	return weft_now_ns() >= *(uint64_t *)arg;
}

static void
pause_ms(uint64_t ms)
{
	uint64_t until = weft_now_ns() + ms * 1000000u;

	test_wait(time_passed, &until, ms + 1000);
}

static void
test_connections_of_a_cluster_by_class_and_direction(void **state)
{
	const weft_msvc_conn_info *c;
	weft_msvc_snapshot *s;

	(void)state;
	memset(&cl, 0, sizeof(cl));
	assert_int_equal(cluster_start(&cl, 3, NULL), 0);
	echo(0, 1);
	echo(0, 2);
	echo(1, 0);
	s = take(0);
	assert_string_equal(weft_msvc_snapshot_node(s), "n1");
	assert_true(weft_msvc_snapshot_wall_ms(s) > 0);
	/* n1 dialled n2 and n3 for its echoes, n2 dialled n1 for its own
	 * and to answer. */
	assert_non_null(c = find_conn(s, "n2", WEFT_MSVC_SMALL, true));
	assert_string_equal(c->state, "up");
	assert_false(c->client);
	assert_false(c->tls);
	assert_int_equal(c->version, 2);
	assert_true(c->chunks);
	assert_true(c->bytes_in > 0 && c->bytes_out > 0);
	assert_non_null(strchr(c->address, ':'));
	assert_non_null(find_conn(s, "n3", WEFT_MSVC_SMALL, true));
	assert_non_null(c = find_conn(s, "n2", WEFT_MSVC_SMALL, false));
	assert_string_equal(c->state, "up");
	/* n3 answers on a connection of its own. */
	assert_non_null(find_conn(s, "n3", WEFT_MSVC_SMALL, false));
	/* Nothing large was sent, and a node has no connection to itself. */
	assert_null(find_conn(s, "n2", WEFT_MSVC_LARGE, true));
	assert_null(find_conn(s, "n1", WEFT_MSVC_SMALL, true));
	assert_string_equal(weft_msvc_class_name(c->cls), "small");
	assert_null(
	    weft_msvc_snapshot_conn_at(s, weft_msvc_snapshot_conn_count(s)));
	weft_msvc_snapshot_free(s);
	cluster_stop(&cl);
}

static void
test_a_held_request_is_pending_then_detached_then_gone(void **state)
{
	const weft_msvc_req_info *r;
	weft_msvc_snapshot *a, *b;
	struct tally t = {.want = 1};
	uint64_t age;
	int one = 1;

	(void)state;
	memset(&cl, 0, sizeof(cl));
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_HOLD, "x", 1, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_true(test_wait(count_reached, &one, WAIT_MS));
	a = take(0);
	assert_non_null(r = find_req(a, VERB_HOLD, false));
	assert_string_equal(r->peer, "n2");
	assert_string_equal(r->verb_name, "hold");
	assert_int_equal(r->stage, WEFT_MSVC_REQ_SENT);
	age = r->age_ms;
	b = take(1);
	assert_non_null(r = find_req(b, VERB_HOLD, true));
	assert_string_equal(r->peer, "n1");
	assert_int_equal(r->stage, WEFT_MSVC_REQ_DETACHED);
	assert_string_equal(weft_msvc_req_stage_name(r->stage), "detached");
	assert_int_equal(r->id, find_req(a, VERB_HOLD, false)->id);
	weft_msvc_snapshot_free(a);
	weft_msvc_snapshot_free(b);
	/* Its age grows at both ends. */
	pause_ms(50);
	a = take(0);
	assert_non_null(r = find_req(a, VERB_HOLD, false));
	assert_true(r->age_ms >= age + 40);
	weft_msvc_snapshot_free(a);
	b = take(1);
	assert_non_null(r = find_req(b, VERB_HOLD, true));
	assert_true(r->age_ms >= 40);
	weft_msvc_snapshot_free(b);
	/* Answered: gone from both. */
	assert_int_equal(
	    weft_msvc_respond(atomic_exchange(&cl.held[0], NULL), "y", 1), 0);
	assert_true(test_wait(tally_complete, &t, WAIT_MS));
	a = take(0);
	b = take(1);
	assert_null(find_req(a, VERB_HOLD, false));
	assert_null(find_req(b, VERB_HOLD, true));
	weft_msvc_snapshot_free(a);
	weft_msvc_snapshot_free(b);
	cluster_stop(&cl);
}

static void
test_a_blocking_handler_shows_in_its_worker(void **state)
{
	const weft_msvc_req_info *r;
	struct tally t = {.want = 1};
	weft_msvc_snapshot *s;
	int one = 1;

	(void)state;
	memset(&cl, 0, sizeof(cl));
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_SLOW, "x", 1, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_true(test_wait(slow_started, &one, WAIT_MS));
	s = take(1);
	assert_non_null(r = find_req(s, VERB_SLOW, true));
	assert_int_equal(r->stage, WEFT_MSVC_REQ_HANDLER);
	assert_string_equal(r->verb_name, "slow");
	weft_msvc_snapshot_free(s);
	atomic_store(&cl.slow_release, true);
	assert_true(test_wait(tally_complete, &t, WAIT_MS));
	s = take(1);
	assert_null(find_req(s, VERB_SLOW, true));
	weft_msvc_snapshot_free(s);
	cluster_stop(&cl);
}

/* weft_msvc_snapshot_async from one of the service's loops, where the
 * waiting form refuses. */
struct async_ask {
	weft_msvc *svc;
	_Atomic int status;
	_Atomic int took;
	_Atomic int done;
	int busy; /* what snapshot_take said there */
};

static void
on_async(weft_msvc *svc, int status, weft_msvc_snapshot *snap, void *arg)
{
	struct async_ask *a = arg;

	(void)svc;
	atomic_store(&a->status, status);
	atomic_store(&a->took,
	             snap != NULL && weft_msvc_snapshot_conn_count(snap) > 0);
	weft_msvc_snapshot_free(snap);
	atomic_store(&a->done, 1);
	test_poke();
}

static void
ask_on_loop(weft_loop *loop, int status, void *arg)
{
	struct async_ask *a = arg;
	weft_msvc_snapshot *s = NULL;

	(void)loop;
	(void)status;
	a->busy = weft_msvc_snapshot_take(a->svc, 100, &s);
	if (weft_msvc_snapshot_async(a->svc, on_async, a) != 0) {
		atomic_store(&a->status, -1000);
		atomic_store(&a->done, 1);
		test_poke();
	}
}

static bool
async_done(void *arg)
{
	return atomic_load(&((struct async_ask *)arg)->done) != 0;
}

static void
test_json_and_a_snapshot_from_a_loop(void **state)
{
	struct async_ask a = {0};
	struct evbuffer *out = evbuffer_new();
	weft_msvc_snapshot *s;
	struct tally t = {.want = 1};
	const char *text;
	int one = 1;

	(void)state;
	memset(&cl, 0, sizeof(cl));
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_HOLD, "x", 1, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_true(test_wait(count_reached, &one, WAIT_MS));
	s = take(1);
	assert_int_equal(
	    weft_msvc_snapshot_json(
	        s, WEFT_MSVC_SNAPSHOT_CONNS | WEFT_MSVC_SNAPSHOT_REQS, out),
	    0);
	weft_msvc_snapshot_free(s);
	text = (const char *)evbuffer_pullup(out, -1);
	assert_true(json_is_valid(text, evbuffer_get_length(out)));
	assert_non_null(strstr(text, "\"node\":\"n2\""));
	assert_non_null(strstr(text, "\"class\":\"small\",\"index\":0,"
	                             "\"direction\":\"in\",\"state\":\"up\""));
	assert_non_null(strstr(text, "\"direction\":\"in\",\"peer\":\"n1\","
	                             "\"verb\":18,\"verb_name\":\"hold\","
	                             "\"stage\":\"detached\""));
	/* The checker refuses what is not JSON. */
	assert_false(json_is_valid(text, evbuffer_get_length(out) - 3));
	assert_false(json_is_valid("{\"a\":1,}", 8));
	evbuffer_free(out);
	/* From a loop thread: the waiting form refuses, the other calls
	 * back. */
	a.svc = cl.svc[1];
	assert_int_equal(weft_loop_post(weft_loop_group_at(cl.groups[1], 0),
	                                ask_on_loop, &a),
	                 0);
	assert_true(test_wait(async_done, &a, WAIT_MS));
	assert_int_equal(a.busy, WEFT_EBUSY);
	assert_int_equal(atomic_load(&a.status), 0);
	assert_true(atomic_load(&a.took));
	weft_msvc_respond(atomic_exchange(&cl.held[0], NULL), "y", 1);
	assert_true(test_wait(tally_complete, &t, WAIT_MS));
	cluster_stop(&cl);
	/* Stopped: refused. */
	assert_int_equal(weft_msvc_snapshot_async(NULL, on_async, &a),
	                 WEFT_EINVAL);
}

/* ---- Slow calls --------------------------------------------------------- */

static _Atomic int slow_lines;
static char slow_line[512];

static void
count_slow(enum weft_log_level level, const char *line, void *arg)
{
	(void)arg;
	if (level == WEFT_LOG_WARN && strstr(line, "slow call to n2") != NULL &&
	    atomic_fetch_add(&slow_lines, 1) == 0)
		snprintf(slow_line, sizeof(slow_line), "%s", line);
}

/* Far above what an echo takes on a loaded machine under a sanitizer:
 * the one line an interval allows must be the held calls', not the echo's
 * (at 20 ms, a slow echo once took it). */
static void
tune_slow(weft_msvc_limits *l)
{
	l->slow_call_ms = 200;
}

static void
test_slow_calls_are_logged_once_per_interval(void **state)
{
	struct tally t = {.want = 4};
	int i, three = 3;

	(void)state;
	memset(&cl, 0, sizeof(cl));
	/* The sink is set while no loop runs (weft_log_set_sink). */
	weft_log_set_sink(count_slow, NULL);
	assert_int_equal(cluster_start(&cl, 2, tune_slow), 0);
	/* A fast call is not slow. */
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_ECHO, "x", 1, NULL, tally_cb,
	                                   &t),
	                 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(
		    weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
		                      VERB_HOLD, "x", 1, NULL, tally_cb, &t),
		    0);
	assert_true(test_wait(count_reached, &three, WAIT_MS));
	pause_ms(250);
	for (i = 0; i < 3; i++)
		weft_msvc_respond(atomic_exchange(&cl.held[i], NULL), "y", 1);
	assert_true(test_wait(tally_complete, &t, WAIT_MS));
	cluster_stop(&cl);
	weft_log_set_sink(NULL, NULL);
	/* Three slow calls within the interval: one line. */
	assert_int_equal(atomic_load(&slow_lines), 1);
	assert_non_null(strstr(slow_line, "verb 18 (hold) took "));
	assert_non_null(strstr(slow_line, "(slow_call 200 ms)"));
}

/* ---- Under traffic ------------------------------------------------------ */

struct taker {
	weft_msvc *svc;
	_Atomic bool stop;
	int taken, failed;
};

static void *
take_many(void *arg)
{
	struct taker *tk = arg;
	weft_msvc_snapshot *s;

	while (!atomic_load(&tk->stop)) {
		if (weft_msvc_snapshot_take(tk->svc, WAIT_MS, &s) != 0) {
			tk->failed++;
			continue;
		}
		tk->taken++;
		weft_msvc_snapshot_free(s);
	}
	return NULL;
}

static void
test_snapshots_while_the_loops_carry_traffic(void **state)
{
	struct cluster_opts o = {.loops = 2};
	struct taker tk[2] = {{0}, {0}};
	pthread_t th[2];
	struct tally t = {.want = 4000};
	int i;

	(void)state;
	memset(&cl, 0, sizeof(cl));
	assert_int_equal(cluster_start_with(&cl, 2, &o), 0);
	for (i = 0; i < 2; i++) {
		tk[i].svc = cl.svc[i];
		assert_int_equal(
		    pthread_create(&th[i], NULL, take_many, &tk[i]), 0);
	}
	for (i = 0; i < t.want; i++)
		assert_int_equal(
		    weft_msvc_request(cl.svc[i % 2],
		                      cluster_peer(&cl, i % 2, 1 - i % 2),
		                      i % 3 ? VERB_ECHO : VERB_ECHO_BLOCK,
		                      "abc", 3, NULL, tally_cb, &t),
		    0);
	assert_true(test_wait(tally_complete, &t, WAIT_MS * 3));
	assert_int_equal(atomic_load(&t.ok), t.want);
	for (i = 0; i < 2; i++) {
		atomic_store(&tk[i].stop, true);
		pthread_join(th[i], NULL);
		assert_true(tk[i].taken > 0);
		assert_int_equal(tk[i].failed, 0);
	}
	cluster_stop(&cl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
	        test_connections_of_a_cluster_by_class_and_direction),
	    cmocka_unit_test(
	        test_a_held_request_is_pending_then_detached_then_gone),
	    cmocka_unit_test(test_a_blocking_handler_shows_in_its_worker),
	    cmocka_unit_test(test_json_and_a_snapshot_from_a_loop),
	    cmocka_unit_test(test_slow_calls_are_logged_once_per_interval),
	    cmocka_unit_test(test_snapshots_while_the_loops_carry_traffic),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
