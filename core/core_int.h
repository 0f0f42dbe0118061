/* SPDX-License-Identifier: MIT */
/* core_int.h: what the files of core/ share, and nothing else sees. */
#ifndef WEFT_CORE_INT_H
#define WEFT_CORE_INT_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>

#include <event2/buffer.h>

#include <weft/channel.h>
#include <weft/loop.h>
#include <weft/stream.h>

#include "weft_int.h"

struct event;

/* One handler's place in a pipeline. A removed context is unlinked but keeps
 * its own links, so a traversal standing on it can still move on; its
 * handler's removed runs, and it is freed, when the channel's outermost
 * callback returns. */
/* The events a pipeline passes from handler to handler; the busiest
 * first, so that they share a cache line with h and state. */
enum weft__event {
	WEFT__EV_READ,
	WEFT__EV_WRITE,
	WEFT__EV_FLUSH,
	WEFT__EV_READ_COMPLETE,
	WEFT__EV_ACTIVE,
	WEFT__EV_WRITABILITY,
	WEFT__EV_USER_EVENT,
	WEFT__EV_ERROR,
	WEFT__EV_INACTIVE,
	WEFT__EV_CLOSE,
	WEFT__EV_RESERVE, /* in-place writes: reserve, or write alone */
	WEFT__EVENTS
};

/*
 * A handler's place in a pipeline. skip[e] is the nearest context that
 * handles event e in e's direction (towards the tail for inbound events,
 * the head for outbound ones), kept by weft__pipeline_relink whenever the
 * pipeline changes, so that an event goes from handler to handler without
 * touching the ones between that do not handle it (Netty's handler masks).
 * A removed context keeps its links as they were, for a traversal standing
 * on it; one that has left since is skipped on the way.
 */
struct weft_ctx {
	const weft_handler *h;
	void *state;
	bool removed;
	struct weft_ctx *skip[WEFT__EVENTS];
	struct weft_ctx *next;
	struct weft_ctx *prev;
	weft_channel *ch;
	struct weft_ctx *next_dead;
	char name[];
};

/* weft__pipeline_relink sets every linked context's skip links. */
void weft__pipeline_relink(weft_channel *ch);

/* A write waiting for its bytes to leave: done when the channel's count of
 * bytes that left its stream reaches end_offset. */
struct weft__write_wait {
	uint64_t end_offset;
	weft_write_cb cb;
	void *arg;
};

/* A write callback whose outcome is known, owed to its writer: it runs on
 * the loop after the call that decided it returns, and before any handler
 * leaves the pipeline at teardown. */
struct weft__write_done {
	weft_write_cb cb;
	void *arg;
	int status;
};

/* A write from another thread, waiting in the channel's inbox: a typed
 * message, or len bytes of the inbox's buffer (msg NULL). */
struct weft__xwrite {
	const weft_msg_type *type;
	void *msg;
	size_t len;
	weft_write_cb cb;
	void *arg;
};

/* A ring of values of one type, grown by doubling. */
#define WEFT__RING(type)                                                       \
	struct {                                                               \
		type *v;                                                       \
		size_t cap, head, len;                                         \
	}

struct weft__xring {
	struct weft__xwrite *v;
	size_t cap, head, len;
};

/* The writes other threads hand to a channel (channel.c, "inbox"). */
struct weft__inbox {
	pthread_mutex_t lock;
	struct evbuffer *bytes; /* the bytes of queued byte writes */
	struct weft__xring q;
	bool closed; /* torn down: writes are refused */
	bool posted; /* the drain task is queued */
};

struct weft_channel {
	_Atomic int refs;
	_Atomic bool open; /* false once close starts or the peer is gone */
	weft_loop *loop;
	weft_stream *stream;        /* NULL once torn down */
	struct evbuffer *in;        /* read, not yet taken by the pipeline */
	struct evbuffer *unflushed; /* written, not yet flushed */
	struct evbuffer *out;       /* flushed, not yet taken by the stream */
	weft_channel_opts opts;

	struct weft_ctx *head; /* sentinels; handlers sit between them */
	struct weft_ctx *tail;
	struct weft_ctx *dead; /* removed contexts awaiting removed and free */
	struct weft_ctx **dead_tail; /* where the next one goes */
	int depth; /* nesting of callbacks into this channel */

	/* Write completions, a ring of waits ordered by end_offset. */
	WEFT__RING(struct weft__write_wait) waits;
	/* Owed write callbacks, a ring run by done_task. */
	WEFT__RING(struct weft__write_done) done;
	weft_task done_task;
	bool done_posted;
	uint64_t bytes_written; /* appended to unflushed, ever */
	uint64_t bytes_taken;   /* taken by the stream, ever */
	uint64_t bytes_drained; /* left the stream, ever */
	weft_channel_stats stats;
	struct event *linger_ev;

	/* Bytes written and not flushed are flushed by flush_task, after the
	 * callbacks of the current wake-up; a paused read resumes through
	 * read_task. */
	weft_task flush_task;
	bool flush_posted;
	bool flush_follows; /* a flush is on its way: no task needed */
	weft_task read_task;
	bool read_posted;
	/* A turn given up (weft_channel_yield): what the input holds waits
	 * for yield_task, at the loop's next round, and the stream is not
	 * read meanwhile; a readable event that came then is noted. A turn
	 * given up while the input is being delivered is scheduled when the
	 * delivery ends, and only if input is left: a handler that yields at
	 * the last frame costs nothing. */
	weft_task yield_task;
	bool read_yielded;
	bool readable_missed;
	bool delivering;

