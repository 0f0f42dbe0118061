/* SPDX-License-Identifier: MIT */
/*
 * test_lifecycle.c: a peer stopped in the middle of a load and started
 * again (every callback runs exactly once, traffic resumes), graceful
 * shutdown with messages in flight, a stop that returns as soon as what
 * it waits for is done, and a stop begun without waiting, from the
 * service's own loops and callbacks.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster.h"

static struct cluster cl;

/* How long a load may take to show progress: a bound for a loaded
 * machine under a sanitizer, not a speed (a wait ends when it holds). */
#define PROGRESS_MS 30000

/* A closed-loop load from n1 to n2: each answer sends the next request. */
struct load {
	_Atomic bool stop;
	_Atomic uint64_t issued, completed, ok, failed, refused;
	_Atomic uint64_t ok_since_mark;
	_Atomic int by_status[32];
	weft_msvc_call_opts opts;
	uint32_t verb;
};

static struct load load;

/* One per request: a double completion would be a use after free. */
struct token {
	uint32_t magic;
};

static void on_load_reply(weft_msvc *svc, int status, const void *data,
                          size_t len, void *arg);

static void
issue(weft_msvc *svc)
{
	struct token *t = malloc(sizeof(*t));
	int rv;

	t->magic = 0x600d;
	atomic_fetch_add(&load.issued, 1);
	rv = weft_msvc_request(svc, weft_msvc_peer_find(svc, "n2"), load.verb,
	                       "ping", 4, &load.opts, on_load_reply, t);
	if (rv != 0) {
		/* Refused at once: the callback will never run. */
		atomic_fetch_sub(&load.issued, 1);
		atomic_fetch_add(&load.refused, 1);
		free(t);
	}
}

static void
on_load_reply(weft_msvc *svc, int status, const void *data, size_t len,
              void *arg)
{
	struct token *t = arg;

	(void)data;
	(void)len;
	assert_int_equal(t->magic, 0x600d);
	t->magic = 0;
	free(t);
	if (status == 0) {
		atomic_fetch_add(&load.ok, 1);
		atomic_fetch_add(&load.ok_since_mark, 1);
	} else {
		atomic_fetch_add(&load.failed, 1);
		if (-status < 32)
			atomic_fetch_add(&load.by_status[-status], 1);
	}
	atomic_fetch_add(&load.completed, 1);
	if (!atomic_load(&load.stop))
		issue(svc);
	test_poke();
}

static bool
ok_since_mark(void *arg)
{
	return atomic_load(&load.ok_since_mark) >= (uint64_t)(uintptr_t)arg;
}

static bool
some_failed(void *arg)
{
	(void)arg;
	return atomic_load(&load.by_status[-WEFT_EPEERDOWN]) > 0;
}

static bool
all_completed(void *arg)
{
	(void)arg;
	return atomic_load(&load.completed) == atomic_load(&load.issued);
}

static void
restart_tune(weft_msvc_limits *l)
{
	l->reconnect_min_ms = 10;
	l->reconnect_max_ms = 50;
	l->heartbeat_interval_ms = 100;
	l->request_timeout_ms = 300;
}

