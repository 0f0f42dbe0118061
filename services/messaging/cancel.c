/* SPDX-License-Identifier: MIT */
/*
 * cancel.c: cancellation (docs/PROTOCOL.md 4.6). On the requester's side,
 * weft_msvc_cancel goes to the request's home loop, ends its pending slot
 * with WEFT_ECANCELED and, when the request went out on a connection of
 * version 2, tells the responder with a CANCEL envelope on the urgent lane
 * (or, with no urgent connection of version 2 up, on the request's own).
 *
 * On the responder's side, a request that outlives its read (queued for
 * the worker pool, or detached) is kept in a table by sender and id, so
 * that a cancel finds it from whichever loop the cancel arrives on: a job
 * not yet run is dropped, a running or detached one reads
 * weft_msvc_msg_is_cancelled or has its on-cancel callback run (at most
 * once, and never after the message is released: its release waits for a
 * callback running on another thread), and its answer is not written. An
 * inline handler has its loop to itself until it returns, so its request
 * is never in the table and costs nothing.
 */
#include <stdlib.h>

#include "msvc_int.h"

/* ---- The responder's table --------------------------------------------- */

/* An on-cancel callback running: on the stack of the thread that runs
 * it. gone is set when the message is released from inside it. */
struct weft__msvc_cancel_run {
	pthread_t thread;
	bool gone;
};

void
weft__msvc_cancels_init(weft_msvc *svc)
{
	pthread_mutex_init(&svc->cancels.lock, NULL);
	pthread_cond_init(&svc->cancels.ran, NULL);
}

void
weft__msvc_cancels_fini(weft_msvc *svc)
{
	pthread_cond_destroy(&svc->cancels.ran);
	pthread_mutex_destroy(&svc->cancels.lock);
}

static weft_msvc_msg **
bucket(weft_msvc *svc, const weft_msvc_peer *peer, uint64_t id)
{
	uint64_t h = (id ^ (uint64_t)(uintptr_t)peer) * 0x9e3779b97f4a7c15ull;

	return &svc->cancels.buckets[h >> 54]; /* the top 10 bits */
}

void
weft__msvc_track(weft_msvc_msg *msg)
{
	weft_msvc_msg **b;

	if (!msg->cancelable || !msg->heap || msg->tracked)
		return;
	b = bucket(msg->svc, msg->peer, msg->id);
	pthread_mutex_lock(&msg->svc->cancels.lock);
	msg->tracked_next = *b;
	*b = msg;
	msg->tracked = true;
	pthread_mutex_unlock(&msg->svc->cancels.lock);
}

void
weft__msvc_untrack(weft_msvc_msg *msg)
{
	weft_msvc_msg **p;

	if (!msg->tracked)
		return;
	pthread_mutex_lock(&msg->svc->cancels.lock);
	/* Its on-cancel callback runs: released from inside it, the runner
	 * is told; from another thread, wait for it to return. */
	while (msg->running != NULL) {
		if (pthread_equal(msg->running->thread, pthread_self())) {
			msg->running->gone = true;
			msg->running = NULL;
			break;
		}
		pthread_cond_wait(&msg->svc->cancels.ran,
		                  &msg->svc->cancels.lock);
	}
	msg->on_cancel = NULL;
	for (p = bucket(msg->svc, msg->peer, msg->id); *p != NULL;
	     p = &(*p)->tracked_next) {
		if (*p == msg) {
			*p = msg->tracked_next;
			break;
		}
	}
	msg->tracked = false;
	pthread_mutex_unlock(&msg->svc->cancels.lock);
}

void
weft__msvc_msg_assign(weft_msvc_msg *dst, const weft_msvc_msg *src)
{
	if (!src->tracked) {
		*dst = *src;
		return;
	}
	pthread_mutex_lock(&src->svc->cancels.lock);
	*dst = *src;
	pthread_mutex_unlock(&src->svc->cancels.lock);
}

/*
 * A cancel names its request by id and verb; only the peer that sent the
 * request can name it (the table is by sender), so a cancel for another
 * connection's or another peer's id finds nothing. One that finds nothing
 * (the request was answered, or never was) is counted and ignored: a
 * cancel is a hint, and a storm of them costs a lookup each.
 */
void
weft__msvc_cancel_arrived(struct weft__msvc_conn *c, const weft_envelope *env)
{
	weft_msvc *svc = c->svc;
	struct weft__msvc_cancel_run run = {.thread = pthread_self()};
	weft_msvc_cancel_cb cb = NULL;
	weft_msvc_msg *m, *with_cb = NULL;
	void *arg = NULL;
	bool found = false;

	pthread_mutex_lock(&svc->cancels.lock);
	for (m = *bucket(svc, c->peer, env->id); m != NULL;
	     m = m->tracked_next) {
		if (m->peer == c->peer && m->id == env->id &&
		    m->verb == env->verb) {
			atomic_store(&m->cancelled, true);
			found = true;
			/* One request per sender and id: one callback. */
			if (m->on_cancel != NULL && with_cb == NULL) {
				with_cb = m;
				cb = m->on_cancel;
				arg = m->on_cancel_arg;
				m->on_cancel = NULL;
				m->running = &run;
			}
		}
	}
	pthread_mutex_unlock(&svc->cancels.lock);
	if (with_cb != NULL) {
		cb(arg);
		pthread_mutex_lock(&svc->cancels.lock);
		if (!run.gone)
			with_cb->running = NULL;
		pthread_cond_broadcast(&svc->cancels.ran);
		pthread_mutex_unlock(&svc->cancels.lock);
	}
	weft__msvc_count(
	    found ? &svc->st.cancels_received : &svc->st.cancels_unknown, 1);
}

