/* SPDX-License-Identifier: MIT */
/*
 * dns_srv.c: the DNS SRV provider (weft/discovery.h). c-ares resolves on
 * the provider's loop without blocking and without a thread of its own:
 * its sockets are libevent events of the loop (its socket state
 * callback), its retransmissions a weft timer at ares_timeout(). Each
 * answer is compared with the members seen so far: the new are added,
 * the moved are told their address, and those missing for the grace are
 * removed.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <ares.h>
#include <arpa/nameser.h>
#include <event2/event.h>

#include <weft/discovery.h>

#include "discovery_int.h"

#define DEFAULT_SERVICE "_weft._tcp"
#define DEFAULT_GRACE_MS 30000
#define DEFAULT_MIN_INTERVAL_MS 1000
#define DEFAULT_MAX_INTERVAL_MS (5 * 60 * 1000)
#define DEFAULT_MAX_MEMBERS 256
/* c-ares gives up on a server after this long, and tries this often. */
#define QUERY_TIMEOUT_MS 1000
#define QUERY_TRIES 2
/* At most one line per this long of each kind of complaint. */
#define LOG_INTERVAL_MS 10000
/* c-ares keeps a socket or two per server. */
#define MAX_SOCKETS 16
/* The header's TC flag (RFC 1035 4.1.1), in its third byte. */
#define TC_BIT 0x02

/* A member seen in an answer. */
struct known {
	char id[WEFT_MSVC_MAX_ID + 1];
	char host[256];
	uint16_t port;
	uint64_t seen_ns; /* in the last answer that listed it */
};

/* A target of one answer, before it is proposed. */
struct target {
	char id[WEFT_MSVC_MAX_ID + 1];
	const char *host; /* the reply's, without a trailing dot */
	uint16_t port, priority;
};

struct sock {
	ares_socket_t fd;
	struct event *ev;
};

struct weft_dns_discovery {
	weft_msvc *svc;
	weft_loop *loop;
	char *qname;
	uint64_t grace_ms, min_ms, max_ms;
	uint32_t max_members;
	void (*on_answer)(void *arg);
	void *arg;
	ares_channel channel;
	weft_timer *query_timer, *ares_timer;
	struct sock socks[MAX_SOCKETS];
	size_t nsocks;
	struct known *known;
	size_t nknown;
	bool querying, freeing;
	weft_log_limit fail_log, ignore_log, cap_log, add_log;
	weft_dns_discovery_stats st;
};

/* ---- c-ares on the loop ------------------------------------------------- */

static void
schedule_ares(weft_dns_discovery *d)
{
	struct timeval tv, *tvp;

	if ((tvp = ares_timeout(d->channel, NULL, &tv)) == NULL) {
		weft_timer_stop(d->ares_timer);
		return;
	}
	weft_timer_start(d->ares_timer,
	                 (uint64_t)tvp->tv_sec * 1000 +
	                     (uint64_t)tvp->tv_usec / 1000 + 1,
	                 0);
}

