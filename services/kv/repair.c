/* SPDX-License-Identifier: MIT */
/*
 * repair.c: the thread that brings this replica up to date with blocking
 * calls to the other members (sync.c), so that no loop waits on a copy.
 *
 * Catch-up, from the start: the replica copies every entry of other
 * members, one after another, until it has copied N - W + 1 of them (N
 * members, W the write quorum; at most all the others): all of the first
 * one's, then of each next one the ranges whose digests differ. Each
 * acknowledged write is held by W members, so any N - W + 1 of them
 * include one holding it; entries copied are applied by version, so a
 * write that reached this node during the copy keeps its place. Then it
 * is caught up: gets and scans are answered. A member that cannot be
 * reached is tried again after 1 ms, then twice as long each time up to
 * CATCH_UP_RETRY_MS: a cluster started at once (every member empty, each
 * started before the others listen) is caught up within milliseconds of
 * its members being up.
 *
 * Anti-entropy, once caught up: every repair_interval (or at once when
 * asked), the replica takes the next other member in turn, fetches its
 * range digests (2 KiB), and pulls the entries of the ranges whose
 * digests differ from its own. A range that differs because this node is
 * the newer one costs a pull of entries it then ignores; the other
 * member fixes its own copy on its own round.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv_int.h"

#define CATCH_UP_RETRY_MS 100

/* Waits on the repair's condition until ms have passed, a round is asked
 * for or the thread is to stop. Requires the lock. */
static void
wait_ms(struct weft__kv_repair *r, uint64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	while (!r->stopping && !r->requested &&
	       pthread_cond_timedwait(&r->cond, &r->lock, &ts) == 0)
		;
}

static bool
copied_from(const struct weft__kv_repair *r, const weft_msvc_peer *peer)
{
	size_t i;

	for (i = 0; i < r->ncopied; i++)
		if (r->copied[i] == peer)
			return true;
	return false;
}

static int compare_and_pull(weft_kv *kv, weft_msvc_peer *peer,
                            uint32_t *differ);

/* Copies all of peer's entries, or for every member after the first only
 * the ranges whose digests differ from this replica's (the same entries
 * at half the bytes, or less, when the members agree); true once done. A
 * member of an older build, without these verbs, has nothing it can give:
 * done too. */
static bool
copy_from(weft_kv *kv, weft_msvc_peer *peer)
{
	uint32_t differ;
	int rv = kv->repair.ncopied == 0 ? weft__kv_pull(kv, peer, NULL)
	                                 : compare_and_pull(kv, peer, &differ);

	if (rv == WEFT_EUNKNOWNVERB) {
		weft_warn(
		    "kv: %s cannot be copied from (no pull verb: an older "
		    "build)",
		    weft_msvc_peer_id(peer));
		return true;
	}
	if (rv != 0)
		weft_log_limited(&kv->repair.log, WEFT_LOG_INFO,
		                 "kv: catching up: copy from %s: %s",
		                 weft_msvc_peer_id(peer), weft_strerror(rv));
	return rv == 0;
}

/* One try at catching up; true once caught up. */
static bool
catch_up(weft_kv *kv)
{
	struct weft__kv_repair *r = &kv->repair;
	struct weft__kv_members m;
	uint32_t n, need;
	size_t i;
	bool done;

	/* Members still to come from discovery: alone now, it would need
	 * no copy. */
	if (!atomic_load(&kv->members_known) ||
	    weft__kv_members_get(kv, &m) != 0)
		return false;
	n = (uint32_t)m.count;
	need = n + 1 - weft__kv_quorum_now(&kv->quorum_spec, n);
	if (n == 0 || need > n - 1)
		need = n > 0 ? n - 1 : 0;
	for (i = 0; i < m.count && r->ncopied < need; i++) {
		weft_msvc_peer *p = m.peers[i];
		weft_msvc_peer **grown;

		/* One known down is asked again once it is back: a request
		 * to it would wait for it, and hold a stop's drain. */
		if (weft_msvc_peer_is_self(p) || copied_from(r, p) ||
		    weft_msvc_peer_is_down(p))
			continue;
		if (!copy_from(kv, p))
			continue;
		grown = realloc(r->copied, (r->ncopied + 1) * sizeof(*grown));
		if (grown == NULL)
			break;
		r->copied = grown;
		r->copied[r->ncopied++] = p;
	}
	done = r->ncopied >= need;
	weft__kv_members_fini(&m);
	return done;
}

/* The next member after the last compared with, other than this node;
 * NULL when there is none. */
static weft_msvc_peer *
next_member(weft_kv *kv, const struct weft__kv_members *m)
{
	struct weft__kv_repair *r = &kv->repair;
	size_t i;

	for (i = 0; i < m->count; i++) {
		weft_msvc_peer *p = m->peers[r->next++ % m->count];

		if (!weft_msvc_peer_is_self(p) && !weft_msvc_peer_is_down(p))
			return p;
	}
	return NULL;
}

/* Compares digests with peer and pulls the ranges that differ, whose
 * count lands in differ; 0 or the status of the call that failed. */
