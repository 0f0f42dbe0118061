/* SPDX-License-Identifier: MIT */
/* ycsbout.h: the figures of a ycsb run, and their output (ycsbout.c). */
#ifndef WBENCH_YCSBOUT_H
#define WBENCH_YCSBOUT_H

#include <stdio.h>

#include "ycsb.h"

/* One workload on one cluster: per phase (0 load, 1 run) and operation. */
typedef struct ycsb_result {
	char workload;
	unsigned nodes;
	enum wbench_io io;
	ycsb_figs figs[2][YCSB_OPS];
	double p95_us[2][YCSB_OPS], p99_us[2][YCSB_OPS];
	uint64_t ops[2];      /* operations (a read-modify-write's read and
	                       * update count, the whole does not) */
	double runtime_ms[2]; /* first request to last answer */
	double throughput[2]; /* ops per second of runtime */
	uint64_t sent, replies, lost, duplicates;
	int first_error;
} ycsb_result;

/* ycsb_print prints a run in YCSB's form: its load phase (with_load;
 * otherwise a line saying the records were loaded for the runs before),
 * then its run phase, [OVERALL] and each operation's lines. */
void ycsb_print(const wbench_opts *o, const ycsb_result *r, bool with_load,
                FILE *out);
/* ycsb_result_cmp orders results by workload, nodes, then I/O model. */
int ycsb_result_cmp(const void *a, const void *b);
/* ycsb_write_reports writes --json, --md and --plot; 0 or -1. */
int ycsb_write_reports(const wbench_opts *o, const ycsb_result *rows,
                       unsigned n);

#endif
