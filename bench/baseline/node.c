/* SPDX-License-Identifier: MIT */
/* node.c: a baseline node: its peers, pending requests and acceptor. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base_int.h"

#define SWEEP_MS 50

static int
find_peer(const wbase_node *n, const char *id)
{
	for (size_t i = 0; i < n->npeers; i++)
		if (strcmp(n->peers[i].id, id) == 0)
			return (int)i;
	return -1;
}

static int
load_peers(wbase_node *n, const char *id)
{
	const char *pid, *host;
	uint16_t port;
	int rv;

	n->npeers = weft_msvc_config_node_count(n->cfg);
	if ((n->peers = calloc(n->npeers, sizeof(*n->peers))) == NULL)
		return WEFT_ENOMEM;
	for (size_t i = 0; i < n->npeers; i++) {
		wbase_peer *p = &n->peers[i];

		weft_msvc_config_node(n->cfg, i, &pid, &host, &port);
		snprintf(p->id, sizeof(p->id), "%s", pid);
		snprintf(p->host, sizeof(p->host), "%s", host);
		p->port = port;
		p->self = strcmp(pid, id) == 0;
		if ((rv = wbase__out_init(&p->out, n, i,
		                          &(wbase_io){.fd = -1})) != 0)
			return rv;
	}
	return find_peer(n, id) < 0 ? WEFT_ENOTFOUND : 0;
}

int
wbase_node_new(const weft_msvc_config *cfg, const char *id, wbase_node **out)
{
	wbase_node *n;
	int rv;

	if (cfg == NULL || id == NULL)
		return WEFT_EINVAL;
	if ((n = calloc(1, sizeof(*n))) == NULL)
		return WEFT_ENOMEM;
	n->cfg = cfg;
	n->limits = *weft_msvc_config_limits_const(cfg);
	n->cluster = weft_msvc_config_cluster(cfg);
	n->listen_fd = -1;
	n->next_id = 1;
	pthread_mutex_init(&n->pending_lock, NULL);
	pthread_mutex_init(&n->in_lock, NULL);
	pthread_mutex_init(&n->addr_lock, NULL);

	if ((rv = load_peers(n, id)) != 0) {
		wbase_node_free(n);
		return rv;
	}
	n->self = (size_t)find_peer(n, id);
	*out = n;
	return 0;
}

int
wbase_register(wbase_node *n, uint32_t verb, wbase_handler_cb cb, void *arg)
{
	if (verb < 16 || verb >= WBASE_MAX_VERBS || n->started)
		return WEFT_EINVAL;
	n->verbs[verb].cb = cb;
	n->verbs[verb].arg = arg;
	return 0;
}

size_t
wbase_peer_count(const wbase_node *n)
{
	return n->npeers;
}

const char *
wbase_peer_id(const wbase_node *n, size_t i)
{
	return i < n->npeers ? n->peers[i].id : NULL;
}

bool
wbase_peer_is_self(const wbase_node *n, size_t i)
{
	return i == n->self;
}

uint16_t
wbase_node_port(const wbase_node *n)
{
	return n->port;
}

int
wbase_set_peer_addr(wbase_node *n, const char *id, const char *host,
                    uint16_t port)
{
	int i = find_peer(n, id);

	if (i < 0)
		return WEFT_ENOTFOUND;
	pthread_mutex_lock(&n->addr_lock);
	snprintf(n->peers[i].host, sizeof(n->peers[i].host), "%s", host);
	n->peers[i].port = port;
	pthread_mutex_unlock(&n->addr_lock);
	return 0;
}

int
wbase__start_thread(wbase_node *n, pthread_t *t, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	int rv;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, WBASE_STACK_BYTES);
	rv = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	if (rv != 0)
		return -1;
	atomic_fetch_add(&n->threads, 1);
	return 0;
}

void
wbase__thread_exit(wbase_node *n)
{
	atomic_fetch_sub(&n->threads, 1);
}

/* ---- Sockets ------------------------------------------------------------ */