	struct weft__inbox inbox;
	weft_task inbox_task;
	/* The loop's side of the inbox: a batch taken from it. */
	struct weft__xring xrun;
	struct evbuffer *xbytes;
	struct evbuffer *xone; /* one write's bytes on their way */
	_Atomic bool close_posted;
	weft_task close_task;

	bool activated;
	bool closing;
	bool closed_here; /* the close started on this side */
	bool failed;      /* the stream reported an error */
	bool teardown_queued;
	bool torn_down;
	bool writable;
	bool auto_read;
	bool watch_read; /* what the stream was last asked to watch */
	bool watch_write;

	/* In-place writes go to the open tail of the batch: tail_cap bytes
	 * reserved at the end of unflushed (open_tail), of which tail_len hold
	 * messages
	 * committed and not yet committed to the evbuffer (sealed: before any
	 * other use of unflushed). scratch is room for an in-place write that
	 * goes to a handler taking ordinary writes. */
	unsigned char *open_tail;
	size_t tail_len, tail_cap;
	void *scratch;
	size_t scratch_cap;

	weft_channel *loop_next; /* the loop's list of open channels */
	weft_channel *loop_prev;
	void *data;
	char peer[96];
};

/* weft__channel_scratch is room for n bytes of an in-place write that
 * goes to a handler taking ordinary writes; NULL when out of memory. */
void *weft__channel_scratch(weft_channel *ch, size_t n);

/* Pipeline internals shared with channel.c. */
weft_ctx *weft__ctx_new(weft_channel *ch, const char *name,
                        const weft_handler *h, void *state);
/* weft__pipeline_reap runs the removed callbacks of retired contexts and
 * frees them (also those retired meanwhile). At depth 0 only. */
void weft__pipeline_reap(weft_channel *ch);
/* weft__channel_enter and weft__channel_leave bracket every entry into a
 * channel from the loop: removed contexts are reaped by the outermost
 * leave. */
void weft__channel_enter(weft_channel *ch);
void weft__channel_leave(weft_channel *ch);
/* weft__channel_run_owed runs the owed write callbacks now. */
void weft__channel_run_owed(weft_channel *ch);

/* The loop's bookkeeping of its channels, for shutdown and free. */
void weft__loop_add_channel(weft_loop *loop, weft_channel *ch);
void weft__loop_remove_channel(weft_loop *loop, weft_channel *ch);

/*
 * weft__loop_next_round runs task on the loop's next round: after the
 * loop has polled its sockets again and served every one that was ready,
 * in the order deferred. A round runs a bounded number of tasks before
 * the loop polls again; the rest keep their places. A task deferred while
 * the round runs waits for the round after. At free, the tasks left run with
 * WEFT_ESHUTDOWN. The task must not be on another queue. Loop thread.
 */
void weft__loop_next_round(weft_loop *loop, weft_task *task);

/* weft__loop_note_work counts work done on the loop (a channel's I/O),
 * which keeps a busy-polling loop from sleeping. Loop thread. */
void weft__loop_note_work(weft_loop *loop);

/* Channel operations the loop needs at shutdown and free. */
void weft__channel_close_within(weft_channel *ch, uint64_t linger_ms);
void weft__channel_abort(weft_channel *ch);
weft_channel *weft__channel_next_on_loop(weft_channel *ch);

/*
 * weft_task.next is a plain pointer in the public header (C++ has no
 * _Atomic); the queue accesses it as the atomic pointer it is. The two have
 * the same size and alignment on every platform weft builds on, which the
 * assertions check.
 */
#define WEFT__TASK_NEXT(t) ((weft_task * _Atomic *)&(t)->next)
_Static_assert(sizeof(weft_task *_Atomic) == sizeof(weft_task *),
               "an atomic pointer is a plain pointer");
_Static_assert(_Alignof(weft_task *_Atomic) == _Alignof(weft_task *),
               "an atomic pointer aligns as a plain pointer");

/*
 * An intrusive multi-producer, single-consumer queue of tasks: producers
 * push onto a lock-free stack with one compare-and-swap; the consumer takes
 * the whole stack with one exchange and reverses it into posting order.
 */
typedef struct weft__mpsc {
	weft_task *_Atomic top;
} weft__mpsc;

/* weft__mpsc_push returns true when the queue was empty, i.e. when the
 * consumer needs a wake-up. Any thread. */
static inline bool
weft__mpsc_push(weft__mpsc *q, weft_task *t)
{
	weft_task *old = atomic_load_explicit(&q->top, memory_order_relaxed);

	do {
		atomic_store_explicit(WEFT__TASK_NEXT(t), old,
		                      memory_order_relaxed);
	} while (!atomic_compare_exchange_weak_explicit(
	    &q->top, &old, t, memory_order_release, memory_order_relaxed));
	return old == NULL;
}

/* weft__mpsc_take_all empties the queue and returns its tasks oldest
 * first. Consumer thread only. */
static inline weft_task *
weft__mpsc_take_all(weft__mpsc *q)
{
	weft_task *t, *next, *fifo = NULL;

	t = atomic_exchange_explicit(&q->top, NULL, memory_order_acquire);
	while (t != NULL) {
		next = atomic_load_explicit(WEFT__TASK_NEXT(t),
		                            memory_order_relaxed);
		atomic_store_explicit(WEFT__TASK_NEXT(t), fifo,
		                      memory_order_relaxed);
		fifo = t;
		t = next;
	}
	return fifo;
}

/* log_format.c: the journal. has_journal is true when weft is built with
 * libsystemd and a journald listens; journal returns 0, WEFT_EIO when the
 * entry cannot be sent, or WEFT_ENOTSUP without libsystemd. Any
 * thread. */
bool weft__log_has_journal(void);
int weft__log_journal(const weft_log_record *rec);

#endif
