/* SPDX-License-Identifier: MIT */
/*
 * conn_node.h: the node that fuzz_conn talks to: a messaging service
 * (member "n1" of cluster "fuzz", clients allowed) on a loop group of its
 * own, listening on 127.0.0.1 port 0, with small limits so that inputs
 * reach them, and verbs that answer in every way a handler can.
 */
#ifndef WEFT_TESTS_FUZZ_CONN_NODE_H
#define WEFT_TESTS_FUZZ_CONN_NODE_H

#include <pthread.h>

#include <weft/compress.h>
#include <weft/messaging.h>

enum conn_verb {
	VERB_ECHO = 16,       /* inline: answers with the payload */
	VERB_ECHO_BLOCK = 17, /* the same, on the worker pool */
	VERB_HOLD = 18,       /* detached, answered by conn_node_release */
	VERB_SINK = 19,       /* one-way: nothing */
	VERB_FAIL = 20,       /* answers with an error */
	VERB_SILENT = 21,     /* returns without answering */
	VERB_TWICE = 22,      /* answers, then tries again (refused) */
};

#define CONN_NODE_HELD 32
#define CONN_NODE_MAX_FRAME (64u << 10)

struct conn_node {
	weft_loop_group *group;
	weft_msvc *svc;
	uint16_t port;
	pthread_mutex_t lock; /* held */
	weft_msvc_msg *held[CONN_NODE_HELD];
	int nheld;
	bool twice_accepted; /* a second answer was taken: a bug */
};

/* conn_node_start starts the node; aborts when it cannot. */
void conn_node_start(struct conn_node *n);
/* conn_node_release answers every held request. Any thread. */
void conn_node_release(struct conn_node *n);
/* conn_node_stop answers what is held, stops and frees the node. */
void conn_node_stop(struct conn_node *n);

#endif
