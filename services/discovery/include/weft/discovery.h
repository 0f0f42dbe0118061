/* SPDX-License-Identifier: MIT */
/*
 * weft/discovery.h: members proposed by DNS SRV records.
 *
 * A provider asks for _weft._tcp.NAME (the service label configurable)
 * on a weft loop, again when the answer's TTL runs out, and proposes what
 * it finds through the membership API (weft_msvc_member_add, _remove,
 * weft_msvc_set_peer_addr): it never decides membership itself, and under
 * TLS a member still proves its id with its certificate.
 *
 * A target's node id is the first label of its name: n2.weft.example. is
 * n2, dialled at the target's name and the record's port. A target whose
 * id is this node's own, or not a valid id, is ignored (logged at a
 * limited rate). A member is removed only when it was seen in an answer
 * and has then been missing from every answer for grace_ms; an answer
 * that does not come (a server down or timing out, SERVFAIL, a malformed
 * message) changes nothing, the last answer staying in force.
 * docs/WEFTD.md, "Changing the cluster".
 */
#ifndef WEFT_DISCOVERY_H
#define WEFT_DISCOVERY_H

#include <stdint.h>

#include <weft/loop.h>
#include <weft/messaging.h>

typedef struct weft_dns_discovery weft_dns_discovery;

/* Options; zero fields take the defaults shown. */
typedef struct weft_dns_discovery_opts {
	/* The domain: "weft.example" asks for _weft._tcp.weft.example.
	 * Required. */
	const char *name;
	/* The service label, "_weft._tcp" by default. */
	const char *service;
	/* Servers, "127.0.0.1:5353,[::1]:53"; NULL: /etc/resolv.conf. */
	const char *servers;
	/* How long a member missing from the answers stays: 30 s. */
	uint64_t grace_ms;
	/* The bounds of the time between queries, whatever the TTL says:
	 * 1 s and 5 min. A failed query is tried again after
	 * min_interval_ms. */
	uint64_t min_interval_ms, max_interval_ms;
	/* At most this many members taken from one answer: 256. */
	uint32_t max_members;
	/* on_answer, when set, is called with arg on the loop after each
	 * answer has been applied: records, or none (the name has no SRV
	 * records, or does not exist); not after a failure (no answer,
	 * truncated). The first call says the members are known. */
	void (*on_answer)(void *arg);
	void *arg;
} weft_dns_discovery_opts;

/* What a provider has done so far (weft_dns_discovery_stats). */
typedef struct weft_dns_discovery_stats {
	uint64_t queries;  /* asked */
	uint64_t answers;  /* answered with records */
	uint64_t failures; /* no answer, or one without records */
	uint64_t added, removed, moved, ignored;
	uint32_t members; /* members it currently proposes */
} weft_dns_discovery_stats;

/*
 * weft_dns_discovery_new makes a provider for svc (borrowed: it must
 * outlive the provider) on loop, from opts (strings copied). It asks
 * nothing before weft_dns_discovery_start. Returns 0, WEFT_EINVAL (no
 * name, bad servers), WEFT_ENOMEM or WEFT_EIO (the resolver would not
 * start; logged). The loop's thread.
 */
int weft_dns_discovery_new(weft_msvc *svc, weft_loop *loop,
                           const weft_dns_discovery_opts *opts,
                           weft_dns_discovery **out);
/* weft_dns_discovery_start sends the first query now. 0 or a WEFT_E
 * code. The loop's thread. */
int weft_dns_discovery_start(weft_dns_discovery *d);
/* weft_dns_discovery_stats copies the counters into out. The loop's
 * thread. */
void weft_dns_discovery_stats_get(const weft_dns_discovery *d,
                                  weft_dns_discovery_stats *out);
/* weft_dns_discovery_free cancels the query under way (its answer is
 * dropped) and frees d; the members it added stay. NULL is fine. The
 * loop's thread. */
void weft_dns_discovery_free(weft_dns_discovery *d);

#endif
