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
#include "support/certs.h"

/* each_at_least checks that every number after key in text is at least
 * min, and returns how many there are. */
static int
each_at_least(const char *text, const char *key, double min)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, key)) != NULL; p++, n++)
		assert_true(strtod(p + strlen(key), NULL) >= min);
	return n;
}

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
	/* Median and run of each: the warm-up, then at least the count
	 * (the receiver may read, and check, a few messages more). */
	assert_int_equal(bench_count_of(text, "\"warmup\": 500,"), 4);
	assert_int_equal(each_at_least(text, "\"received\": ", 5500), 4);
	assert_int_equal(each_at_least(text, "\"measured\": ", 1), 4);
	assert_non_null(strstr(text, "\"weft\": {"));
	assert_non_null(strstr(text, "\"raw\": {"));
	assert_null(strstr(text, "\"errors\": 1"));
}

static void
test_latency_in_two_processes(void **state)
{
	char path[] = "/tmp/wbench-cli-XXXXXX", text[8192];
	char *args[] = {
	    "latency", "--size",  "64",     "--count", "200", "--warmup-count",
	    "10",      "--quiet", "--json", path,      NULL};
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	assert_non_null(strstr(text, "\"measured\": 200"));
	assert_non_null(strstr(text, "\"p999_ns\""));
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
	char *lat[] = {"latency", "--count", "200",    "--warmup-count",
	               "10",      "--impl",  "both",   "--tls",
	               dir,       "--quiet", "--json", path,
	               NULL};
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	if (!weft_test_gen_certs(dir, "n0 n1")) {
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
	assert_int_equal(each_at_least(text, "\"received\": ", 3300), 4);
	assert_int_equal(bench_count_of(text, "\"warmup\": 300,"), 4);
	assert_int_equal(bench_count_of(text, "\"errors\": 0,"), 4);
	assert_int_equal(run_bench(lat), 0);
	read_json(path, text, sizeof(text));
	weft_test_remove_dir(dir);
	assert_non_null(strstr(text, "\"weft-tls\": {"));
	assert_non_null(strstr(text, "\"raw\": {"));
	assert_int_equal(bench_count_of(text, "\"measured\": 200,"), 4);
	assert_int_equal(bench_count_of(text, "\"errors\": 0,"), 4);
}

/* --csv: a header and one row per run, figures in their columns. */
static void
test_csv_one_row_per_run(void **state)
{
	char path[] = "/tmp/wbench-csv-XXXXXX", text[8192];
	char *args[] = {"latency", "--count", "100",   "--warmup-count",
	                "10",      "--impl",  "both",  "--repeat",
	                "2",       "--quiet", "--csv", path,
	                NULL};
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	assert_int_equal(strncmp(text, "workload,impl,tls,size,", 23), 0);
	assert_int_equal(bench_count_of(text, "\n"), 5);
	assert_int_equal(bench_count_of(text, "\nlatency,weft,0,64,"), 2);
	assert_int_equal(bench_count_of(text, "\nlatency,raw,0,64,"), 2);
	assert_int_equal(bench_count_of(text, ",0\n"), 4); /* no errors */
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

/* slurp_file reads the file at path (NUL-terminated, at most len - 1
 * bytes) into text and removes it. */
static void
slurp_file(const char *path, char *text, size_t len)
{
	read_json(path, text, len);
}

/* run_capture runs weft-bench with args; its output goes to out and its
 * errors to err (each len bytes). Returns the exit status. */
static int
run_capture(char **args, char *out, char *err, size_t len)
{
	char out_path[] = "/tmp/wbench-out-XXXXXX";
	char err_path[] = "/tmp/wbench-err-XXXXXX";
	int status;

	close(mkstemp(out_path));
	close(mkstemp(err_path));
	status = run_bench_to(args, out_path, err_path);
	slurp_file(out_path, out, len);
	slurp_file(err_path, err, len);
	return status;
}

/* Each workload's --help lists its own options and no other's. */
static void
test_each_workload_has_its_help(void **state)
{
	char *cluster[] = {"cluster", "--help", NULL};
	char *tput[] = {"throughput", "--help", NULL};
	char *ycsb[] = {"ycsb", "--help", NULL};
	char *all[] = {"--help", NULL};
	static char out[16384], err[16384];

	(void)state;
	assert_int_equal(run_capture(cluster, out, err, sizeof(out)), 0);
	assert_non_null(strstr(out, "usage: weft-bench cluster"));
	assert_non_null(strstr(out, "--peers P[,P..]"));
	assert_non_null(strstr(out, "--warmup SEC"));
	assert_non_null(strstr(out, "--repeat R"));
	assert_null(strstr(out, "--batch"));
	assert_null(strstr(out, "--warmup-count"));
	assert_int_equal(run_capture(tput, out, err, sizeof(out)), 0);
	assert_non_null(strstr(out, "--warmup-count N"));
	assert_non_null(strstr(out, "--repeat R"));
	assert_null(strstr(out, "--peers"));
	assert_int_equal(run_capture(ycsb, out, err, sizeof(out)), 0);
	assert_non_null(strstr(out, "--workload W[,W..]"));
	assert_non_null(strstr(out, "--records N"));
	assert_null(strstr(out, "--mixes"));
	/* The list of workloads names every one. */
	assert_int_equal(run_capture(all, out, err, sizeof(out)), 0);
	assert_non_null(strstr(out, "  smoke "));
	assert_non_null(strstr(out, "  ycsb "));
}

/* An option the workload does not take is an error, not ignored. */
static void
test_options_that_do_not_apply_exit_2(void **state)
{
	char *batch[] = {"cluster", "--batch", "3", NULL};
	char *peers[] = {"throughput", "--peers", "3", NULL};
	char *verify[] = {"cluster", "--verify", NULL};
	char *slow[] = {"mix", "--slow-ms", "1", NULL};
	char *pool[] = {"rpc", "--handlers", "pool", NULL};
	char *both[] = {"latency",        "--warmup", "1",
	                "--warmup-count", "9",        NULL};
	char *clients[] = {"cluster", "--clients", "2", NULL};
	char *internal[] = {"cluster", "--node", "1", NULL};
	char *tiny[] = {"ycsb", "--size", "8", NULL};
	char *letter[] = {"ycsb", "--workload", "a,g", NULL};
	static char out[8192], err[8192];

	(void)state;
	assert_int_equal(run_capture(batch, out, err, sizeof(out)), 2);
	assert_non_null(strstr(err, "--batch does not apply to cluster "
	                            "(only to throughput, latency)"));
	assert_int_equal(run_capture(peers, out, err, sizeof(out)), 2);
	assert_non_null(strstr(err, "--peers does not apply to throughput"));
	assert_int_equal(run_bench(verify), 2);
	assert_int_equal(run_bench(slow), 2);
	assert_int_equal(run_capture(pool, out, err, sizeof(out)), 2);
	assert_non_null(strstr(err, "--io loop"));
	assert_int_equal(run_bench(both), 2);
	assert_int_equal(run_bench(clients), 2);
	assert_int_equal(run_bench(internal), 2);
	assert_int_equal(run_bench(tiny), 2);
	assert_int_equal(run_bench(letter), 2);
}

/* --warmup is seconds for the pipeline runs too; --warmup-count counts. */
static void
test_warmup_is_seconds_everywhere(void **state)
{
	char path[] = "/tmp/wbench-cli-XXXXXX", text[8192];
	char *args[] = {"latency", "--count", "100", "--warmup", "0.05",
	                "--quiet", "--json",  path,  NULL};

	(void)state;
	close(mkstemp(path));
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	assert_non_null(strstr(text, "\"warmup_s\": 0.05,"));
	assert_non_null(strstr(text, "\"warmup_count\": null,"));
	/* The run's own count of warm-up round trips. */
	assert_int_equal(each_at_least(text, "\"warmup\": ", 1), 2);
	assert_non_null(strstr(text, "\"measured\": 100,"));
}

/* The JSON names weft's version and commit, the date, the machine and
 * the command line; what was not measured is null. */
static void
test_json_names_build_machine_and_command(void **state)
{
	char path[] = "/tmp/wbench-cli-XXXXXX", text[8192];
	char *args[] = {"throughput", "--size", "64", "--count", "20000",
	                "--quiet",    "--json", path, NULL};

	(void)state;
	close(mkstemp(path));
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	assert_non_null(strstr(text, "\"weft_version\": \"0."));
	assert_non_null(strstr(text, "\"commit\": \""));
	assert_null(strstr(text, "\"commit\": \"unknown\""));
	assert_non_null(strstr(text, "\"date\": \"20"));
	assert_non_null(strstr(text, "\"host\": \""));
	assert_non_null(strstr(text, "\"cpu\": \""));
	assert_non_null(strstr(text, "\"cpus\": "));
	assert_non_null(strstr(text, "\"kernel\": \"Linux "));
	assert_non_null(strstr(text, "weft-bench throughput --size 64 "
	                             "--count 20000 --quiet --json /tmp/"));
	/* A throughput run times no round trip. */
	assert_non_null(strstr(text, "\"p99_ns\": null"));
	assert_null(strstr(text, ": -1"));
}

/* A run whose window holds nothing exits non-zero. */
static void
test_measuring_nothing_fails(void **state)
{
	/* One message: it opens and closes the raw receiver's window in
	 * the same read. */
	char *one[] = {"throughput", "--impl",  "raw", "--count",
	               "1",          "--quiet", NULL};

	(void)state;
	assert_int_equal(run_bench(one), 1);
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
	    cmocka_unit_test(test_each_workload_has_its_help),
	    cmocka_unit_test(test_options_that_do_not_apply_exit_2),
	    cmocka_unit_test(test_warmup_is_seconds_everywhere),
	    cmocka_unit_test(test_json_names_build_machine_and_command),
	    cmocka_unit_test(test_measuring_nothing_fails),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
