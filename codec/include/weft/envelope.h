/* SPDX-License-Identifier: MIT */
/*
 * weft/envelope.h: the message envelope of docs/PROTOCOL.md section 4, a
 * msgpack array of 6 (id, verb, flags, created_at, expires_at, payload)
 * that fills one frame body; from protocol version 2 also an array of 7,
 * whose seventh element is a params map (section 4.5).
 *
 * Pure functions encode the fixed header weft writes (39 bytes before the
 * payload, WEFT_ENVELOPE_HEADER_BYTES), decode a body (the fixed layout at
 * once, and otherwise every valid msgpack encoding the protocol allows,
 * each length checked against the bytes there are), and write a whole
 * frame into an evbuffer. The envelope codec is a handler for a pipeline,
 * placed after a frame codec (weft/frame.h): inbound each frame becomes a
 * weft_msg_envelope, outbound a weft_msg_envelope becomes one frame body.
 *
 * Ownership of a weft_msg_envelope travelling a pipeline (msg is a
 * weft_envelope *), as <weft/channel.h> has it for byte messages:
 * inbound, the envelope and its payload are borrowed by the handler it is
 * passed to until the callback returns: a small payload (payload_buf
 * NULL) points into the frame, without a copy or an allocation; that of
 * a large frame (a body above 4096 bytes) comes as payload_buf, an
 * evbuffer holding the frame's chains, from which the handler moves out
 * the bytes it keeps
 * (evbuffer_remove_buffer moves chains). Outbound, the write consumes it
 * on success and on failure: the struct and a payload of bytes are copied
 * before the write returns (they stay the caller's), the bytes of
 * payload_buf are moved out (the evbuffer stays the caller's, empty).
 * Since the struct is borrowed, write it on the channel's loop thread
 * (weft_ctx_write, or weft_channel_write_msg there); from another thread,
 * build the frame with weft_envelope_encode_frame and weft_channel_write
 * it.
 */
#ifndef WEFT_ENVELOPE_H
#define WEFT_ENVELOPE_H

#include <weft/channel.h>
#include <weft/codec.h>
#include <weft/frame.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evbuffer;

/* The fixed header weft writes before the payload bytes. */
#define WEFT_ENVELOPE_HEADER_BYTES 39
/* The largest payload an envelope can carry (a bin 32). */
#define WEFT_ENVELOPE_MAX_PAYLOAD ((size_t)UINT32_MAX)

/*
 * The flag bits. Exactly one of REQUEST, RESPONSE, ONEWAY is set; ERROR
 * only with RESPONSE; from version 2, CANCEL alone may stand in their
 * place. The bits above are reserved (written as 0 by weft's encoder for
 * the bits above 6, which its one-byte field cannot hold; ignored by
 * receivers, but kept by the decoder); in version 1 that includes PARAMS
 * and CANCEL.
 */
#define WEFT_ENVELOPE_REQUEST 0x01u
#define WEFT_ENVELOPE_RESPONSE 0x02u
#define WEFT_ENVELOPE_ONEWAY 0x04u
#define WEFT_ENVELOPE_ERROR 0x08u
/* Version 2: a params map follows the payload. The encoder sets it from
 * params_len; receivers check it against the element count. */
#define WEFT_ENVELOPE_PARAMS 0x10u
/* Version 2: the sender no longer wants the answer to its request of this
 * id and verb (a kind of its own; the payload is empty). */
#define WEFT_ENVELOPE_CANCEL 0x20u
/* The bits that make a message's kind, but for CANCEL. */
#define WEFT_ENVELOPE_KIND_BITS 0x0fu

/* Protocol versions of the envelope; an envelope codec speaks one. */
#define WEFT_ENVELOPE_V1 1
#define WEFT_ENVELOPE_V2 2

/*
 * The params map (version 2, docs/PROTOCOL.md 4.5): a msgpack map of at
 * most WEFT_ENVELOPE_PARAMS_MAX_KEYS pairs and WEFT_ENVELOPE_PARAMS_MAX
 * bytes, header included, whose keys are distinct unsigned integers up to
 * WEFT_ENVELOPE_PARAM_KEY_MAX. A key below has a fixed value type, which
 * every receiver checks; any other key is skipped, whatever its value, so
 * that a later version can add keys.
 */
