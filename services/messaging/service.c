/* SPDX-License-Identifier: MIT */
/* service.c: the service's life (new, start, stop, free) and its API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "msvc_int.h"

/* ---- Running a task on every loop ------------------------------------ */

static void
each_loop_returned(weft_msvc *svc)
{
	pthread_mutex_lock(&svc->wait_lock);
	svc->each_waiting = false;
	pthread_cond_broadcast(&svc->wait_cond);
	pthread_mutex_unlock(&svc->wait_lock);
}

/* Runs fn(ml) on each loop's thread and returns when all are done: for
 * new and start, which set the loops up before they carry any traffic.
 * Not from one of the loops. */
static void
on_each_loop(weft_msvc *svc, void (*fn)(struct weft__msvc_loop *ml))
{
	pthread_mutex_lock(&svc->wait_lock);
	svc->each_waiting = true;
	pthread_mutex_unlock(&svc->wait_lock);
	weft__msvc_each_loop(svc, fn, each_loop_returned);
	pthread_mutex_lock(&svc->wait_lock);
	while (svc->each_waiting)
		pthread_cond_wait(&svc->wait_cond, &svc->wait_lock);
	pthread_mutex_unlock(&svc->wait_lock);
}

/* ---- Creating and starting --------------------------------------------- */

static void
loop_setup(struct weft__msvc_loop *ml)
{
	if (weft__msvc_loop_init(ml->svc, ml) != 0 ||
	    weft__msvc_stop_loop_init(ml) != 0)
		ml->init_failed = true;
}

static int
svc_alloc(weft_loop_group *group, const weft_msvc_config *cfg,
          const char *node_id, weft_msvc **out)
{
	pthread_condattr_t attr;
	weft_msvc *svc;
	char err[512];
	ssize_t self;
	int rv;

	if (!weft__msvc_id_is_valid(node_id))
		return WEFT_EINVAL;
	if (weft__msvc_config_validate(cfg, err, sizeof(err)) != 0) {
		weft_warn("msvc %s: %s", node_id, err);
		return WEFT_ECONFIG;
	}
	if ((svc = calloc(1, sizeof(*svc))) == NULL)
		return WEFT_ENOMEM;
	*out = svc;
	pthread_mutex_init(&svc->wait_lock, NULL);
	/* Stop's waits end at deadlines of weft_now_ns(). */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&svc->wait_cond, &attr);
	pthread_condattr_destroy(&attr);
	weft__msvc_sync_init(svc);
	weft__msvc_capacity_init(svc);
	pthread_mutex_init(&svc->pool.lock, NULL);
	pthread_cond_init(&svc->pool.cond, NULL);
	weft__msvc_cancels_init(svc);
	pthread_mutex_init(&svc->addr_lock, NULL);
	pthread_mutex_init(&svc->members_lock, NULL);
	weft__msvc_rate_init(svc);
	svc->log_reject =
	    (weft_log_limit)WEFT_LOG_LIMIT_INIT(WEFT__MSVC_LOG_LIMIT_MS);
	svc->log_client_clock =
	    (weft_log_limit)WEFT_LOG_LIMIT_INIT(WEFT__MSVC_CLOCK_LOG_MS);
	svc->log_slow_call =
	    (weft_log_limit)WEFT_LOG_LIMIT_INIT(WEFT__MSVC_LOG_LIMIT_MS);
	svc->group = group;
	snprintf(svc->id, sizeof(svc->id), "%s", node_id);
	if ((rv = weft__msvc_config_copy(cfg, &svc->cfg)) != 0)
		return rv;
	self = weft__msvc_config_find(svc->cfg, node_id);
	svc->member = self >= 0;
	svc->self_index = self >= 0 ? (uint32_t)self : UINT32_MAX;
	svc->nloops = (uint32_t)weft_loop_group_size(group);
	if (svc->nloops == 0 || svc->nloops > WEFT__MSVC_MAX_LOOPS)
		return WEFT_EINVAL;
	svc->verbs = calloc(WEFT_MSVC_MAX_VERBS, sizeof(*svc->verbs));
	svc->loops = calloc(svc->nloops, sizeof(*svc->loops));
	/* Members added at run time take the slots past the configured. */
	svc->peers = calloc(WEFT__MSVC_MAX_NODES, sizeof(*svc->peers));
	if (svc->verbs == NULL || svc->loops == NULL || svc->peers == NULL)
		return WEFT_ENOMEM;
	return 0;
}

