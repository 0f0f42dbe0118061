/* SPDX-License-Identifier: MIT */
/*
 * server.c: listening servers. The accepting loop owns the listener; each
 * accepted fd is handed to a loop of the group (round-robin), where the
 * server's backend makes its stream (a TLS one after its handshake) and
 * then the channel, on that loop's thread.
 *
 * Lifetime: the server is reference-counted. The listener holds one
 * reference until weft_server_close; each connection's record holds one
 * from accept until its channel leaves the loop (the "weft.server"
 * handler's removed callback), so hand-overs in flight never see freed
 * memory. A record is counted in the server's door (door.c) until the
 * application establishes its channel; one the door evicts is closed by
 * a task on its own loop, which holds a reference to the record.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "transport_int.h"

#define ACCEPT_RETRY_MS 100
/* How often a server over max_channels looks whether the connections it
 * evicted have closed, to accept again. */
#define ROOM_RETRY_MS 5
/* At most one line per this many ms about dropped connections. */
#define LOG_LIMIT_MS 5000
#define DEFAULT_HANDSHAKE_TIMEOUT_MS 10000

struct weft_server {
	atomic_int refs;
	weft_loop *accept_loop;
	weft_loop_group *group; /* NULL: accept_loop owns every channel */
	weft_server_opts opts;  /* a copy; opts.address is not kept */
	atomic_size_t max_channels;
	bool door_on; /* opts.max_pending was set: pending ones are counted */
	struct weft__door door;
	weft__backend backend;
	weft__listener bound; /* bound.fd until the listener takes it */

	/* Accepting loop only, once started. */
	struct evconnlistener *listener;
	struct event *retry; /* accepts again after EMFILE, or room made */
	size_t next_loop;
	bool hook_added;
	bool stopped;

	atomic_bool close_requested;
	weft_server_close_cb close_cb;
	void *close_arg;
	weft_task start_task;
	weft_task close_task;

	atomic_uint_fast64_t accepted;
	atomic_uint_fast64_t accept_errors;
	atomic_uint_fast64_t rejected;
	atomic_uint_fast64_t setup_failures;
	atomic_uint_fast64_t channels_open;
	atomic_uint_fast64_t evicting; /* evicted, not yet closed */
	/* A bad or unlucky connection is one line, not one per connection;
	 * so is every pause of the accept loop. */
	weft_log_limit log_dropped;
	weft_log_limit log_accept;
};

/* Where an accepted connection is; its loop thread only. */
enum phase {
	PHASE_QUEUED,  /* on its way to its loop */
	PHASE_SETUP,   /* sniffed or in its TLS handshake, on fd */
	PHASE_CHANNEL, /* a channel */
	PHASE_DONE,
};

/* One accepted connection, from accept until its channel goes. */
typedef struct handoff {
	weft_task task;       /* the hand-over to its loop */
	weft_task evict_task; /* posted once, if the door evicts it */
	struct weft__door_entry door;
	atomic_int refs; /* its life, and an eviction on its way */
	atomic_bool evicted;
	weft_server *srv; /* holds a reference */
	weft_loop *loop;
	evutil_socket_t fd;
	enum phase phase;
	weft_channel *ch; /* PHASE_CHANNEL */
	char peer[WEFT_ADDRESS_MAX];
} handoff;

static void
server_ref(weft_server *srv)
{
	atomic_fetch_add_explicit(&srv->refs, 1, memory_order_relaxed);
}

static void
server_unref(weft_server *srv)
{
	if (atomic_fetch_sub_explicit(&srv->refs, 1, memory_order_acq_rel) != 1)
		return;
	weft__door_fini(&srv->door);
	free(srv);
}

static handoff *
handoff_of(struct weft__door_entry *e)
{
	return (handoff *)((char *)e - offsetof(handoff, door));
}

static void
handoff_unref(handoff *h)
{
	weft_server *srv = h->srv;

	if (atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) != 1)
		return;
	free(h);
	server_unref(srv);
}

