/* SPDX-License-Identifier: MIT */
/*
 * rate.c: the optional rate limits on clients (docs/RELIABILITY.md,
 * "Fairness"): token buckets, one per client connection (client_rate) and
 * one per source address shared by all its clients (address_rate), in
 * messages per second, each holding up to one second of its rate.
 *
 * A client's message is taken out of both buckets once it was handled (it
 * was read already); a bucket may go into debt, and the connection is then
 * not read until its debt is paid back, so the rate holds on average
 * however reading is turned on meanwhile. A connection gets its address's
 * bucket with its first message; the last connection of an address to
 * close frees it.
 */
#include <stdlib.h>
#include <string.h>

#include "msvc_int.h"

#define NS_PER_S 1000000000.0

struct weft__msvc_rate_addr {
	LIST_ENTRY(weft__msvc_rate_addr) link;
	uint32_t refs; /* connections holding it */
	struct weft__msvc_bucket bucket;
	char host[WEFT_ADDRESS_MAX];
};

void
weft__msvc_bucket_init(struct weft__msvc_bucket *b, uint32_t rate,
                       uint64_t now_ns)
{
	b->rate = rate;
	b->tokens = rate;
	b->last_ns = now_ns;
}

/* Takes one message out of b (refilled first, up to one second of its
 * rate); returns how long the debt it leaves takes to pay back, 0 when
 * there is none. */
static uint64_t
bucket_take(struct weft__msvc_bucket *b, uint64_t now_ns)
{
	if (b->rate == 0)
		return 0;
	if (now_ns > b->last_ns) {
		b->tokens += (double)(now_ns - b->last_ns) * b->rate / NS_PER_S;
		if (b->tokens > b->rate)
			b->tokens = b->rate;
		b->last_ns = now_ns;
	}
	b->tokens -= 1;
	return b->tokens >= 0 ? 0
	                      : (uint64_t)(-b->tokens * NS_PER_S / b->rate) + 1;
}

/* The address bucket of c's host, found or made, with a reference for
 * c; NULL when out of memory (c is then limited per connection only). */
static struct weft__msvc_rate_addr *
addr_get(weft_msvc *svc, const char *peer_addr, uint64_t now_ns)
{
	struct weft__msvc_rate_addr *a;
	char host[WEFT_ADDRESS_MAX];

	weft__msvc_host_of(peer_addr, host, sizeof(host));
	pthread_mutex_lock(&svc->rate_lock);
	LIST_FOREACH(a, &svc->rate_addrs, link)
	if (strcmp(a->host, host) == 0)
		break;
	if (a == NULL && (a = calloc(1, sizeof(*a))) != NULL) {
		snprintf(a->host, sizeof(a->host), "%s", host);
		weft__msvc_bucket_init(&a->bucket,
		                       svc->cfg->limits.address_rate, now_ns);
		LIST_INSERT_HEAD(&svc->rate_addrs, a, link);
	}
	if (a != NULL)
		a->refs++;
	pthread_mutex_unlock(&svc->rate_lock);
	return a;
}

uint64_t
weft__msvc_rate_take(struct weft__msvc_conn *c, uint64_t now_ns)
{
	weft_msvc *svc = c->svc;
	uint64_t wait_ns, addr_wait_ns;

	if (c->rate.last_ns == 0)
		weft__msvc_bucket_init(&c->rate, svc->cfg->limits.client_rate,
		                       now_ns);
	wait_ns = bucket_take(&c->rate, now_ns);
	if (svc->cfg->limits.address_rate == 0)
		return wait_ns;
	if (c->rate_addr == NULL &&
	    (c->rate_addr = addr_get(svc, c->peer_addr, now_ns)) == NULL)
		return wait_ns;
	pthread_mutex_lock(&svc->rate_lock);
	addr_wait_ns = bucket_take(&c->rate_addr->bucket, now_ns);
	pthread_mutex_unlock(&svc->rate_lock);
	return addr_wait_ns > wait_ns ? addr_wait_ns : wait_ns;
}

void
weft__msvc_rate_release(struct weft__msvc_conn *c)
{
	weft_msvc *svc = c->svc;
	struct weft__msvc_rate_addr *a = c->rate_addr;

	if (c->rate_timer != NULL)
		weft_timer_free(c->rate_timer);
	c->rate_timer = NULL;
	c->rate_paused = false;
	if (a == NULL)
		return;
	c->rate_addr = NULL;
	pthread_mutex_lock(&svc->rate_lock);
	if (--a->refs == 0)
		LIST_REMOVE(a, link);
	else
		a = NULL;
	pthread_mutex_unlock(&svc->rate_lock);
	free(a);
}

void
weft__msvc_rate_fini(weft_msvc *svc)
{
	struct weft__msvc_rate_addr *a;

	/* Every connection released its own; whatever is left is leaked
	 * by nobody, but freed all the same. */
	while ((a = LIST_FIRST(&svc->rate_addrs)) != NULL) {
		LIST_REMOVE(a, link);
		free(a);
	}
	pthread_mutex_destroy(&svc->rate_lock);
}

void
weft__msvc_rate_init(weft_msvc *svc)
{
	pthread_mutex_init(&svc->rate_lock, NULL);
	LIST_INIT(&svc->rate_addrs);
}
