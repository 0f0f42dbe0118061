/* SPDX-License-Identifier: MIT */
/* test_frame.c: the length-field frame codec over a bufferevent pair. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include <weft/crc32c.h>
#include <weft/frame.h>

#include "fixture.h"
#include "support/wire.h"

static const size_t sizes[] = {0, 1, 5, 64, 300, 4200, 3, 0};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static size_t
build_stream(unsigned char *buf, bool crc)
{
	size_t i, n = 0;

	for (i = 0; i < NSIZES; i++)
		n += weft_test_put_frame(buf + n, i, sizes[i], crc);
	return n;
}

static void
check_frames(fx *f)
{
	unsigned char got[8192];
	size_t i, j;

	assert_int_equal(f->msgs, NSIZES);
	for (i = 0; i < NSIZES; i++) {
		assert_int_equal(f->lens[i], sizes[i]);
		fx_msg(f, i, got);
		for (j = 0; j < sizes[i]; j++)
			assert_int_equal(got[j], weft_test_frame_byte(i, j));
	}
}

/* Set by the emit_bytes tests for the fixtures they make. */
static bool fixture_emit_bytes;

static fx *
frame_fixture(size_t max, bool crc)
{
	weft_frame_codec_opts o = {.max_frame_bytes = max,
	                           .crc32c = crc,
	                           .emit_bytes = fixture_emit_bytes};
	fx *f = fx_new();

	assert_int_equal(weft_frame_codec_add(f->ch, "frame", &o), 0);
	fx_start(f);
	return f;
}

static void
split_everywhere(bool crc)
{
	static unsigned char stream[8 * 8192];
	size_t n = build_stream(stream, crc), k;
	fx *f = frame_fixture(0, crc);

	for (k = 0; k <= n; k++) {
		if (k > 0)
			fx_send(f, stream, k);
		if (k < n)
			fx_send(f, stream + k, n - k);
		check_frames(f);
		fx_reset(f);
	}
	/* And one byte at a time. */
	for (k = 0; k < n; k++)
		fx_send(f, stream + k, 1);
	check_frames(f);
	assert_int_equal(f->errors, 0);
	fx_free(f);
}

static void
test_frames_split_at_every_byte(void **state)
{
	(void)state;
	split_everywhere(false);
}

static void
test_frames_with_crc_split_at_every_byte(void **state)
{
	(void)state;
	split_everywhere(true);
}

static void check_encoded(struct evbuffer *buf, const size_t *lens, size_t n,
                          bool crc);

static void
test_emit_bytes_frames_split_at_every_byte(void **state)
{
	static unsigned char stream[8 * 8192];
	size_t n;
	fx *f;

	(void)state;
	fixture_emit_bytes = true;
	split_everywhere(false);
	split_everywhere(true);
	/* Whole in one read, every small frame comes as a byte run; the
	 * 4200-byte one, above the copy limit, as an evbuffer. */
	n = build_stream(stream, false);
	f = frame_fixture(0, false);
	fx_send(f, stream, n);
	check_frames(f);
	assert_int_equal(f->byte_runs, NSIZES - 1);
	fx_free(f);
	fixture_emit_bytes = false;
}

static void
test_byte_runs_written_leave_as_frames(void **state)
{
	unsigned char payload[8192];
	weft_bytes run;
	size_t i, j, lens[NSIZES], total = 0;
	fx *f = frame_fixture(0, true);

	(void)state;
	for (i = 0; i < NSIZES; i++) {
		for (j = 0; j < sizes[i]; j++)
			payload[j] = weft_test_frame_byte(i, j);
		run.data = payload;
		run.len = sizes[i];
		lens[i] = sizes[i];
		total += 8 + sizes[i];
		assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_bytes,
		                                        &run, fx_write_cb, f),
		                 0);
		memset(payload, 0, sizeof(payload)); /* taken at once */
	}
	fx_run_until_write_cbs(f, (int)NSIZES);
	assert_int_equal(f->write_status, 0);
	fx_run_until_peer_has(f, total);
	check_encoded(fx_peer_input(f), lens, NSIZES, true);
	fx_free(f);
}

