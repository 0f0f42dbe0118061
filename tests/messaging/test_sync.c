/* SPDX-License-Identifier: MIT */
/*
 * test_sync.c: waiting for the messaging service from threads that are not
 * its loops (sync.c): the blocking request, futures, and waiting for a
 * peer to come up; and that all three refuse to wait on a service loop.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/messaging.h>

#include "cluster.h"
#include "support/wait.h"

#define WAIT_MS 10000

static int
setup(void **state)
{
	*state = cluster_new(2, NULL);
	return 0;
}

static int
teardown(void **state)
{
	cluster_free(*state);
	return 0;
}

static void
test_call_returns_the_response(void **state)
{
	struct cluster *cl = *state;
	struct evbuffer *reply = evbuffer_new();

	assert_int_equal(weft_msvc_call(cl->svc[0], cluster_peer(cl, 0, 1),
	                                VERB_ECHO, "hello", 5, NULL, reply),
	                 0);
	assert_int_equal(evbuffer_get_length(reply), 5);
	assert_memory_equal(evbuffer_pullup(reply, 5), "hello", 5);
	/* NULL: the answer is not wanted, only the status. */
	assert_int_equal(weft_msvc_call(cl->svc[0], cluster_peer(cl, 0, 1),
	                                VERB_ECHO, "x", 1, NULL, NULL),
	                 0);
	evbuffer_free(reply);
}

static void
test_call_reports_errors_as_the_callback_would(void **state)
{
	struct cluster *cl = *state;
	weft_msvc_call_opts quick = {.timeout_ms = 100};
	struct evbuffer *reply = evbuffer_new();

	/* The responder's error, with its text. */
	assert_int_equal(weft_msvc_call(cl->svc[0], cluster_peer(cl, 0, 1), 99,
	                                "?", 1, NULL, reply),
	                 WEFT_EUNKNOWNVERB);
	assert_true(evbuffer_get_length(reply) > 0);
	/* No answer in time. */
	assert_int_equal(weft_msvc_call(cl->svc[0], cluster_peer(cl, 0, 1),
	                                VERB_HOLD, "", 0, &quick, NULL),
	                 WEFT_ETIMEDOUT);
	/* Refused at once. */
	assert_int_equal(
	    weft_msvc_call(cl->svc[0], NULL, VERB_ECHO, "", 0, NULL, NULL),
	    WEFT_EINVAL);
	evbuffer_free(reply);
}

static bool
something_held(void *arg)
{
	struct cluster *cl = arg;

	return atomic_load(&cl->held[0]) != NULL;
}

/* The request node 2's hold handler keeps, once it has arrived. */
static weft_msvc_msg *
take_held(struct cluster *cl)
{
	assert_true(test_wait(something_held, cl, WAIT_MS));
	return atomic_exchange(&cl->held[0], NULL);
}

/* A future outlives a wait that timed out, and then gets its answer. */
static void
test_future_waits_again_after_a_timeout(void **state)
{
	struct cluster *cl = *state;
	weft_msvc_future *f;
	const void *data;
	weft_msvc_msg *held;
	size_t len;

	assert_int_equal(weft_msvc_request_future(cl->svc[0],
	                                          cluster_peer(cl, 0, 1),
	                                          VERB_HOLD, "", 0, NULL, &f),
	                 0);
	/* Held by node 2's handler until the test answers it. */
	assert_int_equal(weft_msvc_future_wait(f, 20), WEFT_ETIMEDOUT);
	assert_false(weft_msvc_future_is_done(f));
	assert_int_equal(weft_msvc_future_status(f), WEFT_EBUSY);
	assert_null(weft_msvc_future_data(f, &len));
	assert_int_equal(len, 0);
	held = take_held(cl);
	assert_int_equal(weft_msvc_respond(held, "late", 4), 0);
	assert_int_equal(weft_msvc_future_wait(f, UINT64_MAX), 0);
	assert_true(weft_msvc_future_is_done(f));
	assert_int_equal(weft_msvc_future_status(f), 0);
	data = weft_msvc_future_data(f, &len);
	assert_int_equal(len, 4);
	assert_memory_equal(data, "late", 4);
	weft_msvc_future_free(f);
}

static bool
held_cancelled(void *arg)
{
	return weft_msvc_msg_is_cancelled(arg);
}

/* A future freed before its answer: the request is cancelled, at the
 * responder too (protocol version 2), and an answer sent all the same is
 * dropped (the address sanitizer checks that nothing is touched after
 * the free). */
