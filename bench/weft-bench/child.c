/* SPDX-License-Identifier: MIT */
/*
 * child.c: what the client processes of the node workloads share (the
 * synchronous rpc client, the YCSB and smoke-test clients): their side of
 * the line protocol with the coordinator (see cnode.c), a client service
 * of the run's members, blocking calls, and the process's figures.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <weft/loop.h>
#include <weft/messaging.h>
#include <weft/tls.h>

#include "wbench.h"

void
wbench_child_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

int
wbench_child_expect(const char *word, char *line, size_t len)
{
	if (fgets(line, (int)len, stdin) == NULL ||
	    strncmp(line, word, strlen(word)) != 0)
		return -1;
	line[strcspn(line, "\n")] = '\0';
	return 0;
}

int
wbench_client_config(const wbench_opts *o, weft_msvc_config **out)
{
	weft_msvc_limits *lim;
	char id[16];
	int rv;

	if ((rv = weft_msvc_config_new(
	         o->cluster_name ? o->cluster_name : "weft-bench", out)) != 0)
		return rv;
	for (unsigned i = 0; i < o->peers; i++) {
		snprintf(id, sizeof(id), "n%u", i);
		if ((rv = weft_msvc_config_add_node(*out, id, "127.0.0.1",
		                                    0)) != 0)
			return rv;
	}
	/* As the members have them (cnode.c): a loaded two-core machine
	 * must not take a peer down mid-run. */
	lim = weft_msvc_config_limits(*out);
	lim->loops = 1;
	lim->request_timeout_ms = 30000;
	lim->heartbeat_interval_ms = 10000;
	lim->heartbeat_misses = 30;
	lim->connect_timeout_ms = 30000;
	wbench_wire_limits(o, lim);
	return 0;
}

/* The messaging service's default byte limits (weft/messaging.h). */
#define MSVC_DEFAULT_MAX_MESSAGE ((size_t)64 << 20)
#define MSVC_DEFAULT_BUDGET ((size_t)64 << 20)

/* raise_limit raises *limit to want when want is above both it and the
 * service's default (0 in *limit stands for the default). */
static void
raise_limit(size_t *limit, size_t want, size_t dflt)
{
	if (want > *limit && want > dflt)
		*limit = want;
}

void
wbench_wire_limits(const wbench_opts *o, weft_msvc_limits *lim)
{
	size_t largest = o->size > o->large_size ? o->size : o->large_size;
	size_t message = largest + WBENCH_WIRE_SLACK;
	/* A node may hold a request and its answer at once. */
	size_t budget = 2 * message * (o->in_flight > 0 ? o->in_flight : 1);

	lim->compression = o->compression;
	raise_limit(&lim->max_message_bytes, message, MSVC_DEFAULT_MAX_MESSAGE);
	raise_limit(&lim->outbound_queue_bytes, budget, MSVC_DEFAULT_BUDGET);
	raise_limit(&lim->client_outbound_bytes, budget, MSVC_DEFAULT_BUDGET);
	raise_limit(&lim->inbound_inflight_bytes, budget, MSVC_DEFAULT_BUDGET);
}

void
wbench_wire_bytes(weft_msvc *svc, uint64_t *body, uint64_t *wire)
{
	size_t n = weft_msvc_peer_count(svc);

	*body = *wire = 0;
	for (size_t i = 0; i < n; i++) {
		weft_msvc_peer_stats st;

		weft_msvc_peer_get_stats(weft_msvc_peer_at(svc, i), &st);
		*body += st.body_bytes_out + st.body_bytes_in;
		*wire += st.wire_bytes_out + st.wire_bytes_in;
	}
}

