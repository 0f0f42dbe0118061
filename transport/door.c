/* SPDX-License-Identifier: MIT */
/*
 * door.c: the connections a server has accepted and the application has
 * not yet established (weft_server_establish): those still sniffed, in
 * their TLS handshake, or in the application's own handshake. They are
 * capped per server, and when one more arrives at the cap the source
 * address that holds the most of them gives up its oldest (nginx's and
 * HAProxy's answer to slots held by connections that never finish). So a
 * host that opens connections and never speaks only ever evicts its own,
 * and a newcomer from anywhere else always gets a slot.
 *
 * Addresses are grouped by host: an IPv4 address, an IPv6 /64 (what one
 * subscriber is usually given), or "unix" for every local socket. The
 * table is shared by the accepting loop (entering) and every loop of the
 * group (leaving), under one lock held for a few pointer moves.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport_int.h"

struct weft__door_host {
	LIST_ENTRY(weft__door_host) link;       /* in its bucket */
	TAILQ_HEAD(, weft__door_entry) entries; /* oldest first */
	size_t n;                               /* entries */
	char name[INET6_ADDRSTRLEN];
};

static uint32_t
hash_name(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	while (*s != '\0')
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

void
weft__door_host_of(const struct sockaddr *sa, char *out, size_t len)
{
	const struct sockaddr_in6 *s6 = (const void *)sa;
	struct in6_addr net;

	if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
		          out, (socklen_t)len);
	} else if (sa->sa_family == AF_INET6 &&
	           IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], out,
		          (socklen_t)len);
	} else if (sa->sa_family == AF_INET6) {
		net = s6->sin6_addr;
		memset(&net.s6_addr[8], 0, 8);
		inet_ntop(AF_INET6, &net, out, (socklen_t)len);
	} else {
		snprintf(out, len, "unix");
	}
}

int
weft__door_init(struct weft__door *d, void (*hold)(struct weft__door_entry *))
{
	memset(d, 0, sizeof(*d));
	TAILQ_INIT(&d->entries);
	d->hold = hold;
	return pthread_mutex_init(&d->lock, NULL) == 0 ? 0 : WEFT_ENOMEM;
}

void
weft__door_fini(struct weft__door *d)
{
	struct weft__door_host *h;
	size_t i;

	for (i = 0; i < WEFT__DOOR_BUCKETS; i++)
		while ((h = LIST_FIRST(&d->buckets[i])) != NULL) {
			LIST_REMOVE(h, link);
			free(h);
		}
	pthread_mutex_destroy(&d->lock);
}

/* The host named name, made if make and absent (NULL: no memory). */
static struct weft__door_host *
find_host(struct weft__door *d, const char *name, bool make)
{
	uint32_t b = hash_name(name) % WEFT__DOOR_BUCKETS;
	struct weft__door_host *h;

	LIST_FOREACH(h, &d->buckets[b], link)
	if (strcmp(h->name, name) == 0)
		return h;
	if (!make || (h = calloc(1, sizeof(*h))) == NULL)
		return NULL;
	TAILQ_INIT(&h->entries);
	snprintf(h->name, sizeof(h->name), "%s", name);
	LIST_INSERT_HEAD(&d->buckets[b], h, link);
	d->nhosts++;
	return h;
}

/* Takes e out of the table. Requires the lock and e inside. */
static void
remove_entry(struct weft__door *d, struct weft__door_entry *e)
{
	struct weft__door_host *h = e->host;

	TAILQ_REMOVE(&d->entries, e, link);
	TAILQ_REMOVE(&h->entries, e, host_link);
	e->host = NULL;
	d->n--;
	if (--h->n == 0) {
		LIST_REMOVE(h, link);
		d->nhosts--;
		free(h);
	}
}

/*
 * The entry that makes room: the oldest of the host holding the most
 * entries (of those tied, the one whose oldest is oldest); NULL when the
 * table is empty. A newcomer's own host counts with the newcomer, so a
 * host tied with another gives up its own. Requires the lock.
 */
static struct weft__door_entry *
pick_victim(struct weft__door *d, const struct weft__door_host *mine)
{
	struct weft__door_host *h, *best = NULL;
	struct weft__door_entry *oldest, *best_oldest = NULL;
	size_t i, n, best_n = 0;

	for (i = 0; i < WEFT__DOOR_BUCKETS && d->nhosts != 0; i++)
		LIST_FOREACH(h, &d->buckets[i], link)
		{
			if ((oldest = TAILQ_FIRST(&h->entries)) == NULL)
				continue;
			n = h->n + (h == mine);
			if (best == NULL || n > best_n ||
			    (n == best_n && oldest->seq < best_oldest->seq)) {
				best = h;
				best_n = n;
				best_oldest = oldest;
			}
		}
	return best_oldest;
}

/* Evicts the victim picked for mine: out of the table, held for the
 * caller. Requires the lock. */
static struct weft__door_entry *
evict_one(struct weft__door *d, const struct weft__door_host *mine)
{
	struct weft__door_entry *v = pick_victim(d, mine);

	if (v == NULL)
		return NULL;
	remove_entry(d, v);
	d->hold(v);
	d->evicted++;
	return v;
}

int
weft__door_enter(struct weft__door *d, struct weft__door_entry *e,
                 const char *host, bool make_room,
                 struct weft__door_entry **victim)
{
	struct weft__door_host *h;
	int rv = 0;

	*victim = NULL;
	pthread_mutex_lock(&d->lock);
	if (make_room || (d->max != 0 && d->n >= d->max)) {
		/* The newcomer's host counts with the newcomer: made first. */
		if ((h = find_host(d, host, true)) == NULL) {
			rv = WEFT_ENOMEM;
			goto out;
		}
		*victim = evict_one(d, h);
	}
	/* The victim's host may have been ours, and gone with it. */
	if ((h = find_host(d, host, true)) == NULL) {
		rv = WEFT_ENOMEM;
		goto out;
	}
	e->host = h;
	e->seq = ++d->seq;
	TAILQ_INSERT_TAIL(&d->entries, e, link);
	TAILQ_INSERT_TAIL(&h->entries, e, host_link);
	h->n++;
	d->n++;
out:
	pthread_mutex_unlock(&d->lock);
	return rv;
}

bool
weft__door_leave(struct weft__door *d, struct weft__door_entry *e)
{
	bool inside;

	pthread_mutex_lock(&d->lock);
	if ((inside = e->host != NULL))
		remove_entry(d, e);
	pthread_mutex_unlock(&d->lock);
	return inside;
}

struct weft__door_entry *
weft__door_set_max(struct weft__door *d, size_t max)
{
	struct weft__door_entry *v = NULL;

	pthread_mutex_lock(&d->lock);
	d->max = max;
	if (max != 0 && d->n > max)
		v = evict_one(d, NULL);
	pthread_mutex_unlock(&d->lock);
	return v;
}

struct weft__door_entry *
weft__door_evict_oldest(struct weft__door *d)
{
	struct weft__door_entry *v;

	pthread_mutex_lock(&d->lock);
	v = evict_one(d, NULL);
	pthread_mutex_unlock(&d->lock);
	return v;
}

void
weft__door_counts(struct weft__door *d, uint64_t *pending, uint64_t *evicted)
{
	pthread_mutex_lock(&d->lock);
	*pending = d->n;
	*evicted = d->evicted;
	pthread_mutex_unlock(&d->lock);
}
