/* SPDX-License-Identifier: MIT */
/* test_line.c: the delimited-line codec over a bufferevent pair. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include <weft/line.h>

#include "fixture.h"

static fx *
line_fixture(const char *delim, bool strip_cr, size_t max)
{
	weft_line_codec_opts o = {
	    .delimiter = delim, .strip_cr = strip_cr, .max_line_bytes = max};
	fx *f = fx_new();

	assert_int_equal(weft_line_codec_add(f->ch, "line", &o), 0);
	fx_start(f);
	return f;
}

static void
send_str(fx *f, const char *s)
{
	fx_send(f, s, strlen(s));
}

/* Checks that the lines received so far are exactly want[0..n). */
static void
check_lines(fx *f, const char *const *want, size_t n)
{
	char got[8192];
	size_t i;

	assert_int_equal(f->msgs, n);
	for (i = 0; i < n; i++) {
		assert_int_equal(f->lens[i], strlen(want[i]));
		fx_msg(f, i, got);
		got[f->lens[i]] = '\0';
		assert_string_equal(got, want[i]);
	}
}

static void
test_lines_split_at_every_byte(void **state)
{
	static const char stream[] = "hello\n\nworld, a longer line\nx\n";
	static const char *const want[] = {"hello", "", "world, a longer line",
	                                   "x"};
	size_t n = strlen(stream), k;
	fx *f = line_fixture(NULL, false, 0);

	(void)state;
	for (k = 0; k <= n; k++) {
		fx_send(f, stream, k);
		fx_send(f, stream + k, n - k);
		check_lines(f, want, 4);
		fx_reset(f);
	}
	for (k = 0; k < n; k++)
		fx_send(f, stream + k, 1);
	check_lines(f, want, 4);
	assert_int_equal(f->errors, 0);
	fx_free(f);
}

static void
test_crlf_stripped(void **state)
{
	static const char *const want[] = {"GET / HTTP/1.0", "a\rb", "", "z\r"};
	fx *f = line_fixture("\n", true, 0);

	(void)state;
	send_str(f, "GET / HTTP/1.0\r\na\rb\r\n\r\nz\r\r\n");
	check_lines(f, want, 4);
	fx_free(f);
}

static void
test_crlf_kept_without_strip(void **state)
{
	static const char *const want[] = {"a\r", "b"};
	fx *f = line_fixture(NULL, false, 0);

	(void)state;
	send_str(f, "a\r\nb\n");
	check_lines(f, want, 2);
	fx_free(f);
}

static void
test_multibyte_delimiter_split_everywhere(void **state)
{
	static const char stream[] = "one\r\ntwo\r\r\n\r\nthree\n\r\n";
	static const char *const want[] = {"one", "two\r", "", "three\n"};
	size_t n = strlen(stream), k;
	fx *f = line_fixture("\r\n", false, 0);

	(void)state;
	for (k = 0; k <= n; k++) {
		fx_send(f, stream, k);
		fx_send(f, stream + k, n - k);
		check_lines(f, want, 4);
		fx_reset(f);
	}
	fx_free(f);
}

static void
test_line_at_the_limit_accepted(void **state)
{
	static const char *const want[] = {"0123456789", "abcdefghij"};
	fx *f = line_fixture("\n", true, 10);

	(void)state;
	send_str(f, "0123456789\nabcdefghij\r\n");
	check_lines(f, want, 2);
	assert_int_equal(f->errors, 0);
	fx_free(f);
}

static void
test_too_long_line_rejected_early(void **state)
{
	weft_codec_stats before, after;
	fx *f = line_fixture("\n", false, 10);

	(void)state;
	f->input_at_error = 1;
	weft_codec_get_totals(WEFT_CODEC_LINE, &before);
	send_str(f, "0123456789");
	assert_int_equal(f->errors, 0);
	/* The 11th byte without a delimiter is too many: no more waiting. */
	send_str(f, "x");
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_ETOOBIG);
	assert_int_equal(f->msgs, 0);
	assert_int_equal(f->input_at_error, 0);
	assert_non_null(strstr(fx_last_warning(), "test-peer"));
	fx_run_until_inactive(f);
	weft_codec_get_totals(WEFT_CODEC_LINE, &after);
	assert_int_equal(after.too_big, before.too_big + 1);
	fx_free(f);
}

static void
test_too_long_line_in_one_read(void **state)
{
	char big[5000];
	fx *f = line_fixture("\n", true, 100);

	(void)state;
	memset(big, 'a', sizeof(big));
	big[sizeof(big) - 1] = '\n';
	fx_send(f, big, sizeof(big));
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_ETOOBIG);
	assert_int_equal(f->msgs, 0);
	fx_free(f);
}

static void
test_cr_does_not_stretch_the_limit(void **state)
{
	fx *f = line_fixture("\n", true, 10);

	(void)state;
	/* 11 bytes before the delimiter and no '\r' among them. */
	send_str(f, "0123456789x\n");
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_ETOOBIG);
	fx_free(f);
}

static void
test_partial_line_at_close(void **state)
{
	fx *f = line_fixture(NULL, false, 0);

	(void)state;
	send_str(f, "done\nhalf a li");
	fx_peer_close(f);
	fx_run_until_inactive(f);
	assert_int_equal(f->msgs, 1);
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_EPROTO);
	fx_free(f);
}

