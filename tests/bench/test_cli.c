/* SPDX-License-Identifier: MIT */
/*
 * Runs the weft-bench binary as a user would, with the load half in a
 * child process, and checks its exit status and JSON figures.
 */
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bench_exec.h"

static void
test_throughput_both_in_two_processes(void **state)
{
	char path[] = "/tmp/wbench-cli-XXXXXX", text[8192];
	char *args[] = {"throughput", "--size", "1K",   "--count",
	                "5000",       "--impl", "both", "--verify",
	                "--quiet",    "--json", path,   NULL};
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	assert_non_null(strstr(text, "\"received\": 5500"));
	assert_non_null(strstr(text, "\"weft\": {"));
	assert_non_null(strstr(text, "\"raw\": {"));
	assert_null(strstr(text, "\"errors\": 1"));
}

static void
test_latency_in_two_processes(void **state)
{
	char path[] = "/tmp/wbench-cli-XXXXXX", text[8192];
	char *args[] = {"latency", "--size",   "64", "--count",
	                "200",     "--warmup", "10", "--quiet",
	                "--json",  path,       NULL};
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	assert_non_null(strstr(text, "\"measured\": 200"));
	assert_non_null(strstr(text, "\"p999_ns\""));
}

/* count_of counts the occurrences of key in text. */
static int
count_of(const char *text, const char *key)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, key)) != NULL; p++)
		n++;
	return n;
}

/* Throughput and latency over mutual TLS: weft in plaintext and over TLS
 * alternately, and TLS weft against the plaintext reference. */
static void
test_tls_throughput_and_latency(void **state)
{
	char dir[] = "/tmp/wbench-tls-XXXXXX";
	char path[] = "/tmp/wbench-cli-XXXXXX", text[8192];
	char *tput[] = {
	    "throughput", "--size", "1K", "--count",       "3000",
	    "--verify",   "--tls",  dir,  "--tls-compare", "--quiet",
	    "--json",     path,     NULL};
	char *lat[] = {"latency", "--count", "200",   "--warmup", "10",
	               "--impl",  "both",    "--tls", dir,        "--quiet",
	               "--json",  path,      NULL};
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	if (!gen_certs(dir, "n0 n1")) {
		unlink(path);
		skip();
	}
	assert_int_equal(run_bench(tput), 0);
	read_json(path, text, sizeof(text));
	assert_non_null(strstr(text, "\"tls\": true"));
	assert_non_null(strstr(text, "\"weft\": {"));
	assert_non_null(strstr(text, "\"weft-tls\": {"));
	assert_non_null(strstr(text, "\"tls_over_plain\""));
	/* Median and run of each: every message exactly once. */
	assert_int_equal(count_of(text, "\"received\": 3300,"), 4);
	assert_int_equal(count_of(text, "\"errors\": 0,"), 4);
	assert_int_equal(run_bench(lat), 0);
	read_json(path, text, sizeof(text));
	remove_dir(dir);
	assert_non_null(strstr(text, "\"weft-tls\": {"));
	assert_non_null(strstr(text, "\"raw\": {"));
	assert_int_equal(count_of(text, "\"measured\": 200,"), 4);
	assert_int_equal(count_of(text, "\"errors\": 0,"), 4);
}

/* --csv: a header and one row per run, figures in their columns. */
static void
test_csv_one_row_per_run(void **state)
{
	char path[] = "/tmp/wbench-csv-XXXXXX", text[8192];
	char *args[] = {"latency", "--count", "100",      "--warmup", "10",
	                "--impl",  "both",    "--repeat", "2",        "--quiet",
	                "--csv",   path,      NULL};
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	assert_int_equal(strncmp(text, "workload,impl,tls,size,", 23), 0);
	assert_int_equal(count_of(text, "\n"), 5);
	assert_int_equal(count_of(text, "\nlatency,weft,0,64,"), 2);
	assert_int_equal(count_of(text, "\nlatency,raw,0,64,"), 2);
	assert_int_equal(count_of(text, ",0\n"), 4); /* no errors */
}

static void
test_bad_options_exit_2(void **state)
{
	char *bad_size[] = {"throughput", "--size", "lots", NULL};
	char *bad_workload[] = {"juggle", NULL};
	char *both_split[] = {"latency",  "--impl",      "both",
	                      "--listen", "127.0.0.1:0", NULL};

	(void)state;
	assert_int_equal(run_bench(bad_size), 2);
	assert_int_equal(run_bench(bad_workload), 2);
	assert_int_equal(run_bench(both_split), 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_throughput_both_in_two_processes),
	    cmocka_unit_test(test_latency_in_two_processes),
	    cmocka_unit_test(test_bad_options_exit_2),
	    cmocka_unit_test(test_tls_throughput_and_latency),
	    cmocka_unit_test(test_csv_one_row_per_run),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
