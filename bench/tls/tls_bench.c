/* SPDX-License-Identifier: MIT */
/*
 * tls_bench.c: weft-tls-bench, TLS against plaintext through weft's full
 * pipeline (TCP channel, frame codec, one handler call per message) on
 * loopback, with the receiving and the sending side each on a loop
 * thread of its own.
 *
 *   weft-tls-bench [--quick] [--only tls|plain] [--certs DIR]
 *
 * Workloads: one-way throughput at 64 B and 64 KiB, ping-pong latency at
 * 64 B, and the cost of a new connection, one after another: TCP connect
 * plus, with TLS, a full or a resumed handshake, and one 64-byte round
 * trip (which also brings the session ticket). Certificates come from
 * scripts/gen-certs.sh into a temporary directory unless --certs names one
 * with ca.crt, bench-node.crt and bench-node.key. A benchmark, not a test.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <openssl/evp.h>

#include <weft/channel.h>
#include <weft/core.h>
#include <weft/frame.h>
#include <weft/histogram.h>
#include <weft/loop.h>
#include <weft/tls.h>
#include <weft/transport.h>

#define NODE "bench-node"
#define PUMP_BUDGET_BYTES (4u << 20)
#define BATCH 64
#define ZERO_COPY_MIN 4096

enum workload { THROUGHPUT, LATENCY, CONNECT };

typedef struct run {
	enum workload workload;
	size_t size;
	uint64_t count;
	weft_tls_ctx *server_tls; /* NULL: plaintext */
	weft_tls_ctx *client_tls;
	uint16_t port;
	weft_loop *client_loop;
	/* Receiver (throughput) or pinger (latency), on its loop. */
	uint64_t received, start_ns, end_ns;
	weft_histogram *rtt;
	uint64_t ping_ns;
	/* Sender, on the client loop. */
	uint64_t sent;
	weft_ctx *send_ctx;
	bool pump_posted;
	uint8_t *payload;
	struct evbuffer *msg;
	/* Connect workload. */
	uint64_t connects;
	/* The main thread waits for done. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int status;
} run;

static void
finish(run *r, int status)
{
	pthread_mutex_lock(&r->lock);
	if (!r->done) {
		r->done = true;
		r->status = status;
		pthread_cond_signal(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
}

static int
add_pipeline(weft_channel *ch, const weft_handler *h, run *r)
{
	weft_frame_codec_opts fo = {.max_frame_bytes = 1u << 20};
	int rv;

	if ((rv = weft_frame_codec_add(ch, "frame", &fo)) != 0)
		return rv;
	return weft_pipeline_add_last(ch, "bench", h, r);
}

static void
write_msg(run *r, weft_ctx *ctx)
{
	if (r->size >= ZERO_COPY_MIN)
		evbuffer_add_reference(r->msg, r->payload, r->size, NULL, NULL);
	else
		evbuffer_add(r->msg, r->payload, r->size);
	weft_ctx_write(ctx, &weft_msg_evbuffer, r->msg, NULL, NULL);
	r->sent++;
}

/* ---- Receiving side (server) -------------------------------------------- */

static void
recv_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	run *r = weft_ctx_state(ctx);

	if (type != &weft_msg_evbuffer)
		weft_msg_free(type, msg);
	if (r->received++ == 0)
		r->start_ns = weft_now_ns();
	if (r->received == r->count) {
		r->end_ns = weft_now_ns();
		finish(r, 0);
	}
}

static void
echo_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	weft_ctx_write(ctx, type, msg, NULL, NULL);
}

static void
echo_read_complete(weft_ctx *ctx)
{
	weft_ctx_flush(ctx);
}

static const weft_handler receiver = {.read = recv_read};
static const weft_handler echoer = {
    .read = echo_read,
    .read_complete = echo_read_complete,
};

static int
server_init(weft_channel *ch, void *arg)
{
	run *r = arg;

	return add_pipeline(ch, r->workload == THROUGHPUT ? &receiver : &echoer,
	                    r);
}