static void
test_many_frames_in_one_read(void **state)
{
	static unsigned char stream[2000 * 72];
	size_t i, n = 0;
	weft_codec_stats st;
	fx *f = frame_fixture(0, true);

	(void)state;
	for (i = 0; i < 2000; i++)
		n += weft_test_put_frame(stream + n, i, 64, true);
	fx_send(f, stream, n);
	assert_int_equal(f->msgs, 2000);
	assert_int_equal(f->read_completes, 1);
	assert_int_equal(weft_codec_get_stats(f->ch, "frame", &st), 0);
	assert_int_equal(st.msgs_in, 2000);
	assert_int_equal(st.bytes_in, 2000 * 64);
	assert_int_equal(weft_codec_get_stats(f->ch, "sink", &st), WEFT_EINVAL);
	assert_int_equal(weft_codec_get_stats(f->ch, "nope", &st),
	                 WEFT_ENOTFOUND);
	fx_free(f);
}

static void
test_zero_length_frame(void **state)
{
	unsigned char zero[4] = {0};
	fx *f = frame_fixture(0, false);

	(void)state;
	fx_send(f, zero, sizeof(zero));
	assert_int_equal(f->msgs, 1);
	assert_int_equal(f->lens[0], 0);
	fx_free(f);
}

static void *
frames_in_a_thread(void *arg)
{
	static const unsigned char frame[] = {0, 0, 0, 3, 'a', 'b', 'c'};
	fx *f = frame_fixture(0, false);

	(void)arg;
	fx_send(f, frame, sizeof(frame));
	fx_send(f, frame, sizeof(frame));
	fx_free(f);
	return NULL;
}

/* The totals count the codecs of every thread, also of one that ended. */
static void
test_totals_count_the_codecs_of_ended_threads(void **state)
{
	weft_codec_stats before, after;
	pthread_t t;

	(void)state;
	weft_codec_get_totals(WEFT_CODEC_FRAME, &before);
	assert_int_equal(pthread_create(&t, NULL, frames_in_a_thread, NULL), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	weft_codec_get_totals(WEFT_CODEC_FRAME, &after);
	assert_int_equal(after.msgs_in, before.msgs_in + 2);
	assert_int_equal(after.bytes_in, before.bytes_in + 6);
}

static void
check_rejected_header(uint32_t claim, size_t max)
{
	unsigned char hdr[4];
	weft_codec_stats before, after;
	int warnings = fx_warnings();
	fx *f = frame_fixture(max, false);

	f->stats_name = "frame";
	f->input_at_error = 1;
	weft_codec_get_totals(WEFT_CODEC_FRAME, &before);
	weft_test_put_be32(hdr, claim);
	/* Only the header: the codec must not wait for the payload. */
	fx_send(f, hdr, sizeof(hdr));
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_ETOOBIG);
	assert_int_equal(f->msgs, 0);
	assert_int_equal(f->input_at_error, 0);
	assert_int_equal(f->err_stats.too_big, 1);
	assert_int_equal(fx_warnings(), warnings + 1);
	assert_non_null(strstr(fx_last_warning(), "test-peer"));
	assert_non_null(strstr(fx_last_warning(), "ETOOBIG"));
	/* More bytes change nothing, and the channel closes. */
	fx_send(f, hdr, sizeof(hdr));
	assert_int_equal(f->errors, 1);
	fx_run_until_inactive(f);
	weft_codec_get_totals(WEFT_CODEC_FRAME, &after);
	assert_int_equal(after.too_big, before.too_big + 1);
	fx_free(f);
}

static void
test_oversized_frame_rejected_without_buffering(void **state)
{
	(void)state;
	check_rejected_header(1025, 1024);
	check_rejected_header(0xffffffffu, 0);
	check_rejected_header(WEFT_FRAME_DEFAULT_MAX + 1, 0);
}

static void
test_frame_at_the_limit_accepted(void **state)
{
	unsigned char buf[4 + 1024];
	fx *f = frame_fixture(1024, false);

	(void)state;
	fx_send(f, buf, weft_test_put_frame(buf, 0, 1024, false));
	assert_int_equal(f->msgs, 1);
	assert_int_equal(f->errors, 0);
	fx_free(f);
}

