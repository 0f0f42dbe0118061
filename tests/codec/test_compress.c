/* SPDX-License-Identifier: MIT */
/*
 * test_compress.c: compressed frame bodies (weft/compress.h): the pure
 * encode and decode, the codec after a frame codec over a bufferevent
 * pair (what it writes read back from the peer by hand, hostile bodies
 * written by hand), and two pipelines with envelope codecs on top over an
 * in-process pair.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include <weft/compress.h>
#include <weft/envelope.h>
#include <weft/frame.h>
#include <weft/transport.h>

#include "alloc_count.h"
#include "fixture.h"
#include "support/wire.h"

#define HDR WEFT_COMPRESS_HEADER_BYTES
#define LZ4 WEFT_COMPRESS_LZ4
#define ZSTD WEFT_COMPRESS_ZSTD

/* ---- Test data ---------------------------------------------------------- */

/* JSON-like text, which compresses a few times over. */
static void
fill_text(unsigned char *p, size_t n, uint64_t seed)
{
	static const char *const words[] = {
	    "{\"id\":",     "\"name\":\"weft\",", "\"verb\":16,",
	    "\"ok\":true,", "\"items\":[1,2,3],", "}\n"};
	uint64_t s = seed;
	size_t k = 0, len;
	const char *w;

	while (k < n) {
		w = words[fx_rand(&s) % 6];
		len = strlen(w) < n - k ? strlen(w) : n - k;
		memcpy(p + k, w, len);
		k += len;
	}
}

/* Random bytes, which do not compress; never starting c1. */
static void
fill_random(unsigned char *p, size_t n, uint64_t seed)
{
	uint64_t s = seed * 7919 + 1;
	size_t k;

	for (k = 0; k < n; k++)
		p[k] = (unsigned char)(fx_rand(&s) >> 13);
	if (n > 0)
		p[0] = 'R';
}

/* A compressed body of the text of seed (len bytes), in a buffer the
 * caller frees; its length in *n. */
static unsigned char *
compressed_text(int alg, size_t len, uint64_t seed, size_t *n)
{
	struct evbuffer *out = evbuffer_new();
	unsigned char *raw = malloc(len), *body;
	long rv;

	assert_non_null(raw);
	fill_text(raw, len, seed);
	rv = weft_compress_encode(out, alg, 0, 0, raw, len);
	assert_true(rv > 0);
	*n = (size_t)rv;
	assert_int_equal(evbuffer_get_length(out), *n);
	body = malloc(*n);
	assert_non_null(body);
	evbuffer_remove(out, body, *n);
	evbuffer_free(out);
	free(raw);
	return body;
}

/* ---- The pure functions ------------------------------------------------- */

static void
test_names_parse_both_ways(void **state)
{
	int alg = -1;

	(void)state;
	assert_string_equal(weft_compress_name(WEFT_COMPRESS_NONE), "none");
	assert_string_equal(weft_compress_name(LZ4), "lz4");
	assert_string_equal(weft_compress_name(ZSTD), "zstd");
	assert_null(weft_compress_name(3));
	assert_null(weft_compress_name(-1));
	assert_int_equal(weft_compress_parse("zstd", &alg), 0);
	assert_int_equal(alg, ZSTD);
	assert_int_equal(weft_compress_parse("lz4", &alg), 0);
	assert_int_equal(alg, LZ4);
	assert_int_equal(weft_compress_parse("none", &alg), 0);
	assert_int_equal(alg, WEFT_COMPRESS_NONE);
	assert_int_equal(weft_compress_parse("LZ4", &alg), WEFT_EINVAL);
	assert_int_equal(weft_compress_parse("gzip", &alg), WEFT_EINVAL);
	assert_int_equal(weft_compress_parse(NULL, &alg), WEFT_EINVAL);
	assert_int_equal(alg, WEFT_COMPRESS_NONE);
}

/* Encodes text of len bytes with alg, checks the header, decodes it back
 * and compares. */
static void
encode_decode(int alg, size_t len)
{
	struct evbuffer *out = evbuffer_new(), *back = evbuffer_new();
	unsigned char *raw = malloc(len), *body, *got = malloc(len);
	const char *why = NULL;
	long n;

	fill_text(raw, len, len);
	n = weft_compress_encode(out, alg, 0, 0, raw, len);
	assert_true(n > HDR);
	assert_true((size_t)n < len);
	assert_int_equal(evbuffer_get_length(out), (size_t)n);
	body = evbuffer_pullup(out, -1);
	assert_int_equal(body[0], 0xc1);
	assert_int_equal(body[1], 0x01);
	assert_int_equal(body[2], alg);
	assert_int_equal(weft_test_get_be32(body + 3), len);
	assert_int_equal(
	    weft_compress_decode(back, body, (size_t)n, 0, 0, 0, &why), 0);
	assert_int_equal(evbuffer_get_length(back), len);
	/* Decoded contiguous, in one piece. */
	assert_int_equal(evbuffer_peek(back, -1, NULL, NULL, 0), 1);
	evbuffer_remove(back, got, len);
	assert_memory_equal(got, raw, len);
	evbuffer_free(out);
	evbuffer_free(back);
	free(raw);
	free(got);
}

static void
test_encode_and_decode_round_trip(void **state)
{
	static const size_t lens[] = {100, 512, 4096, 4097, 100000, 3 << 20};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		encode_decode(LZ4, lens[i]);
		encode_decode(ZSTD, lens[i]);
	}
}

static void
test_encode_leaves_out_alone_without_gain(void **state)
{
	static unsigned char raw[100000];
	struct evbuffer *out = evbuffer_new();

	(void)state;
	evbuffer_add(out, "x", 1);
	fill_random(raw, sizeof(raw), 1);
	assert_int_equal(weft_compress_encode(out, LZ4, 0, 0, raw, 3000), 0);
	assert_int_equal(weft_compress_encode(out, ZSTD, 0, 0, raw, 3000), 0);
	assert_int_equal(
	    weft_compress_encode(out, ZSTD, 0, 0, raw, sizeof(raw)), 0);
	fill_text(raw, sizeof(raw), 2);
	/* Too short to gain, or no algorithm. */
	assert_int_equal(weft_compress_encode(out, LZ4, 0, 0, raw, HDR + 1), 0);
	assert_int_equal(
	    weft_compress_encode(out, WEFT_COMPRESS_NONE, 0, 0, raw, 1000), 0);
	assert_int_equal(evbuffer_get_length(out), 1);
	/* Zeros compress past the ratio of 255 with zstd: left plain,
	 * unless the ratio allows it. */
	memset(raw, 0, sizeof(raw));
	assert_int_equal(
	    weft_compress_encode(out, ZSTD, 0, 0, raw, sizeof(raw)), 0);
	assert_int_equal(evbuffer_get_length(out), 1);
	assert_true(weft_compress_encode(out, ZSTD, 0, UINT32_MAX, raw,
	                                 sizeof(raw)) > 0);
	/* Misuse. */
	assert_int_equal(weft_compress_encode(out, 3, 0, 0, raw, 1000),
	                 WEFT_EINVAL);
	assert_int_equal(weft_compress_encode(NULL, LZ4, 0, 0, raw, 1000),
	                 WEFT_EINVAL);
	evbuffer_free(out);
}