bool
weft_msvc_msg_is_cancelled(const weft_msvc_msg *msg)
{
	return msg != NULL && atomic_load(&msg->cancelled);
}

void
weft__msvc_cancel_moved(weft_msvc_msg *msg)
{
	if (!msg->tracked)
		return;
	pthread_mutex_lock(&msg->svc->cancels.lock);
	msg->on_cancel = NULL;
	pthread_mutex_unlock(&msg->svc->cancels.lock);
}

int
weft_msvc_msg_on_cancel(weft_msvc_msg *msg, weft_msvc_cancel_cb cb, void *arg)
{
	bool now;

	if (msg == NULL || cb == NULL || !msg->heap ||
	    !(msg->flags & WEFT__MSVC_F_REQUEST))
		return WEFT_EINVAL;
	if (!msg->tracked) /* from a peer of version 1: never cancelled */
		return 0;
	pthread_mutex_lock(&msg->svc->cancels.lock);
	now = atomic_load(&msg->cancelled);
	if (!now) {
		msg->on_cancel = cb;
		msg->on_cancel_arg = arg;
	}
	pthread_mutex_unlock(&msg->svc->cancels.lock);
	if (now)
		cb(arg);
	return 0;
}

/* ---- The requester's side ---------------------------------------------- */

struct cancel_task {
	weft_msvc_peer *peer;
	uint64_t handle;
};

/* The connection a cancel for a request sent on sent_on goes out on, or
 * NULL when none of version 2 is up. */
static struct weft__msvc_conn *
cancel_conn(weft_msvc_peer *peer, struct weft__msvc_conn *sent_on)
{
	struct weft__msvc_conn *c = NULL;

	if (!peer->is_client &&
	    peer->svc->cfg->limits.connections[WEFT_MSVC_URGENT] > 0)
		c = &peer->conns[WEFT_MSVC_URGENT][0].conn;
	if (c == NULL || c->state != WEFT__MSVC_UP || c->version < 2 ||
	    c->ch == NULL || !weft_channel_is_open(c->ch))
		c = sent_on;
	if (c == NULL || c->state != WEFT__MSVC_UP || c->version < 2 ||
	    c->ch == NULL || !weft_channel_is_open(c->ch))
		return NULL;
	return c;
}

/* Tells the responder: an empty envelope of the CANCEL kind with the
 * request's id and verb. Outside the queue limits, as a heartbeat is: it
 * is small, and it lightens the responder's load. */
static void
send_cancel(struct weft__msvc_loop *ml, struct weft__msvc_slot *s)
{
	struct weft__msvc_conn *c = cancel_conn(s->peer, s->conn);
	struct weft__msvc_out out = {
	    .id = weft__msvc_slot_id(ml, s->index),
	    .verb = s->verb,
	    .flags = WEFT__MSVC_F_CANCEL,
	    .created_ms = weft__msvc_wall_ms(ml),
	    .cls = WEFT_MSVC_URGENT,
	    .internal = true,
	};

	if (c != NULL)
		weft__msvc_conn_send(c, &out);
}

static void
cancel_run(weft_loop *loop, int status, void *arg)
{
	struct cancel_task *t = arg;
	struct weft__msvc_loop *ml = t->peer->home;
	struct weft__msvc_slot *s;
	uint32_t i;

	(void)loop;
	/* A pass over the loop's slots: cancels are rare next to
	 * requests, which then need no index of handles. */
	for (i = 0; status == 0 && i < ml->slots_cap; i++) {
		s = weft__msvc_slot_at(ml, i);
		if (!s->live || s->handle != t->handle || s->peer != t->peer)
			continue;
		weft__msvc_batch_begin(ml);
		if (s->sent)
			send_cancel(ml, s);
		s->cancelled_tag = s->tag;
		weft__msvc_count(&ml->svc->st.cancelled_requests, 1);
		weft__msvc_slot_complete(ml, i, WEFT_ECANCELED, NULL, 0);
		weft__msvc_batch_end(ml);
		break;
	}
	free(t);
}

int
weft_msvc_cancel(weft_msvc *svc, weft_msvc_peer *peer, uint64_t handle)
{
	struct cancel_task *t;

	if (svc == NULL || peer == NULL || peer->svc != svc || handle == 0)
		return WEFT_EINVAL;
	if (!atomic_load(&svc->started) || atomic_load(&svc->stopped))
		return WEFT_ESHUTDOWN;
	if ((t = malloc(sizeof(*t))) == NULL)
		return WEFT_ENOMEM;
	t->peer = peer;
	t->handle = handle;
	if (weft_loop_post(peer->home->loop, cancel_run, t) != 0) {
		free(t);
		return WEFT_ESHUTDOWN;
	}
	return 0;
}
