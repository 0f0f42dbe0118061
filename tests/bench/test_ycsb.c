/* SPDX-License-Identifier: MIT */
/*
 * test_ycsb.c: weft-bench's YCSB: its generators draw as YCSB's do (white
 * box, bench/weft-bench/ycsb.h), and every core workload runs at a tiny
 * size on both I/O models with its checks: every request answered exactly
 * once, every read its own record's value, every scan in order from its
 * start key, every acknowledged insert readable. No speed is asserted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <weft/core.h>

#include "bench_exec.h"
#include "ycsb.h"

/* YCSB's own key of record 0 is user6284781860667377211. */
static void
test_keys_are_named_as_ycsb_names_them(void **state)
{
	char key[32];

	(void)state;
	assert_int_equal(ycsb_fnvhash64(0), 6284781860667377211ull);
	assert_int_equal(ycsb_fnvhash64(1), 8517097267634966620ull);
	assert_int_equal(ycsb_fnvhash64(42), 55488592825689361ull);
	assert_int_equal(ycsb_key(key, 0), 23);
	assert_string_equal(key, "user6284781860667377211");
}

static void
test_workloads_are_the_core_ones(void **state)
{
	const ycsb_workload *w;

	(void)state;
	for (char c = 'a'; c <= 'f'; c++) {
		unsigned sum = 0;

		assert_non_null(w = ycsb_workload_of(c));
		for (int op = 0; op < YCSB_OPS; op++)
			sum += w->pct[op];
		assert_int_equal(sum, 100);
	}
	assert_null(ycsb_workload_of('g'));
	assert_int_equal(ycsb_workload_of('a')->pct[YCSB_UPDATE], 50);
	assert_int_equal(ycsb_workload_of('b')->pct[YCSB_READ], 95);
	assert_int_equal(ycsb_workload_of('d')->dist, WBENCH_DIST_LATEST);
	assert_int_equal(ycsb_workload_of('e')->pct[YCSB_SCAN], 95);
	assert_int_equal(ycsb_workload_of('f')->pct[YCSB_RMW], 50);
	assert_int_equal(ycsb_status_of(WEFT_ENOTFOUND), YCSB_NOT_FOUND);
	assert_int_equal(ycsb_status_of(WBENCH_EUNEXPECTED),
	                 YCSB_UNEXPECTED_STATE);
}

#define DRAWS 200000

/* A zipfian over 1000 items with constant 0.99 gives item 0 a share of
 * 1/zeta(1000) = 0.134, item 1 half of that; the latest distribution
 * favours the newest record; every draw is in range. */
static void
test_distributions_draw_in_range_with_their_skew(void **state)
{
	static unsigned hits[1000];
	ycsb_rng rng;
	ycsb_zipf z;
	ycsb_chooser ch;

	(void)state;
	ycsb_rng_seed(&rng, 7);
	ycsb_zipf_init(&z, 1000, 0.99, 0);
	memset(hits, 0, sizeof(hits));
	for (int i = 0; i < DRAWS; i++) {
		uint64_t v = ycsb_zipf_next(&z, &rng, 1000);

		assert_true(v < 1000);
		hits[v]++;
	}
	assert_true(hits[0] > DRAWS * 0.12 && hits[0] < DRAWS * 0.15);
	assert_true(hits[1] > hits[0] / 3 && hits[1] < hits[0] * 2 / 3);
	ycsb_chooser_init(&ch, WBENCH_DIST_LATEST, 1000);
	memset(hits, 0, sizeof(hits));
	for (int i = 0; i < DRAWS; i++)
		hits[ycsb_chooser_next(&ch, &rng, 1000)]++;
	assert_true(hits[999] > DRAWS / 10 && hits[999] > hits[500] * 50);
	/* The count grows, as inserts are acknowledged. */
	for (uint64_t n = 1000; n < 1100; n++)
		assert_true(ycsb_chooser_next(&ch, &rng, n) < n);
	ycsb_chooser_init(&ch, WBENCH_DIST_ZIPFIAN, 1000);
	memset(hits, 0, sizeof(hits));
	for (int i = 0; i < DRAWS; i++)
		hits[ycsb_chooser_next(&ch, &rng, 1000)]++;
	/* Scrambled: the hottest record is not record 0, and it is hot. */
	{
		unsigned hot = 0;

		for (int i = 1; i < 1000; i++)
			hot = hits[i] > hits[hot] ? (unsigned)i : hot;
		assert_true(hits[hot] > DRAWS / 100);
	}
	ycsb_chooser_init(&ch, WBENCH_DIST_UNIFORM, 1000);
	for (int i = 0; i < 1000; i++)
		assert_true(ycsb_chooser_next(&ch, &rng, 10) < 10);
}

/* check_runs checks every run of a --json report: requests answered once
 * each, nothing but OK returned, something measured. */
