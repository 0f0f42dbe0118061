/* SPDX-License-Identifier: MIT */
/*
 * test_weftd_config.c: how weftd and weft-kv read the configuration: one
 * grammar in every section, an unknown key or section an error naming the
 * file and line, one exit code (78) for every configuration error,
 * `weftd --check-config`, and per-node [weftd ID] sections.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/ports.h"
#include "support/weftd_proc.h"
#include "weftd_proto.h"

struct fixture {
	char dir[64];
	char config[128];
	char err[128];
	uint16_t port;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/weftd-config-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->config, sizeof(f->config), "%s/c.ini", f->dir);
	snprintf(f->err, sizeof(f->err), "%s/stderr", f->dir);
	f->port = weft_test_free_port();
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	unlink(f->config);
	unlink(f->err);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* The cluster of one node "a" on f->port, then extra. */
static void
write_config(struct fixture *f, const char *extra)
{
	char text[2048];

	snprintf(
	    text, sizeof(text),
	    "[cluster]\nname = c\n[node a]\nhost = 127.0.0.1\nport = %u\n%s",
	    (unsigned)f->port, extra);
	wt_write_file(f->config, text);
}

/*
 * Runs argv (stderr into f->err, emptied first) with the first output line
 * in out; a process that printed a line and runs on (weftd started) is
 * stopped with SIGTERM. Returns its exit code.
 */
static int
run(struct fixture *f, char *const argv[], char *out, size_t cap)
{
	int fd, status;
	pid_t pid;

	unlink(f->err);
	pid = wt_spawn(argv, f->err, &fd);
	if (wt_read_line(fd, out, cap, WT_READY_MS) < 0)
		out[0] = '\0';
	else if (strncmp(out, "weftd ready", 11) == 0)
		kill(pid, SIGTERM);
	status = wt_wait_exit(pid, WT_EXIT_MS);
	close(fd);
	assert_true(status != -1 && WIFEXITED(status));
	return WEXITSTATUS(status);
}

static int
run_weftd(struct fixture *f, const char *id, char *out, size_t cap)
{
	char *argv[] = {WEFTD_PATH, "--config", f->config,
	                "--id",     (char *)id, NULL};

	return run(f, argv, out, cap);
}

static int
check_config(struct fixture *f, const char *id, char *out, size_t cap)
{
	char *argv[] = {WEFTD_PATH, "--check-config",   "--config",
	                f->config,  id ? "--id" : NULL, (char *)id,
	                NULL};

	return run(f, argv, out, cap);
}

static void
assert_stderr_has(struct fixture *f, const char *needle)
{
	if (!wt_file_contains(f->err, needle, 1000))
		fail_msg("stderr has no '%s'", needle);
}

struct bad_case {
	const char *extra;
	const char *expect; /* in stderr, after the file name */
};

/* Each of these refused to start with exit code 78 and the line named;
 * before, the typos in [weftd] and [kv] were silently ignored. */
static const struct bad_case bad_cases[] = {
    {"[weftd]\nmetrics_listn = 127.0.0.1:0\n",
     ":7: [weftd]: unknown key 'metrics_listn'"},
    {"[kv]\nreplicate_timout = 2s\n", ":7: [kv]: unknown key"},
    {"[weftd]\nmetrics_listen = nowhere\n",
     ":7: [weftd] metrics_listen: not an address"},
    {"[weftd]\nshutdown_timeout = soon\n",
     ":7: [weftd] shutdown_timeout: not a duration"},
    {"[weftd]\nlog_level = loud\n", ":7: [weftd] log_level: 'loud'"},
    {"[weftd]\ntrace_sample_rate = 2\n",
     ":7: [weftd] trace_sample_rate: want a share from 0 to 1"},
    {"[weftd]\ntrace_sample_rate = 0.5x\n",
     ":7: [weftd] trace_sample_rate: want a share from 0 to 1"},
    {"[weftd]\ntrace_sample_rate = nan\n",
     ":7: [weftd] trace_sample_rate: want a share from 0 to 1"},
    {"[kv]\nwrite_quorum = 5\n",
     ":7: [kv] write_quorum: 5 is more than the 1 members"},
    {"[kv]\nmax_value = 16 MQ\n", ":7: [kv] max_value: not a size"},
    {"[kv]\nread_consistency = two\n",
     ":7: [kv] read_consistency: 'two': want one, quorum or all"},
    {"[weftd b]\nmetrics_listen = 127.0.0.1:0\n",
     ":6: [weftd b]: no such node"},
    {"[wefd]\nload = on\n", ":6: unknown section [wefd]"},
    {"[limits]\nrequest_timeout = 5 parsecs\n",
     ":7: [limits] request_timeout: not a duration"},
    {"this is not ini\n", ":6: syntax error"},
    {"[weftd]\nlog_format = xml\n", ":7: [weftd] log_format: 'xml'"},
};

