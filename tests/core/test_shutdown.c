/* SPDX-License-Identifier: MIT */
/* test_shutdown.c: graceful loop shutdown with writes still pending. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <weft/channel.h>
#include <weft/transport.h>

#define PAYLOAD (1u << 20)

struct scene {
	bool peer_reads;
	struct bufferevent *peer;
	size_t peer_got;
	int write_cbs;
	int write_status;
	int inactive;
	int hook_runs;
};

static void
peer_read(struct bufferevent *bev, void *arg)
{
	struct scene *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	s->peer_got += evbuffer_get_length(in);
	evbuffer_drain(in, evbuffer_get_length(in));
}

static void
on_written(weft_channel *ch, int status, void *arg)
{
	struct scene *s = arg;

	(void)ch;
	s->write_cbs++;
	s->write_status = status;
}

static void
on_inactive(weft_ctx *ctx)
{
	struct scene *s = weft_ctx_state(ctx);

	s->inactive++;
	weft_ctx_fire_inactive(ctx);
}

static const weft_handler watch = {.inactive = on_inactive};

static void
on_hook(weft_loop *loop, uint64_t deadline_ns, void *arg)
{
	struct scene *s = arg;

	(void)loop;
	assert_true(deadline_ns > weft_now_ns());
	s->hook_runs++;
}

static void
set_up_scene(weft_loop *loop, int status, void *arg)
{
	struct scene *s = arg;
	struct bufferevent *pair[2];
	struct evbuffer *buf = evbuffer_new();
	weft_channel *ch;
	char *bytes = calloc(1, PAYLOAD);

	assert_int_equal(status, 0);
	assert_int_equal(bufferevent_pair_new(weft_loop_base(loop),
	                                      BEV_OPT_CLOSE_ON_FREE, pair),
	                 0);
	s->peer = pair[1];
	bufferevent_setcb(s->peer, peer_read, NULL, NULL, s);
	if (s->peer_reads)
		bufferevent_enable(s->peer, EV_READ);
	else
		bufferevent_disable(s->peer, EV_READ);
	assert_int_equal(weft_channel_new(loop, pair[0], NULL, &ch), 0);
	assert_int_equal(weft_pipeline_add_last(ch, "watch", &watch, s), 0);
	weft_channel_activate(ch);
	assert_int_equal(weft_loop_on_shutdown(loop, on_hook, s), 0);
	evbuffer_add(buf, bytes, PAYLOAD);
	assert_int_equal(weft_channel_write(ch, buf, on_written, s), 0);
	evbuffer_free(buf);
	free(bytes);
}

static void
run_scene(struct scene *s)
{
	weft_loop *loop;

	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(weft_loop_start(loop), 0);
	assert_int_equal(weft_loop_post(loop, set_up_scene, s), 0);
	weft_loop_shutdown(loop, 300);
	weft_loop_join(loop);
	/* The loop is idle now: this thread may touch its objects. */
	bufferevent_free(s->peer);
	weft_loop_free(loop);
}

static void
test_shutdown_delivers_pending_writes_before_closing(void **state)
{
	struct scene s = {.peer_reads = true};

	(void)state;
	run_scene(&s);
	assert_int_equal(s.hook_runs, 1);
	assert_int_equal(s.peer_got, PAYLOAD);
	assert_int_equal(s.write_cbs, 1);
	assert_int_equal(s.write_status, 0);
	assert_int_equal(s.inactive, 1);
}

static void
test_shutdown_deadline_fails_writes_a_stalled_peer_never_took(void **state)
{
	struct scene s = {.peer_reads = false};

	(void)state;
	run_scene(&s);
	assert_int_equal(s.hook_runs, 1);
	assert_int_equal(s.peer_got, 0);
	assert_int_equal(s.write_cbs, 1);
	assert_int_equal(s.write_status, WEFT_ECLOSED);
	assert_int_equal(s.inactive, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
	        test_shutdown_delivers_pending_writes_before_closing),
	    cmocka_unit_test(
	        test_shutdown_deadline_fails_writes_a_stalled_peer_never_took),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
