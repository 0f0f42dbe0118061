/* SPDX-License-Identifier: MIT */
/*
 * conn.c: one connection of the messaging service: the pipeline handler
 * that reads frames straight from the channel's input buffer, the
 * handshake on both sides, dialing with back-off, and batched writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/buffer.h>

#include <weft/tls.h>

#include "msvc_int.h"

#define NONE UINT32_MAX
/* A message frame this short cannot hold an envelope. */
#define MIN_ENVELOPE 8

static void on_handshake_timeout(weft_timer *t, void *arg);
static void on_backoff(weft_timer *t, void *arg);

/* ---- Writing ----------------------------------------------------------- */

/* Moves the small frames gathered in c->scratch into c->tx. */
static void
scratch_to_tx(struct weft__msvc_conn *c)
{
	if (c->scratch_len == 0)
		return;
	evbuffer_add(c->tx, c->scratch, c->scratch_len);
	c->scratch_len = 0;
}

/*
 * Makes room for an n-byte frame (n <= WEFT__MSVC_SCRATCH) at the end of
 * c->scratch; false when memory is short (the frame then goes the large
 * way). The buffer is made on a connection's first small frame (accepted
 * member connections and unused classes never need one) and grows only
 * when a batch outgrows it; a full one is moved to tx.
 */
static bool
scratch_room(struct weft__msvc_conn *c, size_t n)
{
	size_t need = c->scratch_len + n, cap = c->scratch_cap;
	uint8_t *p;

	if (need <= cap)
		return true;
	if (cap == WEFT__MSVC_SCRATCH) {
		scratch_to_tx(c);
		return true;
	}
	if (cap == 0)
		cap = WEFT__MSVC_SCRATCH_MIN;
	while (cap < need && cap < WEFT__MSVC_SCRATCH)
		cap *= 2;
	if (cap > WEFT__MSVC_SCRATCH)
		cap = WEFT__MSVC_SCRATCH;
	if (need > cap)
		scratch_to_tx(c);
	if ((p = realloc(c->scratch, cap)) == NULL)
		return false;
	c->scratch = p;
	c->scratch_cap = cap;
	return true;
}

/*
 * The CRC of an evbuffer's bytes, 16 chains at a time. Asked for
 * everything (len -1), evbuffer_peek stops once the vectors it was given
 * are full and returns their number, so a full 16 means "maybe more".
 */
static uint32_t
crc_of_buffer(uint32_t crc, struct evbuffer *buf)
{
	struct evbuffer_iovec v[16];
	struct evbuffer_ptr pos;
	int i, got;

	if (evbuffer_ptr_set(buf, &pos, 0, EVBUFFER_PTR_SET) != 0)
		return crc;
	for (;;) {
		size_t adv = 0;

		got = evbuffer_peek(buf, -1, &pos, v, 16);
		for (i = 0; i < got && i < 16; i++) {
			crc =
			    weft__msvc_crc32c(crc, v[i].iov_base, v[i].iov_len);
			adv += v[i].iov_len;
		}
		if (got < 16 ||
		    evbuffer_ptr_set(buf, &pos, adv, EVBUFFER_PTR_ADD) != 0)
			return crc;
	}
}

/* A large payload: header, payload and trailer go to tx separately. */
static void
encode_large(struct weft__msvc_conn *c, uint8_t *h, const void *data,
             size_t len, struct evbuffer *buf)
{
	uint32_t crc = 0;
	uint8_t tail[4];

	scratch_to_tx(c);
	if (c->crc)
		crc = weft__msvc_crc32c(0, h, WEFT__MSVC_FRAME_HEADER);
	evbuffer_add(c->tx, h, WEFT__MSVC_FRAME_HEADER);
	if (buf != NULL) {
		if (c->crc)
			crc = crc_of_buffer(crc, buf);
		evbuffer_add_buffer(c->tx, buf);
	} else if (len > 0) {
		if (c->crc)
			crc = weft__msvc_crc32c(crc, data, len);
		evbuffer_add(c->tx, data, len);
	}
	if (c->crc) {
		weft__store_be32(tail, crc);
		evbuffer_add(c->tx, tail, 4);
	}
}

size_t
weft__msvc_conn_encode(struct weft__msvc_conn *c, uint64_t id, uint32_t verb,
                       uint32_t flags, uint64_t created_ms, uint64_t expires_ms,
                       const void *data, size_t len, struct evbuffer *buf)
{
	size_t body = WEFT__MSVC_ENV_HEADER + len;
	size_t n = 4 + body + (c->crc ? 4 : 0);
	uint8_t big[WEFT__MSVC_FRAME_HEADER], *h;

	if (buf == NULL && n <= WEFT__MSVC_SCRATCH && scratch_room(c, n)) {
		/* Small: written in place, one CRC pass, no evbuffer call. */
		h = c->scratch + c->scratch_len;
		weft__store_be32(h, (uint32_t)body);
		weft__msvc_env_header(h + 4, id, verb, flags, created_ms,
		                      expires_ms, (uint32_t)len);
		if (len > 0)
			memcpy(h + WEFT__MSVC_FRAME_HEADER, data, len);
		if (c->crc)
			weft__store_be32(h + 4 + body,
			                 weft__msvc_crc32c(0, h, 4 + body));
		c->scratch_len += n;
	} else {
		weft__store_be32(big, (uint32_t)body);
		weft__msvc_env_header(big + 4, id, verb, flags, created_ms,
		                      expires_ms, (uint32_t)len);
		encode_large(c, big, data, len, buf);
	}
	weft__msvc_count1(&c->ml->rs.messages_out, 1);
	if (c->peer != NULL) {
		weft__msvc_count(&c->peer->st.sent, 1);
		weft__msvc_count(&c->peer->st.bytes_sent, n);
	}
	if (verb < WEFT_MSVC_MAX_VERBS && !(flags & WEFT__MSVC_F_RESPONSE)) {
		weft__msvc_count(&c->svc->verbs[verb].sent, 1);
		weft__msvc_count(&c->svc->verbs[verb].bytes_sent, len);
	}
	return n;
}

