/* SPDX-License-Identifier: MIT */
/*
 * backend.c: choosing a transport backend, and the socket backend: plain
 * TCP and Unix sockets, whose stream (socket.c) is made at once over a
 * connected socket, accepted or dialed alike. The TLS backend is in
 * tls_backend.c.
 */
#include "transport_int.h"

void
weft__backend_init(weft__backend *b, struct weft_tls_ctx *tls)
{
	*b = (weft__backend){
	    .ops = tls != NULL ? &weft__tls_backend : &weft__socket_backend,
	    .tls = tls,
	};
}

/* socket_stream makes the stream of fd and hands it to cb at once. */
static void
socket_stream(weft_loop *loop, evutil_socket_t fd, weft__stream_cb cb,
              void *arg)
{
	weft_stream *s = NULL;
	int rv;

	rv = weft__sock_stream_new(loop, fd, &s);
	cb(rv == 0 ? s : NULL, rv, NULL, arg);
}

static void
socket_accept(const weft__backend *b, weft_loop *loop, evutil_socket_t fd,
              const char *peer, weft__stream_cb cb, void *arg)
{
	(void)b;
	(void)peer;
	socket_stream(loop, fd, cb, arg);
}

static weft_stream *
socket_dial(const weft__backend *b, weft_loop *loop, evutil_socket_t fd,
            const char *peer, weft__stream_cb cb, void *arg)
{
	(void)b;
	(void)peer;
	socket_stream(loop, fd, cb, arg);
	return NULL;
}

/* A dial never outlives its call, so there is nothing to cancel. */
static void
socket_cancel(weft_stream *dialing)
{
	(void)dialing;
}

const weft__backend_ops weft__socket_backend = {
    .name = "socket",
    .listen = weft__listen,
    .accept = socket_accept,
    .dial = socket_dial,
    .cancel = socket_cancel,
};
