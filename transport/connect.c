/* SPDX-License-Identifier: MIT */
/*
 * connect.c: non-blocking client connects over TCP and Unix sockets, with
 * one deadline for all the addresses a name resolves to and for whatever
 * the backend does over the connected socket (a TLS handshake).
 *
 * A request lives on its loop from the start task until complete(), which
 * frees it and then runs the user's callback; every path ends there once.
 * A host name is resolved on the loop when the request starts (resolve.c,
 * evdns), so a retry or a reconnect resolves it again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "transport_int.h"

#define DEFAULT_CONNECT_TIMEOUT_MS 10000

enum req_state {
	REQ_QUEUED,     /* start task posted */
	REQ_CONNECTING, /* a connect() in flight */
	REQ_HANDSHAKE,  /* connected; the backend sets the stream up */
	REQ_CANCELED,   /* torn down; ECANCELED task posted */
};

struct weft_connect_req {
	weft_task task;
	weft_loop *loop;
	weft_connect_cb cb;
	void *arg;
	weft_connect_opts opts;
	weft__backend backend;
	char *server_name;        /* a copy, or NULL; the backend's */
	weft__addr target;        /* a name, to resolve when the request runs */
	weft__resolve *resolving; /* while the name is resolved */
	weft__addr *addrs;
	size_t naddrs;
	size_t next;
	int status; /* resolution error, or the last attempt's error */
	enum req_state state;
	evutil_socket_t fd;
	struct event *writable;   /* the connect() in flight finished */
	struct event *timer;      /* the deadline */
	weft_stream *handshaking; /* the backend's, until it is set up */
	bool hook_added;
	char peer[WEFT_ADDRESS_MAX];
};

static void try_next(weft_connect_req *req);

static void on_loop_shutdown(weft_loop *loop, uint64_t deadline_ns, void *arg);

/* teardown releases everything in flight; the request stays. */
static void
teardown(weft_connect_req *req)
{
	if (req->resolving != NULL)
		weft__resolve_cancel(req->resolving);
	req->resolving = NULL;
	if (req->writable != NULL)
		event_free(req->writable);
	req->writable = NULL;
	if (req->fd >= 0)
		close(req->fd);
	req->fd = -1;
	if (req->handshaking != NULL)
		req->backend.ops->cancel(req->handshaking);
	req->handshaking = NULL;
	if (req->timer != NULL)
		event_free(req->timer);
	req->timer = NULL;
	/* Allowed inside the hook itself: the loop runs a copy. */
	if (req->hook_added)
		weft_loop_remove_shutdown(req->loop, on_loop_shutdown, req);
	req->hook_added = false;
}

static void
req_free(weft_connect_req *req)
{
	free(req->addrs);
	free(req->server_name);
	free(req);
}

/* complete ends the request: frees it, then runs the callback once. */
static void
complete(weft_connect_req *req, weft_channel *ch, int status)
{
	weft_connect_cb cb = req->cb;
	void *arg = req->arg;

	teardown(req);
	req_free(req);
	cb(ch, status, arg);
}

static void
on_loop_shutdown(weft_loop *loop, uint64_t deadline_ns, void *arg)
{
	weft_connect_req *req = arg;
	weft_connect_cb cb = req->cb;
	void *cb_arg = req->arg;

	(void)loop;
	(void)deadline_ns;
	teardown(req);
	req_free(req);
	cb(NULL, WEFT_ESHUTDOWN, cb_arg);
}

/* make_channel wraps the connection's stream in a channel and builds its
 * pipeline. */
static void
make_channel(weft_connect_req *req, weft_stream *s)
{
	weft_channel *ch;
	int rv;

	rv = weft_channel_new_stream(req->loop, s, &req->opts.channel, &ch);
	if (rv != 0) {
		complete(req, NULL, rv);
		return;
	}
	weft_channel_set_peer(ch, req->peer);
	rv = weft__channel_init(ch, req->opts.init, req->opts.init_arg);
	if (rv != 0) {
		weft_warn("connect %s: setting up the channel failed: %s",
		          req->peer, weft_strerror(rv));
		weft_channel_close(ch);
		complete(req, NULL, rv);
		return;
	}
	weft_channel_activate(ch);
	complete(req, ch, 0);
}