static void
test_future_freed_before_its_answer(void **state)
{
	struct cluster *cl = *state;
	weft_msvc_future *f;
	weft_msvc_msg *held;
	weft_msvc_stats st;

	assert_int_equal(weft_msvc_request_future(cl->svc[0],
	                                          cluster_peer(cl, 0, 1),
	                                          VERB_HOLD, "", 0, NULL, &f),
	                 0);
	held = take_held(cl);
	assert_false(weft_msvc_msg_is_cancelled(held));
	weft_msvc_future_free(f);
	assert_true(test_wait(held_cancelled, held, WAIT_MS));
	weft_msvc_get_stats(cl->svc[0], &st);
	assert_int_equal(st.cancelled_requests, 1);
	assert_int_equal(weft_msvc_respond(held, "gone", 4), 0);
	/* One more round trip: the answer has been handled by then. */
	assert_int_equal(weft_msvc_call(cl->svc[0], cluster_peer(cl, 0, 1),
	                                VERB_ECHO, "", 0, NULL, NULL),
	                 0);
}

struct on_loop {
	struct cluster *cl;
	_Atomic int done;
	int call, wait_up, future_wait;
};

static void
try_waiting_on_a_loop(weft_loop *loop, int status, void *arg)
{
	struct on_loop *o = arg;
	weft_msvc_peer *peer = cluster_peer(o->cl, 0, 1);
	weft_msvc_future *f;

	(void)loop;
	(void)status;
	o->call =
	    weft_msvc_call(o->cl->svc[0], peer, VERB_ECHO, "", 0, NULL, NULL);
	o->wait_up = weft_msvc_peer_wait_up(o->cl->svc[0], peer, 10);
	o->future_wait = -1;
	/* The answer comes on this very loop (node 1 has one): it cannot
	 * have arrived, so the wait must refuse rather than block. */
	if (weft_msvc_request_future(o->cl->svc[0], peer, VERB_ECHO, "", 0,
	                             NULL, &f) == 0) {
		o->future_wait = weft_msvc_future_wait(f, 10);
		weft_msvc_future_free(f);
	}
	atomic_store(&o->done, 1);
	test_poke();
}

/* On a service loop, waiting would stop the loop that delivers the
 * answer: all three refuse. */
static void
test_waits_are_refused_on_a_service_loop(void **state)
{
	struct cluster *cl = *state;
	struct on_loop o = {.cl = cl};

	assert_int_equal(weft_loop_post(weft_loop_group_at(cl->groups[0], 0),
	                                try_waiting_on_a_loop, &o),
	                 0);
	assert_true(test_wait(weft_test_atomic_set, &o.done, WAIT_MS));
	assert_int_equal(o.call, WEFT_EBUSY);
	assert_int_equal(o.wait_up, WEFT_EBUSY);
	assert_int_equal(o.future_wait, WEFT_EBUSY);
}

/* Peers are dialed lazily: waiting for one dials it. */
static void
test_wait_up_dials_and_follows_the_peer(void **state)
{
	struct cluster *cl = *state;
	weft_msvc_peer *peer = cluster_peer(cl, 0, 1);
	int i;

	assert_false(weft_msvc_peer_is_up(peer)); /* nothing sent yet */
	assert_int_equal(weft_msvc_peer_wait_up(cl->svc[0], peer, WAIT_MS), 0);
	assert_true(weft_msvc_peer_is_up(peer));
	assert_int_equal(weft_msvc_peer_wait_up(cl->svc[0], peer, 0), 0);
	/* Not for oneself, nor another service's peer. */
	assert_int_equal(
	    weft_msvc_peer_wait_up(cl->svc[0], cluster_peer(cl, 0, 0), 10),
	    WEFT_EINVAL);
	assert_int_equal(
	    weft_msvc_peer_wait_up(cl->svc[0], cluster_peer(cl, 1, 0), 10),
	    WEFT_EINVAL);
	/* A peer that went away: down, then up again once restarted. */
	cluster_stop_node(cl, 1, 0);
	for (i = 0; i < 100 && weft_msvc_peer_is_up(peer); i++)
		(void)weft_msvc_call(cl->svc[0], peer, VERB_ECHO, "", 0,
		                     &(weft_msvc_call_opts){.timeout_ms = 100},
		                     NULL);
	assert_false(weft_msvc_peer_is_up(peer));
	assert_int_equal(weft_msvc_peer_wait_up(cl->svc[0], peer, WAIT_MS),
	                 WEFT_EPEERDOWN);
	assert_int_equal(cluster_start_node(cl, 1), 0);
	assert_int_equal(weft_msvc_peer_wait_up(cl->svc[0], peer, WAIT_MS), 0);
	assert_int_equal(
	    weft_msvc_call(cl->svc[0], peer, VERB_ECHO, "", 0, NULL, NULL), 0);
}

struct waiter {
	struct cluster *cl;
	weft_msvc_peer *peer;
	_Atomic int started;
	int rv;
};

