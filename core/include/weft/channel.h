/* SPDX-License-Identifier: MIT */
/*
 * weft/channel.h: one connection, bound to one loop for its life, and the
 * pipeline of handlers between its bytes and the application.
 *
 * Inbound events (active, read, read_complete, writability_changed,
 * user_event, error, inactive) travel from the head of the pipeline (the
 * transport) to its tail; outbound operations (write, flush, close) travel
 * from the tail to the head. Every callback runs on the channel's loop
 * thread, so handlers need no locks.
 */
#ifndef WEFT_CHANNEL_H
#define WEFT_CHANNEL_H

#include <weft/core.h>
#include <weft/loop.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evbuffer;

typedef struct weft_channel weft_channel;
/* A handler's place in one channel's pipeline. */
typedef struct weft_ctx weft_ctx;

/*
 * The type of a message travelling the pipeline. Messages are byte buffers
 * (type == &weft_msg_evbuffer, msg is a struct evbuffer *), borrowed byte
 * runs (type == &weft_msg_bytes, msg is a const weft_bytes *), or typed
 * objects of a type a codec defines, freed with type->free.
 *
 * Ownership: an inbound evbuffer is borrowed by the handler it is passed to,
 * which moves out the bytes it wants (evbuffer_remove_buffer moves chains);
 * bytes left in the channel's input stay there for the next read, bytes left
 * in a decoder's buffer are dropped. An inbound weft_bytes and the memory it
 * points to are borrowed until the callback returns: decoders pass small
 * frames this way, straight from the input buffer, without copying or
 * allocating. An inbound typed object is owned by the handler that receives
 * it, which forwards it or frees it. On write, every kind is consumed, on
 * success and on failure: bytes are moved out of an evbuffer (the evbuffer
 * itself stays the caller's), a weft_bytes is copied before the write
 * returns (the memory stays the caller's), and typed objects become the
 * pipeline's.
 */
typedef struct weft_msg_type {
	const char *name;
	void (*free)(void *msg);
} weft_msg_type;

/* A borrowed run of contiguous bytes (see weft_msg_type). */
typedef struct weft_bytes {
	const void *data;
	size_t len;
} weft_bytes;

WEFT_API extern const weft_msg_type weft_msg_evbuffer;
WEFT_API extern const weft_msg_type weft_msg_bytes;

/*
 * weft_msg_is_bytes is true for the two byte kinds. weft_msg_length is
 * their length in bytes (0 for typed objects). Any thread (the one that
 * holds the message).
 */
WEFT_API bool weft_msg_is_bytes(const weft_msg_type *type);
WEFT_API size_t weft_msg_length(const weft_msg_type *type, const void *msg);

/*
 * weft_msg_copyout copies up to len bytes from the start of a byte message
 * into dst without consuming them; returns the number copied (0 for a
 * typed object). Any thread (the one that holds the message).
 */
WEFT_API size_t weft_msg_copyout(const weft_msg_type *type, const void *msg,
                                 void *dst, size_t len);

/* Runs once on the channel's loop when the bytes of one write have left
 * for the socket (0) or can no longer go (a negative WEFT_E code). */
typedef void (*weft_write_cb)(weft_channel *ch, int status, void *arg);

/*
 * A handler: a table of callbacks, any of which may be NULL to pass the
 * event on unchanged. state is the pointer given when the handler was added.
 */
typedef struct weft_handler {
	/* Called when the handler joins and leaves a pipeline; removed is the
	 * place to free state. */
	void (*added)(weft_ctx *ctx);
	void (*removed)(weft_ctx *ctx);
	/* Inbound. */
	void (*active)(weft_ctx *ctx);
	void (*read)(weft_ctx *ctx, const weft_msg_type *type, void *msg);
	void (*read_complete)(weft_ctx *ctx);
	void (*writability_changed)(weft_ctx *ctx, bool writable);
	void (*user_event)(weft_ctx *ctx, int event, void *data);
	void (*error)(weft_ctx *ctx, int status);
	void (*inactive)(weft_ctx *ctx);
	/* Outbound. */
	void (*write)(weft_ctx *ctx, const weft_msg_type *type, void *msg,
	              weft_write_cb cb, void *cb_arg);
	void (*flush)(weft_ctx *ctx);
	void (*close)(weft_ctx *ctx);
	/* In-place writes (weft_ctx_reserve), both or neither: reserve
	 * returns room for n bytes of the message, usually inside a larger
	 * reservation of its own from weft_ctx_reserve, with the bytes it adds
	 * around it; commit finishes the message (used of the n bytes were
	 * written) and passes it on with weft_ctx_commit. A handler with
	 * write and no reserve gets in-place writes as ordinary writes of
	 * bytes. */
	void *(*reserve)(weft_ctx *ctx, size_t n);
	void (*commit)(weft_ctx *ctx, size_t used, weft_write_cb cb,
	               void *cb_arg);
} weft_handler;

