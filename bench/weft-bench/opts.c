/* SPDX-License-Identifier: MIT */
/*
 * opts.c: weft-bench's command line. One table lists every option with
 * the workloads it applies to and its help there, so that the help of a
 * workload shows what it takes and an option it does not take is an
 * error, not silently ignored.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optcodes.h"
#include "wbench.h"

#define BIT(w) (1u << (w))
#define OT BIT(WBENCH_THROUGHPUT)
#define OL BIT(WBENCH_LATENCY)
#define OC BIT(WBENCH_CLUSTER)
#define OR BIT(WBENCH_RPC)
#define OM BIT(WBENCH_MIX)
#define OY BIT(WBENCH_YCSB)
#define OS BIT(WBENCH_SMOKE)
/* The processes the node workloads start. */
#define ON                                                                     \
	(BIT(WBENCH_CLUSTER_NODE) | BIT(WBENCH_RPC_CLIENT) |                   \
	 BIT(WBENCH_YCSB_CLIENT) | BIT(WBENCH_SMOKE_CLIENT))
#define PUBLIC (OT | OL | OC | OR | OM | OY | OS)
#define NODES (OC | OR | OM | OY | OS | ON)

/* One option of some workloads. An option may have several entries, with
 * the help for each set of workloads; the first entry of a name is the
 * one getopt sees. */
typedef struct optdef {
	const char *name;
	int code;
	unsigned mask;    /* the workloads it applies to */
	const char *arg;  /* its argument, or NULL */
	const char *help; /* NULL: not listed */
} optdef;

