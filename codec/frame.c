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
	size_t min_frame_bytes;
	bool crc32c;
	bool emit_bytes;
	unsigned char *rsv; /* the open in-place write's frame */
} frame_codec;

int
weft__frame_opts_resolve(const weft_frame_codec_opts *opts, size_t *min,
                         size_t *max, bool *crc)
{
	*min = 0;
	*max = WEFT_FRAME_DEFAULT_MAX;
	*crc = false;
	if (opts == NULL)
		return 0;
	if (opts->max_frame_bytes != 0)
		*max = opts->max_frame_bytes;
	/* evbuffer_remove_buffer counts in an int. */
	if (*max > WEFT_FRAME_LIMIT)
		*max = WEFT_FRAME_LIMIT;
	*min = opts->min_frame_bytes;
	*crc = opts->crc32c;
	return *min <= *max ? 0 : WEFT_EINVAL;
}

static size_t
trailer_bytes(const frame_codec *f)
{
	return f->crc32c ? CRC : 0;
}

/* Checks a frame's length as soon as it is known, before its payload
 * arrives; closes the channel and returns false when it is out of range. */
static bool
length_ok(frame_codec *f, weft_ctx *ctx, size_t len)
{
	if (len > f->max_frame_bytes) {
		weft__codec_fail(&f->base, ctx, WEFT_ETOOBIG,
		                 "frame of %zu bytes is above the %zu-byte "
		                 "limit",
		                 len, f->max_frame_bytes);
		return false;
	}
	if (len < f->min_frame_bytes) {
		weft__codec_fail(&f->base, ctx, WEFT_EPROTO,
		                 "frame of %zu bytes is below the %zu-byte "
		                 "minimum",
		                 len, f->min_frame_bytes);
		return false;
	}
	return true;
}

/* Checks the CRC32C trailer of the contiguous frame at p (len payload
 * bytes); closes the channel and returns false on a mismatch. */
static bool
crc_ok(frame_codec *f, weft_ctx *ctx, const unsigned char *p, size_t len)
{
	uint32_t want = weft__load_be32(p + HDR + len);
	uint32_t got = weft_crc32c(0, p, HDR + len);

	if (want == got)
		return true;
	weft__codec_fail(&f->base, ctx, WEFT_ECHECKSUM,
	                 "frame of %zu bytes has CRC32C %08x, expected %08x",
	                 len, got, want);
	return false;
}

/*
 * Delivers the small frame at p (contiguous, checked): as a byte run
 * pointing at it with emit_bytes, else copied into an evbuffer. Returns
 * false when memory ran out (the channel then closes).
 */
static bool
deliver_contiguous(frame_codec *f, weft_ctx *ctx, const unsigned char *p,
                   size_t len)
{
	if (f->emit_bytes) {
		weft__codec_deliver_bytes(&f->base, ctx, p + HDR, len);
		return true;
	}
	if (evbuffer_add(f->base.msg, p + HDR, len) != 0) {
		weft__codec_fail(&f->base, ctx, WEFT_ENOMEM,
		                 "no memory for a frame");
		return false;
	}
	weft__codec_deliver(&f->base, ctx, len);
	return true;
}

/*
 * Decodes the small frames that lie whole in the input's first chain,
 * straight from its memory, and drains them once at the end: no evbuffer
 * call per frame. The pointer into
 * the chain stays valid while the receivers run: nothing but this codec removes
 * bytes from the input, a read that re-enters returns at once, and appending to
 * an evbuffer (add_buffer, or a socket read through reserve_space with two
 * iovecs) never moves the data of a chain that already holds bytes. The limits
 * and the CRC option are read for each frame, so a receiver may change them
 * (weft_frame_codec_set_crc) for the frames after its own. Returns how
 * many frames it delivered.
 */
