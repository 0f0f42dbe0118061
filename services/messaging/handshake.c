/* SPDX-License-Identifier: MIT */
/*
 * handshake.c: the handshake handler. It sits after the frame codec from
 * the moment a connection is made: an accepting node reads the HELLO and
 * answers it, a dialing one sends the HELLO and reads the answer. Once
 * both agree, it sets the frame codec to what they agreed (the CRC, the
 * frame limits), puts an envelope codec after it and leaves the pipeline,
 * so that every later frame reaches the service's handler (read.c) as an
 * envelope.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/chunk.h>
#include <weft/compress.h>
#include <weft/envelope.h>
#include <weft/frame.h>
#include <weft/tls.h>

#include "msvc_int.h"

/* A message frame this short cannot hold an envelope. */
#define MIN_ENVELOPE 8

/* The newest version this node offers. */
static uint64_t
version_max(const weft_msvc *svc)
{
	uint32_t v = svc->cfg->limits.max_protocol_version;

	return v != 0 && v < WEFT__MSVC_VERSION_MAX ? v
	                                            : WEFT__MSVC_VERSION_MAX;
}

/* The wire stages agreed, between the frame codec and this handler: a
 * compression codec, then a chunk codec, as docs/PROTOCOL.md 2.1 orders
 * them. Chunks fit the frames the peer takes (peer_max_frame; 0: not
 * known, as on an accepted connection, whose dialer reads frames of its
 * own max_frame). False if a codec refused its place. */
static bool
stages_agreed(struct weft__msvc_conn *c, size_t peer_max_frame)
{
	const weft_msvc_limits *l = &c->svc->cfg->limits;
	const char *after = WEFT__MSVC_FRAME_CODEC;
	weft_chunk_codec_opts chunks = {
	    .chunk_bytes = weft__msvc_chunk_bytes(l, peer_max_frame),
	    .send = true,
	    .max_message_bytes = weft__msvc_max_message(l) +
	                         WEFT_ENVELOPE_HEADER_BYTES +
	                         WEFT_ENVELOPE_PARAMS_MAX,
	    /* A weft sender has one message in assembly at a time; a
	     * client is held to that, a member may have a few. */
	    .max_assembling = c->peer != NULL && c->peer->is_client ? 1 : 4,
	    .quiet = true,
	};

	c->seen_compress = (weft_compress_stats){0};
	c->seen_chunked_out = c->seen_chunked_in = 0;
	if (c->compression != WEFT_COMPRESS_NONE) {
		weft_compress_codec_opts z = {
		    .alg = c->compression,
		    .min_bytes = l->compression_min_bytes,
		    .max_body_bytes = l->max_frame_bytes,
		    .max_ratio = l->max_compression_ratio,
		    .quiet = true,
		};

		if (weft_compress_codec_add_after(
		        c->ch, after, WEFT__MSVC_COMPRESS_CODEC, &z) != 0)
			return false;
		after = WEFT__MSVC_COMPRESS_CODEC;
	}
	if (!c->chunks)
		return true;
	return weft_chunk_codec_add_after(c->ch, after, WEFT__MSVC_CHUNK_CODEC,
	                                  &chunks) == 0;
}

/* The frame codec's settings for the connection's traffic from here on,
 * the wire stages and the envelope codec after it, in the place this
 * handler leaves; false (the connection then closes) if the codecs
 * refused them. */
static bool
frames_agreed(struct weft__msvc_conn *c, size_t peer_max_frame)
{
	size_t max = c->svc->cfg->limits.max_frame_bytes;
	/* Refused envelopes are logged by read.c, at its rate. */
	weft_envelope_codec_opts envelopes = {.quiet = true,
	                                      .version = c->version};

	if (max > WEFT_FRAME_LIMIT)
		max = WEFT_FRAME_LIMIT;
	return weft_frame_codec_set_crc(c->ch, WEFT__MSVC_FRAME_CODEC,
	                                c->crc) == 0 &&
	       weft_frame_codec_set_max(c->ch, WEFT__MSVC_FRAME_CODEC, max) ==
	           0 &&
	       weft_frame_codec_set_min(c->ch, WEFT__MSVC_FRAME_CODEC,
	                                MIN_ENVELOPE) == 0 &&
	       stages_agreed(c, peer_max_frame) &&
	       weft_envelope_codec_add_after(
	           c->ch, WEFT__MSVC_HANDSHAKE_HANDLER,
	           WEFT__MSVC_ENVELOPE_CODEC, &envelopes) == 0;
}

