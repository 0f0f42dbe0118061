/* SPDX-License-Identifier: MIT */
/*
 * test_loadgen.c: the load generator's bookkeeping, on a fake transport
 * (a thread that answers each request, in order, or refuses them all).
 * Every request sent is answered exactly once, refusals are counted by
 * the rule asked for, an open loop never runs ahead of its schedule, and
 * a stopped run ends. No speed is asserted.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <loadgen.h>
#include <weft/core.h>

#define NS_PER_MS 1000000u
#define QUEUE_CAP 64

/* The fake transport: requests queue here and a thread answers them. */
struct fake {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	wload_slot *queue[QUEUE_CAP];
	unsigned head, count;
	bool done;
	int refuse;          /* non-zero: every send is refused with it */
	size_t ntargets;     /* next_target wraps here */
	unsigned targets[4]; /* requests per target */
	atomic_int ticks;
	int stop_after_ticks; /* > 0: the tick hook stops the run */
	wload *load;
	pthread_t thread;
};

static int
fake_send(wload_slot *s, void *arg)
{
	struct fake *f = arg;

	if (f->refuse != 0)
		return f->refuse;
	pthread_mutex_lock(&f->lock);
	assert_true(f->count < QUEUE_CAP);
	f->queue[(f->head + f->count++) % QUEUE_CAP] = s;
	f->targets[s->target]++;
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static size_t
fake_next_target(size_t t, void *arg)
{
	const struct fake *f = arg;

	return (t + 1) % f->ntargets;
}

static void
fake_tick(void *arg)
{
	struct fake *f = arg;

	if (atomic_fetch_add(&f->ticks, 1) + 1 == f->stop_after_ticks)
		wload_stop(f->load);
}

static void *
answer(void *arg)
{
	struct fake *f = arg;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		wload_slot *s;

		while (f->count == 0 && !f->done)
			pthread_cond_wait(&f->cond, &f->lock);
		if (f->count == 0)
			break;
		s = f->queue[f->head];
		f->head = (f->head + 1) % QUEUE_CAP;
		f->count--;
		pthread_mutex_unlock(&f->lock);
		wload_reply(s, 0);
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static const wload_ops fake_ops = {
    .send = fake_send, .next_target = fake_next_target, .tick = fake_tick};

static void
fake_start(struct fake *f, const wload_opts *o)
{
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	if (f->ntargets == 0)
		f->ntargets = 1;
	assert_int_equal(wload_new(o, &fake_ops, f, &f->load), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, answer, f), 0);
}

static void
fake_stop(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->done = true;
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->lock);
	pthread_join(f->thread, NULL);
	wload_free(f->load);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
}

static void
test_closed_loop_answers_every_request_once(void **state)
{
	struct fake f = {.ntargets = 3};
	wload_opts o = {.outstanding = 4,
	                .warmup_ns = 20 * NS_PER_MS,
	                .duration_ns = 100 * NS_PER_MS,
	                .idle_wait_ns = 5000 * NS_PER_MS};
	wload_usage before, after;
	wload_totals t;

	(void)state;
	fake_start(&f, &o);
	for (unsigned i = 0; i < o.outstanding; i++)
		wload_slot_at(f.load, i)->target = i % f.ntargets;
	wload_run(f.load, &before, &after);
	assert_int_equal(wload_active(f.load), 0);
	wload_get_totals(f.load, &t);
	assert_true(t.sent > 0);
	assert_int_equal(t.replies, t.sent);
	assert_int_equal(t.duplicates, 0);
	assert_int_equal(t.errors, 0);
	assert_true(t.ok > 0 && t.ok <= t.replies);
	assert_int_equal(wload_first_error(f.load), 0);
	assert_true(after.cpu_us >= before.cpu_us);
	/* Each slot asks the targets in turn: none is left out. */
	for (size_t i = 0; i < f.ntargets; i++)
		assert_true(f.targets[i] > 0);
	fake_stop(&f);
}

