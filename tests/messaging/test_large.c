/* SPDX-License-Identifier: MIT */
/*
 * test_large.c: the wire stages of docs/PROTOCOL.md 2.1 in the messaging
 * service. Messages larger than a frame travel as chunks, both ways, and
 * their room in the inbound budget is held from the first chunk to the
 * last; compression is agreed per connection (a node without it talks
 * plainly with the rest); a peer of an older release gets neither stage,
 * and a message it cannot take fails alone. Raw clients, which build
 * chunks and compressed frames from the document with LZ4 and zstd
 * themselves, check the bytes and lie: every bad chunk or compressed
 * frame closes its connection, is counted, and leaves the node serving.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <event2/buffer.h>
#include <lz4.h>
#include <zstd.h>

#include <weft/compress.h>
#include <weft/core.h>
#include <weft/envelope.h>
#include <weft/messaging.h>

#include "cluster.h"
#include "rawpeer.h"
#include "support/wire.h"

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)
#define WAIT_MS 20000
/* The handshake flags of PROTOCOL.md 3.1 and 3.2. */
#define F_CHUNKS 0x02u
#define F_LZ4 0x04u
#define F_ZSTD 0x08u
/* The error code of "too large" on the wire (PROTOCOL.md 4.2). */
#define WIRE_TOOBIG 5

static struct cluster cl;

/* Frames of 256 KiB, messages up to 16 MiB. */
static void
tune_large(weft_msvc_limits *l)
{
	l->max_frame_bytes = 256 * KIB;
	l->max_message_bytes = 16 * MIB;
	l->outbound_queue_bytes = 64 * MIB;
	l->client_outbound_bytes = 64 * MIB;
	l->frame_timeout_ms = 1000;
}

/* An inbound budget that one message of 2 MiB nearly fills. */
static void
tune_tight(weft_msvc_limits *l)
{
	tune_large(l);
	l->inbound_inflight_bytes = 2 * MIB + 200 * KIB;
	l->frame_timeout_ms = 3000;
}

static void
tune_lz4(weft_msvc_limits *l)
{
	tune_large(l);
	l->compression = WEFT_COMPRESS_LZ4;
}

static void
tune_zstd(weft_msvc_limits *l)
{
	tune_large(l);
	l->compression = WEFT_COMPRESS_ZSTD;
}

/* Node 3 of a cluster that compresses does not. */
static void
tune_third_plain(int i, weft_msvc_limits *l)
{
	if (i == 2)
		l->compression = WEFT_COMPRESS_NONE;
}

static uint64_t
stat_of(int node, size_t offset)
{
	weft_msvc_stats st;

	weft_msvc_get_stats(cl.svc[node], &st);
	return *(const uint64_t *)((const char *)&st + offset);
}
#define STAT(node, field) stat_of(node, offsetof(weft_msvc_stats, field))

static weft_msvc_peer_stats
peer_stats(int from, int to)
{
	weft_msvc_peer_stats st;

	weft_msvc_peer_get_stats(cluster_peer(&cl, from, to), &st);
	return st;
}

struct reach {
	int node;
	size_t offset;
	uint64_t want;
	bool at_most; /* wait for the counter to fall to want */
};

static bool
reached(void *arg)
{
	const struct reach *r = arg;
	uint64_t v = stat_of(r->node, r->offset);

	return r->at_most ? v <= r->want : v >= r->want;
}

#define WAIT_STAT(n, field, w)                                                 \
	test_wait(reached,                                                     \
	          &(struct reach){.node = (n),                                 \
	                          .offset = offsetof(weft_msvc_stats, field),  \
	                          .want = (w)},                                \
	          5000)
#define WAIT_STAT_DOWN(n, field, w)                                            \
	test_wait(reached,                                                     \
	          &(struct reach){.node = (n),                                 \
	                          .offset = offsetof(weft_msvc_stats, field),  \
	                          .want = (w),                                 \
	                          .at_most = true},                            \
	          5000)

static bool
queues_empty(void *arg)
{
	(void)arg;
	return peer_stats(0, 1).queued_bytes == 0 &&
	       peer_stats(1, 0).queued_bytes == 0;
}

/* ---- Echoes checked byte for byte -------------------------------------- */

struct check {
	_Atomic int done, ok, bad;
	int want;
};

