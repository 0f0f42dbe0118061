/* SPDX-License-Identifier: MIT */
/* line.c: the delimited-line codec (weft/line.h). */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/line.h>

#include "codec_int.h"

typedef struct line_codec {
	weft__codec base; /* first: see weft__codec */
	size_t max_line_bytes;
	size_t scanned; /* input bytes known not to start a delimiter */
	size_t delim_len;
	bool strip_cr;
	char delim[WEFT_LINE_MAX_DELIMITER];
} line_codec;

static int
opts_resolve(line_codec *l, const weft_line_codec_opts *opts)
{
	const char *delim = "\n";

	l->max_line_bytes = WEFT_LINE_DEFAULT_MAX;
	if (opts != NULL) {
		if (opts->delimiter != NULL)
			delim = opts->delimiter;
		if (opts->max_line_bytes != 0)
			l->max_line_bytes = opts->max_line_bytes;
		l->strip_cr = opts->strip_cr;
	}
	l->delim_len = strlen(delim);
	if (l->delim_len == 0 || l->delim_len > WEFT_LINE_MAX_DELIMITER)
		return WEFT_EINVAL;
	if (l->max_line_bytes > (size_t)INT32_MAX)
		l->max_line_bytes = INT32_MAX;
	memcpy(l->delim, delim, l->delim_len);
	return 0;
}

/* The most bytes a line may take in the input before its delimiter. */
static size_t
raw_limit(const line_codec *l)
{
	return l->max_line_bytes + (l->strip_cr ? 1 : 0);
}

static void
fail_too_long(line_codec *l, weft_ctx *ctx, size_t seen)
{
	weft__codec_fail(&l->base, ctx, WEFT_ETOOBIG,
	                 "%zu bytes without a delimiter, above the %zu-byte "
	                 "line limit",
	                 seen, l->max_line_bytes);
}

/*
 * Finds where the next delimiter starts, searching only where a line of
 * the allowed length could end. Returns its offset, or -1 (with scanned
 * updated) when there is none yet, or -2 when the line is already too
 * long.
 */
static ev_ssize_t
find_delimiter(line_codec *l, struct evbuffer *in)
{
	size_t avail = evbuffer_get_length(in);
	size_t window = raw_limit(l) + l->delim_len;
	size_t stop = avail < window ? avail : window;
	struct evbuffer_ptr from, end, found;

	if (stop >= l->scanned + l->delim_len &&
	    evbuffer_ptr_set(in, &from, l->scanned, EVBUFFER_PTR_SET) == 0 &&
	    evbuffer_ptr_set(in, &end, stop, EVBUFFER_PTR_SET) == 0) {
		found = evbuffer_search_range(in, l->delim, l->delim_len, &from,
		                              &end);
		if (found.pos >= 0)
			return found.pos;
	}
	if (avail >= window)
		return -2;
	/* A delimiter may still start in the last delim_len - 1 bytes. */
	if (stop >= l->delim_len)
		l->scanned = stop - (l->delim_len - 1);
	return -1;
}

/* Whether the byte before offset pos (> 0) is '\r'. */
static bool
cr_before(struct evbuffer *in, size_t pos)
{
	struct evbuffer_ptr p;
	char c = 0;

	if (evbuffer_ptr_set(in, &p, pos - 1, EVBUFFER_PTR_SET) != 0)
		return false;
	return evbuffer_copyout_from(in, &p, &c, 1) == 1 && c == '\r';
}

/* Moves the first len bytes of in to msg: a copy from the first chain
 * when they lie there and are few, chains otherwise. */
static int
take_line(struct evbuffer *in, struct evbuffer *msg, size_t len)
{
	struct evbuffer_iovec v;

	if (len <= WEFT__CODEC_COPY_MAX &&
	    evbuffer_peek(in, (ev_ssize_t)len, NULL, &v, 1) == 1) {
		if (evbuffer_add(msg, v.iov_base, len) != 0)
			return WEFT_ENOMEM;
		evbuffer_drain(in, len);
		return 0;
	}
	if (evbuffer_remove_buffer(in, msg, len) != (int)len)
		return WEFT_ENOMEM;
	return 0;
}

/* Decodes one line. Returns 1 when it delivered one, 0 otherwise. */
static int
decode_one(line_codec *l, weft_ctx *ctx, struct evbuffer *in)
{
	ev_ssize_t pos = find_delimiter(l, in);
	size_t len;

	if (pos == -2) {
		fail_too_long(l, ctx, evbuffer_get_length(in));
		return 0;
	}
	if (pos < 0)
		return 0;
	len = (size_t)pos;
	if (l->strip_cr && len > 0 && cr_before(in, len))
		len--;
	if (len > l->max_line_bytes) {
		fail_too_long(l, ctx, len);
		return 0;
	}
	if (take_line(in, l->base.msg, len) != 0) {
		weft__codec_fail(&l->base, ctx, WEFT_ENOMEM,
		                 "no memory for a line");
		return 0;
	}
	evbuffer_drain(in, (size_t)pos - len + l->delim_len);
	l->scanned = 0;
	weft__codec_deliver(&l->base, ctx, len);
	return 1;
}