static void *
wait_up_thread(void *arg)
{
	struct waiter *w = arg;

	atomic_store(&w->started, 1);
	w->rv = weft_msvc_peer_wait_up(w->cl->svc[0], w->peer, 60000);
	return NULL;
}

/* A thread waiting for a peer whose handshake is never answered is let
 * go when the service stops. */
static void
test_wait_up_ends_when_the_service_stops(void **state)
{
	struct cluster *cl = *state;
	struct waiter w = {.cl = cl, .peer = cluster_peer(cl, 0, 1)};
	uint16_t port;
	pthread_t t;
	int hole = cluster_black_hole(&port);

	assert_int_equal(
	    weft_msvc_set_peer_addr(cl->svc[0], "n2", "127.0.0.1", port), 0);
	assert_int_equal(pthread_create(&t, NULL, wait_up_thread, &w), 0);
	while (!atomic_load(&w.started))
		sched_yield();
	weft_msvc_stop(cl->svc[0], 0);
	pthread_join(t, NULL);
	close(hole);
	assert_int_equal(w.rv, WEFT_ESHUTDOWN);
	assert_int_equal(weft_msvc_peer_wait_up(cl->svc[0], w.peer, 10),
	                 WEFT_ESHUTDOWN);
}

static uint64_t
ms_since(uint64_t start_ns)
{
	return (weft_now_ns() - start_ns) / 1000000u;
}

/* A peer that cannot be reached ends the wait as soon as its dial has
 * failed, not at the wait's timeout; so does one known down already,
 * with the redial its back-off schedules. */
static void
test_wait_up_ends_when_the_peer_is_known_down(void **state)
{
	struct cluster *cl = *state;
	weft_msvc_peer *peer = cluster_peer(cl, 0, 1);
	uint64_t start;

	cluster_stop_node(cl, 1, 0); /* before anything dialed it */
	start = weft_now_ns();
	assert_int_equal(weft_msvc_peer_wait_up(cl->svc[0], peer, 20000),
	                 WEFT_EPEERDOWN);
	assert_true(ms_since(start) < 2000);
	print_message("unreachable: wait_up ended after %llu ms\n",
	              (unsigned long long)ms_since(start));
	assert_true(weft_msvc_peer_is_down(peer));
	start = weft_now_ns();
	assert_int_equal(weft_msvc_peer_wait_up(cl->svc[0], peer, 20000),
	                 WEFT_EPEERDOWN);
	assert_true(ms_since(start) < 2000);
	print_message("known down: wait_up ended after %llu ms\n",
	              (unsigned long long)ms_since(start));
	/* And once it is back, the wait that follows gets it. */
	assert_int_equal(cluster_start_node(cl, 1), 0);
	assert_int_equal(weft_msvc_peer_wait_up(cl->svc[0], peer, WAIT_MS), 0);
}

#define CALLERS 4
#define CALLS 200

struct caller {
	struct cluster *cl;
	int index;
	int failures;
};

static void *
caller_thread(void *arg)
{
	struct caller *c = arg;
	struct evbuffer *reply = evbuffer_new();
	char msg[32];
	int i, n;

	for (i = 0; i < CALLS; i++) {
		n = snprintf(msg, sizeof(msg), "%d/%d", c->index, i);
		evbuffer_drain(reply, evbuffer_get_length(reply));
		if (weft_msvc_call(c->cl->svc[0], cluster_peer(c->cl, 0, 1),
		                   VERB_ECHO, msg, (size_t)n, NULL,
		                   reply) != 0 ||
		    evbuffer_get_length(reply) != (size_t)n ||
		    memcmp(evbuffer_pullup(reply, n), msg, (size_t)n) != 0)
			c->failures++;
	}
	evbuffer_free(reply);
	return NULL;
}

/* Blocking calls from several threads at once each get their own
 * answer. */
static void
test_calls_from_many_threads(void **state)
{
	struct cluster *cl = *state;
	struct caller c[CALLERS];
	pthread_t t[CALLERS];
	int i;

	for (i = 0; i < CALLERS; i++) {
		c[i] = (struct caller){cl, i, 0};
		assert_int_equal(
		    pthread_create(&t[i], NULL, caller_thread, &c[i]), 0);
	}
	for (i = 0; i < CALLERS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(c[i].failures, 0);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_call_returns_the_response,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_call_reports_errors_as_the_callback_would, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_future_waits_again_after_a_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_future_freed_before_its_answer,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_waits_are_refused_on_a_service_loop, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_wait_up_dials_and_follows_the_peer, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_wait_up_ends_when_the_service_stops, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_wait_up_ends_when_the_peer_is_known_down, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_calls_from_many_threads, setup,
	                                    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
