/* SPDX-License-Identifier: MIT */
/*
 * peer.c: sending to one peer. Every peer has a home loop that owns its
 * connections. A sender on the home loop encodes straight into the
 * connection's output (no queue, no allocation); a sender on any other
 * thread pushes onto the peer's lock-free queue and wakes the home loop
 * once per batch, which drains the whole queue, encodes every message and
 * flushes once. Messages for a connection that is not up wait in its
 * backlog until it is, until they expire, or until the queue limit says no.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "msvc_int.h"

/* The lane of a message of verb with len bytes of payload: heartbeats
 * and urgent verbs up to large_message_bytes on the urgent one, the rest
 * by size. */
uint64_t
weft__msvc_class_for(const weft_msvc *svc, uint32_t verb, size_t len)
{
	bool large = len > svc->cfg->limits.large_message_bytes;

	if (verb == WEFT__MSVC_VERB_HEARTBEAT ||
	    (!large && verb < WEFT_MSVC_MAX_VERBS &&
	     (svc->verbs[verb].flags & WEFT_MSVC_URGENT_LANE)))
		return WEFT_MSVC_URGENT;
	return large ? WEFT_MSVC_LARGE : WEFT_MSVC_SMALL;
}

static struct weft__msvc_conn *
pick_conn(weft_msvc_peer *peer, const struct weft__msvc_out *out)
{
	uint32_t n;

	if (peer->is_client)
		return peer->client_conn;
	n = peer->svc->cfg->limits.connections[out->cls];
	return &peer->conns[out->cls][out->key % n].conn;
}

/* Registers a request's pending slot; returns its index or an error. */
static int
open_slot(weft_msvc_peer *peer, struct weft__msvc_out *out, uint32_t *slot)
{
	struct weft__msvc_loop *ml = peer->home;
	struct weft__msvc_slot *s;
	int rv;

	if ((rv = weft__msvc_slot_new(ml, slot)) != 0)
		return rv;
	s = weft__msvc_slot_at(ml, *slot);
	s->peer = peer;
	s->cb = out->cb;
	s->arg = out->arg;
	s->verb = out->verb;
	s->internal = out->internal;
	s->handle = out->handle;
	weft__msvc_count1(&peer->st.pending, 1);
	if (out->verb < WEFT_MSVC_MAX_VERBS)
		weft__msvc_count(&peer->svc->verbs[out->verb].pending, 1);
	out->id = weft__msvc_slot_id(ml, *slot);
	weft__msvc_trace_open(ml, s, out);
	weft__msvc_slot_arm(ml, *slot, out->timeout_ms, out->expires_ms);
	return 0;
}

/* Copies a caller's message (stack, borrowed payload) to the heap. */
static struct weft__msvc_out *
out_keep(const struct weft__msvc_out *src)
{
	struct weft__msvc_out *out;

	if ((out = weft__msvc_out_new(src->buf ? 0 : src->len)) == NULL)
		return NULL;
	memcpy(out, src, sizeof(*out));
	out->ptr = out->data;
	out->buf = NULL;
	/* The copy gets an evbuffer of its own, so the caller's stays the
	 * caller's whatever the loop does with the copy. */
	if (src->buf != NULL && evbuffer_get_length(src->buf) > 0) {
		if ((out->buf = evbuffer_new()) == NULL) {
			free(out);
			return NULL;
		}
		evbuffer_add_buffer(out->buf, src->buf);
	}
	if (src->buf == NULL && src->len > 0)
		memcpy(out->data, src->ptr, src->len);
	return out;
}

/*
 * Sends out on the home loop. heap says whether out is ours to keep or
 * free; if not, it is copied when it must wait. Returns 0, or an error
 * with nothing done (out untouched, no callback).
 */
/*
 * dial_urgent brings up a member's urgent connection with the first one of
 * another class. It carries the heartbeats, so the peer's liveness is known
 * from its first message, and the first heartbeat does not dial (with TLS,
 * a handshake to every peer at once) in the middle of the traffic.
 */
static void
dial_urgent(weft_msvc_peer *peer)
{
	if (peer->is_client ||
	    peer->svc->cfg->limits.connections[WEFT_MSVC_URGENT] == 0)
		return;
	if (peer->conns[WEFT_MSVC_URGENT][0].conn.state == WEFT__MSVC_IDLE)
		weft__msvc_conn_dial(&peer->conns[WEFT_MSVC_URGENT][0].conn);
}

