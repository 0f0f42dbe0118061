/* SPDX-License-Identifier: MIT */
/*
 * chunk.c: the chunk codec (weft/chunk.h). Inbound, the chunks of each
 * message are gathered in an evbuffer of its own, in a small table of the
 * messages in assembly. Outbound, large bodies wait in a queue and leave
 * as chunks, one message after another, at most window chunks in the
 * channel's unwritten bytes at a time; each chunk's write callback puts
 * the next one out.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/chunk.h>
#include <weft/compress.h> /* WEFT_WRAPPED_MARK, WEFT_WRAPPED_CHUNK */
#include <weft/frame.h>

#include "codec_int.h"

#define MARK WEFT_WRAPPED_MARK
#define KIND WEFT_WRAPPED_CHUNK
#define HDR WEFT_CHUNK_HEADER_BYTES
#define FIRST_HDR WEFT_CHUNK_FIRST_HEADER_BYTES
#define FIRST WEFT_CHUNK_FIRST
#define LAST WEFT_CHUNK_LAST

#define DEFAULT_MAX_ASSEMBLING 4
#define DEFAULT_WINDOW 2
#define LEAST_CHUNK_BYTES 64

/*
 * Chunks up to this size are copied to the end of their message, larger
 * ones move their chains. A moved chain keeps its whole allocation: a
 * peer sending small chunks, each in a read chain of its own, would make
 * us hold far more than the bytes it sent.
 */
#define COPY_MAX_CHUNK (32u << 10)

/* A message in assembly. */
struct assembly {
	uint32_t id;
	uint64_t total;        /* declared by its first chunk */
	struct evbuffer *body; /* what arrived of it */
};

/*
 * A body written to leave as chunks. It waits in the queue while bytes of
 * it remain to be put out, and lives until the callbacks of all its chunks
 * have run.
 */
struct outgoing {
	struct outgoing *next; /* in the queue */
	struct chunk_codec *codec;
	struct evbuffer *body; /* the bytes not yet put out */
	uint64_t total;
	uint64_t put; /* bytes put out as chunks */
	size_t chunks_out;
	uint32_t id;
	int status; /* the first error of a chunk, or of the queue's end */
	bool queued;
	weft_write_cb cb;
	void *cb_arg;
};

typedef struct chunk_codec {
	weft__codec base; /* first: see weft__codec */
	size_t chunk_bytes;
	size_t max_message_bytes;
	uint32_t max_assembling;
	uint32_t window;
	bool send;
	/* Inbound. */
	struct assembly *assembling;
	size_t assembling_len, assembling_cap;
	size_t have_bytes;  /* of the messages in assembly */
	size_t total_bytes; /* their declared totals */
	bool error_seen;    /* an error passed this codec */
	/* Outbound. */
	struct outgoing *queue, **queue_tail;
	size_t queued_bytes;
	uint32_t chunks_out; /* put out, callback not yet run */
	uint32_t next_id;
} chunk_codec;

/* ---- Inbound ------------------------------------------------------------ */

/* What a chunk's header says. */
struct chunk_head {
	unsigned flags;
	uint32_t id;
	uint64_t total; /* first chunks only */
	size_t head;    /* header bytes */
	size_t len;     /* the chunk's bytes after them */
};

/* Copies the first two bytes of a byte message to mark (fewer when it is
 * shorter); returns how many. Peeks without a call for a byte run or a
 * first chain that holds both. */
static size_t
peek_mark(const weft_msg_type *type, void *msg, unsigned char mark[2])
{
	const weft_bytes *run = msg;
	struct evbuffer_iovec v;

	if (type == &weft_msg_bytes) {
		if (run->len >= 2) {
			memcpy(mark, run->data, 2);
			return 2;
		}
	} else if (evbuffer_peek(msg, 2, NULL, &v, 1) >= 1 && v.iov_len >= 2) {
		memcpy(mark, v.iov_base, 2);
		return 2;
	}
	return weft_msg_copyout(type, msg, mark, 2);
}

