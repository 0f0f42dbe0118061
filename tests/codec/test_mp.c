/* SPDX-License-Identifier: MIT */
/*
 * test_mp.c: the bounded msgpack cursor: every valid encoding of each
 * type read, everything else refused, every truncation refused, the first
 * error kept, and the writer's smallest encodings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <weft/mp.h>

#include "support/wire.h"

/* Every encoding of the non-negative v there is; returns how many, each
 * in enc[k] of len[k] bytes. */
static size_t
uint_encodings(uint64_t v, unsigned char enc[9][9], size_t len[9])
{
	static const unsigned char tags[] = {0xcc, 0xcd, 0xce, 0xcf,
	                                     0xd0, 0xd1, 0xd2, 0xd3};
	size_t k = 0, i, w;

	if (v <= 0x7f) {
		enc[k][0] = (unsigned char)v;
		len[k++] = 1;
	}
	for (i = 0; i < 8; i++) {
		w = (size_t)1 << (i % 4);
		/* Unsigned forms hold 8w bits, signed ones 8w - 1. */
		if (w < 8 && v >> (8 * w - (i >= 4)) != 0)
			continue;
		if (w == 8 && i >= 4 && v >> 63 != 0)
			continue;
		enc[k][0] = tags[i];
		len[k] = 1 + weft_test_put_be(enc[k] + 1, v, w);
		k++;
	}
	return k;
}

static const uint64_t edges[] = {0,
                                 1,
                                 0x7f,
                                 0x80,
                                 0xff,
                                 0x100,
                                 0x7fff,
                                 0x8000,
                                 0xffff,
                                 0x10000,
                                 0x7fffffff,
                                 0x80000000u,
                                 0xffffffffu,
                                 0x100000000ull,
                                 (uint64_t)INT64_MAX,
                                 (uint64_t)INT64_MAX + 1,
                                 UINT64_MAX};
#define NEDGES (sizeof(edges) / sizeof(edges[0]))

/* Every prefix of the n bytes at p is refused by read. */
static void
every_truncation_fails(const unsigned char *p, size_t n,
                       int (*read)(weft_mp_reader *r))
{
	weft_mp_reader r;
	size_t k;

	for (k = 0; k < n; k++) {
		weft_mp_reader_init(&r, p, k);
		assert_int_equal(read(&r), WEFT_EPROTO);
		assert_int_equal(weft_mp_reader_end(&r), WEFT_EPROTO);
	}
}

static int
read_any_uint(weft_mp_reader *r)
{
	uint64_t v;

	return weft_mp_read_uint(r, UINT64_MAX, &v);
}

static void
test_uint_every_encoding_and_range(void **state)
{
	unsigned char enc[9][9];
	size_t len[9], n, i, k;
	weft_mp_reader r;
	uint64_t v;

	(void)state;
	for (i = 0; i < NEDGES; i++) {
		n = uint_encodings(edges[i], enc, len);
		/* 0 has all nine forms, UINT64_MAX only uint 64. */
		assert_int_equal(n, edges[i] == 0            ? 9
		                    : edges[i] == UINT64_MAX ? 1
		                                             : n);
		assert_true(n >= 1);
		for (k = 0; k < n; k++) {
			weft_mp_reader_init(&r, enc[k], len[k]);
			assert_int_equal(weft_mp_read_uint(&r, UINT64_MAX, &v),
			                 0);
			assert_int_equal(v, edges[i]);
			assert_int_equal(weft_mp_reader_end(&r), 0);
			/* Above max: refused. */
			if (edges[i] > 0) {
				weft_mp_reader_init(&r, enc[k], len[k]);
				assert_int_equal(
				    weft_mp_read_uint(&r, edges[i] - 1, &v),
				    WEFT_EPROTO);
			}
			every_truncation_fails(enc[k], len[k], read_any_uint);
		}
	}
}

