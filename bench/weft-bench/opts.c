/* SPDX-License-Identifier: MIT */
/* opts.c: weft-bench's command line. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbench.h"

void
wbench_usage(FILE *out)
{
	fputs(
	    "usage: weft-bench throughput|latency|cluster|rpc|mix [options]\n"
	    "  --size S        payload bytes per message (64, 1K, 64K; "
	    "default 64)\n"
	    "  --count N       messages (round trips) measured (1000, 10k, "
	    "2M;\n"
	    "                  default: throughput min(10M, 4 GiB/S), "
	    "latency 50k)\n"
	    "  --warmup N      messages before measuring (default: count/10,"
	    "\n                  at most 1M)\n"
	    "  --impl I        weft (default), raw (blocking-socket "
	    "reference) or both\n"
	    "  --repeat R      runs per implementation; medians are "
	    "reported (default 1)\n"
	    "  --batch B       messages the weft sender writes per flush "
	    "(default 64)\n"
	    "  --seed X        payload pattern seed (default 1)\n"
	    "  --verify        check every payload byte, not only the "
	    "sequence numbers\n"
	    "  --json FILE     write every figure to FILE\n"
	    "  --csv FILE      one CSV row per run or series (every "
	    "workload)\n"
	    "  --md FILE       cluster, rpc, mix: the table in Markdown "
	    "(docs/BENCHMARKS.md)\n"
	    "  --tls DIR       weft halves over mutual TLS: DIR/ca.crt, "
	    "n0.crt/.key (the\n"
	    "                  measuring half), n1.crt/.key (the load half); "
	    "raw stays plain\n"
	    "  --tls-compare   with --tls: weft plaintext and weft TLS "
	    "alternately, and the\n"
	    "                  TLS/plaintext ratio\n"
	    "  --quiet         no progress lines on stderr\n"
	    "  --timeout SEC   fail a run that takes longer (default 600)\n"
	    "  --listen ADDR   run only the measuring half (the receiver, or "
	    "the pinger)\n"
	    "  --connect ADDR  run only the load half (the sender, or the "
	    "echoer)\n"
	    "  --peer P        process (default) or thread: where the load "
	    "half runs\n"
	    "cluster: P node processes on loopback, each keeping K requests "
	    "in flight\nround-robin over the others, which echo the "
	    "payload:\n"
	    "  --peers P[,P..] node counts to run (default 3)\n"
	    "  --outstanding K requests in flight per node (default 64)\n"
	    "  --io M          loop (weft's messaging service), threads "
	    "(the thread-per-peer\n"
	    "                  baseline) or both (default)\n"
	    "  --warmup SEC    seconds before the window (default 1)\n"
	    "  --duration SEC  the measured window (default 2)\n"
	    "  --tls DIR       mutual TLS with DIR/ca.crt and DIR/nI.crt, "
	    "nI.key for node I\n"
	    "                  (scripts/gen-certs.sh DIR n0 n1 ...)\n"
	    "rpc: one server (n0) and C client processes, each keeping D "
	    "requests in flight:\n"
	    "  --clients C[,C..]   client counts (default 1,4,16)\n"
	    "  --outstanding D[,D..] requests in flight per client (default "
	    "1,32)\n"
	    "mix: the replicated key-value service on N nodes, C clients x D "
	    "requests in\nflight, gets and puts of --size byte values "
	    "(--io, --tls as for cluster):\n"
	    "  --peers N[,N..]     nodes (default 3,5)\n"
	    "  --mixes R[,R..]     percent of gets (default 100,99,50,0)\n"
	    "  --keys K            keys, loaded first (default 20000)\n"
	    "  --clients C         client processes (default 8), "
	    "--outstanding D (default 32)\n"
	    "cluster on other hosts or namespaces:\n"
	    "  --hosts [ID@]H:P,...  the cluster workload on weftd nodes run "
	    "elsewhere, with\n"
	    "                  [weftd] load = on (ids n0, n1.. by default); "
	    "with --clients C,\n"
	    "                  C local client processes keep K echo requests "
	    "each in flight\n"
	    "                  round-robin over them instead\n"
	    "  --netns         (root) P weftd nodes, each in a network "
	    "namespace of its own,\n"
	    "                  joined by veth pairs to a bridge; exits 77 "
	    "where not allowed\n"
	    "  --weftd PATH    the weftd binary for --netns (default: next to "
	    "weft-bench)\n"
	    "  --cluster-name N  the nodes' [cluster] name (default "
	    "weft-bench)\n"
	    "  --coordinator ID@H:P  join the --hosts cluster as member ID, "
	    "listening on H:P\n"
	    "                  (the nodes' file lists it: the load verb is "
	    "for members only)\n"
	    "  --plot FILE.png draw op rate and p99 against P for both I/O "
	    "models (gnuplot)\n"
	    "  --rate R        open loop: R requests/s per node, latency from "
	    "each one's\n"
	    "                  intended send time (K caps those in flight; "
	    "default: closed loop)\n"
	    "  --slow-fraction F, --slow-ms MS  that share of requests takes "
	    "MS more in the\n"
	    "                  handler (weft runs the verb on its worker "
	    "pool then)\n",
	    out);
}

const char *
wbench_workload_name(enum wbench_workload w)
{
	switch (w) {
	case WBENCH_THROUGHPUT:
		return "throughput";
	case WBENCH_LATENCY:
		return "latency";
	case WBENCH_CLUSTER:
		return "cluster";
	case WBENCH_RPC:
		return "rpc";
	case WBENCH_MIX:
		return "mix";
	default:
		return "cluster-node";
	}
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
	o->warmup = UINT64_MAX; /* auto */
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
}

