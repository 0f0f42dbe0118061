/* SPDX-License-Identifier: MIT */
/* bench_exec.c: see bench_exec.h. */
#include <fcntl.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bench_exec.h"

extern char **environ;

int
run_bench(char **args)
{
	return run_bench_to(args, NULL, NULL);
}

int
run_bench_to(char **args, const char *out_path, const char *err_path)
{
	char *argv[32] = {WBENCH_EXE};
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int status, i;

	for (i = 0; args[i] != NULL && i < 28; i++)
		argv[i + 1] = args[i];
	/* A failing run ends well within the test's own time limit. */
	argv[++i] = "--timeout";
	argv[++i] = "20";
	argv[i + 1] = NULL;
	posix_spawn_file_actions_init(&fa);
	if (out_path != NULL)
		posix_spawn_file_actions_addopen(
		    &fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (err_path != NULL)
		posix_spawn_file_actions_addopen(
		    &fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_int_equal(
	    posix_spawn(&pid, WBENCH_EXE, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

void
read_json(const char *path, char *text, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(text, 1, len - 1, f);
	text[n] = '\0';
	fclose(f);
	unlink(path);
}

int
bench_count_of(const char *text, const char *key)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, key)) != NULL; p++)
		n++;
	return n;
}

/* bench_json_value reads the number after key, from where p points. */
double
bench_json_value(const char *p, const char *key)
{
	const char *k = strstr(p, key);

	assert_non_null(k);
	return strtod(k + strlen(key), NULL);
}

void
check_cluster_run(const char *run)
{
	/* Every request sent was answered exactly once (an answer may be
	 * an error: that is a figure, reported, not a failure of the run). */
	assert_true(bench_json_value(run, "\"sent\": ") > 0);
	assert_true(bench_json_value(run, "\"lost\": ") == 0);
	assert_true(bench_json_value(run, "\"duplicates\": ") == 0);
	assert_true(bench_json_value(run, "\"sent\": ") ==
	            bench_json_value(run, "\"replies\": "));
	assert_true(bench_json_value(run, "\"p50_us\": ") <=
	            bench_json_value(run, "\"p95_us\": "));
	assert_true(bench_json_value(run, "\"p95_us\": ") <=
	            bench_json_value(run, "\"p99_us\": "));
	assert_true(bench_json_value(run, "\"p99_us\": ") <=
	            bench_json_value(run, "\"p999_us\": "));
	assert_true(bench_json_value(run, "\"p999_us\": ") <=
	            bench_json_value(run, "\"max_us\": "));
	assert_true(bench_json_value(run, "\"threads\": ") >= 3);
}
