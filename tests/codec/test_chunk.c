/* SPDX-License-Identifier: MIT */
/* test_chunk.c: the chunk codec, after a frame codec, over a bufferevent
 * pair (hand-built chunks in, chunks out read by hand) and over an
 * in-process pair (round trips). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <weft/chunk.h>
#include <weft/envelope.h>
#include <weft/frame.h>
#include <weft/transport.h>

#include "fixture.h"
#include "support/wire.h"

#define F WEFT_CHUNK_FIRST
#define L WEFT_CHUNK_LAST
#define M 0u

/* ---- Building chunks by hand --------------------------------------------- */

/* Writes a frame holding the chunk (flags, id, total for a first chunk,
 * then n bytes of data) at p; returns its size. */
static size_t
put_chunk(uint8_t *p, unsigned flags, uint32_t id, uint64_t total,
          const void *data, size_t n)
{
	size_t head =
	    flags & F ? WEFT_CHUNK_FIRST_HEADER_BYTES : WEFT_CHUNK_HEADER_BYTES;

	weft_test_put_be32(p, (uint32_t)(head + n));
	p[4] = 0xc1;
	p[5] = 0x02;
	p[6] = (uint8_t)flags;
	weft_test_put_be32(p + 7, id);
	if (flags & F)
		weft_test_put_be64(p + 11, total);
	if (n > 0)
		memcpy(p + 4 + head, data, n);
	return 4 + head + n;
}

/* Writes a frame of len bytes of data at p; returns its size. */
static size_t
put_plain(uint8_t *p, const void *data, size_t len)
{
	weft_test_put_be32(p, (uint32_t)len);
	if (len > 0)
		memcpy(p + 4, data, len);
	return 4 + len;
}

/* Test body i's byte j. */
static uint8_t
body_byte(size_t i, size_t j)
{
	return (uint8_t)(i * 13 + j * 7 + (j >> 11) + 3);
}

static void
fill_body(uint8_t *p, size_t i, size_t len)
{
	size_t j;

	for (j = 0; j < len; j++)
		p[j] = body_byte(i, j);
}

/* ---- A handler that logs events and reads in order --------------------- */

#define LOG_MAX 64

struct entry {
	char kind; /* 'E' an ASSEMBLING event, 'R' a read */
	size_t messages, have, total;
	size_t len;
};

struct watch {
	struct entry log[LOG_MAX];
	size_t n;
	bool remove_on_event; /* take the chunk codec out at the first */
	bool close_on_event;  /* close the channel at the first */
};

static void
watch_event(weft_ctx *ctx, int event, void *data)
{
	struct watch *w = weft_ctx_state(ctx);
	const weft_chunk_assembling *a = data;

	if (event == WEFT_CHUNK_EVENT_ASSEMBLING && w->n < LOG_MAX)
		w->log[w->n++] = (struct entry){'E', a->messages, a->have_bytes,
		                                a->total_bytes, 0};
	if (w->remove_on_event)
		weft_pipeline_remove(weft_ctx_channel(ctx), "chunk");
	if (w->close_on_event)
		weft_channel_close(weft_ctx_channel(ctx));
	weft_ctx_fire_user_event(ctx, event, data);
}

static void
watch_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct watch *w = weft_ctx_state(ctx);

	if (w->n < LOG_MAX)
		w->log[w->n++] =
		    (struct entry){'R', 0, 0, 0, weft_msg_length(type, msg)};
	weft_ctx_fire_read(ctx, type, msg);
}

static const weft_handler watch_handler = {
    .read = watch_read,
    .user_event = watch_event,
};

/* A channel with a frame codec and a chunk codec (co may be NULL), a
 * watch (w may be NULL) and the sink. */
static fx *
chunk_fixture(bool emit_bytes, const weft_chunk_codec_opts *co, struct watch *w)
{
	weft_frame_codec_opts fo = {.emit_bytes = emit_bytes};
	fx *f = fx_new();

	assert_int_equal(weft_frame_codec_add(f->ch, "frame", &fo), 0);
	assert_int_equal(weft_chunk_codec_add(f->ch, "chunk", co), 0);
	if (w != NULL)
		assert_int_equal(
		    weft_pipeline_add_last(f->ch, "watch", &watch_handler, w),
		    0);
	f->stats_name = "chunk";
	fx_start(f);
	return f;
}

/* ---- Inbound ------------------------------------------------------------ */

static void
test_plain_bodies_pass_untouched(void **state)
{
	static const char *const bodies[] = {
	    "", "a", "\xc1", "\xc1\x03xyz", "\x02\xc1", "\x93\x01\x02\x03"};
	static const size_t lens[] = {0, 1, 1, 5, 2, 4};
	uint8_t stream[256], got[16];
	weft_codec_stats st;
	size_t i, n = 0;
	int emit;
	fx *f;

	(void)state;
	for (i = 0; i < 6; i++)
		n += put_plain(stream + n, bodies[i], lens[i]);
	for (emit = 0; emit < 2; emit++) {
		f = chunk_fixture(emit, NULL, NULL);
		fx_send(f, stream, n);
		assert_int_equal(f->msgs, 6);
		for (i = 0; i < 6; i++) {
			assert_int_equal(f->lens[i], lens[i]);
			fx_msg(f, i, got);
			assert_memory_equal(got, bodies[i], lens[i]);
		}
		assert_int_equal(f->errors, 0);
		assert_int_equal(weft_codec_get_stats(f->ch, "chunk", &st), 0);
		assert_int_equal(st.msgs_in, 0);
		fx_free(f);
	}
}

/* Two chunked messages, one of them with a plain body between its
 * chunks, and two plain bodies. */
static size_t
build_mixed_stream(uint8_t *p)
{
	size_t n = 0;

	n += put_chunk(p + n, F, 7, 10, "abcd", 4);
	n += put_plain(p + n, "hi", 2);
	n += put_chunk(p + n, M, 7, 0, "efg", 3);
	n += put_chunk(p + n, L, 7, 0, "hij", 3);
	n += put_chunk(p + n, F, 0xfffffffe, 3, "xy", 2);
	n += put_chunk(p + n, L, 0xfffffffe, 0, "z", 1);
	n += put_plain(p + n, "end", 3);
	return n;
}