static void count_writes(struct weft__msvc_conn *c);

/* A batch's bytes left (or can no longer leave): release them. */
static void
on_written(weft_channel *ch, int status, void *arg)
{
	struct weft__msvc_conn *c = weft_channel_data(ch);

	(void)status;
	if (c == NULL || c->peer == NULL)
		return;
	weft__msvc_release_queued(c->peer, (size_t)(uintptr_t)arg);
	count_writes(c);
	weft__msvc_guard_drained(c);
}

/* Adds the socket writes the channel made since the last look to the
 * loop's counters, for bytes per write. */
static void
count_writes(struct weft__msvc_conn *c)
{
	weft_channel_stats st;

	if (c->ch == NULL)
		return;
	weft_channel_get_stats(c->ch, &st);
	weft__msvc_count1(&c->ml->rs.write_calls, st.writes - c->seen_writes);
	weft__msvc_count1(&c->ml->rs.bytes_written,
	                  st.bytes_written - c->seen_bytes);
	c->seen_writes = st.writes;
	c->seen_bytes = st.bytes_written;
}

static void
flush_conn(struct weft__msvc_conn *c)
{
	size_t n = c->tx_accounted;

	scratch_to_tx(c);
	if (evbuffer_get_length(c->tx) == 0)
		return;
	weft__msvc_guard_active(c);
	c->tx_accounted = 0;
	/* The channel writes the batch at once when the socket takes it. A
	 * closing connection takes no more bytes: the batch's bytes are
	 * released here, not by a write callback. */
	if (c->ch == NULL || !weft_channel_is_open(c->ch) ||
	    weft_channel_write(c->ch, c->tx, on_written,
	                       (void *)(uintptr_t)n) != 0) {
		evbuffer_drain(c->tx, evbuffer_get_length(c->tx));
		if (c->peer != NULL)
			weft__msvc_release_queued(c->peer, n);
	}
	count_writes(c);
}

void
weft__msvc_loop_flush(weft_loop *loop, int status, void *arg)
{
	struct weft__msvc_loop *ml = arg;
	struct weft__msvc_conn *c;

	(void)loop;
	(void)status;
	ml->flush_posted = false;
	weft__msvc_count1(&ml->rs.drain_batches, 1);
	while ((c = ml->dirty) != NULL) {
		ml->dirty = c->dirty_next;
		c->dirty = false;
		flush_conn(c);
	}
}

/* Queues c for the end-of-batch flush. */
void
weft__msvc_conn_mark_dirty(struct weft__msvc_conn *c)
{
	struct weft__msvc_loop *ml = c->ml;

	if (c->dirty)
		return;
	c->dirty = true;
	c->dirty_next = ml->dirty;
	ml->dirty = c;
	if (!ml->flush_posted) {
		ml->flush_posted = true;
		if (weft_loop_post_task(ml->loop, &ml->flush_task) != 0) {
			ml->flush_posted = false;
			weft__msvc_loop_flush(ml->loop, 0, ml);
		}
	}
}

/* Takes c off its loop's dirty list (rare: only when it closes). */
static void
unlink_dirty(struct weft__msvc_conn *c)
{
	struct weft__msvc_conn **pp = &c->ml->dirty;

	while (*pp != NULL && *pp != c)
		pp = &(*pp)->dirty_next;
	if (*pp == c)
		*pp = c->dirty_next;
	c->dirty = false;
}

/* ---- Closing ----------------------------------------------------------- */

