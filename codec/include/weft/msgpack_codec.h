/* SPDX-License-Identifier: MIT */
/*
 * weft/msgpack_codec.h: msgpack messages over frames (msgpack-c's C API).
 *
 * The msgpack codec sits after a frame codec: each inbound frame (a
 * weft_msg_evbuffer, or a weft_msg_bytes from a frame codec with
 * emit_bytes) must hold exactly one msgpack object, which goes on as a
 * weft_msg_msgpack message; the receiver owns it and frees it with
 * weft_msg_free() (or forwards it). Outbound, a weft_msg_msgpack or
 * weft_msg_msgpack_fn message is packed into bytes that go on as one
 * weft_msg_evbuffer; bytes written through it pass unchanged, so code that
 * packs on its own (weft_msgpack_packer_init) can write evbuffers.
 *
 * Before msgpack-c sees a frame, weft_msgpack_check walks it: msgpack-c
 * reserves memory for a container's claimed size before its elements
 * arrive, so a few bytes claiming a 4-billion-element array would cost
 * gigabytes, and even honest one-byte elements cost 24 bytes of objects
 * each. A frame that is not one valid object, has trailing bytes, claims
 * more elements or bytes than it holds, would cost more than
 * WEFT_MSGPACK_OBJECT_BYTES(n) in objects, or nests deeper than max_depth
 * closes the channel with error WEFT_EPROTO, logged with the peer and
 * counted (weft/codec.h, kind WEFT_CODEC_MSGPACK). Decoding a frame of n
 * bytes allocates at most n + WEFT_MSGPACK_OBJECT_BYTES(n) bytes plus a
 * few hundred.
 */
#ifndef WEFT_MSGPACK_CODEC_H
#define WEFT_MSGPACK_CODEC_H

#include <msgpack.h>

#include <weft/channel.h>
#include <weft/codec.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evbuffer;

/* msgpack-c's unpacker holds 32 open containers: the most max_depth can
 * be. */
#define WEFT_MSGPACK_MAX_DEPTH 32

/*
 * The memory bound weft_msgpack_check enforces: msgpack-c's objects for
 * every array element (sizeof(msgpack_object), 24 bytes on LP64) and map
 * pair (sizeof(msgpack_object_kv), 48) of an n-byte input may take at most
 * WEFT_MSGPACK_OBJECT_BYTES(n) bytes: 8 per input byte, and 32 KiB for
 * any input. Records of a few bytes per element fit; an array of millions
 * of one-byte elements does not (send those as bin).
 */
#define WEFT_MSGPACK_OBJECT_BYTES_PER_BYTE 8u
#define WEFT_MSGPACK_OBJECT_BYTES_MIN 32768u
#define WEFT_MSGPACK_OBJECT_BYTES(n)                                           \
	((uint64_t)(n)*WEFT_MSGPACK_OBJECT_BYTES_PER_BYTE +                    \
	 WEFT_MSGPACK_OBJECT_BYTES_MIN)

/* Msgpack codec options; zero fields take the defaults shown. */
typedef struct weft_msgpack_codec_opts {
	unsigned max_depth; /* 32: most nested arrays and maps; at most 32 */
} weft_msgpack_codec_opts;

/*
 * A decoded object and the zone that owns its memory (msgpack-c's
 * msgpack_zone; strings, binaries and extensions point into it). The
 * message lives in its own zone, so freeing it frees everything at once.
 */
typedef struct weft_msgpack_msg weft_msgpack_msg;

/* The type of weft_msgpack_msg messages, inbound and outbound. */
WEFT_API extern const weft_msg_type weft_msg_msgpack;

/* weft_msgpack_msg_object is the message's object, valid until the message
 * is freed. Any thread (the one that holds the message). */
WEFT_API const msgpack_object *
weft_msgpack_msg_object(const weft_msgpack_msg *m);

/* weft_msgpack_msg_zone is the zone that owns the object, for building
 * more objects that live as long as the message. Any thread (the one that
 * holds the message). */
WEFT_API msgpack_zone *weft_msgpack_msg_zone(weft_msgpack_msg *m);

