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
	    cmocka_unit_test(test_process_metrics),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