static const optdef opt_table[] = {
    {"size", O_SIZE, OT | OL, "S",
     "payload bytes per message (64, 1K, 64K; default 64)"},
    {"size", O_SIZE, OC | OR | ON, "S",
     "payload bytes (default 64; up to 256M, above 16M with --io\n"
     "loop only); from 64K on, the table adds MB/s"},
    {"size", O_SIZE, OM, "S", "value bytes (default 1K)"},
    {"size", O_SIZE, OY, "S", "record bytes (default 1K)"},
    {"size", O_SIZE, OS, "S", "value bytes (default 100)"},
    {"count", O_COUNT, OT | OL, "N",
     "messages (round trips) measured (1000, 10k, 2M; default:\n"
     "throughput min(10M, 4 GiB/S), latency 50k)"},
    {"warmup", O_WARMUP, OT | OL, "SEC",
     "seconds of messages before the measured ones (default:\n"
     "--warmup-count)"},
    {"warmup", O_WARMUP, OC | OR | OM | ON, "SEC",
     "seconds before the measured window (default 1)"},
    {"warmup", O_WARMUP, OY, "SEC",
     "seconds of the run phase not measured (default 0)"},
    {"warmup-count", O_WARMUP_COUNT, OT | OL, "N",
     "messages before the measured ones (default: a tenth of\n"
     "--count, at most 1M)"},
    {"impl", O_IMPL, OT | OL, "I",
     "weft (default), raw (blocking-socket reference) or both"},
    {"impl", O_IMPL, OR, "I",
     "msvc (default: weft's messaging service, on each --io),\n"
     "pipeline (a server and clients of weft's channels, frame and\n"
     "envelope codecs), or both"},
    {"impl", O_IMPL, BIT(WBENCH_CLUSTER_NODE), "I", NULL},
    {"repeat", O_REPEAT, OT | OL, "R",
     "runs per implementation; medians are reported (default 1)"},
    {"repeat", O_REPEAT, OC | OR | OM, "R",
     "runs per point and I/O model; the run of the median op rate is "
     "reported, with the lowest and highest (default 1)"},
    {"batch", O_BATCH, OT | OL, "B",
     "messages the weft sender writes per flush (default 64)"},
    {"busy-poll", O_BUSY_POLL, OT | OL, "US",
     "weft's loops (both halves) poll without sleeping for US\n"
     "microseconds after their last work (weft_loop_set_busy_poll;\n"
     "default 0: they sleep at once); cpu us/rt shows its cost"},
    {"seed", O_SEED, OT | OL, "X", "payload pattern seed (default 1)"},
    {"seed", O_SEED, NODES, "X",
     "payload pattern and request choice seed (default 1)"},
    {"verify", O_VERIFY, OT | OL, NULL,
     "check every payload byte, not only the sequence numbers"},
    {"json", O_JSON, PUBLIC, "FILE",
     "every figure, with the version, machine and command line"},
    {"csv", O_CSV, OT | OL | OC | OR | OM, "FILE",
     "one CSV row per run or series point"},
    {"md", O_MD, OC | OR | OM | OY | OS, "FILE",
     "the table in Markdown (docs/BENCHMARKS.md)"},
    {"tls", O_TLS, OT | OL, "DIR",
     "weft halves over mutual TLS: DIR/ca.crt, n0.crt/.key (the\n"
     "measuring half), n1.crt/.key (the load half); raw stays plain"},
    {"tls", O_TLS, NODES, "DIR",
     "mutual TLS with DIR/ca.crt, DIR/nI.crt and nI.key for node I,\n"
     "cI.crt and cI.key for client I (scripts/gen-certs.sh)"},
    {"tls-compare", O_TLS_COMPARE, OT | OL, NULL,
     "with --tls: weft plaintext and weft TLS alternately, and the\n"
     "TLS/plaintext ratio"},
    {"quiet", O_QUIET, PUBLIC | ON, NULL, "no progress lines on stderr"},
    {"timeout", O_TIMEOUT, PUBLIC | ON, "SEC",
     "fail a run that takes longer (default 600)"},
    {"listen", O_LISTEN, OT | OL, "ADDR",
     "run only the measuring half (the receiver, or the pinger)"},
    {"connect", O_CONNECT, OT | OL, "ADDR",
     "run only the load half (the sender, or the echoer), until\n"
     "the measuring half closes the connection"},
    {"peer", O_PEER, OT | OL, "P",
     "process (default) or thread: where the load half runs"},
    {"peers", O_PEERS, OC, "P[,P..]", "node counts to run (default 3)"},
    {"peers", O_PEERS, OM | OY, "N[,N..]", "nodes (default 3,5)"},
    {"peers", O_PEERS, OS, "N[,N..]",
     "nodes (default 1,3: a standalone node, a cluster)"},
    {"peers", O_PEERS, ON, "N", NULL},
    {"outstanding", O_OUTSTANDING, OC, "K",
     "requests in flight per node (default 64)"},
    {"outstanding", O_OUTSTANDING, OR, "D[,D..]",
     "requests in flight per client (default 1,32); with --client\n"
     "sync, the client's threads, one blocking call each"},
    {"outstanding", O_OUTSTANDING, OM, "D",
     "requests in flight per client (default 32)"},
    {"outstanding", O_OUTSTANDING, OS, "W",
     "requests in flight per client (default 1000)"},
    {"outstanding", O_OUTSTANDING, ON, "K", NULL},
    {"duration", O_DURATION, OC | OR | OM | ON, "SEC",
     "the measured window (default 2)"},
    {"duration", O_DURATION, OY, "SEC",
     "the run phase (default 10; with --operations, until they\n"
     "are done or this time is up)"},
    {"io", O_IO, OC | OR | OM | OY | OS | ON, "M",
     "loop (weft's messaging service), threads (the thread-per-peer\n"
     "baseline) or both (default)"},
    {"clients", O_CLIENTS, OC, "C",
     "with --hosts: C local client processes keep K echo requests\n"
     "each in flight round-robin over the nodes"},
    {"clients", O_CLIENTS, OR, "C[,C..]", "client processes (default 1,4,16)"},
    {"clients", O_CLIENTS, OM, "C", "client processes (default 8)"},
    {"clients", O_CLIENTS, OY, "C",
     "client processes sharing --threads (default 2)"},
    {"clients", O_CLIENTS, OS, "C[,C..]",
     "clients, each a session (connection) of its own, in one\n"
     "process (default 1,10,20)"},
    {"sessions", O_SESSIONS, OM | BIT(WBENCH_CLUSTER_NODE), "S",
     "sessions per client process, each a connection of its own to\n"
     "one member with --outstanding requests in flight (default:\n"
     "one connection to every member)"},
    {"mixes", O_MIXES, OM, "R[,R..]", "percent of gets (default 100,99,50,0)"},
    {"keys", O_KEYS, OM, "K", "keys, loaded first (default 20000)"},
    {"sessions", O_SESSIONS, OS, "S",
     "sessions of the one client process, the same as --clients S"},
    {"keys", O_KEYS, OS, "N", "keys each client creates (default 10000)"},
    {"keys", O_KEYS, ON, "N", NULL},
    {"hosts", O_HOSTS, OC, "[ID@]H:P,..",
     "the cluster workload on weftd nodes run elsewhere, with\n"
     "[weftd] load = on (ids n0, n1.. by default)"},
    {"hosts", O_HOSTS, OM, "[ID@]H:P,..",
     "C local clients against weftd nodes run elsewhere, with\n"
     "[kv] on (ids n0, n1.. by default); one --mixes value"},
    {"hosts", O_HOSTS, ON, "LIST", NULL},
    {"cluster-name", O_CLUSTER_NAME, OC | OM | ON, "N",
     "the nodes' [cluster] name (default weft-bench)"},
    {"coordinator", O_COORDINATOR, OC, "ID@H:P",
     "with --hosts: join as member ID, listening on H:P (the nodes'\n"
     "file lists it: the load verb is for members only)"},
    {"netns", O_NETNS, OC, NULL,
     "(root) P weftd nodes, each in a network namespace of its\n"
     "own, joined by veth pairs; exits 77 where not allowed"},
    {"weftd", O_WEFTD, OC, "PATH",
     "the weftd binary for --netns (default: next to weft-bench)"},
    {"plot", O_PLOT, OC, "FILE",
     "op rate and p99 against P for both I/O models (.svg, or .png "
     "with gnuplot)"},
    {"plot", O_PLOT, OM, "FILE",
     "op rate, and p99 of gets and puts, against the mix (.svg, or "
     ".png with gnuplot)"},
    {"plot", O_PLOT, OY, "FILE",
     "throughput, and p99 per operation, per workload (.svg, or .png "
     "with gnuplot)"},
    {"rate", O_RATE, OC | OR | OM | BIT(WBENCH_CLUSTER_NODE), "R",
     "open loop: R requests/s per node or client, latency from each\n"
     "one's intended send time (default: closed loop)"},
    {"slow-fraction", O_SLOW_FRACTION, OC | OR | BIT(WBENCH_CLUSTER_NODE), "F",
     "that share of requests takes --slow-ms more in the handler"},
    {"slow-ms", O_SLOW_MS, OC | OR | BIT(WBENCH_CLUSTER_NODE), "MS",
     "their extra handling time (default 1; weft runs the verb on\n"
     "its worker pool then)"},
    {"client", O_CLIENT, OR, "M[,M..]",
     "async (default: requests kept in flight from callbacks) or\n"
     "sync (one blocking call per thread), or both"},
    {"handlers", O_HANDLERS, OR, "H[,H..]",
     "inline (default: on the server's loop) or pool (handed to its\n"
     "worker pool), or both; pool needs --io loop"},
    {"handlers", O_HANDLERS, BIT(WBENCH_CLUSTER_NODE), "H", NULL},
    {"probe", O_PROBE, OR, NULL,
     "fairness: a probe client (one request in flight) and two\n"
     "members asking each other, first alone, then while the C\n"
     "clients flood the server with D pipelined requests each;\n"
     "prints the probe's and the members' p50/p99 both times"},
    {"probe", O_PROBE, BIT(WBENCH_CLUSTER_NODE), NULL, NULL},
    {"flood-idle", O_FLOOD_IDLE, OR, NULL,
     "with --probe: the flooding clients run under SCHED_IDLE, so that\n"
     "on a small machine they take no CPU the server and the probe\n"
     "want, as clients on other hosts would not"},
    {"flood-idle", O_FLOOD_IDLE, BIT(WBENCH_CLUSTER_NODE), NULL, NULL},
    {"flood-cap", O_FLOOD_CAP, OR, "N",
     "with --probe: the flooding clients call a verb of their own,\n"
     "the echo's twin, capped at N requests in progress on the\n"
     "server (0: no cap), so that the probe's verb is measured\n"
     "beside one hot verb past its cap"},
    {"flood-cap", O_FLOOD_CAP, BIT(WBENCH_CLUSTER_NODE), "N", NULL},
    {"workload", O_WORKLOAD, OY, "W[,W..]",
     "a (50% reads, 50% updates; default), b (95/5), c (reads),\n"
     "d (95% reads of the latest, 5% inserts), e (95% scans, 5%\n"
     "inserts), f (50% reads, 50% read-modify-writes)"},
    {"distribution", O_DISTRIBUTION, OY | BIT(WBENCH_YCSB_CLIENT), "D",
     "zipfian, uniform or latest (default: latest for d,\n"
     "zipfian otherwise)"},
    {"records", O_RECORDS, OY | BIT(WBENCH_YCSB_CLIENT), "N",
     "records loaded before the run phase (default 100,000)"},
    {"operations", O_OPERATIONS, OY | BIT(WBENCH_YCSB_CLIENT), "N",
     "operations in the run phase (default: --duration)"},
    {"threads", O_THREADS, OY | BIT(WBENCH_YCSB_CLIENT), "T",
     "operations in flight in all, as YCSB's T client threads\n"
     "(default 32)"},
    {"scan-length", O_SCAN_LENGTH, OY | BIT(WBENCH_YCSB_CLIENT), "N",
     "workload e: scans of 1 to N records, uniform (default 100)"},
    {"sessions", O_SESSIONS, OY | BIT(WBENCH_YCSB_CLIENT), "S",
     "sessions per client process, each a client service of its\n"
     "own connected to every member; the threads are spread over\n"
     "them (default 1)"},
    {"compression", O_COMPRESSION, OC | OR | ON, "C",
     "none (default), lz4 or zstd: what every node and client of\n"
     "weft's messaging service asks for on its connections (not the\n"
     "thread-per-peer baseline, not --impl pipeline); the table adds\n"
     "the ratio achieved and CPU per MB"},
    {"payload", O_PAYLOAD, OC | OR | ON, "P",
     "pattern (default: seeded xorshift bytes), text (JSON-like\n"
     "records of a small vocabulary, which LZ4 shrinks ~3.5x) or\n"
     "random (seeded pseudo-random bytes, incompressible)"},
    {"large-share", O_LARGE_SHARE, OC | BIT(WBENCH_CLUSTER_NODE), "F",
     "that share of the requests carries --large-size bytes; the\n"
     "table adds the small and the large requests' p50 and p99"},
    {"large-size", O_LARGE_SIZE, OC | BIT(WBENCH_CLUSTER_NODE), "S",
     "the large requests' payload bytes (default 4M; up to 256M)"},
    {"consistency", O_CONSISTENCY,
     OM | OY | BIT(WBENCH_CLUSTER_NODE) | BIT(WBENCH_YCSB_CLIENT), "C",
     "one, quorum or all: how many replicas each get reads, the\n"
     "newest answering (weft's service and the baseline alike;\n"
     "default: one, the receiving node's); mix then prints a\n"
     "cassandra-stress-shaped summary under each row"},
    {"in-flight", O_IN_FLIGHT, ON, "N", NULL},
    {"node", O_NODE, ON, "I", NULL},
    {"client-index", O_CLIENT_INDEX, ON, "I", NULL},
    {"kv", O_KV, BIT(WBENCH_CLUSTER_NODE), NULL, NULL},
    {"read-pct", O_READ_PCT, BIT(WBENCH_CLUSTER_NODE), "P", NULL},
    {"nclients", O_NCLIENTS, ON, "C", NULL},
    {"help", O_HELP, PUBLIC | ON, NULL, "this help"},
};