/*
 * weft_msgpack_msg_new makes a message of a copy of *obj (the copy is
 * shallow: what obj points to must live in zone, or outlive the message).
 * The message takes zone, also on failure (freed then); zone may be NULL
 * when obj points to nothing or to memory that outlives the message.
 * Returns 0 or WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_msgpack_msg_new(const msgpack_object *obj, msgpack_zone *zone,
                                  weft_msgpack_msg **out);

/* weft_msgpack_msg_free frees the message, its zone and everything in it.
 * NULL is ignored. Any thread. */
WEFT_API void weft_msgpack_msg_free(weft_msgpack_msg *m);

/*
 * weft_msgpack_decode checks data (weft_msgpack_check) and, if it is one
 * valid object, unpacks it into a new message that holds a copy of the
 * bytes, so data may go right after. Returns 0, WEFT_EPROTO or
 * WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_msgpack_decode(const void *data, size_t len,
                                 unsigned max_depth, weft_msgpack_msg **out);

/*
 * weft_msgpack_check returns 0 if data holds exactly one msgpack object,
 * nested at most max_depth containers deep (0 or above 32 means 32), in
 * which no array, map, str, bin or ext claims more than the bytes left (an
 * array of n elements needs n bytes, a map of n pairs 2n), and whose
 * arrays and maps cost msgpack-c at most WEFT_MSGPACK_OBJECT_BYTES(len)
 * bytes of objects. Otherwise it returns WEFT_EPROTO. It never allocates
 * and reads each byte at most once. Bytes it accepts unpack with
 * msgpack_unpack or msgpack_unpack_next within that bound (plus the
 * zone's chunking), so a caller may hand them to msgpack-c. Any thread.
 */
WEFT_API int weft_msgpack_check(const void *data, size_t len,
                                unsigned max_depth);

/*
 * A pack function for weft_msgpack_fn messages: packs one object with pk
 * and returns 0, or a negative WEFT_E code to fail the write (the value
 * msgpack-c's pack functions return, -1, reads as WEFT_ENOMEM).
 */
typedef int (*weft_msgpack_pack_cb)(msgpack_packer *pk, void *arg);

/* An outbound message that packs itself: pack(pk, arg) runs on the
 * channel's loop when the message reaches the msgpack codec, then
 * free_arg(arg) if not NULL, written or not. */
typedef struct weft_msgpack_fn weft_msgpack_fn;

/* The type of weft_msgpack_fn messages (outbound only). */
WEFT_API extern const weft_msg_type weft_msg_msgpack_fn;

/* weft_msgpack_fn_new makes one. On failure free_arg(arg) has run. Returns
 * 0 or WEFT_ENOMEM. Any thread. */
WEFT_API int weft_msgpack_fn_new(weft_msgpack_pack_cb pack, void *arg,
                                 void (*free_arg)(void *arg),
                                 weft_msgpack_fn **out);

/*
 * weft_msgpack_packer_init makes pk append what it packs straight to out
 * (each msgpack_pack_* call returns 0, or -1 when memory runs out). out
 * must outlive the packer's use. Returns 0, or WEFT_EINVAL for NULL. Any
 * thread, for buffers that thread owns.
 */
WEFT_API int weft_msgpack_packer_init(msgpack_packer *pk, struct evbuffer *out);

/*
 * weft_msgpack_codec_add puts a msgpack codec at the end of ch's pipeline
 * under name (copied), normally after a frame codec; opts may be NULL. The
 * pipeline owns the codec from then on. Returns 0, or WEFT_EEXIST,
 * WEFT_ENOMEM. Loop thread.
 */
WEFT_API int weft_msgpack_codec_add(weft_channel *ch, const char *name,
                                    const weft_msgpack_codec_opts *opts);

/* weft_msgpack_codec_add_after is weft_msgpack_codec_add, but places the
 * codec right after the handler called base (first when base is NULL).
 * Also returns WEFT_ENOTFOUND. Loop thread. */
WEFT_API int weft_msgpack_codec_add_after(weft_channel *ch, const char *base,
                                          const char *name,
                                          const weft_msgpack_codec_opts *opts);

#ifdef __cplusplus
}
#endif

#endif