void
weft__msvc_conn_close(struct weft__msvc_conn *c, const char *why)
{
	if (c->connecting != NULL) {
		weft_connect_cancel(c->connecting);
		c->connecting = NULL;
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

static uint64_t
backoff_ms(struct weft__msvc_conn *c)
{
	const weft_msvc_limits *l = &c->svc->cfg->limits;
	uint64_t d = l->reconnect_min_ms;
	uint32_t i;

	for (i = 1; i < c->attempts && d < l->reconnect_max_ms; i++)
		d *= 2;
	if (d > l->reconnect_max_ms)
		d = l->reconnect_max_ms;
	/* Jitter: somewhere between half and all of d. */
	return d / 2 + (uint64_t)rand_r(&c->jitter_seed) % (d / 2 + 1);
}

/*
 * An outbound connection ended (or never started): back off. One that
 * never got through its handshake is a dial that failed: the peer is
 * unreachable, and what waited for the connection fails now rather than
 * when it expires.
 */
static void
outbound_lost(struct weft__msvc_conn *c, int status)
{
	weft_msvc_peer *peer = c->peer;
	bool dial_failed = !c->established && !c->retry_plain;

	c->ch = NULL;
	c->state = WEFT__MSVC_BACKOFF;
	c->established = false;
	c->retry_plain = false;
	weft__msvc_fail_conn_pending(c, WEFT_EPEERDOWN);
	if (atomic_load(&c->svc->stopping)) {
		c->state = WEFT__MSVC_IDLE;
		return;
	}
	if (dial_failed) {
		weft__msvc_peer_unreachable(
		    peer, c->why[0] ? c->why : weft_strerror(status));
		weft__msvc_conn_fail_backlog(c, WEFT_EPEERDOWN);
	}
	c->why[0] = '\0';
	if (c->cls == WEFT_MSVC_URGENT && atomic_load(&peer->up))
		weft__msvc_peer_down(peer, weft_strerror(status));
	c->attempts++;
	if (c->timer == NULL &&
	    weft_timer_new(c->ml->loop, on_backoff, c, &c->timer) != 0) {
		c->state = WEFT__MSVC_IDLE;
		return;
	}
	weft_timer_stop(c->timer);
	c->timer_is_backoff = true;
	weft_timer_start(c->timer, backoff_ms(c), 0);
}

static void
on_backoff(weft_timer *t, void *arg)
{
	struct weft__msvc_conn *c = arg;

	(void)t;
	if (c->timer_is_backoff == false) {
		on_handshake_timeout(t, arg);
		return;
	}
	c->state = WEFT__MSVC_IDLE;
	weft__msvc_conn_purge_backlog(c, false);
	/* A peer known down is redialed on the back-off schedule, so that
	 * requests stop failing soon after it is back. */
	if (!TAILQ_EMPTY(&c->backlog) ||
	    (c->cls == WEFT_MSVC_URGENT && c->index == 0 && c->peer->used &&
	     atomic_load(&c->peer->down)))
		weft__msvc_conn_dial(c);
}

/* ---- The pipeline handler --------------------------------------------- */

static void process_frames(struct weft__msvc_conn *c, struct evbuffer *in);

static void
h_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct weft__msvc_conn *c = weft_ctx_state(ctx);

	if (type != &weft_msg_evbuffer) {
		weft_msg_free(type, msg);
		return;
	}
	weft__msvc_count1(&c->ml->rs.read_batches, 1);
	process_frames(c, msg);
}

/* A peer that went away in the middle of a frame. */
static void
report_truncated(struct weft__msvc_conn *c)
{
	size_t left;

	if (c->ch == NULL || c->state == WEFT__MSVC_CLOSED)
		return;
	left = weft_channel_pending_read_bytes(c->ch);
	if (left == 0)
		return;
	weft__msvc_count(&c->svc->st.bad_frames, 1);
	weft_log_limited(&c->svc->log_reject, WEFT_LOG_WARN,
	                 "msvc %s: connection from %s closed inside a frame "
	                 "(%zu byte(s) left)",
	                 c->svc->id, c->peer_addr, left);
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
	if (c->timer != NULL)
		weft_timer_stop(c->timer);
	if (c->dirty)
		unlink_dirty(c);
	evbuffer_drain(c->tx, evbuffer_get_length(c->tx));
	c->scratch_len = 0;
	if (c->peer != NULL)
		weft__msvc_release_queued(c->peer, c->tx_accounted);
	c->tx_accounted = 0;
	if (c->outbound) {
		c->crc = true;
		/* Optional mode: a peer dialed in plaintext may have TLS by
		 * the time we redial (a rolling change), and may refuse
		 * plaintext from then on: each new connection tries TLS
		 * first. */
		c->plain_fallback = false;
		outbound_lost(c, WEFT_ECLOSED);
		return;
	}
	report_truncated(c);
	weft__msvc_guard_release(c);
	c->state = WEFT__MSVC_CLOSED;
	c->ch = NULL;
	if (c->peer != NULL && c->peer->is_client) {
		c->peer->client_conn = NULL;
		weft__msvc_conn_purge_backlog(c, true);
	}
}

static void
h_removed(weft_ctx *ctx)
{
	struct weft__msvc_conn *c = weft_ctx_state(ctx);

	/* Nothing reaches c through the channel from here on. */
	weft_channel_set_data(weft_ctx_channel(ctx), NULL);
	if (!c->outbound)
		weft__msvc_conn_free(c);
}

static const weft_handler msvc_handler = {
    .read = h_read,
    .inactive = h_inactive,
    .removed = h_removed,
};

static int
attach(struct weft__msvc_conn *c, weft_channel *ch)
{
	int rv;

	if ((rv = weft_pipeline_add_last(ch, "msvc", &msvc_handler, c)) != 0)
		return rv;
	weft_channel_set_data(ch, c);
	c->ch = ch;
	c->seen_writes = 0;
	c->seen_bytes = 0;
	snprintf(c->peer_addr, sizeof(c->peer_addr), "%s",
	         weft_channel_peer(ch));
	atomic_fetch_add(&c->svc->st.connections_open, 1);
	return 0;
}

static void
start_handshake_timer(struct weft__msvc_conn *c)
{
	if (c->timer == NULL &&
	    weft_timer_new(c->ml->loop, on_backoff, c, &c->timer) != 0)
		return;
	c->timer_is_backoff = false;
	weft_timer_start(c->timer, c->svc->cfg->limits.connect_timeout_ms, 0);
}

static void
on_handshake_timeout(weft_timer *t, void *arg)
{
	struct weft__msvc_conn *c = arg;

	(void)t;
	if (c->state != WEFT__MSVC_HANDSHAKE)
		return;
	weft__msvc_count(&c->svc->st.handshakes_refused, 1);
	if (c->outbound)
		snprintf(c->why, sizeof(c->why), "no handshake reply in time");
	weft__msvc_conn_reject(c, "no handshake in time");
}

/* ---- Accepting --------------------------------------------------------- */

static struct weft__msvc_loop *
loop_of(weft_msvc *svc, weft_loop *loop)
{
	uint32_t i;

	for (i = 0; i < svc->nloops; i++)
		if (svc->loops[i].loop == loop)
			return &svc->loops[i];
	return NULL;
}

int
weft__msvc_accept_init(weft_channel *ch, void *arg)
{
	weft_msvc *svc = arg;
	struct weft__msvc_conn *c;
	int rv;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return WEFT_ENOMEM;
	c->svc = svc;
	c->ml = loop_of(svc, weft_channel_loop(ch));
	c->state = WEFT__MSVC_HANDSHAKE;
	c->crc = true;
	c->pending_head = NONE;
	TAILQ_INIT(&c->backlog);
	if (c->ml == NULL || (c->tx = evbuffer_new()) == NULL) {
		rv = c->ml == NULL ? WEFT_EINVAL : WEFT_ENOMEM;
		free(c);
		return rv;
	}
	if ((rv = attach(c, ch)) != 0) {
		evbuffer_free(c->tx);
		free(c->scratch);
		free(c);
		return rv;
	}
	atomic_fetch_add(&svc->st.connections_accepted, 1);
	LIST_INSERT_HEAD(&c->ml->inbound, c, inbound_link);
	atomic_fetch_add(&c->ml->inbound_len, 1);
	/* On failure the channel closes, and its handler frees c. */
	return weft__msvc_guard_accept(c);
}

static void
refuse(struct weft__msvc_conn *c, int status, const char *reason)
{
	struct weft__msvc_reply r = {.status = (uint64_t)status};
	struct evbuffer *buf = evbuffer_new();

	snprintf(r.id, sizeof(r.id), "%s", c->svc->id);
	snprintf(r.reason, sizeof(r.reason), "%s", reason);
	if (status == WEFT__MSVC_R_VERSION)
		snprintf(r.reason, sizeof(r.reason),
		         "no common version: this node speaks %d..%d",
		         WEFT__MSVC_VERSION_MIN, WEFT__MSVC_VERSION_MAX);
	weft__msvc_count(&c->svc->st.handshakes_refused, 1);
	if (buf != NULL && weft__msvc_reply_encode(buf, &r) == 0)
		weft_channel_write(c->ch, buf, NULL, NULL);
	if (buf != NULL)
		evbuffer_free(buf);
	weft__msvc_conn_reject(c, r.reason);
}

/* Posted to a member's home loop when it dialed us: watch it too. */
static void
touch_task(weft_loop *loop, int status, void *arg)
{
	(void)loop;
	if (status == 0)
		weft__msvc_peer_touch(arg);
}

/*
 * In optional mode, a plaintext claim to be a member is refused once that
 * member has been seen over TLS (a node that has its certificate dials
 * with TLS from then on), unless the config allows plaintext members.
 */
static bool
plaintext_claim_refused(const weft_msvc *svc, ssize_t member)
{
	return svc->cfg->tls.mode == WEFT_MSVC_TLS_OPTIONAL &&
	       !svc->cfg->tls.allow_plaintext_members &&
	       atomic_load(&svc->peers[member]->seen_tls);
}

static int
check_hello(struct weft__msvc_conn *c, const struct weft__msvc_hello *h,
            ssize_t *member, const char **why)
{
	weft_msvc *svc = c->svc;
	uint64_t v = h->max_version < WEFT__MSVC_VERSION_MAX
	                 ? h->max_version
	                 : WEFT__MSVC_VERSION_MAX;

	*member = weft__msvc_config_find(svc->cfg, h->id);
	if (v < h->min_version || v < WEFT__MSVC_VERSION_MIN)
		return *why = "unsupported version", WEFT__MSVC_R_VERSION;
	if (strcmp(h->cluster, svc->cfg->cluster) != 0)
		return *why = "wrong cluster", WEFT__MSVC_R_CLUSTER;
	if (h->cls >= WEFT_MSVC_CLASSES)
		return *why = "bad connection class", WEFT__MSVC_R_BAD_CLASS;
	if (h->role == 0 && *member < 0)
		return *why = "unknown node id", WEFT__MSVC_R_UNKNOWN_NODE;
	if (h->role == 0 && svc->member && (uint32_t)*member == svc->self_index)
		return *why = "claims this node's own id",
		       WEFT__MSVC_R_UNKNOWN_NODE;
	if (h->role == 1 && *member >= 0)
		return *why = "client claims a member id",
		       WEFT__MSVC_R_UNKNOWN_NODE;
	if (h->role == 1 && !svc->cfg->limits.allow_clients)
		return *why = "clients not accepted", WEFT__MSVC_R_NO_CLIENTS;
	if (h->role > 1 || !weft__msvc_id_is_valid(h->id))
		return *why = "bad role or id", WEFT__MSVC_R_MALFORMED;
	/* From the start of a drain the node is going away: it lets in only
	 * members that owe it answers (they reply on connections of their
	 * own), until the drain ends. */
	if (atomic_load(&svc->stopping) &&
	    (*member < 0 || atomic_load(&svc->stopped) ||
	     weft__msvc_relaxed(&svc->peers[*member]->st.pending) == 0))
		return *why = "shutting down", WEFT__MSVC_R_SHUTTING_DOWN;
	/* With TLS, a member or client must be who its certificate names: a
	 * valid cluster certificate does not let one speak for another. */
	if (c->ch != NULL && weft_tls_is_active(c->ch)) {
		if (weft_tls_peer_check(c->ch, h->id) != 0)
			return *why =
			           h->role == 0
			               ? "certificate does not name this node "
			                 "id"
			               : "certificate does not name this "
			                 "client id",
			       WEFT__MSVC_R_AUTH;
	} else if (h->role == 0 && plaintext_claim_refused(svc, *member)) {
		return *why = "member seen over TLS claimed in plaintext",
		       WEFT__MSVC_R_AUTH;
	}
	return WEFT__MSVC_OK;
}

static void
on_hello(struct weft__msvc_conn *c, const uint8_t *body, size_t n)
{
	weft_msvc *svc = c->svc;
	struct weft__msvc_hello h;
	struct weft__msvc_reply r = {0};
	struct evbuffer *buf;
	const char *why = "malformed hello";
	ssize_t member = -1;
	int status = WEFT__MSVC_R_MALFORMED;

	if (weft__msvc_hello_decode(body, n, &h) == 0)
		status = check_hello(c, &h, &member, &why);
	if (status == WEFT__MSVC_OK && member < 0)
		status = weft__msvc_guard_admit_client(c, &why);
	if (status != WEFT__MSVC_OK) {
		refuse(c, status, why);
		return;
	}
	if (member >= 0) {
		c->peer = svc->peers[member];
		if (weft_tls_is_active(c->ch))
			atomic_store(&c->peer->seen_tls, true);
	} else if (weft__msvc_peer_client_new(svc, c, h.id, &c->peer) != 0) {
		refuse(c, WEFT__MSVC_R_SHUTTING_DOWN, "out of memory");
		return;
	}
	c->cls = (uint8_t)h.cls;
	c->index = (uint32_t)h.index;
	r.version = WEFT__MSVC_VERSION_MAX < h.max_version
	                ? WEFT__MSVC_VERSION_MAX
	                : h.max_version;
	snprintf(r.id, sizeof(r.id), "%s", svc->id);
	/* CRCs go only where TLS protects every byte already. */
	c->crc = !(weft_tls_is_active(c->ch) && (h.flags & 1));
	r.flags = c->crc ? 1 : 0;
	r.max_frame = svc->cfg->limits.max_frame_bytes;
	if ((buf = evbuffer_new()) == NULL ||
	    weft__msvc_reply_encode(buf, &r) != 0 ||
	    weft_channel_write(c->ch, buf, NULL, NULL) != 0) {
		if (buf != NULL)
			evbuffer_free(buf);
		weft__msvc_conn_reject(c, "cannot answer the handshake");
		return;
	}
	evbuffer_free(buf);
	weft__msvc_guard_handshake_done(c);
	c->state = WEFT__MSVC_UP;
	if (member >= 0 && svc->member && !c->peer->is_self) {
		if (c->peer->home == c->ml)
			weft__msvc_peer_touch(c->peer);
		else if (weft_loop_post(c->peer->home->loop, touch_task,
		                        c->peer) == 0)
			weft__msvc_count1(&c->ml->rs.handoffs, 1);
	}
}

/* ---- Dialing ----------------------------------------------------------- */

static int
outbound_init(weft_channel *ch, void *arg)
{
	return attach(arg, ch);
}

static void
send_hello(struct weft__msvc_conn *c)
{
	weft_msvc *svc = c->svc;
	struct weft__msvc_hello h = {
	    .min_version = WEFT__MSVC_VERSION_MIN,
	    .max_version = WEFT__MSVC_VERSION_MAX,
	    .role = svc->member ? 0 : 1,
	    .cls = c->cls,
	    .index = c->index,
	    .flags = weft_tls_is_active(c->ch) ? 1 : 0,
	};
	struct evbuffer *buf = evbuffer_new();

	snprintf(h.cluster, sizeof(h.cluster), "%s", svc->cfg->cluster);
	snprintf(h.id, sizeof(h.id), "%s", svc->id);
	if (buf == NULL || weft__msvc_hello_encode(buf, &h) != 0 ||
	    weft_channel_write(c->ch, buf, NULL, NULL) != 0)
		weft_channel_close(c->ch);
	if (buf != NULL)
		evbuffer_free(buf);
}

static void
on_connected(weft_channel *ch, int status, void *arg)
{
	struct weft__msvc_conn *c = arg;

	c->connecting = NULL;
	if (atomic_fetch_sub(&c->ml->connects_in_progress, 1) == 1)
		weft__msvc_closed(c->svc);
	if (status != 0) {
		/* In optional mode a peer that has no TLS yet (a rolling
		 * change) is dialed in plaintext from then on: that retry is
		 * part of this dial, which has not failed yet. */
		if ((status == WEFT_ETLS || status == WEFT_ECLOSED) &&
		    c->svc->cfg->tls.mode == WEFT_MSVC_TLS_OPTIONAL &&
		    c->svc->opts.tls != NULL && !c->plain_fallback) {
			c->plain_fallback = true;
			c->retry_plain = true;
			weft_info("msvc %s: %s does not speak TLS; optional "
			          "mode dials it in plaintext",
			          c->svc->id, c->peer->id);
		}
		weft__msvc_count(&c->peer->st.connect_failures, 1);
		weft_debug("msvc %s: dial %s (%s) failed: %s", c->svc->id,
		           c->peer->id, c->peer_addr, weft_strerror(status));
		snprintf(c->why, sizeof(c->why), "%s at %s",
		         weft_strerror(status), c->peer_addr);
		outbound_lost(c, status);
		return;
	}
	(void)ch; /* attached by outbound_init */
	c->state = WEFT__MSVC_HANDSHAKE;
	c->crc = true;
	send_hello(c);
	start_handshake_timer(c);
}

void
weft__msvc_conn_dial(struct weft__msvc_conn *c)
{
	weft_msvc *svc = c->svc;
	weft_msvc_peer *peer = c->peer;
	weft_connect_opts o = {0};
	char addr[WEFT_ADDRESS_MAX];
	int rv;

	if (c->state != WEFT__MSVC_IDLE || atomic_load(&svc->stopped))
		return;
	pthread_mutex_lock(&peer->addr_lock);
	if (strchr(peer->host, ':') != NULL)
		snprintf(addr, sizeof(addr), "[%s]:%u", peer->host,
		         (unsigned)peer->port);
	else
		snprintf(addr, sizeof(addr), "%s:%u", peer->host,
		         (unsigned)peer->port);
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
	     !c->plain_fallback))
		o.tls = svc->opts.tls;
	c->state = WEFT__MSVC_CONNECTING;
	rv = weft_connect_start(c->ml->loop, addr, &o, on_connected, c,
	                        &c->connecting);
	if (rv != 0) {
		c->connecting = NULL;
		weft__msvc_count(&peer->st.connect_failures, 1);
		weft_debug("msvc %s: cannot dial %s at %s: %s", svc->id,
		           peer->id, addr, weft_strerror(rv));
		snprintf(c->why, sizeof(c->why), "cannot dial %s: %s", addr,
		         weft_strerror(rv));
		outbound_lost(c, rv);
		return;
	}
	atomic_fetch_add(&c->ml->connects_in_progress, 1);
}

