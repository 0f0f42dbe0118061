/* SPDX-License-Identifier: MIT */
/*
 * clock.c: how far each peer's wall clock is from ours, so that the
 * deadlines a peer writes (expires_at, in its clock) are judged in ours,
 * and two machines' clocks need not agree for messages to be delivered.
 *
 * A member is measured as NTP measures a server: each heartbeat this node
 * sends it is a round trip, and its answer carries the peer's clock when
 * it answered (created_at). With the round trip's time rtt (monotonic)
 * and our clock now at its return, the answer took between 0 and rtt to
 * come back, so the offset lies in
 *
 *     [created_at - now, created_at - now + rtt]
 *
 * and the estimate is the value of that interval nearest 0: clocks that
 * agree (0 in the interval) are taken as agreeing, whatever the delays
 * (a delay one way only would bias NTP's midpoint by half of it), and a
 * clock off by more is taken as off by the least it can be. Of the last
 * WEFT__MSVC_CLOCK_SAMPLES round trips, the one with the shortest time
 * wins (NTP's clock filter: a slow round trip is mostly queueing). Until
 * a round trip has come back, and for clients (which are not
 * heartbeated), the offset is estimated from what the peer sends alone:
 * the largest created_at - arrival seen over the last two windows of
 * ONEWAY_WINDOW_NS, which is the offset less the quickest one-way delay
 * (so its deadlines are judged a little late, never early); within
 * ONEWAY_DEADZONE_MS below 0 it is taken as 0 (a clock that agrees, seen
 * through that delay). The windows let a peer whose clock was stepped back
 * be judged by its new clock within two windows.
 *
 * Old peers need nothing new: the timestamps are the ones every envelope
 * has always carried.
 */
#include <stdint.h>
#include <stdlib.h>

#include "msvc_int.h"

#define ONEWAY_WINDOW_NS (10ull * 1000000000u)
#define ONEWAY_DEADZONE_MS 100
/* Offsets beyond a year are nonsense (or a lie): clamped. */
#define OFFSET_MAX_MS ((int64_t)366 * 24 * 3600 * 1000)

void
weft__msvc_clock_init(struct weft__msvc_clock *clk)
{
	atomic_init(&clk->offset_ms, 0);
	atomic_init(&clk->rtt_ms, 0);
	atomic_init(&clk->measured, false);
	atomic_init(&clk->known, false);
	atomic_init(&clk->flagged, false);
	atomic_init(&clk->oneway_cur, INT64_MIN);
	atomic_init(&clk->oneway_prev, INT64_MIN);
	atomic_init(&clk->window_end_ns, 0);
	clk->nsamples = 0;
	clk->next_sample = 0;
	clk->log = (weft_log_limit)WEFT_LOG_LIMIT_INIT(WEFT__MSVC_CLOCK_LOG_MS);
}

/* a - b as a signed offset, clamped to +-OFFSET_MAX_MS. */
static int64_t
diff_ms(uint64_t a, uint64_t b)
{
	if (a >= b)
		return a - b > (uint64_t)OFFSET_MAX_MS ? OFFSET_MAX_MS
		                                       : (int64_t)(a - b);
	return b - a > (uint64_t)OFFSET_MAX_MS ? -OFFSET_MAX_MS
	                                       : -(int64_t)(b - a);
}

static uint64_t
abs_ms(int64_t v)
{
	return v < 0 ? (uint64_t)-v : (uint64_t)v;
}

/* Flags peer past max_clock_skew, and says so at a limited rate (per member;
 * for all clients at once, each client being a peer of its own); says once when
 * a member's offset is back under three quarters of the bound (so that an
 * offset at the bound does not flap). */
static void
judge_skew(weft_msvc_peer *peer, int64_t offset)
{
	weft_msvc *svc = peer->svc;
	struct weft__msvc_clock *clk = &peer->clock;
	uint64_t bound = svc->cfg->limits.max_clock_skew_ms;
	uint64_t off = abs_ms(offset);
	bool past = off > bound;

	if (past) {
		atomic_store(&clk->flagged, true);
		weft_log_limited(
		    peer->is_client ? &svc->log_client_clock : &clk->log,
		    WEFT_LOG_WARN,
		    "msvc %s: %s %s's clock is %lld ms %s ours "
		    "(max_clock_skew %llu ms): its deadlines are "
		    "judged through the offset; fix its time sync",
		    svc->id, peer->is_client ? "client" : "peer", peer->id,
		    (long long)off, offset > 0 ? "ahead of" : "behind",
		    (unsigned long long)bound);
	} else if (off <= bound - bound / 4 &&
	           atomic_exchange(&clk->flagged, false) && !peer->is_client) {
		weft_info("msvc %s: peer %s's clock is back within "
		          "max_clock_skew (%lld ms)",
		          svc->id, peer->id, (long long)offset);
	}
}