static int
tcp_socket(const char *host, uint16_t port, bool passive, struct addrinfo **ai)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
	char ports[8];

	hints.ai_flags = passive ? AI_PASSIVE : 0;
	snprintf(ports, sizeof(ports), "%u", port);
	if (getaddrinfo(host, ports, &hints, ai) != 0)
		return -1;
	return socket((*ai)->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

static int
listen_on(wbase_node *n)
{
	const wbase_peer *self = &n->peers[n->self];
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct addrinfo *ai = NULL;
	int fd = tcp_socket(self->host, self->port, true, &ai), one = 1;

	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
		    listen(fd, 1024) != 0 ||
		    getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
			close(fd);
			fd = -1;
		}
	}
	if (ai != NULL)
		freeaddrinfo(ai);
	if (fd < 0)
		return WEFT_EADDRINUSE;
	n->listen_fd = fd;
	n->port = ntohs(ss.ss_family == AF_INET6
	                    ? ((struct sockaddr_in6 *)&ss)->sin6_port
	                    : ((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

int
wbase__dial(wbase_node *n, size_t peer, wbase_io *io)
{
	const wbase_peer *p = &n->peers[peer];
	struct addrinfo *ai = NULL;
	char host[sizeof(p->host)];
	uint16_t port;
	wbase_reader r;
	int fd, one = 1;

	pthread_mutex_lock(&n->addr_lock);
	memcpy(host, p->host, sizeof(host));
	port = p->port;
	pthread_mutex_unlock(&n->addr_lock);
	fd = tcp_socket(host, port, false, &ai);

	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		close(fd);
		fd = -1;
	}
	if (ai != NULL)
		freeaddrinfo(ai);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*io = (wbase_io){.fd = fd};
	if (n->tls_cert != NULL && wbase__tls_connect(n, io, p->id) != 0) {
		wbase__io_close(io);
		return -1;
	}
	/* The reply is the only thing this side ever reads. */
	if (wbase__reader_init(&r, io, WBASE_HELLO_MAX) != 0 ||
	    wbase__hello_send(io, n->cluster, n->peers[n->self].id, true) ||
	    wbase__reply_recv(&r, n->limits.connect_timeout_ms) != 0) {
		wbase__reader_fini(&r);
		wbase__io_close(io);
		return -1;
	}
	wbase__reader_fini(&r);
	atomic_fetch_add(&n->connections, 1);
	return 0;
}

/* ---- Accepting ------------------------------------------------------------
 */

static void
accept_one(wbase_node *n)
{
	int fd = accept4(n->listen_fd, NULL, NULL, SOCK_CLOEXEC), one = 1;
	wbase_in *in;

	if (fd < 0)
		return;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((in = calloc(1, sizeof(*in))) == NULL) {
		close(fd);
		return;
	}
	in->node = n;
	in->io.fd = fd;
	pthread_mutex_lock(&n->in_lock);
	if (atomic_load(&n->stopping) ||
	    wbase__start_thread(n, &in->thread, wbase__reader_main, in) != 0) {
		pthread_mutex_unlock(&n->in_lock);
		close(fd);
		free(in);
		return;
	}
	in->next = n->ins;
	n->ins = in;
	pthread_mutex_unlock(&n->in_lock);
}

/* sweep fails the requests whose time is up. */
static void
sweep(wbase_node *n)
{
	uint64_t now = weft_wall_ms();

	pthread_mutex_lock(&n->pending_lock);
	for (size_t i = 0; i < n->pending_cap && n->pending_len > 0; i++) {
		wbase_pending p = n->pending[i];

		if (p.id == 0 || p.deadline_ms > now)
			continue;
		n->pending[i].id = 0;
		n->pending_len--;
		/* Callbacks run without the lock; the slot is free already. */
		pthread_mutex_unlock(&n->pending_lock);
		atomic_fetch_add(&n->failed, 1);
		p.cb(n, WEFT_ETIMEDOUT, NULL, 0, p.arg);
		pthread_mutex_lock(&n->pending_lock);
	}
	pthread_mutex_unlock(&n->pending_lock);
}

static void *
acceptor_main(void *arg)
{
	wbase_node *n = arg;
	struct pollfd pfd = {.fd = n->listen_fd, .events = POLLIN};

	while (!atomic_load(&n->stopping)) {
		if (poll(&pfd, 1, SWEEP_MS) > 0)
			accept_one(n);
		sweep(n);
	}
	wbase__thread_exit(n);
	return NULL;
}

int
wbase_node_start(wbase_node *n)
{
	int rv;

	if (n->started)
		return WEFT_EBUSY;
	if ((rv = listen_on(n)) != 0)
		return rv;
	if (wbase__start_thread(n, &n->acceptor, acceptor_main, n) != 0)
		return WEFT_ENOMEM;
	n->started = true;
	return 0;
}

/* stop_ins wakes every reader (shutting its socket) and joins it. */
static void
stop_ins(wbase_node *n)
{
	wbase_in *in, *next;

	pthread_mutex_lock(&n->in_lock);
	for (in = n->ins; in != NULL; in = in->next)
		shutdown(in->io.fd, SHUT_RDWR);
	in = n->ins;
	n->ins = NULL;
	pthread_mutex_unlock(&n->in_lock);
	for (; in != NULL; in = next) {
		next = in->next;
		pthread_join(in->thread, NULL);
		wbase__io_close(&in->io);
		free(in);
	}
}

void
wbase_node_stop(wbase_node *n)
{
	if (!n->started || atomic_exchange(&n->stopping, true))
		return;
	pthread_join(n->acceptor, NULL);
	close(n->listen_fd);
	n->listen_fd = -1;
	for (size_t i = 0; i < n->npeers; i++)
		wbase__out_stop(&n->peers[i].out);
	stop_ins(n);
	for (size_t i = 0; i < n->npeers; i++)
		wbase__out_join(&n->peers[i].out);
	for (size_t i = 0; i < n->npeers; i++)
		wbase__fail_peer(n, i, WEFT_ESHUTDOWN);
}

void
wbase_node_free(wbase_node *n)
{
	if (n == NULL)
		return;
	wbase_node_stop(n);
	for (size_t i = 0; n->peers != NULL && i < n->npeers; i++)
		wbase__out_fini(&n->peers[i].out);
	free(n->peers);
	free(n->pending);
	wbase__tls_free(n);
	pthread_mutex_destroy(&n->in_lock);
	pthread_mutex_destroy(&n->addr_lock);

	pthread_mutex_destroy(&n->pending_lock);
	free(n);
}

void
wbase_node_get_stats(const wbase_node *n, wbase_stats *out)
{
	out->requests = atomic_load(&n->requests);
	out->responses = atomic_load(&n->responses);
	out->failed = atomic_load(&n->failed);
	out->handled = atomic_load(&n->handled);
	out->frames_in = atomic_load(&n->frames_in);
	out->frames_out = atomic_load(&n->frames_out);
	out->write_calls = atomic_load(&n->write_calls);
	out->threads = atomic_load(&n->threads);
	out->connections = atomic_load(&n->connections);
	out->bad_input = atomic_load(&n->bad_input);
	out->refused = atomic_load(&n->refused);
}
