/* SPDX-License-Identifier: MIT */
/*
 * discard [ADDRESS]: the guide's first step (docs/GUIDE.md). A server that
 * reads everything its clients send and throws it away, saying how much
 * each connection sent when it closes.
 *
 * A weft server is a pipeline per connection: here a single handler. The
 * server calls init_channel for every connection it accepts, on the loop
 * that will own the connection for its whole life.
 */
#define _POSIX_C_SOURCE 200809L /* sigwait, pthread_sigmask */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/buffer.h>
#include <weft/loop.h>
#include <weft/transport.h>

/* One per connection: what it sent. */
struct discard {
	unsigned long long bytes;
};

/* msg is the bytes read, borrowed for this call: draining them is all it
 * takes to throw them away. */
static void
discard_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct discard *d = weft_ctx_state(ctx);

	(void)type;
	d->bytes += evbuffer_get_length(msg);
	evbuffer_drain(msg, evbuffer_get_length(msg));
}

static void
discard_inactive(weft_ctx *ctx)
{
	struct discard *d = weft_ctx_state(ctx);

	printf("discarded %llu bytes from %s\n", d->bytes,
	       weft_channel_peer(weft_ctx_channel(ctx)));
	fflush(stdout);
	weft_ctx_fire_inactive(ctx);
}

/* The handler leaves the pipeline when the channel is torn down: the
 * place to free its state. */
static void
discard_removed(weft_ctx *ctx)
{
	free(weft_ctx_state(ctx));
}

static const weft_handler discard_handler = {
    .read = discard_read,
    .inactive = discard_inactive,
    .removed = discard_removed,
};

static int
init_channel(weft_channel *ch, void *arg)
{
	struct discard *d = calloc(1, sizeof(*d));
	int rv;

	(void)arg;
	if (d == NULL)
		return WEFT_ENOMEM;
	if ((rv = weft_pipeline_add_last(ch, "discard", &discard_handler, d)))
		free(d);
	return rv;
}

int
main(int argc, char **argv)
{
	weft_server_opts opts = {.init = init_channel};
	weft_loop_group *group;
	weft_server *srv;
	sigset_t sigs;
	int rv, sig;

	opts.address = argc > 1 ? argv[1] : "127.0.0.1:7000";
	/* Block the signals before the loops' threads start, so that they
	 * inherit the mask and only sigwait below sees them. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	if ((rv = weft_loop_group_new(0, &group)) != 0)
		goto err;
	if ((rv = weft_server_new(group, &opts, &srv)) != 0)
		goto err_free_group;
	printf("discard server listening on %s\n", weft_server_address(srv));
	fflush(stdout);
	sigwait(&sigs, &sig);
	weft_server_close(srv, NULL, NULL);
	weft_loop_group_shutdown(group, 1000);
	weft_loop_group_free(group);
	return 0;

err_free_group:
	weft_loop_group_free(group);
err:
	fprintf(stderr, "discard: %s\n", weft_strerror(rv));
	return 1;
}
