/* SPDX-License-Identifier: MIT */
/* timer.c: one-shot and periodic timers on a loop. */
#include <stdlib.h>
#include <sys/time.h>

#include <event2/event.h>

#include "core_int.h"

struct weft_timer {
	weft_loop *loop;
	struct event *ev;
	weft_timer_cb cb;
	void *arg;
	uint64_t repeat_ms;
};

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	weft_timer *timer = arg;
	struct timeval scratch;

	(void)fd;
	(void)what;
	/* Re-arm before the callback, which may stop or free the timer. */
	if (timer->repeat_ms != 0)
		event_add(
		    timer->ev,
		    weft_loop_timeval(timer->loop, timer->repeat_ms, &scratch));
	timer->cb(timer, timer->arg);
}

int
weft_timer_new(weft_loop *loop, weft_timer_cb cb, void *arg, weft_timer **out)
{
	weft_timer *timer;

	WEFT_ASSERT_IN_LOOP(loop);
	if ((timer = calloc(1, sizeof(*timer))) == NULL)
		return WEFT_ENOMEM;
	timer->ev = evtimer_new(weft_loop_base(loop), on_timer, timer);
	if (timer->ev == NULL) {
		free(timer);
		return WEFT_ENOMEM;
	}
	timer->loop = loop;
	timer->cb = cb;
	timer->arg = arg;
	*out = timer;
	return 0;
}

int
weft_timer_start(weft_timer *timer, uint64_t timeout_ms, uint64_t repeat_ms)
{
	struct timeval scratch;

	WEFT_ASSERT_IN_LOOP(timer->loop);
	timer->repeat_ms = repeat_ms;
	if (event_add(timer->ev, weft_loop_timeval(timer->loop, timeout_ms,
	                                           &scratch)) != 0)
		return WEFT_EINVAL;
	return 0;
}

void
weft_timer_stop(weft_timer *timer)
{
	WEFT_ASSERT_IN_LOOP(timer->loop);
	timer->repeat_ms = 0;
	event_del(timer->ev);
}

bool
weft_timer_is_pending(const weft_timer *timer)
{
	return event_pending(timer->ev, EV_TIMEOUT, NULL) != 0;
}

void
weft_timer_free(weft_timer *timer)
{
	if (timer == NULL)
		return;
	WEFT_ASSERT_IN_LOOP(timer->loop);
	event_free(timer->ev);
	free(timer);
}
