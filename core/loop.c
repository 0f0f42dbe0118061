/* SPDX-License-Identifier: MIT */
/* loop.c: one event_base driven by one thread, and its task queue. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <event2/event.h>

#include "core_int.h"
#include "weft_int.h"

#define COMMON_TIMEOUTS_MAX 32

struct shutdown_hook {
	weft_shutdown_cb cb;
	void *arg;
};

struct common_timeout {
	uint64_t ms;
	const struct timeval *tv;
};

struct weft_loop {
	struct event_base *base;
	struct event *wake_ev;
	weft__mpsc tasks;
	/* The next round's tasks (weft__loop_next_round), a FIFO of the
	 * loop thread's own, and the zero timer that runs them. */
	weft_task *round_head, **round_tail;
	struct event *round_ev;
	_Atomic uintptr_t owner; /* identity of the driving thread, or 0 */
	_Atomic int posters;     /* posts in progress, for a race-free free */
	_Atomic bool closed;     /* no more posts accepted */
	_Atomic bool stop_requested;
	pthread_t thread;
	bool has_thread;

	struct shutdown_hook *hooks;
	size_t hooks_len, hooks_cap;
	weft_channel *channels;
	_Atomic size_t channels_len; /* read by weft_loop_get_stats */
	bool shutting_down;
	struct event *shutdown_ev;

	struct common_timeout common[COMMON_TIMEOUTS_MAX];
	size_t common_len;

	_Atomic uint64_t wakeups;
	_Atomic uint64_t tasks_run;
	_Atomic uint64_t max_batch;

	/* Busy polling (weft_loop_set_busy_poll): how long to poll without
	 * sleeping after the last work, and that work's count, which only
	 * the loop thread moves. */
	_Atomic uint32_t busy_poll_us;
	uint64_t work;
};

/* Each thread's identity: the address of a thread-local. */
static _Thread_local char thread_marker;

static uintptr_t
this_thread(void)
{
	return (uintptr_t)&thread_marker;
}

static void
stat_add(_Atomic uint64_t *counter, uint64_t n)
{
	/* Only the loop thread writes, so a load and store suffice. */
	atomic_store_explicit(
	    counter, atomic_load_explicit(counter, memory_order_relaxed) + n,
	    memory_order_relaxed);
}

static size_t
run_tasks(weft_loop *loop, int status)
{
	weft_task *t, *next;
	size_t n = 0;

	t = weft__mpsc_take_all(&loop->tasks);
	while (t != NULL) {
		/* The callback may free or re-post its task. */
		next = atomic_load_explicit(WEFT__TASK_NEXT(t),
		                            memory_order_relaxed);
		t->cb(loop, status, t->arg);
		t = next;
		n++;
	}
	return n;
}

static void
on_wake(evutil_socket_t fd, short what, void *arg)
{
	weft_loop *loop = arg;
	size_t n;

	(void)fd;
	(void)what;
	n = run_tasks(loop, 0);
	loop->work++;
	stat_add(&loop->wakeups, 1);
	stat_add(&loop->tasks_run, n);
	if (n > atomic_load_explicit(&loop->max_batch, memory_order_relaxed))
		atomic_store_explicit(&loop->max_batch, n,
		                      memory_order_relaxed);
	if (atomic_load_explicit(&loop->stop_requested, memory_order_acquire))
		event_base_loopbreak(loop->base);
}

/* A zero timeout is due after the next poll: libevent runs expired timers
 * after the events that poll found ready. */
static void
arm_round(weft_loop *loop)
{
	static const struct timeval now = {0, 0};

	if (loop->round_head != NULL && !evtimer_pending(loop->round_ev, NULL))
		evtimer_add(loop->round_ev, &now);
}

/*
 * A round runs at most ROUND_TASKS of its tasks before the loop polls
 * again; the rest keep their places, ahead of tasks deferred since. A
 * channel that gave up its read turn (weft_channel_yield) comes back as
 * one task, so a socket that turns ready while many such channels wait
 * is served after at most ROUND_TASKS of their turns, not after all of
 * them: with 32 flooding clients of 32 messages a turn, that is the
 * difference between a quarter and the whole of a millisecond here
 * (docs/BENCHMARKS.md, "--probe").
 */
