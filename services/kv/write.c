/* SPDX-License-Identifier: MIT */
/*
 * write.c: puts and deletes. The node that receives one coordinates it:
 * it stamps a version, sends the write to every other member, and answers
 * the client from the replicas' reply callbacks once the quorum is met or
 * can no longer be. Its own replica counts towards the quorum but applies
 * the write only once the others' acknowledgements meet it, just before
 * the answer, so a write that failed is never read through its
 * coordinator. When it fails, the coordinator sends every other member an
 * abort carrying its own state of the key: a replica that applied the
 * failed version goes back to that state, and one that has not received
 * it yet refuses it when it comes. Nothing waits: the handler returns at
 * once and no lock is held across a send.
 *
 * A write counts as applied by a replica only when its version became the
 * key's state there (or was already): a replica holding a newer version
 * answers CONFLICT, which counts against the quorum, so a write that lost
 * is never acknowledged as applied. Replicas refuse versions too far
 * ahead of their own clock, which would otherwise pin a key and push the
 * clock to its end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_int.h"

/* Values up to this size are encoded on the stack. */
#define STACK_VALUE_MAX 4096
/*
 * A value from this size on has longer than replicate_timeout to reach a
 * replica: one more second per REPLICATE_MIN_RATE bytes queued to that
 * replica, its own included. Large values travel one after another on the
 * replica's large-message connection, so the last of several maximum-size
 * writes waits for all those before it; without this, a replica that is
 * merely busy would time a healthy write out. A replica that stops is
 * still caught by the heartbeats (peer down), whatever the timeout.
 */
#define SCALED_VALUE_MIN (64 * 1024)
#define REPLICATE_MIN_RATE (4 * 1024 * 1024)
/* The encoded replicate request around the key and value. */
#define REPLICATE_OVERHEAD (6 * WEFT__KV_HDR_MAX + WEFT_MSVC_MAX_ID)

struct kv_write;

/* One replica's acknowledgement, the argument of its reply callback. */
struct kv_ack {
	struct kv_write *w;
	weft_msvc_peer *peer;
	/* Not refused at once: it may apply the write (set before any
	 * request goes, cleared on a refusal, read by the abort). */
	_Atomic bool sent;
};

/*
 * A write in progress, sent to the members of the moment it started (its
 * replicas, this node among them). Its outcome is one word: replicas
 * that applied it (acks: this node first, staged until the quorum is
 * met), failed to (fails), or left the cluster before answering (gone),
 * and whether it is decided. A replica that leaves is taken out of the
 * write's replicas and the quorum resolved again for those left
 * (quorum_now): the write neither waits for it nor fails for it. Exactly
 * one reply callback sees the word become decided, and answers: the
 * quorum met (it applies the write here) or out of reach (it aborts it).
 * The last reference frees it.
 */
struct kv_write {
	weft_kv *kv;
	weft_msvc_msg *msg; /* detached; NULL when answered already */
	struct weft__kv_quorum quorum; /* as configured, for quorum_now */
	uint32_t replicas;
	_Atomic uint64_t state; /* a tally (kv_int.h) */
	_Atomic uint32_t refs;
	struct weft__kv_blob *value; /* NULL: a delete */
	struct weft__kv_version ver;
	uint64_t lane; /* the ordering key of the key's messages */
	size_t key_len;
	uint8_t *key; /* in the same allocation, after peers */
	struct kv_ack peers[];
};

/* What a write's state decides: 0 (not yet), 1 (quorum met) or -1 (out
 * of reach). */
static int
write_outcome(const void *op, uint64_t state)
{
	const struct kv_write *w = op;
	uint32_t left = w->replicas - WEFT__KV_COUNT(state, WEFT__KV_GONE);

	return weft__kv_tally_verdict(state, left,
	                              weft__kv_quorum_now(&w->quorum, left));
}

/* Adds one to field of w's state: the verdict this call decided, or 0. */
static int
write_count(struct kv_write *w, uint64_t field)
{
	return weft__kv_tally_add(&w->state, field, write_outcome, w);
}