static void
check_runs(const char *text, int runs)
{
	const char *p = text;

	assert_int_equal(bench_count_of(text, "{\"workload\": \""), runs);
	while ((p = strstr(p, "{\"workload\": \"")) != NULL) {
		const char *run = strstr(p, "\"run\": {");

		assert_non_null(run);
		assert_true(bench_json_value(p, "\"sent\": ") > 0);
		assert_true(bench_json_value(p, "\"sent\": ") ==
		            bench_json_value(p, "\"replies\": "));
		assert_true(bench_json_value(p, "\"lost\": ") == 0);
		assert_true(bench_json_value(p, "\"duplicates\": ") == 0);
		assert_true(bench_json_value(run, "\"throughput\": ") > 0);
		p++;
	}
	assert_null(strstr(text, "NOT_FOUND"));
	assert_null(strstr(text, "UNEXPECTED_STATE"));
	assert_null(strstr(text, "\"ERROR\""));
	assert_null(strstr(text, "SERVICE_UNAVAILABLE"));
}

/* The six core workloads on weft's service, one after another on the
 * records loaded once: each does what its mix says. */
static void
test_workloads_a_to_f_on_the_loop(void **state)
{
	char path[] = "/tmp/wbench-ycsb-XXXXXX";
	static char text[65536];
	char *args[] = {"ycsb",   "--workload",   "a,b,c,d,e,f", "--peers",
	                "3",      "--io",         "loop",        "--records",
	                "300",    "--operations", "600",         "--threads",
	                "6",      "--size",       "128",         "--quiet",
	                "--json", path,           NULL};

	const char *p;

	(void)state;
	close(mkstemp(path));
	assert_int_equal(run_bench_to(args, "/dev/null", NULL), 0);
	read_json(path, text, sizeof(text));
	check_runs(text, 6);
	/* Throughput is operations, as YCSB counts them (a read-modify-write
	 * once), per second of run time: 600 of them. */
	for (p = strstr(text, "\"run\": {"); p != NULL;
	     p = strstr(p + 1, "\"run\": {")) {
		double ops = bench_json_value(p, "\"runtime_ms\": ") *
		             bench_json_value(p, "\"throughput\": ") / 1e3;

		assert_true(ops > 594 && ops < 606);
	}
	/* Each loaded every record, then ran its mix. */
	assert_int_equal(bench_count_of(text, "\"load\": {\"runtime_ms\": "),
	                 6);
	assert_int_equal(
	    bench_count_of(text, "\"INSERT\": {\"operations\": 300,"), 6);
	assert_non_null(strstr(text, "\"SCAN\": {\"operations\": "));
	assert_non_null(strstr(text, "\"READ-MODIFY-WRITE\": {\"operations\""));
	assert_non_null(strstr(text, "\"weft_version\": "));
}

/* The baseline's key-value service answers the same workloads, scans
 * included; the output is YCSB's own. */
static void
test_workloads_on_the_baseline_in_ycsb_form(void **state)
{
	char path[] = "/tmp/wbench-ycsb-XXXXXX";
	char out[] = "/tmp/wbench-ycsb-out-XXXXXX";
	static char text[65536];
	char *args[] = {"ycsb",   "--workload", "a,e,f",   "--peers",
	                "3",      "--io",       "threads", "--records",
	                "300",    "--duration", "0.3",     "--threads",
	                "6",      "--size",     "128",     "--quiet",
	                "--json", path,         NULL};

	(void)state;
	close(mkstemp(path));
	close(mkstemp(out));
	assert_int_equal(run_bench_to(args, out, NULL), 0);
	read_json(path, text, sizeof(text));
	check_runs(text, 3);
	read_json(out, text, sizeof(text));
	/* The records are loaded once, then each workload runs on them. */
	assert_int_equal(bench_count_of(text, "# load phase\n"), 1);
	assert_int_equal(bench_count_of(text, "[OVERALL], RunTime(ms), "), 4);
	assert_int_equal(
	    bench_count_of(text, "[OVERALL], Throughput(ops/sec), "), 4);
	assert_non_null(strstr(text, "[READ], Operations, "));
	assert_non_null(strstr(text, "[READ], AverageLatency(us), "));
	assert_non_null(strstr(text, "[READ], MinLatency(us), "));
	assert_non_null(strstr(text, "[READ], MaxLatency(us), "));
	assert_non_null(strstr(text, "[READ], 95thPercentileLatency(us), "));
	assert_non_null(strstr(text, "[READ], 99thPercentileLatency(us), "));
	assert_non_null(strstr(text, "[READ], Return=OK, "));
	assert_non_null(strstr(text, "[SCAN], Return=OK, "));
	assert_non_null(strstr(text, "[READ-MODIFY-WRITE], Return=OK, "));
	assert_non_null(strstr(text, "[INSERT], Return=OK, 300\n"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keys_are_named_as_ycsb_names_them),
	    cmocka_unit_test(test_workloads_are_the_core_ones),
	    cmocka_unit_test(test_distributions_draw_in_range_with_their_skew),
	    cmocka_unit_test(test_workloads_a_to_f_on_the_loop),
	    cmocka_unit_test(test_workloads_on_the_baseline_in_ycsb_form),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
