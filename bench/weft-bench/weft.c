/* SPDX-License-Identifier: MIT */
/*
 * weft.c: the workloads through weft's full pipeline: a TCP channel, the
 * frame codec, and one handler call per message.
 *
 * The measuring half runs a server on a group of one loop and accepts one
 * connection; the load half connects from a group of its own. The calling
 * thread only starts the run and waits for its end.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include <weft/channel.h>
#include <weft/frame.h>
#include <weft/histogram.h>
#include <weft/loop.h>
#include <weft/tls.h>
#include <weft/transport.h>

#include "wbench.h"

/* Messages at least this large reference the pattern instead of copying
 * it, as a user sending large payloads would. */
#define ZERO_COPY_MIN 4096
/* Most bytes the sender writes in one callback before letting the loop
 * run, whatever the water marks say. */
#define PUMP_BUDGET_BYTES (4u << 20)
#define RETRY_MS 50

/* The state of one half, shared by its handler and the waiting thread. */
typedef struct side {
	const wbench_opts *o;
	weft_loop_group *group;
	weft_loop *loop;
	weft_channel *ch; /* the one connection, until inactive */
	weft_ctx *ctx;    /* the bench handler's, until inactive */
	uint8_t *payload; /* pattern with the current sequence number */
	struct evbuffer *msg;
	weft_histogram *rtt;
	weft_tls_ctx *tls; /* --tls: this half's context, or NULL */
	weft_timer *timer; /* progress, or connect retries */
	wbench_progress prog;
	uint64_t total;    /* warm-up + count; UINT64_MAX: not known yet */
	uint64_t warm;     /* warm-up messages; UINT64_MAX: not over yet */
	uint64_t sent;     /* messages written (pings, for latency) */
	uint64_t received; /* messages read (echoes, for latency) */
	uint64_t errors;
	uint64_t start_ns, end_ns, start_received, ping_ns, first_ns;
	uint64_t cpu_start_ns, cpu_end_ns; /* the process's, at the window */
	bool pump_posted;
	/* Set once on the loop, read by the waiting thread under lock. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool finished;
	int status;
} side;

/* side_tls makes the half's TLS context from --tls DIR: DIR/ID.crt,
 * DIR/ID.key and DIR/ca.crt (scripts/gen-certs.sh DIR n0 n1). */
static int
side_tls(side *s, const char *id)
{
	char cert[512], key[512], ca[512];
	weft_tls_opts to = {0};
	int rv;

	if (s->o->tls_dir == NULL)
		return 0;
	snprintf(cert, sizeof(cert), "%s/%s.crt", s->o->tls_dir, id);
	snprintf(key, sizeof(key), "%s/%s.key", s->o->tls_dir, id);
	snprintf(ca, sizeof(ca), "%s/ca.crt", s->o->tls_dir);
	to.cert_file = cert;
	to.key_file = key;
	to.ca_file = ca;
	to.ktls = true; /* where the kernel offers it; reported at connect */
	if ((rv = weft_tls_ctx_new(&to, &s->tls)) != 0) {
		fprintf(stderr, "weft-bench: weft: TLS from %s: %s\n",
		        s->o->tls_dir, weft_strerror(rv));
		return -1;
	}
	return 0;
}

static int
side_init(side *s, const wbench_opts *o, const char *id)
{
	pthread_condattr_t attr;

	memset(s, 0, sizeof(*s));
	s->o = o;
	s->warm = o->warmup_by_time ? UINT64_MAX : o->warmup_count;
	s->total = s->warm == UINT64_MAX ? UINT64_MAX : s->warm + o->count;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &attr);
	pthread_condattr_destroy(&attr);
	s->payload = malloc(o->size ? o->size : 1);
	s->msg = evbuffer_new();
	if (s->payload == NULL || s->msg == NULL ||
	    weft_histogram_new(&s->rtt) != 0 || side_tls(s, id) != 0)
		return -1;
	wbench_pattern_fill(s->payload, o->size, o->seed);
	return 0;
}

static void
side_fini(side *s)
{
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	if (s->tls)
		weft_tls_ctx_unref(s->tls);
	weft_histogram_free(s->rtt);
	if (s->msg)
		evbuffer_free(s->msg);
	free(s->payload);
}

