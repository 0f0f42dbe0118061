/* SPDX-License-Identifier: MIT */
/* test_msgpack.c: weft_msgpack_check and the msgpack codec over frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <msgpack.h>

#include <weft/frame.h>
#include <weft/msgpack_codec.h>

#include "alloc_count.h"
#include "fixture.h"

struct vec {
	const char *name;
	size_t len;
	unsigned char b[24];
};

#define V(name, ...)                                                           \
	{                                                                      \
		name, sizeof((unsigned char[]){__VA_ARGS__}),                  \
		{                                                              \
			__VA_ARGS__                                            \
		}                                                              \
	}

static const struct vec valid[] = {
    V("posfix", 0x00),
    V("posfix max", 0x7f),
    V("negfix", 0xe0),
    V("nil", 0xc0),
    V("false", 0xc2),
    V("true", 0xc3),
    V("u8", 0xcc, 1),
    V("u16", 0xcd, 1, 2),
    V("u32", 0xce, 1, 2, 3, 4),
    V("u64", 0xcf, 1, 2, 3, 4, 5, 6, 7, 8),
    V("i8", 0xd0, 0xff),
    V("i16", 0xd1, 1, 2),
    V("i32", 0xd2, 1, 2, 3, 4),
    V("i64", 0xd3, 1, 2, 3, 4, 5, 6, 7, 8),
    V("f32", 0xca, 1, 2, 3, 4),
    V("f64", 0xcb, 1, 2, 3, 4, 5, 6, 7, 8),
    V("fixstr", 0xa3, 'a', 'b', 'c'),
    V("empty str", 0xa0),
    V("str8", 0xd9, 3, 'a', 'b', 'c'),
    V("str16", 0xda, 0, 3, 'a', 'b', 'c'),
    V("str32", 0xdb, 0, 0, 0, 3, 'a', 'b', 'c'),
    V("bin8", 0xc4, 2, 9, 9),
    V("bin16", 0xc5, 0, 2, 9, 9),
    V("bin32", 0xc6, 0, 0, 0, 2, 9, 9),
    V("ext8", 0xc7, 1, 5, 9),
    V("ext8 empty", 0xc7, 0, 5),
    V("ext16", 0xc8, 0, 1, 5, 9),
    V("ext32", 0xc9, 0, 0, 0, 1, 5, 9),
    V("fixext1", 0xd4, 5, 9),
    V("fixext2", 0xd5, 5, 9, 9),
    V("fixext4", 0xd6, 5, 1, 2, 3, 4),
    V("fixext8", 0xd7, 5, 1, 2, 3, 4, 5, 6, 7, 8),
    V("fixext16", 0xd8, 5, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8),
    V("empty array", 0x90),
    V("empty map", 0x80),
    V("array", 0x92, 1, 2),
    V("map", 0x81, 1, 2),
    V("array16", 0xdc, 0, 2, 1, 2),
    V("array32", 0xdd, 0, 0, 0, 2, 1, 2),
    V("map16", 0xde, 0, 1, 1, 2),
    V("map32", 0xdf, 0, 0, 0, 1, 1, 2),
    V("nested", 0x91, 0x91, 0x90),
    V("mixed", 0x82, 0xa1, 'a', 0x92, 0xc3, 0x90, 0x01, 0x80),
};

static const struct vec invalid[] = {
    V("reserved", 0xc1),
    V("trailing", 0x01, 0x02),
    V("short u16", 0xcd, 1),
    V("short str", 0xa3, 'a'),
    V("short str8 header", 0xd9),
    V("short ext8", 0xc7, 1, 5),
    V("short fixext", 0xd6, 5, 1),
    V("short array", 0x93, 1, 2),
    V("odd map", 0x81, 1),
    V("huge array", 0xdd, 0xff, 0xff, 0xff, 0xff),
    V("huge map", 0xdf, 0xff, 0xff, 0xff, 0xff),
    V("huge str", 0xdb, 0xff, 0xff, 0xff, 0xff),
    V("huge bin", 0xc6, 0xff, 0xff, 0xff, 0xff),
    V("huge ext", 0xc9, 0xff, 0xff, 0xff, 0xff, 1),
    V("huge array16", 0xdc, 0xff, 0xff),
    V("claims beyond siblings", 0x92, 0xdc, 0, 3, 1, 2, 3),
    V("trailing after map", 0x81, 1, 2, 3),
};

/* What msgpack-c itself says: 0 when it unpacks exactly len bytes. */
static int
msgpack_c_says(const void *data, size_t len)
{
	msgpack_zone *z = msgpack_zone_new(1024);
	msgpack_object obj;
	size_t off = 0;
	int rv;

	rv = msgpack_unpack(data, len, &off, z, &obj);
	msgpack_zone_free(z);
	return rv == MSGPACK_UNPACK_SUCCESS && off == len ? 0 : -1;
}

