/* SPDX-License-Identifier: MIT */
/*
 * test_sessions.c: ZooKeeper's shape at a small size: 900 synchronous
 * sessions (three client processes of 300, one request in flight each)
 * against one key-value node, on both I/O models, for about a second.
 * Every session connects, every request is answered exactly once, and
 * the baseline holds two threads per session connection where weft's
 * node holds a few; the smoke test's 900 sessions likewise. Then a
 * short YCSB run over sessions with its --md table in the form of
 * HBASE-11297's comparison. And CASSANDRA-8457's read at a small size:
 * three members, two client processes of 20 synchronous sessions each,
 * every get read at consistency all on both I/O models, answered once,
 * with the cassandra-stress-shaped summary. No speed is asserted.
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

/* Sessions per client process of mix (three processes), and the smoke
 * test's sessions: 900 in all, a tenth under ThreadSanitizer (whose
 * threads are too dear for the baseline's 3,600). */
#ifndef SESSIONS_PER_CLIENT
#define SESSIONS_PER_CLIENT 300
#define SESSIONS 900
#endif
#define STR_(x) #x
#define STR(x) STR_(x)

static void
test_mix_900_sessions_against_one_node(void **state)
{
	char path[] = "/tmp/wbench-sess-XXXXXX", text[8192];
	char md[] = "/tmp/wbench-sess-md-XXXXXX";
	char *args[] = {"mix",
	                "--peers",
	                "1",
	                "--mixes",
	                "99",
	                "--clients",
	                "3",
	                "--sessions",
	                STR(SESSIONS_PER_CLIENT),
	                "--outstanding",
	                "1",
	                "--keys",
	                "200",
	                "--warmup",
	                "0.2",
	                "--duration",
	                "1",
	                "--quiet",
	                "--json",
	                path,
	                "--md",
	                md,
	                NULL};
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
	assert_int_equal(
	    bench_count_of(text, "\"sessions\": " STR(SESSIONS_PER_CLIENT) ","),
	    2);
	check_cluster_run(loop);
	check_cluster_run(threads);
	assert_true(bench_json_value(loop, "\"errors\": ") == 0);
	assert_true(bench_json_value(threads, "\"errors\": ") == 0);
	/* 900 sessions, a connection for small messages and one for
	 * urgent ones each: the baseline's node a reader and a writer
	 * thread per connection, weft's its loops and workers. */
	assert_true(bench_json_value(threads, "\"member_threads\": ") >=
	            2 * 2 * SESSIONS);
	assert_true(bench_json_value(loop, "\"member_threads\": ") < 64);
	read_json(md, text, sizeof(text));
	assert_non_null(strstr(text,
	                       "| RSS MB per member | threads per member | "
	                       "client RSS MB |\n"));
	assert_int_equal(bench_count_of(text, "\n| 1 | 99% | "), 2);
}

/* smoke --sessions 900: one client process of 900 sessions, each with
 * one request at a time, creates, sets, gets and deletes its keys on
 * both I/O models, every request answered once. */
static void
test_smoke_900_sessions_against_one_node(void **state)
{
	char path[] = "/tmp/wbench-sess-XXXXXX";
	static char text[65536];
	char *args[] = {
	    "smoke",      "--peers",     "1",      "--io", "both",
	    "--sessions", STR(SESSIONS), "--keys", "2",    "--outstanding",
	    "1",          "--quiet",     "--json", path,   NULL};
	const char *p;

	(void)state;
	close(mkstemp(path));
	assert_int_equal(run_bench_to(args, "/dev/null", NULL), 0);
	read_json(path, text, sizeof(text));
	assert_int_equal(
	    bench_count_of(text, "\"clients\": " STR(SESSIONS) ", "), 2);
	for (p = strstr(text, "{\"nodes\": "); p != NULL;
	     p = strstr(p + 1, "{\"nodes\": ")) {
		assert_true(bench_json_value(p, "\"sent\": ") ==
		            4 * 2 * SESSIONS);
		assert_true(bench_json_value(p, "\"replies\": ") ==
		            4 * 2 * SESSIONS);
		assert_true(bench_json_value(p, "\"duplicates\": ") == 0);
		assert_true(bench_json_value(p, "\"unexpected\": ") == 0);
	}
	assert_int_equal(bench_count_of(text, "\"errors\": 0}"), 8);
}

/* YCSB over 50 sessions in two client processes, on both I/O models:
 * every request answered once with its own record's value, and the
 * --md file has each workload's run-phase lines side by side. */
