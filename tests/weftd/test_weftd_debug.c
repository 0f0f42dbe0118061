/* SPDX-License-Identifier: MIT */
/*
 * test_weftd_debug.c: what is in flight, as weftd shows it: the JSON of
 * /debug/connections and /debug/requests on its HTTP endpoint, the
 * tables of `weft-kv status`, and n1's span file (every trace sampled),
 * on two weftd processes.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/json_check.h"
#include "support/weftd_proc.h"

#define NODES 2
#define WAIT_MS 10000

static const char *const ids[NODES] = {"n1", "n2"};

struct fixture {
	char dir[64];
	char config[128];
	char spans[160]; /* n1's span_file */
	char rotated[168];
	uint16_t ports[NODES];
	struct wt_proc p[NODES];
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char text[2048];
	int i, n;

	assert_non_null(f);
	wt_scratch_new("weftd-debug", f->dir, sizeof(f->dir), f->config,
	               sizeof(f->config), f->ports, NODES);
	snprintf(f->spans, sizeof(f->spans), "%s/n1-spans.jsonl", f->dir);
	snprintf(f->rotated, sizeof(f->rotated), "%s.1", f->spans);
	n = wt_config_begin(text, sizeof(text), "weftd-debug", ids, f->ports,
	                    NODES);
	snprintf(text + n, sizeof(text) - (size_t)n,
	         "slow_call = 5s\n"
	         "[weftd]\nmetrics_listen = 127.0.0.1:0\n"
	         "shutdown_timeout = 1s\n"
	         "[weftd n1]\nspan_file = %s\ntrace_sample_rate = 1\n",
	         f->spans);
	wt_write_file(f->config, text);
	for (i = 0; i < NODES; i++)
		wt_node_start(&f->p[i], f->config, f->dir, ids[i], f->ports[i],
		              NULL);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	int bad;

	unlink(f->spans);
	unlink(f->rotated);
	bad = wt_scratch_remove(f->p, NODES, f->config, f->dir);
	free(f);
	assert_int_equal(bad, 0);
	return 0;
}

/* The body of an HTTP answer in buf, after its headers. */
static const char *
body_of(const char *buf)
{
	const char *at = strstr(buf, "\r\n\r\n");

	assert_non_null(at);
	return at + 4;
}

/* Asks node i for path until its body holds needle (at most WAIT_MS);
 * returns whether it did, the last answer in buf. */
static bool
body_holds(struct fixture *f, int i, const char *path, const char *needle,
           char *buf, size_t cap)
{
	uint64_t start = weft_now_ns();

	for (;;) {
		wt_http_ask(f->p[i].metrics_port, "GET", path, buf, cap);
		if (strstr(buf, "\r\n\r\n") != NULL &&
		    strstr(body_of(buf), needle) != NULL)
			return true;
		if (wt_ms_since(start) > WAIT_MS)
			return false;
		wt_pause_ms(20);
	}
}

static void
test_debug_connections_is_json_with_the_members_links(void **state)
{
	struct fixture *f = *state;
	static char buf[65536];
	const char *body;

	/* Heartbeats link the members both ways on their urgent lanes, each
	 * up once its handshake ends. */
	assert_true(body_holds(f, 0, "/debug/connections",
	                       "\"class\":\"urgent\",\"index\":0,"
	                       "\"direction\":\"out\",\"state\":\"up\"",
	                       buf, sizeof(buf)));
	assert_true(body_holds(f, 0, "/debug/connections",
	                       "\"class\":\"urgent\",\"index\":0,"
	                       "\"direction\":\"in\",\"state\":\"up\"",
	                       buf, sizeof(buf)));
	assert_non_null(strstr(buf, " 200 OK\r\n"));
	assert_non_null(strstr(buf, "Content-Type: application/json\r\n"));
	body = body_of(buf);
	assert_true(json_is_valid(body, strlen(body)));
	assert_non_null(strstr(body, "\"node\":\"n1\""));
	assert_non_null(strstr(body, "\"peer\":\"n2\",\"address\""));
	assert_null(strstr(body_of(buf), "\"requests\""));
}

