/* SPDX-License-Identifier: MIT */
/*
 * weft/compress.h: compressed frame bodies (docs/PROTOCOL.md 2.1), LZ4 or
 * zstd, as a codec between a frame codec and whatever reads frame bodies
 * (a chunk codec, an envelope codec).
 *
 * A compressed body is a wrapped body of kind 1:
 *
 *   c1 01 | alg: u8 | raw_len: u32 BE | compressed bytes
 *
 * alg 1 is an LZ4 block (the raw block format of LZ4_compress_default,
 * no frame header), alg 2 one zstd frame; raw_len, at least 1, is the
 * number of bytes it decompresses to, exactly. A body that does not
 * start with c1 01 is plain and passes as it is, both ways.
 *
 * Inbound, a compressed body of an algorithm the codec accepts is
 * checked before anything is allocated (raw_len at most max_body_bytes,
 * and at most max_ratio times the compressed bytes, those after the
 * header: no compression bombs), decompressed, and passed on as the frame
 * body it was (a weft_msg_evbuffer, or weft_msg_bytes for a small one
 * that came as one, borrowed for the call as the frame codec's are). A
 * body that decompresses to another
 * compressed body, data that is corrupt or does not make exactly raw_len
 * bytes, an algorithm not accepted: error WEFT_EPROTO; raw_len past a
 * bound: WEFT_ETOOBIG; either closes the channel, logged (unless quiet)
 * and counted (weft/codec.h, kind WEFT_CODEC_COMPRESS).
 *
 * Outbound, each byte body of at least min_bytes (a weft_msg_evbuffer,
 * weft_msg_bytes, or an in-place write: the codec has reserve and commit)
 * is compressed with alg and leaves wrapped when that saves bytes and
 * stays within max_ratio; otherwise it leaves plain (so does a body that
 * is compressed already: it starts c1 01). Bodies that do not
 * compress make the codec skip the ones after them for a while (doubling
 * up to 64 bodies as they keep failing, reset by one that compresses), so
 * that incompressible traffic costs little more than no compression.
 * Other message types pass on unchanged.
 *
 * Compression and decompression contexts are kept per thread, not per
 * channel: a node with a thousand connections holds a context per loop.
 */
#ifndef WEFT_COMPRESS_H
#define WEFT_COMPRESS_H

#include <weft/channel.h>
#include <weft/codec.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evbuffer;

/* The algorithms, as the alg byte of a compressed body has them. */
enum weft_compress_alg {
	WEFT_COMPRESS_NONE = 0,
	WEFT_COMPRESS_LZ4 = 1,
	WEFT_COMPRESS_ZSTD = 2,
};

/* The first byte of every wrapped body (msgpack's never-used byte, which
 * no envelope starts with), and the kinds that follow it. */
#define WEFT_WRAPPED_MARK 0xc1u
#define WEFT_WRAPPED_COMPRESSED 0x01u
#define WEFT_WRAPPED_CHUNK 0x02u

/* The header of a compressed body: mark, kind, alg, raw_len. */
#define WEFT_COMPRESS_HEADER_BYTES 7
#define WEFT_COMPRESS_DEFAULT_MIN 512
#define WEFT_COMPRESS_DEFAULT_RATIO 255

/* Compression codec options; zero fields take the defaults shown. */
typedef struct weft_compress_codec_opts {
	int alg;               /* WEFT_COMPRESS_NONE: bodies leave plain */
	unsigned accept;       /* 0: reads alg only; else a mask of
	                          (1u << alg) of the algorithms it reads
	                          (the bit of NONE means nothing) */
	size_t min_bytes;      /* 512: smaller bodies leave plain */
	size_t max_body_bytes; /* WEFT_FRAME_LIMIT: the largest body it
	                          decompresses (at most that) */
	uint32_t max_ratio;    /* 255: most decompressed bytes per compressed
	                          byte, read and written */
	int level;             /* 0: the algorithm's fast default (LZ4
	                          acceleration 1, zstd level 1); LZ4: the
	                          acceleration, zstd: the level */
	bool quiet;            /* false: each failure is logged; true: only
	                          counted and fired as an error (weft/frame.h) */
} weft_compress_codec_opts;

