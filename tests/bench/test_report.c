/* SPDX-License-Identifier: MIT */
/* Tests of bench/weft-bench/report.c: figures, medians and the JSON; and
 * of reading weftd's load answers (mesh.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <msgpack.h>
#include <weft/histogram.h>

#include "wbench.h"

static void
test_rates_follow_measured_and_seconds(void **state)
{
	wbench_result r = {.measured = 1000, .seconds = 0.5};

	(void)state;
	wbench_result_rates(&r, 1024);
	assert_true(r.msgs_per_s == 2000);
	assert_true(r.mb_per_s == 2000 * 1024 / 1e6);
	r.seconds = 0;
	wbench_result_rates(&r, 1024);
	assert_true(r.msgs_per_s == 0 && r.mb_per_s == 0);
}

static void
test_median_of_odd_and_even_runs(void **state)
{
	wbench_result runs[4] = {
	    {.msgs_per_s = 3, .p50_ns = 30, .errors = 1},
	    {.msgs_per_s = 1, .p50_ns = 10},
	    {.msgs_per_s = 2, .p50_ns = 20},
	    {.msgs_per_s = 10, .p50_ns = 100, .errors = 2},
	};
	wbench_result m;

	(void)state;
	wbench_result_median(runs, 3, &m);
	assert_true(m.msgs_per_s == 2);
	assert_int_equal(m.p50_ns, 20);
	assert_int_equal(m.errors, 1); /* errors add up, never hide */
	wbench_result_median(runs, 4, &m);
	assert_true(m.msgs_per_s == 2.5);
	assert_int_equal(m.p50_ns, 25);
	assert_int_equal(m.errors, 3);
}

/* Medians of ordered percentiles stay ordered. */
static void
test_median_keeps_percentiles_ordered(void **state)
{
	wbench_result runs[5], m;
	weft_histogram *h;

	(void)state;
	assert_int_equal(weft_histogram_new(&h), 0);
	srand(42);
	for (int i = 0; i < 5; i++) {
		weft_histogram_reset(h);
		for (int k = 0; k < 1000; k++)
			weft_histogram_record(
			    h, 1000 + (uint64_t)(rand() % 100000));
		memset(&runs[i], 0, sizeof(runs[i]));
		wbench_result_latency(&runs[i], h);
	}
	wbench_result_median(runs, 5, &m);
	assert_true(m.min_ns <= m.p50_ns);
	assert_true(m.p50_ns <= m.p90_ns);
	assert_true(m.p90_ns <= m.p99_ns);
	assert_true(m.p99_ns <= m.p999_ns);
	assert_true(m.p999_ns <= m.max_ns);
	weft_histogram_free(h);
}

static void
test_ok_needs_every_message_and_no_error(void **state)
{
	wbench_opts o;
	wbench_result r = {.received = 110, .warmup = 10, .measured = 99};

	(void)state;
	wbench_opts_default(&o);
	o.count = 100;
	assert_true(wbench_result_ok(&o, &r));
	r.received = 111; /* one more, checked, past the run */
	assert_true(wbench_result_ok(&o, &r));
	r.errors = 1;
	assert_false(wbench_result_ok(&o, &r));
	r.errors = 0;
	r.received = 109;
	assert_false(wbench_result_ok(&o, &r));
	/* A run that measured nothing is no result. */
	r.received = 110;
	r.measured = 0;
	assert_false(wbench_result_ok(&o, &r));
}

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 65536);

	assert_non_null(f);
	assert_non_null(buf);
	assert_true(fread(buf, 1, 65535, f) > 0);
	fclose(f);
	return buf;
}

