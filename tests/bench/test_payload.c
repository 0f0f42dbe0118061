/* SPDX-License-Identifier: MIT */
/* Tests of bench/weft-bench/payload.c: building and checking messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wbench.h"

/* make_stream builds n frames of size bytes, numbered from 0. */
static uint8_t *
make_stream(size_t size, size_t n, const uint8_t *pattern)
{
	uint8_t *buf = malloc(n * (4 + size) + 1);

	assert_non_null(buf);
	for (size_t i = 0; i < n; i++) {
		uint8_t *f = buf + i * (4 + size);

		wbench_be32_put(f, (uint32_t)size);
		memcpy(f + 4, pattern, size);
		wbench_seq_put(f + 4, size, i);
	}
	return buf;
}

static void
test_seq_round_trips_at_every_size(void **state)
{
	uint8_t buf[16];

	(void)state;
	for (size_t size = 0; size <= 16; size++) {
		uint64_t seq = 0x0102030405060708ull;

		wbench_seq_put(buf, size, seq);
		assert_int_equal(wbench_seq_get(buf, size),
		                 seq & wbench_seq_mask(size));
	}
	assert_int_equal(wbench_seq_mask(0), 0);
	assert_int_equal(wbench_seq_mask(2), 0xffff);
	assert_true(wbench_seq_mask(8) == UINT64_MAX);
}

/* Every split of a stream into two reads gives the same frames. */
static void
test_scan_split_at_every_byte(void **state)
{
	const size_t sizes[] = {0, 1, 3, 8, 9, 64};
	uint8_t pattern[64];

	(void)state;
	wbench_pattern_fill(pattern, sizeof(pattern), 7);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t size = sizes[k], len = 5 * (4 + size);
		uint8_t *buf = make_stream(size, 5, pattern);

		for (size_t cut = 0; cut <= len; cut++) {
			wbench_scan s;
			long a, b;

			wbench_scan_init(&s, size, pattern);
			a = wbench_scan_feed(&s, buf, cut);
			b = wbench_scan_feed(&s, buf + cut, len - cut);
			assert_true(a >= 0 && b >= 0);
			assert_int_equal(a + b, 5);
			assert_int_equal(s.frames, 5);
			assert_int_equal(s.errors, 0);
		}
		free(buf);
	}
}

static void
test_scan_byte_at_a_time(void **state)
{
	uint8_t pattern[100], *buf;
	wbench_scan s;

	(void)state;
	wbench_pattern_fill(pattern, sizeof(pattern), 3);
	buf = make_stream(sizeof(pattern), 3, pattern);
	wbench_scan_init(&s, sizeof(pattern), pattern);
	for (size_t i = 0; i < 3 * (4 + sizeof(pattern)); i++)
		assert_true(wbench_scan_feed(&s, buf + i, 1) >= 0);
	assert_int_equal(s.frames, 3);
	assert_int_equal(s.errors, 0);
	free(buf);
}

static void
test_scan_counts_lost_and_repeated_frames(void **state)
{
	uint8_t pattern[16], *buf;
	size_t flen = 4 + sizeof(pattern);
	wbench_scan s;

	(void)state;
	wbench_pattern_fill(pattern, sizeof(pattern), 1);
	buf = make_stream(sizeof(pattern), 4, pattern);
	wbench_scan_init(&s, sizeof(pattern), NULL);
	/* Frames 0, 2 (1 lost), 2 again. */
	assert_int_equal(wbench_scan_feed(&s, buf, flen), 1);
	assert_int_equal(wbench_scan_feed(&s, buf + 2 * flen, flen), 1);
	assert_int_equal(wbench_scan_feed(&s, buf + 2 * flen, flen), 1);
	assert_int_equal(s.frames, 3);
	assert_int_equal(s.errors, 2);
	free(buf);
}

static void
test_scan_verify_finds_a_changed_byte(void **state)
{
	uint8_t pattern[32], *buf;
	wbench_scan s;

	(void)state;
	wbench_pattern_fill(pattern, sizeof(pattern), 5);
	buf = make_stream(sizeof(pattern), 2, pattern);
	buf[4 + 20] ^= 1;
	wbench_scan_init(&s, sizeof(pattern), pattern);
	assert_int_equal(wbench_scan_feed(&s, buf, 2 * 36), 2);
	assert_int_equal(s.errors, 1);
	/* Without verify only the sequence numbers count. */
	wbench_scan_init(&s, sizeof(pattern), NULL);
	assert_int_equal(wbench_scan_feed(&s, buf, 2 * 36), 2);
	assert_int_equal(s.errors, 0);
	free(buf);
}

