/* SPDX-License-Identifier: MIT */
/*
 * Short runs of every weft-bench workload, both implementations, with the
 * load half on a thread: every message must arrive exactly once and the
 * figures must agree with each other. No speed is asserted.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "wbench.h"

static void
tiny_opts(wbench_opts *o, enum wbench_workload w, size_t size, uint64_t count)
{
	wbench_opts_default(o);
	o->workload = w;
	o->size = size;
	o->count = count;
	o->warmup_count = count / 10;
	o->verify = true;
	o->quiet = true;
	o->peer = WBENCH_PEER_THREAD;
	o->timeout_ms = 10000;
	o->batch = 7; /* not a divisor of the counts: partial batches too */
}

static void
assert_close(double a, double b)
{
	assert_true(fabs(a - b) <= 1e-9 * fabs(b) + 1e-9);
}

static void
check_figures(const wbench_opts *o, const wbench_result *r)
{
	assert_int_equal(r->errors, 0);
	if (!o->warmup_by_time)
		assert_int_equal(r->warmup, o->warmup_count);
	/* The last read may hold messages past the run: checked too. */
	assert_true(r->received >= r->warmup + o->count);
	if (o->workload == WBENCH_LATENCY)
		assert_int_equal(r->received, r->warmup + o->count);
	assert_true(r->measured <= o->count);
	assert_true(r->seconds >= 0);
	if (r->seconds > 0)
		assert_close(r->msgs_per_s * r->seconds, (double)r->measured);
	assert_close(r->mb_per_s, r->msgs_per_s * (double)o->size / 1e6);
	if (o->workload != WBENCH_LATENCY)
		return;
	assert_int_equal(r->measured, o->count);
	assert_true(r->min_ns > 0);
	assert_true(r->min_ns <= r->p50_ns);
	assert_true(r->p50_ns <= r->p90_ns);
	assert_true(r->p90_ns <= r->p99_ns);
	assert_true(r->p99_ns <= r->p999_ns);
	assert_true(r->p999_ns <= r->max_ns);
	assert_true(r->mean_ns >= (double)r->min_ns);
	assert_true(r->mean_ns <= (double)r->max_ns);
}

static void
run_one(enum wbench_workload w, enum wbench_impl impl, size_t size,
        uint64_t count)
{
	wbench_opts o;
	wbench_result r;

	tiny_opts(&o, w, size, count);
	assert_int_equal(wbench_run_impl(&o, impl, &r), 0);
	check_figures(&o, &r);
}

static void
test_throughput_weft_every_size(void **state)
{
	(void)state;
	run_one(WBENCH_THROUGHPUT, WBENCH_IMPL_WEFT, 0, 3000);
	run_one(WBENCH_THROUGHPUT, WBENCH_IMPL_WEFT, 1, 3000);
	run_one(WBENCH_THROUGHPUT, WBENCH_IMPL_WEFT, 64, 20000);
	run_one(WBENCH_THROUGHPUT, WBENCH_IMPL_WEFT, 1024, 5000);
	run_one(WBENCH_THROUGHPUT, WBENCH_IMPL_WEFT, 65536, 200);
}

static void
test_throughput_raw_every_size(void **state)
{
	(void)state;
	/* Enough that the run spans several 256 KiB reads: the window
	 * opens at the read that completes the first measured message. */
	run_one(WBENCH_THROUGHPUT, WBENCH_IMPL_RAW, 0, 300000);
	run_one(WBENCH_THROUGHPUT, WBENCH_IMPL_RAW, 1, 300000);
	run_one(WBENCH_THROUGHPUT, WBENCH_IMPL_RAW, 64, 20000);
	run_one(WBENCH_THROUGHPUT, WBENCH_IMPL_RAW, 1024, 5000);
	run_one(WBENCH_THROUGHPUT, WBENCH_IMPL_RAW, 65536, 200);
}

static void
test_latency_both_impls(void **state)
{
	(void)state;
	run_one(WBENCH_LATENCY, WBENCH_IMPL_WEFT, 64, 300);
	run_one(WBENCH_LATENCY, WBENCH_IMPL_RAW, 64, 300);
	run_one(WBENCH_LATENCY, WBENCH_IMPL_WEFT, 65536, 50);
	run_one(WBENCH_LATENCY, WBENCH_IMPL_RAW, 65536, 50);
}

/* --warmup SEC: the warm-up is a time, its messages counted as they go;
 * the count follows it. */
static void
test_warmup_in_seconds(void **state)
{
	static const enum wbench_workload w[] = {WBENCH_THROUGHPUT,
	                                         WBENCH_LATENCY};
	wbench_opts o;
	wbench_result r;

	(void)state;
	for (int i = 0; i < 2; i++)
		for (int impl = WBENCH_IMPL_WEFT; impl <= WBENCH_IMPL_RAW;
		     impl++) {
			/* raw reads 256 KiB at a time: a window of
			 * several reads. */
			tiny_opts(&o, w[i], 64, i ? 200 : 50000);
			o.warmup_by_time = true;
			o.warmup_count = 0;
			o.warmup_s = 0.05;
			assert_int_equal(
			    wbench_run_impl(&o, (enum wbench_impl)impl, &r), 0);
			check_figures(&o, &r);
			/* At the first message no time has passed. */
			assert_true(r.warmup >= 1);
		}
}

/* A whole invocation: repetitions of both, medians, the JSON file. */
static void
test_run_both_with_repeats_writes_json(void **state)
{
	char path[] = "/tmp/wbench-run-XXXXXX", text[8192] = "";
	int fd = mkstemp(path);
	wbench_opts o;
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	tiny_opts(&o, WBENCH_LATENCY, 16, 100);
	o.impl = WBENCH_IMPL_BOTH;
	o.repeat = 3;
	o.json_path = path;
	assert_int_equal(wbench_run(&o), 0);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_true(fread(text, 1, sizeof(text) - 1, f) > 0);
	fclose(f);
	unlink(path);
	assert_non_null(strstr(text, "\"weft\": {"));
	assert_non_null(strstr(text, "\"raw\": {"));
	assert_non_null(strstr(text, "\"weft_over_raw\""));
	assert_null(strstr(text, "\"errors\": 1"));
}

/* The measuring half gives up on a peer that never comes. */
static int
no_peer(const char *bound, void *arg)
{
	(void)bound;
	(void)arg;
	return 0;
}

static void
test_measure_times_out_without_peer(void **state)
{
	wbench_opts o;
	wbench_result r;

	(void)state;
	tiny_opts(&o, WBENCH_THROUGHPUT, 64, 10);
	o.timeout_ms = 1000;
	assert_int_equal(wbench_weft_measure(&o, no_peer, NULL, &r), -1);
	assert_int_equal(r.received, 0);
	assert_int_equal(wbench_raw_measure(&o, no_peer, NULL, &r), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_throughput_weft_every_size),
	    cmocka_unit_test(test_throughput_raw_every_size),
	    cmocka_unit_test(test_latency_both_impls),
	    cmocka_unit_test(test_warmup_in_seconds),
	    cmocka_unit_test(test_run_both_with_repeats_writes_json),
	    cmocka_unit_test(test_measure_times_out_without_peer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
