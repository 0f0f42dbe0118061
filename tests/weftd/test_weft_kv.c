/* SPDX-License-Identifier: MIT */
/*
 * test_weft_kv.c: the weft-kv binary against two weftd processes on
 * loopback: ping, status, scan --prefix, JSON output, and keys and values
 * escaped in text so that one entry is one line whatever its bytes.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/weftd_proc.h"

#define NODES 2
#define WAIT_MS 10000

static const char *const ids[NODES] = {"n1", "n2"};

struct fixture {
	char dir[64];
	char config[128];
	char err_path[160]; /* weft-kv's stderr */
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
	wt_scratch_new("weft-kv-test", f->dir, sizeof(f->dir), f->config,
	               sizeof(f->config), f->ports, NODES);
	snprintf(f->err_path, sizeof(f->err_path), "%s/weft-kv.err", f->dir);
	n = wt_config_begin(text, sizeof(text), "weft-kv-test", ids, f->ports,
	                    NODES);
	snprintf(text + n, sizeof(text) - (size_t)n,
	         "request_timeout = 2s\nconnect_timeout = 1s\n"
	         "[weftd]\nmetrics_listen = 127.0.0.1:0\n"
	         "[kv]\nwrite_quorum = all\nreplicate_timeout = 1s\n");
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

	unlink(f->err_path);
	bad = wt_scratch_remove(f->p, NODES, f->config, f->dir);
	free(f);
	assert_int_equal(bad, 0);
	return 0;
}

/* Runs weft-kv on node with up to four more arguments (NULL ends them);
 * returns its exit code and all its output in out. */
static int
kv(struct fixture *f, char *out, size_t cap, const char *node, ...)
{
	char *argv[16] = {WEFT_KV_PATH, "--config",     f->config, "--node",
	                  (char *)node, "--timeout-ms", "3000"};
	int n = 7;
	va_list ap;

	va_start(ap, node);
	while (n < 15 && (argv[n] = va_arg(ap, char *)) != NULL)
		n++;
	va_end(ap);
	argv[n] = NULL;
	unlink(f->err_path);
	return wt_run_output(argv, f->err_path, out, cap, WAIT_MS);
}

static void
test_ping_times_a_round_trip(void **state)
{
	struct fixture *f = *state;
	char out[256], node[8];
	double ms = -1;

	assert_int_equal(kv(f, out, sizeof(out), "n1", "ping", NULL), 0);
	assert_int_equal(sscanf(out, "%7[^:]: %lf ms", node, &ms), 2);
	assert_string_equal(node, "n1");
	assert_true(ms >= 0 && ms < WAIT_MS);
	assert_int_equal(
	    kv(f, out, sizeof(out), "n2", "--output", "json", "ping", NULL), 0);
	assert_non_null(strstr(out, "{\"node\":\"n2\",\"rtt_ms\":"));
	/* A node that is gone: an error, at once rather than at the
	 * timeout. */
	wt_node_signal_exit(&f->p[1], SIGTERM);
	f->p[1].pid = 0;
	assert_int_equal(kv(f, out, sizeof(out), "n2", "ping", NULL), 1);
	assert_true(wt_file_contains(f->err_path, "peer down", WAIT_MS));
}