/* member_gate ends out (just opened in slot, for a request) if its peer
 * left: true then, with *rv what emit returns. Home loop. */
static bool
member_gate(weft_msvc_peer *peer, struct weft__msvc_out *out, uint32_t slot,
            bool heap, int *rv)
{
	int state = atomic_load(&peer->member_state);

	if (state == WEFT__MSVC_MEMBER_ACTIVE || out->internal)
		return false;
	/* Answers to what it asked before it left go while it drains. */
	if ((out->flags & WEFT__MSVC_F_RESPONSE) &&
	    state == WEFT__MSVC_MEMBER_LEAVING)
		return false;
	*rv = 0;
	if (out->flags & WEFT__MSVC_F_REQUEST) {
		weft__msvc_slot_fail_soon(peer->home, slot, WEFT_ENOTMEMBER);
	} else if (out->flags & WEFT__MSVC_F_RESPONSE) {
		weft__msvc_count(&peer->svc->st.responses_dropped, 1);
		weft__msvc_release_queued(peer, out->accounted);
	} else {
		/* A one-way message: refused, as a send to a peer known
		 * down is (the caller or run_out drops it). */
		*rv = WEFT_ENOTMEMBER;
		return true;
	}
	if (heap)
		weft__msvc_out_free(out);
	return true;
}

static int
emit(weft_msvc_peer *peer, struct weft__msvc_out *out, bool heap)
{
	struct weft__msvc_conn *c = pick_conn(peer, out);
	bool request = out->flags & WEFT__MSVC_F_REQUEST;
	uint32_t slot = UINT32_MAX;
	struct weft__msvc_out *kept;
	int rv;

	weft__msvc_peer_touch(peer);
	if (request && (rv = open_slot(peer, out, &slot)) != 0)
		return rv;
	if (member_gate(peer, out, slot, heap, &rv))
		return rv;
	/* A peer known to be down fails what is sent to it at once: a
	 * one-way message here, a request within a millisecond (its
	 * callback never runs inside the call). Its heartbeats still go, to
	 * find out when it is back. */
	if (!out->internal && !(out->flags & WEFT__MSVC_F_RESPONSE) &&
	    atomic_load_explicit(&peer->down, memory_order_relaxed)) {
		if (!request)
			return WEFT_EPEERDOWN;
		weft__msvc_count(&peer->st.failed_peer_down, 1);
		weft__msvc_slot_fail_soon(peer->home, slot, WEFT_EPEERDOWN);
		if (heap)
			weft__msvc_out_free(out);
		return 0;
	}
	if (c != NULL && weft__msvc_conn_takes_writes(c) &&
	    TAILQ_EMPTY(&c->backlog)) {
		weft__msvc_conn_encode(c, out, slot);
		if (heap)
			weft__msvc_out_free(out);
		return 0;
	}
	if (c == NULL) {
		/* A client whose connection is gone: only responses go to
		 * clients, and they are dropped. */
		weft__msvc_count(&peer->svc->st.responses_dropped, 1);
		weft__msvc_release_queued(peer, out->accounted);
		if (heap)
			weft__msvc_out_free(out);
		return 0;
	}
	kept = heap ? out : out_keep(out);
	if (kept == NULL) {
		if (request)
			weft__msvc_slot_cancel(peer->home, slot);
		return WEFT_ENOMEM;
	}
	kept->slot = slot;
	kept->conn = c;
	TAILQ_INSERT_TAIL(&c->backlog, kept, link);
	if (request)
		weft__msvc_slot_at(peer->home, slot)->out = kept;
	if (c->state == WEFT__MSVC_IDLE) {
		weft__msvc_conn_dial(c);
		dial_urgent(peer);
	}
	return 0;
}

/* A message handed to the peer's home loop arrives: the loop's own task
 * queue carries it (one queue for everything that crosses threads, FIFO
 * per sender), and the loop runs every message that came in one wake-up
 * before the flush that writes them. */