/* The level changes what zstd makes; both decode. */
static void
test_levels_are_used(void **state)
{
	static unsigned char raw[200000];
	struct evbuffer *fast = evbuffer_new(), *best = evbuffer_new();
	long a, b;

	(void)state;
	fill_text(raw, sizeof(raw), 3);
	a = weft_compress_encode(fast, ZSTD, 1, 0, raw, sizeof(raw));
	b = weft_compress_encode(best, ZSTD, 19, 0, raw, sizeof(raw));
	assert_true(a > 0 && b > 0);
	assert_true(b < a);
	a = weft_compress_encode(fast, LZ4, 1, 0, raw, sizeof(raw));
	b = weft_compress_encode(best, LZ4, 60, 0, raw, sizeof(raw));
	assert_true(a > 0 && b > 0);
	assert_true(b > a); /* more acceleration, less compression */
	evbuffer_free(fast);
	evbuffer_free(best);
}

/* decode of body (len bytes) fails with err and leaves out empty. */
static void
decode_fails(const unsigned char *body, size_t len, unsigned accept, size_t max,
             uint32_t ratio, int err, const char *why_has)
{
	struct evbuffer *out = evbuffer_new();
	const char *why = NULL;

	assert_int_equal(
	    weft_compress_decode(out, body, len, accept, max, ratio, &why),
	    err);
	assert_non_null(why);
	if (why_has != NULL && strstr(why, why_has) == NULL)
		fail_msg("'%s' does not say '%s'", why, why_has);
	assert_int_equal(evbuffer_get_length(out), 0);
	evbuffer_free(out);
}

static void
test_decode_checks_every_bound(void **state)
{
	struct evbuffer *out = evbuffer_new();
	unsigned char *lz, *zs, bad[64 + HDR];
	size_t nlz, nzs;

	(void)state;
	lz = compressed_text(LZ4, 5000, 1, &nlz);
	zs = compressed_text(ZSTD, 5000, 1, &nzs);
	assert_int_equal(weft_compress_decode(out, lz, nlz, 0, 0, 0, NULL), 0);
	assert_int_equal(weft_compress_decode(out, zs, nzs, 0, 0, 0, NULL), 0);
	assert_int_equal(evbuffer_get_length(out), 10000);
	decode_fails((const unsigned char *)"plain", 5, 0, 0, 0, WEFT_EPROTO,
	             "not a compressed");
	decode_fails(lz, HDR - 1, 0, 0, 0, WEFT_EPROTO, "truncated");
	decode_fails(lz, HDR, 0, 0, 0, WEFT_EPROTO, "no compressed bytes");
	decode_fails(lz, nlz, 1u << ZSTD, 0, 0, WEFT_EPROTO, "not accepted");
	decode_fails(zs, nzs, 1u << LZ4, 0, 0, WEFT_EPROTO, "not accepted");
	decode_fails(lz, nlz, 0, 4999, 0, WEFT_ETOOBIG, "body limit");
	assert_int_equal(weft_compress_decode(out, lz, nlz, 0, 5000, 0, NULL),
	                 0);
	/* 5000 bytes from fewer than 5000 / 2 compressed bytes. */
	decode_fails(lz, nlz, 0, 0, 2, WEFT_ETOOBIG, "max_ratio");
	memcpy(bad, lz, HDR);
	memset(bad + HDR, 0, 64);
	bad[2] = 3;
	decode_fails(bad, HDR + 64, 0, 0, 0, WEFT_EPROTO, "unknown");
	bad[2] = 0;
	decode_fails(bad, HDR + 64, 0, 0, 0, WEFT_EPROTO, "unknown");
	bad[2] = LZ4;
	weft_test_put_be32(bad + 3, 0);
	decode_fails(bad, HDR + 64, 0, 0, 0, WEFT_EPROTO, "raw_len 0");
	assert_int_equal(weft_compress_decode(NULL, lz, nlz, 0, 0, 0, NULL),
	                 WEFT_EINVAL);
	free(lz);
	free(zs);
	evbuffer_free(out);
}

static void
test_decode_refuses_wrong_lengths_and_corrupt_data(void **state)
{
	unsigned char *lz, *zs, *p;
	size_t nlz, nzs;

	(void)state;
	lz = compressed_text(LZ4, 5000, 2, &nlz);
	zs = compressed_text(ZSTD, 5000, 2, &nzs);
	/* raw_len one short and one long of the truth. */
	weft_test_put_be32(lz + 3, 4999);
	decode_fails(lz, nlz, 0, 0, 0, WEFT_EPROTO, "LZ4");
	weft_test_put_be32(lz + 3, 5001);
	decode_fails(lz, nlz, 0, 0, 0, WEFT_EPROTO, "shorter");
	weft_test_put_be32(zs + 3, 4999);
	decode_fails(zs, nzs, 0, 0, 0, WEFT_EPROTO, "content size");
	weft_test_put_be32(zs + 3, 5001);
	decode_fails(zs, nzs, 0, 0, 0, WEFT_EPROTO, "content size");
	weft_test_put_be32(lz + 3, 5000);
	weft_test_put_be32(zs + 3, 5000);
	/* Cut short, or with bytes after the data. */
	decode_fails(lz, nlz - 1, 0, 0, 0, WEFT_EPROTO, "LZ4");
	decode_fails(zs, nzs - 1, 0, 0, 0, WEFT_EPROTO, "zstd");
	p = malloc(nzs * 2 - HDR);
	memcpy(p, zs, nzs);
	memcpy(p + nzs, zs + HDR, nzs - HDR); /* a second frame */
	decode_fails(p, nzs * 2 - HDR, 0, 0, 0, WEFT_EPROTO, "one zstd frame");
	p[nzs] = 0;
	decode_fails(p, nzs + 1, 0, 0, 0, WEFT_EPROTO, "one zstd frame");
	free(p);
	/* Garbage for data. */
	memset(lz + HDR, 0xf0, nlz - HDR);
	decode_fails(lz, nlz, 0, 0, 0, WEFT_EPROTO, "corrupt LZ4");
	zs[HDR] ^= 0xff; /* the frame's magic number */
	decode_fails(zs, nzs, 0, 0, 0, WEFT_EPROTO, "not a zstd frame");
	free(lz);
	free(zs);
}