static void free_all(weft_msvc *svc);

int
weft_msvc_new(weft_loop_group *group, const weft_msvc_config *cfg,
              const char *node_id, const weft_msvc_opts *opts, weft_msvc **out)
{
	weft_msvc *svc = NULL;
	uint32_t i;
	int rv;

	if (group == NULL || cfg == NULL || out == NULL)
		return WEFT_EINVAL;
	if ((rv = svc_alloc(group, cfg, node_id, &svc)) != 0)
		goto err_free;
	if (opts != NULL)
		svc->opts = *opts;
	for (i = 0; i < svc->nloops; i++) {
		svc->loops[i].svc = svc;
		svc->loops[i].loop = weft_loop_group_at(group, i);
		svc->loops[i].index = i;
	}
	for (i = 0; i < svc->cfg->nodes_len; i++) {
		const struct weft__msvc_node *node = &svc->cfg->nodes[i];

		rv = weft__msvc_member_new(svc, i, node->id, node->host,
		                           node->port, &svc->peers[i]);
		if (svc->peers[i] != NULL)
			svc->npeers = i + 1;
		if (rv != 0)
			goto err_free;
	}
	on_each_loop(svc, loop_setup);
	for (i = 0; i < svc->nloops; i++)
		if (svc->loops[i].init_failed) {
			rv = WEFT_ENOMEM;
			goto err_free;
		}
	*out = svc;
	return 0;

err_free:
	if (svc != NULL)
		free_all(svc);
	return rv;
}

static int
listen_on(weft_msvc *svc)
{
	weft_msvc_peer *self = svc->peers[svc->self_index];
	weft_server_opts o = {0};
	char addr[WEFT_ADDRESS_MAX];
	const char *host;
	int rv;

	host = svc->opts.listen_host ? svc->opts.listen_host : self->host;
	weft_address_join(
	    host, svc->opts.listen_port ? svc->opts.listen_port : self->port,
	    addr, sizeof(addr));
	o.address = addr;
	o.channel.linger_ms = WEFT__MSVC_LINGER_MS;
	o.init = weft__msvc_accept_init;
	o.init_arg = svc;
	/* The door (guard.c): every accepted connection within the file
	 * limit, and those in a handshake, TLS included, within theirs. */
	o.max_channels = svc->channel_cap;
	o.max_pending = atomic_load(&svc->handshake_cap);
	o.handshake_timeout_ms = svc->cfg->limits.connect_timeout_ms;
	if (svc->opts.tls != NULL && svc->cfg->tls.mode != WEFT_MSVC_TLS_NONE) {
		o.tls = svc->opts.tls;
		o.tls_mode = svc->cfg->tls.mode == WEFT_MSVC_TLS_OPTIONAL
		                 ? WEFT_TLS_MODE_OPTIONAL
		                 : WEFT_TLS_MODE_REQUIRED;
	}
	if ((rv = weft_server_new(svc->group, &o, &svc->server)) != 0) {
		weft_error("msvc %s: cannot listen on %s: %s", svc->id, addr,
		           weft_strerror(rv));
		return rv;
	}
	atomic_store(&svc->port, weft_server_port(svc->server));
	if (self->port == 0) {
		pthread_mutex_lock(&self->addr_lock);
		self->port = weft_server_port(svc->server);
		pthread_mutex_unlock(&self->addr_lock);
	}
	weft_info("msvc %s: listening on %s", svc->id,
	          weft_server_address(svc->server));
	return 0;
}

int
weft_msvc_start(weft_msvc *svc)
{
	char err[512];
	int rv;

	if (atomic_load(&svc->started) || atomic_load(&svc->stopping))
		return WEFT_EBUSY;
	/* TLS required but no context: refuse rather than run in the clear.
	 * (Optional mode without one is a node not yet given certificates
	 * during a rolling change, and legitimate.) */
	if (svc->cfg->tls.mode == WEFT_MSVC_TLS_ALL && svc->opts.tls == NULL) {
		weft_error("msvc %s: [tls] mode = all but no TLS context given",
		           svc->id);
		return WEFT_ECONFIG;
	}
	/* A member's limits, against this host now (the file limit may have
	 * changed since the configuration was checked). A client only dials. */
	if (svc->member &&
	    weft_msvc_config_check(svc->cfg, err, sizeof(err)) != 0) {
		weft_error("msvc %s: %s", svc->id, err);
		return WEFT_ECONFIG;
	}
	if ((rv = weft__msvc_pool_start(svc)) != 0)
		return rv;
	weft__msvc_guard_init(svc);
	if (svc->member && (rv = listen_on(svc)) != 0) {
		weft__msvc_pool_quit(svc);
		weft__msvc_pool_join(svc);
		return rv;
	}
	on_each_loop(svc, weft__msvc_guard_loop_start);
	atomic_store(&svc->started, true);
	return 0;
}

