/* SPDX-License-Identifier: MIT */
/*
 * abort.c: taking back a write that failed its quorum. The coordinator
 * sends each other member an abort of the failed version carrying its own
 * state of the key (which never held that version: the coordinator
 * applies a write only once its quorum is met). A replica whose state is
 * the failed version goes back to the coordinator's; one that has not
 * received it yet remembers it and refuses it when it comes.
 *
 * An abort is a request, so that its loss is seen: one that times out is
 * sent again while the replica is up (the request's timeout is the pause
 * between tries), and one that cannot reach the replica (it is down, or
 * the queue to it is full) is parked and sent again when this node next
 * hears from it (an acknowledged replication) or next coordinates a write
 * while it is up. Each try carries the coordinator's state of the key at
 * that moment. At most ABORTS_PARKED wait; past that the oldest is dropped,
 * counted and logged, and that replica may keep the failed write (WEFTD.md
 * says so), as it does when this node stops with aborts still parked.
 */
#include <stdlib.h>
#include <string.h>

#include "kv_int.h"

/* Aborts waiting for their replica to come back, across all replicas. */
#define ABORTS_PARKED 1024
/* Tries of one abort while its replica is up before it is parked. */
#define ABORT_TRIES 3

/* One abort to one replica: what to send it again from. */
struct weft__kv_abort {
	struct weft__kv_abort *next; /* in the parked list */
	weft_kv *kv;
	weft_msvc_peer *peer;
	struct weft__kv_version failed;
	uint64_t lane;
	uint32_t tries;
	size_t key_len;
	uint8_t key[];
};

static void abort_send(struct weft__kv_abort *a);

static void
abort_free(struct weft__kv_abort *a)
{
	free(a);
}

/* Keeps a for its replica's return; drops the oldest past the cap. */
static void
abort_park(struct weft__kv_abort *a)
{
	struct weft__kv_aborts *q = &a->kv->aborts;
	struct weft__kv_abort *drop = NULL;

	a->next = NULL;
	a->tries = 0;
	pthread_mutex_lock(&q->lock);
	if (q->parked == ABORTS_PARKED) {
		drop = q->head;
		q->head = drop->next;
		if (q->head == NULL)
			q->tail = NULL;
		q->parked--;
	}
	if (q->tail != NULL)
		q->tail->next = a;
	else
		q->head = a;
	q->tail = a;
	q->parked++;
	atomic_store_explicit(&q->waiting, q->parked, memory_order_relaxed);
	pthread_mutex_unlock(&q->lock);
	if (drop != NULL) {
		weft__kv_count(&a->kv->st.aborts_dropped);
		weft_log_limited(&q->log, WEFT_LOG_WARN,
		                 "kv: %u aborts of failed writes wait already; "
		                 "%s may keep a failed write",
		                 ABORTS_PARKED, weft_msvc_peer_id(drop->peer));
		abort_free(drop);
	}
}

static void
on_abort_reply(weft_msvc *svc, int status, const void *data, size_t len,
               void *arg)
{
	struct weft__kv_abort *a = arg;

	(void)svc;
	(void)data;
	(void)len;
	switch (status) {
	case WEFT_ETIMEDOUT:
	case WEFT_EEXPIRED:
	case WEFT_EOVERLOAD:
		if (++a->tries < ABORT_TRIES &&
		    !weft_msvc_peer_is_down(a->peer)) {
			abort_send(a);
			return;
		}
		abort_park(a);
		return;
	case WEFT_EPEERDOWN:
		abort_park(a);
		return;
	default:
		/* Done, refused (a node of an older build) or stopping. */
		abort_free(a);
		return;
	}
}

/* Fills buf with the abort of a, carrying (b, restore): this node's state
 * of the key, its value lent by reference. 0 or WEFT_ENOMEM. */
static int
abort_encode(struct evbuffer *buf, const struct weft__kv_abort *a,
             struct weft__kv_blob *b, const struct weft__kv_version *restore)
{
	uint8_t head[4 * WEFT__KV_HDR_MAX + WEFT_KV_MAX_KEY];
	uint8_t tail[5 * WEFT__KV_HDR_MAX + 2 * WEFT_MSVC_MAX_ID];
	size_t h = 0, t = 0;

	h += weft__kv_enc_array(head + h, 8);
	h += weft__kv_enc_uint(head + h, WEFT__KV_OP_ABORT);
	h += weft__kv_enc_bin(head + h, (uint32_t)a->key_len);
	memcpy(head + h, a->key, a->key_len);
	h += a->key_len;
	h += weft__kv_enc_bin(head + h, b ? (uint32_t)b->len : 0);
	t += weft__kv_enc_version(tail + t, &a->failed);
	t += weft__kv_enc_uint(tail + t,
	                       b ? WEFT__KV_OP_PUT : WEFT__KV_OP_DELETE);
	t += weft__kv_enc_version(tail + t, restore);
	if (evbuffer_add(buf, head, h) != 0 ||
	    (b != NULL && weft__kv_blob_lend(b, buf) != 0) ||
	    evbuffer_add(buf, tail, t) != 0)
		return WEFT_ENOMEM;
	return 0;
}