static void
test_truncated_frame_at_close(void **state)
{
	unsigned char buf[4 + 100];
	weft_codec_stats before, after;
	fx *f = frame_fixture(0, false);

	(void)state;
	weft_codec_get_totals(WEFT_CODEC_FRAME, &before);
	weft_test_put_frame(buf, 0, 100, false);
	fx_send(f, buf, 4 + 50);
	assert_int_equal(f->msgs, 0);
	fx_peer_close(f);
	fx_run_until_inactive(f);
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_EPROTO);
	assert_non_null(strstr(fx_last_warning(), "54 byte(s)"));
	weft_codec_get_totals(WEFT_CODEC_FRAME, &after);
	assert_int_equal(after.malformed, before.malformed + 1);
	fx_free(f);
}

static void
test_local_close_inside_a_frame_is_no_error(void **state)
{
	unsigned char buf[4 + 100];
	fx *f = frame_fixture(0, false);

	(void)state;
	weft_test_put_frame(buf, 0, 100, false);
	fx_send(f, buf, 4 + 50);
	weft_channel_close(f->ch);
	fx_run_until_inactive(f);
	assert_int_equal(f->errors, 0);
	fx_free(f);
}

static void
test_clean_close_is_no_error(void **state)
{
	unsigned char buf[4 + 10];
	fx *f = frame_fixture(0, false);

	(void)state;
	fx_send(f, buf, weft_test_put_frame(buf, 0, 10, false));
	fx_peer_close(f);
	fx_run_until_inactive(f);
	assert_int_equal(f->msgs, 1);
	assert_int_equal(f->errors, 0);
	fx_free(f);
}

static void
check_bad_crc(size_t len)
{
	static unsigned char buf[8 + 8192];
	weft_codec_stats before, after;
	size_t n;
	fx *f = frame_fixture(0, true);

	weft_codec_get_totals(WEFT_CODEC_FRAME, &before);
	n = weft_test_put_frame(buf, 0, len, true);
	fx_send(f, buf, n);
	assert_int_equal(f->msgs, 1);
	buf[4 + len / 2] ^= 0x10;
	fx_send(f, buf, n);
	assert_int_equal(f->msgs, 1);
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_ECHECKSUM);
	fx_run_until_inactive(f);
	weft_codec_get_totals(WEFT_CODEC_FRAME, &after);
	assert_int_equal(after.bad_crc, before.bad_crc + 1);
	fx_free(f);
}

static void
test_crc_mismatch(void **state)
{
	(void)state;
	check_bad_crc(64);
	check_bad_crc(8000); /* the path for frames that move chains */
}

/* Parses the frames in buf and checks they carry the given payloads. */
static void
check_encoded(struct evbuffer *buf, const size_t *lens, size_t n, bool crc)
{
	static unsigned char frame[8 + 200000];
	size_t i, j, len, total;

	for (i = 0; i < n; i++) {
		assert_true(evbuffer_copyout(buf, frame, 4) == 4);
		len = weft_test_get_be32(frame);
		assert_int_equal(len, lens[i]);
		total = 4 + len + (crc ? 4 : 0);
		assert_true(evbuffer_remove(buf, frame, total) == (int)total);
		for (j = 0; j < len; j++)
			assert_int_equal(frame[4 + j],
			                 weft_test_frame_byte(i, j));
		if (crc)
			assert_int_equal(weft_test_get_be32(frame + 4 + len),
			                 weft_crc32c(0, frame, 4 + len));
	}
	assert_int_equal(evbuffer_get_length(buf), 0);
}

static void
fill(struct evbuffer *b, size_t i, size_t len)
{
	size_t j;

	for (j = 0; j < len; j++) {
		unsigned char c = weft_test_frame_byte(i, j);

		evbuffer_add(b, &c, 1);
	}
}

static void
round_trip(bool crc)
{
	static const size_t lens[] = {0, 1, 100, 4096, 4097, 100000};
	struct evbuffer *b = evbuffer_new();
	size_t i, n = sizeof(lens) / sizeof(lens[0]);
	weft_codec_stats st;
	fx *f = frame_fixture(0, crc);

	for (i = 0; i < n; i++) {
		fill(b, i, lens[i]);
		assert_int_equal(weft_channel_write(f->ch, b, fx_write_cb, f),
		                 0);
		assert_int_equal(evbuffer_get_length(b), 0);
	}
	fx_run_until_write_cbs(f, (int)n);
	assert_int_equal(f->write_status, 0);
	assert_int_equal(weft_codec_get_stats(f->ch, "frame", &st), 0);
	assert_int_equal(st.msgs_out, n);
	assert_int_equal(st.bytes_out, 0 + 1 + 100 + 4096 + 4097 + 100000);
	fx_run_until_peer_has(f, 4 * n + 108294 + (crc ? 4 * n : 0));
	check_encoded(fx_peer_input(f), lens, n, crc);
	evbuffer_free(b);
	fx_free(f);
}

