/* SPDX-License-Identifier: MIT */
/* test_histogram.c: tests for core/histogram.c through <weft/histogram.h>. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>

#include <weft/histogram.h>

/* The documented bound on the relative error: 1/2^7. */
#define REL_ERROR (1.0 / 128.0)

static int
setup(void **state)
{
	weft_histogram *h;

	if (weft_histogram_new(&h) != 0)
		return -1;
	*state = h;
	return 0;
}

static int
teardown(void **state)
{
	weft_histogram_free(*state);
	return 0;
}

/* xorshift64: a deterministic source of test values. */
static uint64_t
next_random(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void
assert_within_bucket_error(uint64_t reported, uint64_t value)
{
	assert_true(reported >= value);
	assert_true((double)(reported - value) <= (double)value * REL_ERROR);
}

static void
test_new_rejects_null_out(void **state)
{
	(void)state;
	assert_int_equal(weft_histogram_new(NULL), WEFT_EINVAL);
}

static void
test_empty_histogram_reports_zeroes(void **state)
{
	weft_histogram *h = *state;

	assert_int_equal(weft_histogram_count(h), 0);
	assert_int_equal(weft_histogram_min(h), 0);
	assert_int_equal(weft_histogram_max(h), 0);
	assert_true(weft_histogram_mean(h) == 0.0);
	assert_int_equal(weft_histogram_percentile(h, 0), 0);
	assert_int_equal(weft_histogram_percentile(h, 50), 0);
	assert_int_equal(weft_histogram_percentile(h, 100), 0);
}

static void
test_small_values_are_exact(void **state)
{
	weft_histogram *h = *state;
	uint64_t v;

	/* Each value below 2^sub_bits (and in fact up to 255) has a bucket
	 * of its own: with 0..255 recorded once, the k-th smallest is k-1. */
	for (v = 0; v < 256; v++)
		weft_histogram_record(h, v);
	assert_int_equal(weft_histogram_count(h), 256);
	assert_int_equal(weft_histogram_min(h), 0);
	assert_int_equal(weft_histogram_max(h), 255);
	for (v = 0; v < 256; v++) {
		double p = (double)(v + 1) * 100.0 / 256.0;

		assert_int_equal(weft_histogram_percentile(h, p), v);
	}
}

static void
test_large_values_within_relative_error(void **state)
{
	weft_histogram *h = *state;
	uint64_t seed = 0x9e3779b97f4a7c15u, v;
	unsigned magnitude, i;

	/* For every power of two, random values in it. A second, larger
	 * value keeps the maximum from capping the percentile. */
	for (magnitude = 8; magnitude < 64; magnitude++) {
		for (i = 0; i < 50; i++) {
			v = next_random(&seed);
			v = (v >> (63 - magnitude)) |
			    (UINT64_C(1) << magnitude);
			weft_histogram_reset(h);
			weft_histogram_record(h, v);
			weft_histogram_record(h, UINT64_MAX);
			assert_within_bucket_error(
			    weft_histogram_percentile(h, 50), v);
			assert_int_equal(weft_histogram_percentile(h, 100),
			                 UINT64_MAX);
		}
	}
}

static void
test_extreme_values(void **state)
{
	weft_histogram *h = *state;

	weft_histogram_record(h, 0);
	weft_histogram_record(h, UINT64_C(1) << 63);
	weft_histogram_record(h, UINT64_MAX);
	assert_int_equal(weft_histogram_min(h), 0);
	assert_int_equal(weft_histogram_max(h), UINT64_MAX);
	assert_int_equal(weft_histogram_percentile(h, 0), 0);
	assert_within_bucket_error(weft_histogram_percentile(h, 50), UINT64_C(1)
	                                                                 << 63);
	assert_int_equal(weft_histogram_percentile(h, 100), UINT64_MAX);
}

static void
assert_percentile_near(const weft_histogram *h, double p, double expected)
{
	double got = (double)weft_histogram_percentile(h, p);

	assert_true(got >= expected * (1.0 - REL_ERROR));
	assert_true(got <= expected * (1.0 + REL_ERROR));
}

static void
test_uniform_distribution_percentiles(void **state)
{
	weft_histogram *h = *state;
	uint64_t v;

	for (v = 1; v <= 1000000; v++)
		weft_histogram_record(h, v);
	assert_int_equal(weft_histogram_count(h), 1000000);
	assert_int_equal(weft_histogram_min(h), 1);
	assert_int_equal(weft_histogram_max(h), 1000000);
	assert_true(fabs(weft_histogram_mean(h) - 500000.5) < 1e-6);
	assert_percentile_near(h, 1, 10000);
	assert_percentile_near(h, 50, 500000);
	assert_percentile_near(h, 90, 900000);
	assert_percentile_near(h, 99, 990000);
	assert_percentile_near(h, 99.9, 999000);
	assert_int_equal(weft_histogram_percentile(h, 100), 1000000);
}

static void
test_percentiles_are_ordered_and_capped(void **state)
{
	weft_histogram *h = *state;
	uint64_t seed = 42, prev = 0, cur, max;
	unsigned i;
	double p;

	/* A long-tailed mix: mostly microseconds, a few long stalls. */
	for (i = 0; i < 100000; i++) {
		cur = next_random(&seed);
		if (cur % 1000 == 0)
			weft_histogram_record(h, cur % 5000000000u);
		else
			weft_histogram_record(h, 1000 + cur % 50000);
	}
	max = weft_histogram_max(h);
	for (p = 0; p <= 100.0; p += 0.05) {
		cur = weft_histogram_percentile(h, p);
		assert_true(cur >= prev);
		assert_true(cur <= max);
		prev = cur;
	}
	assert_true(weft_histogram_percentile(h, 50) <=
	            weft_histogram_percentile(h, 90));
	assert_true(weft_histogram_percentile(h, 90) <=
	            weft_histogram_percentile(h, 99));
	assert_true(weft_histogram_percentile(h, 99) <=
	            weft_histogram_percentile(h, 99.9));
	assert_true(weft_histogram_percentile(h, 99.9) <= max);
	assert_int_equal(weft_histogram_percentile(h, 100), max);
}

static void
test_percentile_out_of_range_is_clamped(void **state)
{
	weft_histogram *h = *state;

	weft_histogram_record(h, 10);
	weft_histogram_record(h, 1000);
	assert_int_equal(weft_histogram_percentile(h, -5), 10);
	assert_int_equal(weft_histogram_percentile(h, NAN), 10);
	assert_int_equal(weft_histogram_percentile(h, 250), 1000);
}

static void
assert_same_histogram(const weft_histogram *a, const weft_histogram *b)
{
	double p;

	assert_int_equal(weft_histogram_count(a), weft_histogram_count(b));
	assert_int_equal(weft_histogram_min(a), weft_histogram_min(b));
	assert_int_equal(weft_histogram_max(a), weft_histogram_max(b));
	assert_true(weft_histogram_mean(a) == weft_histogram_mean(b));
	for (p = 0; p <= 100.0; p += 0.1)
		assert_int_equal(weft_histogram_percentile(a, p),
		                 weft_histogram_percentile(b, p));
}

static void
test_merge_equals_recording_both(void **state)
{
	weft_histogram *a = *state, *b, *both;
	uint64_t seed = 7, v;
	unsigned i;

	assert_int_equal(weft_histogram_new(&b), 0);
	assert_int_equal(weft_histogram_new(&both), 0);
	for (i = 0; i < 20000; i++) {
		v = next_random(&seed) % 100000000u;
		weft_histogram_record(i % 3 ? a : b, v);
		weft_histogram_record(both, v);
	}
	weft_histogram_record(b, 3); /* the smallest lives in b only */
	weft_histogram_record(both, 3);
	weft_histogram_merge(a, b);
	assert_same_histogram(a, both);
	assert_int_equal(weft_histogram_min(a), 3);
	weft_histogram_free(b);
	weft_histogram_free(both);
}

static void
test_merge_of_empty_changes_nothing(void **state)
{
	weft_histogram *h = *state, *empty;

	assert_int_equal(weft_histogram_new(&empty), 0);
	weft_histogram_record(h, 500);
	weft_histogram_merge(h, empty);
	assert_int_equal(weft_histogram_count(h), 1);
	assert_int_equal(weft_histogram_min(h), 500);
	weft_histogram_merge(empty, h);
	assert_same_histogram(h, empty);
	weft_histogram_free(empty);
}

static void
test_record_n_equals_repeated_record(void **state)
{
	weft_histogram *h = *state, *r;
	unsigned i;

	assert_int_equal(weft_histogram_new(&r), 0);
	weft_histogram_record_n(h, 12345, 100);
	weft_histogram_record_n(h, 7, 3);
	weft_histogram_record_n(h, 99, 0);
	for (i = 0; i < 100; i++)
		weft_histogram_record(r, 12345);
	for (i = 0; i < 3; i++)
		weft_histogram_record(r, 7);
	assert_same_histogram(h, r);
	assert_int_equal(weft_histogram_min(h), 7);
	weft_histogram_free(r);
}

static void
test_reset_empties(void **state)
{
	weft_histogram *h = *state;

	weft_histogram_record(h, 5);
	weft_histogram_record(h, 5000000);
	weft_histogram_reset(h);
	assert_int_equal(weft_histogram_count(h), 0);
	assert_int_equal(weft_histogram_min(h), 0);
	assert_int_equal(weft_histogram_max(h), 0);
	assert_int_equal(weft_histogram_percentile(h, 99), 0);
	assert_true(weft_histogram_mean(h) == 0.0);
	weft_histogram_record(h, 77);
	assert_int_equal(weft_histogram_min(h), 77);
	assert_int_equal(weft_histogram_max(h), 77);
	assert_int_equal(weft_histogram_percentile(h, 1), 77);
}

/* A histogram sent bucket by bucket rebuilds the same percentiles and
 * maximum, and an empty one sends nothing. */
static void
test_next_walks_buckets_for_rebuilding(void **state)
{
	weft_histogram *h = *state, *copy;
	uint64_t seed = 11, value, count, total = 0;
	size_t cursor = 0;
	double p;

	assert_int_equal(weft_histogram_new(&copy), 0);
	assert_false(weft_histogram_next(h, &cursor, &value, &count));
	for (unsigned i = 0; i < 5000; i++)
		weft_histogram_record(h, next_random(&seed) % 50000000u);
	weft_histogram_record(h, 123456789);
	cursor = 0;
	while (weft_histogram_next(h, &cursor, &value, &count)) {
		assert_true(count > 0);
		weft_histogram_record_n(copy, value, count);
		total += count;
	}
	assert_int_equal(total, weft_histogram_count(h));
	assert_int_equal(weft_histogram_max(copy), 123456789);
	for (p = 0; p <= 100.0; p += 0.5)
		assert_int_equal(weft_histogram_percentile(copy, p),
		                 weft_histogram_percentile(h, p));
	assert_false(weft_histogram_next(h, &cursor, &value, &count));
	weft_histogram_free(copy);
}

#define HTEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_new_rejects_null_out),
	    HTEST(test_empty_histogram_reports_zeroes),
	    HTEST(test_small_values_are_exact),
	    HTEST(test_large_values_within_relative_error),
	    HTEST(test_extreme_values),
	    HTEST(test_uniform_distribution_percentiles),
	    HTEST(test_percentiles_are_ordered_and_capped),
	    HTEST(test_percentile_out_of_range_is_clamped),
	    HTEST(test_merge_equals_recording_both),
	    HTEST(test_merge_of_empty_changes_nothing),
	    HTEST(test_record_n_equals_repeated_record),
	    HTEST(test_reset_empties),
	    HTEST(test_next_walks_buckets_for_rebuilding),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