#define WEFT_ENVELOPE_PARAMS_MAX 512
#define WEFT_ENVELOPE_PARAMS_MAX_KEYS 16
#define WEFT_ENVELOPE_PARAM_KEY_MAX 0xffffu
/* A W3C trace context: bin 8 of 26 bytes (version, trace id, parent id,
 * flags). Set by the messaging service on a request of a trace. */
#define WEFT_PARAM_TRACEPARENT 1u
/* Per-stage times of a response: an array of at most 8 unsigned integers
 * (microseconds). Set by the messaging service on every response. */
#define WEFT_PARAM_STAGE_US 2u
/* A request's priority: an unsigned integer up to 255. Reserved; not yet
 * set by weft. */
#define WEFT_PARAM_PRIORITY 3u

/*
 * One envelope. The payload is either payload_len bytes at payload
 * (payload_buf NULL), or, with payload_buf set, all of payload_buf's bytes
 * (payload is then NULL and, when decoded, payload_len their number; on
 * write both are ignored). params_len bytes at params are the encoded
 * params map (version 2), header included; 0 (params NULL): none. When
 * decoded, they are checked (weft_envelope_params_check) and borrowed as
 * the payload is.
 */
typedef struct weft_envelope {
	uint64_t id;
	uint32_t verb;
	uint32_t flags;
	uint64_t created_ms; /* the sender's wall clock, ms since 1970 */
	uint64_t expires_ms; /* 0: never */
	const void *payload;
	size_t payload_len;
	struct evbuffer *payload_buf;
	const void *params;
	size_t params_len;
} weft_envelope;

/* The message type of an envelope in a pipeline (see above). Its free
 * drains payload_buf and leaves the struct alone. */
WEFT_API extern const weft_msg_type weft_msg_envelope;

/*
 * weft_envelope_encode_header writes the 39 bytes weft puts before an
 * envelope's payload (docs/PROTOCOL.md 4: fixarray 6, uint 64 id, uint 32
 * verb, the flags' low 7 bits as a positive fixint, uint 64 created and
 * expires, bin 32 of payload_len) to out. With params_len above 0 the
 * array is a fixarray 7 and the PARAMS bit is set (otherwise cleared);
 * the params then follow the payload. env's payload and params are not
 * looked at. Any thread.
 */
WEFT_API void weft_envelope_encode_header(void *out, const weft_envelope *env,
                                          uint32_t payload_len);

/*
 * weft_envelope_decode decodes the frame body of len bytes at body into
 * *out; the payload points into body (payload_buf NULL). It reads every
 * valid encoding (an array of 6 as fixarray, array 16 or 32; each integer
 * as any msgpack integer holding a non-negative value in its range; the
 * payload as bin 8, 16 or 32) and refuses anything else: another element
 * count or type, a value out of range (verb and flags 32 bits), a kind
 * other than those of the flag bits above, bytes missing or left over.
 * Returns 0, or WEFT_EPROTO with *out undefined. Any thread.
 */
WEFT_API int weft_envelope_decode(const void *body, size_t len,
                                  weft_envelope *out);

/*
 * weft_envelope_decode_version is weft_envelope_decode for a connection
 * of protocol version (WEFT_ENVELOPE_V1 or V2). Version 2 also reads an
 * array of 7 whose last element is a params map (checked, params pointing
 * into body), which the PARAMS flag must announce, and the CANCEL kind.
 * Any thread.
 */
WEFT_API int weft_envelope_decode_version(const void *body, size_t len,
                                          int version, weft_envelope *out);

/*
 * weft_envelope_params_check checks the len bytes at params as a params
 * map (see WEFT_ENVELOPE_PARAMS_MAX above): one map, nothing after it,
 * within the limits, distinct keys, each known key's value of its type.
 * Returns 0, or WEFT_EPROTO with a constant reason in *why (why may be
 * NULL). Any thread.
 */
WEFT_API int weft_envelope_params_check(const void *params, size_t len,
                                        const char **why);

/*
 * weft_envelope_param_find finds key in a params map that passed the
 * check, and points *value at the encoded value (*value_len bytes).
 * Returns 0, or WEFT_ENOTFOUND. Any thread.
 */
WEFT_API int weft_envelope_param_find(const void *params, size_t len,
                                      uint32_t key, const void **value,
                                      size_t *value_len);