static bool
is_chunk(const weft_msg_type *type, void *msg)
{
	unsigned char mark[2];

	if (type != &weft_msg_bytes && type != &weft_msg_evbuffer)
		return false;
	return peek_mark(type, msg, mark) == 2 && mark[0] == MARK &&
	       mark[1] == KIND;
}

/* Reads a chunk's header from the first avail bytes at p of a body of len
 * bytes, and checks what it can alone. Returns 0, or WEFT_EPROTO or
 * WEFT_ETOOBIG with a constant reason in *why. */
static int
parse_head(const chunk_codec *k, const unsigned char *p, size_t avail,
           size_t len, struct chunk_head *h, const char **why)
{
	if (avail < HDR)
		return *why = "truncated chunk header", WEFT_EPROTO;
	h->flags = p[2];
	h->id = weft__load_be32(p + 3);
	h->total = 0;
	h->head = HDR;
	if (h->flags & ~(FIRST | LAST))
		return *why = "reserved chunk flag bits set", WEFT_EPROTO;
	if (h->flags == (FIRST | LAST))
		return *why = "a chunk both first and last", WEFT_EPROTO;
	if (h->flags & FIRST) {
		if (avail < FIRST_HDR)
			return *why = "truncated first chunk header",
			       WEFT_EPROTO;
		h->total = weft__load_be64(p + HDR);
		h->head = FIRST_HDR;
		if (h->total == 0)
			return *why = "a message of 0 bytes", WEFT_EPROTO;
		if (h->total > k->max_message_bytes)
			return *why = "message above the size limit",
			       WEFT_ETOOBIG;
	}
	h->len = len - h->head;
	if (h->len == 0)
		return *why = "an empty chunk", WEFT_EPROTO;
	return 0;
}

static struct assembly *
find_assembly(chunk_codec *k, uint32_t id)
{
	size_t i;

	for (i = 0; i < k->assembling_len; i++)
		if (k->assembling[i].id == id)
			return &k->assembling[i];
	return NULL;
}

/* Takes a out of the table (its body is the caller's). */
static void
drop_assembly(chunk_codec *k, struct assembly *a)
{
	k->have_bytes -= evbuffer_get_length(a->body);
	k->total_bytes -= (size_t)a->total;
	*a = k->assembling[--k->assembling_len];
}

/* Frees every message in assembly. */
static void
free_assemblies(chunk_codec *k)
{
	while (k->assembling_len > 0) {
		evbuffer_free(k->assembling[k->assembling_len - 1].body);
		drop_assembly(k, &k->assembling[k->assembling_len - 1]);
	}
}

/* Bad input: the channel closes, and what was assembled goes. */
static void
fail_input(chunk_codec *k, weft_ctx *ctx, int err, const char *why,
           const struct chunk_head *h)
{
	weft__codec_fail(&k->base, ctx, err,
	                 "%s (chunk of message %" PRIu32 ", flags 0x%02x, "
	                 "%zu byte(s); %zu message(s) in assembly)",
	                 why, h->id, h->flags, h->len, k->assembling_len);
	free_assemblies(k);
}

/*
 * Checks a chunk against the message it belongs to (a; NULL when that
 * message is not in assembly). Returns 0, or WEFT_EPROTO with the reason
 * in *why.
 */
