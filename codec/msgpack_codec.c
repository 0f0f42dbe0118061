/* SPDX-License-Identifier: MIT */
/* msgpack_codec.c: msgpack messages over frames (weft/msgpack_codec.h). */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/msgpack_codec.h>

#include "codec_int.h"

#define ALIGN8(n) (((n) + 7) & ~(uint64_t)7)

struct weft_msgpack_msg {
	msgpack_object obj;
	msgpack_zone *zone; /* holds this message too */
};

struct weft_msgpack_fn {
	weft_msgpack_pack_cb pack;
	void *arg;
	void (*free_arg)(void *arg);
};

typedef struct msgpack_codec {
	weft__codec base; /* first: see weft__codec */
	unsigned max_depth;
} msgpack_codec;

static void
free_msg(void *msg)
{
	weft_msgpack_msg_free(msg);
}

static void
free_fn(void *msg)
{
	weft_msgpack_fn *fn = msg;

	if (fn->free_arg != NULL)
		fn->free_arg(fn->arg);
	free(fn);
}

const weft_msg_type weft_msg_msgpack = {"msgpack", free_msg};
const weft_msg_type weft_msg_msgpack_fn = {"msgpack_fn", free_fn};

const msgpack_object *
weft_msgpack_msg_object(const weft_msgpack_msg *m)
{
	return &m->obj;
}

msgpack_zone *
weft_msgpack_msg_zone(weft_msgpack_msg *m)
{
	return m->zone;
}

int
weft_msgpack_msg_new(const msgpack_object *obj, msgpack_zone *zone,
                     weft_msgpack_msg **out)
{
	weft_msgpack_msg *m;

	if (zone == NULL && (zone = msgpack_zone_new(sizeof(*m))) == NULL)
		return WEFT_ENOMEM;
	if ((m = msgpack_zone_malloc(zone, sizeof(*m))) == NULL) {
		msgpack_zone_free(zone);
		return WEFT_ENOMEM;
	}
	m->obj = *obj;
	m->zone = zone;
	*out = m;
	return 0;
}

void
weft_msgpack_msg_free(weft_msgpack_msg *m)
{
	if (m != NULL)
		msgpack_zone_free(m->zone);
}

int
weft_msgpack_fn_new(weft_msgpack_pack_cb pack, void *arg,
                    void (*free_arg)(void *arg), weft_msgpack_fn **out)
{
	weft_msgpack_fn *fn;

	if ((fn = malloc(sizeof(*fn))) == NULL) {
		if (free_arg != NULL)
			free_arg(arg);
		return WEFT_ENOMEM;
	}
	fn->pack = pack;
	fn->arg = arg;
	fn->free_arg = free_arg;
	*out = fn;
	return 0;
}

/* The zone bytes a census's arrays and maps take (all multiples of 8). */
static uint64_t
object_bytes(const weft__msgpack_census *census)
{
	return census->array_elems * sizeof(msgpack_object) +
	       census->map_pairs * sizeof(msgpack_object_kv);
}

/*
 * A zone whose first chunk holds the message, room for len bytes (copy)
 * and extra bytes more. Everything is a multiple of 8, so the objects
 * msgpack-c puts there later fit without padding.
 */
static int
zone_new(size_t len, uint64_t extra, weft_msgpack_msg **m, char **copy)
{
	uint64_t need = ALIGN8(sizeof(**m)) + ALIGN8(len) + extra;
	msgpack_zone *zone;

	if (need > SIZE_MAX || (zone = msgpack_zone_new(need)) == NULL)
		return WEFT_ENOMEM;
	*m = msgpack_zone_malloc(zone, sizeof(**m));
	*copy = msgpack_zone_malloc(zone, ALIGN8(len));
	if (*m == NULL || *copy == NULL) {
		msgpack_zone_free(zone);
		return WEFT_ENOMEM;
	}
	(*m)->zone = zone;
	return 0;
}

/* Unpacks checked bytes that lie in m's zone; frees the zone on failure,
 * which for checked bytes only a want of memory can cause. */
