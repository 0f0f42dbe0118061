/* SPDX-License-Identifier: MIT */
/*
 * wait.c: what every wait on the service by a thread that is not one of
 * its loops needs: a condition variable and deadlines on CLOCK_MONOTONIC
 * (so that a change of the wall clock neither shortens nor stretches a
 * timeout), the check that the caller is not one of the loops (where
 * waiting would never end), and the condition that waiters for a peer's
 * state sleep on, woken by whatever changes it.
 */
#include <time.h>

#include "msvc_int.h"

/* A condition variable that waits on the monotonic clock. */
void
weft__msvc_cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
}

bool
weft__msvc_deadline_in(uint64_t timeout_ms, struct timespec *at)
{
	uint64_t ns;

	if (timeout_ms >= (uint64_t)1 << 40) /* 34 years: for ever */
		return false;
	ns = weft_now_ns() + timeout_ms * 1000000u;
	at->tv_sec = (time_t)(ns / 1000000000u);
	at->tv_nsec = (long)(ns % 1000000000u);
	return true;
}

bool
weft__msvc_on_own_loop(const weft_msvc *svc)
{
	uint32_t i;

	for (i = 0; i < svc->nloops; i++)
		if (weft_loop_in_thread(svc->loops[i].loop))
			return true;
	return false;
}

void
weft__msvc_sync_init(weft_msvc *svc)
{
	pthread_mutex_init(&svc->sync_lock, NULL);
	weft__msvc_cond_init_monotonic(&svc->sync_cond);
}

void
weft__msvc_sync_fini(weft_msvc *svc)
{
	pthread_cond_destroy(&svc->sync_cond);
	pthread_mutex_destroy(&svc->sync_lock);
}

void
weft__msvc_sync_notify(weft_msvc *svc)
{
	pthread_mutex_lock(&svc->sync_lock);
	pthread_cond_broadcast(&svc->sync_cond);
	pthread_mutex_unlock(&svc->sync_lock);
}
