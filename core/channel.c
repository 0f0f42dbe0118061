/* SPDX-License-Identifier: MIT */
/* channel.c: a bufferevent, the pipeline around it, and its life cycle. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "core_int.h"

#define DEFAULT_HIGH_WATER (1u << 20)
#define DEFAULT_LOW_WATER (256u << 10)
#define DEFAULT_MAX_READ (256u << 10)
#define DEFAULT_LINGER_MS 5000
#define MAX_SINGLE_WRITE (4u << 20)
/* Writes up to this size are copied into the channel's buffer, so that one
 * writev carries many small messages; larger ones move their chains. */
#define SMALL_WRITE_BYTES 2048
/* The size of the chains that gather small writes (one TLS record). */
#define BATCH_CHAIN_BYTES 16384
/* The first read of a readable socket reserves this much. */
#define READ_CHUNK_BYTES 16384
/* Most buffer pieces one direct write hands to sendmsg. */
#define DIRECT_IOVECS 64

const weft_msg_type weft_msg_evbuffer = {"evbuffer", NULL};
const weft_msg_type weft_msg_bytes = {"bytes", NULL};

static void request_teardown(weft_channel *ch);

/*
 * Every entry into a channel from the loop (a libevent callback, a task, a
 * public call) is bracketed by enter/leave, so that contexts removed during
 * the callback are freed only when the outermost one returns.
 */
static void
enter(weft_channel *ch)
{
	ch->depth++;
}

static void
leave(weft_channel *ch)
{
	if (--ch->depth == 0 && ch->dead != NULL)
		weft__pipeline_free_dead(ch);
}

void
weft_channel_ref(weft_channel *ch)
{
	atomic_fetch_add_explicit(&ch->refs, 1, memory_order_relaxed);
}

static void
channel_free(weft_channel *ch)
{
	weft__pipeline_free_dead(ch);
	free(ch->head);
	free(ch->tail);
	evbuffer_free(ch->unflushed);
	free(ch->waits);
	free(ch->done);
	free(ch);
}

void
weft_channel_unref(weft_channel *ch)
{
	if (atomic_fetch_sub_explicit(&ch->refs, 1, memory_order_acq_rel) == 1)
		channel_free(ch);
}

/* Runs every owed write callback, oldest first; those owed meanwhile
 * run in the same pass (their calls have returned by then). */