#define ROUND_TASKS 8

/* Runs up to max tasks of the round that is due, in the order deferred;
 * those they defer wait for a later one. Returns how many ran. */
static size_t
run_round(weft_loop *loop, int status, size_t max)
{
	weft_task *t = loop->round_head, **cut = &loop->round_head, *next;
	size_t n = 0;

	while (*cut != NULL && n < max) {
		cut = &(*cut)->next;
		n++;
	}
	loop->round_head = *cut;
	*cut = NULL;
	if (loop->round_head == NULL)
		loop->round_tail = &loop->round_head;
	/* What is left of the round, and whatever the tasks defer, comes
	 * after the next poll. */
	arm_round(loop);
	while (t != NULL) {
		next = t->next;
		t->next = NULL;
		t->cb(loop, status, t->arg);
		t = next;
	}
	return n;
}

static void
on_round(evutil_socket_t fd, short what, void *arg)
{
	weft_loop *loop = arg;

	(void)fd;
	(void)what;
	loop->work++;
	stat_add(&loop->tasks_run, run_round(loop, 0, ROUND_TASKS));
}

void
weft__loop_next_round(weft_loop *loop, weft_task *task)
{
	WEFT_ASSERT_IN_LOOP(loop);
	task->next = NULL;
	*loop->round_tail = task;
	loop->round_tail = &task->next;
	arm_round(loop);
}

int
weft_loop_new(weft_loop **out)
{
	weft_loop *loop;
	int rv;

	if ((rv = weft_init()) != 0)
		return rv;
	if ((loop = calloc(1, sizeof(*loop))) == NULL)
		return WEFT_ENOMEM;
	if ((loop->base = event_base_new()) == NULL)
		goto err_free_loop;
	loop->wake_ev = event_new(loop->base, -1, 0, on_wake, loop);
	if (loop->wake_ev == NULL)
		goto err_free_base;
	loop->round_tail = &loop->round_head;
	loop->round_ev = evtimer_new(loop->base, on_round, loop);
	if (loop->round_ev == NULL)
		goto err_free_wake;
	*out = loop;
	return 0;

err_free_wake:
	event_free(loop->wake_ev);
err_free_base:
	event_base_free(loop->base);
err_free_loop:
	free(loop);
	return WEFT_ENOMEM;
}

struct event_base *
weft_loop_base(weft_loop *loop)
{
	return loop->base;
}

/* The owner is 0 while no thread drives the loop (then the loop belongs to
 * whichever thread uses it, as during set-up), STARTING while its own
 * thread starts, and else the identity of the driving thread. */
#define STARTING ((uintptr_t)1)

bool
weft_loop_in_thread(const weft_loop *loop)
{
	uintptr_t owner =
	    atomic_load_explicit(&loop->owner, memory_order_relaxed);

	return owner == 0 || owner == this_thread();
}

/* Claims the loop for the calling thread; false if another drives it. */
static bool
claim(weft_loop *loop)
{
	uintptr_t expected = 0;

	if (atomic_load(&loop->owner) == this_thread())
		return true;
	return atomic_compare_exchange_strong(&loop->owner, &expected,
	                                      this_thread());
}

static void
release(weft_loop *loop)
{
	if (!loop->has_thread)
		atomic_store(&loop->owner, 0);
}

void
weft__loop_note_work(weft_loop *loop)
{
	loop->work++;
}

void
weft_loop_set_busy_poll(weft_loop *loop, uint32_t us)
{
	atomic_store_explicit(&loop->busy_poll_us, us, memory_order_relaxed);
	/* A sleeping loop takes the new setting when it wakes. */
}

static bool
stopping(weft_loop *loop)
{
	return atomic_load_explicit(&loop->stop_requested,
	                            memory_order_acquire);
}

/* Polls without sleeping until us microseconds have passed since the
 * last pass that found work, then returns to sleep in the poll. */
