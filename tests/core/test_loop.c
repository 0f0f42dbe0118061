/* SPDX-License-Identifier: MIT */
/* test_loop.c: loops, loop groups, cross-thread tasks and timers. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <weft/loop.h>

#define PRODUCERS 8
#define TASKS_PER_PRODUCER 20000

struct counts {
	_Atomic int total;
	int seen[PRODUCERS]; /* next expected sequence number per producer */
	bool out_of_order;
	_Atomic int shutdown_runs;
};

struct tagged {
	struct counts *counts;
	int producer;
	int seq;
};

static void
count_task(weft_loop *loop, int status, void *arg)
{
	struct tagged *t = arg;

	(void)loop;
	if (status == 0) {
		if (t->counts->seen[t->producer] != t->seq)
			t->counts->out_of_order = true;
		t->counts->seen[t->producer] = t->seq + 1;
		atomic_fetch_add(&t->counts->total, 1);
	} else {
		atomic_fetch_add(&t->counts->shutdown_runs, 1);
	}
	free(t);
}

struct producer {
	weft_loop *loop;
	struct counts *counts;
	int id;
};

static void *
produce(void *arg)
{
	struct producer *p = arg;
	struct tagged *t;
	int i;

	for (i = 0; i < TASKS_PER_PRODUCER; i++) {
		t = malloc(sizeof(*t));
		t->counts = p->counts;
		t->producer = p->id;
		t->seq = i;
		assert_int_equal(weft_loop_post(p->loop, count_task, t), 0);
	}
	return NULL;
}

static bool
all_counted(void *arg)
{
	return atomic_load(&((struct counts *)arg)->total) ==
	       PRODUCERS * TASKS_PER_PRODUCER;
}

static void
test_tasks_from_8_threads_arrive_once_in_order(void **state)
{
	struct producer producers[PRODUCERS];
	pthread_t threads[PRODUCERS];
	struct counts counts;
	weft_loop_stats stats;
	weft_loop *loop;
	int i;

	(void)state;
	memset(&counts, 0, sizeof(counts));
	assert_int_equal(weft_loop_new(&loop), 0);
	for (i = 0; i < PRODUCERS; i++) {
		producers[i] = (struct producer){loop, &counts, i};
		pthread_create(&threads[i], NULL, produce, &producers[i]);
	}
	assert_int_equal(weft_loop_run_until(loop, all_counted, &counts, 20000),
	                 0);
	for (i = 0; i < PRODUCERS; i++)
		pthread_join(threads[i], NULL);
	assert_false(counts.out_of_order);
	for (i = 0; i < PRODUCERS; i++)
		assert_int_equal(counts.seen[i], TASKS_PER_PRODUCER);
	weft_loop_get_stats(loop, &stats);
	assert_int_equal(stats.tasks_run, PRODUCERS * TASKS_PER_PRODUCER);
	/* Batching: far fewer wake-ups than tasks. */
	assert_true(stats.wakeups <= stats.tasks_run);
	weft_loop_free(loop);
	assert_int_equal(counts.shutdown_runs, 0);
}

static void
test_own_thread_runs_tasks_and_free_runs_leftovers(void **state)
{
	struct counts counts;
	struct producer p;
	weft_loop *loop;

	(void)state;
	memset(&counts, 0, sizeof(counts));
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(weft_loop_start(loop), 0);
	assert_false(weft_loop_in_thread(loop));
	p = (struct producer){loop, &counts, 0};
	produce(&p);
	weft_loop_free(loop);
	/* Every task ran exactly once: normally, or at free. */
	assert_int_equal(atomic_load(&counts.total) +
	                     atomic_load(&counts.shutdown_runs),
	                 TASKS_PER_PRODUCER);
}

static void
mark(weft_loop *loop, int status, void *arg)
{
	(void)loop;
	*(int *)arg = status == 0 ? 1 : 2;
}