static void
test_check_accepts_valid(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		print_message("%s\n", valid[i].name);
		assert_int_equal(
		    weft_msgpack_check(valid[i].b, valid[i].len, 0), 0);
		assert_int_equal(msgpack_c_says(valid[i].b, valid[i].len), 0);
	}
}

static void
test_check_rejects_invalid(void **state)
{
	size_t i;

	(void)state;
	assert_int_equal(weft_msgpack_check("", 0, 0), WEFT_EPROTO);
	assert_int_equal(weft_msgpack_check(NULL, 0, 0), WEFT_EPROTO);
	for (i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
		print_message("%s\n", invalid[i].name);
		assert_int_equal(
		    weft_msgpack_check(invalid[i].b, invalid[i].len, 0),
		    WEFT_EPROTO);
	}
}

/* n arrays of one element each, around a nil or an empty array. */
static size_t
nested(unsigned char *buf, size_t n, bool empty_inside)
{
	memset(buf, 0x91, n);
	buf[n] = empty_inside ? 0x90 : 0xc0;
	return n + 1;
}

static void
test_depth_limit(void **state)
{
	unsigned char buf[64];
	size_t n;

	(void)state;
	n = nested(buf, 32, false);
	assert_int_equal(weft_msgpack_check(buf, n, 0), 0);
	assert_int_equal(msgpack_c_says(buf, n), 0);
	n = nested(buf, 33, false);
	assert_int_equal(weft_msgpack_check(buf, n, 0), WEFT_EPROTO);
	assert_int_equal(weft_msgpack_check(buf, n, 1000), WEFT_EPROTO);
	assert_int_equal(msgpack_c_says(buf, n), -1);
	/* An empty container counts as a level, for msgpack-c too. */
	n = nested(buf, 31, true);
	assert_int_equal(weft_msgpack_check(buf, n, 0), 0);
	assert_int_equal(msgpack_c_says(buf, n), 0);
	n = nested(buf, 32, true);
	assert_int_equal(weft_msgpack_check(buf, n, 0), WEFT_EPROTO);
	assert_int_equal(msgpack_c_says(buf, n), -1);
	n = nested(buf, 4, false);
	assert_int_equal(weft_msgpack_check(buf, n, 4), 0);
	n = nested(buf, 5, false);
	assert_int_equal(weft_msgpack_check(buf, n, 4), WEFT_EPROTO);
	/* Siblings do not add up: [[[]],[[]]] is 3 deep. */
	assert_int_equal(
	    weft_msgpack_check((unsigned char[]){0x92, 0x91, 0x90, 0x91, 0x90},
	                       5, 3),
	    0);
}