static void
test_peer_restarted_mid_load(void **state)
{
	int i;

	(void)state;
	memset(&load, 0, sizeof(load));
	load.verb = VERB_ECHO;
	assert_int_equal(cluster_start(&cl, 2, restart_tune), 0);
	for (i = 0; i < 32; i++)
		issue(cl.svc[0]);
	assert_true(test_wait(ok_since_mark, (void *)2000, 5000));

	/* Stop n2 in the middle of it all. */
	cluster_stop_node(&cl, 1, 0);
	atomic_store(&load.ok_since_mark, 0);
	/* Requests in flight fail at once with "peer down". */
	assert_true(test_wait(some_failed, NULL, 5000));
	assert_int_equal(cluster_start_node(&cl, 1), 0);
	assert_true(test_wait(ok_since_mark, (void *)2000, 5000));

	atomic_store(&load.stop, true);
	assert_true(test_wait(all_completed, NULL, 5000));
	print_message("restart: %llu ok, %llu failed (peer down %d, expired "
	              "%d, timed out %d), %llu refused at once\n",
	              (unsigned long long)atomic_load(&load.ok),
	              (unsigned long long)atomic_load(&load.failed),
	              atomic_load(&load.by_status[-WEFT_EPEERDOWN]),
	              atomic_load(&load.by_status[-WEFT_EEXPIRED]),
	              atomic_load(&load.by_status[-WEFT_ETIMEDOUT]),
	              (unsigned long long)atomic_load(&load.refused));
	assert_true(atomic_load(&load.failed) > 0);
	assert_int_equal(atomic_load(&load.completed),
	                 atomic_load(&load.issued));
	cluster_stop(&cl);
}

static void
test_graceful_stop_with_requests_in_flight(void **state)
{
	weft_msvc_stats st;
	int i;

	(void)state;
	memset(&load, 0, sizeof(load));
	load.verb = VERB_ECHO_BLOCK;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	for (i = 0; i < 200; i++)
		issue(cl.svc[0]);
	for (i = 0; i < 200; i++)
		weft_msvc_send(cl.svc[0], cluster_peer(&cl, 0, 1), VERB_SINK,
		               "x", 1, NULL);
	/* Stop the requester: every callback runs before stop returns. */
	weft_msvc_stop(cl.svc[0], 1000);
	atomic_store(&load.stop, true);
	assert_int_equal(atomic_load(&load.completed),
	                 atomic_load(&load.issued));
	weft_msvc_get_stats(cl.svc[0], &st);
	assert_int_equal(st.pending_requests, 0);
	print_message("graceful stop: %llu answered, %llu failed\n",
	              (unsigned long long)atomic_load(&load.ok),
	              (unsigned long long)atomic_load(&load.failed));
	/* A stopped service refuses new work at once. */
	assert_int_equal(weft_msvc_send(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                VERB_SINK, "x", 1, NULL),
	                 WEFT_ESHUTDOWN);
	cluster_stop(&cl);
}

static bool
n2_busy(void *arg)
{
	weft_msvc_verb_stats vs;

	(void)arg;
	weft_msvc_verb_get_stats(cl.svc[1], VERB_ECHO_BLOCK, &vs);
	return vs.received >= 50;
}

static void
test_responder_stops_with_requests_in_flight(void **state)
{
	int i;

	(void)state;
	memset(&load, 0, sizeof(load));
	load.verb = VERB_ECHO_BLOCK;
	load.opts.timeout_ms = 2000;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	for (i = 0; i < 200; i++)
		issue(cl.svc[0]);
	atomic_store(&load.stop, true);
	/* Stop n2 once it has work queued for its worker. */
	assert_true(test_wait(n2_busy, NULL, 5000));
	cluster_stop_node(&cl, 1, 2000);
	assert_true(test_wait(all_completed, NULL, 5000));
	assert_true(atomic_load(&load.ok) > 0);
	print_message("responder stopped: %llu answered, %llu failed "
	              "(shut down %d, peer down %d)\n",
	              (unsigned long long)atomic_load(&load.ok),
	              (unsigned long long)atomic_load(&load.failed),
	              atomic_load(&load.by_status[-WEFT_ESHUTDOWN]),
	              atomic_load(&load.by_status[-WEFT_EPEERDOWN]));
	cluster_stop(&cl);
}

/* Requests to n2 from a thread of the test's own, as fast as n1 takes
 * them, until n1 says it is shutting down (or a bound is reached). */
