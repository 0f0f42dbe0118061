/* SPDX-License-Identifier: MIT */
/*
 * sync.c: waiting for the messaging service from threads that are not its
 * loops: a future per request (weft_msvc_request_future), the blocking
 * request (weft_msvc_call) and the wait for a peer to come up
 * (weft_msvc_peer_wait_up). Built on the public calls; from the service it
 * needs only its loops (to refuse waiting on one), a peer's home loop (to
 * start watching it) and a wake-up when a peer's state changes.
 *
 * Every wait is on CLOCK_MONOTONIC, so that a change of the wall clock
 * neither shortens nor stretches a timeout.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "msvc_int.h"

struct weft_msvc_future {
	weft_msvc *svc; /* valid while the request is out */
	weft_msvc_peer *peer;
	uint64_t handle;  /* the request's, for weft_msvc_cancel */
	_Atomic int refs; /* the caller's, and the reply callback's */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int status;
	void *data; /* the payload, malloc'd */
	size_t len;
};

/* ---- Futures ----------------------------------------------------------- */

static void
future_unref(weft_msvc_future *f)
{
	if (atomic_fetch_sub(&f->refs, 1) != 1)
		return;
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	free(f->data);
	free(f);
}

static void
on_future_reply(weft_msvc *svc, int status, const void *data, size_t len,
                void *arg)
{
	weft_msvc_future *f = arg;
	void *copy = NULL;

	(void)svc;
	if (len > 0 && (copy = malloc(len)) != NULL)
		memcpy(copy, data, len);
	else if (len > 0 && status == 0)
		status = WEFT_ENOMEM;
	pthread_mutex_lock(&f->lock);
	f->status = status;
	f->data = copy;
	f->len = copy != NULL ? len : 0;
	f->done = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	future_unref(f);
}

int
weft_msvc_request_future(weft_msvc *svc, weft_msvc_peer *peer, uint32_t verb,
                         const void *data, size_t len,
                         const weft_msvc_call_opts *opts,
                         weft_msvc_future **out)
{
	weft_msvc_call_opts o = {0};
	weft_msvc_future *f;
	int rv;

	if (svc == NULL || out == NULL)
		return WEFT_EINVAL;
	if (opts != NULL)
		o = *opts;
	if ((f = calloc(1, sizeof(*f))) == NULL)
		return WEFT_ENOMEM;
	pthread_mutex_init(&f->lock, NULL);
	weft__msvc_cond_init_monotonic(&f->cond);
	atomic_init(&f->refs, 2);
	f->svc = svc;
	f->peer = peer;
	/* Set before the call returns, so before the loop can end it. */
	o.cancel_handle = &f->handle;
	rv = weft_msvc_request(svc, peer, verb, data, len, &o, on_future_reply,
	                       f);
	if (rv == 0 && opts != NULL && opts->cancel_handle != NULL)
		*opts->cancel_handle = f->handle;
	if (rv != 0) {
		atomic_store(&f->refs, 1);
		future_unref(f);
		return rv;
	}
	*out = f;
	return 0;
}

int
weft_msvc_future_wait(weft_msvc_future *f, uint64_t timeout_ms)
{
	struct timespec at;
	bool bounded = weft__msvc_deadline_in(timeout_ms, &at);
	int rc = 0;

	/* Not ended: then the service still runs (stopping ends every
	 * request), and its loops may be asked. */
	if (!weft_msvc_future_is_done(f) && weft__msvc_on_own_loop(f->svc))
		return WEFT_EBUSY;
	pthread_mutex_lock(&f->lock);
	while (!f->done && rc != ETIMEDOUT) {
		if (bounded)
			rc = pthread_cond_timedwait(&f->cond, &f->lock, &at);
		else
			pthread_cond_wait(&f->cond, &f->lock);
	}
	rc = f->done ? 0 : WEFT_ETIMEDOUT;
	pthread_mutex_unlock(&f->lock);
	return rc;
}

bool
weft_msvc_future_is_done(weft_msvc_future *f)
{
	bool done;

	pthread_mutex_lock(&f->lock);
	done = f->done;
	pthread_mutex_unlock(&f->lock);
	return done;
}

int
weft_msvc_future_status(weft_msvc_future *f)
{
	int status;

	pthread_mutex_lock(&f->lock);
	status = f->done ? f->status : WEFT_EBUSY;
	pthread_mutex_unlock(&f->lock);
	return status;
}

const void *
weft_msvc_future_data(weft_msvc_future *f, size_t *len)
{
	const void *data = NULL;

	pthread_mutex_lock(&f->lock);
	*len = 0;
	if (f->done) {
		data = f->data;
		*len = f->len;
	}
	pthread_mutex_unlock(&f->lock);
	return data;
}

void
weft_msvc_future_free(weft_msvc_future *f)
{
	if (f == NULL)
		return;
	/* Nobody will read the answer: the request ends now, with
	 * WEFT_ECANCELED, and the responder is told. */
	if (!weft_msvc_future_is_done(f))
		(void)weft_msvc_cancel(f->svc, f->peer, f->handle);
	future_unref(f);
}