static int
compare_and_pull(weft_kv *kv, weft_msvc_peer *peer, uint32_t *differ)
{
	uint64_t theirs[WEFT__KV_RANGES], ours[WEFT__KV_RANGES];
	uint8_t ranges[WEFT__KV_RANGES / 8] = {0};
	uint32_t i;
	int rv;

	*differ = 0;
	if ((rv = weft__kv_fetch_digest(kv, peer, theirs)) != 0)
		return rv;
	weft__kv_digest_read(kv, ours);
	for (i = 0; i < WEFT__KV_RANGES; i++) {
		if (ours[i] == theirs[i])
			continue;
		ranges[i / 8] |= (uint8_t)(1u << (i % 8));
		(*differ)++;
	}
	return *differ > 0 ? weft__kv_pull(kv, peer, ranges) : 0;
}

/* One anti-entropy round with peer. */
static void
round_with(weft_kv *kv, weft_msvc_peer *peer)
{
	uint32_t differ;
	int rv;

	if ((rv = compare_and_pull(kv, peer, &differ)) != 0) {
		weft_log_limited(&kv->repair.log, WEFT_LOG_INFO,
		                 "kv: anti-entropy with %s: %s",
		                 weft_msvc_peer_id(peer), weft_strerror(rv));
		return;
	}
	atomic_fetch_add_explicit(&kv->st.ranges_repaired, differ,
	                          memory_order_relaxed);
	weft__kv_count(&kv->st.repair_rounds);
	if (differ > 0)
		weft_debug("kv: anti-entropy with %s: %u ranges differed",
		           weft_msvc_peer_id(peer), differ);
}

/* One anti-entropy round with the next member in turn; a cluster of one
 * counts its round at once. */
static void
repair_round(weft_kv *kv)
{
	struct weft__kv_members m;
	weft_msvc_peer *peer;

	if (weft__kv_members_get(kv, &m) != 0)
		return;
	if ((peer = next_member(kv, &m)) != NULL)
		round_with(kv, peer);
	else if (m.count <= 1)
		weft__kv_count(&kv->st.repair_rounds);
	weft__kv_members_fini(&m);
}

static void
caught_up(weft_kv *kv)
{
	uint64_t ms = (weft_now_ns() - kv->repair.catch_up_start_ns) / 1000000;
	weft_kv_stats st;

	weft_kv_get_stats(kv, &st);
	weft_info("kv: %s caught up in %llu ms from %zu members (%llu keys)",
	          weft_msvc_node_id(kv->svc), (unsigned long long)ms,
	          kv->repair.ncopied, (unsigned long long)st.keys);
	free(kv->repair.copied);
	kv->repair.copied = NULL;
	atomic_store(&kv->caught_up, true);
	if (kv->on_caught_up != NULL)
		kv->on_caught_up(kv, kv->on_caught_up_arg);
}

static void *
repair_main(void *arg)
{
	weft_kv *kv = arg;
	struct weft__kv_repair *r = &kv->repair;
	bool stopping = false, asked;
	uint64_t retry_ms = 1;

	while (!stopping) {
		/* A round asked for while catching up is the catch-up. */
		pthread_mutex_lock(&r->lock);
		asked = r->requested;
		r->requested = false;
		pthread_mutex_unlock(&r->lock);
		if (!atomic_load(&kv->caught_up)) {
			if (catch_up(kv))
				caught_up(kv);
		} else if (asked) {
			repair_round(kv);
		}
		pthread_mutex_lock(&r->lock);
		if (!r->stopping && !r->requested)
			wait_ms(r, atomic_load(&kv->caught_up)
			               ? kv->repair_interval_ms
			               : retry_ms);
		if (retry_ms < CATCH_UP_RETRY_MS)
			retry_ms *= 2;
		/* The interval passed: a round is due. */
		if (atomic_load(&kv->caught_up))
			r->requested = true;
		stopping = r->stopping;
		pthread_mutex_unlock(&r->lock);
	}
	return NULL;
}

int
weft__kv_repair_start(weft_kv *kv)
{
	struct weft__kv_repair *r = &kv->repair;
	pthread_condattr_t attr;
	int rv = WEFT_ENOMEM;

	r->log = (weft_log_limit)WEFT_LOG_LIMIT_INIT(10000);
	r->catch_up_start_ns = weft_now_ns();
	if (pthread_condattr_init(&attr) != 0)
		return WEFT_ENOMEM;
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (pthread_mutex_init(&r->lock, NULL) != 0)
		goto out_attr;
	if (pthread_cond_init(&r->cond, &attr) != 0)
		goto err_lock;
	if (pthread_create(&r->thread, NULL, repair_main, kv) != 0)
		goto err_cond;
	r->running = true;
	rv = 0;
	goto out_attr;

err_cond:
	pthread_cond_destroy(&r->cond);
err_lock:
	pthread_mutex_destroy(&r->lock);
out_attr:
	pthread_condattr_destroy(&attr);
	return rv;
}

void
weft__kv_repair_stop(weft_kv *kv)
{
	struct weft__kv_repair *r = &kv->repair;

	if (!r->running)
		return;
	pthread_mutex_lock(&r->lock);
	r->stopping = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r->copied);
	r->running = false;
}

void
weft_kv_repair(weft_kv *kv)
{
	struct weft__kv_repair *r = &kv->repair;

	pthread_mutex_lock(&r->lock);
	r->requested = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

void
weft_kv_members_known(weft_kv *kv)
{
	if (!atomic_exchange(&kv->members_known, true))
		weft_kv_repair(kv); /* wakes the catch-up now */
}

bool
weft_kv_is_caught_up(const weft_kv *kv)
{
	return atomic_load(&kv->caught_up);
}