static void *
requester_main(void *arg)
{
	struct token *t;
	int i, rv;

	(void)arg;
	for (i = 0; i < 1000000 && !atomic_load(&load.stop); i++) {
		t = malloc(sizeof(*t));
		t->magic = 0x600d;
		atomic_fetch_add(&load.issued, 1);
		rv = weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
		                       load.verb, "ping", 4, &load.opts,
		                       on_load_reply, t);
		if (rv == 0)
			continue;
		atomic_fetch_sub(&load.issued, 1);
		atomic_fetch_add(&load.refused, 1);
		free(t);
		if (rv == WEFT_ESHUTDOWN)
			break;
		sched_yield(); /* too much pending: let the loops catch up */
	}
	return NULL;
}

/* n1's loop group shuts down under its running service, with requests in
 * flight from n1's loops (each answer sends the next) and from another
 * thread, and no weft_msvc_stop first: the service stops from the loops'
 * shutdown hooks, and by the time the group's threads have ended every
 * request accepted has had its callback, exactly once. */
static void
test_group_shutdown_stops_the_service_with_requests_in_flight(void **state)
{
	pthread_t t;
	int i;

	(void)state;
	memset(&load, 0, sizeof(load));
	load.verb = VERB_ECHO;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	for (i = 0; i < 64; i++)
		issue(cl.svc[0]);
	assert_true(test_wait(ok_since_mark, (void *)500, PROGRESS_MS));
	assert_int_equal(pthread_create(&t, NULL, requester_main, NULL), 0);
	assert_true(test_wait(ok_since_mark, (void *)1000, PROGRESS_MS));
	weft_loop_group_shutdown(cl.groups[0], 1000);
	pthread_join(t, NULL);
	assert_int_equal(atomic_load(&load.completed),
	                 atomic_load(&load.issued));
	assert_true(atomic_load(&load.by_status[-WEFT_ESHUTDOWN]) > 0);
	print_message("group shutdown: %llu answered, %llu failed (shut down "
	              "%d), %llu refused at once\n",
	              (unsigned long long)atomic_load(&load.ok),
	              (unsigned long long)atomic_load(&load.failed),
	              atomic_load(&load.by_status[-WEFT_ESHUTDOWN]),
	              (unsigned long long)atomic_load(&load.refused));
	/* The service refuses new work at once. */
	assert_int_equal(weft_msvc_send(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                VERB_SINK, "x", 1, NULL),
	                 WEFT_ESHUTDOWN);
	atomic_store(&load.stop, true);
	cluster_stop(&cl);
}

/* ---- Stop is woken by what it waits for -------------------------------- */

/* A stop that is woken when what it waits for is done returns within
 * milliseconds; this bound, far above that for a noisy machine, is below
 * every deadline a stop that is not woken would sleep until. */
#define STOP_WOKEN_MS 1000

/* A stop run on a thread of its own, so the test can watch it. */
struct stopper {
	weft_msvc *svc;
	uint64_t timeout_ms;
	uint64_t took_ms;
	uint64_t returned_ns;
	_Atomic bool returned;
	pthread_t thread;
};

static uint64_t
timed_stop(weft_msvc *svc, uint64_t timeout_ms)
{
	uint64_t start = weft_now_ns();

	weft_msvc_stop(svc, timeout_ms);
	return (weft_now_ns() - start) / 1000000;
}

static void *
stopper_main(void *arg)
{
	struct stopper *s = arg;

	s->took_ms = timed_stop(s->svc, s->timeout_ms);
	s->returned_ns = weft_now_ns();
	atomic_store(&s->returned, true);
	test_poke();
	return NULL;
}

static bool
stopper_returned(void *arg)
{
	struct stopper *s = arg;

	return atomic_load(&s->returned);
}

static bool
one_held(void *arg)
{
	(void)arg;
	return atomic_load(&cl.held_count) >= 1;
}

/* n1 asks n2 something n2 keeps without answering (the hold verb), with
 * a timeout longer than any stop here: only an answer or the stop ends
 * it. */
