/* SPDX-License-Identifier: MIT */
/*
 * queue_bench: the loop's hand-off queue against liburcu's wfcqueue.
 *
 * P producer threads each hand N nodes to one consumer thread, which takes
 * whatever is queued in one operation (weft: exchange the stack and
 * reverse it; wfcqueue: __cds_wfcq_splice_blocking) and walks it, as a
 * loop does per wake-up. Prints hand-offs per second for each queue,
 * measured in the same run, and the batch sizes the consumer saw.
 *
 * Usage: weft-queue-bench [--producers P] [--count N] [--rounds R]
 */
#define _LGPL_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu/wfcqueue.h>

#include "core_int.h"
#include <weft/core.h>

struct node {
	weft_task task;            /* for weft's queue */
	struct cds_wfcq_node wfcq; /* for liburcu's */
	uint64_t value;
};

struct run {
	int producers;
	long count;
	struct node *nodes;
	weft__mpsc mpsc;
	struct cds_wfcq_head head;
	struct cds_wfcq_tail tail;
	_Atomic int started;
	bool use_urcu;
	uint64_t sum;
	uint64_t takes;
};

struct producer {
	struct run *run;
	int id;
};

static void *
produce(void *arg)
{
	struct producer *p = arg;
	struct run *r = p->run;
	long i;

	atomic_fetch_add(&r->started, 1);
	while (atomic_load(&r->started) < r->producers + 1)
		;
	for (i = 0; i < r->count; i++) {
		struct node *n = &r->nodes[(long)p->id * r->count + i];

		if (r->use_urcu) {
			cds_wfcq_node_init(&n->wfcq);
			cds_wfcq_enqueue(&r->head, &r->tail, &n->wfcq);
		} else {
			weft__mpsc_push(&r->mpsc, &n->task);
		}
	}
	return NULL;
}

static long
consume_weft(struct run *r)
{
	weft_task *t = weft__mpsc_take_all(&r->mpsc);
	long n = 0;

	for (; t != NULL;
	     t = atomic_load_explicit(&t->next, memory_order_relaxed)) {
		r->sum += ((struct node *)t)->value;
		n++;
	}
	return n;
}

static long
consume_urcu(struct run *r)
{
	struct __cds_wfcq_head batch_head;
	struct cds_wfcq_tail batch_tail;
	struct cds_wfcq_node *node, *next;
	long n = 0;

	__cds_wfcq_init(&batch_head, &batch_tail);
	if (__cds_wfcq_splice_blocking(&batch_head, &batch_tail, &r->head,
	                               &r->tail) == CDS_WFCQ_RET_SRC_EMPTY)
		return 0;
	__cds_wfcq_for_each_blocking_safe(&batch_head, &batch_tail, node, next)
	{
		r->sum += caa_container_of(node, struct node, wfcq)->value;
		n++;
	}
	return n;
}

static double
run_once(struct run *r)
{
	struct producer ps[64];
	pthread_t threads[64];
	long total = (long)r->producers * r->count, got = 0, n;
	uint64_t start;
	int i;

	atomic_store(&r->started, 0);
	r->sum = 0;
	r->takes = 0;
	for (i = 0; i < r->producers; i++) {
		ps[i] = (struct producer){r, i};
		pthread_create(&threads[i], NULL, produce, &ps[i]);
	}
	while (atomic_load(&r->started) < r->producers)
		;
	start = weft_now_ns();
	atomic_fetch_add(&r->started, 1);
	while (got < total) {
		n = r->use_urcu ? consume_urcu(r) : consume_weft(r);
		if (n > 0)
			r->takes++;
		got += n;
	}
	for (i = 0; i < r->producers; i++)
		pthread_join(threads[i], NULL);
	return (double)total / ((double)(weft_now_ns() - start) / 1e9);
}

static int
compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	struct run r;
	double weft_rates[16], urcu_rates[16];
	int rounds = 5, i;
	long j;

	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("weft-queue-bench %s\n", weft_version());
		return 0;
	}
	memset(&r, 0, sizeof(r));
	r.producers = 2;
	r.count = 2000000;
	for (i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--producers") == 0)
			r.producers = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--count") == 0)
			r.count = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--rounds") == 0)
			rounds = atoi(argv[i + 1]);
	}
	if (r.producers < 1 || r.producers > 64 || rounds < 1 || rounds > 16 ||
	    r.count < 1) {
		fprintf(stderr,
		        "usage: %s [--producers 1..64] [--count N] "
		        "[--rounds 1..16]\n",
		        argv[0]);
		return 2;
	}
	r.nodes = calloc((size_t)(r.producers * r.count), sizeof(*r.nodes));
	if (r.nodes == NULL)
		return 1;
	for (j = 0; j < r.producers * r.count; j++)
		r.nodes[j].value = 1;
	cds_wfcq_init(&r.head, &r.tail);
	/* Alternate the two so that machine noise hits both alike. */
	for (i = 0; i < rounds; i++) {
		r.use_urcu = false;
		weft_rates[i] = run_once(&r);
		printf("round %d weft mpsc:    %6.2f M hand-offs/s, %.0f per "
		       "take\n",
		       i, weft_rates[i] / 1e6,
		       (double)(r.producers * r.count) / (double)r.takes);
		r.use_urcu = true;
		urcu_rates[i] = run_once(&r);
		printf("round %d urcu wfcqueue: %6.2f M hand-offs/s, %.0f per "
		       "take\n",
		       i, urcu_rates[i] / 1e6,
		       (double)(r.producers * r.count) / (double)r.takes);
	}
	qsort(weft_rates, (size_t)rounds, sizeof(double), compare_doubles);
	qsort(urcu_rates, (size_t)rounds, sizeof(double), compare_doubles);
	printf("median of %d, %d producer(s) x %ld: weft %.2f M/s, "
	       "wfcqueue %.2f M/s, ratio %.2f\n",
	       rounds, r.producers, r.count, weft_rates[rounds / 2] / 1e6,
	       urcu_rates[rounds / 2] / 1e6,
	       weft_rates[rounds / 2] / urcu_rates[rounds / 2]);
	cds_wfcq_destroy(&r.head, &r.tail);
	free(r.nodes);
	return 0;
}