static void
free_all(weft_msvc *svc)
{
	uint32_t i;

	weft__msvc_stop_fini(svc);
	weft__msvc_pool_join(svc);
	for (i = 0; i < svc->npeers; i++)
		weft__msvc_peer_free(svc->peers[i]);
	if (svc->verbs != NULL)
		for (i = 0; i < WEFT_MSVC_MAX_VERBS; i++)
			free(svc->verbs[i].name);
	free(svc->verbs);
	free(svc->peers);
	free(svc->loops);
	weft_msvc_config_free(svc->cfg);
	pthread_mutex_destroy(&svc->wait_lock);
	pthread_cond_destroy(&svc->wait_cond);
	weft__msvc_sync_fini(svc);
	weft__msvc_capacity_fini(svc);
	pthread_mutex_destroy(&svc->pool.lock);
	pthread_cond_destroy(&svc->pool.cond);
	weft__msvc_cancels_fini(svc);
	pthread_mutex_destroy(&svc->addr_lock);
	pthread_mutex_destroy(&svc->members_lock);
	free(svc->addrs);
	weft__msvc_rate_fini(svc);
	free(svc->peer_cbs);
	free(svc->member_cbs);
	free(svc);
}

void
weft_msvc_free(weft_msvc *svc)
{
	if (svc == NULL)
		return;
	weft_msvc_stop(svc, 0);
	free_all(svc);
}

/* ---- Verbs and events -------------------------------------------------- */

int
weft_msvc_register(weft_msvc *svc, uint32_t verb, const char *name,
                   weft_msvc_handler_cb cb, void *arg, unsigned flags)
{
	struct weft__msvc_verb *v;

	if (verb < WEFT_MSVC_VERB_USER_MIN || verb >= WEFT_MSVC_MAX_VERBS ||
	    cb == NULL || name == NULL ||
	    (flags & ~(unsigned)(WEFT_MSVC_BLOCKING | WEFT_MSVC_CLIENTS |
	                         WEFT_MSVC_URGENT_LANE)))
		return WEFT_EINVAL;
	if (atomic_load(&svc->started))
		return WEFT_EBUSY;
	v = &svc->verbs[verb];
	if (v->cb != NULL)
		return WEFT_EEXIST;
	if ((v->name = strdup(name)) == NULL)
		return WEFT_ENOMEM;
	v->cb = cb;
	v->arg = arg;
	v->flags = flags;
	return 0;
}

int
weft_msvc_verb_limit(weft_msvc *svc, uint32_t verb, uint32_t max)
{
	if (svc == NULL || verb >= WEFT_MSVC_MAX_VERBS ||
	    svc->verbs[verb].cb == NULL)
		return WEFT_EINVAL;
	if (atomic_load(&svc->started))
		return WEFT_EBUSY;
	svc->verbs[verb].max_in_progress = max;
	return 0;
}

int
weft_msvc_on_peer_event(weft_msvc *svc, weft_msvc_peer_cb cb, void *arg)
{
	struct weft__msvc_peer_listener *grown;

	if (cb == NULL)
		return WEFT_EINVAL;
	if (atomic_load(&svc->started))
		return WEFT_EBUSY;
	grown =
	    realloc(svc->peer_cbs, (svc->peer_cb_count + 1) * sizeof(*grown));
	if (grown == NULL)
		return WEFT_ENOMEM;
	grown[svc->peer_cb_count++] =
	    (struct weft__msvc_peer_listener){cb, arg};
	svc->peer_cbs = grown;
	return 0;
}

/* ---- Sending ----------------------------------------------------------- */

/* Fills out for a send or request and takes the limits it needs.
 * Returns 0, or an error with nothing taken. */
