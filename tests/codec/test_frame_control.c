/* SPDX-License-Identifier: MIT */
/*
 * test_frame_control.c: what a service controls of a running frame codec:
 * the CRC switch and the limits, changed mid-stream; reading paused between
 * frames; the event for an incomplete frame; frames decoded in place.
 */
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
#include <weft/line.h>

#include "alloc_count.h"
#include "fixture.h"
#include "support/wire.h"

/* Checks that f received frames 0..n-1 of the given lengths, in order. */
static void
check_frames(fx *f, const size_t *lens, size_t n)
{
	static unsigned char got[32768];
	size_t i, j;

	assert_int_equal(f->msgs, n);
	for (i = 0; i < n; i++) {
		assert_int_equal(f->lens[i], lens[i]);
		assert_true(lens[i] <= sizeof(got));
		fx_msg(f, i, got);
		for (j = 0; j < lens[i]; j++)
			assert_int_equal(got[j], weft_test_frame_byte(i, j));
	}
}

static fx *
fixture(const weft_frame_codec_opts *o)
{
	fx *f = fx_new();

	assert_int_equal(weft_frame_codec_add(f->ch, "frame", o), 0);
	return f;
}

/* ---- The CRC switch ---------------------------------------------------- */

/*
 * A receiver that switches the frame codec's CRC when it reads frame
 * number switch_at[k] (on after the first, off after the second, ...),
 * as a handshake reply does.
 */
struct switcher {
	const size_t *switch_at;
	size_t nswitch;
	size_t seen;
	bool on;
};

static void
switch_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct switcher *s = weft_ctx_state(ctx);
	size_t k;

	for (k = 0; k < s->nswitch; k++)
		if (s->switch_at[k] == s->seen) {
			s->on = !s->on;
			assert_int_equal(
			    weft_frame_codec_set_crc(weft_ctx_channel(ctx),
			                             "frame", s->on),
			    0);
		}
	s->seen++;
	weft_ctx_fire_read(ctx, type, msg);
}

static const weft_handler switch_handler = {.read = switch_read};

/* Frames of these sizes; the CRC goes on after frame 1, off after 3, on
 * after 5 (and the 4200-byte frames take the path that moves chains). */
static const size_t mixed[] = {10, 0, 300, 4200, 1, 64, 4200, 7};
#define NMIXED (sizeof(mixed) / sizeof(mixed[0]))
static const size_t switches[] = {1, 3, 5};

static size_t
build_switched(unsigned char *buf)
{
	size_t i, k, n = 0;
	bool crc = false;

	for (i = 0; i < NMIXED; i++) {
		n += weft_test_put_frame(buf + n, i, mixed[i], crc);
		for (k = 0; k < 3; k++)
			if (switches[k] == i)
				crc = !crc;
	}
	return n;
}

static void
crc_switch_split_everywhere(bool emit_bytes)
{
	static unsigned char stream[NMIXED * 4300];
	weft_frame_codec_opts o = {.emit_bytes = emit_bytes};
	struct switcher sw = {switches, 3, 0, false};
	size_t n = build_switched(stream), k;
	fx *f = fixture(&o);

	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "switch", &switch_handler, &sw), 0);
	fx_start(f);
	for (k = 0; k <= n; k += (k < 64 || n - k < 64) ? 1 : 97) {
		/* Whatever part of the stream arrives with the frame that
		 * switches waits in the input behind it. */
		if (k > 0)
			fx_send(f, stream, k);
		if (k < n)
			fx_send(f, stream + k, n - k);
		check_frames(f, mixed, NMIXED);
		assert_int_equal(f->errors, 0);
		fx_reset(f);
		sw.seen = 0;
		if (sw.on) {
			sw.on = false;
			weft_frame_codec_set_crc(f->ch, "frame", false);
		}
	}
	fx_free(f);
}

static void
test_crc_switched_inbound_mid_stream(void **state)
{
	(void)state;
	crc_switch_split_everywhere(false);
	crc_switch_split_everywhere(true);
}

