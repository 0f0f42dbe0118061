/* SPDX-License-Identifier: MIT */
/*
 * dial.c: an outbound connection's life between handshakes: dialing,
 * the optional-TLS fallback to plaintext, and redialing with jittered
 * exponential back-off when a dial fails or a connection ends.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msvc_int.h"

static uint64_t
backoff_ms(struct weft__msvc_outbound *ob)
{
	const weft_msvc_limits *l = &ob->conn.svc->cfg->limits;
	uint64_t d = l->reconnect_min_ms;
	uint32_t i;

	for (i = 1; i < ob->attempts && d < l->reconnect_max_ms; i++)
		d *= 2;
	if (d > l->reconnect_max_ms)
		d = l->reconnect_max_ms;
	/* Jitter: somewhere between half and all of d. */
	return d / 2 + (uint64_t)rand_r(&ob->jitter_seed) % (d / 2 + 1);
}

static void
on_backoff(weft_timer *t, void *arg)
{
	struct weft__msvc_conn *c = arg;

	(void)t;
	c->state = WEFT__MSVC_IDLE;
	weft__msvc_conn_purge_backlog(c, false);
	/* A peer known down is redialed on the back-off schedule, so that
	 * requests stop failing soon after it is back. */
	if (!TAILQ_EMPTY(&c->backlog) ||
	    (c->cls == WEFT_MSVC_URGENT && c->index == 0 && c->peer->used &&
	     atomic_load(&c->peer->down)))
		weft__msvc_conn_dial(c);
}

/* The peer was heard from (it dialed us): c, waiting out a back-off, is
 * dialed now, and backs off from the shortest interval again. */
void
weft__msvc_dial_now(struct weft__msvc_conn *c)
{
	struct weft__msvc_outbound *ob = weft__msvc_outbound_of(c);

	if (c->state != WEFT__MSVC_BACKOFF || ob->backoff == NULL)
		return;
	weft_timer_stop(ob->backoff);
	ob->attempts = 0;
	on_backoff(ob->backoff, c);
	weft__msvc_conn_dial(c); /* if on_backoff did not */
}

/*
 * An outbound connection ended (or never started): back off. One that
 * never got through its handshake is a dial that failed: the peer is
 * unreachable, and what waited for the connection fails now rather than
 * when it expires.
 */
void
weft__msvc_dial_lost(struct weft__msvc_conn *c, int status)
{
	struct weft__msvc_outbound *ob = weft__msvc_outbound_of(c);
	weft_msvc_peer *peer = c->peer;
	bool dial_failed = !ob->established && !ob->retry_plain;

	c->ch = NULL;
	c->state = WEFT__MSVC_BACKOFF;
	ob->established = false;
	ob->retry_plain = false;
	if (ob->reply_timer != NULL)
		weft_timer_stop(ob->reply_timer);
	if (weft__msvc_peer_left(peer)) {
		/* Removed (members.c): not dialed again. */
		c->state = WEFT__MSVC_IDLE;
		weft__msvc_fail_conn_pending(c, WEFT_ENOTMEMBER);
		weft__msvc_conn_fail_backlog(c, WEFT_ENOTMEMBER);
		return;
	}
	weft__msvc_fail_conn_pending(c, WEFT_EPEERDOWN);
	if (atomic_load(&c->svc->stopping)) {
		/* Not dialed again: what waits for it (sent while it was
		 * closing) ends now, rather than hold the drain until its
		 * deadline. */
		c->state = WEFT__MSVC_IDLE;
		weft__msvc_conn_fail_backlog(c, WEFT_ESHUTDOWN);
		return;
	}
	if (dial_failed) {
		weft__msvc_peer_unreachable(
		    peer, ob->why[0] ? ob->why : weft_strerror(status));
		weft__msvc_conn_fail_backlog(c, WEFT_EPEERDOWN);
		atomic_fetch_add(&peer->failed_dials, 1);
		weft__msvc_sync_notify(c->svc);
	}
	ob->why[0] = '\0';
	if (c->cls == WEFT_MSVC_URGENT && atomic_load(&peer->up))
		weft__msvc_peer_down(peer, weft_strerror(status));
	ob->attempts++;
	if (ob->backoff == NULL &&
	    weft_timer_new(c->ml->loop, on_backoff, c, &ob->backoff) != 0) {
		c->state = WEFT__MSVC_IDLE;
		return;
	}
	weft_timer_stop(ob->backoff);
	weft_timer_start(ob->backoff, backoff_ms(ob), 0);
}

static int
outbound_init(weft_channel *ch, void *arg)
{
	return weft__msvc_conn_attach(arg, ch);
}