struct call {
	struct check *check;
	uint32_t seed;
	size_t len;
};

static void
on_checked(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct call *c = arg;
	uint8_t *want = malloc(c->len + 1);

	(void)svc;
	cluster_fill(want, c->len, c->seed);
	if (status == 0 && len == c->len && memcmp(data, want, len) == 0)
		atomic_fetch_add(&c->check->ok, 1);
	else
		atomic_fetch_add(&c->check->bad, 1);
	free(want);
	free(c);
	test_poke();
}

static bool
check_done(void *arg)
{
	struct check *k = arg;

	return atomic_load(&k->ok) + atomic_load(&k->bad) >= k->want;
}

/* Asks node `to` from node `from` to echo len bytes of seed's pattern. */
static void
echo_checked(struct check *k, int from, int to, size_t len, uint32_t seed)
{
	struct evbuffer *b = evbuffer_new();
	struct evbuffer_iovec v;
	struct call *c = malloc(sizeof(*c));

	assert_non_null(b);
	assert_non_null(c);
	*c = (struct call){.check = k, .seed = seed, .len = len};
	assert_int_equal(evbuffer_reserve_space(b, len, &v, 1), 1);
	cluster_fill(v.iov_base, len, seed);
	v.iov_len = len;
	assert_int_equal(evbuffer_commit_space(b, &v, 1), 0);
	assert_int_equal(
	    weft_msvc_request_buf(cl.svc[from], cluster_peer(&cl, from, to),
	                          VERB_ECHO, b, NULL, on_checked, c),
	    0);
	evbuffer_free(b);
	k->want++;
}

static void
wait_checked(struct check *k)
{
	assert_true(test_wait(check_done, k, WAIT_MS));
	assert_int_equal(atomic_load(&k->bad), 0);
	assert_int_equal(atomic_load(&k->ok), k->want);
}

/* ---- Raw clients ----------------------------------------------------------
 */

/* A raw client of n1 that asks for the stages in flags. */
static void
raw_client(rawpeer *p, const char *id, uint64_t flags)
{
	rp_connect(p, weft_msvc_port(cl.svc[0]), NULL, NULL);
	assert_int_equal(rp_handshake_flags(p, "test", id, RP_CLIENT,
	                                    WEFT_MSVC_SMALL, 0, 2, flags),
	                 0);
}

/* An echo through p is answered: the node (and p) still serve. */
static void
echo_answered(rawpeer *p, uint64_t id)
{
	rp_env e;

	assert_true(rp_request(p, id, VERB_ECHO, "hi", 2));
	assert_int_equal(rp_read_env(p, &e, 3000), 0);
	assert_int_equal(e.id, id);
	assert_int_equal(e.flags, RP_RESPONSE);
	assert_memory_equal(e.payload, "hi", 2);
}

/* A fresh client gets its echo: whatever closed, the node serves. */
static void
node_serves(const char *id)
{
	rawpeer p;

	raw_client(&p, id, 0);
	echo_answered(&p, 1);
	rp_close(&p);
}

/* The envelope body of a request (fixed layout), in a fresh buffer of
 * *n bytes, the caller's to free. */
static uint8_t *
request_body(uint64_t id, uint32_t verb, const void *payload, size_t len,
             size_t *n)
{
	weft_envelope env = {.id = id,
	                     .verb = verb,
	                     .flags = RP_REQUEST,
	                     .created_ms = weft_wall_ms(),
	                     .expires_ms = weft_wall_ms() + 10000};
	uint8_t *body = malloc(WEFT_ENVELOPE_HEADER_BYTES + len);

	assert_non_null(body);
	weft_envelope_encode_header(body, &env, (uint32_t)len);
	memcpy(body + WEFT_ENVELOPE_HEADER_BYTES, payload, len);
	*n = WEFT_ENVELOPE_HEADER_BYTES + len;
	return body;
}

/* Appends one chunk frame: flags, msg, total (first chunks only), n bytes
 * at data. */
static void
put_chunk(struct evbuffer *out, bool crc, uint8_t flags, uint32_t msg,
          uint64_t total, const void *data, size_t n)
{
	uint8_t *f = malloc(15 + n);
	size_t k = 0;

	assert_non_null(f);
	f[k++] = 0xc1;
	f[k++] = 0x02;
	f[k++] = flags;
	weft_test_put_be32(f + k, msg);
	k += 4;
	if (flags & 0x01) {
		weft_test_put_be64(f + k, total);
		k += 8;
	}
	memcpy(f + k, data, n);
	rp_frame(out, f, k + n, crc);
	free(f);
}

