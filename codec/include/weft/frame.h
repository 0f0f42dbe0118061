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
 * the call (see weft_msg_type); read_complete follows once per batch. With
 * the emit_bytes option, frames that lie whole in one piece of the input
 * come as a weft_msg_bytes pointing into the input instead: no copy and no
 * allocation per frame, for receivers that accept both kinds.
 * Outbound, a weft_msg_evbuffer or weft_msg_bytes written through it leaves
 * as one frame (small frames are built without allocating); other message
 * types pass on unchanged.
 *
 * Bad input closes the channel: a length above max_frame_bytes (checked as
 * soon as the 4 length bytes arrive, before any payload is buffered) fires
 * error WEFT_ETOOBIG, a CRC mismatch WEFT_ECHECKSUM, and a partial frame
 * when the channel goes inactive WEFT_EPROTO; each is logged with the peer
 * and counted (weft/codec.h, kind WEFT_CODEC_FRAME). Writing a payload
 * above max_frame_bytes fails that write with WEFT_ETOOBIG.
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

/* Frame codec options; zero fields take the defaults shown. */
typedef struct weft_frame_codec_opts {
	size_t max_frame_bytes; /* 16 MiB: largest payload, either way;
	                           at most WEFT_FRAME_LIMIT */
	bool crc32c;            /* false: no CRC32C trailer */
	bool emit_bytes;        /* false: every frame as a weft_msg_evbuffer */
} weft_frame_codec_opts;

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
 * weft_frame_encode appends one frame holding all of payload's bytes to out,
 * moving them (chains move; a small payload is copied so that the frame is
 * contiguous). payload itself stays the caller's, empty. opts may be NULL.
 * Returns 0, WEFT_ETOOBIG (payload is left as it was) or WEFT_ENOMEM. Any
 * thread, for buffers that thread owns.
 */
WEFT_API int weft_frame_encode(struct evbuffer *out, struct evbuffer *payload,
                               const weft_frame_codec_opts *opts);

#ifdef __cplusplus
}
#endif

#endif