static void
on_connected(weft_channel *ch, int status, void *arg)
{
	struct weft__msvc_conn *c = arg;
	struct weft__msvc_outbound *ob = weft__msvc_outbound_of(c);

	ob->connecting = NULL;
	if (atomic_fetch_sub(&c->ml->connects_in_progress, 1) == 1)
		weft__msvc_closed(c->svc);
	if (status != 0) {
		/* In optional mode a peer that has no TLS yet (a rolling
		 * change) is dialed in plaintext from then on: that retry is
		 * part of this dial, which has not failed yet. */
		if ((status == WEFT_ETLS || status == WEFT_ECLOSED) &&
		    c->svc->cfg->tls.mode == WEFT_MSVC_TLS_OPTIONAL &&
		    c->svc->opts.tls != NULL && !ob->plain_fallback) {
			ob->plain_fallback = true;
			ob->retry_plain = true;
			weft_info("msvc %s: %s does not speak TLS; optional "
			          "mode dials it in plaintext",
			          c->svc->id, c->peer->id);
		}
		weft__msvc_count(&c->peer->st.connect_failures, 1);
		weft_debug("msvc %s: dial %s (%s) failed: %s", c->svc->id,
		           c->peer->id, c->peer_addr, weft_strerror(status));
		snprintf(ob->why, sizeof(ob->why), "%s at %s",
		         weft_strerror(status), c->peer_addr);
		weft__msvc_dial_lost(c, status);
		return;
	}
	(void)ch; /* attached by outbound_init */
	c->state = WEFT__MSVC_HANDSHAKE;
	c->crc = true;
	weft__msvc_handshake_send_hello(c);
}

void
weft__msvc_conn_dial(struct weft__msvc_conn *c)
{
	struct weft__msvc_outbound *ob = weft__msvc_outbound_of(c);
	weft_msvc *svc = c->svc;
	weft_msvc_peer *peer = c->peer;
	weft_connect_opts o = {0};
	char addr[WEFT_ADDRESS_MAX];
	int rv;

	if (c->state != WEFT__MSVC_IDLE || atomic_load(&svc->stopped) ||
	    weft__msvc_peer_left(peer))
		return;
	pthread_mutex_lock(&peer->addr_lock);
	weft_address_join(peer->host, peer->port, addr, sizeof(addr));
	pthread_mutex_unlock(&peer->addr_lock);
	snprintf(c->peer_addr, sizeof(c->peer_addr), "%s", addr);
	o.timeout_ms = svc->cfg->limits.connect_timeout_ms;
	o.channel.linger_ms = WEFT__MSVC_LINGER_MS;
	o.init = outbound_init;
	o.init_arg = c;
	/* With TLS the handshake checks the peer's name, and sessions resume
	 * per peer rather than per address. */
	o.server_name = peer->id;
	if (svc->cfg->tls.mode == WEFT_MSVC_TLS_ALL ||
	    (svc->cfg->tls.mode == WEFT_MSVC_TLS_OPTIONAL &&
	     !ob->plain_fallback))
		o.tls = svc->opts.tls;
	c->state = WEFT__MSVC_CONNECTING;
	rv = weft_connect_start(c->ml->loop, addr, &o, on_connected, c,
	                        &ob->connecting);
	if (rv != 0) {
		ob->connecting = NULL;
		weft__msvc_count(&peer->st.connect_failures, 1);
		weft_debug("msvc %s: cannot dial %s at %s: %s", svc->id,
		           peer->id, addr, weft_strerror(rv));
		snprintf(ob->why, sizeof(ob->why), "cannot dial %s: %s", addr,
		         weft_strerror(rv));
		weft__msvc_dial_lost(c, rv);
		return;
	}
	atomic_fetch_add(&c->ml->connects_in_progress, 1);
}

int
weft__msvc_conn_init_outbound(weft_msvc_peer *peer, int cls, uint32_t index,
                              struct weft__msvc_outbound *o)
{
	struct weft__msvc_conn *c = &o->conn;

	memset(o, 0, sizeof(*o));
	c->svc = peer->svc;
	c->ml = peer->home;
	c->peer = peer;
	c->outbound = true;
	c->ops = &weft__msvc_outbound_ops;
	c->crc = true;
	c->cls = (uint8_t)cls;
	c->index = index;
	c->state = WEFT__MSVC_IDLE;
	c->pending_head = UINT32_MAX;
	o->jitter_seed = (unsigned)(uintptr_t)o ^ (unsigned)weft_now_ns();
	TAILQ_INIT(&c->backlog);
	return 0;
}

/* An outbound connection's timers; on its loop, or a stopped one. */
static void
out_free_timers(struct weft__msvc_conn *c)
{
	struct weft__msvc_outbound *o = weft__msvc_outbound_of(c);

	if (o == NULL)
		return;
	if (o->backoff != NULL)
		weft_timer_free(o->backoff);
	o->backoff = NULL;
	if (o->reply_timer != NULL)
		weft_timer_free(o->reply_timer);
	o->reply_timer = NULL;
}

/* Its channel closed: the link dials again after its back-off. */
static void
out_closed(struct weft__msvc_conn *c)
{
	weft__msvc_guard_assembly_done(c);
	c->crc = true;
	/* Optional mode: a peer dialed in plaintext may have TLS by the time
	 * we redial (a rolling change), and may refuse plaintext from then
	 * on: each new connection tries TLS first. */
	weft__msvc_outbound_of(c)->plain_fallback = false;
	weft__msvc_dial_lost(c, WEFT_ECLOSED);
}

/* Its channel let go of it: it stays its peer's, for the next channel. */
static void
out_removed(struct weft__msvc_conn *c)
{
	(void)c;
}

const struct weft__msvc_conn_ops weft__msvc_outbound_ops = {
    .handshake = weft__msvc_handshake_reply,
    .closed = out_closed,
    .removed = out_removed,
    .free_timers = out_free_timers,
};