/* A body that decompresses to c1 01 ...: refused, also by the pure
 * decode. */
static unsigned char *
nested_body(int alg, size_t *n)
{
	unsigned char raw[2000];
	struct evbuffer *out = evbuffer_new();
	unsigned char *body;
	long rv;

	memset(raw, 'a', sizeof(raw));
	raw[0] = 0xc1;
	raw[1] = 0x01;
	rv = weft_compress_encode(out, alg, 0, 0, raw, sizeof(raw));
	assert_true(rv > 0);
	*n = (size_t)rv;
	body = malloc(*n);
	evbuffer_remove(out, body, *n);
	evbuffer_free(out);
	return body;
}

static void
test_decode_refuses_a_compressed_body_inside(void **state)
{
	unsigned char *b;
	size_t n;

	(void)state;
	b = nested_body(LZ4, &n);
	decode_fails(b, n, 0, 0, 0, WEFT_EPROTO, "inside");
	free(b);
	b = nested_body(ZSTD, &n);
	decode_fails(b, n, 0, 0, 0, WEFT_EPROTO, "inside");
	free(b);
}

/* ---- Threads ------------------------------------------------------------ */

static void *
compress_on_a_thread(void *arg)
{
	size_t i;

	(void)arg;
	for (i = 0; i < 3; i++) {
		encode_decode(LZ4, 3000 + i);
		encode_decode(ZSTD, 30000 + i);
	}
	return NULL;
}

/* Each thread makes its contexts and frees them as it ends (LeakSanitizer
 * checks that in the sanitizer builds). */