/* Sends body as chunks of chunk bytes, message msg. */
static bool
send_chunked(rawpeer *p, uint32_t msg, const uint8_t *body, size_t n,
             size_t chunk)
{
	struct evbuffer *b = evbuffer_new();
	size_t at = 0;
	bool ok;

	while (at < n) {
		size_t k = n - at < chunk ? n - at : chunk;
		uint8_t flags = (at == 0 ? 0x01 : 0) | (at + k == n ? 0x02 : 0);

		put_chunk(b, p->crc, flags, msg, n, body + at, k);
		at += k;
	}
	ok = rp_send(p, b);
	evbuffer_free(b);
	return ok;
}

/* Reads one message whose frames may be chunks (and, with alg, may be
 * compressed), put together as the document says, into *out (the
 * caller's to free): returns its length, or 0 when the connection
 * closed or went quiet. */
static size_t
read_message(rawpeer *p, int alg, uint8_t **out)
{
	uint8_t *msg = NULL, *plain = NULL;
	uint64_t total = 0, have = 0;

	for (;;) {
		ssize_t n = rp_read_frame(p, 5000);
		const uint8_t *f = p->rbuf;
		uint8_t flags;
		size_t len;

		if (n <= 0)
			break;
		len = (size_t)n;
		if (len >= 7 && f[0] == 0xc1 && f[1] == 0x01) {
			uint32_t raw = weft_test_get_be32(f + 3);

			assert_int_equal(f[2], alg);
			free(plain);
			plain = malloc(raw);
			if (alg == 1)
				assert_int_equal(LZ4_decompress_safe(
				                     (const char *)f + 7,
				                     (char *)plain,
				                     (int)(len - 7), (int)raw),
				                 (int)raw);
			else
				assert_int_equal(
				    ZSTD_decompress(plain, raw, f + 7, len - 7),
				    raw);
			f = plain;
			len = raw;
		}
		if (!(len >= 7 && f[0] == 0xc1 && f[1] == 0x02)) {
			/* A whole message in one frame. */
			assert_null(msg);
			*out = malloc(len);
			memcpy(*out, f, len);
			free(plain);
			return len;
		}
		flags = f[2];
		if (flags & 0x01) {
			assert_null(msg);
			total = (uint64_t)weft_test_get_be32(f + 7) << 32 |
			        weft_test_get_be32(f + 11);
			msg = malloc(total);
			assert_non_null(msg);
			f += 15;
			len -= 15;
		} else {
			assert_non_null(msg);
			f += 7;
			len -= 7;
		}
		assert_true(have + len <= total);
		memcpy(msg + have, f, len);
		have += len;
		if (flags & 0x02) {
			assert_int_equal(have, total);
			*out = msg;
			free(plain);
			return (size_t)total;
		}
	}
	free(msg);
	free(plain);
	return 0;
}

/* ---- Chunks between members -------------------------------------------- */

static void
test_messages_larger_than_a_frame_travel_as_chunks(void **state)
{
	static const size_t sizes[] = {100 * KIB, 200 * KIB, MIB, 5 * MIB + 3};
	struct check k = {0};
	weft_msvc_peer_stats st;
	uint8_t *big = calloc(1, 16 * MIB + 1);
	size_t i;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, tune_large), 0);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		echo_checked(&k, 0, 1, sizes[i], (uint32_t)i);
	wait_checked(&k);
	/* Three of them were above the chunk size, both ways. */
	st = peer_stats(0, 1);
	assert_true(st.chunked_sent >= 3);
	assert_true(st.chunked_received >= 3);
	/* Past max_message, a request is refused before it is sent. */
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_ECHO, big, 16 * MIB + 1, NULL,
	                                   tally_cb, NULL),
	                 WEFT_ETOOBIG);
	free(big);
	/* Every byte held for a message in assembly went back, and every
	 * byte queued for one that went out in chunks. */
	assert_true(WAIT_STAT_DOWN(1, inflight_bytes, 0));
	assert_true(WAIT_STAT_DOWN(0, inflight_bytes, 0));
	assert_true(test_wait(queues_empty, NULL, 5000));
	cluster_stop(&cl);
}

