/* SPDX-License-Identifier: MIT */
/*
 * test_histogram_opts.c: histograms of every precision and of a smaller
 * range (weft_histogram_new_opts), their memory, counting at or below a
 * value, and merging across layouts, through <weft/histogram.h>.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <weft/histogram.h>

#define RANGE_40 ((UINT64_C(1) << 40) - 1)

/* xorshift64: a deterministic source of test values. */
static uint64_t
next_random(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A value spread evenly over the magnitudes, below 2^63. */
static uint64_t
log_uniform(uint64_t *s)
{
	uint64_t v = next_random(s);

	return v >> (1 + v % 63);
}

static weft_histogram *
make(unsigned sub_bits, uint64_t max_value)
{
	weft_histogram_opts o = {.sub_bits = sub_bits, .max_value = max_value};
	weft_histogram *h = NULL;

	assert_int_equal(weft_histogram_new_opts(&o, &h), 0);
	assert_non_null(h);
	return h;
}

static void
test_precision_out_of_range_is_refused(void **state)
{
	weft_histogram_opts o = {0};
	weft_histogram *h = (weft_histogram *)&o;

	(void)state;
	o.sub_bits = WEFT_HISTOGRAM_MAX_SUB_BITS + 1;
	assert_int_equal(weft_histogram_new_opts(&o, &h), WEFT_EINVAL);
	assert_ptr_equal(h, (weft_histogram *)&o); /* untouched */
	assert_int_equal(weft_histogram_bytes(&o), 0);
	o.sub_bits = 64;
	assert_int_equal(weft_histogram_new_opts(&o, &h), WEFT_EINVAL);
	o.sub_bits = UINT32_MAX;
	assert_int_equal(weft_histogram_bytes(&o), 0);
	o.sub_bits = 4;
	assert_int_equal(weft_histogram_new_opts(&o, NULL), WEFT_EINVAL);
	/* Zero fields are the defaults: the same as weft_histogram_new. */
	o.sub_bits = 0;
	assert_int_equal(weft_histogram_bytes(&o), weft_histogram_bytes(NULL));
	o.sub_bits = 7;
	o.max_value = UINT64_MAX;
	assert_int_equal(weft_histogram_bytes(&o), weft_histogram_bytes(NULL));
	assert_int_equal(weft_histogram_new_opts(NULL, &h), 0);
	weft_histogram_free(h);
}

/* The sizes <weft/histogram.h> and weft_histogram(3) document. */
static void
test_memory_is_as_documented(void **state)
{
	static const size_t full[] = {1080,  2072,  4024,   7864,   15416,
	                              30264, 59448, 116792, 229432, 450616};
	static const size_t to_2_40[] = {704,   1312,  2496,  4800,   9280,
	                                 17984, 34880, 67648, 131136, 254016};
	weft_histogram_opts o = {0};
	unsigned s;

	(void)state;
	for (s = WEFT_HISTOGRAM_MIN_SUB_BITS; s <= WEFT_HISTOGRAM_MAX_SUB_BITS;
	     s++) {
		o.sub_bits = s;
		o.max_value = 0;
		assert_int_equal(weft_histogram_bytes(&o), full[s - 1]);
		o.max_value = RANGE_40;
		assert_int_equal(weft_histogram_bytes(&o), to_2_40[s - 1]);
		/* A max_value inside a power of two rounds up to its top. */
		o.max_value = UINT64_C(1) << 39;
		assert_int_equal(weft_histogram_bytes(&o), to_2_40[s - 1]);
	}
	assert_int_equal(weft_histogram_bytes(NULL), 59448);
	/* The messaging service's per-peer histogram: 1/16 to 2^40 ns. */
	o.sub_bits = 4;
	o.max_value = RANGE_40;
	assert_true(weft_histogram_bytes(&o) <= 4800);
	/* The smallest range still keeps the exact values. */
	o.max_value = 1;
	assert_int_equal(weft_histogram_bytes(&o),
	                 weft_histogram_bytes(NULL) - 7424 * 8 + 33 * 8);
}

/* What a lone value v reads as: the 50th percentile of {v, a larger one}. */
static uint64_t
reads_as(weft_histogram *h, uint64_t v)
{
	weft_histogram_reset(h);
	weft_histogram_record(h, v);
	weft_histogram_record(h, UINT64_MAX);
	return weft_histogram_percentile(h, 50);
}

static void
assert_within(unsigned s, uint64_t v, uint64_t got)
{
	if (got < v || got - v > (v >> s))
		fail_msg("sub_bits %u: %llu reads as %llu", s,
		         (unsigned long long)v, (unsigned long long)got);
}

/* Every value below 2^(s+3), recorded once: walking the buckets, each
 * value reads as its bucket's value (exact below 2^(s+1)). */
static void
sweep_small(weft_histogram *h, unsigned s)
{
	uint64_t v, next = 0, value, count;
	size_t cursor = 0;

	weft_histogram_reset(h);
	for (v = 0; v < (UINT64_C(8) << s); v++)
		weft_histogram_record(h, v);
	while (weft_histogram_next(h, &cursor, &value, &count)) {
		for (; count > 0; count--, next++)
			if (next < (UINT64_C(2) << s))
				assert_int_equal(value, next);
			else
				assert_within(s, next, value);
	}
	assert_int_equal(next, UINT64_C(8) << s);
}

/* At each larger power of two: its first and last values, their
 * neighbours, and random ones, each alone against a larger value. */
static void
sweep(weft_histogram *h, unsigned s, uint64_t top)
{
	uint64_t seed = 0x9e3779b97f4a7c15u;
	unsigned m, i;

	sweep_small(h, s);
	for (m = s + 3; m < 64; m++) {
		uint64_t lo = UINT64_C(1) << m, hi = lo + (lo - 1);
		uint64_t vs[] = {lo, lo + 1, hi - 1, hi, 0, 0, 0, 0};

		for (i = 4; i < 8; i++)
			vs[i] = lo | (next_random(&seed) & (lo - 1));
		for (i = 0; i < 8; i++) {
			if (vs[i] > top) /* the overflow: reads as the max */
				assert_int_equal(reads_as(h, vs[i]),
				                 UINT64_MAX);
			else
				assert_within(s, vs[i], reads_as(h, vs[i]));
		}
	}
}

/* Every precision keeps its bound, 1/2^sub_bits above the true value, over
 * the whole range and over a smaller one. */
static void
test_every_precision_keeps_its_error_bound(void **state)
{
	weft_histogram *h;
	unsigned s;

	(void)state;
	for (s = WEFT_HISTOGRAM_MIN_SUB_BITS; s <= WEFT_HISTOGRAM_MAX_SUB_BITS;
	     s++) {
		h = make(s, 0);
		sweep(h, s, UINT64_MAX);
		weft_histogram_free(h);
		h = make(s, RANGE_40);
		sweep(h, s, RANGE_40);
		weft_histogram_free(h);
	}
}

/* Above max_value only the maximum is known; up to it, the precision. */
static void
test_values_above_the_range_share_the_overflow(void **state)
{
	weft_histogram *h = make(4, RANGE_40);
	uint64_t v;
	size_t cursor = 0;

	(void)state;
	weft_histogram_record(h, 1000);
	weft_histogram_record(h, UINT64_C(1) << 45);
	weft_histogram_record(h, UINT64_C(1) << 50);
	assert_int_equal(weft_histogram_count(h), 3);
	assert_int_equal(weft_histogram_min(h), 1000);
	assert_int_equal(weft_histogram_max(h), UINT64_C(1) << 50);
	assert_within(4, 1000, weft_histogram_percentile(h, 30));
	/* The second value is in the overflow: it reads as the maximum. */
	assert_int_equal(weft_histogram_percentile(h, 50), UINT64_C(1) << 50);
	assert_int_equal(weft_histogram_percentile(h, 100), UINT64_C(1) << 50);
	/* Walking gives the overflow once, at the maximum. */
	assert_true(weft_histogram_next(h, &cursor, &v, &(uint64_t){0}));
	assert_true(weft_histogram_next(h, &cursor, &v, &(uint64_t){0}));
	assert_int_equal(v, UINT64_C(1) << 50);
	assert_false(weft_histogram_next(h, &cursor, &v, &(uint64_t){0}));
	/* The top of the range is still within it. */
	assert_within(4, RANGE_40, reads_as(h, RANGE_40));
	weft_histogram_free(h);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* How many of n sorted values are at most q, and how many of them are
 * within q >> s below q. */
static void
true_counts(const uint64_t *vals, size_t n, uint64_t q, unsigned s,
            uint64_t *at_most, uint64_t *near)
{
	*at_most = *near = 0;
	for (size_t i = 0; i < n && vals[i] <= q; i++) {
		(*at_most)++;
		*near += vals[i] >= q - (q >> s);
	}
}

static void
check_count_at_most(weft_histogram *h, const uint64_t *vals, size_t n,
                    unsigned s, uint64_t q, uint64_t *prev)
{
	uint64_t got = weft_histogram_count_at_most(h, q), want, near;

	true_counts(vals, n, q, s, &want, &near);
	if (got > want || want - got > near)
		fail_msg("sub_bits %u: %llu at most %llu, want %llu (%llu "
		         "near)",
		         s, (unsigned long long)got, (unsigned long long)q,
		         (unsigned long long)want, (unsigned long long)near);
	if (q < (UINT64_C(2) << s) || q < vals[0] || q >= vals[n - 1])
		assert_int_equal(got, want); /* exact there */
	assert_true(got >= *prev);
	*prev = got;
}

/* count_at_most never counts a larger value, misses only values within
 * the precision below, is exact where documented, and grows. */
static void
test_count_at_most_counts_whole_buckets(void **state)
{
	enum { N = 600 };
	uint64_t vals[N], seed = 5, prev, q, from;
	unsigned s, i;

	(void)state;
	for (i = 0; i < N; i++)
		vals[i] = i < 40 ? i : log_uniform(&seed) >> 20;
	qsort(vals, N, sizeof(vals[0]), cmp_u64);
	for (s = WEFT_HISTOGRAM_MIN_SUB_BITS; s <= WEFT_HISTOGRAM_MAX_SUB_BITS;
	     s++) {
		weft_histogram *h = make(s, 0);

		assert_int_equal(weft_histogram_count_at_most(h, 5), 0);
		for (i = 0; i < N; i++)
			weft_histogram_record(h, vals[i]);
		prev = 0;
		from = 0;
		/* Each value, and its neighbours, in order. */
		for (i = 0; i < N; i++) {
			q = vals[i] ? vals[i] - 1 : 0;
			for (q = q > from ? q : from; q <= vals[i] + 1; q++)
				check_count_at_most(h, vals, N, s, q, &prev);
			from = q;
		}
		assert_int_equal(weft_histogram_count_at_most(h, UINT64_MAX),
		                 N);
		weft_histogram_free(h);
	}
}

/* Bucket edges count exactly; above the range, values below the maximum
 * count as above any value under it. */
static void
test_count_at_most_at_edges_and_overflow(void **state)
{
	weft_histogram *h = make(4, RANGE_40);

	(void)state;
	/* [2^20, 2^20 + 2^16) is one bucket at 1/16. */
	weft_histogram_record(h, UINT64_C(1) << 20);
	weft_histogram_record(h, (UINT64_C(1) << 20) + 100);
	weft_histogram_record(h, UINT64_C(1) << 42);
	weft_histogram_record(h, UINT64_C(1) << 43);
	assert_int_equal(weft_histogram_count_at_most(h, (UINT64_C(1) << 20) +
	                                                     (1u << 16) - 1),
	                 2);
	/* Inside the bucket: both count as above. */
	assert_int_equal(
	    weft_histogram_count_at_most(h, (UINT64_C(1) << 20) + 100), 0);
	assert_int_equal(weft_histogram_count_at_most(h, RANGE_40), 2);
	assert_int_equal(weft_histogram_count_at_most(h, UINT64_C(1) << 42), 2);
	assert_int_equal(weft_histogram_count_at_most(h, UINT64_C(1) << 43), 4);
	weft_histogram_free(h);
}

/* The p-th percentile of n sorted values, as the histogram defines it. */
static uint64_t
true_percentile(const uint64_t *vals, size_t n, double p)
{
	size_t rank = (size_t)(p * (double)n / 100.0);

	if ((double)rank < p * (double)n / 100.0)
		rank++;
	return vals[rank < 1 ? 0 : rank - 1];
}

static void
assert_merged(weft_histogram *m, const uint64_t *vals, size_t n,
              unsigned coarse, unsigned fine, double sum)
{
	static const double ps[] = {1, 10, 50, 90, 99, 99.9, 100};

	assert_int_equal(weft_histogram_count(m), n);
	assert_int_equal(weft_histogram_min(m), vals[0]);
	assert_int_equal(weft_histogram_max(m), vals[n - 1]);
	assert_true(weft_histogram_sum(m) == sum);
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		uint64_t want = true_percentile(vals, n, ps[i]);
		uint64_t got = weft_histogram_percentile(m, ps[i]);
		/* The errors of both layouts add. */
		double bound = (double)want * (1.0 + 1.0 / (1u << coarse)) *
		               (1.0 + 1.0 / (1u << fine));

		assert_true(got >= want);
		assert_true((double)got <= bound + 1.0);
	}
}

/* Merging across precisions and ranges is defined: counts, minimum,
 * maximum and sum exact, values within both errors, and the same as
 * rebuilding src in dst from weft_histogram_next. */
static void
test_merge_across_layouts(void **state)
{
	enum { N = 5000 };
	uint64_t vals[N], seed = 99, value, count;
	weft_histogram *coarse = make(4, RANGE_40), *fine = make(7, 0);
	weft_histogram *c2 = make(4, RANGE_40), *f2 = make(7, 0);
	weft_histogram *rebuilt = make(7, 0);
	double sum = 0;
	size_t cursor = 0;
	unsigned i;

	(void)state;
	for (i = 0; i < N; i++) {
		vals[i] = 1000 + log_uniform(&seed) % 1000000000u;
		sum += (double)vals[i];
		weft_histogram_record(i % 2 ? coarse : fine, vals[i]);
	}
	while (weft_histogram_next(coarse, &cursor, &value, &count))
		weft_histogram_record_n(rebuilt, value, count);
	weft_histogram_merge(c2, coarse);
	weft_histogram_merge(f2, fine);
	weft_histogram_merge(fine, coarse); /* coarse into fine */
	weft_histogram_merge(c2, f2);       /* fine into coarse */
	qsort(vals, N, sizeof(vals[0]), cmp_u64);
	assert_merged(fine, vals, N, 4, 7, sum);
	assert_merged(c2, vals, N, 4, 7, sum);
	weft_histogram_merge(rebuilt, f2);
	for (double p = 0; p <= 100; p += 0.5)
		assert_int_equal(weft_histogram_percentile(rebuilt, p),
		                 weft_histogram_percentile(fine, p));
	weft_histogram_free(coarse);
	weft_histogram_free(fine);
	weft_histogram_free(c2);
	weft_histogram_free(f2);
	weft_histogram_free(rebuilt);
}

/* An overflow merged into a histogram of a larger range lands at the
 * maximum it knew. */
static void
test_merge_of_an_overflow(void **state)
{
	weft_histogram *small = make(4, (1u << 20) - 1), *full = make(4, 0);

	(void)state;
	weft_histogram_record(small, 500);
	weft_histogram_record(small, UINT64_C(1) << 30);
	weft_histogram_record(small, UINT64_C(1) << 31);
	weft_histogram_merge(full, small);
	assert_int_equal(weft_histogram_count(full), 3);
	assert_within(4, 500, weft_histogram_percentile(full, 10));
	assert_int_equal(weft_histogram_percentile(full, 50), UINT64_C(1)
	                                                          << 31);
	assert_int_equal(weft_histogram_count_at_most(full, 1u << 20), 1);
	weft_histogram_free(small);
	weft_histogram_free(full);
}

/* Same layout, not the default: merging equals recording both. */
static void
test_merge_same_small_layout_equals_recording_both(void **state)
{
	weft_histogram *a = make(3, RANGE_40), *b = make(3, RANGE_40);
	weft_histogram *both = make(3, RANGE_40);
	uint64_t seed = 3, v;
	unsigned i;

	(void)state;
	for (i = 0; i < 3000; i++) {
		v = log_uniform(&seed) >> 10;
		weft_histogram_record(i % 3 ? a : b, v);
		weft_histogram_record(both, v);
	}
	weft_histogram_merge(a, b);
	assert_int_equal(weft_histogram_count(a), weft_histogram_count(both));
	assert_int_equal(weft_histogram_min(a), weft_histogram_min(both));
	assert_int_equal(weft_histogram_max(a), weft_histogram_max(both));
	for (double p = 0; p <= 100; p += 0.25)
		assert_int_equal(weft_histogram_percentile(a, p),
		                 weft_histogram_percentile(both, p));
	weft_histogram_free(a);
	weft_histogram_free(b);
	weft_histogram_free(both);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_precision_out_of_range_is_refused),
	    cmocka_unit_test(test_memory_is_as_documented),
	    cmocka_unit_test(test_every_precision_keeps_its_error_bound),
	    cmocka_unit_test(test_values_above_the_range_share_the_overflow),
	    cmocka_unit_test(test_count_at_most_counts_whole_buckets),
	    cmocka_unit_test(test_count_at_most_at_edges_and_overflow),
	    cmocka_unit_test(test_merge_across_layouts),
	    cmocka_unit_test(test_merge_of_an_overflow),
	    cmocka_unit_test(
	        test_merge_same_small_layout_equals_recording_both),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
