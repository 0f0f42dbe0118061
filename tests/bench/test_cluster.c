/* SPDX-License-Identifier: MIT */
/*
 * Runs weft-bench's cluster and rpc workloads as a user would (node
 * processes on loopback) and checks that every request was answered exactly
 * once and that the figures agree. No speed is asserted.
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

static int
lines_of(const char *text)
{
	int n = 0;

	for (; *text; text++)
		n += *text == '\n';
	return n;
}

/* Three node processes per I/O model: every request answered once. */
static void
test_cluster_both_io_models(void **state)
{
	char path[] = "/tmp/wbench-cli-XXXXXX", text[8192];
	char csv[] = "/tmp/wbench-csv-XXXXXX";
	char *args[] = {"cluster", "--peers",  "3",      "--outstanding",
	                "8",       "--warmup", "0.1",    "--duration",
	                "0.3",     "--quiet",  "--json", path,
	                "--csv",   csv,        NULL};
	int fd = mkstemp(path);
	char *loop, *threads;

	(void)state;
	close(fd);
	close(mkstemp(csv));
	assert_int_equal(run_bench(args), 0);
	/* --csv: the header and one row per I/O model. */
	read_json(csv, text, sizeof(text));
	assert_int_equal(strncmp(text, "workload,impl,", 14), 0);
	assert_non_null(strstr(text, "\ncluster,loop,0,64,3,0,8,,"));
	assert_non_null(strstr(text, "\ncluster,threads,0,64,3,0,8,,"));
	assert_int_equal(lines_of(text), 3);
	read_json(path, text, sizeof(text));
	loop = strstr(text, "\"io\": \"loop\"");
	threads = strstr(text, "\"io\": \"threads\"");
	assert_non_null(loop);
	assert_non_null(threads);
	check_cluster_run(loop);
	check_cluster_run(threads);
}

/* Two clients with four requests in flight each, against each server. */
static void
test_rpc_both_servers(void **state)
{
	char path[] = "/tmp/wbench-cli-XXXXXX", text[8192];
	char *args[] = {"rpc", "--clients", "2",      "--outstanding",
	                "4",   "--warmup",  "0.1",    "--duration",
	                "0.3", "--quiet",   "--json", path,
	                NULL};
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	assert_non_null(strstr(text, "\"workload\": \"rpc\""));
	assert_non_null(strstr(text, "\"clients\": 2, \"depth\": 4"));
	check_cluster_run(strstr(text, "\"io\": \"loop\""));
	check_cluster_run(strstr(text, "\"io\": \"threads\""));
}

/* check_mix_runs checks both mix runs of a report, weft's key-value
 * service and the baseline's: every get and put answered exactly once,
 * and none failed (gets find the loaded keys). */
static void
check_mix_runs(const char *text)
{
	const char *loop = strstr(text, "\"io\": \"loop\"");
	const char *threads = strstr(text, "\"io\": \"threads\"");

	assert_non_null(loop);
	assert_non_null(threads);
	check_cluster_run(loop);
	check_cluster_run(threads);
	assert_true(bench_json_value(loop, "\"errors\": ") == 0);
	assert_true(bench_json_value(threads, "\"errors\": ") == 0);
	assert_true(bench_json_value(threads, "\"ops\": ") > 0);
}

/* The key-value service under a 50/50 mix, on both I/O models: keys
 * loaded first, then every get and put answered exactly once. */
static void
test_mix_half_reads(void **state)
{
	char path[] = "/tmp/wbench-cli-XXXXXX", text[8192];
	char *args[] = {"mix",    "--peers",    "3",   "--mixes",
	                "50",     "--clients",  "2",   "--outstanding",
	                "4",      "--keys",     "200", "--warmup",
	                "0.1",    "--duration", "0.3", "--quiet",
	                "--json", path,         NULL};
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	assert_non_null(strstr(text, "\"workload\": \"mix\""));
	assert_non_null(strstr(text, "\"read_pct\": 50"));
	check_mix_runs(text);
}

/* An open loop at a fixed rate, with some slow requests. */
static void
test_cluster_open_loop_with_slow_requests(void **state)
{
	char path[] = "/tmp/wbench-cli-XXXXXX", text[8192];
	char *args[] = {"cluster", "--peers",
	                "3",       "--rate",
	                "2000",    "--outstanding",
	                "64",      "--slow-fraction",
	                "0.01",    "--slow-ms",
	                "1",       "--warmup",
	                "0.1",     "--duration",
	                "0.3",     "--quiet",
	                "--json",  path,
	                NULL};
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	assert_non_null(strstr(text, "\"rate\": 2000"));
	check_cluster_run(strstr(text, "\"io\": \"loop\""));
	check_cluster_run(strstr(text, "\"io\": \"threads\""));
}

/* The same over mutual TLS, with certificates made by gen-certs.sh. */
static void
test_cluster_over_tls(void **state)
{
	char dir[] = "/tmp/wbench-tls-XXXXXX";
	char path[] = "/tmp/wbench-cli-XXXXXX", text[8192];
	char *args[] = {"cluster", "--peers",  "3",     "--outstanding",
	                "8",       "--warmup", "0.1",   "--duration",
	                "0.3",     "--quiet",  "--tls", dir,
	                "--json",  path,       NULL};
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	if (!weft_test_gen_certs(dir, "n0 n1 n2"))
		skip();
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	weft_test_remove_dir(dir);
	assert_non_null(strstr(text, "\"tls\": true"));
	check_cluster_run(strstr(text, "\"io\": \"loop\""));
	check_cluster_run(strstr(text, "\"io\": \"threads\""));
}

/* rpc and mix over mutual TLS: clients carry certificates cI; both run
 * both servers, weft's and the baseline's. */
static void
test_rpc_and_mix_over_tls(void **state)
{
	char dir[] = "/tmp/wbench-tls-XXXXXX";
	char path[] = "/tmp/wbench-cli-XXXXXX", text[8192];
	char *rpc[] = {"rpc",    "--clients", "2",     "--outstanding",
	               "4",      "--warmup",  "0.1",   "--duration",
	               "0.3",    "--quiet",   "--tls", dir,
	               "--json", path,        NULL};
	char *mix[] = {"mix",   "--peers",    "3",      "--mixes",
	               "50",    "--clients",  "2",      "--outstanding",
	               "4",     "--keys",     "200",    "--warmup",
	               "0.1",   "--duration", "0.3",    "--quiet",
	               "--tls", dir,          "--json", path,
	               NULL};
	int fd = mkstemp(path);

	(void)state;
	close(fd);
	if (!weft_test_gen_certs(dir, "n0 n1 n2 --client c0 --client c1")) {
		unlink(path);
		skip();
	}
	assert_int_equal(run_bench(rpc), 0);
	read_json(path, text, sizeof(text));
	assert_non_null(strstr(text, "\"tls\": true"));
	check_cluster_run(strstr(text, "\"io\": \"loop\""));
	check_cluster_run(strstr(text, "\"io\": \"threads\""));
	assert_int_equal(run_bench(mix), 0);
	read_json(path, text, sizeof(text));
	weft_test_remove_dir(dir);
	assert_non_null(strstr(text, "\"tls\": true"));
	check_mix_runs(text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cluster_both_io_models),
	    cmocka_unit_test(test_cluster_open_loop_with_slow_requests),
	    cmocka_unit_test(test_rpc_both_servers),
	    cmocka_unit_test(test_mix_half_reads),
	    cmocka_unit_test(test_cluster_over_tls),
	    cmocka_unit_test(test_rpc_and_mix_over_tls),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