/* Channel options; zero fields take the defaults shown. */
typedef struct weft_channel_opts {
	size_t high_water_bytes; /* 1 MiB: unwritable above this */
	size_t low_water_bytes;  /* 256 KiB: writable again at or below */
	size_t max_read_bytes;   /* 256 KiB: most bytes taken per read call */
	uint64_t linger_ms;      /* 5000: how long close waits for writes */
} weft_channel_opts;

/* Sets up a new channel's pipeline (Netty's ChannelInitializer). Returns 0
 * or a WEFT_E code, which closes the channel. */
typedef int (*weft_channel_init_cb)(weft_channel *ch, void *arg);

/*
 * Channels are made by transports (weft/transport.h: servers, connects,
 * in-process pairs, or weft_channel_new over any bufferevent), over a byte
 * stream (weft/stream.h, for those who write transports).
 */

/* weft_channel_activate starts reading and fires active. Loop thread. */
WEFT_API void weft_channel_activate(weft_channel *ch);

/* Reference counting, for pointers kept across threads or past inactive.
 * Any thread. */
WEFT_API void weft_channel_ref(weft_channel *ch);
WEFT_API void weft_channel_unref(weft_channel *ch);

/* weft_channel_loop returns the loop the channel is bound to, for its
 * life. Any thread. */
WEFT_API weft_loop *weft_channel_loop(const weft_channel *ch);
/* weft_channel_set_data sets the channel's user pointer, which the channel
 * does not own. weft_channel_data returns the user pointer (NULL until
 * set). Loop thread. */
WEFT_API void weft_channel_set_data(weft_channel *ch, void *data);
WEFT_API void *weft_channel_data(const weft_channel *ch);
/* weft_channel_peer returns the peer's address as text ("127.0.0.1:5000",
 * "[::1]:80", "unix:/p", "inproc"), borrowed from the channel.
 * weft_channel_set_peer sets the address (copied, cut to 95 bytes), as the
 * transport does. Loop thread. */
WEFT_API const char *weft_channel_peer(const weft_channel *ch);
WEFT_API void weft_channel_set_peer(weft_channel *ch, const char *peer);

/* weft_channel_is_open is false once close started or the peer went away.
 * Any thread. */
WEFT_API bool weft_channel_is_open(const weft_channel *ch);
/* weft_channel_is_writable is false above the high-water mark. Loop
 * thread. */
WEFT_API bool weft_channel_is_writable(const weft_channel *ch);
/* weft_channel_pending_write_bytes is the number of bytes written but not
 * yet handed to the socket. Loop thread. */
WEFT_API size_t weft_channel_pending_write_bytes(const weft_channel *ch);
/* weft_channel_pending_read_bytes is the number of bytes read from the
 * socket that no handler has taken yet (a decoder's partial message). Loop
 * thread. */
WEFT_API size_t weft_channel_pending_read_bytes(const weft_channel *ch);

/* What the channel's stream took and gave: reads and writes that moved
 * bytes, and those bytes (so bytes per write shows how well writes
 * batch). */
typedef struct weft_channel_stats {
	uint64_t reads, bytes_read;
	uint64_t writes, bytes_written;
} weft_channel_stats;

/* weft_channel_get_stats copies the counters into *out. Loop thread. */
WEFT_API void weft_channel_get_stats(const weft_channel *ch,
                                     weft_channel_stats *out);

/*
 * weft_channel_set_auto_read pauses (false) or resumes reading, for
 * inbound back-pressure. Paused inside a read callback, decoders deliver
 * no further message of the bytes already read (the frame codec stops
 * after the current frame); resumed, the channel delivers what its input
 * still holds again soon, on the loop, never inside this call. Loop
 * thread.
 */
