/* SPDX-License-Identifier: MIT */
/*
 * rpcclient.c: rpc --client sync, one client process: D threads, each
 * making one blocking call at a time to the server (n0) through one
 * weft client service, as a program written against a synchronous RPC
 * library would; the service's loop thread runs the replies and wakes
 * the callers. It speaks cnode.c's line protocol with the coordinator
 * and reports the same figures.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weft/histogram.h>
#include <weft/loop.h>
#include <weft/messaging.h>
#include <weft/tls.h>

#include "wbench.h"

#define CALL_TIMEOUT_MS 60000
#define PROGRESS_SAMPLE 16

typedef struct client client;

/* One caller thread; its fields are its own until it is joined. Its
 * calls alternate between two, so that a second reply to a request
 * finds its call idle and counts as a duplicate. */
typedef struct caller {
	client *c;
	pthread_t thread;
	wbench_call call[2];
	uint64_t sent, ok, errors;
	weft_histogram *lat;
	int first_error;
} caller;

struct client {
	const wbench_opts *o;
	weft_msvc_config *cfg;
	weft_loop_group *group;
	weft_tls_ctx *tls;
	weft_msvc *svc;
	weft_msvc_peer *server;
	uint8_t *payload;
	caller *callers;
	uint64_t window_start_ns, window_end_ns;
	atomic_uint_fast64_t completed;
	wbench_sample so_far; /* for the ticks */
};

/* call_once makes one blocking call; returns its status. */
static int
call_once(caller *k)
{
	client *c = k->c;
	wbench_call *call = &k->call[k->sent % 2];
	int rv;

	wbench_call_start(call);
	rv = weft_msvc_request(c->svc, c->server, WBENCH_VERB_ECHO, c->payload,
	                       c->o->size, NULL, wbench_call_reply, call);
	if (rv != 0) {
		wbench_call_cancel(call); /* refused: no reply will come */
		return rv;
	}
	k->sent++;
	return wbench_call_wait(call, CALL_TIMEOUT_MS);
}

static void *
caller_main(void *arg)
{
	caller *k = arg;
	client *c = k->c;
	uint64_t t0, now;

	while ((t0 = wbench_now_ns()) < c->window_end_ns) {
		int status = call_once(k);

		now = wbench_now_ns();
		if (status != 0 && k->first_error == 0)
			k->first_error = status;
		if (t0 >= c->window_start_ns && now < c->window_end_ns) {
			if (status == 0) {
				k->ok++;
				weft_histogram_record(k->lat, now - t0);
			} else {
				k->errors++;
			}
		}
		if (status == WBENCH_ENOREPLY)
			break; /* a reply that never came: lost, stop here */
		if (atomic_fetch_add(&c->completed, 1) % PROGRESS_SAMPLE == 0)
			wbench_sample_record(&c->so_far, now - t0);
	}
	return NULL;
}

static int
client_start(client *c, const wbench_opts *o)
{
	char id[16];
	weft_msvc_opts mo = {0};

	c->o = o;
	snprintf(id, sizeof(id), "c%u", o->node_index);
	c->payload = calloc(1, o->size ? o->size : 1);
	c->callers = calloc(o->outstanding, sizeof(*c->callers));
	if (c->payload == NULL || c->callers == NULL ||
	    wbench_sample_init(&c->so_far) != 0 ||
	    wbench_client_config(o, &c->cfg) != 0 ||
	    wbench_client_tls(o, c->cfg, id, &c->tls) != 0)
		return -1;
	wbench_payload_fill(c->payload, o->size, o->payload, o->seed);
	mo.tls = c->tls;
	if (weft_loop_group_new(1, &c->group) != 0 ||
	    weft_msvc_new(c->group, c->cfg, id, &mo, &c->svc) != 0 ||
	    weft_msvc_start(c->svc) != 0)
		return -1;
	for (unsigned i = 0; i < o->outstanding; i++) {
		c->callers[i].c = c;
		wbench_call_init(&c->callers[i].call[0]);
		wbench_call_init(&c->callers[i].call[1]);
		if (wbench_hist_new(&c->callers[i].lat) != 0)
			return -1;
	}
	return 0;
}

