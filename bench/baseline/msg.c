/* SPDX-License-Identifier: MIT */
/*
 * msg.c: requests, responses and the reader threads that run handlers.
 *
 * Pending requests live in a table indexed by id modulo its size, behind
 * one lock, the way a blocking service keeps a shared map of callbacks.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base_int.h"

#define PENDING_MIN 1024

/* grow doubles the pending table (ids are unique, so they re-spread
 * without collisions once the table is larger than the id window).
 * Requires the pending lock. */
static int
grow(wbase_node *n)
{
	size_t cap = n->pending_cap ? n->pending_cap * 2 : PENDING_MIN;
	wbase_pending *t;

	if (cap > 4 * (size_t)n->limits.max_pending_requests + PENDING_MIN)
		return WEFT_EOVERLOAD;
	if ((t = calloc(cap, sizeof(*t))) == NULL)
		return WEFT_ENOMEM;
	for (size_t i = 0; i < n->pending_cap; i++) {
		wbase_pending *p = &n->pending[i];

		if (p->id == 0)
			continue;
		if (t[p->id % cap].id != 0) {
			free(t);
			return WEFT_EOVERLOAD;
		}
		t[p->id % cap] = *p;
	}
	free(n->pending);
	n->pending = t;
	n->pending_cap = cap;
	return 0;
}

/* add_pending stores a request and gives its id. */
static int
add_pending(wbase_node *n, const wbase_pending *req, uint64_t *id)
{
	int rv = 0;

	pthread_mutex_lock(&n->pending_lock);
	if (n->pending_len >= n->limits.max_pending_requests)
		rv = WEFT_EOVERLOAD;
	*id = n->next_id++;
	while (rv == 0 && (n->pending_cap == 0 ||
	                   n->pending[*id % n->pending_cap].id != 0))
		rv = grow(n);
	if (rv == 0) {
		n->pending[*id % n->pending_cap] = *req;
		n->pending[*id % n->pending_cap].id = *id;
		n->pending_len++;
	}
	pthread_mutex_unlock(&n->pending_lock);
	return rv;
}

/* take_pending removes request id; false if it is gone already. */
static bool
take_pending(wbase_node *n, uint64_t id, wbase_pending *out)
{
	bool found = false;

	pthread_mutex_lock(&n->pending_lock);
	if (n->pending_cap > 0 && id != 0 &&
	    n->pending[id % n->pending_cap].id == id) {
		*out = n->pending[id % n->pending_cap];
		n->pending[id % n->pending_cap].id = 0;
		n->pending_len--;
		found = true;
	}
	pthread_mutex_unlock(&n->pending_lock);
	return found;
}

void
wbase__fail_peer(wbase_node *n, size_t peer, int status)
{
	wbase_pending p;

	pthread_mutex_lock(&n->pending_lock);
	for (size_t i = 0; i < n->pending_cap; i++) {
		p = n->pending[i];
		if (p.id == 0 || p.peer != peer)
			continue;
		n->pending[i].id = 0;
		n->pending_len--;
		pthread_mutex_unlock(&n->pending_lock);
		atomic_fetch_add(&n->failed, 1);
		p.cb(n, status, NULL, 0, p.arg);
		pthread_mutex_lock(&n->pending_lock);
	}
	pthread_mutex_unlock(&n->pending_lock);
}

/* push_frame builds one frame and queues it on out. */
static int
push_frame(wbase_out *out, uint64_t id, uint32_t verb, uint32_t flags,
           uint64_t expires_ms, const void *data, size_t len)
{
	size_t flen = wbase__frame_len(len);
	uint8_t small[512], *f = flen <= sizeof(small) ? small : malloc(flen);
	int rv;

	if (f == NULL)
		return WEFT_ENOMEM;
	wbase__frame(f, id, verb, flags, expires_ms, data, len);
	rv = wbase__out_push(out, f, flen);
	if (f != small)
		free(f);
	return rv;
}

int
wbase_request(wbase_node *n, size_t peer, uint32_t verb, const void *data,
              size_t len, uint64_t timeout_ms, wbase_reply_cb cb, void *arg)
{
	wbase_pending req = {.peer = peer, .cb = cb, .arg = arg};
	wbase_pending gone;
	uint64_t id;
	int rv;

	if (peer >= n->npeers || peer == n->self || cb == NULL ||
	    len + WBASE_ENV_HEADER > n->limits.max_frame_bytes)
		return WEFT_EINVAL;
	if (atomic_load(&n->stopping))
		return WEFT_ESHUTDOWN;
	timeout_ms = timeout_ms ? timeout_ms : n->limits.request_timeout_ms;
	req.deadline_ms = weft_wall_ms() + timeout_ms;
	if ((rv = add_pending(n, &req, &id)) != 0)
		return rv;
	rv = push_frame(&n->peers[peer].out, id, verb, WBASE_REQUEST,
	                req.deadline_ms, data, len);
	/* If the request is already gone, its callback ran (or runs): the
	 * call succeeded as far as the caller can tell. */
	if (rv != 0 && !take_pending(n, id, &gone))
		rv = 0;
	if (rv == 0)
		atomic_fetch_add(&n->requests, 1);
	return rv;
}

