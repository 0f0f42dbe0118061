/* SPDX-License-Identifier: MIT */
/*
 * stop.c: the service's stop, and what each loop does for it.
 *
 * weft_msvc_stop_async moves through the stages of weft__msvc_stop_stage
 * without a thread that waits: each stage ends when what it waits for
 * holds, and whatever makes it hold kicks (a loop done with the stage's
 * task, the last request answered, the last connection closed, the last
 * API caller gone, the last worker out, or the first loop's timer at a
 * deadline). A kick that finds no run under way posts one to the first
 * loop; kicks during a run make it look again, so a run is never two at
 * once and a kick is never lost. weft_msvc_stop is the same stop and a
 * wait for its end. When the loops no longer run (the group was shut
 * down first), a kick runs the stop where it is, and deadlines are not
 * waited for: nothing would move on meanwhile.
 */
#include <sched.h>
#include <stdlib.h>

#include "msvc_int.h"

/* ---- A task on every loop --------------------------------------------- */

static void
each_task(weft_loop *loop, int status, void *arg)
{
	struct weft__msvc_loop *ml = arg;
	weft_msvc *svc = ml->svc;
	void (*done)(weft_msvc * svc) = svc->each_done;

	(void)loop;
	(void)status;
	ml->each_fn(ml);
	if (atomic_fetch_sub(&svc->each_left, 1) == 1)
		done(svc);
}

void
weft__msvc_each_loop(weft_msvc *svc, void (*fn)(struct weft__msvc_loop *ml),
                     void (*done)(weft_msvc *svc))
{
	struct weft__msvc_loop *ml;
	uint32_t i;

	svc->each_done = done;
	atomic_store(&svc->each_left, svc->nloops);
	for (i = 0; i < svc->nloops; i++) {
		ml = &svc->loops[i];
		ml->each_fn = fn;
		ml->each_task = (weft_task){.cb = each_task, .arg = ml};
		if (weft_loop_post_task(ml->loop, &ml->each_task) != 0)
			each_task(NULL, 0, ml);
	}
}

/* ---- What each loop does ---------------------------------------------- */

static bool
loop_is_home(const weft_msvc_peer *peer, const struct weft__msvc_loop *ml)
{
	return peer->home == ml;
}

/* First stage on each loop: end everything that is in flight. */
static void
loop_shutdown(struct weft__msvc_loop *ml)
{
	weft_msvc *svc = ml->svc;
	struct weft__msvc_outbound *o;
	struct weft__msvc_inbound *in;
	weft_msvc_peer *peer;
	uint32_t p, cls, i;

	for (p = 0; p < svc->npeers; p++) {
		peer = svc->peers[p];
		if (!loop_is_home(peer, ml))
			continue;
		if (peer->hb_timer != NULL)
			weft_timer_stop(peer->hb_timer);
		weft__msvc_member_stop(peer);
		for (cls = 0; cls < WEFT_MSVC_CLASSES; cls++)
			for (i = 0; i < svc->cfg->limits.connections[cls];
			     i++) {
				o = &peer->conns[cls][i];
				weft__msvc_conn_purge_backlog(&o->conn, true);
				if (o->backoff != NULL)
					weft_timer_stop(o->backoff);
				if (o->reply_timer != NULL)
					weft_timer_stop(o->reply_timer);
				weft__msvc_conn_close(&o->conn,
				                      "shutting down");
			}
	}
	weft__msvc_fail_all_pending(ml, WEFT_ESHUTDOWN);
	LIST_FOREACH(in, &ml->inbound, link)
	{
		weft__msvc_conn_close(&in->conn, "shutting down");
	}
}

static void on_group_shutdown(weft_loop *loop, uint64_t deadline_ns, void *arg);

/* Timers belong to their loop: freed there, not by weft_msvc_free. */
static void
free_conn_timers(weft_msvc_peer *peer)
{
	uint32_t cls, i;

	for (cls = 0; cls < WEFT_MSVC_CLASSES; cls++)
		for (i = 0; i < peer->svc->cfg->limits.connections[cls]; i++)
			weft__msvc_conn_free_timers(&peer->conns[cls][i].conn);
}

/* Last stage: free what must be freed on the loop thread. */
static void
loop_teardown(struct weft__msvc_loop *ml)
{
	weft_msvc *svc = ml->svc;
	uint32_t p;

	for (p = 0; p < svc->npeers; p++) {
		weft_msvc_peer *peer = svc->peers[p];

		if (!loop_is_home(peer, ml))
			continue;
		if (peer->hb_timer != NULL)
			weft_timer_free(peer->hb_timer);
		peer->hb_timer = NULL;
		weft__msvc_member_free_timers(peer);
		free_conn_timers(peer);
	}
	weft__msvc_fail_all_pending(ml, WEFT_ESHUTDOWN);
	if (ml->hooked)
		weft_loop_remove_shutdown(ml->loop, on_group_shutdown, ml);
	ml->hooked = false;
	if (ml->index == 0) {
		weft_timer_free(svc->stop.timer);
		svc->stop.timer = NULL;
	}
	weft__msvc_loop_fini(ml);
}