static int
prepare(weft_msvc *svc, weft_msvc_peer *peer, uint32_t verb, size_t len,
        const weft_msvc_call_opts *opts, bool request,
        struct weft__msvc_out *out)
{
	const weft_msvc_limits *l = &svc->cfg->limits;
	uint64_t timeout = opts != NULL ? opts->timeout_ms : 0;
	size_t frame = WEFT_ENVELOPE_FRAME_BYTES(len, true);

	/* Not to oneself: a node refuses a dialer that claims its own id. */
	if (peer == NULL || peer->svc != svc || peer->is_client ||
	    peer->is_self || verb < WEFT_MSVC_VERB_USER_MIN ||
	    verb >= WEFT_MSVC_MAX_VERBS)
		return WEFT_EINVAL;
	if (len > weft__msvc_max_message(l))
		return WEFT_ETOOBIG;
	if (!atomic_load(&svc->started) || atomic_load(&svc->stopping))
		return WEFT_ESHUTDOWN;
	if (timeout == 0 && request)
		timeout = l->request_timeout_ms;
	out->verb = verb;
	out->flags = request ? WEFT__MSVC_F_REQUEST : WEFT__MSVC_F_ONEWAY;
	out->key = opts != NULL ? opts->key : 0;
	out->created_ms = weft_loop_in_thread(peer->home->loop)
	                      ? weft__msvc_wall_ms(peer->home)
	                      : weft__msvc_clock_now_ms(svc);
	out->expires_ms = timeout ? out->created_ms + timeout : 0;
	if (opts != NULL && opts->deadline_ms != 0 &&
	    (out->expires_ms == 0 || opts->deadline_ms < out->expires_ms))
		out->expires_ms = opts->deadline_ms;
	if (out->expires_ms != 0 && out->expires_ms <= out->created_ms)
		return WEFT_EEXPIRED;
	if (weft__msvc_peer_left(peer))
		return WEFT_ENOTMEMBER;
	if (!request && atomic_load_explicit(&peer->down, memory_order_relaxed))
		return WEFT_EPEERDOWN;
	out->timeout_ms =
	    out->expires_ms ? out->expires_ms - out->created_ms : 0;
	out->cls = (uint8_t)weft__msvc_class_for(svc, verb, len);
	out->len = len;
	if (!weft__msvc_take_queued(peer, frame, false))
		goto err_overload;
	if (request &&
	    weft__msvc_user_of(atomic_fetch_add(&svc->pending, 1),
	                       atomic_load(&svc->pending_internal)) >=
	        l->max_pending_requests) {
		weft__msvc_pending_sub(svc);
		weft__msvc_release_queued(peer, frame);
		goto err_overload;
	}
	out->accounted = frame;
	return 0;

err_overload:
	weft__msvc_count(&peer->st.dropped_overload, 1);
	weft__msvc_count(&svc->st.overloaded, 1);
	if (verb < WEFT_MSVC_MAX_VERBS)
		weft__msvc_count(&svc->verbs[verb].dropped_overload, 1);
	return WEFT_EOVERLOAD;
}

/* Gives back what prepare took, after a failed submit. */
static void
unprepare(weft_msvc *svc, weft_msvc_peer *peer, struct weft__msvc_out *out)
{
	weft__msvc_release_queued(peer, out->accounted);
	if (out->flags & WEFT__MSVC_F_REQUEST)
		weft__msvc_pending_sub(svc);
}

static int
call(weft_msvc *svc, weft_msvc_peer *peer, uint32_t verb, const void *data,
     size_t len, struct evbuffer *payload, const weft_msvc_call_opts *opts,
     weft_msvc_reply_cb cb, void *arg)
{
	struct weft__msvc_out out = {.conn = NULL};
	bool request = cb != NULL, on_home;
	int rv;

	if (svc == NULL || (data == NULL && payload == NULL && len > 0) ||
	    peer == NULL)
		return WEFT_EINVAL;
	/* On the peer's own loop, stop cannot overtake us (its clean-up
	 * runs as a task on this very thread): no need to count. */
	on_home = weft_loop_in_thread(peer->home->loop);
	if (!on_home && !weft__msvc_enter(svc))
		return WEFT_ESHUTDOWN;
	if ((rv = prepare(svc, peer, verb, len, opts, request, &out)) != 0)
		goto out;
	out.cb = cb;
	out.arg = arg;
	out.ptr = data;
	out.buf = payload;
	if (request && opts != NULL && opts->cancel_handle != NULL)
		out.handle = atomic_fetch_add(&svc->cancels.next_handle, 1) + 1;
	if (request)
		weft__msvc_trace_request(svc, opts, &out);
	if ((rv = weft__msvc_submit_stack(peer, &out)) != 0)
		unprepare(svc, peer, &out);
	else if (out.handle != 0)
		*opts->cancel_handle = out.handle;
out:
	if (!on_home)
		weft__msvc_leave(svc);
	return rv;
}

