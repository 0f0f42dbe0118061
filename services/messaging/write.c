/* SPDX-License-Identifier: MIT */
/*
 * write.c: what a connection sends. Each message goes down the
 * connection's pipeline as an envelope: the envelope codec encodes a small
 * one in place, inside the frame codec's reservation in the channel's
 * batch, and moves a large one's chains. The channel flushes the batch at
 * the end of the wake-up; that flush passes the service's handler, which
 * asks the channel to say when the batch has left, and then releases the
 * batch's queue bytes.
 */
#include <stdint.h>

#include <weft/codec.h>
#include <weft/compress.h>
#include <weft/envelope.h>

#include "msvc_int.h"

/* A message above this many payload bytes releases its queue bytes when
 * it has left, on its own: a chunk codec may hold it past the end of the
 * batch it was written in, while it puts out the chunks one by one. */
#define OWN_RELEASE_BYTES (64u << 10)

static void on_written(weft_channel *ch, int status, void *arg);

void
weft__msvc_conn_send(struct weft__msvc_conn *c,
                     const struct weft__msvc_out *out)
{
	uint8_t params[WEFT__MSVC_PARAMS_MAX];
	weft_envelope env = {
	    .id = out->id,
	    .verb = out->verb,
	    .flags = out->flags,
	    .created_ms = out->created_ms,
	    .expires_ms =
	        out->echo_expires_ms ? out->echo_expires_ms : out->expires_ms,
	    .payload = out->ptr,
	    .payload_len = out->len,
	    .payload_buf = out->buf,
	};

	/* Trace context and stage times go to peers of version 2 only; to
	 * one that does not take chunks, only within its frame limit. */
	if (c->version >= 2 &&
	    (out->params.traced || out->params.answered_ns != 0)) {
		/* The SEND stage ends at the batch's clock reading: a
		 * clock read less per answer, and an answer encoded in the
		 * batch it was made in shows 0. */
		env.params_len = weft__msvc_params_encode(
		    out, weft__msvc_now_ns(c->ml), params);
		if (!c->chunks &&
		    out->len + WEFT_ENVELOPE_HEADER_BYTES + env.params_len >
		        c->svc->cfg->limits.max_frame_bytes)
			env.params_len = 0;
		env.params = env.params_len > 0 ? params : NULL;
	}

	/* A small message has no callback: the batch has one
	 * (weft__msvc_conn_flush). A write the codecs cannot make comes back
	 * as an error event, and the connection closes (read.c). */
	if (out->len > OWN_RELEASE_BYTES && out->accounted > 0) {
		weft_ctx_write(c->ctx, &weft_msg_envelope, &env, on_written,
		               (void *)(uintptr_t)out->accounted);
	} else {
		weft_ctx_write(c->ctx, &weft_msg_envelope, &env, NULL, NULL);
		c->batch_accounted += out->accounted;
	}
	c->batch_open = true;
	weft__msvc_count1(&c->ml->rs.messages_out, 1);
	if (c->peer != NULL) {
		weft__msvc_count(&c->peer->st.sent, 1);
		weft__msvc_count(&c->peer->st.bytes_sent,
		                 WEFT_ENVELOPE_FRAME_BYTES(out->len, c->crc));
	}
	if (out->verb < WEFT_MSVC_MAX_VERBS &&
	    !(out->flags & (WEFT__MSVC_F_RESPONSE | WEFT__MSVC_F_CANCEL))) {
		weft__msvc_count(&c->svc->verbs[out->verb].sent, 1);
		weft__msvc_count(&c->svc->verbs[out->verb].bytes_sent,
		                 out->len);
	}
}

/* Adds what c's wire stages did since the last look to its peer's
 * counters: body bytes before and after compression, and messages that
 * went as chunks. */
