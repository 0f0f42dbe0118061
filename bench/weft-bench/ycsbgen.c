/* SPDX-License-Identifier: MIT */
/*
 * ycsbgen.c: YCSB's core workloads and request distributions, as YCSB's
 * CoreWorkload, ZipfianGenerator, ScrambledZipfianGenerator and
 * SkewedLatestGenerator (site.ycsb.generator) compute them, so that a
 * workload here draws the keys YCSB would.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <weft/core.h>

#include "ycsb.h"

/* YCSB's constants: the zipfian constant, and the item count and zeta of
 * the scrambled zipfian's underlying generator. */
#define ZIPFIAN_CONSTANT 0.99
#define SCRAMBLED_ITEMS 10000000000ull
#define SCRAMBLED_ZETAN 26.46902820178302

static const ycsb_workload workloads[] = {
    /* READ, UPDATE, INSERT, SCAN, READ-MODIFY-WRITE */
    {'a', {50, 50, 0, 0, 0}, WBENCH_DIST_ZIPFIAN},
    {'b', {95, 5, 0, 0, 0}, WBENCH_DIST_ZIPFIAN},
    {'c', {100, 0, 0, 0, 0}, WBENCH_DIST_ZIPFIAN},
    {'d', {95, 0, 5, 0, 0}, WBENCH_DIST_LATEST},
    {'e', {0, 0, 5, 95, 0}, WBENCH_DIST_ZIPFIAN},
    {'f', {50, 0, 0, 0, 50}, WBENCH_DIST_ZIPFIAN},
};

const ycsb_workload *
ycsb_workload_of(char name)
{
	for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++)
		if (workloads[i].name == name)
			return &workloads[i];
	return NULL;
}

const char *
ycsb_op_name(enum ycsb_op op)
{
	static const char *const names[YCSB_OPS] = {
	    "READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"};

	return (unsigned)op < YCSB_OPS ? names[op] : "?";
}

const char *
ycsb_status_name(enum ycsb_status s)
{
	static const char *const names[YCSB_STATUSES] = {"OK",
	                                                 "NOT_FOUND",
	                                                 "ERROR",
	                                                 "UNEXPECTED_STATE",
	                                                 "SERVICE_UNAVAILABLE",
	                                                 "BAD_REQUEST"};

	return (unsigned)s < YCSB_STATUSES ? names[s] : "?";
}

const char *
wbench_dist_name(int dist)
{
	switch (dist) {
	case WBENCH_DIST_ZIPFIAN:
		return "zipfian";
	case WBENCH_DIST_UNIFORM:
		return "uniform";
	case WBENCH_DIST_LATEST:
		return "latest";
	default:
		return "default";
	}
}

enum ycsb_status
ycsb_status_of(int status)
{
	switch (status) {
	case 0:
		return YCSB_OK;
	case WEFT_ENOTFOUND:
		return YCSB_NOT_FOUND;
	case WEFT_EOVERLOAD:
		return YCSB_SERVICE_UNAVAILABLE;
	case WEFT_EINVAL:
	case WEFT_ETOOBIG:
		return YCSB_BAD_REQUEST;
	case WBENCH_EUNEXPECTED:
		return YCSB_UNEXPECTED_STATE;
	default:
		return YCSB_ERROR;
	}
}

uint64_t
ycsb_fnvhash64(uint64_t v)
{
	int64_t h = (int64_t)0xcbf29ce484222325ull;

	for (int i = 0; i < 8; i++) {
		h ^= (int64_t)(v & 0xff);
		v >>= 8;
		h = (int64_t)((uint64_t)h * 1099511628211ull);
	}
	/* Java's Math.abs: Long.MIN_VALUE stays itself. */
	return h < 0 && h != INT64_MIN ? (uint64_t)-h : (uint64_t)h;
}

size_t
ycsb_key(char out[32], uint64_t keynum)
{
	return (size_t)snprintf(out, 32, "user%llu",
	                        (unsigned long long)ycsb_fnvhash64(keynum));
}

void
ycsb_rng_seed(ycsb_rng *r, uint64_t seed)
{
	/* splitmix64 of the seed: any seed, 0 too, gives a good state. */
	uint64_t z = seed + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	r->s = (z ^ (z >> 31)) | 1;
}

