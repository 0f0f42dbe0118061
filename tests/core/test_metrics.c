/* SPDX-License-Identifier: MIT */
/* test_metrics.c: the Prometheus text helpers of <weft/metrics.h>. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/metrics.h>

static void
test_escape_quotes_backslashes_and_newlines(void **state)
{
	char buf[64];

	(void)state;
	assert_int_equal(weft_metrics_escape(buf, sizeof(buf), "plain"), 5);
	assert_string_equal(buf, "plain");
	assert_int_equal(weft_metrics_escape(buf, sizeof(buf), "a\"b\\c\nd"),
	                 10);
	assert_string_equal(buf, "a\\\"b\\\\c\\nd");
	/* Too small: cut before an escape, never inside one. */
	assert_int_equal(weft_metrics_escape(buf, 3, "a\"b"), 4);
	assert_string_equal(buf, "a");
	assert_int_equal(weft_metrics_escape(buf, 4, "a\"b"), 4);
	assert_string_equal(buf, "a\\\"");
	assert_int_equal(weft_metrics_escape(buf, 1, "abc"), 3);
	assert_string_equal(buf, "");
	assert_int_equal(weft_metrics_escape(NULL, 0, "a\n"), 3);
}

static char *
text_of(struct evbuffer *b)
{
	size_t n = evbuffer_get_length(b);
	char *t = malloc(n + 1);

	evbuffer_remove(b, t, n);
	t[n] = '\0';
	return t;
}

static void
test_histogram_buckets_are_cumulative(void **state)
{
	uint64_t counts[WEFT_METRICS_LATENCY_BUCKETS + 1] = {0};
	struct evbuffer *b = evbuffer_new();
	weft_histogram *h;
	char *t;

	(void)state;
	counts[0] = 2;                            /* <= 100 us */
	counts[3] = 3;                            /* <= 1 ms */
	counts[WEFT_METRICS_LATENCY_BUCKETS] = 1; /* > 10 s */
	assert_int_equal(weft_metrics_histogram_counts(b, "x_seconds",
	                                               "a=\"1\"", counts, 12.5),
	                 0);
	t = text_of(b);
	assert_non_null(
	    strstr(t, "x_seconds_bucket{a=\"1\",le=\"0.0001\"} 2\n"));
	assert_non_null(
	    strstr(t, "x_seconds_bucket{a=\"1\",le=\"0.0005\"} 2\n"));
	assert_non_null(
	    strstr(t, "x_seconds_bucket{a=\"1\",le=\"0.001\"} 5\n"));
	assert_non_null(strstr(t, "x_seconds_bucket{a=\"1\",le=\"10\"} 5\n"));
	assert_non_null(strstr(t, "x_seconds_bucket{a=\"1\",le=\"+Inf\"} 6\n"));
	assert_non_null(strstr(t, "x_seconds_sum{a=\"1\"} 12.5"));
	assert_non_null(strstr(t, "x_seconds_count{a=\"1\"} 6\n"));
	free(t);
	/* From a weft_histogram of nanoseconds, and without labels. */
	assert_int_equal(weft_histogram_new(&h), 0);
	weft_histogram_record(h, 50000);    /* 50 us */
	weft_histogram_record(h, 2000000);  /* 2 ms */
	weft_histogram_record(h, 20000000); /* 20 ms */
	assert_int_equal(weft_metrics_histogram(b, "y_seconds", "", h), 0);
	t = text_of(b);
	assert_non_null(strstr(t, "y_seconds_bucket{le=\"0.0001\"} 1\n"));
	assert_non_null(strstr(t, "y_seconds_bucket{le=\"0.0025\"} 2\n"));
	assert_non_null(strstr(t, "y_seconds_bucket{le=\"0.025\"} 3\n"));
	assert_non_null(strstr(t, "\ny_seconds_count 3\n"));
	free(t);
	weft_histogram_free(h);
	evbuffer_free(b);
}

/* Values about each bound, in histograms of two precisions: no value is
 * counted at or below a bound it exceeds, and only those within the
 * precision below a bound are counted above it. */
static void
test_latency_counts_from_histograms(void **state)
{
	static const unsigned precisions[] = {4, 7};
	uint64_t counts[WEFT_METRICS_LATENCY_BUCKETS + 1];
	uint64_t vals[WEFT_METRICS_LATENCY_BUCKETS * 4 + 1];
	size_t n = 0, i, j, k;

	(void)state;
	for (i = 0; i < WEFT_METRICS_LATENCY_BUCKETS; i++) {
		uint64_t b = weft_metrics_latency_bound(i);

		vals[n++] = b - b / 8; /* well below: counted at or below */
		vals[n++] = b - 1;
		vals[n++] = b;
		vals[n++] = b + 1;
	}
	vals[n++] = UINT64_C(30000000000); /* 30 s: above every bound */
	for (k = 0; k < 2; k++) {
		weft_histogram_opts o = {.sub_bits = precisions[k]};
		uint64_t cum = 0, want, near;
		weft_histogram *h;

		assert_int_equal(weft_histogram_new_opts(&o, &h), 0);
		for (j = 0; j < n; j++)
			weft_histogram_record(h, vals[j]);
		weft_metrics_latency_counts(h, counts);
		for (i = 0; i < WEFT_METRICS_LATENCY_BUCKETS; i++) {
			uint64_t b = weft_metrics_latency_bound(i);

			cum += counts[i];
			want = near = 0;
			for (j = 0; j < n; j++) {
				want += vals[j] <= b;
				near += vals[j] <= b &&
				        vals[j] >= b - (b >> o.sub_bits);
			}
			assert_true(cum <= want);
			assert_true(want - cum <= near);
			/* b - b/8 is outside every bound's precision. */
			assert_true(cum >= 4 * i + 1);
		}
		assert_int_equal(counts[WEFT_METRICS_LATENCY_BUCKETS] + cum, n);
		assert_true(counts[WEFT_METRICS_LATENCY_BUCKETS] >= 2);
		weft_histogram_free(h);
	}
}

static void
test_process_metrics(void **state)
{
	struct evbuffer *b = evbuffer_new();
	char want[64], *t, *p;

	(void)state;
	assert_int_equal(weft_metrics_dump_process(b), 0);
	t = text_of(b);
	snprintf(want, sizeof(want), "weft_build_info{version=\"%s\"} 1\n",
	         WEFT_VERSION_STRING);
	assert_non_null(strstr(t, want));
	assert_non_null(p = strstr(t, "\nprocess_open_fds "));
	assert_true(strtol(p + 18, NULL, 10) >= 3); /* stdin, out, err */
	assert_non_null(p = strstr(t, "\nprocess_resident_memory_bytes "));
	assert_true(strtoll(p + 31, NULL, 10) > 0);
	assert_non_null(strstr(t, "# TYPE process_cpu_seconds_total counter"));
	assert_non_null(strstr(t, "\nprocess_max_fds "));
	assert_non_null(strstr(t, "\nprocess_start_time_seconds "));
	assert_non_null(strstr(t, "\nprocess_virtual_memory_bytes "));
	free(t);
	evbuffer_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_escape_quotes_backslashes_and_newlines),
	    cmocka_unit_test(test_histogram_buckets_are_cumulative),
	    cmocka_unit_test(test_latency_counts_from_histograms),
	    cmocka_unit_test(test_process_metrics),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