static void
write_unref(struct kv_write *w)
{
	if (atomic_fetch_sub(&w->refs, 1) == 1) {
		if (w->value != NULL)
			weft__kv_blob_unref(w->value);
		free(w);
	}
}

static void
answer_ok(weft_kv *kv, weft_msvc_msg *msg)
{
	weft__kv_count(&kv->st.writes_acked);
	weft_msvc_respond(msg, "", 0);
}

/*
 * What the client is told when a replica's failure costs the quorum: a
 * replica too slow is a timeout, one refusing work is overload, one that
 * answered with an error is a remote error, and one that could not be
 * reached (or is stopping) is a peer down.
 */
int
weft__kv_client_status(int status)
{
	switch (status) {
	case WEFT_ECONFLICT:
		return WEFT_ECONFLICT;
	case WEFT_ETIMEDOUT:
	case WEFT_EEXPIRED:
		return WEFT_ETIMEDOUT;
	case WEFT_EOVERLOAD:
		return WEFT_EOVERLOAD;
	case WEFT_EINVAL:
	case WEFT_ETOOBIG:
	case WEFT_EUNKNOWNVERB:
	case WEFT_EREMOTE:
		return WEFT_EREMOTE;
	default:
		return WEFT_EPEERDOWN;
	}
}

static void
answer_error(struct kv_write *w, int status, const weft_msvc_peer *peer)
{
	char text[160];

	weft__kv_count(&w->kv->st.quorum_failures);
	if (status == WEFT_ECONFLICT)
		weft__kv_count(&w->kv->st.writes_superseded);
	snprintf(text, sizeof(text),
	         "write quorum not reached: %u of %u replicas needed, %s: %s",
	         weft__kv_quorum_now(&w->quorum, w->replicas), w->replicas,
	         weft_msvc_peer_id(peer), weft_strerror(status));
	weft_debug("kv: %s", text);
	weft_msvc_respond_error(w->msg, weft__kv_client_status(status), text);
}

/* Encodes the replicate request up to the value bytes; returns its size.
 * out holds at least REPLICATE_OVERHEAD + key_len bytes. */
static size_t
encode_head(uint8_t *out, uint32_t op, const void *key, size_t key_len,
            size_t value_len)
{
	size_t n = 0;

	n += weft__kv_enc_array(out + n, 5);
	n += weft__kv_enc_uint(out + n, op);
	n += weft__kv_enc_bin(out + n, (uint32_t)key_len);
	memcpy(out + n, key, key_len);
	n += key_len;
	n += weft__kv_enc_bin(out + n, (uint32_t)value_len);
	return n;
}

/* Takes the failed write back on every other member it was sent to
 * (abort.c); one that refused it at once never had it. */
static void
abort_write(struct kv_write *w)
{
	uint32_t i;

	for (i = 0; i < w->replicas - 1; i++)
		if (atomic_load(&w->peers[i].sent))
			weft__kv_abort(w->kv, w->peers[i].peer, w->key,
			               w->key_len, &w->ver, w->lane);
}

/*
 * The quorum is met: the write becomes this replica's state, then the
 * client hears it. A newer version held here already (a concurrent write
 * that came in meanwhile) leaves it as it is: the write was acknowledged
 * by a quorum and then superseded, as if it had come first.
 */
static void
commit(struct kv_write *w)
{
	weft_kv *kv = w->kv;

	if (weft__kv_store_apply(&kv->store, w->key, w->key_len, w->value,
	                         &w->ver) < 0) {
		weft__kv_count(&kv->st.quorum_failures);
		weft_msvc_respond_error(w->msg, WEFT_EREMOTE, "out of memory");
		abort_write(w);
		return;
	}
	answer_ok(kv, w->msg);
}