static int
decode_first_chain(frame_codec *f, weft_ctx *ctx, struct evbuffer *in)
{
	struct evbuffer_iovec v;
	const unsigned char *p;
	size_t off = 0, len, need;
	int n = 0;

	if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
		return 0;
	p = v.iov_base;
	while (v.iov_len - off >= HDR &&
	       !weft__codec_stop_reading(&f->base, ctx)) {
		len = weft__load_be32(p + off);
		if (!length_ok(f, ctx, len))
			break;
		need = HDR + len + trailer_bytes(f);
		/* A large frame moves its chains, in decode_one. */
		if (len > WEFT__CODEC_COPY_MAX || v.iov_len - off < need)
			break;
		if (f->crc32c && !crc_ok(f, ctx, p + off, len))
			break;
		off += need;
		n++;
		if (!deliver_contiguous(f, ctx, p + off - need, len))
			break;
	}
	if (off > 0)
		evbuffer_drain(in, off);
	return n;
}

/* Moves a large frame (need bytes, complete) out of the input into the
 * codec's message buffer, checking its CRC on the way. */
static bool
move_frame(frame_codec *f, weft_ctx *ctx, struct evbuffer *in, size_t len)
{
	unsigned char trailer[CRC];
	uint32_t got = 0;

	if (f->crc32c)
		got = weft__crc32c_evbuffer(0, in, HDR + len);
	evbuffer_drain(in, HDR);
	if (evbuffer_remove_buffer(in, f->base.msg, len) != (int)len) {
		weft__codec_fail(&f->base, ctx, WEFT_ENOMEM,
		                 "no memory for a frame");
		return false;
	}
	if (!f->crc32c)
		return true;
	evbuffer_remove(in, trailer, CRC);
	if (weft__load_be32(trailer) == got)
		return true;
	weft__codec_fail(&f->base, ctx, WEFT_ECHECKSUM,
	                 "frame of %zu bytes has CRC32C %08x, expected %08x",
	                 len, got, weft__load_be32(trailer));
	return false;
}

/*
 * Decodes one frame from anywhere in the input: a small one is made
 * contiguous (pulled up) and delivered as decode_first_chain does, a large
 * one moves its chains. Returns 1 when it delivered one, 0 when the frame
 * is incomplete or bad.
 */
static int
decode_one(frame_codec *f, weft_ctx *ctx, struct evbuffer *in)
{
	size_t avail = evbuffer_get_length(in), len, need;
	unsigned char hdr[HDR];
	const unsigned char *p;

	if (avail < HDR)
		return 0;
	evbuffer_copyout(in, hdr, HDR);
	len = weft__load_be32(hdr);
	if (!length_ok(f, ctx, len))
		return 0;
	need = HDR + len + trailer_bytes(f);
	if (avail < need)
		return 0;
	if (len > WEFT__CODEC_COPY_MAX) {
		if (!move_frame(f, ctx, in, len))
			return 0;
		weft__codec_deliver(&f->base, ctx, len);
		return 1;
	}
	if ((p = evbuffer_pullup(in, (ev_ssize_t)need)) == NULL) {
		weft__codec_fail(&f->base, ctx, WEFT_ENOMEM,
		                 "no memory for a frame");
		return 0;
	}
	if (f->crc32c && !crc_ok(f, ctx, p, len))
		return 0;
	if (!deliver_contiguous(f, ctx, p, len))
		return 0;
	evbuffer_drain(in, need);
	return 1;
}

/*
 * Tells the handlers after this one that a frame has begun and not ended
 * (WEFT_FRAME_EVENT_INCOMPLETE): in holds its first bytes and nothing
 * else.
 */
static void
report_partial(frame_codec *f, weft_ctx *ctx, struct evbuffer *in)
{
	weft_frame_partial info = {evbuffer_get_length(in), 0};
	unsigned char hdr[HDR];

	if (info.have >= HDR) {
		evbuffer_copyout(in, hdr, HDR);
		info.total = HDR + weft__load_be32(hdr) + trailer_bytes(f);
	}
	weft_ctx_fire_user_event(ctx, WEFT_FRAME_EVENT_INCOMPLETE, &info);
}

