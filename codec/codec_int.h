/* SPDX-License-Identifier: MIT */
/* codec_int.h: what the files of codec/ share, and nothing else sees. */
#ifndef WEFT_CODEC_INT_H
#define WEFT_CODEC_INT_H

#include <event2/buffer.h>

#include <weft/channel.h>
#include <weft/codec.h>

#include "weft_int.h"

/*
 * Messages up to this size are copied into one contiguous chain, inbound
 * and outbound; larger ones move chains. Copying a small message costs
 * less than moving its chain, and keeps frames that travel together in few
 * iovecs; moving a large one saves the copy.
 */
#define WEFT__CODEC_COPY_MAX 4096

#define WEFT__CODEC_MAGIC 0x77636463u /* "wcdc" */

/*
 * The state every codec handler starts with (its first member), so that
 * the shared callbacks below and weft_codec_get_stats can work on any of
 * them. Loop thread only.
 */
typedef struct weft__codec {
	uint32_t magic;
	enum weft_codec_kind kind;
	weft_ctx *ctx;              /* its place in the pipeline */
	weft_channel *ch;           /* its channel */
	weft_codec_stats stats;     /* since the codec joined its pipeline */
	weft_codec_stats published; /* the part of stats in the totals */
	struct evbuffer *msg;       /* the inbound message being delivered */
	struct evbuffer *out;       /* the outbound message being encoded */
	size_t partial_bytes;       /* input left over after the last read */
	int busy;                   /* our callbacks on the stack */
	bool in_read;               /* a read is being decoded */
	bool in_write;              /* out is in use */
	bool failed;                /* closed on bad input: drop all input */
	bool paused;                /* the last decode stopped because
	                               reading paused, input left whole */
	bool removed;               /* left the pipeline while busy */
	bool closed_here;           /* a close passed through this codec */
	bool quiet;                 /* failures are not logged */
} weft__codec;

/*
 * weft__codec_find finds the codec called name in ch's pipeline, of the
 * given kind (WEFT_CODEC_KINDS: any). Returns 0 with it in *out,
 * WEFT_ENOTFOUND (no handler of that name) or WEFT_EINVAL (not a weft
 * codec of that kind). Loop thread.
 */
int weft__codec_find(weft_channel *ch, const char *name,
                     enum weft_codec_kind kind, weft__codec **out);

/* weft__codec_init sets up c's common part (the rest of c is the caller's).
 * Returns 0 or WEFT_ENOMEM, with nothing to undo. */
int weft__codec_init(weft__codec *c, enum weft_codec_kind kind);

/* weft__codec_destroy frees c's common part and c itself (malloc'd). */
void weft__codec_destroy(weft__codec *c);

/*
 * weft__codec_add adds c to ch after base (NULL: first; WEFT__CODEC_LAST:
 * last) and destroys it on failure. Returns the pipeline's result.
 */
extern const char weft__codec_last[];
#define WEFT__CODEC_LAST weft__codec_last
int weft__codec_add(weft_channel *ch, const char *base, const char *name,
                    const weft_handler *h, weft__codec *c);

/*
 * Every callback that touches its state after calling into the pipeline
 * brackets itself with enter/leave: a handler further on may remove the
 * codec meanwhile, and the state is then freed by the outermost leave.
 * weft__codec_leave returns true if it freed c.
 */
static inline void
weft__codec_enter(weft__codec *c)
{
	c->busy++;
}

static inline bool
weft__codec_leave(weft__codec *c)
{
	if (--c->busy > 0 || !c->removed)
		return false;
	weft__codec_destroy(c);
	return true;
}

/* weft__codec_publish adds what c counted since last time to the
 * process-wide totals. */
void weft__codec_publish(weft__codec *c);

/*
 * weft__codec_fail handles bad input (or no memory to decode it): logs the
 * reason with the peer, counts err (WEFT_ETOOBIG, WEFT_ECHECKSUM, other bad
 * input as malformed), fires error err and closes the channel. From then
 * on the codec drops all input. The caller must be between enter/leave.
 */
void weft__codec_fail(weft__codec *c, weft_ctx *ctx, int err, const char *fmt,
                      ...) WEFT_PRINTF(4, 5);

/* weft__codec_deliver fires read with c->msg, which holds len bytes,
 * counts it, and empties c->msg afterwards. */
void weft__codec_deliver(weft__codec *c, weft_ctx *ctx, size_t len);

/* weft__codec_deliver_bytes fires read with a borrowed run of len bytes at
 * data (weft_msg_bytes), counting it like weft__codec_deliver. */
static inline void
weft__codec_deliver_bytes(weft__codec *c, weft_ctx *ctx, const void *data,
                          size_t len)
{
	weft_bytes run = {data, len};

	c->stats.msgs_in++;
	c->stats.bytes_in += len;
	weft_ctx_fire_read(ctx, &weft_msg_bytes, &run);
}

/*
 * weft__codec_out_begin returns the buffer to encode one outbound message
 * into: c->out, or a new one when a write re-enters; NULL when memory ran
 * out. weft__codec_out_send passes it on, counting payload_bytes, and
 * releases it; weft__codec_out_fail fails the write with err instead.
 */
struct evbuffer *weft__codec_out_begin(weft__codec *c);
void weft__codec_out_send(weft__codec *c, weft_ctx *ctx, struct evbuffer *out,
                          size_t payload_bytes, weft_write_cb cb, void *cb_arg);
