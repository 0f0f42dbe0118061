/* SPDX-License-Identifier: MIT */
/*
 * channel.c: a byte stream (weft/stream.h), the pipeline around it, and
 * its life cycle.
 *
 * The data path. Inbound: the stream says READABLE, the channel asks it
 * for up to max_read_bytes into its input and fires read once with the
 * whole batch. Outbound: writes gather in unflushed; a flush moves them to
 * out and writes to the stream at once unless it is known to be full,
 * whether or not earlier writes still wait for their callbacks; whatever
 * it does not take waits for WRITABLE. A write's callback is owed once its
 * bytes have left the stream, and runs from a task on the loop, never
 * inside the call that wrote or flushed (h2o writes at once and schedules
 * the completion the same way).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "core_int.h"

#define DEFAULT_HIGH_WATER (1u << 20)
#define DEFAULT_LOW_WATER (256u << 10)
#define DEFAULT_MAX_READ (256u << 10)
#define DEFAULT_LINGER_MS 5000
/* Writes up to this size are copied into the channel's buffer, so that one
 * writev carries many small messages; larger ones move their chains. */
#define SMALL_WRITE_BYTES 2048
/* The size of the chains that gather small writes (one TLS record). */
#define BATCH_CHAIN_BYTES 16384

const weft_msg_type weft_msg_evbuffer = {"evbuffer", NULL};
const weft_msg_type weft_msg_bytes = {"bytes", NULL};

static void request_teardown(weft_channel *ch);
static void try_write(weft_channel *ch);

/* ---- Rings -------------------------------------------------------------- */

/*
 * ring_slot makes room for one more element at the end of a ring of
 * elements of size bytes and returns it, or NULL when memory ran out.
 */
static void *
ring_slot(void **v, size_t *cap, size_t *head, size_t len, size_t size)
{
	size_t ncap, i;
	char *nv;

	if (len == *cap) {
		ncap = *cap ? *cap * 2 : 8;
		if ((nv = malloc(ncap * size)) == NULL)
			return NULL;
		for (i = 0; i < len; i++)
			memcpy(nv + i * size,
			       (char *)*v + ((*head + i) % *cap) * size, size);
		free(*v);
		*v = nv;
		*cap = ncap;
		*head = 0;
	}
	return (char *)*v + ((*head + len) % *cap) * size;
}

#define RING_PUSH(r)                                                           \
	ring_slot((void **)&(r).v, &(r).cap, &(r).head, (r).len, sizeof(*(r).v))
#define RING_FRONT(r) (&(r).v[(r).head])
#define RING_POP(r)                                                            \
	do {                                                                   \
		(r).head = ((r).head + 1) % (r).cap;                           \
		(r).len--;                                                     \
	} while (0)

/* ---- Entering and leaving ----------------------------------------------- */

/*
 * Every entry into a channel from the loop (a stream event, a task, a
 * public call) is bracketed by enter/leave, so that contexts removed
 * during the callback are reaped (their removed run, their memory freed)
 * only when the outermost one returns.
 */
void
weft__channel_enter(weft_channel *ch)
{
	ch->depth++;
}

void
weft__channel_leave(weft_channel *ch)
{
	if (--ch->depth == 0 && ch->dead != NULL)
		weft__pipeline_reap(ch);
}

#define enter weft__channel_enter
#define leave weft__channel_leave

void
weft_channel_ref(weft_channel *ch)
{
	atomic_fetch_add_explicit(&ch->refs, 1, memory_order_relaxed);
}

static void
channel_free(weft_channel *ch)
{
	weft_ctx *c;

	while ((c = ch->dead) != NULL) {
		ch->dead = c->next_dead;
		free(c);
	}
	free(ch->head);
	free(ch->tail);
	evbuffer_free(ch->in);
	evbuffer_free(ch->unflushed);
	evbuffer_free(ch->out);
	evbuffer_free(ch->inbox.bytes);
	evbuffer_free(ch->xbytes);
	evbuffer_free(ch->xone);
	pthread_mutex_destroy(&ch->inbox.lock);
	free(ch->inbox.q.v);
	free(ch->xrun.v);
	free(ch->waits.v);
	free(ch->done.v);
	free(ch->scratch);
	free(ch);
}

void
weft_channel_unref(weft_channel *ch)
{
	if (atomic_fetch_sub_explicit(&ch->refs, 1, memory_order_acq_rel) == 1)
		channel_free(ch);
}

/* ---- Owed write callbacks ----------------------------------------------- */

/* Runs every owed write callback, oldest first; those owed meanwhile
 * run in the same pass (their calls have returned by then). */
void
weft__channel_run_owed(weft_channel *ch)
{
	struct weft__write_done d;

	while (ch->done.len > 0) {
		d = *RING_FRONT(ch->done);
		RING_POP(ch->done);
		d.cb(ch, d.status, d.arg);
	}
}

static void
run_owed_task(weft_loop *loop, int status, void *arg)
{
	weft_channel *ch = arg;

	(void)loop;
	(void)status;
	ch->done_posted = false;
	enter(ch);
	weft__channel_run_owed(ch);
	leave(ch);
	weft_channel_unref(ch);
}

/*
 * Owes cb its status: it runs from the channel's task, so never inside
 * the call that decided it, and at the latest when the channel is torn
 * down, before its handlers are removed (a handler frees its state in
 * removed, and the callback may belong to it). Loop thread.
 */