/* The door's hold: an evicted record stays until its eviction ran. */
static void
door_hold(struct weft__door_entry *e)
{
	handoff *h = handoff_of(e);

	atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->srv->evicting, 1, memory_order_relaxed);
	atomic_store(&h->evicted, true);
}

/* The record's life ends: out of the door and the open count. */
static void
handoff_done(handoff *h)
{
	weft_server *srv = h->srv;

	h->phase = PHASE_DONE;
	h->ch = NULL;
	weft__door_leave(&srv->door, &h->door);
	if (atomic_load(&h->evicted))
		atomic_fetch_sub_explicit(&srv->evicting, 1,
		                          memory_order_relaxed);
	atomic_fetch_sub_explicit(&srv->channels_open, 1, memory_order_relaxed);
	handoff_unref(h);
}

/* ---- Eviction, on the evicted connection's loop ------------------------- */

static void
evict_run(weft_loop *loop, int status, void *arg)
{
	handoff *h = arg;

	(void)loop;
	(void)status; /* a loop being freed ends its connections anyway */
	/* Shutting the socket down ends a sniff or a TLS handshake at once:
	 * it reads end-of-file, fails, and closes the fd itself. */
	if (h->phase == PHASE_SETUP)
		shutdown(h->fd, SHUT_RDWR);
	else if (h->phase == PHASE_CHANNEL)
		weft_channel_close(h->ch);
	handoff_unref(h);
}

/* evict closes a connection the door took out, on its loop. */
static void
evict(weft_server *srv, struct weft__door_entry *e)
{
	handoff *h = handoff_of(e);

	weft_log_limited(&srv->log_dropped, WEFT_LOG_WARN,
	                 "server %s: closing a connection from %s that has "
	                 "not finished its handshake, to make room",
	                 srv->bound.address, h->peer);
	h->evict_task.cb = evict_run;
	h->evict_task.arg = h;
	if (weft_loop_post_task(h->loop, &h->evict_task) != 0)
		handoff_unref(h); /* its loop is going: so is the connection */
}

/* ---- Channel set-up, on the channel's loop ------------------------------ */

static void
server_handler_removed(weft_ctx *ctx)
{
	handoff_done(weft_ctx_state(ctx));
}

/* Sits first in every accepted pipeline, to count the channel's life. */
static const weft_handler server_handler = {
    .removed = server_handler_removed,
};

/* handoff_fail drops a connection that never became a channel. */
static void
handoff_fail(handoff *h, int status, const char *why)
{
	weft_server *srv = h->srv;

	if (!atomic_load(&h->evicted))
		weft_log_limited(&srv->log_dropped, WEFT_LOG_WARN,
		                 "server %s: dropping connection from %s: "
		                 "%s%s%s",
		                 srv->bound.address, h->peer,
		                 weft_strerror(status), why != NULL ? ": " : "",
		                 why != NULL ? why : "");
	atomic_fetch_add_explicit(&srv->setup_failures, 1,
	                          memory_order_relaxed);
	handoff_done(h);
}

static void
make_channel(handoff *h, weft_stream *s)
{
	weft_server *srv = h->srv;
	weft_channel *ch;
	int rv;

	/* Once the server is closed, its init_arg may be gone: a connection
	 * whose set-up (a TLS handshake) ends after weft_server_close is
	 * dropped, never handed to init. */
	if (atomic_load(&srv->close_requested)) {
		s->channel = NULL;
		s->ops->close(s, false);
		rv = WEFT_ESHUTDOWN;
		goto err_fail;
	}
	if ((rv = weft_channel_new_stream(h->loop, s, &srv->opts.channel,
	                                  &ch)) != 0)
		goto err_fail;
	weft_channel_set_peer(ch, h->peer);
	rv = weft_pipeline_add_first(ch, "weft.server", &server_handler, h);
	if (rv != 0)
		goto err_close;
	/* The handler holds the record's life from here on. */
	h->phase = PHASE_CHANNEL;
	h->ch = ch;
	if ((rv = weft__channel_init(ch, srv->opts.init, srv->opts.init_arg)) !=
	    0) {
		weft_log_limited(&srv->log_dropped, WEFT_LOG_WARN,
		                 "server %s: setting up %s failed: %s",
		                 srv->bound.address, weft_channel_peer(ch),
		                 weft_strerror(rv));
		atomic_fetch_add_explicit(&srv->setup_failures, 1,
		                          memory_order_relaxed);
		weft_channel_close(ch);
		return;
	}
	weft_channel_activate(ch);
	return;

err_close:
	weft_channel_close(ch);
err_fail:
	handoff_fail(h, rv, NULL);
}

