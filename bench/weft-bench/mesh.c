/* SPDX-License-Identifier: MIT */
/*
 * mesh.c: the cluster workload on weftd nodes run elsewhere (--hosts).
 *
 * Each node runs the load itself, through weftd's load verb (docs/
 * WEFTD.md, `[weftd] load = on`): this process joins the cluster as a
 * client, asks every node to start at once (each first asks every other
 * member once, so that all connections are up, then warms up and
 * measures), asks for the completions so far once a second for the
 * progress line, and merges the nodes' answers: op rate, the latency
 * histograms, context switches, CPU, memory, threads and batching. The
 * figures are the nodes' own, as in a local run. A node that dies or
 * fails during the run is reported with its error, and the figures are
 * those of the nodes that finished (the others' requests to it count as
 * their errors); only a run in which no node finished fails.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <msgpack.h>
#include <weft/histogram.h>
#include <weft/loop.h>
#include <weft/messaging.h>
#include <weft/msgpack_codec.h>
#include <weft/tls.h>

#include "wbench.h"
#include "weftd_proto.h"

#define NS_PER_S 1000000000ull

/* One weftd node, seen from here. Its fields are written by the reply
 * callbacks on the client's loop, under the mesh's lock. */
typedef struct mesh_node {
	weft_msvc_peer *peer;
	int status;
	bool done; /* its start request ended */
	char why[160];
	wbench_load_answer a; /* the start answer, or the last status one */
} mesh_node;

typedef struct mesh {
	const wbench_opts *o;
	weft_msvc_config *cfg;
	weft_loop_group *group;
	weft_tls_ctx *tls;
	weft_msvc *svc;
	mesh_node *nodes;
	unsigned n;
	pthread_mutex_t lock;
	weft_histogram *lat; /* every node's window, merged */
	unsigned answered;
} mesh;

/* set_field stores the value of a known key of a node's answer. */
static void
set_field(wbench_load_answer *a, const msgpack_object_str *k,
          const msgpack_object *v)
{
	const struct {
		const char *key;
		uint64_t *val;
	} keys[] = {
	    {"ops", &a->ops},
	    {"errors", &a->errors},
	    {"sent", &a->sent},
	    {"replies", &a->replies},
	    {"duplicates", &a->duplicates},
	    {"vcsw", &a->vcsw},
	    {"ivcsw", &a->ivcsw},
	    {"cpu_us", &a->cpu_us},
	    {"rss_kb", &a->rss_kb},
	    {"threads", &a->threads},
	    {"wakeups", &a->wakeups},
	    {"msgs_in", &a->msgs_in},
	    {"completed", &a->completed},
	    {"p99_ns", &a->p99_ns},
	};

	if (k->size == 11 && memcmp(k->ptr, "first_error", 11) == 0) {
		if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
			a->first_error = v->via.i64;
		return;
	}
	if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (k->size == strlen(keys[i].key) &&
		    memcmp(k->ptr, keys[i].key, k->size) == 0)
			*keys[i].val = v->via.u64;
}

/* hist_ok checks a "hist" value: an array of value, count pairs. */
static bool
hist_ok(const msgpack_object *v)
{
	if (v->type != MSGPACK_OBJECT_ARRAY || v->via.array.size % 2)
		return false;
	for (uint32_t j = 0; j < v->via.array.size; j++)
		if (v->via.array.ptr[j].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return false;
	return true;
}

static bool
is_hist(const msgpack_object *k)
{
	return k->via.str.size == 4 && memcmp(k->via.str.ptr, "hist", 4) == 0;
}

int
wbench_load_answer_read(const void *data, size_t len, wbench_load_answer *a,
                        weft_histogram *h)
{
	msgpack_unpacked up;
	const msgpack_object *o = &up.data, *hist = NULL;
	wbench_load_answer got = *a;
	int rv = -1;

	if (weft_msgpack_check(data, len, 4) != 0)
		return -1;
	msgpack_unpacked_init(&up);
	if (msgpack_unpack_next(&up, data, len, NULL) !=
	        MSGPACK_UNPACK_SUCCESS ||
	    o->type != MSGPACK_OBJECT_MAP)
		goto out;
	/* All checked before anything is kept: a bad answer changes
	 * nothing. */
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key;
		const msgpack_object *v = &o->via.map.ptr[i].val;

		if (k->type != MSGPACK_OBJECT_STR)
			goto out;
		if (!is_hist(k))
			set_field(&got, &k->via.str, v);
		else if (hist == NULL && hist_ok(v))
			hist = v;
		else
			goto out;
	}
	*a = got;
	for (uint32_t j = 0; hist != NULL && j < hist->via.array.size; j += 2)
		weft_histogram_record_n(h, hist->via.array.ptr[j].via.u64,
		                        hist->via.array.ptr[j + 1].via.u64);
	rv = 0;
out:
	msgpack_unpacked_destroy(&up);
	return rv;
}