static void
owe_cb(weft_channel *ch, weft_write_cb cb, void *arg, int status)
{
	struct weft__write_done *d;

	if (cb == NULL)
		return;
	if ((d = RING_PUSH(ch->done)) == NULL) {
		/* Out of memory: better now than never. */
		cb(ch, status, arg);
		return;
	}
	*d = (struct weft__write_done){cb, arg, status};
	ch->done.len++;
	if (ch->done_posted)
		return;
	ch->done_posted = true;
	weft_channel_ref(ch);
	if (weft_loop_post_task(ch->loop, &ch->done_task) == 0)
		return;
	/* The loop is going away: run them now rather than never. */
	ch->done_posted = false;
	weft_channel_unref(ch);
	weft__channel_run_owed(ch);
}

void
weft_ctx_fail_write(weft_ctx *ctx, const weft_msg_type *type, void *msg,
                    weft_write_cb cb, void *cb_arg, int status)
{
	weft_channel *ch = ctx->ch;

	weft_msg_free(type, msg);
	if (cb != NULL)
		owe_cb(ch, cb, cb_arg, status);
	else if (status != WEFT_ECLOSED && ch->activated && !ch->torn_down)
		weft_ctx_fire_error(ctx, status);
}

/* ---- Write completions -------------------------------------------------- */

static size_t
stream_unsent(const weft_channel *ch)
{
	const weft_stream *s = ch->stream;

	return s != NULL && s->ops->unsent != NULL ? s->ops->unsent(s) : 0;
}

static size_t
pending_bytes(const weft_channel *ch)
{
	return evbuffer_get_length(ch->unflushed) + ch->tail_len +
	       evbuffer_get_length(ch->out) + stream_unsent(ch);
}

/* Seals the batch's open tail: its messages join unflushed, and the rest
 * of the reservation is given back. Before any other use of unflushed. */
static void
seal_tail(weft_channel *ch)
{
	struct evbuffer_iovec v;

	if (ch->open_tail == NULL)
		return;
	if (ch->tail_len > 0) {
		v.iov_base = ch->open_tail;
		v.iov_len = ch->tail_len;
		/* Cannot fail: the space was reserved, and nothing touched
		 * unflushed since. */
		evbuffer_commit_space(ch->unflushed, &v, 1);
	}
	ch->open_tail = NULL;
	ch->tail_len = ch->tail_cap = 0;
}

size_t
weft_channel_pending_write_bytes(const weft_channel *ch)
{
	return pending_bytes(ch);
}

size_t
weft_channel_pending_read_bytes(const weft_channel *ch)
{
	return evbuffer_get_length(ch->in);
}

bool
weft_channel_is_writable(const weft_channel *ch)
{
	return ch->writable && !ch->closing;
}

static void
set_writable(weft_channel *ch, bool writable)
{
	if (ch->writable == writable)
		return;
	ch->writable = writable;
	if (!ch->torn_down)
		weft_ctx_fire_writability_changed(ch->head, writable);
}

static int
push_wait(weft_channel *ch, weft_write_cb cb, void *arg)
{
	struct weft__write_wait *w;

	if ((w = RING_PUSH(ch->waits)) == NULL)
		return WEFT_ENOMEM;
	*w = (struct weft__write_wait){ch->bytes_written, cb, arg};
	ch->waits.len++;
	return 0;
}

/* Owes the callbacks of writes whose bytes have all left the stream, or,
 * with an error status, of every write still waiting. */
static void
complete_waits(weft_channel *ch, int status)
{
	struct weft__write_wait w;

	while (ch->waits.len > 0) {
		w = *RING_FRONT(ch->waits);
		if (status == 0 && w.end_offset > ch->bytes_drained)
			break;
		RING_POP(ch->waits);
		owe_cb(ch, w.cb, w.arg, status);
	}
}

/* ---- The stream --------------------------------------------------------- */

/* Tells the stream what to watch, when that changes. */
static void
watch(weft_channel *ch, bool read, bool write)
{
	if (ch->stream == NULL ||
	    (ch->watch_read == read && ch->watch_write == write))
		return;
	ch->watch_read = read;
	ch->watch_write = write;
	ch->stream->ops->watch(ch->stream, read, write);
}

static bool
wants_read(const weft_channel *ch)
{
	return ch->activated && ch->auto_read && !ch->closing;
}

/* The stream failed (or ended) under a write or read: status goes up the
 * pipeline as an error (not an orderly end) and the channel is torn down. */
static void
stream_failed(weft_channel *ch, int status)
{
	atomic_store_explicit(&ch->open, false, memory_order_relaxed);
	if (status != WEFT_ECLOSED) {
		ch->failed = true;
		weft_debug("%s: connection error: %s", ch->peer,
		           weft_strerror(status));
		if (ch->activated && !ch->torn_down)
			weft_ctx_fire_error(ch->head, status);
	}
	request_teardown(ch);
}

/*
 * Writes what out holds to the stream, counts what left it, owes the
 * callbacks of the writes that are complete, and watches for writability
 * while bytes remain.
 */