static void
check_mixed(fx *f, struct watch *w)
{
	static const char *const want[] = {"hi", "abcdefghij", "xyz", "end"};
	char got[16];
	size_t i;

	assert_int_equal(f->msgs, 4);
	for (i = 0; i < 4; i++) {
		assert_int_equal(f->lens[i], strlen(want[i]));
		fx_msg(f, i, got);
		assert_memory_equal(got, want[i], f->lens[i]);
	}
	assert_int_equal(f->errors, 0);
	/* Events at each first and last chunk, each before its read. */
	assert_int_equal(w->n, 8);
	assert_int_equal(w->log[0].kind, 'E');
	assert_int_equal(w->log[0].have, 4);
	assert_int_equal(w->log[0].total, 10);
	assert_int_equal(w->log[1].kind, 'R');
	assert_int_equal(w->log[2].kind, 'E');
	assert_int_equal(w->log[2].messages, 0);
	assert_int_equal(w->log[3].kind, 'R');
	assert_int_equal(w->log[3].len, 10);
	assert_int_equal(w->log[4].kind, 'E');
	assert_int_equal(w->log[4].messages, 1);
	assert_int_equal(w->log[5].kind, 'E');
	assert_int_equal(w->log[6].len, 3);
	assert_int_equal(w->log[7].len, 3);
	w->n = 0;
}

static void
test_chunks_assemble_across_reads_split_at_every_byte(void **state)
{
	uint8_t stream[256];
	size_t n = build_mixed_stream(stream), k;
	struct watch w = {0};
	int emit;
	fx *f;

	(void)state;
	for (emit = 0; emit < 2; emit++) {
		f = chunk_fixture(emit, NULL, &w);
		for (k = 0; k <= n; k++) {
			if (k > 0)
				fx_send(f, stream, k);
			if (k < n)
				fx_send(f, stream + k, n - k);
			check_mixed(f, &w);
			fx_reset(f);
		}
		for (k = 0; k < n; k++)
			fx_send(f, stream + k, 1);
		check_mixed(f, &w);
		fx_free(f);
	}
}

/* Chunks above the copy limit move their chains; sent in odd pieces. */
static void
test_large_chunks_assemble_in_odd_splits(void **state)
{
	static uint8_t body[3 * 50000 + 17], stream[sizeof(body) + 256];
	weft_chunk_codec_opts co = {.max_message_bytes = sizeof(body)};
	static uint8_t got[sizeof(body)];
	uint64_t rng = 42;
	size_t n = 0, k, piece;
	weft_codec_stats st;
	int emit;
	fx *f;

	(void)state;
	fill_body(body, 1, sizeof(body));
	n += put_chunk(stream + n, F, 1, sizeof(body), body, 50000);
	n += put_chunk(stream + n, M, 1, 0, body + 50000, 10);
	n += put_chunk(stream + n, M, 1, 0, body + 50010, 49990);
	n += put_chunk(stream + n, L, 1, 0, body + 100000, 50017);
	for (emit = 0; emit < 2; emit++) {
		f = chunk_fixture(emit, &co, NULL);
		for (k = 0; k < n; k += piece) {
			piece = 1 + fx_rand(&rng) % 9000;
			if (piece > n - k)
				piece = n - k;
			fx_send(f, stream + k, piece);
		}
		assert_int_equal(f->errors, 0);
		assert_int_equal(f->msgs, 1);
		assert_int_equal(f->lens[0], sizeof(body));
		fx_msg(f, 0, got);
		assert_memory_equal(got, body, sizeof(body));
		assert_int_equal(weft_codec_get_stats(f->ch, "chunk", &st), 0);
		assert_int_equal(st.msgs_in, 1);
		assert_int_equal(st.bytes_in, sizeof(body));
		fx_free(f);
	}
}

static void
test_interleaved_messages_assemble_in_the_order_they_end(void **state)
{
	uint8_t stream[256];
	struct watch w = {0};
	char got[8];
	size_t n = 0;
	fx *f;

	(void)state;
	n += put_chunk(stream + n, F, 1, 6, "ab", 2);
	n += put_chunk(stream + n, F, 2, 4, "wx", 2);
	n += put_chunk(stream + n, M, 1, 0, "cd", 2);
	n += put_chunk(stream + n, L, 2, 0, "yz", 2);
	n += put_chunk(stream + n, L, 1, 0, "ef", 2);
	f = chunk_fixture(false, NULL, &w);
	fx_send(f, stream, n);
	assert_int_equal(f->errors, 0);
	assert_int_equal(f->msgs, 2);
	fx_msg(f, 0, got);
	assert_memory_equal(got, "wxyz", 4);
	fx_msg(f, 1, got);
	assert_memory_equal(got, "abcdef", 6);
	assert_int_equal(w.n, 6);
	assert_true(w.log[0].kind == 'E' && w.log[0].messages == 1 &&
	            w.log[0].have == 2 && w.log[0].total == 6);
	assert_true(w.log[1].kind == 'E' && w.log[1].messages == 2 &&
	            w.log[1].have == 4 && w.log[1].total == 10);
	/* Message 2 ended: only 1 is left, with "abcd". */
	assert_true(w.log[2].kind == 'E' && w.log[2].messages == 1 &&
	            w.log[2].have == 4 && w.log[2].total == 6);
	assert_true(w.log[3].kind == 'R' && w.log[3].len == 4);
	assert_true(w.log[4].kind == 'E' && w.log[4].messages == 0 &&
	            w.log[4].have == 0 && w.log[4].total == 0);
	assert_true(w.log[5].kind == 'R' && w.log[5].len == 6);
	assert_int_equal(f->events, 4);
	assert_int_equal(f->last_event, WEFT_CHUNK_EVENT_ASSEMBLING);
	fx_free(f);
}

/* ---- Hostile input ------------------------------------------------------ */

struct hostile {
	const char *what;
	int err;
	size_t delivered; /* messages before the bad chunk */
	size_t (*build)(uint8_t *p);
};