static void
test_json_holds_every_figure(void **state)
{
	char path[] = "/tmp/wbench-json-XXXXXX";
	wbench_result weft[1] = {{.received = 5,
	                          .measured = 4,
	                          .seconds = 1,
	                          .msgs_per_s = 4,
	                          .p50_ns = 7,
	                          .max_ns = 9}};
	wbench_result raw[1] = {{.received = 5,
	                         .measured = 4,
	                         .seconds = 0.5,
	                         .msgs_per_s = 8,
	                         .p50_ns = 5,
	                         .max_ns = 6}};
	wbench_opts o;
	wbench_report rep = {.opts = &o, .nruns = {1, 1}, .runs = {weft, raw}};
	char *text;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	wbench_opts_default(&o);
	o.workload = WBENCH_LATENCY;
	wbench_result_median(weft, 1, &rep.median[0]);
	wbench_result_median(raw, 1, &rep.median[1]);
	assert_int_equal(wbench_report_json(&rep, path), 0);
	text = slurp(path);
	assert_non_null(strstr(text, "\"workload\": \"latency\""));
	assert_non_null(strstr(text, "\"weft\": {"));
	assert_non_null(strstr(text, "\"raw\": {"));
	assert_non_null(strstr(text, "\"p50_ns\": 7"));
	assert_non_null(strstr(text, "\"weft_over_raw\""));
	assert_non_null(strstr(text, "\"msgs_per_s\": 0.5000"));
	assert_non_null(strstr(text, "\"p50\": 1.4000"));
	free(text);
	unlink(path);
}

static void
test_options_parse_sizes_and_counts(void **state)
{
	char *argv[] = {"latency", "--size", "64K",      "--count", "2k",
	                "--impl",  "both",   "--repeat", "3",       NULL};
	char *bad[] = {"throughput", "--size", "17M", NULL};
	wbench_opts o;

	(void)state;
	wbench_opts_default(&o);
	assert_int_equal(wbench_opts_parse(&o, 9, argv), 0);
	assert_int_equal(o.workload, WBENCH_LATENCY);
	assert_int_equal(o.size, 65536);
	assert_int_equal(o.count, 2000);
	assert_int_equal(o.warmup_count, 200);
	assert_false(o.warmup_by_time);
	assert_int_equal(o.impl, WBENCH_IMPL_BOTH);
	assert_int_equal(o.repeat, 3);
	wbench_opts_default(&o);
	assert_int_equal(wbench_opts_parse(&o, 3, bad), -1);
}

/* pack_answer packs a load answer: ops 7, sent 9, first_error -8, an
 * unknown key, and (with hist) two buckets. */
static void
pack_answer(msgpack_sbuffer *sb, bool hist)
{
	msgpack_packer pk;

	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, hist ? 5 : 4);
	msgpack_pack_str_with_body(&pk, "ops", 3);
	msgpack_pack_uint64(&pk, 7);
	msgpack_pack_str_with_body(&pk, "sent", 4);
	msgpack_pack_uint64(&pk, 9);
	msgpack_pack_str_with_body(&pk, "first_error", 11);
	msgpack_pack_int(&pk, -8);
	msgpack_pack_str_with_body(&pk, "later", 5);
	msgpack_pack_str_with_body(&pk, "x", 1);
	if (hist) {
		msgpack_pack_str_with_body(&pk, "hist", 4);
		msgpack_pack_array(&pk, 4);
		msgpack_pack_uint64(&pk, 1000);
		msgpack_pack_uint64(&pk, 3);
		msgpack_pack_uint64(&pk, 50000);
		msgpack_pack_uint64(&pk, 1);
	}
}

/* A node's answer is read whole; every prefix of it, and answers of the
 * wrong shape, are refused without changing the figures or the
 * histogram. */
