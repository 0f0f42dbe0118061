/* SPDX-License-Identifier: MIT */
/* codec.c: what the codecs share: counters, errors, delivery, writes. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/buffer.h>

#include "codec_int.h"

#define STATS_FIELDS(X)                                                        \
	X(msgs_in)                                                             \
	X(bytes_in)                                                            \
	X(msgs_out)                                                            \
	X(bytes_out)                                                           \
	X(too_big)                                                             \
	X(bad_crc)                                                             \
	X(malformed)

struct atomic_stats {
#define DECLARE_FIELD(f) _Atomic uint64_t f;
	STATS_FIELDS(DECLARE_FIELD)
#undef DECLARE_FIELD
};

/*
 * Process-wide codec totals, one set per kind, kept per thread: each
 * thread that publishes adds to a block of its own with plain loads and
 * stores (no locked instruction on a loop's read path), and a reader sums
 * the blocks. Blocks are never freed: a thread that ends leaves its
 * counts in its block, which stays on the list (a few hundred bytes per
 * thread that ever ran a codec).
 */
struct totals_block {
	struct atomic_stats kinds[WEFT_CODEC_KINDS];
	struct totals_block *next;
};

/* GLOBAL: the list of blocks, appended to under blocks_lock, read by
 * weft_codec_get_totals under it. */
static struct totals_block *blocks;
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
/* This thread's block, made on its first publish. */
static _Thread_local struct totals_block *my_block
    __attribute__((tls_model("initial-exec")));

static struct totals_block *
thread_block(void)
{
	struct totals_block *b = my_block;

	if (b != NULL)
		return b;
	if ((b = calloc(1, sizeof(*b))) == NULL)
		return NULL;
	pthread_mutex_lock(&blocks_lock);
	b->next = blocks;
	blocks = b;
	pthread_mutex_unlock(&blocks_lock);
	return my_block = b;
}

static const char *const kind_names[WEFT_CODEC_KINDS] = {
    [WEFT_CODEC_FRAME] = "frame",       [WEFT_CODEC_LINE] = "line",
    [WEFT_CODEC_MSGPACK] = "msgpack",   [WEFT_CODEC_ENVELOPE] = "envelope",
    [WEFT_CODEC_COMPRESS] = "compress", [WEFT_CODEC_CHUNK] = "chunk",
};

void
weft_codec_get_totals(enum weft_codec_kind kind, weft_codec_stats *out)
{
	struct totals_block *b;
	struct atomic_stats *t;

	*out = (weft_codec_stats){0};
	if ((unsigned)kind >= WEFT_CODEC_KINDS)
		return;
	pthread_mutex_lock(&blocks_lock);
	for (b = blocks; b != NULL; b = b->next) {
		t = &b->kinds[kind];
#define SUM_FIELD(f)                                                           \
	out->f += atomic_load_explicit(&t->f, memory_order_relaxed);
		STATS_FIELDS(SUM_FIELD)
#undef SUM_FIELD
	}
	pthread_mutex_unlock(&blocks_lock);
}

int
weft__codec_find(weft_channel *ch, const char *name, enum weft_codec_kind kind,
                 weft__codec **out)
{
	weft_ctx *ctx;
	weft__codec *c;

	if (ch == NULL || name == NULL)
		return WEFT_EINVAL;
	/* The codec's settings are read by the loop without a lock. */
	WEFT_ASSERT_IN_LOOP(weft_channel_loop(ch));
	if ((ctx = weft_pipeline_get(ch, name)) == NULL)
		return WEFT_ENOTFOUND;
	/* TODO: compare the handler instead of a magic number. */
	c = weft_ctx_state(ctx);
	if (c == NULL || c->magic != WEFT__CODEC_MAGIC ||
	    (kind != WEFT_CODEC_KINDS && c->kind != kind))
		return WEFT_EINVAL;
	*out = c;
	return 0;
}

int
weft_codec_get_stats(weft_channel *ch, const char *name, weft_codec_stats *out)
{
	weft__codec *c;
	int rv;

	if ((rv = weft__codec_find(ch, name, WEFT_CODEC_KINDS, &c)) != 0)
		return rv;
	*out = c->stats;
	return 0;
}