static bool
n1_queue_empty(void *arg)
{
	(void)arg;
	return peer_stats(0, 1).queued_bytes == 0;
}

/* A peer that goes away in the middle of large messages: their callbacks
 * run once, and the queue bytes they held come back. */
static void
test_a_peer_lost_in_the_middle_of_chunks_gives_the_queue_back(void **state)
{
	struct tally t = {.want = 4};
	uint8_t *big = calloc(1, 12 * MIB);
	int i;

	(void)state;
	assert_non_null(big);
	assert_int_equal(cluster_start(&cl, 2, tune_large), 0);
	for (i = 0; i < 4; i++)
		assert_int_equal(weft_msvc_request(cl.svc[0],
		                                   cluster_peer(&cl, 0, 1),
		                                   VERB_HOLD, big, 12 * MIB,
		                                   NULL, tally_cb, &t),
		                 0);
	assert_true(peer_stats(0, 1).queued_bytes > 0);
	cluster_stop_node(&cl, 1, 0);
	assert_true(test_wait(tally_complete, &t, WAIT_MS));
	assert_int_equal(atomic_load(&t.ok), 0);
	assert_int_equal(atomic_load(&t.done), 4);
	assert_true(test_wait(n1_queue_empty, NULL, 5000));
	free(big);
	cluster_stop(&cl);
}

/* ---- Compression ------------------------------------------------------- */

static void
compression_shrinks_what_travels(void (*tune)(weft_msvc_limits *l))
{
	struct check k = {0};
	weft_msvc_peer_stats st;
	uint32_t i;

	assert_int_equal(cluster_start(&cl, 2, tune), 0);
	for (i = 0; i < 40; i++)
		echo_checked(&k, 0, 1, 16 * KIB + i, i);
	for (i = 0; i < 3; i++)
		echo_checked(&k, 0, 1, MIB + i, 100 + i);
	wait_checked(&k);
	st = peer_stats(0, 1);
	assert_true(st.body_bytes_out >= 40 * 16 * KIB);
	assert_true(st.wire_bytes_out * 2 < st.body_bytes_out);
	/* The echoes came back compressed too, on n2's own connection. */
	assert_true(st.body_bytes_in >= 40 * 16 * KIB);
	assert_true(st.wire_bytes_in * 2 < st.body_bytes_in);
	cluster_stop(&cl);
}

static void
test_lz4_shrinks_what_travels(void **state)
{
	(void)state;
	compression_shrinks_what_travels(tune_lz4);
}

static void
test_zstd_shrinks_what_travels(void **state)
{
	(void)state;
	compression_shrinks_what_travels(tune_zstd);
}

static void
test_a_node_without_compression_in_a_mixed_cluster(void **state)
{
	struct cluster_opts o = {.tune = tune_lz4,
	                         .tune_node = tune_third_plain};
	struct check k = {0};
	weft_msvc_peer_stats to_n2, to_n3, n3_to_n1;
	uint32_t i;

	(void)state;
	assert_int_equal(cluster_start_with(&cl, 3, &o), 0);
	for (i = 0; i < 10; i++) {
		echo_checked(&k, 0, 1, 8 * KIB, i);
		echo_checked(&k, 0, 2, 8 * KIB, i);
		echo_checked(&k, 2, 0, 300 * KIB, i);
	}
	wait_checked(&k);
	to_n2 = peer_stats(0, 1);
	to_n3 = peer_stats(0, 2);
	n3_to_n1 = peer_stats(2, 0);
	assert_true(to_n2.wire_bytes_out * 2 < to_n2.body_bytes_out);
	/* Plain both ways with n3, chunks all the same. */
	assert_int_equal(to_n3.body_bytes_out, 0);
	assert_int_equal(to_n3.body_bytes_in, 0);
	assert_int_equal(n3_to_n1.body_bytes_out, 0);
	assert_true(n3_to_n1.chunked_sent >= 10);
	cluster_stop(&cl);
}

/* ---- Peers of an older release ----------------------------------------- */