#define NOPTS (sizeof(opt_table) / sizeof(opt_table[0]))

static const char *const workload_names[WBENCH_WORKLOADS] = {
    "throughput", "latency",     "cluster",     "rpc",
    "mix",        "ycsb",        "smoke",       "cluster-node",
    "rpc-client", "ycsb-client", "smoke-client"};

static const char *const workload_help[] = {
    "one connection through weft's pipeline, one way, beside raw sockets",
    "the same connection, ping-pong round trips",
    "P nodes asking each other: weft's loop against thread-per-peer",
    "C clients against one server: sync or async clients, handlers\n"
    "              inline or on a worker pool (Kudu's RPC experiment)",
    "the replicated key-value service under get/put mixes",
    "YCSB's core workloads A to F on the key-value service",
    "zk-smoketest's latency test: create, set, get, delete keys",
};

const char *
wbench_workload_name(enum wbench_workload w)
{
	return (unsigned)w < WBENCH_WORKLOADS ? workload_names[w] : "?";
}

const char *
wbench_impl_name(enum wbench_impl impl)
{
	switch (impl) {
	case WBENCH_IMPL_WEFT:
		return "weft";
	case WBENCH_IMPL_RAW:
		return "raw";
	default:
		return "both";
	}
}

void
wbench_usage(FILE *out)
{
	fputs("usage: weft-bench WORKLOAD [options]\n", out);
	for (int w = 0; w <= WBENCH_SMOKE; w++)
		fprintf(out, "  %-11s %s\n", workload_names[w],
		        workload_help[w]);
	fputs("weft-bench WORKLOAD --help lists its options; "
	      "docs/BENCHMARKS.md the method.\n",
	      out);
}