void
weft__codec_publish(weft__codec *c)
{
	struct totals_block *b = thread_block();
	struct atomic_stats *t;
	uint64_t delta;

	if (b == NULL)
		return; /* no memory: kept in c->stats, published next time */
	t = &b->kinds[c->kind];
	/* Only this thread writes its block. */
#define ADD_FIELD(f)                                                           \
	delta = c->stats.f - c->published.f;                                   \
	if (delta != 0)                                                        \
		atomic_store_explicit(                                         \
		    &t->f,                                                     \
		    atomic_load_explicit(&t->f, memory_order_relaxed) + delta, \
		    memory_order_relaxed);
	STATS_FIELDS(ADD_FIELD)
#undef ADD_FIELD
	c->published = c->stats;
}

int
weft__codec_init(weft__codec *c, enum weft_codec_kind kind)
{
	c->magic = WEFT__CODEC_MAGIC;
	c->kind = kind;
	if ((c->msg = evbuffer_new()) == NULL)
		return WEFT_ENOMEM;
	if ((c->out = evbuffer_new()) == NULL) {
		evbuffer_free(c->msg);
		return WEFT_ENOMEM;
	}
	return 0;
}

void
weft__codec_destroy(weft__codec *c)
{
	evbuffer_free(c->msg);
	evbuffer_free(c->out);
	c->magic = 0;
	free(c);
}

/* Its address, not its text, means "add last". */
const char weft__codec_last[] = "";

int
weft__codec_add(weft_channel *ch, const char *base, const char *name,
                const weft_handler *h, weft__codec *c)
{
	int rv;

	if (name == NULL)
		rv = WEFT_EINVAL;
	else if (base == WEFT__CODEC_LAST)
		rv = weft_pipeline_add_last(ch, name, h, c);
	else if (base == NULL)
		rv = weft_pipeline_add_first(ch, name, h, c);
	else
		rv = weft_pipeline_add_after(ch, base, name, h, c);
	if (rv != 0)
		weft__codec_destroy(c);
	else {
		c->ctx = weft_pipeline_get(ch, name);
		c->ch = ch;
	}
	return rv;
}

void
weft__codec_removed(weft_ctx *ctx)
{
	weft__codec *c = weft_ctx_state(ctx);

	weft__codec_publish(c);
	if (c->busy > 0)
		c->removed = true;
	else
		weft__codec_destroy(c);
}

void
weft__codec_flush(weft_ctx *ctx)
{
	weft__codec_publish(weft_ctx_state(ctx));
	weft_ctx_flush(ctx);
}

/* GLOBAL: one rate limit per kind for the lines of failing codecs, so a
 * flood of bad connections logs a line per peer interval, not a line each
 * (weft_log_set_peer_interval). */
static weft_log_limit fail_lines[WEFT_CODEC_KINDS] = {
    [WEFT_CODEC_FRAME] = WEFT_LOG_LIMIT_INIT(WEFT_LOG_PEER_INTERVAL),
    [WEFT_CODEC_LINE] = WEFT_LOG_LIMIT_INIT(WEFT_LOG_PEER_INTERVAL),
    [WEFT_CODEC_MSGPACK] = WEFT_LOG_LIMIT_INIT(WEFT_LOG_PEER_INTERVAL),
    [WEFT_CODEC_ENVELOPE] = WEFT_LOG_LIMIT_INIT(WEFT_LOG_PEER_INTERVAL),
    [WEFT_CODEC_COMPRESS] = WEFT_LOG_LIMIT_INIT(WEFT_LOG_PEER_INTERVAL),
    [WEFT_CODEC_CHUNK] = WEFT_LOG_LIMIT_INIT(WEFT_LOG_PEER_INTERVAL),
};

static void
count_error(weft__codec *c, int err)
{
	if (err == WEFT_ETOOBIG)
		c->stats.too_big++;
	else if (err == WEFT_ECHECKSUM)
		c->stats.bad_crc++;
	else if (err != WEFT_ENOMEM)
		c->stats.malformed++;
}

