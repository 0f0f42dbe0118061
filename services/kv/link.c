/*
 * link.c: the writes on their way to each replica, batched.
 *
 * A lone replicate message is the most expensive message the service
 * sends: gets arrive and leave in batches of dozens per read and write,
 * while a write to each replica was a message of its own, with its own
 * write, wake-up and read at both ends, and an ack back the same way.
 * Under a mostly-read load those messages cost more than the writes'
 * share of the traffic suggests. So each replica gets at most one batch
 * in flight: a write that comes while one is pending waits, and every
 * write that waited leaves as one request when the answer comes. A write
 * to an idle link leaves at once, so batching never adds a delay that
 * the replica's round trip does not already impose.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "kv_int.h"

/* Writes taken off a link to leave as one request. */
struct batch {
	struct evbuffer *buf; /* NULL: one write at data */
	const void *data;
	size_t len;
	struct weft__kv_ack *head;
	uint32_t writes;
	int error; /* the batch could not be made: its writes fail */
	uint64_t since_ns;
	uint64_t deadline_ms;
};

int
weft__kv_links_init(weft_kv *kv)
{
	size_t i, n = weft_msvc_peer_count(kv->svc);
	struct weft__kv_link *l;

	if ((kv->links = calloc(n, sizeof(*kv->links))) == NULL)
		return WEFT_ENOMEM;
	for (i = 0; i < n; i++) {
		l = &kv->links[i];
		l->kv = kv;
		l->peer = weft_msvc_peer_at(kv->svc, i);
		l->tail = &l->head;
		if ((l->queued = evbuffer_new()) == NULL)
			goto err_links;
		if (pthread_mutex_init(&l->lock, NULL) != 0) {
			evbuffer_free(l->queued);
			goto err_links;
		}
	}
	return 0;

err_links:
	while (i-- > 0) {
		pthread_mutex_destroy(&kv->links[i].lock);
		evbuffer_free(kv->links[i].queued);
	}
	free(kv->links);
	kv->links = NULL;
	return WEFT_ENOMEM;
}

void
weft__kv_links_fini(weft_kv *kv)
{
	size_t i, n = weft_msvc_peer_count(kv->svc);

	if (kv->links == NULL)
		return;
	for (i = 0; i < n; i++) {
		pthread_mutex_destroy(&kv->links[i].lock);
		evbuffer_free(kv->links[i].queued);
	}
	free(kv->links);
}

struct weft__kv_link *
weft__kv_link_of(weft_kv *kv, size_t i)
{
	return &kv->links[i];
}

/* Moves the queued writes into b and counts one more batch in flight.
 * Requires the link's lock. Returns false (b untouched) when the queue
 * is empty. If no buffer can be made, b carries the error instead, so the
 * writes still end. */
static bool
take(struct weft__kv_link *l, struct batch *b)
{
	if (l->head == NULL)
		return false;
	memset(b, 0, sizeof(*b));
	if ((b->buf = evbuffer_new()) != NULL)
		evbuffer_add_buffer(b->buf, l->queued);
	else
		b->error = WEFT_ENOMEM;
	evbuffer_drain(l->queued, evbuffer_get_length(l->queued));
	b->head = l->head;
	b->writes = l->queued_writes;
	b->since_ns = l->since_ns;
	b->deadline_ms = l->no_deadline ? 0 : l->deadline_ms;
	l->head = NULL;
	l->tail = &l->head;
	l->queued_writes = 0;
	l->no_deadline = false;
	l->deadline_ms = 0;
	l->in_flight++;
	return true;
}

/* Reports status for every write of a batch. */
static void
fail_all(weft_kv *kv, struct weft__kv_ack *a, int status)
{
	struct weft__kv_ack *next;

	for (; a != NULL; a = next) {
		next = a->next; /* a may be freed by its report */
		weft__kv_ack_done(kv, a, status);
	}
}

static void on_batch_reply(weft_msvc *svc, int status, const void *data,
                           size_t len, void *arg);

/* Sends b; returns 0 or the error that refused it at once. The timeout
 * counts from when the oldest write started waiting. */
