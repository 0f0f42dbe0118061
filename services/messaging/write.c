/* SPDX-License-Identifier: MIT */
/*
 * write.c: what a connection sends: frames encoded in place into a batch,
 * a loop's dirty connections written once at the end of the batch, and
 * the batch's bytes released when they have left.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/envelope.h>
#include <weft/frame.h>

#include "msvc_int.h"

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

/* The frame codec's largest frame: what a large frame is checked against
 * here (the service checked its own limit before it queued the message). */
static const weft_frame_codec_opts large_frames = {
    .max_frame_bytes = WEFT_FRAME_LIMIT,
};

size_t
weft__msvc_conn_encode(struct weft__msvc_conn *c, uint64_t id, uint32_t verb,
                       uint32_t flags, uint64_t created_ms, uint64_t expires_ms,
                       const void *data, size_t len, struct evbuffer *buf)
{
	weft_envelope env = {.id = id,
	                     .verb = verb,
	                     .flags = flags,
	                     .created_ms = created_ms,
	                     .expires_ms = expires_ms,
	                     .payload = data,
	                     .payload_len = len,
	                     .payload_buf = buf};
	size_t n = WEFT_ENVELOPE_FRAME_BYTES(len, c->crc);
	weft_frame_codec_opts o = large_frames;

	if (buf == NULL && n <= WEFT__MSVC_SCRATCH && scratch_room(c, n)) {
		/* Small: the codec writes it in place, no evbuffer call. */
		c->scratch_len += weft_envelope_put_frame(
		    c->scratch + c->scratch_len, &env, c->crc);
	} else {
		/* Large: its payload's chains move into tx behind the batch. */
		scratch_to_tx(c);
		o.crc32c = c->crc;
		if (weft_envelope_encode_frame(c->tx, &env, &o) != 0) {
			weft__msvc_conn_reject(c, "cannot encode a message");
			return 0;
		}
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

/* A connection that closed drops what it had not handed to its channel. */
void
weft__msvc_conn_drop_tx(struct weft__msvc_conn *c)
{
	if (c->dirty)
		unlink_dirty(c);
	evbuffer_drain(c->tx, evbuffer_get_length(c->tx));
	c->scratch_len = 0;
	if (c->peer != NULL)
		weft__msvc_release_queued(c->peer, c->tx_accounted);
	c->tx_accounted = 0;
}
