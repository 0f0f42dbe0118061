/* SPDX-License-Identifier: MIT */
/*
 * weft-bench: throughput and latency of weft's pipeline over TCP, beside a
 * raw-socket reference. See `weft-bench --help` and docs/BENCHMARKS.md.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <weft/core.h>

#include "wbench.h"

int
main(int argc, char **argv)
{
	wbench_opts o;

	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("weft-bench %s\n", weft_version());
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		wbench_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	/* A peer that goes away must fail a write, not kill the process. */
	signal(SIGPIPE, SIG_IGN);
	wbench_opts_default(&o);
	o.argc = argc;
	o.argv = argv;
	if (wbench_opts_parse(&o, argc - 1, argv + 1) != 0)
		return 2;
	return wbench_run(&o);
}
