/* SPDX-License-Identifier: MIT */
/*
 * test_histogram_text.c: a histogram's buckets written as text and read
 * back (weft_histogram_format, weft_histogram_parse), through
 * <weft/histogram.h>.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <weft/histogram.h>

static weft_histogram *
make(unsigned sub_bits, uint64_t max_value)
{
	weft_histogram_opts o = {.sub_bits = sub_bits, .max_value = max_value};
	weft_histogram *h = NULL;

	assert_int_equal(weft_histogram_new_opts(&o, &h), 0);
	return h;
}

/* format_all returns h's whole text, which the caller frees. */
static char *
format_all(const weft_histogram *h)
{
	size_t len = weft_histogram_format(h, NULL, 0);
	char *text = malloc(len + 1);

	assert_non_null(text);
	assert_int_equal(weft_histogram_format(h, text, len + 1), len);
	assert_int_equal(strlen(text), len);
	return text;
}

static void
test_empty_formats_as_empty_text(void **state)
{
	weft_histogram *h = make(5, 0), *back = make(5, 0);
	char buf[8] = "x";

	(void)state;
	assert_int_equal(weft_histogram_format(h, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
	assert_int_equal(weft_histogram_parse(back, ""), 0);
	assert_int_equal(weft_histogram_parse(back, "\n"), 0);
	assert_int_equal(weft_histogram_count(back), 0);
	weft_histogram_free(h);
	weft_histogram_free(back);
}

static void
test_exact_values_format_as_pairs(void **state)
{
	weft_histogram *h = make(5, 0);
	char buf[64];

	(void)state;
	weft_histogram_record(h, 3);
	weft_histogram_record_n(h, 40, 2);
	assert_int_equal(weft_histogram_format(h, buf, sizeof(buf)), 8);
	assert_string_equal(buf, "3:1 40:2");
	weft_histogram_free(h);
}

/* A text read into a histogram of the same or finer layout gives back
 * the same count, maximum and percentiles. */
static void
test_parse_rebuilds_what_format_wrote(void **state)
{
	weft_histogram *h = make(5, (UINT64_C(1) << 41) - 1);
	weft_histogram *same = make(5, (UINT64_C(1) << 41) - 1);
	weft_histogram *finer = make(7, 0);
	uint64_t s = 88172645463325252ull;
	char *text;

	(void)state;
	for (int i = 0; i < 5000; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		weft_histogram_record(h, s >> (20 + s % 40));
	}
	text = format_all(h);
	assert_int_equal(weft_histogram_parse(same, text), 0);
	assert_int_equal(weft_histogram_parse(finer, text), 0);
	for (double p = 1; p <= 100; p += 0.5) {
		assert_int_equal(weft_histogram_percentile(same, p),
		                 weft_histogram_percentile(h, p));
		assert_int_equal(weft_histogram_percentile(finer, p),
		                 weft_histogram_percentile(h, p));
	}
	assert_int_equal(weft_histogram_count(finer), 5000);
	assert_int_equal(weft_histogram_max(finer), weft_histogram_max(h));
	free(text);
	weft_histogram_free(h);
	weft_histogram_free(same);
	weft_histogram_free(finer);
}

/* Parsing adds: two texts read into one histogram make their merge. */
static void
test_parse_adds_to_what_is_there(void **state)
{
	weft_histogram *h = make(5, 0);

	(void)state;
	assert_int_equal(weft_histogram_parse(h, "  10:2 1000:1\n"), 0);
	assert_int_equal(weft_histogram_parse(h, "10:3"), 0);
	assert_int_equal(weft_histogram_count(h), 6);
	assert_int_equal(weft_histogram_percentile(h, 80), 10);
	assert_int_equal(weft_histogram_max(h), 1000);
	weft_histogram_free(h);
}

/* A buffer too short keeps whole pairs only, and says how much it
 * needed. */
static void
test_short_buffer_keeps_whole_pairs(void **state)
{
	weft_histogram *h = make(5, 0);
	char buf[12];

	(void)state;
	weft_histogram_record(h, 1);
	weft_histogram_record(h, 22);
	weft_histogram_record(h, 33);
	weft_histogram_record(h, 44);
	/* "1:1 22:1 33:1 44:1" is 18 bytes. */
	assert_int_equal(weft_histogram_format(h, buf, sizeof(buf)), 18);
	assert_string_equal(buf, "1:1 22:1");
	assert_int_equal(weft_histogram_format(h, buf, 1), 18);
	assert_string_equal(buf, "");
	weft_histogram_free(h);
}

static void
test_bad_text_is_refused_and_changes_nothing(void **state)
{
	static const char *const bad[] = {
	    "x",        "10",   "10:",   ":3",      "10:3x",
	    "10:3 4",   "-1:2", "10:+2", "1:2,3:4", "18446744073709551616:1",
	    "1:2\t3:4",
	};
	weft_histogram *h = make(5, 0);

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		/* The good pair before the bad part is not kept either. */
		char text[64] = "5:1 ";

		strcat(text, bad[i]);
		assert_int_equal(weft_histogram_parse(h, bad[i]), WEFT_EINVAL);
		assert_int_equal(weft_histogram_parse(h, text), WEFT_EINVAL);
		assert_int_equal(weft_histogram_count(h), 0);
	}
	assert_int_equal(weft_histogram_parse(NULL, "1:1"), WEFT_EINVAL);
	assert_int_equal(weft_histogram_parse(h, NULL), WEFT_EINVAL);
	weft_histogram_free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_empty_formats_as_empty_text),
	    cmocka_unit_test(test_exact_values_format_as_pairs),
	    cmocka_unit_test(test_parse_rebuilds_what_format_wrote),
	    cmocka_unit_test(test_parse_adds_to_what_is_there),
	    cmocka_unit_test(test_short_buffer_keeps_whole_pairs),
	    cmocka_unit_test(test_bad_text_is_refused_and_changes_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