uint64_t
ycsb_rng_next(ycsb_rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dull;
}

double
ycsb_rng_double(ycsb_rng *r)
{
	return (double)(ycsb_rng_next(r) >> 11) * 0x1.0p-53;
}

/* zeta sums 1/i^theta for i in (from, to], onto sum. */
static double
zeta(uint64_t from, uint64_t to, double theta, double sum)
{
	for (uint64_t i = from; i < to; i++)
		sum += 1 / pow((double)(i + 1), theta);
	return sum;
}

void
ycsb_zipf_init(ycsb_zipf *z, uint64_t items, double theta, double zetan)
{
	memset(z, 0, sizeof(*z));
	z->items = items;
	z->theta = theta;
	z->alpha = 1 / (1 - theta);
	z->zeta2 = zeta(0, 2, theta, 0);
	z->zetan = zetan > 0 ? zetan : zeta(0, items, theta, 0);
	z->count_for_zeta = items;
	z->eta = (1 - pow(2.0 / (double)items, 1 - theta)) /
	         (1 - z->zeta2 / z->zetan);
}

uint64_t
ycsb_zipf_next(ycsb_zipf *z, ycsb_rng *r, uint64_t count)
{
	double u, uz;

	if (count > z->count_for_zeta) {
		/* As YCSB: zeta grows with the count, eta keeps the count the
		 * generator was made for. */
		z->zetan = zeta(z->count_for_zeta, count, z->theta, z->zetan);
		z->count_for_zeta = count;
		z->eta = (1 - pow(2.0 / (double)z->items, 1 - z->theta)) /
		         (1 - z->zeta2 / z->zetan);
	}
	u = ycsb_rng_double(r);
	uz = u * z->zetan;
	if (uz < 1.0)
		return 0;
	if (uz < 1.0 + pow(0.5, z->theta))
		return 1;
	return (uint64_t)((double)count *
	                  pow(z->eta * u - z->eta + 1, z->alpha));
}

void
ycsb_chooser_init(ycsb_chooser *c, enum wbench_dist dist, uint64_t count)
{
	c->dist = dist;
	if (dist == WBENCH_DIST_ZIPFIAN)
		ycsb_zipf_init(&c->zipf, SCRAMBLED_ITEMS + 1, ZIPFIAN_CONSTANT,
		               SCRAMBLED_ZETAN);
	else if (dist == WBENCH_DIST_LATEST)
		ycsb_zipf_init(&c->zipf, count > 2 ? count - 1 : 2,
		               ZIPFIAN_CONSTANT, 0);
}

uint64_t
ycsb_chooser_next(ycsb_chooser *c, ycsb_rng *r, uint64_t count)
{
	uint64_t v, newest = count - 1;

	switch (c->dist) {
	case WBENCH_DIST_ZIPFIAN:
		/* A hot item is hot wherever the hash puts it. */
		v = ycsb_zipf_next(&c->zipf, r, c->zipf.items);
		return ycsb_fnvhash64(v) % count;
	case WBENCH_DIST_LATEST:
		/* The newest record and the ones just before it, as YCSB's
		 * max - zipfian(max); never below 0. */
		if (newest == 0)
			return 0;
		v = ycsb_zipf_next(&c->zipf, r, newest);
		return v >= newest ? 0 : newest - v;
	default:
		return ycsb_rng_next(r) % count;
	}
}

void
ycsb_figs_record(ycsb_figs *f, uint64_t ns, enum ycsb_status s)
{
	if (f->n == 0 || ns < f->min_ns)
		f->min_ns = ns;
	if (ns > f->max_ns)
		f->max_ns = ns;
	f->n++;
	f->sum_ns += ns;
	f->status[s]++;
}

void
ycsb_figs_merge(ycsb_figs *dst, const ycsb_figs *src)
{
	if (src->n == 0)
		return;
	if (dst->n == 0 || src->min_ns < dst->min_ns)
		dst->min_ns = src->min_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
	dst->n += src->n;
	dst->sum_ns += src->sum_ns;
	for (int i = 0; i < YCSB_STATUSES; i++)
		dst->status[i] += src->status[i];
}