static void
on_replica_reply(weft_msvc *svc, int status, const void *data, size_t len,
                 void *arg)
{
	struct kv_ack *a = arg;
	struct kv_write *w = a->w;
	int outcome;

	(void)svc;
	(void)data;
	(void)len;
	if (status == 0) {
		outcome = write_count(w, WEFT__KV_ACK);
		/* It answers again: aborts parked for it can go. */
		weft__kv_aborts_retry(w->kv, a->peer);
	} else if (status == WEFT_ENOTMEMBER ||
	           !weft_msvc_peer_is_member(a->peer)) {
		/* It left the cluster: no longer one of the replicas, whether
		 * its call ended for that or timed out first. */
		outcome = write_count(w, WEFT__KV_GONE);
	} else {
		weft__kv_count(&w->kv->st.replica_failures);
		outcome = write_count(w, WEFT__KV_FAIL);
	}
	if (outcome > 0)
		commit(w);
	else if (outcome < 0) {
		answer_error(w, status, a->peer);
		abort_write(w);
	}
	write_unref(w);
}

/*
 * Sends one replicate request: head, the value and tail. A small value is
 * copied into one payload on the stack; a large one is lent to the
 * request by reference (weft__kv_blob_lend), so that however many replicas
 * there are, the coordinator holds the value once.
 */
static int
replicate_one(struct kv_ack *a, const uint8_t *head, size_t head_len,
              struct weft__kv_blob *b, const uint8_t *tail, size_t tail_len,
              const weft_msvc_call_opts *opts)
{
	uint8_t stack[REPLICATE_OVERHEAD + WEFT_KV_MAX_KEY + STACK_VALUE_MAX];
	size_t value_len = b ? b->len : 0;
	struct evbuffer *buf;
	int rv;

	if (value_len <= STACK_VALUE_MAX) {
		memcpy(stack, head, head_len);
		if (value_len > 0)
			memcpy(stack + head_len, b->data, value_len);
		memcpy(stack + head_len + value_len, tail, tail_len);
		return weft_msvc_request(
		    a->w->kv->svc, a->peer, WEFT_KV_VERB_REPLICATE, stack,
		    head_len + value_len + tail_len, opts, on_replica_reply, a);
	}
	if ((buf = evbuffer_new()) == NULL)
		return WEFT_ENOMEM;
	if (evbuffer_add(buf, head, head_len) != 0 ||
	    weft__kv_blob_lend(b, buf) != 0 ||
	    evbuffer_add(buf, tail, tail_len) != 0)
		rv = WEFT_ENOMEM;
	else
		rv = weft_msvc_request_buf(a->w->kv->svc, a->peer,
		                           WEFT_KV_VERB_REPLICATE, buf, opts,
		                           on_replica_reply, a);
	evbuffer_free(buf);
	return rv;
}

/* How long peer has to acknowledge a write of value_len bytes (see
 * SCALED_VALUE_MIN). */
static uint64_t
replicate_timeout_ms(const weft_kv *kv, const weft_msvc_peer *peer,
                     size_t value_len)
{
	weft_msvc_peer_stats st;

	if (value_len < SCALED_VALUE_MIN)
		return kv->replicate_timeout_ms;
	weft_msvc_peer_get_stats(peer, &st);
	return kv->replicate_timeout_ms +
	       (st.queued_bytes + value_len) * 1000 / REPLICATE_MIN_RATE;
}

/* Sends the write to every other member. */
static void
replicate(struct kv_write *w, uint32_t op, const struct weft__kv_req *req,
          struct weft__kv_blob *b, const struct weft__kv_version *ver,
          const weft_msvc_call_opts *opts)
{
	uint8_t head[REPLICATE_OVERHEAD + WEFT_KV_MAX_KEY];
	uint8_t tail[2 * WEFT__KV_HDR_MAX + WEFT_MSVC_MAX_ID];
	size_t head_len, tail_len;
	uint32_t i;
	int sent;

	head_len =
	    encode_head(head, op, req->key, req->key_len, b ? b->len : 0);
	tail_len = weft__kv_enc_version(tail, ver);
	for (i = 0; i < w->replicas - 1; i++) {
		struct kv_ack *a = &w->peers[i];
		weft_msvc_call_opts o = *opts;

		o.timeout_ms =
		    replicate_timeout_ms(w->kv, a->peer, b ? b->len : 0);
		sent = replicate_one(a, head, head_len, b, tail, tail_len, &o);
		/* Refused at once: that replica's answer is this error. */
		if (sent != 0) {
			atomic_store(&a->sent, false);
			on_replica_reply(w->kv->svc, sent, NULL, 0, a);
		}
	}
}