/* finish ends the half once, on the loop thread: status 0 or -1. */
static void
finish(side *s, int status)
{
	bool first;

	if (s->timer) {
		weft_timer_free(s->timer);
		s->timer = NULL;
	}
	if (s->ch)
		weft_channel_close(s->ch);
	pthread_mutex_lock(&s->lock);
	first = !s->finished;
	if (first) {
		s->finished = true;
		s->status = status;
		pthread_cond_signal(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
}

static void
abort_task(weft_loop *loop, int status, void *arg)
{
	(void)loop;
	(void)status;
	finish(arg, -1);
}

/* wait_finish waits for the half to end; past the deadline it is ended
 * with an error. Returns the half's status. */
static int
wait_finish(side *s)
{
	struct timespec ts;
	int rv = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(s->o->timeout_ms / 1000);
	pthread_mutex_lock(&s->lock);
	while (!s->finished && rv != ETIMEDOUT)
		rv = pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	if (!s->finished) {
		fprintf(stderr, "weft-bench: weft: run timed out\n");
		pthread_mutex_unlock(&s->lock);
		if (weft_loop_post(s->loop, abort_task, s) != 0)
			return -1;
		pthread_mutex_lock(&s->lock);
		while (!s->finished)
			pthread_cond_wait(&s->cond, &s->lock);
	}
	rv = s->status;
	pthread_mutex_unlock(&s->lock);
	return rv;
}

/* ---- Messages ---------------------------------------------------------- */

/* write_msg sends message seq down the pipeline from ctx (not flushed). */
static void
write_msg(side *s, weft_ctx *ctx, uint64_t seq)
{
	size_t size = s->o->size;

	weft_bytes run = {s->payload, size};

	wbench_seq_put(s->payload, size, seq);
	if (size >= ZERO_COPY_MIN) {
		evbuffer_add(s->msg, s->payload, WBENCH_SEQ_BYTES);
		evbuffer_add_reference(s->msg, s->payload + WBENCH_SEQ_BYTES,
		                       size - WBENCH_SEQ_BYTES, NULL, NULL);
		weft_ctx_write(ctx, &weft_msg_evbuffer, s->msg, NULL, NULL);
	} else {
		/* A borrowed run: the codec frames it without allocating. */
		weft_ctx_write(ctx, &weft_msg_bytes, &run, NULL, NULL);
	}
}

/* verify_body compares a frame's bytes past the sequence number with the
 * pattern. */
static bool
verify_body(side *s, struct evbuffer *buf)
{
	size_t off = 0, skip = s->o->size < WBENCH_SEQ_BYTES ? s->o->size
	                                                     : WBENCH_SEQ_BYTES;
	int n = evbuffer_peek(buf, -1, NULL, NULL, 0);
	struct evbuffer_iovec *vec =
	    calloc(n > 0 ? (size_t)n : 1, sizeof(*vec));
	bool same = vec != NULL;

	if (vec != NULL)
		n = evbuffer_peek(buf, -1, NULL, vec, n);
	for (int i = 0; same && i < n; i++) {
		const uint8_t *p = vec[i].iov_base;
		size_t len = vec[i].iov_len, d = 0;

		if (off < skip)
			d = skip - off < len ? skip - off : len;
		same = memcmp(p + d, s->payload + off + d, len - d) == 0;
		off += len;
	}
	free(vec);
	return same;
}

/* check_msg checks one received message: type, length, sequence number
 * and, with --verify, content. Frees a typed message. */
static void
check_msg(side *s, const weft_msg_type *type, void *msg)
{
	struct evbuffer *buf = msg;
	size_t size = s->o->size;
	uint8_t head[WBENCH_SEQ_BYTES];
	size_t seq_len = size < WBENCH_SEQ_BYTES ? size : WBENCH_SEQ_BYTES;

	if (type == &weft_msg_bytes) {
		/* A small frame, straight from the input buffer. */
		const weft_bytes *run = msg;

		if (run->len != size ||
		    wbench_seq_get(run->data, size) !=
		        (s->received & wbench_seq_mask(size)) ||
		    (s->o->verify && size > seq_len &&
		     memcmp((const uint8_t *)run->data + seq_len,
		            s->payload + seq_len, size - seq_len) != 0))
			s->errors++;
		return;
	}
	if (type != &weft_msg_evbuffer) {
		s->errors++;
		weft_msg_free(type, msg);
		return;
	}
	if (evbuffer_get_length(buf) != size ||
	    evbuffer_copyout(buf, head, seq_len) != (ssize_t)seq_len ||
	    wbench_seq_get(head, size) != (s->received & wbench_seq_mask(size)))
		s->errors++;
	else if (s->o->verify && !verify_body(s, buf))
		s->errors++;
}

static int
add_codec(weft_channel *ch)
{
	weft_frame_codec_opts fo = {0};

	fo.max_frame_bytes = WBENCH_MAX_SIZE;
	fo.emit_bytes = true;
	return weft_frame_codec_add(ch, "frame", &fo);
}

/* ---- The measuring half ------------------------------------------------- */

static void
progress_cb(weft_timer *timer, void *arg)
{
	side *s = arg;
	uint64_t done = s->warm != UINT64_MAX && s->received > s->warm
	                    ? s->received - s->warm
	                    : 0;

	(void)timer;
	wbench_progress_tick(&s->prog, weft_now_ns(), done,
	                     s->o->workload == WBENCH_LATENCY ? s->rtt : NULL);
}

/* end_warmup ends the warm-up once it is over, with done messages (round
 * trips) behind it; the run's total follows. */
static void
end_warmup(side *s, uint64_t done, uint64_t now)
{
	if (s->warm != UINT64_MAX ||
	    !wbench_warmup_over(s->o, done, s->first_ns, now))
		return;
	s->warm = done;
	s->total = done + s->o->count;
}

/* recv_read counts and checks one message; the window runs from the first
 * measured message's arrival to the last's. */
static void
recv_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	side *s = weft_ctx_state(ctx);
	uint64_t now = weft_now_ns();

	check_msg(s, type, msg);
	s->first_ns = s->first_ns ? s->first_ns : now;
	end_warmup(s, s->received, now);
	if (++s->received == s->warm + 1) {
		s->start_ns = now;
		s->cpu_start_ns = wbench_cpu_ns();
		s->start_received = s->received;
	}
	if (s->received == s->total) {
		s->end_ns = weft_now_ns();
		s->cpu_end_ns = wbench_cpu_ns();
		finish(s, 0);
	}
}

/* send_ping writes the next ping and notes when it left. */
static void
send_ping(side *s, weft_ctx *ctx)
{
	s->ping_ns = weft_now_ns();
	s->first_ns = s->first_ns ? s->first_ns : s->ping_ns;
	end_warmup(s, s->sent, s->ping_ns);
	write_msg(s, ctx, s->sent++);
	weft_ctx_flush(ctx);
}

static void
ping_active(weft_ctx *ctx)
{
	send_ping(weft_ctx_state(ctx), ctx);
}

static void
ping_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	side *s = weft_ctx_state(ctx);
	uint64_t now = weft_now_ns();

	check_msg(s, type, msg);
	if (s->received++ >= s->warm) {
		weft_histogram_record(s->rtt, now - s->ping_ns);
		if (s->start_ns == 0) {
			s->start_ns = s->ping_ns;
			s->cpu_start_ns = wbench_cpu_ns();
		}
	}
	if (s->received == s->total) {
		s->end_ns = now;
		s->cpu_end_ns = wbench_cpu_ns();
		finish(s, 0);
	} else if (s->received == s->sent) {
		send_ping(s, ctx);
	}
}