static size_t
middle_without_start(uint8_t *p)
{
	return put_chunk(p, M, 5, 0, "ab", 2);
}

static size_t
last_without_start(uint8_t *p)
{
	size_t n = put_chunk(p, F, 4, 2, "a", 1);

	n += put_chunk(p + n, L, 4, 0, "b", 1);
	return n + put_chunk(p + n, L, 5, 0, "ab", 2);
}

static size_t
first_again(uint8_t *p)
{
	size_t n = put_chunk(p, F, 5, 10, "ab", 2);

	return n + put_chunk(p + n, F, 5, 10, "cd", 2);
}

static size_t
too_many_in_assembly(uint8_t *p)
{
	size_t n = put_chunk(p, F, 1, 10, "a", 1);

	n += put_chunk(p + n, F, 2, 10, "a", 1);
	return n + put_chunk(p + n, F, 3, 10, "a", 1);
}

static size_t
total_above_limit(uint8_t *p)
{
	return put_chunk(p, F, 1, 1001, "abcdefghij", 10);
}

static size_t
total_far_above_limit(uint8_t *p)
{
	return put_chunk(p, F, 1, UINT64_MAX, "abcdefghij", 10);
}

static size_t
bytes_past_total(uint8_t *p)
{
	size_t n = put_chunk(p, F, 1, 4, "abc", 3);

	return n + put_chunk(p + n, L, 1, 0, "de", 2);
}

static size_t
first_past_total(uint8_t *p)
{
	return put_chunk(p, F, 1, 2, "abc", 3);
}

static size_t
total_reached_before_last(uint8_t *p)
{
	size_t n = put_chunk(p, F, 1, 4, "ab", 2);

	return n + put_chunk(p + n, M, 1, 0, "cd", 2);
}

static size_t
first_holds_all(uint8_t *p)
{
	return put_chunk(p, F, 1, 3, "abc", 3);
}

static size_t
last_short_of_total(uint8_t *p)
{
	size_t n = put_chunk(p, F, 1, 5, "ab", 2);

	return n + put_chunk(p + n, L, 1, 0, "c", 1);
}

static size_t
first_and_last(uint8_t *p)
{
	return put_chunk(p, F | L, 1, 3, "abc", 3);
}

static size_t
reserved_bit(uint8_t *p)
{
	return put_chunk(p, 0x04, 1, 0, "abc", 3);
}

static size_t
reserved_high_bit_on_first(uint8_t *p)
{
	return put_chunk(p, F | 0x80, 1, 5, "abc", 3);
}

static size_t
empty_first(uint8_t *p)
{
	return put_chunk(p, F, 1, 5, "", 0);
}

static size_t
empty_middle(uint8_t *p)
{
	size_t n = put_chunk(p, F, 1, 5, "ab", 2);

	return n + put_chunk(p + n, M, 1, 0, "", 0);
}

static size_t
truncated_header(uint8_t *p)
{
	return put_plain(p, "\xc1\x02\x01\x00\x00", 5);
}

static size_t
truncated_first_header(uint8_t *p)
{
	return put_plain(p, "\xc1\x02\x01\x00\x00\x00\x01\x00\x00\x00", 10);
}

static size_t
total_of_zero(uint8_t *p)
{
	return put_chunk(p, F, 1, 0, "a", 1);
}

static const struct hostile hostile[] = {
    {"middle chunk without a start", WEFT_EPROTO, 0, middle_without_start},
    {"last chunk without a start", WEFT_EPROTO, 1, last_without_start},
    {"first chunk of a message in assembly", WEFT_EPROTO, 0, first_again},
    {"more than max_assembling", WEFT_EPROTO, 0, too_many_in_assembly},
    {"total above max_message_bytes", WEFT_ETOOBIG, 0, total_above_limit},
    {"total of 2^64-1", WEFT_ETOOBIG, 0, total_far_above_limit},
    {"bytes past total", WEFT_EPROTO, 0, bytes_past_total},
    {"first chunk past total", WEFT_EPROTO, 0, first_past_total},
    {"total reached before the last", WEFT_EPROTO, 0,
     total_reached_before_last},
    {"first chunk holds the whole total", WEFT_EPROTO, 0, first_holds_all},
    {"last chunk short of total", WEFT_EPROTO, 0, last_short_of_total},
    {"FIRST and LAST together", WEFT_EPROTO, 0, first_and_last},
    {"reserved flag bit", WEFT_EPROTO, 0, reserved_bit},
    {"reserved high bit on a first", WEFT_EPROTO, 0,
     reserved_high_bit_on_first},
    {"empty first chunk", WEFT_EPROTO, 0, empty_first},
    {"empty middle chunk", WEFT_EPROTO, 0, empty_middle},
    {"truncated header", WEFT_EPROTO, 0, truncated_header},
    {"truncated first header", WEFT_EPROTO, 0, truncated_first_header},
    {"total of 0", WEFT_EPROTO, 0, total_of_zero},
};

static void
run_hostile(const struct hostile *h, bool emit, bool quiet)
{
	weft_chunk_codec_opts co = {
	    .max_assembling = 2, .max_message_bytes = 1000, .quiet = quiet};
	uint8_t stream[512];
	weft_codec_stats before, after;
	int warnings = fx_warnings();
	size_t n = h->build(stream);
	fx *f;

	print_message("%s%s\n", h->what, emit ? " (byte runs)" : "");
	weft_codec_get_totals(WEFT_CODEC_CHUNK, &before);
	f = chunk_fixture(emit, &co, NULL);
	/* A valid plain body after the bad chunk is dropped. */
	n += put_plain(stream + n, "after", 5);
	fx_send(f, stream, n);
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, h->err);
	assert_int_equal(f->msgs, h->delivered);
	if (h->err == WEFT_ETOOBIG)
		assert_int_equal(f->err_stats.too_big, 1);
	else
		assert_int_equal(f->err_stats.malformed, 1);
	assert_int_equal(fx_warnings(), warnings + (quiet ? 0 : 1));
	if (!quiet) {
		assert_non_null(strstr(fx_last_warning(), "test-peer"));
		assert_non_null(strstr(fx_last_warning(), "chunk codec"));
	}
	fx_run_until_inactive(f);
	weft_codec_get_totals(WEFT_CODEC_CHUNK, &after);
	assert_int_equal(after.malformed + after.too_big,
	                 before.malformed + before.too_big + 1);
	fx_free(f);
}