/* The backend is done with a connection: a channel over its stream, or a
 * connection dropped. */
static void
on_stream(weft_stream *s, int status, const char *why, void *arg)
{
	handoff *h = arg;

	if (status != 0) {
		handoff_fail(h, status, why);
		return;
	}
	/* Evicted while set up: its shutdown came too late to fail it. */
	if (atomic_load(&h->evicted)) {
		s->ops->close(s, false);
		handoff_fail(h, WEFT_ECANCELED, "evicted");
		return;
	}
	make_channel(h, s);
}

static void
handoff_run(weft_loop *loop, int status, void *arg)
{
	handoff *h = arg;
	const weft__backend *b = &h->srv->backend;

	if (status != 0 || atomic_load(&h->evicted)) {
		close(h->fd);
		handoff_fail(h, status != 0 ? status : WEFT_ECANCELED, NULL);
		return;
	}
	h->phase = PHASE_SETUP;
	b->ops->accept(b, loop, h->fd, h->peer, on_stream, h);
}

/* ---- Accepting, on the accepting loop --------------------------------- */

static weft_loop *
pick_loop(weft_server *srv)
{
	size_t n;

	if (srv->group == NULL)
		return srv->accept_loop;
	n = weft_loop_group_size(srv->group);
	return weft_loop_group_at(srv->group, srv->next_loop++ % n);
}

/* Counts one more open channel; true if that passes max_channels. */
static bool
over_limit(weft_server *srv)
{
	uint64_t open;
	size_t max =
	    atomic_load_explicit(&srv->max_channels, memory_order_relaxed);

	open = atomic_fetch_add_explicit(&srv->channels_open, 1,
	                                 memory_order_relaxed);
	return max != 0 && open >= max;
}

/*
 * Lets h in through the door, evicting another to make room if the door
 * is at its cap; false (nothing counted) when it is refused. At
 * max_channels a pending connection makes room for the newcomer (by the
 * door's rule) and the newcomer is let in, one beyond the limit until the
 * evicted one has closed on its loop: accepting pauses meanwhile (see
 * pause_accepting), so newcomers wait in the backlog instead of being
 * refused while a busy loop closes what was evicted. Only when nothing
 * is pending and no eviction is on its way (every channel established)
 * is the newcomer refused.
 */
static bool
admit(weft_server *srv, handoff *h, const struct sockaddr *sa, bool *full)
{
	struct weft__door_entry *victim = NULL;
	char host[WEFT_ADDRESS_MAX];
	bool over = over_limit(srv), coming = false;
	int rv = 0;

	*full = false;
	if (over && !srv->door_on) {
		rv = WEFT_EOVERLOAD;
	} else if (srv->door_on) {
		/* Room already on its way needs no new victim. */
		coming = over && atomic_load(&srv->evicting) != 0;
		weft__door_host_of(sa, host, sizeof(host));
		rv = weft__door_enter(&srv->door, &h->door, host,
		                      over && !coming, &victim);
		if (victim != NULL)
			evict(srv, victim);
		else if (rv == 0 && over && !coming) {
			weft__door_leave(&srv->door, &h->door);
			rv = WEFT_EOVERLOAD;
		}
		*full = rv == 0 && over;
	}
	if (rv == 0)
		return true;
	atomic_fetch_sub_explicit(&srv->channels_open, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&srv->rejected, 1, memory_order_relaxed);
	weft_log_limited(
	    &srv->log_dropped, WEFT_LOG_WARN,
	    "server %s: %zu channels open, refusing one more",
	    srv->bound.address,
	    atomic_load_explicit(&srv->max_channels, memory_order_relaxed));
	return false;
}