WEFT_API void weft_channel_set_auto_read(weft_channel *ch, bool on);
/* weft_channel_is_auto_read is true while reading is on. Loop thread. */
WEFT_API bool weft_channel_is_auto_read(const weft_channel *ch);

/*
 * weft_channel_yield gives up the channel's turn at reading, so that one
 * busy connection cannot hold its loop (fairness; Redis's
 * NET_MAX_WRITES_PER_EVENT, Seastar's task quota). Called from a read
 * callback, decoders deliver no further message of the bytes already read
 * (as when reading pauses), and the channel delivers what its input still
 * holds on the loop's next round: after the loop has polled again and
 * served every channel that was ready, in the order their turns were given
 * up. Its stream is not read meanwhile, so the input stays within
 * max_read_bytes and a partial message. Given up at the last byte the
 * input held, the turn costs nothing: there is nothing to wait, and the
 * stream is read again at once. Reading stays on
 * (weft_channel_is_auto_read); a no-op once the turn is given up, and on a
 * closing channel. Loop thread.
 */
WEFT_API void weft_channel_yield(weft_channel *ch);
/* weft_channel_is_reading is true when a decoder may deliver its next
 * message: reading is on and the turn was not given up. Loop thread. */
WEFT_API bool weft_channel_is_reading(const weft_channel *ch);

/*
 * weft_channel_write_msg sends a message through the whole pipeline (from
 * the tail) and flushes. It consumes msg as described at weft_msg_type, on
 * success and on failure; if it returns non-zero, cb is never called,
 * otherwise cb (if not NULL) runs exactly once, on the loop thread, never
 * inside this call. Any thread. From another thread the message joins the
 * channel's queue of writes from other threads (bytes are moved into it
 * at once, the caller's evbuffer stays the caller's; nothing is allocated
 * per write), which the loop drains once per wake-up, writing the batch
 * through the pipeline and flushing it with one write to the socket.
 * Returns 0, or WEFT_ECLOSED once the channel is torn down.
 */
WEFT_API int weft_channel_write_msg(weft_channel *ch, const weft_msg_type *type,
                                    void *msg, weft_write_cb cb, void *arg);

/* weft_channel_write is weft_channel_write_msg for bytes: moves all of buf
 * out (buf stays the caller's). Any thread. */
WEFT_API int weft_channel_write(weft_channel *ch, struct evbuffer *buf,
                                weft_write_cb cb, void *arg);

/*
 * weft_channel_close starts an orderly close through the pipeline: reading
 * stops, pending writes drain (up to linger_ms), then the socket closes and
 * inactive fires. Idempotent. Any thread.
 */
WEFT_API void weft_channel_close(weft_channel *ch);

/* weft_channel_fire_user_event sends a user event from the head of the
 * pipeline. Loop thread. */
WEFT_API void weft_channel_fire_user_event(weft_channel *ch, int event,
                                           void *data);

/*
 * Building the pipeline. Names are unique per channel (copied). Adding or
 * removing is allowed at any time on the loop thread, also inside any
 * handler callback of the same channel: a removed handler receives no
 * further events at once, but its removed callback (where it frees its
 * state) runs only after the channel's current callback has returned, as
 * libuv runs close callbacks: a handler may remove itself, or close its
 * channel, and go on using its state until it returns. Owed write
 * callbacks run before any removed. Returns 0, WEFT_EEXIST (name taken),
 * WEFT_ENOTFOUND or WEFT_ENOMEM.
 */
WEFT_API int weft_pipeline_add_last(weft_channel *ch, const char *name,
                                    const weft_handler *h, void *state);
WEFT_API int weft_pipeline_add_first(weft_channel *ch, const char *name,
                                     const weft_handler *h, void *state);
WEFT_API int weft_pipeline_add_before(weft_channel *ch, const char *base,
                                      const char *name, const weft_handler *h,
                                      void *state);
WEFT_API int weft_pipeline_add_after(weft_channel *ch, const char *base,
                                     const char *name, const weft_handler *h,
                                     void *state);
WEFT_API int weft_pipeline_remove(weft_channel *ch, const char *name);
/* weft_pipeline_replace puts a new handler in old's place. */
WEFT_API int weft_pipeline_replace(weft_channel *ch, const char *old_name,
                                   const char *name, const weft_handler *h,
                                   void *state);
/* weft_pipeline_get finds a handler's context by name, or NULL. */
WEFT_API weft_ctx *weft_pipeline_get(weft_channel *ch, const char *name);