static void
try_write(weft_channel *ch)
{
	ssize_t n = 0;

	if (ch->stream == NULL || ch->failed)
		return;
	if (evbuffer_get_length(ch->out) > 0 &&
	    (n = ch->stream->ops->write(ch->stream, ch->out)) > 0) {
		ch->bytes_taken += (uint64_t)n;
		ch->stats.writes++;
		ch->stats.bytes_written += (uint64_t)n;
	}
	ch->bytes_drained = ch->bytes_taken - stream_unsent(ch);
	complete_waits(ch, 0);
	if (n < 0) {
		stream_failed(ch, (int)n);
		return;
	}
	watch(ch, wants_read(ch),
	      evbuffer_get_length(ch->out) > 0 || stream_unsent(ch) > 0);
	if (!ch->writable && pending_bytes(ch) <= ch->opts.low_water_bytes)
		set_writable(ch, true);
	if (ch->closing && pending_bytes(ch) == 0)
		request_teardown(ch);
}

/* ---- The head of the pipeline: outbound operations end here ------------ */

static void
post_flush(weft_channel *ch)
{
	if (ch->flush_posted)
		return;
	ch->flush_posted = true;
	weft_channel_ref(ch);
	if (weft_loop_post_task(ch->loop, &ch->flush_task) != 0) {
		ch->flush_posted = false;
		weft_channel_unref(ch);
	}
}

/* Counts n bytes just added to unflushed as one write: its callback
 * waits for them to leave, the water marks follow, and a flush comes
 * after the callbacks of this wake-up. */
static void
account_write(weft_channel *ch, size_t n, weft_write_cb cb, void *cb_arg)
{
	ch->bytes_written += n;
	if (cb != NULL) {
		if (ch->bytes_written <= ch->bytes_drained)
			owe_cb(ch, cb, cb_arg, 0);
		else if (push_wait(ch, cb, cb_arg) != 0)
			owe_cb(ch, cb, cb_arg, WEFT_ENOMEM);
	}
	/* What waits, from the counters (the stream's share as of its last
	 * write): no evbuffer call per message. */
	if (ch->writable &&
	    ch->bytes_written - ch->bytes_drained > ch->opts.high_water_bytes)
		set_writable(ch, false);
	/* Whoever wrote without flushing gets the flush after the callbacks
	 * of this wake-up. */
	if (!ch->flush_follows)
		post_flush(ch);
}

/* A batch of small writes starts a chain of BATCH_CHAIN_BYTES (libevent
 * would start at 1 KiB and grow to 4 KiB), so writev pieces and TLS
 * records come out large. */
static void
start_batch(weft_channel *ch)
{
	if (evbuffer_get_length(ch->unflushed) == 0)
		evbuffer_expand(ch->unflushed, BATCH_CHAIN_BYTES);
}

static void
head_write(weft_ctx *ctx, const weft_msg_type *type, void *msg,
           weft_write_cb cb, void *cb_arg)
{
	weft_channel *ch = ctx->ch;
	size_t n;

	if (!weft_msg_is_bytes(type)) {
		weft_warn("%s: a %s message reached the socket; add an encoder",
		          ch->peer, type->name);
		weft_ctx_fail_write(ctx, type, msg, cb, cb_arg, WEFT_EINVAL);
		return;
	}
	if (ch->closing || ch->torn_down) {
		weft_ctx_fail_write(ctx, type, msg, cb, cb_arg, WEFT_ECLOSED);
		return;
	}
	seal_tail(ch);
	start_batch(ch);
	if (type == &weft_msg_bytes) {
		const weft_bytes *b = msg;

		n = b->len;
		evbuffer_add(ch->unflushed, b->data, n);
	} else if ((n = evbuffer_get_length(msg)) <= SMALL_WRITE_BYTES) {
		evbuffer_add(ch->unflushed, evbuffer_pullup(msg, (ssize_t)n),
		             n);
		evbuffer_drain(msg, n);
	} else {
		evbuffer_add_buffer(ch->unflushed, msg);
	}
	account_write(ch, n, cb, cb_arg);
}

/*
 * An in-place write at the head: room in the batch's open tail, a
 * reservation of at least BATCH_CHAIN_BYTES at the end of unflushed that
 * many messages fill one after another, each committed by moving an
 * offset; the tail joins unflushed (sealed) at the flush, or before any
 * ordinary write. A reservation not committed is simply reused.
 */
static void *
head_reserve(weft_ctx *ctx, size_t n)
{
	weft_channel *ch = ctx->ch;
	struct evbuffer_iovec v;

	if (ch->open_tail != NULL && n <= ch->tail_cap - ch->tail_len)
		return ch->open_tail + ch->tail_len;
	seal_tail(ch);
	if (evbuffer_reserve_space(
	        ch->unflushed,
	        (ev_ssize_t)(n > BATCH_CHAIN_BYTES ? n : BATCH_CHAIN_BYTES), &v,
	        1) != 1)
		return NULL;
	ch->open_tail = v.iov_base;
	ch->tail_cap = v.iov_len;
	return ch->open_tail;
}

static void
head_commit(weft_ctx *ctx, size_t used, weft_write_cb cb, void *cb_arg)
{
	weft_channel *ch = ctx->ch;

	if (ch->closing || ch->torn_down) {
		if (cb != NULL)
			owe_cb(ch, cb, cb_arg, WEFT_ECLOSED);
		return;
	}
	assert(used <= ch->tail_cap - ch->tail_len);
	ch->tail_len += used;
	account_write(ch, used, cb, cb_arg);
}