/* measure_inactive: the connection ended before the run did. */
static void
measure_inactive(weft_ctx *ctx)
{
	side *s = weft_ctx_state(ctx);
	bool complete = s->total != UINT64_MAX && s->received >= s->total;

	s->ch = NULL;
	s->ctx = NULL;
	if (!complete)
		fprintf(stderr,
		        "weft-bench: weft: connection lost after %llu "
		        "messages\n",
		        (unsigned long long)s->received);
	finish(s, complete ? 0 : -1);
}

static const weft_handler receiver_handler = {
    .read = recv_read,
    .inactive = measure_inactive,
};

static const weft_handler pinger_handler = {
    .active = ping_active,
    .read = ping_read,
    .inactive = measure_inactive,
};

/* measure_init builds the pipeline of the one accepted connection. */
static int
measure_init(weft_channel *ch, void *arg)
{
	side *s = arg;
	const weft_handler *h = s->o->workload == WBENCH_THROUGHPUT
	                            ? &receiver_handler
	                            : &pinger_handler;
	int rv;

	if (s->ch != NULL || s->finished)
		return WEFT_EBUSY; /* one connection per run */
	s->loop = weft_channel_loop(ch);
	if ((rv = add_codec(ch)) != 0 ||
	    (rv = weft_pipeline_add_last(ch, "bench", h, s)) != 0)
		return rv;
	if (weft_timer_new(s->loop, progress_cb, s, &s->timer) == 0)
		weft_timer_start(s->timer, 1000, 1000);
	wbench_progress_init(&s->prog, s->o, "weft");
	s->ch = ch;
	return 0;
}