/* ---- Sending side (client) ---------------------------------------------- */

static void pump_task(weft_loop *loop, int status, void *arg);

static void
pump(run *r, weft_ctx *ctx)
{
	weft_channel *ch = weft_ctx_channel(ctx);
	size_t bytes = 0;
	int i;

	while (r->sent < r->count && weft_channel_is_writable(ch)) {
		for (i = 0; i < BATCH && r->sent < r->count; i++)
			write_msg(r, ctx);
		weft_ctx_flush(ctx);
		bytes += BATCH * (r->size + 4);
		if (bytes >= PUMP_BUDGET_BYTES && r->sent < r->count) {
			if (!r->pump_posted &&
			    weft_loop_post(r->client_loop, pump_task, r) == 0)
				r->pump_posted = true;
			return;
		}
	}
}

static void
pump_task(weft_loop *loop, int status, void *arg)
{
	run *r = arg;

	(void)loop;
	r->pump_posted = false;
	if (status == 0 && r->send_ctx != NULL)
		pump(r, r->send_ctx);
}

static void
send_active(weft_ctx *ctx)
{
	run *r = weft_ctx_state(ctx);

	r->send_ctx = ctx;
	pump(r, ctx);
}

static void
send_writability(weft_ctx *ctx, bool writable)
{
	if (writable)
		pump(weft_ctx_state(ctx), ctx);
}

static void
send_inactive(weft_ctx *ctx)
{
	run *r = weft_ctx_state(ctx);

	r->send_ctx = NULL;
	weft_ctx_fire_inactive(ctx);
}

static void
ping(run *r, weft_ctx *ctx)
{
	r->ping_ns = weft_now_ns();
	write_msg(r, ctx);
	weft_ctx_flush(ctx);
}

static void
ping_active(weft_ctx *ctx)
{
	ping(weft_ctx_state(ctx), ctx);
}

static void
ping_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	run *r = weft_ctx_state(ctx);
	uint64_t now = weft_now_ns();

	if (type != &weft_msg_evbuffer)
		weft_msg_free(type, msg);
	/* The first tenth warms up. */
	if (r->received++ >= r->count / 10)
		weft_histogram_record(r->rtt, now - r->ping_ns);
	if (r->received == r->count)
		finish(r, 0);
	else
		ping(r, ctx);
}

static const weft_handler sender = {
    .active = send_active,
    .writability_changed = send_writability,
    .inactive = send_inactive,
};
static void start_connect(weft_loop *loop, int status, void *arg);
static void conn_read(weft_ctx *ctx, const weft_msg_type *type, void *msg);

static const weft_handler pinger = {
    .active = ping_active,
    .read = ping_read,
};

static void
on_connect(weft_channel *ch, int status, void *arg)
{
	run *r = arg;

	(void)ch;
	if (status != 0) {
		fprintf(stderr, "weft-tls-bench: connect: %s\n",
		        weft_strerror(status));
		finish(r, -1);
		return;
	}
}

/* A new connection's one round trip is back: the session ticket that
 * came with it is kept, so the next handshake can resume. */
static void
conn_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	run *r = weft_ctx_state(ctx);

	if (type != &weft_msg_evbuffer)
		weft_msg_free(type, msg);
	weft_ctx_close(ctx);
	if (++r->connects == r->count) {
		r->end_ns = weft_now_ns();
		finish(r, 0);
	} else {
		start_connect(r->client_loop, 0, r);
	}
}

static const weft_handler connector = {
    .active = ping_active,
    .read = conn_read,
};

static int
client_init(weft_channel *ch, void *arg)
{
	run *r = arg;

	return add_pipeline(ch,
	                    r->workload == THROUGHPUT ? &sender
	                    : r->workload == LATENCY  ? &pinger
	                                              : &connector,
	                    r);
}

static void
start_connect(weft_loop *loop, int status, void *arg)
{
	run *r = arg;
	char addr[64];
	weft_connect_opts o = {
	    .init = client_init,
	    .init_arg = r,
	    .tls = r->client_tls,
	    .server_name = r->client_tls != NULL ? NODE : NULL,
	};

	if (status != 0)
		return;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", r->port);
	if (weft_connect(loop, addr, &o, on_connect, r) != 0)
		finish(r, -1);
}

