/* SPDX-License-Identifier: MIT */
/*
 * test_weftd_reload.c: the configuration file as the cluster's discovery
 * (services/weftd/reload.c), on weftd processes: a node added to the file
 * joins on SIGHUP, and on a node that is not signalled once it sees the
 * file change; a node removed leaves; a change a running node cannot take,
 * or a typo, is refused with its file:line and the members in force stay.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/weftd_proc.h"

#define NODES 3
#define WAIT_MS 10000

static const char *const ids[NODES] = {"n1", "n2", "n3"};

struct fixture {
	char dir[64];
	char config[128];  /* n1 and n2 read it, and it changes */
	char config3[160]; /* n3's: all three, from the start */
	uint16_t ports[NODES];
	struct wt_proc p[NODES];
};

/* The configuration of the first n ids, limits (may be NULL) added to
 * [limits], and tail (may be NULL) after [weftd]. */
static void
write_config(struct fixture *f, const char *path, size_t n, const char *limits,
             const char *tail)
{
	char text[2048];
	int len;

	len = wt_config_begin(text, sizeof(text), "weftd-reload", ids, f->ports,
	                      n);
	snprintf(text + len, sizeof(text) - (size_t)len,
	         "%s[weftd]\nmetrics_listen = 127.0.0.1:0\n"
	         "shutdown_timeout = 1s\n%s",
	         limits ? limits : "", tail ? tail : "");
	wt_write_file(path, text);
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int i;

	assert_non_null(f);
	wt_scratch_new("weftd-reload", f->dir, sizeof(f->dir), f->config,
	               sizeof(f->config), f->ports, NODES);
	snprintf(f->config3, sizeof(f->config3), "%s/n3.ini", f->dir);
	write_config(f, f->config, 2, NULL, NULL);
	write_config(f, f->config3, 3, NULL, NULL);
	for (i = 0; i < 2; i++)
		wt_node_start(&f->p[i], f->config, f->dir, ids[i], f->ports[i],
		              NULL);
	wt_node_start(&f->p[2], f->config3, f->dir, ids[2], f->ports[2], NULL);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	int bad = wt_nodes_stop(f->p, NODES);

	unlink(f->config3);
	bad += wt_scratch_remove(f->p, NODES, f->config, f->dir);
	free(f);
	assert_int_equal(bad, 0);
	return 0;
}

/* Whether node i's /metrics shows (want) or not (!want) needle, within
 * the wait. */
static bool
metrics_show(struct fixture *f, int i, const char *needle, bool want)
{
	static char buf[65536];
	uint64_t start = weft_now_ns();

	do {
		wt_http_ask(f->p[i].metrics_port, "GET", "/metrics", buf,
		            sizeof(buf));
		if ((strstr(buf, needle) != NULL) == want)
			return true;
		wt_pause_ms(50);
	} while (wt_ms_since(start) < WAIT_MS);
	return false;
}

static const char n3_up[] = "weft_msvc_peer_up{node=\"%s\",peer=\"n3\"} 1\n";

static void
peer_line(char *buf, size_t cap, int node, const char *peer)
{
	snprintf(buf, cap, "weft_msvc_peer_up{node=\"%s\",peer=\"%s\"}",
	         ids[node], peer);
}

static void
test_node_added_to_the_file_joins(void **state)
{
	struct fixture *f = *state;
	char line[128];
	long at1 = wt_file_size(f->p[0].err_path);
	long at2 = wt_file_size(f->p[1].err_path);

	write_config(f, f->config, 3, NULL, NULL);
	/* n1 is told; n2 sees the file change by itself. */
	assert_int_equal(kill(f->p[0].pid, SIGHUP), 0);
	assert_true(
	    wt_file_contains_from(f->p[0].err_path, at1, "SIGHUP: ", WAIT_MS));
	assert_true(wt_file_contains_from(f->p[0].err_path, at1,
	                                  "member n3 added", WAIT_MS));
	assert_true(wt_file_contains_from(f->p[1].err_path, at2, "file changed",
	                                  WAIT_MS));
	assert_true(wt_file_contains_from(f->p[1].err_path, at2,
	                                  "member n3 added", WAIT_MS));
	/* Both report it up, with no traffic: it was dialed. */
	snprintf(line, sizeof(line), n3_up, "n1");
	assert_true(metrics_show(f, 0, line, true));
	snprintf(line, sizeof(line), n3_up, "n2");
	assert_true(metrics_show(f, 1, line, true));
}

static void
test_node_removed_from_the_file_leaves(void **state)
{
	struct fixture *f = *state;
	char line[128];
	long at1 = wt_file_size(f->p[0].err_path);
	long at2 = wt_file_size(f->p[1].err_path);

	peer_line(line, sizeof(line), 0, "n2");
	assert_true(metrics_show(f, 0, line, true));
	/* n1 alone: n2 leaves n1's cluster. */
	write_config(f, f->config, 1, NULL, NULL);
	assert_int_equal(kill(f->p[0].pid, SIGHUP), 0);
	assert_true(wt_file_contains_from(f->p[0].err_path, at1,
	                                  "member n2 removed", WAIT_MS));
	assert_true(wt_file_contains_from(f->p[0].err_path, at1,
	                                  "member n2 left", WAIT_MS));
	assert_true(metrics_show(f, 0, line, false));
	/* n2 reads the same file: it cannot remove itself, and says so. */
	assert_true(wt_file_contains_from(f->p[1].err_path, at2,
	                                  "[node n2]: removed, but it is this "
	                                  "node",
	                                  WAIT_MS));
}

