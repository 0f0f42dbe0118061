/* SPDX-License-Identifier: MIT */
/*
 * histogram.c: log-linear latency histogram (see weft/histogram.h).
 *
 * Bucket layout, with S = sub_bits (7 by default) and 2^S sub-buckets per
 * power of two:
 *
 *   values 0..2^(S+1)-1 each have a bucket of their own (indices equal to
 *   the values); above that, the range [2^m, 2^(m+1)) for m = S+1..M is
 *   split into 2^S buckets of width 2^(m-S), where M is the top bit of
 *   max_value (63 unless a smaller range was asked for);
 *
 *   with a smaller range, one more bucket counts every value above
 *   2^(M+1)-1: the overflow, whose only known value is the maximum.
 *
 * With shift = max(msb(v) - S, 0), the index is (shift << S) + (v >> shift):
 * v >> shift lies in [2^S, 2^(S+1)) once v >= 2^S, so consecutive
 * magnitudes tile the index space without gaps, and below 2^(S+1) the index
 * is v itself. M - S + 2 magnitudes of 2^S buckets each: (M - S + 2) << S
 * buckets. A bucket is never wider than 1/2^S of the values it holds,
 * which bounds the relative error of every reported value.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <weft/histogram.h>

#define DEFAULT_SUB_BITS 7

struct weft_histogram {
	uint64_t total;
	uint64_t min;
	uint64_t max;
	/* A double keeps the mean meaningful past 2^64 summed nanoseconds;
	 * sums of integers below 2^53 stay exact. */
	double sum;
	/* The largest value kept within the precision: 2^(M+1) - 1. */
	uint64_t top;
	/* 2^(S+1) - 1: ORed into a value, it keeps shift at 0 for the
	 * values with buckets of their own, and the argument of clz
	 * non-zero. */
	uint64_t exact_mask;
	unsigned sub_bits;
	unsigned nbuckets; /* with the overflow bucket, if any */
	uint64_t counts[];
};

/* layout_of checks opts and returns the layout they ask for: false when
 * they are invalid. */
static bool
layout_of(const weft_histogram_opts *opts, unsigned *sub_bits, uint64_t *top,
          unsigned *nbuckets)
{
	unsigned s = opts != NULL ? opts->sub_bits : 0;
	uint64_t max_value = opts != NULL ? opts->max_value : 0;
	unsigned m;

	if (s == 0)
		s = DEFAULT_SUB_BITS;
	if (s < WEFT_HISTOGRAM_MIN_SUB_BITS || s > WEFT_HISTOGRAM_MAX_SUB_BITS)
		return false;
	if (max_value == 0)
		max_value = UINT64_MAX;
	/* The exact values below 2^(s+1) are always kept. */
	m = 63u - (unsigned)__builtin_clzll(max_value | ((2ull << s) - 1));
	*sub_bits = s;
	*top = m == 63 ? UINT64_MAX : (2ull << m) - 1;
	*nbuckets = ((m - s + 2) << s) + (m == 63 ? 0 : 1);
	return true;
}

static inline unsigned
bucket_index(const weft_histogram *h, uint64_t value)
{
	unsigned msb, shift;

	if (value > h->top)
		return h->nbuckets - 1; /* the overflow */
	msb = 63u - (unsigned)__builtin_clzll(value | h->exact_mask);
	shift = msb - h->sub_bits;
	return (shift << h->sub_bits) + (unsigned)(value >> shift);
}

/* bucket_upper_edge returns the largest value that maps to bucket i. */
static uint64_t
bucket_upper_edge(const weft_histogram *h, unsigned i)
{
	unsigned s = h->sub_bits, shift;
	uint64_t sub;

	if (h->top != UINT64_MAX && i == h->nbuckets - 1)
		return UINT64_MAX;
	shift = i < (2u << s) ? 0 : (i >> s) - 1;
	sub = i - (shift << s);
	return (sub << shift) + ((UINT64_C(1) << shift) - 1);
}

/* reported is what a bucket's values read as: its upper edge, capped at
 * the maximum recorded. */
static uint64_t
reported(const weft_histogram *h, unsigned i)
{
	uint64_t edge = bucket_upper_edge(h, i);

	return edge < h->max ? edge : h->max;
}

size_t
weft_histogram_bytes(const weft_histogram_opts *opts)
{
	unsigned s, n;
	uint64_t top;

	if (!layout_of(opts, &s, &top, &n))
		return 0;
	return offsetof(weft_histogram, counts) + (size_t)n * sizeof(uint64_t);
}

int
weft_histogram_new_opts(const weft_histogram_opts *opts, weft_histogram **out)
{
	weft_histogram *h;
	unsigned s, n;
	uint64_t top;

	if (out == NULL || !layout_of(opts, &s, &top, &n))
		return WEFT_EINVAL;
	h = malloc(offsetof(weft_histogram, counts) +
	           (size_t)n * sizeof(uint64_t));
	if (h == NULL)
		return WEFT_ENOMEM;
	h->sub_bits = s;
	h->top = top;
	h->nbuckets = n;
	h->exact_mask = (2ull << s) - 1;
	weft_histogram_reset(h);
	*out = h;
	return 0;
}

