/* SPDX-License-Identifier: MIT */
/* test_lat.c: the compact per-peer latency histogram: a weft_histogram at
 * 1/16 precision (weft__msvc_peer_lat_new). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "msvc_int.h"

static void
test_empty_reports_zeros(void **state)
{
	weft_histogram *h;

	(void)state;
	assert_int_equal(weft__msvc_peer_lat_new(&h), 0);
	assert_int_equal(weft_histogram_count(h), 0);
	assert_int_equal(weft_histogram_max(h), 0);
	assert_int_equal(weft_histogram_percentile(h, 50), 0);
	weft_histogram_free(h);
}

/* Every percentile is within 1/16 above the true one, never below it,
 * and never above the maximum. */
static void
test_percentiles_are_within_a_sixteenth(void **state)
{
	static const double ps[] = {0, 1, 25, 50, 90, 99, 99.9, 100};
	weft_histogram *h;
	uint64_t v, want, got;
	size_t i;

	(void)state;
	assert_int_equal(weft__msvc_peer_lat_new(&h), 0);
	/* 1..100000 us, in ns. */
	for (v = 1; v <= 100000; v++)
		weft_histogram_record(h, v * 1000);
	assert_int_equal(weft_histogram_count(h), 100000);
	assert_int_equal(weft_histogram_max(h), 100000000);
	for (i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		want = (uint64_t)(ps[i] / 100 * 100000 + 0.5) * 1000;
		if (want == 0)
			want = 1000;
		got = weft_histogram_percentile(h, ps[i]);
		assert_true(got >= want);
		assert_true(got <= want + want / 16);
		assert_true(got <= 100000000);
	}
	weft_histogram_free(h);
}

static void
test_small_and_huge_values_are_kept(void **state)
{
	weft_histogram *h;

	(void)state;
	assert_int_equal(weft__msvc_peer_lat_new(&h), 0);
	weft_histogram_record(h, 0);
	weft_histogram_record(h, 100);
	assert_true(weft_histogram_percentile(h, 50) < 128);
	assert_int_equal(weft_histogram_percentile(h, 100), 100);
	/* Beyond the last octave: the last bucket, reported as the max. */
	weft_histogram_record(h, UINT64_MAX);
	assert_int_equal(weft_histogram_percentile(h, 100), UINT64_MAX);
	assert_int_equal(weft_histogram_max(h), UINT64_MAX);
	assert_true(weft_histogram_percentile(h, 10) <
	            weft_histogram_percentile(h, 90));
	weft_histogram_free(h);
}

/* Percentiles are ordered, whatever the data. */
static void
test_percentiles_are_ordered(void **state)
{
	weft_histogram *h;
	uint64_t prev = 0, got, x = 88172645463325252ull;
	double p;
	int i;

	(void)state;
	assert_int_equal(weft__msvc_peer_lat_new(&h), 0);
	for (i = 0; i < 5000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		weft_histogram_record(h, x >> (x & 63));
	}
	for (p = 0; p <= 100; p += 0.5) {
		got = weft_histogram_percentile(h, p);
		assert_true(got >= prev);
		prev = got;
	}
	weft_histogram_free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_empty_reports_zeros),
	    cmocka_unit_test(test_percentiles_are_within_a_sixteenth),
	    cmocka_unit_test(test_small_and_huge_values_are_kept),
	    cmocka_unit_test(test_percentiles_are_ordered),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