static void
on_stream(weft_stream *s, int status, const char *why, void *arg)
{
	weft_connect_req *req = arg;

	req->handshaking = NULL;
	/* The caller has the status and reports it, once. */
	if (status != 0 && why != NULL)
		weft_debug("connect %s: %s", req->peer, why);
	if (status != 0) {
		complete(req, NULL, status);
		return;
	}
	make_channel(req, s);
}

/* connected hands the connected fd to the backend, which makes its
 * stream: a socket's at once, a TLS one once its handshake is done. The
 * request's own timer bounds that too. */
static void
connected(weft_connect_req *req)
{
	const weft__backend *b = &req->backend;
	evutil_socket_t fd = req->fd;
	weft_stream *handshaking;

	req->fd = -1;
	req->state = REQ_HANDSHAKE;
	handshaking = b->ops->dial(b, req->loop, fd, req->peer, on_stream, req);
	if (handshaking != NULL)
		req->handshaking = handshaking; /* else req may be gone */
}

static void
on_writable(evutil_socket_t fd, short what, void *arg)
{
	weft_connect_req *req = arg;
	socklen_t len = sizeof(int);
	int err = 0;

	(void)what;
	event_free(req->writable);
	req->writable = NULL;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	if (err == 0) {
		connected(req);
		return;
	}
	req->status = weft__sock_error(err, "connect", req->peer);
	close(req->fd);
	req->fd = -1;
	try_next(req);
}

/* start_attempt starts connecting to one address. 0: in flight (or done,
 * and req may be gone); otherwise the error, with nothing left open. */
static int
start_attempt(weft_connect_req *req, const weft__addr *a)
{
	evutil_socket_t fd;
	int rv, err;

	weft__addr_format((const struct sockaddr *)&a->sa, a->sa_len, req->peer,
	                  sizeof(req->peer));
	fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return weft__sock_error(errno, "socket", req->peer);
	if (weft__addr_is_tcp(a->family))
		weft__sock_nodelay(fd);
	req->fd = fd;
	if (connect(fd, (const struct sockaddr *)&a->sa, a->sa_len) == 0) {
		connected(req);
		return 0;
	}
	if (errno == EINPROGRESS) {
		req->writable = event_new(weft_loop_base(req->loop), fd,
		                          EV_WRITE, on_writable, req);
		if (req->writable == NULL ||
		    event_add(req->writable, NULL) != 0) {
			rv = WEFT_ENOMEM;
			goto err_close;
		}
		return 0;
	}
	err = errno;
	rv = weft__sock_error(err, "connect", req->peer);
	if (err == EAGAIN) /* a Unix listener with a full backlog */
		rv = WEFT_ECONNREFUSED;
err_close:
	if (req->writable != NULL)
		event_free(req->writable);
	req->writable = NULL;
	close(fd);
	req->fd = -1;
	return rv;
}

static void
try_next(weft_connect_req *req)
{
	int rv;

	while (req->next < req->naddrs) {
		rv = start_attempt(req, &req->addrs[req->next++]);
		if (rv == 0)
			return;
		req->status = rv;
	}
	complete(req, NULL, req->status ? req->status : WEFT_ECONNREFUSED);
}

static void
on_timeout(evutil_socket_t fd, short what, void *arg)
{
	weft_connect_req *req = arg;

	(void)fd;
	(void)what;
	/* The caller hears WEFT_ETIMEDOUT and reports it. */
	weft_debug("connect %s: timed out after %llu ms", req->peer,
	           (unsigned long long)req->opts.timeout_ms);
	complete(req, NULL, WEFT_ETIMEDOUT);
}

static void
canceled_run(weft_loop *loop, int status, void *arg)
{
	(void)loop;
	(void)status;
	complete(arg, NULL, WEFT_ECANCELED);
}

static void
on_resolved(int status, weft__addr *addrs, size_t n, void *arg)
{
	weft_connect_req *req = arg;

	req->resolving = NULL;
	if (status != 0) {
		complete(req, NULL, status);
		return;
	}
	req->addrs = addrs;
	req->naddrs = n;
	try_next(req);
}

