/* SPDX-License-Identifier: MIT */
/*
 * test_wire.c: weft-bench's figures of the messaging service's wire
 * stages, run as a user would: --compression and --payload (the ratio
 * achieved on the wire, CPU per MB), messages above a chunk (--size 2M)
 * and a frame (rpc --impl pipeline), cluster --large-share (the small and
 * the large requests' latencies apart), and the combinations refused. No
 * speed is asserted.
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

/* run_rpc runs a short rpc of one client with 4 requests in flight on
 * weft's service, adding extra (NULL-ended, at most 8), and reads its
 * --json report into text. */
static void
run_rpc(char *const *extra, char *text, size_t len)
{
	char path[] = "/tmp/wbench-wire-XXXXXX";
	char *args[28] = {"rpc",  "--impl",    "msvc",   "--io",
	                  "loop", "--clients", "1",      "--outstanding",
	                  "4",    "--warmup",  "0.1",    "--duration",
	                  "0.5",  "--quiet",   "--json", path};
	int n = 16;

	for (int i = 0; extra[i] != NULL && n < 27; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	close(mkstemp(path));
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, len);
}

/* JSON-like text through LZ4 travels in well under half its bytes; the
 * CPU per MB is measured. */
static void
test_text_through_lz4_shrinks_on_the_wire(void **state)
{
	static char text[16384];
	char *extra[] = {"--compression", "lz4", "--payload", "text",
	                 "--size",        "16K", NULL};
	const char *run;

	(void)state;
	run_rpc(extra, text, sizeof(text));
	assert_non_null(strstr(text, "\"compression\": \"lz4\""));
	assert_non_null(strstr(text, "\"payload\": \"text\""));
	run = strstr(text, "\"io\": \"loop\"");
	assert_non_null(run);
	check_cluster_run(run);
	assert_true(bench_json_value(run, "\"wire_ratio\": ") > 2);
	assert_true(bench_json_value(run, "\"cpu_us_per_mb\": ") > 0);
	assert_true(bench_json_value(run, "\"mb_per_s\": ") > 0);
}

/* Random bytes do not compress: the ratio stays about 1. */
static void
test_random_bytes_through_lz4_stay_their_size(void **state)
{
	static char text[16384];
	char *extra[] = {"--compression", "lz4", "--payload", "random",
	                 "--size",        "16K", NULL};
	const char *run;
	double ratio;

	(void)state;
	run_rpc(extra, text, sizeof(text));
	run = strstr(text, "\"io\": \"loop\"");
	assert_non_null(run);
	check_cluster_run(run);
	ratio = bench_json_value(run, "\"wire_ratio\": ");
	assert_true(ratio > 0.9 && ratio < 1.1);
}

/* Without compression nothing is compressed: no ratio. */
static void
test_no_compression_has_no_ratio(void **state)
{
	static char text[16384];
	char *extra[] = {"--payload", "text", "--size", "16K", NULL};
	const char *run;

	(void)state;
	run_rpc(extra, text, sizeof(text));
	run = strstr(text, "\"io\": \"loop\"");
	assert_non_null(run);
	check_cluster_run(run);
	assert_non_null(strstr(run, "\"wire_ratio\": null"));
}

/* A 512 KiB message (four chunks) travels as chunks there and back:
 * every request is answered once, and the MB/s are the op rate's
 * payloads. Small enough, over a window long enough, that a busy machine
 * under a sanitizer still completes some (2 MiB in half a second once
 * completed none). */
static void
test_messages_in_chunks_are_echoed(void **state)
{
	static char text[16384];
	char *extra[] = {"--size", "512K", "--duration", "2", NULL};
	const char *run;
	double ops, mb;

	(void)state;
	run_rpc(extra, text, sizeof(text));
	run = strstr(text, "\"io\": \"loop\"");
	assert_non_null(run);
	check_cluster_run(run);
	assert_true(bench_json_value(run, "\"ops\": ") > 0);
	assert_true(bench_json_value(run, "\"errors\": ") == 0);
	ops = bench_json_value(run, "\"ops_per_s\": ");
	mb = bench_json_value(run, "\"mb_per_s\": ");
	assert_true(ops > 0);
	/* ops_per_s is printed to 0.1: the MB/s within that of 512 KiB
	 * each. */
	assert_true(mb > (ops - 0.05) * 0.524288 - 0.001 &&
	            mb < (ops + 0.05) * 0.524288 + 0.001);
}

