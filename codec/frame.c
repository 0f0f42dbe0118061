/* SPDX-License-Identifier: MIT */
/* frame.c: the length-field frame codec (weft/frame.h). */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/crc32c.h>
#include <weft/frame.h>

#include "codec_int.h"

#define HDR WEFT_FRAME_HEADER_BYTES
#define CRC WEFT_FRAME_CRC_BYTES

typedef struct frame_codec {
	weft__codec base; /* first: see weft__codec */
	size_t max_frame_bytes;
	bool crc32c;
	bool emit_bytes;
} frame_codec;

static void
opts_resolve(const weft_frame_codec_opts *opts, size_t *max, bool *crc)
{
	*max = WEFT_FRAME_DEFAULT_MAX;
	*crc = false;
	if (opts == NULL)
		return;
	if (opts->max_frame_bytes != 0)
		*max = opts->max_frame_bytes;
	/* evbuffer_remove_buffer counts in an int. */
	if (*max > WEFT_FRAME_LIMIT)
		*max = WEFT_FRAME_LIMIT;
	*crc = opts->crc32c;
}

static size_t
trailer_bytes(const frame_codec *f)
{
	return f->crc32c ? CRC : 0;
}

static void
fail_too_big(frame_codec *f, weft_ctx *ctx, size_t len)
{
	weft__codec_fail(&f->base, ctx, WEFT_ETOOBIG,
	                 "frame of %zu bytes is above the %zu-byte limit", len,
	                 f->max_frame_bytes);
}

static void
fail_crc(frame_codec *f, weft_ctx *ctx, size_t len, uint32_t want, uint32_t got)
{
	weft__codec_fail(&f->base, ctx, WEFT_ECHECKSUM,
	                 "frame of %zu bytes has CRC32C %08x, expected %08x",
	                 len, got, want);
}

/*
 * Decodes the small frames that lie whole in the input's first chain,
 * straight from its memory, and drains them once at the end. The pointer
 * into the chain stays valid while the receivers run: nothing but this
 * codec removes bytes from the input, a read that re-enters returns at
 * once, and appending to an evbuffer (add_buffer, or a socket read through
 * reserve_space with two iovecs) never moves the data of a chain that
 * already holds bytes. Returns how many frames it delivered.
 */
static int
decode_first_chain(frame_codec *f, weft_ctx *ctx, struct evbuffer *in)
{
	struct evbuffer_iovec v;
	const unsigned char *p;
	size_t off = 0, len, need;
	uint32_t want, got;
	int n = 0;

	if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
		return 0;
	p = v.iov_base;
	while (!weft__codec_done(&f->base) && v.iov_len - off >= HDR) {
		len = weft__load_be32(p + off);
		if (len > f->max_frame_bytes) {
			fail_too_big(f, ctx, len);
			break;
		}
		need = HDR + len + trailer_bytes(f);
		if (len > WEFT__CODEC_COPY_MAX || v.iov_len - off < need)
			break;
		if (f->crc32c) {
			want = weft__load_be32(p + off + HDR + len);
			got = weft_crc32c(0, p + off, HDR + len);
			if (want != got) {
				fail_crc(f, ctx, len, want, got);
				break;
			}
		}
		if (f->emit_bytes) {
			off += need;
			n++;
			weft__codec_deliver_bytes(&f->base, ctx,
			                          p + off - need + HDR, len);
			continue;
		}
		if (evbuffer_add(f->base.msg, p + off + HDR, len) != 0) {
			weft__codec_fail(&f->base, ctx, WEFT_ENOMEM,
			                 "no memory for a frame");
			break;
		}
		off += need;
		n++;
		weft__codec_deliver(&f->base, ctx, len);
	}
	if (off > 0)
		evbuffer_drain(in, off);
	return n;
}

/* Decodes one frame from anywhere in the input, moving its chains. Returns
 * 1 when it delivered one, 0 when the frame is incomplete or bad. */