static int
check_chunk(const chunk_codec *k, const struct assembly *a,
            const struct chunk_head *h, const char **why)
{
	uint64_t total = h->total, end = h->len;

	if ((h->flags & FIRST) && a != NULL)
		return *why = "first chunk of a message already in assembly",
		       WEFT_EPROTO;
	if ((h->flags & FIRST) && k->assembling_len >= k->max_assembling)
		return *why = "more messages in assembly than allowed",
		       WEFT_EPROTO;
	if (!(h->flags & FIRST)) {
		if (a == NULL)
			return *why = "chunk of a message not in assembly",
			       WEFT_EPROTO;
		total = a->total;
		end += evbuffer_get_length(a->body);
	}
	if (end > total)
		return *why = "bytes past the message's total", WEFT_EPROTO;
	/* The last chunk carries at least a byte: one that is not last
	 * cannot reach the total. */
	if (end == total && !(h->flags & LAST))
		return *why = "the message's total reached before its last "
		              "chunk",
		       WEFT_EPROTO;
	if (end < total && (h->flags & LAST))
		return *why = "last chunk short of the message's total",
		       WEFT_EPROTO;
	return 0;
}

static struct assembly *
start_assembly(chunk_codec *k, const struct chunk_head *h)
{
	struct assembly *a;
	struct evbuffer *body;

	if ((body = evbuffer_new()) == NULL)
		return NULL;
	if ((a = WEFT__ARRAY_ROOM(k->assembling, k->assembling_cap,
	                          k->assembling_len, 4)) == NULL) {
		evbuffer_free(body);
		return NULL;
	}
	k->assembling_len++;
	*a = (struct assembly){h->id, h->total, body};
	k->total_bytes += (size_t)h->total;
	return a;
}

/* Copies the first len bytes of src to the end of dst (filling its last
 * chain first) and drains them. */
static int
copy_bytes(struct evbuffer *dst, struct evbuffer *src, size_t len)
{
	struct evbuffer_iovec v[2];
	int i, n;

	if ((n = evbuffer_reserve_space(dst, (ev_ssize_t)len, v, 2)) < 1)
		return WEFT_ENOMEM;
	for (i = 0; i < n; i++) {
		if (v[i].iov_len > len)
			v[i].iov_len = len;
		evbuffer_remove(src, v[i].iov_base, v[i].iov_len);
		len -= v[i].iov_len;
	}
	/* The second extent may not have been needed. */
	if (n == 2 && v[1].iov_len == 0)
		n = 1;
	return evbuffer_commit_space(dst, v, n) == 0 ? 0 : WEFT_ENOMEM;
}

/* Appends the chunk's bytes to a's body: a byte run's are copied, an
 * evbuffer's moved (copied when small; see COPY_MAX_CHUNK). */
static int
append_chunk(chunk_codec *k, struct assembly *a, const weft_msg_type *type,
             void *msg, const struct chunk_head *h)
{
	const weft_bytes *run = msg;
	int rv;

	if (type == &weft_msg_bytes) {
		rv = evbuffer_add(a->body,
		                  (const unsigned char *)run->data + h->head,
		                  h->len);
	} else {
		evbuffer_drain(msg, h->head);
		if (h->len <= COPY_MAX_CHUNK)
			rv = copy_bytes(a->body, msg, h->len);
		else if (evbuffer_remove_buffer(msg, a->body, h->len) !=
		         (int)h->len)
			rv = WEFT_ENOMEM;
		else
			rv = 0;
	}
	if (rv != 0)
		return WEFT_ENOMEM;
	k->have_bytes += h->len;
	return 0;
}

/* Tells the handlers after this one what is in assembly now. */
static void
report(chunk_codec *k, weft_ctx *ctx)
{
	weft_chunk_assembling info = {k->assembling_len, k->have_bytes,
	                              k->total_bytes};

	weft_ctx_fire_user_event(ctx, WEFT_CHUNK_EVENT_ASSEMBLING, &info);
}

/* A message's last chunk arrived: it leaves the table, the handlers after
 * this one hear so, then get its body. */
static void
complete(chunk_codec *k, weft_ctx *ctx, struct assembly *a)
{
	struct evbuffer *body = a->body;
	size_t len = evbuffer_get_length(body);

	drop_assembly(k, a);
	report(k, ctx);
	if (!k->base.failed) {
		k->base.stats.msgs_in++;
		k->base.stats.bytes_in += len;
		weft_ctx_fire_read(ctx, &weft_msg_evbuffer, body);
	}
	evbuffer_free(body);
}