int
wbench_client_tls(const wbench_opts *o, weft_msvc_config *cfg, const char *id,
                  weft_tls_ctx **out)
{
	char cert[512], key[512], ca[512];
	weft_msvc_tls_config tc = {.mode = WEFT_MSVC_TLS_ALL};
	weft_tls_opts to = {0};

	*out = NULL;
	if (o->tls_dir == NULL)
		return 0;
	snprintf(cert, sizeof(cert), "%s/%s.crt", o->tls_dir, id);
	snprintf(key, sizeof(key), "%s/%s.key", o->tls_dir, id);
	snprintf(ca, sizeof(ca), "%s/ca.crt", o->tls_dir);
	tc.cert_file = to.cert_file = cert;
	tc.key_file = to.key_file = key;
	tc.ca_file = to.ca_file = ca;
	if (weft_msvc_config_set_tls(cfg, &tc) != 0 ||
	    weft_tls_ctx_new(&to, out) != 0) {
		fprintf(stderr, "weft-bench: %s: TLS from %s failed\n", id,
		        o->tls_dir);
		return -1;
	}
	return 0;
}

int
wbench_client_set_ports(weft_msvc *svc, const char *line, unsigned npeers,
                        weft_msvc_peer **peers)
{
	const char *p = line + 5;
	char *end, id[16];

	if (strncmp(line, "ports", 5) != 0)
		return -1;
	for (unsigned i = 0; i < npeers; i++) {
		unsigned long port = strtoul(p, &end, 10);

		if (end == p || port == 0 || port > 65535)
			return -1;
		p = end;
		snprintf(id, sizeof(id), "n%u", i);
		if (weft_msvc_set_peer_addr(svc, id, "127.0.0.1",
		                            (uint16_t)port) != 0 ||
		    (peers[i] = weft_msvc_peer_find(svc, id)) == NULL)
			return -1;
	}
	return 0;
}

/* ---- Priming ------------------------------------------------------------- */

void
wbench_primer_init(wbench_primer *p, unsigned window, uint64_t timeout_ms)
{
	p->window = window ? window : 1;
	p->asked = 0;
	p->deadline_ns = wbench_now_ns() + timeout_ms * 1000000u;
	atomic_init(&p->answered, 0);
	atomic_init(&p->failed, 0);
}

static void
primer_reply(weft_msvc *svc, int status, const void *data, size_t len,
             void *arg)
{
	wbench_primer *p = arg;

	(void)svc;
	(void)data;
	(void)len;
	atomic_fetch_add(status == 0 ? &p->answered : &p->failed, 1);
}

/* primer_until waits until at most in_flight requests are unanswered. */
static int
primer_until(wbench_primer *p, unsigned in_flight)
{
	while (atomic_load(&p->failed) == 0 &&
	       p->asked - atomic_load(&p->answered) > in_flight) {
		if (wbench_now_ns() > p->deadline_ns)
			return -1;
		wload_sleep_until(wbench_now_ns() + 1000000u);
	}
	return atomic_load(&p->failed) == 0 ? 0 : -1;
}

int
wbench_primer_ask(wbench_primer *p, weft_msvc *svc, weft_msvc_peer *peer,
                  uint32_t verb)
{
	if (primer_until(p, p->window - 1) != 0 ||
	    weft_msvc_request(svc, peer, verb, "", 0, NULL, primer_reply, p) !=
	        0)
		return -1;
	p->asked++;
	return 0;
}

int
wbench_primer_wait(wbench_primer *p)
{
	return primer_until(p, 0);
}

/* ---- Blocking calls ------------------------------------------------------ */

void
wbench_call_init(wbench_call *c)
{
	pthread_condattr_t attr;

	memset(c, 0, sizeof(*c));
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, &attr);
	pthread_condattr_destroy(&attr);
}

void
wbench_call_fini(wbench_call *c)
{
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
}

void
wbench_call_start(wbench_call *c)
{
	pthread_mutex_lock(&c->lock);
	c->in_flight = true;
	pthread_mutex_unlock(&c->lock);
}

void
wbench_call_cancel(wbench_call *c)
{
	pthread_mutex_lock(&c->lock);
	c->in_flight = false;
	pthread_mutex_unlock(&c->lock);
}