static void
test_hostile_chunks_close_the_channel_and_are_counted(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		run_hostile(&hostile[i], false, false);
		run_hostile(&hostile[i], true, i % 2 == 0);
	}
}

/* A message begun and not finished when the peer ends the stream. */
static void
test_stream_ending_inside_a_message_fails_and_frees_it(void **state)
{
	static uint8_t stream[70000];
	static uint8_t body[60000];
	struct watch w = {0};
	size_t n = 0;
	fx *f;

	(void)state;
	fill_body(body, 2, sizeof(body));
	n += put_chunk(stream + n, F, 1, 200000, body, sizeof(body));
	n += put_chunk(stream + n, F, 2, 10, "abc", 3);
	f = chunk_fixture(false, NULL, &w);
	fx_send(f, stream, n);
	assert_int_equal(w.n, 2);
	assert_int_equal(w.log[1].messages, 2);
	assert_int_equal(w.log[1].have, sizeof(body) + 3);
	assert_int_equal(w.log[1].total, 200010);
	fx_peer_close(f);
	fx_run_until_inactive(f);
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_EPROTO);
	assert_int_equal(f->err_stats.malformed, 1);
	assert_non_null(strstr(fx_last_warning(), "connection ended"));
	fx_free(f);
}

/* A first chunk that declares the largest message allowed holds only the
 * bytes that came (the fuzz target checks the memory). */
static void
test_declared_total_is_not_reserved(void **state)
{
	uint8_t stream[64];
	struct watch w = {0};
	fx *f = chunk_fixture(false, NULL, &w);
	size_t n;

	(void)state;
	n = put_chunk(stream, F, 9, WEFT_CHUNK_DEFAULT_MAX_MESSAGE, "abc", 3);
	fx_send(f, stream, n);
	assert_int_equal(f->errors, 0);
	assert_int_equal(w.n, 1);
	assert_int_equal(w.log[0].have, 3);
	assert_int_equal(w.log[0].total, WEFT_CHUNK_DEFAULT_MAX_MESSAGE);
	/* One byte more is refused. */
	n = put_chunk(stream, F, 10, WEFT_CHUNK_DEFAULT_MAX_MESSAGE + 1, "a",
	              1);
	fx_send(f, stream, n);
	assert_int_equal(f->last_error, WEFT_ETOOBIG);
	fx_run_until_inactive(f);
	fx_free(f);
}

/* Handlers after the codec may take it out, or close the channel, from
 * inside its event: the message in hand is still delivered, and nothing
 * leaks. */
static void
test_codec_removed_or_closed_inside_its_event(void **state)
{
	uint8_t stream[256];
	struct watch w = {.remove_on_event = true};
	size_t n = 0;
	char got[8];
	fx *f;

	(void)state;
	n += put_chunk(stream + n, F, 1, 4, "ab", 2);
	n += put_chunk(stream + n, F, 2, 3, "x", 1);
	n += put_chunk(stream + n, L, 1, 0, "cd", 2);
	f = chunk_fixture(false, NULL, &w);
	fx_send(f, stream, n);
	/* Gone after the first chunk: the others pass as they are. */
	assert_null(weft_pipeline_get(f->ch, "chunk"));
	assert_int_equal(f->msgs, 2);
	assert_int_equal(f->lens[0], 15 + 1);
	assert_int_equal(f->lens[1], 7 + 2);
	fx_free(f);

	w = (struct watch){.close_on_event = true};
	n = 0;
	n += put_chunk(stream + n, F, 1, 4, "ab", 2);
	n += put_chunk(stream + n, L, 1, 0, "cd", 2);
	f = chunk_fixture(false, NULL, &w);
	fx_send(f, stream, n);
	assert_int_equal(f->msgs, 1);
	fx_msg(f, 0, got);
	assert_memory_equal(got, "abcd", 4);
	fx_run_until_inactive(f);
	assert_int_equal(f->errors, 0);
	fx_free(f);
}

/* ---- Outbound ----------------------------------------------------------- */

/* Takes one frame off in: its body into body; returns its length, or -1
 * when in holds no whole frame. */
static long
take_frame(struct evbuffer *in, struct evbuffer *body)
{
	uint8_t hdr[4];
	size_t len;

	if (evbuffer_copyout(in, hdr, 4) != 4)
		return -1;
	len = weft_test_get_be32(hdr);
	if (evbuffer_get_length(in) < 4 + len)
		return -1;
	evbuffer_drain(in, 4);
	evbuffer_drain(body, evbuffer_get_length(body));
	evbuffer_remove_buffer(in, body, len);
	return (long)len;
}

struct order {
	int n;
	int who[8];
	int status[8];
};

struct order_arg {
	struct order *o;
	int who;
};

static void
order_cb(weft_channel *ch, int status, void *arg)
{
	struct order_arg *a = arg;

	(void)ch;
	assert_true(a->o->n < 8);
	a->o->status[a->o->n] = status;
	a->o->who[a->o->n++] = a->who;
}

struct pending_watch {
	fx *f;
	struct order *o;
	int want;
	size_t max_pending;
};

/* Samples the channel's unwritten bytes (f set: the channel is alive)
 * until want callbacks have run. */
static bool
sample_pending(void *arg)
{
	struct pending_watch *p = arg;
	size_t n;

	if (p->f != NULL &&
	    (n = weft_channel_pending_write_bytes(p->f->ch)) > p->max_pending)
		p->max_pending = n;
	return p->o->n >= p->want;
}

/*
 * Reads the chunked message and the plain bodies from the peer's input:
 * checks every chunk's header, puts the message together in msg, and
 * returns the index (among frames) of the first plain body.
 */