static void
run_owed(weft_channel *ch)
{
	struct weft__write_done d;

	while (ch->done_len > 0) {
		d = ch->done[ch->done_head];
		ch->done_head = (ch->done_head + 1) % ch->done_cap;
		ch->done_len--;
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
	run_owed(ch);
	leave(ch);
	weft_channel_unref(ch);
}

static int
push_owed(weft_channel *ch, weft_write_cb cb, void *arg, int status)
{
	struct weft__write_done *d;
	size_t cap, i;

	if (ch->done_len == ch->done_cap) {
		cap = ch->done_cap ? ch->done_cap * 2 : 8;
		if ((d = malloc(cap * sizeof(*d))) == NULL)
			return WEFT_ENOMEM;
		for (i = 0; i < ch->done_len; i++)
			d[i] = ch->done[(ch->done_head + i) % ch->done_cap];
		free(ch->done);
		ch->done = d;
		ch->done_cap = cap;
		ch->done_head = 0;
	}
	d = &ch->done[(ch->done_head + ch->done_len) % ch->done_cap];
	*d = (struct weft__write_done){cb, arg, status};
	ch->done_len++;
	return 0;
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
	if (cb == NULL)
		return;
	if (push_owed(ch, cb, arg, status) != 0) {
		/* Out of memory: better now than never. */
		cb(ch, status, arg);
		return;
	}
	if (ch->done_posted)
		return;
	ch->done_posted = true;
	weft_channel_ref(ch);
	if (weft_loop_post_task(ch->loop, &ch->done_task) == 0)
		return;
	/* The loop is going away: run them now rather than never. */
	ch->done_posted = false;
	weft_channel_unref(ch);
	run_owed(ch);
}

void
weft_ctx_fail_write(weft_ctx *ctx, const weft_msg_type *type, void *msg,
                    weft_write_cb cb, void *cb_arg, int status)
{
	weft_msg_free(type, msg);
	owe_cb(ctx->ch, cb, cb_arg, status);
}

static size_t
pending_bytes(const weft_channel *ch)
{
	size_t n = evbuffer_get_length(ch->unflushed);

	if (ch->bev != NULL)
		n += evbuffer_get_length(bufferevent_get_output(ch->bev));
	return n;
}

size_t
weft_channel_pending_write_bytes(const weft_channel *ch)
{
	return pending_bytes(ch);
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
	size_t cap, i;

	if (ch->waits_len == ch->waits_cap) {
		cap = ch->waits_cap ? ch->waits_cap * 2 : 16;
		if ((w = malloc(cap * sizeof(*w))) == NULL)
			return WEFT_ENOMEM;
		for (i = 0; i < ch->waits_len; i++)
			w[i] = ch->waits[(ch->waits_head + i) % ch->waits_cap];
		free(ch->waits);
		ch->waits = w;
		ch->waits_cap = cap;
		ch->waits_head = 0;
	}
	w = &ch->waits[(ch->waits_head + ch->waits_len) % ch->waits_cap];
	w->end_offset = ch->bytes_written;
	w->cb = cb;
	w->arg = arg;
	ch->waits_len++;
	return 0;
}

/* Runs the callbacks of writes whose bytes have all left, or, with an
 * error status, of every write still waiting. */
static void
complete_waits(weft_channel *ch, int status)
{
	struct weft__write_wait w;

	while (ch->waits_len > 0) {
		w = ch->waits[ch->waits_head];
		if (status == 0 && w.end_offset > ch->bytes_drained)
			break;
		ch->waits_head = (ch->waits_head + 1) % ch->waits_cap;
		ch->waits_len--;
		w.cb(ch, status, w.arg);
	}
}

/* The head of the pipeline: outbound operations end here. */
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
	/* A batch of small writes starts a chain of BATCH_CHAIN_BYTES (libevent
	 * would start at 1 KiB and grow to 4 KiB), so writev pieces and TLS
	 * records come out large. */
	if (evbuffer_get_length(ch->unflushed) == 0)
		evbuffer_expand(ch->unflushed, BATCH_CHAIN_BYTES);
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
	ch->bytes_written += n;
	if (cb != NULL) {
		if (ch->bytes_written <= ch->bytes_drained)
			owe_cb(ch, cb, cb_arg, 0);
		else if (push_wait(ch, cb, cb_arg) != 0)
			owe_cb(ch, cb, cb_arg, WEFT_ENOMEM);
	}
	if (ch->writable && pending_bytes(ch) > ch->opts.high_water_bytes)
		set_writable(ch, false);
}

/*
 * Writes what the flush would queue straight to the socket when nothing is
 * queued before it and no write waits for a callback (those complete from
 * libevent's write callback, never inside a flush).
 */
static void
write_directly(weft_channel *ch, struct evbuffer *out)
{
	struct evbuffer_iovec v[DIRECT_IOVECS];
	struct iovec iov[DIRECT_IOVECS];
	struct msghdr mh = {0};
	evutil_socket_t fd;
	ssize_t sent;
	int i, n;

	if (!ch->direct_writes || ch->waits_len > 0 || !ch->writable ||
	    evbuffer_get_length(out) > 0 ||
	    (fd = bufferevent_getfd(ch->bev)) < 0)
		return;
	n = evbuffer_peek(ch->unflushed, -1, NULL, v, DIRECT_IOVECS);
	if (n > DIRECT_IOVECS)
		n = DIRECT_IOVECS;
	for (i = 0; i < n; i++) {
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len;
	}
	mh.msg_iov = iov;
	mh.msg_iovlen = (size_t)n;
	/* Errors are left for libevent's own write to find and report. */
	sent = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (sent <= 0)
		return;
	evbuffer_drain(ch->unflushed, (size_t)sent);
	ch->bytes_flushed += (uint64_t)sent;
	ch->bytes_drained += (uint64_t)sent;
	ch->direct_write_calls++;
}