/* Takes one chunk (a byte message starting with the chunk mark). */
static void
take_chunk(chunk_codec *k, weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	unsigned char p[FIRST_HDR];
	size_t len = weft_msg_length(type, msg);
	size_t avail = weft_msg_copyout(type, msg, p, sizeof(p));
	struct chunk_head h = {0};
	struct assembly *a;
	const char *why;
	int rv;

	if ((rv = parse_head(k, p, avail, len, &h, &why)) != 0 ||
	    (rv = check_chunk(k, a = find_assembly(k, h.id), &h, &why)) != 0) {
		fail_input(k, ctx, rv, why, &h);
		return;
	}
	if ((h.flags & FIRST) && (a = start_assembly(k, &h)) == NULL) {
		fail_input(k, ctx, WEFT_ENOMEM, "no memory for a message", &h);
		return;
	}
	if (append_chunk(k, a, type, msg, &h) != 0) {
		fail_input(k, ctx, WEFT_ENOMEM, "no memory for a chunk", &h);
		return;
	}
	if (h.flags & LAST)
		complete(k, ctx, a);
	else if (h.flags & FIRST)
		report(k, ctx);
}

static void
chunk_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	chunk_codec *k = weft_ctx_state(ctx);

	/* After a failure, the bodies still on their way are dropped. */
	if (k->base.failed) {
		weft_msg_free(type, msg);
		return;
	}
	if (!is_chunk(type, msg)) {
		weft_ctx_fire_read(ctx, type, msg);
		return;
	}
	weft__codec_enter(&k->base);
	take_chunk(k, ctx, type, msg);
	/* What is left of a chunk (after a failure) goes. */
	if (type == &weft_msg_evbuffer)
		evbuffer_drain(msg, evbuffer_get_length(msg));
	weft__codec_leave(&k->base);
}

static void
chunk_read_complete(weft_ctx *ctx)
{
	weft__codec_publish(weft_ctx_state(ctx));
	weft_ctx_fire_read_complete(ctx);
}

static void
chunk_error(weft_ctx *ctx, int status)
{
	chunk_codec *k = weft_ctx_state(ctx);

	k->error_seen = true;
	weft_ctx_fire_error(ctx, status);
}

/* ---- Outbound ----------------------------------------------------------- */

static void
outgoing_free(struct outgoing *o)
{
	evbuffer_free(o->body);
	free(o);
}

/* Takes the queue's first body out of it, with the bytes it had left. */
static void
unqueue(chunk_codec *k)
{
	struct outgoing *o = k->queue;

	if ((k->queue = o->next) == NULL)
		k->queue_tail = &k->queue;
	o->next = NULL;
	o->queued = false;
	k->queued_bytes -= evbuffer_get_length(o->body);
	evbuffer_drain(o->body, evbuffer_get_length(o->body));
}

/*
 * Ends every body still in the queue with status: those with no chunk out
 * have their callbacks owed now, the others when their chunks' callbacks
 * have run. ctx is the codec's context (still valid).
 */
static void
abort_queue(chunk_codec *k, weft_ctx *ctx, int status)
{
	struct outgoing *o;

	while ((o = k->queue) != NULL) {
		unqueue(k);
		o->status = status;
		if (o->chunks_out > 0)
			continue;
		weft_ctx_fail_write(ctx, NULL, NULL, o->cb, o->cb_arg, status);
		outgoing_free(o);
	}
}

static void chunk_written(weft_channel *ch, int status, void *arg);

/* The buffer to build a chunk in: the codec's own, or a new one when a
 * write re-enters (as weft__codec_out_begin). */
static struct evbuffer *
chunk_buffer(chunk_codec *k)
{
	if (k->base.in_write)
		return evbuffer_new();
	k->base.in_write = true;
	return k->base.out;
}

