/* SPDX-License-Identifier: MIT */
/*
 * dispatch.c: inbound requests and one-way messages meet their handlers,
 * inline on the loop that read them or on the worker pool; responses go
 * back through the requester's peer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "msvc_int.h"

#define ERROR_PAYLOAD_MAX 320

/* msg is answered (or never will be): its verb has room for another. */
static void
slot_release(weft_msvc_msg *msg)
{
	if (msg->holds_slot) {
		msg->holds_slot = false;
		atomic_fetch_sub(&msg->svc->verbs[msg->verb].in_progress, 1);
	}
}

static void
msg_release(weft_msvc_msg *msg)
{
	weft_msvc_peer *peer = msg->peer;

	slot_release(msg);
	weft__msvc_untrack(msg);
	if (msg->counted > 0)
		weft__msvc_inflight_release(msg->svc, msg->counted,
		                            msg->urgent);
	free(msg);
	if (peer != NULL && peer->is_client)
		weft__msvc_peer_unref(peer);
}

/* Copies msg to the heap (its payload too, unless !payload): for the
 * worker pool and for responding later. Counts its payload's bytes as in
 * flight, copied or not, so that reading pauses for it either way. */
static weft_msvc_msg *
msg_copy(const weft_msvc_msg *src, bool payload, int stage)
{
	size_t len = payload ? src->len : 0;
	weft_msvc_msg *m;

	if ((m = malloc(sizeof(*m) + len)) == NULL)
		return NULL;
	weft__msvc_msg_assign(m, src);
	m->len = len;
	if (len > 0)
		memcpy(m->own, src->data, len);
	m->data = m->own;
	m->heap = true;
	m->detached = false;
	m->next = NULL;
	m->tracked = false;
	m->tracked_next = NULL;
	m->running = NULL; /* its on-cancel callback carries over, not a run */
	m->counted = src->len;
	atomic_fetch_add(m->urgent ? &m->svc->urgent_inflight
	                           : &m->svc->inflight,
	                 m->counted);
	if (m->peer->is_client)
		atomic_fetch_add(&m->peer->refs, 1);
	atomic_store_explicit(&m->stage, stage, memory_order_relaxed);
	weft__msvc_track(m);
	return m;
}

/*
 * Sends a response for msg. payload is data/len or buf (moved). Returns 0
 * or an error; the response is then dropped.
 */
static int
respond(weft_msvc_msg *msg, uint32_t flags, const void *data, size_t len,
        struct evbuffer *buf)
{
	weft_msvc *svc = msg->svc;
	weft_msvc_peer *peer = msg->peer;
	struct weft__msvc_out out = {.conn = NULL};
	size_t frame = WEFT_ENVELOPE_FRAME_BYTES(len, true);
	int rv;

	if (atomic_load(&svc->stopped))
		return WEFT_ESHUTDOWN;
	/* Its requester has given up on it: nobody reads the answer. */
	if (atomic_load(&msg->cancelled))
		return 0;
	if (len > weft__msvc_max_message(&svc->cfg->limits))
		return WEFT_ETOOBIG;
	out.id = msg->id;
	out.verb = msg->verb;
	out.flags = WEFT__MSVC_F_RESPONSE | flags;
	out.key = msg->conn_index;
	out.created_ms = msg->ml != NULL && weft_loop_in_thread(msg->ml->loop)
	                     ? weft__msvc_wall_ms(msg->ml)
	                     : weft__msvc_clock_now_ms(svc);
	out.expires_ms = msg->expires_ms;
	out.echo_expires_ms = msg->wire_expires_ms;
	out.cls = (uint8_t)weft__msvc_class_for(svc, msg->verb, len);
	out.internal = msg->verb == WEFT__MSVC_VERB_HEARTBEAT;
	out.ptr = data;
	out.len = len;
	out.buf = buf;
	weft__msvc_stages_answered(msg, &out);
	if (!weft__msvc_take_queued(peer, frame, out.internal)) {
		weft__msvc_count(&peer->st.dropped_overload, 1);
		weft__msvc_count(&svc->st.overloaded, 1);
		if (msg->verb < WEFT_MSVC_MAX_VERBS)
			weft__msvc_count(
			    &svc->verbs[msg->verb].dropped_overload, 1);
		return WEFT_EOVERLOAD;
	}
	out.accounted = frame;
	if ((rv = weft__msvc_submit_stack(peer, &out)) != 0) {
		weft__msvc_release_queued(peer, frame);
		return rv;
	}
	if (msg->verb < WEFT_MSVC_MAX_VERBS)
		weft__msvc_count(&svc->verbs[msg->verb].responded, 1);
	return 0;
}