int
weft_msvc_call(weft_msvc *svc, weft_msvc_peer *peer, uint32_t verb,
               const void *data, size_t len, const weft_msvc_call_opts *opts,
               struct evbuffer *reply)
{
	weft_msvc_future *f;
	const void *payload;
	size_t n;
	int rv;

	if (svc == NULL)
		return WEFT_EINVAL;
	if (weft__msvc_on_own_loop(svc))
		return WEFT_EBUSY;
	rv = weft_msvc_request_future(svc, peer, verb, data, len, opts, &f);
	if (rv != 0)
		return rv;
	weft_msvc_future_wait(f, UINT64_MAX);
	rv = weft_msvc_future_status(f);
	payload = weft_msvc_future_data(f, &n);
	if (reply != NULL && n > 0 && evbuffer_add(reply, payload, n) != 0)
		rv = rv == 0 ? WEFT_ENOMEM : rv;
	weft_msvc_future_free(f);
	return rv;
}

/* ---- Waiting for a peer ------------------------------------------------ */

/* On the peer's home loop: start watching it (heartbeats, which dial its
 * urgent connection), as its first message would. Counted as a caller,
 * so that stopping the service waits for it. */
static void
touch_task(weft_loop *loop, int status, void *arg)
{
	weft_msvc_peer *peer = arg;

	(void)loop;
	if (status == 0)
		weft__msvc_peer_touch(peer);
	weft__msvc_leave(peer->svc);
}

static int
start_watching(weft_msvc *svc, weft_msvc_peer *peer)
{
	if (!weft__msvc_enter(svc))
		return WEFT_ESHUTDOWN;
	if (!atomic_load(&svc->started) ||
	    weft_loop_post(peer->home->loop, touch_task, peer) != 0) {
		weft__msvc_leave(svc);
		return WEFT_ESHUTDOWN;
	}
	return 0;
}

void
weft_msvc_watch_members(weft_msvc *svc)
{
	uint32_t i;

	for (i = 0; i < svc->npeers; i++) {
		weft_msvc_peer *peer = svc->peers[i];

		if (peer == NULL || peer->is_self || peer->is_client ||
		    atomic_exchange(&peer->watch_requested, true))
			continue;
		if (start_watching(svc, peer) != 0)
			atomic_store(&peer->watch_requested, false);
	}
}

/*
 * Whether a wait for peer can end: it is up, the service stops, or it is
 * known down for a reason the wait has seen happen. A peer that was known
 * down when the wait began is being redialed on its back-off schedule:
 * the wait ends with that redial, failed or not, rather than at once (a
 * caller waiting for a restarted peer gets it) or at its timeout (a
 * caller waiting for a peer that is gone learns so within one back-off).
 * Returns 0 or a WEFT_E code once it can end, 1 while it cannot.
 */
static int
wait_up_status(weft_msvc *svc, weft_msvc_peer *peer, bool was_down,
               uint64_t failed_dials)
{
	/* Removed: it may look up a moment longer, until its loop says. */
	if (weft__msvc_peer_left(peer))
		return WEFT_ENOTMEMBER;
	if (weft_msvc_peer_is_up(peer))
		return 0;
	if (atomic_load(&svc->stopping))
		return WEFT_ESHUTDOWN;
	if (weft_msvc_peer_is_down(peer) &&
	    (!was_down || atomic_load(&peer->failed_dials) != failed_dials))
		return WEFT_EPEERDOWN;
	return 1; /* not yet */
}

int
weft_msvc_peer_wait_up(weft_msvc *svc, weft_msvc_peer *peer,
                       uint64_t timeout_ms)
{
	struct timespec at;
	bool bounded, was_down;
	uint64_t failed_dials;
	int rv, rc = 0;

	if (svc == NULL || peer == NULL || peer->svc != svc || peer->is_self ||
	    peer->is_client)
		return WEFT_EINVAL;
	if (weft__msvc_on_own_loop(svc))
		return WEFT_EBUSY;
	if (weft__msvc_peer_left(peer))
		return WEFT_ENOTMEMBER;
	if (weft_msvc_peer_is_up(peer))
		return 0;
	/* Read before the dial starts, so that its failure is seen. */
	failed_dials = atomic_load(&peer->failed_dials);
	was_down = weft_msvc_peer_is_down(peer);
	if ((rv = start_watching(svc, peer)) != 0)
		return rv;
	bounded = weft__msvc_deadline_in(timeout_ms, &at);
	pthread_mutex_lock(&svc->sync_lock);
	while ((rv = wait_up_status(svc, peer, was_down, failed_dials)) == 1 &&
	       rc != ETIMEDOUT) {
		if (bounded)
			rc = pthread_cond_timedwait(&svc->sync_cond,
			                            &svc->sync_lock, &at);
		else
			pthread_cond_wait(&svc->sync_cond, &svc->sync_lock);
	}
	pthread_mutex_unlock(&svc->sync_lock);
	return rv == 1 ? WEFT_ETIMEDOUT : rv;
}