/* True while srv is over max_channels with evicted connections still to
 * close: room is coming, and newcomers are better kept in the backlog. */
static bool
room_coming(weft_server *srv)
{
	size_t max =
	    atomic_load_explicit(&srv->max_channels, memory_order_relaxed);

	return max != 0 && atomic_load(&srv->evicting) != 0 &&
	       atomic_load_explicit(&srv->channels_open,
	                            memory_order_relaxed) >= max;
}

/* Stops accepting for ms; on_accept_retry starts again. Accepting loop. */
static void
pause_accepting(weft_server *srv, struct evconnlistener *lev, int ms)
{
	struct timeval scratch;

	evconnlistener_disable(lev);
	event_add(srv->retry,
	          weft_loop_timeval(srv->accept_loop, ms, &scratch));
}

static void
on_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
          int socklen, void *arg)
{
	weft_server *srv = arg;
	handoff *h;
	bool full;

	atomic_fetch_add_explicit(&srv->accepted, 1, memory_order_relaxed);
	if ((h = calloc(1, sizeof(*h))) == NULL) {
		close(fd);
		weft_warn("server %s: out of memory accepting",
		          srv->bound.address);
		return;
	}
	weft__addr_format(sa, (socklen_t)socklen, h->peer, sizeof(h->peer));
	/* Whole before the door sees it: another thread may evict it. */
	atomic_init(&h->refs, 1);
	h->srv = srv;
	h->fd = fd;
	h->loop = pick_loop(srv);
	h->task.cb = handoff_run;
	h->task.arg = h;
	if (!admit(srv, h, sa, &full)) {
		close(fd);
		free(h);
		return;
	}
	if (full)
		pause_accepting(srv, lev, ROOM_RETRY_MS);
	if (weft__addr_is_tcp(sa->sa_family))
		weft__sock_nodelay(fd);
	server_ref(srv);
	if (h->loop == srv->accept_loop)
		handoff_run(h->loop, 0, h);
	else if (weft_loop_post_task(h->loop, &h->task) != 0)
		handoff_run(h->loop, WEFT_ESHUTDOWN, h);
}

static void
on_accept_error(struct evconnlistener *lev, void *arg)
{
	weft_server *srv = arg;
	int err = EVUTIL_SOCKET_ERROR();
	char eb[128];

	atomic_fetch_add_explicit(&srv->accept_errors, 1, memory_order_relaxed);
	/* Out of descriptors: the oldest connection that has not finished
	 * its handshake gives one back, as it would for a newcomer. */
	if (srv->door_on && (err == EMFILE || err == ENFILE)) {
		struct weft__door_entry *victim;

		if ((victim = weft__door_evict_oldest(&srv->door)) != NULL)
			evict(srv, victim);
	}
	/* EMFILE and friends leave the connection queued, so the listener
	 * would fire again at once: pause instead of spinning. */
	weft_log_limited(&srv->log_accept, WEFT_LOG_WARN,
	                 "server %s: accept: %s; pausing accepts for %d ms",
	                 srv->bound.address, weft__errstr(err, eb, sizeof(eb)),
	                 ACCEPT_RETRY_MS);
	pause_accepting(srv, lev, ACCEPT_RETRY_MS);
}

static void
on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
	weft_server *srv = arg;

	(void)fd;
	(void)what;
	if (srv->listener == NULL)
		return;
	if (room_coming(srv))
		pause_accepting(srv, srv->listener, ROOM_RETRY_MS);
	else
		evconnlistener_enable(srv->listener);
}

/* ---- Starting and stopping, on the accepting loop ---------------------- */

