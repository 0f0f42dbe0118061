/* SPDX-License-Identifier: MIT */
/*
 * test_smoke.c: weft-bench smoke, the ZooKeeper-style latency test, at a
 * tiny size against a standalone node and a 3-node cluster on both I/O
 * models: every request answered exactly once, every get the value its
 * set wrote, the output in zk-latencies' form. No speed is asserted.
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

#include "bench_exec.h"
#include "support/certs.h"

static void
test_smoke_standalone_and_cluster(void **state)
{
	char path[] = "/tmp/wbench-smoke-XXXXXX";
	char out[] = "/tmp/wbench-smoke-out-XXXXXX";
	static char text[65536];
	char *args[] = {
	    "smoke",     "--peers", "1,3",    "--io", "both",
	    "--clients", "1,3",     "--keys", "200",  "--outstanding",
	    "50",        "--quiet", "--json", path,   NULL};
	const char *p;

	(void)state;
	close(mkstemp(path));
	close(mkstemp(out));
	assert_int_equal(run_bench_to(args, out, NULL), 0);
	read_json(path, text, sizeof(text));
	/* Two node counts, two I/O models, two client counts. */
	assert_int_equal(bench_count_of(text, "{\"nodes\": "), 8);
	assert_int_equal(bench_count_of(text, "\"clients\": 3, \"keys\": 600,"),
	                 4);
	for (p = strstr(text, "{\"nodes\": "); p != NULL;
	     p = strstr(p + 1, "{\"nodes\": ")) {
		double keys = bench_json_value(p, "\"keys\": ");

		/* create, set, get, delete: each key once each. */
		assert_true(bench_json_value(p, "\"sent\": ") == 4 * keys);
		assert_true(bench_json_value(p, "\"replies\": ") == 4 * keys);
		assert_true(bench_json_value(p, "\"duplicates\": ") == 0);
		assert_true(bench_json_value(p, "\"unexpected\": ") == 0);
	}
	assert_int_equal(bench_count_of(text, "\"errors\": 0}"), 32);
	read_json(out, text, sizeof(text));
	assert_int_equal(bench_count_of(text, "created 200 keys in "), 4);
	assert_int_equal(bench_count_of(text, "got 600 keys in "), 4);
	assert_int_equal(bench_count_of(text, " ms/op "), 40);
	assert_int_equal(bench_count_of(text, "client CPU user "), 8);
}

/* The smoke test and a YCSB workload over mutual TLS: each client
 * session presents its own certificate (cI). */
static void
test_smoke_and_ycsb_over_tls(void **state)
{
	char dir[] = "/tmp/wbench-tls-XXXXXX";
	char path[] = "/tmp/wbench-smoke-XXXXXX";
	static char text[65536];
	char *smoke[] = {"smoke", "--peers",       "3",      "--io",
	                 "both",  "--clients",     "2",      "--keys",
	                 "100",   "--outstanding", "20",     "--tls",
	                 dir,     "--quiet",       "--json", path,
	                 NULL};
	char *ycsb[] = {
	    "ycsb",   "--workload", "e",   "--peers",      "3",   "--io",
	    "both",   "--records",  "200", "--operations", "300", "--threads",
	    "4",      "--size",     "64",  "--tls",        dir,   "--quiet",
	    "--json", path,         NULL};

	(void)state;
	close(mkstemp(path));
	if (!weft_test_gen_certs(dir, "n0 n1 n2 --client c0 --client c1")) {
		unlink(path);
		skip();
	}
	assert_int_equal(run_bench_to(smoke, "/dev/null", NULL), 0);
	read_json(path, text, sizeof(text));
	assert_non_null(strstr(text, "\"tls\": true"));
	assert_int_equal(bench_count_of(text, "\"unexpected\": 0,"), 2);
	assert_int_equal(
	    bench_count_of(text, "\"sent\": 800, \"replies\": 800,"), 2);
	assert_int_equal(run_bench_to(ycsb, "/dev/null", NULL), 0);
	read_json(path, text, sizeof(text));
	weft_test_remove_dir(dir);
	assert_non_null(strstr(text, "\"tls\": true"));
	assert_int_equal(bench_count_of(text, "\"SCAN\": {\"operations\": "),
	                 2);
	assert_null(strstr(text, "UNEXPECTED_STATE"));
	assert_int_equal(
	    bench_count_of(text, "\"lost\": 0, \"duplicates\": 0}"), 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_smoke_standalone_and_cluster),
	    cmocka_unit_test(test_smoke_and_ycsb_over_tls),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