void
weft__codec_fail(weft__codec *c, weft_ctx *ctx, int err, const char *fmt, ...)
{
	const char *peer = weft_channel_peer(weft_ctx_channel(ctx));
	char reason[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (!c->quiet)
		weft_log_limited(&fail_lines[c->kind],
		                 err == WEFT_ENOMEM ? WEFT_LOG_ERROR
		                                    : WEFT_LOG_WARN,
		                 "%s: %s codec '%s': %s (%s); closing",
		                 peer ? peer : "?", kind_names[c->kind],
		                 weft_ctx_name(ctx), reason, weft_errname(err));
	c->failed = true;
	count_error(c, err);
	weft__codec_publish(c);
	weft_ctx_fire_error(ctx, err);
	weft_ctx_close(ctx);
}

void
weft__codec_deliver(weft__codec *c, weft_ctx *ctx, size_t len)
{
	c->stats.msgs_in++;
	c->stats.bytes_in += len;
	weft_ctx_fire_read(ctx, &weft_msg_evbuffer, c->msg);
	/* Whatever the receiver left is dropped (weft_msg_type's rule);
	 * asking to drain more than is there drains all. */
	evbuffer_drain(c->msg, SIZE_MAX);
}

void
weft__codec_read_bytes(weft_ctx *ctx, const weft_msg_type *type, void *msg,
                       void (*decode)(weft__codec *c, weft_ctx *ctx,
                                      struct evbuffer *in))
{
	weft__codec *c = weft_ctx_state(ctx);
	struct evbuffer *in = msg;

	if (type != &weft_msg_evbuffer) {
		weft_ctx_fire_read(ctx, type, msg);
		return;
	}
	/* A read that re-enters (a handler wrote to an in-process peer that
	 * answered at once) leaves its bytes to the loop below. */
	if (c->in_read)
		return;
	weft__codec_enter(c);
	c->in_read = true;
	c->paused = false;
	if (!c->failed)
		decode(c, ctx, in);
	c->in_read = false;
	if (c->failed)
		evbuffer_drain(in, evbuffer_get_length(in));
	/* Paused, the input may hold whole messages: they are no partial
	 * one for inactive to report. */
	c->partial_bytes = c->paused ? 0 : evbuffer_get_length(in);
	weft__codec_publish(c);
	/* Removed on the way: what we did not decode is the next one's. */
	if ((c->removed || weft_ctx_is_removed(ctx)) &&
	    evbuffer_get_length(in) > 0)
		weft_ctx_fire_read(ctx, type, in);
	weft__codec_leave(c);
}

void
weft__codec_close(weft_ctx *ctx)
{
	weft__codec *c = weft_ctx_state(ctx);

	c->closed_here = true;
	weft_ctx_close(ctx);
}

void
weft__codec_inactive(weft_ctx *ctx)
{
	weft__codec *c = weft_ctx_state(ctx);

	weft__codec_enter(c);
	if (!c->failed && !c->in_read && !c->closed_here &&
	    c->partial_bytes > 0)
		weft__codec_fail(c, ctx, WEFT_EPROTO,
		                 "connection ended inside a %s (%zu byte(s) "
		                 "of it arrived)",
		                 kind_names[c->kind], c->partial_bytes);
	/* Also when removed meanwhile: the context still leads on. */
	weft_ctx_fire_inactive(ctx);
	weft__codec_leave(c);
}

struct evbuffer *
weft__codec_out_begin(weft__codec *c)
{
	if (!c->in_write) {
		c->in_write = true;
		return c->out;
	}
	return evbuffer_new();
}

static void
out_release(weft__codec *c, struct evbuffer *out)
{
	if (out != c->out) {
		evbuffer_free(out);
		return;
	}
	/* The next handler moves every byte out; be sure of it. */
	if (evbuffer_get_length(out) > 0)
		evbuffer_drain(out, evbuffer_get_length(out));
	c->in_write = false;
}

void
weft__codec_out_send(weft__codec *c, weft_ctx *ctx, struct evbuffer *out,
                     size_t payload_bytes, weft_write_cb cb, void *cb_arg)
{
	c->stats.msgs_out++;
	c->stats.bytes_out += payload_bytes;
	weft__codec_enter(c);
	weft_ctx_write(ctx, &weft_msg_evbuffer, out, cb, cb_arg);
	out_release(c, out);
	weft__codec_leave(c);
}

void
weft__codec_out_fail(weft__codec *c, weft_ctx *ctx, struct evbuffer *out,
                     weft_write_cb cb, void *cb_arg, int err)
{
	if (out == NULL) {
		weft_ctx_fail_write(ctx, NULL, NULL, cb, cb_arg, err);
		return;
	}
	weft_ctx_fail_write(ctx, &weft_msg_evbuffer, out, cb, cb_arg, err);
	out_release(c, out);
}