static void
busy_poll(weft_loop *loop, uint32_t us)
{
	uint64_t until = weft_now_ns() + (uint64_t)us * 1000u, seen, now;

	while (!stopping(loop)) {
		seen = loop->work;
		event_base_loop(loop->base, EVLOOP_NONBLOCK);
		now = weft_now_ns();
		if (loop->work != seen)
			until = now + (uint64_t)us * 1000u;
		else if (now >= until)
			return;
	}
}

int
weft_loop_run(weft_loop *loop)
{
	uint32_t us;

	if (!claim(loop))
		return WEFT_EBUSY;
	while (!stopping(loop)) {
		us = atomic_load_explicit(&loop->busy_poll_us,
		                          memory_order_relaxed);
		if (us == 0) {
			event_base_loop(loop->base, EVLOOP_NO_EXIT_ON_EMPTY);
			continue;
		}
		/* One sleeping poll, its work, then polls that do not sleep
		 * while work keeps coming. */
		event_base_loop(loop->base,
		                EVLOOP_ONCE | EVLOOP_NO_EXIT_ON_EMPTY);
		busy_poll(loop, us);
	}
	/* Run what was queued before the stop, and one more non-blocking
	 * pass so that libevent's finalizers close the sockets of channels
	 * torn down during the last pass; then hand the loop back. */
	stat_add(&loop->tasks_run, run_tasks(loop, 0));
	event_base_loop(loop->base, EVLOOP_NONBLOCK);
	atomic_store(&loop->stop_requested, false);
	release(loop);
	return 0;
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	*(bool *)arg = true;
}