static void
test_post_after_free_starts_is_refused_and_leftovers_get_eshutdown(void **state)
{
	weft_loop *loop;
	int ran = 0;

	(void)state;
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(weft_loop_post(loop, mark, &ran), 0);
	weft_loop_free(loop);
	assert_int_equal(ran, 2);
}

struct order {
	int fired[8];
	int n;
	weft_timer *cancel_me;
	int repeats;
	weft_timer *periodic;
};

struct fire_arg {
	struct order *order;
	int id;
};

static void
record_fire(weft_timer *timer, void *arg)
{
	struct fire_arg *f = arg;

	(void)timer;
	f->order->fired[f->order->n++] = f->id;
}

static bool
four_fired(void *arg)
{
	return ((struct order *)arg)->n >= 4;
}

static void
on_periodic(weft_timer *timer, void *arg)
{
	struct order *o = arg;

	if (++o->repeats == 3)
		weft_timer_stop(timer);
}

static bool
periodic_done(void *arg)
{
	struct order *o = arg;

	return o->repeats >= 3 && !weft_timer_is_pending(o->periodic);
}

static void
test_timers_fire_in_order_and_cancel_cleanly(void **state)
{
	static const int delays[] = {30, 10, 20, 10, 5};
	struct fire_arg args[5];
	weft_timer *timers[5];
	struct order o;
	weft_loop *loop;
	int i;

	(void)state;
	memset(&o, 0, sizeof(o));
	assert_int_equal(weft_loop_new(&loop), 0);
	for (i = 0; i < 5; i++) {
		args[i] = (struct fire_arg){&o, i};
		assert_int_equal(
		    weft_timer_new(loop, record_fire, &args[i], &timers[i]), 0);
		assert_int_equal(
		    weft_timer_start(timers[i], (uint64_t)delays[i], 0), 0);
	}
	weft_timer_stop(timers[4]); /* the earliest never fires */
	assert_false(weft_timer_is_pending(timers[4]));
	assert_int_equal(weft_loop_run_until(loop, four_fired, &o, 5000), 0);
	assert_int_equal(o.n, 4);
	/* 10 ms (timer 1 then 3, in start order), 20 ms, 30 ms. */
	assert_int_equal(o.fired[0], 1);
	assert_int_equal(o.fired[1], 3);
	assert_int_equal(o.fired[2], 2);
	assert_int_equal(o.fired[3], 0);
	for (i = 0; i < 5; i++)
		weft_timer_free(timers[i]);

	assert_int_equal(weft_timer_new(loop, on_periodic, &o, &o.periodic), 0);
	assert_int_equal(weft_timer_start(o.periodic, 1, 2), 0);
	assert_int_equal(weft_loop_run_until(loop, periodic_done, &o, 5000), 0);
	assert_int_equal(o.repeats, 3);
	weft_timer_free(o.periodic);
	weft_loop_free(loop);
}

static void
free_self(weft_timer *timer, void *arg)
{
	*(int *)arg += 1;
	weft_timer_free(timer);
}

static bool
is_set(void *arg)
{
	return *(int *)arg != 0;
}

static void
test_timer_can_free_itself_in_its_callback(void **state)
{
	weft_timer *timer;
	weft_loop *loop;
	int fired = 0;

	(void)state;
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(weft_timer_new(loop, free_self, &fired, &timer), 0);
	assert_int_equal(weft_timer_start(timer, 1, 1), 0);
	assert_int_equal(weft_loop_run_until(loop, is_set, &fired, 5000), 0);
	assert_int_equal(fired, 1);
	weft_loop_free(loop);
}

static void
test_run_until_times_out(void **state)
{
	weft_loop *loop;
	int never = 0;

	(void)state;
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(weft_loop_run_until(loop, is_set, &never, 20),
	                 WEFT_ETIMEDOUT);
	weft_loop_free(loop);
}

struct group_hits {
	_Atomic int hits;
	weft_loop *where[64];
};

