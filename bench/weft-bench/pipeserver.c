/* SPDX-License-Identifier: MIT */
/*
 * pipeserver.c: rpc --impl pipeline, the server process (n0): an RPC echo
 * server written on weft's public pipeline API alone. Each accepted TCP
 * channel gets a frame codec, an envelope codec and a handler that
 * answers every request envelope with a response of the same id carrying
 * the same payload. One loop serves every client, as the messaging
 * service's server does in the msvc runs.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <weft/channel.h>
#include <weft/envelope.h>
#include <weft/frame.h>
#include <weft/loop.h>
#include <weft/transport.h>

#include "wbench.h"

typedef struct pserver {
	const wbench_opts *o;
	weft_loop_group *group;
	weft_server *srv;
	/* Written by the loop thread alone, read by the main thread. */
	atomic_uint_fast64_t requests, read_batches;
} pserver;

/* count_one adds one to a counter only the loop thread writes: a plain
 * add, with no locked instruction, that the main thread may read. */
static void
count_one(atomic_uint_fast64_t *counter)
{
	atomic_store_explicit(
	    counter, atomic_load_explicit(counter, memory_order_relaxed) + 1,
	    memory_order_relaxed);
}

/* echo_read answers a request; the response takes the request's payload
 * (moving the chains of a large one, copying a small one). */
static void
echo_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	pserver *s = weft_ctx_state(ctx);
	const weft_envelope *req = msg;
	weft_envelope resp;

	/* Behind an envelope codec every message is an envelope; only
	 * requests want an answer. */
	if (type != &weft_msg_envelope) {
		weft_msg_free(type, msg);
		return;
	}
	if ((req->flags & WEFT_ENVELOPE_KIND_BITS) != WEFT_ENVELOPE_REQUEST)
		return;
	resp = (weft_envelope){
	    .id = req->id,
	    .verb = req->verb,
	    .flags = WEFT_ENVELOPE_RESPONSE,
	    .created_ms = req->created_ms,
	    .payload = req->payload,
	    .payload_len = req->payload_len,
	    .payload_buf = req->payload_buf,
	};
	count_one(&s->requests);
	weft_ctx_write(ctx, &weft_msg_envelope, &resp, NULL, NULL);
}

/* echo_read_complete sends a read batch's answers in one write. */
static void
echo_read_complete(weft_ctx *ctx)
{
	count_one(&((pserver *)weft_ctx_state(ctx))->read_batches);
	weft_ctx_flush(ctx);
}

static const weft_handler echo_handler = {
    .read = echo_read,
    .read_complete = echo_read_complete,
};

int
wbench_pipe_codecs(weft_channel *ch, size_t size)
{
	/* One frame holds a whole message: the frame codec's limit is set
	 * to the run's payload (2 GiB is the most it takes). */
	const weft_frame_codec_opts fo = {
	    .max_frame_bytes =
	        (size > WBENCH_MAX_SIZE ? size : WBENCH_MAX_SIZE) +
	        WEFT_ENVELOPE_HEADER_BYTES,
	    .emit_bytes = true,
	};
	int rv;

	if ((rv = weft_frame_codec_add(ch, "frame", &fo)) != 0)
		return rv;
	return weft_envelope_codec_add(ch, "envelope", NULL);
}

/* server_init builds an accepted channel's pipeline. */
static int
server_init(weft_channel *ch, void *arg)
{
	const pserver *s = arg;
	int rv = wbench_pipe_codecs(ch, s->o->size);

	if (rv != 0)
		return rv;
	return weft_pipeline_add_last(ch, "echo", &echo_handler, arg);
}

static int
server_start(pserver *s, const wbench_opts *o)
{
	weft_server_opts so = {0};
	int rv;

	s->o = o;
	so.address = "127.0.0.1:0";
	so.init = server_init;
	so.init_arg = s;
	if ((rv = weft_loop_group_new(1, &s->group)) != 0 ||
	    (rv = weft_server_new(s->group, &so, &s->srv)) != 0) {
		fprintf(stderr, "weft-bench: pipeline server: %s\n",
		        weft_strerror(rv));
		return -1;
	}
	return 0;
}

static void
server_stop(pserver *s)
{
	if (s->srv != NULL)
		weft_server_close(s->srv, NULL, NULL);
	if (s->group != NULL) {
		weft_loop_group_shutdown(s->group, 1000);
		weft_loop_group_free(s->group);
	}
}

/* tick: the server makes no requests of its own. */
static void
tick(void *arg)
{
	(void)arg;
	wbench_child_say("tick 0 0");
}

static void
report(pserver *s, const wbench_rusage *before, const wbench_rusage *after)
{
	wbench_child_figs f = {0};

	f.wakeups =
	    atomic_load_explicit(&s->read_batches, memory_order_relaxed);
	f.msgs_in = atomic_load_explicit(&s->requests, memory_order_relaxed);
	wbench_child_result(&f, before, after);
	wbench_hist_print(NULL, "hist", stdout);
	fflush(stdout);
}

/* serve follows the coordinator from "ports" to "quit"; the server only
 * answers, so priming and the window are waits. */
static int
serve(pserver *s)
{
	wbench_rusage before = {0}, after = {0};
	char line[65536];
	uint64_t start_ns;

	wbench_child_say("port %u", weft_server_port(s->srv));
	if (wbench_child_expect("ports", line, sizeof(line)) != 0)
		return -1;
	wbench_child_say("addressed");
	if (wbench_child_expect("prime", line, sizeof(line)) != 0)
		return -1;
	wbench_child_say("ready");
	if (wbench_child_expect("go", line, sizeof(line)) != 0)
		return -1;
	start_ns = wbench_now_ns() + (uint64_t)(s->o->warmup_s * 1e9);
	wbench_child_window(start_ns,
	                    start_ns + (uint64_t)(s->o->duration_s * 1e9), tick,
	                    s, &before, &after);
	wbench_child_say("done");
	if (wbench_child_expect("exit", line, sizeof(line)) != 0)
		return -1;
	/* Once everyone has reported, the clients go away: no news then. */
	weft_log_set_level(WEFT_LOG_ERROR);
	report(s, &before, &after);
	if (fgets(line, sizeof(line), stdin) != NULL &&
	    strncmp(line, "quit", 4) != 0)
		return -1;
	return 0;
}

int
wbench_pipe_server(const wbench_opts *o)
{
	pserver s = {0};
	int rv = -1;

	if (!WEFT_LOG_ENABLED(WEFT_LOG_DEBUG))
		weft_log_set_level(WEFT_LOG_WARN);
	if (server_start(&s, o) == 0)
		rv = serve(&s);
	server_stop(&s);
	return rv;
}
