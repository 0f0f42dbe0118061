/* SPDX-License-Identifier: MIT */
/*
 * read.c: what a connection receives. Its pipeline, from the channel on:
 *
 *   gate -> frame codec -> handshake handler -> msvc
 *
 * and once the handshake is done, when its handler leaves:
 *
 *   gate -> frame codec -> envelope codec -> msvc
 *
 * The gate opens each read batch (one clock reading for all of it) and
 * holds the batch back while the node's inbound budget is spent or the
 * connection is a client that does not read its answers: the bytes then
 * stay in the channel's input until reading resumes. The frame codec
 * (weft/frame.h) cuts and checks the frames, and says when one has begun
 * and not ended; the envelope codec (weft/envelope.h) decodes each
 * message. The handler at the end takes each envelope, hands requests to
 * dispatch and answers to the loop that waits for them, and stops the codec
 * before the next frame when the budget runs out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/envelope.h>
#include <weft/frame.h>

#include "msvc_int.h"

#define FORGED_WHY "answered a request that was not sent to it"

/* Hands a response to the loop that holds its pending request. The
 * channel it came on is held, to be closed should the answer be forged. */
struct handoff {
	struct weft__msvc_loop *ml;
	const weft_msvc_peer *from;
	weft_channel *ch;
	weft_envelope env;
	uint8_t payload[];
};

static void
handoff_task(weft_loop *loop, int status, void *arg)
{
	struct handoff *h = arg;

	(void)loop;
	if (status == 0 &&
	    weft__msvc_response(h->ml, h->from, &h->env) == WEFT__MSVC_FORGED) {
		weft_log_limited(&h->ml->svc->log_reject, WEFT_LOG_WARN,
		                 "msvc %s: closing connection from %s (%s): %s",
		                 h->ml->svc->id, weft_channel_peer(h->ch),
		                 h->from->id, FORGED_WHY);
		weft_channel_close(h->ch);
	}
	weft_channel_unref(h->ch);
	free(h);
}

static void
route_response(struct weft__msvc_conn *c, const weft_envelope *env)
{
	weft_msvc *svc = c->svc;
	uint32_t li = (uint32_t)(env->id >> 24) & 0xff;
	struct handoff *h;

	if (li == c->ml->index) {
		if (weft__msvc_response(c->ml, c->peer, env) ==
		    WEFT__MSVC_FORGED)
			weft__msvc_conn_reject(c, FORGED_WHY);
		return;
	}
	if (li >= svc->nloops || (h = malloc(sizeof(*h) + env->payload_len +
	                                     env->params_len)) == NULL) {
		weft__msvc_count(&svc->st.late_responses, 1);
		return;
	}
	h->ml = &svc->loops[li];
	h->from = c->peer;
	h->ch = c->ch;
	h->env = *env;
	memcpy(h->payload, env->payload, env->payload_len);
	h->env.payload = h->payload;
	/* The params (stage times) come along, after the payload. */
	if (env->params_len > 0) {
		memcpy(h->payload + env->payload_len, env->params,
		       env->params_len);
		h->env.params = h->payload + env->payload_len;
	}
	weft_channel_ref(h->ch);
	if (weft_loop_post(h->ml->loop, handoff_task, h) != 0) {
		weft_channel_unref(h->ch);
		free(h);
		return;
	}
	weft__msvc_count1(&c->ml->rs.handoffs, 1);
}

/* A message frame's envelope, decoded by the envelope codec; frame_bytes
 * is the frame's size on the wire. */
static void
on_message(struct weft__msvc_conn *c, const weft_envelope *env,
           size_t frame_bytes)
{
	weft__msvc_count1(&c->ml->rs.messages_in, 1);
	weft__msvc_count(&c->peer->st.received, 1);
	weft__msvc_count(&c->peer->st.bytes_received, frame_bytes);
	/* The envelope codec lets the CANCEL kind through on version 2
	 * only; in version 1 the bit is reserved, and ignored. */
	if ((env->flags & WEFT__MSVC_F_CANCEL) && c->version >= 2) {
		weft__msvc_cancel_arrived(c, env);
	} else if (!(env->flags & WEFT__MSVC_F_RESPONSE)) {
		weft__msvc_dispatch(c, env);
	} else if (c->peer->is_client) {
		/* Nothing is ever asked of a client. */
		weft__msvc_count(&c->svc->st.forged_responses, 1);
		weft__msvc_conn_reject(c, "a client sent a response");
	} else {
		route_response(c, env);
	}
}

