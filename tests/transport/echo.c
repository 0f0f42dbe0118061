/* SPDX-License-Identifier: MIT */
/* echo.c: handlers the transport tests share (see echo.h). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <weft/transport.h>

#include "echo.h"
#include "transport_int.h"

/* ---- Echo server -------------------------------------------------------- */

static void
server_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	echo_server *s = weft_ctx_state(ctx);

	atomic_fetch_add(&s->bytes, (long long)evbuffer_get_length(msg));
	/* Writing the input buffer moves its bytes out. */
	weft_ctx_write(ctx, type, msg, NULL, NULL);
}

static void
server_read_complete(weft_ctx *ctx)
{
	weft_ctx_flush(ctx);
}

static const weft_handler echo_server_handler = {
    .read = server_read,
    .read_complete = server_read_complete,
};

int
echo_server_init(weft_channel *ch, void *arg)
{
	echo_server *s = arg;
	socklen_t len = sizeof(int);
	int on = 0, rv;
	size_t i;

	atomic_fetch_add(&s->channels, 1);
	if (getsockopt(weft__channel_fd(ch), IPPROTO_TCP, TCP_NODELAY, &on,
	               &len) == 0 &&
	    on != 0)
		atomic_fetch_add(&s->nodelay, 1);
	if (s->group != NULL) {
		for (i = 0; i < weft_loop_group_size(s->group) && i < 4; i++) {
			if (weft_loop_group_at(s->group, i) ==
			    weft_channel_loop(ch))
				atomic_fetch_add(&s->per_loop[i], 1);
		}
	}
	rv = weft_pipeline_add_last(ch, "echo", &echo_server_handler, s);
	if (rv != 0)
		return rv;
	return echo_notify_init(ch, &s->inactive);
}

/* ---- Checking client ---------------------------------------------------- */

static size_t
msg_size(uint64_t k)
{
	return 1 + (size_t)((k * 7919) % 64);
}

static void
client_pump(weft_ctx *ctx, echo_client *c)
{
	struct evbuffer *buf = evbuffer_new();
	uint8_t bytes[64];
	size_t n, i;

	while (c->msgs_sent < c->msgs_total &&
	       c->bytes_sent - c->bytes_recv < c->window) {
		n = msg_size(c->msgs_sent);
		for (i = 0; i < n; i++)
			bytes[i] = echo_pattern(c->bytes_sent + i);
		evbuffer_add(buf, bytes, n);
		weft_ctx_write(ctx, &weft_msg_evbuffer, buf, NULL, NULL);
		c->msgs_sent++;
		c->bytes_sent += n;
	}
	evbuffer_free(buf);
	weft_ctx_flush(ctx);
}

static void
client_active(weft_ctx *ctx)
{
	echo_client *c = weft_ctx_state(ctx);

	c->active = true;
	c->ch = weft_ctx_channel(ctx);
	client_pump(ctx, c);
	weft_ctx_fire_active(ctx);
}

static void
client_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	echo_client *c = weft_ctx_state(ctx);
	uint8_t chunk[4096];
	int n, i;

	(void)type;
	c->reads++;
	while ((n = evbuffer_remove(msg, chunk, sizeof(chunk))) > 0) {
		for (i = 0; i < n; i++) {
			if (chunk[i] != echo_pattern(c->bytes_recv + (size_t)i))
				c->mismatches++;
		}
		c->bytes_recv += (uint64_t)n;
	}
	client_pump(ctx, c);
}

static void
client_inactive(weft_ctx *ctx)
{
	echo_client *c = weft_ctx_state(ctx);

	c->inactive = true;
	weft_ctx_fire_inactive(ctx);
}

/* Any user event makes the client send what msgs_total now allows. */
static void
client_user_event(weft_ctx *ctx, int event, void *data)
{
	client_pump(ctx, weft_ctx_state(ctx));
	weft_ctx_fire_user_event(ctx, event, data);
}

static const weft_handler echo_client_handler = {
    .active = client_active,
    .read = client_read,
    .user_event = client_user_event,
    .inactive = client_inactive,
};

int
echo_client_init(weft_channel *ch, void *arg)
{
	echo_client *c = arg;

	if (c->window == 0)
		c->window = 64 * 1024;
	return weft_pipeline_add_last(ch, "check", &echo_client_handler, c);
}

bool
echo_client_done(void *arg)
{
	const echo_client *c = arg;

	if (c->inactive || (c->connected && c->connect_status != 0))
		return true;
	return c->msgs_sent == c->msgs_total && c->bytes_recv == c->bytes_sent;
}

void
echo_client_connected(weft_channel *ch, int status, void *arg)
{
	echo_client *c = arg;

	c->connected = true;
	c->connect_status = status;
	if (status == 0)
		c->ch = ch;
}

/* ---- Sink --------------------------------------------------------------- */

static void
sink_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	echo_sink *s = weft_ctx_state(ctx);
	uint8_t chunk[4096];
	int n, i;

	(void)type;
	s->reads++;
	while ((n = evbuffer_remove(msg, chunk, sizeof(chunk))) > 0) {
		for (i = 0; i < n; i++) {
			if (chunk[i] != echo_pattern(s->bytes + (size_t)i))
				s->mismatches++;
		}
		s->bytes += (uint64_t)n;
	}
}

static void
sink_inactive(weft_ctx *ctx)
{
	echo_sink *s = weft_ctx_state(ctx);

	s->inactive = true;
	weft_ctx_fire_inactive(ctx);
}

static const weft_handler echo_sink_handler = {
    .read = sink_read,
    .inactive = sink_inactive,
};

int
echo_sink_init(weft_channel *ch, void *arg)
{
	echo_sink *s = arg;

	s->ch = ch;
	if (s->start_paused)
		weft_channel_set_auto_read(ch, false);
	return weft_pipeline_add_last(ch, "sink", &echo_sink_handler, s);
}

/* ---- Notifier and results ----------------------------------------------- */

static void
notify_inactive(weft_ctx *ctx)
{
	atomic_fetch_add((atomic_int *)weft_ctx_state(ctx), 1);
	weft_ctx_fire_inactive(ctx);
}

static const weft_handler echo_notify_handler = {
    .inactive = notify_inactive,
};

int
echo_notify_init(weft_channel *ch, atomic_int *inactive)
{
	return weft_pipeline_add_last(ch, "notify", &echo_notify_handler,
	                              inactive);
}

void
echo_result_cb(weft_channel *ch, int status, void *arg)
{
	echo_result *r = arg;

	r->calls++;
	r->status = status;
	r->ch = ch;
}

bool
echo_result_set(void *arg)
{
	return ((echo_result *)arg)->calls > 0;
}

void
echo_server_closed(weft_server *srv, void *arg)
{
	(void)srv;
	atomic_fetch_add((atomic_int *)arg, 1);
}

weft_loop *echo_loop;

int
echo_loop_setup(void **state)
{
	(void)state;
	return weft_loop_new(&echo_loop);
}

int
echo_loop_teardown(void **state)
{
	(void)state;
	weft_loop_free(echo_loop);
	echo_loop = NULL;
	return 0;
}