static void
test_wrong_crc_after_switching_on_is_rejected(void **state)
{
	static const size_t at[] = {0};
	unsigned char buf[2 * 80];
	struct switcher sw = {at, 1, 0, false};
	size_t n;
	fx *f = fixture(NULL);

	(void)state;
	f->stats_name = "frame";
	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "switch", &switch_handler, &sw), 0);
	fx_start(f);
	/* Frame 0 switches the CRC on; frame 1 comes with a wrong one, in
	 * the same read. */
	n = weft_test_put_frame(buf, 0, 20, false);
	n += weft_test_put_frame(buf + n, 1, 20, true);
	buf[n - 1] ^= 1;
	fx_send(f, buf, n);
	assert_int_equal(f->msgs, 1);
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_ECHECKSUM);
	assert_int_equal(f->err_stats.bad_crc, 1);
	fx_run_until_inactive(f);
	fx_free(f);
}

static void
test_frame_without_crc_after_switching_off_is_accepted(void **state)
{
	static const size_t at[] = {0};
	weft_frame_codec_opts o = {.crc32c = true};
	unsigned char buf[3 * 80];
	struct switcher sw = {at, 1, 0, true};
	static const size_t lens[] = {20, 30, 40};
	size_t n;
	fx *f = fixture(&o);

	(void)state;
	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "switch", &switch_handler, &sw), 0);
	fx_start(f);
	n = weft_test_put_frame(buf, 0, 20, true);
	n += weft_test_put_frame(buf + n, 1, 30, false);
	fx_send(f, buf, n);
	fx_send(f, buf + n, weft_test_put_frame(buf + n, 2, 40, false));
	check_frames(f, lens, 3);
	assert_int_equal(f->errors, 0);
	fx_free(f);
}

/* Parses frame i of len pattern bytes off the front of buf. */
static void
take_frame(struct evbuffer *buf, size_t i, size_t len, bool crc)
{
	static unsigned char frame[8 + 8192];
	size_t j, total = 4 + len + (crc ? 4 : 0);

	assert_true(evbuffer_remove(buf, frame, total) == (int)total);
	assert_int_equal(weft_test_get_be32(frame), len);
	for (j = 0; j < len; j++)
		assert_int_equal(frame[4 + j], weft_test_frame_byte(i, j));
	if (crc)
		assert_int_equal(weft_test_get_be32(frame + 4 + len),
		                 weft_crc32c(0, frame, 4 + len));
}

static void
write_pattern(weft_ctx *end, struct evbuffer *b, size_t i, size_t len)
{
	size_t j;

	for (j = 0; j < len; j++) {
		unsigned char c = weft_test_frame_byte(i, j);

		evbuffer_add(b, &c, 1);
	}
	weft_ctx_write(end, &weft_msg_evbuffer, b, NULL, NULL);
}

static void
test_crc_switched_outbound_applies_to_later_writes(void **state)
{
	struct evbuffer *b = evbuffer_new(), *in;
	weft_ctx *end;
	size_t i;
	bool crc[6] = {false, false, true, true, false, true};
	fx *f = fixture(NULL);

	(void)state;
	fx_start(f);
	end = weft_pipeline_get(f->ch, "sink");
	/* One batch, flushed once: frames written before a switch keep
	 * the form they were written in. */
	for (i = 0; i < 6; i++) {
		if (i > 0 && crc[i] != crc[i - 1])
			assert_int_equal(
			    weft_frame_codec_set_crc(f->ch, "frame", crc[i]),
			    0);
		write_pattern(end, b, i, i == 3 ? 5000 : 50 + i);
	}
	weft_ctx_flush(end);
	fx_run_until_peer_has(f, 5 * 54 + 5004 + 3 * 4);
	in = fx_peer_input(f);
	for (i = 0; i < 6; i++)
		take_frame(in, i, i == 3 ? 5000 : 50 + i, crc[i]);
	assert_int_equal(evbuffer_get_length(in), 0);
	evbuffer_free(b);
	fx_free(f);
}

/* quiet: a failure closes, counts and fires its error as ever, and logs
 * nothing, for a receiver that reports it in its own words. */