static int
unpack_checked(weft_msgpack_msg *m, const char *copy, size_t len,
               weft_msgpack_msg **out)
{
	size_t off = 0;

	if (msgpack_unpack(copy, len, &off, m->zone, &m->obj) !=
	    MSGPACK_UNPACK_SUCCESS) {
		msgpack_zone_free(m->zone);
		return WEFT_ENOMEM;
	}
	*out = m;
	return 0;
}

/* Checks contiguous bytes first, then copies them into a zone sized so
 * that one chunk holds everything. */
static int
decode(const void *data, size_t len, unsigned max_depth, weft_msgpack_msg **out,
       const char **why)
{
	weft__msgpack_census census;
	weft_msgpack_msg *m;
	char *copy;

	if (weft__msgpack_walk(data, len, max_depth, &census) != 0) {
		*why = census.why;
		return WEFT_EPROTO;
	}
	*why = "no memory to unpack it";
	if (zone_new(len, object_bytes(&census), &m, &copy) != 0)
		return WEFT_ENOMEM;
	memcpy(copy, data, len);
	return unpack_checked(m, copy, len, out);
}

/*
 * Decodes bytes spread over chains: copies them into a zone first (one
 * copy, as many bytes as the frame holds), checks the copy, and has the
 * zone's next chunk sized for exactly the objects the census found.
 */
static int
decode_chains(struct evbuffer *frame, size_t len, unsigned max_depth,
              weft_msgpack_msg **out, const char **why)
{
	weft__msgpack_census census;
	weft_msgpack_msg *m;
	char *copy;

	*why = "no memory to gather it";
	if (zone_new(len, 0, &m, &copy) != 0)
		return WEFT_ENOMEM;
	evbuffer_copyout(frame, copy, len);
	if (weft__msgpack_walk(copy, len, max_depth, &census) != 0) {
		msgpack_zone_free(m->zone);
		*why = census.why;
		return WEFT_EPROTO;
	}
	*why = "no memory to unpack it";
	if (object_bytes(&census) > SIZE_MAX / 2) {
		msgpack_zone_free(m->zone);
		return WEFT_ENOMEM;
	}
	/* msgpack-c asks for align - 1 bytes more when it grows a zone. */
	m->zone->chunk_size =
	    (size_t)object_bytes(&census) + MSGPACK_ZONE_ALIGN;
	return unpack_checked(m, copy, len, out);
}

int
weft_msgpack_decode(const void *data, size_t len, unsigned max_depth,
                    weft_msgpack_msg **out)
{
	const char *why;

	return decode(data, len, max_depth, out, &why);
}

static int
pack_to_evbuffer(void *data, const char *buf, size_t len)
{
	return evbuffer_add(data, buf, len);
}

int
weft_msgpack_packer_init(msgpack_packer *pk, struct evbuffer *out)
{
	if (pk == NULL || out == NULL)
		return WEFT_EINVAL;
	msgpack_packer_init(pk, out, pack_to_evbuffer);
	return 0;
}

/* Decodes a whole frame, in place when it lies in one chain. */
static int
decode_frame(msgpack_codec *m, struct evbuffer *frame, size_t len,
             weft_msgpack_msg **out, const char **why)
{
	struct evbuffer_iovec v;

	/* With a length, peek counts the chains the bytes span. */
	if (len > 0 && evbuffer_peek(frame, (ev_ssize_t)len, NULL, &v, 1) == 1)
		return decode(v.iov_base, len, m->max_depth, out, why);
	if (len == 0)
		return decode(NULL, 0, m->max_depth, out, why);
	return decode_chains(frame, len, m->max_depth, out, why);
}

static void
fail_frame(msgpack_codec *m, weft_ctx *ctx, int rv, size_t len, const char *why)
{
	weft__codec_fail(&m->base, ctx, rv,
	                 "frame of %zu bytes is not one msgpack object: %s",
	                 len, why);
}

/* Frames come as evbuffers, or as byte runs (a frame codec's emit_bytes)
 * that decode in place. */
