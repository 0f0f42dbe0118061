/* SPDX-License-Identifier: MIT */
/*
 * lat.c: a compact latency histogram for one peer's request round trips.
 *
 * weft_histogram keeps every value within 1% over 0..2^63 in 59 KB; a node
 * of a 64-node cluster would spend megabytes on one per peer. A peer's
 * figures (p50, p99, max) need less: here each power of two between 1 us
 * and about 18 minutes is split into 16 buckets (a value is reported
 * within 1/16 above its true value, capped at the maximum seen), values
 * below 1 us share 16 linear buckets and longer ones the last bucket.
 * That is 496 counters, 4 KB.
 * TODO(core): a weft_histogram with a chosen precision and range would
 * replace this.
 */
#include <stdlib.h>
#include <string.h>

#include "msvc_int.h"

#define SUB_BITS 4
#define SUB_COUNT (1u << SUB_BITS)
/* The first octave split into sub-buckets: [2^MIN_SHIFT, 2^(MIN_SHIFT+1)) */
#define MIN_SHIFT 10
#define MAX_SHIFT 39
#define BUCKETS ((MAX_SHIFT - MIN_SHIFT + 2) * SUB_COUNT)

struct weft__msvc_lat {
	uint64_t count;
	uint64_t max;
	uint64_t counts[BUCKETS];
	/* The exposition's coarser buckets, counted exactly as values come
	 * (a few comparisons), and the sum, for Prometheus histograms. */
	uint64_t expo[WEFT_METRICS_LATENCY_BUCKETS + 1];
	double sum_ns;
};

static unsigned
bucket_of(uint64_t v)
{
	unsigned msb;

	if (v < (1ull << MIN_SHIFT))
		return (unsigned)(v >> (MIN_SHIFT - SUB_BITS));
	msb = 63u - (unsigned)__builtin_clzll(v);
	if (msb > MAX_SHIFT)
		return BUCKETS - 1;
	return (msb - MIN_SHIFT + 1) * SUB_COUNT +
	       (unsigned)((v >> (msb - SUB_BITS)) & (SUB_COUNT - 1));
}

/* The largest value bucket i holds. */
static uint64_t
bucket_top(unsigned i)
{
	unsigned octave = i / SUB_COUNT, sub = i % SUB_COUNT, shift;

	if (octave == 0)
		return (((uint64_t)sub + 1) << (MIN_SHIFT - SUB_BITS)) - 1;
	shift = octave + MIN_SHIFT - 1 - SUB_BITS;
	return (((uint64_t)SUB_COUNT + sub + 1) << shift) - 1;
}

int
weft__msvc_lat_new(struct weft__msvc_lat **out)
{
	if ((*out = calloc(1, sizeof(**out))) == NULL)
		return WEFT_ENOMEM;
	return 0;
}

void
weft__msvc_lat_free(struct weft__msvc_lat *h)
{
	free(h);
}

void
weft__msvc_lat_record(struct weft__msvc_lat *h, uint64_t ns)
{
	unsigned i;

	h->counts[bucket_of(ns)]++;
	h->count++;
	h->sum_ns += (double)ns;
	for (i = 0; i < WEFT_METRICS_LATENCY_BUCKETS &&
	            ns > weft_metrics_latency_bound(i);
	     i++)
		;
	h->expo[i]++;
	if (ns > h->max)
		h->max = ns;
}

uint64_t
weft__msvc_lat_count(const struct weft__msvc_lat *h)
{
	return h->count;
}

uint64_t
weft__msvc_lat_max(const struct weft__msvc_lat *h)
{
	return h->max;
}

uint64_t
weft__msvc_lat_percentile(const struct weft__msvc_lat *h, double p)
{
	uint64_t rank, seen = 0, top;
	unsigned i;

	if (h->count == 0)
		return 0;
	if (p < 0)
		p = 0;
	if (p > 100)
		p = 100;
	/* The smallest value with at least p percent at or below it. */
	rank = (uint64_t)(p / 100 * (double)h->count + 0.5);
	if (rank == 0)
		rank = 1;
	for (i = 0; i < BUCKETS; i++) {
		seen += h->counts[i];
		if (seen >= rank)
			break;
	}
	/* The last bucket also holds every longer value. */
	top = i < BUCKETS - 1 ? bucket_top(i) : h->max;
	return top < h->max ? top : h->max;
}

double
weft__msvc_lat_buckets(const struct weft__msvc_lat *h,
                       uint64_t counts[WEFT_METRICS_LATENCY_BUCKETS + 1])
{
	memcpy(counts, h->expo, sizeof(h->expo));
	return h->sum_ns;
}
