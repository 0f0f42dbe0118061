/* SPDX-License-Identifier: MIT */
/*
 * conn.c: a connection of the messaging service as an object: made when a
 * channel is accepted (or, for the fixed outbound ones, with their peer),
 * given its pipeline when a channel comes, closed, and freed. What it
 * does lives by concern: dial.c, handshake.c, read.c, write.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/frame.h>

#include "msvc_int.h"

/* Before the handshake: frames of a HELLO's size, CRCs on, both ways.
 * The handler after the codec logs bad input, in its words and at its
 * rate (read.c). */
static const weft_frame_codec_opts handshake_frames = {
    .max_frame_bytes = WEFT__MSVC_HELLO_MAX,
    .min_frame_bytes = 1,
    .crc32c = true,
    .emit_bytes = true,
    .quiet = true,
};

/* Gives ch the connection's pipeline (read.c shows it), bound to c. */
int
weft__msvc_conn_attach(struct weft__msvc_conn *c, weft_channel *ch)
{
	int rv;

	if ((rv = weft_pipeline_add_last(ch, "msvc-gate",
	                                 &weft__msvc_gate_handler, c)) != 0 ||
	    (rv = weft_frame_codec_add(ch, WEFT__MSVC_FRAME_CODEC,
	                               &handshake_frames)) != 0 ||
	    (rv = weft_pipeline_add_last(ch, WEFT__MSVC_HANDSHAKE_HANDLER,
	                                 &weft__msvc_handshake_handler, c)) !=
	        0 ||
	    (rv = weft_pipeline_add_last(ch, WEFT__MSVC_HANDLER,
	                                 &weft__msvc_handler, c)) != 0)
		return rv;
	weft_channel_set_data(ch, c);
	c->ch = ch;
	c->ctx = weft_pipeline_get(ch, WEFT__MSVC_HANDLER);
	c->seen_writes = 0;
	c->seen_bytes = 0;
	c->opened_ns = weft_now_ns();
	snprintf(c->peer_addr, sizeof(c->peer_addr), "%s",
	         weft_channel_peer(ch));
	atomic_fetch_add(&c->svc->st.connections_open, 1);
	return 0;
}

/* ---- Closing ----------------------------------------------------------- */

void
weft__msvc_conn_close(struct weft__msvc_conn *c, const char *why)
{
	struct weft__msvc_outbound *o = weft__msvc_outbound_of(c);

	if (o != NULL && o->connecting != NULL) {
		weft_connect_cancel(o->connecting);
		o->connecting = NULL;
		return;
	}
	if (c->ch != NULL && weft_channel_is_open(c->ch)) {
		weft_debug("msvc %s: closing %s: %s", c->svc->id, c->peer_addr,
		           why);
		weft_channel_close(c->ch);
	}
}

/* Closes c for bad input: logged with the reason, counted by the caller. */
void
weft__msvc_conn_reject(struct weft__msvc_conn *c, const char *why)
{
	weft_log_limited(&c->svc->log_reject, WEFT_LOG_WARN,
	                 "msvc %s: closing connection from %s (%s): %s",
	                 c->svc->id, c->peer_addr,
	                 c->peer != NULL ? c->peer->id : "?", why);
	if (c->ch != NULL)
		weft_channel_close(c->ch);
	c->state = WEFT__MSVC_CLOSED;
}

/* ---- Order across reconnections ---------------------------------------- */

/*
 * A member dials each of its connections (class, index) again only after
 * it gave up the one before: whatever the older connection still brings
 * was written before anything on the newer one. Bytes a network (or a
 * proxy in front of this node) held back may come after the newer
 * connection's, though, and this node may never see the older one's FIN.
 * So the HELLOs this node accepts from a member order its connections of
 * one class and index, and an older one still open is superseded: closed,
 * and what it still brings is dropped, never delivered after what came on
 * the newer one. The order is this node's, not a field on the wire: nodes
 * of every build are ordered alike.
 */

/* Closes every superseded connection of peer on ml. ml's loop. */
static void
sweep(struct weft__msvc_loop *ml, weft_msvc_peer *peer)
{
	struct weft__msvc_inbound *in, *next;

	for (in = LIST_FIRST(&ml->inbound); in != NULL; in = next) {
		next = LIST_NEXT(in, link);
		if (in->conn.peer == peer && in->conn.state == WEFT__MSVC_UP &&
		    weft__msvc_conn_is_superseded(&in->conn))
			weft__msvc_conn_drop_superseded(&in->conn, false);
	}
}

static void
sweep_task(weft_loop *loop, int status, void *arg)
{
	weft_msvc_peer *peer = arg;
	struct weft__msvc_loop *ml = weft__msvc_loop_of(peer->svc, loop);

	if (status == 0 && ml != NULL)
		sweep(ml, peer);
}

int
weft__msvc_conn_order_init(weft_msvc_peer *peer)
{
	_Atomic uint64_t *made, *none = NULL;

	if (atomic_load(&peer->newest_inbound) != NULL)
		return 0;
	/* Two loops may accept the member's first connections at once: one
	 * array is kept. */
	if ((made = calloc(WEFT_MSVC_CLASSES * WEFT__MSVC_INDEX_MAX,
	                   sizeof(*made))) == NULL)
		return WEFT_ENOMEM;
	if (!atomic_compare_exchange_strong(&peer->newest_inbound, &none, made))
		free(made);
	return 0;
}

void
weft__msvc_conn_supersede(struct weft__msvc_conn *c)
{
	weft_msvc *svc = c->svc;
	_Atomic uint64_t *newest = &atomic_load(
	    &c->peer->newest_inbound)[c->cls * WEFT__MSVC_INDEX_MAX + c->index];
	uint64_t gen = atomic_fetch_add(&svc->inbound_generations, 1) + 1;
	uint64_t before = atomic_load(newest);
	uint32_t i;

	c->generation = gen;
	while (before < gen &&
	       !atomic_compare_exchange_weak(newest, &before, gen))
		;
	if (before == 0)
		return; /* its first connection of this class and index */
	for (i = 0; i < svc->nloops; i++) {
		if (&svc->loops[i] == c->ml)
			sweep(c->ml, c->peer);
		else
			(void)weft_loop_post(svc->loops[i].loop, sweep_task,
			                     c->peer);
	}
}

void
weft__msvc_conn_drop_superseded(struct weft__msvc_conn *c, bool message)
{
	weft_msvc *svc = c->svc;

	if (message)
		weft__msvc_count(&svc->st.superseded_messages, 1);
	if (c->state == WEFT__MSVC_CLOSED)
		return;
	weft__msvc_count(&svc->st.superseded_connections, 1);
	weft_debug("msvc %s: closing %s (%s): a newer connection of its class "
	           "and index came",
	           svc->id, c->peer_addr, c->peer->id);
	c->state = WEFT__MSVC_CLOSED;
	if (c->ch != NULL) {
		weft_channel_close(c->ch);
		(void)weft__msvc_may_read_on(c);
	}
}

/* ---- Outbound connection objects --------------------------------------- */

/* Frees what a connection holds (not an outbound one itself, which lives
 * in its peer's array). Its loop, or a stopped one. */
void
weft__msvc_conn_fini(struct weft__msvc_conn *c)
{
	struct weft__msvc_out *out;

	while ((out = TAILQ_FIRST(&c->backlog)) != NULL) {
		TAILQ_REMOVE(&c->backlog, out, link);
		weft__msvc_out_free(out);
	}
	weft__msvc_conn_free_timers(c);
}

void
weft__msvc_conn_free_timers(struct weft__msvc_conn *c)
{
	c->ops->free_timers(c);
}