/* The line of needle in text, counted from 1. */
static int
line_of(const char *path, const char *needle)
{
	char text[4096];
	FILE *fp = fopen(path, "r");
	size_t n;
	const char *at, *p;
	int line = 1;

	assert_non_null(fp);
	n = fread(text, 1, sizeof(text) - 1, fp);
	fclose(fp);
	text[n] = '\0';
	assert_non_null(at = strstr(text, needle));
	for (p = text; p < at; p++)
		line += *p == '\n';
	return line;
}

static void
test_change_a_node_cannot_take_is_refused(void **state)
{
	struct fixture *f = *state;
	char want[300], line[128];
	long at1 = wt_file_size(f->p[0].err_path);

	/* n3 added, and a limit changed: the whole file is refused. */
	write_config(f, f->config, 3, "request_timeout = 3s\n", NULL);
	snprintf(want, sizeof(want), "%s:%d: [limits] request_timeout",
	         f->config, line_of(f->config, "request_timeout = 3s"));
	assert_int_equal(kill(f->p[0].pid, SIGHUP), 0);
	assert_true(
	    wt_file_contains_from(f->p[0].err_path, at1, want, WAIT_MS));
	assert_true(wt_file_contains_from(f->p[0].err_path, at1,
	                                  "the configuration in force stays",
	                                  WAIT_MS));
	/* A typo in a member's section: refused with its line too. */
	at1 = wt_file_size(f->p[0].err_path);
	write_config(f, f->config, 2, NULL,
	             "[node n3]\nhots = 127.0.0.1\nport = 1\n");
	snprintf(want, sizeof(want), "%s:%d:", f->config,
	         line_of(f->config, "hots ="));
	assert_int_equal(kill(f->p[0].pid, SIGHUP), 0);
	assert_true(
	    wt_file_contains_from(f->p[0].err_path, at1, want, WAIT_MS));
	/* Neither added n3. */
	assert_false(
	    wt_file_contains_from(f->p[0].err_path, 0, "member n3 added", 0));
	snprintf(line, sizeof(line), n3_up, "n1");
	assert_true(metrics_show(f, 0, "peer=\"n3\"", false));
	/* Mended, it applies. */
	write_config(f, f->config, 3, NULL, NULL);
	assert_int_equal(kill(f->p[0].pid, SIGHUP), 0);
	assert_true(metrics_show(f, 0, line, true));
}

/* How many times needle is in path past offset. */
static int
count_from(const char *path, long offset, const char *needle)
{
	static char text[1 << 18];
	FILE *fp = fopen(path, "r");
	const char *at;
	size_t n;
	int count = 0;

	assert_non_null(fp);
	assert_int_equal(fseek(fp, offset, SEEK_SET), 0);
	n = fread(text, 1, sizeof(text) - 1, fp);
	fclose(fp);
	text[n] = '\0';
	for (at = text; (at = strstr(at, needle)) != NULL; at++)
		count++;
	return count;
}

static void
test_broken_file_on_disk_is_logged_at_a_limited_rate(void **state)
{
	struct fixture *f = *state;
	long at1 = wt_file_size(f->p[0].err_path);

	/* Saved broken twice, no signal: both refused, one line. */
	write_config(f, f->config, 2, NULL, "[node n3]\nhots = x\nport = 1\n");
	assert_true(metrics_show(
	    f, 0,
	    "weftd_config_reloads_total{node=\"n1\",result=\"refused\"} 1",
	    true));
	write_config(f, f->config, 2, NULL, "[node n3]\nhost = x\nprt = 1\n");
	assert_true(metrics_show(
	    f, 0,
	    "weftd_config_reloads_total{node=\"n1\",result=\"refused\"} 2",
	    true));
	assert_int_equal(
	    count_from(f->p[0].err_path, at1,
	               "refused, the configuration in force stays"),
	    1);
	/* A signal is answered whatever the rate. */
	assert_int_equal(kill(f->p[0].pid, SIGHUP), 0);
	assert_true(metrics_show(
	    f, 0,
	    "weftd_config_reloads_total{node=\"n1\",result=\"refused\"} 3",
	    true));
	assert_int_equal(
	    count_from(f->p[0].err_path, at1,
	               "refused, the configuration in force stays"),
	    2);
	assert_true(metrics_show(
	    f, 0,
	    "weftd_config_reloads_total{node=\"n1\",result=\"applied\"} 0",
	    true));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_node_added_to_the_file_joins,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_node_removed_from_the_file_leaves, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_change_a_node_cannot_take_is_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_broken_file_on_disk_is_logged_at_a_limited_rate, setup,
	        teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
