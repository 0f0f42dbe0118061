/* SPDX-License-Identifier: MIT */
/* lathist.c: the cluster workload's per-slot latency histograms. */
#include <stdlib.h>
#include <string.h>

#include <weft/histogram.h>

#include "wbench.h"

/* Values below 64 ns are exact; above, each power of two is split in 32. */
static unsigned
bucket(uint64_t v)
{
	unsigned msb, sub, i;

	if (v < 64)
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	sub = (unsigned)(v >> (msb - 5)) & 31u;
	i = 64 + (msb - 6) * 32 + sub;
	return i < WBENCH_LAT_BUCKETS ? i : WBENCH_LAT_BUCKETS - 1;
}

unsigned
wbench_lat_bucket(uint64_t ns)
{
	return bucket(ns);
}

uint64_t
wbench_lat_percentile(const uint64_t *counts, double p)
{
	uint64_t total = 0, seen = 0, want;

	for (unsigned i = 0; i < WBENCH_LAT_BUCKETS; i++)
		total += counts[i];
	if (total == 0)
		return 0;
	want = (uint64_t)((double)total * p / 100.0 + 0.5);
	want = want < 1 ? 1 : want;
	for (unsigned i = 0; i < WBENCH_LAT_BUCKETS; i++)
		if ((seen += counts[i]) >= want)
			return wbench_lat_value(i);
	return wbench_lat_value(WBENCH_LAT_BUCKETS - 1);
}

uint64_t
wbench_lat_value(unsigned i)
{
	unsigned msb, sub;

	if (i < 64)
		return i;
	msb = (i - 64) / 32 + 6;
	sub = (i - 64) % 32;
	return ((UINT64_C(32) + sub + 1) << (msb - 5)) - 1;
}

void
wbench_lat_record(wbench_lat *l, uint64_t ns)
{
	l->counts[bucket(ns)]++;
	l->sum_ns += ns;
	l->n++;
}

void
wbench_lat_merge(wbench_lat *dst, const wbench_lat *src)
{
	for (unsigned i = 0; i < WBENCH_LAT_BUCKETS; i++)
		dst->counts[i] += src->counts[i];
	dst->sum_ns += src->sum_ns;
	dst->n += src->n;
}

void
wbench_lat_print(const wbench_lat *l, FILE *out)
{
	wbench_lat_print_as(l, "hist", out);
}

void
wbench_lat_print_as(const wbench_lat *l, const char *name, FILE *out)
{
	fputs(name, out);
	for (unsigned i = 0; i < WBENCH_LAT_BUCKETS; i++)
		if (l->counts[i])
			fprintf(out, " %u:%u", i, l->counts[i]);
	fputc('\n', out);
}

int
wbench_lat_parse(const char *line, struct weft_histogram *h)
{
	const char *p = line;
	char *end;

	if (strncmp(p, "hist", 4) != 0)
		return -1;
	p += strcspn(p, " \n"); /* "hist", or a name such as "hist-get" */
	while (*p == ' ') {
		unsigned long i = strtoul(p + 1, &end, 10), n;

		if (*end != ':' || i >= WBENCH_LAT_BUCKETS)
			return -1;
		n = strtoul(end + 1, &end, 10);
		weft_histogram_record_n(h, wbench_lat_value((unsigned)i), n);
		p = end;
	}
	return *p == '\0' || *p == '\n' ? 0 : -1;
}