static void
test_uint_refuses_negatives_and_other_types(void **state)
{
	static const unsigned char bad[][9] = {
	    {0xff},                         /* fixint -1 */
	    {0xe0},                         /* fixint -32 */
	    {0xd0, 0x80},                   /* int 8 */
	    {0xd1, 0xff, 0xff},             /* int 16 */
	    {0xd2, 0x80, 0, 0, 0},          /* int 32 */
	    {0xd3, 0x80, 0, 0, 0, 0, 0, 0}, /* int 64 (8 bytes short) */
	    {0xc0},                         /* nil */
	    {0xc2},                         /* false */
	    {0xca, 0, 0, 0, 0},             /* float 32 */
	    {0xa0},                         /* fixstr */
	    {0x90},                         /* fixarray */
	    {0xc4, 0},                      /* bin 8 */
	};
	static const size_t lens[] = {1, 1, 2, 3, 5, 8, 1, 1, 5, 1, 1, 2};
	weft_mp_reader r;
	uint64_t v;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		weft_mp_reader_init(&r, bad[i], lens[i]);
		assert_int_equal(weft_mp_read_uint(&r, UINT64_MAX, &v),
		                 WEFT_EPROTO);
	}
}

/* The sized types: str (fixstr, str 8/16/32), bin (8/16/32) and array
 * headers (fixarray, array 16/32), each in every form that holds n. */
static size_t
sized_encoding(unsigned char *p, int type, int form, uint32_t n)
{
	static const unsigned char str_tags[] = {0xd9, 0xda, 0xdb};
	static const unsigned char bin_tags[] = {0xc4, 0xc5, 0xc6};
	static const unsigned char arr_tags[] = {0, 0xdc, 0xdd};
	size_t w;

	if (form == 0 && type == 0) {
		p[0] = (unsigned char)(0xa0 | n);
		return 1;
	}
	if (form == 0 && type == 2) {
		p[0] = (unsigned char)(0x90 | n);
		return 1;
	}
	if (type == 0) {
		p[0] = str_tags[form - 1];
		w = (size_t)1 << (form - 1);
	} else if (type == 1) {
		p[0] = bin_tags[form];
		w = (size_t)1 << form;
	} else {
		p[0] = arr_tags[form];
		w = form == 1 ? 2 : 4;
	}
	return 1 + weft_test_put_be(p + 1, n, w);
}

static int
read_str(weft_mp_reader *r)
{
	const char *s;
	size_t n;

	return weft_mp_read_str(r, &s, &n);
}

static int
read_bin(weft_mp_reader *r)
{
	const void *s;
	size_t n;

	return weft_mp_read_bin(r, &s, &n);
}

static void
test_str_and_bin_every_encoding_and_truncation(void **state)
{
	static const uint32_t sizes[] = {0, 1, 31, 32, 255, 256, 65535, 65536};
	static unsigned char buf[70000];
	weft_mp_reader r;
	const void *data;
	const char *s;
	size_t i, n, len, k;
	int form, type;

	(void)state;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (type = 0; type < 2; type++)
			for (form = 0; form < 4; form++) {
				/* What each form holds: fixstr, str 8,
				 * 16, 32; bin 8, 16, 32. */
				static const uint32_t caps[2][4] = {
				    {31, 0xff, 0xffff, UINT32_MAX},
				    {0xff, 0xffff, UINT32_MAX, 0}};
				uint32_t sz = sizes[i];

				if (sz > caps[type][form] ||
				    (type == 1 && form == 3))
					continue;
				n = sized_encoding(buf, type, form, sz);
				for (k = 0; k < sz; k++)
					buf[n + k] = (unsigned char)(k * 3);
				weft_mp_reader_init(&r, buf, n + sz);
				if (type == 0) {
					assert_int_equal(
					    weft_mp_read_str(&r, &s, &len), 0);
					data = s;
				} else {
					assert_int_equal(
					    weft_mp_read_bin(&r, &data, &len),
					    0);
				}
				assert_int_equal(len, sz);
				assert_ptr_equal(data, buf + n);
				assert_int_equal(weft_mp_reader_end(&r), 0);
				/* The other type is refused. */
				weft_mp_reader_init(&r, buf, n + sz);
				assert_int_equal(type == 0 ? read_bin(&r)
				                           : read_str(&r),
				                 WEFT_EPROTO);
				if (sz <= 300)
					every_truncation_fails(
					    buf, n + sz,
					    type == 0 ? read_str : read_bin);
			}
}