static size_t
read_back(struct evbuffer *in, struct evbuffer *msg, size_t total,
          size_t chunk_bytes, size_t *plain_len)
{
	struct evbuffer *body = evbuffer_new();
	size_t i, plain_at = SIZE_MAX, have = 0, head, n;
	unsigned want;
	uint8_t h[15];
	long len;

	for (i = 0; (len = take_frame(in, body)) >= 0; i++) {
		evbuffer_copyout(body, h, sizeof(h));
		if (len < 2 || h[0] != 0xc1 || h[1] != 0x02) {
			assert_int_equal(plain_at, SIZE_MAX);
			plain_at = i;
			*plain_len = (size_t)len;
			continue;
		}
		head = have == 0 ? 15 : 7;
		n = (size_t)len - head;
		want = (have == 0 ? F : 0) | (have + n == total ? L : 0);
		assert_int_equal(h[2], want);
		if (have == 0)
			assert_int_equal(weft_test_get_be32(h + 11), total);
		assert_true(n >= 1 && n <= chunk_bytes);
		evbuffer_drain(body, head);
		have += n;
		evbuffer_add_buffer(msg, body);
	}
	assert_int_equal(have, total);
	evbuffer_free(body);
	return plain_at;
}

/*
 * A small body written after a large one leaves right after the first
 * window chunks, and its callback runs first; the codec holds the rest
 * and keeps at most window chunks unwritten.
 */
static void
overtake(uint32_t window)
{
	enum { LARGE = 1 << 20, CHUNK = 4096 };
	static uint8_t large[LARGE], got[LARGE];
	weft_chunk_codec_opts co = {
	    .send = true, .chunk_bytes = CHUNK, .window = window};
	struct evbuffer *buf = evbuffer_new(), *msg = evbuffer_new();
	struct order o = {0};
	struct order_arg big = {&o, 1}, small = {&o, 2};
	struct pending_watch pw;
	size_t frame = 4 + 15 + CHUNK, plain_len = 0;
	weft_bytes run = {"small body", 10};
	weft_codec_stats st;
	fx *f = chunk_fixture(false, &co, NULL);

	fill_body(large, 3, LARGE);
	evbuffer_add(buf, large, LARGE);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_evbuffer, buf,
	                                        order_cb, &big),
	                 0);
	assert_int_equal(evbuffer_get_length(buf), 0);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_bytes, &run,
	                                        order_cb, &small),
	                 0);
	assert_int_equal(weft_chunk_codec_queued_bytes(f->ch, "chunk"),
	                 LARGE - window * CHUNK);
	assert_true(weft_channel_pending_write_bytes(f->ch) <=
	            window * frame + 14);
	pw = (struct pending_watch){f, &o, 2, 0};
	assert_int_equal(
	    weft_loop_run_until(f->loop, sample_pending, &pw, 5000), 0);
	assert_true(pw.max_pending <= window * frame);
	assert_int_equal(o.n, 2);
	assert_int_equal(o.who[0], 2);
	assert_int_equal(o.who[1], 1);
	assert_int_equal(o.status[0], 0);
	assert_int_equal(o.status[1], 0);
	assert_int_equal(weft_chunk_codec_queued_bytes(f->ch, "chunk"), 0);
	fx_run_until_peer_has(f, LARGE + 14 + (LARGE / CHUNK) * 11 + 8);
	assert_int_equal(
	    read_back(fx_peer_input(f), msg, LARGE, CHUNK, &plain_len), window);
	assert_int_equal(plain_len, 10);
	assert_int_equal(evbuffer_remove(msg, got, LARGE), LARGE);
	assert_memory_equal(got, large, LARGE);
	assert_int_equal(weft_codec_get_stats(f->ch, "chunk", &st), 0);
	assert_int_equal(st.msgs_out, 1);
	assert_int_equal(st.bytes_out, LARGE);
	/* Exactly once: nothing more comes. */
	fx_send(f, "\0\0\0\0", 4);
	assert_int_equal(o.n, 2);
	evbuffer_free(buf);
	evbuffer_free(msg);
	fx_free(f);
}

static void
test_small_body_overtakes_a_large_one_within_the_window(void **state)
{
	(void)state;
	overtake(1);
	overtake(2);
	overtake(5);
}

/* The peer does not read: the codec holds all but window chunks, and the
 * channel's unwritten bytes stay within the window. */
static void
test_window_bounds_the_unwritten_bytes(void **state)
{
	enum { LARGE = 300000, CHUNK = 1000 };
	static uint8_t large[LARGE];
	weft_chunk_codec_opts co = {.send = true, .chunk_bytes = CHUNK};
	weft_bytes run = {large, LARGE};
	fx *f = chunk_fixture(false, &co, NULL);

	(void)state;
	bufferevent_disable(f->peer, EV_READ);
	fill_body(large, 4, LARGE);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_bytes, &run,
	                                        fx_write_cb, f),
	                 0);
	memset(large, 0, sizeof(large)); /* taken at once */
	assert_int_equal(weft_chunk_codec_queued_bytes(f->ch, "chunk"),
	                 LARGE - 2 * CHUNK);
	assert_int_equal(weft_channel_pending_write_bytes(f->ch),
	                 2 * (4 + CHUNK) + 15 + 7);
	assert_int_equal(f->write_cbs, 0);
	bufferevent_enable(f->peer, EV_READ);
	fx_run_until_write_cbs(f, 1);
	assert_int_equal(f->write_status, 0);
	assert_int_equal(weft_chunk_codec_queued_bytes(f->ch, "chunk"), 0);
	fx_free(f);
}

