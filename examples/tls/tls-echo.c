/* SPDX-License-Identifier: MIT */
/*
 * tls-echo serve ADDRESS CERTS | tls-echo ask ADDRESS CERTS: the guide's
 * fifth step (docs/GUIDE.md), the echo of step two over mutual TLS. CERTS
 * is a directory that weft-gen-certs made (`weft-gen-certs CERTS server
 * --client client`): the server presents server.crt, the client
 * client.crt, and each accepts only certificates of CERTS/ca.crt.
 *
 * TLS is a property of the transport: a weft_tls_ctx given to the server
 * and to the connect makes their channels TLS, and the pipeline is the
 * same as without it (the frame codec, then the application), seeing
 * plaintext.
 */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <weft/frame.h>
#include <weft/loop.h>
#include <weft/tls.h>
#include <weft/transport.h>

/* CERTS/NAME.crt, CERTS/NAME.key and CERTS/ca.crt. */
static int
tls_ctx(const char *dir, const char *name, weft_tls_ctx **out)
{
	char cert[512], key[512], ca[512];
	weft_tls_opts opts = {
	    .cert_file = cert, .key_file = key, .ca_file = ca};

	snprintf(cert, sizeof(cert), "%s/%s.crt", dir, name);
	snprintf(key, sizeof(key), "%s/%s.key", dir, name);
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
	return weft_tls_ctx_new(&opts, out);
}

/* ---- The server: step two's echo ------------------------------------- */

static void
echo_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	weft_ctx_write(ctx, type, msg, NULL, NULL);
}

static void
echo_read_complete(weft_ctx *ctx)
{
	weft_ctx_flush(ctx);
}

static const weft_handler echo_handler = {
    .read = echo_read,
    .read_complete = echo_read_complete,
};

static int
server_init(weft_channel *ch, void *arg)
{
	int rv = weft_frame_codec_add(ch, "frame", NULL);

	(void)arg;
	return rv ? rv
	          : weft_pipeline_add_last(ch, "echo", &echo_handler, NULL);
}

static int
serve(const char *address, weft_tls_ctx *tls)
{
	weft_server_opts opts = {
	    .address = address, .init = server_init, .tls = tls};
	weft_loop *loop;
	weft_server *srv;
	int rv;

	if ((rv = weft_loop_new(&loop)) != 0)
		return rv;
	if ((rv = weft_server_new_on_loop(loop, &opts, &srv)) != 0) {
		weft_loop_free(loop);
		return rv;
	}
	printf("TLS echo server listening on %s\n", weft_server_address(srv));
	fflush(stdout);
	weft_loop_run(loop); /* until killed */
	weft_server_close(srv, NULL, NULL);
	weft_loop_free(loop);
	return 0;
}

/* ---- The client -------------------------------------------------------- */

#define GREETING "hello over TLS"

struct client {
	int status; /* 1 while running */
	char echo[64];
};

/* Active comes once the handshake is done: the peer is known. */
static void
client_active(weft_ctx *ctx)
{
	weft_channel *ch = weft_ctx_channel(ctx);
	struct evbuffer *msg = evbuffer_new();
	char who[128] = "?";
	weft_tls_info info = {0};

	weft_tls_peer_identity(ch, who, sizeof(who));
	weft_tls_get_info(ch, &info);
	printf("connected to %s over %s (%s)\n", who, info.version,
	       info.cipher);
	evbuffer_add(msg, GREETING, strlen(GREETING));
	weft_ctx_write(ctx, &weft_msg_evbuffer, msg, NULL, NULL);
	weft_ctx_flush(ctx);
	evbuffer_free(msg);
}

static void
client_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct client *c = weft_ctx_state(ctx);
	size_t n = weft_msg_length(type, msg);

	if (n >= sizeof(c->echo))
		n = sizeof(c->echo) - 1;
	weft_msg_copyout(type, msg, c->echo, n);
	c->echo[n] = '\0';
	c->status = strcmp(c->echo, GREETING) == 0 ? 0 : WEFT_EPROTO;
	weft_ctx_close(ctx);
}

static void
client_inactive(weft_ctx *ctx)
{
	struct client *c = weft_ctx_state(ctx);

	if (c->status == 1)
		c->status = WEFT_ECLOSED;
	weft_ctx_fire_inactive(ctx);
}

static const weft_handler client_handler = {
    .active = client_active,
    .read = client_read,
    .inactive = client_inactive,
};

static int
client_init(weft_channel *ch, void *arg)
{
	int rv = weft_frame_codec_add(ch, "frame", NULL);

	return rv ? rv
	          : weft_pipeline_add_last(ch, "app", &client_handler, arg);
}

static void
on_connect(weft_channel *ch, int status, void *arg)
{
	(void)ch;
	if (status != 0)
		((struct client *)arg)->status = status;
}

static bool
client_done(void *arg)
{
	return ((struct client *)arg)->status != 1;
}

static int
ask(const char *address, weft_tls_ctx *tls)
{
	struct client c = {.status = 1};
	/* The certificate must name "server", whatever the address. */
	weft_connect_opts opts = {.init = client_init,
	                          .init_arg = &c,
	                          .tls = tls,
	                          .server_name = "server"};
	weft_loop *loop;
	int rv;

	if ((rv = weft_loop_new(&loop)) != 0)
		return rv;
	if ((rv = weft_connect(loop, address, &opts, on_connect, &c)) == 0)
		rv = weft_loop_run_until(loop, client_done, &c, 10000);
	weft_loop_free(loop);
	if (rv == 0 && c.status == 0)
		printf("echo: %s\n", c.echo);
	return rv ? rv : c.status;
}

int
main(int argc, char **argv)
{
	weft_tls_ctx *tls;
	bool server;
	int rv;

	if (argc != 4 ||
	    (strcmp(argv[1], "serve") != 0 && strcmp(argv[1], "ask") != 0)) {
		fprintf(stderr, "usage: tls-echo serve|ask ADDRESS CERTS\n");
		return 2;
	}
	server = strcmp(argv[1], "serve") == 0;
	if ((rv = tls_ctx(argv[3], server ? "server" : "client", &tls)) != 0) {
		fprintf(stderr, "tls-echo: %s: %s\n", argv[3],
		        weft_strerror(rv));
		return 78;
	}
	rv = server ? serve(argv[2], tls) : ask(argv[2], tls);
	/* Channels hold their own reference; drop ours. */
	weft_tls_ctx_unref(tls);
	if (rv != 0) {
		fprintf(stderr, "tls-echo: %s\n", weft_strerror(rv));
		return 1;
	}
	return 0;
}