/* What a handler can do with its context. Loop thread. weft_ctx_channel
 * returns the context's channel. weft_ctx_state returns the state the
 * handler was added with. weft_ctx_name returns its name (borrowed from
 * the context). */
WEFT_API weft_channel *weft_ctx_channel(const weft_ctx *ctx);
WEFT_API void *weft_ctx_state(const weft_ctx *ctx);
WEFT_API const char *weft_ctx_name(const weft_ctx *ctx);
/* weft_ctx_handler is the handler table this context was added with. */
WEFT_API const weft_handler *weft_ctx_handler(const weft_ctx *ctx);
/* weft_ctx_remove takes this handler out of the pipeline. */
WEFT_API void weft_ctx_remove(weft_ctx *ctx);
/* weft_ctx_is_removed is true once the handler has left the pipeline (its
 * removed callback may not have run yet). */
WEFT_API bool weft_ctx_is_removed(const weft_ctx *ctx);

/* Forward an inbound event to the next handler towards the tail. Loop
 * thread. */
WEFT_API void weft_ctx_fire_active(weft_ctx *ctx);
WEFT_API void weft_ctx_fire_read(weft_ctx *ctx, const weft_msg_type *type,
                                 void *msg);
WEFT_API void weft_ctx_fire_read_complete(weft_ctx *ctx);
WEFT_API void weft_ctx_fire_writability_changed(weft_ctx *ctx, bool writable);
WEFT_API void weft_ctx_fire_user_event(weft_ctx *ctx, int event, void *data);
WEFT_API void weft_ctx_fire_error(weft_ctx *ctx, int status);
WEFT_API void weft_ctx_fire_inactive(weft_ctx *ctx);

/*
 * Pass an outbound operation to the next handler towards the head. Write
 * ownership as at weft_channel_write_msg; cb runs exactly once, never
 * inside the call. A flush writes to the socket at once when it can take
 * bytes, also while earlier writes wait for their callbacks. Bytes written
 * and not flushed are flushed when the loop has run the callbacks of the
 * current wake-up, so handlers may write many messages and let them leave
 * in one batch: that flush travels the whole pipeline from its tail, as one
 * a handler makes, so a handler that gathers a batch (or accounts for one)
 * sees where it ends. Loop thread.
 */
WEFT_API void weft_ctx_write(weft_ctx *ctx, const weft_msg_type *type,
                             void *msg, weft_write_cb cb, void *cb_arg);
WEFT_API void weft_ctx_flush(weft_ctx *ctx);
/* weft_ctx_write_and_flush is weft_ctx_write then weft_ctx_flush (Netty's
 * writeAndFlush). */
WEFT_API void weft_ctx_write_and_flush(weft_ctx *ctx, const weft_msg_type *type,
                                       void *msg, weft_write_cb cb,
                                       void *cb_arg);
WEFT_API void weft_ctx_close(weft_ctx *ctx);

/*
 * In-place writes: a message encoded straight into the channel's batch,
 * with no buffer of its own and no copy (h2o's frame encoders). reserve
 * returns room for n contiguous bytes, passed towards the head through the
 * handlers that take in-place writes: each may put bytes of its own around
 * the reservation (a frame codec, its length and CRC), and one that takes
 * only ordinary writes gets the message as a weft_bytes at commit. commit
 * sends the first used bytes (used <= n) as one message: cb as for
 * weft_ctx_write, exactly once (WEFT_ECLOSED once the channel closes). One
 * reservation at a time per channel, committed before the callback that
 * made it returns and before any other write or change of the pipeline,
 * or dropped by not committing it: nothing is sent (a handler that
 * refuses the message does that, and fails the write itself with
 * weft_ctx_fail_write). weft_ctx_reserve returns the room, or NULL only
 * when out of memory: then nothing is reserved. Loop thread.
 */
WEFT_API void *weft_ctx_reserve(weft_ctx *ctx, size_t n);
WEFT_API void weft_ctx_commit(weft_ctx *ctx, size_t used, weft_write_cb cb,
                              void *cb_arg);

/*
 * weft_channel_when_written runs cb once when every byte that reached the
 * head of ch's pipeline until now has left for the socket (0), or can no
 * longer go (a negative WEFT_E code, also at once when ch is torn down):
 * one completion for a batch of writes, for byte accounting, instead of a
 * callback per write. Loop thread.
 */