int
weft_histogram_new(weft_histogram **out)
{
	return weft_histogram_new_opts(NULL, out);
}

void
weft_histogram_free(weft_histogram *h)
{
	free(h);
}

void
weft_histogram_reset(weft_histogram *h)
{
	memset(h->counts, 0, (size_t)h->nbuckets * sizeof(h->counts[0]));
	h->total = 0;
	h->min = UINT64_MAX;
	h->max = 0;
	h->sum = 0.0;
}

void
weft_histogram_record(weft_histogram *h, uint64_t value)
{
	h->counts[bucket_index(h, value)]++;
	h->total++;
	h->sum += (double)value;
	h->min = value < h->min ? value : h->min;
	h->max = value > h->max ? value : h->max;
}

void
weft_histogram_record_n(weft_histogram *h, uint64_t value, uint64_t n)
{
	if (n == 0)
		return;
	h->counts[bucket_index(h, value)] += n;
	h->total += n;
	h->sum += (double)value * (double)n;
	h->min = value < h->min ? value : h->min;
	h->max = value > h->max ? value : h->max;
}

/* Another layout's buckets go in at the values they read as, as a
 * histogram rebuilt from weft_histogram_next would hold them. */
static void
merge_other_layout(weft_histogram *dst, const weft_histogram *src)
{
	unsigned i, last = bucket_index(src, src->max);

	for (i = bucket_index(src, src->min); i <= last; i++)
		if (src->counts[i] != 0)
			dst->counts[bucket_index(dst, reported(src, i))] +=
			    src->counts[i];
}

void
weft_histogram_merge(weft_histogram *dst, const weft_histogram *src)
{
	unsigned i, last;

	if (src->total == 0)
		return;
	/* Every bucket outside those of src's minimum and maximum is
	 * empty. */
	last = bucket_index(src, src->max);
	if (src->sub_bits == dst->sub_bits && src->top == dst->top)
		for (i = bucket_index(src, src->min); i <= last; i++)
			dst->counts[i] += src->counts[i];
	else
		merge_other_layout(dst, src);
	dst->total += src->total;
	dst->sum += src->sum;
	dst->min = src->min < dst->min ? src->min : dst->min;
	dst->max = src->max > dst->max ? src->max : dst->max;
}

uint64_t
weft_histogram_count(const weft_histogram *h)
{
	return h->total;
}

uint64_t
weft_histogram_min(const weft_histogram *h)
{
	return h->total == 0 ? 0 : h->min;
}

uint64_t
weft_histogram_max(const weft_histogram *h)
{
	return h->max;
}

double
weft_histogram_mean(const weft_histogram *h)
{
	return h->total == 0 ? 0.0 : h->sum / (double)h->total;
}

double
weft_histogram_sum(const weft_histogram *h)
{
	return h->sum;
}

uint64_t
weft_histogram_count_at_most(const weft_histogram *h, uint64_t value)
{
	uint64_t n = 0;
	unsigned i, end;

	if (h->total == 0 || value < h->min)
		return 0;
	if (value >= h->max)
		return h->total;
	/* Buckets [first, end) lie wholly at or below value; value's own
	 * bucket only if value is its upper edge, for it may hold larger
	 * values. */
	end = bucket_index(h, value);
	if (bucket_upper_edge(h, end) == value)
		end++;
	for (i = bucket_index(h, h->min); i < end; i++)
		n += h->counts[i];
	return n;
}

/*
 * rank_for returns how many of the total values lie at or below the p-th
 * percentile: ceil(p% of total), at least 1 and at most total. It is
 * monotonic in p, which is what keeps percentiles ordered.
 */
static uint64_t
rank_for(double p, uint64_t total)
{
	double want;
	uint64_t rank;

	if (!(p > 0.0)) /* also catches NaN */
		return 1;
	if (p >= 100.0)
		return total;
	want = p * (double)total / 100.0;
	if (want >= (double)total)
		return total;
	/* ceil() without libm, so the library needs no -lm. */
	rank = (uint64_t)want;
	if ((double)rank < want)
		rank++;
	return rank < 1 ? 1 : rank;
}

uint64_t
weft_histogram_percentile(const weft_histogram *h, double p)
{
	uint64_t rank, seen = 0;
	unsigned i;

	if (h->total == 0)
		return 0;
	rank = rank_for(p, h->total);
	/* Every bucket below the minimum's is empty. */
	for (i = bucket_index(h, h->min); i < h->nbuckets; i++) {
		seen += h->counts[i];
		if (seen >= rank)
			break;
	}
	/* seen reaches total at the last non-empty bucket, so i is valid. */
	return reported(h, i);
}

bool
weft_histogram_next(const weft_histogram *h, size_t *cursor, uint64_t *value,
                    uint64_t *count)
{
	for (size_t i = *cursor; i < h->nbuckets; i++) {
		if (h->counts[i] == 0)
			continue;
		*value = reported(h, (unsigned)i);
		*count = h->counts[i];
		*cursor = i + 1;
		return true;
	}
	*cursor = h->nbuckets;
	return false;
}
