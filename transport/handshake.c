/* SPDX-License-Identifier: MIT */
/*
 * handshake.c: waiting until a bufferevent can carry application data (a
 * TLS handshake), naming why a bufferevent failed, and building a new
 * channel's pipeline.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "transport_int.h"

struct weft__ready {
	weft_loop *loop;
	struct bufferevent *bev;
	struct event *timer;
	weft__ready_cb cb;
	void *arg;
	char peer[WEFT_ADDRESS_MAX];
	char why[256];
};

static void on_loop_shutdown(weft_loop *loop, uint64_t deadline_ns, void *arg);

static bool
handshake_done(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	return ssl == NULL || SSL_is_init_finished(ssl);
}

/* Keeps the first OpenSSL reason in why; returns how many errors were
 * queued. */
static int
openssl_errors(struct bufferevent *bev, const char *what, const char *peer,
               char *why, size_t len)
{
	char detail[256];
	unsigned long e;
	int n = 0;

	while ((e = bufferevent_get_openssl_error(bev)) != 0) {
		n++;
		/* libevent also queues SSL_get_error()'s code (library 0):
		 * no news beside OpenSSL's own reasons. */
		if (ERR_GET_LIB(e) == 0)
			continue;
		ERR_error_string_n(e, detail, sizeof(detail));
		weft_debug("%s %s: %s", what, peer ? peer : "", detail);
		if (why[0] == '\0')
			snprintf(why, len, "%s", detail);
	}
	return n;
}

int
weft__bev_error_status(struct bufferevent *bev, short events, const char *what,
                       const char *peer, char *why, size_t len)
{
	int err = EVUTIL_SOCKET_ERROR();

	why[0] = '\0';
	if (openssl_errors(bev, what, peer, why, len) > 0)
		return WEFT_ETLS;
	if (events & BEV_EVENT_TIMEOUT)
		return WEFT_ETIMEDOUT;
	if (!handshake_done(bev)) {
		snprintf(why, len,
		         "connection closed during the TLS handshake");
		weft_debug("%s %s: %s", what, peer ? peer : "", why);
		return WEFT_ETLS;
	}
	if (events & BEV_EVENT_EOF)
		return WEFT_ECLOSED;
	return err != 0 ? weft__sock_error(err, what, peer) : WEFT_EIO;
}

/* finish frees the wait and hands bev (or NULL and status) to its owner. */
static void
finish(weft__ready *ready, int status)
{
	struct bufferevent *bev = ready->bev;
	weft__ready_cb cb = ready->cb;
	void *arg = ready->arg;

	weft_loop_remove_shutdown(ready->loop, on_loop_shutdown, ready);
	event_free(ready->timer);
	bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
	if (status != 0) {
		bufferevent_free(bev);
		bev = NULL;
	}
	cb(bev, status, ready->why[0] != '\0' ? ready->why : NULL, arg);
	free(ready);
}

/* A loop that shuts down (or is freed) ends the handshakes it waits for,
 * so that nothing of theirs outlives it. */
static void
on_loop_shutdown(weft_loop *loop, uint64_t deadline_ns, void *arg)
{
	(void)loop;
	(void)deadline_ns;
	finish(arg, WEFT_ESHUTDOWN);
}

static void
on_handshake_event(struct bufferevent *bev, short events, void *arg)
{
	weft__ready *ready = arg;

	if (events & BEV_EVENT_CONNECTED) {
		finish(ready, 0);
		return;
	}
	if (events & (BEV_EVENT_ERROR | BEV_EVENT_EOF | BEV_EVENT_TIMEOUT))
		finish(ready, weft__bev_error_status(
		                  bev, events, "TLS handshake", ready->peer,
		                  ready->why, sizeof(ready->why)));
}

static void
on_handshake_timeout(evutil_socket_t fd, short what, void *arg)
{
	weft__ready *ready = arg;

	(void)fd;
	(void)what;
	snprintf(ready->why, sizeof(ready->why), "TLS handshake timed out");
	finish(ready, WEFT_ETIMEDOUT);
}

weft__ready *
weft__bev_when_ready(weft_loop *loop, struct bufferevent *bev, const char *peer,
                     uint64_t timeout_ms, weft__ready_cb cb, void *arg)
{
	struct timeval scratch;
	weft__ready *ready;

	if (handshake_done(bev)) {
		cb(bev, 0, NULL, arg);
		return NULL;
	}
	if ((ready = calloc(1, sizeof(*ready))) == NULL)
		goto err_free_bev;
	ready->timer =
	    event_new(weft_loop_base(loop), -1, 0, on_handshake_timeout, ready);
	if (ready->timer == NULL)
		goto err_free_ready;
	if (weft_loop_on_shutdown(loop, on_loop_shutdown, ready) != 0)
		goto err_free_timer;
	ready->loop = loop;
	ready->bev = bev;
	ready->cb = cb;
	ready->arg = arg;
	snprintf(ready->peer, sizeof(ready->peer), "%s", peer ? peer : "");
	event_add(ready->timer, weft_loop_timeval(loop, timeout_ms, &scratch));
	bufferevent_setcb(bev, NULL, NULL, on_handshake_event, ready);
	return ready;

err_free_timer:
	event_free(ready->timer);
err_free_ready:
	free(ready);
err_free_bev:
	bufferevent_free(bev);
	cb(NULL, WEFT_ENOMEM, NULL, arg);
	return NULL;
}

void
weft__bev_ready_cancel(weft__ready *ready)
{
	weft_loop_remove_shutdown(ready->loop, on_loop_shutdown, ready);
	event_free(ready->timer);
	bufferevent_free(ready->bev);
	free(ready);
}

int
weft__channel_init(weft_channel *ch, weft_channel_init_cb init, void *arg,
                   size_t max_read_bytes)
{
	int rv;

	if (init != NULL && (rv = init(ch, arg)) != 0)
		return rv;
	return weft__tls_channel_install(ch, max_read_bytes);
}