void weft__codec_out_fail(weft__codec *c, weft_ctx *ctx, struct evbuffer *out,
                          weft_write_cb cb, void *cb_arg, int err);

/*
 * weft__codec_read_bytes is the read callback shared by the byte decoders
 * (frame, line): non-byte messages pass on; otherwise decode(c, ctx, in)
 * takes every complete message out of in, and whatever happens to the
 * codec on the way (removed: the rest of in goes on to the next handler;
 * failed: in is emptied) is dealt with here.
 */
void weft__codec_read_bytes(weft_ctx *ctx, const weft_msg_type *type, void *msg,
                            void (*decode)(weft__codec *c, weft_ctx *ctx,
                                           struct evbuffer *in));

/* Shared handler callbacks: removed frees the state (later, if busy),
 * flush publishes the counters, inactive reports a partial message left
 * in the input when the peer ended the stream (not when the close came
 * from this side: close notes that it passed). */
void weft__codec_removed(weft_ctx *ctx);
void weft__codec_flush(weft_ctx *ctx);
void weft__codec_close(weft_ctx *ctx);
void weft__codec_inactive(weft_ctx *ctx);

/* weft__codec_done says whether a decode loop must stop: the codec failed
 * or left its pipeline. */
static inline bool
weft__codec_done(const weft__codec *c)
{
	return c->failed || c->removed ||
	       (c->ctx != NULL && weft_ctx_is_removed(c->ctx));
}

/*
 * weft__codec_stop_reading says whether a decode loop must stop before its
 * next message: it must (weft__codec_done), or the receiver paused reading
 * (weft_channel_set_auto_read) or gave up its turn (weft_channel_yield),
 * which leaves the rest in the input and is noted in c->paused.
 */
static inline bool
weft__codec_stop_reading(weft__codec *c, weft_ctx *ctx)
{
	if (weft__codec_done(c))
		return true;
	(void)ctx;
	if (weft_channel_is_reading(c->ch))
		return false;
	c->paused = true;
	return true;
}

struct weft_frame_codec_opts;
struct weft_envelope;

/* weft__frame_opts_resolve reads the limits and the CRC option of opts
 * (NULL: the defaults); WEFT_EINVAL when the least payload is above the
 * largest. */
int weft__frame_opts_resolve(const struct weft_frame_codec_opts *opts,
                             size_t *min, size_t *max, bool *crc);

/* The longest envelope header any valid encoding has, payload excluded:
 * array 32 (5 bytes), five uint 64 (9 each), bin 32 (5). */
#define WEFT__ENVELOPE_HEAD_MAX 55

/*
 * weft__envelope_decode_head decodes the fields of an envelope body of len
 * bytes from its first avail bytes at p (avail <= len; the whole header
 * is within WEFT__ENVELOPE_HEAD_MAX bytes), up to the payload's bin
 * header, as protocol version has it: the payload takes the rest of the
 * body, but for the last *tail bytes, a params map (version 2; its size is
 * checked here, its contents by weft_envelope_params_check). *head is the
 * number of bytes before the payload; payload and params fields of *out
 * are not set. Returns 0, or WEFT_EPROTO with a constant reason in *why.
 */
int weft__envelope_decode_head(const unsigned char *p, size_t avail, size_t len,
                               int version, struct weft_envelope *out,
                               size_t *head, size_t *tail, const char **why);

/* weft__envelope_encode_fixed is weft_envelope_encode_header for an
 * envelope without params (version 1's layout: fixarray 6, and the PARAMS
 * bit clear); weft__envelope_mark_params turns such a header into one
 * that params follow (fixarray 7, the PARAMS bit set). */
void weft__envelope_encode_fixed(void *out, const struct weft_envelope *env,
                                 uint32_t payload_len);
void weft__envelope_mark_params(void *out);

/* weft__envelope_kind_is_valid says whether flags hold exactly one of the
 * kinds docs/PROTOCOL.md allows in version. */
bool weft__envelope_kind_is_valid(uint32_t flags, int version);

/* The number of payload bytes of env (all of payload_buf's, if set). */
size_t weft__envelope_payload_length(const struct weft_envelope *env);

/* weft__envelope_take_payload copies the first len payload bytes of env to
 * dst and drains them from payload_buf, if that is set. */
void weft__envelope_take_payload(const struct weft_envelope *env, void *dst,
                                 size_t len);

/* weft__crc32c_evbuffer extends crc with the first len bytes of buf
 * (len <= its length), chain by chain, without copying. */
uint32_t weft__crc32c_evbuffer(uint32_t crc, struct evbuffer *buf, size_t len);

/* The two CRC32C implementations behind weft_crc32c, for tests. They take
 * and return the inverted register (no pre- or post-inversion). */
uint32_t weft__crc32c_table(uint32_t reg, const void *data, size_t len);
bool weft__crc32c_hw_available(void);
uint32_t weft__crc32c_hw(uint32_t reg, const void *data, size_t len);

/* The census weft_msgpack_check takes on its way, to size the zone. */
typedef struct weft__msgpack_census {
	uint64_t array_elems; /* elements of all arrays */
	uint64_t map_pairs;   /* pairs of all maps */
	const char *why;      /* when the walk fails: a constant string */
	bool overclaim;       /* it failed on a container's count or on
	                         the objects' cost: the inputs that would
	                         make msgpack-c reserve more than the
	                         bound */
} weft__msgpack_census;

int weft__msgpack_walk(const void *data, size_t len, unsigned max_depth,
                       weft__msgpack_census *census);

#endif