/* Writes a handshake frame that buf's encoder filled; false if it could
 * not be written. */
static bool
send_frame(struct weft__msvc_conn *c, struct evbuffer *buf, int encoded)
{
	bool ok = buf != NULL && encoded == 0 &&
	          weft_channel_write(c->ch, buf, NULL, NULL) == 0;

	if (buf != NULL)
		evbuffer_free(buf);
	return ok;
}

/* ---- Accepting --------------------------------------------------------- */

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
		         WEFT__MSVC_VERSION_MIN, (int)version_max(c->svc));
	weft__msvc_count(&c->svc->st.handshakes_refused, 1);
	(void)send_frame(c, buf,
	                 buf != NULL ? weft__msvc_reply_encode(buf, &r) : 0);
	weft__msvc_conn_reject(c, r.reason);
}

/* The compression of an accepted connection: the one the dialer asks
 * for, if this node compresses at all (a dialer of this release asks for
 * one at most; of a later one maybe more: then this node's own, or
 * LZ4). */
static uint8_t
compression_agreed(const weft_msvc *svc, uint64_t hello_flags)
{
	int mine = svc->cfg->limits.compression;
	uint64_t asked = hello_flags & WEFT__MSVC_HELLO_ALGS;

	if (mine == WEFT_COMPRESS_NONE || asked == 0)
		return WEFT_COMPRESS_NONE;
	if (asked & WEFT__MSVC_HELLO_ALG(mine))
		return (uint8_t)mine;
	return asked & WEFT__MSVC_HELLO_ALG(WEFT_COMPRESS_LZ4)
	           ? WEFT_COMPRESS_LZ4
	           : WEFT_COMPRESS_ZSTD;
}

/* Posted to a member's home loop when it dialed us: watch it too. */
static void
touch_task(weft_loop *loop, int status, void *arg)
{
	(void)loop;
	if (status == 0)
		weft__msvc_peer_dialed_us(arg);
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
	uint64_t v = h->max_version < version_max(svc) ? h->max_version
	                                               : version_max(svc);

	*member = weft__msvc_member_admitted(svc, h->id);
	if (v < h->min_version || v < WEFT__MSVC_VERSION_MIN)
		return *why = "unsupported version", WEFT__MSVC_R_VERSION;
	if (strcmp(h->cluster, svc->cfg->cluster) != 0)
		return *why = "wrong cluster", WEFT__MSVC_R_CLUSTER;
	if (h->cls >= WEFT_MSVC_CLASSES)
		return *why = "bad connection class", WEFT__MSVC_R_BAD_CLASS;
	if (h->index >= WEFT__MSVC_INDEX_MAX)
		return *why = "bad connection index", WEFT__MSVC_R_BAD_CLASS;
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

/* An accepted connection's HELLO; true when the connection is up. */
bool
weft__msvc_handshake_hello(struct weft__msvc_conn *c, const uint8_t *body,
                           size_t n)
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
		return false;
	}
	if (member >= 0) {
		c->peer = svc->peers[member];
		if (weft__msvc_conn_order_init(c->peer) != 0) {
			refuse(c, WEFT__MSVC_R_SHUTTING_DOWN, "out of memory");
			return false;
		}
		if (weft_tls_is_active(c->ch))
			atomic_store(&c->peer->seen_tls, true);
	} else if (weft__msvc_peer_client_new(svc, c, h.id, &c->peer) != 0) {
		refuse(c, WEFT__MSVC_R_SHUTTING_DOWN, "out of memory");
		return false;
	}
	c->cls = (uint8_t)h.cls;
	c->index = (uint32_t)h.index;
	/* The newest both speak: version 2 only when the dialer offers it,
	 * so that a node of version 1 is served as before. */
	r.version =
	    version_max(svc) < h.max_version ? version_max(svc) : h.max_version;
	c->version = (uint8_t)r.version;
	snprintf(r.id, sizeof(r.id), "%s", svc->id);
	/* CRCs go only where TLS protects every byte already. */
	c->crc =
	    !(weft_tls_is_active(c->ch) && (h.flags & WEFT__MSVC_HELLO_TLS));
	c->chunks = (h.flags & WEFT__MSVC_HELLO_CHUNKS) != 0;
	c->compression = compression_agreed(svc, h.flags);
	r.flags = (c->crc ? WEFT__MSVC_REPLY_CRC : 0) |
	          (c->chunks ? WEFT__MSVC_HELLO_CHUNKS : 0) |
	          (c->compression != WEFT_COMPRESS_NONE
	               ? WEFT__MSVC_HELLO_ALG(c->compression)
	               : 0);
	r.max_frame = svc->cfg->limits.max_frame_bytes;
	buf = evbuffer_new();
	if (!send_frame(c, buf,
	                buf != NULL ? weft__msvc_reply_encode(buf, &r) : 0) ||
	    !frames_agreed(c, 0)) {
		weft__msvc_conn_reject(c, "cannot answer the handshake");
		return false;
	}
	weft__msvc_guard_handshake_done(c);
	c->state = WEFT__MSVC_UP;
	/* Before anything the member sends on c is read: what its older
	 * connection of this class and index still brings is dropped. */
	if (member >= 0)
		weft__msvc_conn_supersede(c);
	if (member >= 0 && svc->member && !c->peer->is_self) {
		if (c->peer->home == c->ml)
			weft__msvc_peer_dialed_us(c->peer);
		else if (weft_loop_post(c->peer->home->loop, touch_task,
		                        c->peer) == 0)
			weft__msvc_count1(&c->ml->rs.handoffs, 1);
	}
	return true;
}