/* Heartbeats in flight end when the stop begins (none starts after it):
 * nobody waits for them, and one sent to a peer that had just gone held
 * the drain for its whole timeout. */
static void
loop_end_heartbeats(struct weft__msvc_loop *ml)
{
	weft__msvc_fail_internal_pending(ml, WEFT_ESHUTDOWN);
}

/*
 * The group shuts down under a running service (weft_loop_group_shutdown
 * before weft_msvc_stop): on each loop, before the loop closes its
 * channels, the service stops taking work, and what this loop holds ends
 * at once: its heartbeats, its pending requests (WEFT_ESHUTDOWN, each
 * callback once), its queued messages and its connections. The loop's
 * own shutdown then lets the connections' writes drain. weft_msvc_stop
 * (or weft_msvc_free) afterwards frees what is left.
 */
static void
on_group_shutdown(weft_loop *loop, uint64_t deadline_ns, void *arg)
{
	struct weft__msvc_loop *ml = arg;
	weft_msvc *svc = ml->svc;

	(void)loop;
	(void)deadline_ns;
	ml->hooked = false;
	atomic_store(&svc->stopping, true);
	atomic_store(&svc->stopped, true);
	weft__msvc_sync_notify(svc);
	weft__msvc_capacity_stop(svc);
	loop_end_heartbeats(ml);
	loop_shutdown(ml);
}

/* ---- What the stop waits for ------------------------------------------ */

/* deadline_ns has passed, or cannot be waited for (the loops no longer
 * run); otherwise the timer looks again then. */
static bool
passed(weft_msvc *svc, uint64_t deadline_ns)
{
	struct weft__msvc_stop *st = &svc->stop;
	uint64_t now = weft_now_ns();

	if (now >= deadline_ns || !st->on_loop || st->timer == NULL)
		return true;
	/* Rounded up, and looked at again if it fires a tick early. */
	weft_timer_start(st->timer, (deadline_ns - now + 999999) / 1000000, 0);
	return false;
}

static bool
loops_done(weft_msvc *svc)
{
	return atomic_load(&svc->each_left) == 0;
}

/* ---- The stages -------------------------------------------------------- */

static void
each_loop(weft_msvc *svc, void (*fn)(struct weft__msvc_loop *ml))
{
	weft__msvc_each_loop(svc, fn, weft__msvc_stop_kick);
}

/* Moves to the next stage when this one's wait is over, starting what
 * the next waits for; false while it is not. */
static bool
advance(weft_msvc *svc)
{
	struct weft__msvc_stop *st = &svc->stop;

	switch (st->stage) {
	case WEFT__MSVC_STOP_NONE:
	case WEFT__MSVC_STOP_DONE:
		return false;
	case WEFT__MSVC_STOP_CALLERS:
		if (atomic_load(&svc->callers) > 0)
			return false;
		st->stage = WEFT__MSVC_STOP_HEARTBEATS;
		/* The listener stays open while draining, but new handshakes
		 * are answered SHUTTING_DOWN (so dialers know, rather than
		 * wait), but for members that owe us answers: they reply on
		 * their own connections. */
		if (atomic_load(&svc->started))
			each_loop(svc, loop_end_heartbeats);
		return true;
	case WEFT__MSVC_STOP_HEARTBEATS:
		if (!loops_done(svc))
			return false;
		st->stage = WEFT__MSVC_STOP_DRAIN;
		return true;
	case WEFT__MSVC_STOP_DRAIN:
		if (atomic_load(&svc->started) && !weft__msvc_is_quiet(svc) &&
		    !passed(svc, st->drain_deadline_ns))
			return false;
		st->stage = WEFT__MSVC_STOP_GUARD;
		each_loop(svc, weft__msvc_guard_loop_stop);
		return true;
	case WEFT__MSVC_STOP_GUARD:
		if (!loops_done(svc))
			return false;
		if (svc->server != NULL)
			weft_server_close(svc->server, NULL, NULL);
		svc->server = NULL;
		atomic_store(&svc->stopped, true);
		st->stage = WEFT__MSVC_STOP_CALLERS2;
		return true;
	case WEFT__MSVC_STOP_CALLERS2:
		if (atomic_load(&svc->callers) > 0)
			return false;
		st->stage = WEFT__MSVC_STOP_SHUTDOWN;
		each_loop(svc, loop_shutdown);
		return true;
	case WEFT__MSVC_STOP_SHUTDOWN:
		if (!loops_done(svc))
			return false;
		/* Channels close within their linger time; a little longer. */
		st->close_deadline_ns =
		    weft_now_ns() + (WEFT__MSVC_LINGER_MS + 1000) * 1000000ull;
		st->stage = WEFT__MSVC_STOP_CLOSE;
		return true;
	case WEFT__MSVC_STOP_CLOSE:
		if (!weft__msvc_is_closed(svc)) {
			if (!passed(svc, st->close_deadline_ns))
				return false;
			weft_warn("msvc %s: connections still closing at "
			          "shutdown",
			          svc->id);
		}
		st->stage = WEFT__MSVC_STOP_WORKERS;
		weft__msvc_pool_quit(svc);
		return true;
	case WEFT__MSVC_STOP_WORKERS:
		if (!weft__msvc_pool_idle(svc))
			return false;
		st->stage = WEFT__MSVC_STOP_TEARDOWN;
		each_loop(svc, loop_teardown);
		return true;
	case WEFT__MSVC_STOP_TEARDOWN:
		if (!loops_done(svc))
			return false;
		st->stage = WEFT__MSVC_STOP_DONE;
		return false;
	}
	return false;
}

