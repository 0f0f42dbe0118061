/* SPDX-License-Identifier: MIT */
/*
 * loop.c: one of the service's loops, set up and torn down: its lists,
 * the task that resumes its paused connections, its per-verb latency
 * histograms and the timer that publishes its statistics each second.
 * Its pending requests are pending.c's, its stage histograms trace.c's.
 */
#include <stdlib.h>

#include "msvc_int.h"

int
weft__msvc_loop_init(weft_msvc *svc, struct weft__msvc_loop *ml)
{
	int rv;

	ml->svc = svc;
	weft__msvc_slots_init(ml);
	LIST_INIT(&ml->paused);
	LIST_INIT(&ml->paused_clients);
	LIST_INIT(&ml->inbound);
	ml->resume_task.cb = weft__msvc_loop_resume;
	ml->resume_task.arg = ml;
	ml->verb_lat = calloc(WEFT_MSVC_MAX_VERBS, sizeof(*ml->verb_lat));
	ml->verb_snap = calloc(WEFT_MSVC_MAX_VERBS, sizeof(*ml->verb_snap));
	if (ml->verb_lat == NULL || ml->verb_snap == NULL) {
		rv = WEFT_ENOMEM;
		goto err_free_verbs;
	}
	pthread_mutex_init(&ml->snap_lock, NULL);
	rv = weft_timer_new(ml->loop, weft__msvc_stats_tick, ml,
	                    &ml->stats_timer);
	if (rv != 0)
		goto err_free_lock;
	if ((rv = weft_timer_start(ml->stats_timer, 1000, 1000)) != 0)
		goto err_free_stats;
	return 0;

err_free_stats:
	weft_timer_free(ml->stats_timer);
	ml->stats_timer = NULL;
err_free_lock:
	pthread_mutex_destroy(&ml->snap_lock);
err_free_verbs:
	free(ml->verb_lat);
	free(ml->verb_snap);
	ml->verb_lat = ml->verb_snap = NULL;
	return rv;
}

void
weft__msvc_loop_fini(struct weft__msvc_loop *ml)
{
	if (ml->stats_timer != NULL)
		weft_timer_free(ml->stats_timer);
	ml->stats_timer = NULL;
	weft__msvc_slots_fini(ml);
	if (ml->verb_lat != NULL) {
		uint32_t v;

		for (v = 0; v < WEFT_MSVC_MAX_VERBS; v++) {
			weft_histogram_free(ml->verb_lat[v]);
			weft_histogram_free(ml->verb_snap[v]);
		}
		pthread_mutex_destroy(&ml->snap_lock);
	}
	free(ml->verb_lat);
	free(ml->verb_snap);
	ml->verb_lat = ml->verb_snap = NULL;
	weft__msvc_stages_loop_fini(ml);
}
