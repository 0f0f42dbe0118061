/* SPDX-License-Identifier: MIT */
/*
 * weft/stream.h: the byte stream under a channel, for those who write
 * transports.
 *
 * A channel moves its bytes through a stream: a table of operations that
 * one backend per kind of connection fills in (transport/: TCP and Unix
 * sockets, TLS, in-process pairs, any libevent bufferevent). The channel
 * calls only these operations; it never sees a file descriptor, a
 * bufferevent or an SSL, and nothing above it does either.
 *
 * The contract, all on the channel's loop thread:
 *
 *  - Readiness. A stream watches whatever moves its bytes as the channel
 *    asks (watch) and calls weft_stream_ready from the loop's own event
 *    callbacks, never inside one of its operations, when it can be read or
 *    written. The channel then calls read or write; both report "nothing
 *    now" as 0, and the stream keeps watching. A stream that holds bytes
 *    the socket will not announce again (decrypted records beyond the
 *    budget, input kept by a bufferevent, an end of stream seen early) says
 *    READABLE again by itself.
 *  - Reads. read appends what the stream holds to the channel's input, up
 *    to the budget it is given, in as few system calls as it can: one
 *    wake-up, one batch.
 *  - Writes. write takes bytes from the start of the channel's output and
 *    drains what it took; the channel calls it at once on flush while the
 *    stream is writable, and again on WRITABLE after it took less than all.
 *    Bytes taken but still inside the stream (a TLS record half written, a
 *    bufferevent's output) are its unsent bytes: the channel counts a write
 *    done only once its bytes have left the stream too, and a stream with
 *    unsent bytes says WRITABLE as they leave.
 *  - Ownership. weft_channel_new_stream takes the stream, also on failure.
 *    The channel calls close exactly once, at teardown; after it the stream
 *    must not call weft_stream_ready (its events are gone with it).
 */
#ifndef WEFT_STREAM_H
#define WEFT_STREAM_H

#include <sys/types.h>

#include <weft/channel.h>
#include <weft/core.h>
#include <weft/loop.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evbuffer;

typedef struct weft_stream weft_stream;

/* What a stream tells its channel (weft_stream_ready). */
enum weft_stream_event {
	WEFT_STREAM_READABLE = 1,
	WEFT_STREAM_WRITABLE = 2,
};

typedef struct weft_stream_ops {
	/* The kind, for logs and metrics: "socket" (TCP, Unix), "tls",
	 * "bufferevent" (in-process pairs among others). */
	const char *name;

	/*
	 * read appends at most max bytes to in: what the stream holds now.
	 * Returns the number appended (> 0), 0 when there are none now,
	 * WEFT_ECLOSED at the end of the stream (the peer closed its side,
	 * once every byte before it was returned), or another negative WEFT_E
	 * code when the connection failed. Required.
	 */
	ssize_t (*read)(weft_stream *s, struct evbuffer *in, size_t max);

	/*
	 * write takes bytes from the start of out, as many as the stream takes
	 * without blocking, and drains them from out. Returns the number taken
	 * (>= 0; 0: none now, wait for WEFT_STREAM_WRITABLE), or a negative
	 * WEFT_E code when the connection failed. Required.
	 */
	ssize_t (*write)(weft_stream *s, struct evbuffer *out);

	/* unsent counts the bytes write took that have not yet left the
	 * stream. NULL: always 0. */
	size_t (*unsent)(const weft_stream *s);

	/* watch says which readiness the channel wants to hear of: it calls
	 * it only when its wish changes. Required. */
	void (*watch)(weft_stream *s, bool read, bool write);

	/*
	 * close ends the connection and frees the stream. graceful: the close
	 * is ours, no error was seen and every byte was written, so a TLS
	 * stream says close_notify first. Required.
	 */
	void (*close)(weft_stream *s, bool graceful);

	/* address writes the local (peer false) or remote address as text
	 * (weft/transport.h's forms) into buf. Returns 0 or WEFT_ENOTSUP.
	 * May be NULL. */
	int (*address)(weft_stream *s, bool peer, char *buf, size_t len);

	/*
	 * peer_identity writes the identity the peer proved (the name in its
	 * verified TLS certificate) into buf. Returns 0, WEFT_ENOTSUP (nothing
	 * is proved on this stream), WEFT_EAUTH (not verified) or
	 * WEFT_ETOOBIG. May be NULL.
	 */
	int (*peer_identity)(weft_stream *s, char *buf, size_t len);
} weft_stream_ops;

/* The part of every stream that the channel uses: a backend's own struct
 * starts with it. */
struct weft_stream {
	const weft_stream_ops *ops;
	weft_channel *channel; /* set by weft_channel_new_stream */
};

/*
 * weft_channel_new_stream makes a channel over s on loop (whose event
 * callbacks s uses). The channel takes s, also on failure (closed then).
 * The channel holds one reference for being open; *out is borrowed unless
 * you take a reference. Build the pipeline, then call
 * weft_channel_activate. Returns 0 or WEFT_ENOMEM. Loop thread.
 */
WEFT_API int weft_channel_new_stream(weft_loop *loop, weft_stream *s,
                                     const weft_channel_opts *opts,
                                     weft_channel **out);

/* weft_stream_ready tells s's channel what s can do now (a mask of
 * enum weft_stream_event). From the loop's event callbacks only: the loop
 * thread. */
WEFT_API void weft_stream_ready(weft_stream *s, unsigned events);

/* weft_channel_stream is the channel's stream, NULL once it is torn down.
 * For transports (a TLS stream's peer checks). Loop thread. */
WEFT_API weft_stream *weft_channel_stream(weft_channel *ch);

#ifdef __cplusplus
}
#endif

#endif
