/* SPDX-License-Identifier: MIT */
/*
 * fuzz_chunk.c: frame bodies from the network through a frame codec and a
 * chunk codec.
 *
 * The first input byte picks the set-up; the rest arrives at a channel
 * over a Unix socket pair, read as a TCP channel reads, in pieces whose
 * sizes the set-up byte also picks, then the peer closes. Set-up bits:
 * 0-1 max_assembling (1 to 4), 2-3 max_message_bytes (256 MiB, 64, 4096,
 * 100000), 4 emit_bytes on the frame codec, 5 chunk_bytes for sending (64
 * or 1000), 6-7 piece size (whole, 1, up to 7, up to 61 bytes). Every
 * body that comes out (assembled or plain) is written back with send on,
 * so large ones leave as chunks and the encoder and its pacing run too.
 * Every ASSEMBLING event must describe a possible state. Nothing may
 * crash, leak or hang, nor hold memory out of proportion to the input
 * (fuzz.h, beyond the channel's own buffers): a first chunk that declares
 * 256 MiB must not reserve it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/chunk.h>
#include <weft/frame.h>
#include <weft/transport.h>

#include "fuzz.h"
#include "socket_pipe.h"

static const size_t max_messages[4] = {0, 64, 4096, 100000};

struct run {
	fuzz_pipe pipe;
	uint8_t setup;
	uint32_t max_assembling;
	size_t max_message_bytes;
};

static void
echo_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	weft_ctx_write(ctx, type, msg, NULL, NULL);
}

static void
echo_read_complete(weft_ctx *ctx)
{
	weft_ctx_flush(ctx);
}

static void
echo_event(weft_ctx *ctx, int event, void *data)
{
	struct run *r = weft_channel_data(weft_ctx_channel(ctx));
	const weft_chunk_assembling *a = data;

	if (event != WEFT_CHUNK_EVENT_ASSEMBLING)
		return;
	if (a->messages > r->max_assembling || a->have_bytes > a->total_bytes ||
	    a->total_bytes > a->messages * r->max_message_bytes ||
	    (a->messages == 0 && a->total_bytes != 0))
		fuzz_fail("impossible ASSEMBLING event: %zu message(s), "
		          "%zu of %zu byte(s)",
		          a->messages, a->have_bytes, a->total_bytes);
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
    .user_event = echo_event,
    .inactive = echo_inactive,
};

static int
build(struct run *r, uint8_t setup)
{
	weft_frame_codec_opts fo = {.emit_bytes = setup & 16, .quiet = true};
	weft_chunk_codec_opts co = {
	    .chunk_bytes = setup & 32 ? 1000 : 64,
	    .send = true,
	    .max_message_bytes = max_messages[(setup >> 2) & 3],
	    .max_assembling = 1 + (setup & 3),
	    .quiet = true,
	};

	r->max_assembling = co.max_assembling;
	r->max_message_bytes = co.max_message_bytes != 0
	                           ? co.max_message_bytes
	                           : WEFT_CHUNK_DEFAULT_MAX_MESSAGE;
	if (weft_frame_codec_add(r->pipe.ch, "frame", &fo) != 0 ||
	    weft_chunk_codec_add(r->pipe.ch, "chunk", &co) != 0)
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
	                 "chunk pipeline");
	return 0;
}
