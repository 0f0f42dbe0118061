/*
 * weft-bench cluster --hosts against two weftd nodes started here: the
 * local clients' requests are all answered exactly once. No speed is
 * asserted.
 */
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

extern char **environ;

typedef struct node {
	pid_t pid;
	FILE *out; /* its standard output */
	unsigned port;
} node;

/* start_weftd starts node id of config and reads its ready line. */
static void
start_weftd(node *n, const char *config, const char *id)
{
	char *argv[] = {WEFTD_EXE, "--config", (char *)config,
	                "--id",    (char *)id, NULL};
	posix_spawn_file_actions_t fa;
	char line[256];
	int fds[2];

	assert_int_equal(pipe(fds), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	assert_int_equal(
	    posix_spawn(&n->pid, WEFTD_EXE, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	n->out = fdopen(fds[0], "r");
	assert_non_null(n->out);
	/* "weftd ready node=ID port=P metrics=..." */
	assert_non_null(fgets(line, sizeof(line), n->out));
	assert_non_null(strstr(line, "port="));
	n->port = (unsigned)atoi(strstr(line, "port=") + 5);
	assert_true(n->port > 0);
}

static void
stop_weftd(node *n)
{
	int status;

	kill(n->pid, SIGTERM);
	assert_int_equal(waitpid(n->pid, &status, 0), n->pid);
	fclose(n->out);
}

static int
run_bench(char **argv)
{
	pid_t pid;
	int status;

	assert_int_equal(
	    posix_spawn(&pid, WBENCH_EXE, NULL, NULL, argv, environ), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void
test_hosts_drives_weftd_nodes(void **state)
{
	char config[] = "/tmp/wbench-hosts-XXXXXX";
	char csv[] = "/tmp/wbench-csv-XXXXXX", hosts[128], text[1024];
	char *argv[] = {WBENCH_EXE,
	                "cluster",
	                "--hosts",
	                hosts,
	                "--cluster-name",
	                "wbtest",
	                "--clients",
	                "2",
	                "--outstanding",
	                "8",
	                "--warmup",
	                "0.1",
	                "--duration",
	                "0.3",
	                "--quiet",
	                "--csv",
	                csv,
	                "--timeout",
	                "20",
	                NULL};
	node a, b;
	FILE *f;
	size_t n;
	int fd = mkstemp(config);

	(void)state;
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("[cluster]\nname = wbtest\n[node n0]\nhost = 127.0.0.1\n"
	      "port = 0\n[node x1]\nhost = 127.0.0.1\nport = 0\n"
	      "[weftd]\nlog_level = warn\n",
	      f);
	fclose(f);
	close(mkstemp(csv));
	start_weftd(&a, config, "n0");
	start_weftd(&b, config, "x1");
	snprintf(hosts, sizeof(hosts), "127.0.0.1:%u,x1@127.0.0.1:%u", a.port,
	         b.port);
	assert_int_equal(run_bench(argv), 0);
	stop_weftd(&a);
	stop_weftd(&b);
	unlink(config);
	f = fopen(csv, "r");
	assert_non_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	unlink(csv);
	/* One row: 2 nodes, 2 clients x 8, no failed, lost or repeated
	 * request. */
	assert_non_null(strstr(text, "\ncluster,loop,0,64,2,2,8,,"));
	assert_int_equal(strcmp(text + n - 3, ",0\n"), 0);
}

/* Malformed lists are refused. */
static void
test_hosts_bad_lists(void **state)
{
	char *lists[] = {"127.0.0.1", "127.0.0.1:0", "h:1,",
	                 "@h:1",      "h:70000",     "h:1,h2"};
	char *argv[] = {WBENCH_EXE, "cluster", "--hosts", NULL, NULL};

	(void)state;
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		argv[3] = lists[i];
		assert_int_equal(run_bench(argv), 2);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hosts_drives_weftd_nodes),
	    cmocka_unit_test(test_hosts_bad_lists),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