static void
test_debug_requests_is_json(void **state)
{
	struct fixture *f = *state;
	static char buf[65536];
	const char *body;

	wt_http_ask(f->p[1].metrics_port, "GET", "/debug/requests", buf,
	            sizeof(buf));
	assert_non_null(strstr(buf, " 200 OK\r\n"));
	body = body_of(buf);
	assert_true(json_is_valid(body, strlen(body)));
	assert_non_null(strstr(body, "{\"node\":\"n2\",\"wall_ms\":"));
	assert_non_null(strstr(body, ",\"requests\":["));
	assert_null(strstr(body, "\"connections\""));
	/* HEAD has the headers alone; other paths under /debug are not
	 * found. */
	wt_http_ask(f->p[1].metrics_port, "HEAD", "/debug/requests", buf,
	            sizeof(buf));
	assert_non_null(strstr(buf, " 200 OK\r\n"));
	assert_string_equal(body_of(buf), "");
	wt_http_ask(f->p[1].metrics_port, "GET", "/debug/other", buf,
	            sizeof(buf));
	assert_non_null(strstr(buf, " 404 "));
	assert_non_null(strstr(buf, "/debug/connections"));
}

static void
test_weft_kv_status_shows_connections_and_requests(void **state)
{
	struct fixture *f = *state;
	static char out[65536];
	char *argv[] = {WEFT_KV_PATH, "--config", f->config, "--node",
	                "n1",         "status",   NULL};
	char *argv_json[] = {WEFT_KV_PATH, "--config", f->config,
	                     "--node",     "n1",       "--output",
	                     "json",       "status",   NULL};
	uint64_t start = weft_now_ns();

	/* Until n1 sees n2 up (and has dialled it). */
	do {
		assert_int_equal(
		    wt_run_output(argv, NULL, out, sizeof(out), WAIT_MS), 0);
		if (strstr(out, "\nn2\tup\n") != NULL &&
		    strstr(out, "\nn2 ") != NULL)
			break;
		wt_pause_ms(50);
	} while (wt_ms_since(start) < WAIT_MS);
	assert_non_null(strstr(out, "\nconnections: "));
	assert_non_null(strstr(out, "PEER "));
	assert_non_null(strstr(out, " urgent "));
	/* weft-kv's own connection, and its status request, answered once
	 * the snapshot is taken: detached meanwhile. */
	assert_non_null(strstr(out, "\nweft-kv-"));
	assert_non_null(strstr(out, "\nrequests in flight: "));
	assert_non_null(strstr(out, "status           detached "));
	assert_int_equal(
	    wt_run_output(argv_json, NULL, out, sizeof(out), WAIT_MS), 0);
	assert_true(json_is_valid(out, strlen(out)));
	assert_non_null(strstr(out, "\"connections\":[{"));
	assert_non_null(strstr(out, "\"stage\":\"detached\""));
}

/* ---- Spans ----------------------------------------------------------------
 */

#define REPLICATE_TO_N2 "\"name\":\"kv_replicate\",\"kind\":3,"

/* Reads path whole into buf (NUL-terminated); its length. */
static size_t
read_all(const char *path, char *buf, size_t cap)
{
	FILE *fp = fopen(path, "r");
	size_t n = 0;

	if (fp != NULL) {
		n = fread(buf, 1, cap - 1, fp);
		fclose(fp);
	}
	buf[n] = '\0';
	return n;
}

/* Waits until path holds needle; its text in buf. */
static bool
file_holds(const char *path, const char *needle, char *buf, size_t cap)
{
	uint64_t start = weft_now_ns();

	do {
		read_all(path, buf, cap);
		if (strstr(buf, needle) != NULL)
			return true;
		wt_pause_ms(50);
	} while (wt_ms_since(start) < WAIT_MS);
	return false;
}