static void
test_huge_claim_allocates_nothing(void **state)
{
	static const unsigned char huge[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
	weft_msgpack_msg *m = NULL;

	(void)state;
	alloc_count_start();
	assert_int_equal(weft_msgpack_decode(huge, sizeof(huge), 0, &m),
	                 WEFT_EPROTO);
	assert_int_equal(alloc_count_stop(), 0);
	assert_null(m);
}

/* Decoding n bytes costs at most n + WEFT_MSGPACK_OBJECT_BYTES(n), plus
 * the message and zone headers. */
static void
check_decode_bound(const unsigned char *buf, size_t len)
{
	weft_msgpack_msg *m;
	size_t used;

	alloc_count_start();
	assert_int_equal(weft_msgpack_decode(buf, len, 0, &m), 0);
	used = alloc_count_stop();
	print_message("%zu bytes decoded with %zu bytes in %zu allocations\n",
	              len, used, alloc_calls);
	assert_true(used <= len + WEFT_MSGPACK_OBJECT_BYTES(len) + 512);
	assert_true(alloc_calls <= 2);
	weft_msgpack_msg_free(m);
}

/* Writes an array32 (or map32) header for n items followed by n copies
 * of the elem_len bytes at elem; returns the length. buf must hold it. */
static size_t
repeat(unsigned char *buf, bool map, uint32_t n, const void *elem,
       size_t elem_len)
{
	size_t i;

	buf[0] = map ? 0xdf : 0xdd;
	buf[1] = (unsigned char)(n >> 24);
	buf[2] = (unsigned char)(n >> 16);
	buf[3] = (unsigned char)(n >> 8);
	buf[4] = (unsigned char)n;
	for (i = 0; i < n * (map ? 2 : 1); i++)
		memcpy(buf + 5 + i * elem_len, elem, elem_len);
	return 5 + (size_t)n * (map ? 2 : 1) * elem_len;
}

static void
test_decode_allocation_is_bounded(void **state)
{
	static unsigned char buf[5 + 200000];
	size_t len;

	(void)state;
	/* The densest inputs the bound lets through: nils, pairs of
	 * nils, one-element arrays of an empty array. */
	check_decode_bound(buf, repeat(buf, false, 2050, "\xc0", 1));
	check_decode_bound(buf, repeat(buf, true, 1025, "\xc0", 1));
	check_decode_bound(buf, repeat(buf, false, 1025, "\x91\x90", 2));
	/* Records of a few bytes each fit at any size. */
	len = repeat(buf, false, 40000, "\xce\x01\x02\x03\x04", 5);
	check_decode_bound(buf, len);
	check_decode_bound((const unsigned char *)"\xa3"
	                                          "abc",
	                   4);
}

/*
 * One byte per element is valid msgpack, but msgpack-c reserves a 24-byte
 * object for each: a 31 MiB array of fixints would cost 744 MiB. The
 * check counts that cost against the input's size.
 */
static void
test_check_counts_msgpack_c_object_cost(void **state)
{
	size_t n = 31u << 20, len;
	static unsigned char buf[5 + 4200];
	unsigned char *big = malloc(5 + n);
	weft_msgpack_msg *m = NULL;

	(void)state;
	assert_non_null(big);
	len = repeat(big, false, (uint32_t)n, "\x01", 1);
	assert_int_equal(weft_msgpack_check(big, len, 0), WEFT_EPROTO);
	alloc_count_start();
	assert_int_equal(weft_msgpack_decode(big, len, 0, &m), WEFT_EPROTO);
	assert_int_equal(alloc_count_stop(), 0);
	assert_null(m);
	free(big);
	/* Exactly at the bound, and one element past it. */
	len = repeat(buf, false, 2050, "\x01", 1);
	assert_int_equal(weft_msgpack_check(buf, len, 0), 0);
	len = repeat(buf, false, 2051, "\x01", 1);
	assert_int_equal(weft_msgpack_check(buf, len, 0), WEFT_EPROTO);
	assert_int_equal(msgpack_c_says(buf, len), 0); /* valid, just dear */
	len = repeat(buf, true, 1025, "\x01", 1);
	assert_int_equal(weft_msgpack_check(buf, len, 0), 0);
	len = repeat(buf, true, 1026, "\x01", 1);
	assert_int_equal(weft_msgpack_check(buf, len, 0), WEFT_EPROTO);
	/* Nested containers add up: [[]] costs two objects. */
	len = repeat(buf, false, 1025, "\x91\x90", 2);
	assert_int_equal(weft_msgpack_check(buf, len, 0), 0);
	len = repeat(buf, false, 1026, "\x91\x90", 2);
	assert_int_equal(weft_msgpack_check(buf, len, 0), WEFT_EPROTO);
}

static fx *
msgpack_fixture_with(unsigned max_depth, bool emit_bytes)
{
	weft_msgpack_codec_opts o = {.max_depth = max_depth};
	weft_frame_codec_opts fo = {.emit_bytes = emit_bytes};
	fx *f = fx_new();

	assert_int_equal(weft_frame_codec_add(f->ch, "frame", &fo), 0);
	assert_int_equal(weft_msgpack_codec_add(f->ch, "msgpack", &o), 0);
	fx_start(f);
	return f;
}

static fx *
msgpack_fixture(unsigned max_depth)
{
	return msgpack_fixture_with(max_depth, false);
}

static void
send_frame(fx *f, const void *data, size_t len)
{
	unsigned char hdr[4] = {(unsigned char)(len >> 24),
	                        (unsigned char)(len >> 16),
	                        (unsigned char)(len >> 8), (unsigned char)len};

	fx_send(f, hdr, 4);
	fx_send(f, data, len);
}

static void
pack_sample(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	msgpack_pack_str_with_body(pk, "a", 1);
	msgpack_pack_int(pk, 1);
	msgpack_pack_str_with_body(pk, "b", 1);
	msgpack_pack_array(pk, 2);
	msgpack_pack_true(pk);
	msgpack_pack_str_with_body(pk, "xyz", 3);
}

static void
check_sample(const msgpack_object *o)
{
	const msgpack_object_kv *kv;

	assert_int_equal(o->type, MSGPACK_OBJECT_MAP);
	assert_int_equal(o->via.map.size, 2);
	kv = o->via.map.ptr;
	assert_memory_equal(kv[0].key.via.str.ptr, "a", 1);
	assert_int_equal(kv[0].val.via.u64, 1);
	assert_int_equal(kv[1].val.type, MSGPACK_OBJECT_ARRAY);
	assert_int_equal(kv[1].val.via.array.size, 2);
	assert_true(kv[1].val.via.array.ptr[0].via.boolean);
	assert_memory_equal(kv[1].val.via.array.ptr[1].via.str.ptr, "xyz", 3);
}

static void
test_decode_through_pipeline(void **state)
{
	struct evbuffer *b = evbuffer_new();
	msgpack_packer pk;
	weft_codec_stats st;
	size_t len;
	fx *f = msgpack_fixture(0);

	(void)state;
	assert_int_equal(weft_msgpack_packer_init(&pk, b), 0);
	pack_sample(&pk);
	len = evbuffer_get_length(b);
	send_frame(f, evbuffer_pullup(b, -1), len);
	send_frame(f, evbuffer_pullup(b, -1), len);
	assert_int_equal(f->ntyped, 2);
	assert_ptr_equal(f->typed_type[0], &weft_msg_msgpack);
	/* The bytes went right after; the object does not need them. */
	evbuffer_drain(b, len);
	check_sample(weft_msgpack_msg_object(f->typed[0]));
	check_sample(weft_msgpack_msg_object(f->typed[1]));
	assert_int_equal(weft_codec_get_stats(f->ch, "msgpack", &st), 0);
	assert_int_equal(st.msgs_in, 2);
	assert_int_equal(st.bytes_in, 2 * len);
	evbuffer_free(b);
	fx_free(f);
}

/* Frames that come as byte runs decode in place, bad ones close. */
static void
test_decode_byte_run_frames(void **state)
{
	struct evbuffer *b = evbuffer_new();
	msgpack_packer pk;
	size_t len;
	fx *f = msgpack_fixture_with(0, true);

	(void)state;
	weft_msgpack_packer_init(&pk, b);
	pack_sample(&pk);
	len = evbuffer_get_length(b);
	send_frame(f, evbuffer_pullup(b, -1), len);
	assert_int_equal(f->ntyped, 1);
	check_sample(weft_msgpack_msg_object(f->typed[0]));
	send_frame(f, "\x91\xc1", 2);
	assert_int_equal(f->ntyped, 1);
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_EPROTO);
	fx_run_until_inactive(f);
	evbuffer_free(b);
	fx_free(f);
}

