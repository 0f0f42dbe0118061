/* SPDX-License-Identifier: MIT */
/*
 * loadgen.c: the load generator (loadgen.h): slots, the pacer of an open
 * loop, the window, and the process's figures.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <weft/core.h>

#include "loadgen.h"

#define NS_PER_MS 1000000u
#define NS_PER_S 1000000000u
/* A closed loop's sleeps before the window's edges, so that wload_stop
 * ends the run soon. */
#define NAP_NS (10u * NS_PER_MS)
/* The pacer's sleep between two looks at the clock. */
#define PACE_NS 100000u

struct wload {
	wload_opts opts;
	wload_ops ops;
	void *arg;
	wload_slot *slots;
	pthread_mutex_t free_lock; /* free_ids, nfree */
	unsigned *free_ids, nfree; /* open loop: idle slots */
	uint64_t window_start_ns, window_end_ns;
	atomic_uint active; /* slots with a request in flight */
	atomic_bool stop;
	atomic_int first_error;
};

int
wload_new(const wload_opts *opts, const wload_ops *ops, void *arg, wload **out)
{
	wload *load = calloc(1, sizeof(*load));

	if (load == NULL)
		return WEFT_ENOMEM;
	load->opts = *opts;
	load->ops = *ops;
	load->arg = arg;
	load->window_start_ns = load->window_end_ns = UINT64_MAX;
	/* One more than asked: a node that only answers has none. */
	load->slots = calloc(opts->outstanding + 1, sizeof(*load->slots));
	load->free_ids = calloc(opts->outstanding + 1, sizeof(*load->free_ids));
	if (load->slots == NULL || load->free_ids == NULL) {
		free(load->slots);
		free(load->free_ids);
		free(load);
		return WEFT_ENOMEM;
	}
	pthread_mutex_init(&load->free_lock, NULL);
	for (unsigned i = 0; i < opts->outstanding; i++) {
		load->slots[i].load = load;
		load->slots[i].index = i;
		load->free_ids[load->nfree++] = opts->outstanding - 1 - i;
	}
	*out = load;
	return 0;
}

void
wload_free(wload *load)
{
	if (load == NULL)
		return;
	pthread_mutex_destroy(&load->free_lock);
	free(load->slots);
	free(load->free_ids);
	free(load);
}

wload_slot *
wload_slot_at(wload *load, unsigned i)
{
	return &load->slots[i];
}

void
wload_stop(wload *load)
{
	atomic_store(&load->stop, true);
}

bool
wload_is_stopped(const wload *load)
{
	return atomic_load_explicit(&load->stop, memory_order_relaxed);
}

unsigned
wload_active(const wload *load)
{
	return atomic_load_explicit(&load->active, memory_order_acquire);
}

void
wload_note_error(wload *load, int status)
{
	int zero = 0;

	atomic_compare_exchange_strong(&load->first_error, &zero, status);
}

int
wload_first_error(const wload *load)
{
	return atomic_load(&load->first_error);
}

void
wload_get_totals(const wload *load, wload_totals *t)
{
	memset(t, 0, sizeof(*t));
	for (unsigned i = 0; i < load->opts.outstanding; i++) {
		const wload_slot *s = &load->slots[i];

		t->ok += s->ok;
		t->errors += s->errors;
		t->sent += s->sent;
		t->replies += s->replies;
		t->duplicates += s->duplicates;
	}
}

void
wload_sleep_until(uint64_t t_ns)
{
	uint64_t now = weft_now_ns();
	struct timespec ts;

	if (now >= t_ns)
		return;
	ts.tv_sec = (time_t)((t_ns - now) / NS_PER_S);
	ts.tv_nsec = (long)((t_ns - now) % NS_PER_S);
	nanosleep(&ts, NULL);
}