/* A write of (key, b) at ver to the members, this node first among
 * them, with a reference on b, to be staged here until its quorum is
 * met. */
static struct kv_write *
write_new(weft_kv *kv, const struct weft__kv_req *req, struct weft__kv_blob *b,
          const struct weft__kv_version *ver, const struct weft__kv_members *m)
{
	struct kv_write *w;
	size_t i, j = 0;
	size_t size = sizeof(*w) + m->count * sizeof(w->peers[0]);

	if ((w = calloc(1, size + req->key_len)) == NULL)
		return NULL;
	w->kv = kv;
	w->quorum = kv->quorum_spec;
	w->replicas = (uint32_t)m->count;
	/* This node's own replica, and the decision a quorum of one makes
	 * at once (write_start answers it). */
	atomic_init(
	    &w->state,
	    WEFT__KV_ACK |
	        (write_outcome(w, WEFT__KV_ACK) > 0 ? WEFT__KV_DECIDED : 0));
	/* The others, and the handler. */
	atomic_init(&w->refs, (uint32_t)m->count);
	if ((w->value = b) != NULL)
		weft__kv_blob_ref(b);
	w->ver = *ver;
	/* Writes to one key from here keep their order on the wire. */
	w->lane = weft__kv_siphash(kv->store.seed, req->key, req->key_len);
	w->key = (uint8_t *)w + size;
	w->key_len = req->key_len;
	memcpy(w->key, req->key, req->key_len);
	for (i = 0; i < m->count; i++) {
		if (weft_msvc_peer_is_self(m->peers[i]))
			continue;
		w->peers[j].w = w;
		w->peers[j].peer = m->peers[i];
		atomic_init(&w->peers[j++].sent, true);
	}
	return w;
}

/* Replicas this node knows to be down (weft_msvc_peer_is_down). */
static uint32_t
replicas_down(const struct weft__kv_members *m)
{
	uint32_t down = 0;
	size_t i;

	for (i = 0; i < m->count; i++)
		down += weft_msvc_peer_is_down(m->peers[i]);
	return down;
}

/* Gets w going before it is sent: with a quorum of one, applied here and
 * answered at once; otherwise its answer waits, detached without the
 * request's payload (the value is in w). 0 or WEFT_ENOMEM. */
static int
write_start(struct kv_write *w, weft_msvc_msg *msg)
{
	weft_kv *kv = w->kv;

	if (!(atomic_load(&w->state) & WEFT__KV_DECIDED))
		return (w->msg = weft_msvc_msg_detach_reply(msg)) != NULL
		           ? 0
		           : WEFT_ENOMEM;
	if (weft__kv_store_apply(&kv->store, w->key, w->key_len, w->value,
	                         &w->ver) < 0)
		return WEFT_ENOMEM;
	answer_ok(kv, msg);
	return 0;
}

/* Fails a write whose quorum is out of reach before anything is sent;
 * returns whether it did. */
static bool
refuse_impossible(weft_kv *kv, weft_msvc_msg *msg,
                  const struct weft__kv_members *m)
{
	uint32_t n = (uint32_t)m->count, down = 0;
	uint32_t need = weft__kv_quorum_now(&kv->quorum_spec, n);
	char text[112];

	/* A quorum out of reach already fails now, before anything is
	 * applied, rather than after the replicas' timeout. */
	if (need <= 1)
		return false;
	if (need <= n && (down = replicas_down(m)) <= n - need)
		return false;
	weft__kv_count(&kv->st.quorum_failures);
	snprintf(text, sizeof(text),
	         "write quorum impossible: %u of %u replicas down, %u needed",
	         down, n, need);
	weft_msvc_respond_error(msg, WEFT_EPEERDOWN, text);
	return true;
}

/* Stamps the write's version; false (answered) when it is superseded
 * already or the clock is spent. */