static void
run_out(weft_loop *loop, int status, void *arg)
{
	struct weft__msvc_out *out = arg;
	weft_msvc_peer *peer = out->peer;
	weft_msvc *svc = peer->svc;
	struct weft__msvc_loop *ml = peer->home;
	int rv;

	(void)loop;
	weft__msvc_batch_begin(ml);
	if (status != 0 || atomic_load(&svc->stopped)) {
		weft__msvc_out_drop(peer, out, WEFT_ESHUTDOWN);
	} else if (out->expires_ms != 0 && out->expires_ms <= ml->now_ms) {
		weft__msvc_count(&svc->st.expired_in_queue, 1);
		weft__msvc_count(&peer->st.dropped_expired, 1);
		weft__msvc_out_drop(peer, out, WEFT_EEXPIRED);
	} else if ((rv = emit(peer, out, true)) != 0) {
		weft__msvc_out_drop(peer, out, rv);
	}
	weft__msvc_count1(&ml->rs.handoffs, 1);
	weft__msvc_batch_end(ml);
	if (peer->is_client)
		weft__msvc_peer_unref(peer);
}

/*
 * weft__msvc_submit sends out (heap) to peer from any thread; the bytes
 * are already counted in queued_bytes. Returns 0 (out is the service's)
 * or an error (out is still the caller's).
 */
int
weft__msvc_submit(weft_msvc_peer *peer, struct weft__msvc_out *out)
{
	if (weft_loop_in_thread(peer->home->loop))
		return emit(peer, out, true);
	if (peer->is_client)
		atomic_fetch_add(&peer->refs, 1);
	out->peer = peer;
	out->task = (weft_task){.cb = run_out, .arg = out};
	if (weft_loop_post_task(peer->home->loop, &out->task) != 0) {
		/* The loop is gone: the service is being torn down. */
		if (peer->is_client)
			weft__msvc_peer_unref(peer);
		return WEFT_ESHUTDOWN;
	}
	return 0;
}

/*
 * weft__msvc_submit_stack is the send path without allocation: on the
 * home loop, stack_out (with a borrowed payload) is encoded at once.
 * Elsewhere it is copied and queued. Same returns as weft__msvc_submit.
 */
int
weft__msvc_submit_stack(weft_msvc_peer *peer, struct weft__msvc_out *out)
{
	struct weft__msvc_out *kept;
	int rv;

	if (weft_loop_in_thread(peer->home->loop))
		return emit(peer, out, false);
	if ((kept = out_keep(out)) == NULL)
		return WEFT_ENOMEM;
	if ((rv = weft__msvc_submit(peer, kept)) != 0)
		weft__msvc_out_free(kept);
	return rv;
}

/* ---- Peer state and heartbeats (home loop) ---------------------------- */

void
weft__msvc_peer_set_up(weft_msvc_peer *peer, bool up)
{
	weft_msvc *svc = peer->svc;

	/* A member added is up only after its joined event, and one
	 * removed never again (members.c). */
	if (up && (peer->awaiting_join || weft__msvc_peer_left(peer)))
		return;
	atomic_store(&peer->down, !up);
	if (atomic_exchange(&peer->up, up) == up)
		return;
	if (!up) {
		weft__msvc_count(&peer->st.downs, 1);
		weft__msvc_count(&svc->st.peer_downs, 1);
	}
	weft_info("msvc %s: peer %s is %s", svc->id, peer->id,
	          up ? "up" : "down");
	weft__msvc_tell_peer(peer, up);
	weft__msvc_sync_notify(svc);
}

void
weft__msvc_tell_peer(weft_msvc_peer *peer, bool up)
{
	weft_msvc *svc = peer->svc;
	size_t i;

	for (i = 0; i < svc->peer_cb_count && !atomic_load(&svc->stopped); i++)
		svc->peer_cbs[i].cb(svc, peer, up, svc->peer_cbs[i].arg);
}

void
weft__msvc_peer_down(weft_msvc_peer *peer, const char *why)
{
	weft_msvc *svc = peer->svc;
	uint32_t cls, i;

	weft_warn("msvc %s: peer %s down: %s", svc->id, peer->id, why);
	weft__msvc_peer_set_up(peer, false);
	for (cls = 0; cls < WEFT_MSVC_CLASSES; cls++)
		for (i = 0; i < svc->cfg->limits.connections[cls]; i++)
			weft__msvc_conn_close(&peer->conns[cls][i].conn, why);
}

/*
 * A dial of peer failed (no connection, or a refused or broken
 * handshake). Unless another of its connections is up, the peer is known
 * down from here until one comes up: said once, not once per retry.
 */