/* ---- Running one measurement -------------------------------------------- */

static int
execute(run *r)
{
	weft_loop_group *sg = NULL, *cg = NULL;
	weft_server_opts so = {0};
	weft_server *srv = NULL;
	struct timespec ts;
	int rv = -1;

	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->msg = evbuffer_new();
	r->payload = calloc(1, r->size ? r->size : 1);
	if (r->msg == NULL || r->payload == NULL ||
	    weft_histogram_new(&r->rtt) != 0 ||
	    weft_loop_group_new(1, &sg) != 0 ||
	    weft_loop_group_new(1, &cg) != 0)
		goto out;
	so.address = "127.0.0.1:0";
	so.init = server_init;
	so.init_arg = r;
	so.tls = r->server_tls;
	if (weft_server_new(sg, &so, &srv) != 0)
		goto out;
	r->port = weft_server_port(srv);
	r->client_loop = weft_loop_group_at(cg, 0);
	r->start_ns = r->workload == CONNECT ? weft_now_ns() : 0;
	if (weft_loop_post(r->client_loop, start_connect, r) != 0)
		goto out;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 120;
	pthread_mutex_lock(&r->lock);
	while (!r->done)
		if (pthread_cond_timedwait(&r->cond, &r->lock, &ts) != 0)
			break;
	rv = r->done ? r->status : -1;
	pthread_mutex_unlock(&r->lock);
out:
	if (srv != NULL)
		weft_server_close(srv, NULL, NULL);
	if (cg != NULL)
		weft_loop_group_free(cg);
	if (sg != NULL)
		weft_loop_group_free(sg);
	if (r->rtt != NULL && rv != 0) {
		weft_histogram_free(r->rtt);
		r->rtt = NULL;
	}
	if (r->msg != NULL)
		evbuffer_free(r->msg);
	free(r->payload);
	return rv;
}

/* ---- Reporting ---------------------------------------------------------- */

typedef struct result {
	double msgs_per_s, bytes_per_s, p50_us, p99_us, us_per_connect;
	double cpu_ns_per_byte; /* both threads: what a quiet machine needs */
	double cpu_us_per_connect; /* both ends, handshake included */
	bool ok;
} result;

static double
cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static result
measure(enum workload w, size_t size, uint64_t count, weft_tls_ctx *stls,
        weft_tls_ctx *ctls)
{
	run r = {.workload = w, .size = size, .count = count};
	result res = {0};
	double secs, cpu;

	r.server_tls = stls;
	r.client_tls = ctls;
	cpu = cpu_seconds();
	if (execute(&r) != 0) {
		fprintf(stderr, "weft-tls-bench: run failed\n");
		return res;
	}
	res.ok = true;
	res.cpu_ns_per_byte = (cpu_seconds() - cpu) * 1e9 / (double)count /
	                      (double)(size ? size : 1);
	secs = (double)(r.end_ns - r.start_ns) / 1e9;
	if (w == THROUGHPUT) {
		res.msgs_per_s = (double)(count - 1) / secs;
		res.bytes_per_s = res.msgs_per_s * (double)size;
	} else if (w == LATENCY) {
		res.p50_us = (double)weft_histogram_percentile(r.rtt, 50) / 1e3;
		res.p99_us = (double)weft_histogram_percentile(r.rtt, 99) / 1e3;
	} else {
		res.us_per_connect = secs * 1e6 / (double)count;
		res.cpu_us_per_connect =
		    (cpu_seconds() - cpu) * 1e6 / (double)count;
	}
	weft_histogram_free(r.rtt);
	return res;
}

/*
 * AES-128-GCM's cost on one core, in ns per byte: 16 KiB records (TLS's
 * largest), a fresh IV and a tag for each, as the record layer does, for
 * about 200 ms. 0 if OpenSSL refused.
 */