static void
test_threads_compress_with_contexts_of_their_own(void **state)
{
	pthread_t t[4];
	int i;

	(void)state;
	for (i = 0; i < 4; i++)
		assert_int_equal(
		    pthread_create(&t[i], NULL, compress_on_a_thread, NULL), 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
}

/* ---- The codec over a bufferevent pair ---------------------------------- */

static fx *
z_fixture(const weft_frame_codec_opts *fo, const weft_compress_codec_opts *zo)
{
	fx *f = fx_new();

	assert_int_equal(weft_frame_codec_add(f->ch, "frame", fo), 0);
	assert_int_equal(weft_compress_codec_add(f->ch, "z", zo), 0);
	f->stats_name = "z";
	fx_start(f);
	return f;
}

/* Appends body (len bytes) as one frame to buf. */
static void
put_frame(struct evbuffer *buf, const void *body, size_t len)
{
	unsigned char hdr[4];

	weft_test_put_be32(hdr, (uint32_t)len);
	evbuffer_add(buf, hdr, 4);
	evbuffer_add(buf, body, len);
}

/* The peer sends body (len bytes) as one frame. */
static void
send_frame(fx *f, const void *body, size_t len)
{
	struct evbuffer *buf = evbuffer_new();

	put_frame(buf, body, len);
	fx_send(f, evbuffer_pullup(buf, -1), evbuffer_get_length(buf));
	evbuffer_free(buf);
}

/* Takes the next frame the channel wrote, waiting for it; returns its
 * body (to free) and its length in *n. */
static unsigned char *
next_frame(fx *f, size_t *n)
{
	unsigned char hdr[4], *body;

	fx_run_until_peer_has(f, 4);
	evbuffer_copyout(fx_peer_input(f), hdr, 4);
	*n = weft_test_get_be32(hdr);
	fx_run_until_peer_has(f, 4 + *n);
	evbuffer_drain(fx_peer_input(f), 4);
	body = malloc(*n + 1);
	assert_non_null(body);
	evbuffer_remove(fx_peer_input(f), body, *n);
	return body;
}

/* The next frame holds raw (len bytes) as it is. */
static void
expect_plain(fx *f, const unsigned char *raw, size_t len)
{
	size_t n;
	unsigned char *body = next_frame(f, &n);

	assert_int_equal(n, len);
	assert_memory_equal(body, raw, len);
	free(body);
}

/* The next frame holds raw (len bytes) compressed with alg; returns the
 * frame's body length. */
static size_t
expect_compressed(fx *f, int alg, const unsigned char *raw, size_t len)
{
	struct evbuffer *back = evbuffer_new();
	unsigned char *body = next_frame(f, &len), *got;
	size_t n = len, raw_len;

	raw_len = weft_test_get_be32(body + 3);
	if (n < HDR || body[0] != 0xc1 || body[1] != 0x01)
		fail_msg("a frame of %zu bytes is not compressed", n);
	assert_int_equal(body[2], alg);
	assert_true(n < raw_len);
	assert_int_equal(weft_compress_decode(back, body, n, 0, 0, 0, NULL), 0);
	assert_int_equal(evbuffer_get_length(back), raw_len);
	got = evbuffer_pullup(back, -1);
	assert_memory_equal(got, raw, raw_len);
	evbuffer_free(back);
	free(body);
	return n;
}

/* Writes len bytes at p from the end of the pipeline: as an evbuffer, a
 * byte run, or in place (how: 0, 1, 2). */
static void
write_as(fx *f, int how, const unsigned char *p, size_t len)
{
	weft_ctx *end = weft_pipeline_get(f->ch, "sink");
	struct evbuffer *b;
	weft_bytes run = {p, len};
	unsigned char *room;

	if (how == 0) {
		b = evbuffer_new();
		evbuffer_add(b, p, len);
		weft_ctx_write(end, &weft_msg_evbuffer, b, fx_write_cb, f);
		assert_int_equal(evbuffer_get_length(b), 0);
		evbuffer_free(b);
	} else if (how == 1) {
		weft_ctx_write(end, &weft_msg_bytes, &run, fx_write_cb, f);
	} else {
		/* A reservation larger than what is written, as an encoder
		 * that does not know its size makes. */
		room = weft_ctx_reserve(end, len + 100);
		assert_non_null(room);
		memcpy(room, p, len);
		weft_ctx_commit(end, len, fx_write_cb, f);
	}
	weft_ctx_flush(end);
}

static void
test_bodies_below_min_bytes_leave_plain(void **state)
{
	weft_compress_codec_opts zo = {.alg = LZ4, .min_bytes = 600};
	static unsigned char raw[4000];
	weft_compress_stats st;
	int how;
	fx *f = z_fixture(NULL, &zo);

	(void)state;
	fill_text(raw, sizeof(raw), 4);
	for (how = 0; how < 3; how++) {
		write_as(f, how, raw, 599);
		expect_plain(f, raw, 599);
		write_as(f, how, raw, 600);
		expect_compressed(f, LZ4, raw, 600);
		write_as(f, how, raw, 4000);
		expect_compressed(f, LZ4, raw, 4000);
	}
	fx_run_until_write_cbs(f, 9);
	assert_int_equal(f->write_cbs, 9);
	assert_int_equal(f->write_status, 0);
	assert_int_equal(weft_compress_codec_get_stats(f->ch, "z", &st), 0);
	assert_int_equal(st.compressed_out, 6);
	/* Below min_bytes is not skipping. */
	assert_int_equal(st.skipped_out, 0);
	fx_free(f);
}

/* With alg NONE, every body leaves plain, however large, and none
 * counts as skipped. */
static void
test_alg_none_leaves_everything_plain(void **state)
{
	weft_compress_codec_opts zo = {.accept = 1u << LZ4};
	static unsigned char raw[10000];
	weft_compress_stats st;
	int how;
	fx *f = z_fixture(NULL, &zo);

	(void)state;
	fill_text(raw, sizeof(raw), 5);
	for (how = 0; how < 3; how++) {
		write_as(f, how, raw, 1000);
		expect_plain(f, raw, 1000);
		write_as(f, how, raw, 10000);
		expect_plain(f, raw, 10000);
	}
	assert_int_equal(weft_compress_codec_get_stats(f->ch, "z", &st), 0);
	assert_int_equal(st.compressed_out, 0);
	assert_int_equal(st.skipped_out, 0);
	assert_int_equal(st.raw_out, 3 * 11000);
	assert_int_equal(st.wire_out, 3 * 11000);
	fx_free(f);
}

/* Every body the codec writes, read back through the same pipeline (its
 * compress codec accepts what it writes): the bodies come out as they
 * went in, and the counters of both directions agree. */
static void
loop_back(int alg, int how)
{
	static const size_t lens[] = {100,  511,  512,   1000,
	                              4096, 4097, 50000, 300000};
	weft_compress_codec_opts zo = {.alg = alg};
	static unsigned char raw[300000], got[300000];
	struct evbuffer *wire = evbuffer_new();
	size_t i, n, raw_total = 0, wire_total = 0, compressed = 0;
	weft_compress_stats st;
	weft_codec_stats cs;
	unsigned char *body;
	fx *f = z_fixture(NULL, &zo);

	fill_text(raw, sizeof(raw), 6);
	for (i = 0; i < 8; i++) {
		write_as(f, how, raw, lens[i]);
		body = next_frame(f, &n);
		compressed += n != lens[i];
		if (lens[i] >= 512)
			assert_int_equal(body[0], 0xc1);
		else
			assert_int_equal(n, lens[i]);
		put_frame(wire, body, n);
		raw_total += lens[i];
		wire_total += n;
		free(body);
	}
	assert_int_equal(compressed, 6);
	assert_int_equal(weft_compress_codec_get_stats(f->ch, "z", &st), 0);
	assert_int_equal(st.raw_out, raw_total);
	assert_int_equal(st.wire_out, wire_total);
	assert_true(wire_total < raw_total / 2);
	assert_int_equal(st.compressed_out, 6);
	assert_int_equal(st.skipped_out, 0);
	assert_int_equal(st.raw_in + st.wire_in + st.compressed_in, 0);
	fx_send(f, evbuffer_pullup(wire, -1), evbuffer_get_length(wire));
	assert_int_equal(f->errors, 0);
	assert_int_equal(f->msgs, 8);
	for (i = 0; i < 8; i++) {
		assert_int_equal(f->lens[i], lens[i]);
		fx_msg(f, i, got);
		assert_memory_equal(got, raw, lens[i]);
	}
	assert_int_equal(weft_compress_codec_get_stats(f->ch, "z", &st), 0);
	assert_int_equal(st.raw_in, raw_total);
	assert_int_equal(st.wire_in, wire_total);
	assert_int_equal(st.compressed_in, 6);
	assert_int_equal(weft_codec_get_stats(f->ch, "z", &cs), 0);
	assert_int_equal(cs.msgs_in, 8);
	assert_int_equal(cs.bytes_in, raw_total);
	assert_int_equal(cs.msgs_out, 8);
	assert_int_equal(cs.bytes_out, raw_total);
	assert_int_equal(f->write_cbs, 8);
	evbuffer_free(wire);
	fx_free(f);
}

static void
test_bodies_loop_back_through_lz4(void **state)
{
	int how;

	(void)state;
	for (how = 0; how < 3; how++)
		loop_back(LZ4, how);
}

static void
test_bodies_loop_back_through_zstd(void **state)
{
	int how;

	(void)state;
	for (how = 0; how < 3; how++)
		loop_back(ZSTD, how);
}

/* Small decompressed bodies come as the kind their frames came as: byte
 * runs from a frame codec with emit_bytes, else evbuffers; large ones
 * always in an evbuffer. */
static void
test_bodies_come_as_the_kind_their_frames_came_as(void **state)
{
	weft_compress_codec_opts zo = {.alg = ZSTD};
	weft_frame_codec_opts fo = {.emit_bytes = true};
	unsigned char *small, *large, raw[9000], got[9000];
	struct evbuffer *wire = evbuffer_new();
	size_t ns, nl;
	int emit;
	fx *f;

	(void)state;
	small = compressed_text(ZSTD, 4096, 7, &ns);
	large = compressed_text(ZSTD, 9000, 7, &nl);
	fill_text(raw, sizeof(raw), 7);
	for (emit = 0; emit < 2; emit++) {
		fo.emit_bytes = emit;
		f = z_fixture(&fo, &zo);
		put_frame(wire, small, ns);
		put_frame(wire, large, nl);
		put_frame(wire, "plain", 5);
		fx_send(f, evbuffer_pullup(wire, -1),
		        evbuffer_get_length(wire));
		evbuffer_drain(wire, evbuffer_get_length(wire));
		assert_int_equal(f->errors, 0);
		assert_int_equal(f->msgs, 3);
		assert_int_equal(f->byte_runs, emit ? 2 : 0);
		fx_msg(f, 0, got);
		assert_memory_equal(got, raw, 4096);
		fx_msg(f, 1, got);
		assert_memory_equal(got, raw, 9000);
		fx_msg(f, 2, got);
		assert_memory_equal(got, "plain", 5);
		fx_free(f);
	}
	free(small);
	free(large);
	evbuffer_free(wire);
}

/* A body compressed already (it starts c1 01) leaves as it is. */
static void
test_compressed_bodies_are_not_compressed_again(void **state)
{
	weft_compress_codec_opts zo = {.alg = LZ4, .min_bytes = 16};
	weft_compress_stats st;
	unsigned char *b;
	size_t n;
	int how;
	fx *f = z_fixture(NULL, &zo);

	(void)state;
	b = nested_body(LZ4, &n);
	assert_true(n >= 16);
	for (how = 0; how < 3; how++) {
		write_as(f, how, b, n);
		expect_plain(f, b, n);
	}
	assert_int_equal(weft_compress_codec_get_stats(f->ch, "z", &st), 0);
	assert_int_equal(st.compressed_out, 0);
	assert_int_equal(st.skipped_out, 0);
	free(b);
	fx_free(f);
}

/* ---- Backing off on bodies that do not compress ------------------------ */

/* Writes a body of kind 'R' (random) or 'T' (text), 1000 bytes, and
 * checks whether it left compressed ('C') or plain ('P'). */
static void
step(fx *f, int how, char kind, char want, uint64_t seed)
{
	unsigned char raw[1000];

	if (kind == 'R')
		fill_random(raw, sizeof(raw), seed);
	else
		fill_text(raw, sizeof(raw), seed);
	write_as(f, how, raw, sizeof(raw));
	if (want == 'C')
		expect_compressed(f, LZ4, raw, sizeof(raw));
	else
		expect_plain(f, raw, sizeof(raw));
}

/* Runs a script of bodies: each pair of characters a kind and what it
 * must leave as. */
static void
run_script(fx *f, int how, const char *script, uint64_t *seed)
{
	for (; script[0] != '\0'; script += 2)
		step(f, how, script[0], script[1], (*seed)++);
}

static void
backs_off(int how)
{
	weft_compress_codec_opts zo = {.alg = LZ4};
	weft_compress_stats st;
	uint64_t seed = 1;
	int i;
	fx *f = z_fixture(NULL, &zo);

	/* A failure skips 1, the next 2, then 4; text that compresses
	 * resets it. */
	run_script(f, how,
	           "RPTPTC"
	           "RPRPRPTPTPTC"
	           "TC",
	           &seed);
	assert_int_equal(weft_compress_codec_get_stats(f->ch, "z", &st), 0);
	assert_int_equal(st.compressed_out, 3);
	assert_int_equal(st.skipped_out, 7);
	/* Eight failures in a row: skips of 1, 2, 4, ..., 64, and 64 again,
	 * not 128. */
	for (i = 0; i < 8 + 1 + 2 + 4 + 8 + 16 + 32 + 64; i++)
		step(f, how, 'R', 'P', seed++);
	for (i = 0; i < 64; i++)
		step(f, how, 'T', 'P', seed++);
	step(f, how, 'T', 'C', seed++);
	assert_int_equal(weft_compress_codec_get_stats(f->ch, "z", &st), 0);
	assert_int_equal(st.compressed_out, 4);
	assert_int_equal(st.skipped_out, 7 + 135 + 64);
	fx_run_until_write_cbs(f, 10 + 135 + 65);
	assert_int_equal(f->write_cbs, 10 + 135 + 65);
	fx_free(f);
}

static void
test_incompressible_bodies_back_off(void **state)
{
	(void)state;
	backs_off(0);
	backs_off(1);
	backs_off(2);
}

/*
 * An in-place write that will leave plain (below min_bytes, or skipped)
 * gets the next handler's room itself, the very address a reservation
 * straight from the frame codec has: no copy. One that may compress gets
 * room of its own past it. A reservation not committed is dropped, and
 * the next one starts where it did.
 */
static void
test_in_place_plain_bodies_are_written_where_they_leave(void **state)
{
	weft_compress_codec_opts zo = {.alg = LZ4};
	unsigned char *plain, *room, raw[1000];
	weft_ctx *end;
	fx *f = z_fixture(NULL, &zo);

	(void)state;
	end = weft_pipeline_get(f->ch, "sink");
	plain = weft_ctx_reserve(end, 100); /* below min_bytes: dropped */
	room = weft_ctx_reserve(end, 1000);
	assert_ptr_equal(room, plain + 1000);
	fill_random(raw, sizeof(raw), 17);
	memcpy(room, raw, sizeof(raw));
	weft_ctx_commit(end, sizeof(raw), fx_write_cb, f);
	weft_ctx_flush(end);
	expect_plain(f, raw, sizeof(raw));
	/* It did not compress: the next one is skipped, written in place. */
	plain = weft_ctx_reserve(end, 100);
	room = weft_ctx_reserve(end, 1000);
	assert_ptr_equal(room, plain);
	fill_text(raw, sizeof(raw), 17);
	memcpy(room, raw, sizeof(raw));
	weft_ctx_commit(end, sizeof(raw), fx_write_cb, f);
	weft_ctx_flush(end);
	expect_plain(f, raw, sizeof(raw));
	write_as(f, 2, raw, sizeof(raw));
	expect_compressed(f, LZ4, raw, sizeof(raw));
	fx_run_until_write_cbs(f, 3);
	assert_int_equal(f->write_cbs, 3);
	fx_free(f);
}

/* Incompressible bodies leave as they came: wire bytes equal raw bytes. */
static void
test_random_bodies_leave_plain(void **state)
{
	weft_compress_codec_opts zo = {.alg = ZSTD};
	static unsigned char raw[100000];
	weft_compress_stats st;
	int how;
	fx *f = z_fixture(NULL, &zo);

	(void)state;
	fill_random(raw, sizeof(raw), 8);
	for (how = 0; how < 3; how++) {
		write_as(f, how, raw, sizeof(raw));
		expect_plain(f, raw, sizeof(raw));
	}
	assert_int_equal(weft_compress_codec_get_stats(f->ch, "z", &st), 0);
	assert_int_equal(st.compressed_out, 0);
	assert_int_equal(st.skipped_out, 3);
	assert_int_equal(st.raw_out, 3 * sizeof(raw));
	assert_int_equal(st.wire_out, 3 * sizeof(raw));
	fx_free(f);
}

/* ---- Write callbacks on failure paths ---------------------------------- */

/* A frame codec that refuses frames above 1500 bytes: a body that does
 * not compress below that fails its write once, on every path; one that
 * does goes. */
static void
test_refused_writes_call_back_once(void **state)
{
	weft_compress_codec_opts zo = {.alg = LZ4};
	weft_frame_codec_opts fo = {.max_frame_bytes = 1500};
	unsigned char raw[3000];
	int how, cbs = 0;
	fx *f = z_fixture(&fo, &zo);

	(void)state;
	for (how = 0; how < 3; how++) {
		fill_random(raw, sizeof(raw), (uint64_t)how);
		write_as(f, how, raw, sizeof(raw));
		fx_run_until_write_cbs(f, ++cbs);
		assert_int_equal(f->write_status, WEFT_ETOOBIG);
		fill_text(raw, sizeof(raw), (uint64_t)how);
		/* Skipped after the failure: plain, so refused too. */
		write_as(f, how, raw, sizeof(raw));
		fx_run_until_write_cbs(f, ++cbs);
		assert_int_equal(f->write_status, WEFT_ETOOBIG);
		write_as(f, how, raw, sizeof(raw));
		expect_compressed(f, LZ4, raw, sizeof(raw));
		fx_run_until_write_cbs(f, ++cbs);
		assert_int_equal(f->write_status, 0);
		assert_int_equal(f->write_cbs, cbs);
	}
	assert_int_equal(evbuffer_get_length(fx_peer_input(f)), 0);
	fx_free(f);
}

/* Writes on a channel that closed: every path calls back once with
 * WEFT_ECLOSED. */
static void
test_writes_after_close_call_back_once(void **state)
{
	weft_compress_codec_opts zo = {.alg = ZSTD};
	unsigned char raw[20000];
	int how;
	fx *f = z_fixture(NULL, &zo);

	(void)state;
	fill_text(raw, sizeof(raw), 9);
	weft_channel_close(f->ch);
	for (how = 0; how < 3; how++) {
		write_as(f, how, raw, 100);
		write_as(f, how, raw, 2000);
		write_as(f, how, raw, 20000);
	}
	fx_run_until_inactive(f);
	fx_run_until_write_cbs(f, 9);
	assert_int_equal(f->write_cbs, 9);
	assert_int_equal(f->write_status, WEFT_ECLOSED);
	fx_free(f);
}

/* ---- Hostile input ------------------------------------------------------ */

/*
 * The peer sends body (len bytes) in a frame, then a valid compressed
 * one, in one read, to a codec with options zo (a write waits for its
 * callback meanwhile): the channel fails with err and closes, counted and
 * logged once naming why_has, nothing is delivered, the write calls back
 * once.
 */
static void
refused_counting(const weft_compress_codec_opts *zo, const unsigned char *body,
                 size_t len, int err, const char *why_has, size_t *alloc)
{
	struct evbuffer *wire = evbuffer_new();
	int warnings = fx_warnings();
	unsigned char *good, text[3000];
	size_t ngood;
	fx *f = z_fixture(NULL, zo);

	good = compressed_text(LZ4, 3000, 10, &ngood);
	fill_text(text, sizeof(text), 10);
	evbuffer_add(wire, text, sizeof(text));
	assert_int_equal(weft_channel_write(f->ch, wire, fx_write_cb, f), 0);
	put_frame(wire, body, len);
	put_frame(wire, good, ngood);
	if (alloc != NULL)
		alloc_count_start();
	fx_send(f, evbuffer_pullup(wire, -1), evbuffer_get_length(wire));
	if (alloc != NULL)
		*alloc = alloc_count_stop();
	assert_int_equal(f->msgs, 0);
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, err);
	assert_int_equal(f->err_stats.too_big, err == WEFT_ETOOBIG);
	assert_int_equal(f->err_stats.malformed, err == WEFT_EPROTO);
	assert_int_equal(fx_warnings(), warnings + (zo->quiet ? 0 : 1));
	if (!zo->quiet) {
		assert_non_null(strstr(fx_last_warning(), "test-peer"));
		assert_non_null(strstr(fx_last_warning(), "compress"));
		if (strstr(fx_last_warning(), why_has) == NULL)
			fail_msg("'%s' does not say '%s'", fx_last_warning(),
			         why_has);
	}
	fx_run_until_inactive(f);
	fx_run_until_write_cbs(f, 1);
	assert_int_equal(f->write_cbs, 1);
	assert_int_equal(f->errors, 1);
	free(good);
	evbuffer_free(wire);
	fx_free(f);
}