static bool
is_client(const struct weft__msvc_conn *c)
{
	return c->peer != NULL && c->peer->is_client;
}

/* Stops reading c until the node's inbound bytes in flight go below
 * its limit again. */
static void
pause_reading(struct weft__msvc_conn *c)
{
	weft_msvc *svc = c->svc;
	uint64_t limit;
	_Atomic uint64_t *budget = weft__msvc_conn_budget(c, &limit);

	c->paused = true;
	LIST_INSERT_HEAD(is_client(c) ? &c->ml->paused_clients : &c->ml->paused,
	                 c, paused_link);
	atomic_fetch_add(&svc->paused_conns, 1);
	weft__msvc_count(&svc->st.read_pauses, 1);
	weft_channel_set_auto_read(c->ch, false);
	/* A release may have raced the pause: look again. */
	if (atomic_load(budget) < limit)
		weft__msvc_inflight_release(svc, 0, weft__msvc_conn_urgent(c));
}

/* Stops reading while too many inbound bytes are in flight (not counting
 * the reservation of c's own frame, which handling it gives back), or
 * while c is a client that does not read its answers. */
static bool
should_pause(struct weft__msvc_conn *c)
{
	uint64_t limit;
	_Atomic uint64_t *budget = weft__msvc_conn_budget(c, &limit);

	if (weft__msvc_guard_backlogged(c))
		return true;
	/* A connection with a message in assembly reads on until it ends:
	 * it holds room for all of it, which only its end gives back. */
	if (c->assembly_reserved != 0 ||
	    atomic_load_explicit(budget, memory_order_relaxed) -
	            c->frame_reserved <
	        limit)
		return false;
	pause_reading(c);
	return true;
}

/* Counts a message handed in by c in this turn; at c's read budget, c
 * gives up its turn: the loop serves every other ready connection before
 * the codec goes on (weft_channel_yield). */
static void
count_turn(struct weft__msvc_conn *c)
{
	const weft_msvc_limits *l = &c->svc->cfg->limits;
	uint32_t budget =
	    is_client(c) ? l->client_read_budget : l->member_read_budget;

	if (++c->turn_messages < budget)
		return;
	weft__msvc_count1(&c->ml->rs.read_yields, 1);
	weft_channel_yield(c->ch);
}

/* Reads client c again once its rate debt is paid, unless something else
 * holds its reading. */
static void
rate_resume(weft_timer *timer, void *arg)
{
	struct weft__msvc_conn *c = arg;

	(void)timer;
	c->rate_paused = false;
	if (c->ch != NULL && c->state != WEFT__MSVC_CLOSED && !c->paused &&
	    !c->blocked)
		weft_channel_set_auto_read(c->ch, true);
}

/* Takes a message of client c out of its rate limits; past them, c is
 * not read until it is back within them. */
static void
limit_rate(struct weft__msvc_conn *c)
{
	const weft_msvc_limits *l = &c->svc->cfg->limits;
	uint64_t wait_ns;

	if (!is_client(c) || (l->client_rate == 0 && l->address_rate == 0))
		return;
	wait_ns = weft__msvc_rate_take(c, weft__msvc_now_ns(c->ml));
	if (wait_ns == 0 || c->rate_paused)
		return;
	/* Without a timer the debt still holds: c pauses at its next
	 * message. */
	if (c->rate_timer == NULL &&
	    weft_timer_new(c->ml->loop, rate_resume, c, &c->rate_timer) != 0)
		return;
	c->rate_paused = true;
	weft__msvc_count(&c->svc->st.rate_limited, 1);
	weft_channel_set_auto_read(c->ch, false);
	weft_timer_start(c->rate_timer, (wait_ns + 999999) / 1000000, 0);
}

/* ---- The gate ---------------------------------------------------------- */

static void
gate_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct weft__msvc_conn *c = weft_ctx_state(ctx);

	weft__msvc_count1(&c->ml->rs.read_batches, 1);
	c->turn_messages = 0;
	weft__msvc_batch_begin(c->ml);
	weft__msvc_guard_active(c);
	if (c->state != WEFT__MSVC_CLOSED && !c->paused && !c->blocked &&
	    !(c->state == WEFT__MSVC_UP && should_pause(c)))
		weft_ctx_fire_read(ctx, type, msg);
	if (c->compression != WEFT_COMPRESS_NONE)
		weft__msvc_conn_count_stages(c);
	weft__msvc_batch_end(c->ml);
}

