/* SPDX-License-Identifier: MIT */
/*
 * test_verbs.c: per-verb lanes and caps. A verb registered with
 * WEFT_MSVC_URGENT_LANE overtakes a small lane holding tens of megabytes;
 * a verb with weft_msvc_verb_limit refuses requests past its cap at once,
 * inline and on the worker pool, while the other verbs keep answering,
 * and takes new ones again as its requests are answered.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <weft/core.h>
#include <weft/messaging.h>

#include "cluster.h"
#include "support/echo_verb.h"

#define WAIT_MS 20000
/* The small lane's backlog: 40,000 messages of 1 KiB. */
#define FLOOD 40000
#define FLOOD_BYTES 1024

static struct cluster cl;
static _Atomic int order;

/* One request's end: its status, its place among the ends, and how many
 * of the flood n2 had handled by then. */
struct stamp {
	_Atomic int at;
	_Atomic int status;
	_Atomic uint64_t flood_seen;
};

static void
on_stamp(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct stamp *s = arg;

	(void)svc;
	(void)data;
	(void)len;
	atomic_store(&s->status, status);
	atomic_store(&s->flood_seen, atomic_load(&cl.sink_count[1]));
	atomic_store(&s->at, atomic_fetch_add(&order, 1) + 1);
	test_poke();
}

static bool
both_ended(void *arg)
{
	struct stamp *s = arg;

	return atomic_load(&s[0].at) != 0 && atomic_load(&s[1].at) != 0;
}

static void
tune(weft_msvc_limits *l)
{
	l->outbound_queue_bytes = 256u << 20;
	l->inbound_inflight_bytes = 256u << 20;
	l->request_timeout_ms = WAIT_MS;
}

static weft_msvc_verb_stats
verb_stats(int node, uint32_t verb)
{
	weft_msvc_verb_stats st;

	weft_msvc_verb_get_stats(cl.svc[node], verb, &st);
	return st;
}

/* Waits until n2's stats of verb hold at least over refused and in
 * progress. */
struct verb_wait {
	uint32_t verb;
	uint64_t over_limit, in_progress;
};

static bool
verb_reached(void *arg)
{
	const struct verb_wait *w = arg;
	weft_msvc_verb_stats st = verb_stats(1, w->verb);

	return st.over_limit >= w->over_limit &&
	       st.in_progress == w->in_progress;
}

static bool
slow_running(void *arg)
{
	return atomic_load(&cl.slow_running) >= *(int *)arg;
}

static bool
held(void *arg)
{
	return atomic_load(&cl.held_count) >= *(int *)arg;
}

/* ---- The urgent lane ---------------------------------------------------- */

/* The flood and the two requests, all from n1's loop in one task: the
 * flood is queued on the small lane before a byte of it is written. */
struct flood {
	weft_msvc_peer *peer;
	struct stamp *s;
	_Atomic int rv;
	_Atomic bool done;
};

static void
flood_task(weft_loop *loop, int status, void *arg)
{
	static uint8_t payload[FLOOD_BYTES];
	struct flood *f = arg;
	int rv = status;
	uint64_t i;

	(void)loop;
	for (i = 0; i < FLOOD && rv == 0; i++) {
		memcpy(payload, &i, sizeof(i));
		rv = weft_msvc_send(cl.svc[0], f->peer, VERB_SINK, payload,
		                    sizeof(payload), NULL);
	}
	if (rv == 0)
		rv = weft_msvc_request(cl.svc[0], f->peer, VERB_ECHO, "e", 1,
		                       NULL, on_stamp, &f->s[1]);
	if (rv == 0)
		rv = weft_msvc_request(cl.svc[0], f->peer, VERB_URGENT, "u", 1,
		                       NULL, on_stamp, &f->s[0]);
	atomic_store(&f->rv, rv);
	atomic_store(&f->done, true);
	test_poke();
}

/*
 * n1 queues 40 MB of one-way messages on its small lane to n2, then asks
 * an ordinary echo and, last, an echo on the urgent lane. The urgent
 * answer comes first: the ordinary echo waits its turn behind the flood.
 */
static void
test_an_urgent_verb_overtakes_a_flooded_small_lane(void **state)
{
	struct stamp s[2] = {{0}, {0}};
	struct flood f = {.s = s};

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, tune), 0);
	f.peer = cluster_peer(&cl, 0, 1);
	/* The connections are up before the flood, so that it queues. */
	assert_int_equal(
	    weft_msvc_call(cl.svc[0], f.peer, VERB_ECHO, "x", 1, NULL, NULL),
	    0);
	assert_int_equal(
	    weft_msvc_call(cl.svc[0], f.peer, VERB_URGENT, "x", 1, NULL, NULL),
	    0);
	assert_int_equal(
	    weft_loop_post(weft_loop_group_at(cl.groups[0], 0), flood_task, &f),
	    0);
	assert_true(test_wait(both_ended, s, WAIT_MS));
	assert_int_equal(atomic_load(&f.rv), 0);
	assert_int_equal(atomic_load(&s[0].status), 0);
	assert_int_equal(atomic_load(&s[1].status), 0);
	/* Sent last, the urgent echo ended first, before the flood had all
	 * been handled (on the small lane it would have come after the
	 * ordinary echo, after the flood). */
	assert_true(atomic_load(&s[0].at) < atomic_load(&s[1].at));
	/* The ordinary echo came after the whole flood, in order. */
	assert_int_equal(atomic_load(&s[1].flood_seen), FLOOD);
	assert_int_equal(atomic_load(&cl.sink_disorder[1]), 0);
	cluster_stop(&cl);
}