static int
decode_one(frame_codec *f, weft_ctx *ctx, struct evbuffer *in)
{
	size_t avail = evbuffer_get_length(in), len;
	unsigned char hdr[HDR], trailer[CRC];
	uint32_t got;

	if (avail < HDR)
		return 0;
	evbuffer_copyout(in, hdr, HDR);
	len = weft__load_be32(hdr);
	if (len > f->max_frame_bytes) {
		fail_too_big(f, ctx, len);
		return 0;
	}
	if (avail < HDR + len + trailer_bytes(f))
		return 0;
	if (f->crc32c) {
		got = weft__crc32c_evbuffer(0, in, HDR + len);
		evbuffer_drain(in, HDR);
		if (evbuffer_remove_buffer(in, f->base.msg, len) != (int)len)
			goto err_nomem;
		evbuffer_remove(in, trailer, CRC);
		if (weft__load_be32(trailer) != got) {
			fail_crc(f, ctx, len, weft__load_be32(trailer), got);
			return 0;
		}
	} else {
		evbuffer_drain(in, HDR);
		if (evbuffer_remove_buffer(in, f->base.msg, len) != (int)len)
			goto err_nomem;
	}
	weft__codec_deliver(&f->base, ctx, len);
	return 1;

err_nomem:
	weft__codec_fail(&f->base, ctx, WEFT_ENOMEM, "no memory for a frame");
	return 0;
}

static void
decode(weft__codec *c, weft_ctx *ctx, struct evbuffer *in)
{
	frame_codec *f = (frame_codec *)c;

	while (!weft__codec_done(c)) {
		if (decode_first_chain(f, ctx, in) > 0)
			continue;
		if (weft__codec_done(c) || decode_one(f, ctx, in) == 0)
			break;
	}
}

static void
frame_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	weft__codec_read_bytes(ctx, type, msg, decode);
}

/* Appends the frame of len payload bytes to out, contiguous: header,
 * payload (copied), CRC. */
static int
encode_copy(struct evbuffer *out, struct evbuffer *payload, size_t len,
            bool crc32c)
{
	size_t total = HDR + len + (crc32c ? CRC : 0);
	struct evbuffer_iovec v;
	unsigned char *p;

	if (evbuffer_reserve_space(out, (ev_ssize_t)total, &v, 1) < 1)
		return WEFT_ENOMEM;
	p = v.iov_base;
	weft__store_be32(p, (uint32_t)len);
	if (len > 0)
		evbuffer_copyout(payload, p + HDR, len);
	if (crc32c)
		weft__store_be32(p + HDR + len, weft_crc32c(0, p, HDR + len));
	v.iov_len = total;
	if (evbuffer_commit_space(out, &v, 1) != 0)
		return WEFT_ENOMEM;
	evbuffer_drain(payload, len);
	return 0;
}

/* Appends the frame of len payload bytes to out, moving payload's chains
 * between header and CRC. */
static int
encode_move(struct evbuffer *out, struct evbuffer *payload, size_t len,
            bool crc32c)
{
	unsigned char hdr[HDR], trailer[CRC];
	uint32_t crc = 0;

	weft__store_be32(hdr, (uint32_t)len);
	if (crc32c)
		crc = weft__crc32c_evbuffer(weft_crc32c(0, hdr, HDR), payload,
		                            len);
	if (evbuffer_add(out, hdr, HDR) != 0)
		return WEFT_ENOMEM;
	if (evbuffer_add_buffer(out, payload) != 0)
		return WEFT_ENOMEM;
	if (!crc32c)
		return 0;
	weft__store_be32(trailer, crc);
	return evbuffer_add(out, trailer, CRC) == 0 ? 0 : WEFT_ENOMEM;
}

static int
encode(struct evbuffer *out, struct evbuffer *payload, size_t max, bool crc32c)
{
	size_t len = evbuffer_get_length(payload);

	if (len > max)
		return WEFT_ETOOBIG;
	if (len <= WEFT__CODEC_COPY_MAX)
		return encode_copy(out, payload, len, crc32c);
	return encode_move(out, payload, len, crc32c);
}

int
weft_frame_encode(struct evbuffer *out, struct evbuffer *payload,
                  const weft_frame_codec_opts *opts)
{
	size_t max;
	bool crc;

	if (out == NULL || payload == NULL)
		return WEFT_EINVAL;
	opts_resolve(opts, &max, &crc);
	return encode(out, payload, max, crc);
}

/* Encodes an evbuffer payload (above the copy limit, or too big). */
static void
frame_write_evbuffer(frame_codec *f, weft_ctx *ctx, struct evbuffer *msg,
                     weft_write_cb cb, void *cb_arg)
{
	size_t len = evbuffer_get_length(msg);
	struct evbuffer *out;
	int rv;

	if ((out = weft__codec_out_begin(&f->base)) == NULL) {
		weft_ctx_fail_write(ctx, &weft_msg_evbuffer, msg, cb, cb_arg,
		                    WEFT_ENOMEM);
		return;
	}
	rv = encode(out, msg, f->max_frame_bytes, f->crc32c);
	if (rv != 0) {
		if (rv == WEFT_ETOOBIG)
			weft_warn(
			    "%s: frame codec '%s': not sending a frame of "
			    "%zu bytes, above the %zu-byte limit",
			    weft_channel_peer(weft_ctx_channel(ctx)),
			    weft_ctx_name(ctx), len, f->max_frame_bytes);
		weft_msg_free(&weft_msg_evbuffer, msg);
		weft__codec_out_fail(&f->base, ctx, out, cb, cb_arg, rv);
		return;
	}
	weft__codec_out_send(&f->base, ctx, out, len, cb, cb_arg);
}

