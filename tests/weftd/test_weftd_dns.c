/* SPDX-License-Identifier: MIT */
/*
 * test_weftd_dns.c: weftd with [cluster] discovery = dns-srv, driven by a
 * real DNS server (unbound, started here on loopback). n1's file lists
 * only itself; n2 and n3 join when their SRV records appear (reported up
 * in /metrics without traffic), n3 leaves once its record has been gone
 * for dns_grace, and nobody leaves while the server is down. --check-config
 * refuses dns-srv without dns_name.
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

#include "support/unbound.h"
#include "support/weftd_proc.h"

#define NODES 3
#define WAIT_MS 15000
#define SRV_NAME "_weft._tcp.weft.test."

static const char *const ids[NODES] = {"n1", "n2", "n3"};

struct fixture {
	struct unbound_server dns;
	char dir[64];
	char config[128]; /* n1's: itself, and discovery */
	char others[160]; /* n2's and n3's: all three */
	uint16_t ports[NODES];
	struct wt_proc p[NODES];
};

static void
write_n1_config(struct fixture *f, const char *cluster_keys)
{
	char text[1024];

	snprintf(text, sizeof(text),
	         "[cluster]\nname = weftd-dns\n%s"
	         "[node n1]\nhost = 127.0.0.1\nport = %u\n"
	         "[limits]\nloops = 1\nheartbeat_interval = 200ms\n"
	         "reconnect_min = 10ms\nreconnect_max = 200ms\n"
	         "[weftd]\nmetrics_listen = 127.0.0.1:0\n"
	         "shutdown_timeout = 1s\n",
	         cluster_keys, f->ports[0]);
	wt_write_file(f->config, text);
}

static void
set_records(struct fixture *f, const char *nodes)
{
	char rec[256];
	const char *p;

	assert_int_equal(unbound_remove(&f->dns, SRV_NAME), 0);
	for (p = nodes; *p != '\0'; p++) {
		int i = *p - '1';

		snprintf(rec, sizeof(rec), "%s 1 IN SRV 0 0 %u n%d.weft.test.",
		         SRV_NAME, f->ports[i], i + 1);
		assert_int_equal(unbound_add(&f->dns, rec), 0);
	}
}

static int
setup(void **state)
{
	static const char *const hosts[] = {
	    "n1.weft.test. 60 IN A 127.0.0.1",
	    "n2.weft.test. 60 IN A 127.0.0.1",
	    "n3.weft.test. 60 IN A 127.0.0.1",
	};
	struct fixture *f = calloc(1, sizeof(*f));
	char text[1024];
	int len;

	assert_non_null(f);
	unbound_start(&f->dns, "weft.test", hosts, NODES);
	assert_int_equal(setenv("WEFT_DNS_SERVERS", f->dns.servers, 1), 0);
	assert_int_equal(setenv("WEFT_RESOLV_CONF", f->dns.resolv_conf, 1), 0);
	wt_scratch_new("weftd-dns", f->dir, sizeof(f->dir), f->config,
	               sizeof(f->config), f->ports, NODES);
	snprintf(f->others, sizeof(f->others), "%s/others.ini", f->dir);
	len = wt_config_begin(text, sizeof(text), "weftd-dns", ids, f->ports,
	                      NODES);
	snprintf(text + len, sizeof(text) - (size_t)len,
	         "[weftd]\nmetrics_listen = 127.0.0.1:0\n"
	         "shutdown_timeout = 1s\n");
	wt_write_file(f->others, text);
	write_n1_config(f, "discovery = dns-srv\ndns_name = weft.test\n"
	                   "dns_grace = 2s\n");
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	int bad = wt_nodes_stop(f->p, NODES);

	unlink(f->others);
	bad += wt_scratch_remove(f->p, NODES, f->config, f->dir);
	unbound_free(&f->dns);
	unsetenv("WEFT_DNS_SERVERS");
	unsetenv("WEFT_RESOLV_CONF");
	free(f);
	assert_int_equal(bad, 0);
	return 0;
}

/* Whether n1's /metrics shows (want) or not (!want) needle, within the
 * wait. */
static bool
n1_metrics_has(struct fixture *f, const char *needle, bool want)
{
	static char buf[65536];
	uint64_t start = weft_now_ns();

	do {
		wt_http_ask(f->p[0].metrics_port, "GET", "/metrics", buf,
		            sizeof(buf));
		if ((strstr(buf, needle) != NULL) == want)
			return true;
		wt_pause_ms(50);
	} while (wt_ms_since(start) < WAIT_MS);
	return false;
}

static bool
n1_metrics_show(struct fixture *f, const char *needle)
{
	return n1_metrics_has(f, needle, true);
}

/* Whether n1 reports peer up (want) or not. */
static bool
n1_sees_up(struct fixture *f, const char *peer, bool want)
{
	char needle[128];

	snprintf(needle, sizeof(needle),
	         "weft_msvc_peer_up{node=\"n1\",peer=\"%s\"} 1\n", peer);
	return n1_metrics_has(f, needle, want);
}