void
wbase__deliver_response(wbase_node *n, const wbase_env *env)
{
	wbase_pending p;

	if (!take_pending(n, env->id, &p))
		return; /* late: timed out already */
	if (env->flags & WBASE_ERROR) {
		/* [code, text]: CONFLICT (12) is an answer the key-value
		 * service acts on; any other code is a remote error. */
		bool conflict = env->len >= 2 && env->payload[0] == 0x92 &&
		                env->payload[1] == 12;

		atomic_fetch_add(&n->failed, 1);
		p.cb(n, conflict ? WEFT_ECONFLICT : WEFT_EREMOTE, env->payload,
		     env->len, p.arg);
		return;
	}
	atomic_fetch_add(&n->responses, 1);
	p.cb(n, 0, env->payload, env->len, p.arg);
}

const void *
wbase_msg_data(const wbase_msg *msg)
{
	return msg->env.payload;
}

size_t
wbase_msg_len(const wbase_msg *msg)
{
	return msg->env.len;
}

uint32_t
wbase_msg_verb(const wbase_msg *msg)
{
	return msg->env.verb;
}

/* release frees a detached message and its hold on the connection. */
static void
release(wbase_msg *msg)
{
	if (msg->heap == NULL)
		return;
	if (msg->client_out != NULL)
		wbase__client_out_unref(msg->client_out);
	free(msg->heap);
}

static int
reply(wbase_msg *msg, uint32_t flags, const void *data, size_t len)
{
	wbase_node *n = msg->node;
	wbase_out *out =
	    msg->peer == SIZE_MAX ? msg->client_out : &n->peers[msg->peer].out;
	int rv;

	if (msg->responded || !(msg->env.flags & WBASE_REQUEST) || out == NULL)
		return WEFT_EINVAL;
	msg->responded = true;
	rv = push_frame(out, msg->env.id, msg->env.verb, WBASE_RESPONSE | flags,
	                msg->env.expires_ms, data, len);
	release(msg);
	return rv;
}

int
wbase_respond(wbase_msg *msg, const void *data, size_t len)
{
	return reply(msg, 0, data, len);
}

wbase_msg *
wbase_msg_detach(wbase_msg *msg)
{
	wbase_msg *copy;

	if (msg->heap != NULL || msg->responded ||
	    !(msg->env.flags & WBASE_REQUEST) ||
	    (copy = malloc(sizeof(*copy))) == NULL)
		return NULL;
	*copy = *msg;
	copy->in = NULL;
	copy->env.payload = NULL; /* the frame is the reader's */
	copy->env.len = 0;
	copy->heap = copy;
	if (copy->client_out != NULL)
		atomic_fetch_add(&copy->client_out->refs, 1);
	msg->responded = true; /* the copy answers */
	return copy;
}

uint64_t
wbase_msg_deadline_ms(const wbase_msg *msg)
{
	return msg->env.expires_ms;
}

size_t
wbase_msg_sender(const wbase_msg *msg)
{
	return msg->peer;
}

/* wire_code is the error code on the wire for a WEFT_E status
 * (docs/PROTOCOL.md 4.2). */
static uint8_t
wire_code(int status)
{
	switch (status) {
	case WEFT_EUNKNOWNVERB:
		return 1;
	case WEFT_EEXPIRED:
		return 2;
	case WEFT_EOVERLOAD:
		return 3;
	case WEFT_ESHUTDOWN:
		return 4;
	case WEFT_ETOOBIG:
		return 5;
	case WEFT_EINVAL:
		return 6;
	case WEFT_ENOTFOUND:
		return 7;
	case WEFT_ETIMEDOUT:
		return 8;
	case WEFT_EPEERDOWN:
		return 9;
	case WEFT_EPERM:
		return 11;
	case WEFT_ECONFLICT:
		return 12;
	default:
		return 10;
	}
}

/* An error payload: [code, text], msgpack; text is cut at 255 bytes. */
static int
respond_error(wbase_msg *msg, uint8_t code, const char *text)
{
	uint8_t body[3 + 255 + 1];
	size_t n = text != NULL ? strlen(text) : 0;

	n = n > 255 ? 255 : n;
	body[0] = 0x92;
	body[1] = code;
	body[2] = 0xd9; /* str 8 */
	body[3] = (uint8_t)n;
	if (n > 0)
		memcpy(body + 4, text, n);
	return reply(msg, WBASE_ERROR, body, 4 + n);
}

int
wbase_respond_error(wbase_msg *msg, int status, const char *text)
{
	return respond_error(msg, wire_code(status), text);
}

void
wbase__client_out_unref(wbase_out *o)
{
	if (atomic_fetch_sub(&o->refs, 1) != 1)
		return;
	wbase__out_fini(o);
	free(o);
}