typedef struct call {
	mesh *ms;
	mesh_node *node;
} call;

static void
on_result(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	call *c = arg;
	mesh_node *m = c->node;

	(void)svc;
	pthread_mutex_lock(&c->ms->lock);
	m->status = status;
	if (status == WEFT_EUNKNOWNVERB)
		snprintf(m->why, sizeof(m->why),
		         "no load verb: the node needs [weftd] load = on");
	else if (status != 0)
		snprintf(m->why, sizeof(m->why), "%s: %.*s",
		         weft_strerror(status), (int)(len < 120 ? len : 120),
		         (const char *)data);
	else if (wbench_load_answer_read(data, len, &m->a, c->ms->lat) != 0)
		m->status = WEFT_EPROTO;
	m->done = true;
	c->ms->answered++;
	pthread_mutex_unlock(&c->ms->lock);
}

static void
on_status(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	call *c = arg;

	(void)svc;
	pthread_mutex_lock(&c->ms->lock);
	if (status == 0)
		wbench_load_answer_read(data, len, &c->node->a, c->ms->lat);
	pthread_mutex_unlock(&c->ms->lock);
	free(c);
}

/* pack_start packs the start request: a map of the run's parameters. */
static int
pack_start(const wbench_opts *o, struct evbuffer *out)
{
	msgpack_packer pk;

	weft_msgpack_packer_init(&pk, out);
	return msgpack_pack_map(&pk, 6) == 0 &&
	               msgpack_pack_str_with_body(&pk, "op", 2) == 0 &&
	               msgpack_pack_str_with_body(&pk, "start", 5) == 0 &&
	               msgpack_pack_str_with_body(&pk, "warmup_ms", 9) == 0 &&
	               msgpack_pack_uint64(
	                   &pk, (uint64_t)(o->warmup_s * 1000)) == 0 &&
	               msgpack_pack_str_with_body(&pk, "duration_ms", 11) ==
	                   0 &&
	               msgpack_pack_uint64(
	                   &pk, (uint64_t)(o->duration_s * 1000)) == 0 &&
	               msgpack_pack_str_with_body(&pk, "outstanding", 11) ==
	                   0 &&
	               msgpack_pack_uint64(&pk, o->outstanding) == 0 &&
	               msgpack_pack_str_with_body(&pk, "size", 4) == 0 &&
	               msgpack_pack_uint64(&pk, o->size) == 0 &&
	               msgpack_pack_str_with_body(&pk, "rate", 4) == 0 &&
	               msgpack_pack_double(&pk, o->rate) == 0
	           ? 0
	           : -1;
}

/*
 * start_client joins the cluster of the --hosts nodes: as the member
 * --coordinator names (the load verb is for members only, so the nodes'
 * file must list it), or else as client c0, which the nodes refuse.
 */
static int
start_client(mesh *ms)
{
	const wbench_opts *o = ms->o;
	weft_msvc_opts mo = {0};
	weft_msvc_limits *lim;
	char self[64] = "c0", self_host[256];
	uint16_t self_port = 0;

	if (weft_msvc_config_new(o->cluster_name ? o->cluster_name
	                                         : "weft-bench",
	                         &ms->cfg) != 0)
		return -1;
	for (unsigned i = 0; i < ms->n; i++) {
		char id[64], host[256];
		uint16_t port;

		if (wbench_host_at(o->hosts, i, id, host, &port) != 0 ||
		    weft_msvc_config_add_node(ms->cfg, id, host, port) != 0)
			return -1;
	}
	if (o->coordinator != NULL) {
		if (wbench_host_at(o->coordinator, 0, self, self_host,
		                   &self_port) != 0 ||
		    weft_msvc_config_add_node(ms->cfg, self, self_host,
		                              self_port) != 0)
			return -1;
		mo.listen_host = self_host;
	}
	lim = weft_msvc_config_limits(ms->cfg);
	lim->loops = 1;
	/* The start request is answered at the end of the run. */
	lim->request_timeout_ms =
	    (uint64_t)((o->warmup_s + o->duration_s) * 1000) + 120000;
	lim->connect_timeout_ms = 30000;
	if (o->tls_dir != NULL) {
		char cert[512], key[512], ca[512];
		weft_msvc_tls_config tc = {.mode = WEFT_MSVC_TLS_ALL};
		weft_tls_opts to = {0};

		snprintf(cert, sizeof(cert), "%s/%s.crt", o->tls_dir, self);
		snprintf(key, sizeof(key), "%s/%s.key", o->tls_dir, self);
		snprintf(ca, sizeof(ca), "%s/ca.crt", o->tls_dir);
		tc.cert_file = to.cert_file = cert;
		tc.key_file = to.key_file = key;
		tc.ca_file = to.ca_file = ca;
		if (weft_msvc_config_set_tls(ms->cfg, &tc) != 0 ||
		    weft_tls_ctx_new(&to, &ms->tls) != 0)
			return -1;
		mo.tls = ms->tls;
	}
	if (weft_loop_group_new(1, &ms->group) != 0 ||
	    weft_msvc_new(ms->group, ms->cfg, self, &mo, &ms->svc) != 0 ||
	    weft_msvc_start(ms->svc) != 0)
		return -1;
	for (unsigned i = 0; i < ms->n; i++) {
		char id[64], host[256];
		uint16_t port;

		wbench_host_at(o->hosts, i, id, host, &port);
		if ((ms->nodes[i].peer = weft_msvc_peer_find(ms->svc, id)) ==
		    NULL)
			return -1;
	}
	return 0;
}

