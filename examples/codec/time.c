/* SPDX-License-Identifier: MIT */
/*
 * time serve ADDRESS | time ask ADDRESS: the guide's third step
 * (docs/GUIDE.md), a codec of your own. The server answers every
 * connection with the time, as 8 bytes (milliseconds since the epoch, big
 * endian), and closes it; the client prints it.
 *
 * TCP is a stream, not a sequence of messages: the 8 bytes may arrive in
 * pieces. The client's decoder therefore keeps what it has read until it
 * holds a whole time, and then passes on a typed message, a struct
 * time_msg, instead of bytes. The server's encoder does the reverse: the
 * application writes a struct time_msg, the encoder writes its 8 bytes.
 * The application handlers never see a byte.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <weft/loop.h>
#include <weft/transport.h>

#define TIME_BYTES 8

/* The typed message both sides' applications see. */
struct time_msg {
	uint64_t ms; /* since the Unix epoch */
};

static void
time_msg_free(void *msg)
{
	free(msg);
}

/* A message type is a name (for logs) and how to free one. */
static const weft_msg_type time_msg_type = {"time", time_msg_free};

/* ---- The codec ----------------------------------------------------------- */

/* Decoder (inbound): bytes in, struct time_msg out. Its state keeps the
 * bytes of a time not yet complete. */
static void
decoder_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct evbuffer *pending = weft_ctx_state(ctx);
	unsigned char b[TIME_BYTES];
	struct time_msg *t;
	int i;

	(void)type;
	evbuffer_add_buffer(pending, msg); /* moves the chains, no copy */
	while (evbuffer_get_length(pending) >= TIME_BYTES) {
		evbuffer_remove(pending, b, TIME_BYTES);
		if ((t = calloc(1, sizeof(*t))) == NULL) {
			weft_ctx_fire_error(ctx, WEFT_ENOMEM);
			return;
		}
		for (i = 0; i < TIME_BYTES; i++)
			t->ms = t->ms << 8 | b[i];
		/* The next handler owns t now. */
		weft_ctx_fire_read(ctx, &time_msg_type, t);
	}
}

static void
decoder_removed(weft_ctx *ctx)
{
	evbuffer_free(weft_ctx_state(ctx));
}

static const weft_handler time_decoder = {
    .read = decoder_read,
    .removed = decoder_removed,
};

/* Encoder (outbound): struct time_msg in, bytes out. */
static void
encoder_write(weft_ctx *ctx, const weft_msg_type *type, void *msg,
              weft_write_cb cb, void *arg)
{
	struct time_msg *t = msg;
	unsigned char b[TIME_BYTES];
	struct evbuffer *out;
	int i;

	if (type != &time_msg_type) { /* not ours: pass it on */
		weft_ctx_write(ctx, type, msg, cb, arg);
		return;
	}
	for (i = 0; i < TIME_BYTES; i++)
		b[i] = (unsigned char)(t->ms >> (8 * (TIME_BYTES - 1 - i)));
	time_msg_free(t); /* a write consumes its message */
	if ((out = evbuffer_new()) == NULL ||
	    evbuffer_add(out, b, sizeof(b)) != 0) {
		weft_ctx_fail_write(ctx, &weft_msg_evbuffer, out, cb, arg,
		                    WEFT_ENOMEM);
		return;
	}
	weft_ctx_write(ctx, &weft_msg_evbuffer, out, cb, arg);
	evbuffer_free(out); /* the write moved its bytes out */
}

static const weft_handler time_encoder = {.write = encoder_write};

/* The codec is the pair, added as one: each side uses its half. */
static int
time_codec_add(weft_channel *ch)
{
	struct evbuffer *pending = evbuffer_new();
	int rv;

	if (pending == NULL)
		return WEFT_ENOMEM;
	if ((rv = weft_pipeline_add_last(ch, "time-decoder", &time_decoder,
	                                 pending)) != 0) {
		evbuffer_free(pending);
		return rv;
	}
	return weft_pipeline_add_last(ch, "time-encoder", &time_encoder, NULL);
}

/* ---- The server ---------------------------------------------------------- */