/* dispatch handles one envelope that arrived on in. */
static void
dispatch(wbase_in *in, size_t peer, const wbase_env *env)
{
	wbase_node *n = in->node;
	wbase_msg msg = {.node = n,
	                 .in = in,
	                 .env = *env,
	                 .peer = peer,
	                 .client_out = in->client_out};
	wbase_handler_cb cb = NULL;

	if (env->flags & WBASE_RESPONSE) {
		wbase__deliver_response(n, env);
		return;
	}
	if (env->verb == 0) { /* a heartbeat: answer it */
		reply(&msg, 0, NULL, 0);
		return;
	}
	if (env->verb < WBASE_MAX_VERBS)
		cb = n->verbs[env->verb].cb;
	if (cb == NULL) {
		if (env->flags & WBASE_REQUEST)
			respond_error(&msg, 1, "unknown verb");
		return;
	}
	atomic_fetch_add(&n->handled, 1);
	cb(n, &msg, n->verbs[env->verb].arg);
	if ((env->flags & WBASE_REQUEST) && !msg.responded)
		respond_error(&msg, 10, "no response");
}

/* refuse answers a HELLO with a refusal, counts and logs it; returns
 * -1 (the connection closes). */
static int
refuse(wbase_in *in, unsigned status, const char *id, const char *reason)
{
	wbase_node *n = in->node;

	atomic_fetch_add(&n->refused, 1);
	weft_warn("baseline %s: refused %s: %s", n->peers[n->self].id,
	          id != NULL ? id : "a connection", reason);
	wbase__reply_send(&in->io, status, n->peers[n->self].id,
	                  n->limits.max_frame_bytes, reason);
	return -1;
}

/* accept_client gives a client's connection its writer's queue; under
 * TLS its reader and writer share the session. Returns 0 or -1. */
static int
accept_client(wbase_in *in)
{
	wbase_out *out;

	if (wbase__io_share(&in->io) != 0 ||
	    (out = malloc(sizeof(*out))) == NULL)
		return -1;
	if (wbase__out_init(out, in->node, SIZE_MAX, &in->io) != 0) {
		wbase__out_fini(out);
		free(out);
		return -1;
	}
	atomic_init(&out->refs, 1); /* the reader's */
	in->client_out = out;
	return 0;
}

/* handshake answers the HELLO of an accepted connection; returns the
 * member index of the dialer, SIZE_MAX for a client, or -1 (closed). */
static int
handshake(wbase_in *in, wbase_reader *r, size_t *peer)
{
	wbase_node *n = in->node;
	char id[64];
	bool member;
	int i;

	if (n->tls_cert != NULL && wbase__tls_accept(n, &in->io) != 0) {
		/* No certificate the CA vouches for, or no TLS at all. */
		atomic_fetch_add(&n->refused, 1);
		weft_warn("baseline %s: TLS handshake failed",
		          n->peers[n->self].id);
		return -1;
	}
	if (wbase__hello_recv(r, n->cluster, id, &member,
	                      n->limits.connect_timeout_ms) != 0)
		return refuse(in, 1, NULL, "malformed hello or wrong cluster");
	i = member ? -1 : 0;
	for (size_t k = 0; member && k < n->npeers; k++)
		if (strcmp(n->peers[k].id, id) == 0 && k != n->self)
			i = (int)k;
	if (i < 0)
		return refuse(in, 4, id, "unknown node");
	/* Under TLS, members and clients alike are who their certificate
	 * says. */
	if (n->tls_cert != NULL && !wbase__tls_peer_is(&in->io, id))
		return refuse(in, 6, id, "certificate does not name the id");
	*peer = member ? (size_t)i : SIZE_MAX;
	if (!member && accept_client(in) != 0)
		return -1;
	return wbase__reply_send(&in->io, 0, n->peers[n->self].id,
	                         n->limits.max_frame_bytes, "");
}

static void
read_loop(wbase_in *in, wbase_reader *r, size_t peer)
{
	wbase_node *n = in->node;
	const uint8_t *body;
	wbase_env env;
	size_t len;
	bool bad;

	while (wbase__read_frame(r, &body, &len, 0, &bad) == 0) {
		atomic_fetch_add_explicit(&n->frames_in, 1,
		                          memory_order_relaxed);
		if (wbase__env_decode(body, len, &env) != 0) {
			bad = true;
			break;
		}
		dispatch(in, peer, &env);
	}
	if (bad)
		atomic_fetch_add(&n->bad_input, 1);
}

void *
wbase__reader_main(void *arg)
{
	wbase_in *in = arg;
	wbase_node *n = in->node;
	wbase_reader r;
	size_t peer = SIZE_MAX;

	atomic_fetch_add(&n->connections, 1);
	if (wbase__reader_init(&r, &in->io, n->limits.max_frame_bytes) == 0 &&
	    handshake(in, &r, &peer) == 0)
		read_loop(in, &r, peer);
	wbase__reader_fini(&r);
	if (in->client_out != NULL) {
		wbase__out_stop(in->client_out);
		wbase__out_join(in->client_out);
		wbase__client_out_unref(in->client_out);
		in->client_out = NULL;
	}
	shutdown(in->io.fd, SHUT_RDWR);
	atomic_fetch_sub(&n->connections, 1);
	wbase__thread_exit(n);
	return NULL;
}