/* parse_seconds reads a duration in seconds ("2", "0.5", "2s"). */
static int
parse_seconds(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v < 0 || v > 86400 || (*end && strcmp(end, "s")))
		return -1;
	*out = v;
	return 0;
}

static int
parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* parse_num reads a count with an optional suffix: k/M/G (10^3) or
 * K/Ki/KiB, M/Mi/MiB (2^10) when binary. */
static int
parse_num(const char *s, bool binary, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || s[0] == '-')
		return -1;
	if (*end == 'k' || *end == 'K')
		mul = binary ? 1024 : 1000;
	else if (*end == 'M' || *end == 'm')
		mul = binary ? 1024 * 1024 : 1000000;
	else if (*end == 'G' || *end == 'g')
		mul = binary ? 1024 * 1024 * 1024 : 1000000000;
	if (mul > 1)
		end++;
	if (*end == 'i')
		end++;
	if (*end == 'B' && binary)
		end++;
	if (*end != '\0' || (v && mul > UINT64_MAX / v))
		return -1;
	*out = v * mul;
	return 0;
}

static int
parse_impl(const char *s, enum wbench_impl *out)
{
	if (strcmp(s, "weft") == 0)
		*out = WBENCH_IMPL_WEFT;
	else if (strcmp(s, "raw") == 0)
		*out = WBENCH_IMPL_RAW;
	else if (strcmp(s, "both") == 0)
		*out = WBENCH_IMPL_BOTH;
	else
		return -1;
	return 0;
}