void *
weft__channel_scratch(weft_channel *ch, size_t n)
{
	void *p;

	if (n > ch->scratch_cap) {
		if ((p = realloc(ch->scratch, n)) == NULL)
			return NULL;
		ch->scratch = p;
		ch->scratch_cap = n;
	}
	return ch->scratch;
}

void
weft_channel_when_written(weft_channel *ch, weft_write_cb cb, void *arg)
{
	WEFT_ASSERT_IN_LOOP(ch->loop);
	if (ch->torn_down)
		owe_cb(ch, cb, arg, WEFT_ECLOSED);
	else if (ch->bytes_written <= ch->bytes_drained)
		owe_cb(ch, cb, arg, 0);
	else if (push_wait(ch, cb, arg) != 0)
		owe_cb(ch, cb, arg, WEFT_ENOMEM);
}

/*
 * Moves what was written to out and writes it at once, unless the stream
 * is known to be full (it waits for WRITABLE), in which case the bytes
 * join what waits. Many small flushes behind a full stream would each
 * leave a chain of their own, and a writev carries at most 64: small ones
 * are copied.
 */
static void
head_flush(weft_ctx *ctx)
{
	weft_channel *ch = ctx->ch;
	size_t n;

	seal_tail(ch);
	n = evbuffer_get_length(ch->unflushed);
	if (ch->stream == NULL || n == 0)
		return;
	if (evbuffer_get_length(ch->out) == 0) {
		evbuffer_add_buffer(ch->out, ch->unflushed);
	} else if (n <= SMALL_WRITE_BYTES) {
		evbuffer_add(ch->out,
		             evbuffer_pullup(ch->unflushed, (ssize_t)n), n);
		evbuffer_drain(ch->unflushed, n);
	} else {
		evbuffer_add_buffer(ch->out, ch->unflushed);
	}
	if (!ch->watch_write)
		try_write(ch);
}

static void
run_flush_task(weft_loop *loop, int status, void *arg)
{
	weft_channel *ch = arg;

	(void)loop;
	ch->flush_posted = false;
	if (status == 0 && !ch->torn_down &&
	    (ch->tail_len > 0 || evbuffer_get_length(ch->unflushed) > 0)) {
		enter(ch);
		weft_ctx_flush(ch->tail);
		leave(ch);
	}
	weft_channel_unref(ch);
}

static void
on_linger(evutil_socket_t fd, short what, void *arg)
{
	weft_channel *ch = arg;

	(void)fd;
	(void)what;
	weft_warn("%s: closing with %zu byte(s) unsent after linger", ch->peer,
	          pending_bytes(ch));
	request_teardown(ch);
}

static void
begin_close(weft_channel *ch)
{
	struct timeval tv;

	if (ch->closing || ch->torn_down)
		return;
	ch->closing = true;
	ch->closed_here = true;
	atomic_store_explicit(&ch->open, false, memory_order_relaxed);
	watch(ch, false, ch->watch_write);
	head_flush(ch->head);
	if (pending_bytes(ch) == 0 || ch->failed) {
		request_teardown(ch);
		return;
	}
	ch->linger_ev = evtimer_new(weft_loop_base(ch->loop), on_linger, ch);
	if (ch->linger_ev == NULL) {
		request_teardown(ch);
		return;
	}
	tv.tv_sec = (time_t)(ch->opts.linger_ms / 1000);
	tv.tv_usec = (suseconds_t)(ch->opts.linger_ms % 1000) * 1000;
	evtimer_add(ch->linger_ev, &tv);
}

static void
head_close(weft_ctx *ctx)
{
	begin_close(ctx->ch);
}

static const weft_handler head_handler = {
    .write = head_write,
    .flush = head_flush,
    .close = head_close,
    .reserve = head_reserve,
    .commit = head_commit,
};

/* ---- The tail: inbound events nobody handled end here ------------------ */

static void
tail_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	if (type != &weft_msg_evbuffer)
		weft_debug("%s: dropping unhandled %s message", ctx->ch->peer,
		           type->name);
	weft_msg_free(type, msg);
}

/* GLOBAL: the rate limit of the line below. Peers cause most of these
 * errors (a codec refusing bad input fires one per bad connection), so it
 * goes at the peer interval, with the count of the others. */
static weft_log_limit log_unhandled =
    WEFT_LOG_LIMIT_INIT(WEFT_LOG_PEER_INTERVAL);

/* An error nobody handled usually means the last handler forgot to: say
 * so where it will be seen, as Netty does. */
static void
tail_error(weft_ctx *ctx, int status)
{
	weft_log_limited(&log_unhandled, WEFT_LOG_WARN,
	                 "%s: an error reached the tail of the pipeline "
	                 "unhandled (add an error handler): %s",
	                 ctx->ch->peer, weft_strerror(status));
}

static void
tail_ignore(weft_ctx *ctx)
{
	(void)ctx;
}

static void
tail_writability(weft_ctx *ctx, bool writable)
{
	(void)ctx;
	(void)writable;
}

static void
tail_user_event(weft_ctx *ctx, int event, void *data)
{
	(void)ctx;
	(void)event;
	(void)data;
}

