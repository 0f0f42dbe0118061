/* SPDX-License-Identifier: MIT */
/*
 * fuzz_decompress.c: compressed frame bodies from the network.
 *
 * The first input byte picks the limits: bits 0-1 the algorithms accepted
 * (both, LZ4, zstd, both), 2-3 max_body_bytes (the default, 64, 4096,
 * 1 MiB), 4-5 max_ratio (the default 255, 2, 16, 4096), 6 emit_bytes for
 * the frame codec, 7 the algorithm the codec writes with (LZ4, zstd). The
 * rest is one body, which goes two ways:
 *
 * - to weft_compress_decode: when it decodes, it makes exactly raw_len
 *   bytes, not starting c1 01, and those bytes compressed again with
 *   either algorithm decode back to themselves;
 * - twice, as two frames, to a channel over a Unix socket pair with a
 *   frame codec and a compression codec with the same limits, whose
 *   receiver writes every body back (so the codec's writes see the same
 *   data); then the peer closes.
 *
 * Nothing may crash, leak or hang, nor hold memory out of proportion: a
 * body may make what its limits allow (raw_len at most max_body_bytes
 * and max_ratio times the body), and the pipeline a few copies of that,
 * but no more (fuzz.h): a raw_len claim is checked before anything is
 * allocated.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/compress.h>
#include <weft/frame.h>
#include <weft/transport.h>

#include "fuzz.h"
#include "socket_pipe.h"

/* The compression contexts, made before the watch starts, may grow with
 * the sizes they see. */
#define CONTEXT_SLACK (1u << 20)

struct limits {
	unsigned accept;
	size_t max_body_bytes;
	uint32_t max_ratio;
	int alg;
	bool emit_bytes;
};

static struct limits
limits_of(uint8_t setup)
{
	static const unsigned accepts[4] = {
	    0, 1u << WEFT_COMPRESS_LZ4, 1u << WEFT_COMPRESS_ZSTD,
	    (1u << WEFT_COMPRESS_LZ4) | (1u << WEFT_COMPRESS_ZSTD)};
	static const size_t bodies[4] = {0, 64, 4096, 1u << 20};
	static const uint32_t ratios[4] = {0, 2, 16, 4096};

	return (struct limits){
	    .accept = accepts[setup & 3],
	    .max_body_bytes = bodies[(setup >> 2) & 3],
	    .max_ratio = ratios[(setup >> 4) & 3],
	    .alg = setup & 0x80 ? WEFT_COMPRESS_ZSTD : WEFT_COMPRESS_LZ4,
	    .emit_bytes = setup & 0x40,
	};
}

/* The most raw bytes a body of len bytes may make under l. */
static size_t
raw_bound(const struct limits *l, size_t len)
{
	uint64_t by_ratio =
	    (uint64_t)len *
	    (l->max_ratio != 0 ? l->max_ratio : WEFT_COMPRESS_DEFAULT_RATIO);
	size_t max =
	    l->max_body_bytes != 0 ? l->max_body_bytes : WEFT_FRAME_LIMIT;

	return by_ratio < max ? (size_t)by_ratio : max;
}

/* Makes this thread's contexts, so that the watch does not count them. */
static void
warm_up(void)
{
	static const char text[] = "warm up warm up warm up warm up warm up";
	struct evbuffer *out = evbuffer_new(), *back = evbuffer_new();
	int alg;

	if (out == NULL || back == NULL)
		abort();
	for (alg = WEFT_COMPRESS_LZ4; alg <= WEFT_COMPRESS_ZSTD; alg++) {
		if (weft_compress_encode(out, alg, 0, 0, text, sizeof(text)) <=
		    0)
			abort();
		if (weft_compress_decode(back, evbuffer_pullup(out, -1),
		                         evbuffer_get_length(out), 0, 0, 0,
		                         NULL) != 0)
			abort();
		evbuffer_drain(out, evbuffer_get_length(out));
		evbuffer_drain(back, evbuffer_get_length(back));
	}
	evbuffer_free(out);
	evbuffer_free(back);
}