static void
test_a_peer_of_an_older_release_gets_neither_stage(void **state)
{
	uint8_t size[4];
	rawpeer p;
	rp_env e;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune_lz4), 0);
	raw_client(&p, "old", 0);
	assert_int_equal(p.reply_flags & (F_CHUNKS | F_LZ4 | F_ZSTD), 0);
	/* An answer larger than its frames fails alone: an error response
	 * says why, and the connection serves on. */
	weft_test_put_be32(size, (uint32_t)MIB);
	assert_true(rp_request(&p, 7, VERB_GROW, size, 4));
	assert_int_equal(rp_read_env(&p, &e, 3000), 0);
	assert_int_equal(e.id, 7);
	assert_int_equal(e.flags, RP_RESPONSE | RP_ERROR);
	assert_int_equal(e.error_code, WIRE_TOOBIG);
	echo_answered(&p, 8);
	assert_int_equal(STAT(0, oversized_messages), 1);
	/* One within its frames is answered whole. */
	weft_test_put_be32(size, (uint32_t)(100 * KIB));
	assert_true(rp_request(&p, 9, VERB_GROW, size, 4));
	assert_int_equal(rp_read_env(&p, &e, 3000), 0);
	assert_int_equal(e.flags, RP_RESPONSE);
	assert_int_equal(e.len, 100 * KIB);
	rp_close(&p);
	cluster_stop(&cl);
}

/* ---- Chunks and compression on the wire, from the document ------------- */

/* p asks for a grow of n bytes and reads it back as the document says,
 * comparing every byte. */
static void
grow_checked(rawpeer *p, uint64_t id, size_t n, int alg)
{
	uint8_t size[4], *body = NULL, *want = malloc(n + 1);
	size_t len;
	rp_env e;

	weft_test_put_be32(size, (uint32_t)n);
	assert_true(rp_request(p, id, VERB_GROW, size, 4));
	len = read_message(p, alg, &body);
	assert_true(len > 0);
	rp_env_decode(body, len, &e);
	assert_int_equal(e.id, id);
	assert_int_equal(e.flags, RP_RESPONSE);
	assert_int_equal(e.len, n);
	cluster_fill(want, n, 0);
	assert_memory_equal(e.payload, want, n);
	free(want);
	free(body);
}

static void
test_a_client_that_assembles_chunks_gets_large_answers(void **state)
{
	uint8_t *payload = malloc(300 * KIB), *body, *back = NULL;
	size_t n;
	rawpeer p;
	rp_env e;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune_large), 0);
	raw_client(&p, "chunky", F_CHUNKS);
	assert_int_equal(p.reply_flags & (F_CHUNKS | F_LZ4 | F_ZSTD), F_CHUNKS);
	grow_checked(&p, 1, MIB, 0);
	grow_checked(&p, 2, 3 * MIB + 5, 0);
	/* A request of its own in chunks of 40 KiB, echoed in the node's. */
	cluster_fill(payload, 300 * KIB, 9);
	body = request_body(3, VERB_ECHO, payload, 300 * KIB, &n);
	assert_true(send_chunked(&p, 77, body, n, 40 * KIB));
	/* The answer is as long as the request: no params (no stage times
	 * for a request without a trace context, from a node without
	 * weft_msvc_opts.stage_times). */
	assert_int_equal(read_message(&p, 0, &back), n);
	rp_env_decode(back, n, &e);
	assert_false(e.has_params);
	assert_int_equal(e.id, 3);
	assert_int_equal(e.len, 300 * KIB);
	assert_memory_equal(e.payload, payload, 300 * KIB);
	echo_answered(&p, 4);
	free(back);
	free(body);
	free(payload);
	rp_close(&p);
	cluster_stop(&cl);
}