static const weft_handler tail_handler = {
    .active = tail_ignore,
    .read = tail_read,
    .read_complete = tail_ignore,
    .writability_changed = tail_writability,
    .user_event = tail_user_event,
    .error = tail_error,
    .inactive = tail_ignore,
};

/* ---- Teardown ----------------------------------------------------------- */

static void inbox_close(weft_channel *ch);

/* Tears the channel down: inactive fires, waiting writes fail, the stream
 * closes, handlers leave, and the open reference goes. */
static void
teardown(weft_channel *ch)
{
	weft_stream *s = ch->stream;
	weft_ctx *c, *next;
	bool graceful;

	if (ch->torn_down)
		return;
	enter(ch);
	ch->closing = true;
	atomic_store_explicit(&ch->open, false, memory_order_relaxed);
	if (ch->linger_ev != NULL) {
		event_free(ch->linger_ev);
		ch->linger_ev = NULL;
	}
	if (ch->activated)
		weft_ctx_fire_inactive(ch->head);
	ch->torn_down = true;
	inbox_close(ch);
	complete_waits(ch, WEFT_ECLOSED);
	weft__channel_run_owed(ch);
	graceful = ch->closed_here && !ch->failed && pending_bytes(ch) == 0;
	ch->stream = NULL;
	s->ops->close(s, graceful);
	seal_tail(ch);
	evbuffer_drain(ch->unflushed, evbuffer_get_length(ch->unflushed));
	evbuffer_drain(ch->out, evbuffer_get_length(ch->out));
	for (c = ch->head->next; c != ch->tail; c = next) {
		next = c->next;
		weft_ctx_remove(c);
	}
	weft__loop_remove_channel(ch->loop, ch);
	leave(ch);
	weft_channel_unref(ch);
}

static void
run_teardown(weft_loop *loop, int status, void *arg)
{
	weft_channel *ch = arg;

	(void)loop;
	(void)status;
	teardown(ch);
	weft_channel_unref(ch);
}

static void
request_teardown(weft_channel *ch)
{
	if (ch->teardown_queued || ch->torn_down)
		return;
	ch->teardown_queued = true;
	if (ch->depth == 0) {
		teardown(ch);
		return;
	}
	/* Inside a callback: finish it first. */
	weft_channel_ref(ch);
	if (weft_loop_post(ch->loop, run_teardown, ch) != 0) {
		weft_channel_unref(ch);
		teardown(ch);
	}
}

/* ---- Stream events ------------------------------------------------------ */

/* Hands what the input holds to the pipeline, once. */
static void schedule_turn(weft_channel *ch);

static void
deliver_input(weft_channel *ch)
{
	ch->delivering = true;
	weft_ctx_fire_read(ch->head, &weft_msg_evbuffer, ch->in);
	ch->delivering = false;
	/* A turn given up at the input's last byte needs no next round. */
	if (ch->read_yielded) {
		if (evbuffer_get_length(ch->in) == 0 || ch->torn_down ||
		    ch->closing)
			ch->read_yielded = false;
		else
			schedule_turn(ch);
	}
	if (!ch->torn_down)
		weft_ctx_fire_read_complete(ch->head);
}

/* A closing channel reads no more, but still hears its stream end or
 * fail, so that a close lingering for bytes nobody will take ends then;
 * what arrives meanwhile is dropped. */
static void
on_readable_closing(weft_channel *ch)
{
	ssize_t n;

	n = ch->stream->ops->read(ch->stream, ch->in, ch->opts.max_read_bytes);
	evbuffer_drain(ch->in, evbuffer_get_length(ch->in));
	if (n < 0)
		stream_failed(ch, (int)n);
}

static void
on_readable(weft_channel *ch)
{
	ssize_t n;

	if (ch->stream == NULL)
		return;
	if (ch->closing) {
		on_readable_closing(ch);
		return;
	}
	if (!wants_read(ch))
		return;
	/* A turn given up: the input's rest goes first, at the next round,
	 * and the input grows no further meanwhile. */
	if (ch->read_yielded) {
		ch->readable_missed = true;
		return;
	}
	n = ch->stream->ops->read(ch->stream, ch->in, ch->opts.max_read_bytes);
	if (n > 0) {
		ch->stats.reads++;
		ch->stats.bytes_read += (uint64_t)n;
		deliver_input(ch);
	} else if (n < 0 && !ch->torn_down)
		stream_failed(ch, (int)n);
}

void
weft_stream_ready(weft_stream *s, unsigned events)
{
	weft_channel *ch = s->channel;

	if (ch == NULL || ch->torn_down)
		return;
	weft__loop_note_work(ch->loop);
	enter(ch);
	if (events & WEFT_STREAM_READABLE)
		on_readable(ch);
	if ((events & WEFT_STREAM_WRITABLE) && !ch->torn_down)
		try_write(ch);
	/* Callbacks owed by this event run now: no call of anybody's is on
	 * the stack. */
	weft__channel_run_owed(ch);
	leave(ch);
}

/* ---- Making a channel --------------------------------------------------- */