static void
decode(weft__codec *c, weft_ctx *ctx, struct evbuffer *in)
{
	line_codec *l = (line_codec *)c;

	while (!weft__codec_stop_reading(c, ctx) && decode_one(l, ctx, in) == 1)
		;
}

static void
line_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	weft__codec_read_bytes(ctx, type, msg, decode);
}

/*
 * Builds a small line on the stack and passes it on as a borrowed byte
 * run, which the next handler copies: no allocation per line. The payload
 * is consumed (an evbuffer drained) like any written message.
 */
static void
write_small(line_codec *l, weft_ctx *ctx, const weft_msg_type *type, void *msg,
            size_t len, weft_write_cb cb, void *cb_arg)
{
	unsigned char line[WEFT__CODEC_COPY_MAX + WEFT_LINE_MAX_DELIMITER];
	weft_bytes run = {line, len + l->delim_len};

	weft_msg_copyout(type, msg, line, len);
	weft_msg_free(type, msg);
	memcpy(line + len, l->delim, l->delim_len);
	l->base.stats.msgs_out++;
	l->base.stats.bytes_out += len;
	weft__codec_enter(&l->base);
	weft_ctx_write(ctx, &weft_msg_bytes, &run, cb, cb_arg);
	weft__codec_leave(&l->base);
}

/* Larger lines leave as an evbuffer: an evbuffer payload's chains move,
 * a byte run is copied. */
static void
write_large(line_codec *l, weft_ctx *ctx, const weft_msg_type *type, void *msg,
            size_t len, weft_write_cb cb, void *cb_arg)
{
	struct evbuffer *out = weft__codec_out_begin(&l->base);
	const weft_bytes *run = msg;
	int rv;

	if (out == NULL) {
		weft_ctx_fail_write(ctx, type, msg, cb, cb_arg, WEFT_ENOMEM);
		return;
	}
	if (type == &weft_msg_bytes)
		rv = evbuffer_add(out, run->data, run->len);
	else
		rv = evbuffer_add_buffer(out, msg);
	if (rv == 0)
		rv = evbuffer_add(out, l->delim, l->delim_len);
	if (rv != 0) {
		weft_msg_free(type, msg);
		weft__codec_out_fail(&l->base, ctx, out, cb, cb_arg,
		                     WEFT_ENOMEM);
		return;
	}
	weft__codec_out_send(&l->base, ctx, out, len, cb, cb_arg);
}

static void
line_write(weft_ctx *ctx, const weft_msg_type *type, void *msg,
           weft_write_cb cb, void *cb_arg)
{
	line_codec *l = weft_ctx_state(ctx);
	size_t len;

	if (!weft_msg_is_bytes(type)) {
		weft_ctx_write(ctx, type, msg, cb, cb_arg);
		return;
	}
	len = weft_msg_length(type, msg);
	if (len > l->max_line_bytes) {
		weft_warn("%s: line codec '%s': not sending a line of %zu "
		          "bytes, above the %zu-byte limit",
		          weft_channel_peer(weft_ctx_channel(ctx)),
		          weft_ctx_name(ctx), len, l->max_line_bytes);
		weft_ctx_fail_write(ctx, type, msg, cb, cb_arg, WEFT_ETOOBIG);
		return;
	}
	if (len <= WEFT__CODEC_COPY_MAX)
		write_small(l, ctx, type, msg, len, cb, cb_arg);
	else
		write_large(l, ctx, type, msg, len, cb, cb_arg);
}

static const weft_handler line_handler = {
    .removed = weft__codec_removed,
    .read = line_read,
    .inactive = weft__codec_inactive,
    .write = line_write,
    .flush = weft__codec_flush,
    .close = weft__codec_close,
};

static int
line_codec_add(weft_channel *ch, const char *base, const char *name,
               const weft_line_codec_opts *opts)
{
	line_codec *l;
	int rv;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return WEFT_ENOMEM;
	if ((rv = opts_resolve(l, opts)) != 0 ||
	    (rv = weft__codec_init(&l->base, WEFT_CODEC_LINE)) != 0) {
		free(l);
		return rv;
	}
	return weft__codec_add(ch, base, name, &line_handler, &l->base);
}

int
weft_line_codec_add(weft_channel *ch, const char *name,
                    const weft_line_codec_opts *opts)
{
	return line_codec_add(ch, WEFT__CODEC_LAST, name, opts);
}

int
weft_line_codec_add_after(weft_channel *ch, const char *base, const char *name,
                          const weft_line_codec_opts *opts)
{
	return line_codec_add(ch, base, name, opts);
}
