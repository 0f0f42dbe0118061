/* SPDX-License-Identifier: MIT */
/*
 * test_inproc.c: the in-process channel pair: echo, EOF on close, water
 * marks and back-pressure, init failures.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "echo.h"
#include "support/wait.h"

#define DEADLINE_MS 20000

static bool
server_inactive(void *arg)
{
	return atomic_load(&((echo_server *)arg)->inactive) > 0;
}

static void
test_inproc_echo_100k_messages(void **state)
{
	echo_server es = {0};
	echo_client c = {.msgs_total = 100000};
	weft_channel *a, *b;

	(void)state;
	assert_int_equal(weft_inproc_pair(echo_loop, NULL, echo_client_init, &c,
	                                  echo_server_init, &es, &a, &b),
	                 0);
	assert_true(c.active);
	assert_string_equal(weft_channel_peer(a), "inproc");
	assert_string_equal(weft_channel_peer(b), "inproc");
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_client_done, &c, DEADLINE_MS),
	    0);
	assert_false(c.inactive);
	assert_int_equal(c.msgs_sent, 100000);
	assert_int_equal(c.bytes_recv, c.bytes_sent);
	assert_int_equal(c.mismatches, 0);
	/* Closing one end is EOF for the other. */
	weft_channel_close(a);
	assert_int_equal(
	    weft_test_run_until(echo_loop, server_inactive, &es, DEADLINE_MS),
	    0);
	assert_true(c.inactive);
}

static void
test_close_delivers_what_was_written_first(void **state)
{
	echo_sink sink = {0};
	struct evbuffer *buf = evbuffer_new();
	weft_channel *a, *b;
	uint8_t bytes[1000];
	size_t i;

	(void)state;
	assert_int_equal(weft_inproc_pair(echo_loop, NULL, NULL, NULL,
	                                  echo_sink_init, &sink, &a, &b),
	                 0);
	for (i = 0; i < sizeof(bytes); i++)
		bytes[i] = echo_pattern(i);
	evbuffer_add(buf, bytes, sizeof(bytes));
	assert_int_equal(weft_channel_write(a, buf, NULL, NULL), 0);
	weft_channel_close(a);
	assert_int_equal(weft_test_run_until(echo_loop, weft_test_flag_set,
	                                     &sink.inactive, DEADLINE_MS),
	                 0);
	assert_int_equal(sink.bytes, sizeof(bytes));
	assert_int_equal(sink.mismatches, 0);
	evbuffer_free(buf);
}

typedef struct writer {
	int unwritable;
	int writable;
	echo_result write; /* of the one big write */
} writer;

static void
writer_writability(weft_ctx *ctx, bool writable)
{
	writer *w = weft_ctx_state(ctx);

	if (writable)
		w->writable++;
	else
		w->unwritable++;
	weft_ctx_fire_writability_changed(ctx, writable);
}

static const weft_handler writer_handler = {
    .writability_changed = writer_writability,
};

static int
writer_init(weft_channel *ch, void *arg)
{
	return weft_pipeline_add_last(ch, "writer", &writer_handler, arg);
}

static bool
became_writable(void *arg)
{
	return ((writer *)arg)->writable > 0;
}

typedef struct both {
	writer *w;
	echo_sink *s;
	uint64_t total;
} both;

static bool
all_read(void *arg)
{
	both *x = arg;

	return x->s->bytes == x->total && x->w->write.calls == 1;
}

static void
test_paused_reader_makes_writer_unwritable(void **state)
{
	weft_channel_opts opts = {
	    .high_water_bytes = 64 << 10,
	    .low_water_bytes = 16 << 10,
	};
	echo_sink sink = {.start_paused = true};
	writer w = {0};
	both x = {&w, &sink, 256 << 10};
	struct evbuffer *buf = evbuffer_new();
	weft_channel *a, *b;
	uint8_t *bytes = malloc(x.total);
	size_t i;

	(void)state;
	assert_int_equal(weft_inproc_pair(echo_loop, &opts, writer_init, &w,
	                                  echo_sink_init, &sink, &a, &b),
	                 0);
	for (i = 0; i < x.total; i++)
		bytes[i] = echo_pattern(i);
	evbuffer_add(buf, bytes, x.total);
	assert_int_equal(weft_channel_write(a, buf, echo_result_cb, &w.write),
	                 0);
	assert_int_equal(w.unwritable, 1);
	assert_false(weft_channel_is_writable(a));
	/* The reader does not read: nothing drains. */
	assert_int_equal(
	    weft_test_run_until(echo_loop, became_writable, &w, 50),
	    WEFT_ETIMEDOUT);
	assert_int_equal(sink.bytes, 0);
	assert_int_equal(w.write.calls, 0);
	weft_channel_set_auto_read(b, true);
	assert_int_equal(
	    weft_test_run_until(echo_loop, all_read, &x, DEADLINE_MS), 0);
	assert_int_equal(w.writable, 1);
	assert_true(weft_channel_is_writable(a));
	assert_int_equal(w.write.status, 0);
	assert_int_equal(sink.mismatches, 0);
	weft_channel_close(b);
	assert_int_equal(weft_test_run_until(echo_loop, weft_test_flag_set,
	                                     &sink.inactive, DEADLINE_MS),
	                 0);
	evbuffer_free(buf);
	free(bytes);
}

static int
failing_init(weft_channel *ch, void *arg)
{
	(void)ch;
	(void)arg;
	return WEFT_EPROTO;
}

static void
test_init_failure_closes_both(void **state)
{
	weft_channel *a = NULL, *b = NULL;
	weft_loop_stats st;

	(void)state;
	assert_int_equal(weft_inproc_pair(echo_loop, NULL, NULL, NULL,
	                                  failing_init, NULL, &a, &b),
	                 WEFT_EPROTO);
	assert_null(a);
	assert_null(b);
	weft_test_run_until(echo_loop, weft_test_flag_set, &(bool){false}, 20);
	weft_loop_get_stats(echo_loop, &st);
	assert_int_equal(st.channels_open, 0);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_inproc_echo_100k_messages,
	                                    echo_loop_setup,
	                                    echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_close_delivers_what_was_written_first, echo_loop_setup,
	        echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_paused_reader_makes_writer_unwritable, echo_loop_setup,
	        echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(test_init_failure_closes_both,
	                                    echo_loop_setup,
	                                    echo_loop_teardown),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