static void
test_encoder_appends_delimiter(void **state)
{
	struct evbuffer *b = evbuffer_new(), *in;
	char big[10001], *text;
	fx *f = line_fixture("\r\n", false, 10000);

	(void)state;
	memset(big, 'b', sizeof(big));
	evbuffer_add(b, "hello", 5);
	assert_int_equal(weft_channel_write(f->ch, b, NULL, NULL), 0);
	assert_int_equal(weft_channel_write(f->ch, b, NULL, NULL), 0);
	evbuffer_add(b, big, 6000);
	assert_int_equal(weft_channel_write(f->ch, b, NULL, NULL), 0);
	evbuffer_add(b, big, 10001);
	assert_int_equal(weft_channel_write(f->ch, b, fx_write_cb, f), 0);
	fx_run_until_write_cbs(f, 1);
	assert_int_equal(f->write_status, WEFT_ETOOBIG);
	fx_run_until_peer_has(f, 6011);
	in = fx_peer_input(f);
	assert_int_equal(evbuffer_get_length(in), 7 + 2 + 6002);
	text = (char *)evbuffer_pullup(in, -1);
	assert_memory_equal(text, "hello\r\n\r\nbbb", 12);
	assert_memory_equal(text + 7 + 2 + 6000, "\r\n", 2);
	evbuffer_free(b);
	fx_free(f);
}

static void
test_encoder_takes_byte_runs(void **state)
{
	static char big[6000];
	weft_bytes run = {"hi", 2};
	struct evbuffer *in;
	char *text;
	fx *f = line_fixture("\n", false, 8000);

	(void)state;
	memset(big, 'q', sizeof(big));
	assert_int_equal(
	    weft_channel_write_msg(f->ch, &weft_msg_bytes, &run, NULL, NULL),
	    0);
	run.data = big;
	run.len = sizeof(big);
	assert_int_equal(
	    weft_channel_write_msg(f->ch, &weft_msg_bytes, &run, NULL, NULL),
	    0);
	run.len = 8001;
	run.data = malloc(8001);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_bytes, &run,
	                                        fx_write_cb, f),
	                 0);
	free((void *)run.data);
	fx_run_until_write_cbs(f, 1);
	assert_int_equal(f->write_status, WEFT_ETOOBIG);
	fx_run_until_peer_has(f, 3 + 6001);
	in = fx_peer_input(f);
	assert_int_equal(evbuffer_get_length(in), 3 + 6001);
	text = (char *)evbuffer_pullup(in, -1);
	assert_memory_equal(text, "hi\nqqq", 6);
	assert_int_equal(text[3 + 6000], '\n');
	fx_free(f);
}

static void
test_bad_delimiter_rejected(void **state)
{
	weft_line_codec_opts o = {.delimiter = ""};
	fx *f = fx_new();

	(void)state;
	assert_int_equal(weft_line_codec_add(f->ch, "line", &o), WEFT_EINVAL);
	o.delimiter = "12345678901234567";
	assert_int_equal(weft_line_codec_add(f->ch, "line", &o), WEFT_EINVAL);
	fx_free(f);
}

static void
test_many_lines_in_one_read(void **state)
{
	char buf[3000 * 4];
	size_t i;
	weft_codec_stats st;
	fx *f = line_fixture(NULL, false, 0);

	(void)state;
	for (i = 0; i < 3000; i++)
		memcpy(buf + 4 * i, "abc\n", 4);
	fx_send(f, buf, sizeof(buf));
	assert_int_equal(f->msgs, 3000);
	assert_int_equal(f->read_completes, 1);
	assert_int_equal(weft_codec_get_stats(f->ch, "line", &st), 0);
	assert_int_equal(st.msgs_in, 3000);
	assert_int_equal(st.bytes_in, 9000);
	fx_free(f);
}

/* Pauses reading at every line it passes on. */
static void
pause_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	weft_channel_set_auto_read(weft_ctx_channel(ctx), false);
	weft_ctx_fire_read(ctx, type, msg);
}

static const weft_handler pause_handler = {.read = pause_read};

static bool
three_lines(void *arg)
{
	return ((fx *)arg)->msgs >= 3;
}

static void
test_reading_paused_stops_after_the_line(void **state)
{
	static const char *const want[] = {"a", "bb", "ccc"};
	fx *f = fx_new();
	int i;

	(void)state;
	assert_int_equal(weft_line_codec_add(f->ch, "line", NULL), 0);
	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "pause", &pause_handler, NULL), 0);
	fx_start(f);
	send_str(f, "a\nbb\nccc\n");
	check_lines(f, want, 1);
	/* Each resume delivers one more line, from what waits. */
	for (i = 2; i <= 3; i++) {
		weft_channel_set_auto_read(f->ch, true);
		assert_int_equal(
		    weft_loop_run_until(f->loop, three_lines, f, 20),
		    i == 3 ? 0 : WEFT_ETIMEDOUT);
		check_lines(f, want, (size_t)i);
	}
	assert_int_equal(f->errors, 0);
	fx_free(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lines_split_at_every_byte),
	    cmocka_unit_test(test_crlf_stripped),
	    cmocka_unit_test(test_crlf_kept_without_strip),
	    cmocka_unit_test(test_multibyte_delimiter_split_everywhere),
	    cmocka_unit_test(test_line_at_the_limit_accepted),
	    cmocka_unit_test(test_too_long_line_rejected_early),
	    cmocka_unit_test(test_too_long_line_in_one_read),
	    cmocka_unit_test(test_cr_does_not_stretch_the_limit),
	    cmocka_unit_test(test_partial_line_at_close),
	    cmocka_unit_test(test_encoder_appends_delimiter),
	    cmocka_unit_test(test_encoder_takes_byte_runs),
	    cmocka_unit_test(test_bad_delimiter_rejected),
	    cmocka_unit_test(test_many_lines_in_one_read),
	    cmocka_unit_test(test_reading_paused_stops_after_the_line),
	};

	fx_log_capture();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