static void
decode(weft__codec *c, weft_ctx *ctx, struct evbuffer *in)
{
	frame_codec *f = (frame_codec *)c;

	while (!weft__codec_stop_reading(c, ctx)) {
		if (decode_first_chain(f, ctx, in) > 0) {
			/* Mostly a read ends on a frame's end: nothing left. */
			if (evbuffer_get_length(in) == 0)
				return;
			continue;
		}
		if (weft__codec_stop_reading(c, ctx) ||
		    decode_one(f, ctx, in) == 0)
			break;
	}
	/* Stopped with bytes left, neither failed nor paused: they are the
	 * start of a frame. */
	if (!weft__codec_done(c) && !c->paused && evbuffer_get_length(in) > 0)
		report_partial(f, ctx, in);
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

/* Checks a payload of len bytes against the limits: 0, WEFT_ETOOBIG or
 * WEFT_EINVAL (below the least). */
static int
length_check(size_t len, size_t min, size_t max)
{
	if (len > max)
		return WEFT_ETOOBIG;
	return len < min ? WEFT_EINVAL : 0;
}

static int
encode(struct evbuffer *out, struct evbuffer *payload, bool crc32c)
{
	size_t len = evbuffer_get_length(payload);

	if (len <= WEFT__CODEC_COPY_MAX)
		return encode_copy(out, payload, len, crc32c);
	return encode_move(out, payload, len, crc32c);
}

int
weft_frame_encode(struct evbuffer *out, struct evbuffer *payload,
                  const weft_frame_codec_opts *opts)
{
	size_t min, max;
	bool crc;
	int rv;

	if (out == NULL || payload == NULL)
		return WEFT_EINVAL;
	if ((rv = weft__frame_opts_resolve(opts, &min, &max, &crc)) != 0 ||
	    (rv = length_check(evbuffer_get_length(payload), min, max)) != 0)
		return rv;
	return encode(out, payload, crc);
}

/* Encodes an evbuffer payload above the copy limit. */
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
	if ((rv = encode(out, msg, f->crc32c)) != 0) {
		weft_msg_free(&weft_msg_evbuffer, msg);
		weft__codec_out_fail(&f->base, ctx, out, cb, cb_arg, rv);
		return;
	}
	weft__codec_out_send(&f->base, ctx, out, len, cb, cb_arg);
}

/* A payload outside the limits is not sent: the write fails with err. */
static void
refuse_write(frame_codec *f, weft_ctx *ctx, const weft_msg_type *type,
             void *msg, size_t len, weft_write_cb cb, void *cb_arg, int err)
{
	weft_warn("%s: frame codec '%s': not sending a frame of %zu bytes, "
	          "%s the %zu-byte %s",
	          weft_channel_peer(weft_ctx_channel(ctx)), weft_ctx_name(ctx),
	          len, err == WEFT_ETOOBIG ? "above" : "below",
	          err == WEFT_ETOOBIG ? f->max_frame_bytes : f->min_frame_bytes,
	          err == WEFT_ETOOBIG ? "limit" : "minimum");
	weft_ctx_fail_write(ctx, type, msg, cb, cb_arg, err);
}

/*
 * In-place writes: the frame's header and CRC around the payload's
 * reservation, in one reservation of the next handler's (at the head, the
 * channel's batch itself), so an encoder before this codec writes its
 * message where it leaves from.
 */
static void *
frame_reserve(weft_ctx *ctx, size_t n)
{
	frame_codec *f = weft_ctx_state(ctx);

	f->rsv = weft_ctx_reserve(ctx, HDR + n + trailer_bytes(f));
	return f->rsv != NULL ? f->rsv + HDR : NULL;
}

static void
frame_commit(weft_ctx *ctx, size_t used, weft_write_cb cb, void *cb_arg)
{
	frame_codec *f = weft_ctx_state(ctx);
	unsigned char *p = f->rsv;
	int rv;

	f->rsv = NULL;
	/* Refused, the reservation is dropped: nothing goes. */
	if ((rv = length_check(used, f->min_frame_bytes, f->max_frame_bytes)) !=
	    0) {
		refuse_write(f, ctx, &weft_msg_bytes, NULL, used, cb, cb_arg,
		             rv);
		return;
	}
	weft__store_be32(p, (uint32_t)used);
	if (f->crc32c)
		weft__store_be32(p + HDR + used, weft_crc32c(0, p, HDR + used));
	f->base.stats.msgs_out++;
	f->base.stats.bytes_out += used;
	weft__codec_enter(&f->base);
	weft_ctx_commit(ctx, HDR + used + trailer_bytes(f), cb, cb_arg);
	weft__codec_leave(&f->base);
}

