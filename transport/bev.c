/* SPDX-License-Identifier: MIT */
/*
 * bev.c: the stream of any libevent bufferevent (weft/stream.h): an
 * OpenSSL bufferevent for TLS, a bufferevent pair, a filter, or a socket
 * bufferevent a program made itself (weft_channel_new).
 *
 * The bufferevent keeps its own buffers: a read moves what its input
 * holds into the channel's input (chains move, nothing is copied), a
 * write moves the channel's output into its output, where the bytes count
 * as unsent until libevent has written them. With the write low-water
 * mark at SIZE_MAX, libevent calls the write callback after every write
 * to the socket, which says WRITABLE, so the channel learns of each write.
 * An end of stream or an error is kept and reported by the read after the
 * bytes before it.
 */
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "transport_int.h"

#define MAX_SINGLE_WRITE (4u << 20)

struct bev_stream {
	weft_stream base;
	struct bufferevent *bev;
	int status; /* the end of the stream or its error, once seen */
	bool reading;
};

/* Comes back to the channel soon, on the loop, for what the bufferevent
 * holds (bytes read during a handshake, or the end of the stream). */
static void
read_again(struct bev_stream *s)
{
	bufferevent_trigger(s->bev, EV_READ,
	                    BEV_TRIG_DEFER_CALLBACKS |
	                        BEV_TRIG_IGNORE_WATERMARKS);
}

static ssize_t
bev_read(weft_stream *base, struct evbuffer *in, size_t max)
{
	struct bev_stream *s = (struct bev_stream *)base;
	struct evbuffer *src = bufferevent_get_input(s->bev);
	size_t n = evbuffer_get_length(src);

	if (n == 0)
		return s->status;
	if (n <= max) {
		evbuffer_add_buffer(in, src);
	} else {
		n = max;
		evbuffer_remove_buffer(src, in, n);
	}
	if (evbuffer_get_length(src) > 0 || s->status != 0)
		read_again(s);
	return (ssize_t)n;
}

static ssize_t
bev_write(weft_stream *base, struct evbuffer *out)
{
	struct bev_stream *s = (struct bev_stream *)base;
	size_t n = evbuffer_get_length(out);

	if (s->status != 0)
		return s->status == WEFT_ECLOSED ? 0 : s->status;
	if (evbuffer_add_buffer(bufferevent_get_output(s->bev), out) != 0)
		return WEFT_ENOMEM;
	return (ssize_t)n;
}

static size_t
bev_unsent(const weft_stream *base)
{
	const struct bev_stream *s = (const struct bev_stream *)base;

	return evbuffer_get_length(bufferevent_get_output(s->bev));
}

static void
bev_watch(weft_stream *base, bool read, bool write)
{
	struct bev_stream *s = (struct bev_stream *)base;

	(void)write; /* the bufferevent writes by itself and says so */
	if (read == s->reading)
		return;
	s->reading = read;
	if (!read) {
		bufferevent_disable(s->bev, EV_READ);
		return;
	}
	bufferevent_enable(s->bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_input(s->bev)) > 0 ||
	    s->status != 0)
		read_again(s);
}

/* Drops what is still unsent (its writers were told) and tells an
 * in-process partner about the end of the stream; the flush is a no-op on
 * sockets. A bufferevent pair keeps the start of its output frozen, hence
 * the thaw. */
static void
bev_close(weft_stream *base, bool graceful)
{
	struct bev_stream *s = (struct bev_stream *)base;
	struct evbuffer *out = bufferevent_get_output(s->bev);

	(void)graceful;
	evbuffer_unfreeze(out, 1);
	evbuffer_drain(out, evbuffer_get_length(out));
	bufferevent_flush(s->bev, EV_WRITE, BEV_FINISHED);
	bufferevent_free(s->bev);
	free(s);
}

static int
bev_address(weft_stream *base, bool peer, char *buf, size_t len)
{
	struct bev_stream *s = (struct bev_stream *)base;

	return weft__addr_of_fd(bufferevent_getfd(s->bev), peer, buf, len);
}

static const weft_stream_ops bev_ops = {
    .name = "bufferevent",
    .read = bev_read,
    .write = bev_write,
    .unsent = bev_unsent,
    .watch = bev_watch,
    .close = bev_close,
    .address = bev_address,
};

static void
on_read(struct bufferevent *bev, void *arg)
{
	(void)bev;
	weft_stream_ready(arg, WEFT_STREAM_READABLE);
}

static void
on_write(struct bufferevent *bev, void *arg)
{
	(void)bev;
	weft_stream_ready(arg, WEFT_STREAM_WRITABLE);
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
	struct bev_stream *s = arg;
	int err;

	(void)bev;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) || s->status != 0)
		return;
	s->status = WEFT_ECLOSED;
	if (what & BEV_EVENT_ERROR) {
		err = weft_from_errno(EVUTIL_SOCKET_ERROR());
		s->status = err != 0 ? err : WEFT_EIO;
	}
	/* Reading or not, the channel must hear of it. */
	weft_stream_ready(&s->base, WEFT_STREAM_READABLE);
}

int
weft__bev_stream_new(struct bufferevent *bev, weft_stream **out)
{
	struct bev_stream *s;

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		bufferevent_free(bev);
		return WEFT_ENOMEM;
	}
	s->base.ops = &bev_ops;
	s->bev = bev;
	bufferevent_setcb(bev, on_read, on_write, on_event, s);
	bufferevent_setwatermark(bev, EV_WRITE, SIZE_MAX, 0);
	bufferevent_set_max_single_write(bev, MAX_SINGLE_WRITE);
	bufferevent_disable(bev, EV_READ);
	bufferevent_enable(bev, EV_WRITE);
	*out = &s->base;
	return 0;
}

struct bufferevent *
weft__bev_stream_get(const weft_stream *s)
{
	return s != NULL && s->ops == &bev_ops
	           ? ((const struct bev_stream *)s)->bev
	           : NULL;
}

int
weft_channel_new(weft_loop *loop, struct bufferevent *bev,
                 const weft_channel_opts *opts, weft_channel **out)
{
	weft_stream *s;
	int rv;

	WEFT_ASSERT_IN_LOOP(loop);
	if ((rv = weft__bev_stream_new(bev, &s)) != 0)
		return rv;
	if (opts != NULL && opts->max_read_bytes != 0)
		bufferevent_set_max_single_read(bev, opts->max_read_bytes);
	return weft_channel_new_stream(loop, s, opts, out);
}