static void
request_held(struct tally *t)
{
	weft_msvc_call_opts opts = {.timeout_ms = 60000};

	atomic_store(&cl.held_count, 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_HOLD, "q", 1, &opts, tally_cb,
	                                   t),
	                 0);
	assert_true(test_wait(one_held, NULL, 5000));
}

static void
test_stop_of_idle_cluster_returns_once_quiet(void **state)
{
	struct tally t = {.want = 1};
	uint64_t took0, took1;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	/* A round trip, so that both nodes have connections to close. */
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_ECHO, "hi", 2, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(atomic_load(&t.ok), 1);
	/* Nothing is in flight: each stop is woken as soon as its
	 * connections have closed, and takes milliseconds. One that is not
	 * woken sleeps until a deadline: the 10 s given for what is in
	 * flight, or the 1.5 s (linger time and a second) for connections
	 * to close; the bound is below both. */
	took0 = timed_stop(cl.svc[0], 10000);
	took1 = timed_stop(cl.svc[1], 10000);
	print_message("idle stop: %llu ms, then %llu ms\n",
	              (unsigned long long)took0, (unsigned long long)took1);
	assert_true(took0 < STOP_WOKEN_MS);
	assert_true(took1 < STOP_WOKEN_MS);
	cluster_stop(&cl);
}

/* A heartbeat in flight is the node's own: nobody waits for its answer,
 * so a stop does not wait for it either. The one a node sends to a peer
 * that has just stopped is never answered and held the stop for its
 * whole timeout (the heartbeat interval, 1 s): the idle stop above took
 * 1 s about one run in ten. Twenty rounds of it here. */
static void
test_stop_does_not_wait_for_heartbeats(void **state)
{
	uint64_t took, worst = 0;
	int round;

	(void)state;
	for (round = 0; round < 20; round++) {
		struct tally t = {.want = 1};

		assert_int_equal(cluster_start(&cl, 2, NULL), 0);
		assert_int_equal(
		    weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
		                      VERB_ECHO, "hi", 2, NULL, tally_cb, &t),
		    0);
		assert_true(test_wait(tally_complete, &t, 5000));
		timed_stop(cl.svc[0], 10000);
		took = timed_stop(cl.svc[1], 10000);
		worst = took > worst ? took : worst;
		cluster_stop(&cl);
	}
	print_message("20 idle stops after a peer's: the slowest %llu ms\n",
	              (unsigned long long)worst);
	assert_true(worst < STOP_WOKEN_MS);
}

static void
test_stop_waits_for_a_request_pending_at_the_peer(void **state)
{
	struct stopper s = {.timeout_ms = 10000};
	struct tally t = {.want = 1};
	weft_msvc_msg *msg;
	uint64_t answered_ns, after_ms;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	request_held(&t);
	s.svc = cl.svc[0];
	assert_int_equal(pthread_create(&s.thread, NULL, stopper_main, &s), 0);
	/* The request is not answered: stop keeps waiting for it. */
	assert_false(test_wait(stopper_returned, &s, 300));
	assert_int_equal(atomic_load(&t.done), 0);
	/* Answered: the request completes, and stop returns with it. */
	msg = atomic_exchange(&cl.held[0], NULL);
	assert_non_null(msg);
	answered_ns = weft_now_ns();
	assert_int_equal(weft_msvc_respond(msg, "a", 1), 0);
	assert_true(test_wait(stopper_returned, &s, 5000));
	assert_int_equal(pthread_join(s.thread, NULL), 0);
	after_ms = (s.returned_ns - answered_ns) / 1000000;
	print_message("stop: %llu ms, %llu ms of them after the answer\n",
	              (unsigned long long)s.took_ms,
	              (unsigned long long)after_ms);
	assert_true(after_ms < STOP_WOKEN_MS);
	assert_int_equal(atomic_load(&t.done), 1);
	assert_int_equal(atomic_load(&t.ok), 1);
	cluster_stop(&cl);
}