static void
set_defaults(weft_channel_opts *o, const weft_channel_opts *given)
{
	if (given != NULL)
		*o = *given;
	if (o->high_water_bytes == 0)
		o->high_water_bytes = DEFAULT_HIGH_WATER;
	if (o->low_water_bytes == 0)
		o->low_water_bytes = DEFAULT_LOW_WATER;
	if (o->low_water_bytes > o->high_water_bytes)
		o->low_water_bytes = o->high_water_bytes;
	if (o->max_read_bytes == 0)
		o->max_read_bytes = DEFAULT_MAX_READ;
	if (o->linger_ms == 0)
		o->linger_ms = DEFAULT_LINGER_MS;
}

static void run_inbox_task(weft_loop *loop, int status, void *arg);
static void run_read_task(weft_loop *loop, int status, void *arg);
static void run_yield_task(weft_loop *loop, int status, void *arg);
static void run_close_task(weft_loop *loop, int status, void *arg);

static int
channel_alloc(weft_channel **out)
{
	weft_channel *ch;

	if ((ch = calloc(1, sizeof(*ch))) == NULL)
		return WEFT_ENOMEM;
	ch->in = evbuffer_new();
	ch->unflushed = evbuffer_new();
	ch->out = evbuffer_new();
	ch->inbox.bytes = evbuffer_new();
	ch->xbytes = evbuffer_new();
	ch->xone = evbuffer_new();
	ch->head = weft__ctx_new(ch, "head", &head_handler, NULL);
	ch->tail = weft__ctx_new(ch, "tail", &tail_handler, NULL);
	if (ch->in == NULL || ch->unflushed == NULL || ch->out == NULL ||
	    ch->inbox.bytes == NULL || ch->xbytes == NULL || ch->xone == NULL ||
	    ch->head == NULL || ch->tail == NULL ||
	    pthread_mutex_init(&ch->inbox.lock, NULL) != 0) {
		if (ch->in != NULL)
			evbuffer_free(ch->in);
		if (ch->unflushed != NULL)
			evbuffer_free(ch->unflushed);
		if (ch->out != NULL)
			evbuffer_free(ch->out);
		if (ch->inbox.bytes != NULL)
			evbuffer_free(ch->inbox.bytes);
		if (ch->xbytes != NULL)
			evbuffer_free(ch->xbytes);
		if (ch->xone != NULL)
			evbuffer_free(ch->xone);
		free(ch->head);
		free(ch->tail);
		free(ch);
		return WEFT_ENOMEM;
	}
	*out = ch;
	return 0;
}

int
weft_channel_new_stream(weft_loop *loop, weft_stream *s,
                        const weft_channel_opts *opts, weft_channel **out)
{
	weft_channel *ch;
	char addr[sizeof(ch->peer)];

	WEFT_ASSERT_IN_LOOP(loop);
	if (channel_alloc(&ch) != 0) {
		s->channel = NULL;
		s->ops->close(s, false);
		return WEFT_ENOMEM;
	}
	ch->head->next = ch->tail;
	ch->tail->prev = ch->head;
	weft__pipeline_relink(ch);
	ch->dead_tail = &ch->dead;
	atomic_init(&ch->refs, 1);
	atomic_init(&ch->open, true);
	atomic_init(&ch->close_posted, false);
	ch->loop = loop;
	ch->stream = s;
	ch->writable = true;
	ch->auto_read = true;
	ch->done_task = (weft_task){.cb = run_owed_task, .arg = ch};
	ch->flush_task = (weft_task){.cb = run_flush_task, .arg = ch};
	ch->read_task = (weft_task){.cb = run_read_task, .arg = ch};
	ch->yield_task = (weft_task){.cb = run_yield_task, .arg = ch};
	ch->inbox_task = (weft_task){.cb = run_inbox_task, .arg = ch};
	ch->close_task = (weft_task){.cb = run_close_task, .arg = ch};
	set_defaults(&ch->opts, opts);
	strcpy(ch->peer, "?");
	if (s->ops->address != NULL &&
	    s->ops->address(s, true, addr, sizeof(addr)) == 0)
		snprintf(ch->peer, sizeof(ch->peer), "%s", addr);
	s->channel = ch;
	weft__loop_add_channel(loop, ch);
	*out = ch;
	return 0;
}

void
weft_channel_activate(weft_channel *ch)
{
	WEFT_ASSERT_IN_LOOP(ch->loop);
	if (ch->activated || ch->closing)
		return;
	enter(ch);
	ch->activated = true;
	weft_ctx_fire_active(ch->head);
	if (!ch->closing) {
		watch(ch, wants_read(ch), ch->watch_write);
		/* Bytes that arrived before activation (a handler added them,
		 * or the stream handed them over) would otherwise wait for
		 * the next read event. */
		if (wants_read(ch) && evbuffer_get_length(ch->in) > 0)
			deliver_input(ch);
	}
	leave(ch);
}

/* ---- Accessors ---------------------------------------------------------- */

weft_loop *
weft_channel_loop(const weft_channel *ch)
{
	return ch->loop;
}

weft_stream *
weft_channel_stream(weft_channel *ch)
{
	return ch->stream;
}

void
weft_channel_set_data(weft_channel *ch, void *data)
{
	ch->data = data;
}

void *
weft_channel_data(const weft_channel *ch)
{
	return ch->data;
}

const char *
weft_channel_peer(const weft_channel *ch)
{
	return ch->peer;
}

void
weft_channel_set_peer(weft_channel *ch, const char *peer)
{
	snprintf(ch->peer, sizeof(ch->peer), "%s", peer);
}

