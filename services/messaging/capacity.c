/* SPDX-License-Identifier: MIT */
/*
 * capacity.c: waiting for request capacity, when max_pending_requests
 * requests are out and weft_msvc_request refuses with WEFT_EOVERLOAD: the
 * blocking wait for threads that are not the service's loops, and the
 * one-shot callback for loop code.
 *
 * A waiter is counted in capacity_waiters before it looks at pending, and
 * a request that ends looks at capacity_waiters after it has given its
 * count back, both sequentially consistent: either the waiter sees the
 * room, or the request's end sees the waiter. While nobody waits, the end
 * of a request costs one load.
 */
#include <errno.h>
#include <stdlib.h>

#include "msvc_int.h"

/* A callback waiting for capacity: on the service's list until it is
 * posted to its loop, then the task's. */
struct weft__msvc_capacity {
	TAILQ_ENTRY(weft__msvc_capacity) link;
	weft_task task;
	weft_loop *loop;
	weft_msvc *svc;
	weft_msvc_capacity_cb cb;
	void *arg;
	int status;
};

void
weft__msvc_capacity_init(weft_msvc *svc)
{
	TAILQ_INIT(&svc->capacity_list);
	pthread_mutex_init(&svc->capacity_lock, NULL);
	weft__msvc_cond_init_monotonic(&svc->capacity_cond);
}

void
weft__msvc_capacity_fini(weft_msvc *svc)
{
	pthread_cond_destroy(&svc->capacity_cond);
	pthread_mutex_destroy(&svc->capacity_lock);
}

static bool
has_room(weft_msvc *svc)
{
	return weft__msvc_user_pending(svc) <
	       svc->cfg->limits.max_pending_requests;
}

static void
run_capacity(weft_loop *loop, int status, void *arg)
{
	struct weft__msvc_capacity *w = arg;

	(void)loop;
	/* A loop being freed runs what it holds with an error. */
	w->cb(w->svc, status != 0 ? WEFT_ESHUTDOWN : w->status, w->arg);
	free(w);
}

/* Posts w's callback with status to its loop. w is off the list. */
static void
post_waiter(weft_msvc *svc, struct weft__msvc_capacity *w, int status)
{
	w->status = status;
	w->task = (weft_task){.cb = run_capacity, .arg = w};
	if (weft_loop_post_task(w->loop, &w->task) != 0) {
		/* The caller's loop is gone, and with it the only thread
		 * the callback could run on. */
		weft_warn("msvc %s: a capacity callback's loop is gone; the "
		          "callback is dropped",
		          svc->id);
		free(w);
	}
}

/*
 * Hands every callback waiter to its loop with status, and wakes the
 * waiting threads. Requires that we hold capacity_lock. A waiter leaves
 * the list here and nowhere else, so its callback is posted exactly once.
 */
static void
release_waiters(weft_msvc *svc, int status)
{
	struct weft__msvc_capacity *w;

	pthread_cond_broadcast(&svc->capacity_cond);
	while ((w = TAILQ_FIRST(&svc->capacity_list)) != NULL) {
		TAILQ_REMOVE(&svc->capacity_list, w, link);
		atomic_fetch_sub(&svc->capacity_waiters, 1);
		post_waiter(svc, w, status);
	}
}

void
weft__msvc_capacity_returned(weft_msvc *svc)
{
	pthread_mutex_lock(&svc->capacity_lock);
	if (atomic_load(&svc->stopping))
		release_waiters(svc, WEFT_ESHUTDOWN);
	else if (has_room(svc))
		release_waiters(svc, 0);
	pthread_mutex_unlock(&svc->capacity_lock);
}

void
weft__msvc_capacity_stop(weft_msvc *svc)
{
	pthread_mutex_lock(&svc->capacity_lock);
	release_waiters(svc, WEFT_ESHUTDOWN);
	pthread_mutex_unlock(&svc->capacity_lock);
}

int
weft_msvc_on_capacity(weft_msvc *svc, weft_loop *loop, weft_msvc_capacity_cb cb,
                      void *arg)
{
	struct weft__msvc_capacity *w;

	if (svc == NULL || loop == NULL || cb == NULL)
		return WEFT_EINVAL;
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return WEFT_ENOMEM;
	*w = (struct weft__msvc_capacity){
	    .loop = loop, .svc = svc, .cb = cb, .arg = arg};
	pthread_mutex_lock(&svc->capacity_lock);
	/* Under the lock, so that stop's release cannot pass us by. */
	if (atomic_load(&svc->stopping) || !atomic_load(&svc->started)) {
		pthread_mutex_unlock(&svc->capacity_lock);
		free(w);
		return WEFT_ESHUTDOWN;
	}
	atomic_fetch_add(&svc->capacity_waiters, 1);
	TAILQ_INSERT_TAIL(&svc->capacity_list, w, link);
	/* Room already: posted now, still never run inside this call. */
	if (has_room(svc))
		release_waiters(svc, 0);
	pthread_mutex_unlock(&svc->capacity_lock);
	return 0;
}

int
weft_msvc_wait_capacity(weft_msvc *svc, uint64_t timeout_ms)
{
	struct timespec at;
	bool bounded = weft__msvc_deadline_in(timeout_ms, &at);
	int rc = 0, rv;

	if (svc == NULL)
		return WEFT_EINVAL;
	if (weft__msvc_on_own_loop(svc))
		return WEFT_EBUSY;
	pthread_mutex_lock(&svc->capacity_lock);
	atomic_fetch_add(&svc->capacity_waiters, 1);
	for (;;) {
		if (atomic_load(&svc->stopping) ||
		    !atomic_load(&svc->started)) {
			rv = WEFT_ESHUTDOWN;
			break;
		}
		if (has_room(svc)) {
			rv = 0;
			break;
		}
		if (rc == ETIMEDOUT) {
			rv = WEFT_ETIMEDOUT;
			break;
		}
		if (bounded)
			rc = pthread_cond_timedwait(&svc->capacity_cond,
			                            &svc->capacity_lock, &at);
		else
			pthread_cond_wait(&svc->capacity_cond,
			                  &svc->capacity_lock);
	}
	atomic_fetch_sub(&svc->capacity_waiters, 1);
	pthread_mutex_unlock(&svc->capacity_lock);
	return rv;
}