static void
test_stop_ends_an_unanswered_request_at_its_deadline(void **state)
{
	struct tally t = {.want = 1};
	uint64_t took;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	request_held(&t);
	took = timed_stop(cl.svc[0], 300);
	assert_true(took >= 300);
	assert_int_equal(atomic_load(&t.done), 1);
	assert_int_equal(atomic_load(&t.status_counts[-WEFT_ESHUTDOWN]), 1);
	cluster_stop(&cl); /* answers the held request, too late */
}

/* ---- A stop begun without waiting -------------------------------------- */

/* What weft_msvc_stop_async's callback saw. */
struct async_stop {
	_Atomic int calls;
	_Atomic bool on_first_loop;
	uint64_t completed_at_cb, issued_at_cb;
	weft_loop *first_loop;
	int begun; /* weft_msvc_stop_async's return */
};

static struct async_stop astop;

static void
on_stopped(weft_msvc *svc, void *arg)
{
	struct async_stop *a = arg;
	weft_msvc_stats st;

	weft_msvc_get_stats(svc, &st);
	assert_int_equal(st.pending_requests, 0);
	astop.completed_at_cb = atomic_load(&load.completed);
	astop.issued_at_cb = atomic_load(&load.issued);
	atomic_store(&a->on_first_loop, weft_loop_in_thread(a->first_loop));
	atomic_fetch_add(&a->calls, 1);
	test_poke();
}

static bool
async_stopped(void *arg)
{
	(void)arg;
	return atomic_load(&astop.calls) > 0;
}

/* Begun on a loop of the service: with a synchronous stop this thread
 * would wait for tasks that it alone can run. */
static void
stop_from_loop(weft_loop *loop, int status, void *arg)
{
	(void)loop;
	(void)status;
	astop.begun = weft_msvc_stop_async(arg, 1000, on_stopped, &astop);
}

/* n1's stop is begun on one of n1's own loops while requests are in
 * flight from n1's loops (each answer sends the next) and from another
 * thread: the call returns at once, every request accepted has had its
 * callback, exactly once, by the time the stop's callback runs (once, on
 * n1's first loop), and the service then refuses work and is freed. */
static void
test_stop_begun_on_a_loop_with_requests_in_flight(void **state)
{
	weft_loop *loop;
	pthread_t t;
	int i;

	(void)state;
	memset(&load, 0, sizeof(load));
	memset(&astop, 0, sizeof(astop));
	load.verb = VERB_ECHO_BLOCK;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	astop.first_loop = weft_loop_group_at(cl.groups[0], 0);
	for (i = 0; i < 64; i++)
		issue(cl.svc[0]);
	assert_true(test_wait(ok_since_mark, (void *)500, PROGRESS_MS));
	assert_int_equal(pthread_create(&t, NULL, requester_main, NULL), 0);
	assert_true(test_wait(ok_since_mark, (void *)1000, PROGRESS_MS));
	/* The last loop: not the one the callback runs on. */
	loop = weft_loop_group_at(cl.groups[0],
	                          weft_loop_group_size(cl.groups[0]) - 1);
	assert_int_equal(weft_loop_post(loop, stop_from_loop, cl.svc[0]), 0);
	assert_true(test_wait(async_stopped, NULL, 10000));
	pthread_join(t, NULL);
	atomic_store(&load.stop, true);
	assert_int_equal(astop.begun, 0);
	assert_int_equal(atomic_load(&astop.calls), 1);
	assert_true(atomic_load(&astop.on_first_loop));
	assert_int_equal(astop.completed_at_cb, astop.issued_at_cb);
	assert_int_equal(atomic_load(&load.completed),
	                 atomic_load(&load.issued));
	print_message("stop begun on a loop: %llu answered, %llu failed (shut "
	              "down %d), %llu refused at once\n",
	              (unsigned long long)atomic_load(&load.ok),
	              (unsigned long long)atomic_load(&load.failed),
	              atomic_load(&load.by_status[-WEFT_ESHUTDOWN]),
	              (unsigned long long)atomic_load(&load.refused));
	/* One stop: a second is refused, a synchronous one waits for the
	 * first (it has ended) and returns. */
	assert_int_equal(weft_msvc_stop_async(cl.svc[0], 0, on_stopped, &astop),
	                 WEFT_EBUSY);
	weft_msvc_stop(cl.svc[0], 0);
	assert_int_equal(atomic_load(&astop.calls), 1);
	assert_int_equal(weft_msvc_send(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                VERB_SINK, "x", 1, NULL),
	                 WEFT_ESHUTDOWN);
	cluster_stop(&cl);
}