/* A frame that arrives in pieces lies in several chains. */
static void
test_decode_frame_in_many_chains(void **state)
{
	static unsigned char buf[4 + 5 + 50000];
	const msgpack_object *o;
	size_t off, n = 5 + 50000, used;
	fx *f = msgpack_fixture(0);

	(void)state;
	buf[0] = 0;
	buf[1] = 0;
	buf[2] = (unsigned char)(n >> 8);
	buf[3] = (unsigned char)n;
	buf[4] = 0xdd; /* an array of 10000 uint32 */
	buf[5] = buf[6] = 0;
	buf[7] = 10000 >> 8;
	buf[8] = 10000 & 0xff;
	for (off = 0; off < 10000; off++) {
		memcpy(buf + 9 + 5 * off, "\xce\0\0\0", 4);
		buf[9 + 5 * off + 4] = (unsigned char)(off % 128);
	}
	for (off = 0; off + 1000 < sizeof(buf); off += 1000)
		fx_send(f, buf + off, 1000);
	alloc_count_start();
	fx_send(f, buf + off, sizeof(buf) - off);
	used = alloc_count_stop();
	print_message("%zu-byte frame in chains: %zu bytes in %zu "
	              "allocations\n",
	              n, used, alloc_calls);
	assert_true(used <= n + WEFT_MSGPACK_OBJECT_BYTES(n) + 8192);
	assert_int_equal(f->ntyped, 1);
	o = weft_msgpack_msg_object(f->typed[0]);
	assert_int_equal(o->type, MSGPACK_OBJECT_ARRAY);
	assert_int_equal(o->via.array.size, 10000);
	assert_int_equal(o->via.array.ptr[9999].via.u64, 9999 % 128);
	/* And a bad one in pieces is refused the same way. */
	buf[9 + 100] = 0xc1;
	for (off = 0; off + 1000 < sizeof(buf); off += 1000)
		fx_send(f, buf + off, 1000);
	fx_send(f, buf + off, sizeof(buf) - off);
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_EPROTO);
	fx_free(f);
}

