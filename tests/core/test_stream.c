/* SPDX-License-Identifier: MIT */
/*
 * test_stream.c: a channel over a stream of the test's own (weft/stream.h),
 * as a user's transport would make one: bytes both ways, a full stream,
 * and a stream that fails while the channel lingers in a close.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/channel.h>
#include <weft/loop.h>
#include <weft/stream.h>

#include "support/wait.h"

/* A stream in memory: what the test puts in wire_in is read, what the
 * channel writes goes to wire_out while room allows. */
struct mem_stream {
	weft_stream base;
	struct evbuffer *wire_in;
	struct evbuffer *wire_out;
	size_t room; /* bytes write may still take */
	int status;  /* returned by read once wire_in is empty */
	bool reading, writing;
	int closes;
	bool graceful;
	weft_task ready_task;
	unsigned ready_events;
};

struct scene {
	weft_loop *loop;
	struct mem_stream *ms;
	weft_channel *ch;
	struct evbuffer *got;
	int write_cbs;
	int write_status;
	int inactive;
	int closes; /* copied from the stream as it goes */
	bool graceful;
};

static struct scene *the_scene;

static ssize_t
mem_read(weft_stream *base, struct evbuffer *in, size_t max)
{
	struct mem_stream *s = (struct mem_stream *)base;
	size_t n = evbuffer_get_length(s->wire_in);

	if (n == 0)
		return s->status;
	if (n > max)
		n = max;
	evbuffer_remove_buffer(s->wire_in, in, n);
	return (ssize_t)n;
}

static ssize_t
mem_write(weft_stream *base, struct evbuffer *out)
{
	struct mem_stream *s = (struct mem_stream *)base;
	size_t n = evbuffer_get_length(out);

	if (s->status < 0 && s->status != WEFT_ECLOSED)
		return s->status;
	if (n > s->room)
		n = s->room;
	s->room -= n;
	evbuffer_remove_buffer(out, s->wire_out, n);
	return (ssize_t)n;
}

static void
mem_watch(weft_stream *base, bool read, bool write)
{
	struct mem_stream *s = (struct mem_stream *)base;

	s->reading = read;
	s->writing = write;
}

static void
mem_close(weft_stream *base, bool graceful)
{
	struct mem_stream *s = (struct mem_stream *)base;

	the_scene->closes++;
	the_scene->graceful = graceful;
	the_scene->ms = NULL;
	evbuffer_free(s->wire_in);
	evbuffer_free(s->wire_out);
	free(s);
}

static const weft_stream_ops mem_ops = {
    .name = "memory",
    .read = mem_read,
    .write = mem_write,
    .watch = mem_watch,
    .close = mem_close,
};

/* What an event callback of the stream's would do: tell the channel. */
static void
run_ready(weft_loop *loop, int status, void *arg)
{
	struct mem_stream *s = arg;

	(void)loop;
	if (status == 0)
		weft_stream_ready(&s->base, s->ready_events);
}

static void
announce(struct mem_stream *s, unsigned events)
{
	s->ready_events = events;
	s->ready_task = (weft_task){.cb = run_ready, .arg = s};
	assert_int_equal(weft_loop_post_task(the_scene->loop, &s->ready_task),
	                 0);
}

static void
h_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct scene *sc = weft_ctx_state(ctx);

	assert_ptr_equal(type, &weft_msg_evbuffer);
	evbuffer_add_buffer(sc->got, msg);
}

static void
h_inactive(weft_ctx *ctx)
{
	struct scene *sc = weft_ctx_state(ctx);

	sc->inactive++;
	weft_ctx_fire_inactive(ctx);
}

static void
h_error(weft_ctx *ctx, int status)
{
	(void)ctx;
	(void)status;
}

static const weft_handler recorder = {
    .read = h_read,
    .error = h_error,
    .inactive = h_inactive,
};

static void
on_written(weft_channel *ch, int status, void *arg)
{
	struct scene *sc = arg;

	(void)ch;
	sc->write_cbs++;
	sc->write_status = status;
}

/* Runs the loop for ms, whatever happens. */
static void
spin(struct scene *sc, uint64_t ms)
{
	weft_loop_run_until(sc->loop, weft_test_never, NULL, ms);
}

/* Makes the scene's stream and channel on loop (its thread). */
static void
scene_make(struct scene *sc, weft_loop *loop)
{
	weft_channel_opts o = {.linger_ms = 60000};

	sc->loop = loop;
	sc->got = evbuffer_new();
	sc->ms = calloc(1, sizeof(*sc->ms));
	assert_non_null(sc->ms);
	sc->ms->base.ops = &mem_ops;
	sc->ms->wire_in = evbuffer_new();
	sc->ms->wire_out = evbuffer_new();
	sc->ms->room = SIZE_MAX;
	the_scene = sc;
	assert_int_equal(
	    weft_channel_new_stream(loop, &sc->ms->base, &o, &sc->ch), 0);
	weft_channel_ref(sc->ch);
	assert_int_equal(
	    weft_pipeline_add_last(sc->ch, "recorder", &recorder, sc), 0);
	weft_channel_activate(sc->ch);
}