/* print_help prints one option: its name and argument, then its help,
 * continuation lines indented. */
static void
print_help(FILE *out, const optdef *d)
{
	char head[40];
	const char *p = d->help;

	snprintf(head, sizeof(head), "--%s%s%s", d->name, d->arg ? " " : "",
	         d->arg ? d->arg : "");
	fprintf(out, "  %-22s", head);
	if (strlen(head) > 22)
		fprintf(out, "\n  %-22s", "");
	while (*p) {
		size_t len = strcspn(p, "\n");

		fprintf(out, " %.*s\n", (int)len, p);
		p += len + (p[len] == '\n');
		if (*p)
			fprintf(out, "  %-22s", "");
	}
}

void
wbench_usage_workload(FILE *out, enum wbench_workload w)
{
	fprintf(out, "usage: weft-bench %s [options]\n  %s\n",
	        wbench_workload_name(w),
	        w <= WBENCH_SMOKE ? workload_help[w]
	                          : "(started by weft-bench)");
	for (size_t i = 0; i < NOPTS; i++) {
		bool first = true;

		if (!(opt_table[i].mask & BIT(w)) || opt_table[i].help == NULL)
			continue;
		for (size_t j = 0; j < i && first; j++)
			first = strcmp(opt_table[j].name, opt_table[i].name) ||
			        !(opt_table[j].mask & BIT(w));
		if (first)
			print_help(out, &opt_table[i]);
	}
}