void
weft__msvc_conn_count_stages(struct weft__msvc_conn *c)
{
	struct weft__msvc_pstats *ps;
	weft_compress_stats z;
	weft_codec_stats k;

	if (c->ch == NULL || c->peer == NULL || c->state != WEFT__MSVC_UP)
		return;
	ps = &c->peer->st;
	if (c->compression != WEFT_COMPRESS_NONE &&
	    weft_compress_codec_get_stats(c->ch, WEFT__MSVC_COMPRESS_CODEC,
	                                  &z) == 0) {
		weft__msvc_count(&ps->body_bytes_out,
		                 z.raw_out - c->seen_compress.raw_out);
		weft__msvc_count(&ps->wire_bytes_out,
		                 z.wire_out - c->seen_compress.wire_out);
		weft__msvc_count(&ps->body_bytes_in,
		                 z.raw_in - c->seen_compress.raw_in);
		weft__msvc_count(&ps->wire_bytes_in,
		                 z.wire_in - c->seen_compress.wire_in);
		c->seen_compress = z;
	}
	if (c->chunks &&
	    weft_codec_get_stats(c->ch, WEFT__MSVC_CHUNK_CODEC, &k) == 0) {
		weft__msvc_count(&ps->chunked_sent,
		                 k.msgs_out - c->seen_chunked_out);
		weft__msvc_count(&ps->chunked_received,
		                 k.msgs_in - c->seen_chunked_in);
		c->seen_chunked_out = k.msgs_out;
		c->seen_chunked_in = k.msgs_in;
	}
}

/* Adds the socket writes the channel made since the last look to the
 * loop's counters, for bytes per write. */
static void
count_writes(struct weft__msvc_conn *c)
{
	weft_channel_stats st;

	if (c->ch == NULL)
		return;
	weft__msvc_conn_count_stages(c);
	weft_channel_get_stats(c->ch, &st);
	weft__msvc_count1(&c->ml->rs.write_calls, st.writes - c->seen_writes);
	weft__msvc_count1(&c->ml->rs.bytes_written,
	                  st.bytes_written - c->seen_bytes);
	c->seen_writes = st.writes;
	c->seen_bytes = st.bytes_written;
}

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

/* The flush that ends a batch (the channel's own at the end of the
 * wake-up, or one from a handler) passes here on its way to the socket. */
void
weft__msvc_conn_flush(weft_ctx *ctx)
{
	struct weft__msvc_conn *c = weft_ctx_state(ctx);
	size_t n = c->batch_accounted;

	if (c->batch_open) {
		c->batch_open = false;
		c->batch_accounted = 0;
		weft__msvc_count1(&c->ml->rs.drain_batches, 1);
		weft__msvc_guard_active(c);
		weft_channel_when_written(weft_ctx_channel(ctx), on_written,
		                          (void *)(uintptr_t)n);
	}
	weft_ctx_flush(ctx);
	count_writes(c);
}

/* A connection that closed releases what its last batch held, if no flush
 * took it. */
void
weft__msvc_conn_drop_batch(struct weft__msvc_conn *c)
{
	if (c->peer != NULL && c->batch_accounted > 0)
		weft__msvc_release_queued(c->peer, c->batch_accounted);
	c->batch_accounted = 0;
	c->batch_open = false;
}

/*
 * A message larger than a frame, for a peer of an older release, which
 * does not assemble chunks: the message fails, not the connection. A
 * request completes with WEFT_ETOOBIG, a response goes as an error
 * response saying so (its requester learns why), a one-way message is
 * dropped.
 */
static void
refuse_unchunked(struct weft__msvc_conn *c, struct weft__msvc_out *out,
                 uint32_t slot)
{
	struct weft__msvc_out err = *out;
	uint8_t payload[96];

	if (out->flags & WEFT__MSVC_F_RESPONSE) {
		err.flags = WEFT__MSVC_F_RESPONSE | WEFT__MSVC_F_ERROR;
		err.len = weft__msvc_error_encode(
		    payload, sizeof(payload), WEFT_ETOOBIG,
		    "answer larger than a frame of this peer's release");
		err.ptr = payload;
		err.buf = NULL;
		weft__msvc_conn_send(c, &err);
	} else {
		weft__msvc_release_queued(c->peer, out->accounted);
		if (out->flags & WEFT__MSVC_F_REQUEST)
			weft__msvc_slot_complete(c->ml, slot, WEFT_ETOOBIG,
			                         NULL, 0);
	}
	if (out->buf != NULL)
		evbuffer_drain(out->buf, evbuffer_get_length(out->buf));
	weft__msvc_count(&c->svc->st.oversized_messages, 1);
}