/*
 * Builds a small frame on the stack and passes it on as a borrowed byte
 * run, which the next handler copies: no allocation per frame. The
 * payload is consumed (an evbuffer drained) like any written message.
 */
static void
write_small(frame_codec *f, weft_ctx *ctx, const weft_msg_type *type, void *msg,
            size_t len, weft_write_cb cb, void *cb_arg)
{
	unsigned char frame[HDR + WEFT__CODEC_COPY_MAX + CRC];
	weft_bytes run = {frame, HDR + len + trailer_bytes(f)};

	weft__store_be32(frame, (uint32_t)len);
	weft_msg_copyout(type, msg, frame + HDR, len);
	if (type == &weft_msg_evbuffer)
		evbuffer_drain(msg, len);
	if (f->crc32c)
		weft__store_be32(frame + HDR + len,
		                 weft_crc32c(0, frame, HDR + len));
	f->base.stats.msgs_out++;
	f->base.stats.bytes_out += len;
	weft__codec_enter(&f->base);
	weft_ctx_write(ctx, &weft_msg_bytes, &run, cb, cb_arg);
	weft__codec_leave(&f->base);
}

/* A large borrowed byte run takes the evbuffer path as a copy. */
static void
write_bytes_large(frame_codec *f, weft_ctx *ctx, const weft_bytes *b,
                  weft_write_cb cb, void *cb_arg)
{
	struct evbuffer *tmp = evbuffer_new();

	if (tmp == NULL || evbuffer_add(tmp, b->data, b->len) != 0) {
		if (tmp != NULL)
			evbuffer_free(tmp);
		weft_ctx_fail_write(ctx, &weft_msg_bytes, NULL, cb, cb_arg,
		                    WEFT_ENOMEM);
		return;
	}
	frame_write_evbuffer(f, ctx, tmp, cb, cb_arg);
	evbuffer_free(tmp);
}

static void
frame_write(weft_ctx *ctx, const weft_msg_type *type, void *msg,
            weft_write_cb cb, void *cb_arg)
{
	frame_codec *f = weft_ctx_state(ctx);
	size_t len;

	if (!weft_msg_is_bytes(type)) {
		weft_ctx_write(ctx, type, msg, cb, cb_arg);
		return;
	}
	len = weft_msg_length(type, msg);
	if (len <= WEFT__CODEC_COPY_MAX && len <= f->max_frame_bytes)
		write_small(f, ctx, type, msg, len, cb, cb_arg);
	else if (type == &weft_msg_bytes)
		write_bytes_large(f, ctx, msg, cb, cb_arg);
	else
		frame_write_evbuffer(f, ctx, msg, cb, cb_arg);
}

static const weft_handler frame_handler = {
    .removed = weft__codec_removed,
    .read = frame_read,
    .inactive = weft__codec_inactive,
    .write = frame_write,
    .flush = weft__codec_flush,
    .close = weft__codec_close,
};

static int
frame_codec_add(weft_channel *ch, const char *base, const char *name,
                const weft_frame_codec_opts *opts)
{
	frame_codec *f;
	int rv;

	if ((f = calloc(1, sizeof(*f))) == NULL)
		return WEFT_ENOMEM;
	if ((rv = weft__codec_init(&f->base, WEFT_CODEC_FRAME)) != 0) {
		free(f);
		return rv;
	}
	opts_resolve(opts, &f->max_frame_bytes, &f->crc32c);
	f->emit_bytes = opts != NULL && opts->emit_bytes;
	return weft__codec_add(ch, base, name, &frame_handler, &f->base);
}

int
weft_frame_codec_add(weft_channel *ch, const char *name,
                     const weft_frame_codec_opts *opts)
{
	return frame_codec_add(ch, WEFT__CODEC_LAST, name, opts);
}

int
weft_frame_codec_add_after(weft_channel *ch, const char *base, const char *name,
                           const weft_frame_codec_opts *opts)
{
	return frame_codec_add(ch, base, name, opts);
}