void
wbench_opts_default(wbench_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->impl = WBENCH_IMPL_WEFT;
	o->size = 64;
	o->seed = 1;
	o->repeat = 1;
	o->batch = 64;
	o->timeout_ms = 600000;
	o->addr = "127.0.0.1:0";
	o->warmup_count = UINT64_MAX; /* auto */
	o->io = WBENCH_IO_BOTH;
	o->peers = 3;
	o->peer_list[0] = 3;
	o->npeer_list = 1;
	o->outstanding = 64;
	o->depth_list[0] = 64;
	o->ndepth_list = 1;
	o->client_list[0] = 1;
	o->client_list[1] = 4;
	o->client_list[2] = 16;
	o->nclient_list = 3;
	o->mix_list[0] = 100;
	o->mix_list[1] = 99;
	o->mix_list[2] = 50;
	o->mix_list[3] = 0;
	o->nmix_list = 4;
	o->keys = 20000;
	o->warmup_s = 1;
	o->duration_s = 2;
	o->slow_ms = 1;
	o->client_modes = WBENCH_CLIENT_ASYNC;
	o->handler_modes = WBENCH_HANDLERS_INLINE;
	o->rpc_impls = WBENCH_RPC_MSVC;
	o->flood_cap = -1;
	o->ycsb_list[0] = 'a';
	o->nycsb_list = 1;
	o->records = 100000;
	o->threads = 32;
	o->scan_length = 100;
}