static void
chunk_buffer_release(chunk_codec *k, struct evbuffer *buf)
{
	if (buf != k->base.out) {
		evbuffer_free(buf);
		return;
	}
	evbuffer_drain(buf, evbuffer_get_length(buf));
	k->base.in_write = false;
}

/* Builds o's next chunk in buf: the header, then its bytes, moved. */
static int
build_chunk(struct outgoing *o, struct evbuffer *buf, size_t n)
{
	size_t left = evbuffer_get_length(o->body);
	unsigned char head[FIRST_HDR] = {MARK, KIND};
	size_t head_len = HDR;

	head[2] =
	    (unsigned char)((o->put == 0 ? FIRST : 0) | (n == left ? LAST : 0));
	weft__store_be32(head + 3, o->id);
	if (o->put == 0) {
		weft__store_be64(head + HDR, o->total);
		head_len = FIRST_HDR;
	}
	if (evbuffer_add(buf, head, head_len) != 0 ||
	    evbuffer_remove_buffer(o->body, buf, n) != (int)n)
		return WEFT_ENOMEM;
	return 0;
}

/*
 * Puts the next chunk of the queue's first body out. Each chunk out holds
 * the codec (its callback may come after the codec left the pipeline).
 */
static void
put_chunk(chunk_codec *k, weft_ctx *ctx)
{
	struct outgoing *o = k->queue;
	size_t left = evbuffer_get_length(o->body);
	size_t n = left < k->chunk_bytes ? left : k->chunk_bytes;
	struct evbuffer *buf = chunk_buffer(k);
	int rv = buf == NULL ? WEFT_ENOMEM : build_chunk(o, buf, n);

	k->queued_bytes -= left - evbuffer_get_length(o->body);
	o->put += left - evbuffer_get_length(o->body);
	/* On failure the rest of the body goes too: the chunk's callback
	 * ends the message with the error. */
	if (rv != 0 || n == left)
		unqueue(k);
	o->chunks_out++;
	k->chunks_out++;
	weft__codec_enter(&k->base);
	if (rv == 0)
		weft_ctx_write(ctx, &weft_msg_evbuffer, buf, chunk_written, o);
	else
		weft_ctx_fail_write(ctx,
		                    buf != NULL ? &weft_msg_evbuffer : NULL,
		                    buf, chunk_written, o, rv);
	if (buf != NULL)
		chunk_buffer_release(k, buf);
}

/* Puts chunks out while the window has room; returns how many. */
static size_t
pump(chunk_codec *k, weft_ctx *ctx)
{
	size_t n = 0;

	if (!weft_channel_is_open(k->base.ch)) {
		abort_queue(k, ctx, WEFT_ECLOSED);
		return 0;
	}
	while (k->queue != NULL && k->chunks_out < k->window &&
	       !weft__codec_done(&k->base)) {
		put_chunk(k, ctx);
		n++;
	}
	return n;
}

/* A chunk of o failed: the peer cannot finish its message, so the channel
 * closes (unless it is closing already). */
static void
chunk_failed(chunk_codec *k, struct outgoing *o, int status)
{
	weft_ctx *ctx = k->base.ctx;

	if (o->status == 0)
		o->status = status;
	if (o->queued)
		unqueue(k);
	if (status == WEFT_ECLOSED || k->base.removed ||
	    !weft_channel_is_open(k->base.ch))
		return;
	if (!k->base.quiet)
		weft_warn("%s: chunk codec '%s': a chunk of message %" PRIu32
		          " failed (%s); closing",
		          weft_channel_peer(k->base.ch), weft_ctx_name(ctx),
		          o->id, weft_errname(status));
	abort_queue(k, ctx, WEFT_ECLOSED);
	weft_ctx_close(ctx);
}

/*
 * A chunk's write callback: when it was o's last one, o's own callback
 * runs; while the codec is in its pipeline, the next chunks go out.
 */