static void
test_ycsb_over_sessions_with_md_side_by_side(void **state)
{
	char path[] = "/tmp/wbench-sess-XXXXXX";
	char md[] = "/tmp/wbench-sess-md-XXXXXX";
	static char text[65536];
	const char *p = text;
	char *args[] = {
	    "ycsb",   "--workload",   "a,f",  "--peers",   "1",   "--clients",
	    "2",      "--sessions",   "25",   "--threads", "50",  "--records",
	    "200",    "--operations", "2000", "--size",    "128", "--quiet",
	    "--json", path,           "--md", md,          NULL};

	(void)state;
	close(mkstemp(path));
	close(mkstemp(md));
	assert_int_equal(run_bench_to(args, "/dev/null", NULL), 0);
	read_json(path, text, sizeof(text));
	assert_int_equal(bench_count_of(text, "{\"workload\": \""), 4);
	while ((p = strstr(p, "{\"workload\": \"")) != NULL) {
		assert_true(bench_json_value(p, "\"sent\": ") >= 2000);
		assert_true(bench_json_value(p, "\"sent\": ") ==
		            bench_json_value(p, "\"replies\": "));
		assert_true(bench_json_value(p, "\"lost\": ") == 0);
		assert_true(bench_json_value(p, "\"duplicates\": ") == 0);
		p++;
	}
	assert_null(strstr(text, "NOT_FOUND"));
	assert_null(strstr(text, "UNEXPECTED_STATE"));
	read_json(md, text, sizeof(text));
	assert_int_equal(
	    bench_count_of(text, "|  | weft (loop) | baseline (threads) |\n"),
	    2);
	assert_non_null(strstr(text, "**Workload A, 1 nodes**"));
	assert_non_null(strstr(text, "**Workload F, 1 nodes**"));
	assert_int_equal(bench_count_of(text, "| [OVERALL] RunTime(ms) | "), 2);
	assert_int_equal(
	    bench_count_of(text, "| [OVERALL] Throughput(ops/sec) | "), 2);
	assert_non_null(strstr(text, "| [READ] Operations | "));
	assert_non_null(strstr(text, "| [UPDATE] MinLatency(us) | "));
	assert_non_null(strstr(text, "| [UPDATE] MaxLatency(us) | "));
	assert_non_null(strstr(text, "| [READ] AverageLatency(us) | "));
	assert_non_null(strstr(text, "| [READ] 95thPercentileLatency(us) | "));
	assert_non_null(
	    strstr(text, "| [READ-MODIFY-WRITE] 99thPercentileLatency(us) | "));
}

/* mix --consistency all: 2 x 20 synchronous sessions over 3 members,
 * reads only; every request answered once and without error, every get
 * of the window coordinated at all by a member, on both I/O models, and
 * the summary printed in cassandra-stress's form for each. */
static void
test_mix_reads_at_consistency_all(void **state)
{
	char path[] = "/tmp/wbench-sess-XXXXXX", text[8192];
	char out[] = "/tmp/wbench-sess-out-XXXXXX";
	static char printed[65536];
	char *args[] = {"mix",    "--peers",
	                "3",      "--mixes",
	                "100",    "--clients",
	                "2",      "--sessions",
	                "20",     "--outstanding",
	                "1",      "--keys",
	                "200",    "--consistency",
	                "all",    "--warmup",
	                "0.2",    "--duration",
	                "1",      "--quiet",
	                "--json", path,
	                NULL};
	const char *p;
	FILE *f;
	size_t n;

	(void)state;
	close(mkstemp(path));
	close(mkstemp(out));
	assert_int_equal(run_bench_to(args, out, NULL), 0);
	read_json(path, text, sizeof(text));
	assert_int_equal(bench_count_of(text, "\"consistency\": \"all\""), 2);
	for (p = strstr(text, "{\"peers\": "); p != NULL;
	     p = strstr(p + 1, "{\"peers\": ")) {
		check_cluster_run(p);
		assert_true(bench_json_value(p, "\"errors\": ") == 0);
		assert_true(bench_json_value(p, "\"gets\": ") > 0);
		assert_true(bench_json_value(p, "\"reads_coordinated\": ") >=
		            bench_json_value(p, "\"gets\": "));
	}
	assert_non_null(f = fopen(out, "r"));
	n = fread(printed, 1, sizeof(printed) - 1, f);
	printed[n] = '\0';
	fclose(f);
	unlink(out);
	assert_non_null(strstr(printed, "Results (loop, 3 nodes, 2 x 20 "
	                                "clients, cl=all):"));
	assert_non_null(strstr(printed, "Results (threads, 3 nodes"));
	assert_int_equal(bench_count_of(printed, "Latency 99.9th percentile :"),
	                 2);
	assert_int_equal(bench_count_of(printed, "Total operation time      :"),
	                 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mix_900_sessions_against_one_node),
	    cmocka_unit_test(test_smoke_900_sessions_against_one_node),
	    cmocka_unit_test(test_ycsb_over_sessions_with_md_side_by_side),
	    cmocka_unit_test(test_mix_reads_at_consistency_all),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