static const optdef *
find_def(int code)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (opt_table[i].code == code)
			return &opt_table[i];
	return NULL;
}

/* applies_to is the set of workloads an option (all its entries) is for. */
static unsigned
applies_to(int code)
{
	unsigned mask = 0;

	for (size_t i = 0; i < NOPTS; i++)
		if (opt_table[i].code == code)
			mask |= opt_table[i].mask;
	return mask;
}

/* not_here explains why an option does not apply to the workload. */
static void
not_here(const wbench_opts *o, int code)
{
	unsigned mask = applies_to(code) & PUBLIC;

	fprintf(stderr, "weft-bench %s: --%s does not apply to %s",
	        wbench_workload_name(o->workload), find_def(code)->name,
	        wbench_workload_name(o->workload));
	for (int w = 0, n = 0; w <= WBENCH_SMOKE; w++)
		if (mask & BIT(w))
			fprintf(stderr, "%s%s", n++ ? ", " : " (only to ",
			        workload_names[w]);
	fprintf(stderr, "%s\n", mask ? ")" : "");
}

/* make_longopts builds getopt's table: one entry per name. */
static struct option *
make_longopts(void)
{
	struct option *lo = calloc(NOPTS + 1, sizeof(*lo));
	size_t n = 0;

	for (size_t i = 0; lo != NULL && i < NOPTS; i++) {
		bool seen = false;

		for (size_t j = 0; j < n && !seen; j++)
			seen = strcmp(lo[j].name, opt_table[i].name) == 0;
		if (!seen)
			lo[n++] = (struct option){
			    opt_table[i].name,
			    opt_table[i].arg ? required_argument : no_argument,
			    NULL, opt_table[i].code};
	}
	return lo;
}

static int
parse_workload(wbench_opts *o, const char *name)
{
	for (int w = 0; w < WBENCH_WORKLOADS; w++)
		if (strcmp(name, workload_names[w]) == 0) {
			o->workload = (enum wbench_workload)w;
			return 0;
		}
	fprintf(stderr,
	        "weft-bench: unknown workload '%s' (weft-bench --help "
	        "lists them)\n",
	        name);
	return -1;
}

/* parse_loop reads the options after the workload's name. */
static int
parse_loop(wbench_opts *o, int argc, char **argv, const struct option *lo)
{
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == O_HELP) {
			wbench_usage_workload(stdout, o->workload);
			exit(0);
		}
		if (c == '?' || c == ':') {
			fprintf(stderr, "weft-bench %s: bad option '%s'\n",
			        argv[0], argv[optind - 1]);
			return -1;
		}
		if (!(applies_to(c) & BIT(o->workload))) {
			not_here(o, c);
			return -1;
		}
		if (wbench__opt_apply(o, c, optarg) != 0) {
			fprintf(
			    stderr, "weft-bench %s: bad value for --%s: '%s'\n",
			    argv[0], find_def(c)->name, optarg ? optarg : "");
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "weft-bench %s: unexpected '%s'\n", argv[0],
		        argv[optind]);
		return -1;
	}
	return 0;
}

int
wbench_opts_parse(wbench_opts *o, int argc, char **argv)
{
	struct option *lo;
	int rv;

	if (argc < 1 || parse_workload(o, argv[0]) != 0)
		return -1;
	if ((lo = make_longopts()) == NULL)
		return -1;
	rv = parse_loop(o, argc, argv, lo);
	free(lo);
	if (rv != 0) {
		fprintf(stderr, "(weft-bench %s --help lists its options)\n",
		        argv[0]);
		return -1;
	}
	return wbench__opts_finish(o);
}