const weft_handler weft__msvc_gate_handler = {
    .read = gate_read,
};

/* ---- The service's handler --------------------------------------------- */

static void
h_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct weft__msvc_conn *c = weft_ctx_state(ctx);
	weft_envelope env;

	if (type != &weft_msg_envelope)
		return;
	/* Sent before what a newer connection of its member, class and
	 * index brought: dropped, not delivered out of order (conn.c). */
	if (weft__msvc_conn_is_superseded(c)) {
		weft__msvc_conn_drop_superseded(c, true);
		return;
	}
	if (c->state == WEFT__MSVC_CLOSED)
		return;
	env = *(const weft_envelope *)msg;
	/* A large payload comes in the frame's chains: made contiguous. */
	if (env.payload_buf != NULL) {
		env.payload = evbuffer_pullup(env.payload_buf, -1);
		env.payload_buf = NULL;
		if (env.payload == NULL && env.payload_len > 0) {
			weft__msvc_conn_reject(c, "out of memory");
			return;
		}
	}
	weft__msvc_frame_arrived(c);
	on_message(c, &env, WEFT_ENVELOPE_FRAME_BYTES(env.payload_len, c->crc));
	/* c's rate limits, the inbound budget, then c's turn decide whether
	 * the codec goes on to the next frame. */
	if (!weft__msvc_may_read_on(c))
		return;
	limit_rate(c);
	if (!should_pause(c))
		count_turn(c);
}

/* The frame codec found a frame begun and not ended at the end of a
 * batch: its bytes count as in flight, and its deadline runs. */
static void
h_user_event(weft_ctx *ctx, int event, void *data)
{
	struct weft__msvc_conn *c = weft_ctx_state(ctx);
	const weft_frame_partial *part = data;

	if (event == WEFT_CHUNK_EVENT_ASSEMBLING) {
		if (c->state == WEFT__MSVC_CLOSED)
			return;
		/* The chunk's frame is whole: what it held as a frame begun
		 * goes back before the message takes its room, or the two
		 * could wait for each other. */
		weft__msvc_frame_arrived(c);
		if (!weft__msvc_guard_assembling(c, data))
			pause_reading(c);
		return;
	}
	if (event != WEFT_FRAME_EVENT_INCOMPLETE) {
		weft_ctx_fire_user_event(ctx, event, data);
		return;
	}
	if (c->state == WEFT__MSVC_CLOSED)
		return;
	if (part->total == 0)
		weft__msvc_guard_frame_begun(c);
	else if (!weft__msvc_guard_frame_wait(c, part->total))
		pause_reading(c);
}

/* Whether the wire stage called name refused the input. */
static bool
stage_refused(struct weft__msvc_conn *c, const char *name)
{
	weft_codec_stats st;

	return weft_codec_get_stats(c->ch, name, &st) == 0 &&
	       st.malformed + st.too_big > 0;
}

/* The frame codec, a wire stage or the envelope codec refused the input
 * (it closes the channel itself): counted and logged here, in the
 * service's words and at its rate. Which one refused, its counters say. */
