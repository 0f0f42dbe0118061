/* SPDX-License-Identifier: MIT */
/*
 * wbench.h: weft-bench's internals, shared by its files and by the tests in
 * tests/bench/.
 *
 * Every workload has two halves. The measuring half listens, accepts one
 * connection and takes the figures: the receiver of a throughput run, the
 * pinger of a latency run. The load half connects: the sender of a
 * throughput run, the echoer of a latency run. By default the measuring half
 * runs in the weft-bench process and the load half in a child process (an
 * exec of the same binary with --connect), as on two hosts.
 *
 * Each message is a 4-byte big-endian length followed by `size` payload
 * bytes. The payload's first min(size, 8) bytes hold the message's sequence
 * number (big-endian, truncated to the low bytes when size < 8); the rest is
 * a pattern made from the seed. The receiver checks that sequence numbers
 * arrive in order, so every message arrives exactly once; with --verify it
 * also checks every payload byte.
 */
#ifndef WBENCH_H
#define WBENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum wbench_workload {
	WBENCH_THROUGHPUT,
	WBENCH_LATENCY,
	WBENCH_CLUSTER,      /* P node processes asking each other */
	WBENCH_RPC,          /* C client processes asking one server */
	WBENCH_MIX,          /* clients of the replicated key-value service */
	WBENCH_CLUSTER_NODE, /* one of them (started by cluster or rpc) */
};

/* The I/O model of a cluster node. */
enum wbench_io {
	WBENCH_IO_LOOP = 1,    /* weft's messaging service */
	WBENCH_IO_THREADS = 2, /* the thread-per-peer baseline */
	WBENCH_IO_BOTH = 3,
};

enum wbench_impl {
	WBENCH_IMPL_WEFT = 1,
	WBENCH_IMPL_RAW = 2,
	WBENCH_IMPL_BOTH = 3,
};

enum wbench_role {
	WBENCH_ROLE_BOTH,    /* measure here, load half in a peer */
	WBENCH_ROLE_LISTEN,  /* --listen: the measuring half only */
	WBENCH_ROLE_CONNECT, /* --connect: the load half only */
};

enum wbench_peer {
	WBENCH_PEER_PROCESS, /* the load half is an exec of weft-bench */
	WBENCH_PEER_THREAD,  /* the load half is a thread (tests) */
};

/* The largest payload a run may use: the frame codec's default maximum. */
#define WBENCH_MAX_SIZE (16u << 20)
#define WBENCH_SEQ_BYTES 8

typedef struct wbench_opts {
	enum wbench_workload workload;
	enum wbench_impl impl;
	enum wbench_role role;
	enum wbench_peer peer;
	size_t size;         /* payload bytes per message */
	uint64_t count;      /* measured messages (round trips) */
	uint64_t warmup;     /* messages (round trips) before measuring */
	uint64_t seed;       /* payload pattern */
	unsigned repeat;     /* runs; the median is reported */
	size_t batch;        /* messages a sender writes per flush */
	uint64_t timeout_ms; /* a run that takes longer fails */
	bool verify;         /* check every payload byte */
	bool quiet;          /* no progress lines */
	const char *addr;    /* listen or connect address, host:port */
	const char *json_path;
	const char *self_exe; /* the binary the peer process runs */
	/* cluster */
	enum wbench_io io;
	unsigned peers;                     /* P node processes */
	unsigned peer_list[16], npeer_list; /* cluster: --peers 3,16 */
	unsigned outstanding;               /* K requests in flight per node */
	double warmup_s, duration_s;
	unsigned node_index; /* cluster-node: which node this is */
	bool client;         /* cluster-node: a non-member client, cI */
	unsigned client_list[8], nclient_list; /* rpc: --clients 1,4,16 */
	unsigned depth_list[8], ndepth_list;   /* rpc: --outstanding 1,32 */
	bool depth_given, peers_given, clients_given, size_given;
	bool kv;                         /* cluster-node: key-value mode */
	unsigned read_pct;               /* cluster-node: share of gets */
	unsigned mix_list[8], nmix_list; /* mix: --mixes 100,99,50,0 */
	unsigned keys;                   /* mix: --keys */
	/* --tls DIR: ca.crt, nI.crt, nI.key. Throughput and latency: the
	 * measuring half is n0, the load half n1 (weft halves only). */
	const char *tls_dir;
	bool tls_compare;     /* weft plaintext and weft TLS alternately */
	const char *csv_path; /* --csv FILE: one row per run or series */
	const char *md_path; /* cluster, rpc, mix --md FILE: a Markdown table */
	/* cluster --hosts: "[ID@]HOST:PORT,..." of weftd nodes run
	 * elsewhere; peers is their number, local processes are clients. */
	const char *hosts;
	const char *cluster_name; /* --cluster-name: weftd's [cluster] name */
	/* --coordinator ID@HOST:PORT: this process joins the --hosts
	 * cluster as that member (the load verb is for members only). */
	const char *coordinator;
	bool netns;             /* cluster --netns: weftd in namespaces */
	const char *weftd_path; /* --weftd: the binary --netns runs */
	const char *plot_path;  /* cluster --plot FILE.png (gnuplot) */
	double rate; /* cluster --rate: requests/s per node (open loop) */
	double slow_fraction; /* cluster: share of requests handled slowly */
	double slow_ms;       /* their extra handling time */
} wbench_opts;