static void
test_scan_rejects_a_wrong_length(void **state)
{
	uint8_t pattern[8] = {0}, *buf;
	wbench_scan s;

	(void)state;
	buf = make_stream(sizeof(pattern), 2, pattern);
	wbench_be32_put(buf + 12, 1u << 30);
	wbench_scan_init(&s, sizeof(pattern), NULL);
	assert_int_equal(wbench_scan_feed(&s, buf, 24), -1);
	assert_int_equal(s.frames, 1);
	assert_int_equal(s.errors, 1);
	free(buf);
}

static void
test_pattern_depends_on_seed(void **state)
{
	uint8_t a[32], b[32], c[32];

	(void)state;
	wbench_pattern_fill(a, sizeof(a), 1);
	wbench_pattern_fill(b, sizeof(b), 1);
	wbench_pattern_fill(c, sizeof(c), 2);
	assert_memory_equal(a, b, sizeof(a));
	assert_memory_not_equal(a, c, sizeof(a));
}

/* Each kind of payload is the same for the same seed, and the kinds
 * differ: pattern is the pattern. */
static void
test_payload_kinds_repeat_by_seed(void **state)
{
	enum wbench_payload kinds[] = {
	    WBENCH_PAYLOAD_PATTERN, WBENCH_PAYLOAD_TEXT, WBENCH_PAYLOAD_RANDOM};
	uint8_t a[3][1000], b[1000], pattern[1000];

	(void)state;
	wbench_pattern_fill(pattern, sizeof(pattern), 7);
	for (int k = 0; k < 3; k++) {
		wbench_payload_fill(a[k], sizeof(a[k]), kinds[k], 7);
		wbench_payload_fill(b, sizeof(b), kinds[k], 7);
		assert_memory_equal(a[k], b, sizeof(b));
		wbench_payload_fill(b, sizeof(b), kinds[k], 8);
		assert_memory_not_equal(a[k], b, sizeof(b));
	}
	assert_memory_equal(a[0], pattern, sizeof(pattern));
	assert_memory_not_equal(a[0], a[2], sizeof(pattern));
}

/* Text payloads are JSON-like records, one a line, cut at the size. */
static void
test_text_payload_is_records_of_words(void **state)
{
	uint8_t buf[4097];
	char text[4097];
	size_t lines = 0;

	(void)state;
	buf[4096] = 0xff;
	wbench_payload_fill(buf, 4096, WBENCH_PAYLOAD_TEXT, 1);
	assert_int_equal(buf[4096], 0xff);
	assert_memory_equal(buf, "{\"id\":\"user", 10);
	for (size_t i = 0; i < 4096; i++) {
		assert_true(buf[i] == '\n' || (buf[i] >= 32 && buf[i] < 127));
		lines += buf[i] == '\n';
	}
	assert_true(lines > 10);
	memcpy(text, buf, 4096);
	text[4096] = '\0';
	assert_non_null(strstr(text, "\"status\":\""));
	/* Sizes shorter than a record, and none at all. */
	wbench_payload_fill(buf, 3, WBENCH_PAYLOAD_TEXT, 1);
	assert_memory_equal(buf, "{\"i", 3);
	wbench_payload_fill(buf, 0, WBENCH_PAYLOAD_RANDOM, 1);
	wbench_payload_fill(buf, 5, WBENCH_PAYLOAD_RANDOM, 1);
}

static void
test_payload_names_round_trip(void **state)
{
	enum wbench_payload kind;

	(void)state;
	for (int k = WBENCH_PAYLOAD_PATTERN; k <= WBENCH_PAYLOAD_RANDOM; k++) {
		assert_int_equal(
		    wbench_payload_parse(
		        wbench_payload_name((enum wbench_payload)k), &kind),
		    0);
		assert_int_equal(kind, k);
	}
	assert_int_equal(wbench_payload_parse("zeros", &kind), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_seq_round_trips_at_every_size),
	    cmocka_unit_test(test_scan_split_at_every_byte),
	    cmocka_unit_test(test_scan_byte_at_a_time),
	    cmocka_unit_test(test_scan_counts_lost_and_repeated_frames),
	    cmocka_unit_test(test_scan_verify_finds_a_changed_byte),
	    cmocka_unit_test(test_scan_rejects_a_wrong_length),
	    cmocka_unit_test(test_pattern_depends_on_seed),
	    cmocka_unit_test(test_payload_kinds_repeat_by_seed),
	    cmocka_unit_test(test_text_payload_is_records_of_words),
	    cmocka_unit_test(test_payload_names_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
