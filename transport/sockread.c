/*
 * sockread.c: reads that take everything the socket has.
 *
 * libevent 2.1 reads at most 4096 bytes per read event (EVBUFFER_MAX_READ
 * in buffer.c), whatever bufferevent_set_max_single_read says, so a busy
 * connection costs one wake-up and one pipeline pass per 4 KiB. The
 * "weft.read" handler, first in every plain TCP and Unix channel, tops the
 * input up from the socket, to max_read_bytes at most, before the read
 * event goes on: one read event then carries what the socket holds.
 *
 * Reading the fd under a socket bufferevent is safe: libevent's read event
 * is level-triggered and does not keep state about the socket's contents.
 * EOF and errors are left for libevent's own next read to report.
 */
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>

#include "transport_int.h"

/* top_up reads what fd holds into buf, until buf has max bytes. */
static void
top_up(evutil_socket_t fd, struct evbuffer *buf, size_t max)
{
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	size_t have = evbuffer_get_length(buf), want, left;
	ssize_t got;
	int avail, n, i;

	if (have >= max || ioctl(fd, FIONREAD, &avail) != 0 || avail <= 0)
		return;
	want = (size_t)avail < max - have ? (size_t)avail : max - have;
	if ((n = evbuffer_reserve_space(buf, (ev_ssize_t)want, v, 2)) <= 0)
		return;
	/* The reservation may be larger than asked: read no more. */
	left = want;
	for (i = 0; i < n; i++) {
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len < left ? v[i].iov_len : left;
		left -= iov[i].iov_len;
	}
	got = readv(fd, iov, n);
	if (got <= 0) {
		evbuffer_commit_space(buf, v, 0);
		return;
	}
	left = (size_t)got;
	for (i = 0; i < n; i++) {
		if (v[i].iov_len > left)
			v[i].iov_len = left;
		left -= v[i].iov_len;
	}
	evbuffer_commit_space(buf, v, n == 2 && v[1].iov_len > 0 ? 2 : 1);
}

/* What libevent 2.1 reads at most per read event (EVBUFFER_MAX_READ). */
#define LIBEVENT_MAX_READ 4096

static void
sock_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct bufferevent *bev = weft_channel_bev(weft_ctx_channel(ctx));
	size_t max = (size_t)(uintptr_t)weft_ctx_state(ctx);

	/* A socket bufferevent keeps its input's end frozen except while
	 * it reads itself; do as it does. Below libevent's 4 KiB per read,
	 * it took all the socket had (as FIONREAD told it): then there is
	 * nothing to top up, and request-response traffic saves a syscall. */
	if (bev != NULL && msg == bufferevent_get_input(bev) &&
	    evbuffer_get_length(msg) >= LIBEVENT_MAX_READ) {
		evbuffer_unfreeze(msg, 0);
		top_up(bufferevent_getfd(bev), msg, max);
		evbuffer_freeze(msg, 0);
	}
	weft_ctx_fire_read(ctx, type, msg);
}

static const weft_handler sock_read_handler = {
    .read = sock_read,
};

int
weft__sock_read_install(weft_channel *ch, size_t max_read_bytes)
{
	struct bufferevent *bev = weft_channel_bev(ch);

	if (bev == NULL || bufferevent_getfd(bev) < 0 ||
	    bufferevent_openssl_get_ssl(bev) != NULL)
		return 0;
	if (max_read_bytes == 0)
		max_read_bytes = WEFT__DEFAULT_MAX_READ;
	weft_channel_enable_direct_writes(ch);
	return weft_pipeline_add_first(ch, "weft.read", &sock_read_handler,
	                               (void *)(uintptr_t)max_read_bytes);
}

int
weft__channel_install_readers(weft_channel *ch, size_t max_read_bytes)
{
	int rv;

	if ((rv = weft__sock_read_install(ch, max_read_bytes)) != 0)
		return rv;
	return weft__tls_channel_install(ch, max_read_bytes);
}
