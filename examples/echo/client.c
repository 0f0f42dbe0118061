/* SPDX-License-Identifier: MIT */
/*
 * echo-client [ADDRESS [COUNT]]: sends COUNT numbered messages to an echo
 * server, keeping up to WINDOW of them in flight, and checks that every
 * echo comes back, in order and unchanged. Exits 0 when all did.
 *
 * The client drives one loop on its own thread with weft_loop_run_until.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <weft/frame.h>
#include <weft/loop.h>
#include <weft/transport.h>

#define WINDOW 64

typedef struct client {
	long count, sent, received;
	int status; /* 1 while running, then 0 or a WEFT_E code */
} client;

static void
send_next(client *c, weft_ctx *ctx)
{
	struct evbuffer *msg = evbuffer_new();

	evbuffer_add_printf(msg, "hello %ld", c->sent++);
	weft_ctx_write(ctx, &weft_msg_evbuffer, msg, NULL, NULL);
	evbuffer_free(msg); /* the write moved its bytes out */
}

static void
on_active(weft_ctx *ctx)
{
	client *c = weft_ctx_state(ctx);

	while (c->sent < c->count && c->sent < WINDOW)
		send_next(c, ctx);
	weft_ctx_flush(ctx);
}

/* Each echo must be the next message, byte for byte. */
static void
on_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	client *c = weft_ctx_state(ctx);
	char want[32], got[32] = "";
	size_t n =
	    (size_t)snprintf(want, sizeof(want), "hello %ld", c->received++);

	if (evbuffer_get_length(msg) == n)
		evbuffer_copyout(msg, got, n);
	(void)type;
	if (memcmp(got, want, n) != 0) {
		fprintf(stderr, "echo-client: expected '%s'\n", want);
		c->status = WEFT_EPROTO;
	} else if (c->received == c->count) {
		c->status = 0;
	} else if (c->sent < c->count) {
		send_next(c, ctx);
	}
}

static void
on_read_complete(weft_ctx *ctx)
{
	weft_ctx_flush(ctx);
}

static void
on_inactive(weft_ctx *ctx)
{
	client *c = weft_ctx_state(ctx);

	if (c->status == 1)
		c->status = WEFT_ECLOSED;
}

static const weft_handler client_handler = {
    .active = on_active,
    .read = on_read,
    .read_complete = on_read_complete,
    .inactive = on_inactive,
};

static int
init_channel(weft_channel *ch, void *arg)
{
	int rv = weft_frame_codec_add(ch, "frame", NULL);

	if (rv == 0)
		rv = weft_pipeline_add_last(ch, "client", &client_handler, arg);
	return rv;
}

static void
on_connect(weft_channel *ch, int status, void *arg)
{
	client *c = arg;

	(void)ch;
	if (status != 0)
		c->status = status;
}

static bool
is_done(void *arg)
{
	return ((client *)arg)->status != 1;
}

int
main(int argc, char **argv)
{
	const char *address = argc > 1 ? argv[1] : "127.0.0.1:7000";
	client c = {.count = argc > 2 ? atol(argv[2]) : 100000, .status = 1};
	weft_connect_opts opts = {.init = init_channel, .init_arg = &c};
	weft_loop *loop;
	int rv;

	if (c.count <= 0 || (rv = weft_loop_new(&loop)) != 0)
		return 2;
	rv = weft_connect(loop, address, &opts, on_connect, &c);
	if (rv == 0 && weft_loop_run_until(loop, is_done, &c, 60000) != 0)
		rv = WEFT_ETIMEDOUT;
	rv = rv ? rv : c.status;
	weft_loop_free(loop);
	if (rv != 0) {
		fprintf(stderr, "echo-client: %s after %ld of %ld echoes\n",
		        weft_strerror(rv), c.received, c.count);
		return 1;
	}
	printf("echo-client: %ld echoes checked\n", c.received);
	return 0;
}