static int
read_array(weft_mp_reader *r)
{
	uint32_t n;

	return weft_mp_read_array(r, &n);
}

static void
test_array_nil_bool(void **state)
{
	static const uint32_t sizes[] = {0, 15, 16, 65535, 65536};
	unsigned char buf[8];
	weft_mp_reader r;
	uint32_t count;
	size_t i, n;
	bool b;
	int form;

	(void)state;
	for (i = 0; i < 5; i++)
		for (form = 0; form < 3; form++) {
			if ((form == 0 && sizes[i] > 15) ||
			    (form == 1 && sizes[i] > 0xffff))
				continue;
			n = sized_encoding(buf, 2, form, sizes[i]);
			weft_mp_reader_init(&r, buf, n);
			assert_int_equal(weft_mp_read_array(&r, &count), 0);
			assert_int_equal(count, sizes[i]);
			assert_int_equal(weft_mp_reader_end(&r), 0);
			every_truncation_fails(buf, n, read_array);
		}
	weft_mp_reader_init(&r, "\xc0\xc2\xc3\x80", 4);
	assert_int_equal(weft_mp_read_nil(&r), 0);
	assert_int_equal(weft_mp_read_bool(&r, &b), 0);
	assert_false(b);
	assert_int_equal(weft_mp_read_bool(&r, &b), 0);
	assert_true(b);
	/* A fixmap is no array; the error sticks. */
	assert_int_equal(weft_mp_read_array(&r, &count), WEFT_EPROTO);
	weft_mp_reader_init(&r, "\xc3\xc0", 2);
	assert_int_equal(weft_mp_read_nil(&r), WEFT_EPROTO);
	assert_int_equal(weft_mp_read_bool(&r, &b), WEFT_EPROTO);
	assert_int_equal(weft_mp_reader_end(&r), WEFT_EPROTO);
	weft_mp_reader_init(&r, NULL, 0);
	assert_int_equal(weft_mp_reader_end(&r), 0);
	assert_int_equal(weft_mp_read_nil(&r), WEFT_EPROTO);
}

static void
test_first_error_sticks_and_leftovers_fail_the_end(void **state)
{
	weft_mp_reader r;
	uint64_t v;

	(void)state;
	weft_mp_reader_init(&r, "\x01\xc0\x02", 3);
	assert_int_equal(weft_mp_read_uint(&r, 10, &v), 0);
	assert_int_equal(weft_mp_read_uint(&r, 10, &v), WEFT_EPROTO);
	/* The next value would read, but the reader failed. */
	assert_int_equal(weft_mp_read_nil(&r), WEFT_EPROTO);
	assert_int_equal(weft_mp_reader_end(&r), WEFT_EPROTO);
	weft_mp_reader_init(&r, "\x01\x02", 2);
	assert_int_equal(weft_mp_read_uint(&r, 10, &v), 0);
	assert_int_equal(weft_mp_reader_left(&r), 1);
	assert_int_equal(weft_mp_reader_end(&r), WEFT_EPROTO);
}

/* ---- The writer --------------------------------------------------------- */

