/* SPDX-License-Identifier: MIT */
/*
 * test_weftd_debug.c: what is in flight, as weftd shows it: the JSON of
 * /debug/connections and /debug/requests on its HTTP endpoint, and the
 * tables of `weft-kv status`, on two weftd processes.
 */
#include <setjmp.h>
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
	n = wt_config_begin(text, sizeof(text), "weftd-debug", ids, f->ports,
	                    NODES);
	snprintf(text + n, sizeof(text) - (size_t)n,
	         "slow_call = 5s\n"
	         "[weftd]\nmetrics_listen = 127.0.0.1:0\n"
	         "shutdown_timeout = 1s\n");
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
	int bad = wt_scratch_remove(f->p, NODES, f->config, f->dir);

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

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
	        test_debug_connections_is_json_with_the_members_links),
	    cmocka_unit_test(test_debug_requests_is_json),
	    cmocka_unit_test(
	        test_weft_kv_status_shows_connections_and_requests),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
