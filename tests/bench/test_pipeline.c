/* SPDX-License-Identifier: MIT */
/*
 * test_pipeline.c: weft-bench rpc --impl pipeline (pipeserver.c,
 * pipeclient.c), run as a user would beside the messaging service's run:
 * every request answered once, a rate measured, the options it cannot
 * take refused. No speed is asserted.
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

/* Both implementations in one command: a row each, the pipeline's after
 * the service's, each with a rate and every request answered once. */
static void
test_msvc_and_pipeline_in_one_command(void **state)
{
	char path[] = "/tmp/wbench-pipe-XXXXXX";
	static char text[16384];
	char *args[] = {
	    "rpc", "--impl",        "both",   "--io",     "loop", "--clients",
	    "2",   "--outstanding", "4",      "--warmup", "0.1",  "--duration",
	    "0.3", "--quiet",       "--json", path,       NULL};
	const char *msvc, *pipeline;

	(void)state;
	close(mkstemp(path));
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	msvc = strstr(text, "\"io\": \"loop\"");
	pipeline = strstr(text, "\"io\": \"pipeline\"");
	assert_non_null(msvc);
	assert_non_null(pipeline);
	assert_true(msvc < pipeline);
	check_cluster_run(msvc);
	check_cluster_run(pipeline);
	assert_true(bench_json_value(pipeline, "\"ops_per_s\": ") > 0);
	assert_true(bench_json_value(pipeline, "\"errors\": ") == 0);
	assert_true(bench_json_value(pipeline, "\"srv_msgs_per_wakeup\": ") >
	            0);
}

/* Large payloads travel in the codecs' evbuffers, not on the stack. */
static void
test_pipeline_with_large_payloads(void **state)
{
	char path[] = "/tmp/wbench-pipe-XXXXXX";
	static char text[16384];
	char *args[] = {
	    "rpc", "--impl",  "pipeline", "--clients", "1",   "--outstanding",
	    "2",   "--size",  "64K",      "--warmup",  "0.1", "--duration",
	    "0.3", "--quiet", "--json",   path,        NULL};
	const char *run;

	(void)state;
	close(mkstemp(path));
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	assert_null(strstr(text, "\"io\": \"loop\""));
	run = strstr(text, "\"io\": \"pipeline\"");
	assert_non_null(run);
	check_cluster_run(run);
	assert_true(bench_json_value(run, "\"ops_per_s\": ") > 0);
}

/* What only the messaging service has is refused, as bad usage. */
static void
test_pipeline_refuses_service_modes(void **state)
{
	char *sync[] = {"rpc",  "--impl",  "pipeline", "--client",
	                "sync", "--quiet", NULL};
	char *pool[] = {"rpc",  "--impl", "both",    "--handlers", "pool",
	                "--io", "loop",   "--quiet", NULL};
	char *bad[] = {"rpc", "--impl", "raw", "--quiet", NULL};

	(void)state;
	assert_int_equal(run_bench_to(sync, "/dev/null", "/dev/null"), 2);
	assert_int_equal(run_bench_to(pool, "/dev/null", "/dev/null"), 2);
	assert_int_equal(run_bench_to(bad, "/dev/null", "/dev/null"), 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_msvc_and_pipeline_in_one_command),
	    cmocka_unit_test(test_pipeline_with_large_payloads),
	    cmocka_unit_test(test_pipeline_refuses_service_modes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