static void
test_compressed_frames_follow_the_document(void **state)
{
	uint8_t payload[4096], *body, *frame;
	size_t n, bound;
	int z;
	rawpeer p;
	rp_env e;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune_lz4), 0);
	raw_client(&p, "squeezer", F_CHUNKS | F_LZ4);
	assert_int_equal(p.reply_flags & (F_CHUNKS | F_LZ4 | F_ZSTD),
	                 F_CHUNKS | F_LZ4);
	/* A request compressed here with LZ4, answered compressed. */
	cluster_fill(payload, sizeof(payload), 5);
	body = request_body(1, VERB_ECHO, payload, sizeof(payload), &n);
	bound = (size_t)LZ4_compressBound((int)n);
	frame = malloc(7 + bound);
	frame[0] = 0xc1;
	frame[1] = 0x01;
	frame[2] = 1;
	weft_test_put_be32(frame + 3, (uint32_t)n);
	z = LZ4_compress_default((const char *)body, (char *)frame + 7, (int)n,
	                         (int)bound);
	assert_true(z > 0 && (size_t)z < n);
	{
		struct evbuffer *b = evbuffer_new();

		rp_frame(b, frame, 7 + (size_t)z, p.crc);
		assert_true(rp_send(&p, b));
		evbuffer_free(b);
	}
	free(frame);
	free(body);
	body = NULL;
	n = read_message(&p, 1, &body);
	assert_true(n > 0);
	rp_env_decode(body, n, &e);
	assert_int_equal(e.id, 1);
	assert_int_equal(e.len, sizeof(payload));
	assert_memory_equal(e.payload, payload, sizeof(payload));
	free(body);
	/* Large answers: chunks, each compressed. */
	grow_checked(&p, 2, 2 * MIB, 1);
	rp_close(&p);
	cluster_stop(&cl);
}

/* ---- Lies -------------------------------------------------------------- */

/* Sends one frame of n bytes at body on a fresh client of n1 that asked
 * for flags, and checks that n1 closes the connection. */
static void
closes_on(uint64_t flags, const void *body, size_t n)
{
	struct evbuffer *b = evbuffer_new();
	rawpeer p;

	raw_client(&p, "liar", flags);
	rp_frame(b, body, n, p.crc);
	rp_send(&p, b);
	evbuffer_free(b);
	assert_true(rp_closed(&p, 3000));
	rp_close(&p);
}

static void
test_bad_chunks_close_their_connection(void **state)
{
	uint8_t f[64] = {0xc1, 0x02};
	uint64_t bad = 0;
	struct evbuffer *b;
	rawpeer p;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune_large), 0);
	/* A middle chunk of no message. */
	f[2] = 0x00;
	weft_test_put_be32(f + 3, 1);
	memset(f + 7, 'x', 20);
	closes_on(F_CHUNKS, f, 27);
	assert_true(WAIT_STAT(0, bad_chunks, ++bad));
	/* A last chunk of no message. */
	f[2] = 0x02;
	closes_on(F_CHUNKS, f, 27);
	assert_true(WAIT_STAT(0, bad_chunks, ++bad));
	/* FIRST and LAST together, and a reserved flag bit. */
	f[2] = 0x03;
	weft_test_put_be64(f + 7, 10);
	memset(f + 15, 'x', 10);
	closes_on(F_CHUNKS, f, 25);
	assert_true(WAIT_STAT(0, bad_chunks, ++bad));
	f[2] = 0x05;
	closes_on(F_CHUNKS, f, 25);
	assert_true(WAIT_STAT(0, bad_chunks, ++bad));
	/* A message declared above max_message. */
	f[2] = 0x01;
	weft_test_put_be64(f + 7, 64 * MIB);
	closes_on(F_CHUNKS, f, 25);
	assert_true(WAIT_STAT(0, bad_chunks, ++bad));
	/* An empty first chunk. */
	weft_test_put_be64(f + 7, 100);
	closes_on(F_CHUNKS, f, 15);
	assert_true(WAIT_STAT(0, bad_chunks, ++bad));
	/* Bytes past the declared total. */
	raw_client(&p, "over", F_CHUNKS);
	b = evbuffer_new();
	put_chunk(b, p.crc, 0x01, 9, 30, f + 40, 20);
	put_chunk(b, p.crc, 0x02, 9, 0, f + 40, 20);
	rp_send(&p, b);
	evbuffer_free(b);
	assert_true(rp_closed(&p, 3000));
	rp_close(&p);
	assert_true(WAIT_STAT(0, bad_chunks, ++bad));
	/* A second message in assembly from a client (it may have one). */
	raw_client(&p, "twice", F_CHUNKS);
	b = evbuffer_new();
	put_chunk(b, p.crc, 0x01, 1, 100, f + 40, 20);
	put_chunk(b, p.crc, 0x01, 2, 100, f + 40, 20);
	rp_send(&p, b);
	evbuffer_free(b);
	assert_true(rp_closed(&p, 3000));
	rp_close(&p);
	assert_true(WAIT_STAT(0, bad_chunks, ++bad));
	/* A chunk where none were agreed is no envelope. */
	f[2] = 0x00;
	closes_on(0, f, 27);
	assert_true(WAIT_STAT(0, bad_envelopes, 1));
	node_serves("after");
	assert_true(WAIT_STAT_DOWN(0, inflight_bytes, 0));
	cluster_stop(&cl);
}

