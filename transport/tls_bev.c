/* SPDX-License-Identifier: MIT */
/*
 * tls_bev.c: the transport's TLS hooks. Bufferevents for TLS connections,
 * and, in optional mode, telling a TLS client from a plaintext one by the
 * first byte it sends.
 *
 * The bufferevents defer their callbacks to the loop: libevent then never
 * calls the channel back inside one of its own calls, whichever way a
 * later libevent schedules its TLS writes.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>

#include "tls_int.h"

#define DEFAULT_SNIFF_TIMEOUT_MS 10000
/* A TLS record starts with its type, 22 (handshake), then version 3.x. */
#define TLS_HANDSHAKE_RECORD 0x16
#define TLS_VERSION_MAJOR 0x03

#define BEV_OPTIONS (BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS)

/* release_fd closes fd unless the failed bufferevent will (its SSL's BIO
 * holds it once bufferevent_setfd got that far). */
static void
release_fd(SSL *ssl, evutil_socket_t fd)
{
	if (SSL_get_fd(ssl) != fd)
		close(fd);
}

int
weft__tls_bev_new(weft_tls_ctx *tls, struct event_base *base,
                  evutil_socket_t fd, bool server, const char *server_name,
                  struct bufferevent **out)
{
	enum bufferevent_ssl_state state =
	    server ? BUFFEREVENT_SSL_ACCEPTING : BUFFEREVENT_SSL_CONNECTING;
	struct bufferevent *bev;
	SSL *ssl;
	int rv;

	if ((rv = weft__tls_ssl_new(tls, server, server_name, &ssl)) != 0)
		goto err_close_fd;
	/* Made without the fd, which cannot fail after taking the SSL: on
	 * failure the SSL is still ours. */
	bev = bufferevent_openssl_socket_new(base, -1, ssl, state, BEV_OPTIONS);
	if (bev == NULL) {
		rv = WEFT_ENOMEM;
		goto err_free_ssl;
	}
	/* The bufferevent owns the SSL now, and the fd once it is set. */
	if (bufferevent_setfd(bev, fd) != 0) {
		release_fd(ssl, fd);
		bufferevent_free(bev);
		ERR_clear_error();
		return WEFT_ENOMEM;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	*out = bev;
	return 0;

err_free_ssl:
	SSL_free(ssl);
	ERR_clear_error();
err_close_fd:
	close(fd);
	return rv;
}

int
weft__tls_bev_connect(struct weft_tls_ctx *tls, struct event_base *base,
                      evutil_socket_t fd, const char *server_name,
                      struct bufferevent **out)
{
	return weft__tls_bev_new(tls, base, fd, false, server_name, out);
}

/* ---- Optional mode: sniffing the first byte ----------------------------- */

/* A connection whose first byte we wait for. */
struct sniff {
	weft_tls_ctx *tls; /* a reference */
	struct event_base *base;
	struct event *ev; /* fd readable, or the deadline */
	struct timeval timeout;
	evutil_socket_t fd;
	weft__tls_accept_cb cb;
	void *arg;
};

/* sniff_finish makes the bufferevent of a TLS client (or closes the fd on
 * failure), frees s and calls the callback; a plaintext client goes as
 * its fd. */
static void
sniff_finish(struct sniff *s, int status, bool is_tls)
{
	weft__tls_accept_cb cb = s->cb;
	struct bufferevent *bev = NULL;
	evutil_socket_t plain_fd = -1;
	void *arg = s->arg;

	event_free(s->ev);
	if (status != 0) {
		close(s->fd);
	} else if (is_tls) {
		status =
		    weft__tls_bev_new(s->tls, s->base, s->fd, true, NULL, &bev);
	} else {
		plain_fd = s->fd;
		weft__tls_count_plaintext(s->tls);
	}
	weft_tls_ctx_unref(s->tls);
	free(s);
	cb(bev, plain_fd, status, arg);
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
sniff_start(weft_tls_ctx *tls, struct event_base *base, evutil_socket_t fd,
            uint64_t timeout_ms, weft__tls_accept_cb cb, void *arg)
{
	struct sniff *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		goto err_close_fd;
	s->ev = event_new(base, fd, EV_READ, on_sniff, s);
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
	s->base = base;
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
weft__tls_bev_accept(struct weft_tls_ctx *tls, int mode,
                     struct event_base *base, evutil_socket_t fd,
                     uint64_t timeout_ms, weft__tls_accept_cb cb, void *arg,
                     struct bufferevent **out)
{
	*out = NULL;
	if (mode == WEFT_TLS_MODE_OPTIONAL)
		return sniff_start(tls, base, fd, timeout_ms, cb, arg);
	if (mode != WEFT_TLS_MODE_REQUIRED) {
		close(fd);
		return WEFT_EINVAL;
	}
	return weft__tls_bev_new(tls, base, fd, true, NULL, out);
}