/* ---- Dialing ----------------------------------------------------------- */

static void
on_reply_timeout(weft_timer *t, void *arg)
{
	struct weft__msvc_outbound *ob = arg;
	struct weft__msvc_conn *c = &ob->conn;

	(void)t;
	if (c->state != WEFT__MSVC_HANDSHAKE)
		return;
	weft__msvc_count(&c->svc->st.handshakes_refused, 1);
	snprintf(ob->why, sizeof(ob->why), "no handshake reply in time");
	weft__msvc_conn_reject(c, "no handshake in time");
}

void
weft__msvc_handshake_send_hello(struct weft__msvc_conn *c)
{
	struct weft__msvc_outbound *ob = weft__msvc_outbound_of(c);
	weft_msvc *svc = c->svc;
	struct weft__msvc_hello h = {
	    .min_version = WEFT__MSVC_VERSION_MIN,
	    .max_version = version_max(svc),
	    .role = svc->member ? 0 : 1,
	    .cls = c->cls,
	    .index = c->index,
	    .flags = (weft_tls_is_active(c->ch) ? WEFT__MSVC_HELLO_TLS : 0) |
	             WEFT__MSVC_HELLO_CHUNKS |
	             (svc->cfg->limits.compression != WEFT_COMPRESS_NONE
	                  ? WEFT__MSVC_HELLO_ALG(svc->cfg->limits.compression)
	                  : 0),
	};
	struct evbuffer *buf = evbuffer_new();

	snprintf(h.cluster, sizeof(h.cluster), "%s", svc->cfg->cluster);
	snprintf(h.id, sizeof(h.id), "%s", svc->id);
	if (!send_frame(c, buf,
	                buf != NULL ? weft__msvc_hello_encode(buf, &h) : 0)) {
		weft_channel_close(c->ch);
		return;
	}
	if (ob->reply_timer == NULL &&
	    weft_timer_new(c->ml->loop, on_reply_timeout, ob,
	                   &ob->reply_timer) != 0)
		return;
	weft_timer_start(ob->reply_timer, svc->cfg->limits.connect_timeout_ms,
	                 0);
}

