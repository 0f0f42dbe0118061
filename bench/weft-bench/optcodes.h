/* SPDX-License-Identifier: MIT */
/* optcodes.h: the codes of weft-bench's options, shared by the table
 * that lists them (opts.c) and the code that applies them (optset.c). */
#ifndef WBENCH_OPTCODES_H
#define WBENCH_OPTCODES_H

#include "wbench.h"

enum opt_code {
	O_SIZE = 256,
	O_COUNT,
	O_WARMUP,
	O_WARMUP_COUNT,
	O_IMPL,
	O_REPEAT,
	O_BATCH,
	O_BUSY_POLL,
	O_SEED,
	O_VERIFY,
	O_JSON,
	O_CSV,
	O_MD,
	O_TLS,
	O_TLS_COMPARE,
	O_QUIET,
	O_TIMEOUT,
	O_LISTEN,
	O_CONNECT,
	O_PEER,
	O_PEERS,
	O_OUTSTANDING,
	O_DURATION,
	O_IO,
	O_CLIENTS,
	O_MIXES,
	O_KEYS,
	O_HOSTS,
	O_CLUSTER_NAME,
	O_COORDINATOR,
	O_NETNS,
	O_WEFTD,
	O_PLOT,
	O_RATE,
	O_SLOW_FRACTION,
	O_SLOW_MS,
	O_CLIENT,
	O_HANDLERS,
	O_WORKLOAD,
	O_DISTRIBUTION,
	O_RECORDS,
	O_OPERATIONS,
	O_THREADS,
	O_SCAN_LENGTH,
	O_PROBE,
	O_FLOOD_IDLE,
	O_FLOOD_CAP,
	O_SESSIONS,
	O_COMPRESSION,
	O_PAYLOAD,
	O_LARGE_SHARE,
	O_LARGE_SIZE,
	O_CONSISTENCY,
	/* Options of the processes the node workloads start. */
	O_NODE,
	O_CLIENT_INDEX,
	O_KV,
	O_READ_PCT,
	O_NCLIENTS,
	O_IN_FLIGHT,
	O_HELP,
};

/* wbench__opt_apply applies one option's value: 0, or -1 for a bad one. */
int wbench__opt_apply(wbench_opts *o, int code, const char *arg);
/* wbench__opts_finish fills the workload's defaults and checks the
 * options together: 0, or -1 with a message on stderr. */
int wbench__opts_finish(wbench_opts *o);

#endif