static void
test_every_configuration_error_exits_78_with_file_and_line(void **state)
{
	struct fixture *f = *state;
	char out[256], want[512];
	size_t i;

	for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		write_config(f, bad_cases[i].extra);
		assert_int_equal(run_weftd(f, "a", out, sizeof(out)),
		                 WEFTD_EXIT_CONFIG);
		snprintf(want, sizeof(want), "%s%s", f->config,
		         bad_cases[i].expect);
		assert_stderr_has(f, want);
		/* --check-config says the same, without starting. */
		assert_int_equal(check_config(f, "a", out, sizeof(out)),
		                 WEFTD_EXIT_CONFIG);
		assert_stderr_has(f, want);
	}
	/* An id the file does not list, and a file that is not there. */
	write_config(f, "");
	assert_int_equal(run_weftd(f, "nobody", out, sizeof(out)),
	                 WEFTD_EXIT_CONFIG);
	assert_stderr_has(f, "unknown node id 'nobody'");
	unlink(f->config);
	assert_int_equal(run_weftd(f, "a", out, sizeof(out)),
	                 WEFTD_EXIT_CONFIG);
	/* Bad usage is not a configuration error. */
	{
		char *argv[] = {WEFTD_PATH, "--config", f->config, NULL};

		assert_int_equal(run(f, argv, out, sizeof(out)), 2);
	}
}

/* What [limits] accepts, [weftd] and [kv] accept too: "5 s" was refused in
 * [weftd], "16MB" in [kv]. */
static void
test_one_grammar_in_weftd_and_kv_sections(void **state)
{
	struct fixture *f = *state;
	char out[256];

	write_config(f, "[limits]\nrequest_timeout = 5 s\nmax_frame = 32MB\n"
	                "[weftd]\nshutdown_timeout = 5 s\nload = off\n"
	                "log_level = WARN\n"
	                "[kv]\nmax_value = 16MB\nreplicate_timeout = 2 s\n"
	                "write_quorum = majority\nread_consistency = Quorum\n");
	assert_int_equal(check_config(f, "a", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "configuration OK"));
	assert_int_equal(check_config(f, NULL, out, sizeof(out)), 0);
	assert_int_equal(run_weftd(f, "a", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "weftd ready node=a"));
}

/* Several nodes on one host share the file: [weftd ID] gives each its own
 * metrics port, overriding [weftd]. */
