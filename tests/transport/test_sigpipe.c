/* SPDX-License-Identifier: MIT */
/*
 * test_sigpipe.c: the library leaves SIGPIPE as the program set it, and a
 * socket channel whose peer went away under a write ends with an error,
 * not a signal, with SIGPIPE at its default.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/channel.h>
#include <weft/loop.h>
#include <weft/transport.h>

struct scene {
	int inactive;
	int write_cbs;
	int write_status;
};

static void
on_inactive(weft_ctx *ctx)
{
	struct scene *sc = weft_ctx_state(ctx);

	sc->inactive++;
	weft_ctx_fire_inactive(ctx);
}

static void
on_error(weft_ctx *ctx, int status)
{
	(void)ctx;
	(void)status;
}

static const weft_handler watcher = {
    .error = on_error,
    .inactive = on_inactive,
};

static void
on_written(weft_channel *ch, int status, void *arg)
{
	struct scene *sc = arg;

	(void)ch;
	sc->write_cbs++;
	sc->write_status = status;
}

static bool
ended(void *arg)
{
	struct scene *sc = arg;

	return sc->inactive > 0 && sc->write_cbs > 0;
}

static void
handler_at(int sig, struct sigaction *out)
{
	assert_int_equal(sigaction(sig, NULL, out), 0);
}

/* Making a loop (weft_init) changes no signal disposition. */
static void
test_the_library_leaves_sigpipe_alone(void **state)
{
	struct sigaction sa;
	weft_loop *loop;

	(void)state;
	signal(SIGPIPE, SIG_DFL);
	assert_int_equal(weft_init(), 0);
	assert_int_equal(weft_loop_new(&loop), 0);
	handler_at(SIGPIPE, &sa);
	assert_true(sa.sa_handler == SIG_DFL);
	weft_loop_free(loop);
}

/* A peer that closed: the writes fail, the channel closes, the process
 * lives on. */
static void
test_a_write_to_a_gone_peer_is_an_error(void **state)
{
	static char bytes[1 << 20];
	struct scene sc = {0};
	struct evbuffer *b = evbuffer_new();
	weft_channel *ch;
	weft_loop *loop;
	int sv[2];

	(void)state;
	signal(SIGPIPE, SIG_DFL);
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	assert_int_equal(weft_channel_new_socket(loop, sv[0], NULL, &ch), 0);
	assert_int_equal(weft_pipeline_add_last(ch, "watcher", &watcher, &sc),
	                 0);
	weft_channel_activate(ch);
	close(sv[1]);
	evbuffer_add(b, bytes, sizeof(bytes));
	assert_int_equal(weft_channel_write(ch, b, on_written, &sc), 0);
	assert_int_equal(weft_loop_run_until(loop, ended, &sc, 5000), 0);
	assert_int_equal(sc.write_cbs, 1);
	assert_true(sc.write_status < 0);
	evbuffer_free(b);
	weft_loop_free(loop);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_the_library_leaves_sigpipe_alone),
	    cmocka_unit_test(test_a_write_to_a_gone_peer_is_an_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