static void
tune_budget(weft_msvc_limits *l)
{
	l->inbound_inflight_bytes = 512u << 10;
	l->heartbeat_interval_ms = 100;
	l->heartbeat_misses = 3;
	l->request_timeout_ms = WAIT_MS;
}

static bool
peer_down(void *arg)
{
	return weft_msvc_peer_is_down(arg);
}

/* n1 fills n2's inbound budget with requests n2 holds: n2 stops reading
 * n1's small and large lanes, but not the urgent one, so an urgent echo
 * is answered while an ordinary one waits, and neither node takes the
 * other for down: the heartbeats go on. */
static void
test_a_full_inbound_budget_leaves_the_urgent_lane_read(void **state)
{
	static uint8_t big[32 << 10];
	struct tally hold = {.want = 0}, echo = {.want = 1},
	             urgent = {.want = 1};
	weft_msvc_peer *p;
	int i, want = 24;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, tune_budget), 0);
	p = cluster_peer(&cl, 0, 1);
	assert_int_equal(
	    weft_msvc_call(cl.svc[0], p, VERB_ECHO, "x", 1, NULL, NULL), 0);
	for (i = 0; i < want; i++)
		assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_HOLD, big,
		                                   sizeof(big), NULL, tally_cb,
		                                   &hold),
		                 0);
	/* 19 of 32 KiB are 608 KiB: the budget and a quarter more (640 KiB),
	 * less one request. Whole frames read in one go take it past that,
	 * and reading pauses; one that comes in pieces waits for room. */
	want = 19;
	assert_true(test_wait(held, &want, WAIT_MS));
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_ECHO, "e", 1,
	                                   NULL, tally_cb, &echo),
	                 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_URGENT, "u", 1,
	                                   NULL, tally_cb, &urgent),
	                 0);
	assert_true(test_wait(tally_complete, &urgent, WAIT_MS));
	assert_int_equal(atomic_load(&urgent.ok), 1);
	/* A second: ten heartbeats, none missed. */
	assert_false(test_wait(peer_down, p, 1000));
	assert_false(weft_msvc_peer_is_down(cluster_peer(&cl, 1, 0)));
	assert_int_equal(atomic_load(&echo.done), 0);
	for (i = 0; i < 64; i++) {
		weft_msvc_msg *m = atomic_exchange(&cl.held[i], NULL);

		if (m != NULL)
			weft_msvc_respond(m, NULL, 0);
	}
	assert_true(test_wait(tally_complete, &echo, WAIT_MS));
	assert_int_equal(atomic_load(&echo.ok), 1);
	cluster_stop(&cl);
}

/* Unknown flags are refused; a cap needs a registered verb and a service
 * not yet started. */
static void
test_register_and_limit_refuse_what_they_cannot_do(void **state)
{
	weft_loop_group *group;
	weft_msvc_config *cfg;
	weft_msvc *svc;

	(void)state;
	assert_int_equal(weft_loop_group_new(1, &group), 0);
	assert_int_equal(weft_msvc_config_new("verbs", &cfg), 0);
	assert_int_equal(weft_msvc_config_add_node(cfg, "n1", "127.0.0.1", 0),
	                 0);
	assert_int_equal(weft_msvc_new(group, cfg, "n1", NULL, &svc), 0);
	assert_int_equal(
	    weft_msvc_register(svc, 30, "x", weft_test_on_echo, NULL, 8),
	    WEFT_EINVAL);
	assert_int_equal(weft_msvc_verb_limit(svc, 30, 1), WEFT_EINVAL);
	assert_int_equal(weft_msvc_register(svc, 30, "x", weft_test_on_echo,
	                                    NULL, WEFT_MSVC_URGENT_LANE),
	                 0);
	assert_int_equal(weft_msvc_verb_limit(svc, 30, 1), 0);
	assert_int_equal(weft_msvc_verb_limit(svc, 8, 1), WEFT_EINVAL);
	assert_int_equal(weft_msvc_start(svc), 0);
	assert_int_equal(weft_msvc_verb_limit(svc, 30, 2), WEFT_EBUSY);
	weft_msvc_free(svc);
	weft_msvc_config_free(cfg);
	weft_loop_group_free(group);
}