static int
send_batch(struct weft__kv_link *l, struct batch *b)
{
	weft_kv *kv = l->kv;
	uint64_t waited_ms = (weft_now_ns() - b->since_ns) / 1000000u;
	weft_msvc_call_opts opts;
	int rv;

	if (b->error != 0)
		return b->error;
	memset(&opts, 0, sizeof(opts));
	opts.timeout_ms = waited_ms < kv->replicate_timeout_ms
	                      ? kv->replicate_timeout_ms - waited_ms
	                      : 1;
	opts.deadline_ms = b->deadline_ms;
	weft__kv_count(&kv->st.replicate_requests);
	atomic_fetch_add_explicit(&kv->st.replicate_writes, b->writes,
	                          memory_order_relaxed);
	/*
	 * A batch goes out as one contiguous copy, not by
	 * weft_msvc_request_buf: messaging's CRC of an evbuffer payload
	 * covers only its first 16 chains (evbuffer_peek with len -1 stops
	 * at the vectors it was given), so a batch of many writes would
	 * arrive with a bad checksum and close the connection.
	 */
	if (b->buf != NULL) {
		b->len = evbuffer_get_length(b->buf);
		if ((b->data = evbuffer_pullup(b->buf, -1)) == NULL) {
			evbuffer_free(b->buf);
			return WEFT_ENOMEM;
		}
	}
	rv = weft_msvc_request(kv->svc, l->peer, WEFT_KV_VERB_REPLICATE,
	                       b->data, b->len, &opts, on_batch_reply, b->head);
	if (b->buf != NULL)
		evbuffer_free(b->buf);
	return rv;
}

/*
 * Sends b, which counts as in flight; while sending fails at once, fails
 * its writes and sends whatever queued meanwhile, so that no write is left
 * waiting without a batch in flight to take it along.
 */
static void
pump(struct weft__kv_link *l, struct batch *b)
{
	bool more;
	int rv;

	while ((rv = send_batch(l, b)) != 0) {
		fail_all(l->kv, b->head, rv);
		pthread_mutex_lock(&l->lock);
		l->in_flight--;
		more = l->in_flight == 0 && take(l, b);
		pthread_mutex_unlock(&l->lock);
		if (!more)
			return;
	}
}

/* A batch's answer: every write in it shares the replica's outcome;
 * then the writes that waited leave together. */
static void
on_batch_reply(weft_msvc *svc, int status, const void *data, size_t len,
               void *arg)
{
	struct weft__kv_ack *head = arg;
	struct weft__kv_link *l = head->link;
	struct batch b;
	bool more;

	(void)svc;
	(void)data;
	(void)len;
	fail_all(l->kv, head, status);
	pthread_mutex_lock(&l->lock);
	l->in_flight--;
	more = l->in_flight == 0 && take(l, &b);
	pthread_mutex_unlock(&l->lock);
	if (more)
		pump(l, &b);
}

/* Adds a write to the queue. Requires the link's lock. */
static int
enqueue(struct weft__kv_link *l, struct weft__kv_ack *a, const void *p,
        size_t n, uint64_t deadline_ms)
{
	if (evbuffer_add(l->queued, p, n) != 0)
		return WEFT_ENOMEM;
	if (l->head == NULL)
		l->since_ns = weft_now_ns();
	l->queued_writes++;
	a->next = NULL;
	*l->tail = a;
	l->tail = &a->next;
	if (deadline_ms == 0)
		l->no_deadline = true;
	else if (deadline_ms > l->deadline_ms)
		l->deadline_ms = deadline_ms;
	return 0;
}

void
weft__kv_link_send(struct weft__kv_link *l, struct weft__kv_ack *a,
                   const void *p, size_t n, uint64_t deadline_ms)
{
	struct batch full = {0}, now = {0};
	bool send_full = false, send_now = false;
	int rv = 0;

	a->link = l;
	a->next = NULL;
	pthread_mutex_lock(&l->lock);
	if (l->in_flight == 0 && l->head == NULL) {
		/* Idle: this write leaves at once, alone. */
		l->in_flight++;
		now = (struct batch){.data = p,
		                     .len = n,
		                     .head = a,
		                     .writes = 1,
		                     .since_ns = weft_now_ns(),
		                     .deadline_ms = deadline_ms};
		send_now = true;
	} else {
		/* A full queue leaves now rather than grow without bound. */
		if (evbuffer_get_length(l->queued) + n > WEFT__KV_BATCH_BYTES)
			send_full = take(l, &full);
		/* Nothing in flight to take the queue along (a batch
		 * failed at once meanwhile): it leaves now. */
		if ((rv = enqueue(l, a, p, n, deadline_ms)) == 0 &&
		    (l->in_flight == 0 ||
		     evbuffer_get_length(l->queued) >= WEFT__KV_BATCH_BYTES))
			send_now = take(l, &now);
	}
	pthread_mutex_unlock(&l->lock);
	if (rv != 0)
		weft__kv_ack_done(l->kv, a, rv);
	if (send_full)
		pump(l, &full);
	if (send_now)
		pump(l, &now);
}