static void
stop_listening(weft_server *srv)
{
	if (srv->stopped)
		return;
	srv->stopped = true;
	if (srv->listener != NULL)
		evconnlistener_free(srv->listener); /* closes the fd */
	else if (srv->bound.fd >= 0)
		close(srv->bound.fd);
	srv->listener = NULL;
	srv->bound.fd = -1;
	if (srv->retry != NULL)
		event_free(srv->retry);
	srv->retry = NULL;
	weft__listener_unlink(&srv->bound);
	weft_debug("server %s: stopped listening", srv->bound.address);
}

static void
on_loop_shutdown(weft_loop *loop, uint64_t deadline_ns, void *arg)
{
	(void)loop;
	(void)deadline_ns;
	stop_listening(arg);
}

static int
start_listening(weft_server *srv, weft_loop *loop)
{
	struct event_base *base = weft_loop_base(loop);

	srv->retry = event_new(base, -1, 0, on_accept_retry, srv);
	if (srv->retry == NULL)
		return WEFT_ENOMEM;
	/* backlog 0: the socket already listens. */
	srv->listener = evconnlistener_new(
	    base, on_accept, srv, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
	    0, srv->bound.fd);
	if (srv->listener == NULL)
		return WEFT_ENOMEM;
	srv->bound.fd = -1;
	evconnlistener_set_error_cb(srv->listener, on_accept_error);
	if (weft_loop_on_shutdown(loop, on_loop_shutdown, srv) < 0)
		weft_warn("server %s: no shutdown hook", srv->bound.address);
	else
		srv->hook_added = true;
	return 0;
}

static void
start_task_run(weft_loop *loop, int status, void *arg)
{
	weft_server *srv = arg;
	int rv;

	if (srv->stopped)
		return;
	if (status != 0) {
		stop_listening(srv);
		return;
	}
	if ((rv = start_listening(srv, loop)) != 0) {
		weft_error("server %s: cannot listen: %s", srv->bound.address,
		           weft_strerror(rv));
		stop_listening(srv);
	}
}

static void
close_task_run(weft_loop *loop, int status, void *arg)
{
	weft_server *srv = arg;
	weft_server_close_cb cb = srv->close_cb;

	(void)status; /* also when the loop is being freed: same work */
	stop_listening(srv);
	if (srv->hook_added)
		weft_loop_remove_shutdown(loop, on_loop_shutdown, srv);
	srv->hook_added = false;
	srv->close_cb = NULL;
	if (cb != NULL)
		cb(srv, srv->close_arg);
	server_unref(srv);
}

/* ---- Public ------------------------------------------------------------ */

static int
check_opts(const weft_server_opts *opts)
{
	if (opts == NULL || opts->address == NULL || opts->init == NULL ||
	    opts->backlog < 0)
		return WEFT_EINVAL;
	if (opts->tls_mode != WEFT_TLS_MODE_REQUIRED &&
	    opts->tls_mode != WEFT_TLS_MODE_OPTIONAL)
		return WEFT_EINVAL;
	return 0;
}