bool
weft_channel_is_open(const weft_channel *ch)
{
	return atomic_load_explicit(&ch->open, memory_order_relaxed);
}

/* ---- Reading on and off ------------------------------------------------- */

static void
run_read_task(weft_loop *loop, int status, void *arg)
{
	weft_channel *ch = arg;

	(void)loop;
	ch->read_posted = false;
	if (status == 0 && !ch->torn_down && wants_read(ch) &&
	    evbuffer_get_length(ch->in) > 0) {
		enter(ch);
		deliver_input(ch);
		leave(ch);
	}
	weft_channel_unref(ch);
}

void
weft_channel_set_auto_read(weft_channel *ch, bool on)
{
	WEFT_ASSERT_IN_LOOP(ch->loop);
	ch->auto_read = on;
	if (ch->torn_down || ch->closing || !ch->activated)
		return;
	watch(ch, wants_read(ch), ch->watch_write);
	/* What a paused decoder left in the input goes round again. */
	if (on && evbuffer_get_length(ch->in) > 0 && !ch->read_posted) {
		ch->read_posted = true;
		weft_channel_ref(ch);
		if (weft_loop_post_task(ch->loop, &ch->read_task) != 0) {
			ch->read_posted = false;
			weft_channel_unref(ch);
		}
	}
}

bool
weft_channel_is_auto_read(const weft_channel *ch)
{
	return ch->auto_read;
}

/* The channel's next turn: the rest of its input, then, if its stream
 * became readable meanwhile and the turn was not given up again, what
 * the stream has. */
static void
run_yield_task(weft_loop *loop, int status, void *arg)
{
	weft_channel *ch = arg;
	bool missed = ch->readable_missed;

	(void)loop;
	ch->read_yielded = false;
	ch->readable_missed = false;
	if (status == 0 && !ch->torn_down && wants_read(ch)) {
		enter(ch);
		if (evbuffer_get_length(ch->in) > 0)
			deliver_input(ch);
		/* A stream may say READABLE once for what it holds (TLS):
		 * given up again, the note waits for the next turn. */
		if (missed && ch->read_yielded)
			ch->readable_missed = true;
		else if (missed && !ch->torn_down)
			on_readable(ch);
		weft__channel_run_owed(ch);
		leave(ch);
	}
	weft_channel_unref(ch);
}

static void
schedule_turn(weft_channel *ch)
{
	weft_channel_ref(ch);
	weft__loop_next_round(ch->loop, &ch->yield_task);
}

void
weft_channel_yield(weft_channel *ch)
{
	WEFT_ASSERT_IN_LOOP(ch->loop);
	if (ch->read_yielded || ch->torn_down || ch->closing)
		return;
	ch->read_yielded = true;
	/* During a delivery, deliver_input schedules it as the delivery
	 * ends, if anything is left. */
	if (!ch->delivering)
		schedule_turn(ch);
}

bool
weft_channel_is_reading(const weft_channel *ch)
{
	return ch->auto_read && !ch->read_yielded;
}

void
weft_channel_fire_user_event(weft_channel *ch, int event, void *data)
{
	WEFT_ASSERT_IN_LOOP(ch->loop);
	if (ch->torn_down)
		return;
	enter(ch);
	weft_ctx_fire_user_event(ch->head, event, data);
	leave(ch);
}

/* ---- Writes from other threads: the inbox ------------------------------ */

/*
 * Takes a write from another thread: bytes are moved into the inbox's
 * buffer at once, a typed message is kept as it is, and the loop is woken
 * once per batch. Returns 0 or WEFT_ECLOSED (msg consumed either way) or
 * WEFT_ENOMEM.
 */
static int
inbox_push(weft_channel *ch, const weft_msg_type *type, void *msg,
           weft_write_cb cb, void *arg)
{
	struct weft__inbox *ib = &ch->inbox;
	struct weft__xwrite *w;
	bool post = false;
	int rv = 0;

	pthread_mutex_lock(&ib->lock);
	if (ib->closed) {
		rv = WEFT_ECLOSED;
	} else if ((w = RING_PUSH(ib->q)) == NULL) {
		rv = WEFT_ENOMEM;
	} else {
		*w = (struct weft__xwrite){type, msg, 0, cb, arg};
		if (type == &weft_msg_bytes) {
			const weft_bytes *b = msg;

			w->len = b->len;
			rv = evbuffer_add(ib->bytes, b->data, b->len);
		} else if (type == &weft_msg_evbuffer) {
			w->len = evbuffer_get_length(msg);
			rv = evbuffer_add_buffer(ib->bytes, msg);
		}
		if (rv == 0) {
			if (weft_msg_is_bytes(type))
				w->msg = NULL;
			ib->q.len++;
			post = !ib->posted;
			ib->posted = true;
		} else {
			rv = WEFT_ENOMEM;
		}
	}
	if (post)
		weft_channel_ref(ch);
	pthread_mutex_unlock(&ib->lock);
	if (rv != 0)
		weft_msg_free(type, msg);
	else if (post && weft_loop_post_task(ch->loop, &ch->inbox_task) != 0)
		/* The loop is going away; teardown ends the writes. */
		weft_channel_unref(ch);
	return rv;
}