static void
head_flush(weft_ctx *ctx)
{
	weft_channel *ch = ctx->ch;
	size_t n = evbuffer_get_length(ch->unflushed);
	struct evbuffer *out;

	if (ch->bev == NULL || n == 0)
		return;
	out = bufferevent_get_output(ch->bev);
	write_directly(ch, out);
	if ((n = evbuffer_get_length(ch->unflushed)) == 0)
		return;
	ch->bytes_flushed += n;
	/* Many small flushes would each leave a chain of their own, and a
	 * writev carries at most 128: copy small ones instead. */
	if (n <= SMALL_WRITE_BYTES) {
		if (evbuffer_get_length(out) == 0)
			evbuffer_expand(out, BATCH_CHAIN_BYTES);
		evbuffer_add(out, evbuffer_pullup(ch->unflushed, (ssize_t)n),
		             n);
		evbuffer_drain(ch->unflushed, n);
	} else {
		evbuffer_add_buffer(out, ch->unflushed);
	}
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

/* Turns reading on or off: the channel's own read event on a plain socket
 * (see weft_channel_enable_direct_writes), else the bufferevent's. */
static void
set_reading(weft_channel *ch, bool on)
{
	if (ch->read_ev != NULL) {
		if (on)
			event_add(ch->read_ev, NULL);
		else
			event_del(ch->read_ev);
	} else if (on) {
		bufferevent_enable(ch->bev, EV_READ);
	} else {
		bufferevent_disable(ch->bev, EV_READ);
	}
}

static void
begin_close(weft_channel *ch)
{
	struct timeval tv;

	if (ch->closing || ch->torn_down)
		return;
	ch->closing = true;
	atomic_store_explicit(&ch->open, false, memory_order_relaxed);
	set_reading(ch, false);
	head_flush(ch->head);
	if (pending_bytes(ch) == 0) {
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
};

/* The tail: inbound events nobody handled end here. */
static void
tail_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	if (type != &weft_msg_evbuffer)
		weft_debug("%s: dropping unhandled %s message", ctx->ch->peer,
		           type->name);
	weft_msg_free(type, msg);
}

/* An error nobody handled usually means the last handler forgot to: say
 * so where it will be seen, as Netty does. */
static void
tail_error(weft_ctx *ctx, int status)
{
	weft_warn("%s: an error reached the tail of the pipeline unhandled "
	          "(add an error handler): %s",
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

/* Drops what is still unsent (its writers were just told) and tells an
 * in-process partner about the EOF; the flush is a no-op on sockets. A
 * bufferevent pair keeps the start of its output frozen, hence the thaw. */
static void
drop_unsent(weft_channel *ch)
{
	struct evbuffer *out = bufferevent_get_output(ch->bev);

	evbuffer_unfreeze(out, 1);
	evbuffer_drain(out, evbuffer_get_length(out));
	bufferevent_flush(ch->bev, EV_WRITE, BEV_FINISHED);
}

/* Tears the channel down: inactive fires, waiting writes fail, the socket
 * closes, handlers leave, and the open reference goes. */
static void
teardown(weft_channel *ch)
{
	weft_ctx *c, *next;

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
	complete_waits(ch, WEFT_ECLOSED);
	run_owed(ch);
	drop_unsent(ch);
	if (ch->read_ev != NULL) {
		event_free(ch->read_ev);
		ch->read_ev = NULL;
	}
	bufferevent_free(ch->bev);
	ch->bev = NULL;
	evbuffer_drain(ch->unflushed, evbuffer_get_length(ch->unflushed));
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

static void
on_read(struct bufferevent *bev, void *arg)
{
	weft_channel *ch = arg;

	if (ch->closing)
		return;
	enter(ch);
	weft_ctx_fire_read(ch->head, &weft_msg_evbuffer,
	                   bufferevent_get_input(bev));
	if (!ch->torn_down)
		weft_ctx_fire_read_complete(ch->head);
	leave(ch);
}

/* With the write low-water mark at SIZE_MAX, libevent calls this after
 * every write to the socket. */
static void
on_write(struct bufferevent *bev, void *arg)
{
	weft_channel *ch = arg;
	size_t queued = evbuffer_get_length(bufferevent_get_output(bev));

	enter(ch);
	ch->bytes_drained = ch->bytes_flushed - queued;
	complete_waits(ch, 0);
	if (!ch->writable && pending_bytes(ch) <= ch->opts.low_water_bytes)
		set_writable(ch, true);
	if (ch->closing && queued == 0)
		request_teardown(ch);
	leave(ch);
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
	weft_channel *ch = arg;
	int err;

	(void)bev;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	enter(ch);
	atomic_store_explicit(&ch->open, false, memory_order_relaxed);
	if (what & BEV_EVENT_ERROR) {
		err = weft_from_errno(EVUTIL_SOCKET_ERROR());
		if (err == 0)
			err = WEFT_EIO;
		weft_debug(
		    "%s: connection error: %s", ch->peer,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		if (ch->activated)
			weft_ctx_fire_error(ch->head, err);
	}
	request_teardown(ch);
	leave(ch);
}

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

int
weft_channel_new(weft_loop *loop, struct bufferevent *bev,
                 const weft_channel_opts *opts, weft_channel **out)
{
	weft_channel *ch;

	WEFT_ASSERT_IN_LOOP(loop);
	if ((ch = calloc(1, sizeof(*ch))) == NULL)
		goto err_free_bev;
	ch->unflushed = evbuffer_new();
	ch->head = weft__ctx_new(ch, "head", &head_handler, NULL);
	ch->tail = weft__ctx_new(ch, "tail", &tail_handler, NULL);
	if (ch->unflushed == NULL || ch->head == NULL || ch->tail == NULL)
		goto err_free_ch;
	ch->head->next = ch->tail;
	ch->tail->prev = ch->head;
	atomic_init(&ch->refs, 1);
	atomic_init(&ch->open, true);
	ch->loop = loop;
	ch->bev = bev;
	ch->writable = true;
	ch->auto_read = true;
	ch->done_task.cb = run_owed_task;
	ch->done_task.arg = ch;
	set_defaults(&ch->opts, opts);
	strcpy(ch->peer, "?");
	bufferevent_setcb(bev, on_read, on_write, on_event, ch);
	bufferevent_setwatermark(bev, EV_WRITE, SIZE_MAX, 0);
	bufferevent_set_max_single_read(bev, ch->opts.max_read_bytes);
	bufferevent_set_max_single_write(bev, MAX_SINGLE_WRITE);
	bufferevent_disable(bev, EV_READ);
	bufferevent_enable(bev, EV_WRITE);
	weft__loop_add_channel(loop, ch);
	*out = ch;
	return 0;

err_free_ch:
	if (ch->unflushed != NULL)
		evbuffer_free(ch->unflushed);
	free(ch->head);
	free(ch->tail);
	free(ch);
err_free_bev:
	bufferevent_free(bev);
	return WEFT_ENOMEM;
}

void
weft_channel_activate(weft_channel *ch)
{
	WEFT_ASSERT_IN_LOOP(ch->loop);
	if (ch->activated || ch->closing)
		return;
	enter(ch);
	ch->activated = true;
	if (ch->auto_read)
		set_reading(ch, true);
	weft_ctx_fire_active(ch->head);
	/* Bytes that arrived before activation (read during a handshake)
	 * would otherwise wait for the next read event. */
	if (ch->auto_read && !ch->closing &&
	    evbuffer_get_length(bufferevent_get_input(ch->bev)) > 0)
		on_read(ch->bev, ch);
	leave(ch);
}

weft_loop *
weft_channel_loop(const weft_channel *ch)
{
	return ch->loop;
}

struct bufferevent *
weft_channel_bev(weft_channel *ch)
{
	return ch->bev;
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

/*
 * Reads what the socket holds into the input, up to max_read_bytes, with
 * readv into reserved space: no FIONREAD first (libevent asks it before
 * every read, and then takes at most 4 KiB). A short read means the socket
 * is empty; a full one reads again, four times larger. Returns 0,
 * WEFT_ECLOSED at end of stream, WEFT_ENOMEM, or minus an errno.
 */
static int
fill_input(weft_channel *ch, evutil_socket_t fd, struct evbuffer *in)
{
	size_t total = 0, chunk = READ_CHUNK_BYTES, want, left;
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	ssize_t n;
	int i, nv;

	while (total < ch->opts.max_read_bytes) {
		want = ch->opts.max_read_bytes - total;
		if (want > chunk)
			want = chunk;
		nv = evbuffer_reserve_space(in, (ev_ssize_t)want, v, 2);
		if (nv <= 0)
			return WEFT_ENOMEM;
		left = want;
		for (i = 0; i < nv; i++) {
			iov[i].iov_base = v[i].iov_base;
			iov[i].iov_len =
			    v[i].iov_len < left ? v[i].iov_len : left;
			left -= iov[i].iov_len;
		}
		n = readv(fd, iov, nv);
		if (n <= 0) {
			evbuffer_commit_space(in, v, 0);
			if (n == 0)
				return WEFT_ECLOSED;
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		}
		left = (size_t)n;
		for (i = 0; i < nv; i++) {
			v[i].iov_len =
			    iov[i].iov_len < left ? iov[i].iov_len : left;
			left -= v[i].iov_len;
		}
		evbuffer_commit_space(in, v,
		                      nv == 2 && v[1].iov_len > 0 ? 2 : 1);
		total += (size_t)n;
		if ((size_t)n < want)
			return 0;
		chunk *= 4;
	}
	return 0;
}

static void
on_socket_readable(evutil_socket_t fd, short what, void *arg)
{
	weft_channel *ch = arg;
	struct evbuffer *in = bufferevent_get_input(ch->bev);
	size_t before = evbuffer_get_length(in);
	int rv;

	(void)what;
	if (ch->closing)
		return;
	enter(ch);
	/* A socket bufferevent keeps the end of its input frozen except
	 * while it reads; do as it does. */
	evbuffer_unfreeze(in, 0);
	rv = fill_input(ch, fd, in);
	evbuffer_freeze(in, 0);
	if (evbuffer_get_length(in) > before)
		on_read(ch->bev, ch);
	if (rv == WEFT_ECLOSED && !ch->torn_down)
		on_event(ch->bev, BEV_EVENT_EOF | BEV_EVENT_READING, ch);
	else if (rv < 0 && rv != WEFT_ENOMEM && !ch->torn_down) {
		EVUTIL_SET_SOCKET_ERROR(-rv);
		on_event(ch->bev, BEV_EVENT_ERROR | BEV_EVENT_READING, ch);
	}
	leave(ch);
}

void
weft_channel_enable_direct_writes(weft_channel *ch)
{
	evutil_socket_t fd = bufferevent_getfd(ch->bev);

	WEFT_ASSERT_IN_LOOP(ch->loop);
	ch->direct_writes = true;
	/* Reads too go straight to the socket, under the same condition. */
	if (fd < 0 || ch->read_ev != NULL || ch->activated)
		return;
	ch->read_ev = event_new(weft_loop_base(ch->loop), fd,
	                        EV_READ | EV_PERSIST, on_socket_readable, ch);
}

void
weft_channel_set_auto_read(weft_channel *ch, bool on)
{
	WEFT_ASSERT_IN_LOOP(ch->loop);
	ch->auto_read = on;
	if (ch->bev == NULL || ch->closing || !ch->activated)
		return;
	set_reading(ch, on);
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

static void
write_in_loop(weft_channel *ch, const weft_msg_type *type, void *msg,
              weft_write_cb cb, void *arg)
{
	enter(ch);
	weft_ctx_write(ch->tail, type, msg, cb, arg);
	weft_ctx_flush(ch->tail);
	leave(ch);
}

/* A write on its way from another thread. */
struct cross_write {
	weft_task task;
	weft_channel *ch;
	const weft_msg_type *type;
	void *msg;
	weft_write_cb cb;
	void *arg;
};

static void
run_cross_write(weft_loop *loop, int status, void *arg)
{
	struct cross_write *w = arg;

	(void)loop;
	if (status != 0) {
		weft_msg_free(w->type, w->msg);
		if (w->cb != NULL)
			w->cb(w->ch, status, w->arg);
	} else {
		write_in_loop(w->ch, w->type, w->msg, w->cb, w->arg);
	}
	if (w->type == &weft_msg_evbuffer)
		evbuffer_free(w->msg);
	weft_channel_unref(w->ch);
	free(w);
}

int
weft_channel_write_msg(weft_channel *ch, const weft_msg_type *type, void *msg,
                       weft_write_cb cb, void *arg)
{
	struct cross_write *w;
	int rv;

	if (weft_loop_in_thread(ch->loop)) {
		write_in_loop(ch, type, msg, cb, arg);
		return 0;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		rv = WEFT_ENOMEM;
		goto err_free_msg;
	}
	w->msg = msg;
	if (weft_msg_is_bytes(type)) {
		/* Take the bytes now: the caller keeps its evbuffer or
		 * memory. They travel as an evbuffer. */
		if ((w->msg = evbuffer_new()) == NULL) {
			free(w);
			rv = WEFT_ENOMEM;
			goto err_free_msg;
		}
		if (type == &weft_msg_bytes)
			evbuffer_add(w->msg, ((const weft_bytes *)msg)->data,
			             ((const weft_bytes *)msg)->len);
		else
			evbuffer_add_buffer(w->msg, msg);
		type = &weft_msg_evbuffer;
	}
	w->ch = ch;
	w->type = type;
	w->cb = cb;
	w->arg = arg;
	w->task.cb = run_cross_write;
	w->task.arg = w;
	weft_channel_ref(ch);
	if ((rv = weft_loop_post_task(ch->loop, &w->task)) == 0)
		return 0;
	weft_channel_unref(ch);
	weft_msg_free(type, w->msg);
	if (type == &weft_msg_evbuffer)
		evbuffer_free(w->msg);
	free(w);
	return rv;

err_free_msg:
	weft_msg_free(type, msg);
	return rv;
}

int
weft_channel_write(weft_channel *ch, struct evbuffer *buf, weft_write_cb cb,
                   void *arg)
{
	return weft_channel_write_msg(ch, &weft_msg_evbuffer, buf, cb, arg);
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
run_close(weft_loop *loop, int status, void *arg)
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
	weft_channel_ref(ch);
	if (weft_loop_post(ch->loop, run_close, ch) != 0)
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