static void
test_a_second_reply_counts_as_a_duplicate(void **state)
{
	struct fake f = {0};
	wload_opts o = {.outstanding = 1,
	                .duration_ns = 10 * NS_PER_MS,
	                .idle_wait_ns = 5000 * NS_PER_MS};
	wload_usage before, after;
	wload_totals t;

	(void)state;
	fake_start(&f, &o);
	wload_run(f.load, &before, &after);
	wload_reply(wload_slot_at(f.load, 0), 0);
	wload_get_totals(f.load, &t);
	assert_int_equal(t.duplicates, 1);
	assert_int_equal(t.replies, t.sent);
	fake_stop(&f);
}

/* run_refused runs K = 3 slots whose every send is refused. */
static void
run_refused(bool count_warmup_refusals, uint64_t warmup_ns, wload_totals *t)
{
	struct fake f = {.refuse = WEFT_EOVERLOAD};
	wload_opts o = {.outstanding = 3,
	                .warmup_ns = warmup_ns,
	                .duration_ns = 20 * NS_PER_MS,
	                .idle_wait_ns = 5000 * NS_PER_MS,
	                .count_warmup_refusals = count_warmup_refusals};
	wload_usage before, after;

	fake_start(&f, &o);
	wload_run(f.load, &before, &after);
	assert_int_equal(wload_active(f.load), 0);
	assert_int_equal(wload_first_error(f.load), WEFT_EOVERLOAD);
	wload_get_totals(f.load, t);
	fake_stop(&f);
}

static void
test_refusals_count_by_the_rule_asked_for(void **state)
{
	wload_totals t;

	(void)state;
	/* Refused at the start of a long warm-up: errors only if asked. */
	run_refused(true, 200 * NS_PER_MS, &t);
	assert_int_equal(t.errors, 3);
	assert_int_equal(t.sent, 0);
	run_refused(false, 200 * NS_PER_MS, &t);
	assert_int_equal(t.errors, 0);
	assert_int_equal(t.sent, 0);
	/* Without a warm-up they are the window's either way. */
	run_refused(false, 0, &t);
	assert_int_equal(t.errors, 3);
}

static void
test_open_loop_never_runs_ahead_of_its_schedule(void **state)
{
	struct fake f = {.ntargets = 2};
	wload_opts o = {.outstanding = 4,
	                .rate = 500,
	                .warmup_ns = 10 * NS_PER_MS,
	                .duration_ns = 90 * NS_PER_MS,
	                .idle_wait_ns = 5000 * NS_PER_MS};
	wload_usage before, after;
	wload_totals t;

	(void)state;
	fake_start(&f, &o);
	wload_run(f.load, &before, &after);
	wload_get_totals(f.load, &t);
	/* Request k is due at k / rate: within 100 ms, at most 51. */
	assert_true(t.sent > 0 && t.sent <= 51);
	assert_int_equal(t.replies, t.sent);
	assert_int_equal(t.duplicates, 0);
	assert_int_equal(wload_active(f.load), 0);
	fake_stop(&f);
}

static void
test_a_stopped_run_ends_before_its_window(void **state)
{
	struct fake f = {.stop_after_ticks = 1};
	wload_opts o = {.outstanding = 2,
	                .duration_ns = 3600ull * 1000 * NS_PER_MS,
	                .idle_wait_ns = 5000 * NS_PER_MS};
	wload_usage before, after;
	wload_totals t;

	(void)state;
	fake_start(&f, &o);
	wload_run(f.load, &before, &after);
	assert_true(wload_is_stopped(f.load));
	assert_int_equal(atomic_load(&f.ticks), 1);
	assert_int_equal(wload_active(f.load), 0);
	wload_get_totals(f.load, &t);
	assert_int_equal(t.replies, t.sent);
	fake_stop(&f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_closed_loop_answers_every_request_once),
	    cmocka_unit_test(test_a_second_reply_counts_as_a_duplicate),
	    cmocka_unit_test(test_refusals_count_by_the_rule_asked_for),
	    cmocka_unit_test(test_open_loop_never_runs_ahead_of_its_schedule),
	    cmocka_unit_test(test_a_stopped_run_ends_before_its_window),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
