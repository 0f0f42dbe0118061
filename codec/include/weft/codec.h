/* SPDX-License-Identifier: MIT */
/*
 * weft/codec.h: what the codecs (frame.h, line.h, msgpack_codec.h,
 * envelope.h, compress.h, chunk.h) share: their counters.
 *
 * Every codec counts what it decodes and encodes, and the errors that made
 * it close its channel. Each codec keeps its own counts, read by name from
 * its channel's loop; the process adds them up per kind in atomic totals,
 * readable from any thread. A codec adds its counts to the totals at the end
 * of every read batch, on every flush, on an error and when it leaves its
 * pipeline, so the totals may lag a codec's own counts by one batch.
 */
#ifndef WEFT_CODEC_H
#define WEFT_CODEC_H

#include <weft/channel.h>
#include <weft/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The counters of one codec, or of every codec of one kind. */
typedef struct weft_codec_stats {
	uint64_t msgs_in;   /* frames, lines or objects decoded */
	uint64_t bytes_in;  /* their payload bytes (no header, delimiter) */
	uint64_t msgs_out;  /* messages encoded */
	uint64_t bytes_out; /* their payload bytes */
	uint64_t too_big;   /* WEFT_ETOOBIG: a length above the limit */
	uint64_t bad_crc;   /* WEFT_ECHECKSUM: a CRC32C mismatch */
	uint64_t malformed; /* WEFT_EPROTO: invalid or truncated input */
} weft_codec_stats;

/*
 * The user events the codecs fire (weft_ctx_fire_user_event) are numbered
 * from WEFT_CODEC_EVENT_FIRST down to WEFT_CODEC_EVENT_LAST, among the
 * negative numbers weft keeps for itself (<weft/channel.h>); each codec's
 * header names its own (WEFT_FRAME_EVENT_INCOMPLETE).
 */
#define WEFT_CODEC_EVENT_FIRST (-256)
#define WEFT_CODEC_EVENT_LAST (-511)

enum weft_codec_kind {
	WEFT_CODEC_FRAME = 0,
	WEFT_CODEC_LINE = 1,
	WEFT_CODEC_MSGPACK = 2,
	WEFT_CODEC_ENVELOPE = 3,
	WEFT_CODEC_COMPRESS = 4,
	WEFT_CODEC_CHUNK = 5,
	WEFT_CODEC_KINDS = 6,
};

/*
 * weft_codec_get_stats copies the counters of the codec called name in ch's
 * pipeline (any kind). Returns 0, WEFT_ENOTFOUND (no handler of that name)
 * or WEFT_EINVAL (that handler is not a weft codec). Loop thread.
 */
WEFT_API int weft_codec_get_stats(weft_channel *ch, const char *name,
                                  weft_codec_stats *out);

/* weft_codec_get_totals copies the process-wide totals of one kind of
 * codec. Any thread. */
WEFT_API void weft_codec_get_totals(enum weft_codec_kind kind,
                                    weft_codec_stats *out);

/*
 * A codec that closes its channel on bad input logs one warning saying
 * why (unless its quiet option is set). Those lines are rate-limited per
 * kind of codec, process-wide, at weft's peer interval
 * (weft_log_set_peer_interval in <weft/core.h>, one line a second by
 * default): a thousand hostile connections cannot flood the log. The
 * counters above still count every failure.
 */

#ifdef __cplusplus
}
#endif

#endif
