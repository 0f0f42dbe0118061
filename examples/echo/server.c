/* SPDX-License-Identifier: MIT */
/*
 * echo-server [ADDRESS]: sends every frame back to the client that sent it.
 * The guide's second step (docs/GUIDE.md), with echo-client.
 *
 * A weft service is a pipeline per connection: the frame codec turns bytes
 * into messages and back, and a handler does the work. The server runs on
 * a loop group (one loop per core) and calls init_channel for every
 * connection it accepts, on the loop that will own that connection.
 */
#define _POSIX_C_SOURCE 200809L /* sigwait, pthread_sigmask */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

#include <weft/frame.h>
#include <weft/loop.h>
#include <weft/transport.h>

/* msg is the frame's payload, borrowed for this call: writing it moves its
 * bytes out into the reply, so nothing is copied or freed here. */
static void
echo_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	weft_ctx_write(ctx, type, msg, NULL, NULL);
}

/* One flush per batch of frames read: one write system call for all. */
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
init_channel(weft_channel *ch, void *arg)
{
	int rv = weft_frame_codec_add(ch, "frame", NULL);

	(void)arg;
	if (rv == 0)
		rv = weft_pipeline_add_last(ch, "echo", &echo_handler, NULL);
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
	printf("echo server listening on %s\n", weft_server_address(srv));
	fflush(stdout);
	sigwait(&sigs, &sig);
	weft_server_close(srv, NULL, NULL);
	weft_loop_group_shutdown(group, 1000);
	weft_loop_group_free(group);
	return 0;

err_free_group:
	weft_loop_group_free(group);
err:
	fprintf(stderr, "echo-server: %s\n", weft_strerror(rv));
	return 1;
}