static void
on_reply(struct weft__msvc_conn *c, const uint8_t *body, size_t n)
{
	struct weft__msvc_reply r;

	if (weft__msvc_reply_decode(body, n, &r) != 0) {
		weft__msvc_count(&c->svc->st.handshakes_refused, 1);
		weft__msvc_conn_reject(c, "malformed handshake reply");
		return;
	}
	if (r.status != 0) {
		/* Said once when the peer goes down, not on every retry. */
		weft__msvc_count(&c->svc->st.handshakes_refused, 1);
		weft_debug("msvc %s: %s refused our connection: %s (%u)",
		           c->svc->id, c->peer->id, r.reason,
		           (unsigned)r.status);
		snprintf(c->why, sizeof(c->why), "it refused us: %s (%u)",
		         r.reason, (unsigned)r.status);
		weft_channel_close(c->ch);
		return;
	}
	/* The node that answered must be the one we dialed, and with TLS
	 * its certificate must say so too. */
	if (strcmp(r.id, c->peer->id) != 0 ||
	    (weft_tls_is_active(c->ch) &&
	     weft_tls_peer_check(c->ch, c->peer->id) != 0)) {
		weft__msvc_count(&c->svc->st.handshakes_refused, 1);
		weft_log_limited(&c->svc->log_reject, WEFT_LOG_WARN,
		                 "msvc %s: dialed %s but %s answered%s",
		                 c->svc->id, c->peer->id, r.id,
		                 strcmp(r.id, c->peer->id) == 0
		                     ? " with a certificate for another name"
		                     : "");
		snprintf(c->why, sizeof(c->why), "%s answered in its place",
		         r.id);
		weft_channel_close(c->ch);
		return;
	}
	weft_timer_stop(c->timer);
	if (weft_tls_is_active(c->ch))
		atomic_store(&c->peer->seen_tls, true);
	c->crc = r.flags & 1;
	c->state = WEFT__MSVC_UP;
	c->established = true;
	c->attempts = 0;
	weft__msvc_peer_conn_up(c->peer, c);
	weft__msvc_conn_flush_backlog(c);
}