static void
on_ares_timer(weft_timer *t, void *arg)
{
	weft_dns_discovery *d = arg;

	(void)t;
	ares_process_fd(d->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	schedule_ares(d);
}

static void
on_socket(evutil_socket_t fd, short what, void *arg)
{
	weft_dns_discovery *d = arg;

	ares_process_fd(d->channel, (what & EV_READ) ? fd : ARES_SOCKET_BAD,
	                (what & EV_WRITE) ? fd : ARES_SOCKET_BAD);
	if (!d->freeing)
		schedule_ares(d);
}

static void
drop_socket(weft_dns_discovery *d, size_t i)
{
	event_free(d->socks[i].ev);
	d->socks[i] = d->socks[--d->nsocks];
}

/* c-ares says which of its sockets to watch, and for what. */
static void
on_socket_state(void *data, ares_socket_t fd, int readable, int writable)
{
	weft_dns_discovery *d = data;
	short what = (readable ? EV_READ : 0) | (writable ? EV_WRITE : 0);
	size_t i;

	for (i = 0; i < d->nsocks && d->socks[i].fd != fd; i++)
		;
	if (i < d->nsocks)
		drop_socket(d, i);
	if (what == 0)
		return;
	if (d->nsocks == MAX_SOCKETS) {
		weft_error("dns discovery: more than %d resolver sockets",
		           MAX_SOCKETS);
		return;
	}
	d->socks[d->nsocks].fd = fd;
	d->socks[d->nsocks].ev = event_new(weft_loop_base(d->loop), fd,
	                                   what | EV_PERSIST, on_socket, d);
	if (d->socks[d->nsocks].ev == NULL ||
	    event_add(d->socks[d->nsocks].ev, NULL) != 0) {
		weft_error("dns discovery: cannot watch a resolver socket");
		if (d->socks[d->nsocks].ev != NULL)
			event_free(d->socks[d->nsocks].ev);
		return;
	}
	d->nsocks++;
}

/* ---- Answers ------------------------------------------------------------ */

/* The node id of a target: its first label, when that is a valid id. */
static bool
target_id(const char *host, char *id)
{
	size_t i;

	for (i = 0; host[i] != '\0' && host[i] != '.'; i++) {
		unsigned char c = (unsigned char)host[i];

		if (i == WEFT_MSVC_MAX_ID ||
		    !(isalnum(c) || c == '_' || c == '-'))
			return false;
		id[i] = (char)c;
	}
	id[i] = '\0';
	return i > 0;
}

static int
by_priority_then_id(const void *a, const void *b)
{
	const struct target *x = a, *y = b;

	if (x->priority != y->priority)
		return x->priority < y->priority ? -1 : 1;
	return strcmp(x->id, y->id);
}

static struct known *
find_known(weft_dns_discovery *d, const char *id)
{
	size_t i;

	for (i = 0; i < d->nknown; i++)
		if (strcmp(d->known[i].id, id) == 0)
			return &d->known[i];
	return NULL;
}

/* The answer's targets with a usable id, one per id, sorted so that a
 * capped answer keeps the same members whatever order the server gives
 * them in. Returns how many are in *out (freed by the caller), or -1. */
static ssize_t
collect(weft_dns_discovery *d, const struct ares_srv_reply *srv,
        struct target **out)
{
	const struct ares_srv_reply *r;
	struct target *t;
	size_t n = 0, kept = 0, i, j;

	for (r = srv; r != NULL; r = r->next)
		n++;
	if ((t = calloc(n ? n : 1, sizeof(*t))) == NULL)
		return -1;
	for (r = srv; r != NULL; r = r->next) {
		struct target *c = &t[kept];

		if (!target_id(r->host, c->id)) {
			d->st.ignored++;
			weft_log_limited(&d->ignore_log, WEFT_LOG_WARN,
			                 "dns discovery: %s: target '%s' "
			                 "has no node id; ignored",
			                 d->qname, r->host);
			continue;
		}
		if (strcmp(c->id, weft_msvc_node_id(d->svc)) == 0) {
			d->st.ignored++;
			continue;
		}
		c->host = r->host;
		c->port = r->port;
		c->priority = r->priority;
		kept++;
	}
	qsort(t, kept, sizeof(*t), by_priority_then_id);
	for (i = j = 0; i < kept; i++)
		if (j == 0 || strcmp(t[j - 1].id, t[i].id) != 0)
			t[j++] = t[i];
	*out = t;
	return (ssize_t)j;
}

/* Proposes one target. An add refused while the id still drains from a
 * removal (WEFT_EBUSY) is tried again at the next answer. */
static void
propose(weft_dns_discovery *d, const struct target *t, uint64_t now)
{
	struct known *k = find_known(d, t->id);
	bool moved;
	int rv;

	if (k == NULL) {
		k = &d->known[d->nknown++];
		memset(k, 0, sizeof(*k));
		snprintf(k->id, sizeof(k->id), "%s", t->id);
		moved = false;
	} else
		moved = strcmp(k->host, t->host) != 0 || k->port != t->port;
	snprintf(k->host, sizeof(k->host), "%s", t->host);
	k->port = t->port;
	k->seen_ns = now;
	if (weft_msvc_peer_find(d->svc, t->id) == NULL) {
		rv = weft_msvc_member_add(d->svc, t->id, k->host, k->port);
		if (rv == 0) {
			d->st.added++;
			weft_info("dns discovery: %s: member %s added at "
			          "%s:%u",
			          d->qname, k->id, k->host, k->port);
		} else if (rv != WEFT_EBUSY)
			weft_log_limited(&d->add_log, WEFT_LOG_WARN,
			                 "dns discovery: %s: cannot add "
			                 "member %s: %s",
			                 d->qname, k->id, weft_strerror(rv));
		return;
	}
	if (moved &&
	    weft_msvc_set_peer_addr(d->svc, k->id, k->host, k->port) == 0) {
		d->st.moved++;
		weft_info("dns discovery: %s: member %s now at %s:%u", d->qname,
		          k->id, k->host, k->port);
	}
}

/* Members missing from the answers for the grace leave; returns how long
 * until the next one would (UINT64_MAX: none missing). */
static uint64_t
sweep(weft_dns_discovery *d, uint64_t now)
{
	uint64_t grace_ns = d->grace_ms * 1000000, next = UINT64_MAX;
	size_t i = 0;
	int rv;

	while (i < d->nknown) {
		struct known *k = &d->known[i];

		if (k->seen_ns == now) {
			i++;
			continue;
		}
		if (now - k->seen_ns < grace_ns) {
			uint64_t left =
			    (grace_ns - (now - k->seen_ns)) / 1000000;

			next = left < next ? left : next;
			i++;
			continue;
		}
		rv = weft_msvc_member_remove(d->svc, k->id);
		if (rv == 0) {
			d->st.removed++;
			weft_info("dns discovery: %s: member %s removed (not "
			          "in the answers for %llu ms)",
			          d->qname, k->id,
			          (unsigned long long)d->grace_ms);
		}
		*k = d->known[--d->nknown];
	}
	return next;
}

/* Applies the answer's targets; returns the sweep's next removal. */
static uint64_t
apply(weft_dns_discovery *d, const struct ares_srv_reply *srv)
{
	uint64_t now = weft_now_ns();
	struct target *t = NULL;
	ssize_t n = collect(d, srv, &t), i, take;
	struct known *grown;

	if (n < 0)
		return d->min_ms;
	take = n < (ssize_t)d->max_members ? n : (ssize_t)d->max_members;
	if (take < n)
		weft_log_limited(&d->cap_log, WEFT_LOG_WARN,
		                 "dns discovery: %s: the answer names %zd "
		                 "members; only the first %zd are taken "
		                 "(max_members)",
		                 d->qname, n, take);
	grown = realloc(d->known,
	                (d->nknown + (size_t)take + 1) * sizeof(*d->known));
	if (grown == NULL) {
		free(t);
		return d->min_ms;
	}
	d->known = grown;
	for (i = 0; i < take; i++)
		propose(d, &t[i], now);
	free(t);
	return sweep(d, now);
}

static void
log_failure(weft_dns_discovery *d, const char *what)
{
	d->st.failures++;
	weft_log_limited(&d->fail_log, WEFT_LOG_WARN,
	                 "dns discovery: %s: %s; the %zu members it "
	                 "found stay (a member missing from answers "
	                 "leaves after %llu ms)",
	                 d->qname, what, d->nknown,
	                 (unsigned long long)d->grace_ms);
}

static uint64_t
clamp(const weft_dns_discovery *d, uint64_t ms)
{
	return ms < d->min_ms ? d->min_ms : ms > d->max_ms ? d->max_ms : ms;
}

static void
on_answer(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	weft_dns_discovery *d = arg;
	struct ares_srv_reply *srv = NULL;
	uint64_t next = d->min_ms, removal = UINT64_MAX;
	bool answered = false;
	uint32_t ttl_s;

	(void)timeouts;
	if (status == ARES_EDESTRUCTION || d->freeing)
		return;
	d->querying = false;
	/* Truncated even over TCP: more than one message holds (64 KiB, a
	 * few thousand records). Not "nobody is there": no answer. */
	if ((status == ARES_SUCCESS || status == ARES_ENODATA) && alen > 2 &&
	    (abuf[2] & TC_BIT)) {
		log_failure(d, "the answer is truncated (more records than a "
		               "DNS message holds)");
		weft_timer_start(d->query_timer, d->min_ms, 0);
		return;
	}
	if (status == ARES_SUCCESS &&
	    ares_parse_srv_reply(abuf, alen, &srv) != ARES_SUCCESS)
		status = ARES_EBADRESP;
	if (status == ARES_SUCCESS) {
		d->st.answers++;
		if (weft__srv_min_ttl(abuf, (size_t)alen, &ttl_s) == 0)
			next = clamp(d, (uint64_t)ttl_s * 1000);
		removal = apply(d, srv);
		ares_free_data(srv);
		answered = true;
	} else if (status == ARES_ENODATA || status == ARES_ENOTFOUND) {
		/* An answer all the same: nobody is there. */
		log_failure(d, ares_strerror(status));
		removal = apply(d, NULL);
		answered = true;
	} else
		log_failure(d, ares_strerror(status));
	/* Back in time to remove a member whose grace ends first. */
	if (removal < next)
		next = clamp(d, removal);
	d->st.members = (uint32_t)d->nknown;
	weft_timer_start(d->query_timer, next, 0);
	if (answered && d->on_answer != NULL)
		d->on_answer(d->arg);
}

static void
on_query_timer(weft_timer *t, void *arg)
{
	weft_dns_discovery *d = arg;

	(void)t;
	if (d->querying)
		return;
	d->querying = true;
	d->st.queries++;
	ares_query(d->channel, d->qname, ns_c_in, ns_t_srv, on_answer, d);
	if (!d->freeing)
		schedule_ares(d);
}

/* ---- Life --------------------------------------------------------------- */

static int
open_channel(weft_dns_discovery *d, const char *servers)
{
	struct ares_options o;
	int rv;

	memset(&o, 0, sizeof(o));
	o.sock_state_cb = on_socket_state;
	o.sock_state_cb_data = d;
	o.timeout = QUERY_TIMEOUT_MS;
	o.tries = QUERY_TRIES;
	rv = ares_init_options(&d->channel, &o,
	                       ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS |
	                           ARES_OPT_TRIES);
	if (rv != ARES_SUCCESS) {
		weft_error("dns discovery: cannot start the resolver: %s",
		           ares_strerror(rv));
		d->channel = NULL;
		return rv == ARES_ENOMEM ? WEFT_ENOMEM : WEFT_EIO;
	}
	if (servers != NULL && (rv = ares_set_servers_ports_csv(
	                            d->channel, servers)) != ARES_SUCCESS) {
		weft_error("dns discovery: bad servers '%s': %s", servers,
		           ares_strerror(rv));
		return WEFT_EINVAL;
	}
	return 0;
}

int
weft_dns_discovery_new(weft_msvc *svc, weft_loop *loop,
                       const weft_dns_discovery_opts *opts,
                       weft_dns_discovery **out)
{
	const char *service;
	weft_dns_discovery *d;
	size_t len;
	int rv;

	if (svc == NULL || loop == NULL || opts == NULL || opts->name == NULL ||
	    opts->name[0] == '\0' || out == NULL)
		return WEFT_EINVAL;
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return WEFT_ENOMEM;
	service = opts->service ? opts->service : DEFAULT_SERVICE;
	len = strlen(service) + strlen(opts->name) + 2;
	if ((d->qname = malloc(len)) == NULL) {
		rv = WEFT_ENOMEM;
		goto err_free;
	}
	snprintf(d->qname, len, "%s.%s", service, opts->name);
	d->svc = svc;
	d->loop = loop;
	d->grace_ms = opts->grace_ms ? opts->grace_ms : DEFAULT_GRACE_MS;
	d->on_answer = opts->on_answer;
	d->arg = opts->arg;
	d->min_ms = opts->min_interval_ms ? opts->min_interval_ms
	                                  : DEFAULT_MIN_INTERVAL_MS;
	d->max_ms = opts->max_interval_ms ? opts->max_interval_ms
	                                  : DEFAULT_MAX_INTERVAL_MS;
	if (d->max_ms < d->min_ms)
		d->max_ms = d->min_ms;
	d->max_members =
	    opts->max_members ? opts->max_members : DEFAULT_MAX_MEMBERS;
	d->fail_log = (weft_log_limit)WEFT_LOG_LIMIT_INIT(LOG_INTERVAL_MS);
	d->ignore_log = d->fail_log;
	d->cap_log = d->fail_log;
	d->add_log = d->fail_log;
	if ((rv = weft_timer_new(loop, on_query_timer, d, &d->query_timer)) ||
	    (rv = weft_timer_new(loop, on_ares_timer, d, &d->ares_timer)) ||
	    (rv = open_channel(d, opts->servers)))
		goto err_free;
	*out = d;
	return 0;

err_free:
	weft_dns_discovery_free(d);
	return rv;
}

int
weft_dns_discovery_start(weft_dns_discovery *d)
{
	return weft_timer_start(d->query_timer, 0, 0);
}

void
weft_dns_discovery_stats_get(const weft_dns_discovery *d,
                             weft_dns_discovery_stats *out)
{
	*out = d->st;
}

void
weft_dns_discovery_free(weft_dns_discovery *d)
{
	if (d == NULL)
		return;
	d->freeing = true;
	/* Ends the query under way (ARES_EDESTRUCTION) and closes its
	 * sockets, telling on_socket_state. */
	if (d->channel != NULL)
		ares_destroy(d->channel);
	while (d->nsocks > 0)
		drop_socket(d, d->nsocks - 1);
	weft_timer_free(d->ares_timer);
	weft_timer_free(d->query_timer);
	free(d->known);
	free(d->qname);
	free(d);
}