static void
test_quiet_codec_fails_without_logging(void **state)
{
	weft_frame_codec_opts o = {.max_frame_bytes = 16, .quiet = true};
	unsigned char hdr[4];
	int warnings = fx_warnings();
	fx *f = fixture(&o);

	(void)state;
	f->stats_name = "frame";
	fx_start(f);
	weft_test_put_be32(hdr, 17);
	fx_send(f, hdr, sizeof(hdr));
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_ETOOBIG);
	assert_int_equal(f->err_stats.too_big, 1);
	assert_int_equal(fx_warnings(), warnings);
	fx_run_until_inactive(f);
	fx_free(f);
}

/* fail_one makes a channel whose frame codec closes it on an oversized
 * frame. */
static void
fail_one(void)
{
	weft_frame_codec_opts o = {.max_frame_bytes = 16};
	unsigned char hdr[4];
	fx *f = fixture(&o);

	weft_test_put_be32(hdr, 17);
	fx_start(f);
	fx_send(f, hdr, sizeof(hdr));
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_ETOOBIG);
	fx_run_until_inactive(f);
	fx_free(f);
}

/*
 * A flood of failing connections logs a line per peer interval, not a
 * line each; the next line after the interval says how many were dropped,
 * and every failure is still counted. One line goes out, then twenty
 * channels fail inside an interval no test run reaches, then the interval
 * ends.
 */
static void
test_failure_lines_are_rate_limited(void **state)
{
	weft_codec_stats before, after;
	int warnings;

	(void)state;
	weft_codec_get_totals(WEFT_CODEC_FRAME, &before);
	fail_one();
	warnings = fx_warnings();
	weft_log_set_peer_interval(3600 * 1000);
	for (int i = 0; i < 20; i++)
		fail_one();
	assert_int_equal(fx_warnings(), warnings);
	weft_codec_get_totals(WEFT_CODEC_FRAME, &after);
	assert_int_equal(after.too_big, before.too_big + 21);

	weft_log_set_peer_interval(0);
	fail_one();
	assert_int_equal(fx_warnings(), warnings + 1);
	assert_non_null(strstr(fx_last_warning(), "ETOOBIG"));
	assert_non_null(strstr(fx_last_warning(), "and 20 more like it"));
}

static void
test_setters_find_only_frame_codecs(void **state)
{
	fx *f = fixture(NULL);

	(void)state;
	assert_int_equal(weft_line_codec_add(f->ch, "line", NULL), 0);
	fx_start(f);
	assert_int_equal(weft_frame_codec_set_crc(f->ch, "nope", true),
	                 WEFT_ENOTFOUND);
	assert_int_equal(weft_frame_codec_set_crc(f->ch, "sink", true),
	                 WEFT_EINVAL);
	assert_int_equal(weft_frame_codec_set_crc(f->ch, "line", true),
	                 WEFT_EINVAL);
	assert_int_equal(weft_frame_codec_set_max(f->ch, "line", 10),
	                 WEFT_EINVAL);
	assert_int_equal(weft_frame_codec_set_min(f->ch, "nope", 1),
	                 WEFT_ENOTFOUND);
	assert_int_equal(weft_frame_codec_set_crc(f->ch, NULL, true),
	                 WEFT_EINVAL);
	assert_int_equal(
	    weft_frame_codec_set_max(f->ch, "frame", WEFT_FRAME_LIMIT + 1),
	    WEFT_EINVAL);
	assert_int_equal(weft_frame_codec_set_max(f->ch, "frame", 100), 0);
	assert_int_equal(weft_frame_codec_set_min(f->ch, "frame", 101),
	                 WEFT_EINVAL);
	assert_int_equal(weft_frame_codec_set_min(f->ch, "frame", 100), 0);
	assert_int_equal(weft_frame_codec_set_max(f->ch, "frame", 99),
	                 WEFT_EINVAL);
	assert_int_equal(weft_frame_codec_set_min(f->ch, "frame", 0), 0);
	/* 0: the default again. */
	assert_int_equal(weft_frame_codec_set_max(f->ch, "frame", 0), 0);
	fx_free(f);
}

