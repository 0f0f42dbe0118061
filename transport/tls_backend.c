/* SPDX-License-Identifier: MIT */
/*
 * tls_backend.c: the TLS backend. It listens as the socket backend does;
 * over an accepted or a dialed socket it makes a TLS stream and runs its
 * handshake, and in optional mode it first tells a TLS client from a
 * plaintext one by the first byte it sends.
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

/* accept_tls makes the server-side TLS stream of fd and starts its
 * handshake; cb hears the end of it. */
static void
accept_tls(weft_tls_ctx *tls, weft_loop *loop, evutil_socket_t fd,
           const char *peer, uint64_t timeout_ms, weft__stream_cb cb, void *arg)
{
	weft_stream *s;
	int rv;

	if ((rv = weft__tls_stream_new(loop, tls, fd, true, NULL, &s)) != 0) {
		cb(NULL, rv, NULL, arg);
		return;
	}
	weft__tls_handshake(s, peer, timeout_ms, cb, arg);
}

/* ---- Optional mode: sniffing the first byte ----------------------------- */

/* A connection whose first byte we wait for. */
struct sniff {
	weft_tls_ctx *tls; /* a reference */
	weft_loop *loop;
	struct event *ev; /* fd readable, or the deadline */
	struct timeval timeout;
	uint64_t timeout_ms; /* for the handshake that may follow */
	evutil_socket_t fd;
	const char *peer; /* borrowed until cb */
	weft__stream_cb cb;
	void *arg;
};

/* sniff_finish frees s and makes the stream the first byte asked for: a
 * TLS one after its handshake, or a plaintext socket's at once. On
 * failure the fd is closed and cb hears why. */
static void
sniff_finish(struct sniff *s, int status, bool is_tls)
{
	struct sniff done = *s;

	event_free(s->ev);
	free(s);
	if (status != 0) {
		close(done.fd);
		done.cb(NULL, status, NULL, done.arg);
	} else if (is_tls) {
		accept_tls(done.tls, done.loop, done.fd, done.peer,
		           done.timeout_ms, done.cb, done.arg);
	} else {
		weft__tls_count_plaintext(done.tls);
		weft__socket_backend.accept(NULL, done.loop, done.fd, done.peer,
		                            done.cb, done.arg);
	}
	weft_tls_ctx_unref(done.tls);
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

static void
sniff_start(weft_tls_ctx *tls, weft_loop *loop, evutil_socket_t fd,
            const char *peer, uint64_t timeout_ms, weft__stream_cb cb,
            void *arg)
{
	struct sniff *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		goto err_close_fd;
	s->ev = event_new(weft_loop_base(loop), fd, EV_READ, on_sniff, s);
	if (s->ev == NULL)
		goto err_free_s;
	s->timeout_ms = timeout_ms;
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
	s->peer = peer;
	s->cb = cb;
	s->arg = arg;
	return;

err_free_ev:
	event_free(s->ev);
err_free_s:
	free(s);
err_close_fd:
	close(fd);
	cb(NULL, WEFT_ENOMEM, NULL, arg);
}

/* ---- The operations ----------------------------------------------------- */

static void
tls_accept(const weft__backend *b, weft_loop *loop, evutil_socket_t fd,
           const char *peer, weft__stream_cb cb, void *arg)
{
	if (b->tls_mode == WEFT_TLS_MODE_OPTIONAL)
		sniff_start(b->tls, loop, fd, peer, b->timeout_ms, cb, arg);
	else
		accept_tls(b->tls, loop, fd, peer, b->timeout_ms, cb, arg);
}

static weft_stream *
tls_dial(const weft__backend *b, weft_loop *loop, evutil_socket_t fd,
         const char *peer, weft__stream_cb cb, void *arg)
{
	weft_stream *s;
	int rv;

	rv = weft__tls_stream_new(loop, b->tls, fd, false, b->server_name, &s);
	if (rv != 0) {
		cb(NULL, rv, NULL, arg);
		return NULL;
	}
	return weft__tls_handshake(s, peer, b->timeout_ms, cb, arg);
}

const weft__backend_ops weft__tls_backend = {
    .name = "tls",
    .listen = weft__listen,
    .accept = tls_accept,
    .dial = tls_dial,
    .cancel = weft__tls_handshake_cancel,
};
