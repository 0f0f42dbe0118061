/* SPDX-License-Identifier: MIT */
/*
 * conn.c: outbound connections. Senders append whole frames to the
 * connection's queue under its lock; its writer thread sleeps on a
 * condition variable, takes everything queued at once and writes it with
 * blocking write() calls, so a burst costs one system call, as much as a
 * blocking writer can batch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "base_int.h"

int
wbase__out_init(wbase_out *o, wbase_node *node, size_t peer, const wbase_io *io)
{
	memset(o, 0, sizeof(*o));
	o->node = node;
	o->peer = peer;
	o->io = *io;
	if ((o->queue = evbuffer_new()) == NULL)
		return WEFT_ENOMEM;
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->cond, NULL);
	return 0;
}

void
wbase__out_fini(wbase_out *o)
{
	if (o->queue == NULL)
		return;
	pthread_cond_destroy(&o->cond);
	pthread_mutex_destroy(&o->lock);
	evbuffer_free(o->queue);
	o->queue = NULL;
	if (o->peer != SIZE_MAX) /* a client's socket is its reader's */
		wbase__io_close(&o->io);
}

/* write_tls writes the batch through TLS, 64 KiB at a time. */
static int
write_tls(wbase_out *o, struct evbuffer *batch)
{
	size_t left;

	while ((left = evbuffer_get_length(batch)) > 0) {
		size_t n = left < (64u << 10) ? left : (64u << 10);
		const unsigned char *p = evbuffer_pullup(batch, (ev_ssize_t)n);

		atomic_fetch_add_explicit(&o->node->write_calls, 1,
		                          memory_order_relaxed);
		if (p == NULL || wbase__io_write(&o->io, p, n) != 0)
			return -1;
		evbuffer_drain(batch, n);
	}
	return 0;
}

/* write_all writes the whole batch; returns 0 or -1. */
static int
write_all(wbase_out *o, struct evbuffer *batch)
{
	if (o->io.tls != NULL)
		return write_tls(o, batch);
	while (evbuffer_get_length(batch) > 0) {
		int n = evbuffer_write(batch, o->io.fd);

		atomic_fetch_add_explicit(&o->node->write_calls, 1,
		                          memory_order_relaxed);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
	}
	return 0;
}

/* fail marks the connection dead: queued frames are dropped and the
 * requests that went out to this peer fail. */
static void
fail(wbase_out *o)
{
	pthread_mutex_lock(&o->lock);
	o->failed = true;
	o->retry_ms =
	    weft_now_ns() / 1000000 + o->node->limits.reconnect_min_ms;
	evbuffer_drain(o->queue, evbuffer_get_length(o->queue));
	if (o->io.fd >= 0 && o->peer != SIZE_MAX) {
		wbase__io_close(&o->io);
		atomic_fetch_sub(&o->node->connections, 1);
	} else if (o->io.fd >= 0) {
		/* A client's connection is its reader's to close: wake it. */
		shutdown(o->io.fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&o->lock);
	if (o->peer != SIZE_MAX)
		wbase__fail_peer(o->node, o->peer, WEFT_EPEERDOWN);
}

/* dial_once connects a member connection from the writer thread; stop
 * sees the fd once it is set. Returns 0 or -1. */
static int
dial_once(wbase_out *o)
{
	wbase_io io;
	int rv = wbase__dial(o->node, o->peer, &io);

	pthread_mutex_lock(&o->lock);
	if (rv == 0) {
		o->io = io;
		if (o->stopping)
			shutdown(io.fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&o->lock);
	return rv;
}

static void *
writer_main(void *arg)
{
	wbase_out *o = arg;
	struct evbuffer *batch = evbuffer_new();
	bool ok = batch != NULL && (o->peer == SIZE_MAX || dial_once(o) == 0);

	while (ok) {
		pthread_mutex_lock(&o->lock);
		while (evbuffer_get_length(o->queue) == 0 && !o->stopping)
			pthread_cond_wait(&o->cond, &o->lock);
		evbuffer_add_buffer(batch, o->queue);
		pthread_mutex_unlock(&o->lock);
		if (evbuffer_get_length(batch) == 0) /* stopping */
			break;
		ok = write_all(o, batch) == 0;
	}
	if (!ok)
		fail(o);
	if (batch != NULL)
		evbuffer_free(batch);
	pthread_mutex_lock(&o->lock);
	o->exited = true;
	pthread_mutex_unlock(&o->lock);
	wbase__thread_exit(o->node);
	return NULL;
}

/* redial lets a failed member connection be dialed again, by a new
 * writer thread, once its back-off has passed. Requires the lock. */
static bool
redial(wbase_out *o)
{
	if (!o->failed || !o->exited || o->peer == SIZE_MAX ||
	    weft_now_ns() / 1000000 < o->retry_ms)
		return false;
	pthread_join(o->thread, NULL);
	o->failed = o->exited = o->started = false;
	return true;
}

int
wbase__out_push(wbase_out *o, const uint8_t *frame, size_t len)
{
	int rv = 0;

	pthread_mutex_lock(&o->lock);
	if (o->failed)
		redial(o);
	if (o->stopping || o->failed)
		rv = o->stopping ? WEFT_ESHUTDOWN : WEFT_EPEERDOWN;
	else if (evbuffer_get_length(o->queue) + len >
	         o->node->limits.outbound_queue_bytes)
		rv = WEFT_EOVERLOAD;
	else if (evbuffer_add(o->queue, frame, len) != 0)
		rv = WEFT_ENOMEM;
	else if (!o->started) {
		/* The writer thread is born with its connection's first
		 * frame, as a lazily dialed connection is. */
		if (wbase__start_thread(o->node, &o->thread, writer_main, o) !=
		    0) {
			evbuffer_drain(o->queue, evbuffer_get_length(o->queue));
			rv = WEFT_ENOMEM;
		} else {
			o->started = true;
		}
	} else {
		pthread_cond_signal(&o->cond);
	}
	pthread_mutex_unlock(&o->lock);
	if (rv == 0)
		atomic_fetch_add_explicit(&o->node->frames_out, 1,
		                          memory_order_relaxed);
	return rv;
}

void
wbase__out_stop(wbase_out *o)
{
	if (o->queue == NULL)
		return;
	pthread_mutex_lock(&o->lock);
	o->stopping = true;
	pthread_cond_signal(&o->cond);
	/* A writer blocked in write() or connect() needs the socket shut. */
	if (o->io.fd >= 0)
		shutdown(o->io.fd, SHUT_RDWR);
	pthread_mutex_unlock(&o->lock);
}

void
wbase__out_join(wbase_out *o)
{
	bool started;

	if (o->queue == NULL)
		return;
	pthread_mutex_lock(&o->lock);
	started = o->started;
	o->started = false;
	pthread_mutex_unlock(&o->lock);
	if (started)
		pthread_join(o->thread, NULL);
}