/* ---- Limits ------------------------------------------------------------ */

/* A receiver that raises the limit after the first frame (a handshake). */
static void
raise_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	size_t *seen = weft_ctx_state(ctx);

	if ((*seen)++ == 0)
		assert_int_equal(weft_frame_codec_set_max(weft_ctx_channel(ctx),
		                                          "frame", 1u << 20),
		                 0);
	weft_ctx_fire_read(ctx, type, msg);
}

static const weft_handler raise_handler = {.read = raise_read};

static void
test_limit_raised_after_the_first_frame(void **state)
{
	static unsigned char buf[3 * 8200];
	static const size_t lens[] = {4096, 8000, 100};
	weft_frame_codec_opts o = {.max_frame_bytes = 4096,
	                           .min_frame_bytes = 1};
	size_t n, seen = 0;
	fx *f = fixture(&o);

	(void)state;
	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "raise", &raise_handler, &seen), 0);
	fx_start(f);
	/* The 8000-byte frame waits behind the one that raises the limit. */
	n = weft_test_put_frame(buf, 0, 4096, false);
	n += weft_test_put_frame(buf + n, 1, 8000, false);
	n += weft_test_put_frame(buf + n, 2, 100, false);
	fx_send(f, buf, n);
	check_frames(f, lens, 3);
	assert_int_equal(f->errors, 0);
	fx_free(f);
}

static void
test_limit_lowered_applies_to_the_waiting_frame(void **state)
{
	unsigned char buf[4 + 600];
	fx *f = fixture(NULL);

	(void)state;
	fx_start(f);
	weft_test_put_frame(buf, 0, 600, false);
	fx_send(f, buf, 100);
	assert_int_equal(f->errors, 0);
	assert_int_equal(weft_frame_codec_set_max(f->ch, "frame", 500), 0);
	fx_send(f, buf + 100, sizeof(buf) - 100);
	assert_int_equal(f->msgs, 0);
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_ETOOBIG);
	fx_free(f);
}

/* A frame below min_frame_bytes is refused as soon as its length
 * arrives: logged with the peer, counted as malformed. */
static void
check_too_short(size_t min, uint32_t claim)
{
	unsigned char hdr[4];
	weft_frame_codec_opts o = {.min_frame_bytes = min};
	weft_codec_stats before, after;
	int warnings = fx_warnings();
	fx *f = fixture(&o);

	f->stats_name = "frame";
	weft_codec_get_totals(WEFT_CODEC_FRAME, &before);
	fx_start(f);
	weft_test_put_be32(hdr, claim);
	fx_send(f, hdr, sizeof(hdr));
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_EPROTO);
	assert_int_equal(f->msgs, 0);
	assert_int_equal(f->events, 0); /* failed: no incomplete frame */
	assert_int_equal(f->err_stats.malformed, 1);
	assert_int_equal(fx_warnings(), warnings + 1);
	assert_non_null(strstr(fx_last_warning(), "test-peer"));
	assert_non_null(strstr(fx_last_warning(), "minimum"));
	fx_run_until_inactive(f);
	weft_codec_get_totals(WEFT_CODEC_FRAME, &after);
	assert_int_equal(after.malformed, before.malformed + 1);
	fx_free(f);
}

static void
test_frames_below_the_minimum_are_rejected(void **state)
{
	unsigned char buf[4 + 8];
	weft_frame_codec_opts o = {.min_frame_bytes = 8};
	fx *f;

	(void)state;
	check_too_short(1, 0);
	check_too_short(8, 0);
	check_too_short(8, 7);
	/* At the minimum: accepted. */
	f = fixture(&o);
	fx_start(f);
	fx_send(f, buf, weft_test_put_frame(buf, 0, 8, false));
	assert_int_equal(f->msgs, 1);
	assert_int_equal(f->errors, 0);
	/* Raised while running, for the next frame. */
	assert_int_equal(weft_frame_codec_set_min(f->ch, "frame", 9), 0);
	fx_send(f, buf, weft_test_put_frame(buf, 0, 8, false));
	assert_int_equal(f->msgs, 1);
	assert_int_equal(f->last_error, WEFT_EPROTO);
	fx_free(f);
}