/* Checks a respond call; returns 0 if msg may be answered. */
static int
respond_begin(weft_msvc_msg *msg)
{
	if (msg == NULL || !(msg->flags & WEFT__MSVC_F_REQUEST) ||
	    msg->responded)
		return WEFT_EINVAL;
	msg->responded = true;
	return 0;
}

/* Frees a detached message once it is answered. */
static int
respond_end(weft_msvc_msg *msg, int rv)
{
	if (msg->detached)
		msg_release(msg);
	return rv;
}

int
weft_msvc_respond(weft_msvc_msg *msg, const void *data, size_t len)
{
	int rv;

	if ((rv = respond_begin(msg)) != 0)
		return rv;
	if (data == NULL && len > 0)
		return respond_end(msg, WEFT_EINVAL);
	return respond_end(msg, respond(msg, 0, data, len, NULL));
}

int
weft_msvc_respond_buf(weft_msvc_msg *msg, struct evbuffer *payload)
{
	struct evbuffer *buf;
	int rv;

	if ((rv = respond_begin(msg)) != 0) {
		evbuffer_drain(payload, evbuffer_get_length(payload));
		return rv;
	}
	if ((buf = evbuffer_new()) == NULL) {
		evbuffer_drain(payload, evbuffer_get_length(payload));
		return respond_end(msg, WEFT_ENOMEM);
	}
	evbuffer_add_buffer(buf, payload);
	rv = respond(msg, 0, NULL, evbuffer_get_length(buf), buf);
	/* Encoded at once or moved into a queued copy: buf stays ours. */
	evbuffer_free(buf);
	return respond_end(msg, rv);
}

static int
respond_error(weft_msvc_msg *msg, int status, const char *text)
{
	uint8_t p[ERROR_PAYLOAD_MAX];
	size_t n = weft__msvc_error_encode(p, sizeof(p), status, text);

	return respond(msg, WEFT__MSVC_F_ERROR, p, n, NULL);
}

int
weft_msvc_respond_error(weft_msvc_msg *msg, int status, const char *text)
{
	char cut[256];
	int rv;

	if ((rv = respond_begin(msg)) != 0)
		return rv;
	snprintf(cut, sizeof(cut), "%s", text != NULL ? text : "");
	return respond_end(msg, respond_error(msg, status, cut));
}

static weft_msvc_msg *
detach(weft_msvc_msg *msg, bool payload)
{
	weft_msvc_msg *copy;

	if (!(msg->flags & WEFT__MSVC_F_REQUEST) || msg->responded ||
	    msg->detached)
		return NULL;
	if ((copy = msg_copy(msg, payload, WEFT_MSVC_REQ_DETACHED)) == NULL)
		return NULL;
	copy->detached = true;
	/* The original is answered by the copy, which holds its slot and
	 * its on-cancel callback. */
	msg->detached = true;
	msg->holds_slot = false;
	weft__msvc_cancel_moved(msg);
	return copy;
}

weft_msvc_msg *
weft_msvc_msg_detach(weft_msvc_msg *msg)
{
	return detach(msg, true);
}

weft_msvc_msg *
weft_msvc_msg_detach_reply(weft_msvc_msg *msg)
{
	return detach(msg, false);
}

/* After a handler: a request nobody answered gets an error. */
static void
after_handler(weft_msvc_msg *msg)
{
	if ((msg->flags & WEFT__MSVC_F_REQUEST) && !msg->responded &&
	    !msg->detached && !atomic_load(&msg->cancelled)) {
		msg->responded = true;
		respond_error(msg, WEFT_EREMOTE, "handler did not respond");
	}
}

static bool
is_expired(const weft_msvc_msg *msg)
{
	if (msg->expires_ms == 0)
		return false;
	if (!msg->heap)
		return msg->expires_ms <= weft__msvc_wall_ms(msg->ml);
	return msg->expires_ms <= weft__msvc_clock_now_ms(msg->svc);
}

/* Runs msg's handler, as the one running on this thread (trace.c). */
static void
run_handler(struct weft__msvc_verb *v, weft_msvc_msg *msg)
{
	const weft_msvc_msg *prev = weft__msvc_handler_enter(msg);

	v->cb(msg->svc, msg, v->arg);
	weft__msvc_handler_leave(prev);
	weft__msvc_count(&v->handled, 1);
}