static void
test_writer_uses_the_smallest_encodings(void **state)
{
	static const size_t uint_len[] = {1, 1, 1, 2, 2, 3, 3, 3, 3,
	                                  5, 5, 5, 5, 9, 9, 9, 9};
	static const uint32_t sizes[] = {0,   15,  16,    31,   32,
	                                 255, 256, 65535, 65536};
	static const size_t arr_len[] = {1, 1, 3, 3, 3, 3, 3, 3, 5};
	static const size_t str_len[] = {1, 1, 1, 1, 2, 2, 3, 3, 5};
	static const size_t bin_len[] = {2, 2, 2, 2, 2, 2, 3, 3, 5};
	unsigned char buf[16];
	weft_mp_writer w;
	weft_mp_reader r;
	uint32_t n;
	uint64_t v;
	size_t i;

	(void)state;
	for (i = 0; i < NEDGES; i++) {
		weft_mp_writer_init(&w, buf, sizeof(buf));
		assert_int_equal(weft_mp_write_uint(&w, edges[i]), 0);
		assert_int_equal(weft_mp_writer_length(&w), uint_len[i]);
		weft_mp_reader_init(&r, buf, weft_mp_writer_length(&w));
		assert_int_equal(weft_mp_read_uint(&r, UINT64_MAX, &v), 0);
		assert_int_equal(v, edges[i]);
		assert_int_equal(buf[0] >= 0xd0 && buf[0] <= 0xd3, 0);
	}
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		weft_mp_writer_init(&w, buf, sizeof(buf));
		weft_mp_write_array(&w, sizes[i]);
		assert_int_equal(weft_mp_writer_length(&w), arr_len[i]);
		weft_mp_reader_init(&r, buf, arr_len[i]);
		assert_int_equal(weft_mp_read_array(&r, &n), 0);
		assert_int_equal(n, sizes[i]);
		weft_mp_writer_init(&w, buf, sizeof(buf));
		weft_mp_write_str_header(&w, sizes[i]);
		assert_int_equal(weft_mp_writer_length(&w), str_len[i]);
		weft_mp_writer_init(&w, buf, sizeof(buf));
		weft_mp_write_bin_header(&w, sizes[i]);
		assert_int_equal(weft_mp_writer_length(&w), bin_len[i]);
		weft_mp_reader_init(&r, buf, bin_len[i]);
		assert_int_equal(weft_mp_read_bin_header(&r, &n), 0);
		assert_int_equal(n, sizes[i]);
	}
}

static void
test_writer_round_trip_and_overflow(void **state)
{
	unsigned char buf[32];
	weft_mp_writer w;
	weft_mp_reader r;
	const char *s;
	const void *b;
	size_t len;
	bool t;

	(void)state;
	weft_mp_writer_init(&w, buf, sizeof(buf));
	assert_int_equal(weft_mp_write_raw(&w, "WEFT", 4), 0);
	weft_mp_write_array(&w, 4);
	weft_mp_write_str(&w, "demo", 4);
	weft_mp_write_bin(&w, "\x00\x01", 2);
	weft_mp_write_nil(&w);
	weft_mp_write_bool(&w, true);
	assert_int_equal(weft_mp_writer_status(&w), 0);
	assert_int_equal(weft_mp_writer_length(&w), 4 + 1 + 5 + 4 + 1 + 1);
	weft_mp_reader_init(&r, buf + 4, weft_mp_writer_length(&w) - 4);
	weft_mp_read_array(&r, &(uint32_t){0});
	weft_mp_read_str(&r, &s, &len);
	assert_memory_equal(s, "demo", 4);
	weft_mp_read_bin(&r, &b, &len);
	assert_int_equal(len, 2);
	weft_mp_read_nil(&r);
	weft_mp_read_bool(&r, &t);
	assert_true(t);
	assert_int_equal(weft_mp_reader_end(&r), 0);
	/* A string that does not fit is not written at all, and the
	 * error sticks. */
	weft_mp_writer_init(&w, buf, 6);
	assert_int_equal(weft_mp_write_uint(&w, 1), 0);
	assert_int_equal(weft_mp_write_str(&w, "hello", 5), WEFT_ETOOBIG);
	assert_int_equal(weft_mp_writer_length(&w), 1);
	assert_int_equal(weft_mp_write_uint(&w, 1), WEFT_ETOOBIG);
	assert_int_equal(weft_mp_writer_status(&w), WEFT_ETOOBIG);
	weft_mp_writer_init(&w, buf, 8);
	assert_int_equal(weft_mp_write_uint(&w, UINT64_MAX), WEFT_ETOOBIG);
	assert_int_equal(weft_mp_writer_length(&w), 0);
}