/* rpc --impl pipeline's frame codec takes a message above its default
 * 16 MiB frame: one request of 20 MiB at a time. */
static void
test_pipeline_takes_a_message_above_sixteen_mib(void **state)
{
	char path[] = "/tmp/wbench-wire-XXXXXX";
	static char text[16384];
	char *args[] = {
	    "rpc", "--impl",  "pipeline", "--clients", "1", "--outstanding",
	    "1",   "--size",  "20M",      "--warmup",  "0", "--duration",
	    "4",   "--quiet", "--json",   path,        NULL};
	const char *run;

	(void)state;
	close(mkstemp(path));
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	run = strstr(text, "\"io\": \"pipeline\"");
	assert_non_null(run);
	check_cluster_run(run);
	assert_true(bench_json_value(run, "\"ops\": ") > 0);
}

/* cluster --large-share: 1 in 10 requests carries 256 KiB; the table
 * prints the small and the large requests' percentiles, and the report
 * counts both kinds. */
static void
test_large_share_reports_small_and_large_apart(void **state)
{
	char json[] = "/tmp/wbench-wire-XXXXXX";
	char out[] = "/tmp/wbench-wire-out-XXXXXX";
	static char text[16384], table[16384];
	char *args[] = {"cluster", "--io",
	                "loop",    "--peers",
	                "3",       "--outstanding",
	                "8",       "--large-share",
	                "0.1",     "--large-size",
	                "256K",    "--warmup",
	                "0.1",     "--duration",
	                "0.7",     "--quiet",
	                "--json",  json,
	                NULL};
	const char *run;
	double ops, large;

	(void)state;
	close(mkstemp(json));
	close(mkstemp(out));
	assert_int_equal(run_bench_to(args, out, NULL), 0);
	read_json(json, text, sizeof(text));
	read_json(out, table, sizeof(table));
	assert_non_null(strstr(table, "small 64 B: p50 "));
	assert_non_null(strstr(table, "large 262144 B: p50 "));
	run = strstr(text, "\"io\": \"loop\"");
	assert_non_null(run);
	check_cluster_run(run);
	ops = bench_json_value(run, "\"ops\": ");
	large = bench_json_value(run, "\"large_ops\": ");
	assert_true(large > 0 && large < ops / 2);
	assert_true(bench_json_value(run, "\"small_p99_us\": ") > 0);
	assert_true(bench_json_value(run, "\"large_p99_us\": ") > 0);
}

/* What cannot be measured is refused as bad usage. */
static void
test_wire_options_refuse_what_they_cannot_do(void **state)
{
	char *pipeline[] = {"rpc",           "--impl", "pipeline",
	                    "--compression", "lz4",    NULL};
	char *alg[] = {"rpc", "--compression", "gzip", NULL};
	char *kind[] = {"rpc", "--payload", "zeros", NULL};
	char *too_large[] = {"rpc", "--io", "loop", "--size", "257M", NULL};
	char *baseline[] = {"rpc", "--size", "32M", NULL};
	char *size_alone[] = {"cluster", "--large-size", "1M", NULL};
	char *share[] = {"cluster", "--large-share", "0", NULL};
	char *mix[] = {"mix", "--compression", "lz4", NULL};
	char *frame[] = {"throughput", "--size", "32M", NULL};

	(void)state;
	assert_int_equal(run_bench(pipeline), 2);
	assert_int_equal(run_bench(alg), 2);
	assert_int_equal(run_bench(kind), 2);
	assert_int_equal(run_bench(too_large), 2);
	assert_int_equal(run_bench(baseline), 2);
	assert_int_equal(run_bench(size_alone), 2);
	assert_int_equal(run_bench(share), 2);
	assert_int_equal(run_bench(mix), 2);
	assert_int_equal(run_bench(frame), 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_text_through_lz4_shrinks_on_the_wire),
	    cmocka_unit_test(test_random_bytes_through_lz4_stay_their_size),
	    cmocka_unit_test(test_no_compression_has_no_ratio),
	    cmocka_unit_test(test_messages_in_chunks_are_echoed),
	    cmocka_unit_test(test_pipeline_takes_a_message_above_sixteen_mib),
	    cmocka_unit_test(test_large_share_reports_small_and_large_apart),
	    cmocka_unit_test(test_wire_options_refuse_what_they_cannot_do),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