static bool
is_hex(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') ||
		      (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	return p[n] == '"';
}

/* Every line of text is one OTLP/JSON request with well-formed ids and
 * times from..to; the kv_replicate span to n2 is among them, once per
 * put asked. Returns how many such spans. */
static int
check_spans(char *text, uint64_t from_ns, uint64_t to_ns)
{
	int replicate = 0;
	char *line, *save = NULL;

	for (line = strtok_r(text, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *t = strstr(line, "\"traceId\":\"");
		const char *s = strstr(line, "\"spanId\":\"");
		const char *a = strstr(line, "\"startTimeUnixNano\":\"");
		const char *b = strstr(line, "\"endTimeUnixNano\":\"");
		uint64_t start, end;

		assert_true(json_is_valid(line, strlen(line)));
		assert_true(strncmp(line, "{\"resourceSpans\":[", 18) == 0);
		assert_non_null(strstr(line, "\"stringValue\":\"weftd\""));
		assert_true(t != NULL && is_hex(t + 11, 32));
		assert_true(s != NULL && is_hex(s + 10, 16));
		assert_true(a != NULL && b != NULL);
		start = strtoull(a + 21, NULL, 10);
		end = strtoull(b + 19, NULL, 10);
		assert_true(from_ns <= start && start <= end && end <= to_ns);
		if (strstr(line, REPLICATE_TO_N2) != NULL) {
			assert_non_null(
			    strstr(line, "{\"key\":\"weft.peer\",\"value\":"
			                 "{\"stringValue\":\"n2\"}}"));
			assert_non_null(
			    strstr(line, "\"status\":{\"code\":1}"));
			/* A new trace: its root, no parent. */
			assert_null(strstr(line, "\"parentSpanId\""));
			replicate++;
		}
	}
	return replicate;
}

static uint64_t
wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* n1 samples every trace it starts: the write it coordinates sends
 * kv_replicate to n2 in a new trace, whose span n1 writes to its span
 * file within a second, as an OTLP/JSON line. After logrotate's move
 * and SIGHUP, n1 writes to the file of the same name again; the moved
 * one keeps what it had. */
static void
test_spans_of_sampled_traces_go_to_the_span_file(void **state)
{
	struct fixture *f = *state;
	static char text[1 << 20], buf[65536];
	char *put[] = {WEFT_KV_PATH, "--config", f->config, "--node", "n1",
	               "put",        "traced",   "1",       NULL};
	char out[256];
	uint64_t from;

	/* The catch-up's pulls at start are spans too: from any time. */
	assert_int_equal(wt_run_line(put, out, sizeof(out), WAIT_MS), 0);
	assert_true(file_holds(f->spans, REPLICATE_TO_N2, text, sizeof(text)));
	assert_true(check_spans(text, 0, wall_ns()) >= 1);
	assert_true(body_holds(f, 0, "/metrics",
	                       "weftd_spans_total{node=\"n1\","
	                       "result=\"dropped\"} 0\n",
	                       buf, sizeof(buf)));

	/* Rotated: moved, then SIGHUP. */
	from = wall_ns();
	assert_int_equal(rename(f->spans, f->rotated), 0);
	assert_int_equal(kill(f->p[0].pid, SIGHUP), 0);
	assert_true(
	    wt_file_contains(f->p[0].err_path, "opened again", WAIT_MS));
	put[7] = "2";
	assert_int_equal(wt_run_line(put, out, sizeof(out), WAIT_MS), 0);
	assert_true(file_holds(f->spans, REPLICATE_TO_N2, text, sizeof(text)));
	assert_int_equal(check_spans(text, from, wall_ns()), 1);
	read_all(f->rotated, text, sizeof(text));
	assert_true(check_spans(text, 0, UINT64_MAX) >= 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
	        test_debug_connections_is_json_with_the_members_links),
	    cmocka_unit_test(test_debug_requests_is_json),
	    cmocka_unit_test(
	        test_weft_kv_status_shows_connections_and_requests),
	    cmocka_unit_test(test_spans_of_sampled_traces_go_to_the_span_file),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