static void
test_a_message_in_assembly_holds_its_room_until_it_ends(void **state)
{
	uint8_t part[1024] = {0};
	struct evbuffer *b = evbuffer_new();
	rawpeer p;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune_large), 0);
	raw_client(&p, "slow", F_CHUNKS);
	/* 8 MiB declared, 1 KiB sent, then nothing. */
	put_chunk(b, p.crc, 0x01, 1, 8 * MIB, part, sizeof(part));
	assert_true(rp_send(&p, b));
	evbuffer_free(b);
	assert_true(WAIT_STAT(0, inflight_bytes, 8 * MIB));
	/* It never ends: closed at frame_timeout (1 s), its room back. */
	assert_true(rp_closed(&p, 5000));
	rp_close(&p);
	assert_true(WAIT_STAT(0, frame_timeouts, 1));
	assert_true(WAIT_STAT_DOWN(0, inflight_bytes, 0));
	node_serves("next");
	cluster_stop(&cl);
}

/* The first chunk's frame arrives in two pieces, so its bytes are held
 * as a frame begun before the chunk is whole: the message's room must not
 * then wait for that frame's own room to go back (it did: the message was
 * never read again, until frame_timeout closed the connection). */
static void
test_a_first_chunk_that_came_in_pieces_is_let_in(void **state)
{
	size_t n, len = 2 * MIB + 180 * KIB, at;
	uint8_t *payload = malloc(len), *body, *back = NULL;
	struct evbuffer *b = evbuffer_new();
	rawpeer p;
	rp_env e;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune_tight), 0);
	raw_client(&p, "pieces", F_CHUNKS);
	cluster_fill(payload, len, 3);
	body = request_body(5, VERB_ECHO, payload, len, &n);
	/* The first chunk's frame, cut in two. */
	put_chunk(b, p.crc, 0x01, 1, n, body, 64 * KIB);
	at = evbuffer_get_length(b) / 2;
	assert_true(rp_send_bytes(&p, evbuffer_pullup(b, -1), at));
	usleep(200 * 1000);
	assert_true(rp_send_bytes(&p, evbuffer_pullup(b, -1) + at,
	                          evbuffer_get_length(b) - at));
	evbuffer_drain(b, evbuffer_get_length(b));
	/* The rest, in chunks of 64 KiB. */
	for (at = 64 * KIB; at < n; at += 64 * KIB) {
		size_t k = n - at < 64 * KIB ? n - at : 64 * KIB;

		put_chunk(b, p.crc, at + k == n ? 0x02 : 0x00, 1, 0, body + at,
		          k);
	}
	assert_true(rp_send(&p, b));
	/* The answer is as long as the request (no params, as above). */
	assert_int_equal(read_message(&p, 0, &back), n);
	rp_env_decode(back, n, &e);
	assert_false(e.has_params);
	assert_int_equal(e.id, 5);
	assert_int_equal(e.len, len);
	assert_memory_equal(e.payload, payload, len);
	assert_true(WAIT_STAT_DOWN(0, inflight_bytes, 0));
	free(back);
	free(body);
	free(payload);
	evbuffer_free(b);
	rp_close(&p);
	cluster_stop(&cl);
}

/* A compressed frame of the given alg and declared raw_len around the n
 * bytes at data. */
static size_t
wrap(uint8_t *out, int alg, uint32_t raw_len, const void *data, size_t n)
{
	out[0] = 0xc1;
	out[1] = 0x01;
	out[2] = (uint8_t)alg;
	weft_test_put_be32(out + 3, raw_len);
	memcpy(out + 7, data, n);
	return 7 + n;
}