static void
chunk_written(weft_channel *ch, int status, void *arg)
{
	struct outgoing *o = arg;
	chunk_codec *k = o->codec;
	weft_write_cb cb = NULL;
	void *cb_arg = NULL;

	o->chunks_out--;
	k->chunks_out--;
	if (status != 0)
		chunk_failed(k, o, status);
	if (!o->queued && o->chunks_out == 0) {
		cb = o->cb;
		cb_arg = o->cb_arg;
		status = o->status;
		outgoing_free(o);
	}
	if (!k->base.removed && pump(k, k->base.ctx) > 0)
		weft_ctx_flush(k->base.ctx);
	if (cb != NULL)
		cb(ch, status, cb_arg);
	weft__codec_leave(&k->base);
}

/* Queues a body to leave as chunks, taking its bytes. */
static int
enqueue(chunk_codec *k, const weft_msg_type *type, void *msg, size_t len,
        weft_write_cb cb, void *cb_arg)
{
	const weft_bytes *run = msg;
	struct outgoing *o;

	if ((o = calloc(1, sizeof(*o))) == NULL)
		return WEFT_ENOMEM;
	if ((o->body = evbuffer_new()) == NULL)
		goto err_free_o;
	if ((type == &weft_msg_bytes ? evbuffer_add(o->body, run->data, len)
	                             : evbuffer_add_buffer(o->body, msg)) != 0)
		goto err_free_body;
	o->codec = k;
	o->total = len;
	o->id = k->next_id++;
	o->queued = true;
	o->cb = cb;
	o->cb_arg = cb_arg;
	*k->queue_tail = o;
	k->queue_tail = &o->next;
	k->queued_bytes += len;
	k->base.stats.msgs_out++;
	k->base.stats.bytes_out += len;
	return 0;

err_free_body:
	evbuffer_free(o->body);
err_free_o:
	free(o);
	return WEFT_ENOMEM;
}

static void
chunk_write(weft_ctx *ctx, const weft_msg_type *type, void *msg,
            weft_write_cb cb, void *cb_arg)
{
	chunk_codec *k = weft_ctx_state(ctx);
	size_t len;
	int rv;

	if (!k->send || !weft_msg_is_bytes(type) ||
	    (len = weft_msg_length(type, msg)) <= k->chunk_bytes) {
		weft_ctx_write(ctx, type, msg, cb, cb_arg);
		return;
	}
	if (!weft_channel_is_open(k->base.ch))
		rv = WEFT_ECLOSED;
	else
		rv = enqueue(k, type, msg, len, cb, cb_arg);
	if (rv != 0) {
		weft_ctx_fail_write(ctx, type, msg, cb, cb_arg, rv);
		return;
	}
	/* The first chunks leave with this write's flush. */
	weft__codec_enter(&k->base);
	pump(k, ctx);
	weft__codec_leave(&k->base);
}

/* In-place writes pass straight on, between the chunks. */
static void *
chunk_reserve(weft_ctx *ctx, size_t n)
{
	return weft_ctx_reserve(ctx, n);
}

static void
chunk_commit(weft_ctx *ctx, size_t used, weft_write_cb cb, void *cb_arg)
{
	weft_ctx_commit(ctx, used, cb, cb_arg);
}

/* ---- Life cycle --------------------------------------------------------- */

static void
chunk_close(weft_ctx *ctx)
{
	chunk_codec *k = weft_ctx_state(ctx);

	k->base.closed_here = true;
	abort_queue(k, ctx, WEFT_ECLOSED);
	weft_ctx_close(ctx);
}

/* The connection ended: a message the peer began and did not finish is
 * bad input (unless the end came from this side, or an error before this
 * codec said why); what was in assembly or queued goes. */