static void
client_stop(client *c)
{
	if (c->svc != NULL) {
		weft_msvc_stop(c->svc, 1000);
		weft_loop_group_shutdown(c->group, 1000);
		weft_msvc_free(c->svc);
	}
	if (c->group != NULL)
		weft_loop_group_free(c->group);
	if (c->tls != NULL)
		weft_tls_ctx_unref(c->tls);
	weft_msvc_config_free(c->cfg);
	for (unsigned i = 0; c->callers != NULL && i < c->o->outstanding; i++) {
		wbench_call_fini(&c->callers[i].call[0]);
		wbench_call_fini(&c->callers[i].call[1]);
		weft_histogram_free(c->callers[i].lat);
	}
	free(c->callers);
	wbench_sample_fini(&c->so_far);
	free(c->payload);
}

/* print_tick tells the coordinator the calls and p99 so far. */
static void
print_tick(client *c)
{
	wbench_child_say(
	    "tick %llu %llu", (unsigned long long)atomic_load(&c->completed),
	    (unsigned long long)wbench_sample_percentile(&c->so_far, 99));
}

/* run_window starts the callers, ticks each second, and joins them. */
static int
run_window(client *c, wbench_rusage *before, wbench_rusage *after)
{
	uint64_t t0 = wbench_now_ns(), tick = t0 + 1000000000u;
	unsigned started = 0;
	int rv = 0;

	c->window_start_ns = t0 + (uint64_t)(c->o->warmup_s * 1e9);
	c->window_end_ns =
	    c->window_start_ns + (uint64_t)(c->o->duration_s * 1e9);
	for (; started < c->o->outstanding; started++)
		if (pthread_create(&c->callers[started].thread, NULL,
		                   caller_main, &c->callers[started]) != 0) {
			rv = -1;
			break;
		}
	wload_sleep_until(c->window_start_ns);
	wbench_rusage_read(before);
	while (tick < c->window_end_ns) {
		wload_sleep_until(tick);
		print_tick(c);
		tick += 1000000000u;
	}
	wload_sleep_until(c->window_end_ns);
	wbench_rusage_read(after);
	for (unsigned i = 0; i < started; i++)
		pthread_join(c->callers[i].thread, NULL);
	return rv;
}

static void
report(client *c, const wbench_rusage *before, const wbench_rusage *after)
{
	wbench_child_figs f = {0};
	weft_histogram *lat = NULL;
	weft_msvc_stats st;

	if (wbench_hist_new(&lat) != 0)
		lat = NULL; /* then an empty "hist" */

	for (unsigned i = 0; i < c->o->outstanding; i++) {
		caller *k = &c->callers[i];

		for (int j = 0; j < 2; j++) {
			uint64_t replies, dups;

			wbench_call_counts(&k->call[j], &replies, &dups);
			f.replies += replies;
			f.duplicates += dups;
		}
		f.ops += k->ok;
		f.errors += k->errors;
		f.sent += k->sent;
		if (f.first_error == 0)
			f.first_error = k->first_error;
		if (lat != NULL)
			weft_histogram_merge(lat, k->lat);
	}
	weft_msvc_get_stats(c->svc, &st);
	f.wakeups = st.read_batches;
	f.msgs_in = st.messages_in;
	wbench_wire_bytes(c->svc, &f.body_bytes, &f.wire_bytes);
	wbench_child_result(&f, before, after);
	wbench_hist_print(lat, "hist", stdout);
	fflush(stdout);
	weft_histogram_free(lat);
}

/* prime makes one call, so that the connection is up before the clock;
 * it counts as the first caller's. */
static int
prime(client *c)
{
	return call_once(&c->callers[0]);
}

int
wbench_rpc_client(const wbench_opts *o)
{
	wbench_rusage before = {0}, after = {0};
	char line[65536];
	client c = {0};
	int rv = -1;

	if (!WEFT_LOG_ENABLED(WEFT_LOG_DEBUG))
		weft_log_set_level(WEFT_LOG_WARN);
	if (o->outstanding == 0 || client_start(&c, o) != 0)
		goto out;
	wbench_child_say("port 1");
	if (wbench_child_expect("ports", line, sizeof(line)) != 0 ||
	    wbench_client_set_ports(c.svc, line, 1, &c.server) != 0)
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
	report(&c, &before, &after);
	if (fgets(line, sizeof(line), stdin) != NULL &&
	    strncmp(line, "quit", 4) != 0)
		goto out;
	rv = 0;
out:
	client_stop(&c);
	return rv;
}
