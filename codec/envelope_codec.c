/* SPDX-License-Identifier: MIT */
/*
 * envelope_codec.c: the envelope codec, a pipeline handler after a frame
 * codec (weft/envelope.h). Inbound, a small frame decodes in place, into
 * an envelope on the stack whose payload points into the frame; a large
 * one has its header copied out and its payload left in the frame's
 * evbuffer, which the envelope lends as payload_buf. Outbound, a small
 * envelope is built on the stack and passed on as a borrowed byte run; a
 * large one gets its header in front of the payload's chains.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/envelope.h>

#include "codec_int.h"

#define HDR WEFT_ENVELOPE_HEADER_BYTES

typedef struct envelope_codec {
	weft__codec base; /* first: see weft__codec */
	size_t max_payload_bytes;
	int version;
} envelope_codec;

static void
envelope_free(void *msg)
{
	weft_envelope *env = msg;

	if (env != NULL && env->payload_buf != NULL)
		evbuffer_drain(env->payload_buf,
		               evbuffer_get_length(env->payload_buf));
}

const weft_msg_type weft_msg_envelope = {"envelope", envelope_free};

static void
fail_frame(envelope_codec *e, weft_ctx *ctx, size_t len, const char *why)
{
	weft__codec_fail(&e->base, ctx, WEFT_EPROTO,
	                 "frame of %zu bytes is not a valid envelope: %s", len,
	                 why);
}

/* Passes a decoded envelope on, unless its payload is above the limit. */
static void
deliver(envelope_codec *e, weft_ctx *ctx, weft_envelope *env)
{
	if (env->payload_len > e->max_payload_bytes) {
		weft__codec_fail(&e->base, ctx, WEFT_ETOOBIG,
		                 "envelope payload of %zu bytes is above the "
		                 "%zu-byte limit",
		                 env->payload_len, e->max_payload_bytes);
		return;
	}
	e->base.stats.msgs_in++;
	e->base.stats.bytes_in += env->payload_len;
	weft_ctx_fire_read(ctx, &weft_msg_envelope, env);
}

/* A frame in contiguous memory: decoded in place. */
static void
decode_run(envelope_codec *e, weft_ctx *ctx, const unsigned char *p, size_t len)
{
	weft_envelope env;
	const char *why;
	size_t head, tail;

	if (weft__envelope_decode_head(p, len, len, e->version, &env, &head,
	                               &tail, &why) != 0) {
		fail_frame(e, ctx, len, why);
		return;
	}
	env.payload = p + head;
	env.payload_len = len - head - tail;
	env.payload_buf = NULL;
	env.params = NULL;
	env.params_len = tail;
	if (tail > 0) {
		env.params = p + len - tail;
		if (weft_envelope_params_check(env.params, tail, &why) != 0) {
			fail_frame(e, ctx, len, why);
			return;
		}
	}
	deliver(e, ctx, &env);
}

/* The params after a large frame's payload: copied out to params, and
 * the payload's chains moved to the codec's message buffer (the base
 * codec's, unused otherwise by this one), to be lent on their own. */
static int
split_params(envelope_codec *e, struct evbuffer *frame, size_t plen,
             unsigned char *params, size_t tail, const char **why)
{
	if (evbuffer_remove_buffer(frame, e->base.msg, plen) != (int)plen ||
	    evbuffer_remove(frame, params, tail) != (int)tail)
		return *why = "no memory for the payload", WEFT_ENOMEM;
	return weft_envelope_params_check(params, tail, why);
}

/* A frame in an evbuffer: small, made contiguous (it already is when a
 * frame codec made it) and decoded in place; large, the header is copied
 * out and the payload lent in the evbuffer (or, with params after it, in
 * one of its own). */
static void
decode_evbuffer(envelope_codec *e, weft_ctx *ctx, struct evbuffer *frame)
{
	unsigned char first[WEFT__ENVELOPE_HEAD_MAX];
	unsigned char params[WEFT_ENVELOPE_PARAMS_MAX];
	size_t len = evbuffer_get_length(frame), avail, head, tail;
	const unsigned char *p = first;
	weft_envelope env;
	const char *why;
	int rv;

	if (len <= WEFT__CODEC_COPY_MAX) {
		if (len > 0 && (p = evbuffer_pullup(frame, -1)) == NULL) {
			weft__codec_fail(&e->base, ctx, WEFT_ENOMEM,
			                 "no memory for an envelope");
			return;
		}
		decode_run(e, ctx, p, len);
		return;
	}
	avail = (size_t)evbuffer_copyout(frame, first, sizeof(first));
	if (weft__envelope_decode_head(first, avail, len, e->version, &env,
	                               &head, &tail, &why) != 0) {
		fail_frame(e, ctx, len, why);
		return;
	}
	evbuffer_drain(frame, head);
	env.payload = NULL;
	env.payload_len = len - head - tail;
	env.payload_buf = frame;
	env.params = NULL;
	env.params_len = tail;
	if (tail > 0) {
		rv =
		    split_params(e, frame, env.payload_len, params, tail, &why);
		if (rv == WEFT_ENOMEM) {
			weft__codec_fail(&e->base, ctx, rv, "%s", why);
			return;
		}
		if (rv != 0) {
			evbuffer_drain(e->base.msg, SIZE_MAX);
			fail_frame(e, ctx, len, why);
			return;
		}
		env.payload_buf = e->base.msg;
		env.params = params;
	}
	deliver(e, ctx, &env);
	if (tail > 0)
		evbuffer_drain(e->base.msg, SIZE_MAX);
}