static void
test_writes_below_the_minimum_fail(void **state)
{
	weft_frame_codec_opts o = {.min_frame_bytes = 8};
	struct evbuffer *b = evbuffer_new(), *out = evbuffer_new();
	weft_bytes run = {"1234567", 7};
	fx *f = fixture(&o);

	(void)state;
	fx_start(f);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_bytes, &run,
	                                        fx_write_cb, f),
	                 0);
	fx_run_until_write_cbs(f, 1);
	assert_int_equal(f->write_status, WEFT_EINVAL);
	evbuffer_add(b, "1234567", 7);
	assert_int_equal(weft_channel_write(f->ch, b, fx_write_cb, f), 0);
	assert_int_equal(evbuffer_get_length(b), 0);
	fx_run_until_write_cbs(f, 2);
	assert_int_equal(f->write_status, WEFT_EINVAL);
	assert_int_equal(evbuffer_get_length(fx_peer_input(f)), 0);
	/* weft_frame_encode keeps the payload of a refused frame. */
	evbuffer_add(b, "1234567", 7);
	assert_int_equal(weft_frame_encode(out, b, &o), WEFT_EINVAL);
	assert_int_equal(evbuffer_get_length(b), 7);
	assert_int_equal(evbuffer_get_length(out), 0);
	o.max_frame_bytes = 4;
	assert_int_equal(weft_frame_encode(out, b, &o), WEFT_EINVAL);
	assert_int_equal(weft_frame_codec_add(f->ch, "bad", &o), WEFT_EINVAL);
	evbuffer_free(b);
	evbuffer_free(out);
	fx_free(f);
}

/* ---- Back-pressure ----------------------------------------------------- */

/*
 * A receiver that pauses reading after every frame and, if it has a timer,
 * resumes from it a millisecond later. It must never be given a frame
 * while reading is paused.
 */
struct pauser {
	weft_channel *ch;
	weft_timer *timer; /* NULL: the test resumes */
	size_t frames;
	size_t while_paused;
};

static void
pause_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct pauser *p = weft_ctx_state(ctx);

	if (!weft_channel_is_auto_read(p->ch))
		p->while_paused++;
	p->frames++;
	weft_channel_set_auto_read(p->ch, false);
	if (p->timer != NULL)
		assert_int_equal(weft_timer_start(p->timer, 1, 0), 0);
	weft_ctx_fire_read(ctx, type, msg);
}

static const weft_handler pause_handler = {.read = pause_read};

static void
on_resume(weft_timer *t, void *arg)
{
	struct pauser *p = arg;

	(void)t;
	weft_channel_set_auto_read(p->ch, true);
}

static bool
all_frames(void *arg)
{
	fx *f = arg;

	return f->msgs >= 40 || f->errors > 0;
}

static void
pause_after_every_frame(bool emit_bytes, bool crc)
{
	static unsigned char stream[40 * 5100];
	weft_frame_codec_opts o = {.emit_bytes = emit_bytes, .crc32c = crc};
	size_t lens[40], i, n = 0, half;
	struct pauser p = {0};
	uint64_t seed = 7;
	fx *f = fixture(&o);

	p.ch = f->ch;
	assert_int_equal(weft_timer_new(f->loop, on_resume, &p, &p.timer), 0);
	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "pause", &pause_handler, &p), 0);
	fx_start(f);
	for (i = 0; i < 40; i++) {
		lens[i] = i % 9 == 4 ? 5000 : fx_rand(&seed) % 200;
		n += weft_test_put_frame(stream + n, i, lens[i], crc);
	}
	/* In two reads, the second while the receiver is paused. */
	half = n / 2 + 3;
	fx_send(f, stream, half);
	assert_int_equal(f->msgs, 1);
	assert_int_equal(bufferevent_write(f->peer, stream + half, n - half),
	                 0);
	assert_int_equal(weft_loop_run_until(f->loop, all_frames, f, 5000), 0);
	check_frames(f, lens, 40);
	assert_int_equal(p.frames, 40);
	assert_int_equal(p.while_paused, 0);
	assert_int_equal(f->errors, 0);
	weft_timer_free(p.timer);
	fx_free(f);
}