static bool
stamp(weft_kv *kv, weft_msvc_msg *msg, const struct weft__kv_req *req,
      struct weft__kv_version *ver)
{
	struct weft__kv_version held;

	if ((ver->ts = weft__kv_clock_next(kv)) == 0) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "clock exhausted");
		return false;
	}
	ver->origin = weft_msvc_peer_id(kv->self);
	/* The first write of this run marks where its own versions begin
	 * (sync.c), before anything is sent. */
	if (atomic_load(&kv->born_ts) == 0) {
		uint64_t none = 0;

		atomic_compare_exchange_strong(&kv->born_ts, &none, ver->ts);
	}
	weft__kv_blob_unref(
	    weft__kv_store_get(&kv->store, req->key, req->key_len, &held));
	if (held.ts != 0 && weft__kv_version_cmp(ver, &held) < 0) {
		/* A concurrent write with a later version got here first. */
		weft__kv_count(&kv->st.writes_superseded);
		weft_msvc_respond_error(msg, WEFT_ECONFLICT,
		                        "superseded by a newer version");
		return false;
	}
	return true;
}

/* Coordinates one write to the members of the moment: value NULL
 * deletes. */
static void
coordinate(weft_kv *kv, weft_msvc_msg *msg, const struct weft__kv_req *req,
           struct weft__kv_blob *b)
{
	struct weft__kv_members m;
	struct weft__kv_version ver;
	weft_msvc_call_opts opts;
	struct kv_write *w;

	weft__kv_aborts_retry(kv, NULL);
	if (weft__kv_members_get(kv, &m) != 0) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	if (refuse_impossible(kv, msg, &m) || !stamp(kv, msg, req, &ver))
		goto out;
	if ((w = write_new(kv, req, b, &ver, &m)) == NULL) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		goto out;
	}
	if (write_start(w, msg) != 0) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		atomic_store(&w->refs, 1); /* nothing was sent */
		write_unref(w);
		goto out;
	}
	memset(&opts, 0, sizeof(opts));
	opts.timeout_ms = kv->replicate_timeout_ms;
	opts.deadline_ms = weft_msvc_msg_deadline_ms(msg);
	opts.key = w->lane;
	replicate(w, b ? WEFT__KV_OP_PUT : WEFT__KV_OP_DELETE, req, b, &ver,
	          &opts);
	write_unref(w);
out:
	weft__kv_members_fini(&m);
}

void
weft__kv_on_put(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	weft_kv *kv = arg;
	struct weft__kv_req req;
	struct weft__kv_blob *b;

	(void)svc;
	if (weft__kv_decode_put(weft_msvc_msg_data(msg), weft_msvc_msg_len(msg),
	                        &req) != 0) {
		weft__kv_count(&kv->st.bad_requests);
		weft_msvc_respond_error(msg, WEFT_EINVAL, "malformed put");
		return;
	}
	if (req.value_len > kv->max_value) {
		weft__kv_count(&kv->st.bad_requests);
		weft_msvc_respond_error(msg, WEFT_ETOOBIG, "value too large");
		return;
	}
	weft__kv_count(&kv->st.puts);
	if ((b = weft__kv_blob_new(req.value, req.value_len)) == NULL) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	coordinate(kv, msg, &req, b);
	weft__kv_blob_unref(b);
}

void
weft__kv_on_delete(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	weft_kv *kv = arg;
	struct weft__kv_req req;

	(void)svc;
	if (weft__kv_decode_key(weft_msvc_msg_data(msg), weft_msvc_msg_len(msg),
	                        &req) != 0) {
		weft__kv_count(&kv->st.bad_requests);
		weft_msvc_respond_error(msg, WEFT_EINVAL, "malformed delete");
		return;
	}
	weft__kv_count(&kv->st.deletes);
	coordinate(kv, msg, &req, NULL);
}

/* The peer whose id is (id, len), or NULL. */
static weft_msvc_peer *
peer_named(weft_msvc *svc, const char *id, size_t len)
{
	char name[WEFT_MSVC_MAX_ID + 1];

	memcpy(name, id, len);
	name[len] = '\0';
	return weft_msvc_peer_find(svc, name);
}