/* What one compression codec did since it joined its pipeline. raw_ are
 * the bodies' bytes before compression (after decompression), wire_ as
 * they travel; a plain body counts the same in both. */
typedef struct weft_compress_stats {
	uint64_t raw_out;
	uint64_t wire_out;
	uint64_t raw_in;
	uint64_t wire_in;
	uint64_t compressed_out; /* bodies sent compressed */
	uint64_t skipped_out;    /* bodies of at least min_bytes sent plain:
	                            they did not compress, or were skipped */
	uint64_t compressed_in;  /* compressed bodies read */
} weft_compress_stats;

/*
 * weft_compress_codec_add puts a compression codec at the end of ch's
 * pipeline under name (copied); opts may be NULL (nothing compressed,
 * nothing accepted: every wrapped compressed body is refused). The
 * pipeline owns the codec from then on. Returns 0, or WEFT_EEXIST,
 * WEFT_ENOMEM, WEFT_EINVAL (an unknown alg or accept bit, a max_ratio
 * below 2). Loop thread.
 */
WEFT_API int weft_compress_codec_add(weft_channel *ch, const char *name,
                                     const weft_compress_codec_opts *opts);

/* weft_compress_codec_add_after is weft_compress_codec_add, but places the
 * codec right after the handler called base (first when base is NULL).
 * Also returns WEFT_ENOTFOUND. Loop thread. */
WEFT_API int
weft_compress_codec_add_after(weft_channel *ch, const char *base,
                              const char *name,
                              const weft_compress_codec_opts *opts);

/*
 * weft_compress_codec_get_stats copies the counters of the compression
 * codec called name in ch's pipeline to *out. Returns 0, WEFT_ENOTFOUND
 * or WEFT_EINVAL (not a compression codec). Loop thread.
 */
WEFT_API int weft_compress_codec_get_stats(weft_channel *ch, const char *name,
                                           weft_compress_stats *out);

/*
 * weft_compress_encode appends to out the compressed body of the len
 * bytes at in (header included), made with alg at level (0: default), if
 * it is shorter than len and within max_ratio (0: the default). Returns
 * the bytes appended, 0 if it left out as it was (no gain, or alg NONE),
 * or WEFT_ENOMEM, WEFT_EINVAL (an unknown alg, out NULL), WEFT_ETOOBIG
 * (len above UINT32_MAX, or above what LZ4 takes: LZ4_MAX_INPUT_SIZE).
 * A large body's compressed bytes are lent to out in memory of their
 * own (evbuffer_add_reference), not copied. Any thread.
 */
WEFT_API long weft_compress_encode(struct evbuffer *out, int alg, int level,
                                   uint32_t max_ratio, const void *in,
                                   size_t len);

/*
 * weft_compress_decode checks the compressed body of len bytes at body
 * (header included) against accept (a mask as in the options; 0: every
 * algorithm), max_body_bytes and max_ratio (0: the defaults; at most
 * WEFT_FRAME_LIMIT), and appends the raw_len bytes it decompresses to to
 * out, contiguous, all or nothing. Returns 0, WEFT_EPROTO (not a
 * compressed body, a truncated header, an algorithm unknown or not
 * accepted, corrupt data, not exactly raw_len bytes, or a compressed body
 * inside), WEFT_ETOOBIG (raw_len past a bound; nothing allocated),
 * WEFT_ENOMEM or WEFT_EINVAL (out NULL); *why (may be NULL) then says why
 * in a constant string. Any thread.
 */
WEFT_API int weft_compress_decode(struct evbuffer *out, const void *body,
                                  size_t len, unsigned accept,
                                  size_t max_body_bytes, uint32_t max_ratio,
                                  const char **why);

/*
 * weft_compress_name is "none", "lz4" or "zstd" (NULL for another alg);
 * weft_compress_parse sets *alg from one of those names. Returns 0 or
 * WEFT_EINVAL. Any thread.
 */
WEFT_API const char *weft_compress_name(int alg);
WEFT_API int weft_compress_parse(const char *name, int *alg);

#ifdef __cplusplus
}
#endif

#endif