/* The figures of one run (or the medians of several). */
typedef struct wbench_result {
	uint64_t received; /* messages (round trips) completed, warm-up too */
	uint64_t errors;   /* out-of-order, lost, malformed or corrupt */
	uint64_t measured; /* messages (round trips) inside the window */
	double seconds;    /* the measured window */
	double msgs_per_s;
	double mb_per_s; /* payload bytes, 10^6 per MB */
	/* Latency runs: round-trip times in nanoseconds. */
	double mean_ns;
	uint64_t min_ns, p50_ns, p90_ns, p99_ns, p999_ns, max_ns;
} wbench_result;

/* opts.c */
/* wbench_host_at reads entry i of a --hosts list into id (default "nI"),
 * host and port. Returns 0, or -1 for a malformed or missing entry. */
int wbench_host_at(const char *list, unsigned i, char id[64], char host[256],
                   uint16_t *port);
/* wbench_opts_default fills the defaults of every option. */
void wbench_opts_default(wbench_opts *o);
/* wbench_opts_parse reads argv (argv[0] is the subcommand). Returns 0, or
 * -1 with a message on stderr. */
int wbench_opts_parse(wbench_opts *o, int argc, char **argv);
const char *wbench_workload_name(enum wbench_workload w);
const char *wbench_impl_name(enum wbench_impl impl);
void wbench_usage(FILE *out);

/* payload.c: building and checking messages. */
void wbench_pattern_fill(uint8_t *buf, size_t size, uint64_t seed);
/* wbench_seq_put writes seq into the payload's first min(size, 8) bytes. */
void wbench_seq_put(uint8_t *payload, size_t size, uint64_t seq);
uint64_t wbench_seq_get(const uint8_t *payload, size_t size);
/* wbench_seq_mask keeps the low bytes that fit in a payload of size. */
uint64_t wbench_seq_mask(size_t size);
void wbench_be32_put(uint8_t *p, uint32_t v);
uint32_t wbench_be32_get(const uint8_t *p);

/*
 * A stream scanner: takes a byte stream of frames split anywhere, checks
 * each frame's length, sequence number and (with verify) payload, and counts
 * the frames. A wrong length ends the stream (wbench_scan_feed returns -1).
 */
typedef struct wbench_scan {
	size_t size;
	const uint8_t *pattern; /* expected payload, or NULL: no verify */
	uint64_t next_seq;
	uint64_t frames;
	uint64_t errors;
	uint8_t head[4 + WBENCH_SEQ_BYTES];
	size_t head_have;   /* bytes of head gathered */
	uint64_t body_left; /* payload bytes of this frame still to come */
	uint64_t body_off;  /* offset of the next payload byte */
} wbench_scan;

void wbench_scan_init(wbench_scan *s, size_t size, const uint8_t *pattern);
/* Returns the number of frames completed by these bytes, or -1. */
long wbench_scan_feed(wbench_scan *s, const uint8_t *p, size_t n);