/*
 * weft_envelope_encode_frame appends one whole frame to out: the length
 * field, the fixed header, the payload, the params if any and, with
 * opts->crc32c, the CRC32C trailer (weft/frame.h). A payload of bytes is
 * copied; payload_buf's chains move (a small one is copied, so that the frame
 * is contiguous) and it is left empty. opts may be NULL (frame codec defaults).
 * Returns 0, WEFT_ETOOBIG or WEFT_EINVAL (the body is outside the limits of
 * opts, or env is NULL), WEFT_ENOMEM; on failure payload_buf is left as it was.
 * Any thread, for buffers that thread owns.
 */
WEFT_API int weft_envelope_encode_frame(struct evbuffer *out,
                                        const weft_envelope *env,
                                        const weft_frame_codec_opts *opts);

/* The bytes of a whole frame weft_envelope_put_frame writes for a payload
 * of payload_len bytes: length field, fixed header, payload and, with
 * crc32c, the CRC32C trailer. */
#define WEFT_ENVELOPE_FRAME_BYTES(payload_len, crc32c)                         \
	(WEFT_FRAME_HEADER_BYTES + WEFT_ENVELOPE_HEADER_BYTES +                \
	 (payload_len) + ((crc32c) ? WEFT_FRAME_CRC_BYTES : 0))

/*
 * weft_envelope_put_frame writes one whole frame for env into the
 * WEFT_ENVELOPE_FRAME_BYTES(payload length, crc32c) bytes at out (and
 * params_len more for params), as
 * weft_envelope_encode_frame lays it out: for an encoder that gathers many
 * small frames in memory of its own and hands the batch on at once. A
 * payload of bytes is copied; one in payload_buf is copied out and
 * drained. It checks no limit: the caller keeps the frame within the
 * receiver's. Returns the bytes written. Any thread, for memory and
 * buffers that thread owns.
 */
WEFT_API size_t weft_envelope_put_frame(void *out, const weft_envelope *env,
                                        bool crc32c);

/* Envelope codec options; zero fields take the defaults shown. */
typedef struct weft_envelope_codec_opts {
	size_t max_payload_bytes; /* 0: any the frame codec lets through */
	bool quiet;               /* false: each refused frame is logged;
	                             true: only counted and fired as an error
	                             to the handlers after it, as the frame
	                             codec's quiet option does */
	int version; /* 0: WEFT_ENVELOPE_V1, whose codec neither reads nor
	                writes params or cancels; WEFT_ENVELOPE_V2 */
} weft_envelope_codec_opts;

/*
 * weft_envelope_codec_add puts an envelope codec at the end of ch's
 * pipeline under name (copied), to follow a frame codec; opts may be NULL.
 * Inbound, each frame (a weft_msg_evbuffer or weft_msg_bytes) fires read
 * with a weft_msg_envelope; a frame that is not a valid envelope, or whose
 * payload is above max_payload_bytes, fires error WEFT_EPROTO (or
 * WEFT_ETOOBIG) and closes the channel, logged with the peer and counted
 * (weft/codec.h, kind WEFT_CODEC_ENVELOPE). Outbound, a weft_msg_envelope
 * leaves as one frame body in weft's fixed layout (the frame codec before
 * it frames it); a payload above max_payload_bytes fails that write with
 * WEFT_ETOOBIG; in version 1, params or a cancel fail it with
 * WEFT_ENOTSUP, so that nothing of version 2 is ever sent on a version 1
 * connection. Other messages pass on unchanged both ways. The pipeline
 * owns the codec from then on. Returns 0, or WEFT_EEXIST, WEFT_ENOMEM,
 * WEFT_EINVAL. Loop thread.
 */
WEFT_API int weft_envelope_codec_add(weft_channel *ch, const char *name,
                                     const weft_envelope_codec_opts *opts);

/* weft_envelope_codec_add_after is weft_envelope_codec_add, but places the
 * codec right after the handler called base (first when base is NULL).
 * Also returns WEFT_ENOTFOUND. Loop thread. */
WEFT_API int
weft_envelope_codec_add_after(weft_channel *ch, const char *base,
                              const char *name,
                              const weft_envelope_codec_opts *opts);

#ifdef __cplusplus
}
#endif

#endif