/* ask_status asks every node for its completions so far. */
static void
ask_status(mesh *ms, const uint8_t *req, size_t len)
{
	for (unsigned i = 0; i < ms->n; i++) {
		call *c = malloc(sizeof(*c));

		if (c == NULL)
			return;
		c->ms = ms;
		c->node = &ms->nodes[i];
		if (weft_msvc_request(ms->svc, c->node->peer, WEFTD_VERB_LOAD,
		                      req, len, NULL, on_status, c) != 0)
			free(c);
	}
}

static void
progress(mesh *ms, uint64_t *last_ns, uint64_t *last_done)
{
	uint64_t now = wbench_now_ns(), done = 0, p99 = 0;

	pthread_mutex_lock(&ms->lock);
	for (unsigned i = 0; i < ms->n; i++) {
		done += ms->nodes[i].a.completed;
		if (ms->nodes[i].a.p99_ns > p99)
			p99 = ms->nodes[i].a.p99_ns;
	}
	pthread_mutex_unlock(&ms->lock);
	if (!ms->o->quiet && done > *last_done)
		fprintf(stderr,
		        "cluster hosts P=%u: %.0f ops/s, p99 %.3f ms (worst "
		        "node so far)\n",
		        ms->n,
		        (double)(done - *last_done) * 1e9 /
		            (double)(now - *last_ns),
		        (double)p99 / 1e6);
	*last_ns = now;
	*last_done = done;
}

/* drive sends the start requests and waits for every answer. */
static int
drive(mesh *ms, call *calls)
{
	static const uint8_t status_req[] = {0x81, 0xa2, 'o', 'p', 0xa6, 's',
	                                     't',  'a',  't', 'u', 's'};
	uint64_t last_ns = wbench_now_ns(), last_done = 0;
	uint64_t deadline =
	    last_ns + (uint64_t)((ms->o->warmup_s + ms->o->duration_s) * 1e9) +
	    150 * NS_PER_S;
	struct evbuffer *req = evbuffer_new();
	const uint8_t *start;
	size_t len;
	unsigned answered = 0;

	if (req == NULL || pack_start(ms->o, req) != 0 ||
	    (start = evbuffer_pullup(req, -1)) == NULL)
		goto fail;
	len = evbuffer_get_length(req);
	for (unsigned i = 0; i < ms->n; i++) {
		int rv;

		calls[i] = (call){ms, &ms->nodes[i]};
		/* One that cannot be sent is that node's failure; the answers
		 * of those sent come with ESHUTDOWN when the client stops. */
		rv = weft_msvc_request(ms->svc, ms->nodes[i].peer,
		                       WEFTD_VERB_LOAD, start, len, NULL,
		                       on_result, &calls[i]);
		if (rv != 0) {
			pthread_mutex_lock(&ms->lock);
			ms->nodes[i].status = rv;
			ms->nodes[i].done = true;
			snprintf(ms->nodes[i].why, sizeof(ms->nodes[i].why),
			         "cannot ask it: %s", weft_strerror(rv));
			ms->answered++;
			pthread_mutex_unlock(&ms->lock);
		}
	}
	evbuffer_free(req);
	while (answered < ms->n && wbench_now_ns() < deadline) {
		struct timespec ts = {0, 200000000};

		nanosleep(&ts, NULL);
		if (wbench_now_ns() - last_ns >= NS_PER_S) {
			progress(ms, &last_ns, &last_done);
			ask_status(ms, status_req, sizeof(status_req));
		}
		pthread_mutex_lock(&ms->lock);
		answered = ms->answered;
		pthread_mutex_unlock(&ms->lock);
	}
	return answered == ms->n ? 0 : -1;
fail:
	if (req != NULL)
		evbuffer_free(req);
	return -1;
}