/* raw, compressed again with alg, decodes back to itself. */
static void
check_again(int alg, const unsigned char *raw, size_t len)
{
	struct evbuffer *out = evbuffer_new(), *back = evbuffer_new();
	const char *why = NULL;
	long n;

	if (out == NULL || back == NULL)
		abort();
	n = weft_compress_encode(out, alg, 0, 0, raw, len);
	if (n < 0 && n != WEFT_ENOMEM)
		fuzz_fail("encoding %zu bytes failed: %ld", len, n);
	if (n > 0) {
		if ((size_t)n >= len || evbuffer_get_length(out) != (size_t)n)
			fuzz_fail("encoded %zu bytes to %ld", len, n);
		if (weft_compress_decode(back, evbuffer_pullup(out, -1),
		                         (size_t)n, 0, 0, 0, &why) != 0)
			fuzz_fail("a body it made does not decode: %s", why);
		if (evbuffer_get_length(back) != len ||
		    memcmp(evbuffer_pullup(back, -1), raw, len) != 0)
			fuzz_fail("a body it made decodes to other bytes");
	}
	evbuffer_free(out);
	evbuffer_free(back);
}

static void
decode_alone(const struct limits *l, const uint8_t *body, size_t len)
{
	struct evbuffer *out = evbuffer_new();
	const unsigned char *raw;
	const char *why = NULL;
	size_t n;
	int rv;

	if (out == NULL)
		abort();
	rv = weft_compress_decode(out, body, len, l->accept, l->max_body_bytes,
	                          l->max_ratio, &why);
	n = evbuffer_get_length(out);
	if (rv != 0) {
		if (why == NULL || n != 0)
			fuzz_fail("failed (%d) without a reason, or with %zu "
			          "bytes out",
			          rv, n);
		evbuffer_free(out);
		return;
	}
	raw = evbuffer_pullup(out, -1);
	if (len < WEFT_COMPRESS_HEADER_BYTES ||
	    n != ((size_t)body[3] << 24 | (size_t)body[4] << 16 |
	          (size_t)body[5] << 8 | body[6]) ||
	    n > raw_bound(l, len - WEFT_COMPRESS_HEADER_BYTES))
		fuzz_fail("decoded %zu bytes, not raw_len within bounds", n);
	if (n >= 2 && raw[0] == WEFT_WRAPPED_MARK &&
	    raw[1] == WEFT_WRAPPED_COMPRESSED)
		fuzz_fail("decoded to a compressed body");
	check_again(WEFT_COMPRESS_LZ4, raw, n);
	check_again(WEFT_COMPRESS_ZSTD, raw, n);
	evbuffer_free(out);
}

/* ---- The pipeline ------------------------------------------------------- */

struct run {
	fuzz_pipe pipe;
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

/* Runs the pipeline over body; its memory is watched from the channel's
 * start to its end, bounded by bound bytes. */
static void
through_pipeline(const struct limits *l, const uint8_t *body, size_t len,
                 size_t bound)
{
	weft_frame_codec_opts fo = {.emit_bytes = l->emit_bytes};
	weft_compress_codec_opts zo = {.alg = l->alg,
	                               .accept = l->accept,
	                               .max_body_bytes = l->max_body_bytes,
	                               .max_ratio = l->max_ratio,
	                               .quiet = true};
	uint8_t hdr[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16),
	                  (uint8_t)(len >> 8), (uint8_t)len};
	struct run r;
	uint32_t rng = 0;

	fuzz_pipe_open(&r.pipe, &r);
	if (weft_frame_codec_add(r.pipe.ch, "frame", &fo) != 0 ||
	    weft_compress_codec_add(r.pipe.ch, "z", &zo) != 0 ||
	    weft_pipeline_add_last(r.pipe.ch, "echo", &echo, NULL) != 0)
		abort();
	weft_channel_activate(r.pipe.ch);
	fuzz_alloc_begin();
	fuzz_pipe_send(&r.pipe, 0, &rng, hdr, sizeof(hdr));
	fuzz_pipe_send(&r.pipe, 0, &rng, body, len);
	fuzz_pipe_send(&r.pipe, 0, &rng, hdr, sizeof(hdr));
	fuzz_pipe_send(&r.pipe, 0, &rng, body, len);
	fuzz_pipe_finish(&r.pipe, bound, "compress pipeline");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct limits l;
	size_t raw;

	if (size < 1)
		return 0;
	l = limits_of(data[0]);
	raw = raw_bound(&l, size);
	weft_log_set_level(WEFT_LOG_OFF);
	warm_up();
	fuzz_alloc_begin();
	decode_alone(&l, data + 1, size - 1);
	fuzz_alloc_end_within(FUZZ_ALLOC_PER_BYTE * size + FUZZ_ALLOC_SLACK +
	                          CONTEXT_SLACK + 3 * raw,
	                      "weft_compress_decode");
	through_pipeline(&l, data + 1, size - 1,
	                 FUZZ_ALLOC_PER_BYTE * size + FUZZ_ALLOC_SLACK +
	                     CONTEXT_SLACK + FUZZ_CHANNEL_BUFFERS + 6 * raw);
	return 0;
}