/* net.c: plain sockets. */
/* wbench_listen binds addr ("host:port", "[v6]:port") and listens; returns
 * the fd, or -1 with a message on stderr. bound receives the actual
 * address as text. */
int wbench_listen(const char *addr, char *bound, size_t bound_len);
/* wbench_connect connects a blocking socket with TCP_NODELAY, retrying
 * refused connections for up to timeout_ms. Returns the fd or -1. */
int wbench_connect(const char *addr, uint64_t timeout_ms);
/* wbench_accept waits up to timeout_ms for one connection. */
int wbench_accept(int listen_fd, uint64_t timeout_ms);
/* wbench_write_all/read_all: blocking, whole buffer; 0 or -1. */
int wbench_write_all(int fd, const void *buf, size_t len);
int wbench_read_all(int fd, void *buf, size_t len);
uint64_t wbench_now_ns(void);

/*
 * The halves. A measuring half binds opts->addr, calls ready(bound address)
 * once it accepts connections (the caller starts the load half there), and
 * fills *res. A load half connects to opts->addr. Both return 0 or -1 with
 * a message on stderr.
 */
typedef int (*wbench_ready_cb)(const char *bound, void *arg);

int wbench_raw_measure(const wbench_opts *o, wbench_ready_cb ready, void *arg,
                       wbench_result *res);
int wbench_raw_load(const wbench_opts *o);
int wbench_weft_measure(const wbench_opts *o, wbench_ready_cb ready, void *arg,
                        wbench_result *res);
int wbench_weft_load(const wbench_opts *o);

/* report.c */
struct weft_histogram;

/*
 * A progress meter: wbench_progress_tick prints a line to stderr when a
 * second has passed since the last line, and is cheap to call often. count
 * is the measured messages so far; h, if not NULL, the round-trip times.
 */
typedef struct wbench_progress {
	const wbench_opts *opts;
	const char *impl;
	uint64_t start_ns, last_ns, last_count;
} wbench_progress;

void wbench_progress_init(wbench_progress *p, const wbench_opts *o,
                          const char *impl);
void wbench_progress_tick(wbench_progress *p, uint64_t now_ns, uint64_t count,
                          const struct weft_histogram *h);
/* wbench_result_latency fills the latency figures from h. */
void wbench_result_latency(wbench_result *r, const struct weft_histogram *h);
/* wbench_result_rates fills the per-second figures from measured/seconds. */
void wbench_result_rates(wbench_result *r, size_t size);
/* wbench_result_median puts the median of every figure of runs[n] in out. */
void wbench_result_median(const wbench_result *runs, unsigned n,
                          wbench_result *out);
/* wbench_result_ok is true when every message arrived exactly once. */
bool wbench_result_ok(const wbench_opts *o, const wbench_result *r);

/* All runs of one invocation, per implementation. */
typedef struct wbench_report {
	const wbench_opts *opts;
	unsigned nruns[2];      /* [0] weft, [1] raw */
	wbench_result *runs[2]; /* nruns each */
	wbench_result median[2];
} wbench_report;

/* wbench_slot_name names report slot i (0 or 1): "weft", "raw", or
 * "weft-tls" for a TLS run. */
const char *wbench_slot_name(const wbench_opts *o, int i);
void wbench_report_print(const wbench_report *rep, FILE *out);
int wbench_report_json(const wbench_report *rep, const char *path);

/* lathist.c: a compact latency histogram (about 3% buckets) that a
 * request slot keeps for itself and a node process prints for the
 * cluster coordinator, which merges them into a weft_histogram. */
#define WBENCH_LAT_BUCKETS 1184
typedef struct wbench_lat {
	uint32_t counts[WBENCH_LAT_BUCKETS];
	uint64_t sum_ns, n;
} wbench_lat;

void wbench_lat_record(wbench_lat *l, uint64_t ns);
void wbench_lat_merge(wbench_lat *dst, const wbench_lat *src);
/* wbench_lat_value is the upper edge of bucket i. */
uint64_t wbench_lat_value(unsigned i);
/* wbench_lat_print writes "hist i:count ..." (one line); _parse reads it
 * into a weft_histogram. */
void wbench_lat_print(const wbench_lat *l, FILE *out);
/* wbench_lat_bucket is the bucket of a value; wbench_lat_percentile the
 * value at or below which p percent of counts[WBENCH_LAT_BUCKETS] lie
 * (0 when empty), for progress lines. */
