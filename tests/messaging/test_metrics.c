/* SPDX-License-Identifier: MIT */
/*
 * test_metrics.c: the messaging service's Prometheus text: label values
 * escaped (a verb's name is anything), latencies as histograms with
 * cumulative buckets, a per-peer up gauge, and no series for the node as
 * its own peer. With WEFT_METRICS_DUMP set, the text is also written to
 * that file, for `promtool check metrics` (tests/messaging/
 * check-metrics.sh).
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/messaging.h>

#include "support/echo_verb.h"

#define VERB_ECHO 16
#define VERB_EVIL 17
#define EVIL_NAME "evil\"verb\\name\nX"
#define EVIL_LABEL "verb=\"evil\\\"verb\\\\name\\nX\""
#define CALLS 20

struct pair {
	weft_loop_group *groups[2];
	weft_msvc *svc[2];
};

static void
pair_start(struct pair *p)
{
	static const char *const ids[2] = {"n1", "n2"};
	weft_msvc_config *cfg;
	int i;

	assert_int_equal(weft_msvc_config_new("metrics", &cfg), 0);
	assert_int_equal(weft_msvc_config_add_node(cfg, "n1", "127.0.0.1", 0),
	                 0);
	assert_int_equal(weft_msvc_config_add_node(cfg, "n2", "127.0.0.1", 0),
	                 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(weft_loop_group_new(1, &p->groups[i]), 0);
		assert_int_equal(
		    weft_msvc_new(p->groups[i], cfg, ids[i], NULL, &p->svc[i]),
		    0);
		assert_int_equal(weft_msvc_register(p->svc[i], VERB_ECHO,
		                                    "echo", weft_test_on_echo,
		                                    NULL, 0),
		                 0);
		assert_int_equal(weft_msvc_register(p->svc[i], VERB_EVIL,
		                                    EVIL_NAME,
		                                    weft_test_on_echo, NULL, 0),
		                 0);
		assert_int_equal(weft_msvc_start(p->svc[i]), 0);
	}
	weft_msvc_config_free(cfg);
	assert_int_equal(weft_msvc_set_peer_addr(p->svc[0], "n2", "127.0.0.1",
	                                         weft_msvc_port(p->svc[1])),
	                 0);
	assert_int_equal(weft_msvc_set_peer_addr(p->svc[1], "n1", "127.0.0.1",
	                                         weft_msvc_port(p->svc[0])),
	                 0);
}

static void
pair_stop(struct pair *p)
{
	int i;

	for (i = 0; i < 2; i++)
		weft_msvc_stop(p->svc[i], 0);
	for (i = 0; i < 2; i++) {
		weft_msvc_free(p->svc[i]);
		weft_loop_group_free(p->groups[i]);
	}
}

/* n1's whole dump as a string, the caller's to free. */
static char *
dump(weft_msvc *svc)
{
	struct evbuffer *buf = evbuffer_new();
	size_t n;
	char *text;

	assert_int_equal(weft_msvc_metrics_dump(svc, buf), 0);
	n = evbuffer_get_length(buf);
	text = malloc(n + 1);
	evbuffer_remove(buf, text, n);
	text[n] = '\0';
	evbuffer_free(buf);
	return text;
}

/* The value of the sample that starts with prefix, or -1. */
static long long
sample(const char *text, const char *prefix)
{
	const char *p = strstr(text, prefix);

	if (p == NULL || (p != text && p[-1] != '\n'))
		return -1;
	return strtoll(p + strlen(prefix), NULL, 10);
}

/* The peer histogram is published once a second: dump until it shows
 * the calls (or 5 s pass). */
static char *
dump_with_latency(weft_msvc *svc)
{
	const char *count = "weft_msvc_peer_latency_seconds_count"
	                    "{node=\"n1\",peer=\"n2\"} ";
	uint64_t start = weft_now_ns();
	char *text = dump(svc);

	while (sample(text, count) < CALLS &&
	       weft_now_ns() - start < 5000000000ull) {
		free(text);
		/* A round trip keeps the loops busy while the snapshot is
		 * taken; it is not counted by the check above. */
		weft_msvc_call(svc, weft_msvc_peer_find(svc, "n2"), VERB_ECHO,
		               "", 0, NULL, NULL);
		text = dump(svc);
	}
	return text;
}

static void
check_histogram(const char *text, const char *name, const char *labels)
{
	char prefix[512];
	const char *les[] = {"0.0001", "0.001", "0.01", "0.1",
	                     "1",      "10",    "+Inf"};
	long long last = 0, v, count;
	size_t i;

	for (i = 0; i < sizeof(les) / sizeof(les[0]); i++) {
		snprintf(prefix, sizeof(prefix), "%s_bucket{%s,le=\"%s\"} ",
		         name, labels, les[i]);
		v = sample(text, prefix);
		if (v < last)
			fail_msg("%s: bucket le=%s is %lld, below %lld", name,
			         les[i], v, last);
		last = v;
	}
	snprintf(prefix, sizeof(prefix), "%s_count{%s} ", name, labels);
	count = sample(text, prefix);
	assert_int_equal(count, last); /* +Inf holds every value */
	assert_true(count >= CALLS);
	snprintf(prefix, sizeof(prefix), "%s_sum{%s} ", name, labels);
	assert_non_null(strstr(text, prefix));
}

static void
test_metrics_text(void **state)
{
	struct pair p;
	weft_msvc_peer *n2;
	const char *path = getenv("WEFT_METRICS_DUMP");
	char *text;
	int i;

	(void)state;
	pair_start(&p);
	n2 = weft_msvc_peer_find(p.svc[0], "n2");
	for (i = 0; i < CALLS; i++) {
		assert_int_equal(
		    weft_msvc_call(p.svc[0], n2, VERB_ECHO, "a", 1, NULL, NULL),
		    0);
		assert_int_equal(
		    weft_msvc_call(p.svc[0], n2, VERB_EVIL, "b", 1, NULL, NULL),
		    0);
	}
	text = dump_with_latency(p.svc[0]);
	if (path != NULL) {
		FILE *f = fopen(path, "w");

		assert_non_null(f);
		fputs(text, f);
		fclose(f);
	}
	/* The hostile name, escaped: one sample per line. */
	assert_non_null(
	    strstr(text, "weft_msvc_verb_handled_total{node=\"n1\"," EVIL_LABEL
	                 ",number=\"17\"} "));
	assert_null(strstr(text, "evil\"verb"));
	/* Up, and no series for n1 as its own peer. */
	assert_int_equal(
	    sample(text, "weft_msvc_peer_up{node=\"n1\",peer=\"n2\"} "), 1);
	assert_null(strstr(text, "peer=\"n1\""));
	/* Histograms, not summaries. */
	assert_null(strstr(text, "quantile="));
	assert_non_null(strstr(text, "# TYPE weft_msvc_peer_latency_seconds "
	                             "histogram\n"));
	check_histogram(text, "weft_msvc_peer_latency_seconds",
	                "node=\"n1\",peer=\"n2\"");
	check_histogram(text, "weft_msvc_verb_latency_seconds",
	                "node=\"n1\",number=\"17\"");
	free(text);
	pair_stop(&p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_metrics_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