void
weft__msvc_clock_round_trip(weft_msvc_peer *peer, uint64_t peer_ms,
                            uint64_t rtt_ns, uint64_t now_ms)
{
	struct weft__msvc_clock *clk = &peer->clock;
	int64_t rtt = (int64_t)(rtt_ns / 1000000u);
	int64_t lo = diff_ms(peer_ms, now_ms), hi = lo + rtt;
	int64_t offset = lo > 0 ? lo : hi < 0 ? hi : 0;
	uint32_t i, best = 0;

	clk->sample_offset[clk->next_sample] = offset;
	clk->sample_rtt[clk->next_sample] = rtt;
	clk->next_sample = (clk->next_sample + 1) % WEFT__MSVC_CLOCK_SAMPLES;
	if (clk->nsamples < WEFT__MSVC_CLOCK_SAMPLES)
		clk->nsamples++;
	for (i = 1; i < clk->nsamples; i++)
		if (clk->sample_rtt[i] < clk->sample_rtt[best])
			best = i;
	atomic_store(&clk->offset_ms, clk->sample_offset[best]);
	atomic_store(&clk->rtt_ms, clk->sample_rtt[best]);
	atomic_store(&clk->measured, true);
	atomic_store(&clk->known, true);
	judge_skew(peer, clk->sample_offset[best]);
}

/* Raises *v to s if below (any thread). */
static void
raise_to(_Atomic int64_t *v, int64_t s)
{
	int64_t old = atomic_load(v);

	while (old < s && !atomic_compare_exchange_weak(v, &old, s))
		;
}

void
weft__msvc_clock_arrival(weft_msvc_peer *peer, uint64_t created_ms,
                         uint64_t now_ms, uint64_t now_ns)
{
	struct weft__msvc_clock *clk = &peer->clock;
	int64_t s = diff_ms(created_ms, now_ms), cur, prev;
	uint64_t end;

	if (atomic_load_explicit(&clk->measured, memory_order_relaxed) ||
	    created_ms == 0)
		return;
	end = atomic_load(&clk->window_end_ns);
	if (now_ns >= end &&
	    atomic_compare_exchange_strong(&clk->window_end_ns, &end,
	                                   now_ns + ONEWAY_WINDOW_NS)) {
		atomic_store(
		    &clk->oneway_prev,
		    end == 0 ? INT64_MIN
		             : atomic_exchange(&clk->oneway_cur, INT64_MIN));
	}
	raise_to(&clk->oneway_cur, s);
	cur = atomic_load(&clk->oneway_cur);
	prev = atomic_load(&clk->oneway_prev);
	s = cur > prev ? cur : prev;
	if (s <= 0 && s > -ONEWAY_DEADZONE_MS)
		s = 0;
	if (atomic_load(&clk->measured))
		return;
	atomic_store(&clk->offset_ms, s);
	if (!atomic_exchange(&clk->known, true) ||
	    abs_ms(s) > peer->svc->cfg->limits.max_clock_skew_ms ||
	    atomic_load(&clk->flagged))
		judge_skew(peer, s);
}

uint64_t
weft__msvc_clock_local(const weft_msvc_peer *peer, uint64_t t)
{
	int64_t off =
	    atomic_load_explicit(&peer->clock.offset_ms, memory_order_relaxed);

	if (t == 0)
		return 0;
	if (off >= 0)
		return t > (uint64_t)off ? t - (uint64_t)off : 1;
	return UINT64_MAX - t < abs_ms(off) ? UINT64_MAX : t + abs_ms(off);
}

uint64_t
weft_msvc_wall_ms(const weft_msvc *svc)
{
	return weft__msvc_clock_now_ms(svc);
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

uint64_t
weft_msvc_cluster_wall_ms(const weft_msvc *svc)
{
	int64_t offs[64], mid;
	size_t n = 0, i;

	offs[n++] = 0;
	for (i = 0; i < svc->npeers && n < sizeof(offs) / sizeof(offs[0]);
	     i++) {
		const weft_msvc_peer *p = svc->peers[i];

		if (p == NULL || p->is_self || p->is_client ||
		    !atomic_load(&p->up) || !atomic_load(&p->clock.measured))
			continue;
		offs[n++] = atomic_load(&p->clock.offset_ms);
	}
	qsort(offs, n, sizeof(offs[0]), cmp_i64);
	mid = offs[n / 2];
	/* An even count: of the two middle ones, the one nearer ours. */
	if (n % 2 == 0 && abs_ms(offs[n / 2 - 1]) < abs_ms(mid))
		mid = offs[n / 2 - 1];
	return weft__msvc_clock_now_ms(svc) + (uint64_t)mid;
}