static void
check_closes(const void *frame, size_t len, unsigned max_depth)
{
	weft_codec_stats before, after;
	fx *f = msgpack_fixture(max_depth);

	weft_codec_get_totals(WEFT_CODEC_MSGPACK, &before);
	send_frame(f, frame, len);
	assert_int_equal(f->ntyped, 0);
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_EPROTO);
	assert_non_null(strstr(fx_last_warning(), "test-peer"));
	assert_non_null(strstr(fx_last_warning(), "msgpack"));
	/* Valid frames after the bad one go nowhere. */
	send_frame(f, "\x01", 1);
	assert_int_equal(f->ntyped, 0);
	fx_run_until_inactive(f);
	weft_codec_get_totals(WEFT_CODEC_MSGPACK, &after);
	assert_int_equal(after.malformed, before.malformed + 1);
	fx_free(f);
}

static void
test_invalid_msgpack_closes(void **state)
{
	unsigned char deep[40];

	(void)state;
	check_closes("\xc1", 1, 0);
	check_closes("\x01\x02", 2, 0); /* trailing bytes */
	check_closes("\x92\x01", 2, 0); /* truncated */
	check_closes("", 0, 0);         /* empty frame */
	check_closes(deep, nested(deep, 5, false), 4);
	check_closes(deep, nested(deep, 33, false), 0);
}

static void
test_huge_claim_frame_closes_cheaply(void **state)
{
	static const unsigned char frame[] = {0,    0,    0,    5,   0xdd,
	                                      0xff, 0xff, 0xff, 0xff};
	size_t used;
	fx *f = msgpack_fixture(0);

	(void)state;
	alloc_count_start();
	fx_send(f, frame, sizeof(frame));
	used = alloc_count_stop();
	print_message("huge claim: %zu bytes in %zu allocations\n", used,
	              alloc_calls);
	assert_int_equal(f->errors, 1);
	assert_int_equal(f->last_error, WEFT_EPROTO);
	assert_true(used < 8192);
	fx_run_until_inactive(f);
	fx_free(f);
}

/* Takes the next frame from buf and decodes it. */
static weft_msgpack_msg *
next_frame_object(struct evbuffer *buf)
{
	unsigned char hdr[4], body[256];
	weft_msgpack_msg *m;
	size_t len;

	assert_int_equal(evbuffer_remove(buf, hdr, 4), 4);
	len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 |
	      (size_t)hdr[2] << 8 | hdr[3];
	assert_true(len <= sizeof(body));
	assert_int_equal(evbuffer_remove(buf, body, len), (int)len);
	assert_int_equal(weft_msgpack_decode(body, len, 0, &m), 0);
	return m;
}

static int
pack_fn(msgpack_packer *pk, void *arg)
{
	(void)arg;
	pack_sample(pk);
	return 0;
}

static int
fail_fn(msgpack_packer *pk, void *arg)
{
	(void)arg;
	msgpack_pack_nil(pk);
	return WEFT_EINVAL;
}

static void
count_free(void *arg)
{
	(*(int *)arg)++;
}

static void
test_encode_object_and_fn(void **state)
{
	struct evbuffer *b = evbuffer_new();
	weft_msgpack_msg *m, *back;
	weft_msgpack_fn *fn;
	msgpack_packer pk;
	int freed = 0;
	fx *f = msgpack_fixture(0);

	(void)state;
	weft_msgpack_packer_init(&pk, b);
	pack_sample(&pk);
	assert_int_equal(weft_msgpack_decode(evbuffer_pullup(b, -1),
	                                     evbuffer_get_length(b), 0, &m),
	                 0);
	evbuffer_free(b);
	assert_int_equal(
	    weft_channel_write_msg(f->ch, &weft_msg_msgpack, m, NULL, NULL), 0);
	assert_int_equal(weft_msgpack_fn_new(pack_fn, &freed, count_free, &fn),
	                 0);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_msgpack_fn, fn,
	                                        fx_write_cb, f),
	                 0);
	assert_int_equal(weft_msgpack_fn_new(fail_fn, &freed, count_free, &fn),
	                 0);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_msgpack_fn, fn,
	                                        fx_write_cb, f),
	                 0);
	fx_run_until_write_cbs(f, 2);
	assert_int_equal(freed, 2);
	assert_int_equal(f->write_status, WEFT_EINVAL);
	back = next_frame_object(fx_peer_input(f));
	check_sample(weft_msgpack_msg_object(back));
	weft_msgpack_msg_free(back);
	back = next_frame_object(fx_peer_input(f));
	check_sample(weft_msgpack_msg_object(back));
	weft_msgpack_msg_free(back);
	assert_int_equal(evbuffer_get_length(fx_peer_input(f)), 0);
	fx_free(f);
}