static void
test_members_follow_the_records(void **state)
{
	struct fixture *f = *state;
	const char *err = f->p[0].err_path;
	long at;

	set_records(f, "12");
	wt_node_start(&f->p[1], f->others, f->dir, "n2", f->ports[1], NULL);
	wt_node_start(&f->p[2], f->others, f->dir, "n3", f->ports[2], NULL);
	wt_node_start(&f->p[0], f->config, f->dir, "n1", f->ports[0], NULL);
	/* Its own record is ignored; n2 joins and is up without traffic. */
	assert_true(wt_file_contains(err, "member n2 added", WAIT_MS));
	assert_true(n1_sees_up(f, "n2", true));

	/* A record added while it runs. */
	set_records(f, "123");
	assert_true(wt_file_contains(err, "member n3 added", WAIT_MS));
	assert_true(n1_sees_up(f, "n3", true));
	assert_true(n1_metrics_show(
	    f, "weftd_dns_discovery_total{node=\"n1\",event=\"added\"} 2\n"));
	assert_true(
	    n1_metrics_show(f, "weftd_dns_discovery_members{node=\"n1\"} 2\n"));

	/* A record removed: n3 leaves after the grace. */
	set_records(f, "12");
	assert_true(wt_file_contains(
	    err, "member n3 removed (not in the answers for 2000 ms)",
	    WAIT_MS));
	assert_true(n1_sees_up(f, "n3", false));

	/* The server down: nobody leaves, a line says so. */
	at = wt_file_size(err);
	unbound_stop(&f->dns);
	assert_true(
	    wt_file_contains_from(err, at, "Could not contact DNS", WAIT_MS));
	wt_pause_ms(3000);
	assert_false(wt_file_contains_from(err, at, "removed", 1));
	assert_true(n1_sees_up(f, "n2", true));
}

/* Whether n1's /readyz answers 200 within the wait. */
static bool
n1_ready(struct fixture *f)
{
	char buf[1024];
	uint64_t start = weft_now_ns();

	do {
		wt_http_ask(f->p[0].metrics_port, "GET", "/readyz", buf,
		            sizeof(buf));
		if (strncmp(buf, "HTTP/1.", 7) == 0 &&
		    strncmp(buf + 8, " 200 ", 5) == 0)
			return true;
		wt_pause_ms(20);
	} while (wt_ms_since(start) < WAIT_MS);
	print_message("n1's /readyz: %s\n", buf);
	return false;
}

/*
 * A node that finds its members by DNS knows none but itself until the
 * first answer comes: its replica must not count itself caught up then
 * (alone, it would need no copy), or it is ready, and answers gets, with
 * none of the data the others hold. Once n1 is ready, a key written
 * through n2 before n1 started reads back through n1.
 */
static void
test_a_replica_found_by_dns_is_ready_with_the_data(void **state)
{
	struct fixture *f = *state;
	char *put[] = {WEFT_KV_PATH, "--config", f->others,    "--node", "n2",
	               "put",        "before",   "n1 started", NULL};
	char *get[] = {WEFT_KV_PATH, "--config", f->others, "--node",
	               "n1",         "get",      "before",  NULL};
	char out[256];

	set_records(f, "123");
	wt_node_start(&f->p[1], f->others, f->dir, "n2", f->ports[1], NULL);
	wt_node_start(&f->p[2], f->others, f->dir, "n3", f->ports[2], NULL);
	assert_int_equal(wt_run_line(put, out, sizeof(out), WAIT_MS), 0);
	wt_node_start(&f->p[0], f->config, f->dir, "n1", f->ports[0], NULL);
	assert_true(n1_ready(f));
	assert_int_equal(wt_run_line(get, out, sizeof(out), WAIT_MS), 0);
	assert_string_equal(out, "n1 started");
}

static void
test_dns_srv_needs_a_name(void **state)
{
	struct fixture *f = *state;
	char *const argv[] = {WEFTD_PATH, "--config", f->config,
	                      "--check-config", NULL};
	char out[512];

	write_n1_config(f, "discovery = dns-srv\n");
	assert_int_not_equal(wt_run_line(argv, out, sizeof(out), WAIT_MS), 0);
	write_n1_config(f, "discovery = dns\n");
	assert_int_not_equal(wt_run_line(argv, out, sizeof(out), WAIT_MS), 0);
	write_n1_config(f, "discovery = dns-srv\ndns_name = weft.test\n");
	assert_int_equal(wt_run_line(argv, out, sizeof(out), WAIT_MS), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_members_follow_the_records,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_a_replica_found_by_dns_is_ready_with_the_data, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(test_dns_srv_needs_a_name, setup,
	                                    teardown),
	};

	if (!unbound_available()) {
		fprintf(stderr, "unbound is not installed "
		                "(scripts/install-deps.sh): skipped\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