/* Bodies up to chunk_bytes, and every body with send off, leave whole. */
static void
test_bodies_within_chunk_bytes_or_with_send_off_leave_whole(void **state)
{
	static uint8_t body[300000];
	weft_chunk_codec_opts on = {.send = true, .chunk_bytes = 1000};
	weft_chunk_codec_opts off = {.chunk_bytes = 1000};
	struct evbuffer *buf = evbuffer_new(), *got = evbuffer_new();
	weft_bytes run = {body, 1000};
	fx *f;

	(void)state;
	fill_body(body, 5, sizeof(body));
	f = chunk_fixture(false, &on, NULL);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_bytes, &run,
	                                        fx_write_cb, f),
	                 0);
	fx_run_until_write_cbs(f, 1);
	fx_run_until_peer_has(f, 1004);
	assert_int_equal(take_frame(fx_peer_input(f), got), 1000);
	assert_memory_equal(evbuffer_pullup(got, -1), body, 1000);
	fx_free(f);

	f = chunk_fixture(false, &off, NULL);
	evbuffer_add(buf, body, sizeof(body));
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_evbuffer, buf,
	                                        fx_write_cb, f),
	                 0);
	fx_run_until_write_cbs(f, 1);
	fx_run_until_peer_has(f, 4 + sizeof(body));
	assert_int_equal(take_frame(fx_peer_input(f), got), sizeof(body));
	assert_memory_equal(evbuffer_pullup(got, -1), body, sizeof(body));
	evbuffer_free(buf);
	evbuffer_free(got);
	fx_free(f);
}

static bool
peer_has_some(void *arg)
{
	fx *f = arg;

	return evbuffer_get_length(fx_peer_input(f)) >= 20000;
}

enum stop_how { STOP_CLOSE, STOP_PEER_CLOSE, STOP_REMOVE };

/*
 * A large write stopped half-way, and one queued behind it: their
 * callbacks run once each, with WEFT_ECLOSED, also when the chunks already
 * out leave afterwards (the peer reads no more than 20000 bytes until the
 * stop), and what was queued is freed.
 */
static void
stop_mid_message(enum stop_how how)
{
	enum { LARGE = 1 << 20 };
	static uint8_t large[LARGE];
	weft_chunk_codec_opts co = {.send = true, .chunk_bytes = 1024};
	struct evbuffer *buf = evbuffer_new();
	weft_bytes run = {large, 5000};
	struct order o = {0};
	struct order_arg first = {&o, 1}, second = {&o, 2}, third = {&o, 3};
	struct pending_watch pw = {NULL, &o, 2, 0};
	fx *f = chunk_fixture(false, &co, NULL);

	fill_body(large, 6, LARGE);
	evbuffer_add(buf, large, LARGE);
	bufferevent_setwatermark(f->peer, EV_READ, 0, 20000);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_evbuffer, buf,
	                                        order_cb, &first),
	                 0);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_bytes, &run,
	                                        order_cb, &second),
	                 0);
	assert_int_equal(weft_loop_run_until(f->loop, peer_has_some, f, 5000),
	                 0);
	assert_true(weft_chunk_codec_queued_bytes(f->ch, "chunk") > 5000);
	assert_true(weft_chunk_codec_queued_bytes(f->ch, "chunk") <
	            LARGE + 5000);
	assert_int_equal(o.n, 0);
	if (how == STOP_CLOSE)
		weft_channel_close(f->ch);
	else if (how == STOP_PEER_CLOSE)
		fx_peer_close(f);
	else
		assert_int_equal(weft_pipeline_remove(f->ch, "chunk"), 0);
	/* The end of the stream arrives while the peer still reads
	 * nothing. */
	if (how == STOP_PEER_CLOSE)
		fx_run_until_inactive(f);
	bufferevent_setwatermark(f->peer, EV_READ, 0, 0);
	evbuffer_drain(fx_peer_input(f), SIZE_MAX);
	assert_int_equal(
	    weft_loop_run_until(f->loop, sample_pending, &pw, 5000), 0);
	/* The one with no chunk out is told first. */
	assert_int_equal(o.who[0], 2);
	assert_int_equal(o.who[1], 1);
	assert_int_equal(o.status[0], WEFT_ECLOSED);
	assert_int_equal(o.status[1], WEFT_ECLOSED);
	if (how == STOP_REMOVE) {
		/* The channel goes on without the codec: a body leaves
		 * whole. */
		evbuffer_add(buf, large, LARGE);
		assert_int_equal(weft_channel_write_msg(f->ch,
		                                        &weft_msg_evbuffer, buf,
		                                        order_cb, &third),
		                 0);
		pw.want = 3;
		assert_int_equal(
		    weft_loop_run_until(f->loop, sample_pending, &pw, 5000), 0);
		assert_int_equal(o.status[2], 0);
		weft_channel_close(f->ch);
	}
	fx_run_until_inactive(f);
	assert_int_equal(o.n, how == STOP_REMOVE ? 3 : 2);
	evbuffer_free(buf);
	fx_free(f);
}

static void
test_write_stopped_mid_message_calls_back_once_with_eclosed(void **state)
{
	(void)state;
	stop_mid_message(STOP_CLOSE);
	stop_mid_message(STOP_PEER_CLOSE);
	stop_mid_message(STOP_REMOVE);
}

/* Chunked bodies leave one after another, each with the next id. */
static void
test_chunked_bodies_leave_in_order_with_ids_counting_up(void **state)
{
	weft_chunk_codec_opts co = {.send = true, .chunk_bytes = 64};
	struct evbuffer *body = evbuffer_new();
	uint8_t data[100], h[15];
	weft_bytes run = {data, sizeof(data)};
	uint32_t first_id = 0;
	size_t i;
	fx *f = chunk_fixture(false, &co, NULL);

	(void)state;
	for (i = 0; i < 3; i++) {
		fill_body(data, i, sizeof(data));
		assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_bytes,
		                                        &run, fx_write_cb, f),
		                 0);
	}
	fx_run_until_write_cbs(f, 3);
	assert_int_equal(f->write_status, 0);
	/* Each in two chunks: 64 bytes, then 36. */
	fx_run_until_peer_has(f, 3 * (2 * 4 + 15 + 7 + sizeof(data)));
	for (i = 0; i < 6; i++) {
		assert_int_equal(take_frame(fx_peer_input(f), body),
		                 i % 2 == 0 ? 15 + 64 : 7 + 36);
		evbuffer_copyout(body, h, sizeof(h));
		assert_int_equal(h[2], i % 2 == 0 ? F : L);
		if (i == 0)
			first_id = weft_test_get_be32(h + 3);
		assert_int_equal(weft_test_get_be32(h + 3),
		                 (uint32_t)(first_id + i / 2));
		evbuffer_drain(body, i % 2 == 0 ? 15 : 7);
		fill_body(data, i / 2, sizeof(data));
		assert_memory_equal(evbuffer_pullup(body, -1),
		                    data + (i % 2 == 0 ? 0 : 64),
		                    i % 2 == 0 ? 64 : 36);
	}
	assert_int_equal(evbuffer_get_length(fx_peer_input(f)), 0);
	evbuffer_free(body);
	fx_free(f);
}

