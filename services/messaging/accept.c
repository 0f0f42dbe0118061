/* SPDX-License-Identifier: MIT */
/*
 * accept.c: a connection accepted by this node. It is made per channel on
 * the loop the transport chose, handshakes as the answering side, counts
 * in the guard's caps and budgets (guard.c) until it closes, and is freed
 * when its channel lets go of it. Its behaviour by kind is
 * weft__msvc_inbound_ops; dial.c has the other kind's.
 */
#include <stdlib.h>

#include "msvc_int.h"

static void in_closed(struct weft__msvc_conn *c);
static void in_removed(struct weft__msvc_conn *c);
static void in_free_timers(struct weft__msvc_conn *c);

const struct weft__msvc_conn_ops weft__msvc_inbound_ops = {
    .handshake = weft__msvc_handshake_hello,
    .closed = in_closed,
    .removed = in_removed,
    .free_timers = in_free_timers,
};

int
weft__msvc_accept_init(weft_channel *ch, void *arg)
{
	weft_msvc *svc = arg;
	struct weft__msvc_inbound *in;
	struct weft__msvc_conn *c;
	int rv;

	if ((in = calloc(1, sizeof(*in))) == NULL)
		return WEFT_ENOMEM;
	c = &in->conn;
	c->svc = svc;
	c->ops = &weft__msvc_inbound_ops;
	c->ml = weft__msvc_loop_of(svc, weft_channel_loop(ch));
	c->state = WEFT__MSVC_HANDSHAKE;
	c->crc = true;
	c->pending_head = UINT32_MAX;
	TAILQ_INIT(&c->backlog);
	if (c->ml == NULL) {
		free(in);
		return WEFT_EINVAL;
	}
	if ((rv = weft__msvc_conn_attach(c, ch)) != 0) {
		free(in);
		return rv;
	}
	atomic_fetch_add(&svc->st.connections_accepted, 1);
	LIST_INSERT_HEAD(&c->ml->inbound, in, link);
	atomic_fetch_add(&c->ml->inbound_len, 1);
	/* On failure the channel closes, and its handler frees it. */
	return weft__msvc_guard_accept(c);
}

/* Frees an inbound connection. */
void
weft__msvc_conn_free(struct weft__msvc_conn *c)
{
	struct weft__msvc_inbound *in = weft__msvc_inbound_of(c);
	weft_msvc_peer *peer = c->peer;
	weft_msvc *svc = c->svc;
	bool last;

	LIST_REMOVE(in, link);
	last = atomic_fetch_sub(&c->ml->inbound_len, 1) == 1;
	weft__msvc_guard_fini(c);
	weft__msvc_conn_fini(c);
	free(in);
	if (peer != NULL && peer->is_client)
		weft__msvc_peer_unref(peer);
	if (last)
		weft__msvc_closed(svc);
}

/* Its channel closed: what the guard counted for it goes back, and a
 * client's answers that were waiting for it are dropped. */
static void
in_closed(struct weft__msvc_conn *c)
{
	weft__msvc_guard_release(c);
	weft__msvc_rate_release(c);
	c->state = WEFT__MSVC_CLOSED;
	c->ch = NULL;
	if (c->peer != NULL && c->peer->is_client) {
		c->peer->client_conn = NULL;
		weft__msvc_conn_purge_backlog(c, true);
	}
}

static void
in_removed(struct weft__msvc_conn *c)
{
	weft__msvc_conn_free(c);
}

/* Its one timer, the guard's watch, goes with weft__msvc_guard_fini. */
static void
in_free_timers(struct weft__msvc_conn *c)
{
	(void)c;
}