static void
expect_refused(const weft_compress_codec_opts *zo, const unsigned char *body,
               size_t len, int err, const char *why_has)
{
	refused_counting(zo, body, len, err, why_has, NULL);
}

static const weft_compress_codec_opts both = {
    .alg = LZ4, .accept = (1u << LZ4) | (1u << ZSTD)};

static void
test_wrong_raw_lengths_close_the_channel(void **state)
{
	unsigned char *lz, *zs;
	size_t nlz, nzs;

	(void)state;
	lz = compressed_text(LZ4, 5000, 11, &nlz);
	zs = compressed_text(ZSTD, 5000, 11, &nzs);
	weft_test_put_be32(lz + 3, 4999);
	expect_refused(&both, lz, nlz, WEFT_EPROTO, "LZ4");
	weft_test_put_be32(lz + 3, 5001);
	expect_refused(&both, lz, nlz, WEFT_EPROTO, "shorter than raw_len");
	weft_test_put_be32(zs + 3, 4999);
	expect_refused(&both, zs, nzs, WEFT_EPROTO, "content size");
	weft_test_put_be32(zs + 3, 5001);
	expect_refused(&both, zs, nzs, WEFT_EPROTO, "content size");
	free(lz);
	free(zs);
}

static void
test_raw_length_above_the_limit_allocates_nothing(void **state)
{
	weft_compress_codec_opts zo = both;
	unsigned char *zs;
	size_t nzs, bytes;

	(void)state;
	alloc_count_setup();
	zs = compressed_text(ZSTD, 3000, 12, &nzs);
	/* 64 MiB claimed, above max_body_bytes. */
	zo.max_body_bytes = 1 << 20;
	weft_test_put_be32(zs + 3, 64u << 20);
	refused_counting(&zo, zs, nzs, WEFT_ETOOBIG, "body limit", &bytes);
	print_message("a 64 MiB claim refused: %zu bytes allocated\n", bytes);
	assert_true(bytes < (1u << 20));
	/* 1 GiB claimed by a few bytes: the ratio. */
	weft_test_put_be32(zs + 3, 1u << 30);
	refused_counting(&both, zs, 40, WEFT_ETOOBIG, "max_ratio", &bytes);
	print_message("a 1 GiB claim refused: %zu bytes allocated\n", bytes);
	assert_true(bytes < (1u << 20));
	/* Past the default limit, WEFT_FRAME_LIMIT, with a ratio that
	 * allows it. */
	zo = both;
	zo.max_ratio = UINT32_MAX;
	weft_test_put_be32(zs + 3, (uint32_t)WEFT_FRAME_LIMIT + 1);
	refused_counting(&zo, zs, 40, WEFT_ETOOBIG, "body limit", &bytes);
	assert_true(bytes < (1u << 20));
	free(zs);
}

