/* SPDX-License-Identifier: MIT */
/*
 * resolve.c: host names resolved on a loop without blocking it, with
 * libevent's evdns, for every connect (so every reconnect resolves again
 * and follows a changed record). Each resolution reads /etc/hosts and
 * /etc/resolv.conf (or the file named by WEFT_RESOLV_CONF) into an
 * evdns_base of its own and frees it at the end: nothing is shared between
 * loops or kept between dials, and a changed resolv.conf is seen at the
 * next one. The connect code only sees a request and its callback.
 *
 * A request is freed in one place, on_done, once evdns has called back for
 * the last time: evdns delivers a cancellation later, from a deferred
 * callback that still uses its base, so neither may go earlier.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "transport_int.h"

struct weft__resolve {
	weft_loop *loop;
	struct evdns_base *dns;
	struct evdns_getaddrinfo_request *req; /* while evdns works */
	struct event *done; /* delivers the result, never inside start */
	weft__resolve_cb cb;
	void *arg;
	weft__addr query; /* host and port asked for */
	weft__addr *addrs;
	size_t naddrs;
	int status;
	bool canceled; /* cb never runs */
};

static void
resolve_free(weft__resolve *r)
{
	if (r->done != NULL)
		event_free(r->done);
	if (r->dns != NULL)
		evdns_base_free(r->dns, 0);
	free(r->addrs);
	free(r);
}

/* Runs on the loop, after the evdns callback has returned. */
static void
on_done(evutil_socket_t fd, short what, void *arg)
{
	weft__resolve *r = arg;
	weft__resolve_cb cb = r->cb;
	void *cb_arg = r->arg;
	weft__addr *addrs = r->addrs;
	size_t n = r->naddrs;
	int status = r->status;

	(void)fd;
	(void)what;
	if (r->canceled) {
		resolve_free(r);
		return;
	}
	r->addrs = NULL;
	resolve_free(r);
	cb(status, addrs, n, cb_arg);
}

static int
status_of(int gai_error)
{
	switch (gai_error) {
	case EVUTIL_EAI_MEMORY:
		return WEFT_ENOMEM;
	case EVUTIL_EAI_CANCEL:
		return WEFT_ECANCELED;
	default:
		return WEFT_EADDR;
	}
}

/* evdns's callback: may run inside evdns_getaddrinfo (hosts file, a cached
 * failure), so it only keeps the result and wakes on_done. */
static void
on_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
	weft__resolve *r = arg;

	r->req = NULL;
	if (r->canceled) {
		/* evdns is done with r: on_done frees it. */
	} else if (result != 0) {
		weft_warn("resolve %s: %s", r->query.host,
		          evutil_gai_strerror(result));
		r->status = status_of(result);
	} else {
		r->status = weft__addr_list_from_ai(&r->query, res, &r->addrs,
		                                    &r->naddrs);
		if (r->status == WEFT_EADDR)
			weft_warn("resolve %s: no IPv4 or IPv6 address",
			          r->query.host);
	}
	if (res != NULL)
		evutil_freeaddrinfo(res);
	event_active(r->done, 0, 0);
}

/* An evdns_base from the system's files (WEFT_RESOLV_CONF: another
 * resolv.conf). A missing file leaves evdns's defaults, as libc does. */
static int
dns_new(struct event_base *base, struct evdns_base **out)
{
	const char *conf = getenv("WEFT_RESOLV_CONF");
	struct evdns_base *dns;
	int rc;

	if ((dns = evdns_base_new(base, 0)) == NULL)
		return WEFT_ENOMEM;
	rc = evdns_base_resolv_conf_parse(dns, DNS_OPTIONS_ALL,
	                                  conf ? conf : "/etc/resolv.conf");
	if (rc == 4) { /* out of memory */
		evdns_base_free(dns, 0);
		return WEFT_ENOMEM;
	}
	if (rc != 0 && rc != 6 && conf != NULL)
		weft_warn("resolve: WEFT_RESOLV_CONF=%s cannot be read (%d); "
		          "using the defaults",
		          conf, rc);
	*out = dns;
	return 0;
}

int
weft__resolve_start(weft_loop *loop, const weft__addr *addr,
                    weft__resolve_cb cb, void *arg, weft__resolve **out)
{
	struct event_base *base = weft_loop_base(loop);
	struct evutil_addrinfo hints;
	weft__resolve *r;
	char port[8];
	int rv;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return WEFT_ENOMEM;
	r->loop = loop;
	r->cb = cb;
	r->arg = arg;
	r->query = *addr;
	if ((rv = dns_new(base, &r->dns)) != 0)
		goto err_free;
	if ((r->done = event_new(base, -1, 0, on_done, r)) == NULL) {
		rv = WEFT_ENOMEM;
		goto err_free;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	hints.ai_flags = EVUTIL_AI_NUMERICSERV;
	snprintf(port, sizeof(port), "%u", (unsigned)addr->port);
	/* NULL: answered already (on_resolved has run and woken on_done). */
	r->req =
	    evdns_getaddrinfo(r->dns, addr->host, port, &hints, on_resolved, r);
	*out = r;
	return 0;

err_free:
	resolve_free(r);
	return rv;
}

void
weft__resolve_cancel(weft__resolve *r)
{
	if (r == NULL || r->canceled)
		return;
	r->canceled = true;
	/* evdns calls on_resolved back on the loop, with EVUTIL_EAI_CANCEL
	 * or with an answer it had already; on_done then frees r. With no
	 * request left, on_done is on its way. */
	if (r->req != NULL)
		evdns_getaddrinfo_cancel(r->req);
}