static void
test_reading_paused_after_every_frame_loses_none(void **state)
{
	(void)state;
	pause_after_every_frame(false, false);
	pause_after_every_frame(true, false);
	pause_after_every_frame(true, true);
}

/* A receiver that pauses reading after frame number at, once. */
struct pause_once {
	size_t at;
	size_t seen;
};

static void
pause_once_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct pause_once *p = weft_ctx_state(ctx);

	if (p->seen++ == p->at)
		weft_channel_set_auto_read(weft_ctx_channel(ctx), false);
	weft_ctx_fire_read(ctx, type, msg);
}

static const weft_handler pause_once_handler = {.read = pause_once_read};

/*
 * The peer sends frames 0..2 of 20 bytes (and tail bytes of a fourth) and
 * ends the stream while the receiver has paused after frame 0. Resumed,
 * the receiver gets the waiting frames, then the end of the stream: in
 * order when the stream ended on a frame's end, WEFT_EPROTO when it ended
 * inside one.
 */
static void
stream_ends_while_paused(size_t tail)
{
	static const size_t lens[] = {20, 20, 20};
	unsigned char buf[4 * 30];
	struct pause_once p = {0, 0};
	size_t n = 0, i;
	fx *f = fixture(NULL);

	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "pause", &pause_once_handler, &p), 0);
	fx_start(f);
	for (i = 0; i < 4; i++)
		n += weft_test_put_frame(buf + n, i, 20, false);
	fx_send(f, buf, 3 * 24 + tail);
	assert_int_equal(f->msgs, 1);
	fx_peer_close(f);
	/* Paused, the channel does not read the end of the stream. */
	assert_int_equal(weft_loop_run_until(f->loop, all_frames, f, 20),
	                 WEFT_ETIMEDOUT);
	assert_false(f->inactive);
	weft_channel_set_auto_read(f->ch, true);
	fx_run_until_inactive(f);
	check_frames(f, lens, 3);
	if (tail == 0) {
		assert_int_equal(f->errors, 0);
	} else {
		assert_int_equal(f->errors, 1);
		assert_int_equal(f->last_error, WEFT_EPROTO);
	}
	fx_free(f);
}

static void
test_stream_ending_while_paused_delivers_what_waits(void **state)
{
	(void)state;
	stream_ends_while_paused(0);
	stream_ends_while_paused(1);
	stream_ends_while_paused(10);
}

/* ---- Incomplete frames ------------------------------------------------- */

static void
test_incomplete_frame_is_reported_after_each_batch(void **state)
{
	unsigned char buf[2 * (8 + 100)];
	weft_frame_codec_opts o = {.crc32c = true};
	size_t n;
	fx *f = fixture(&o);

	(void)state;
	fx_start(f);
	n = weft_test_put_frame(buf, 0, 100, true);
	/* Fewer than 4 length bytes: the size is not known yet. */
	fx_send(f, buf, 2);
	assert_int_equal(f->events, 1);
	assert_int_equal(f->last_event, WEFT_FRAME_EVENT_INCOMPLETE);
	assert_int_equal(f->partial_have, 2);
	assert_int_equal(f->partial_total, 0);
	fx_send(f, buf + 2, 8);
	assert_int_equal(f->events, 2);
	assert_int_equal(f->partial_have, 10);
	assert_int_equal(f->partial_total, 108);
	/* The rest, and the start of the next frame, in one batch: the
	 * event after it is about the second frame. */
	weft_test_put_frame(buf + n, 1, 100, true);
	fx_send(f, buf + 10, n - 10 + 5);
	assert_int_equal(f->msgs, 1);
	assert_int_equal(f->events, 3);
	assert_int_equal(f->partial_have, 5);
	assert_int_equal(f->partial_total, 108);
	/* A batch that ends on a frame's end fires nothing. */
	fx_send(f, buf + n + 5, n - 5);
	assert_int_equal(f->msgs, 2);
	assert_int_equal(f->events, 3);
	assert_int_equal(WEFT_FRAME_EVENT_INCOMPLETE <= WEFT_CODEC_EVENT_FIRST,
	                 1);
	assert_int_equal(WEFT_FRAME_EVENT_INCOMPLETE >= WEFT_CODEC_EVENT_LAST,
	                 1);
	fx_free(f);
}