int
weft__server_new(weft_loop *accept_loop, weft_loop_group *group,
                 const weft_server_opts *opts, const weft__backend_ops *ops,
                 weft_server **out)
{
	weft_server *srv;
	int rv;

	if (accept_loop == NULL || out == NULL || (rv = check_opts(opts)))
		return WEFT_EINVAL;
	if ((rv = weft_init()) != 0)
		return rv;
	if ((srv = calloc(1, sizeof(*srv))) == NULL)
		return WEFT_ENOMEM;
	atomic_init(&srv->refs, 1);
	srv->log_dropped = (weft_log_limit)WEFT_LOG_LIMIT_INIT(LOG_LIMIT_MS);
	srv->log_accept = (weft_log_limit)WEFT_LOG_LIMIT_INIT(LOG_LIMIT_MS);
	srv->accept_loop = accept_loop;
	srv->group = group;
	srv->opts = *opts;
	srv->opts.address = NULL;
	atomic_init(&srv->max_channels, opts->max_channels);
	srv->door_on = opts->max_pending != 0;
	if (weft__door_init(&srv->door, door_hold) != 0) {
		free(srv);
		return WEFT_ENOMEM;
	}
	srv->door.max = opts->max_pending;
	if (srv->opts.handshake_timeout_ms == 0)
		srv->opts.handshake_timeout_ms = DEFAULT_HANDSHAKE_TIMEOUT_MS;
	weft__backend_init(&srv->backend, opts->tls);
	if (ops != NULL)
		srv->backend.ops = ops;
	srv->backend.tls_mode = opts->tls_mode;
	srv->backend.timeout_ms = srv->opts.handshake_timeout_ms;
	rv = srv->backend.ops->listen(&srv->backend, opts->address,
	                              opts->backlog ? opts->backlog : SOMAXCONN,
	                              &srv->bound);
	if (rv != 0)
		goto err_free;
	srv->start_task.cb = start_task_run;
	srv->start_task.arg = srv;
	if ((rv = weft_loop_post_task(accept_loop, &srv->start_task)) != 0)
		goto err_stop;
	weft_debug("server %s: listening", srv->bound.address);
	*out = srv;
	return 0;

err_stop:
	stop_listening(srv);
err_free:
	weft__door_fini(&srv->door);
	free(srv);
	return rv;
}

int
weft_server_new(weft_loop_group *group, const weft_server_opts *opts,
                weft_server **out)
{
	if (group == NULL || weft_loop_group_size(group) == 0)
		return WEFT_EINVAL;
	return weft__server_new(weft_loop_group_at(group, 0), group, opts, NULL,
	                        out);
}

int
weft_server_new_on_loop(weft_loop *loop, const weft_server_opts *opts,
                        weft_server **out)
{
	return weft__server_new(loop, NULL, opts, NULL, out);
}

uint16_t
weft_server_port(const weft_server *srv)
{
	return srv->bound.port;
}

const char *
weft_server_address(const weft_server *srv)
{
	return srv->bound.address;
}

void
weft_server_get_stats(const weft_server *srv, weft_server_stats *out)
{
	/* The counters are atomics; a cast drops const for the loads. */
	weft_server *s = (weft_server *)srv;

	out->accepted =
	    atomic_load_explicit(&s->accepted, memory_order_relaxed);
	out->accept_errors =
	    atomic_load_explicit(&s->accept_errors, memory_order_relaxed);
	out->rejected =
	    atomic_load_explicit(&s->rejected, memory_order_relaxed);
	out->setup_failures =
	    atomic_load_explicit(&s->setup_failures, memory_order_relaxed);
	out->channels_open =
	    atomic_load_explicit(&s->channels_open, memory_order_relaxed);
	weft__door_counts(&s->door, &out->pending, &out->evicted);
}

void
weft_server_establish(weft_channel *ch)
{
	weft_ctx *ctx = weft_pipeline_get(ch, "weft.server");
	handoff *h;

	WEFT_ASSERT_IN_LOOP(weft_channel_loop(ch));
	if (ctx == NULL || weft_ctx_handler(ctx) != &server_handler)
		return;
	h = weft_ctx_state(ctx);
	weft__door_leave(&h->srv->door, &h->door);
}

void
weft_server_set_limits(weft_server *srv, size_t max_channels,
                       size_t max_pending)
{
	struct weft__door_entry *victim;

	atomic_store(&srv->max_channels, max_channels);
	if (!srv->door_on)
		return;
	while ((victim = weft__door_set_max(&srv->door, max_pending)) != NULL)
		evict(srv, victim);
}

void
weft_server_close(weft_server *srv, weft_server_close_cb cb, void *arg)
{
	if (srv == NULL || atomic_exchange(&srv->close_requested, true))
		return;
	srv->close_cb = cb;
	srv->close_arg = arg;
	srv->close_task.cb = close_task_run;
	srv->close_task.arg = srv;
	/* Refused only by a loop being freed, whose thread is gone. */
	if (weft_loop_post_task(srv->accept_loop, &srv->close_task) != 0)
		close_task_run(srv->accept_loop, WEFT_ESHUTDOWN, srv);
}