static void
test_load_answers_are_checked_before_use(void **state)
{
	static const uint8_t bad[][12] = {
	    {0x93, 0x01, 0x02, 0x03},                     /* not a map */
	    {0x81, 0x01, 0x02},                           /* key not a str */
	    {0xdf, 0xff, 0xff, 0xff, 0xff},               /* 2^32 pairs */
	    {0x81, 0xa4, 'h', 'i', 's', 't', 0x91, 0x05}, /* odd hist */
	    {0x81, 0xa4, 'h', 'i', 's', 't', 0x92, 0x05, 0xa1, 'x'},
	    {0x81, 0xa4, 'h', 'i', 's', 't', 0x07}, /* hist not an array */
	};
	static const size_t bad_len[] = {4, 3, 5, 8, 10, 7};
	wbench_load_answer a = {0};
	weft_histogram *h;
	msgpack_sbuffer sb;

	(void)state;
	assert_int_equal(weft_histogram_new(&h), 0);
	pack_answer(&sb, true);
	for (size_t n = 0; n < sb.size; n++)
		assert_int_equal(wbench_load_answer_read(sb.data, n, &a, h),
		                 -1);
	assert_int_equal(a.ops, 0);
	assert_int_equal(weft_histogram_count(h), 0);
	for (size_t i = 0; i < sizeof(bad_len) / sizeof(bad_len[0]); i++)
		assert_int_equal(
		    wbench_load_answer_read(bad[i], bad_len[i], &a, h), -1);
	assert_int_equal(weft_histogram_count(h), 0);
	/* Two histograms in one answer: refused too. */
	{
		msgpack_packer pk;
		msgpack_sbuffer two;

		msgpack_sbuffer_init(&two);
		msgpack_packer_init(&pk, &two, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 2);
		for (int i = 0; i < 2; i++) {
			msgpack_pack_str_with_body(&pk, "hist", 4);
			msgpack_pack_array(&pk, 2);
			msgpack_pack_uint64(&pk, 10);
			msgpack_pack_uint64(&pk, 1);
		}
		assert_int_equal(
		    wbench_load_answer_read(two.data, two.size, &a, h), -1);
		msgpack_sbuffer_destroy(&two);
	}
	assert_int_equal(weft_histogram_count(h), 0);
	/* The whole answer. */
	assert_int_equal(wbench_load_answer_read(sb.data, sb.size, &a, h), 0);
	assert_int_equal(a.ops, 7);
	assert_int_equal(a.sent, 9);
	assert_int_equal(a.first_error, -8);
	assert_int_equal(weft_histogram_count(h), 4);
	assert_int_equal(weft_histogram_max(h), 50000);
	msgpack_sbuffer_destroy(&sb);
	/* A status answer has no histogram. */
	pack_answer(&sb, false);
	assert_int_equal(wbench_load_answer_read(sb.data, sb.size, &a, h), 0);
	assert_int_equal(weft_histogram_count(h), 4);
	msgpack_sbuffer_destroy(&sb);
	weft_histogram_free(h);
}

/* An SVG plot draws every series, with named tics where the panel has
 * them (ycsb's workloads), escapes its text, and draws nothing without
 * points. */
static void
test_svg_plot_draws_series_and_named_tics(void **state)
{
	wbench_plot_panel p[2];
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	memset(p, 0, sizeof(p));
	p[0].xlabel = "workload";
	p[0].ylabel = "ops/s";
	p[0].xtics = "'A' 1, 'B' 2, 'F' 6";
	p[0].points = true;
	wbench_plot_add(&p[0], "weft <loop> & co", 1, 1000);
	wbench_plot_add(&p[0], "weft <loop> & co", 6, 3000);
	p[1].xlabel = "nodes (P)";
	p[1].ylabel = "p99 latency (ms)";
	p[1].logx = p[1].logy = true;
	wbench_plot_add(&p[1], "threads", 3, 1.5);
	wbench_plot_add(&p[1], "threads", 16, 12);
	assert_non_null(f = open_memstream(&text, &len));
	assert_int_equal(wbench_plot_svg(f, "a title", p, 2), 0);
	fclose(f);
	assert_non_null(strstr(text, "<svg "));
	assert_non_null(strstr(text, ">weft &lt;loop&gt; &amp; co</text>"));
	assert_null(strstr(text, "<loop>"));
	assert_non_null(strstr(text, ">F</text>"));
	assert_non_null(strstr(text, ">16</text>")); /* a node count tic */
	assert_non_null(strstr(text, "<polyline"));  /* threads: a line */
	assert_non_null(strstr(text, "</svg>\n"));
	free(text);
	memset(p, 0, sizeof(p));
	text = NULL;
	assert_non_null(f = open_memstream(&text, &len));
	assert_int_equal(wbench_plot_svg(f, "empty", p, 2), -1);
	fclose(f);
	free(text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rates_follow_measured_and_seconds),
	    cmocka_unit_test(test_median_of_odd_and_even_runs),
	    cmocka_unit_test(test_median_keeps_percentiles_ordered),
	    cmocka_unit_test(test_ok_needs_every_message_and_no_error),
	    cmocka_unit_test(test_json_holds_every_figure),
	    cmocka_unit_test(test_options_parse_sizes_and_counts),
	    cmocka_unit_test(test_load_answers_are_checked_before_use),
	    cmocka_unit_test(test_svg_plot_draws_series_and_named_tics),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
