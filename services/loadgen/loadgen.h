/* SPDX-License-Identifier: MIT */
/*
 * loadgen.h: the load generator of weftd's load verb and of weft-bench's
 * cluster workload, written once.
 *
 * A run keeps K slots busy through a warm-up and a measured window. In a
 * closed loop each slot sends its next request when the last one is
 * answered; in an open loop (rate > 0) a pacer sends request k at
 * t0 + k / rate, stamped with that time even when no slot is free to send
 * it yet, so that a stall shows in the latency instead of hiding. Each
 * slot asks the next target in turn. The generator books every answer
 * (ok and errors inside the window, sent, replies and duplicates all the
 * time), notes the first error, reads the process's figures when the
 * window opens and closes, and waits for the slots to go idle.
 *
 * What a request is, how its latency is kept and what a tick reports are
 * the caller's, through wload_ops; the generator knows no transport. It
 * depends only on <weft/core.h> (the clock), so weftd (services/) and
 * weft-bench (bench/) link it without either reaching into the other.
 *
 * Threads: wload_run runs on a thread of the caller's that may sleep;
 * replies (wload_reply) come on any thread. A slot's fields are touched
 * by whoever runs its reply, each reply following its request; the idle
 * slots of an open loop are under the generator's lock.
 */
#ifndef WLOAD_LOADGEN_H
#define WLOAD_LOADGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct wload wload;

/* One request kept in flight. */
typedef struct wload_slot {
	wload *load;
	unsigned index;      /* in 0 .. outstanding - 1 */
	size_t target;       /* of the request in flight, as next_target gave */
	uint64_t sent_ns;    /* sent, or (open loop) meant to be */
	uint64_t ok, errors; /* inside the window */
	uint64_t sent, replies, duplicates; /* the whole run */
	bool in_flight;
} wload_slot;

/* A process's figures at one instant: rusage, /proc/self/status, and
 * what wload_ops.read_stats adds (zero without it). */
typedef struct wload_usage {
	uint64_t vcsw, ivcsw, cpu_us, rss_kb, threads;
	uint64_t wakeups, msgs_in;
} wload_usage;

/* wload_threads is the process's thread count (/proc/self/status), 0
 * when it cannot be read. Any thread. */
uint64_t wload_threads(void);

/* The per-slot counters summed over the slots. */
typedef struct wload_totals {
	uint64_t ok, errors, sent, replies, duplicates;
} wload_totals;

typedef struct wload_ops {
	/* send sends s's request to s->target; returns 0, or a negative
	 * WEFT_E code when refused at once (the slot then goes idle). The
	 * request's answer must reach wload_reply(s, ...) exactly once. */
	int (*send)(wload_slot *s, void *arg);
	/* next_target returns the target after t. */
	size_t (*next_target)(size_t t, void *arg);
	/* booked runs once per reply, after the slot's counters, before its
	 * next request: latency_ns is the round trip, in_window whether the
	 * reply came inside the measured window. May be NULL. */
	void (*booked)(wload_slot *s, int status, uint64_t latency_ns,
	               bool in_window, void *arg);
	/* tick runs on wload_run's thread each second from the start of the
	 * warm-up. May be NULL. */
	void (*tick)(void *arg);
	/* read_stats fills u's wakeups and msgs_in. May be NULL. */
	void (*read_stats)(wload_usage *u, void *arg);
} wload_ops;

typedef struct wload_opts {
	unsigned outstanding; /* K slots; 0: none, the node only answers */
	double rate;          /* requests/s; 0: closed loop */
	uint64_t warmup_ns, duration_ns;
	uint64_t idle_wait_ns; /* how long wload_run waits for the slots */
	/* Count a request refused at once as an error also during the
	 * warm-up (weft-bench's cluster nodes do; weftd counts only from
	 * the window's start). */
	bool count_warmup_refusals;
} wload_opts;

/* wload_new makes a generator; ops and arg are kept. Each slot's target
 * starts at 0: set it (wload_slot_at) before wload_run, knowing that a
 * slot's first request goes to next_target of it. Returns 0 or
 * WEFT_ENOMEM. */
int wload_new(const wload_opts *opts, const wload_ops *ops, void *arg,
              wload **out);
/* wload_free frees load (NULL is fine); no reply may still come. */
void wload_free(wload *load);
/* wload_slot_at is slot i. */
wload_slot *wload_slot_at(wload *load, unsigned i);

/* wload_run runs the warm-up and the window, reads *before when the
 * window opens and *after when it closes, and waits up to idle_wait_ns
 * for the slots to go idle. Runs once; the calling thread sleeps. */
void wload_run(wload *load, wload_usage *before, wload_usage *after);
/* wload_reply books the answer to s's request and sends its next one
 * (closed loop, window open) or gives the slot back. Any thread. */
void wload_reply(wload_slot *s, int status);
/* wload_stop ends the run early: no slot sends again and wload_run
 * returns soon. Any thread. */
void wload_stop(wload *load);
/* wload_is_stopped is true once wload_stop was called. Any thread. */
bool wload_is_stopped(const wload *load);
/* wload_active is the number of slots with a request in flight. */
unsigned wload_active(const wload *load);
/* wload_note_error keeps status as the run's first error, if it is the
 * first. Any thread. */
void wload_note_error(wload *load, int status);
/* wload_first_error is the first error noted, or 0. */
int wload_first_error(const wload *load);
/* wload_get_totals sums the slots' counters; call once they are idle. */
void wload_get_totals(const wload *load, wload_totals *t);

/* wload_sleep_until sleeps until weft_now_ns() reaches t_ns. */
void wload_sleep_until(uint64_t t_ns);
/* wload_read_usage reads this process's figures (not wakeups or
 * msgs_in, which it zeroes). */
void wload_read_usage(wload_usage *u);

#endif