static void
test_encoder_round_trip(void **state)
{
	(void)state;
	round_trip(false);
	round_trip(true);
}

static void
test_encoded_frames_decode(void **state)
{
	struct evbuffer *wire = evbuffer_new(), *p = evbuffer_new();
	weft_frame_codec_opts o = {.crc32c = true};
	unsigned char *bytes;
	size_t i;
	fx *f = frame_fixture(0, true);

	(void)state;
	for (i = 0; i < NSIZES; i++) {
		fill(p, i, sizes[i]);
		assert_int_equal(weft_frame_encode(wire, p, &o), 0);
		assert_int_equal(evbuffer_get_length(p), 0);
	}
	bytes = evbuffer_pullup(wire, -1);
	fx_send(f, bytes, evbuffer_get_length(wire));
	check_frames(f);
	fill(p, 0, 10);
	o.max_frame_bytes = 9;
	assert_int_equal(weft_frame_encode(wire, p, &o), WEFT_ETOOBIG);
	assert_int_equal(evbuffer_get_length(p), 10);
	evbuffer_free(wire);
	evbuffer_free(p);
	fx_free(f);
}

static void
test_write_too_big_fails(void **state)
{
	struct evbuffer *b = evbuffer_new();
	fx *f = frame_fixture(100, false);

	(void)state;
	fill(b, 0, 101);
	assert_int_equal(weft_channel_write(f->ch, b, fx_write_cb, f), 0);
	assert_int_equal(evbuffer_get_length(b), 0);
	fx_run_until_write_cbs(f, 1);
	assert_int_equal(f->write_status, WEFT_ETOOBIG);
	assert_int_equal(evbuffer_get_length(fx_peer_input(f)), 0);
	evbuffer_free(b);
	fx_free(f);
}

static void
test_small_frames_leave_contiguous(void **state)
{
	struct evbuffer *b = evbuffer_new();
	size_t i, lens[200];
	weft_ctx *end;
	int chains;
	fx *f = frame_fixture(0, false);

	(void)state;
	/* Writes from the end of the pipeline, flushed once, as a handler
	 * that answers a batch of requests would. */
	end = weft_pipeline_get(f->ch, "sink");
	for (i = 0; i < 200; i++) {
		lens[i] = 64;
		fill(b, i, 64);
		weft_ctx_write(end, &weft_msg_evbuffer, b, NULL, NULL);
		assert_int_equal(evbuffer_get_length(b), 0);
	}
	weft_ctx_flush(end);
	fx_run_until_peer_has(f, 200 * 68);
	chains = evbuffer_peek(fx_peer_input(f), -1, NULL, NULL, 0);
	print_message("200 frames of 68 bytes in %d chain(s)\n", chains);
	/* A few chains, not 200. */
	assert_true(chains <= 20);
	check_encoded(fx_peer_input(f), lens, 200, false);
	evbuffer_free(b);
	fx_free(f);
}

/*
 * In-place writes through the frame codec, with the CRC off and on: each
 * reservation (larger than what is written) comes back framed, with its
 * length and CRC, among ordinary writes; a commit past the codec's limit
 * sends nothing and fails its write once.
 */
static void
reserve_commit_frames(bool crc)
{
	struct evbuffer *b = evbuffer_new();
	size_t i, j, lens[6] = {0, 1, 64, 100, 4096, 70000}, total = 0;
	unsigned char *p;
	weft_ctx *end;
	fx *f = frame_fixture(80000, crc);

	end = weft_pipeline_get(f->ch, "sink");
	for (i = 0; i < 6; i++) {
		if (i % 2 == 1) { /* every other one an ordinary write */
			fill(b, i, lens[i]);
			weft_ctx_write(end, &weft_msg_evbuffer, b, fx_write_cb,
			               f);
		} else {
			p = weft_ctx_reserve(end, lens[i] + 33);
			assert_non_null(p);
			for (j = 0; j < lens[i]; j++)
				p[j] = weft_test_frame_byte(i, j);
			weft_ctx_commit(end, lens[i], fx_write_cb, f);
		}
		total += 4 + lens[i] + (crc ? 4 : 0);
	}
	weft_ctx_flush(end);
	fx_run_until_write_cbs(f, 6);
	assert_int_equal(f->write_status, 0);
	fx_run_until_peer_has(f, total);
	check_encoded(fx_peer_input(f), lens, 6, crc);
	p = weft_ctx_reserve(end, 80001);
	assert_non_null(p);
	weft_ctx_commit(end, 80001, fx_write_cb, f);
	fx_run_until_write_cbs(f, 7);
	assert_int_equal(f->write_status, WEFT_ETOOBIG);
	assert_int_equal(evbuffer_get_length(fx_peer_input(f)), 0);
	evbuffer_free(b);
	fx_free(f);
}