/*
 * A small frame is written in place: its payload copied once, into the
 * next handler's reservation. The payload is consumed (an evbuffer
 * drained) like any written message.
 */
static void
write_small(weft_ctx *ctx, const weft_msg_type *type, void *msg, size_t len,
            weft_write_cb cb, void *cb_arg)
{
	unsigned char *p = frame_reserve(ctx, len);

	if (p == NULL) {
		weft_ctx_fail_write(ctx, type, msg, cb, cb_arg, WEFT_ENOMEM);
		return;
	}
	weft_msg_copyout(type, msg, p, len);
	if (type == &weft_msg_evbuffer)
		evbuffer_drain(msg, len);
	frame_commit(ctx, len, cb, cb_arg);
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
	int rv;

	if (!weft_msg_is_bytes(type)) {
		weft_ctx_write(ctx, type, msg, cb, cb_arg);
		return;
	}
	len = weft_msg_length(type, msg);
	if ((rv = length_check(len, f->min_frame_bytes, f->max_frame_bytes)) !=
	    0)
		refuse_write(f, ctx, type, msg, len, cb, cb_arg, rv);
	else if (len <= WEFT__CODEC_COPY_MAX)
		write_small(ctx, type, msg, len, cb, cb_arg);
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
    .reserve = frame_reserve,
    .commit = frame_commit,
};

static int
frame_codec_add(weft_channel *ch, const char *base, const char *name,
                const weft_frame_codec_opts *opts)
{
	frame_codec *f;
	int rv;

	if ((f = calloc(1, sizeof(*f))) == NULL)
		return WEFT_ENOMEM;
	if ((rv = weft__frame_opts_resolve(opts, &f->min_frame_bytes,
	                                   &f->max_frame_bytes, &f->crc32c)) !=
	        0 ||
	    (rv = weft__codec_init(&f->base, WEFT_CODEC_FRAME)) != 0) {
		free(f);
		return rv;
	}
	f->emit_bytes = opts != NULL && opts->emit_bytes;
	f->base.quiet = opts != NULL && opts->quiet;
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

static int
find(weft_channel *ch, const char *name, frame_codec **out)
{
	weft__codec *c;
	int rv;

	if ((rv = weft__codec_find(ch, name, WEFT_CODEC_FRAME, &c)) != 0)
		return rv;
	*out = (frame_codec *)c;
	return 0;
}

int
weft_frame_codec_set_crc(weft_channel *ch, const char *name, bool on)
{
	frame_codec *f;
	int rv;

	if ((rv = find(ch, name, &f)) != 0)
		return rv;
	f->crc32c = on;
	return 0;
}

int
weft_frame_codec_set_max(weft_channel *ch, const char *name,
                         size_t max_frame_bytes)
{
	frame_codec *f;
	int rv;

	if ((rv = find(ch, name, &f)) != 0)
		return rv;
	if (max_frame_bytes == 0)
		max_frame_bytes = WEFT_FRAME_DEFAULT_MAX;
	if (max_frame_bytes > WEFT_FRAME_LIMIT ||
	    max_frame_bytes < f->min_frame_bytes)
		return WEFT_EINVAL;
	f->max_frame_bytes = max_frame_bytes;
	return 0;
}

int
weft_frame_codec_set_min(weft_channel *ch, const char *name,
                         size_t min_frame_bytes)
{
	frame_codec *f;
	int rv;

	if ((rv = find(ch, name, &f)) != 0)
		return rv;
	if (min_frame_bytes > f->max_frame_bytes)
		return WEFT_EINVAL;
	f->min_frame_bytes = min_frame_bytes;
	return 0;
}