/* ---- Reading ----------------------------------------------------------- */

#define FORGED_WHY "answered a request that was not sent to it"

/* Hands a response to the loop that holds its pending request. The
 * channel it came on is held, to be closed should the answer be forged. */
struct handoff {
	struct weft__msvc_loop *ml;
	const weft_msvc_peer *from;
	weft_channel *ch;
	struct weft__msvc_env env;
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
route_response(struct weft__msvc_conn *c, const struct weft__msvc_env *env)
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
	if (li >= svc->nloops || (h = malloc(sizeof(*h) + env->len)) == NULL) {
		weft__msvc_count(&svc->st.late_responses, 1);
		return;
	}
	h->ml = &svc->loops[li];
	h->from = c->peer;
	h->ch = c->ch;
	h->env = *env;
	memcpy(h->payload, env->payload, env->len);
	h->env.payload = h->payload;
	weft_channel_ref(h->ch);
	if (weft_loop_post(h->ml->loop, handoff_task, h) != 0) {
		weft_channel_unref(h->ch);
		free(h);
		return;
	}
	weft__msvc_count1(&c->ml->rs.handoffs, 1);
}

static void
on_message(struct weft__msvc_conn *c, const uint8_t *body, size_t n,
           size_t frame_bytes)
{
	struct weft__msvc_env env;

	if (weft__msvc_env_decode(body, n, &env) != 0) {
		weft__msvc_count(&c->svc->st.bad_envelopes, 1);
		weft__msvc_conn_reject(c, "invalid envelope");
		return;
	}
	weft__msvc_count1(&c->ml->rs.messages_in, 1);
	weft__msvc_count(&c->peer->st.received, 1);
	weft__msvc_count(&c->peer->st.bytes_received, frame_bytes);
	if (!(env.flags & WEFT__MSVC_F_RESPONSE)) {
		weft__msvc_dispatch(c, &env);
	} else if (c->peer->is_client) {
		/* Nothing is ever asked of a client. */
		weft__msvc_count(&c->svc->st.forged_responses, 1);
		weft__msvc_conn_reject(c, "a client sent a response");
	} else {
		route_response(c, &env);
	}
}