static const struct option long_opts[] = {
    {"size", required_argument, NULL, 's'},
    {"count", required_argument, NULL, 'n'},
    {"warmup", required_argument, NULL, 'w'},
    {"impl", required_argument, NULL, 'i'},
    {"repeat", required_argument, NULL, 'r'},
    {"batch", required_argument, NULL, 'b'},
    {"seed", required_argument, NULL, 'S'},
    {"verify", no_argument, NULL, 'V'},
    {"json", required_argument, NULL, 'j'},
    {"quiet", no_argument, NULL, 'q'},
    {"timeout", required_argument, NULL, 't'},
    {"listen", required_argument, NULL, 'l'},
    {"connect", required_argument, NULL, 'c'},
    {"peer", required_argument, NULL, 'p'},
    {"peers", required_argument, NULL, 'P'},
    {"outstanding", required_argument, NULL, 'K'},
    {"duration", required_argument, NULL, 'D'},
    {"io", required_argument, NULL, 'I'},
    {"node", required_argument, NULL, 'N'},
    {"tls", required_argument, NULL, 'T'},
    {"tls-compare", no_argument, NULL, 'T' + 256},
    {"csv", required_argument, NULL, 'j' + 256},
    {"md", required_argument, NULL, 'j' + 512},
    {"hosts", required_argument, NULL, 'H'},
    {"cluster-name", required_argument, NULL, 'H' + 256},
    {"coordinator", required_argument, NULL, 'H' + 512},
    {"netns", no_argument, NULL, 'E'},
    {"weftd", required_argument, NULL, 'E' + 256},
    {"plot", required_argument, NULL, 'G'},
    {"rate", required_argument, NULL, 'R'},
    {"slow-fraction", required_argument, NULL, 'F'},
    {"slow-ms", required_argument, NULL, 'M'},
    {"clients", required_argument, NULL, 'C'},
    {"mixes", required_argument, NULL, 'X'},
    {"keys", required_argument, NULL, 'Y'},
    {"kv", no_argument, NULL, 'Z'},
    {"read-pct", required_argument, NULL, 'Q'},
    {"client", required_argument, NULL, 'c' + 256},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* set_opt applies one option; returns 0, or -1 for a bad value. */
static int
set_opt(wbench_opts *o, int c, const char *arg)
{
	uint64_t v = 0;

	switch (c) {
	case 's':
		if (parse_num(arg, true, &v) || v > WBENCH_MAX_SIZE)
			return -1;
		o->size = (size_t)v;
		o->size_given = true;
		return 0;
	case 'n':
		return parse_num(arg, false, &o->count) || o->count == 0 ? -1
		                                                         : 0;
	case 'w':
		if (o->workload >= WBENCH_CLUSTER)
			return parse_seconds(arg, &o->warmup_s);
		return parse_num(arg, false, &o->warmup);
	case 'i':
		return parse_impl(arg, &o->impl);
	case 'r':
		if (parse_num(arg, false, &v) || v == 0 || v > 64)
			return -1;
		o->repeat = (unsigned)v;
		return 0;
	case 'b':
		if (parse_num(arg, false, &v) || v == 0 || v > 1000000)
			return -1;
		o->batch = (size_t)v;
		return 0;
	case 'S':
		return parse_num(arg, false, &o->seed);
	case 't':
		if (parse_num(arg, false, &v) || v == 0 || v > 86400)
			return -1;
		o->timeout_ms = v * 1000;
		return 0;
	case 'p':
		if (strcmp(arg, "thread") == 0)
			o->peer = WBENCH_PEER_THREAD;
		else if (strcmp(arg, "process") == 0)
			o->peer = WBENCH_PEER_PROCESS;
		else
			return -1;
		return 0;
	}
	return -1;
}

/* mix_defaults: 3 and 5 nodes, 8 clients x 32, 1 KiB values, unless
 * given. */
static void
mix_defaults(wbench_opts *o)
{
	if (o->npeer_list == 1 && o->peer_list[0] == 3 && !o->peers_given) {
		o->peer_list[1] = 5;
		o->npeer_list = 2;
	}
	if (!o->clients_given) {
		o->client_list[0] = 8;
		o->nclient_list = 1;
	}
	if (!o->depth_given) {
		o->depth_list[0] = 32;
		o->ndepth_list = 1;
		o->outstanding = 32;
	}
	if (!o->size_given)
		o->size = 1024;
}

/* parse_list reads up to 8 counts in [lo, hi]: "1", "1,4,16". */
static int
parse_list(const char *s, unsigned long lo, unsigned long hi, unsigned *out,
           unsigned *n)
{
	char *end;

	*n = 0;
	do {
		unsigned long v = strtoul(s, &end, 10);

		if (end == s || v < lo || v > hi || *n >= 8)
			return -1;
		out[(*n)++] = (unsigned)v;
		s = end + (*end == ',');
	} while (*end == ',');
	return *end == '\0' ? 0 : -1;
}

/* parse_peers reads a list of node counts: "3", "3,16,64". */
static int
parse_peers(const char *s, wbench_opts *o)
{
	char *end;

	o->npeer_list = 0;
	do {
		unsigned long v = strtoul(s, &end, 10);

		if (end == s || v < 1 || v > 1024 || o->npeer_list >= 16)
			return -1;
		o->peer_list[o->npeer_list++] = (unsigned)v;
		s = end + (*end == ',');
	} while (*end == ',');
	o->peers = o->peer_list[0];
	return *end == '\0' ? 0 : -1;
}

static int
parse_io(const char *s, enum wbench_io *io)
{
	if (strcmp(s, "loop") == 0)
		*io = WBENCH_IO_LOOP;
	else if (strcmp(s, "threads") == 0)
		*io = WBENCH_IO_THREADS;
	else if (strcmp(s, "both") == 0)
		*io = WBENCH_IO_BOTH;
	else
		return -1;
	return 0;
}

int
wbench_host_at(const char *list, unsigned i, char id[64], char host[256],
               uint16_t *port)
{
	const char *p = list, *end, *at, *colon;
	unsigned long v;
	char *vend;

	for (unsigned k = 0; k < i && p != NULL; k++)
		if ((p = strchr(p, ',')) != NULL)
			p++;
	if (p == NULL || *p == '\0')
		return -1;
	end = strchr(p, ',');
	end = end ? end : p + strlen(p);
	at = memchr(p, '@', (size_t)(end - p));
	if (at != NULL && (at == p || at - p >= 64))
		return -1;
	if (at != NULL)
		snprintf(id, 64, "%.*s", (int)(at - p), p);
	else
		snprintf(id, 64, "n%u", i);
	p = at ? at + 1 : p;
	for (colon = end - 1; colon > p && *colon != ':'; colon--)
		;
	if (colon <= p || colon - p >= 256)
		return -1;
	if (*p == '[' && colon[-1] == ']') /* [v6]:port */
		snprintf(host, 256, "%.*s", (int)(colon - p - 2), p + 1);
	else
		snprintf(host, 256, "%.*s", (int)(colon - p), p);
	v = strtoul(colon + 1, &vend, 10);
	if (vend != end || vend == colon + 1 || v == 0 || v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

/* parse_hosts checks a --hosts list; the nodes are its entries. */
static int
parse_hosts(wbench_opts *o, const char *arg)
{
	char id[64], host[256];
	uint16_t port;
	unsigned n = 1;

	for (const char *p = arg; *p; p++)
		n += *p == ',';
	if (n > 1024)
		return -1;
	for (unsigned i = 0; i < n; i++)
		if (wbench_host_at(arg, i, id, host, &port) != 0)
			return -1;
	o->hosts = arg;
	o->peers = n;
	o->peer_list[0] = n;
	o->npeer_list = 1;
	return 0;
}

/* cluster_opt applies the cluster workload's options. */
static int
cluster_opt(wbench_opts *o, int c, const char *arg)
{
	uint64_t v;

	switch (c) {
	case 'P':
		o->peers_given = true;
		return parse_peers(arg, o);
	case 'K':
		if (parse_list(arg, 0, 100000, o->depth_list,
		               &o->ndepth_list) != 0)
			return -1;
		o->depth_given = true;
		o->outstanding = o->depth_list[0];
		return 0;
	case 'C':
		o->clients_given = true;
		return parse_list(arg, 1, 1000, o->client_list,
		                  &o->nclient_list);
	case 'X':
		return parse_list(arg, 0, 100, o->mix_list, &o->nmix_list);
	case 'Y':
		if (parse_num(arg, false, &v) || v == 0 || v > 100000000)
			return -1;
		o->keys = (unsigned)v;
		return 0;
	case 'Z':
		o->kv = true;
		return 0;
	case 'Q':
		if (parse_num(arg, false, &v) || v > 100)
			return -1;
		o->read_pct = (unsigned)v;
		return 0;
	case 'c' + 256:
		if (parse_num(arg, false, &v) || v > 1000)
			return -1;
		o->client = true;
		o->node_index = (unsigned)v;
		return 0;
	case 'D':
		return parse_seconds(arg, &o->duration_s) || o->duration_s <= 0
		           ? -1
		           : 0;
	case 'I':
		return parse_io(arg, &o->io);
	case 'N':
		if (parse_num(arg, false, &v) || v > 1024)
			return -1;
		o->node_index = (unsigned)v;
		return 0;
	case 'T':
		o->tls_dir = arg;
		return 0;
	case 'G':
		o->plot_path = arg;
		return 0;
	case 'H':
		return parse_hosts(o, arg);
	case 'H' + 256:
		o->cluster_name = arg;
		return 0;
	case 'H' + 512: {
		char id[64], host[256];
		uint16_t port;

		if (strchr(arg, '@') == NULL || strchr(arg, ',') != NULL ||
		    wbench_host_at(arg, 0, id, host, &port) != 0)
			return -1;
		o->coordinator = arg;
		return 0;
	}
	case 'E':
		o->netns = true;
		return 0;
	case 'E' + 256:
		o->weftd_path = arg;
		return 0;
	case 'R':
		return parse_double(arg, 0, 1e8, &o->rate);
	case 'F':
		return parse_double(arg, 0, 1, &o->slow_fraction);
	case 'M':
		return parse_double(arg, 0, 60000, &o->slow_ms);
	}
	return set_opt(o, c, arg);
}

static int
apply_opt(wbench_opts *o, int c, const char *arg)
{
	switch (c) {
	case 'V':
		o->verify = true;
		return 0;
	case 'q':
		o->quiet = true;
		return 0;
	case 'j':
		o->json_path = arg;
		return 0;
	case 'j' + 256:
		o->csv_path = arg;
		return 0;
	case 'j' + 512:
		o->md_path = arg;
		return 0;
	case 'T' + 256:
		o->tls_compare = true;
		return 0;
	case 'l':
	case 'c':
		if (o->role != WBENCH_ROLE_BOTH)
			return -1;
		o->role = c == 'l' ? WBENCH_ROLE_LISTEN : WBENCH_ROLE_CONNECT;
		o->addr = arg;
		return 0;
	}
	return cluster_opt(o, c, arg);
}

/* fill_auto picks the counts left to their defaults. */
static void
fill_auto(wbench_opts *o)
{
	if (o->count == 0 && o->workload == WBENCH_LATENCY)
		o->count = 50000;
	if (o->count == 0) {
		uint64_t by_bytes =
		    (UINT64_C(4) << 30) / (o->size ? o->size : 1);

		o->count = by_bytes < 10000000 ? by_bytes : 10000000;
	}
	if (o->warmup == UINT64_MAX)
		o->warmup = o->count / 10 < 1000000 ? o->count / 10 : 1000000;
}

/* check_netns: --netns runs weftd nodes, each in a namespace. */
static int
check_netns(wbench_opts *o)
{
	if (!o->netns)
		return 0;
	if (o->workload != WBENCH_CLUSTER || o->hosts != NULL ||
	    o->io == WBENCH_IO_THREADS || o->clients_given) {
		fprintf(stderr, "weft-bench: --netns is for cluster, without "
		                "--hosts, --clients or --io threads (it runs "
		                "weftd nodes)\n");
		return -1;
	}
	o->io = WBENCH_IO_LOOP;
	return 0;
}

/* check_hosts: --hosts drives weftd nodes: the cluster workload on them,
 * or with --clients, load from local weft clients. */
static int
check_hosts(wbench_opts *o)
{
	if (o->coordinator != NULL && o->hosts == NULL) {
		fprintf(stderr, "weft-bench: --coordinator is for --hosts\n");
		return -1;
	}
	if (o->hosts == NULL)
		return 0;
	if (o->workload != WBENCH_CLUSTER &&
	    o->workload != WBENCH_CLUSTER_NODE) {
		fprintf(stderr, "weft-bench: --hosts is for cluster\n");
		return -1;
	}
	if (parse_hosts(o, o->hosts) != 0) /* the nodes, whatever --peers */
		return -1;
	if (o->workload == WBENCH_CLUSTER && !o->clients_given) {
		o->client_list[0] = 1;
		o->nclient_list = 1;
	}
	o->io = WBENCH_IO_LOOP;
	return 0;
}

/* check_tls: --tls-compare measures weft alone, with and without --tls. */
static int
check_tls(wbench_opts *o)
{
	if (!o->tls_compare)
		return 0;
	if (o->tls_dir == NULL || o->workload > WBENCH_LATENCY ||
	    o->role != WBENCH_ROLE_BOTH) {
		fprintf(stderr, "weft-bench: --tls-compare needs --tls DIR, "
		                "throughput or latency, and no --listen or "
		                "--connect\n");
		return -1;
	}
	o->impl = WBENCH_IMPL_WEFT;
	return 0;
}

int
wbench_opts_parse(wbench_opts *o, int argc, char **argv)
{
	int c;

	if (argc < 1 || strcmp(argv[0], "throughput") == 0)
		o->workload = WBENCH_THROUGHPUT;
	else if (strcmp(argv[0], "latency") == 0)
		o->workload = WBENCH_LATENCY;
	else if (strcmp(argv[0], "cluster") == 0)
		o->workload = WBENCH_CLUSTER;
	else if (strcmp(argv[0], "rpc") == 0)
		o->workload = WBENCH_RPC;
	else if (strcmp(argv[0], "mix") == 0)
		o->workload = WBENCH_MIX;
	else if (strcmp(argv[0], "cluster-node") == 0)
		o->workload = WBENCH_CLUSTER_NODE;
	else {
		fprintf(stderr, "weft-bench: unknown workload '%s'\n", argv[0]);
		return -1;
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
		if (c == 'h') {
			wbench_usage(stdout);
			exit(0);
		}
		if (c == '?' || apply_opt(o, c, optarg) != 0) {
			if (c != '?')
				fprintf(stderr, "weft-bench: bad value '%s'\n",
				        optarg ? optarg : "");
			wbench_usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "weft-bench: unexpected '%s'\n", argv[optind]);
		return -1;
	}
	fill_auto(o);
	if (o->workload == WBENCH_RPC && !o->depth_given) {
		o->depth_list[0] = 1;
		o->depth_list[1] = 32;
		o->ndepth_list = 2;
	}
	for (unsigned i = 0; o->workload == WBENCH_CLUSTER && i < o->npeer_list;
	     i++)
		if (o->peer_list[i] < 2) {
			fprintf(stderr, "weft-bench: a cluster has 2 nodes or "
			                "more\n");
			return -1;
		}
	if (o->workload == WBENCH_MIX)
		mix_defaults(o);
	if (check_hosts(o) != 0 || check_netns(o) != 0)
		return -1;
	return check_tls(o);
}