static double
gcm_ns_per_byte(void)
{
	static unsigned char in[16384], out[16384 + 16];
	unsigned char key[16] = {1}, iv[12] = {2}, tag[16];
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	uint64_t start = weft_now_ns(), now = start, bytes = 0;
	int len;

	if (ctx == NULL)
		return 0;
	while (now - start < 200000000u) {
		iv[0]++;
		if (EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), NULL, key, iv) !=
		        1 ||
		    EVP_EncryptUpdate(ctx, out, &len, in, sizeof(in)) != 1 ||
		    EVP_EncryptFinal_ex(ctx, out + len, &len) != 1 ||
		    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, sizeof(tag),
		                        tag) != 1) {
			EVP_CIPHER_CTX_free(ctx);
			return 0;
		}
		bytes += sizeof(in);
		now = weft_now_ns();
	}
	EVP_CIPHER_CTX_free(ctx);
	return (double)(now - start) / (double)bytes;
}

/*
 * The bound a TLS stream can reach on this machine: each byte costs what
 * it costs in plaintext (p's wall time per byte) and once more the
 * cipher's work, 1 / (plaintext ns/B + AES-128-GCM ns/B), both measured
 * in this run; and how close TLS came to it.
 */
static void
report_bound(result p, result t)
{
	double gcm = gcm_ns_per_byte(), plain, bound;

	if (!p.ok || !t.ok || gcm <= 0 || p.bytes_per_s <= 0)
		return;
	plain = 1e9 / p.bytes_per_s;
	bound = 1e9 / (plain + gcm);
	printf("%-22s %7.3f ns/B plaintext + %.3f ns/B AES-128-GCM = %.3f "
	       "GB/s | TLS at %.2f of it\n",
	       "  the bound", plain, gcm, bound / 1e9, t.bytes_per_s / bound);
}

static void
report_throughput(const char *name, result p, result t)
{
	printf("%-22s %9.3f Mmsg/s %7.3f GB/s | %9.3f Mmsg/s %7.3f GB/s | "
	       "%.2fx\n",
	       name, p.msgs_per_s / 1e6, p.bytes_per_s / 1e9,
	       t.msgs_per_s / 1e6, t.bytes_per_s / 1e9,
	       p.ok && t.ok ? t.msgs_per_s / p.msgs_per_s : 0.0);
	printf("%-22s %12.3f CPU ns/B %10s | %12.3f CPU ns/B %10s | %.2fx\n",
	       "", p.cpu_ns_per_byte, "", t.cpu_ns_per_byte, "",
	       p.ok && t.ok ? t.cpu_ns_per_byte / p.cpu_ns_per_byte : 0.0);
}

/* per_cpu_second: connections (both ends) one core makes per second. */
static double
per_cpu_second(result r)
{
	return r.ok && r.cpu_us_per_connect > 0 ? 1e6 / r.cpu_us_per_connect
	                                        : 0.0;
}

static int
make_certs(const char *dir)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd),
	         "sh %s/scripts/gen-certs.sh %s " NODE " >/dev/null",
	         WEFT_SOURCE_DIR, dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int
make_ctx(const char *dir, bool resume, weft_tls_ctx **out)
{
	char cert[512], key[512], ca[512];
	weft_tls_opts o = {.no_resumption = !resume};

	snprintf(cert, sizeof(cert), "%s/" NODE ".crt", dir);
	snprintf(key, sizeof(key), "%s/" NODE ".key", dir);
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
	o.cert_file = cert;
	o.key_file = key;
	o.ca_file = ca;
	return weft_tls_ctx_new(&o, out);
}