/* ---- The worker pool --------------------------------------------------- */

static void
run_job(weft_msvc_msg *msg)
{
	weft_msvc *svc = msg->svc;
	struct weft__msvc_verb *v = &svc->verbs[msg->verb];

	if (is_expired(msg)) {
		weft__msvc_count(&svc->st.expired_before_handler, 1);
		weft__msvc_count(&v->expired, 1);
	} else if (atomic_load(&msg->cancelled)) {
		/* Cancelled while it waited: not run, and not answered. */
		weft__msvc_count(&svc->st.cancelled_jobs, 1);
	} else if (atomic_load(&svc->stopped)) {
		/* Dropped: the requester hears "shut down" or times out. */
	} else {
		atomic_store_explicit(&msg->stage, WEFT_MSVC_REQ_HANDLER,
		                      memory_order_relaxed);
		if (msg->read_ns != 0)
			msg->run_ns = weft_now_ns();
		run_handler(v, msg);
		after_handler(msg);
	}
	msg_release(msg);
}

static void *
worker_main(void *arg)
{
	weft_msvc *svc = arg;
	struct weft__msvc_pool *pool = &svc->pool;
	weft_msvc_msg *msg;
	bool last;

	pthread_mutex_lock(&pool->lock);
	for (;;) {
		while (pool->head == NULL && !pool->stopping)
			pthread_cond_wait(&pool->cond, &pool->lock);
		if (pool->head == NULL)
			break;
		msg = pool->head;
		pool->head = msg->next;
		if (pool->head == NULL)
			pool->tail = NULL;
		pthread_mutex_unlock(&pool->lock);
		run_job(msg);
		pthread_mutex_lock(&pool->lock);
	}
	last = --pool->live == 0;
	pthread_mutex_unlock(&pool->lock);
	/* The last worker out moves a stop on; the thread is joined later,
	 * by weft_msvc_free. */
	if (last)
		weft__msvc_stop_kick(svc);
	return NULL;
}