static uint64_t
now_ms(void)
{
	struct timespec ts;

	timespec_get(&ts, TIME_UTC);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void
on_time_written(weft_channel *ch, int status, void *arg)
{
	(void)status;
	(void)arg;
	weft_channel_close(ch);
}

/* A new connection: write the time, close once it has left. */
static void
server_active(weft_ctx *ctx)
{
	struct time_msg *t = malloc(sizeof(*t));

	if (t == NULL) {
		weft_ctx_close(ctx);
		return;
	}
	t->ms = now_ms();
	weft_ctx_write(ctx, &time_msg_type, t, on_time_written, NULL);
	weft_ctx_flush(ctx);
}

static const weft_handler server_handler = {.active = server_active};

static int
server_init(weft_channel *ch, void *arg)
{
	int rv = time_codec_add(ch);

	(void)arg;
	return rv ? rv
	          : weft_pipeline_add_last(ch, "app", &server_handler, NULL);
}

/* Serves on one loop, on this thread, until the process is killed (the
 * echo server shows a graceful stop). */
static int
serve(const char *address)
{
	weft_server_opts opts = {.address = address, .init = server_init};
	weft_loop *loop;
	weft_server *srv;
	int rv;

	if ((rv = weft_loop_new(&loop)) != 0)
		return rv;
	if ((rv = weft_server_new_on_loop(loop, &opts, &srv)) != 0) {
		weft_loop_free(loop);
		return rv;
	}
	printf("time server listening on %s\n", weft_server_address(srv));
	fflush(stdout);
	weft_loop_run(loop); /* until killed */
	weft_server_close(srv, NULL, NULL);
	weft_loop_free(loop);
	return 0;
}

/* ---- The client ---------------------------------------------------------- */

struct client {
	uint64_t ms;
	bool done;
};

static void
client_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct client *c = weft_ctx_state(ctx);

	if (type == &time_msg_type) {
		c->ms = ((struct time_msg *)msg)->ms;
		c->done = true;
	}
	weft_msg_free(type, msg); /* the last handler frees what it got */
	weft_ctx_close(ctx);
}

static void
client_inactive(weft_ctx *ctx)
{
	((struct client *)weft_ctx_state(ctx))->done = true;
	weft_ctx_fire_inactive(ctx);
}

static const weft_handler client_handler = {
    .read = client_read,
    .inactive = client_inactive,
};

static int
client_init(weft_channel *ch, void *arg)
{
	int rv = time_codec_add(ch);

	return rv ? rv
	          : weft_pipeline_add_last(ch, "app", &client_handler, arg);
}

static void
on_connect(weft_channel *ch, int status, void *arg)
{
	(void)ch;
	if (status != 0) {
		fprintf(stderr, "time: connect: %s\n", weft_strerror(status));
		((struct client *)arg)->done = true;
	}
}

static bool
client_done(void *arg)
{
	return ((struct client *)arg)->done;
}

static int
ask(const char *address)
{
	struct client c = {0};
	weft_connect_opts opts = {.init = client_init, .init_arg = &c};
	weft_loop *loop;
	char when[32];
	time_t secs;
	int rv;

	if ((rv = weft_loop_new(&loop)) != 0)
		return rv;
	if ((rv = weft_connect(loop, address, &opts, on_connect, &c)) == 0)
		rv = weft_loop_run_until(loop, client_done, &c, 10000);
	weft_loop_free(loop);
	if (rv != 0 || c.ms == 0)
		return rv ? rv : WEFT_ECLOSED;
	secs = (time_t)(c.ms / 1000);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime(&secs));
	printf("time: %llu ms since the epoch (%s)\n", (unsigned long long)c.ms,
	       when);
	return 0;
}

int
main(int argc, char **argv)
{
	int rv;

	if (argc != 3 ||
	    (strcmp(argv[1], "serve") != 0 && strcmp(argv[1], "ask") != 0)) {
		fprintf(stderr,
		        "usage: time serve ADDRESS | time ask ADDRESS\n");
		return 2;
	}
	rv = strcmp(argv[1], "serve") == 0 ? serve(argv[2]) : ask(argv[2]);
	if (rv != 0) {
		fprintf(stderr, "time: %s\n", weft_strerror(rv));
		return 1;
	}
	return 0;
}