int
main(int argc, char **argv)
{
	char tmp[] = "/tmp/weft-tls-bench-XXXXXX";
	const char *dir = NULL;
	weft_tls_ctx *stls, *ctls, *cfull;
	uint64_t scale = 1;
	result p = {0}, t = {0}, tr = {0};
	const char *only = "all";
	bool tls_only = false, plain_only = false;
	int i;

	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("weft-tls-bench %s\n", weft_version());
		return 0;
	}
	/* A write to a peer that has gone must fail, not kill us. */
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0)
			scale = 10;
		else if (strcmp(argv[i], "--certs") == 0 && i + 1 < argc)
			dir = argv[++i];
		else if (strcmp(argv[i], "--tls-only") == 0)
			tls_only = true;
		else if (strcmp(argv[i], "--plain-only") == 0)
			plain_only = true;
		else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
			only = argv[++i];
		else {
			fprintf(stderr, "usage: weft-tls-bench [--quick] "
			                "[--certs DIR] [--only small|large|"
			                "latency|connect]\n");
			return 2;
		}
	}
	if (dir == NULL) {
		if (mkdtemp(tmp) == NULL || make_certs(tmp) != 0) {
			fprintf(stderr, "weft-tls-bench: cannot make "
			                "certificates\n");
			return 1;
		}
		dir = tmp;
	}
	if (make_ctx(dir, true, &stls) != 0 || make_ctx(dir, true, &ctls) ||
	    make_ctx(dir, false, &cfull) != 0)
		return 1;
	printf("%-22s %-32s | %-32s | TLS/plain\n", "workload", "plaintext",
	       "TLS 1.3 (mutual, AES-128-GCM)");

#define WANT(name) (strcmp(only, "all") == 0 || strcmp(only, name) == 0)
	if (WANT("small")) {
		p = tls_only
		        ? p
		        : measure(THROUGHPUT, 64, 5000000 / scale, NULL, NULL);
		t = plain_only
		        ? t
		        : measure(THROUGHPUT, 64, 5000000 / scale, stls, ctls);
		report_throughput("one-way 64 B", p, t);
	}
	if (WANT("large")) {
		p = tls_only
		        ? p
		        : measure(THROUGHPUT, 65536, 40000 / scale, NULL, NULL);
		t = plain_only
		        ? t
		        : measure(THROUGHPUT, 65536, 40000 / scale, stls, ctls);
		report_throughput("one-way 64 KiB", p, t);
		report_bound(p, t);
	}
	if (!WANT("latency"))
		goto connect;

	p = tls_only ? p : measure(LATENCY, 64, 50000 / scale, NULL, NULL);
	t = plain_only ? t : measure(LATENCY, 64, 50000 / scale, stls, ctls);
	printf("%-22s p50 %6.1f us p99 %6.1f us      | p50 %6.1f us p99 %6.1f "
	       "us      | %.2fx p50\n",
	       "ping-pong 64 B", p.p50_us, p.p99_us, t.p50_us, t.p99_us,
	       p.ok && t.ok ? t.p50_us / p.p50_us : 0.0);

connect:
	if (!WANT("connect"))
		goto out;
	p = tls_only ? p : measure(CONNECT, 64, 2000 / scale, NULL, NULL);
	t = plain_only ? t : measure(CONNECT, 64, 2000 / scale, stls, cfull);
	tr = plain_only ? tr : measure(CONNECT, 64, 2000 / scale, stls, ctls);
	printf("%-22s %8.1f us per connect         | full %6.1f us, resumed "
	       "%6.1f us\n",
	       "new connection", p.us_per_connect, t.us_per_connect,
	       tr.us_per_connect);
	/* Both ends run in this process: its CPU is the whole cost. */
	printf("%-22s %8.1f us CPU per connect     | full %6.1f us, resumed "
	       "%6.1f us CPU\n",
	       "", p.cpu_us_per_connect, t.cpu_us_per_connect,
	       tr.cpu_us_per_connect);
	printf("%-22s %8.0f per CPU second         | full %6.0f, resumed "
	       "%6.0f per CPU second\n",
	       "", per_cpu_second(p), per_cpu_second(t), per_cpu_second(tr));
out:
	weft_tls_ctx_unref(stls);
	weft_tls_ctx_unref(ctls);
	weft_tls_ctx_unref(cfull);
	if (dir == tmp) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
		if (system(cmd) != 0)
			return 1;
	}
	return 0;
}