/* A stop begun from a request's own callback, on the loop that ran it,
 * with another request held by the peer: the held one ends with
 * WEFT_ESHUTDOWN at the stop's deadline, before the stop's callback. */
static void
stop_in_reply(weft_msvc *svc, int status, const void *data, size_t len,
              void *arg)
{
	(void)status;
	(void)data;
	(void)len;
	(void)arg;
	astop.begun = weft_msvc_stop_async(svc, 200, on_stopped, &astop);
}

static void
test_stop_begun_in_a_callback_waits_for_its_deadline(void **state)
{
	struct tally t = {.want = 1};

	(void)state;
	memset(&load, 0, sizeof(load));
	memset(&astop, 0, sizeof(astop));
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	astop.first_loop = weft_loop_group_at(cl.groups[0], 0);
	request_held(&t);
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_ECHO, "q", 1, NULL,
	                                   stop_in_reply, NULL),
	                 0);
	assert_true(test_wait(async_stopped, NULL, 10000));
	assert_int_equal(astop.begun, 0);
	assert_int_equal(atomic_load(&t.done), 1);
	assert_int_equal(atomic_load(&t.status_counts[-WEFT_ESHUTDOWN]), 1);
	assert_int_equal(atomic_load(&astop.calls), 1);
	cluster_stop(&cl); /* answers the held request, too late */
}

/* The group shut down first: the loops run no more, and a stop begun
 * afterwards does not wait for its deadline (nothing would drain): it
 * ends on the thread that ends its last stage (this one, or the last
 * worker out), long before the deadline of 60 s. */
static void
test_stop_begun_after_the_group_shut_down_does_not_wait_for_its_deadline(
    void **state)
{
	(void)state;
	memset(&load, 0, sizeof(load));
	memset(&astop, 0, sizeof(astop));
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	astop.first_loop = weft_loop_group_at(cl.groups[0], 0);
	weft_loop_group_shutdown(cl.groups[0], 1000);
	assert_int_equal(
	    weft_msvc_stop_async(cl.svc[0], 60000, on_stopped, &astop), 0);
	assert_true(test_wait(async_stopped, NULL, 10000));
	assert_int_equal(atomic_load(&astop.calls), 1);
	cluster_stop(&cl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_peer_restarted_mid_load),
	    cmocka_unit_test(test_graceful_stop_with_requests_in_flight),
	    cmocka_unit_test(test_responder_stops_with_requests_in_flight),
	    cmocka_unit_test(
	        test_group_shutdown_stops_the_service_with_requests_in_flight),
	    cmocka_unit_test(test_stop_of_idle_cluster_returns_once_quiet),
	    cmocka_unit_test(test_stop_does_not_wait_for_heartbeats),
	    cmocka_unit_test(test_stop_waits_for_a_request_pending_at_the_peer),
	    cmocka_unit_test(
	        test_stop_ends_an_unanswered_request_at_its_deadline),
	    cmocka_unit_test(test_stop_begun_on_a_loop_with_requests_in_flight),
	    cmocka_unit_test(
	        test_stop_begun_in_a_callback_waits_for_its_deadline),
	    cmocka_unit_test(
	        test_stop_begun_after_the_group_shut_down_does_not_wait_for_its_deadline),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
