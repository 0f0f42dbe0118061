/* SPDX-License-Identifier: MIT */
/*
 * pipeclient.c: rpc --impl pipeline, one client process: one TCP channel
 * to the server (n0) with a frame codec, an envelope codec and a handler
 * that keeps D requests in flight, matches each response to its request
 * by id and records the round trip in a weft_histogram, written on weft's
 * public pipeline API alone. Its loop runs the requests; the main thread
 * talks to the coordinator and ticks.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/channel.h>
#include <weft/envelope.h>
#include <weft/frame.h>
#include <weft/histogram.h>
#include <weft/loop.h>
#include <weft/transport.h>

#include "wbench.h"

#define PROGRESS_SAMPLE 16
#define CONNECT_TIMEOUT_MS 30000
#define PRIME_TIMEOUT_NS 60000000000u
#define IDLE_TIMEOUT_NS 30000000000u

/* One request kept in flight. Slot i sends the ids i + k * D, so that a
 * response's id names its slot, and a request's its one response. */
typedef struct pslot {
	uint64_t id; /* of the latest request */
	uint64_t sent_ns;
	bool in_flight;
} pslot;

typedef struct pclient {
	const wbench_opts *o;
	weft_loop_group *group;
	uint16_t port;
	uint8_t *payload;
	pslot *slots;
	unsigned nslots;
	uint64_t window_start_ns, window_end_ns; /* set before "go" */
	weft_histogram *lat;
	wbench_sample so_far; /* for the ticks */
	/* The loop thread's, until the loops are freed. */
	weft_ctx *ctx; /* the handler's, while the channel is up */
	bool running;  /* past "go": a response sends the next request */
	uint64_t ok, errors, sent, replies, duplicates;
	uint64_t msgs_in, read_batches;
	int first_error;
	/* Read by the main thread while the loop runs. */
	atomic_uint_fast64_t completed;
	atomic_uint active; /* slots with a request in flight */
	atomic_int primed;  /* 0: not yet, 1: answered, -1: failed */
} pclient;

static void
note_error(pclient *c, int status)
{
	if (c->first_error == 0)
		c->first_error = status;
}

/* slot_send writes the slot's next request (flushed by the caller, or at
 * the end of the loop's wake-up). */
static void
slot_send(pclient *c, pslot *s)
{
	weft_envelope req = {
	    .verb = WBENCH_VERB_ECHO,
	    .flags = WEFT_ENVELOPE_REQUEST,
	    .payload = c->payload,
	    .payload_len = c->o->size,
	};

	s->id += c->nslots;
	req.id = s->id;
	s->in_flight = true;
	s->sent_ns = weft_now_ns();
	c->sent++;
	weft_ctx_write(c->ctx, &weft_msg_envelope, &req, NULL, NULL);
}

/* status_of judges a response: 0, or why it is not the echo asked for. */
static int
status_of(const pclient *c, const weft_envelope *resp)
{
	if ((resp->flags & WEFT_ENVELOPE_KIND_BITS) != WEFT_ENVELOPE_RESPONSE)
		return WEFT_EPROTO;
	return resp->payload_len == c->o->size ? 0 : WBENCH_EUNEXPECTED;
}

/* book counts a response of the run and sends the slot's next request,
 * until the window closes. */
static void
book(pclient *c, pslot *s, int status, uint64_t now)
{
	if (now >= c->window_start_ns && now < c->window_end_ns) {
		if (status == 0) {
			c->ok++;
			weft_histogram_record(c->lat, now - s->sent_ns);
		} else {
			c->errors++;
		}
	}
	if (status != 0)
		note_error(c, status);
	if (atomic_fetch_add_explicit(&c->completed, 1, memory_order_relaxed) %
	        PROGRESS_SAMPLE ==
	    0)
		wbench_sample_record(&c->so_far, now - s->sent_ns);
	if (now < c->window_end_ns)
		slot_send(c, s);
	else
		atomic_fetch_sub_explicit(&c->active, 1, memory_order_release);
}

