/* SPDX-License-Identifier: MIT */
/*
 * Runs weft-bench's rpc modes (synchronous and asynchronous clients,
 * handlers inline and on the worker pool), mix's gets and puts apart, the
 * progress lines and the plots as a user would, and checks that every
 * request was answered exactly once and that the figures agree. No speed
 * is asserted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bench_exec.h"

/* The three figures of Kudu's experiment and the fourth corner, in one
 * command: every call answered once, the server's own figures there. */
static void
test_rpc_sync_and_async_clients_inline_and_pool(void **state)
{
	char path[] = "/tmp/wbench-modes-XXXXXX";
	static char text[32768];
	char *args[] = {
	    "rpc",     "--client", "sync,async", "--handlers", "both",
	    "--io",    "loop",     "--clients",  "2",          "--outstanding",
	    "3",       "--warmup", "0.1",        "--duration", "0.3",
	    "--quiet", "--json",   path,         NULL};
	const char *p;

	(void)state;
	close(mkstemp(path));
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	assert_int_equal(bench_count_of(text, "\"io\": \"loop\""), 4);
	assert_int_equal(bench_count_of(text, "\"client\": \"sync\""), 2);
	assert_int_equal(bench_count_of(text, "\"client\": \"async\""), 2);
	assert_int_equal(bench_count_of(text, "\"handlers\": \"pool\""), 2);
	assert_int_equal(bench_count_of(text, "\"handlers\": \"inline\""), 2);
	assert_int_equal(bench_count_of(text, "\"srv_cpu_us_per_op\": null"),
	                 0);
	for (p = strstr(text, "{\"peers\""); p != NULL;
	     p = strstr(p + 1, "{\"peers\"")) {
		check_cluster_run(p);
		assert_true(bench_json_value(p, "\"errors\": ") == 0);
		assert_true(bench_json_value(p, "\"srv_msgs_per_wakeup\": ") >
		            0);
	}
}

/* The baseline runs no pool: rows say its handlers are its readers'. */
static void
test_rpc_sync_clients_of_the_baseline(void **state)
{
	char path[] = "/tmp/wbench-modes-XXXXXX", text[8192];
	char *args[] = {"rpc",     "--client",  "sync",   "--io",
	                "threads", "--clients", "2",      "--outstanding",
	                "2",       "--warmup",  "0.1",    "--duration",
	                "0.3",     "--quiet",   "--json", path,
	                NULL};

	(void)state;
	close(mkstemp(path));
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	assert_non_null(strstr(text, "\"handlers\": \"reader threads\""));
	check_cluster_run(strstr(text, "\"io\": \"threads\""));
}

/* mix reports gets and puts apart, beside the merged figures. */
static void
test_mix_reports_gets_and_puts_apart(void **state)
{
	char path[] = "/tmp/wbench-modes-XXXXXX", text[8192];
	char md[] = "/tmp/wbench-md-XXXXXX";
	char *args[] = {
	    "mix",        "--peers", "3",         "--mixes",  "70,100",
	    "--io",       "loop",    "--clients", "2",        "--outstanding",
	    "4",          "--keys",  "100",       "--warmup", "0.1",
	    "--duration", "0.3",     "--quiet",   "--json",   path,
	    "--md",       md,        NULL};
	const char *mixed, *reads;

	(void)state;
	close(mkstemp(path));
	close(mkstemp(md));
	assert_int_equal(run_bench(args), 0);
	read_json(path, text, sizeof(text));
	mixed = strstr(text, "\"read_pct\": 70");
	reads = strstr(text, "\"read_pct\": 100");
	assert_non_null(mixed);
	assert_non_null(reads);
	check_cluster_run(mixed);
	assert_true(bench_json_value(mixed, "\"gets\": ") > 0);
	assert_true(bench_json_value(mixed, "\"puts\": ") > 0);
	assert_true(bench_json_value(mixed, "\"gets\": ") +
	                bench_json_value(mixed, "\"puts\": ") ==
	            bench_json_value(mixed, "\"ops\": "));
	assert_true(bench_json_value(mixed, "\"put_p99_us\": ") > 0);
	/* All reads: no put, so no put latency. */
	assert_true(bench_json_value(reads, "\"puts\": ") == 0);
	assert_non_null(strstr(reads, "\"put_p99_us\": null"));
	read_json(md, text, sizeof(text));
	assert_non_null(strstr(text, "| gets/s | get p99 ms | puts/s |"));
}

/* Progress lines name the workload and the point, and stop with the
 * window. */
static void
test_progress_names_the_workload(void **state)
{
	char err[] = "/tmp/wbench-err-XXXXXX";
	static char text[16384];
	char *args[] = {"rpc", "--io",          "loop", "--clients",
	                "2",   "--outstanding", "2",    "--warmup",
	                "0.2", "--duration",    "1.5",  NULL};

	(void)state;
	close(mkstemp(err));
	assert_int_equal(run_bench_to(args, "/dev/null", err), 0);
	read_json(err, text, sizeof(text));
	assert_non_null(strstr(text, "rpc loop 2x2: "));
	assert_null(strstr(text, "cluster loop"));
	assert_null(strstr(text, " 0 ops/s"));
}

/* rpc --probe: the probe and the members alone, then beside the flood;
 * both rows and the ratios are printed, every request answered once
 * (the exit status), and the flood measured. No speed is asserted. */