/* Stops reading c until the node's inbound bytes in flight go below
 * the limit again. */
static void
pause_reading(struct weft__msvc_conn *c)
{
	weft_msvc *svc = c->svc;
	uint64_t limit = svc->cfg->limits.inbound_inflight_bytes;

	c->paused = true;
	LIST_INSERT_HEAD(&c->ml->paused, c, paused_link);
	atomic_fetch_add(&svc->paused_conns, 1);
	weft__msvc_count(&svc->st.read_pauses, 1);
	weft_channel_set_auto_read(c->ch, false);
	/* A release may have raced the pause: look again. */
	if (atomic_load(&svc->inflight) < limit)
		weft__msvc_inflight_release(svc, 0);
}

/* Stops reading while too many inbound bytes are in flight (not counting
 * the reservation of c's own frame, which handling it gives back), or
 * while c is a client that does not read its answers. */
static bool
should_pause(struct weft__msvc_conn *c)
{
	weft_msvc *svc = c->svc;
	uint64_t limit = svc->cfg->limits.inbound_inflight_bytes;

	if (weft__msvc_guard_backlogged(c))
		return true;
	if (atomic_load_explicit(&svc->inflight, memory_order_relaxed) -
	        c->frame_reserved <
	    limit)
		return false;
	pause_reading(c);
	return true;
}