static void
rpc_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	pclient *c = weft_ctx_state(ctx);
	const weft_envelope *resp = msg;
	pslot *s;

	if (type != &weft_msg_envelope) {
		weft_msg_free(type, msg);
		return;
	}
	c->msgs_in++;
	s = &c->slots[resp->id % c->nslots];
	/* Every request is answered once: another response finds its slot
	 * idle, or waiting for a later id. */
	if (!s->in_flight || s->id != resp->id) {
		c->duplicates++;
		return;
	}
	s->in_flight = false;
	c->replies++;
	if (c->running)
		book(c, s, status_of(c, resp), weft_now_ns());
	else /* the priming request */
		atomic_store(&c->primed, status_of(c, resp) == 0 ? 1 : -1);
}

/* rpc_read_complete sends the requests of a read batch in one write. */
static void
rpc_read_complete(weft_ctx *ctx)
{
	pclient *c = weft_ctx_state(ctx);

	c->read_batches++;
	weft_ctx_flush(ctx);
}

/* rpc_active primes the connection with one request from slot 0. */
static void
rpc_active(weft_ctx *ctx)
{
	pclient *c = weft_ctx_state(ctx);

	c->ctx = ctx;
	slot_send(c, &c->slots[0]);
	weft_ctx_flush(ctx);
}

/* rpc_inactive: the requests in flight are lost, and the run is over. */
static void
rpc_inactive(weft_ctx *ctx)
{
	pclient *c = weft_ctx_state(ctx);

	c->ctx = NULL;
	if (atomic_load(&c->active) > 0 || atomic_load(&c->primed) == 0)
		note_error(c, WEFT_ECLOSED);
	atomic_store(&c->active, 0);
	if (atomic_load(&c->primed) == 0)
		atomic_store(&c->primed, -1);
}

static const weft_handler rpc_handler = {
    .active = rpc_active,
    .read = rpc_read,
    .read_complete = rpc_read_complete,
    .inactive = rpc_inactive,
};

static int
client_init(weft_channel *ch, void *arg)
{
	const pclient *c = arg;
	int rv = wbench_pipe_codecs(ch, c->o->size);

	if (rv != 0)
		return rv;
	return weft_pipeline_add_last(ch, "rpc", &rpc_handler, arg);
}

static void
connected(weft_channel *ch, int status, void *arg)
{
	pclient *c = arg;

	(void)ch;
	if (status == 0)
		return; /* rpc_active has sent the priming request */
	fprintf(stderr, "weft-bench: pipeline client: connect: %s\n",
	        weft_strerror(status));
	atomic_store(&c->primed, -1);
}

static void
connect_task(weft_loop *loop, int status, void *arg)
{
	pclient *c = arg;
	weft_connect_opts co = {0};
	char addr[32];

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", c->port);
	co.timeout_ms = CONNECT_TIMEOUT_MS;
	co.init = client_init;
	co.init_arg = c;
	if (status != 0 || weft_connect(loop, addr, &co, connected, c) != 0)
		atomic_store(&c->primed, -1);
}

/* start_task sends every slot's first request. */
static void
start_task(weft_loop *loop, int status, void *arg)
{
	pclient *c = arg;

	(void)loop;
	c->running = true;
	if (status != 0 || c->ctx == NULL) {
		atomic_store(&c->active, 0);
		return;
	}
	for (unsigned i = 0; i < c->nslots; i++)
		slot_send(c, &c->slots[i]);
	weft_ctx_flush(c->ctx);
}

static int
client_start(pclient *c, const wbench_opts *o)
{
	c->o = o;
	c->nslots = o->outstanding;
	c->payload = calloc(1, o->size ? o->size : 1);
	c->slots = calloc(c->nslots, sizeof(*c->slots));
	if (c->payload == NULL || c->slots == NULL ||
	    wbench_hist_new(&c->lat) != 0 ||
	    wbench_sample_init(&c->so_far) != 0 ||
	    weft_loop_group_new(1, &c->group) != 0)
		return -1;
	wbench_payload_fill(c->payload, o->size, o->payload, o->seed);
	for (unsigned i = 0; i < c->nslots; i++)
		c->slots[i].id = i;
	return 0;
}

/* client_stop frees the loops first: the figures are then the main
 * thread's. */
static void
client_stop(pclient *c)
{
	if (c->group != NULL) {
		weft_loop_group_shutdown(c->group, 1000);
		weft_loop_group_free(c->group);
		c->group = NULL;
	}
}