static void
test_values_are_escaped_in_text_and_json(void **state)
{
	struct fixture *f = *state;
	char out[256];

	assert_int_equal(
	    kv(f, out, sizeof(out), "n1", "put", "odd", "a\nb\\c\td\001", NULL),
	    0);
	assert_int_equal(kv(f, out, sizeof(out), "n2", "get", "odd", NULL), 0);
	assert_string_equal(out, "a\\nb\\\\c\\td\\x01\n");
	/* --raw: the bytes as they are. */
	assert_int_equal(
	    kv(f, out, sizeof(out), "n2", "--raw", "get", "odd", NULL), 0);
	assert_string_equal(out, "a\nb\\c\td\001\n");
	assert_int_equal(kv(f, out, sizeof(out), "n1", "--output", "json",
	                    "get", "odd", NULL),
	                 0);
	assert_string_equal(out, "{\"key\":\"odd\",\"value\":\"a\\nb\\\\c\\td"
	                         "\\u0001\"}\n");
	/* UTF-8 stays a string; other bytes go as base64. */
	assert_int_equal(
	    kv(f, out, sizeof(out), "n1", "put", "city", "Évora", NULL), 0);
	assert_int_equal(kv(f, out, sizeof(out), "n1", "--output", "json",
	                    "get", "city", NULL),
	                 0);
	assert_string_equal(out, "{\"key\":\"city\",\"value\":\"Évora\"}\n");
	assert_int_equal(
	    kv(f, out, sizeof(out), "n1", "put", "bin", "\377\376x", NULL), 0);
	assert_int_equal(kv(f, out, sizeof(out), "n1", "--output", "json",
	                    "get", "bin", NULL),
	                 0);
	assert_string_equal(out,
	                    "{\"key\":\"bin\",\"value_base64\":\"//54\"}\n");
	assert_int_equal(kv(f, out, sizeof(out), "n1", "get", "bin", NULL), 0);
	assert_string_equal(out, "\\xff\\xfex\n");
}

static void
test_scan_by_prefix(void **state)
{
	struct fixture *f = *state;
	static const char *const keys[] = {"p/a", "p/b", "p/c", "q/a", "p"};
	char out[512];
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_int_equal(kv(f, out, sizeof(out), "n1", "put", keys[i],
		                    i == 1 ? "two\nlines" : "v", NULL),
		                 0);
	assert_int_equal(
	    kv(f, out, sizeof(out), "n2", "scan", "--prefix", "p/", NULL), 0);
	assert_string_equal(out, "p/a\tv\np/b\ttwo\\nlines\np/c\tv\n");
	/* A count: the rest is said to be there. */
	assert_int_equal(
	    kv(f, out, sizeof(out), "n2", "scan", "--prefix", "p/", "2", NULL),
	    0);
	assert_string_equal(out, "p/a\tv\np/b\ttwo\\nlines\n");
	assert_true(wt_file_contains(f->err_path, "more from p/c", WAIT_MS));
	assert_int_equal(kv(f, out, sizeof(out), "n2", "--output", "json",
	                    "scan", "--prefix", "p/", "2", NULL),
	                 0);
	assert_string_equal(out, "{\"entries\":[{\"key\":\"p/a\",\"value\":"
	                         "\"v\"},{\"key\":\"p/b\",\"value\":\"two\\n"
	                         "lines\"}],\"next\":\"p/c\"}\n");
	/* Nothing past the prefix, and nothing but the prefix. */
	assert_int_equal(kv(f, out, sizeof(out), "n2", "--output", "json",
	                    "scan", "--prefix", "q/", NULL),
	                 0);
	assert_string_equal(out, "{\"entries\":[{\"key\":\"q/a\",\"value\":"
	                         "\"v\"}],\"next\":null}\n");
	assert_int_equal(
	    kv(f, out, sizeof(out), "n2", "scan", "--prefix", "r/", NULL), 0);
	assert_string_equal(out, "");
	/* A plain scan is unchanged: from its start key on. */
	assert_int_equal(
	    kv(f, out, sizeof(out), "n2", "scan", "p/c", "2", NULL), 0);
	assert_string_equal(out, "p/c\tv\nq/a\tv\n");
	assert_int_equal(
	    kv(f, out, sizeof(out), "n2", "scan", "--prefix", "p/", "x", NULL),
	    2);
}

#define BIG_KEYS 12
#define BIG_VALUE 100000

/* A scan's answer stops at WEFT_KV_SCAN_MAX_BYTES (1 MiB): a prefix whose
 * values add up to more takes several pages, and gets them all. */
