/* SPDX-License-Identifier: MIT */
/* conn_node.c: see conn_node.h. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn_node.h"
#include "support/echo_verb.h"

static void
on_hold(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct conn_node *n = arg;
	weft_msvc_msg *kept;

	(void)svc;
	if ((kept = weft_msvc_msg_detach(msg)) == NULL)
		return;
	pthread_mutex_lock(&n->lock);
	if (n->nheld < CONN_NODE_HELD) {
		n->held[n->nheld++] = kept;
		kept = NULL;
	}
	pthread_mutex_unlock(&n->lock);
	if (kept != NULL)
		weft_msvc_respond_error(kept, WEFT_EOVERLOAD, "hold is full");
}

static void
on_sink(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	(void)svc;
	(void)msg;
	(void)arg;
}

static void
on_fail(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	(void)svc;
	(void)arg;
	weft_msvc_respond_error(msg, WEFT_ENOTFOUND, "no such thing");
}

static void
on_twice(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct conn_node *n = arg;

	(void)svc;
	if (weft_msvc_respond(msg, "1", 1) == 0 &&
	    weft_msvc_respond(msg, "2", 1) != WEFT_EINVAL)
		n->twice_accepted = true;
}

/* A port nobody listens on, for the second member: dials to it fail. */
static uint16_t
closed_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
		abort();
	close(fd);
	return ntohs(sa.sin_port);
}

static weft_msvc_config *
make_config(void)
{
	weft_msvc_config *cfg;
	weft_msvc_limits *l;

	if (weft_msvc_config_new("fuzz", &cfg) != 0 ||
	    weft_msvc_config_add_node(cfg, "n1", "127.0.0.1", 0) != 0 ||
	    weft_msvc_config_add_node(cfg, "n2", "127.0.0.1", closed_port()))
		abort();
	l = weft_msvc_config_limits(cfg);
	l->max_frame_bytes = CONN_NODE_MAX_FRAME;
	l->outbound_queue_bytes = 256u << 10;
	l->inbound_inflight_bytes = 128u << 10;
	l->max_pending_requests = 64;
	l->large_message_bytes = 4096;
	l->connect_timeout_ms = 300;
	l->heartbeat_interval_ms = 100;
	l->reconnect_min_ms = 20;
	l->reconnect_max_ms = 100;
	l->request_timeout_ms = 500;
	l->loops = 1;
	l->worker_threads = 1;
	l->allow_clients = true;
	/* The wire stages, for clients that ask (PROTOCOL.md 2.1): messages
	 * up to four frames, in chunks of 16 KiB, and LZ4. */
	l->max_message_bytes = 4 * CONN_NODE_MAX_FRAME;
	l->chunk_bytes = 16u << 10;
	l->compression = WEFT_COMPRESS_LZ4;
	return cfg;
}

void
conn_node_start(struct conn_node *n)
{
	static const struct {
		uint32_t verb;
		const char *name;
		weft_msvc_handler_cb cb;
		unsigned flags;
	} verbs[] = {
	    {VERB_ECHO, "echo", weft_test_on_echo,
	     WEFT_MSVC_INLINE | WEFT_MSVC_CLIENTS},
	    {VERB_ECHO_BLOCK, "echo_block", weft_test_on_echo,
	     WEFT_MSVC_BLOCKING | WEFT_MSVC_CLIENTS},
	    {VERB_HOLD, "hold", on_hold, WEFT_MSVC_INLINE | WEFT_MSVC_CLIENTS},
	    {VERB_SINK, "sink", on_sink, WEFT_MSVC_INLINE | WEFT_MSVC_CLIENTS},
	    {VERB_FAIL, "fail", on_fail,
	     WEFT_MSVC_BLOCKING | WEFT_MSVC_CLIENTS},
	    {VERB_SILENT, "silent", on_sink,
	     WEFT_MSVC_INLINE | WEFT_MSVC_CLIENTS},
	    {VERB_TWICE, "twice", on_twice,
	     WEFT_MSVC_INLINE | WEFT_MSVC_CLIENTS},
	};
	weft_msvc_config *cfg = make_config();
	size_t i;

	*n = (struct conn_node){0};
	pthread_mutex_init(&n->lock, NULL);
	if (weft_loop_group_new(1, &n->group) != 0 ||
	    weft_msvc_new(n->group, cfg, "n1", NULL, &n->svc) != 0)
		abort();
	weft_msvc_config_free(cfg);
	for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (weft_msvc_register(n->svc, verbs[i].verb, verbs[i].name,
		                       verbs[i].cb, n, verbs[i].flags) != 0)
			abort();
	if (weft_msvc_start(n->svc) != 0)
		abort();
	n->port = weft_msvc_port(n->svc);
}

void
conn_node_release(struct conn_node *n)
{
	weft_msvc_msg *held[CONN_NODE_HELD];
	int i, count;

	pthread_mutex_lock(&n->lock);
	count = n->nheld;
	for (i = 0; i < count; i++)
		held[i] = n->held[i];
	n->nheld = 0;
	pthread_mutex_unlock(&n->lock);
	for (i = 0; i < count; i++)
		weft_msvc_respond(held[i], "held", 4);
}

void
conn_node_stop(struct conn_node *n)
{
	conn_node_release(n);
	weft_msvc_stop(n->svc, 0);
	/* A request that arrived while stopping may still be held. */
	conn_node_release(n);
	weft_msvc_free(n->svc);
	weft_loop_group_free(n->group);
	pthread_mutex_destroy(&n->lock);
}