/* The stages a reply agrees to, into c; false when it names a
 * compression we did not ask for (a broken peer's). An acceptor of an
 * older release sets neither bit: then neither stage. */
static bool
reply_stages(struct weft__msvc_conn *c, uint64_t flags)
{
	int mine = c->svc->cfg->limits.compression;
	uint64_t alg = flags & WEFT__MSVC_HELLO_ALGS;

	c->chunks = (flags & WEFT__MSVC_HELLO_CHUNKS) != 0;
	c->compression = WEFT_COMPRESS_NONE;
	if (alg == 0)
		return true;
	if (mine == WEFT_COMPRESS_NONE || alg != WEFT__MSVC_HELLO_ALG(mine))
		return false;
	c->compression = (uint8_t)mine;
	return true;
}

/* The answer to our HELLO; true when the connection is up. */
bool
weft__msvc_handshake_reply(struct weft__msvc_conn *c, const uint8_t *body,
                           size_t n)
{
	struct weft__msvc_outbound *ob = weft__msvc_outbound_of(c);
	struct weft__msvc_reply r;

	if (weft__msvc_reply_decode(body, n, &r) != 0) {
		weft__msvc_count(&c->svc->st.handshakes_refused, 1);
		weft__msvc_conn_reject(c, "malformed handshake reply");
		return false;
	}
	if (r.status != 0) {
		/* Said once when the peer goes down, not on every retry. */
		weft__msvc_count(&c->svc->st.handshakes_refused, 1);
		weft_debug("msvc %s: %s refused our connection: %s (%u)",
		           c->svc->id, c->peer->id, r.reason,
		           (unsigned)r.status);
		snprintf(ob->why, sizeof(ob->why), "it refused us: %s (%u)",
		         r.reason, (unsigned)r.status);
		weft_channel_close(c->ch);
		return false;
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
		snprintf(ob->why, sizeof(ob->why), "%s answered in its place",
		         r.id);
		weft_channel_close(c->ch);
		return false;
	}
	/* A version we did not offer is a broken peer's. */
	if (r.version < WEFT__MSVC_VERSION_MIN ||
	    r.version > version_max(c->svc)) {
		weft__msvc_count(&c->svc->st.handshakes_refused, 1);
		weft__msvc_conn_reject(c, "handshake reply with a version we "
		                          "did not offer");
		return false;
	}
	if (!reply_stages(c, r.flags)) {
		weft__msvc_count(&c->svc->st.handshakes_refused, 1);
		weft__msvc_conn_reject(c, "handshake reply with a compression "
		                          "we did not ask for");
		return false;
	}
	c->version = (uint8_t)r.version;
	weft_timer_stop(ob->reply_timer);
	if (weft_tls_is_active(c->ch))
		atomic_store(&c->peer->seen_tls, true);
	c->crc = r.flags & WEFT__MSVC_REPLY_CRC;
	if (!frames_agreed(c, r.max_frame > SIZE_MAX ? SIZE_MAX
	                                             : (size_t)r.max_frame)) {
		weft__msvc_conn_reject(c, "cannot apply the handshake");
		return false;
	}
	c->state = WEFT__MSVC_UP;
	ob->established = true;
	ob->attempts = 0;
	weft__msvc_peer_conn_up(c->peer, c);
	weft__msvc_conn_flush_backlog(c);
	return true;
}

/* ---- The handler ------------------------------------------------------- */

static void
hs_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct weft__msvc_conn *c = weft_ctx_state(ctx);
	const uint8_t *body;
	size_t n;
	bool up;

	if (c->state == WEFT__MSVC_CLOSED || !weft_channel_is_open(c->ch))
		return;
	if ((body = weft__msvc_frame_body(type, msg, &n)) == NULL) {
		weft__msvc_conn_reject(c, "out of memory");
		return;
	}
	weft__msvc_frame_arrived(c);
	up = c->ops->handshake(c, body, n);
	/* Done: the frames after this one go to the service's handler. */
	if (weft__msvc_may_read_on(c) && up)
		weft_ctx_remove(ctx);
}

const weft_handler weft__msvc_handshake_handler = {
    .read = hs_read,
};