/* Answers a replicate, or does nothing for an abort sent one-way. */
static void
replicate_answer(weft_msvc_msg *msg, int status, const char *text)
{
	if (!weft_msvc_msg_is_request(msg))
		return;
	if (status == 0)
		weft_msvc_respond(msg, "", 0);
	else
		weft_msvc_respond_error(msg, status, text);
}

/* Applies a replicated write, or an abort of one, to this replica. */
static int
replicate_apply(weft_kv *kv, const struct weft__kv_req *req,
                struct weft__kv_blob *b, const struct weft__kv_version *ver,
                const struct weft__kv_version *restore)
{
	int rv;

	if (req->op != WEFT__KV_OP_ABORT)
		return weft__kv_store_apply(&kv->store, req->key, req->key_len,
		                            b, ver);
	rv = weft__kv_store_abort(&kv->store, req->key, req->key_len, ver, b,
	                          restore);
	if (rv == WEFT__KV_APPLIED)
		weft__kv_count(&kv->st.replicas_aborted);
	return rv == WEFT__KV_SUPERSEDED ? WEFT__KV_HELD : rv;
}

void
weft__kv_on_replicate(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	weft_kv *kv = arg;
	struct weft__kv_version ver, restore = {0, NULL};
	struct weft__kv_blob *b = NULL;
	struct weft__kv_req req;
	weft_msvc_peer *p = NULL, *rp = NULL;
	bool value_ok;
	int rv;

	if (weft__kv_decode_replicate(weft_msvc_msg_data(msg),
	                              weft_msvc_msg_len(msg), &req) == 0) {
		p = peer_named(svc, req.origin, req.origin_len);
		rp = req.op != WEFT__KV_OP_ABORT
		         ? p
		         : peer_named(svc, req.restore_origin,
		                      req.restore_origin_len);
	}
	/* A put's value, or an abort's value to go back to (none for a
	 * delete). */
	value_ok = req.op == WEFT__KV_OP_ABORT
	               ? req.restore_op == WEFT__KV_OP_PUT || req.value_len == 0
	               : req.op == WEFT__KV_OP_PUT || req.value_len == 0;
	if (p == NULL || rp == NULL || req.value_len > kv->max_value ||
	    !value_ok) {
		weft__kv_count(&kv->st.bad_requests);
		replicate_answer(msg, WEFT_EINVAL, "malformed replicate");
		return;
	}
	if ((req.op == WEFT__KV_OP_PUT ||
	     (req.op == WEFT__KV_OP_ABORT &&
	      req.restore_op == WEFT__KV_OP_PUT)) &&
	    (b = weft__kv_blob_new(req.value, req.value_len)) == NULL) {
		replicate_answer(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	ver = (struct weft__kv_version){req.ts, weft_msvc_peer_id(p)};
	if (req.op == WEFT__KV_OP_ABORT)
		restore = (struct weft__kv_version){req.restore_ts,
		                                    weft_msvc_peer_id(rp)};
	if (weft__kv_clock_observe(kv, req.ts) != 0 ||
	    weft__kv_clock_observe(kv, restore.ts) != 0) {
		weft__kv_blob_unref(b);
		weft__kv_count(&kv->st.replicas_refused);
		replicate_answer(msg, WEFT_EINVAL,
		                 "version too far ahead of this node's clock");
		return;
	}
	rv = replicate_apply(kv, &req, b, &ver, &restore);
	weft__kv_blob_unref(b);
	if (rv < 0) {
		replicate_answer(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	if (rv == WEFT__KV_SUPERSEDED || rv == WEFT__KV_ABORTED) {
		weft__kv_count(&kv->st.replicas_stale);
		replicate_answer(msg, WEFT_ECONFLICT,
		                 rv == WEFT__KV_ABORTED
		                     ? "aborted by its coordinator"
		                     : "superseded by a newer version");
		return;
	}
	if (req.op != WEFT__KV_OP_ABORT)
		weft__kv_count(&kv->st.replicas_applied);
	replicate_answer(msg, 0, NULL);
}