static void
envelope_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	envelope_codec *e = weft_ctx_state(ctx);
	const weft_bytes *run = msg;

	if (type != &weft_msg_bytes && type != &weft_msg_evbuffer) {
		weft_ctx_fire_read(ctx, type, msg);
		return;
	}
	weft__codec_enter(&e->base);
	/* After a failure, the frames still on their way are dropped. Each
	 * message is one frame: what the receiver left of an evbuffer goes
	 * (a byte run is only borrowed). */
	if (type == &weft_msg_bytes) {
		if (!e->base.failed)
			decode_run(e, ctx, run->data, run->len);
	} else {
		if (!e->base.failed)
			decode_evbuffer(e, ctx, msg);
		evbuffer_drain(msg, evbuffer_get_length(msg));
	}
	weft__codec_leave(&e->base);
}

static void
envelope_read_complete(weft_ctx *ctx)
{
	weft__codec_publish(weft_ctx_state(ctx));
	weft_ctx_fire_read_complete(ctx);
}

/* A payload above the limit is not sent: the write fails. */
static void
refuse_write(envelope_codec *e, weft_ctx *ctx, weft_envelope *env, size_t plen,
             weft_write_cb cb, void *cb_arg)
{
	weft_warn("%s: envelope codec '%s': not sending a payload of %zu "
	          "bytes, above the %zu-byte limit",
	          weft_channel_peer(weft_ctx_channel(ctx)), weft_ctx_name(ctx),
	          plen, e->max_payload_bytes);
	weft_ctx_fail_write(ctx, &weft_msg_envelope, env, cb, cb_arg,
	                    WEFT_ETOOBIG);
}

/* Encodes a small body in place, in the next handler's reservation (the
 * frame codec's, inside the channel's batch): the header is packed and
 * the payload (and params_len bytes of params) copied where they leave
 * from, with no buffer between. Inline, so that the common path, with
 * params_len 0, has no test for params. */
static inline void
write_small(envelope_codec *e, weft_ctx *ctx, weft_envelope *env, size_t plen,
            size_t params_len, weft_write_cb cb, void *cb_arg)
{
	size_t n = HDR + plen + params_len;
	unsigned char *body = weft_ctx_reserve(ctx, n);

	if (body == NULL) {
		weft_ctx_fail_write(ctx, &weft_msg_envelope, env, cb, cb_arg,
		                    WEFT_ENOMEM);
		return;
	}
	weft__envelope_encode_fixed(body, env, (uint32_t)plen);
	weft__envelope_take_payload(env, body + HDR, plen);
	if (params_len > 0) {
		weft__envelope_mark_params(body);
		memcpy(body + HDR + plen, env->params, params_len);
	}
	e->base.stats.msgs_out++;
	e->base.stats.bytes_out += plen;
	weft__codec_enter(&e->base);
	weft_ctx_commit(ctx, n, cb, cb_arg);
	weft__codec_leave(&e->base);
}

/* In-place writes of bytes from further on pass through untouched. */
static void *
envelope_reserve(weft_ctx *ctx, size_t n)
{
	return weft_ctx_reserve(ctx, n);
}

static void
envelope_commit(weft_ctx *ctx, size_t used, weft_write_cb cb, void *cb_arg)
{
	weft_ctx_commit(ctx, used, cb, cb_arg);
}

/* The header, then the payload: payload_buf's chains move, bytes are
 * copied (they are only borrowed). */
