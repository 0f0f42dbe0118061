/* SPDX-License-Identifier: MIT */
/*
 * test_sessions.c: ZooKeeper's shape at a small size: 900 synchronous
 * sessions (three client processes of 300, one request in flight each)
 * against one key-value node, on both I/O models, for about a second.
 * Every session connects, every request is answered exactly once, and
 * the baseline holds two threads per session connection where weft's
 * node holds a few. No speed is asserted.
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

static void
test_mix_900_sessions_against_one_node(void **state)
{
	char path[] = "/tmp/wbench-sess-XXXXXX", text[8192];
	char md[] = "/tmp/wbench-sess-md-XXXXXX";
	char *args[] = {
	    "mix",        "--peers", "1",          "--mixes",  "99",
	    "--clients",  "3",       "--sessions", "300",      "--outstanding",
	    "1",          "--keys",  "200",        "--warmup", "0.2",
	    "--duration", "1",       "--quiet",    "--json",   path,
	    "--md",       md,        NULL};
	const char *loop, *threads;

	(void)state;
	close(mkstemp(path));
	close(mkstemp(md));
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	loop = strstr(text, "\"io\": \"loop\"");
	threads = strstr(text, "\"io\": \"threads\"");
	assert_non_null(loop);
	assert_non_null(threads);
	assert_int_equal(bench_count_of(text, "\"sessions\": 300"), 2);
	check_cluster_run(loop);
	check_cluster_run(threads);
	assert_true(bench_json_value(loop, "\"errors\": ") == 0);
	assert_true(bench_json_value(threads, "\"errors\": ") == 0);
	/* 900 sessions, a connection for small messages and one for
	 * urgent ones each: the baseline's node a reader and a writer
	 * thread per connection, weft's its loops and workers. */
	assert_true(bench_json_value(threads, "\"member_threads\": ") >=
	            2 * 2 * 900);
	assert_true(bench_json_value(loop, "\"member_threads\": ") < 64);
	read_json(md, text, sizeof(text));
	assert_non_null(strstr(text, "| member RSS MB | member threads | "
	                             "client RSS MB |\n"));
	assert_int_equal(bench_count_of(text, "\n| 1 | 99% | "), 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mix_900_sessions_against_one_node),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