static void
measure_result(side *s, wbench_result *res)
{
	res->received = s->received;
	res->warmup = s->warm == UINT64_MAX ? s->received : s->warm;
	res->errors = s->errors + (s->received < res->warmup + s->o->count);
	if (s->start_ns && s->end_ns > s->start_ns)
		res->seconds = (double)(s->end_ns - s->start_ns) / 1e9;
	if (s->o->workload == WBENCH_THROUGHPUT) {
		/* Messages read past the run's end are checked, not
		 * measured. */
		uint64_t last = s->received < s->total ? s->received : s->total;

		res->measured = s->start_ns ? last - s->start_received : 0;
	} else {
		res->measured = weft_histogram_count(s->rtt);
		wbench_result_latency(res, s->rtt);
	}
	if (res->measured > 0 && s->cpu_end_ns > s->cpu_start_ns)
		res->cpu_us = (double)(s->cpu_end_ns - s->cpu_start_ns) / 1e3 /
		              (double)res->measured;
	wbench_result_rates(res, s->o->size);
}

static int
serve(side *s, wbench_ready_cb ready, void *arg)
{
	weft_server_opts so = {0};
	weft_server *srv;
	int rv;

	so.address = s->o->addr;
	so.init = measure_init;
	so.init_arg = s;
	so.tls = s->tls;
	s->loop = weft_loop_group_at(s->group, 0);
	if ((rv = weft_server_new(s->group, &so, &srv)) != 0) {
		fprintf(stderr, "weft-bench: weft: listen %s: %s\n", s->o->addr,
		        weft_strerror(rv));
		return -1;
	}
	rv = ready ? ready(weft_server_address(srv), arg) : 0;
	if (rv == 0)
		rv = wait_finish(s);
	weft_server_close(srv, NULL, NULL);
	return rv;
}

int
wbench_weft_measure(const wbench_opts *o, wbench_ready_cb ready, void *arg,
                    wbench_result *res)
{
	side s;
	int rv = -1;

	memset(res, 0, sizeof(*res));
	if (side_init(&s, o, "n0") != 0 ||
	    weft_loop_group_new(1, &s.group) != 0)
		goto out;
	weft_loop_set_busy_poll(weft_loop_group_at(s.group, 0),
	                        o->busy_poll_us);
	rv = serve(&s, ready, arg);
	weft_loop_group_free(s.group);
	measure_result(&s, res);
out:
	side_fini(&s);
	return rv;
}

/* ---- The load half ------------------------------------------------------ */

static void pump_task(weft_loop *loop, int status, void *arg);

/* pump writes batches of messages while the channel is writable; it stops
 * at the high-water mark (writability_changed resumes it) or after a
 * budget of bytes (a task resumes it, so the loop gets to run). */
static void
pump(side *s, weft_ctx *ctx)
{
	weft_channel *ch = weft_ctx_channel(ctx);
	size_t bytes = 0;

	while (s->sent < s->total && weft_channel_is_writable(ch)) {
		uint64_t n = s->total - s->sent;

		n = n < s->o->batch ? n : s->o->batch;
		for (uint64_t i = 0; i < n; i++)
			write_msg(s, ctx, s->sent++);
		weft_ctx_flush(ctx);
		bytes += n * (s->o->size + 4);
		if (bytes >= PUMP_BUDGET_BYTES && s->sent < s->total) {
			if (!s->pump_posted &&
			    weft_loop_post(s->loop, pump_task, s) == 0)
				s->pump_posted = true;
			return;
		}
	}
}

static void
pump_task(weft_loop *loop, int status, void *arg)
{
	side *s = arg;

	(void)loop;
	s->pump_posted = false;
	if (status == 0 && s->ctx != NULL)
		pump(s, s->ctx);
}

static void
send_active(weft_ctx *ctx)
{
	side *s = weft_ctx_state(ctx);

	s->ctx = ctx;
	pump(s, ctx);
}

