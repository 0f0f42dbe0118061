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

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "loadgen.h"

enum wbench_workload {
	WBENCH_THROUGHPUT,
	WBENCH_LATENCY,
	WBENCH_CLUSTER, /* P node processes asking each other */
	WBENCH_RPC,     /* C client processes asking one server */
	WBENCH_MIX,     /* clients of the replicated key-value service */
	WBENCH_YCSB,    /* YCSB's core workloads on the key-value service */
	WBENCH_SMOKE,   /* zk-smoketest's latency test on it */
	/* The processes the node workloads start (not for users). */
	WBENCH_CLUSTER_NODE, /* a node, or an rpc or mix client */
	WBENCH_RPC_CLIENT,   /* rpc --client sync: blocking calls */
	WBENCH_YCSB_CLIENT,  /* one YCSB client process */
	WBENCH_SMOKE_CLIENT, /* the smoke test's clients */
	WBENCH_WORKLOADS
};

/* The I/O model of a cluster node. */
enum wbench_io {
	WBENCH_IO_LOOP = 1,    /* weft's messaging service */
	WBENCH_IO_THREADS = 2, /* the thread-per-peer baseline */
	WBENCH_IO_BOTH = 3,
};

/* What fills the payloads (payload.c). */
enum wbench_payload {
	WBENCH_PAYLOAD_PATTERN, /* xorshift bytes from the seed (default) */
	WBENCH_PAYLOAD_TEXT,    /* JSON-like records of a small vocabulary */
	WBENCH_PAYLOAD_RANDOM,  /* seeded pseudo-random bytes */
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
/* The largest payload of the workloads on weft's messaging service
 * (cluster, rpc), which sends a message above a frame as chunks, and of
 * rpc --impl pipeline, whose frame codec is set to hold it. */
#define WBENCH_MAX_MESSAGE (256u << 20)
/* The echo verb of weft-bench's own nodes (cnode.c), which every client
 * mode asks; weftd's own echo, for --hosts, is WEFTD_VERB_ECHO. */
#define WBENCH_VERB_ECHO 16u
/* rpc --probe --flood-cap: the flood's own verb, the echo's twin. */
#define WBENCH_VERB_FLOOD 17u
#define WBENCH_SEQ_BYTES 8

typedef struct wbench_opts {
	enum wbench_workload workload;
	enum wbench_impl impl;
	enum wbench_role role;
	enum wbench_peer peer;
	size_t size;           /* payload bytes per message */
	uint64_t count;        /* measured messages (round trips) */
	uint64_t warmup_count; /* messages (round trips) before measuring */
	/* throughput, latency: warm up for warmup_s seconds, not a count */
	bool warmup_by_time;
	uint64_t seed;         /* payload pattern */
	unsigned repeat;       /* runs; the median is reported */
	size_t batch;          /* messages a sender writes per flush */
	uint32_t busy_poll_us; /* weft's loops poll this long before sleeping */
	uint64_t timeout_ms;   /* a run that takes longer fails */
	bool verify;           /* check every payload byte */
	bool quiet;            /* no progress lines */
	const char *addr;      /* listen or connect address, host:port */
	const char *json_path;
	const char *self_exe; /* the binary the peer process runs */
	int argc;             /* the command line, for the reports */
	char **argv;
	/* cluster */
	enum wbench_io io;
	unsigned peers;                     /* P node processes */
	unsigned peer_list[16], npeer_list; /* cluster: --peers 3,16 */
	unsigned outstanding;               /* K requests in flight per node */
	double warmup_s, duration_s;
	unsigned node_index; /* cluster-node: which node this is */
	bool client;         /* cluster-node: a non-member client, cI */
	unsigned nclients;   /* ycsb-client: the client processes in all */
	unsigned client_list[8], nclient_list; /* rpc: --clients 1,4,16 */
	unsigned depth_list[8], ndepth_list;   /* rpc: --outstanding 1,32 */
	bool depth_given, peers_given, clients_given, size_given;
	bool kv;                         /* cluster-node: key-value mode */
	unsigned read_pct;               /* cluster-node: share of gets */
	unsigned mix_list[8], nmix_list; /* mix: --mixes 100,99,50,0 */
	unsigned keys;                   /* mix: --keys */
	/* mix: sessions per client process, each a client service of its
	 * own bound to one member; 0: one service over every member */
	unsigned sessions;
	/* mix, ycsb: --consistency, a weft_kv_consistency (0: not given,
	 * the node's default, one): how many replicas each get reads */
	unsigned consistency;
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
	/* rpc: WBENCH_CLIENT_* and WBENCH_HANDLERS_* sets to run */
	unsigned client_modes, handler_modes;
	/* rpc: the WBENCH_RPC_* servers to run; cluster-node: the one it
	 * is */
	unsigned rpc_impls;
	bool handlers_pool; /* cluster-node: the echo verb on the pool */
	bool probe;         /* rpc --probe: the fairness run */
	bool flood_idle;    /* --probe's flooding clients under SCHED_IDLE */
	/* --probe --flood-cap: the flooding clients call WBENCH_VERB_FLOOD,
	 * capped at this many requests in progress (0: no cap); -1: they
	 * call the echo verb as the probe does. */
	int flood_cap;
	/* ycsb */
	char ycsb_list[8];    /* workload letters, 'a' to 'f' */
	unsigned nycsb_list;  /* how many */
	int distribution;     /* WBENCH_DIST_*, 0: the workload's */
	uint64_t records;     /* records loaded first */
	uint64_t operations;  /* run phase: 0: --duration */
	unsigned threads;     /* operations in flight in all */
	unsigned scan_length; /* longest scan (uniform 1 to it) */
	bool duration_given;  /* --duration on the command line */
	bool warmup_given, keys_given;
	/* cluster, rpc: the messaging service's wire and the payloads */
	enum wbench_payload payload;
	int compression;    /* WEFT_COMPRESS_* of <weft/compress.h> */
	bool wire_given;    /* --compression or --payload given */
	double large_share; /* cluster: share of requests of large_size */
	size_t large_size;  /* their payload bytes */
	/* cluster-node, rpc-client: requests in flight in the whole run,
	 * which the service's byte limits are raised to hold */
	uint64_t in_flight;
} wbench_opts;

#define WBENCH_CLIENT_ASYNC 1u
#define WBENCH_CLIENT_SYNC 2u
#define WBENCH_HANDLERS_INLINE 1u
#define WBENCH_HANDLERS_POOL 2u
#define WBENCH_RPC_MSVC 1u     /* weft's messaging service */
#define WBENCH_RPC_PIPELINE 2u /* weft's pipeline API alone (pipe*.c) */

/* YCSB's request distributions. */
enum wbench_dist {
	WBENCH_DIST_DEFAULT,
	WBENCH_DIST_ZIPFIAN, /* scrambled zipfian, constant 0.99 */
	WBENCH_DIST_UNIFORM,
	WBENCH_DIST_LATEST, /* zipfian over the newest records */
};

/* The figures of one run (or the medians of several). */
typedef struct wbench_result {
	uint64_t received; /* messages (round trips) completed, warm-up too */
	uint64_t warmup;   /* of which the warm-up's */
	uint64_t errors;   /* out-of-order, lost, malformed or corrupt */
	uint64_t measured; /* messages (round trips) inside the window */
	double seconds;    /* the measured window */
	double msgs_per_s;
	double mb_per_s; /* payload bytes, 10^6 per MB */
	/* Latency runs: round-trip times in nanoseconds. */
	double mean_ns;
	uint64_t min_ns, p50_ns, p90_ns, p99_ns, p999_ns, max_ns;
	/* The measuring process's CPU time (user and system, all its
	 * threads) in the window, per message or round trip. */
	double cpu_us;
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
/* wbench_usage prints the list of workloads; wbench_usage_workload the
 * options of one. */
void wbench_usage(FILE *out);
void wbench_usage_workload(FILE *out, enum wbench_workload w);

/* optval.c: option values. */
/* wbench_parse_seconds reads "2", "0.5" or "2s" (0 to 86400). */
int wbench_parse_seconds(const char *s, double *out);
/* wbench_parse_double reads a number in [lo, hi]. */
int wbench_parse_double(const char *s, double lo, double hi, double *out);
/* wbench_parse_num reads a count with an optional suffix: k, M, G (10^3)
 * or with binary, K/Ki/KiB, M/Mi/MiB, G/Gi/GiB (2^10). */
int wbench_parse_num(const char *s, bool binary, uint64_t *out);
/* wbench_parse_list reads up to max counts in [lo, hi]: "1", "1,4,16". */
int wbench_parse_list(const char *s, unsigned long lo, unsigned long hi,
                      unsigned *out, unsigned max, unsigned *n);
/* wbench_parse_compression reads none, lz4 or zstd as a WEFT_COMPRESS_*
 * of <weft/compress.h>; wbench_compression_name names one. */
int wbench_parse_compression(const char *s, int *out);
const char *wbench_compression_name(int alg);
/* wbench_parse_words reads a list of words of names[] (NULL-ended) into
 * a set of bits (1 << index); "both" is every word. */
int wbench_parse_words(const char *s, const char *const *names, unsigned *set);

/* payload.c: building and checking messages. */
void wbench_pattern_fill(uint8_t *buf, size_t size, uint64_t seed);
/* wbench_payload_fill fills buf with size bytes of that kind, the same
 * for the same seed: the pattern (wbench_pattern_fill), JSON-like text
 * records of a small vocabulary (LZ4 shrinks them about 3-4x), or
 * pseudo-random bytes (which no compressor shrinks). */
void wbench_payload_fill(uint8_t *buf, size_t size, enum wbench_payload kind,
                         uint64_t seed);
/* wbench_payload_name is "pattern", "text" or "random";
 * wbench_payload_parse reads one of those names: 0, or -1. */
const char *wbench_payload_name(enum wbench_payload kind);
int wbench_payload_parse(const char *s, enum wbench_payload *out);
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
/* wbench_cpu_ns is this process's CPU time so far, user and system, all
 * its threads. */
uint64_t wbench_cpu_ns(void);

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
/* wbench_result_ok is true when every message arrived exactly once and
 * the run measured some. */
bool wbench_result_ok(const wbench_opts *o, const wbench_result *r);
/* wbench_warmup_over tells a measuring half whether its warm-up has
 * ended: after --warmup-count messages (done), or --warmup seconds since
 * the first one (first_ns, 0: none yet). */
bool wbench_warmup_over(const wbench_opts *o, uint64_t done, uint64_t first_ns,
                        uint64_t now_ns);

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

/* json.c: the --json reports' common parts. */
/* wbench_json_env writes the "key": value lines (each ending in a comma)
 * that every report opens with: weft_version, commit, date (UTC), host,
 * cpu, cpus, kernel and command (o->argv, quoted as a shell would). */
void wbench_json_env(FILE *f, const wbench_opts *o);
/* wbench_json_str writes s as a JSON string. */
void wbench_json_str(FILE *f, const char *s);
/* wbench_json_num writes v with fmt, or null when it was not measured. */
void wbench_json_num(FILE *f, const char *fmt, double v, bool measured);

/* hist.c: the latency histograms of the node processes (weft_histogram,
 * within about 3%), each printed for the cluster coordinator as one line,
 * "NAME value:count ...", that it reads back into its own. */
struct weft_histogram;
/* wbench_hist_new makes an empty one, freed with weft_histogram_free;
 * 0 or -1. */
int wbench_hist_new(struct weft_histogram **out);
/* wbench_hist_print writes h (NULL: as empty) as a line named name:
 * "hist", "hist-get". */
void wbench_hist_print(const struct weft_histogram *h, const char *name,
                       FILE *out);
/* wbench_hist_parse adds the counts of a "hist..." line into h; 0, or -1
 * (h unchanged) for a line of another form. */
int wbench_hist_parse(const char *line, struct weft_histogram *h);

/* A sample of the round trips so far, for the progress lines: recorded by
 * the threads that run replies, read each second by the main thread. */
typedef struct wbench_sample {
	pthread_mutex_t lock;
	struct weft_histogram *h;
} wbench_sample;

/* wbench_sample_init returns 0 or -1; _fini is safe after either. */
int wbench_sample_init(wbench_sample *s);
void wbench_sample_fini(wbench_sample *s);
/* wbench_sample_record counts one round trip. Any thread. */
void wbench_sample_record(wbench_sample *s, uint64_t ns);
/* wbench_sample_percentile reads the p-th percentile so far (0 when
 * empty). Any thread. */
uint64_t wbench_sample_percentile(wbench_sample *s, double p);

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

/* procs.c: the processes of a node workload. */
#define WBENCH_ARGV_MAX 72

/* An argument list built word by word (the words are copied). */
typedef struct wbench_argv {
	char *v[WBENCH_ARGV_MAX];
	char text[8192];
	size_t used;
	int n;
} wbench_argv;

/* wbench_argv_init starts the list "exe subcommand". */
void wbench_argv_init(wbench_argv *a, const char *exe, const char *subcommand);
void wbench_argv_add(wbench_argv *a, const char *word);
/* wbench_argv_addf adds name and the printf-style value after it. */
void wbench_argv_addf(wbench_argv *a, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One process, seen from the one that started it. */
typedef struct wbench_proc {
	int pid; /* -1: none */
	int in_fd, out_fd;
	char *buf; /* what it printed, not yet split into lines */
	size_t have;
	bool dead; /* its output ended */
} wbench_proc;

/*
 * A group of processes. The caller sets the callbacks: on_line gets each
 * whole line a process prints (without the newline), reached tells
 * whether process i has reached a phase (the caller's numbering), and
 * progress, if set, runs after every poll (at least every 200 ms).
 */
typedef struct wbench_procs wbench_procs;
struct wbench_procs {
	unsigned n;
	wbench_proc *p;
	void (*on_line)(wbench_procs *g, unsigned i, const char *line);
	bool (*reached)(const wbench_procs *g, unsigned i, int phase);
	void (*progress)(wbench_procs *g);
	void *arg; /* the caller's */
};

/* wbench_procs_init makes room for n processes; 0 or -1. */
int wbench_procs_init(wbench_procs *g, unsigned n);
/* wbench_procs_spawn starts process i with a (a->v[0] is the binary). */
int wbench_procs_spawn(wbench_procs *g, unsigned i, const wbench_argv *a);
/* wbench_procs_pump reads the processes until those in [from, to) have
 * all reached phase: 0, or -1 if one of them died first or the time is
 * up. */
int wbench_procs_pump(wbench_procs *g, int phase, unsigned from, unsigned to,
                      uint64_t timeout_ms);
/* wbench_procs_tell writes line to the processes in [from, to). */
int wbench_procs_tell(wbench_procs *g, unsigned from, unsigned to,
                      const char *line);
/* wbench_procs_reap closes the pipes and waits for every process (killed
 * first when failed); frees the group. */
void wbench_procs_reap(wbench_procs *g, bool failed);

/* cluster.c, cnode.c */
/* The merged figures of one cluster, rpc or mix run. */
typedef struct wbench_cresult {
	enum wbench_io io;
	bool pipeline; /* rpc --impl pipeline: io is loop */
	unsigned peers;
	uint64_t ops, errors;
	uint64_t sent, replies, lost, duplicates; /* whole run */
	double ops_per_s, mean_us;
	double p50_us, p95_us, p99_us, p999_us, max_us;
	double vcsw_per_op, ivcsw_per_op, cpu_us_per_op;
	double rss_mb, rss_mb_per_node, msgs_per_wakeup;
	/* The members' RSS, per member, and their threads; the client
	 * processes' RSS, all of them (mix --sessions reports both). */
	double member_rss_mb, client_rss_mb;
	uint64_t member_threads;
	uint64_t threads;
	int first_error;
	double up_ms; /* start to every connection up */
	/* The start-up's CPU (all processes), and the TLS handshakes done
	 * by then, both ends counted, and of those resumed. */
	double up_cpu_ms;
	uint64_t up_handshakes, up_resumed;
	unsigned clients, depth; /* rpc, mix */
	int read_pct;            /* mix, or -1 */
	bool sync, pool;         /* rpc: --client sync, --handlers pool */
	/* rpc: the server alone (0: not measured) */
	double srv_msgs_per_wakeup, srv_cpu_us_per_op;
	/* mix: gets and puts apart */
	uint64_t gets, puts;
	/* mix: the gets the members coordinated at quorum or all (whole
	 * run, warm-up included) */
	uint64_t reads_coordinated;
	double get_ops_per_s, put_ops_per_s;
	double get_p50_us, get_p99_us, put_p50_us, put_p99_us;
	/* The wire: payload MB/s (one payload per request), the members'
	 * CPU per MB of payload (rpc: the server's), the compression ratio
	 * (body bytes per wire byte; 0: nothing compressed), and with
	 * --large-share the large requests and both kinds' percentiles */
	double mb_per_s, cpu_us_per_mb, wire_ratio;
	uint64_t large_ops;
	double small_p50_us, small_p99_us, large_p50_us, large_p99_us;
	/* --repeat: the runs behind this one (the median op rate), and the
	 * lowest and highest of their op rates and p99s */
	unsigned runs;
	double ops_lo, ops_hi, p99_lo, p99_hi;
} wbench_cresult;

int wbench_cluster_run(const wbench_opts *o);
int wbench_cluster_node(const wbench_opts *o);
const char *wbench_io_name(enum wbench_io io);
/* wbench_consistency_name names a weft_kv_consistency: "one" (also for
 * 0, the node's default), "quorum" or "all". */
const char *wbench_consistency_name(unsigned cl);
/* wbench_server_name names what serves a run: "loop" or "threads" (weft's
 * messaging service on that I/O model), or "pipeline". */
const char *wbench_server_name(enum wbench_io io, bool pipeline);

/* machine.c: how busy the machine was before the run. */
typedef struct wbench_machine {
	bool sampled;
	long cpus;
	double busy;    /* share of all CPUs others kept busy */
	double steal;   /* share a hypervisor took */
	double loadavg; /* 1 minute */
	bool busy_warning;
} wbench_machine;

/* Runs that differ by more than this share of their median are
 * flagged. */
#define WBENCH_SPREAD_LIMIT 0.2

/* wbench_machine_check samples the CPUs for a moment (before a command
 * runs anything) and warns on stderr when others keep them busy. */
void wbench_machine_check(void);
const wbench_machine *wbench_machine_sampled(void);
/* wbench_spread_warn warns on stderr, and returns true, when the runs of
 * a figure (lowest lo, highest hi) disagree by more than the limit. */
bool wbench_spread_warn(const char *what, double lo, double hi, double median);

/* plot.c, svg.c: --plot, with gnuplot or as SVG. */
#define WBENCH_PLOT_SERIES 16
#define WBENCH_PLOT_POINTS 64

typedef struct wbench_plot_series {
	char title[64];
	unsigned n;
	double x[WBENCH_PLOT_POINTS], y[WBENCH_PLOT_POINTS];
} wbench_plot_series;

/* One panel: its axes (xtics: gnuplot's list, such as "'a' 1, 'b' 2",
 * or NULL) and series. */
typedef struct wbench_plot_panel {
	const char *xlabel, *ylabel, *xtics;
	bool logx, logy;
	bool points; /* points only: x is a category, not a scale */
	unsigned nseries;
	wbench_plot_series series[WBENCH_PLOT_SERIES];
} wbench_plot_panel;

/* wbench_plot_add adds (x, y) to the series of that title (made if new;
 * a y that a log scale cannot show is left out). */
void wbench_plot_add(wbench_plot_panel *p, const char *title, double x,
                     double y);
/* wbench_plot_script writes the gnuplot script of n panels side by side
 * into png; -1 (nothing written) when no panel has a point. */
int wbench_plot_script(FILE *gp, const char *png, const char *title,
                       const wbench_plot_panel *panels, unsigned n);
/* wbench_plot_range finds the extremes of a panel's points (x in [0], y
 * in [1]); false if it has none. */
bool wbench_plot_range(const wbench_plot_panel *p, double lo[2], double hi[2]);
/* wbench_plot_svg writes the n panels as an SVG drawing; -1 (nothing
 * written) when no panel has a point. */
int wbench_plot_svg(FILE *f, const char *title, const wbench_plot_panel *panels,
                    unsigned n);
/* wbench_plot_draw draws FILE.svg itself, any other name through gnuplot
 * (a PNG; skipped with a line when gnuplot is missing); 0 or -1. */
int wbench_plot_draw(const char *png, const char *title,
                     const wbench_plot_panel *panels, unsigned n);

/* creport.c: the cluster, rpc and mix tables, and their files. */
void wbench_cprint_header(const wbench_opts *o, FILE *out);
void wbench_cprint_row(const wbench_opts *o, const wbench_cresult *r,
                       FILE *out);
/* wbench_cprint_ratio prints loop against threads at one P. */
void wbench_cprint_ratio(const wbench_cresult *loop, const wbench_cresult *thr,
                         FILE *out);
/* wbench_cwrite_reports writes --json, --csv and --md; 0 or -1. */
int wbench_cwrite_reports(const wbench_opts *o, const wbench_cresult *rows,
                          unsigned n);
/* wbench_cplot draws --plot with gnuplot; 0 or -1. */
int wbench_cplot(const wbench_opts *o, const wbench_cresult *rows, unsigned n);
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

/* child.c: the client processes' common parts. */
struct weft_msvc;
struct weft_msvc_config;
struct weft_msvc_peer;
struct weft_tls_ctx;

/* An answer that arrived but is not what was asked for (a value of
 * another key, a scan out of order): weft-bench's own status. */
#define WBENCH_EUNEXPECTED (-1000)

/* wbench_child_say prints one line to the coordinator (and flushes). */
void wbench_child_say(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* wbench_child_expect reads the coordinator's next line into line (the
 * newline cut); 0 if it starts with word, else -1. */
int wbench_child_expect(const char *word, char *line, size_t len);
/* wbench_client_config makes the run's config: members n0 to nP-1 on
 * 127.0.0.1 (ports from the "ports" line), limits as the members'. */
int wbench_client_config(const wbench_opts *o, struct weft_msvc_config **out);
/* wbench_wire_limits sets o's wire on a service's limits: its
 * --compression, and byte limits that hold the run's messages. A
 * message may be as large as the largest payload (--size,
 * --large-size) and WBENCH_WIRE_SLACK; the outbound queue per peer, the
 * answers queued for all clients, and the inbound bytes in flight are
 * raised to hold every request the run keeps in flight (--in-flight, at
 * least one) at that size. Limits already larger stay. */
#define WBENCH_WIRE_SLACK 4096u
struct weft_msvc_limits;
void wbench_wire_limits(const wbench_opts *o, struct weft_msvc_limits *lim);
/* wbench_wire_bytes sums svc's peers' frame bodies on compressed
 * connections, both ways, before compression (*body) and as they
 * travelled (*wire). */
void wbench_wire_bytes(struct weft_msvc *svc, uint64_t *body, uint64_t *wire);
/* wbench_client_tls, under --tls, sets cfg's [tls] for client id and
 * makes its context (*out; NULL in plaintext). 0 or -1. */
int wbench_client_tls(const wbench_opts *o, struct weft_msvc_config *cfg,
                      const char *id, struct weft_tls_ctx **out);
/* wbench_client_set_ports reads "ports P0 P1 ..." into svc and fills
 * peers[npeers]. 0 or -1. */
int wbench_client_set_ports(struct weft_msvc *svc, const char *line,
                            unsigned npeers, struct weft_msvc_peer **peers);

/* A reply that did not come in the time a blocking call waited. */
#define WBENCH_ENOREPLY (-1001)

/*
 * A blocking call: one request at a time, whose reply callback
 * (wbench_call_reply, with the call as its argument) wakes the thread
 * waiting for it. A reply while none is awaited is a duplicate, counted.
 * check, if set, judges a successful answer (false: the status becomes
 * WBENCH_EUNEXPECTED).
 */
typedef struct wbench_call wbench_call;
struct wbench_call {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool in_flight;
	int status;
	uint64_t replies, duplicates;
	bool (*check)(const void *data, size_t len, void *arg);
	void *arg;
};

void wbench_call_init(wbench_call *c);
void wbench_call_fini(wbench_call *c);
/* wbench_call_start marks a request in flight, before it is sent;
 * wbench_call_cancel takes the mark back when the send is refused. */
void wbench_call_start(wbench_call *c);
void wbench_call_cancel(wbench_call *c);
void wbench_call_reply(struct weft_msvc *svc, int status, const void *data,
                       size_t len, void *arg);
/* wbench_call_wait waits for the reply: its status, or WBENCH_ENOREPLY
 * after timeout_ms. */
int wbench_call_wait(wbench_call *c, uint64_t timeout_ms);
/* wbench_call_counts reads the replies and duplicates so far. */
void wbench_call_counts(wbench_call *c, uint64_t *replies,
                        uint64_t *duplicates);

/*
 * A primer asks each of many (service, member) pairs once, a window of
 * them at a time, so that every session's connections are up before the
 * clock starts without a thousand dials and handshakes at once.
 * wbench_primer_ask waits for room in the window, then sends an empty
 * request of verb; wbench_primer_wait waits for every answer. Both return
 * -1 once a request failed or the primer's time is up. One asking thread.
 */
typedef struct wbench_primer {
	unsigned window, asked;
	uint64_t deadline_ns;
	_Atomic unsigned answered, failed;
} wbench_primer;

void wbench_primer_init(wbench_primer *p, unsigned window, uint64_t timeout_ms);
int wbench_primer_ask(wbench_primer *p, struct weft_msvc *svc,
                      struct weft_msvc_peer *peer, uint32_t verb);
int wbench_primer_wait(wbench_primer *p);

/* wbench_timespec_in sets *ts to ns nanoseconds from now on clock, for
 * pthread_cond_timedwait on a condition variable of that clock. */
void wbench_timespec_in(clockid_t clock, uint64_t ns, struct timespec *ts);

/* The process's resource use: getrusage and /proc/self/status. */
typedef struct wbench_rusage {
	uint64_t vcsw, ivcsw, user_us, sys_us, rss_kb, threads;
} wbench_rusage;

void wbench_rusage_read(wbench_rusage *u);

/* What a client process reports (the "result" line cnode.c prints). */
typedef struct wbench_child_figs {
	uint64_t ops, errors, wakeups, msgs_in, sent, replies, duplicates;
	uint64_t body_bytes, wire_bytes; /* wbench_wire_bytes */
	int first_error;
} wbench_child_figs;

/* wbench_child_result prints the result line, the usage over the window
 * (before to after). */
void wbench_child_result(const wbench_child_figs *f,
                         const wbench_rusage *before,
                         const wbench_rusage *after);

/* wbench_child_window waits out a node's window, from start_ns to end_ns
 * (the warm-up before it), reading before and after at its edges and
 * calling tick(arg) once a second from now on, for the progress lines. */
void wbench_child_window(uint64_t start_ns, uint64_t end_ns,
                         void (*tick)(void *arg), void *arg,
                         wbench_rusage *before, wbench_rusage *after);

/* rpcclient.c: rpc --client sync, one process of D threads. */
int wbench_rpc_client(const wbench_opts *o);

/* pipeserver.c, pipeclient.c: rpc --impl pipeline, the server (n0) and
 * a client process, written on weft's public pipeline API alone (TCP
 * channels, the frame and envelope codecs, handlers of their own), as a
 * user would; they speak cnode.c's line protocol with the coordinator
 * and report the same figures. */
int wbench_pipe_server(const wbench_opts *o);
int wbench_pipe_client(const wbench_opts *o);
/* wbench_pipe_codecs adds the frame and envelope codecs both sides put
 * before their own handler, for payloads of up to size bytes (at least
 * WBENCH_MAX_SIZE). */
struct weft_channel;
int wbench_pipe_codecs(struct weft_channel *ch, size_t size);

/* ycsb.c, ycsbclient.c: the ycsb workload and one of its clients. */
int wbench_ycsb_run(const wbench_opts *o);
int wbench_ycsb_client(const wbench_opts *o);

/* smoke.c, smokeclient.c: the smoke workload and its client process. */
int wbench_smoke_run(const wbench_opts *o);
int wbench_smoke_client(const wbench_opts *o);

/* run.c */
/* wbench_run runs the whole invocation described by o: R repetitions of
 * each implementation, the summary and the JSON. Returns the exit status. */
int wbench_run(const wbench_opts *o);
/* wbench_run_impl runs one repetition of one implementation with its peer.
 * Returns 0 or -1. */
int wbench_run_impl(const wbench_opts *o, enum wbench_impl impl,
                    wbench_result *res);

#endif