static void
test_per_node_weftd_section_overrides_the_shared_one(void **state)
{
	struct fixture *f = *state;
	uint16_t mport = weft_test_free_port();
	char extra[512], out[256], want[64];

	snprintf(extra, sizeof(extra),
	         "[weftd]\nmetrics_listen = 127.0.0.1:1\n"
	         "[weftd a]\nmetrics_listen = 127.0.0.1:%u\n",
	         (unsigned)mport);
	write_config(f, extra);
	assert_int_equal(run_weftd(f, "a", out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "metrics=127.0.0.1:%u", (unsigned)mport);
	assert_non_null(strstr(out, want));
}

/* Accepted by --check-config before, then broke the node or the host at
 * start: 17,000 threads for worker_threads = 1000000; exit 1 without a
 * line for loops = 100000 or 4096; a node that answered nothing for
 * outbound_queue = 1; max_pending_requests = 0, which PROTOCOL.md calls
 * an error. Cross-key and [tls] errors named no line. Now the check and
 * the start refuse each one alike: exit 78, "FILE:LINE: [section] key:"
 * and why. */
static const struct bad_case unsafe_cases[] = {
    {"[limits]\nworker_threads = 1000000\n",
     ":7: [limits] worker_threads: 1000000 is out of range (1 to 1024): "},
    {"[limits]\nloops = 100000\n",
     ":7: [limits] loops: 100000 is out of range (1 to 256): "},
    {"[limits]\nloops = 4096\n", ":7: [limits] loops: 4096 is out of range"},
    {"[limits]\noutbound_queue = 1\n",
     ":7: [limits] outbound_queue: 1 is below large_message (65536)"},
    {"[limits]\nclient_outbound = 100\n",
     ":7: [limits] client_outbound: 100 is below large_message"},
    {"[limits]\nmax_pending_requests = 0\n",
     ":7: [limits] max_pending_requests: must not be 0: "},
    {"[limits]\nrequest_timeout = 100000h\n",
     ":7: [limits] request_timeout: 360000000000 is out of range (1 to "
     "86400000): at most a day"},
    {"[limits]\nheartbeat_interval = 1ms\n",
     ":7: [limits] heartbeat_interval: 1 is out of range (10 to 60000)"},
    {"[limits]\nmax_frame = 100\n",
     ":7: [limits] max_frame: 100 is out of range (4096 to "},
    {"[kv]\nreplicate_timeout = 25h\n",
     ":7: [kv] replicate_timeout: 90000000 is out of range"},
    {"[kv]\nmax_clock_skew = 48h\n",
     ":7: [kv] max_clock_skew: 172800000 is out of range"},
    {"[weftd]\nload_max_rate = 4000000000\n",
     ":7: [weftd] load_max_rate: 4000000000 is out of range"},
    {"[limits]\nreconnect_max = 1s\nreconnect_min = 2s\n",
     ":8: [limits] reconnect_min: 2000 ms is above reconnect_max (1000 "
     "ms)"},
    {"[limits]\nreconnect_min = 20s\n",
     ":7: [limits] reconnect_min: 20000 ms is above reconnect_max (5000 "
     "ms)"},
    {"[limits]\nlarge_message = 1MiB\nmax_frame = 64KiB\n",
     ":7: [limits] large_message: 1048576 is above max_frame (65536)"},
    {"[tls]\nmode = all\n", ":7: [tls] ca: not set, and mode all needs it"},
    {"[tls]\nmode = optional\nca = /nonexistent/ca.pem\n"
     "cert = /nonexistent/n.pem\nkey = /nonexistent/n.key\n",
     ":9: [tls] cert: cannot load cert /nonexistent/n.pem"},
};

/* Both ways in refuse c, with its line. */
static void
assert_refused(struct fixture *f, const char *expect)
{
	char out[256], want[512];

	snprintf(want, sizeof(want), "%s%s", f->config, expect);
	assert_int_equal(check_config(f, "a", out, sizeof(out)),
	                 WEFTD_EXIT_CONFIG);
	assert_stderr_has(f, want);
	assert_int_equal(check_config(f, NULL, out, sizeof(out)),
	                 WEFTD_EXIT_CONFIG);
	assert_stderr_has(f, want);
	assert_int_equal(run_weftd(f, "a", out, sizeof(out)),
	                 WEFTD_EXIT_CONFIG);
	assert_stderr_has(f, want);
}

static void
test_check_refuses_what_would_break_the_node(void **state)
{
	struct fixture *f = *state;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	char extra[128], expect[128];
	size_t i;

	for (i = 0; i < sizeof(unsafe_cases) / sizeof(unsafe_cases[0]); i++) {
		write_config(f, unsafe_cases[i].extra);
		assert_refused(f, unsafe_cases[i].expect);
	}
	/* Within the hard caps, but more threads than this host's CPUs
	 * warrant (4 loops, 32 workers per CPU). */
	if (cpus > 0 && cpus * 4 < 256) {
		snprintf(extra, sizeof(extra), "[limits]\nloops = %ld\n",
		         cpus * 4 + 1);
		snprintf(expect, sizeof(expect),
		         ":7: [limits] loops: %ld is above %ld, 4 per CPU",
		         cpus * 4 + 1, cpus * 4);
		write_config(f, extra);
		assert_refused(f, expect);
	}
	if (cpus > 0 && cpus * 32 < 1024) {
		snprintf(extra, sizeof(extra),
		         "[limits]\nworker_threads = %ld\n", cpus * 32 + 1);
		snprintf(expect, sizeof(expect),
		         ":7: [limits] worker_threads: %ld is above %ld",
		         cpus * 32 + 1, cpus * 32);
		write_config(f, extra);
		assert_refused(f, expect);
	}
}

/* A cluster of n members, "a" on f->port first; member k's [node] header
 * is on line 3 + 3k. */
static void
write_members(struct fixture *f, unsigned n)
{
	size_t cap = 64 + (size_t)n * 64, len;
	char *text = malloc(cap), name[16];
	unsigned k;

	assert_non_null(text);
	len = (size_t)snprintf(text, cap, "[cluster]\nname = c\n");
	for (k = 0; k < n; k++) {
		if (k == 0)
			snprintf(name, sizeof(name), "a");
		else
			snprintf(name, sizeof(name), "m%u", k);
		len += (size_t)snprintf(
		    text + len, cap - len,
		    "[node %s]\nhost = 127.0.0.1\nport = %u\n", name,
		    k == 0 ? (unsigned)f->port : 20000u + k % 40000u);
	}
	wt_write_file(f->config, text);
	free(text);
}

/* 10,000 members were accepted, and 170 under a file limit of 1024: the
 * members' connections took every descriptor, no handshake slot was left
 * and the node refused even its members. Now the member count has a cap
 * and the file limit is checked against the members' connections, at
 * check time and at start, by the derivation the node's caps use. */
static void
test_check_refuses_members_the_file_limit_cannot_hold(void **state)
{
	struct fixture *f = *state;
	char out[256];

	write_members(f, 10000);
	assert_refused(f, ":3075: [node m1024]: more than 1024 members");
	write_members(f, 170);
	wt_spawn_nofile(1024);
	assert_refused(f,
	               ":510: [node m169]: 170 members need 1084 descriptors");
	assert_stderr_has(f, "raise the limit to at least 1096");
	/* At the least it names, the check passes. */
	wt_spawn_nofile(1096);
	assert_int_equal(check_config(f, "a", out, sizeof(out)), 0);
	wt_spawn_nofile(1095);
	assert_int_equal(check_config(f, "a", out, sizeof(out)),
	                 WEFTD_EXIT_CONFIG);
	wt_spawn_nofile(0);
}

/* Each of these passed --check-config, then weftd exited 1 at start (or
 * never reached the member) and systemd restarted it forever. */
static const struct bad_case host_cases[] = {
    {"[node b]\nhost = 127.0.0.300\nport = 1\n",
     ":7: [node b] host: '127.0.0.300' is not an IP address"},
    {"[node b]\nhost = 10.1.2\nport = 1\n",
     ":7: [node b] host: '10.1.2' is not an IP address"},
    {"[node b]\nhost = fe80::1::2\nport = 1\n",
     ":7: [node b] host: 'fe80::1::2' is not an IP address"},
    {"[weftd]\nmetrics_listen = 192.0.2.1:0\n",
     ":7: [weftd] metrics_listen: not an address of this host"},
    {"[weftd]\nlisten = 192.0.2.1:0\n",
     ":7: [weftd] listen: not an address of this host"},
};

static void
test_check_resolves_hosts_and_binds_its_own(void **state)
{
	struct fixture *f = *state;
	char out[256], want[512], text[512];
	size_t i;

	for (i = 0; i < sizeof(host_cases) / sizeof(host_cases[0]); i++) {
		write_config(f, host_cases[i].extra);
		snprintf(want, sizeof(want), "%s%s", f->config,
		         host_cases[i].expect);
		assert_int_equal(check_config(f, "a", out, sizeof(out)),
		                 WEFTD_EXIT_CONFIG);
		assert_stderr_has(f, want);
		assert_int_equal(run_weftd(f, "a", out, sizeof(out)),
		                 WEFTD_EXIT_CONFIG);
		assert_stderr_has(f, want);
	}
	/* Another member's host only has to resolve, ours to be local. */
	write_config(f, "[node b]\nhost = localhost\nport = 1\n");
	assert_int_equal(check_config(f, "a", out, sizeof(out)), 0);
	assert_int_equal(check_config(f, NULL, out, sizeof(out)), 0);
	snprintf(text, sizeof(text),
	         "[cluster]\nname = c\n[node a]\nhost = 192.0.2.1\n"
	         "port = %u\n[node b]\nhost = 127.0.0.1\nport = 1\n",
	         (unsigned)f->port);
	wt_write_file(f->config, text);
	snprintf(want, sizeof(want),
	         "%s:4: [node a] host: not an address of this host", f->config);
	assert_int_equal(check_config(f, "a", out, sizeof(out)),
	                 WEFTD_EXIT_CONFIG);
	assert_stderr_has(f, want);
	assert_int_equal(run_weftd(f, "a", out, sizeof(out)),
	                 WEFTD_EXIT_CONFIG);
	assert_stderr_has(f, want);
	/* From b, a is somewhere else: fine. */
	assert_int_equal(check_config(f, "b", out, sizeof(out)), 0);
	/* A name without a record (RFC 6761: .invalid never has one) is an
	 * error of the file; a resolver that does not answer makes it a
	 * warning. A node starting only warns of it: an orchestrator may
	 * publish another member's record when that member starts. */
	write_config(f, "[node b]\nhost = nonexistent.invalid\nport = 1\n");
	if (check_config(f, "a", out, sizeof(out)) == 0) {
		assert_stderr_has(f, "[node b] host: cannot resolve");
	} else {
		snprintf(want, sizeof(want),
		         "%s:7: [node b] host: 'nonexistent.invalid' does not "
		         "resolve",
		         f->config);
		assert_stderr_has(f, want);
		assert_int_equal(run_weftd(f, "a", out, sizeof(out)), 0);
		assert_stderr_has(f, want);
		assert_int_equal(strncmp(out, "weftd ready", 11), 0);
	}
}

/* [weftd] log_format: the daemon's own lines in each form. */
static void
test_log_format_shapes_the_daemons_lines(void **state)
{
	static const char *const forms[][2] = {
	    {"logfmt", " level=info msg=\"weftd: node a of cluster c ready"},
	    {"json", "\",\"level\":\"info\",\"msg\":\"weftd: node a of "
	             "cluster c ready"},
	    {"text", " weft info: weftd: node a of cluster c ready"},
	};
	struct fixture *f = *state;
	char out[256], extra[128];
	size_t i;

	for (i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		snprintf(extra, sizeof(extra), "[weftd]\nlog_format = %s\n",
		         forms[i][0]);
		write_config(f, extra);
		assert_int_equal(run_weftd(f, "a", out, sizeof(out)), 0);
		assert_stderr_has(f, forms[i][1]);
	}
	/* Every line of the JSON form is one object with the time first. */
	write_config(f, "[weftd]\nlog_format = json\n");
	assert_int_equal(run_weftd(f, "a", out, sizeof(out)), 0);
	{
		char line[1024];
		FILE *fp = fopen(f->err, "r");
		int lines = 0;

		assert_non_null(fp);
		while (lines < 100 && fgets(line, sizeof(line), fp) != NULL) {
			lines++;
			assert_int_equal(strncmp(line, "{\"ts\":\"20", 9), 0);
			assert_string_equal(line + strlen(line) - 3, "\"}\n");
		}
		fclose(fp);
		assert_true(lines >= 2);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_every_configuration_error_exits_78_with_file_and_line,
	        setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_one_grammar_in_weftd_and_kv_sections, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_per_node_weftd_section_overrides_the_shared_one, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_check_refuses_what_would_break_the_node, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_check_refuses_members_the_file_limit_cannot_hold, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_check_resolves_hosts_and_binds_its_own, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_log_format_shapes_the_daemons_lines, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
