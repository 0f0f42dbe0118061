/* SPDX-License-Identifier: MIT */
/*
 * weft/frame.h: length-field framing.
 *
 * On the wire a frame is a 4-byte big-endian payload length L, then L
 * payload bytes, then, only when the crc32c option is on, a 4-byte
 * big-endian CRC32C of the 4 length bytes followed by the payload.
 *
 * The frame codec is one handler for both directions. Inbound, it takes the
 * bytes from the channel's input and fires read once per complete frame,
 * with the payload as a weft_msg_evbuffer that the next handler borrows for
 * the call (see weft_msg_type); read_complete follows once per batch.
 * Small frames (up to 4096 bytes of payload) are copied into that evbuffer
 * (made contiguous first if they span pieces of the input); larger ones
 * move the input's chains into it, so that a receiver keeps a large payload
 * by moving it on (evbuffer_remove_buffer) without a copy. With the
 * emit_bytes option, small frames that lie whole in one piece of the input
 * come as a weft_msg_bytes pointing into the input instead: no copy and no
 * allocation per frame, for receivers that accept both kinds. Frames whole
 * in the first piece are decoded without an evbuffer call per frame, with
 * one drain per batch.
 * Outbound, a weft_msg_evbuffer or weft_msg_bytes written through it leaves
 * as one frame (small frames are built without allocating); other message
 * types pass on unchanged.
 *
 * Back-pressure: a receiver that pauses reading (weft_channel_set_auto_read
 * false) inside its read callback gets no further frame; the rest stays in
 * the channel's input, and the channel reads it again when reading resumes.
 * At the end of each batch that leaves the start of a frame in the input,
 * the codec fires the user event WEFT_FRAME_EVENT_INCOMPLETE (below), so
 * that a service can account for a frame begun and not ended, and time it.
 *
 * Bad input closes the channel: a length above max_frame_bytes (checked as
 * soon as the 4 length bytes arrive, before any payload is buffered) fires
 * error WEFT_ETOOBIG, a length below min_frame_bytes (as early) WEFT_EPROTO,
 * a CRC mismatch WEFT_ECHECKSUM, and a partial frame when the peer ends the
 * stream WEFT_EPROTO; each is logged with the peer and counted
 * (weft/codec.h, kind WEFT_CODEC_FRAME; a short frame as malformed).
 * Writing a payload above max_frame_bytes fails that write with
 * WEFT_ETOOBIG, one below min_frame_bytes with WEFT_EINVAL.
 *
 * The limits and the CRC option may change at any time on the loop thread
 * (weft_frame_codec_set_crc and the others), also inside a receiver's read
 * callback: they apply from the next frame decoded, including frames that
 * already wait in the input, and to every frame written after the call.
 */
#ifndef WEFT_FRAME_H
#define WEFT_FRAME_H

#include <weft/channel.h>
#include <weft/codec.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evbuffer;

#define WEFT_FRAME_HEADER_BYTES 4
#define WEFT_FRAME_CRC_BYTES 4
#define WEFT_FRAME_DEFAULT_MAX (16u << 20)
/* The largest max_frame_bytes there can be: 2 GiB. */
#define WEFT_FRAME_LIMIT ((size_t)INT32_MAX - 16)

/*
 * Frame codec options; zero fields take the defaults shown. Zero is also
 * the meaning of a zero min_frame_bytes: no least length, empty frames are
 * allowed (a protocol that forbids them, as docs/PROTOCOL.md does, sets 1).
 */
typedef struct weft_frame_codec_opts {
	size_t max_frame_bytes; /* 16 MiB: largest payload, either way;
	                           at most WEFT_FRAME_LIMIT */
	bool crc32c;            /* false: no CRC32C trailer */
	bool emit_bytes;        /* false: every frame as a weft_msg_evbuffer */
	size_t min_frame_bytes; /* 0: least payload, either way; at most
	                           max_frame_bytes */
	bool quiet;             /* false: each failure is logged; true: not
	                           logged, only counted and fired as an error
	                           to the handlers after it, for one that logs
	                           in its own words and at its own rate */
} weft_frame_codec_opts;