static void
send_writability(weft_ctx *ctx, bool writable)
{
	if (writable)
		pump(weft_ctx_state(ctx), ctx);
}

static void
echo_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	side *s = weft_ctx_state(ctx);

	s->received++;
	weft_ctx_write(ctx, type, msg, NULL, NULL);
}

static void
echo_read_complete(weft_ctx *ctx)
{
	weft_ctx_flush(ctx);
}

/* load_inactive: the measuring half closed the connection, which ends the
 * run: it counts the messages and judges them. */
static void
load_inactive(weft_ctx *ctx)
{
	side *s = weft_ctx_state(ctx);

	s->ch = NULL;
	s->ctx = NULL;
	finish(s, 0);
}

static const weft_handler sender_handler = {
    .active = send_active,
    .writability_changed = send_writability,
    .inactive = load_inactive,
};

static const weft_handler echo_handler = {
    .read = echo_read,
    .read_complete = echo_read_complete,
    .inactive = load_inactive,
};

static int
load_init(weft_channel *ch, void *arg)
{
	side *s = arg;
	const weft_handler *h = s->o->workload == WBENCH_THROUGHPUT
	                            ? &sender_handler
	                            : &echo_handler;
	int rv;

	if ((rv = add_codec(ch)) != 0 ||
	    (rv = weft_pipeline_add_last(ch, "bench", h, s)) != 0)
		return rv;
	s->ch = ch;
	return 0;
}

static void connect_now(side *s);

static void
retry_cb(weft_timer *timer, void *arg)
{
	(void)timer;
	connect_now(arg);
}

/* connected: a refused connection is retried until the deadline, for a
 * --connect started before its --listen. */
static void
connected(weft_channel *ch, int status, void *arg)
{
	side *s = arg;
	weft_tls_info info;

	if (status == 0) {
		/* Which TLS path ran: user space, or the kernel's. */
		if (weft_tls_get_info(ch, &info) == 0)
			fprintf(stderr,
			        "weft-bench: weft: %s %s, kTLS send %s, "
			        "receive %s\n",
			        info.version, info.cipher,
			        info.ktls_send ? "yes" : "no",
			        info.ktls_recv ? "yes" : "no");
		return;
	}
	if (status == WEFT_ECONNREFUSED && weft_now_ns() < s->start_ns &&
	    (s->timer != NULL ||
	     weft_timer_new(s->loop, retry_cb, s, &s->timer) == 0) &&
	    weft_timer_start(s->timer, RETRY_MS, 0) == 0)
		return;
	fprintf(stderr, "weft-bench: weft: connect %s: %s\n", s->o->addr,
	        weft_strerror(status));
	finish(s, -1);
}

static void
connect_now(side *s)
{
	weft_connect_opts co = {0};
	int rv;

	co.init = load_init;
	co.init_arg = s;
	co.timeout_ms = s->o->timeout_ms;
	co.tls = s->tls;
	co.server_name = s->tls ? "n0" : NULL;
	rv = weft_connect(s->loop, s->o->addr, &co, connected, s);
	if (rv != 0) {
		fprintf(stderr, "weft-bench: weft: connect %s: %s\n",
		        s->o->addr, weft_strerror(rv));
		finish(s, -1);
	}
}

static void
connect_task(weft_loop *loop, int status, void *arg)
{
	side *s = arg;

	(void)loop;
	/* start_ns doubles as the retry deadline on this side. */
	s->start_ns = weft_now_ns() + s->o->timeout_ms * 1000000u;
	if (status == 0)
		connect_now(s);
	else
		finish(s, -1);
}

int
wbench_weft_load(const wbench_opts *o)
{
	side s;
	int rv = -1;

	if (side_init(&s, o, "n1") != 0 ||
	    weft_loop_group_new(1, &s.group) != 0)
		goto out;
	/* The sender goes on until the receiver has counted enough and
	 * closes the connection (or --timeout passes). */
	s.total = UINT64_MAX;
	s.loop = weft_loop_group_at(s.group, 0);
	weft_loop_set_busy_poll(s.loop, o->busy_poll_us);
	if (weft_loop_post(s.loop, connect_task, &s) == 0)
		rv = wait_finish(&s);
	weft_loop_group_free(s.group);
out:
	side_fini(&s);
	return rv;
}