static void
h_error(weft_ctx *ctx, int status)
{
	struct weft__msvc_conn *c = weft_ctx_state(ctx);
	weft_msvc *svc = c->svc;
	bool up = c->state == WEFT__MSVC_UP;
	weft_codec_stats st;
	const char *why;

	if (c->state == WEFT__MSVC_CLOSED || c->ch == NULL)
		return;
	if (up && status == WEFT_EPROTO && weft_channel_is_open(c->ch) &&
	    weft_codec_get_stats(c->ch, WEFT__MSVC_ENVELOPE_CODEC, &st) == 0 &&
	    st.malformed > 0) {
		weft__msvc_count(&svc->st.bad_envelopes, 1);
		weft__msvc_conn_reject(c, "invalid envelope");
		return;
	}
	if (up && stage_refused(c, WEFT__MSVC_COMPRESS_CODEC)) {
		weft__msvc_count(&svc->st.bad_compressed, 1);
		weft__msvc_conn_reject(c, status == WEFT_ETOOBIG
		                              ? "compressed frame past a bound"
		                              : "invalid compressed frame");
		return;
	}
	if (up && stage_refused(c, WEFT__MSVC_CHUNK_CODEC)) {
		weft__msvc_count(&svc->st.bad_chunks, 1);
		weft__msvc_conn_reject(c, status == WEFT_ETOOBIG
		                              ? "chunked message above "
		                                "max_message"
		                              : "invalid chunk");
		return;
	}
	switch (status) {
	case WEFT_ECHECKSUM:
		weft__msvc_count(&svc->st.bad_frames, 1);
		why = "frame checksum mismatch";
		break;
	case WEFT_ETOOBIG:
	case WEFT_EPROTO:
		if (!weft_channel_is_open(c->ch)) {
			/* The peer went away in the middle of a frame. */
			if (!c->outbound) {
				weft__msvc_count(&svc->st.bad_frames, 1);
				weft_log_limited(
				    &svc->log_reject, WEFT_LOG_WARN,
				    "msvc %s: connection from %s closed "
				    "inside a frame",
				    svc->id, c->peer_addr);
			}
			return;
		}
		weft__msvc_count(up ? &svc->st.oversized_frames
		                    : &svc->st.handshakes_refused,
		                 1);
		why = status == WEFT_ETOOBIG ? "frame too large"
		                             : "frame too short";
		break;
	case WEFT_ENOMEM:
		why = "out of memory";
		break;
	default:
		return;
	}
	if (c->outbound && !up)
		snprintf(weft__msvc_outbound_of(c)->why,
		         sizeof(weft__msvc_outbound_of(c)->why),
		         "bad handshake reply: %s", why);
	weft__msvc_conn_reject(c, why);
}

static void
h_inactive(weft_ctx *ctx)
{
	struct weft__msvc_conn *c = weft_ctx_state(ctx);
	weft_msvc *svc = c->svc;

	if (atomic_fetch_sub(&svc->st.connections_open, 1) == 1)
		weft__msvc_closed(svc);
	if (c->paused) {
		LIST_REMOVE(c, paused_link);
		c->paused = false;
		atomic_fetch_sub(&svc->paused_conns, 1);
	}
	weft__msvc_conn_count_stages(c);
	weft__msvc_conn_drop_batch(c);
	c->ops->closed(c);
}

static void
h_removed(weft_ctx *ctx)
{
	struct weft__msvc_conn *c = weft_ctx_state(ctx);

	/* Nothing reaches c through the channel from here on. */
	weft_channel_set_data(weft_ctx_channel(ctx), NULL);
	c->ops->removed(c);
}

const weft_handler weft__msvc_handler = {
    .read = h_read,
    .user_event = h_user_event,
    .error = h_error,
    .inactive = h_inactive,
    .removed = h_removed,
    .flush = weft__msvc_conn_flush,
};

/* ---- Resuming ---------------------------------------------------------- */

/* Resumes the connections of one paused list that may read again; those
 * that must wait longer go back to it. */
static void
resume_list(weft_msvc *svc, struct weft__msvc_conn_list *list)
{
	LIST_HEAD(, weft__msvc_conn) todo;
	struct weft__msvc_conn *c;

	/* Each paused connection is looked at once: they move to a list of
	 * their own, and one that must wait longer (or pauses again) goes
	 * back. A connection closed meanwhile leaves whichever list holds
	 * it. */
	LIST_INIT(&todo);
	while ((c = LIST_FIRST(list)) != NULL) {
		LIST_REMOVE(c, paused_link);
		LIST_INSERT_HEAD(&todo, c, paused_link);
	}
	while ((c = LIST_FIRST(&todo)) != NULL) {
		LIST_REMOVE(c, paused_link);
		if (!weft__msvc_guard_may_resume(c)) {
			LIST_INSERT_HEAD(list, c, paused_link);
			continue;
		}
		c->paused = false;
		atomic_fetch_sub(&svc->paused_conns, 1);
		if (c->ch != NULL && !c->blocked && !c->rate_paused) {
			weft_channel_set_auto_read(c->ch, true);
		}
	}
}

void
weft__msvc_loop_resume(weft_loop *loop, int status, void *arg)
{
	struct weft__msvc_loop *ml = arg;
	weft_msvc *svc = ml->svc;

	(void)loop;
	atomic_store(&ml->resume_posted, false);
	if (status != 0)
		return;
	resume_list(svc, &ml->paused);
	/* Clients wait while the members' room is in use. */
	if (atomic_load(&svc->inflight) < weft__msvc_inbound_limit(svc, true))
		resume_list(svc, &ml->paused_clients);
}
