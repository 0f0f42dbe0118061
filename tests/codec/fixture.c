/* SPDX-License-Identifier: MIT */
/* fixture.c: see fixture.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <weft/transport.h>

#include <weft/frame.h>

#include "fixture.h"

static fx *
fx_of(weft_ctx *ctx)
{
	return weft_channel_data(weft_ctx_channel(ctx));
}

static void
sink_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	fx *f = fx_of(ctx);
	size_t len;

	if (type == &weft_msg_bytes) {
		const weft_bytes *b = msg;

		assert_true(f->msgs < FX_MAX_MSGS);
		f->lens[f->msgs++] = b->len;
		f->byte_runs++;
		evbuffer_add(f->got, b->data, b->len);
		return;
	}
	if (type != &weft_msg_evbuffer) {
		assert_true(f->ntyped < FX_MAX_MSGS);
		f->typed_type[f->ntyped] = type;
		f->typed[f->ntyped++] = msg;
		return;
	}
	len = evbuffer_get_length(msg);
	assert_true(f->msgs < FX_MAX_MSGS);
	f->lens[f->msgs++] = len;
	/* Take the bytes, as a handler that keeps them would. */
	evbuffer_remove_buffer(msg, f->got, len);
}

static void
sink_read_complete(weft_ctx *ctx)
{
	fx *f = fx_of(ctx);

	f->read_completes++;
	if (f->errors > 0)
		f->input_at_error =
		    weft_channel_pending_read_bytes(weft_ctx_channel(ctx));
}

static void
sink_error(weft_ctx *ctx, int status)
{
	fx *f = fx_of(ctx);

	f->errors++;
	f->last_error = status;
	if (f->stats_name != NULL)
		assert_int_equal(weft_codec_get_stats(weft_ctx_channel(ctx),
		                                      f->stats_name,
		                                      &f->err_stats),
		                 0);
}

static void
sink_inactive(weft_ctx *ctx)
{
	fx_of(ctx)->inactive = true;
}

static void
sink_user_event(weft_ctx *ctx, int event, void *data)
{
	fx *f = fx_of(ctx);
	const weft_frame_partial *p = data;

	f->events++;
	f->last_event = event;
	if (event == WEFT_FRAME_EVENT_INCOMPLETE) {
		f->partial_have = p->have;
		f->partial_total = p->total;
	}
}

static const weft_handler sink = {
    .read = sink_read,
    .read_complete = sink_read_complete,
    .user_event = sink_user_event,
    .error = sink_error,
    .inactive = sink_inactive,
};

fx *
fx_new(void)
{
	struct bufferevent *pair[2];
	fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(weft_loop_new(&f->loop), 0);
	assert_int_equal(bufferevent_pair_new(weft_loop_base(f->loop),
	                                      BEV_OPT_CLOSE_ON_FREE, pair),
	                 0);
	assert_int_equal(weft_channel_new(f->loop, pair[0], NULL, &f->ch), 0);
	weft_channel_set_data(f->ch, f);
	weft_channel_set_peer(f->ch, "test-peer");
	f->peer = pair[1];
	bufferevent_enable(f->peer, EV_READ | EV_WRITE);
	f->got = evbuffer_new();
	assert_non_null(f->got);
	return f;
}

void
fx_start(fx *f)
{
	assert_int_equal(weft_pipeline_add_last(f->ch, "sink", &sink, NULL), 0);
	weft_channel_activate(f->ch);
}

static void
free_typed(fx *f)
{
	size_t i;

	for (i = 0; i < f->ntyped; i++)
		weft_msg_free(f->typed_type[i], f->typed[i]);
	f->ntyped = 0;
}

void
fx_free(fx *f)
{
	free_typed(f);
	if (f->peer != NULL)
		bufferevent_free(f->peer);
	weft_loop_free(f->loop);
	evbuffer_free(f->got);
	free(f);
}

struct read_wait {
	fx *f;
	size_t read_completes;
};

/* The pair hands bytes over from a deferred callback: delivered once the
 * pipeline finished a read, or never if the channel is going away. */
static bool
delivered(void *arg)
{
	struct read_wait *w = arg;

	return w->f->inactive || w->f->read_completes > w->read_completes;
}

void
fx_send(fx *f, const void *data, size_t len)
{
	struct read_wait w = {f, f->read_completes};

	if (len == 0)
		return;
	assert_int_equal(bufferevent_write(f->peer, data, len), 0);
	assert_int_equal(weft_loop_run_until(f->loop, delivered, &w, 5000), 0);
}

struct byte_wait {
	fx *f;
	size_t n;
};

static bool
peer_has(void *arg)
{
	struct byte_wait *w = arg;

	return evbuffer_get_length(fx_peer_input(w->f)) >= w->n;
}

void
fx_run_until_peer_has(fx *f, size_t n)
{
	struct byte_wait w = {f, n};

	assert_int_equal(weft_loop_run_until(f->loop, peer_has, &w, 5000), 0);
}

void
fx_peer_close(fx *f)
{
	bufferevent_flush(f->peer, EV_WRITE, BEV_FINISHED);
}

static bool
is_inactive(void *arg)
{
	return ((fx *)arg)->inactive;
}

void
fx_run_until_inactive(fx *f)
{
	assert_int_equal(weft_loop_run_until(f->loop, is_inactive, f, 5000), 0);
}

struct cb_wait {
	fx *f;
	int n;
};

static bool
enough_cbs(void *arg)
{
	struct cb_wait *w = arg;

	return w->f->write_cbs >= w->n;
}

void
fx_run_until_write_cbs(fx *f, int n)
{
	struct cb_wait w = {f, n};

	assert_int_equal(weft_loop_run_until(f->loop, enough_cbs, &w, 5000), 0);
}

void
fx_write_cb(weft_channel *ch, int status, void *arg)
{
	fx *f = arg;

	(void)ch;
	f->write_cbs++;
	f->write_status = status;
}

struct evbuffer *
fx_peer_input(fx *f)
{
	return bufferevent_get_input(f->peer);
}

void
fx_msg(fx *f, size_t i, void *buf)
{
	struct evbuffer_ptr pos;
	size_t off = 0, k;

	assert_true(i < f->msgs);
	for (k = 0; k < i; k++)
		off += f->lens[k];
	assert_int_equal(evbuffer_ptr_set(f->got, &pos, off, EVBUFFER_PTR_SET),
	                 0);
	assert_int_equal(evbuffer_copyout_from(f->got, &pos, buf, f->lens[i]),
	                 (ev_ssize_t)f->lens[i]);
}

void
fx_reset(fx *f)
{
	evbuffer_drain(f->got, evbuffer_get_length(f->got));
	f->msgs = 0;
	free_typed(f);
	f->read_completes = 0;
}

/* GLOBAL (test): the captured log, written by the single test thread. */
static char last_warning[512];
static int warnings;

static void
capture(enum weft_log_level level, const char *line, void *arg)
{
	(void)arg;
	if (level < WEFT_LOG_WARN)
		return;
	snprintf(last_warning, sizeof(last_warning), "%s", line);
	warnings++;
}

void
fx_log_capture(void)
{
	weft_log_set_sink(capture, NULL);
	/* Every failure's line, for the tests that look for it. */
	weft_log_set_peer_interval(0);
}

const char *
fx_last_warning(void)
{
	return last_warning;
}

int
fx_warnings(void)
{
	return warnings;
}

uint32_t
fx_rand(uint64_t *state)
{
	*state = *state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*state >> 33);
}
