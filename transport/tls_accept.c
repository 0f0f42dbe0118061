/* SPDX-License-Identifier: MIT */
/*
 * tls_accept.c: the TLS streams of accepted connections, and, in optional
 * mode, telling a TLS client from a plaintext one by the first byte it
 * sends.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "tls_int.h"

#define DEFAULT_SNIFF_TIMEOUT_MS 10000
/* A TLS record starts with its type, 22 (handshake), then version 3.x. */
#define TLS_HANDSHAKE_RECORD 0x16
#define TLS_VERSION_MAJOR 0x03

/* ---- Optional mode: sniffing the first byte ----------------------------- */

/* A connection whose first byte we wait for. */
struct sniff {
	weft_tls_ctx *tls; /* a reference */
	weft_loop *loop;
	struct event *ev; /* fd readable, or the deadline */
	struct timeval timeout;
	evutil_socket_t fd;
	weft__tls_accept_cb cb;
	void *arg;
};

/* sniff_finish makes the stream of a TLS client (or closes the fd on
 * failure), frees s and calls the callback; a plaintext client goes as
 * its fd. */
static void
sniff_finish(struct sniff *s, int status, bool is_tls)
{
	weft__tls_accept_cb cb = s->cb;
	weft_stream *stream = NULL;
	evutil_socket_t plain_fd = -1;
	void *arg = s->arg;

	event_free(s->ev);
	if (status != 0) {
		close(s->fd);
	} else if (is_tls) {
		status = weft__tls_stream_new(s->loop, s->tls, s->fd, true,
		                              NULL, &stream);
	} else {
		plain_fd = s->fd;
		weft__tls_count_plaintext(s->tls);
	}
	weft_tls_ctx_unref(s->tls);
	free(s);
	cb(stream, plain_fd, status, arg);
}

static void
on_sniff(evutil_socket_t fd, short what, void *arg)
{
	struct sniff *s = arg;
	unsigned char head[2];
	ssize_t n;

	if (what & EV_TIMEOUT) {
		sniff_finish(s, WEFT_ETIMEDOUT, false);
		return;
	}
	n = recv(fd, head, sizeof(head), MSG_PEEK);
	if (n < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
		/* Spurious: wait again (with a fresh deadline, as it is rare).
		 */
		if (event_add(s->ev, &s->timeout) != 0)
			sniff_finish(s, WEFT_ENOMEM, false);
		return;
	}
	if (n <= 0) {
		sniff_finish(s, n == 0 ? WEFT_ECLOSED : weft_from_errno(errno),
		             false);
		return;
	}
	/* One byte is enough to decide: no plaintext protocol of ours
	 * starts with 0x16 (weft frames start with a length's high byte). */
	sniff_finish(s, 0,
	             head[0] == TLS_HANDSHAKE_RECORD &&
	                 (n < 2 || head[1] == TLS_VERSION_MAJOR));
}

static int
sniff_start(weft_tls_ctx *tls, weft_loop *loop, evutil_socket_t fd,
            uint64_t timeout_ms, weft__tls_accept_cb cb, void *arg)
{
	struct sniff *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		goto err_close_fd;
	s->ev = event_new(weft_loop_base(loop), fd, EV_READ, on_sniff, s);
	if (s->ev == NULL)
		goto err_free_s;
	if (timeout_ms == 0)
		timeout_ms = DEFAULT_SNIFF_TIMEOUT_MS;
	s->timeout.tv_sec = (time_t)(timeout_ms / 1000);
	s->timeout.tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000;
	if (event_add(s->ev, &s->timeout) != 0)
		goto err_free_ev;
	weft_tls_ctx_ref(tls);
	s->tls = tls;
	s->loop = loop;
	s->fd = fd;
	s->cb = cb;
	s->arg = arg;
	return 0;

err_free_ev:
	event_free(s->ev);
err_free_s:
	free(s);
err_close_fd:
	close(fd);
	return WEFT_ENOMEM;
}

int
weft__tls_accept(struct weft_tls_ctx *tls, int mode, weft_loop *loop,
                 evutil_socket_t fd, uint64_t timeout_ms,
                 weft__tls_accept_cb cb, void *arg, weft_stream **out)
{
	*out = NULL;
	if (mode == WEFT_TLS_MODE_OPTIONAL)
		return sniff_start(tls, loop, fd, timeout_ms, cb, arg);
	if (mode != WEFT_TLS_MODE_REQUIRED) {
		close(fd);
		return WEFT_EINVAL;
	}
	return weft__tls_stream_new(loop, tls, fd, true, NULL, out);
}