static void
msgpack_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	msgpack_codec *m = weft_ctx_state(ctx);
	const weft_bytes *run = msg;
	weft_msgpack_msg *obj;
	const char *why;
	size_t len;
	int rv;

	if (!weft_msg_is_bytes(type)) {
		weft_ctx_fire_read(ctx, type, msg);
		return;
	}
	len = weft_msg_length(type, msg);
	if (m->base.failed) {
		weft_msg_free(type, msg);
		return;
	}
	weft__codec_enter(&m->base);
	if (type == &weft_msg_bytes) {
		rv = decode(run->data, len, m->max_depth, &obj, &why);
	} else {
		rv = decode_frame(m, msg, len, &obj, &why);
		evbuffer_drain(msg, len);
	}
	if (rv != 0) {
		fail_frame(m, ctx, rv, len, why);
	} else {
		m->base.stats.msgs_in++;
		m->base.stats.bytes_in += len;
		weft_ctx_fire_read(ctx, &weft_msg_msgpack, obj);
	}
	weft__codec_leave(&m->base);
}

static int
pack(const weft_msg_type *type, void *msg, msgpack_packer *pk)
{
	weft_msgpack_fn *fn;
	int rv;

	if (type == &weft_msg_msgpack)
		return msgpack_pack_object(pk,
		                           ((weft_msgpack_msg *)msg)->obj) == 0
		           ? 0
		           : WEFT_ENOMEM;
	fn = msg;
	rv = fn->pack(pk, fn->arg);
	return rv > 0 ? WEFT_EINVAL : rv;
}

static void
msgpack_write(weft_ctx *ctx, const weft_msg_type *type, void *msg,
              weft_write_cb cb, void *cb_arg)
{
	msgpack_codec *m = weft_ctx_state(ctx);
	struct evbuffer *out;
	msgpack_packer pk;
	int rv;

	if (type != &weft_msg_msgpack && type != &weft_msg_msgpack_fn) {
		weft_ctx_write(ctx, type, msg, cb, cb_arg);
		return;
	}
	if ((out = weft__codec_out_begin(&m->base)) == NULL) {
		weft_ctx_fail_write(ctx, type, msg, cb, cb_arg, WEFT_ENOMEM);
		return;
	}
	weft_msgpack_packer_init(&pk, out);
	rv = pack(type, msg, &pk);
	weft_msg_free(type, msg);
	if (rv != 0) {
		weft_debug("%s: msgpack codec '%s': packing failed: %s",
		           weft_channel_peer(weft_ctx_channel(ctx)),
		           weft_ctx_name(ctx), weft_strerror(rv));
		weft__codec_out_fail(&m->base, ctx, out, cb, cb_arg, rv);
		return;
	}
	weft__codec_out_send(&m->base, ctx, out, evbuffer_get_length(out), cb,
	                     cb_arg);
}

static const weft_handler msgpack_handler = {
    .removed = weft__codec_removed,
    .read = msgpack_read,
    .write = msgpack_write,
    .flush = weft__codec_flush,
};

static int
msgpack_codec_add(weft_channel *ch, const char *base, const char *name,
                  const weft_msgpack_codec_opts *opts)
{
	msgpack_codec *m;
	int rv;

	if ((m = calloc(1, sizeof(*m))) == NULL)
		return WEFT_ENOMEM;
	if ((rv = weft__codec_init(&m->base, WEFT_CODEC_MSGPACK)) != 0) {
		free(m);
		return rv;
	}
	m->max_depth = opts != NULL ? opts->max_depth : 0;
	if (m->max_depth == 0 || m->max_depth > WEFT_MSGPACK_MAX_DEPTH)
		m->max_depth = WEFT_MSGPACK_MAX_DEPTH;
	return weft__codec_add(ch, base, name, &msgpack_handler, &m->base);
}

int
weft_msgpack_codec_add(weft_channel *ch, const char *name,
                       const weft_msgpack_codec_opts *opts)
{
	return msgpack_codec_add(ch, WEFT__CODEC_LAST, name, opts);
}

int
weft_msgpack_codec_add_after(weft_channel *ch, const char *base,
                             const char *name,
                             const weft_msgpack_codec_opts *opts)
{
	return msgpack_codec_add(ch, base, name, opts);
}
