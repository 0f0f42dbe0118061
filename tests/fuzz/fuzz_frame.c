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
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <weft/frame.h>
#include <weft/line.h>
#include <weft/msgpack_codec.h>
#include <weft/transport.h>

#include "fuzz.h"

/* What a socket channel holds whatever it reads: a read chain and a
 * write batch (libevent rounds each 16 KiB request up to a 32 KiB chain),
 * and the chain an echo's small writes are gathered in. */
#define CHANNEL_BUFFERS (3u * 32768)

struct run {
	uint8_t setup;
	weft_loop *loop;
	weft_channel *ch;
	int fd;   /* the channel's end */
	int peer; /* ours */
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

/* Drops what the channel echoed, so that its writes never back up. */
static void
drain_peer(struct run *r)
{
	char buf[4096];

	while (recv(r->peer, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

/* The channel has read every byte sent so far (or is gone). */
static bool
settled(void *arg)
{
	struct run *r = arg;
	int unread = 0;

	drain_peer(r);
	return r->inactive || ioctl(r->fd, FIONREAD, &unread) != 0 ||
	       unread == 0;
}

static bool
is_inactive(void *arg)
{
	struct run *r = arg;

	drain_peer(r);
	return r->inactive;
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
	ssize_t sent;

	while (size > 0 && !r->inactive) {
		n = chunk_size(setup, &rng, size);
		if ((sent = send(r->peer, data, n, MSG_NOSIGNAL)) <= 0)
			return; /* the channel closed its end */
		if (weft_loop_run_until(r->loop, settled, r, 5000) != 0)
			fuzz_fail("the pipeline hangs");
		data += sent;
		size -= (size_t)sent;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run r = {0};
	int fds[2];

	if (size < 1)
		return 0;
	r.setup = data[0];
	weft_log_set_level(WEFT_LOG_OFF);
	if (weft_loop_new(&r.loop) != 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0 ||
	    weft_channel_new_socket(r.loop, fds[0], NULL, &r.ch) != 0)
		abort();
	r.fd = fds[0];
	r.peer = fds[1];
	weft_channel_set_data(r.ch, &r);
	if (build(&r, r.setup) != 0)
		abort();
	weft_channel_activate(r.ch);
	fuzz_alloc_begin();
	feed(&r, r.setup, data + 1, size - 1);
	shutdown(r.peer, SHUT_WR);
	if (weft_loop_run_until(r.loop, is_inactive, &r, 5000) != 0)
		fuzz_fail("the channel did not end after the input");
	fuzz_alloc_end_within(FUZZ_ALLOC_PER_BYTE * size + FUZZ_ALLOC_SLACK +
	                          CHANNEL_BUFFERS,
	                      "frame pipeline");
	close(r.peer);
	weft_loop_free(r.loop);
	return 0;
}