static void
chunk_inactive(weft_ctx *ctx)
{
	chunk_codec *k = weft_ctx_state(ctx);

	weft__codec_enter(&k->base);
	if (k->assembling_len > 0 && !k->base.failed && !k->base.closed_here &&
	    !k->error_seen)
		weft__codec_fail(&k->base, ctx, WEFT_EPROTO,
		                 "connection ended inside %zu message(s) in "
		                 "assembly (%zu of %zu byte(s) arrived)",
		                 k->assembling_len, k->have_bytes,
		                 k->total_bytes);
	free_assemblies(k);
	abort_queue(k, ctx, WEFT_ECLOSED);
	weft_ctx_fire_inactive(ctx);
	weft__codec_leave(&k->base);
}

/*
 * Leaving the pipeline (never while one of the codec's callbacks is on
 * the stack: the pipeline runs removed after them). The codec itself stays
 * until the callbacks of the chunks it put out have run (weft__codec_leave
 * frees it then).
 */
static void
chunk_removed(weft_ctx *ctx)
{
	chunk_codec *k = weft_ctx_state(ctx);

	free_assemblies(k);
	free(k->assembling);
	k->assembling = NULL;
	k->assembling_cap = 0;
	abort_queue(k, ctx, WEFT_ECLOSED);
	k->base.ctx = NULL;
	weft__codec_removed(ctx);
}

static const weft_handler chunk_handler = {
    .removed = chunk_removed,
    .read = chunk_read,
    .read_complete = chunk_read_complete,
    .error = chunk_error,
    .inactive = chunk_inactive,
    .write = chunk_write,
    .flush = weft__codec_flush,
    .close = chunk_close,
    .reserve = chunk_reserve,
    .commit = chunk_commit,
};

static int
resolve_opts(chunk_codec *k, const weft_chunk_codec_opts *opts)
{
	k->chunk_bytes = WEFT_CHUNK_DEFAULT_BYTES;
	k->max_message_bytes = WEFT_CHUNK_DEFAULT_MAX_MESSAGE;
	k->max_assembling = DEFAULT_MAX_ASSEMBLING;
	k->window = DEFAULT_WINDOW;
	if (opts == NULL)
		return 0;
	if (opts->chunk_bytes != 0)
		k->chunk_bytes = opts->chunk_bytes;
	if (k->chunk_bytes < LEAST_CHUNK_BYTES ||
	    k->chunk_bytes > WEFT_FRAME_LIMIT)
		return WEFT_EINVAL;
	if (opts->max_message_bytes != 0)
		k->max_message_bytes = opts->max_message_bytes;
	if (opts->max_assembling != 0)
		k->max_assembling = opts->max_assembling;
	if (opts->window != 0)
		k->window = opts->window;
	k->send = opts->send;
	k->base.quiet = opts->quiet;
	return 0;
}

static int
chunk_codec_add(weft_channel *ch, const char *base, const char *name,
                const weft_chunk_codec_opts *opts)
{
	chunk_codec *k;
	int rv;

	if ((k = calloc(1, sizeof(*k))) == NULL)
		return WEFT_ENOMEM;
	if ((rv = resolve_opts(k, opts)) != 0 ||
	    (rv = weft__codec_init(&k->base, WEFT_CODEC_CHUNK)) != 0) {
		free(k);
		return rv;
	}
	k->queue_tail = &k->queue;
	return weft__codec_add(ch, base, name, &chunk_handler, &k->base);
}

int
weft_chunk_codec_add(weft_channel *ch, const char *name,
                     const weft_chunk_codec_opts *opts)
{
	return chunk_codec_add(ch, WEFT__CODEC_LAST, name, opts);
}

int
weft_chunk_codec_add_after(weft_channel *ch, const char *base, const char *name,
                           const weft_chunk_codec_opts *opts)
{
	return chunk_codec_add(ch, base, name, opts);
}

size_t
weft_chunk_codec_queued_bytes(weft_channel *ch, const char *name)
{
	weft__codec *c;

	if (weft__codec_find(ch, name, WEFT_CODEC_CHUNK, &c) != 0)
		return 0;
	return ((chunk_codec *)c)->queued_bytes;
}
