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

#include "procs.h"

#define EXIT_CONFIG 78

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
	f->port = wt_free_port();
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
    {"[kv]\nwrite_quorum = 5\n",
     ":7: [kv] write_quorum: 5 is more than the 1 members"},
    {"[kv]\nmax_value = 16 MQ\n", ":7: [kv] max_value: not a size"},
    {"[weftd b]\nmetrics_listen = 127.0.0.1:0\n",
     ":6: [weftd b]: no such node"},
    {"[wefd]\nload = on\n", ":6: unknown section [wefd]"},
    {"[limits]\nrequest_timeout = 5 parsecs\n",
     ":7: [limits] request_timeout: not a duration"},
    {"this is not ini\n", ":6: syntax error"},
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
		                 EXIT_CONFIG);
		snprintf(want, sizeof(want), "%s%s", f->config,
		         bad_cases[i].expect);
		assert_stderr_has(f, want);
		/* --check-config says the same, without starting. */
		assert_int_equal(check_config(f, "a", out, sizeof(out)),
		                 EXIT_CONFIG);
		assert_stderr_has(f, want);
	}
	/* An id the file does not list, and a file that is not there. */
	write_config(f, "");
	assert_int_equal(run_weftd(f, "nobody", out, sizeof(out)), EXIT_CONFIG);
	assert_stderr_has(f, "unknown node id 'nobody'");
	unlink(f->config);
	assert_int_equal(run_weftd(f, "a", out, sizeof(out)), EXIT_CONFIG);
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
	                "write_quorum = majority\n");
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
	uint16_t mport = wt_free_port();
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
