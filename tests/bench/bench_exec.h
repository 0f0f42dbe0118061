/* SPDX-License-Identifier: MIT */
/*
 * bench_exec.h: what the tests that run the weft-bench binary share:
 * running it and reading its JSON (certificates: support/certs.h).
 * WBENCH_EXE and WEFT_SOURCE_DIR come from CMake.
 */
#ifndef WEFT_TESTS_BENCH_EXEC_H
#define WEFT_TESTS_BENCH_EXEC_H

#include <stdbool.h>
#include <stddef.h>

/* run_bench runs weft-bench with args (NULL-terminated, at most 28) and a
 * 20 s --timeout, and returns its exit status. */
int run_bench(char **args);
/* run_bench_to is run_bench with its standard output and error written
 * to out_path and err_path (NULL: inherited). */
int run_bench_to(char **args, const char *out_path, const char *err_path);

/* read_json reads the file at path into text (NUL-terminated) and removes
 * it. */
void read_json(const char *path, char *text, size_t len);

/* bench_count_of counts the occurrences of key in text. */
int bench_count_of(const char *text, const char *key);

/* bench_json_value reads the number after key, from where p points (the
 * key must be there). */
double bench_json_value(const char *p, const char *key);

/* check_cluster_run checks one run of a --json report: every request sent
 * was answered exactly once, and the percentiles are ordered. */
void check_cluster_run(const char *run);

#endif
