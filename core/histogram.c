/* SPDX-License-Identifier: MIT */
/*
 * histogram.c: log-linear latency histogram (see weft/histogram.h).
 *
 * Bucket layout, with S = SUB_BITS = 7 and SUB_COUNT = 2^S = 128:
 *
 *   values 0..255 each have a bucket of their own (indices 0..255);
 *   above that, the range [2^m, 2^(m+1)) for m = 8..63 is split into 128
 *   buckets of width 2^(m-7).
 *
 * With shift = max(msb(v) - 7, 0), the index is (shift << 7) + (v >> shift):
 * v >> shift lies in [128, 256) once v >= 128, so consecutive magnitudes
 * tile the index space without gaps, and below 256 the index is v itself.
 * A bucket is never wider than 1/128 of the values it holds, which bounds
 * the relative error of every reported value.
 */
#include <stdlib.h>
#include <string.h>

#include <weft/histogram.h>

#define SUB_BITS 7
#define SUB_COUNT (1u << SUB_BITS)
/* The largest shift, for values with bit 63 set. */
#define MAX_SHIFT (63 - SUB_BITS)
#define BUCKET_COUNT ((MAX_SHIFT + 2) * SUB_COUNT)

struct weft_histogram {
	uint64_t total;
	uint64_t min;
	uint64_t max;
	/* A double keeps the mean meaningful past 2^64 summed nanoseconds;
	 * sums of integers below 2^53 stay exact. */
	double sum;
	uint64_t counts[BUCKET_COUNT];
};

static inline unsigned
bucket_index(uint64_t value)
{
	/* The OR with 0xff pins shift to 0 for every value below 256 and
	 * keeps the argument of clz non-zero. */
	unsigned msb = 63u - (unsigned)__builtin_clzll(value | 0xffu);
	unsigned shift = msb - SUB_BITS;

	return (shift << SUB_BITS) + (unsigned)(value >> shift);
}

/* bucket_upper_edge returns the largest value that maps to bucket i. */
static uint64_t
bucket_upper_edge(unsigned i)
{
	unsigned shift = i < 2 * SUB_COUNT ? 0 : (i >> SUB_BITS) - 1;
	uint64_t sub = i - (shift << SUB_BITS);
	uint64_t lowest = sub << shift;

	return lowest + ((UINT64_C(1) << shift) - 1);
}

int
weft_histogram_new(weft_histogram **out)
{
	weft_histogram *h;

	if (out == NULL)
		return WEFT_EINVAL;
	if ((h = malloc(sizeof(*h))) == NULL)
		return WEFT_ENOMEM;
	weft_histogram_reset(h);
	*out = h;
	return 0;
}

void
weft_histogram_free(weft_histogram *h)
{
	free(h);
}

void
weft_histogram_reset(weft_histogram *h)
{
	memset(h->counts, 0, sizeof(h->counts));
	h->total = 0;
	h->min = UINT64_MAX;
	h->max = 0;
	h->sum = 0.0;
}

void
weft_histogram_record(weft_histogram *h, uint64_t value)
{
	h->counts[bucket_index(value)]++;
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
	h->counts[bucket_index(value)] += n;
	h->total += n;
	h->sum += (double)value * (double)n;
	h->min = value < h->min ? value : h->min;
	h->max = value > h->max ? value : h->max;
}

void
weft_histogram_merge(weft_histogram *dst, const weft_histogram *src)
{
	unsigned i;

	if (src->total == 0)
		return;
	for (i = 0; i < BUCKET_COUNT; i++)
		dst->counts[i] += src->counts[i];
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
	for (i = bucket_index(h->min); i < BUCKET_COUNT; i++) {
		seen += h->counts[i];
		if (seen >= rank)
			break;
	}
	/* seen reaches total at the last non-empty bucket, so i is valid. */
	return bucket_upper_edge(i) < h->max ? bucket_upper_edge(i) : h->max;
}

bool
weft_histogram_next(const weft_histogram *h, size_t *cursor, uint64_t *value,
                    uint64_t *count)
{
	for (size_t i = *cursor; i < BUCKET_COUNT; i++) {
		uint64_t edge;

		if (h->counts[i] == 0)
			continue;
		edge = bucket_upper_edge((unsigned)i);
		*value = edge < h->max ? edge : h->max;
		*count = h->counts[i];
		*cursor = i + 1;
		return true;
	}
	*cursor = BUCKET_COUNT;
	return false;
}