static void
note_loop(weft_loop *loop, int status, void *arg)
{
	struct group_hits *g = arg;
	int i = atomic_fetch_add(&g->hits, 1);

	(void)status;
	assert_true(weft_loop_in_thread(loop));
	g->where[i] = loop;
}

static void
test_group_picks_round_robin_and_by_key(void **state)
{
	weft_loop_group *group;
	struct group_hits g;
	weft_loop *a, *b;
	int i;

	(void)state;
	memset(&g, 0, sizeof(g));
	assert_int_equal(weft_loop_group_new(3, &group), 0);
	assert_int_equal(weft_loop_group_size(group), 3);
	a = weft_loop_group_next(group);
	b = weft_loop_group_next(group);
	assert_ptr_not_equal(a, b);
	assert_ptr_equal(weft_loop_group_by_key(group, 42),
	                 weft_loop_group_by_key(group, 42));
	for (i = 0; i < 30; i++)
		assert_int_equal(
		    weft_loop_post(weft_loop_group_next(group), note_loop, &g),
		    0);
	weft_loop_group_shutdown(group, 1000);
	assert_int_equal(atomic_load(&g.hits), 30);
	weft_loop_group_free(group);
}

/* ---- Busy polling ------------------------------------------------------- */

/* A task that answers by bumping a counter; the test thread waits for it
 * without sleeping in the loop. */
static void
bump_task(weft_loop *loop, int status, void *arg)
{
	(void)loop;
	(void)status;
	atomic_fetch_add((_Atomic int *)arg, 1);
}

static uint64_t
cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
sleep_ms(long ms)
{
	nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000}, NULL);
}

/* A loop told to busy-poll runs every task as before; once work stops it
 * polls for its window and then sleeps: 300 ms idle cost it far less
 * than 300 ms of CPU (it would cost all of them if it never slept). The
 * setting changes while the loop runs, and the loop stops as ever. */
static void
test_busy_polling_loop_serves_then_sleeps(void **state)
{
	_Atomic int done = 0;
	weft_loop *loop;
	uint64_t before;
	int i;

	(void)state;
	assert_int_equal(weft_loop_new(&loop), 0);
	weft_loop_set_busy_poll(loop, 2000);
	assert_int_equal(weft_loop_start(loop), 0);
	for (i = 1; i <= 1000; i++) {
		assert_int_equal(weft_loop_post(loop, bump_task, &done), 0);
		while (atomic_load(&done) < i)
			sched_yield();
	}
	sleep_ms(50); /* past the window: asleep */
	before = cpu_ns();
	sleep_ms(300);
	assert_true(cpu_ns() - before < 150000000u);
	/* Turned off and on again while it runs. */
	weft_loop_set_busy_poll(loop, 0);
	assert_int_equal(weft_loop_post(loop, bump_task, &done), 0);
	weft_loop_set_busy_poll(loop, 500);
	assert_int_equal(weft_loop_post(loop, bump_task, &done), 0);
	while (atomic_load(&done) < 1002)
		sched_yield();
	weft_loop_stop(loop);
	weft_loop_join(loop);
	weft_loop_free(loop);
	assert_int_equal(atomic_load(&done), 1002);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tasks_from_8_threads_arrive_once_in_order),
	    cmocka_unit_test(
	        test_own_thread_runs_tasks_and_free_runs_leftovers),
	    cmocka_unit_test(
	        test_post_after_free_starts_is_refused_and_leftovers_get_eshutdown),
	    cmocka_unit_test(test_timers_fire_in_order_and_cancel_cleanly),
	    cmocka_unit_test(test_timer_can_free_itself_in_its_callback),
	    cmocka_unit_test(test_run_until_times_out),
	    cmocka_unit_test(test_group_picks_round_robin_and_by_key),
	    cmocka_unit_test(test_busy_polling_loop_serves_then_sleeps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