/* ---- Round trips over an in-process pair -------------------------------- */

struct side {
	size_t chunk_bytes;
	bool emit_bytes;
	bool envelopes;
	struct evbuffer *got; /* byte messages, concatenated */
	size_t lens[32];
	size_t n;
	int errors;
	bool inactive;
	int cbs, cb_errors;
	/* Envelopes, by id. */
	struct evbuffer *payload[32];
};

static void
side_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct side *s = weft_ctx_state(ctx);
	const weft_bytes *run = msg;
	weft_envelope *env = msg;

	assert_true(s->n < 32);
	if (type == &weft_msg_envelope) {
		assert_true(env->id < 32 && s->payload[env->id] == NULL);
		s->payload[env->id] = evbuffer_new();
		if (env->payload_buf != NULL)
			evbuffer_add_buffer(s->payload[env->id],
			                    env->payload_buf);
		else
			evbuffer_add(s->payload[env->id], env->payload,
			             env->payload_len);
		s->n++;
		return;
	}
	if (type == &weft_msg_bytes) {
		s->lens[s->n++] = run->len;
		evbuffer_add(s->got, run->data, run->len);
		return;
	}
	s->lens[s->n++] = evbuffer_get_length(msg);
	evbuffer_add_buffer(s->got, msg);
}

static void
side_error(weft_ctx *ctx, int status)
{
	(void)status;
	((struct side *)weft_ctx_state(ctx))->errors++;
}

static void
side_inactive(weft_ctx *ctx)
{
	((struct side *)weft_ctx_state(ctx))->inactive = true;
}

static const weft_handler side_handler = {
    .read = side_read,
    .error = side_error,
    .inactive = side_inactive,
};

static int
side_init(weft_channel *ch, void *arg)
{
	struct side *s = arg;
	/* Frames no larger than a chunk's: only chunking gets a large body
	 * through. */
	weft_frame_codec_opts fo = {.max_frame_bytes = s->chunk_bytes + 64,
	                            .emit_bytes = s->emit_bytes};
	weft_chunk_codec_opts co = {.send = true,
	                            .chunk_bytes = s->chunk_bytes};
	int rv;

	if ((rv = weft_frame_codec_add(ch, "frame", &fo)) != 0 ||
	    (rv = weft_chunk_codec_add(ch, "chunk", &co)) != 0)
		return rv;
	if (s->envelopes &&
	    (rv = weft_envelope_codec_add(ch, "env", NULL)) != 0)
		return rv;
	return weft_pipeline_add_last(ch, "side", &side_handler, s);
}

static void
side_cb(weft_channel *ch, int status, void *arg)
{
	struct side *s = arg;

	(void)ch;
	s->cbs++;
	s->cb_errors += status != 0;
}

struct pair_wait {
	struct side *s;
	size_t n;
	struct side *writer;
	int cbs;
};

static bool
pair_done(void *arg)
{
	struct pair_wait *w = arg;

	return (w->s->n >= w->n && w->writer->cbs >= w->cbs) ||
	       w->s->errors > 0 || w->s->inactive;
}

static bool
side_ended(void *arg)
{
	return ((struct side *)arg)->inactive;
}

static void
round_trip(size_t chunk_bytes, bool emit_bytes)
{
	const size_t c = chunk_bytes;
	const size_t lens[] = {0,     1,     100,       c - 1, c,
	                       c + 1, 2 * c, 2 * c + 1, 5,     (3u << 20) + 7};
	enum { N = sizeof(lens) / sizeof(lens[0]) };
	static uint8_t body[(3u << 20) + 16], got[(3u << 20) + 16];
	struct side a = {.chunk_bytes = c},
	            b = {.chunk_bytes = c, .emit_bytes = emit_bytes};
	struct evbuffer *buf = evbuffer_new();
	weft_codec_stats st;
	weft_channel *ca, *cb;
	struct pair_wait w = {&b, N, &a, N};
	weft_loop *loop;
	size_t i, chunked = 0;
	weft_bytes run;

	print_message("chunk_bytes %zu%s\n", c,
	              emit_bytes ? ", byte runs" : "");
	a.got = evbuffer_new();
	b.got = evbuffer_new();
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(weft_inproc_pair(loop, NULL, side_init, &a, side_init,
	                                  &b, &ca, &cb),
	                 0);
	for (i = 0; i < N; i++) {
		fill_body(body, i, lens[i]);
		chunked += lens[i] > c;
		/* Odd ones as evbuffers, even ones as byte runs. */
		if (i % 2) {
			evbuffer_add(buf, body, lens[i]);
			assert_int_equal(
			    weft_channel_write_msg(ca, &weft_msg_evbuffer, buf,
			                           side_cb, &a),
			    0);
		} else {
			run = (weft_bytes){body, lens[i]};
			assert_int_equal(
			    weft_channel_write_msg(ca, &weft_msg_bytes, &run,
			                           side_cb, &a),
			    0);
		}
	}
	assert_int_equal(weft_loop_run_until(loop, pair_done, &w, 20000), 0);
	assert_int_equal(b.errors, 0);
	assert_int_equal(a.cb_errors, 0);
	assert_int_equal(b.n, N);
	/* Bodies that leave whole overtake chunked ones: match by size. */
	for (i = 0; i < N; i++) {
		size_t k;

		for (k = 0; k < N && lens[k] != b.lens[i]; k++)
			;
		assert_true(k < N);
		assert_int_equal(evbuffer_remove(b.got, got, b.lens[i]),
		                 (int)b.lens[i]);
		fill_body(body, k, lens[k]);
		if (lens[k] > 0)
			assert_memory_equal(got, body, lens[k]);
	}
	assert_int_equal(weft_codec_get_stats(ca, "chunk", &st), 0);
	assert_int_equal(st.msgs_out, chunked);
	assert_int_equal(weft_codec_get_stats(cb, "chunk", &st), 0);
	assert_int_equal(st.msgs_in, chunked);
	weft_channel_close(ca);
	assert_int_equal(weft_loop_run_until(loop, side_ended, &b, 5000), 0);
	evbuffer_free(buf);
	evbuffer_free(a.got);
	evbuffer_free(b.got);
	weft_loop_free(loop);
}

