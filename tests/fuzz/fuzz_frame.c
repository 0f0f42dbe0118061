/* SPDX-License-Identifier: MIT */
/*
 * fuzz_frame.c: bytes from the network through a real pipeline.
 *
 * The first input byte picks the set-up; the rest arrives at a channel
 * over a Unix socket pair, reading the socket itself as a TCP channel
 * does, in chunks whose sizes the set-up byte also picks (each chunk is
 * one read, so frames are put together across reads and chains), then
 * the peer closes. Set-up bits: 0 CRC32C, 1 a 64-byte limit, 2 a msgpack
 * codec after the frame codec, 3 a line codec instead of frames (4: strip
 * '\r', 5: delimiter "\r\n"; with frames, 4: emit_bytes, 5: echo bytes
 * as byte runs), 6-7 chunk size (whole, 1, up to 7, up to 61 bytes). Every
 * message that comes out is written back (echo), so the encoders see the
 * same data. Nothing may crash, leak or hang, nor hold memory out of
 * proportion to the input (fuzz.h, beyond the channel's own read and
 * write buffers): a length field that claims 16 MiB must not reserve it.
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
#include <weft/transport.h>

#include "fuzz.h"
#include "socket_pipe.h"

struct run {
	fuzz_pipe pipe;
	uint8_t setup;
	size_t reads;
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

	r->pipe.inactive = true;
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
		if (weft_line_codec_add(r->pipe.ch, "line", &lo) != 0)
			return -1;
	} else if (weft_frame_codec_add(r->pipe.ch, "frame", &fo) != 0) {
		return -1;
	}
	if ((setup & 4) &&
	    weft_msgpack_codec_add(r->pipe.ch, "msgpack", NULL) != 0)
		return -1;
	return weft_pipeline_add_last(r->pipe.ch, "echo", &echo, NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run r = {0};
	uint32_t rng;

	if (size < 1)
		return 0;
	r.setup = data[0];
	weft_log_set_level(WEFT_LOG_OFF);
	fuzz_pipe_open(&r.pipe, &r);
	if (build(&r, r.setup) != 0)
		abort();
	weft_channel_activate(r.pipe.ch);
	fuzz_alloc_begin();
	rng = r.setup;
	fuzz_pipe_send(&r.pipe, r.setup >> 6, &rng, data + 1, size - 1);
	fuzz_pipe_finish(&r.pipe,
	                 FUZZ_ALLOC_PER_BYTE * size + FUZZ_ALLOC_SLACK +
	                     FUZZ_CHANNEL_BUFFERS,
	                 "frame pipeline");
	return 0;
}
