/* SPDX-License-Identifier: MIT */
/*
 * ycsb.h: weft-bench's YCSB (Cooper et al., "Benchmarking Cloud Serving
 * Systems with YCSB", SoCC 2010): the core workloads A to F, the request
 * distributions of YCSB's CoreWorkload, and the per-operation figures its
 * output reports. ycsbgen.c holds the generators, ycsbclient.c one client
 * process, ycsb.c the coordinator and the output.
 */
#ifndef WBENCH_YCSB_H
#define WBENCH_YCSB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wbench.h"

/* The operations, in the order YCSB prints them. */
enum ycsb_op {
	YCSB_READ,
	YCSB_UPDATE,
	YCSB_INSERT,
	YCSB_SCAN,
	YCSB_RMW,
	YCSB_OPS
};

/* What an operation returned, as YCSB's Status names it. */
enum ycsb_status {
	YCSB_OK,
	YCSB_NOT_FOUND,
	YCSB_ERROR,
	YCSB_UNEXPECTED_STATE, /* an answer that does not match the request */
	YCSB_SERVICE_UNAVAILABLE,
	YCSB_BAD_REQUEST,
	YCSB_STATUSES
};

/* A core workload: its operation mix (percent) and its distribution. */
typedef struct ycsb_workload {
	char name;
	unsigned pct[YCSB_OPS];
	enum wbench_dist dist;
} ycsb_workload;

/* ycsb_workload_of returns workload 'a' to 'f', or NULL. */
const ycsb_workload *ycsb_workload_of(char name);
const char *ycsb_op_name(enum ycsb_op op);
const char *ycsb_status_name(enum ycsb_status s);
/* wbench_dist_name names a distribution ("zipfian", ...). */
const char *wbench_dist_name(int dist);
/* ycsb_status_of maps a weft status to YCSB's. */
enum ycsb_status ycsb_status_of(int status);

/* ---- Generators (ycsbgen.c) --------------------------------------------- */

/* ycsb_fnvhash64 is YCSB's Utils.fnvhash64: FNV-1 over the value's eight
 * bytes, low first, made non-negative. */
uint64_t ycsb_fnvhash64(uint64_t v);
/* ycsb_key names record keynum as YCSB does with hashed inserts:
 * "user" and the decimal hash. Returns the key's length. */
size_t ycsb_key(char out[32], uint64_t keynum);

/* A 64-bit random number generator (xorshift64*), one per thread. */
typedef struct ycsb_rng {
	uint64_t s;
} ycsb_rng;

void ycsb_rng_seed(ycsb_rng *r, uint64_t seed);
uint64_t ycsb_rng_next(ycsb_rng *r);
/* ycsb_rng_double is uniform in [0, 1). */
double ycsb_rng_double(ycsb_rng *r);

/*
 * YCSB's ZipfianGenerator (Gray et al., "Quickly generating billion-record
 * synthetic databases", SIGMOD 1994) with constant theta: values in
 * [0, items), 0 the most popular. The item count may grow between draws;
 * zeta is extended incrementally, as YCSB does.
 */
typedef struct ycsb_zipf {
	uint64_t items; /* the count it was made for */
	uint64_t count_for_zeta;
	double theta, alpha, zeta2, zetan, eta;
} ycsb_zipf;

/* ycsb_zipf_init computes zeta over items; zetan > 0 gives it instead
 * (for a count too large to sum). */
void ycsb_zipf_init(ycsb_zipf *z, uint64_t items, double theta, double zetan);
/* ycsb_zipf_next draws from [0, count): count may have grown. */
uint64_t ycsb_zipf_next(ycsb_zipf *z, ycsb_rng *r, uint64_t count);

/* A key chooser of one request distribution over the records present:
 * zipfian (YCSB's scrambled zipfian: a zipfian over 10^10 items, hashed
 * onto the records), uniform, or latest (YCSB's skewed latest: zipfian
 * from the newest record back). */
typedef struct ycsb_chooser {
	enum wbench_dist dist;
	ycsb_zipf zipf;
} ycsb_chooser;

/* ycsb_chooser_init prepares a chooser for count records at first. */
void ycsb_chooser_init(ycsb_chooser *c, enum wbench_dist dist, uint64_t count);
/* ycsb_chooser_next picks one of count records, 0 to count - 1. */
uint64_t ycsb_chooser_next(ycsb_chooser *c, ycsb_rng *r, uint64_t count);

/* ---- Figures ------------------------------------------------------------- */

/* One operation type's figures in one phase. */
typedef struct ycsb_figs {
	uint64_t n, sum_ns, min_ns, max_ns;
	uint64_t status[YCSB_STATUSES];
} ycsb_figs;

void ycsb_figs_record(ycsb_figs *f, uint64_t ns, enum ycsb_status s);
void ycsb_figs_merge(ycsb_figs *dst, const ycsb_figs *src);

#endif