static void
client_free(pclient *c)
{
	client_stop(c);
	wbench_sample_fini(&c->so_far);
	weft_histogram_free(c->lat);
	free(c->slots);
	free(c->payload);
}

/* prime connects and waits for the answer to one request. */
static int
prime(pclient *c)
{
	uint64_t deadline = wbench_now_ns() + PRIME_TIMEOUT_NS;

	if (weft_loop_post(weft_loop_group_at(c->group, 0), connect_task, c) !=
	    0)
		return -1;
	while (atomic_load(&c->primed) == 0 && wbench_now_ns() < deadline)
		wload_sleep_until(wbench_now_ns() + 1000000u);
	return atomic_load(&c->primed) == 1 ? 0 : -1;
}

static void
tick(void *arg)
{
	pclient *c = arg;

	wbench_child_say(
	    "tick %llu %llu", (unsigned long long)atomic_load(&c->completed),
	    (unsigned long long)wbench_sample_percentile(&c->so_far, 99));
}

/* run_window starts the slots, ticks through the window, and waits for
 * the slots to go idle. */
static int
run_window(pclient *c, wbench_rusage *before, wbench_rusage *after)
{
	uint64_t deadline;

	c->window_start_ns = wbench_now_ns() + (uint64_t)(c->o->warmup_s * 1e9);
	c->window_end_ns =
	    c->window_start_ns + (uint64_t)(c->o->duration_s * 1e9);
	atomic_store(&c->active, c->nslots);
	if (weft_loop_post(weft_loop_group_at(c->group, 0), start_task, c) != 0)
		return -1;
	wbench_child_window(c->window_start_ns, c->window_end_ns, tick, c,
	                    before, after);
	deadline = wbench_now_ns() + IDLE_TIMEOUT_NS;
	while (atomic_load_explicit(&c->active, memory_order_acquire) > 0 &&
	       wbench_now_ns() < deadline)
		wload_sleep_until(wbench_now_ns() + 1000000u);
	return 0;
}

static void
report(pclient *c, const wbench_rusage *before, const wbench_rusage *after)
{
	wbench_child_figs f = {
	    .ops = c->ok,
	    .errors = c->errors,
	    .wakeups = c->read_batches,
	    .msgs_in = c->msgs_in,
	    .sent = c->sent,
	    .replies = c->replies,
	    .duplicates = c->duplicates,
	    .first_error = c->first_error,
	};

	wbench_child_result(&f, before, after);
	wbench_hist_print(c->lat, "hist", stdout);
	fflush(stdout);
}

/* read_port takes the server's port, the first of "ports P0 ...". */
static int
read_port(pclient *c, const char *line)
{
	char *end;
	unsigned long port = strtoul(line + 5, &end, 10);

	if (end == line + 5 || port == 0 || port > 65535)
		return -1;
	c->port = (uint16_t)port;
	return 0;
}

int
wbench_pipe_client(const wbench_opts *o)
{
	wbench_rusage before = {0}, after = {0};
	char line[65536];
	pclient c = {0};
	int rv = -1;

	if (!WEFT_LOG_ENABLED(WEFT_LOG_DEBUG))
		weft_log_set_level(WEFT_LOG_WARN);
	if (o->outstanding == 0 || client_start(&c, o) != 0)
		goto out;
	wbench_child_say("port 1");
	if (wbench_child_expect("ports", line, sizeof(line)) != 0 ||
	    read_port(&c, line) != 0)
		goto out;
	wbench_child_say("addressed");
	if (wbench_child_expect("prime", line, sizeof(line)) != 0 ||
	    prime(&c) != 0)
		goto out;
	wbench_child_say("ready");
	if (wbench_child_expect("go", line, sizeof(line)) != 0 ||
	    run_window(&c, &before, &after) != 0)
		goto out;
	wbench_child_say("done");
	if (wbench_child_expect("exit", line, sizeof(line)) != 0)
		goto out;
	weft_log_set_level(WEFT_LOG_ERROR);
	client_stop(&c);
	report(&c, &before, &after);
	if (fgets(line, sizeof(line), stdin) != NULL &&
	    strncmp(line, "quit", 4) != 0)
		goto out;
	rv = 0;
out:
	client_free(&c);
	return rv;
}