static bool
two_frames(void *arg)
{
	return ((fx *)arg)->msgs >= 2;
}

static void
test_no_incomplete_event_while_paused(void **state)
{
	unsigned char buf[3 * 40];
	struct pauser p = {0};
	size_t n;
	fx *f = fixture(NULL);

	(void)state;
	p.ch = f->ch;
	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "pause", &pause_handler, &p), 0);
	fx_start(f);
	n = weft_test_put_frame(buf, 0, 20, false);
	n += weft_test_put_frame(buf + n, 1, 20, false);
	weft_test_put_frame(buf + n, 2, 20, false);
	fx_send(f, buf, n + 10);
	assert_int_equal(f->msgs, 1);
	assert_int_equal(f->events, 0);
	/* Resumed: one frame, and paused again before the partial one. */
	weft_channel_set_auto_read(f->ch, true);
	assert_int_equal(weft_loop_run_until(f->loop, two_frames, f, 5000), 0);
	assert_int_equal(weft_loop_run_until(f->loop, all_frames, f, 30),
	                 WEFT_ETIMEDOUT);
	assert_int_equal(f->msgs, 2);
	assert_int_equal(f->events, 0);
	/* Resumed again: only the partial frame is left, and reported. */
	weft_channel_set_auto_read(f->ch, true);
	assert_int_equal(weft_loop_run_until(f->loop, all_frames, f, 30),
	                 WEFT_ETIMEDOUT);
	assert_int_equal(f->events, 1);
	assert_int_equal(f->partial_have, 10);
	assert_int_equal(f->partial_total, 24);
	fx_free(f);
}

/* ---- Frames in place --------------------------------------------------- */

/* Sends bytes to the channel as chains that end at the given offsets. */
static void
send_chains(fx *f, const unsigned char *data, const size_t *ends, size_t n)
{
	struct evbuffer *all = evbuffer_new(), *one;
	size_t k, off = 0;

	for (k = 0; k < n; k++) {
		one = evbuffer_new();
		evbuffer_add(one, data + off, ends[k] - off);
		evbuffer_add_buffer(all, one);
		evbuffer_free(one);
		off = ends[k];
	}
	assert_int_equal(evbuffer_peek(all, -1, NULL, NULL, 0), (int)n);
	assert_int_equal(bufferevent_write_buffer(f->peer, all), 0);
	evbuffer_free(all);
}

static bool
has_frames(void *arg)
{
	fx *f = arg;

	return f->msgs >= 4;
}

static void
test_small_frames_across_chains_come_contiguous(void **state)
{
	static unsigned char buf[4 * 6000];
	static const size_t lens[] = {100, 200, 5000, 30};
	weft_frame_codec_opts o = {.emit_bytes = true, .crc32c = true};
	size_t n = 0, i, ends[4];
	fx *f = fixture(&o);

	(void)state;
	fx_start(f);
	for (i = 0; i < 4; i++)
		n += weft_test_put_frame(buf + n, i, lens[i], true);
	/* Chains end inside frame 1 (small), inside frame 2 (large), and
	 * inside frame 3's length field. */
	ends[0] = 108 + 50;
	ends[1] = 108 + 208 + 3000;
	ends[2] = 108 + 208 + 5008 + 2;
	ends[3] = n;
	send_chains(f, buf, ends, 4);
	assert_int_equal(weft_loop_run_until(f->loop, has_frames, f, 5000), 0);
	check_frames(f, lens, 4);
	/* Every small frame as a byte run, the large one as an evbuffer. */
	assert_int_equal(f->byte_runs, 3);
	assert_int_equal(f->errors, 0);
	fx_free(f);
}