unsigned wbench_lat_bucket(uint64_t ns);
uint64_t wbench_lat_percentile(const uint64_t *counts, double p);
int wbench_lat_parse(const char *line, struct weft_histogram *h);

/* csv.c: --csv. A figure below 0 was not measured (an empty cell). */
typedef struct wbench_csv_row {
	const char *workload;
	const char *impl; /* weft, raw, weft-tls; loop or threads */
	bool tls;
	size_t size;
	double peers, clients, depth, read_pct;
	double ops_per_s, mb_per_s;
	double p50_us, p99_us, p999_us, max_us;
	double ctxsw_per_op, cpu_us_per_op, rss_mb;
	uint64_t errors;
} wbench_csv_row;

/* wbench_csv_row_init fills r from o, every figure not measured. */
void wbench_csv_row_init(wbench_csv_row *r, const wbench_opts *o);
/* wbench_csv_write writes the header and n rows to path; 0 or -1. */
int wbench_csv_write(const char *path, const wbench_csv_row *rows, unsigned n);

/* cluster.c, cnode.c */
/* The merged figures of one cluster, rpc or mix run. */
typedef struct wbench_cresult {
	enum wbench_io io;
	unsigned peers;
	uint64_t ops, errors;
	uint64_t sent, replies, lost, duplicates; /* whole run */
	double ops_per_s, mean_us;
	double p50_us, p95_us, p99_us, p999_us, max_us;
	double vcsw_per_op, ivcsw_per_op, cpu_us_per_op;
	double rss_mb, rss_mb_per_node, msgs_per_wakeup;
	uint64_t threads;
	int first_error;
	unsigned clients, depth; /* rpc, mix */
	int read_pct;            /* mix, or -1 */
} wbench_cresult;

int wbench_cluster_run(const wbench_opts *o);
int wbench_cluster_node(const wbench_opts *o);
/* wbench_cresult_latency fills r's latency figures from lat. */
void wbench_cresult_latency(wbench_cresult *r,
                            const struct weft_histogram *lat);

/* The exit status of a run that could not be made here (--netns without
 * root or namespaces), as automake and ctest's SKIP_RETURN_CODE read it. */
#define WBENCH_SKIPPED 77

/* netns.c: cluster --netns, for each --peers count: P weftd nodes, each in
 * a network namespace of its own, driven as --hosts. rows gets one result
 * per count (*nrows of them). Returns 0, -1, or WBENCH_SKIPPED with a
 * message on stderr. */
int wbench_netns_run(const wbench_opts *o, wbench_cresult *rows,
                     unsigned *nrows);

/* mesh.c: the cluster workload on the --hosts nodes (weftd with the load
 * verb on): each node keeps K requests in flight to the others, and r
 * gets their merged figures. Returns 0 or -1 with a message on stderr. */
int wbench_mesh_run(const wbench_opts *o, wbench_cresult *r);

/* A weftd node's answer to the load verb (docs/WEFTD.md): its figures,
 * or for a status answer its completions and p99 so far. */
typedef struct wbench_load_answer {
	uint64_t ops, errors, sent, replies, duplicates;
	uint64_t vcsw, ivcsw, cpu_us, rss_kb, threads, wakeups, msgs_in;
	uint64_t completed, p99_ns;
	int64_t first_error;
} wbench_load_answer;

/* wbench_load_answer_read reads an answer (a msgpack map; unknown keys
 * are ignored) into *a and adds its histogram ("hist": value, count
 * pairs), if any, to h. Returns 0, or -1 for a malformed answer, which
 * changes neither. */
int wbench_load_answer_read(const void *data, size_t len, wbench_load_answer *a,
                            struct weft_histogram *h);

/* run.c */
/* wbench_run runs the whole invocation described by o: R repetitions of
 * each implementation, the summary and the JSON. Returns the exit status. */
int wbench_run(const wbench_opts *o);
/* wbench_run_impl runs one repetition of one implementation with its peer.
 * Returns 0 or -1. */
int wbench_run_impl(const wbench_opts *o, enum wbench_impl impl,
                    wbench_result *res);

#endif