/* merge adds up the figures of the nodes that finished into r. */
static void
merge(const mesh *ms, wbench_cresult *r)
{
	uint64_t vcsw = 0, ivcsw = 0, cpu = 0, rss = 0, wakeups = 0, in = 0;
	unsigned finished = 0;
	double ops;

	memset(r, 0, sizeof(*r));
	r->io = WBENCH_IO_LOOP;
	r->peers = ms->n;
	r->read_pct = -1;
	for (unsigned i = 0; i < ms->n; i++) {
		const wbench_load_answer *m = &ms->nodes[i].a;

		if (ms->nodes[i].status != 0)
			continue;
		finished++;
		r->ops += m->ops;
		r->errors += m->errors;
		r->sent += m->sent;
		r->replies += m->replies;
		r->duplicates += m->duplicates;
		vcsw += m->vcsw;
		ivcsw += m->ivcsw;
		cpu += m->cpu_us;
		rss += m->rss_kb;
		r->threads += m->threads;
		wakeups += m->wakeups;
		in += m->msgs_in;
		if (r->first_error == 0)
			r->first_error = (int)m->first_error;
	}
	r->lost = r->sent - r->replies;
	r->errors += r->lost + r->duplicates;
	ops = r->ops ? (double)r->ops : 1;
	r->ops_per_s = (double)r->ops / ms->o->duration_s;
	wbench_cresult_latency(r, ms->lat);
	r->vcsw_per_op = (double)vcsw / ops;
	r->ivcsw_per_op = (double)ivcsw / ops;
	r->cpu_us_per_op = (double)cpu / ops;
	r->rss_mb = (double)rss / 1024;
	r->rss_mb_per_node = r->rss_mb / (finished ? finished : 1);
	r->msgs_per_wakeup = wakeups ? (double)in / (double)wakeups : 0;
}

static void
mesh_fini(mesh *ms)
{
	if (ms->svc != NULL) {
		weft_msvc_stop(ms->svc, 1000);
		weft_loop_group_shutdown(ms->group, 1000);
		weft_msvc_free(ms->svc);
	}
	if (ms->group != NULL)
		weft_loop_group_free(ms->group);
	if (ms->tls != NULL)
		weft_tls_ctx_unref(ms->tls);
	weft_msvc_config_free(ms->cfg);
	weft_histogram_free(ms->lat);
	pthread_mutex_destroy(&ms->lock);
	free(ms->nodes);
}

int
wbench_mesh_run(const wbench_opts *o, wbench_cresult *r)
{
	mesh ms = {.o = o, .n = o->peers};
	call *calls = calloc(o->peers, sizeof(*calls));
	int rv = -1;

	/* Peers coming up are news only when debugging. */
	if (!WEFT_LOG_ENABLED(WEFT_LOG_DEBUG))
		weft_log_set_level(WEFT_LOG_WARN);
	pthread_mutex_init(&ms.lock, NULL);
	ms.nodes = calloc(ms.n, sizeof(*ms.nodes));
	if (calls == NULL || ms.nodes == NULL ||
	    weft_histogram_new(&ms.lat) != 0)
		goto out;
	if (start_client(&ms) != 0) {
		fprintf(stderr,
		        "weft-bench: cannot join the --hosts cluster "
		        "as %s\n",
		        o->coordinator ? o->coordinator : "client c0");
		goto out;
	}
	if (drive(&ms, calls) != 0)
		fprintf(stderr,
		        "weft-bench: not every node answered in time\n");
	pthread_mutex_lock(&ms.lock);
	for (unsigned i = 0; i < ms.n; i++) {
		if (ms.nodes[i].done && ms.nodes[i].status == 0) {
			rv = 0; /* at least one node's figures */
			continue;
		}
		if (!ms.nodes[i].done)
			ms.nodes[i].status = WEFT_ETIMEDOUT;
		fprintf(stderr, "weft-bench: %s: %s\n",
		        weft_msvc_peer_id(ms.nodes[i].peer),
		        ms.nodes[i].why[0] ? ms.nodes[i].why
		                           : "no answer, or a malformed one");
		if (ms.nodes[i].status == WEFT_EPERM)
			fprintf(stderr, "weft-bench: the load verb is for "
			                "members: list this process in the "
			                "nodes' file ([node ID]) and pass "
			                "--coordinator ID@HOST:PORT\n");
	}
	if (rv == 0) {
		merge(&ms, r);
		for (unsigned i = 0; i < ms.n; i++)
			if (ms.nodes[i].status != 0)
				r->errors++; /* a node lost counts too */
	}
	pthread_mutex_unlock(&ms.lock);
out:
	/* Stopping the client runs every callback still pending. */
	mesh_fini(&ms);
	free(calls);
	return rv;
}