static void
test_ratio_above_max_ratio_closes_the_channel(void **state)
{
	weft_compress_codec_opts zo = {.alg = ZSTD, .max_ratio = UINT32_MAX};
	static unsigned char zeros[1 << 20];
	struct evbuffer *out = evbuffer_new();
	unsigned char *body;
	long n;
	fx *f;

	(void)state;
	n = weft_compress_encode(out, ZSTD, 0, UINT32_MAX, zeros,
	                         sizeof(zeros));
	assert_true(n > 0 && (size_t)n * 255 < sizeof(zeros));
	body = evbuffer_pullup(out, -1);
	/* Refused by the default ratio... */
	expect_refused(&(weft_compress_codec_opts){.alg = ZSTD}, body,
	               (size_t)n, WEFT_ETOOBIG, "max_ratio");
	/* ...and read by a codec that allows it. */
	f = z_fixture(NULL, &zo);
	send_frame(f, body, (size_t)n);
	assert_int_equal(f->errors, 0);
	assert_int_equal(f->msgs, 1);
	assert_int_equal(f->lens[0], sizeof(zeros));
	fx_free(f);
	evbuffer_free(out);
}

static void
test_corrupt_data_closes_the_channel(void **state)
{
	unsigned char *lz, *zs;
	size_t nlz, nzs;

	(void)state;
	lz = compressed_text(LZ4, 5000, 13, &nlz);
	zs = compressed_text(ZSTD, 5000, 13, &nzs);
	expect_refused(&both, lz, nlz - 1, WEFT_EPROTO, "LZ4");
	expect_refused(&both, zs, nzs - 1, WEFT_EPROTO, "zstd");
	memset(lz + HDR, 0xf0, nlz - HDR);
	expect_refused(&both, lz, nlz, WEFT_EPROTO, "corrupt LZ4");
	zs[HDR + 1] ^= 0x5a;
	expect_refused(&both, zs, nzs, WEFT_EPROTO, "zstd frame");
	free(lz);
	free(zs);
}