/* Handles one whole frame at the start of in; returns false to stop. */
static bool
handle_frame(struct weft__msvc_conn *c, const uint8_t *p, uint32_t len,
             size_t total)
{
	uint32_t crc;

	/* The frame that was incomplete is whole now. */
	if (c->frame_started_ns != 0)
		weft__msvc_guard_frame_done(c);
	if (c->crc) {
		crc = weft__msvc_crc32c(0, p, 4 + (size_t)len);
		if (crc != (uint32_t)weft__load_be(p + 4 + len, 4)) {
			weft__msvc_count(&c->svc->st.bad_frames, 1);
			weft__msvc_conn_reject(c, "frame checksum mismatch");
			return false;
		}
	}
	if (c->state == WEFT__MSVC_UP)
		on_message(c, p + 4, len, total);
	else if (c->outbound)
		on_reply(c, p + 4, len);
	else
		on_hello(c, p + 4, len);
	return c->state != WEFT__MSVC_CLOSED && c->ch != NULL &&
	       weft_channel_is_open(c->ch);
}

/*
 * Checks the length field of the frame at p; returns the frame's total
 * size, or 0 after closing the connection.
 */
static size_t
frame_size(struct weft__msvc_conn *c, const uint8_t *p, uint32_t *len)
{
	uint32_t max = c->state == WEFT__MSVC_UP
	                   ? (uint32_t)c->svc->cfg->limits.max_frame_bytes
	                   : WEFT__MSVC_HELLO_MAX;

	*len = (uint32_t)weft__load_be(p, 4);
	if (*len > max || *len == 0 ||
	    (c->state == WEFT__MSVC_UP && *len < MIN_ENVELOPE)) {
		if (c->state == WEFT__MSVC_UP)
			weft__msvc_count(&c->svc->st.oversized_frames, 1);
		else
			weft__msvc_count(&c->svc->st.handshakes_refused, 1);
		weft__msvc_conn_reject(c, *len > max ? "frame too large"
		                                     : "frame too short");
		return 0;
	}
	return 4 + (size_t)*len + (c->crc ? 4 : 0);
}

/* Handles every whole frame inside the contiguous bytes p[0..n); returns
 * how many bytes they took, and false in *go when reading must stop. */
static size_t
frames_in_place(struct weft__msvc_conn *c, const uint8_t *p, size_t n, bool *go)
{
	size_t used = 0, total;
	uint32_t len;

	*go = true;
	while (n - used >= 4) {
		if ((total = frame_size(c, p + used, &len)) == 0) {
			*go = false;
			break;
		}
		if (n - used < total)
			break;
		if (c->state == WEFT__MSVC_UP && should_pause(c)) {
			*go = false;
			break;
		}
		if (!handle_frame(c, p + used, len, total)) {
			*go = false;
			break;
		}
		used += total;
	}
	return used;
}