static void
test_bodies_of_many_sizes_round_trip(void **state)
{
	(void)state;
	round_trip(WEFT_CHUNK_DEFAULT_BYTES, false);
	round_trip(1000, true);
	round_trip(64, false);
}

/* Envelopes on top: a large payload leaves as chunks, small envelopes
 * (written in place) go out between them. */
static void
test_envelopes_round_trip_over_chunks(void **state)
{
	static const size_t lens[] = {10, 20000, 5u << 20, 100, 70000, 0};
	enum { N = sizeof(lens) / sizeof(lens[0]) };
	static uint8_t body[(5u << 20) + 16], got[(5u << 20) + 16];
	struct side a = {.chunk_bytes = 16384, .envelopes = true},
	            b = {.chunk_bytes = 16384, .envelopes = true};
	struct evbuffer *buf = evbuffer_new();
	struct pair_wait w = {&b, N, &a, N};
	weft_channel *ca, *cb;
	weft_envelope env;
	weft_loop *loop;
	size_t i;

	(void)state;
	a.got = evbuffer_new();
	b.got = evbuffer_new();
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(weft_inproc_pair(loop, NULL, side_init, &a, side_init,
	                                  &b, &ca, &cb),
	                 0);
	for (i = 0; i < N; i++) {
		fill_body(body, i, lens[i]);
		env = (weft_envelope){
		    .id = i, .verb = 9, .flags = WEFT_ENVELOPE_ONEWAY};
		if (lens[i] > 50000) {
			evbuffer_add(buf, body, lens[i]);
			env.payload_buf = buf;
		} else {
			env.payload = body;
			env.payload_len = lens[i];
		}
		assert_int_equal(weft_channel_write_msg(ca, &weft_msg_envelope,
		                                        &env, side_cb, &a),
		                 0);
	}
	assert_int_equal(weft_loop_run_until(loop, pair_done, &w, 20000), 0);
	assert_int_equal(b.errors, 0);
	assert_int_equal(a.cb_errors, 0);
	for (i = 0; i < N; i++) {
		assert_non_null(b.payload[i]);
		assert_int_equal(evbuffer_get_length(b.payload[i]), lens[i]);
		evbuffer_remove(b.payload[i], got, lens[i]);
		fill_body(body, i, lens[i]);
		if (lens[i] > 0)
			assert_memory_equal(got, body, lens[i]);
		evbuffer_free(b.payload[i]);
	}
	weft_channel_close(ca);
	assert_int_equal(weft_loop_run_until(loop, side_ended, &b, 5000), 0);
	evbuffer_free(buf);
	evbuffer_free(a.got);
	evbuffer_free(b.got);
	weft_loop_free(loop);
}

/* ---- Options ------------------------------------------------------------ */

static void
test_options_are_checked(void **state)
{
	weft_chunk_codec_opts small = {.chunk_bytes = 63};
	weft_chunk_codec_opts large = {.chunk_bytes = WEFT_FRAME_LIMIT + 1};
	weft_chunk_codec_opts least = {.chunk_bytes = 64};
	fx *f = fx_new();

	(void)state;
	assert_int_equal(weft_frame_codec_add(f->ch, "frame", NULL), 0);
	assert_int_equal(weft_chunk_codec_add(f->ch, "chunk", &small),
	                 WEFT_EINVAL);
	assert_int_equal(weft_chunk_codec_add(f->ch, "chunk", &large),
	                 WEFT_EINVAL);
	assert_int_equal(weft_chunk_codec_add(f->ch, "chunk", &least), 0);
	assert_int_equal(weft_chunk_codec_add(f->ch, "chunk", NULL),
	                 WEFT_EEXIST);
	assert_int_equal(
	    weft_chunk_codec_add_after(f->ch, "nope", "chunk2", NULL),
	    WEFT_ENOTFOUND);
	assert_int_equal(
	    weft_chunk_codec_add_after(f->ch, "frame", "chunk2", NULL), 0);
	assert_int_equal(weft_chunk_codec_queued_bytes(f->ch, "chunk"), 0);
	assert_int_equal(weft_chunk_codec_queued_bytes(f->ch, "frame"), 0);
	assert_int_equal(weft_chunk_codec_queued_bytes(f->ch, "nope"), 0);
	fx_start(f);
	fx_free(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plain_bodies_pass_untouched),
	    cmocka_unit_test(
	        test_chunks_assemble_across_reads_split_at_every_byte),
	    cmocka_unit_test(test_large_chunks_assemble_in_odd_splits),
	    cmocka_unit_test(
	        test_interleaved_messages_assemble_in_the_order_they_end),
	    cmocka_unit_test(
	        test_hostile_chunks_close_the_channel_and_are_counted),
	    cmocka_unit_test(
	        test_stream_ending_inside_a_message_fails_and_frees_it),
	    cmocka_unit_test(test_declared_total_is_not_reserved),
	    cmocka_unit_test(test_codec_removed_or_closed_inside_its_event),
	    cmocka_unit_test(
	        test_small_body_overtakes_a_large_one_within_the_window),
	    cmocka_unit_test(test_window_bounds_the_unwritten_bytes),
	    cmocka_unit_test(
	        test_bodies_within_chunk_bytes_or_with_send_off_leave_whole),
	    cmocka_unit_test(
	        test_write_stopped_mid_message_calls_back_once_with_eclosed),
	    cmocka_unit_test(
	        test_chunked_bodies_leave_in_order_with_ids_counting_up),
	    cmocka_unit_test(test_bodies_of_many_sizes_round_trip),
	    cmocka_unit_test(test_envelopes_round_trip_over_chunks),
	    cmocka_unit_test(test_options_are_checked),
	};

	fx_log_capture();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