/*
 * The user event a frame codec fires (weft_ctx_fire_user_event, to the
 * handlers after it) at the end of a read batch that leaves the start of a
 * frame in the input; data is a weft_frame_partial, borrowed for the call.
 * It fires again after every batch until the frame is whole (it then
 * arrives as a read) or the channel closes; not while reading is paused.
 */
#define WEFT_FRAME_EVENT_INCOMPLETE (WEFT_CODEC_EVENT_FIRST - 0)

typedef struct weft_frame_partial {
	size_t have;  /* bytes of the frame that arrived, header included */
	size_t total; /* the whole frame's bytes (length field, payload,
	                 CRC trailer), or 0 while fewer than the 4 length
	                 bytes have arrived */
} weft_frame_partial;

/*
 * weft_frame_codec_add puts a frame codec at the end of ch's pipeline under
 * name (copied); opts may be NULL for the defaults. The pipeline owns the
 * codec from then on. Returns 0, or WEFT_EEXIST, WEFT_ENOMEM, WEFT_EINVAL.
 * Loop thread.
 */
WEFT_API int weft_frame_codec_add(weft_channel *ch, const char *name,
                                  const weft_frame_codec_opts *opts);

/* weft_frame_codec_add_after is weft_frame_codec_add, but places the codec
 * right after the handler called base (first in the pipeline when base is
 * NULL). Also returns WEFT_ENOTFOUND. Loop thread. */
WEFT_API int weft_frame_codec_add_after(weft_channel *ch, const char *base,
                                        const char *name,
                                        const weft_frame_codec_opts *opts);

/*
 * weft_frame_codec_set_crc turns the CRC32C trailer of the frame codec
 * called name in ch's pipeline on or off, both ways: inbound from the next
 * frame not yet decoded (also one that already waits in the input, or the
 * one after the frame whose read callback makes the call), outbound for
 * every frame that reaches the codec after the call. A protocol switches
 * it at a point both sides agree on, as the messaging handshake does.
 * Returns 0, WEFT_ENOTFOUND (no handler of that name) or WEFT_EINVAL (it
 * is not a frame codec). Loop thread.
 */
WEFT_API int weft_frame_codec_set_crc(weft_channel *ch, const char *name,
                                      bool on);

/*
 * weft_frame_codec_set_max sets max_frame_bytes (0: the default), which
 * applies as the CRC switch does; a frame whose length arrived but not all
 * its payload is checked again against the new limit. Returns 0,
 * WEFT_ENOTFOUND, or WEFT_EINVAL (not a frame codec; above
 * WEFT_FRAME_LIMIT; below min_frame_bytes). Loop thread.
 */
WEFT_API int weft_frame_codec_set_max(weft_channel *ch, const char *name,
                                      size_t max_frame_bytes);

/* weft_frame_codec_set_min sets min_frame_bytes (0: none) in the same way.
 * Returns 0, WEFT_ENOTFOUND, or WEFT_EINVAL (not a frame codec; above
 * max_frame_bytes). Loop thread. */
WEFT_API int weft_frame_codec_set_min(weft_channel *ch, const char *name,
                                      size_t min_frame_bytes);

/*
 * weft_frame_encode appends one frame holding all of payload's bytes to out,
 * moving them (chains move; a small payload is copied so that the frame is
 * contiguous). payload itself stays the caller's, empty. opts may be NULL.
 * Returns 0, WEFT_ETOOBIG or WEFT_EINVAL (outside the limits of opts;
 * payload is left as it was) or WEFT_ENOMEM. Any thread, for buffers that
 * thread owns.
 */
WEFT_API int weft_frame_encode(struct evbuffer *out, struct evbuffer *payload,
                               const weft_frame_codec_opts *opts);

#ifdef __cplusplus
}
#endif

#endif