static void
test_malformed_headers_close_the_channel(void **state)
{
	unsigned char body[HDR + 32];

	(void)state;
	memset(body, 0, sizeof(body));
	body[0] = 0xc1;
	body[1] = 0x01;
	body[2] = LZ4;
	expect_refused(&both, body, 2, WEFT_EPROTO, "truncated");
	expect_refused(&both, body, HDR - 1, WEFT_EPROTO, "truncated");
	weft_test_put_be32(body + 3, 10);
	expect_refused(&both, body, HDR, WEFT_EPROTO, "no compressed bytes");
	body[2] = 3;
	expect_refused(&both, body, sizeof(body), WEFT_EPROTO, "unknown");
	body[2] = 0xff;
	expect_refused(&both, body, sizeof(body), WEFT_EPROTO, "unknown");
	body[2] = LZ4;
	weft_test_put_be32(body + 3, 0);
	expect_refused(&both, body, sizeof(body), WEFT_EPROTO, "raw_len 0");
}

static void
test_compressed_body_inside_closes_the_channel(void **state)
{
	unsigned char *b;
	size_t n;

	(void)state;
	b = nested_body(LZ4, &n);
	expect_refused(&both, b, n, WEFT_EPROTO, "inside");
	free(b);
	b = nested_body(ZSTD, &n);
	expect_refused(&both, b, n, WEFT_EPROTO, "inside");
	free(b);
}

static void
test_accept_mask_refuses_other_algorithms(void **state)
{
	weft_compress_codec_opts lz4_only = {.alg = LZ4};
	weft_compress_codec_opts zstd_only = {.alg = LZ4, .accept = 1u << ZSTD};
	weft_compress_codec_opts quiet = {.alg = LZ4, .quiet = true};
	unsigned char *lz, *zs;
	size_t nlz, nzs;
	fx *f;

	(void)state;
	lz = compressed_text(LZ4, 3000, 14, &nlz);
	zs = compressed_text(ZSTD, 3000, 14, &nzs);
	expect_refused(&lz4_only, zs, nzs, WEFT_EPROTO, "not accepted");
	expect_refused(&quiet, zs, nzs, WEFT_EPROTO, "");
	expect_refused(&zstd_only, lz, nlz, WEFT_EPROTO, "not accepted");
	/* No options: nothing accepted. */
	expect_refused(&(weft_compress_codec_opts){0}, lz, nlz, WEFT_EPROTO,
	               "not accepted");
	/* What each accepts is read. */
	f = z_fixture(NULL, &zstd_only);
	send_frame(f, zs, nzs);
	assert_int_equal(f->msgs, 1);
	assert_int_equal(f->lens[0], 3000);
	fx_free(f);
	f = z_fixture(NULL, &lz4_only);
	send_frame(f, lz, nlz);
	assert_int_equal(f->msgs, 1);
	fx_free(f);
	free(lz);
	free(zs);
}

static void
test_options_and_lookups_are_checked(void **state)
{
	weft_compress_codec_opts bad[] = {
	    {.alg = 3}, {.alg = -1}, {.accept = 1u << 3}, {.max_ratio = 1}};
	weft_compress_stats st;
	size_t i;
	fx *f = fx_new();

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(weft_compress_codec_add(f->ch, "z", &bad[i]),
		                 WEFT_EINVAL);
	assert_int_equal(weft_frame_codec_add(f->ch, "frame", NULL), 0);
	assert_int_equal(weft_compress_codec_add(f->ch, "z", NULL), 0);
	assert_int_equal(weft_compress_codec_add(f->ch, "z", NULL),
	                 WEFT_EEXIST);
	assert_int_equal(
	    weft_compress_codec_add_after(f->ch, "nope", "z2", NULL),
	    WEFT_ENOTFOUND);
	assert_int_equal(
	    weft_compress_codec_add_after(f->ch, "frame", "z2", NULL), 0);
	assert_int_equal(weft_compress_codec_get_stats(f->ch, "z2", &st), 0);
	assert_int_equal(weft_compress_codec_get_stats(f->ch, "frame", &st),
	                 WEFT_EINVAL);
	assert_int_equal(weft_compress_codec_get_stats(f->ch, "nope", &st),
	                 WEFT_ENOTFOUND);
	fx_free(f);
}

/* ---- Two pipelines with envelopes, over an in-process pair -------------- */

#define REC_MAX 32

struct rec {
	size_t n;
	weft_envelope env[REC_MAX];
	unsigned char *payload[REC_MAX];
	int errors;
	bool inactive;
};

static void
rec_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct rec *r = weft_ctx_state(ctx);
	weft_envelope *e = msg;

	assert_ptr_equal(type, &weft_msg_envelope);
	assert_true(r->n < REC_MAX);
	r->env[r->n] = *e;
	r->payload[r->n] = malloc(e->payload_len + 1);
	if (e->payload_buf != NULL)
		evbuffer_remove(e->payload_buf, r->payload[r->n],
		                e->payload_len);
	else
		memcpy(r->payload[r->n], e->payload, e->payload_len);
	r->n++;
}