void
wbench_call_reply(weft_msvc *svc, int status, const void *data, size_t len,
                  void *arg)
{
	wbench_call *c = arg;

	(void)svc;
	pthread_mutex_lock(&c->lock);
	if (!c->in_flight) {
		c->duplicates++;
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->in_flight = false;
	c->replies++;
	c->status = status;
	if (status == 0 && c->check != NULL && !c->check(data, len, c->arg))
		c->status = WBENCH_EUNEXPECTED;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

int
wbench_call_wait(wbench_call *c, uint64_t timeout_ms)
{
	struct timespec ts;
	int rv = 0;

	wbench_timespec_in(CLOCK_MONOTONIC, timeout_ms * 1000000u, &ts);
	pthread_mutex_lock(&c->lock);
	while (c->in_flight && rv == 0)
		rv = pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	rv = c->in_flight ? WBENCH_ENOREPLY : c->status;
	pthread_mutex_unlock(&c->lock);
	return rv;
}

void
wbench_call_counts(wbench_call *c, uint64_t *replies, uint64_t *duplicates)
{
	pthread_mutex_lock(&c->lock);
	*replies = c->replies;
	*duplicates = c->duplicates;
	pthread_mutex_unlock(&c->lock);
}

void
wbench_timespec_in(clockid_t clock, uint64_t ns, struct timespec *ts)
{
	clock_gettime(clock, ts);
	ts->tv_sec += (time_t)(ns / 1000000000u);
	ts->tv_nsec += (long)(ns % 1000000000u);
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void
wbench_child_window(uint64_t start_ns, uint64_t end_ns, void (*tick)(void *arg),
                    void *arg, wbench_rusage *before, wbench_rusage *after)
{
	uint64_t next = wbench_now_ns() + 1000000000u;

	wload_sleep_until(start_ns);
	wbench_rusage_read(before);
	for (; next < end_ns; next += 1000000000u) {
		wload_sleep_until(next);
		tick(arg);
	}
	wload_sleep_until(end_ns);
	wbench_rusage_read(after);
}

/* ---- The process's figures ----------------------------------------------- */

void
wbench_rusage_read(wbench_rusage *u)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	u->vcsw = (uint64_t)ru.ru_nvcsw;
	u->ivcsw = (uint64_t)ru.ru_nivcsw;
	u->user_us = (uint64_t)ru.ru_utime.tv_sec * 1000000u +
	             (uint64_t)ru.ru_utime.tv_usec;
	u->sys_us = (uint64_t)ru.ru_stime.tv_sec * 1000000u +
	            (uint64_t)ru.ru_stime.tv_usec;
	u->rss_kb = (uint64_t)ru.ru_maxrss;
	u->threads = wload_threads();
}

void
wbench_child_result(const wbench_child_figs *f, const wbench_rusage *before,
                    const wbench_rusage *after)
{
	wbench_child_say(
	    "result ops=%llu errors=%llu vcsw=%llu ivcsw=%llu cpu_us=%llu "
	    "rss_kb=%llu threads=%llu wakeups=%llu msgs_in=%llu "
	    "first_error=%d sent=%llu replies=%llu duplicates=%llu "
	    "body=%llu wire=%llu",
	    (unsigned long long)f->ops, (unsigned long long)f->errors,
	    (unsigned long long)(after->vcsw - before->vcsw),
	    (unsigned long long)(after->ivcsw - before->ivcsw),
	    (unsigned long long)(after->user_us + after->sys_us -
	                         before->user_us - before->sys_us),
	    (unsigned long long)after->rss_kb,
	    (unsigned long long)after->threads, (unsigned long long)f->wakeups,
	    (unsigned long long)f->msgs_in, f->first_error,
	    (unsigned long long)f->sent, (unsigned long long)f->replies,
	    (unsigned long long)f->duplicates,
	    (unsigned long long)f->body_bytes,
	    (unsigned long long)f->wire_bytes);
}
