/* SPDX-License-Identifier: MIT */
/* weft/loop.h: event loops, loop groups, cross-thread tasks and timers. */
#ifndef WEFT_LOOP_H
#define WEFT_LOOP_H

#include <weft/core.h>

#ifdef __cplusplus
extern "C" {
#endif

struct event_base;

/* One libevent event_base driven by one thread. */
typedef struct weft_loop weft_loop;
/* N loops, each on its own thread. */
typedef struct weft_loop_group weft_loop_group;
typedef struct weft_timer weft_timer;

/*
 * A task callback runs exactly once on the loop's thread. status is 0, or
 * WEFT_ESHUTDOWN when the loop is being freed and the task only gets the
 * chance to release what it holds.
 */
typedef void (*weft_task_cb)(weft_loop *loop, int status, void *arg);

/*
 * An intrusive task, for posting without allocation. The caller owns the
 * storage and must keep it alive until its callback has run; the fields are
 * the loop's while it is queued. next is private to the loop, which reads
 * and writes it atomically (a plain pointer here, so that the header is
 * also C++).
 */
typedef struct weft_task {
	struct weft_task *next;
	weft_task_cb cb;
	void *arg;
} weft_task;

/* Hooks run on the loop thread when the loop shuts down (see
 * weft_loop_group_shutdown): a server stops accepting, a service stops
 * sending. deadline_ns is weft_now_ns() based. */
typedef void (*weft_shutdown_cb)(weft_loop *loop, uint64_t deadline_ns,
                                 void *arg);

/* weft_loop_new creates a loop that is not running yet. Returns 0 or
 * WEFT_ENOMEM. Any thread. */
WEFT_API int weft_loop_new(weft_loop **out);

/* weft_loop_start runs the loop on a new thread of its own. Returns 0,
 * WEFT_EBUSY (it runs already) or WEFT_ENOMEM (no thread). Any thread. */
WEFT_API int weft_loop_start(weft_loop *loop);

/*
 * weft_loop_run drives the loop on the calling thread until weft_loop_stop()
 * is called. Returns 0, or WEFT_EBUSY if it already runs. Any thread, which
 * is the loop's thread until it returns.
 */
WEFT_API int weft_loop_run(weft_loop *loop);

/*
 * weft_loop_run_until drives the loop on the calling thread until done(arg)
 * holds (checked after every loop iteration) or timeout_ms passes. Returns
 * 0, WEFT_ETIMEDOUT, WEFT_ENOMEM, or WEFT_EBUSY if another thread runs
 * it. For tests and simple programs. Any thread, which is the loop's
 * thread until it returns.
 */
WEFT_API int weft_loop_run_until(weft_loop *loop, bool (*done)(void *arg),
                                 void *arg, uint64_t timeout_ms);

/*
 * weft_loop_set_busy_poll makes the loop, once woken, poll its sockets and
 * tasks without sleeping until us microseconds pass with no work, before
 * it sleeps in the poll again; 0 (the default) sleeps at once. A loop
 * that serves round trips then spends that time of a core after each
 * burst of work instead of paying a sleep and a wake-up per message, as
 * Seastar's and DPDK-style loops do: `weft-bench latency --busy-poll US`
 * reports what it saves and its CPU. It applies to loops driven by
 * weft_loop_run or weft_loop_start, from their next wake-up on. Any
 * thread.
 */
WEFT_API void weft_loop_set_busy_poll(weft_loop *loop, uint32_t us);

/* weft_loop_stop asks the loop to return from run after draining the tasks
 * queued so far. Any thread. */
WEFT_API void weft_loop_stop(weft_loop *loop);

/* weft_loop_join waits for a loop started with weft_loop_start to exit.
 * Not from the loop's own thread. */
WEFT_API void weft_loop_join(weft_loop *loop);

/*
 * weft_loop_free stops and joins the loop if needed, runs every task still
 * queued with WEFT_ESHUTDOWN, and frees it. Any channel still open on it is
 * closed first. Not from the loop's own thread.
 */
WEFT_API void weft_loop_free(weft_loop *loop);

/* weft_loop_base is the loop's event_base, for adding libevent events of
 * your own. Loop thread for anything but reading the pointer. */
WEFT_API struct event_base *weft_loop_base(weft_loop *loop);

/* weft_loop_in_thread is true on the thread that drives the loop (and on
 * any thread while none does). Any thread. */
WEFT_API bool weft_loop_in_thread(const weft_loop *loop);

/*
 * weft_loop_post queues cb(loop, 0, arg) to run on the loop. Tasks from one
 * thread run in the order posted; the loop runs every queued task per
 * wake-up and is woken at most once per batch. Returns 0, WEFT_ENOMEM, or
 * WEFT_ESHUTDOWN once the loop is stopping (cb then never runs).
 * Any thread.
 */
WEFT_API int weft_loop_post(weft_loop *loop, weft_task_cb cb, void *arg);

/* weft_loop_post_task is weft_loop_post without allocation: task->cb and
 * task->arg must be set. Same returns, except never WEFT_ENOMEM. Any
 * thread. */
WEFT_API int weft_loop_post_task(weft_loop *loop, weft_task *task);

/* weft_loop_on_shutdown registers a hook (see weft_shutdown_cb). Returns 0
 * or WEFT_ENOMEM. weft_loop_remove_shutdown removes the hook registered
 * with cb and arg, if there is one. Loop thread. */
WEFT_API int weft_loop_on_shutdown(weft_loop *loop, weft_shutdown_cb cb,
                                   void *arg);
WEFT_API void weft_loop_remove_shutdown(weft_loop *loop, weft_shutdown_cb cb,
                                        void *arg);

/*
 * weft_loop_shutdown begins a graceful shutdown: shutdown hooks run, every
 * channel of the loop is closed after its pending writes drain or at the
 * deadline, whichever is first, and then the loop stops. A loop on a thread
 * of its own (weft_loop_start, a group's) takes no tasks after that:
 * weft_loop_post refuses them with WEFT_ESHUTDOWN, and those that came
 * after its last round run with that status before its thread ends. Any
 * thread.
 */
WEFT_API void weft_loop_shutdown(weft_loop *loop, uint64_t timeout_ms);

/* Counters a loop keeps about itself. Read them from the loop thread, or
 * expect a slightly stale view from elsewhere. */
typedef struct weft_loop_stats {
	uint64_t wakeups;       /* cross-thread wake-ups delivered */
	uint64_t tasks_run;     /* tasks run */
	uint64_t max_batch;     /* most tasks run in one wake-up */
	uint64_t channels_open; /* channels currently bound to the loop */
} weft_loop_stats;

/* weft_loop_get_stats copies the loop's counters into *out. Any thread. */
WEFT_API void weft_loop_get_stats(const weft_loop *loop, weft_loop_stats *out);

/*
 * weft_loop_group_new creates and starts n loops (0: one per online CPU),
 * each on its own thread. Returns 0 or WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_loop_group_new(size_t n, weft_loop_group **out);
/* weft_loop_group_size returns the number of loops. Any thread. */
WEFT_API size_t weft_loop_group_size(const weft_loop_group *group);
/* weft_loop_group_at returns loop i (i < size). Any thread. */
WEFT_API weft_loop *weft_loop_group_at(weft_loop_group *group, size_t i);
/* weft_loop_group_next returns the group's loops in turn, round-robin.
 * Any thread. */
WEFT_API weft_loop *weft_loop_group_next(weft_loop_group *group);
/* weft_loop_group_by_key returns a loop of the group, always the same one
 * for the same key. Any thread. */
WEFT_API weft_loop *weft_loop_group_by_key(weft_loop_group *group,
                                           uint64_t key);
/* weft_loop_group_shutdown shuts down every loop (see weft_loop_shutdown)
 * and waits for their threads. Not from one of its loops. */
WEFT_API void weft_loop_group_shutdown(weft_loop_group *group,
                                       uint64_t timeout_ms);
/* weft_loop_group_free shuts the group down at once if needed and frees
 * every loop. Not from one of its loops. */
WEFT_API void weft_loop_group_free(weft_loop_group *group);

/* A timer callback runs on the timer's loop. */
typedef void (*weft_timer_cb)(weft_timer *timer, void *arg);

/* weft_timer_new creates a stopped timer on loop. Returns 0 or
 * WEFT_ENOMEM. Loop thread (or before the loop runs). */
WEFT_API int weft_timer_new(weft_loop *loop, weft_timer_cb cb, void *arg,
                            weft_timer **out);
/*
 * weft_timer_start fires cb after timeout_ms, then every repeat_ms if that
 * is not 0. Restarting a running timer reschedules it. Timers that share a
 * duration use libevent's common timeouts (O(1) each), so thousands of
 * equal request timeouts are cheap. The duration counts from the loop's
 * cached time (taken when the loop woke, on a coarse monotonic clock of
 * one kernel tick, often 4 ms), as libuv's timers count from uv_now(): a
 * timer may fire up to a tick before timeout_ms of real time has passed.
 * Code that must not act before a wall-clock deadline checks the clock
 * when the timer fires and starts it again for the rest. Returns 0, or
 * WEFT_EINVAL when libevent refuses the timeout. Loop thread.
 */
WEFT_API int weft_timer_start(weft_timer *timer, uint64_t timeout_ms,
                              uint64_t repeat_ms);
/* weft_timer_stop cancels a pending firing; safe inside its callback. Loop
 * thread. */
WEFT_API void weft_timer_stop(weft_timer *timer);
/* weft_timer_is_pending is true while a firing is scheduled. Loop
 * thread. */
WEFT_API bool weft_timer_is_pending(const weft_timer *timer);
/* weft_timer_free stops and frees the timer (NULL is ignored); safe inside
 * its callback. Loop thread. */
WEFT_API void weft_timer_free(weft_timer *timer);

/*
 * weft_loop_timeval returns a timeval for timeout_ms to pass to libevent's
 * event_add; durations used often come back as common timeouts. The result
 * lives as long as the loop. Loop thread.
 */
struct timeval;
WEFT_API const struct timeval *weft_loop_timeval(weft_loop *loop,
                                                 uint64_t timeout_ms,
                                                 struct timeval *scratch);

#ifdef __cplusplus
}
#endif

#endif
