/* SPDX-License-Identifier: MIT */
/*
 * socket.c: the stream of a plain TCP or Unix socket (weft/stream.h).
 *
 * Reads go straight into the channel's input with readv into reserved
 * space, up to the channel's budget per wake-up and with no FIONREAD
 * first: libevent 2.1's bufferevent asks FIONREAD before every read and
 * then takes at most 4096 bytes. A short read means the socket is empty;
 * a full one reads again, four times larger. Writes are one sendmsg of up
 * to 64 buffer pieces at a time, with MSG_NOSIGNAL, so a peer that went
 * away is an error and never a SIGPIPE.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "transport_int.h"

/* The first read of a readable socket reserves this much. */
#define READ_CHUNK_BYTES 16384
/* Most buffer pieces one sendmsg carries. */
#define WRITE_IOVECS 64

struct sock_stream {
	weft_stream base;
	evutil_socket_t fd;
	struct event *rev;
	struct event *wev;
};

static int
sock_status(int err)
{
	if (err == EPIPE || err == ECONNRESET)
		return WEFT_ECLOSED;
	return weft_from_errno(err) != 0 ? weft_from_errno(err) : WEFT_EIO;
}

/* One readv of at most want bytes into reserved space of in. Returns the
 * bytes read, 0 at end of stream, or -1 with errno. */
static ssize_t
read_once(evutil_socket_t fd, struct evbuffer *in, size_t want)
{
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	size_t left = want;
	ssize_t n;
	int i, nv;

	if ((nv = evbuffer_reserve_space(in, (ev_ssize_t)want, v, 2)) <= 0) {
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < nv; i++) {
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len < left ? v[i].iov_len : left;
		left -= iov[i].iov_len;
	}
	n = readv(fd, iov, nv);
	if (n <= 0) {
		evbuffer_commit_space(in, v, 0);
		return n;
	}
	left = (size_t)n;
	for (i = 0; i < nv; i++) {
		v[i].iov_len = iov[i].iov_len < left ? iov[i].iov_len : left;
		left -= v[i].iov_len;
	}
	evbuffer_commit_space(in, v, nv == 2 && v[1].iov_len > 0 ? 2 : 1);
	return n;
}

static ssize_t
sock_read(weft_stream *base, struct evbuffer *in, size_t max)
{
	struct sock_stream *s = (struct sock_stream *)base;
	size_t total = 0, chunk = READ_CHUNK_BYTES, want;
	ssize_t n;

	while (total < max) {
		want = max - total < chunk ? max - total : chunk;
		n = read_once(s->fd, in, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			/* What came before the end or the error goes first;
			 * the socket says so again on the next wake-up. */
			if (total > 0)
				break;
			return n == 0 ? WEFT_ECLOSED : sock_status(errno);
		}
		total += (size_t)n;
		if ((size_t)n < want)
			break;
		chunk *= 4;
	}
	return (ssize_t)total;
}

static ssize_t
sock_write(weft_stream *base, struct evbuffer *out)
{
	struct sock_stream *s = (struct sock_stream *)base;
	struct evbuffer_iovec v[WRITE_IOVECS];
	struct iovec iov[WRITE_IOVECS];
	struct msghdr mh = {0};
	size_t total = 0, offered;
	ssize_t sent;
	int i, n;

	while (evbuffer_get_length(out) > 0) {
		n = evbuffer_peek(out, -1, NULL, v, WRITE_IOVECS);
		if (n > WRITE_IOVECS)
			n = WRITE_IOVECS;
		for (i = 0, offered = 0; i < n; i++) {
			iov[i].iov_base = v[i].iov_base;
			iov[i].iov_len = v[i].iov_len;
			offered += v[i].iov_len;
		}
		mh.msg_iov = iov;
		mh.msg_iovlen = (size_t)n;
		sent = sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (sent < 0 && errno == EINTR)
			continue;
		if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (sent < 0)
			return total > 0 ? (ssize_t)total : sock_status(errno);
		evbuffer_drain(out, (size_t)sent);
		total += (size_t)sent;
		if ((size_t)sent < offered)
			break; /* the socket is full */
	}
	return (ssize_t)total;
}

static void
on_event(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	weft_stream_ready(arg,
	                  ((what & EV_READ) ? WEFT_STREAM_READABLE : 0) |
	                      ((what & EV_WRITE) ? WEFT_STREAM_WRITABLE : 0));
}

static void
sock_watch(weft_stream *base, bool read, bool write)
{
	struct sock_stream *s = (struct sock_stream *)base;

	if (read)
		event_add(s->rev, NULL);
	else
		event_del(s->rev);
	if (write)
		event_add(s->wev, NULL);
	else
		event_del(s->wev);
}

static void
sock_close(weft_stream *base, bool graceful)
{
	struct sock_stream *s = (struct sock_stream *)base;

	(void)graceful; /* every byte is written: close() sends FIN */
	event_free(s->rev);
	event_free(s->wev);
	close(s->fd);
	free(s);
}

static int
sock_address(weft_stream *base, bool peer, char *buf, size_t len)
{
	return weft__addr_of_fd(((struct sock_stream *)base)->fd, peer, buf,
	                        len);
}

static const weft_stream_ops sock_ops = {
    .name = "socket",
    .read = sock_read,
    .write = sock_write,
    .watch = sock_watch,
    .close = sock_close,
    .address = sock_address,
};

int
weft__sock_stream_new(weft_loop *loop, evutil_socket_t fd, weft_stream **out)
{
	struct event_base *base = weft_loop_base(loop);
	struct sock_stream *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		goto err_close;
	s->base.ops = &sock_ops;
	s->fd = fd;
	s->rev = event_new(base, fd, EV_READ | EV_PERSIST, on_event, s);
	s->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, on_event, s);
	if (s->rev == NULL || s->wev == NULL) {
		if (s->rev != NULL)
			event_free(s->rev);
		if (s->wev != NULL)
			event_free(s->wev);
		free(s);
		goto err_close;
	}
	*out = &s->base;
	return 0;

err_close:
	close(fd);
	return WEFT_ENOMEM;
}

bool
weft__stream_is_socket(const weft_stream *s)
{
	return s != NULL && s->ops == &sock_ops;
}

int
weft_channel_new_socket(weft_loop *loop, int fd, const weft_channel_opts *opts,
                        weft_channel **out)
{
	weft_stream *s;
	int rv;

	WEFT_ASSERT_IN_LOOP(loop);
	if ((rv = weft__sock_stream_new(loop, fd, &s)) != 0)
		return rv;
	return weft_channel_new_stream(loop, s, opts, out);
}

evutil_socket_t
weft__channel_fd(weft_channel *ch)
{
	weft_stream *s = weft_channel_stream(ch);
	struct bufferevent *bev;

	if (weft__stream_is_socket(s))
		return ((struct sock_stream *)s)->fd;
	if ((bev = weft__bev_stream_get(s)) != NULL)
		return bufferevent_getfd(bev);
	return weft__tls_stream_fd(s);
}
