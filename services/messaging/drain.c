/* SPDX-License-Identifier: MIT */
/*
 * drain.c: what the service's stop waits for, and how the rest of the
 * service tells it that it may hold now.
 *
 * Every file that takes a count down to zero (requests pending, inbound
 * bytes in flight, bytes queued for a member, connections open, API
 * callers) calls in here, and stop.c's stages read the same predicates.
 * Nothing here calls back up into the stop: a kick posts the stop's own
 * task (set by weft_msvc_stop_async), so the counting files sit below the
 * stop and the stop's stages above them.
 */
#include "msvc_int.h"

/* The loads are sequentially consistent: see weft__msvc_drained. */
bool
weft__msvc_is_quiet(weft_msvc *svc)
{
	uint32_t p;

	if (atomic_load(&svc->pending) != 0 ||
	    atomic_load(&svc->inflight) != 0 ||
	    atomic_load(&svc->urgent_inflight) != 0)
		return false;
	for (p = 0; p < svc->npeers; p++)
		if (atomic_load(&svc->peers[p]->queued_bytes) != 0)
			return false;
	return true;
}

bool
weft__msvc_is_closed(weft_msvc *svc)
{
	uint32_t i;

	if (atomic_load(&svc->st.connections_open) != 0)
		return false;
	for (i = 0; i < svc->nloops; i++)
		if (atomic_load(&svc->loops[i].connects_in_progress) != 0 ||
		    atomic_load(&svc->loops[i].inbound_len) != 0)
			return false;
	return true;
}

void
weft__msvc_wake_if_quiet(weft_msvc *svc)
{
	if (weft__msvc_is_quiet(svc))
		weft__msvc_stop_kick(svc);
}

void
weft__msvc_wake_if_closed(weft_msvc *svc)
{
	if (weft__msvc_is_closed(svc))
		weft__msvc_stop_kick(svc);
}

/* A kick that finds no run under way posts the stop's task to the first
 * loop; if that loop takes no more tasks, the task runs here, told so by
 * its status (not 0: not on a running loop). */
void
weft__msvc_stop_kick(weft_msvc *svc)
{
	struct weft__msvc_stop *st = &svc->stop;

	if (!atomic_load(&st->armed))
		return;
	atomic_fetch_add(&st->kickers, 1);
	if (atomic_fetch_add(&st->kicks, 1) == 0 &&
	    weft_loop_post_task(svc->loops[0].loop, &st->task) != 0)
		st->task.cb(svc->loops[0].loop, WEFT_ESHUTDOWN, st->task.arg);
	atomic_fetch_sub(&st->kickers, 1);
}

bool
weft__msvc_enter(weft_msvc *svc)
{
	atomic_fetch_add(&svc->callers, 1);
	if (atomic_load(&svc->stopping)) {
		weft__msvc_leave(svc);
		return false;
	}
	return true;
}

/* The last caller to leave a stopping service moves its stop on. */
void
weft__msvc_leave(weft_msvc *svc)
{
	if (atomic_fetch_sub(&svc->callers, 1) == 1 &&
	    atomic_load(&svc->stopping))
		weft__msvc_stop_kick(svc);
}