static void
test_bad_compressed_frames_close_their_connection(void **state)
{
	uint8_t body[200], *env, z[512], f[1024];
	size_t n;
	int zn;
	uint64_t bad = 0;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune_lz4), 0);
	memset(body, 'a', sizeof(body));
	env = request_body(1, VERB_ECHO, body, sizeof(body), &n);
	zn = LZ4_compress_default((const char *)env, (char *)z, (int)n,
	                          (int)sizeof(z));
	assert_true(zn > 0);
	/* The declared size lies: too large, then too small. */
	closes_on(F_LZ4, f, wrap(f, 1, (uint32_t)n + 10, z, (size_t)zn));
	assert_true(WAIT_STAT(0, bad_compressed, ++bad));
	closes_on(F_LZ4, f, wrap(f, 1, (uint32_t)n - 10, z, (size_t)zn));
	assert_true(WAIT_STAT(0, bad_compressed, ++bad));
	/* Past the frame limit, and past the ratio bound (255), before
	 * anything is decompressed. */
	closes_on(F_LZ4, f, wrap(f, 1, (uint32_t)(300 * KIB), z, (size_t)zn));
	assert_true(WAIT_STAT(0, bad_compressed, ++bad));
	closes_on(F_LZ4, f,
	          wrap(f, 1, (uint32_t)(256 * (size_t)zn), z, (size_t)zn));
	assert_true(WAIT_STAT(0, bad_compressed, ++bad));
	/* Corrupt data, and zstd where LZ4 was agreed. */
	memset(z + 4, 0xff, 16);
	closes_on(F_LZ4, f, wrap(f, 1, (uint32_t)n, z, (size_t)zn));
	assert_true(WAIT_STAT(0, bad_compressed, ++bad));
	zn = (int)ZSTD_compress(z, sizeof(z), env, n, 1);
	assert_false(ZSTD_isError((size_t)zn));
	closes_on(F_LZ4, f, wrap(f, 2, (uint32_t)n, z, (size_t)zn));
	assert_true(WAIT_STAT(0, bad_compressed, ++bad));
	/* Nothing to decompress to. */
	closes_on(F_LZ4, f, wrap(f, 1, 0, z, (size_t)zn));
	assert_true(WAIT_STAT(0, bad_compressed, ++bad));
	node_serves("after");
	free(env);
	cluster_stop(&cl);
}

static void
test_a_node_without_compression_agrees_to_none(void **state)
{
	uint8_t body[100], *env, z[512], f[1024];
	size_t n;
	int zn;
	rawpeer p;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune_large), 0);
	raw_client(&p, "hopeful", F_CHUNKS | F_LZ4);
	assert_int_equal(p.reply_flags & (F_LZ4 | F_ZSTD), 0);
	echo_answered(&p, 1);
	rp_close(&p);
	/* A compressed frame all the same is no envelope. */
	memset(body, 'a', sizeof(body));
	env = request_body(1, VERB_ECHO, body, sizeof(body), &n);
	zn = LZ4_compress_default((const char *)env, (char *)z, (int)n,
	                          (int)sizeof(z));
	closes_on(F_LZ4, f, wrap(f, 1, (uint32_t)n, z, (size_t)zn));
	assert_true(WAIT_STAT(0, bad_envelopes, 1));
	node_serves("after");
	free(env);
	cluster_stop(&cl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
	        test_messages_larger_than_a_frame_travel_as_chunks),
	    cmocka_unit_test(
	        test_a_peer_lost_in_the_middle_of_chunks_gives_the_queue_back),
	    cmocka_unit_test(test_lz4_shrinks_what_travels),
	    cmocka_unit_test(test_zstd_shrinks_what_travels),
	    cmocka_unit_test(
	        test_a_node_without_compression_in_a_mixed_cluster),
	    cmocka_unit_test(
	        test_a_peer_of_an_older_release_gets_neither_stage),
	    cmocka_unit_test(
	        test_a_client_that_assembles_chunks_gets_large_answers),
	    cmocka_unit_test(test_compressed_frames_follow_the_document),
	    cmocka_unit_test(test_bad_chunks_close_their_connection),
	    cmocka_unit_test(
	        test_a_message_in_assembly_holds_its_room_until_it_ends),
	    cmocka_unit_test(test_a_first_chunk_that_came_in_pieces_is_let_in),
	    cmocka_unit_test(test_bad_compressed_frames_close_their_connection),
	    cmocka_unit_test(test_a_node_without_compression_agrees_to_none),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
