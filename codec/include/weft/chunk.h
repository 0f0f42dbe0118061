/* SPDX-License-Identifier: MIT */
/*
 * weft/chunk.h: bodies larger than a frame, carried as a sequence of
 * bounded frames (docs/PROTOCOL.md 2.1), as a codec between a frame codec
 * (or a compression codec after it) and an envelope codec.
 *
 * A chunk is a wrapped body of kind 2:
 *
 *   c1 02 | flags: u8 | msg: u32 BE | total: u64 BE, first only | bytes
 *
 * flags bit 0 FIRST, bit 1 LAST (never both: a body that fits one chunk
 * is not chunked), the other bits 0. msg names the message among those
 * the sender has in assembly on the channel; total (1 or more) is the
 * whole body's length, declared by the first chunk; every chunk carries
 * at least one byte, and the bytes of a message's chunks add up to total
 * exactly, the last chunk ending it. A body that does not start with
 * c1 02 passes as it is, both ways.
 *
 * Inbound, the chunks of a message are assembled by moving their chains
 * (never into one buffer of max_message_bytes; chunks up to 32 KiB are
 * copied to the end instead, as a moved chain keeps its whole allocation),
 * and the whole body is passed on as a weft_msg_evbuffer (borrowed for the
 * call; the receiver moves out what it keeps) when its last chunk arrives:
 * bodies are passed on in the order their last frames arrive. Refused with
 * error WEFT_EPROTO: a chunk that is not first for a message not in
 * assembly, a first chunk for one that is, more than max_assembling
 * messages in assembly, bad flags, a truncated header, a total of 0, an
 * empty chunk, bytes past total (or a chunk that is not last reaching
 * it), a last chunk short of it, and a connection that ends inside a
 * message (unless an error before this codec said why); with
 * WEFT_ETOOBIG: a total above max_message_bytes (as soon as the first
 * chunk's header arrives). Either closes the channel, frees what was being
 * assembled, and is logged (unless quiet) and counted (weft/codec.h, kind
 * WEFT_CODEC_CHUNK: msgs_in and bytes_in are the messages assembled,
 * msgs_out and bytes_out those sent as chunks).
 *
 * After every chunk that starts or ends a message, the codec fires the
 * user event WEFT_CHUNK_EVENT_ASSEMBLING (below) to the handlers after it,
 * before the assembled body is passed on: a service counts the bytes it
 * will have to hold from the first chunk on, and may pause reading there.
 *
 * Outbound, with send on, a byte body above chunk_bytes leaves as chunks
 * of at most chunk_bytes body bytes each (moving its chains); bodies up to
 * chunk_bytes, and in-place writes (it has reserve and commit), pass
 * straight on, so that they go out between the chunks of a large one
 * rather than behind all of it. Chunked bodies leave one after another,
 * in the order written; the codec keeps at most window chunks in the
 * channel's unwritten bytes, and puts the next one out as they leave.
 * The write's callback runs once: with 0 when its last chunk has left,
 * or with WEFT_ECLOSED when the channel closes or the codec leaves the
 * pipeline first (the chunks already out still leave). A chunk that fails
 * otherwise (a frame codec refusing it) fails its write with that error
 * and closes the channel: the peer cannot finish the message. Message ids
 * count up per codec (wrapping); with send off, every body passes whole.
 * A flush passes on at once; chunks put out later are flushed by the
 * codec.
 */
#ifndef WEFT_CHUNK_H
#define WEFT_CHUNK_H

#include <weft/channel.h>
#include <weft/codec.h>

#ifdef __cplusplus
extern "C" {
#endif

/* mark, kind, flags, msg; and the total of a first chunk after them. */
#define WEFT_CHUNK_HEADER_BYTES 7
#define WEFT_CHUNK_FIRST_HEADER_BYTES 15
#define WEFT_CHUNK_FIRST 0x01u
#define WEFT_CHUNK_LAST 0x02u

#define WEFT_CHUNK_DEFAULT_BYTES (128u << 10)
#define WEFT_CHUNK_DEFAULT_MAX_MESSAGE ((size_t)256 << 20)

/* Chunk codec options; zero fields take the defaults shown. */
typedef struct weft_chunk_codec_opts {
	size_t chunk_bytes;       /* 128 KiB: body bytes per chunk, and the
	                             largest body sent whole (at least 64) */
	bool send;                /* false: bodies leave whole */
	size_t max_message_bytes; /* 256 MiB: largest body assembled */
	uint32_t max_assembling;  /* 4: messages in assembly at once */
	uint32_t window;          /* 2: chunks in the channel's unwritten
	                             bytes at once */
	bool quiet;               /* as the frame codec's */
} weft_chunk_codec_opts;

/*
 * The user event a chunk codec fires (see above); data is a
 * weft_chunk_assembling, borrowed for the call, describing every message
 * in assembly on the channel after the chunk (the one just completed no
 * longer among them).
 */
#define WEFT_CHUNK_EVENT_ASSEMBLING (WEFT_CODEC_EVENT_FIRST - 1)

typedef struct weft_chunk_assembling {
	size_t messages;    /* in assembly */
	size_t have_bytes;  /* their bytes that arrived */
	size_t total_bytes; /* their declared totals */
} weft_chunk_assembling;

/*
 * weft_chunk_codec_add puts a chunk codec at the end of ch's pipeline under
 * name (copied); opts may be NULL for the defaults (send off). The
 * pipeline owns the codec from then on. Returns 0, or WEFT_EEXIST,
 * WEFT_ENOMEM, WEFT_EINVAL (chunk_bytes below 64 or above
 * WEFT_FRAME_LIMIT). Loop thread.
 */
WEFT_API int weft_chunk_codec_add(weft_channel *ch, const char *name,
                                  const weft_chunk_codec_opts *opts);

/* weft_chunk_codec_add_after is weft_chunk_codec_add, but places the codec
 * right after the handler called base (first when base is NULL). Also
 * returns WEFT_ENOTFOUND. Loop thread. */
WEFT_API int weft_chunk_codec_add_after(weft_channel *ch, const char *base,
                                        const char *name,
                                        const weft_chunk_codec_opts *opts);

/*
 * weft_chunk_codec_queued_bytes is the body bytes the chunk codec called
 * name in ch's pipeline holds that have not yet gone out as chunks (0 for
 * no such codec). Loop thread.
 */
WEFT_API size_t weft_chunk_codec_queued_bytes(weft_channel *ch,
                                              const char *name);

#ifdef __cplusplus
}
#endif

#endif