static void
test_in_place_writes_are_framed(void **state)
{
	(void)state;
	reserve_commit_frames(false);
}

static void
test_in_place_writes_are_framed_with_crc(void **state)
{
	(void)state;
	reserve_commit_frames(true);
}

/* A handler that, on its first message, takes the frame codec out. */
static void
switch_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	weft_channel *ch = weft_ctx_channel(ctx);

	if (weft_pipeline_get(ch, "frame") != NULL)
		assert_int_equal(weft_pipeline_remove(ch, "frame"), 0);
	weft_ctx_fire_read(ctx, type, msg);
}

static const weft_handler switcher = {.read = switch_read};

static void
test_removed_mid_batch_passes_the_rest_on(void **state)
{
	unsigned char buf[64], raw[16];
	size_t n;
	fx *f = fx_new();

	(void)state;
	assert_int_equal(weft_frame_codec_add(f->ch, "frame", NULL), 0);
	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "switch", &switcher, NULL), 0);
	fx_start(f);
	n = weft_test_put_frame(buf, 0, 10, false);
	n += weft_test_put_frame(buf + n, 1, 10, false);
	fx_send(f, buf, n);
	/* The first frame, then the second one's raw bytes. */
	assert_int_equal(f->msgs, 2);
	assert_int_equal(f->lens[0], 10);
	assert_int_equal(f->lens[1], 14);
	fx_msg(f, 1, raw);
	assert_int_equal(weft_test_get_be32(raw), 10);
	fx_free(f);
}

static void
test_add_after_and_duplicates(void **state)
{
	fx *f = fx_new();

	(void)state;
	assert_int_equal(weft_frame_codec_add_after(f->ch, NULL, "a", NULL), 0);
	assert_int_equal(weft_frame_codec_add_after(f->ch, "a", "b", NULL), 0);
	assert_int_equal(weft_frame_codec_add(f->ch, "a", NULL), WEFT_EEXIST);
	assert_int_equal(weft_frame_codec_add_after(f->ch, "zz", "c", NULL),
	                 WEFT_ENOTFOUND);
	fx_start(f);
	fx_free(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_frames_split_at_every_byte),
	    cmocka_unit_test(test_frames_with_crc_split_at_every_byte),
	    cmocka_unit_test(test_many_frames_in_one_read),
	    cmocka_unit_test(test_emit_bytes_frames_split_at_every_byte),
	    cmocka_unit_test(test_byte_runs_written_leave_as_frames),
	    cmocka_unit_test(test_zero_length_frame),
	    cmocka_unit_test(test_totals_count_the_codecs_of_ended_threads),
	    cmocka_unit_test(test_oversized_frame_rejected_without_buffering),
	    cmocka_unit_test(test_frame_at_the_limit_accepted),
	    cmocka_unit_test(test_truncated_frame_at_close),
	    cmocka_unit_test(test_clean_close_is_no_error),
	    cmocka_unit_test(test_local_close_inside_a_frame_is_no_error),
	    cmocka_unit_test(test_crc_mismatch),
	    cmocka_unit_test(test_encoder_round_trip),
	    cmocka_unit_test(test_encoded_frames_decode),
	    cmocka_unit_test(test_write_too_big_fails),
	    cmocka_unit_test(test_small_frames_leave_contiguous),
	    cmocka_unit_test(test_in_place_writes_are_framed),
	    cmocka_unit_test(test_in_place_writes_are_framed_with_crc),
	    cmocka_unit_test(test_removed_mid_batch_passes_the_rest_on),
	    cmocka_unit_test(test_add_after_and_duplicates),
	};

	fx_log_capture();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
