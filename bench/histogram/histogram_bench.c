/* SPDX-License-Identifier: MIT */
/*
 * histogram_bench: nanoseconds per weft_histogram_record, and bytes per
 * histogram, for each precision over the whole range and over values up to
 * 2^40 (18 minutes of nanoseconds). The values are latencies spread evenly
 * over the magnitudes from 1 us to 100 ms, drawn once into a table that
 * stays in the cache, so what is timed is the recording. Prints the median
 * of R rounds of N records each.
 *
 * Usage: weft-histogram-bench [--count N] [--rounds R]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/histogram.h>

#define TABLE 4096 /* values: 32 KB, in L1 or L2 */
#define MAX_ROUNDS 99

static uint64_t
next_random(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* 1 us * 2^(0..16.6): 1 us to 100 ms, as many per power of two. */
static void
fill(uint64_t *vals)
{
	uint64_t s = 88172645463325252ull;

	for (size_t i = 0; i < TABLE; i++) {
		uint64_t r = next_random(&s), m = r % 17;

		vals[i] =
		    (UINT64_C(1000) << m) + (r >> 40) % (UINT64_C(1000) << m);
		if (vals[i] > 100000000)
			vals[i] = 100000000;
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median ns per record over rounds of count records into h. */
static double
time_records(weft_histogram *h, const uint64_t *vals, long count, int rounds)
{
	double ns[MAX_ROUNDS];

	for (int r = 0; r < rounds; r++) {
		uint64_t t0 = weft_now_ns();

		for (long i = 0; i < count; i++)
			weft_histogram_record(h, vals[i & (TABLE - 1)]);
		ns[r] = (double)(weft_now_ns() - t0) / (double)count;
	}
	qsort(ns, (size_t)rounds, sizeof(ns[0]), cmp_double);
	return ns[rounds / 2];
}

static int
run(unsigned sub_bits, uint64_t max_value, const uint64_t *vals, long count,
    int rounds)
{
	weft_histogram_opts o = {.sub_bits = sub_bits, .max_value = max_value};
	weft_histogram *h;
	double ns;

	if (weft_histogram_new_opts(&o, &h) != 0)
		return -1;
	ns = time_records(h, vals, count, rounds);
	printf("%-8u %-9s %-10s %9zu %10.2f %10llu\n", sub_bits,
	       max_value ? "2^40 - 1" : "2^64 - 1",
	       (const char *[]){"", "1/2", "1/4", "1/8", "1/16", "1/32", "1/64",
	                        "1/128", "1/256", "1/512", "1/1024"}[sub_bits],
	       weft_histogram_bytes(&o), ns,
	       (unsigned long long)weft_histogram_percentile(h, 99));
	weft_histogram_free(h);
	return 0;
}

int
main(int argc, char **argv)
{
	static uint64_t vals[TABLE];
	long count = 20000000;
	int rounds = 5;

	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("weft-histogram-bench %s\n", weft_version());
		return 0;
	}
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--count") == 0)
			count = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--rounds") == 0)
			rounds = atoi(argv[i + 1]);
		else
			count = 0;
	}
	if (argc % 2 == 0 || count <= 0 || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: %s [--count N] [--rounds 1..%d]\n",
		        argv[0], MAX_ROUNDS);
		return 2;
	}
	fill(vals);
	printf("%-8s %-9s %-10s %9s %10s %10s\n", "sub_bits", "range",
	       "precision", "bytes", "ns/record", "p99 ns");
	for (unsigned s = WEFT_HISTOGRAM_MIN_SUB_BITS;
	     s <= WEFT_HISTOGRAM_MAX_SUB_BITS; s++)
		for (int limited = 0; limited < 2; limited++)
			if (run(s, limited ? (UINT64_C(1) << 40) - 1 : 0, vals,
			        count, rounds) != 0)
				return 1;
	return 0;
}