/* Writes out into c's output batch. */
void
weft__msvc_conn_encode(struct weft__msvc_conn *c, struct weft__msvc_out *out,
                       uint32_t slot)
{
	if (!c->chunks && out->len > c->svc->cfg->limits.max_frame_bytes -
	                                 WEFT_ENVELOPE_HEADER_BYTES) {
		refuse_unchunked(c, out, slot);
		return;
	}
	weft__msvc_conn_send(c, out);
	if (out->flags & WEFT__MSVC_F_REQUEST)
		weft__msvc_slot_sent(c->ml, slot, c);
}

/* Sends every message of c's backlog, now that c is up. */
void
weft__msvc_conn_flush_backlog(struct weft__msvc_conn *c)
{
	weft_msvc_peer *peer = c->peer;
	struct weft__msvc_out *out;
	uint64_t now = weft__msvc_clock_now_ms(c->svc);

	while (weft__msvc_conn_takes_writes(c) &&
	       (out = TAILQ_FIRST(&c->backlog)) != NULL) {
		TAILQ_REMOVE(&c->backlog, out, link);
		if (out->flags & WEFT__MSVC_F_REQUEST)
			weft__msvc_slot_at(c->ml, out->slot)->out = NULL;
		if (out->expires_ms != 0 && out->expires_ms <= now) {
			weft__msvc_count(&peer->svc->st.expired_in_queue, 1);
			weft__msvc_count(&peer->st.dropped_expired, 1);
			if (out->flags & WEFT__MSVC_F_REQUEST) {
				weft__msvc_release_queued(peer, out->accounted);
				weft__msvc_slot_complete(
				    c->ml, out->slot, WEFT_EEXPIRED, NULL, 0);
				weft__msvc_out_free(out);
			} else {
				weft__msvc_out_drop(peer, out, WEFT_EEXPIRED);
			}
			continue;
		}
		weft__msvc_conn_encode(c, out, out->slot);
		weft__msvc_out_free(out);
	}
}

/* Ends everything in c's backlog with status: requests complete with it,
 * one-way messages and responses are dropped. For a connection that
 * could not be made, or that a stopping service does not dial again. */
void
weft__msvc_conn_fail_backlog(struct weft__msvc_conn *c, int status)
{
	struct weft__msvc_out *out;

	while ((out = TAILQ_FIRST(&c->backlog)) != NULL) {
		TAILQ_REMOVE(&c->backlog, out, link);
		if (out->flags & WEFT__MSVC_F_REQUEST) {
			if (!out->internal && status == WEFT_EPEERDOWN)
				weft__msvc_count(&c->peer->st.failed_peer_down,
				                 1);
			weft__msvc_slot_at(c->ml, out->slot)->out = NULL;
			weft__msvc_release_queued(c->peer, out->accounted);
			weft__msvc_slot_complete(c->ml, out->slot, status, NULL,
			                         0);
			weft__msvc_out_free(out);
		} else if (out->expires_ms != 0 &&
		           out->expires_ms <= weft__msvc_clock_now_ms(c->svc)) {
			weft__msvc_count(&c->svc->st.expired_in_queue, 1);
			weft__msvc_count(&c->peer->st.dropped_expired, 1);
			weft__msvc_out_drop(c->peer, out, WEFT_EEXPIRED);
		} else {
			weft__msvc_out_drop(c->peer, out, status);
		}
	}
}

/* Drops the expired one-way messages and responses of a backlog (a
 * request's own timer takes care of it). */
void
weft__msvc_conn_purge_backlog(struct weft__msvc_conn *c, bool all)
{
	struct weft__msvc_out *out, *next;
	uint64_t now = weft__msvc_clock_now_ms(c->svc);

	for (out = TAILQ_FIRST(&c->backlog); out != NULL; out = next) {
		next = TAILQ_NEXT(out, link);
		if (out->flags & WEFT__MSVC_F_REQUEST)
			continue;
		if (!all && (out->expires_ms == 0 || out->expires_ms > now))
			continue;
		TAILQ_REMOVE(&c->backlog, out, link);
		if (!all) {
			weft__msvc_count(&c->svc->st.expired_in_queue, 1);
			weft__msvc_count(&c->peer->st.dropped_expired, 1);
		}
		weft__msvc_out_drop(c->peer, out,
		                    all ? WEFT_ESHUTDOWN : WEFT_EEXPIRED);
	}
}