static int
setup(void **state)
{
	struct scene *sc = calloc(1, sizeof(*sc));
	weft_loop *loop;

	assert_non_null(sc);
	assert_int_equal(weft_loop_new(&loop), 0);
	scene_make(sc, loop);
	*state = sc;
	return 0;
}

static int
teardown(void **state)
{
	struct scene *sc = *state;

	if (weft_channel_is_open(sc->ch))
		weft_channel_close(sc->ch);
	spin(sc, 50);
	weft_channel_unref(sc->ch);
	weft_loop_free(sc->loop);
	evbuffer_free(sc->got);
	free(sc);
	return 0;
}

static bool
is_inactive(void *arg)
{
	return ((struct scene *)arg)->inactive > 0;
}

static bool
got_bytes(void *arg)
{
	return evbuffer_get_length(((struct scene *)arg)->got) >= 5;
}

static bool
write_done(void *arg)
{
	return ((struct scene *)arg)->write_cbs > 0;
}

/* Bytes both ways, each write's callback once, a graceful close. */
static void
test_bytes_both_ways(void **state)
{
	struct scene *sc = *state;
	struct evbuffer *b = evbuffer_new();

	assert_true(sc->ms->reading);
	evbuffer_add(sc->ms->wire_in, "hello", 5);
	announce(sc->ms, WEFT_STREAM_READABLE);
	assert_int_equal(weft_loop_run_until(sc->loop, got_bytes, sc, 5000), 0);
	assert_int_equal(evbuffer_get_length(sc->got), 5);

	evbuffer_add(b, "world", 5);
	assert_int_equal(weft_channel_write(sc->ch, b, on_written, sc), 0);
	assert_int_equal(weft_loop_run_until(sc->loop, write_done, sc, 5000),
	                 0);
	assert_int_equal(sc->write_status, 0);
	assert_int_equal(evbuffer_get_length(sc->ms->wire_out), 5);

	weft_channel_close(sc->ch);
	assert_int_equal(weft_loop_run_until(sc->loop, is_inactive, sc, 5000),
	                 0);
	assert_int_equal(sc->closes, 1);
	assert_true(sc->graceful);
	assert_int_equal(sc->write_cbs, 1);
	evbuffer_free(b);
}

/* A full stream keeps the bytes; WRITABLE lets them go. */
static void
test_full_stream_waits_for_writable(void **state)
{
	struct scene *sc = *state;
	struct evbuffer *b = evbuffer_new();

	sc->ms->room = 2;
	evbuffer_add(b, "abcdef", 6);
	assert_int_equal(weft_channel_write(sc->ch, b, on_written, sc), 0);
	spin(sc, 20);
	assert_int_equal(sc->write_cbs, 0);
	assert_true(sc->ms->writing);
	assert_int_equal(weft_channel_pending_write_bytes(sc->ch), 4);
	sc->ms->room = SIZE_MAX;
	announce(sc->ms, WEFT_STREAM_WRITABLE);
	assert_int_equal(weft_loop_run_until(sc->loop, write_done, sc, 5000),
	                 0);
	assert_int_equal(sc->write_status, 0);
	assert_int_equal(evbuffer_get_length(sc->ms->wire_out), 6);
	evbuffer_free(b);
}

/*
 * A close that lingers for unsent bytes ends as soon as the stream says
 * it failed or ended, not at the end of the linger: a channel that is not
 * reading still hears its stream's end (regression: a TLS server whose
 * client had gone kept the connection for the whole linger).
 */
static void
fails_while_lingering(struct scene *sc, int status)
{
	struct evbuffer *b = evbuffer_new();

	sc->ms->room = 0;
	evbuffer_add(b, "unsent", 6);
	assert_int_equal(weft_channel_write(sc->ch, b, on_written, sc), 0);
	weft_channel_close(sc->ch);
	spin(sc, 20);
	assert_int_equal(sc->inactive, 0); /* lingering */
	assert_false(sc->ms->reading);
	sc->ms->status = status;
	announce(sc->ms, WEFT_STREAM_READABLE);
	assert_int_equal(weft_loop_run_until(sc->loop, is_inactive, sc, 5000),
	                 0);
	assert_int_equal(sc->write_cbs, 1);
	assert_true(sc->write_status < 0);
	assert_int_equal(sc->closes, 1);
	assert_false(sc->graceful);
	evbuffer_free(b);
}

static void
test_error_while_lingering_ends_the_close(void **state)
{
	fails_while_lingering(*state, WEFT_EIO);
}

static void
test_end_while_lingering_ends_the_close(void **state)
{
	fails_while_lingering(*state, WEFT_ECLOSED);
}

/* ---- A write while a callback is owed --------------------------------- */

struct owed {
	struct scene *sc;
	size_t out_after;
	int cbs_after;
};