static void
write_large(envelope_codec *e, weft_ctx *ctx, weft_envelope *env, size_t plen,
            weft_write_cb cb, void *cb_arg)
{
	unsigned char hdr[HDR];
	struct evbuffer *out;

	if ((out = weft__codec_out_begin(&e->base)) == NULL) {
		weft_ctx_fail_write(ctx, &weft_msg_envelope, env, cb, cb_arg,
		                    WEFT_ENOMEM);
		return;
	}
	weft_envelope_encode_header(hdr, env, (uint32_t)plen);
	if (evbuffer_add(out, hdr, HDR) != 0 ||
	    (env->payload_buf != NULL
	         ? evbuffer_add_buffer(out, env->payload_buf)
	         : evbuffer_add(out, env->payload, plen)) != 0 ||
	    (env->params_len > 0 &&
	     evbuffer_add(out, env->params, env->params_len) != 0)) {
		envelope_free(env);
		weft__codec_out_fail(&e->base, ctx, out, cb, cb_arg,
		                     WEFT_ENOMEM);
		return;
	}
	weft__codec_out_send(&e->base, ctx, out, plen, cb, cb_arg);
}

/* An envelope with params or a cancel: only on a version 2 connection,
 * so that nothing of version 2 leaves on one of version 1; apart from the
 * common path. */
static void
write_v2(envelope_codec *e, weft_ctx *ctx, weft_envelope *env, weft_write_cb cb,
         void *cb_arg)
{
	size_t plen;
	int rv = 0;

	if ((env->params == NULL && env->params_len > 0) ||
	    env->params_len > WEFT_ENVELOPE_PARAMS_MAX)
		rv = WEFT_EINVAL;
	else if (e->version < WEFT_ENVELOPE_V2)
		rv = WEFT_ENOTSUP;
	if (rv != 0) {
		weft_ctx_fail_write(ctx, &weft_msg_envelope, env, cb, cb_arg,
		                    rv);
		return;
	}
	plen = weft__envelope_payload_length(env);
	if (plen > e->max_payload_bytes)
		refuse_write(e, ctx, env, plen, cb, cb_arg);
	else if (HDR + plen + env->params_len <= WEFT__CODEC_COPY_MAX)
		write_small(e, ctx, env, plen, env->params_len, cb, cb_arg);
	else
		write_large(e, ctx, env, plen, cb, cb_arg);
}

static void
envelope_write(weft_ctx *ctx, const weft_msg_type *type, void *msg,
               weft_write_cb cb, void *cb_arg)
{
	envelope_codec *e = weft_ctx_state(ctx);
	weft_envelope *env = msg;
	size_t plen;

	if (type != &weft_msg_envelope) {
		weft_ctx_write(ctx, type, msg, cb, cb_arg);
		return;
	}
	if (env->payload_buf == NULL && env->payload == NULL &&
	    env->payload_len > 0) {
		weft_ctx_fail_write(ctx, type, msg, cb, cb_arg, WEFT_EINVAL);
		return;
	}
	if (env->params_len != 0 || (env->flags & WEFT_ENVELOPE_CANCEL)) {
		write_v2(e, ctx, env, cb, cb_arg);
		return;
	}
	plen = weft__envelope_payload_length(env);
	if (plen > e->max_payload_bytes)
		refuse_write(e, ctx, env, plen, cb, cb_arg);
	else if (HDR + plen <= WEFT__CODEC_COPY_MAX)
		write_small(e, ctx, env, plen, 0, cb, cb_arg);
	else
		write_large(e, ctx, env, plen, cb, cb_arg);
}

static const weft_handler envelope_handler = {
    .removed = weft__codec_removed,
    .read = envelope_read,
    .read_complete = envelope_read_complete,
    .write = envelope_write,
    .flush = weft__codec_flush,
    .reserve = envelope_reserve,
    .commit = envelope_commit,
};

static int
envelope_codec_add(weft_channel *ch, const char *base, const char *name,
                   const weft_envelope_codec_opts *opts)
{
	envelope_codec *e;
	int rv;

	if ((e = calloc(1, sizeof(*e))) == NULL)
		return WEFT_ENOMEM;
	if ((rv = weft__codec_init(&e->base, WEFT_CODEC_ENVELOPE)) != 0) {
		free(e);
		return rv;
	}
	e->max_payload_bytes = WEFT_FRAME_LIMIT - HDR;
	e->base.quiet = opts != NULL && opts->quiet;
	e->version = opts != NULL && opts->version >= WEFT_ENVELOPE_V2
	                 ? WEFT_ENVELOPE_V2
	                 : WEFT_ENVELOPE_V1;
	if (opts != NULL && opts->max_payload_bytes != 0 &&
	    opts->max_payload_bytes < e->max_payload_bytes)
		e->max_payload_bytes = opts->max_payload_bytes;
	return weft__codec_add(ch, base, name, &envelope_handler, &e->base);
}

int
weft_envelope_codec_add(weft_channel *ch, const char *name,
                        const weft_envelope_codec_opts *opts)
{
	return envelope_codec_add(ch, WEFT__CODEC_LAST, name, opts);
}

int
weft_envelope_codec_add_after(weft_channel *ch, const char *base,
                              const char *name,
                              const weft_envelope_codec_opts *opts)
{
	return envelope_codec_add(ch, base, name, opts);
}