static void
test_echo_decoded_message(void **state)
{
	unsigned char frame[] = {0, 0, 0, 4, 0x92, 0x01, 0xa1, 'z'};
	unsigned char out[8];
	fx *f = msgpack_fixture(0);

	(void)state;
	fx_send(f, frame, sizeof(frame));
	assert_int_equal(f->ntyped, 1);
	/* The sink owns it; writing gives it to the pipeline. */
	f->ntyped = 0;
	assert_int_equal(weft_channel_write_msg(f->ch, f->typed_type[0],
	                                        f->typed[0], NULL, NULL),
	                 0);
	fx_run_until_peer_has(f, sizeof(frame));
	assert_int_equal(evbuffer_remove(fx_peer_input(f), out, sizeof(out)),
	                 (int)sizeof(frame));
	assert_memory_equal(out, frame, sizeof(frame));
	fx_free(f);
}

static void
test_msg_new(void **state)
{
	msgpack_zone *z = msgpack_zone_new(256);
	msgpack_object o = {.type = MSGPACK_OBJECT_STR};
	weft_msgpack_msg *m;
	char *s = msgpack_zone_malloc(z, 5);

	(void)state;
	memcpy(s, "hello", 5);
	o.via.str.ptr = s;
	o.via.str.size = 5;
	assert_int_equal(weft_msgpack_msg_new(&o, z, &m), 0);
	assert_ptr_equal(weft_msgpack_msg_zone(m), z);
	assert_memory_equal(weft_msgpack_msg_object(m)->via.str.ptr, "hello",
	                    5);
	weft_msg_free(&weft_msg_msgpack, m);
	o.type = MSGPACK_OBJECT_POSITIVE_INTEGER;
	o.via.u64 = 7;
	assert_int_equal(weft_msgpack_msg_new(&o, NULL, &m), 0);
	assert_int_equal(weft_msgpack_msg_object(m)->via.u64, 7);
	weft_msgpack_msg_free(m);
	weft_msgpack_msg_free(NULL);
	assert_int_equal(weft_msgpack_packer_init(NULL, NULL), WEFT_EINVAL);
}

static void
test_bytes_pass_the_encoder(void **state)
{
	struct evbuffer *b = evbuffer_new();
	unsigned char out[5];
	fx *f = msgpack_fixture(0);

	(void)state;
	evbuffer_add(b, "\xc3", 1);
	assert_int_equal(weft_channel_write(f->ch, b, NULL, NULL), 0);
	fx_run_until_peer_has(f, 5);
	assert_int_equal(evbuffer_remove(fx_peer_input(f), out, 5), 5);
	assert_memory_equal(out, "\0\0\0\1\xc3", 5);
	evbuffer_free(b);
	fx_free(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_check_accepts_valid),
	    cmocka_unit_test(test_check_rejects_invalid),
	    cmocka_unit_test(test_depth_limit),
	    cmocka_unit_test(test_huge_claim_allocates_nothing),
	    cmocka_unit_test(test_decode_allocation_is_bounded),
	    cmocka_unit_test(test_check_counts_msgpack_c_object_cost),
	    cmocka_unit_test(test_decode_through_pipeline),
	    cmocka_unit_test(test_decode_frame_in_many_chains),
	    cmocka_unit_test(test_decode_byte_run_frames),
	    cmocka_unit_test(test_invalid_msgpack_closes),
	    cmocka_unit_test(test_huge_claim_frame_closes_cheaply),
	    cmocka_unit_test(test_encode_object_and_fn),
	    cmocka_unit_test(test_echo_decoded_message),
	    cmocka_unit_test(test_msg_new),
	    cmocka_unit_test(test_bytes_pass_the_encoder),
	};

	alloc_count_setup();
	fx_log_capture();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