int
weft_loop_run_until(weft_loop *loop, bool (*done)(void *arg), void *arg,
                    uint64_t timeout_ms)
{
	struct timeval tv;
	struct event *deadline;
	bool expired = false;
	int rv = 0;

	if (!claim(loop))
		return WEFT_EBUSY;
	tv.tv_sec = (time_t)(timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000;
	deadline = evtimer_new(loop->base, on_deadline, &expired);
	if (deadline == NULL)
		return WEFT_ENOMEM;
	evtimer_add(deadline, &tv);
	while (!done(arg)) {
		if (expired) {
			rv = WEFT_ETIMEDOUT;
			break;
		}
		event_base_loop(loop->base,
		                EVLOOP_ONCE | EVLOOP_NO_EXIT_ON_EMPTY);
	}
	event_free(deadline);
	release(loop);
	return rv;
}

static void *
thread_main(void *arg)
{
	weft_loop *loop = arg;

	atomic_store(&loop->owner, this_thread());
	weft_loop_run(loop);
	/* A loop that shut down takes no more tasks: posts are refused from
	 * now on, and those that came after its last round run here with
	 * WEFT_ESHUTDOWN, so that nobody waits for a task that never runs. */
	if (loop->shutting_down) {
		atomic_store(&loop->closed, true);
		while (atomic_load(&loop->posters) > 0)
			sched_yield();
		run_tasks(loop, WEFT_ESHUTDOWN);
	}
	return NULL;
}

int
weft_loop_start(weft_loop *loop)
{
	uintptr_t expected = 0;

	if (loop->has_thread ||
	    !atomic_compare_exchange_strong(&loop->owner, &expected, STARTING))
		return WEFT_EBUSY;
	if (pthread_create(&loop->thread, NULL, thread_main, loop) != 0) {
		atomic_store(&loop->owner, 0);
		return WEFT_ENOMEM;
	}
	pthread_setname_np(loop->thread, "weft-loop");
	loop->has_thread = true;
	return 0;
}

void
weft_loop_stop(weft_loop *loop)
{
	atomic_store_explicit(&loop->stop_requested, true,
	                      memory_order_release);
	event_active(loop->wake_ev, EV_READ, 1);
}

void
weft_loop_join(weft_loop *loop)
{
	if (!loop->has_thread)
		return;
	pthread_join(loop->thread, NULL);
	loop->has_thread = false;
	atomic_store(&loop->owner, 0);
}

int
weft_loop_post_task(weft_loop *loop, weft_task *task)
{
	int rv = 0;

	atomic_fetch_add_explicit(&loop->posters, 1, memory_order_acq_rel);
	if (atomic_load_explicit(&loop->closed, memory_order_acquire))
		rv = WEFT_ESHUTDOWN;
	else if (weft__mpsc_push(&loop->tasks, task))
		event_active(loop->wake_ev, EV_READ, 1);
	atomic_fetch_sub_explicit(&loop->posters, 1, memory_order_acq_rel);
	return rv;
}

struct posted {
	weft_task task;
	weft_task_cb cb;
	void *arg;
};

static void
run_posted(weft_loop *loop, int status, void *arg)
{
	struct posted *p = arg;
	weft_task_cb cb = p->cb;
	void *cb_arg = p->arg;

	free(p);
	cb(loop, status, cb_arg);
}

int
weft_loop_post(weft_loop *loop, weft_task_cb cb, void *arg)
{
	struct posted *p;
	int rv;

	if ((p = malloc(sizeof(*p))) == NULL)
		return WEFT_ENOMEM;
	p->task.cb = run_posted;
	p->task.arg = p;
	p->cb = cb;
	p->arg = arg;
	if ((rv = weft_loop_post_task(loop, &p->task)) != 0)
		free(p);
	return rv;
}

int
weft_loop_on_shutdown(weft_loop *loop, weft_shutdown_cb cb, void *arg)
{
	struct shutdown_hook *hook;

	hook =
	    WEFT__ARRAY_ROOM(loop->hooks, loop->hooks_cap, loop->hooks_len, 4);
	if (hook == NULL)
		return WEFT_ENOMEM;
	hook->cb = cb;
	hook->arg = arg;
	loop->hooks_len++;
	return 0;
}

void
weft_loop_remove_shutdown(weft_loop *loop, weft_shutdown_cb cb, void *arg)
{
	size_t i;

	for (i = 0; i < loop->hooks_len; i++) {
		if (loop->hooks[i].cb == cb && loop->hooks[i].arg == arg) {
			memmove(&loop->hooks[i], &loop->hooks[i + 1],
			        (loop->hooks_len - i - 1) *
			            sizeof(loop->hooks[0]));
			loop->hooks_len--;
			return;
		}
	}
}

void
weft__loop_add_channel(weft_loop *loop, weft_channel *ch)
{
	ch->loop_prev = NULL;
	ch->loop_next = loop->channels;
	if (loop->channels != NULL)
		loop->channels->loop_prev = ch;
	loop->channels = ch;
	loop->channels_len++;
}

void
weft__loop_remove_channel(weft_loop *loop, weft_channel *ch)
{
	if (ch->loop_prev != NULL)
		ch->loop_prev->loop_next = ch->loop_next;
	else
		loop->channels = ch->loop_next;
	if (ch->loop_next != NULL)
		ch->loop_next->loop_prev = ch->loop_prev;
	ch->loop_next = ch->loop_prev = NULL;
	loop->channels_len--;
	if (loop->shutting_down && loop->channels_len == 0)
		weft_loop_stop(loop);
}

static void
abort_all_channels(weft_loop *loop)
{
	weft_channel *ch, *next;

	for (ch = loop->channels; ch != NULL; ch = next) {
		next = ch->loop_next;
		weft__channel_abort(ch);
	}
}

static void
on_shutdown_deadline(evutil_socket_t fd, short what, void *arg)
{
	weft_loop *loop = arg;

	(void)fd;
	(void)what;
	if (loop->channels_len > 0)
		weft_warn("loop shutdown: closing %zu channel(s) whose writes "
		          "did not drain in time",
		          loop->channels_len);
	abort_all_channels(loop);
	weft_loop_stop(loop);
}

/* Runs the shutdown hooks, once each. A hook leaves the list before it
 * runs, so hooks may remove themselves or each other (a connect cancelling
 * the handshake it waits for), and hooks added meanwhile run too. */
static void
run_hooks(weft_loop *loop, uint64_t deadline_ns)
{
	struct shutdown_hook hook;

	loop->shutting_down = true;
	while (loop->hooks_len > 0) {
		hook = loop->hooks[0];
		memmove(&loop->hooks[0], &loop->hooks[1],
		        (loop->hooks_len - 1) * sizeof(loop->hooks[0]));
		loop->hooks_len--;
		hook.cb(loop, deadline_ns, hook.arg);
	}
}

static void
begin_shutdown(weft_loop *loop, int status, void *arg)
{
	uint64_t timeout_ms = (uint64_t)(uintptr_t)arg;
	weft_channel *ch, *next;
	struct timeval tv;

	if (status != 0 || loop->shutting_down)
		return;
	run_hooks(loop, weft_now_ns() + timeout_ms * 1000000u);
	for (ch = loop->channels; ch != NULL; ch = next) {
		next = ch->loop_next;
		weft__channel_close_within(ch, timeout_ms);
	}
	if (loop->channels_len == 0) {
		weft_loop_stop(loop);
		return;
	}
	loop->shutdown_ev = evtimer_new(loop->base, on_shutdown_deadline, loop);
	if (loop->shutdown_ev == NULL) {
		abort_all_channels(loop);
		weft_loop_stop(loop);
		return;
	}
	tv.tv_sec = (time_t)(timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000;
	evtimer_add(loop->shutdown_ev, &tv);
}

void
weft_loop_shutdown(weft_loop *loop, uint64_t timeout_ms)
{
	weft_loop_post(loop, begin_shutdown, (void *)(uintptr_t)timeout_ms);
}

void
weft_loop_get_stats(const weft_loop *loop, weft_loop_stats *out)
{
	out->wakeups =
	    atomic_load_explicit(&loop->wakeups, memory_order_relaxed);
	out->tasks_run =
	    atomic_load_explicit(&loop->tasks_run, memory_order_relaxed);
	out->max_batch =
	    atomic_load_explicit(&loop->max_batch, memory_order_relaxed);
	out->channels_open = loop->channels_len;
}

const struct timeval *
weft_loop_timeval(weft_loop *loop, uint64_t timeout_ms, struct timeval *scratch)
{
	const struct timeval *tv;
	size_t i;

	scratch->tv_sec = (time_t)(timeout_ms / 1000);
	scratch->tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000;
	for (i = 0; i < loop->common_len; i++)
		if (loop->common[i].ms == timeout_ms)
			return loop->common[i].tv;
	if (loop->common_len == COMMON_TIMEOUTS_MAX)
		return scratch;
	tv = event_base_init_common_timeout(loop->base, scratch);
	if (tv == NULL)
		return scratch;
	loop->common[loop->common_len].ms = timeout_ms;
	loop->common[loop->common_len].tv = tv;
	loop->common_len++;
	return tv;
}

void
weft_loop_free(weft_loop *loop)
{
	int spins;

	if (loop == NULL)
		return;
	if (loop->has_thread) {
		weft_loop_stop(loop);
		weft_loop_join(loop);
	}
	loop->has_thread = false;
	/* From here on this thread is the loop's. */
	atomic_store(&loop->owner, this_thread());
	atomic_store(&loop->closed, true);
	while (atomic_load(&loop->posters) > 0)
		sched_yield();
	/* Hooks not run yet (no shutdown, or added since) run now, so that
	 * pending operations (connects, handshakes) end. */
	run_hooks(loop, weft_now_ns());
	abort_all_channels(loop);
	/* Let deferred callbacks and queued tasks run out; posts are
	 * refused now, so this ends. */
	for (spins = 0; spins < 64; spins++) {
		size_t n = run_tasks(loop, WEFT_ESHUTDOWN) +
		           run_round(loop, WEFT_ESHUTDOWN, SIZE_MAX);

		event_base_loop(loop->base, EVLOOP_NONBLOCK);
		if (n == 0 && loop->channels_len == 0)
			break;
	}
	if (loop->channels_len > 0)
		weft_error("loop freed with %zu channel(s) still referenced",
		           loop->channels_len);
	run_tasks(loop, WEFT_ESHUTDOWN);
	run_round(loop, WEFT_ESHUTDOWN, SIZE_MAX);
	if (loop->shutdown_ev != NULL)
		event_free(loop->shutdown_ev);
	event_free(loop->round_ev);
	event_free(loop->wake_ev);
	event_base_free(loop->base);
	free(loop->hooks);
	free(loop);
}