static void
start_run(weft_loop *loop, int status, void *arg)
{
	weft_connect_req *req = arg;
	struct timeval scratch;

	if (status != 0 || req->state == REQ_CANCELED || req->status != 0) {
		complete(req, NULL,
		         status                       ? status
		         : req->state == REQ_CANCELED ? WEFT_ECANCELED
		                                      : req->status);
		return;
	}
	req->timer = event_new(weft_loop_base(loop), -1, 0, on_timeout, req);
	if (req->timer == NULL) {
		complete(req, NULL, WEFT_ENOMEM);
		return;
	}
	event_add(req->timer,
	          weft_loop_timeval(loop, req->opts.timeout_ms, &scratch));
	req->hook_added =
	    weft_loop_on_shutdown(loop, on_loop_shutdown, req) >= 0;
	req->state = REQ_CONNECTING;
	if (req->addrs == NULL) {
		/* A name: the deadline runs from here, resolution included. */
		status = weft__resolve_start(loop, &req->target, on_resolved,
		                             req, &req->resolving);
		if (status != 0)
			complete(req, NULL, status);
		return;
	}
	try_next(req);
}

/* req_new fills a request from the caller's arguments and resolves. */
static int
req_new(weft_loop *loop, const char *address, const weft_connect_opts *opts,
        const weft__backend_ops *ops, weft_connect_req **out)
{
	weft_connect_req *req;
	const char *name;
	weft__addr addr;
	int rv;

	if ((rv = weft__addr_parse(address, &addr)) != 0) {
		weft_warn("connect: bad address '%s'", address);
		return rv;
	}
	if ((req = calloc(1, sizeof(*req))) == NULL)
		return WEFT_ENOMEM;
	req->loop = loop;
	req->fd = -1;
	if (opts != NULL)
		req->opts = *opts;
	if (req->opts.timeout_ms == 0)
		req->opts.timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
	snprintf(req->peer, sizeof(req->peer), "%s", address);
	name = req->opts.server_name;
	if (name == NULL && addr.family == AF_UNSPEC)
		name = addr.host;
	req->opts.server_name = NULL;
	if (name != NULL && (req->server_name = strdup(name)) == NULL) {
		free(req);
		return WEFT_ENOMEM;
	}
	weft__backend_init(&req->backend, req->opts.tls);
	if (ops != NULL)
		req->backend.ops = ops;
	req->backend.server_name = req->server_name;
	req->backend.timeout_ms = req->opts.timeout_ms;
	if (addr.family == AF_UNSPEC) {
		req->target = addr; /* resolved on the loop, by start_run */
		*out = req;
		return 0;
	}
	/* A numeric address: nothing to look up, nothing can block. */
	if ((rv = weft__addr_resolve(&addr, false, &req->addrs,
	                             &req->naddrs)) != 0) {
		req_free(req);
		return rv;
	}
	*out = req;
	return 0;
}

int
weft__connect_start(weft_loop *loop, const char *address,
                    const weft_connect_opts *opts, const weft__backend_ops *ops,
                    weft_connect_cb cb, void *arg, weft_connect_req **out)
{
	weft_connect_req *req;
	int rv;

	if (loop == NULL || address == NULL || cb == NULL)
		return WEFT_EINVAL;
	if ((rv = weft_init()) != 0)
		return rv;
	if ((rv = req_new(loop, address, opts, ops, &req)) != 0)
		return rv;
	req->cb = cb;
	req->arg = arg;
	req->state = REQ_QUEUED;
	req->task.cb = start_run;
	req->task.arg = req;
	if ((rv = weft_loop_post_task(loop, &req->task)) != 0) {
		req_free(req);
		return rv;
	}
	if (out != NULL)
		*out = req;
	return 0;
}

int
weft_connect_start(weft_loop *loop, const char *address,
                   const weft_connect_opts *opts, weft_connect_cb cb, void *arg,
                   weft_connect_req **out)
{
	return weft__connect_start(loop, address, opts, NULL, cb, arg, out);
}

int
weft_connect(weft_loop *loop, const char *address,
             const weft_connect_opts *opts, weft_connect_cb cb, void *arg)
{
	return weft_connect_start(loop, address, opts, cb, arg, NULL);
}

void
weft_connect_cancel(weft_connect_req *req)
{
	if (req == NULL || req->state == REQ_CANCELED)
		return;
	WEFT_ASSERT_IN_LOOP(req->loop);
	if (req->state == REQ_QUEUED) {
		/* The start task is still queued and completes it. */
		req->state = REQ_CANCELED;
		return;
	}
	teardown(req);
	req->state = REQ_CANCELED;
	req->task.cb = canceled_run;
	req->task.arg = req;
	if (weft_loop_post_task(req->loop, &req->task) != 0)
		complete(req, NULL, WEFT_ECANCELED);
}