/*
 * Moves the inbox to the loop's side under the lock: its bytes into
 * ch->xbytes, its writes into ch->xrun (the rings swap, so neither side
 * allocates once both have grown to the batches they see).
 */
static void
inbox_take(weft_channel *ch, bool close)
{
	struct weft__inbox *ib = &ch->inbox;
	struct weft__xring spare = ch->xrun;

	pthread_mutex_lock(&ib->lock);
	evbuffer_add_buffer(ch->xbytes, ib->bytes);
	ch->xrun = ib->q;
	ib->q = spare;
	ib->posted = false;
	if (close)
		ib->closed = true;
	pthread_mutex_unlock(&ib->lock);
}

/* Writes (or, with status, fails) the taken writes in order. */
static void
inbox_run(weft_channel *ch, int status)
{
	struct weft__xwrite one, *w = &one;

	while (ch->xrun.len > 0) {
		one = *RING_FRONT(ch->xrun);
		RING_POP(ch->xrun);
		if (w->msg == NULL)
			evbuffer_remove_buffer(ch->xbytes, ch->xone, w->len);
		if (status != 0 || ch->torn_down) {
			/* Bytes were taken into xone above; a typed message
			 * is freed. */
			evbuffer_drain(ch->xone, SIZE_MAX);
			if (w->msg != NULL)
				weft_msg_free(w->type, w->msg);
			owe_cb(ch, w->cb, w->arg,
			       status != 0 ? status : WEFT_ECLOSED);
		} else if (w->msg == NULL) {
			weft_ctx_write(ch->tail, &weft_msg_evbuffer, ch->xone,
			               w->cb, w->arg);
			evbuffer_drain(ch->xone, SIZE_MAX);
		} else {
			weft_ctx_write(ch->tail, w->type, w->msg, w->cb,
			               w->arg);
		}
	}
	ch->xrun.head = 0;
}

/* One batch of writes from other threads: through the pipeline in the
 * order they came, then one flush. */
static void
run_inbox_task(weft_loop *loop, int status, void *arg)
{
	weft_channel *ch = arg;

	(void)loop;
	if (!ch->torn_down) {
		enter(ch);
		inbox_take(ch, false);
		inbox_run(ch, status);
		if (!ch->torn_down)
			weft_ctx_flush(ch->tail);
		leave(ch);
	}
	weft_channel_unref(ch);
}

/* Refuses further writes from other threads and fails those waiting. */
static void
inbox_close(weft_channel *ch)
{
	inbox_take(ch, true);
	inbox_run(ch, WEFT_ECLOSED);
	evbuffer_drain(ch->xbytes, SIZE_MAX);
}

/* ---- Writing and closing ------------------------------------------------ */

static void
write_in_loop(weft_channel *ch, const weft_msg_type *type, void *msg,
              weft_write_cb cb, void *arg)
{
	bool was = ch->flush_follows;

	enter(ch);
	ch->flush_follows = true; /* no flush task: one comes right away */
	weft_ctx_write(ch->tail, type, msg, cb, arg);
	ch->flush_follows = was;
	weft_ctx_flush(ch->tail);
	leave(ch);
}

int
weft_channel_write_msg(weft_channel *ch, const weft_msg_type *type, void *msg,
                       weft_write_cb cb, void *arg)
{
	if (weft_loop_in_thread(ch->loop)) {
		write_in_loop(ch, type, msg, cb, arg);
		return 0;
	}
	return inbox_push(ch, type, msg, cb, arg);
}

int
weft_channel_write(weft_channel *ch, struct evbuffer *buf, weft_write_cb cb,
                   void *arg)
{
	return weft_channel_write_msg(ch, &weft_msg_evbuffer, buf, cb, arg);
}

void
weft_ctx_write_and_flush(weft_ctx *ctx, const weft_msg_type *type, void *msg,
                         weft_write_cb cb, void *cb_arg)
{
	weft_ctx_write(ctx, type, msg, cb, cb_arg);
	weft_ctx_flush(ctx);
}

static void
close_in_loop(weft_channel *ch)
{
	if (ch->closing || ch->torn_down)
		return;
	enter(ch);
	weft_ctx_close(ch->tail);
	leave(ch);
}

static void
run_close_task(weft_loop *loop, int status, void *arg)
{
	weft_channel *ch = arg;

	(void)loop;
	(void)status;
	close_in_loop(ch);
	weft_channel_unref(ch);
}

void
weft_channel_close(weft_channel *ch)
{
	if (weft_loop_in_thread(ch->loop)) {
		close_in_loop(ch);
		return;
	}
	/* One close travels at a time; later ones find it on its way. */
	if (atomic_exchange(&ch->close_posted, true))
		return;
	weft_channel_ref(ch);
	if (weft_loop_post_task(ch->loop, &ch->close_task) != 0)
		weft_channel_unref(ch);
}

void
weft__channel_close_within(weft_channel *ch, uint64_t linger_ms)
{
	if (ch->opts.linger_ms > linger_ms)
		ch->opts.linger_ms = linger_ms ? linger_ms : 1;
	close_in_loop(ch);
}

void
weft__channel_abort(weft_channel *ch)
{
	request_teardown(ch);
}

void
weft_channel_get_stats(const weft_channel *ch, weft_channel_stats *out)
{
	*out = ch->stats;
}