static void
rec_error(weft_ctx *ctx, int status)
{
	((struct rec *)weft_ctx_state(ctx))->errors++;
	weft_ctx_fire_error(ctx, status);
}

static void
rec_inactive(weft_ctx *ctx)
{
	((struct rec *)weft_ctx_state(ctx))->inactive = true;
	weft_ctx_fire_inactive(ctx);
}

static const weft_handler rec_handler = {
    .read = rec_read,
    .error = rec_error,
    .inactive = rec_inactive,
};

struct side {
	weft_compress_codec_opts zo;
	struct rec *r;
};

static int
side_init(weft_channel *ch, void *arg)
{
	struct side *s = arg;
	int rv;

	if ((rv = weft_frame_codec_add(ch, "frame", NULL)) != 0 ||
	    (rv = weft_compress_codec_add(ch, "z", &s->zo)) != 0 ||
	    (rv = weft_envelope_codec_add(ch, "env", NULL)) != 0)
		return rv;
	return weft_pipeline_add_last(ch, "rec", &rec_handler, s->r);
}

static bool
got_all(void *arg)
{
	struct rec *r = arg;

	return r->n >= 8 || r->errors > 0;
}

static bool
ended(void *arg)
{
	return ((struct rec *)arg)->inactive;
}

/* Envelopes from a to b, small ones written in place by the envelope
 * codec through the compression codec, large ones as evbuffers; one of
 * random bytes. */
static void
envelopes_round_trip(int alg)
{
	static const size_t lens[] = {10,    600,    3000,    4000,
	                              20000, 200000, 1 << 20, 3000};
	static unsigned char payload[(1 << 20) + 16], noise[3000];
	struct rec ra = {0}, rb = {0};
	struct side a = {{.alg = alg}, &ra}, b = {{.alg = alg}, &rb};
	weft_compress_stats sa, sb;
	weft_channel *ca, *cb;
	weft_envelope env;
	weft_loop *loop;
	size_t i;

	fill_text(payload, sizeof(payload), 15);
	fill_random(noise, sizeof(noise), 16);
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(weft_inproc_pair(loop, NULL, side_init, &a, side_init,
	                                  &b, &ca, &cb),
	                 0);
	for (i = 0; i < 8; i++) {
		env = (weft_envelope){.id = i,
		                      .verb = 7,
		                      .flags = WEFT_ENVELOPE_ONEWAY,
		                      .payload = i == 7 ? noise : payload + i,
		                      .payload_len = lens[i]};
		assert_int_equal(weft_channel_write_msg(ca, &weft_msg_envelope,
		                                        &env, NULL, NULL),
		                 0);
	}
	assert_int_equal(weft_loop_run_until(loop, got_all, &rb, 10000), 0);
	assert_int_equal(rb.errors, 0);
	assert_int_equal(rb.n, 8);
	for (i = 0; i < 8; i++) {
		assert_int_equal(rb.env[i].id, i);
		assert_int_equal(rb.env[i].payload_len, lens[i]);
		assert_memory_equal(rb.payload[i], i == 7 ? noise : payload + i,
		                    lens[i]);
		free(rb.payload[i]);
	}
	assert_int_equal(weft_compress_codec_get_stats(ca, "z", &sa), 0);
	assert_int_equal(weft_compress_codec_get_stats(cb, "z", &sb), 0);
	/* All but the smallest and the random one. */
	assert_int_equal(sa.compressed_out, 6);
	assert_int_equal(sa.skipped_out, 1);
	assert_true(sa.wire_out < sa.raw_out / 3);
	assert_int_equal(sb.compressed_in, sa.compressed_out);
	assert_int_equal(sb.raw_in, sa.raw_out);
	assert_int_equal(sb.wire_in, sa.wire_out);
	weft_channel_close(ca);
	assert_int_equal(weft_loop_run_until(loop, ended, &rb, 5000), 0);
	weft_loop_free(loop);
}

static void
test_envelopes_round_trip_through_lz4(void **state)
{
	(void)state;
	envelopes_round_trip(LZ4);
}

static void
test_envelopes_round_trip_through_zstd(void **state)
{
	(void)state;
	envelopes_round_trip(ZSTD);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names_parse_both_ways),
	    cmocka_unit_test(test_encode_and_decode_round_trip),
	    cmocka_unit_test(test_encode_leaves_out_alone_without_gain),
	    cmocka_unit_test(test_levels_are_used),
	    cmocka_unit_test(test_decode_checks_every_bound),
	    cmocka_unit_test(
	        test_decode_refuses_wrong_lengths_and_corrupt_data),
	    cmocka_unit_test(test_decode_refuses_a_compressed_body_inside),
	    cmocka_unit_test(test_threads_compress_with_contexts_of_their_own),
	    cmocka_unit_test(test_bodies_below_min_bytes_leave_plain),
	    cmocka_unit_test(test_alg_none_leaves_everything_plain),
	    cmocka_unit_test(test_bodies_loop_back_through_lz4),
	    cmocka_unit_test(test_bodies_loop_back_through_zstd),
	    cmocka_unit_test(test_bodies_come_as_the_kind_their_frames_came_as),
	    cmocka_unit_test(test_compressed_bodies_are_not_compressed_again),
	    cmocka_unit_test(test_incompressible_bodies_back_off),
	    cmocka_unit_test(
	        test_in_place_plain_bodies_are_written_where_they_leave),
	    cmocka_unit_test(test_random_bodies_leave_plain),
	    cmocka_unit_test(test_refused_writes_call_back_once),
	    cmocka_unit_test(test_writes_after_close_call_back_once),
	    cmocka_unit_test(test_wrong_raw_lengths_close_the_channel),
	    cmocka_unit_test(test_raw_length_above_the_limit_allocates_nothing),
	    cmocka_unit_test(test_ratio_above_max_ratio_closes_the_channel),
	    cmocka_unit_test(test_corrupt_data_closes_the_channel),
	    cmocka_unit_test(test_malformed_headers_close_the_channel),
	    cmocka_unit_test(test_compressed_body_inside_closes_the_channel),
	    cmocka_unit_test(test_accept_mask_refuses_other_algorithms),
	    cmocka_unit_test(test_options_and_lookups_are_checked),
	    cmocka_unit_test(test_envelopes_round_trip_through_lz4),
	    cmocka_unit_test(test_envelopes_round_trip_through_zstd),
	};

	fx_log_capture();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