void
weft__msvc_peer_unreachable(weft_msvc_peer *peer, const char *why)
{
	weft_msvc *svc = peer->svc;

	if (atomic_load(&peer->up) || atomic_exchange(&peer->down, true))
		return;
	weft__msvc_count(&peer->st.downs, 1);
	weft__msvc_count(&svc->st.peer_downs, 1);
	weft_warn("msvc %s: peer %s unreachable: %s", svc->id, peer->id, why);
	weft__msvc_tell_peer(peer, false);
}

void
weft__msvc_peer_conn_up(weft_msvc_peer *peer, struct weft__msvc_conn *c)
{
	weft__msvc_count(&peer->st.connects, 1);
	if (c->cls == WEFT_MSVC_URGENT) {
		peer->hb_misses = 0;
		weft__msvc_peer_set_up(peer, true);
	}
}

static void
on_heartbeat_reply(weft_msvc *svc, int status, const void *data, size_t len,
                   void *arg)
{
	weft_msvc_peer *peer = arg;

	(void)svc;
	(void)data;
	(void)len;
	if (status != 0)
		return;
	peer->hb_acked = true;
	peer->hb_misses = 0;
	weft__msvc_peer_set_up(peer, true);
}

static void
on_heartbeat_timer(weft_timer *t, void *arg)
{
	weft_msvc_peer *peer = arg;
	weft_msvc *svc = peer->svc;
	const weft_msvc_limits *l = &svc->cfg->limits;
	struct weft__msvc_out out = {.conn = NULL};

	(void)t;
	if (atomic_load(&svc->stopping))
		return;
	if (peer->hb_sent && !peer->hb_acked) {
		weft__msvc_count(&svc->st.heartbeats_missed, 1);
		if (++peer->hb_misses >= l->heartbeat_misses) {
			peer->hb_misses = 0;
			if (atomic_load(&peer->up))
				weft__msvc_peer_down(peer, "missed heartbeats");
		}
	}
	out.verb = WEFT__MSVC_VERB_HEARTBEAT;
	out.flags = WEFT__MSVC_F_REQUEST;
	out.cls = WEFT_MSVC_URGENT;
	out.internal = true;
	out.created_ms = weft__msvc_clock_now_ms(svc);
	out.timeout_ms = l->heartbeat_interval_ms;
	out.expires_ms = out.created_ms + l->heartbeat_interval_ms;
	out.cb = on_heartbeat_reply;
	out.arg = peer;
	out.ptr = out.data;
	atomic_fetch_add(&svc->pending_internal, 1);
	atomic_fetch_add(&svc->pending, 1);
	if (emit(peer, &out, false) != 0) {
		atomic_fetch_sub(&svc->pending_internal, 1);
		weft__msvc_pending_sub(svc);
		return;
	}
	peer->hb_sent = true;
	peer->hb_acked = false;
}

void
weft__msvc_hb_start(weft_msvc_peer *peer)
{
	uint64_t ms = peer->svc->cfg->limits.heartbeat_interval_ms;

	if (peer->hb_timer == NULL &&
	    weft_timer_new(peer->home->loop, on_heartbeat_timer, peer,
	                   &peer->hb_timer) != 0)
		return;
	weft_timer_start(peer->hb_timer, 1, ms);
}

/* The first use of a peer: start watching it. Home loop. */
void
weft__msvc_peer_touch(weft_msvc_peer *peer)
{
	if (peer->used || peer->is_client || peer->is_self ||
	    weft__msvc_peer_left(peer))
		return;
	peer->used = true;
	if (!atomic_load(&peer->svc->stopping))
		weft__msvc_hb_start(peer);
}

/*
 * A member known down that dials us is back (a node started after us,
 * or restarted): it is no longer known down, so what is sent to it waits
 * for our own connection instead of failing, and that connection is
 * dialed now rather than at the end of its back-off. If the dial fails,
 * the member is known down again.
 */
void
weft__msvc_peer_dialed_us(weft_msvc_peer *peer)
{
	weft__msvc_peer_touch(peer);
	if (peer->is_client || atomic_load(&peer->up) ||
	    weft__msvc_peer_left(peer) ||
	    peer->svc->cfg->limits.connections[WEFT_MSVC_URGENT] == 0 ||
	    !atomic_exchange(&peer->down, false))
		return;
	weft__msvc_dial_now(&peer->conns[WEFT_MSVC_URGENT][0].conn);
}