/* Sends a with this node's state of the key now; parks or frees it when
 * that cannot be done. */
static void
abort_send(struct weft__kv_abort *a)
{
	weft_kv *kv = a->kv;
	weft_msvc_call_opts opts = {.timeout_ms = kv->replicate_timeout_ms,
	                            .key = a->lane};
	struct weft__kv_version restore;
	struct weft__kv_blob *b;
	struct evbuffer *buf;
	int rv = WEFT_ENOMEM;

	b = weft__kv_store_get(&kv->store, a->key, a->key_len, &restore);
	if (restore.ts == 0)
		restore.origin = a->failed.origin; /* the key is absent */
	if ((buf = evbuffer_new()) != NULL &&
	    abort_encode(buf, a, b, &restore) == 0)
		rv = weft_msvc_request_buf(kv->svc, a->peer,
		                           WEFT_KV_VERB_REPLICATE, buf, &opts,
		                           on_abort_reply, a);
	if (buf != NULL)
		evbuffer_free(buf);
	weft__kv_blob_unref(b);
	if (rv == 0)
		weft__kv_count(&kv->st.aborts_sent);
	else if (rv == WEFT_EPEERDOWN || rv == WEFT_EOVERLOAD ||
	         rv == WEFT_ENOMEM)
		abort_park(a);
	else
		abort_free(a);
}

void
weft__kv_abort(weft_kv *kv, weft_msvc_peer *peer, const void *key,
               size_t key_len, const struct weft__kv_version *failed,
               uint64_t lane)
{
	struct weft__kv_abort *a;

	if ((a = calloc(1, sizeof(*a) + key_len)) == NULL) {
		weft__kv_count(&kv->st.aborts_dropped);
		weft_log_limited(&kv->aborts.log, WEFT_LOG_WARN,
		                 "kv: out of memory: a failed write is not "
		                 "aborted on %s",
		                 weft_msvc_peer_id(peer));
		return;
	}
	a->kv = kv;
	a->peer = peer;
	a->failed = *failed;
	a->lane = lane;
	a->key_len = key_len;
	memcpy(a->key, key, key_len);
	abort_send(a);
}

void
weft__kv_aborts_retry(weft_kv *kv, const weft_msvc_peer *peer)
{
	struct weft__kv_aborts *q = &kv->aborts;
	struct weft__kv_abort *ready = NULL, **tail = &ready, **pp, *a;

	if (atomic_load_explicit(&q->waiting, memory_order_relaxed) == 0)
		return;
	pthread_mutex_lock(&q->lock);
	for (pp = &q->head; (a = *pp) != NULL;) {
		if ((peer == NULL || a->peer == peer) &&
		    weft_msvc_peer_is_up(a->peer)) {
			*pp = a->next;
			a->next = NULL;
			*tail = a;
			tail = &a->next;
			q->parked--;
		} else {
			q->tail = a;
			pp = &a->next;
		}
	}
	if (q->head == NULL)
		q->tail = NULL;
	atomic_store_explicit(&q->waiting, q->parked, memory_order_relaxed);
	pthread_mutex_unlock(&q->lock);
	while ((a = ready) != NULL) {
		ready = a->next;
		abort_send(a);
	}
}

void
weft__kv_aborts_forget(weft_kv *kv, const weft_msvc_peer *peer)
{
	struct weft__kv_aborts *q = &kv->aborts;
	struct weft__kv_abort *gone = NULL, **pp, *a;

	pthread_mutex_lock(&q->lock);
	q->tail = NULL;
	for (pp = &q->head; (a = *pp) != NULL;) {
		if (a->peer == peer) {
			*pp = a->next;
			a->next = gone;
			gone = a;
			q->parked--;
		} else {
			q->tail = a;
			pp = &a->next;
		}
	}
	atomic_store_explicit(&q->waiting, q->parked, memory_order_relaxed);
	pthread_mutex_unlock(&q->lock);
	while ((a = gone) != NULL) {
		gone = a->next;
		abort_free(a);
	}
}

int
weft__kv_aborts_init(struct weft__kv_aborts *q)
{
	memset(q, 0, sizeof(*q));
	q->log = (weft_log_limit)WEFT_LOG_LIMIT_INIT(10000);
	return pthread_mutex_init(&q->lock, NULL) == 0 ? 0 : WEFT_ENOMEM;
}

void
weft__kv_aborts_fini(struct weft__kv_aborts *q)
{
	struct weft__kv_abort *a;

	while ((a = q->head) != NULL) {
		q->head = a->next;
		abort_free(a);
	}
	pthread_mutex_destroy(&q->lock);
}
