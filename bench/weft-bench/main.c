/* SPDX-License-Identifier: MIT */
/*
 * weft-bench: throughput and latency of weft's pipeline over TCP, beside a
 * raw-socket reference. See `weft-bench --help` and docs/BENCHMARKS.md.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include <weft/core.h>

#include "wbench.h"

/* raise_nofile lifts the file limit to its hard limit: mix --sessions
 * holds two descriptors per session in a client process, and a node
 * one per client connection. The processes it starts inherit it. */
static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			perror("weft-bench: setrlimit(RLIMIT_NOFILE)");
	}
}

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
	raise_nofile();
	wbench_opts_default(&o);
	o.argc = argc;
	o.argv = argv;
	if (wbench_opts_parse(&o, argc - 1, argv + 1) != 0)
		return 2;
	return wbench_run(&o);
}