static void
pool_push(weft_msvc *svc, weft_msvc_msg *msg)
{
	struct weft__msvc_pool *pool = &svc->pool;

	pthread_mutex_lock(&pool->lock);
	if (pool->tail != NULL)
		pool->tail->next = msg;
	else
		pool->head = msg;
	pool->tail = msg;
	pthread_cond_signal(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
	weft__msvc_count(&svc->st.worker_jobs, 1);
}

int
weft__msvc_pool_start(weft_msvc *svc)
{
	struct weft__msvc_pool *pool = &svc->pool;
	uint32_t n = svc->cfg->limits.worker_threads, i;

	if ((pool->threads = calloc(n, sizeof(*pool->threads))) == NULL)
		return WEFT_ENOMEM;
	pthread_mutex_lock(&pool->lock);
	for (i = 0; i < n; i++) {
		if (pthread_create(&pool->threads[i], NULL, worker_main, svc) !=
		    0)
			break;
		pthread_setname_np(pool->threads[i], "weft-msvc-work");
	}
	pool->n = pool->live = i;
	pthread_mutex_unlock(&pool->lock);
	if (i == 0) {
		free(pool->threads);
		pool->threads = NULL;
		return WEFT_ENOMEM;
	}
	return 0;
}

void
weft__msvc_pool_quit(weft_msvc *svc)
{
	struct weft__msvc_pool *pool = &svc->pool;

	pthread_mutex_lock(&pool->lock);
	pool->stopping = true;
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
}

bool
weft__msvc_pool_idle(weft_msvc *svc)
{
	struct weft__msvc_pool *pool = &svc->pool;
	bool idle;

	pthread_mutex_lock(&pool->lock);
	idle = pool->live == 0;
	pthread_mutex_unlock(&pool->lock);
	return idle;
}

void
weft__msvc_pool_join(weft_msvc *svc)
{
	struct weft__msvc_pool *pool = &svc->pool;
	uint32_t i;

	for (i = 0; i < pool->n; i++)
		pthread_join(pool->threads[i], NULL);
	free(pool->threads);
	pool->threads = NULL;
	pool->n = 0;
}

/* ---- Dispatch ---------------------------------------------------------- */

static void
answer_now(weft_msvc_msg *msg, int status, const char *text)
{
	if (msg->flags & WEFT__MSVC_F_REQUEST) {
		msg->responded = true;
		if (status == 0)
			respond(msg, 0, NULL, 0, NULL);
		else
			respond_error(msg, status, text);
	}
}

/* A request of a verb with a cap takes one of its slots, or is answered
 * OVERLOADED at once; false then. */
static bool
take_slot(struct weft__msvc_verb *v, weft_msvc_msg *msg)
{
	char text[96];
	uint32_t max = v->max_in_progress;

	if (max == 0 || !(msg->flags & WEFT__MSVC_F_REQUEST))
		return true;
	if (atomic_fetch_add(&v->in_progress, 1) < max) {
		msg->holds_slot = true;
		return true;
	}
	atomic_fetch_sub(&v->in_progress, 1);
	weft__msvc_count(&v->over_limit, 1);
	snprintf(text, sizeof(text),
	         "verb %s: %u requests in progress, its limit", v->name, max);
	answer_now(msg, WEFT_EOVERLOAD, text);
	return false;
}

void
weft__msvc_dispatch(struct weft__msvc_conn *c, const weft_envelope *env)
{
	weft_msvc *svc = c->svc;
	struct weft__msvc_verb *v = NULL;
	char text[64];
	weft_msvc_msg msg;

	/* The sender's clock, from what it stamped: before its deadline is
	 * read through it. */
	weft__msvc_clock_arrival(c->peer, env->created_ms,
	                         weft__msvc_wall_ms(c->ml),
	                         weft__msvc_now_ns(c->ml));
	msg = (weft_msvc_msg){
	    .svc = svc,
	    .ml = c->ml,
	    .peer = c->peer,
	    .id = env->id,
	    .created_ms = weft__msvc_clock_local(c->peer, env->created_ms),
	    .expires_ms = weft__msvc_clock_local(c->peer, env->expires_ms),
	    .wire_expires_ms = env->expires_ms,
	    .verb = env->verb,
	    .flags = env->flags,
	    .conn_index = c->index,
	    .cancelable = c->version >= 2,
	    .urgent = weft__msvc_conn_urgent(c),
	    .data = env->payload,
	    .len = env->payload_len,
	};

	if (env->verb < WEFT_MSVC_MAX_VERBS)
		v = &svc->verbs[env->verb];
	weft__msvc_trace_arrived(c, &msg, env);
	/* A heartbeat is answered however late: an answer that comes too
	 * late is dropped by its requester, and a peer's clock never gets
	 * one dropped here. */
	if (env->verb != WEFT__MSVC_VERB_HEARTBEAT && is_expired(&msg)) {
		weft__msvc_count(&svc->st.expired_on_arrival, 1);
		weft__msvc_count(&c->peer->st.dropped_expired, 1);
		if (v != NULL)
			weft__msvc_count(&v->expired, 1);
		return;
	}
	if (env->verb == WEFT__MSVC_VERB_HEARTBEAT) {
		answer_now(&msg, 0, NULL);
		return;
	}
	if (v == NULL || v->cb == NULL) {
		weft__msvc_count(&svc->st.unknown_verbs, 1);
		snprintf(text, sizeof(text), "unknown verb %u",
		         (unsigned)env->verb);
		answer_now(&msg, WEFT_EUNKNOWNVERB, text);
		return;
	}
	if (c->peer->is_client && !(v->flags & WEFT_MSVC_CLIENTS)) {
		weft__msvc_count(&svc->st.forbidden_requests, 1);
		snprintf(text, sizeof(text), "verb %u is for members only",
		         (unsigned)env->verb);
		answer_now(&msg, WEFT_EPERM, text);
		return;
	}
	weft__msvc_count(&v->received, 1);
	weft__msvc_count(&v->bytes_received, env->payload_len);
	if (atomic_load(&svc->stopping)) {
		answer_now(&msg, WEFT_ESHUTDOWN, "shutting down");
		return;
	}
	if (!take_slot(v, &msg))
		return;
	if (v->flags & WEFT_MSVC_BLOCKING) {
		/* The job holds the slot from here. */
		weft_msvc_msg *job = msg_copy(&msg, true, WEFT_MSVC_REQ_QUEUED);

		if (job == NULL) {
			slot_release(&msg);
			answer_now(&msg, WEFT_EOVERLOAD, "out of memory");
			return;
		}
		pool_push(svc, job);
		return;
	}
	run_handler(v, &msg);
	after_handler(&msg);
	slot_release(&msg);
}
