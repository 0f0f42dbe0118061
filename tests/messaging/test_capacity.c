/* SPDX-License-Identifier: MIT */
/*
 * test_capacity.c: waiting for request capacity (capacity.c): past
 * max_pending_requests, a thread blocks in weft_msvc_wait_capacity and
 * loop code gets one callback from weft_msvc_on_capacity, each as soon
 * as a request ends; both are let go when the service stops; and many
 * threads and a loop that wait instead of spinning get every request
 * through.
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

#include <cmocka.h>

#include <weft/messaging.h>

#include "cluster.h"
#include "support/wait.h"

#define WAIT_MS 10000
#define MAX_PENDING 4

static void
tune(weft_msvc_limits *l)
{
	l->max_pending_requests = MAX_PENDING;
	/* One heartbeat as the peer is first used, then none: it would
	 * take one of the few slots at a time the test does not choose. */
	l->heartbeat_interval_ms = 3600 * 1000;
}

static int
setup(void **state)
{
	*state = cluster_new(2, tune);
	return 0;
}

static int
teardown(void **state)
{
	cluster_free(*state);
	return 0;
}

static bool
nothing_pending(void *arg)
{
	weft_msvc_stats st;

	weft_msvc_get_stats(arg, &st);
	return st.pending_requests == 0;
}

static bool
all_held(void *arg)
{
	struct cluster *cl = arg;

	return atomic_load(&cl->held_count) == MAX_PENDING;
}

/* Node 1 has MAX_PENDING requests out, each held by node 2, and is
 * refused the next one. */
static void
fill(struct cluster *cl, struct tally *t)
{
	weft_msvc_peer *peer = cluster_peer(cl, 0, 1);
	int i;

	assert_int_equal(
	    weft_msvc_call(cl->svc[0], peer, VERB_ECHO, "", 0, NULL, NULL), 0);
	assert_true(test_wait(nothing_pending, cl->svc[0], WAIT_MS));
	for (i = 0; i < MAX_PENDING; i++)
		assert_int_equal(weft_msvc_request(cl->svc[0], peer, VERB_HOLD,
		                                   "", 0, NULL, tally_cb, t),
		                 0);
	assert_int_equal(weft_msvc_request(cl->svc[0], peer, VERB_HOLD, "", 0,
	                                   NULL, tally_cb, t),
	                 WEFT_EOVERLOAD);
	assert_true(test_wait(all_held, cl, WAIT_MS));
}

/* Answers the oldest request node 2 holds. */
static void
answer_one(struct cluster *cl, int i)
{
	weft_msvc_msg *m = atomic_exchange(&cl->held[i], NULL);

	assert_non_null(m);
	assert_int_equal(weft_msvc_respond(m, NULL, 0), 0);
}

/* Answers what node 2 still holds and waits until all of t's requests
 * (want in all) have ended: t lives on the test's stack. */
static void
drain(struct cluster *cl, struct tally *t, int want)
{
	weft_msvc_msg *m;
	int i;

	for (i = 0; i < MAX_PENDING; i++)
		if ((m = atomic_exchange(&cl->held[i], NULL)) != NULL)
			assert_int_equal(weft_msvc_respond(m, NULL, 0), 0);
	t->want = want;
	assert_true(test_wait(tally_complete, t, WAIT_MS));
	assert_int_equal(atomic_load(&t->ok), want);
}

struct waiter {
	weft_msvc *svc;
	_Atomic int done;
	int rv;
};

static void *
wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->rv = weft_msvc_wait_capacity(w->svc, 60000);
	atomic_store(&w->done, 1);
	test_poke();
	return NULL;
}

