/* SPDX-License-Identifier: MIT */
/*
 * fuzz_frame.c: bytes from the network through a real pipeline.
 *
 * The first input byte picks the set-up; the rest arrives at a channel (a
 * bufferevent pair) in chunks whose sizes the set-up byte also picks, then
 * the peer closes. Set-up bits: 0 CRC32C, 1 a 64-byte limit, 2 a msgpack
 * codec after the frame codec, 3 a line codec instead of frames (4: strip
 * '\r', 5: delimiter "\r\n"; with frames, 4: emit_bytes, 5: echo bytes
 * as byte runs), 6-7 chunk size (whole, 1, up to 7, up to 61 bytes). Every
 * message that comes out is written back (echo), so the encoders see the
 * same data. Nothing may crash, leak or hang.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <weft/frame.h>
#include <weft/line.h>
#include <weft/msgpack_codec.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct run {
	uint8_t setup;
	weft_loop *loop;
	weft_channel *ch;
	struct bufferevent *peer;
	size_t reads;
	bool inactive;
};

static void
echo_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct run *r = weft_channel_data(weft_ctx_channel(ctx));

	unsigned char copy[256];
	weft_bytes run;

	r->reads++;
	if (type == &weft_msg_msgpack && weft_msgpack_msg_object(msg) == NULL)
		abort();
	/* Echo a short evbuffer as a byte run of our own, sometimes. */
	if ((r->setup & 0x28) == 0x20 && type == &weft_msg_evbuffer &&
	    weft_msg_length(type, msg) <= sizeof(copy)) {
		run.len = weft_msg_copyout(type, msg, copy, sizeof(copy));
		run.data = copy;
		weft_msg_free(type, msg);
		weft_ctx_write(ctx, &weft_msg_bytes, &run, NULL, NULL);
		return;
	}
	weft_ctx_write(ctx, type, msg, NULL, NULL);
}

static void
echo_read_complete(weft_ctx *ctx)
{
	weft_ctx_flush(ctx);
}

static void
echo_inactive(weft_ctx *ctx)
{
	struct run *r = weft_channel_data(weft_ctx_channel(ctx));

	r->inactive = true;
}

static const weft_handler echo = {
    .read = echo_read,
    .read_complete = echo_read_complete,
    .inactive = echo_inactive,
};

static int
build(struct run *r, uint8_t setup)
{
	weft_frame_codec_opts fo = {.crc32c = setup & 1,
	                            .max_frame_bytes = setup & 2 ? 64 : 0,
	                            .emit_bytes = setup & 16};
	weft_line_codec_opts lo = {
	    .strip_cr = setup & 16,
	    .delimiter = setup & 32 ? "\r\n" : "\n",
	    .max_line_bytes = setup & 2 ? 64 : 0,
	};

	if (setup & 8) {
		if (weft_line_codec_add(r->ch, "line", &lo) != 0)
			return -1;
	} else if (weft_frame_codec_add(r->ch, "frame", &fo) != 0) {
		return -1;
	}
	if ((setup & 4) && weft_msgpack_codec_add(r->ch, "msgpack", NULL) != 0)
		return -1;
	return weft_pipeline_add_last(r->ch, "echo", &echo, NULL);
}

static bool
settled(void *arg)
{
	struct run *r = arg;

	return r->inactive ||
	       evbuffer_get_length(bufferevent_get_output(r->peer)) == 0;
}

static bool
is_inactive(void *arg)
{
	return ((struct run *)arg)->inactive;
}

static size_t
chunk_size(uint8_t setup, uint32_t *rng, size_t left)
{
	size_t n;

	*rng = *rng * 1103515245u + 12345u;
	switch (setup >> 6) {
	case 0:
		n = left;
		break;
	case 1:
		n = 1;
		break;
	case 2:
		n = 1 + (*rng >> 16) % 7;
		break;
	default:
		n = 1 + (*rng >> 16) % 61;
		break;
	}
	return n < left ? n : left;
}

static void
feed(struct run *r, uint8_t setup, const uint8_t *data, size_t size)
{
	uint32_t rng = setup;
	size_t n;

	while (size > 0 && !r->inactive) {
		n = chunk_size(setup, &rng, size);
		bufferevent_write(r->peer, data, n);
		if (weft_loop_run_until(r->loop, settled, r, 5000) != 0)
			abort(); /* a hang */
		/* Keep the echoes from piling up. */
		evbuffer_drain(
		    bufferevent_get_input(r->peer),
		    evbuffer_get_length(bufferevent_get_input(r->peer)));
		data += n;
		size -= n;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bufferevent *pair[2];
	struct run r = {0};
	uint8_t setup;

	if (size < 1)
		return 0;
	setup = data[0];
	weft_log_set_level(WEFT_LOG_OFF);
	if (weft_loop_new(&r.loop) != 0 ||
	    bufferevent_pair_new(weft_loop_base(r.loop), BEV_OPT_CLOSE_ON_FREE,
	                         pair) != 0 ||
	    weft_channel_new(r.loop, pair[0], NULL, &r.ch) != 0)
		abort();
	r.peer = pair[1];
	r.setup = setup;
	weft_channel_set_data(r.ch, &r);
	bufferevent_enable(r.peer, EV_READ | EV_WRITE);
	if (build(&r, setup) != 0)
		abort();
	weft_channel_activate(r.ch);
	feed(&r, setup, data + 1, size - 1);
	bufferevent_flush(r.peer, EV_WRITE, BEV_FINISHED);
	if (weft_loop_run_until(r.loop, is_inactive, &r, 5000) != 0)
		abort();
	bufferevent_free(r.peer);
	weft_loop_free(r.loop);
	return 0;
}