/* ---- Caps ---------------------------------------------------------------- */

/* Ten requests of an inline verb capped at three, whose handler holds
 * them: three held, seven refused at once, an echo answered meanwhile;
 * once the held ones are answered, the verb takes new ones. */
static void
test_a_capped_verb_refuses_past_its_cap(void **state)
{
	struct tally capped = {.want = 10 - CAPPED_MAX}, echo = {.want = 1};
	struct tally later = {.want = 1};
	struct verb_wait w = {VERB_HOLD_CAPPED, 10 - CAPPED_MAX, CAPPED_MAX};
	weft_msvc_peer *p;
	int i, want = CAPPED_MAX;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, tune), 0);
	p = cluster_peer(&cl, 0, 1);
	for (i = 0; i < 10; i++)
		assert_int_equal(weft_msvc_request(cl.svc[0], p,
		                                   VERB_HOLD_CAPPED, "h", 1,
		                                   NULL, tally_cb, &capped),
		                 0);
	assert_true(test_wait(tally_complete, &capped, WAIT_MS));
	assert_int_equal(atomic_load(&capped.status_counts[-WEFT_EOVERLOAD]),
	                 10 - CAPPED_MAX);
	assert_true(test_wait(held, &want, WAIT_MS));
	assert_true(test_wait(verb_reached, &w, WAIT_MS));
	assert_int_equal(atomic_load(&cl.held_count), CAPPED_MAX);
	/* Another verb is not held up by it. */
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_ECHO, "e", 1,
	                                   NULL, tally_cb, &echo),
	                 0);
	assert_true(test_wait(tally_complete, &echo, WAIT_MS));
	assert_int_equal(atomic_load(&echo.ok), 1);
	/* Answering the held ones frees their slots. */
	capped.want = 10;
	for (i = 0; i < CAPPED_MAX; i++)
		assert_int_equal(weft_msvc_respond(
		                     atomic_exchange(&cl.held[i], NULL), "", 0),
		                 0);
	assert_true(test_wait(tally_complete, &capped, WAIT_MS));
	assert_int_equal(atomic_load(&capped.ok), CAPPED_MAX);
	w.in_progress = 0;
	assert_true(test_wait(verb_reached, &w, WAIT_MS));
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_HOLD_CAPPED, "h",
	                                   1, NULL, tally_cb, &later),
	                 0);
	want = CAPPED_MAX + 1;
	assert_true(test_wait(held, &want, WAIT_MS));
	assert_int_equal(verb_stats(1, VERB_HOLD_CAPPED).over_limit,
	                 10 - CAPPED_MAX);
	cluster_stop(&cl);
	assert_true(test_wait(tally_complete, &later, WAIT_MS));
}

/* The same on the worker pool (one worker): one runs, two wait for the
 * worker and count as in progress, two are refused. */
static void
test_a_capped_blocking_verb_counts_what_waits_for_a_worker(void **state)
{
	struct tally slow = {.want = 2}, after = {.want = 1};
	struct verb_wait w = {VERB_SLOW_CAPPED, 2, CAPPED_MAX};
	weft_msvc_peer *p;
	int i, one = 1;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, tune), 0);
	p = cluster_peer(&cl, 0, 1);
	for (i = 0; i < CAPPED_MAX + 2; i++)
		assert_int_equal(weft_msvc_request(cl.svc[0], p,
		                                   VERB_SLOW_CAPPED, "s", 1,
		                                   NULL, tally_cb, &slow),
		                 0);
	assert_true(test_wait(tally_complete, &slow, WAIT_MS));
	assert_int_equal(atomic_load(&slow.status_counts[-WEFT_EOVERLOAD]), 2);
	assert_true(test_wait(slow_running, &one, WAIT_MS));
	assert_true(test_wait(verb_reached, &w, WAIT_MS));
	atomic_store(&cl.slow_release, true);
	slow.want = CAPPED_MAX + 2;
	assert_true(test_wait(tally_complete, &slow, WAIT_MS));
	assert_int_equal(atomic_load(&slow.ok), CAPPED_MAX);
	w.in_progress = 0;
	assert_true(test_wait(verb_reached, &w, WAIT_MS));
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_SLOW_CAPPED, "s",
	                                   1, NULL, tally_cb, &after),
	                 0);
	assert_true(test_wait(tally_complete, &after, WAIT_MS));
	assert_int_equal(atomic_load(&after.ok), 1);
	cluster_stop(&cl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
	        test_an_urgent_verb_overtakes_a_flooded_small_lane),
	    cmocka_unit_test(
	        test_a_full_inbound_budget_leaves_the_urgent_lane_read),
	    cmocka_unit_test(
	        test_register_and_limit_refuse_what_they_cannot_do),
	    cmocka_unit_test(test_a_capped_verb_refuses_past_its_cap),
	    cmocka_unit_test(
	        test_a_capped_blocking_verb_counts_what_waits_for_a_worker),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