static void
test_scan_by_prefix_pages_through_large_values(void **state)
{
	struct fixture *f = *state;
	size_t cap = 2 * BIG_KEYS * BIG_VALUE, lines = 0;
	char *value = malloc(BIG_VALUE + 1), *out = malloc(cap), *p;
	char key[16], small[64];
	int i;

	assert_non_null(value);
	assert_non_null(out);
	memset(value, 'x', BIG_VALUE);
	value[BIG_VALUE] = '\0';
	for (i = 0; i < BIG_KEYS; i++) {
		snprintf(key, sizeof(key), "big/%02d", i);
		assert_int_equal(
		    kv(f, small, sizeof(small), "n1", "put", key, value, NULL),
		    0);
	}
	assert_int_equal(
	    kv(f, small, sizeof(small), "n1", "put", "bih", "after", NULL), 0);
	assert_int_equal(
	    kv(f, out, cap, "n2", "scan", "--prefix", "big/", "100", NULL), 0);
	for (p = out; (p = strchr(p, '\n')) != NULL; p++)
		lines++;
	assert_int_equal(lines, BIG_KEYS);
	assert_int_equal(strlen(out), BIG_KEYS * (6 + 1 + BIG_VALUE + 1));
	assert_null(strstr(out, "bih"));
	free(out);
	free(value);
}

static bool
status_says(struct fixture *f, const char *node, const char *want)
{
	uint64_t start = weft_now_ns();
	char out[1024];

	while (wt_ms_since(start) < WAIT_MS) {
		if (kv(f, out, sizeof(out), node, "status", NULL) == 0 &&
		    strstr(out, want) != NULL)
			return true;
		wt_pause_ms(50);
	}
	return false;
}

static void
test_status_shows_the_nodes_view(void **state)
{
	struct fixture *f = *state;
	char out[1024];

	assert_int_equal(kv(f, out, sizeof(out), "n1", "put", "k", "v", NULL),
	                 0);
	assert_int_equal(kv(f, out, sizeof(out), "n1", "status", NULL), 0);
	assert_non_null(strstr(out, "node n1, cluster weft-kv-test"));
	assert_non_null(strstr(out, "keys 1 "));
	assert_non_null(strstr(out, "\nn1\tself\n"));
	assert_non_null(strstr(out, "\nn2\tup\n"));
	assert_int_equal(
	    kv(f, out, sizeof(out), "n2", "--output", "json", "status", NULL),
	    0);
	assert_non_null(strstr(out, "{\"node\":\"n2\",\"cluster\":"
	                            "\"weft-kv-test\""));
	assert_non_null(strstr(out, "\"keys\":1,"));
	assert_non_null(strstr(out,
	                       "\"members\":[{\"id\":\"n1\",\"state\":\"up\"},"
	                       "{\"id\":\"n2\",\"state\":\"self\"}],"
	                       "\"connections\":[{"));
	/* n2 goes: n1 sees it down. */
	wt_node_signal_exit(&f->p[1], SIGTERM);
	f->p[1].pid = 0;
	assert_true(status_says(f, "n1", "\nn2\tdown\n"));
}

/* --consistency all reads every member; with one of them gone it fails,
 * naming the consistency, while --consistency one still reads; a bad
 * name is bad usage. */
static void
test_get_at_a_consistency(void **state)
{
	struct fixture *f = *state;
	char out[256];

	assert_int_equal(kv(f, out, sizeof(out), "n1", "put", "k", "v", NULL),
	                 0);
	assert_int_equal(kv(f, out, sizeof(out), "n2", "--consistency", "all",
	                    "get", "k", NULL),
	                 0);
	assert_string_equal(out, "v\n");
	assert_int_equal(kv(f, out, sizeof(out), "n1", "--consistency", "twice",
	                    "get", "k", NULL),
	                 2);
	wt_node_signal_exit(&f->p[1], SIGTERM);
	f->p[1].pid = 0;
	assert_true(status_says(f, "n1", "\nn2\tdown\n"));
	assert_int_equal(kv(f, out, sizeof(out), "n1", "--consistency", "all",
	                    "get", "k", NULL),
	                 1);
	assert_true(
	    wt_file_contains(f->err_path, "read consistency all", WAIT_MS));
	assert_int_equal(kv(f, out, sizeof(out), "n1", "--consistency", "one",
	                    "get", "k", NULL),
	                 0);
	assert_string_equal(out, "v\n");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_ping_times_a_round_trip, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(
	        test_values_are_escaped_in_text_and_json, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_scan_by_prefix, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(
	        test_scan_by_prefix_pages_through_large_values, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(test_status_shows_the_nodes_view,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_get_at_a_consistency, setup,
	                                    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
