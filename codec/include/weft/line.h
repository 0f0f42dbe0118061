/* SPDX-License-Identifier: MIT */
/*
 * weft/line.h: delimited lines (text protocols, logs, tests).
 *
 * The line codec is one handler for both directions. Inbound, it fires read
 * once per complete line, without its delimiter, as a weft_msg_evbuffer the
 * next handler borrows for the call; read_complete follows once per batch.
 * Outbound, a weft_msg_evbuffer or weft_msg_bytes written through it
 * leaves with the delimiter appended (small lines are built without
 * allocating); other message types pass on unchanged. The caller must not
 * put the delimiter inside a line.
 *
 * A line longer than max_line_bytes closes the channel with error
 * WEFT_ETOOBIG as soon as that many bytes have arrived without a delimiter,
 * so no more than max_line_bytes plus one read is ever buffered. A partial
 * line when the channel goes inactive fires WEFT_EPROTO. Both are logged
 * with the peer and counted (weft/codec.h, kind WEFT_CODEC_LINE). Writing a
 * line above max_line_bytes fails that write with WEFT_ETOOBIG.
 */
#ifndef WEFT_LINE_H
#define WEFT_LINE_H

#include <weft/channel.h>
#include <weft/codec.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_LINE_MAX_DELIMITER 16
#define WEFT_LINE_DEFAULT_MAX (64u << 10)

/* Line codec options; zero fields take the defaults shown. */
typedef struct weft_line_codec_opts {
	const char *delimiter; /* "\n": 1 to 16 bytes, NUL-terminated; copied */
	bool strip_cr;         /* false: drop one '\r' right before the
	                          delimiter ("\r\n" lines with "\n") */
	size_t max_line_bytes; /* 64 KiB: longest line, without delimiter
	                          (and without the stripped '\r') */
} weft_line_codec_opts;

/*
 * weft_line_codec_add puts a line codec at the end of ch's pipeline under
 * name (copied); opts may be NULL for the defaults. The pipeline owns the
 * codec from then on. Returns 0, or WEFT_EEXIST, WEFT_ENOMEM, WEFT_EINVAL
 * (a bad delimiter). Loop thread.
 */
WEFT_API int weft_line_codec_add(weft_channel *ch, const char *name,
                                 const weft_line_codec_opts *opts);

/* weft_line_codec_add_after is weft_line_codec_add, but places the codec
 * right after the handler called base (first when base is NULL). Also
 * returns WEFT_ENOTFOUND. Loop thread. */
WEFT_API int weft_line_codec_add_after(weft_channel *ch, const char *base,
                                       const char *name,
                                       const weft_line_codec_opts *opts);

#ifdef __cplusplus
}
#endif

#endif