int
weft_msvc_send(weft_msvc *svc, weft_msvc_peer *peer, uint32_t verb,
               const void *data, size_t len, const weft_msvc_call_opts *opts)
{
	return call(svc, peer, verb, data, len, NULL, opts, NULL, NULL);
}

int
weft_msvc_request(weft_msvc *svc, weft_msvc_peer *peer, uint32_t verb,
                  const void *data, size_t len, const weft_msvc_call_opts *opts,
                  weft_msvc_reply_cb cb, void *arg)
{
	if (cb == NULL)
		return WEFT_EINVAL;
	return call(svc, peer, verb, data, len, NULL, opts, cb, arg);
}

/* The _buf variants move the payload into an evbuffer of our own first,
 * so it is consumed whatever happens. */
static int
call_buf(weft_msvc *svc, weft_msvc_peer *peer, uint32_t verb,
         struct evbuffer *payload, const weft_msvc_call_opts *opts,
         weft_msvc_reply_cb cb, void *arg)
{
	struct evbuffer *buf;
	int rv;

	if ((buf = evbuffer_new()) == NULL) {
		evbuffer_drain(payload, evbuffer_get_length(payload));
		return WEFT_ENOMEM;
	}
	evbuffer_add_buffer(buf, payload);
	rv = call(svc, peer, verb, NULL, evbuffer_get_length(buf), buf, opts,
	          cb, arg);
	/* Encoded at once or moved into a queued copy: buf stays ours. */
	evbuffer_free(buf);
	return rv;
}

int
weft_msvc_send_buf(weft_msvc *svc, weft_msvc_peer *peer, uint32_t verb,
                   struct evbuffer *payload, const weft_msvc_call_opts *opts)
{
	return call_buf(svc, peer, verb, payload, opts, NULL, NULL);
}

int
weft_msvc_request_buf(weft_msvc *svc, weft_msvc_peer *peer, uint32_t verb,
                      struct evbuffer *payload, const weft_msvc_call_opts *opts,
                      weft_msvc_reply_cb cb, void *arg)
{
	if (cb == NULL) {
		evbuffer_drain(payload, evbuffer_get_length(payload));
		return WEFT_EINVAL;
	}
	return call_buf(svc, peer, verb, payload, opts, cb, arg);
}

/* ---- Accessors --------------------------------------------------------- */

const char *
weft_msvc_node_id(const weft_msvc *svc)
{
	return svc->id;
}

bool
weft_msvc_is_member(const weft_msvc *svc)
{
	return svc->member;
}

uint16_t
weft_msvc_port(const weft_msvc *svc)
{
	return atomic_load(&((weft_msvc *)svc)->port);
}

uint32_t
weft_msvc_msg_verb(const weft_msvc_msg *msg)
{
	return msg->verb;
}

const void *
weft_msvc_msg_data(const weft_msvc_msg *msg)
{
	return msg->data;
}

size_t
weft_msvc_msg_len(const weft_msvc_msg *msg)
{
	return msg->len;
}

bool
weft_msvc_msg_is_request(const weft_msvc_msg *msg)
{
	return msg->flags & WEFT__MSVC_F_REQUEST;
}

const char *
weft_msvc_msg_sender(const weft_msvc_msg *msg)
{
	return msg->peer->id;
}

weft_msvc_peer *
weft_msvc_msg_peer(const weft_msvc_msg *msg)
{
	return msg->peer->is_client ? NULL : msg->peer;
}

uint64_t
weft_msvc_msg_created_ms(const weft_msvc_msg *msg)
{
	return msg->created_ms;
}

uint64_t
weft_msvc_msg_deadline_ms(const weft_msvc_msg *msg)
{
	return msg->expires_ms;
}