/* Maps both ways, and skipping whole objects of every type, nested or
 * cut short. */
static void
test_map_and_skip(void **state)
{
	static const unsigned char objects[] = {
	    0x05,                                     /* fixint */
	    0xe0,                                     /* negative fixint */
	    0xc0, 0xc2,                               /* nil, false */
	    0xcb, 0,    0,    0,    0,    0, 0, 0, 0, /* float 64 */
	    0xd1, 0xff, 0xfe,                         /* int 16 */
	    0xa2, 'h',  'i',                          /* fixstr */
	    0xd9, 0x01, 'x',                          /* str 8 */
	    0xc5, 0x00, 0x02, 1,    2,                /* bin 16 */
	    0xd4, 0x01, 0x02,                         /* fixext 1 */
	    0xc7, 0x02, 0x05, 1,    2,                /* ext 8 */
	    0x92, 0x81, 0x01, 0x90, 0xa0,             /* [{1: []}, ""] */
	    0xde, 0x00, 0x01, 0x01, 0x02,             /* map 16 {1: 2} */
	};
	unsigned char buf[16];
	weft_mp_reader r;
	weft_mp_writer w;
	uint32_t n;
	size_t cut;
	int objs = 0;

	(void)state;
	weft_mp_writer_init(&w, buf, sizeof(buf));
	weft_mp_write_map(&w, 1);
	weft_mp_write_map(&w, 16);
	weft_mp_write_map(&w, 70000);
	assert_int_equal(weft_mp_writer_length(&w), 1 + 3 + 5);
	weft_mp_reader_init(&r, buf, weft_mp_writer_length(&w));
	assert_int_equal(weft_mp_read_map(&r, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(weft_mp_read_map(&r, &n), 0);
	assert_int_equal(n, 16);
	assert_int_equal(weft_mp_read_map(&r, &n), 0);
	assert_int_equal(n, 70000);
	assert_int_equal(weft_mp_reader_end(&r), 0);
	weft_mp_reader_init(&r, "\x90", 1);
	assert_int_equal(weft_mp_read_map(&r, &n), WEFT_EPROTO);

	weft_mp_reader_init(&r, objects, sizeof(objects));
	while (weft_mp_reader_left(&r) > 0) {
		assert_int_equal(weft_mp_skip(&r, 3), 0);
		objs++;
	}
	assert_int_equal(objs, 13);
	/* Cut anywhere inside the last object: refused. */
	for (cut = sizeof(objects) - 5; cut < sizeof(objects); cut++) {
		weft_mp_reader_init(&r, objects + sizeof(objects) - 5,
		                    cut - (sizeof(objects) - 5));
		assert_int_equal(weft_mp_skip(&r, 3), WEFT_EPROTO);
	}
	/* Three containers nested where two are allowed; type 0xc1; a
	 * container claiming more elements than there are bytes. */
	weft_mp_reader_init(&r, "\x92\x81\x01\x90\xa0", 5);
	assert_int_equal(weft_mp_skip(&r, 2), WEFT_EPROTO);
	weft_mp_reader_init(&r, "\xc1", 1);
	assert_int_equal(weft_mp_skip(&r, 1), WEFT_EPROTO);
	weft_mp_reader_init(&r, "\xdd\xff\xff\xff\xff\x01", 6);
	assert_int_equal(weft_mp_skip(&r, 1), WEFT_EPROTO);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_uint_every_encoding_and_range),
	    cmocka_unit_test(test_uint_refuses_negatives_and_other_types),
	    cmocka_unit_test(test_str_and_bin_every_encoding_and_truncation),
	    cmocka_unit_test(test_array_nil_bool),
	    cmocka_unit_test(
	        test_first_error_sticks_and_leftovers_fail_the_end),
	    cmocka_unit_test(test_writer_uses_the_smallest_encodings),
	    cmocka_unit_test(test_writer_round_trip_and_overflow),
	    cmocka_unit_test(test_map_and_skip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