static void
test_wait_returns_when_a_request_ends(void **state)
{
	struct cluster *cl = *state;
	struct tally t = {.want = MAX_PENDING};
	struct waiter w = {.svc = cl->svc[0]};
	pthread_t th;

	fill(cl, &t);
	assert_int_equal(weft_msvc_wait_capacity(cl->svc[0], 50),
	                 WEFT_ETIMEDOUT);
	assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
	/* Still full: the waiter stays. */
	assert_false(test_wait(weft_test_atomic_set, &w.done, 100));
	answer_one(cl, 0);
	assert_true(test_wait(weft_test_atomic_set, &w.done, WAIT_MS));
	pthread_join(th, NULL);
	assert_int_equal(w.rv, 0);
	/* The room it saw is there. */
	assert_int_equal(weft_msvc_request(cl->svc[0], cluster_peer(cl, 0, 1),
	                                   VERB_ECHO, "", 0, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_int_equal(weft_msvc_wait_capacity(NULL, 0), WEFT_EINVAL);
	drain(cl, &t, MAX_PENDING + 1);
}

struct cap_seen {
	_Atomic int calls;
	_Atomic int status;
	_Atomic int in_call; /* set while weft_msvc_on_capacity runs */
	_Atomic int inside;  /* a callback that ran inside the call */
};

static void
on_cap(weft_msvc *svc, int status, void *arg)
{
	struct cap_seen *c = arg;

	(void)svc;
	if (atomic_load(&c->in_call))
		atomic_store(&c->inside, 1);
	atomic_store(&c->status, status);
	atomic_fetch_add(&c->calls, 1);
	test_poke();
}

static bool
called(void *arg)
{
	struct cap_seen *c = arg;

	return atomic_load(&c->calls) > 0;
}

static int
on_capacity(weft_msvc *svc, struct cap_seen *c)
{
	int rv;

	atomic_store(&c->in_call, 1);
	rv = weft_msvc_on_capacity(svc, test_loop, on_cap, c);
	atomic_store(&c->in_call, 0);
	return rv;
}

static void
test_callback_runs_once_when_a_request_ends(void **state)
{
	struct cluster *cl = *state;
	struct tally t = {.want = MAX_PENDING};
	struct cap_seen c = {.calls = 0};

	fill(cl, &t);
	assert_int_equal(on_capacity(cl->svc[0], &c), 0);
	assert_false(test_wait(called, &c, 100));
	answer_one(cl, 0);
	assert_true(test_wait(called, &c, WAIT_MS));
	assert_int_equal(atomic_load(&c.status), 0);
	/* Once: more requests ending do not call it again. */
	answer_one(cl, 1);
	t.want = 2;
	assert_true(test_wait(tally_complete, &t, WAIT_MS));
	assert_false(test_wait(weft_test_never, NULL, 50));
	assert_int_equal(atomic_load(&c.calls), 1);

	/* With room already, it runs soon, but not inside the call. */
	c = (struct cap_seen){.calls = 0};
	assert_int_equal(on_capacity(cl->svc[0], &c), 0);
	assert_true(test_wait(called, &c, WAIT_MS));
	assert_int_equal(atomic_load(&c.inside), 0);
	assert_int_equal(atomic_load(&c.status), 0);
	assert_int_equal(weft_msvc_on_capacity(cl->svc[0], NULL, on_cap, &c),
	                 WEFT_EINVAL);
	drain(cl, &t, MAX_PENDING);
}

static void
test_stop_lets_every_waiter_go(void **state)
{
	struct cluster *cl = *state;
	struct tally t = {.want = MAX_PENDING};
	struct waiter w = {.svc = cl->svc[0]};
	struct cap_seen c = {.calls = 0};
	pthread_t th;

	fill(cl, &t);
	assert_int_equal(on_capacity(cl->svc[0], &c), 0);
	assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
	assert_false(test_wait(weft_test_atomic_set, &w.done, 50));
	weft_msvc_stop(cl->svc[0], 0);
	pthread_join(th, NULL);
	assert_int_equal(w.rv, WEFT_ESHUTDOWN);
	assert_true(test_wait(called, &c, WAIT_MS));
	assert_int_equal(atomic_load(&c.status), WEFT_ESHUTDOWN);
	assert_true(test_wait(tally_complete, &t, WAIT_MS));
	assert_false(test_wait(weft_test_never, NULL, 50));
	assert_int_equal(atomic_load(&c.calls), 1);
	/* Stopped: refused at once, no callback. */
	assert_int_equal(weft_msvc_wait_capacity(cl->svc[0], 1000),
	                 WEFT_ESHUTDOWN);
	assert_int_equal(on_capacity(cl->svc[0], &c), WEFT_ESHUTDOWN);
	assert_false(test_wait(weft_test_never, NULL, 50));
	assert_int_equal(atomic_load(&c.calls), 1);
}

struct on_loop {
	weft_msvc *svc;
	_Atomic int done;
	int rv;
};

static void
wait_on_loop(weft_loop *loop, int status, void *arg)
{
	struct on_loop *o = arg;

	(void)loop;
	(void)status;
	o->rv = weft_msvc_wait_capacity(o->svc, 10);
	atomic_store(&o->done, 1);
	test_poke();
}

/* On a service loop the wait would hold up the answers it waits for. */
static void
test_wait_is_refused_on_a_service_loop(void **state)
{
	struct cluster *cl = *state;
	struct on_loop o = {.svc = cl->svc[0]};

	assert_int_equal(weft_loop_post(weft_loop_group_at(cl->groups[0], 0),
	                                wait_on_loop, &o),
	                 0);
	assert_true(test_wait(weft_test_atomic_set, &o.done, WAIT_MS));
	assert_int_equal(o.rv, WEFT_EBUSY);
}

#define THREADS 4
#define PER_THREAD 400
#define ON_LOOP 400

struct sender {
	struct cluster *cl;
	struct tally *t;
	int failures;
	uint64_t waits;
};

/* Requests as fast as it may: on WEFT_EOVERLOAD it waits, never sleeps. */
static void *
sender_thread(void *arg)
{
	struct sender *s = arg;
	weft_msvc_peer *peer = cluster_peer(s->cl, 0, 1);
	int i, rv, tries;

	for (i = 0; i < PER_THREAD; i++) {
		for (tries = 0; tries < 1000; tries++) {
			rv = weft_msvc_request(s->cl->svc[0], peer, VERB_ECHO,
			                       "x", 1, NULL, tally_cb, s->t);
			if (rv != WEFT_EOVERLOAD)
				break;
			s->waits++;
			if (weft_msvc_wait_capacity(s->cl->svc[0], WAIT_MS) !=
			    0)
				s->failures++;
		}
		if (rv != 0)
			s->failures++;
	}
	return NULL;
}

/* A producer on a loop of its own: sends until refused, then asks for a
 * callback and goes on from there. */
struct producer {
	struct cluster *cl;
	weft_loop *loop;
	struct tally *t;
	int sent, callbacks, failures;
};

static void produce(struct producer *p);

static void
on_producer_capacity(weft_msvc *svc, int status, void *arg)
{
	struct producer *p = arg;

	(void)svc;
	p->callbacks++;
	if (status != 0) {
		p->failures++;
		return;
	}
	produce(p);
}

static void
produce(struct producer *p)
{
	int rv;

	while (p->sent < ON_LOOP) {
		rv = weft_msvc_request(p->cl->svc[0], cluster_peer(p->cl, 0, 1),
		                       VERB_ECHO, "y", 1, NULL, tally_cb, p->t);
		if (rv == WEFT_EOVERLOAD) {
			if (weft_msvc_on_capacity(p->cl->svc[0], p->loop,
			                          on_producer_capacity, p) != 0)
				p->failures++;
			return;
		}
		if (rv != 0)
			p->failures++;
		p->sent++;
	}
}

static void
start_producer(weft_loop *loop, int status, void *arg)
{
	(void)loop;
	(void)status;
	produce(arg);
}

static void
test_many_threads_and_a_loop_wait_for_capacity(void **state)
{
	struct cluster *cl = *state;
	struct tally t = {.want = THREADS * PER_THREAD + ON_LOOP};
	struct sender s[THREADS];
	struct producer p = {.cl = cl, .t = &t};
	weft_loop_group *g;
	pthread_t th[THREADS];
	uint64_t waits = 0;
	int i;

	assert_int_equal(weft_loop_group_new(1, &g), 0);
	p.loop = weft_loop_group_at(g, 0);
	assert_int_equal(weft_loop_post(p.loop, start_producer, &p), 0);
	for (i = 0; i < THREADS; i++) {
		s[i] = (struct sender){.cl = cl, .t = &t};
		assert_int_equal(
		    pthread_create(&th[i], NULL, sender_thread, &s[i]), 0);
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(s[i].failures, 0);
		waits += s[i].waits;
	}
	assert_true(test_wait(tally_complete, &t, 30000));
	weft_loop_group_free(g);
	assert_int_equal(atomic_load(&t.ok), t.want);
	assert_int_equal(p.sent, ON_LOOP);
	assert_int_equal(p.failures, 0);
	/* The limit was reached, or the test tested nothing. */
	assert_true(waits + (uint64_t)p.callbacks > 0);
	print_message("%llu waits, %d callbacks\n", (unsigned long long)waits,
	              p.callbacks);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_wait_returns_when_a_request_ends, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_callback_runs_once_when_a_request_ends, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stop_lets_every_waiter_go,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_wait_is_refused_on_a_service_loop, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_many_threads_and_a_loop_wait_for_capacity, setup,
	        teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
