/* bench_exec.c: see bench_exec.h. */
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bench_exec.h"

extern char **environ;

int
run_bench(char **args)
{
	char *argv[32] = {WBENCH_EXE};
	pid_t pid;
	int status, i;

	for (i = 0; args[i] != NULL && i < 28; i++)
		argv[i + 1] = args[i];
	/* A failing run ends well within the test's own time limit. */
	argv[++i] = "--timeout";
	argv[++i] = "20";
	argv[i + 1] = NULL;
	assert_int_equal(
	    posix_spawn(&pid, WBENCH_EXE, NULL, NULL, argv, environ), 0);
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

void
remove_dir(const char *dir)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

bool
gen_certs(char *dir, const char *ids)
{
	char cmd[512];

	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
	         "sh %s/scripts/gen-certs.sh %s %s >/dev/null 2>&1",
	         WEFT_SOURCE_DIR, dir, ids);
	if (system("openssl version >/dev/null 2>&1") == 0 && system(cmd) == 0)
		return true;
	remove_dir(dir);
	return false;
}