/* A frame that spans chains: made contiguous first. Returns false when
 * reading must stop (incomplete frame, pause, close). */
static bool
frame_across_chains(struct weft__msvc_conn *c, struct evbuffer *in)
{
	uint8_t hdr[4];
	size_t total;
	uint32_t len;
	const uint8_t *p;

	if (evbuffer_copyout(in, hdr, 4) != 4)
		return false;
	if ((total = frame_size(c, hdr, &len)) == 0)
		return false;
	if (evbuffer_get_length(in) < total) {
		/* Its bytes count as in flight until it ends (or its deadline
		 * closes the connection). */
		if (!weft__msvc_guard_frame_wait(c, total))
			pause_reading(c);
		return false;
	}
	if (c->state == WEFT__MSVC_UP && should_pause(c))
		return false;
	if ((p = evbuffer_pullup(in, (ssize_t)total)) == NULL) {
		weft__msvc_conn_reject(c, "out of memory");
		return false;
	}
	if (!handle_frame(c, p, len, total))
		return false;
	evbuffer_drain(in, total);
	return true;
}

static void
process_frames(struct weft__msvc_conn *c, struct evbuffer *in)
{
	struct evbuffer_iovec v;
	size_t used;
	bool go = true;

	weft__msvc_batch_begin(c->ml);
	weft__msvc_guard_active(c);
	while (go && !c->paused && !c->blocked &&
	       c->state != WEFT__MSVC_CLOSED && evbuffer_get_length(in) >= 4) {
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		/* Frames wholly inside the first chain are read in place. */
		used = frames_in_place(c, v.iov_base, v.iov_len, &go);
		if (used > 0)
			evbuffer_drain(in, used);
		else if (go)
			go = frame_across_chains(c, in);
	}
	if (c->state != WEFT__MSVC_CLOSED && evbuffer_get_length(in) > 0 &&
	    evbuffer_get_length(in) < 4)
		weft__msvc_guard_frame_begun(c);
	weft__msvc_batch_end(c->ml);
}

void
weft__msvc_loop_resume(weft_loop *loop, int status, void *arg)
{
	struct weft__msvc_loop *ml = arg;
	weft_msvc *svc = ml->svc;
	LIST_HEAD(, weft__msvc_conn) todo;
	struct weft__msvc_conn *c;

	(void)loop;
	atomic_store(&ml->resume_posted, false);
	if (status != 0)
		return;
	/* Each paused connection is looked at once: they move to a list of
	 * their own, and one that must wait longer (or pauses again) goes
	 * back. A connection closed meanwhile leaves whichever list holds
	 * it. */
	LIST_INIT(&todo);
	while ((c = LIST_FIRST(&ml->paused)) != NULL) {
		LIST_REMOVE(c, paused_link);
		LIST_INSERT_HEAD(&todo, c, paused_link);
	}
	while ((c = LIST_FIRST(&todo)) != NULL) {
		LIST_REMOVE(c, paused_link);
		if (!weft__msvc_guard_may_resume(c)) {
			LIST_INSERT_HEAD(&ml->paused, c, paused_link);
			continue;
		}
		c->paused = false;
		atomic_fetch_sub(&svc->paused_conns, 1);
		if (c->ch != NULL && !c->blocked) {
			weft_channel_set_auto_read(c->ch, true);
		}
	}
}

/* ---- Outbound connection objects --------------------------------------- */

int
weft__msvc_conn_init_outbound(weft_msvc_peer *peer, int cls, uint32_t index,
                              struct weft__msvc_conn *c)
{
	memset(c, 0, sizeof(*c));
	c->svc = peer->svc;
	c->ml = peer->home;
	c->peer = peer;
	c->outbound = true;
	c->crc = true;
	c->cls = (uint8_t)cls;
	c->index = index;
	c->state = WEFT__MSVC_IDLE;
	c->pending_head = NONE;
	c->jitter_seed = (unsigned)(uintptr_t)c ^ (unsigned)weft_now_ns();
	TAILQ_INIT(&c->backlog);
	if ((c->tx = evbuffer_new()) == NULL)
		return WEFT_ENOMEM;
	return 0;
}

/* Frees what a connection holds (not the outbound struct itself, which
 * lives in its peer's array). Its loop, or a stopped one. */
void
weft__msvc_conn_fini(struct weft__msvc_conn *c)
{
	struct weft__msvc_out *out;

	while ((out = TAILQ_FIRST(&c->backlog)) != NULL) {
		TAILQ_REMOVE(&c->backlog, out, link);
		weft__msvc_out_free(out);
	}
	if (c->timer != NULL)
		weft_timer_free(c->timer);
	c->timer = NULL;
	if (c->tx != NULL)
		evbuffer_free(c->tx);
	c->tx = NULL;
	free(c->scratch);
	c->scratch = NULL;
	c->scratch_cap = 0;
}

void
weft__msvc_conn_free(struct weft__msvc_conn *c)
{
	weft_msvc_peer *peer = c->peer;
	weft_msvc *svc = c->svc;
	bool last;

	LIST_REMOVE(c, inbound_link);
	last = atomic_fetch_sub(&c->ml->inbound_len, 1) == 1;
	weft__msvc_guard_fini(c);
	weft__msvc_conn_fini(c);
	free(c);
	if (peer != NULL && peer->is_client)
		weft__msvc_peer_unref(peer);
	if (last)
		weft__msvc_closed(svc);
}