/*
 * A large frame comes as an evbuffer, also when it lies whole in the first
 * chain and with emit_bytes: its receiver may keep it by moving chains.
 * Small frames around it come as byte runs with emit_bytes.
 */
static void
large_frames_in_chains(bool emit_bytes)
{
	static unsigned char buf[4 * 20100];
	static const size_t lens[] = {10, 20000, 20000, 30};
	weft_frame_codec_opts o = {.emit_bytes = emit_bytes, .crc32c = true};
	size_t n = 0, i, ends[2];
	fx *f = fixture(&o);

	fx_start(f);
	for (i = 0; i < 4; i++)
		n += weft_test_put_frame(buf + n, i, lens[i], true);
	/* Frames 0 and 1 in the first chain, frame 2 across both. */
	ends[0] = 18 + 20008 + 100;
	ends[1] = n;
	send_chains(f, buf, ends, 2);
	assert_int_equal(weft_loop_run_until(f->loop, has_frames, f, 5000), 0);
	check_frames(f, lens, 4);
	assert_int_equal(f->byte_runs, emit_bytes ? 2 : 0);
	assert_int_equal(f->errors, 0);
	fx_free(f);
}

static void
test_large_frames_come_as_evbuffers(void **state)
{
	(void)state;
	large_frames_in_chains(true);
	large_frames_in_chains(false);
}

static bool
got_2000(void *arg)
{
	return ((fx *)arg)->msgs >= 2000;
}

static void
test_frames_in_place_allocate_nothing(void **state)
{
	static unsigned char stream[2000 * 72];
	weft_frame_codec_opts o = {.emit_bytes = true, .crc32c = true};
	size_t i, n = 0, bytes, calls;
	fx *f = fixture(&o);

	(void)state;
	alloc_count_setup();
	fx_start(f);
	for (i = 0; i < 2000; i++)
		n += weft_test_put_frame(stream + n, i, 64, true);
	assert_int_equal(bufferevent_write(f->peer, stream, n), 0);
	alloc_count_start();
	assert_int_equal(weft_loop_run_until(f->loop, got_2000, f, 5000), 0);
	bytes = alloc_count_stop();
	calls = alloc_calls;
	/* The sink's own copies of what it got (into an evbuffer that grows
	 * a chain at a time) are the only allocations: far fewer than one
	 * per frame. */
	print_message("2000 frames in place: %zu allocations, %zu bytes, "
	              "sink copies included\n",
	              calls, bytes);
	assert_true(calls < 100);
	assert_true(bytes <= 2000 * 64 + 16384);
	assert_int_equal(f->byte_runs, 2000);
	fx_free(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_crc_switched_inbound_mid_stream),
	    cmocka_unit_test(test_wrong_crc_after_switching_on_is_rejected),
	    cmocka_unit_test(
	        test_frame_without_crc_after_switching_off_is_accepted),
	    cmocka_unit_test(
	        test_crc_switched_outbound_applies_to_later_writes),
	    cmocka_unit_test(test_quiet_codec_fails_without_logging),
	    cmocka_unit_test(test_failure_lines_are_rate_limited),
	    cmocka_unit_test(test_setters_find_only_frame_codecs),
	    cmocka_unit_test(test_limit_raised_after_the_first_frame),
	    cmocka_unit_test(test_limit_lowered_applies_to_the_waiting_frame),
	    cmocka_unit_test(test_frames_below_the_minimum_are_rejected),
	    cmocka_unit_test(test_writes_below_the_minimum_fail),
	    cmocka_unit_test(test_reading_paused_after_every_frame_loses_none),
	    cmocka_unit_test(
	        test_stream_ending_while_paused_delivers_what_waits),
	    cmocka_unit_test(
	        test_incomplete_frame_is_reported_after_each_batch),
	    cmocka_unit_test(test_no_incomplete_event_while_paused),
	    cmocka_unit_test(test_small_frames_across_chains_come_contiguous),
	    cmocka_unit_test(test_large_frames_come_as_evbuffers),
	    cmocka_unit_test(test_frames_in_place_allocate_nothing),
	};

	fx_log_capture();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