static void
write_two(weft_loop *loop, int status, void *arg)
{
	struct owed *w = arg;
	struct evbuffer *a = evbuffer_new(), *b = evbuffer_new();

	(void)loop;
	(void)status;
	evbuffer_add(a, "first", 5);
	evbuffer_add(b, "later", 5);
	assert_int_equal(weft_channel_write(w->sc->ch, a, on_written, w->sc),
	                 0);
	/* The first write's callback is owed now, not run: the second
	 * still goes to the stream at once. */
	assert_int_equal(weft_channel_write(w->sc->ch, b, on_written, w->sc),
	                 0);
	w->out_after = evbuffer_get_length(w->sc->ms->wire_out);
	w->cbs_after = w->sc->write_cbs;
	evbuffer_free(a);
	evbuffer_free(b);
}

static bool
two_done(void *arg)
{
	return ((struct scene *)arg)->write_cbs == 2;
}

static void
test_a_write_goes_at_once_while_a_callback_is_owed(void **state)
{
	struct scene *sc = *state;
	struct owed w = {.sc = sc};

	assert_int_equal(weft_loop_post(sc->loop, write_two, &w), 0);
	assert_int_equal(weft_loop_run_until(sc->loop, two_done, sc, 5000), 0);
	assert_int_equal(w.out_after, 10);
	assert_int_equal(w.cbs_after, 0);
	assert_int_equal(sc->write_status, 0);
}

/* ---- Writes from another thread into a channel that dies --------------- */

#define XWRITES 2000

static _Atomic int xcalls[XWRITES];
static bool xaccepted[XWRITES];
static _Atomic int xcallbacks;

static void
on_xwritten(weft_channel *ch, int status, void *arg)
{
	(void)ch;
	(void)status;
	atomic_fetch_add(&xcalls[(uintptr_t)arg], 1);
	atomic_fetch_add(&xcallbacks, 1);
}

static _Atomic bool scene_ready;

static void
make_on_loop(weft_loop *loop, int status, void *arg)
{
	(void)status;
	scene_make(arg, loop);
	atomic_store(&scene_ready, true);
}

/* The stream takes nothing more: writes queue in the channel. */
static void
fill_on_loop(weft_loop *loop, int status, void *arg)
{
	(void)loop;
	(void)status;
	((struct scene *)arg)->ms->room = 0;
}

static void
fail_on_loop(weft_loop *loop, int status, void *arg)
{
	struct scene *sc = arg;

	(void)loop;
	(void)status;
	sc->ms->status = WEFT_EIO;
	weft_stream_ready(&sc->ms->base, WEFT_STREAM_READABLE);
}

static void
free_on_loop(weft_loop *loop, int status, void *arg)
{
	struct scene *sc = arg;

	(void)loop;
	(void)status;
	weft_channel_unref(sc->ch);
	evbuffer_free(sc->got);
	sc->got = NULL;
}

/*
 * A writer thread's writes are queued in the channel's inbox while the
 * stream takes nothing; the stream then fails: every write the channel
 * accepted gets its callback exactly once, and every write it refused
 * none.
 */
static void
test_callbacks_once_when_a_channel_dies_under_cross_thread_writes(void **state)
{
	struct scene *sc;
	weft_loop *loop;
	char byte = 'x';
	int i, accepted = 0, rv;

	(void)state;
	atomic_store(&xcallbacks, 0);
	for (i = 0; i < XWRITES; i++)
		atomic_store(&xcalls[i], 0);
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(weft_loop_start(loop), 0);
	/* The scene lives on a loop of its own thread here. */
	sc = calloc(1, sizeof(*sc));
	assert_non_null(sc);
	atomic_store(&scene_ready, false);
	assert_int_equal(weft_loop_post(loop, make_on_loop, sc), 0);
	while (!atomic_load(&scene_ready))
		usleep(1000);
	assert_int_equal(weft_loop_post(loop, fill_on_loop, sc), 0);
	for (i = 0; i < XWRITES; i++) {
		struct evbuffer *b = evbuffer_new();

		evbuffer_add(b, &byte, 1);
		if (i == XWRITES / 2)
			assert_int_equal(weft_loop_post(loop, fail_on_loop, sc),
			                 0);
		rv = weft_channel_write(sc->ch, b, on_xwritten,
		                        (void *)(uintptr_t)i);
		xaccepted[i] = rv == 0;
		accepted += rv == 0;
		evbuffer_free(b);
	}
	for (i = 0; i < 5000 && atomic_load(&xcallbacks) < accepted; i++)
		usleep(1000);
	assert_int_equal(atomic_load(&xcallbacks), accepted);
	assert_true(accepted >= XWRITES / 2);
	assert_int_equal(weft_loop_post(loop, free_on_loop, sc), 0);
	weft_loop_stop(loop);
	weft_loop_join(loop);
	weft_loop_free(loop);
	for (i = 0; i < XWRITES; i++)
		assert_int_equal(atomic_load(&xcalls[i]), xaccepted[i] ? 1 : 0);
	assert_int_equal(sc->inactive, 1);
	free(sc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_bytes_both_ways, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_full_stream_waits_for_writable,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_error_while_lingering_ends_the_close, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_end_while_lingering_ends_the_close, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_a_write_goes_at_once_while_a_callback_is_owed, setup,
	        teardown),
	    cmocka_unit_test(
	        test_callbacks_once_when_a_channel_dies_under_cross_thread_writes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