static void
test_rpc_probe_measures_the_probe_alone_and_flooded(void **state)
{
	char out[] = "/tmp/wbench-out-XXXXXX";
	static char text[16384];
	char row[256];
	char *args[] = {"rpc",           "--probe", "--clients", "2",
	                "--outstanding", "8",       "--warmup",  "0.1",
	                "--duration",    "0.3",     "--quiet",   NULL};
	char *args_json[] = {"rpc",    "--probe", "--json",
	                     "/tmp/x", "--quiet", NULL};
	const char *p;

	(void)state;
	close(mkstemp(out));
	assert_int_equal(run_bench_to(args, out, NULL), 0);
	read_json(out, text, sizeof(text));
	assert_non_null(strstr(text, "2 clients x 8 flooding n0"));
	assert_non_null(p = strstr(text, "\nalone "));
	assert_non_null(strstr(p, "\nflooded "));
	assert_non_null(strstr(text, "probe p99 flooded/alone: "));
	/* The flood's rate: the last figure of its row. */
	p = strstr(text, "\nflooded ") + 1;
	snprintf(row, sizeof(row), "%.*s", (int)strcspn(p, "\n"), p);
	assert_true(strtod(strrchr(row, ' '), NULL) > 0);
	/* Its table only. */
	assert_int_equal(run_bench_to(args_json, "/dev/null", "/dev/null"), 2);
}

/* rpc --probe --flood-cap: the flood calls a verb of its own, capped on
 * the server, whose handlers take a millisecond on the pool: past the cap
 * its requests are refused, and the line says how many. */
static void
test_rpc_probe_flood_cap_refuses_past_the_cap(void **state)
{
	char out[] = "/tmp/wbench-out-XXXXXX";
	static char text[16384];
	char *args[] = {"rpc",
	                "--probe",
	                "--io",
	                "loop",
	                "--handlers",
	                "pool",
	                "--clients",
	                "2",
	                "--outstanding",
	                "8",
	                "--slow-fraction",
	                "1",
	                "--slow-ms",
	                "1",
	                "--flood-cap",
	                "1",
	                "--warmup",
	                "0.1",
	                "--duration",
	                "0.5",
	                "--quiet",
	                NULL};
	char *alone[] = {"rpc", "--flood-cap", "1", "--quiet", NULL};
	const char *p;

	(void)state;
	close(mkstemp(out));
	assert_int_equal(run_bench_to(args, out, NULL), 0);
	read_json(out, text, sizeof(text));
	assert_non_null(p = strstr(text, "flood verb capped at 1 in progress"));
	assert_non_null(p = strstr(p, " answered/s, "));
	assert_true(strtod(p + strlen(" answered/s, "), NULL) > 0);
	assert_non_null(strstr(p, " refused/s\n"));
	/* The cap is the probe's. */
	assert_int_equal(run_bench_to(alone, "/dev/null", "/dev/null"), 2);
}

/* An open loop so slow that no request falls in the window: the run
 * measured nothing and says so with its exit status. */
static void
test_an_empty_window_fails(void **state)
{
	char *args[] = {"cluster", "--peers", "2",        "--io", "loop",
	                "--rate",  "0.1",     "--warmup", "0.2",  "--duration",
	                "0.2",     "--quiet", NULL};

	(void)state;
	assert_int_equal(run_bench(args), 1);
}

static bool
have_gnuplot(void)
{
	return system("gnuplot --version >/dev/null 2>&1") == 0;
}

/* plot_runs checks a plot: drawn, and gnuplot said nothing. */
static void
plot_runs(char **args, const char *png)
{
	char err[] = "/tmp/wbench-err-XXXXXX";
	static char text[16384];
	struct stat st;

	close(mkstemp(err));
	assert_int_equal(run_bench_to(args, "/dev/null", err), 0);
	read_json(err, text, sizeof(text));
	assert_null(strstr(text, "arning")); /* gnuplot's warnings */
	assert_int_equal(stat(png, &st), 0);
	assert_true(st.st_size > 1000);
	unlink(png);
}

/* One P, one I/O model: a plot without gnuplot warnings. */
static void
test_plots_of_one_point_draw_cleanly(void **state)
{
	char png[] = "/tmp/wbench-plot-XXXXXX.png";
	char png2[] = "/tmp/wbench-plot-XXXXXX.png";
	char *cluster[] = {
	    "cluster",       "--peers", "3",        "--io", "loop",
	    "--outstanding", "4",       "--warmup", "0.1",  "--duration",
	    "0.2",           "--quiet", "--plot",   png,    NULL};
	char *mix[] = {
	    "mix",    "--peers",   "3",   "--mixes",       "50",  "--io",
	    "loop",   "--clients", "1",   "--outstanding", "2",   "--keys",
	    "50",     "--warmup",  "0.1", "--duration",    "0.2", "--quiet",
	    "--plot", png2,        NULL};

	(void)state;
	if (!have_gnuplot())
		skip();
	close(mkstemps(png, 4));
	plot_runs(cluster, png);
	close(mkstemps(png2, 4));
	plot_runs(mix, png2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rpc_sync_and_async_clients_inline_and_pool),
	    cmocka_unit_test(test_rpc_sync_clients_of_the_baseline),
	    cmocka_unit_test(test_mix_reports_gets_and_puts_apart),
	    cmocka_unit_test(test_progress_names_the_workload),
	    cmocka_unit_test(
	        test_rpc_probe_measures_the_probe_alone_and_flooded),
	    cmocka_unit_test(test_rpc_probe_flood_cap_refuses_past_the_cap),
	    cmocka_unit_test(test_an_empty_window_fails),
	    cmocka_unit_test(test_plots_of_one_point_draw_cleanly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