WEFT_API void weft_channel_when_written(weft_channel *ch, weft_write_cb cb,
                                        void *arg);

/*
 * weft_ctx_fail_write is for a handler that cannot pass a write on: it frees
 * msg (or drains it) and arranges for cb to run with status on the loop,
 * after the current callback returns. A write made without a callback has
 * no one to tell: its failure (other than WEFT_ECLOSED, which the channel
 * reports by closing) goes to the handlers after ctx as an error event
 * instead, as Netty does for a write with a void promise. Loop thread.
 */
WEFT_API void weft_ctx_fail_write(weft_ctx *ctx, const weft_msg_type *type,
                                  void *msg, weft_write_cb cb, void *cb_arg,
                                  int status);

/* weft_msg_free releases a message that will go no further (msg NULL:
 * nothing). Any thread (the one that holds the message). */
WEFT_API void weft_msg_free(const weft_msg_type *type, void *msg);

/* ---- Channel groups (channel_group.c) -------------------------------- */

/*
 * A set of channels on any loops, to write the same bytes to all of them
 * or close them all (Netty's ChannelGroup): a server's clients, a topic's
 * subscribers. A channel leaves its groups by itself once it has closed.
 * The group holds a reference to each member; each member carries a small
 * handler (no callback but removed) that notices its end.
 */
typedef struct weft_channel_group weft_channel_group;

/*
 * A group write ended: every member's write has finished. failures is how
 * many of them failed (the channel closed before its bytes left, or was
 * closing already); status is 0, or WEFT_ESHUTDOWN when the loop the
 * callback was to run on is being freed. Runs on the loop given to
 * weft_channel_group_write.
 */
typedef void (*weft_channel_group_cb)(weft_channel_group *g, int status,
                                      size_t failures, void *arg);

/* weft_channel_group_new makes an empty group; *out is the caller's, to
 * free with weft_channel_group_free. Returns 0 or WEFT_ENOMEM. Any
 * thread. */
WEFT_API int weft_channel_group_new(weft_channel_group **out);

/* weft_channel_group_free lets every member go (they stay open) and frees
 * the group once writes under way have ended: their callbacks still run.
 * NULL is ignored. Any thread. */
WEFT_API void weft_channel_group_free(weft_channel_group *g);

/*
 * weft_channel_group_add makes ch a member, taking a reference to it, until
 * it is removed, the group is freed, or ch closes (it leaves by itself, on
 * its loop, soon after it has closed; a channel added while it closes
 * leaves the same way). Returns 0, WEFT_EEXIST (a member already),
 * WEFT_ECLOSED (closed already), WEFT_EINVAL or WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_channel_group_add(weft_channel_group *g, weft_channel *ch);

/* weft_channel_group_remove takes ch out of the group at once (writes
 * already handed to it go on) and drops the group's reference. Returns 0
 * or WEFT_ENOTFOUND. Any thread. */
WEFT_API int weft_channel_group_remove(weft_channel_group *g, weft_channel *ch);

/* weft_channel_group_contains is true when ch is a member now. Any
 * thread. */
WEFT_API bool weft_channel_group_contains(weft_channel_group *g,
                                          const weft_channel *ch);

/* weft_channel_group_size is the number of members now. Any thread. */
WEFT_API size_t weft_channel_group_size(weft_channel_group *g);

/*
 * weft_channel_group_write writes the bytes of buf to every member (moved
 * out of buf, which stays the caller's, on success and failure): they are
 * copied once, and each member's write, on its own loop as
 * weft_channel_write makes it, refers to that copy. The members are those
 * of the moment of the call. When every write has finished, cb (may be
 * NULL) runs once on loop, never inside this call, with the count of
 * writes that failed. Returns 0 (cb will run), WEFT_EINVAL (buf empty, or
 * cb without a loop) or WEFT_ENOMEM; cb never runs then. Any thread.
 */
WEFT_API int weft_channel_group_write(weft_channel_group *g,
                                      struct evbuffer *buf, weft_loop *loop,
                                      weft_channel_group_cb cb, void *arg);

/* weft_channel_group_close starts the close of every member (each leaves
 * the group once closed). Any thread. */
WEFT_API void weft_channel_group_close(weft_channel_group *g);

#ifdef __cplusplus
}
#endif

#endif