uint64_t
wload_threads(void)
{
	uint64_t n = 0;
	char line[256];
	FILE *f;

	if ((f = fopen("/proc/self/status", "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "Threads:", 8) == 0)
			n = strtoull(line + 8, NULL, 10);
	fclose(f);
	return n;
}

void
wload_read_usage(wload_usage *u)
{
	struct rusage ru;

	memset(u, 0, sizeof(*u));
	getrusage(RUSAGE_SELF, &ru);
	u->vcsw = (uint64_t)ru.ru_nvcsw;
	u->ivcsw = (uint64_t)ru.ru_nivcsw;
	u->cpu_us =
	    (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
	    (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
	u->rss_kb = (uint64_t)ru.ru_maxrss;
	u->threads = wload_threads();
}

static void
read_usage(wload *load, wload_usage *u)
{
	wload_read_usage(u);
	if (load->ops.read_stats != NULL)
		load->ops.read_stats(u, load->arg);
}

/* slot_idle gives a slot back: to the pacer (open loop) or for good. */
static void
slot_idle(wload_slot *s)
{
	wload *load = s->load;

	if (load->opts.rate > 0) {
		pthread_mutex_lock(&load->free_lock);
		load->free_ids[load->nfree++] = s->index;
		pthread_mutex_unlock(&load->free_lock);
	}
	atomic_fetch_sub_explicit(&load->active, 1, memory_order_release);
}

static wload_slot *
slot_take(wload *load)
{
	wload_slot *s = NULL;

	pthread_mutex_lock(&load->free_lock);
	if (load->nfree > 0)
		s = &load->slots[load->free_ids[--load->nfree]];
	pthread_mutex_unlock(&load->free_lock);
	return s;
}

static void
slot_send(wload_slot *s)
{
	wload *load = s->load;
	int rv;

	s->target = load->ops.next_target(s->target, load->arg);
	if (load->opts.rate <= 0)
		s->sent_ns = weft_now_ns();
	s->in_flight = true;
	s->sent++;
	if ((rv = load->ops.send(s, load->arg)) == 0)
		return;
	/* Refused at once (overload): count it, go idle; the run goes on
	 * with the other slots. */
	s->in_flight = false;
	s->sent--;
	if (load->opts.count_warmup_refusals ||
	    weft_now_ns() >= load->window_start_ns)
		s->errors++;
	wload_note_error(load, rv);
	slot_idle(s);
}

void
wload_reply(wload_slot *s, int status)
{
	wload *load = s->load;
	uint64_t now = weft_now_ns();
	bool in_window;

	/* Every request is answered exactly once: a second reply to a slot
	 * would find nothing in flight. */
	if (!s->in_flight) {
		s->duplicates++;
		return;
	}
	s->in_flight = false;
	s->replies++;
	if (status != 0)
		wload_note_error(load, status);
	in_window = now >= load->window_start_ns && now < load->window_end_ns;
	if (in_window && status == 0)
		s->ok++;
	else if (in_window)
		s->errors++;
	if (load->ops.booked != NULL)
		load->ops.booked(s, status, now - s->sent_ns, in_window,
		                 load->arg);
	if (load->opts.rate <= 0 && now < load->window_end_ns &&
	    !wload_is_stopped(load))
		slot_send(s);
	else
		slot_idle(s);
}

/* tick_due runs the tick hook if it is due and returns the next one. */
static uint64_t
tick_due(wload *load, uint64_t now, uint64_t tick)
{
	if (now < tick)
		return tick;
	load->ops.tick(load->arg);
	return tick + NS_PER_S;
}

/* pace runs an open loop until the window closes. */
static void
pace(wload *load, uint64_t t0, wload_usage *before)
{
	double gap_ns = 1e9 / load->opts.rate;
	uint64_t k = 0, tick = t0 + NS_PER_S, now;
	bool opened = false;
	wload_slot *s;

	while ((now = weft_now_ns()) < load->window_end_ns &&
	       !wload_is_stopped(load)) {
		while ((uint64_t)((double)k * gap_ns) <= now - t0 &&
		       (s = slot_take(load)) != NULL) {
			s->sent_ns = t0 + (uint64_t)((double)k * gap_ns);
			atomic_fetch_add(&load->active, 1);
			slot_send(s);
			k++;
		}
		if (!opened && now >= load->window_start_ns) {
			read_usage(load, before);
			opened = true;
		}
		if (load->ops.tick != NULL)
			tick = tick_due(load, now, tick);
		wload_sleep_until(now + PACE_NS);
	}
	if (!opened)
		read_usage(load, before);
}

/* nap_until sleeps until t_ns, or until the run is stopped. */
static void
nap_until(wload *load, uint64_t t_ns)
{
	uint64_t now;

	while ((now = weft_now_ns()) < t_ns && !wload_is_stopped(load))
		wload_sleep_until(t_ns - now > NAP_NS ? now + NAP_NS : t_ns);
}

/* hold runs a closed loop: every slot sends, and its replies send the
 * next requests until the window closes. */
static void
hold(wload *load, uint64_t t0, wload_usage *before)
{
	uint64_t tick = load->ops.tick != NULL ? t0 + NS_PER_S : UINT64_MAX;
	bool opened = false;

	atomic_store(&load->active, load->opts.outstanding);
	for (unsigned i = 0; i < load->opts.outstanding; i++)
		slot_send(&load->slots[i]);
	while ((tick < load->window_end_ns || !opened) &&
	       !wload_is_stopped(load)) {
		if (!opened && load->window_start_ns <= tick) {
			nap_until(load, load->window_start_ns);
			read_usage(load, before);
			opened = true;
			continue;
		}
		nap_until(load, tick);
		tick = tick_due(load, weft_now_ns(), tick);
	}
	if (!opened)
		read_usage(load, before);
	nap_until(load, load->window_end_ns);
}

void
wload_run(wload *load, wload_usage *before, wload_usage *after)
{
	uint64_t t0 = weft_now_ns(), deadline;

	load->window_start_ns = t0 + load->opts.warmup_ns;
	load->window_end_ns = load->window_start_ns + load->opts.duration_ns;
	if (load->opts.rate > 0)
		pace(load, t0, before);
	else
		hold(load, t0, before);
	read_usage(load, after);
	deadline = weft_now_ns() + load->opts.idle_wait_ns;
	while (wload_active(load) > 0 && weft_now_ns() < deadline)
		wload_sleep_until(weft_now_ns() + NS_PER_MS);
}