/* The end: the caller's callback, then weft_msvc_stop's waiters, who may
 * free the service at once: nothing of it is touched after. */
static void
finish(weft_msvc *svc)
{
	struct weft__msvc_stop *st = &svc->stop;

	if (st->cb != NULL)
		st->cb(svc, st->cb_arg);
	pthread_mutex_lock(&svc->wait_lock);
	st->done = true;
	pthread_cond_broadcast(&svc->wait_cond);
	pthread_mutex_unlock(&svc->wait_lock);
}

/* One run: as many passes as kicks came meanwhile. A run that ends the
 * stop keeps its kicks, so that none starts another. */
static void
run(weft_msvc *svc, bool on_loop)
{
	struct weft__msvc_stop *st = &svc->stop;
	uint32_t n;

	for (;;) {
		n = atomic_load(&st->kicks);
		st->on_loop = on_loop;
		while (advance(svc))
			;
		if (st->stage == WEFT__MSVC_STOP_DONE) {
			finish(svc);
			return;
		}
		if (atomic_fetch_sub(&st->kicks, n) == n)
			return;
	}
}

static void
run_task(weft_loop *loop, int status, void *arg)
{
	weft_msvc *svc = arg;

	/* Not 0: the loop is ending, and its timers with it. */
	run(svc, status == 0 && weft_loop_in_thread(loop));
}

static void
on_timer(weft_timer *timer, void *arg)
{
	(void)timer;
	weft__msvc_stop_kick(arg);
}

/* ---- The API ----------------------------------------------------------- */

int
weft_msvc_stop_async(weft_msvc *svc, uint64_t timeout_ms, weft_msvc_stop_cb cb,
                     void *arg)
{
	struct weft__msvc_stop *st = &svc->stop;
	uint64_t now = weft_now_ns();

	if (atomic_exchange(&svc->stop_called, true))
		return WEFT_EBUSY;
	st->drain_deadline_ns = UINT64_MAX;
	if (timeout_ms < (UINT64_MAX - now) / 1000000)
		st->drain_deadline_ns = now + timeout_ms * 1000000;
	st->cb = cb;
	st->cb_arg = arg;
	st->task = (weft_task){.cb = run_task, .arg = svc};
	st->stage = WEFT__MSVC_STOP_CALLERS;
	atomic_store(&st->armed, true);
	atomic_store(&svc->stopping, true);
	weft__msvc_sync_notify(svc); /* waiters for a peer give up */
	weft__msvc_capacity_stop(svc);
	weft__msvc_stop_kick(svc);
	return 0;
}

void
weft_msvc_stop(weft_msvc *svc, uint64_t timeout_ms)
{
	(void)weft_msvc_stop_async(svc, timeout_ms, NULL, NULL);
	pthread_mutex_lock(&svc->wait_lock);
	while (!svc->stop.done)
		pthread_cond_wait(&svc->wait_cond, &svc->wait_lock);
	pthread_mutex_unlock(&svc->wait_lock);
}

int
weft__msvc_stop_loop_init(struct weft__msvc_loop *ml)
{
	weft_msvc *svc = ml->svc;

	if (ml->index == 0 &&
	    weft_timer_new(ml->loop, on_timer, svc, &svc->stop.timer) != 0)
		return WEFT_ENOMEM;
	if (weft_loop_on_shutdown(ml->loop, on_group_shutdown, ml) != 0)
		return WEFT_ENOMEM;
	ml->hooked = true;
	return 0;
}

void
weft__msvc_stop_fini(weft_msvc *svc)
{
	while (atomic_load(&svc->stop.kickers) != 0)
		sched_yield();
}
