/* SPDX-License-Identifier: MIT */
/*
 * read.c: gets. At consistency one, the node that receives a get answers
 * from its own replica. At quorum and all, it coordinates the read as
 * write.c coordinates a write: it reads its own entry, asks every other
 * member of the moment for theirs (kv_read), and the reply callback that
 * decides the outcome in one atomic word answers the client, exactly
 * once, with the newest version among the answers it has, or with the
 * error of the replica whose failure put the need out of reach. Nothing
 * waits: the handler returns at once and no lock is held across a send.
 *
 * A replica's answer is checked before it counts: a malformed one, an
 * origin that names no member, a value above max_value, or a version too
 * far ahead of this node's clock (which would win every read of the key
 * from then on) counts as that replica failing, never as its value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_int.h"

/* Below this, a value is copied into its answer; from it on, lent. */
#define LEND_MIN 4096
/* The encoded read answer around the value. */
#define ANSWER_HEAD_MAX (2 * WEFT__KV_HDR_MAX)
#define ANSWER_TAIL_MAX (2 * WEFT__KV_HDR_MAX + WEFT_MSVC_MAX_ID)
/* The encoded kv_read request. */
#define READ_REQUEST_MAX (2 * WEFT__KV_HDR_MAX + WEFT_KV_MAX_KEY)

struct kv_read;

/* One replica's answer, the argument of its reply callback. filled is
 * set (release) once value and ver are, and only then are they read. */
struct read_slot {
	struct kv_read *r;
	weft_msvc_peer *peer;
	_Atomic bool filled;
	struct weft__kv_blob *value; /* NULL: absent or deleted */
	struct weft__kv_version ver; /* ts 0: absent */
};

/*
 * A read in progress, sent to the members of the moment it started (its
 * replicas, this node the first slot). Its outcome is one word, as a
 * write's is (write.c): replicas that answered (acks, this node's own
 * among them), failed to (fails), or left the cluster or cannot answer a
 * read (gone), and whether it is decided. Exactly one reply callback sees
 * the word become decided, and answers. The last reference frees it.
 */
struct kv_read {
	weft_kv *kv;
	weft_msvc_msg *msg; /* detached */
	uint32_t cl;        /* WEFT_KV_READ_QUORUM or _ALL */
	uint32_t replicas;
	_Atomic uint64_t state; /* a tally (kv_int.h) */
	_Atomic uint32_t refs;
	uint64_t lane;
	size_t key_len;
	uint8_t *key; /* in the same allocation, after slots */
	struct read_slot slots[];
};

static const char *
cl_name(uint32_t cl)
{
	return cl == WEFT_KV_READ_ALL      ? "all"
	       : cl == WEFT_KV_READ_QUORUM ? "quorum"
	                                   : "one";
}

/* The replicas a read at cl needs of left. */
static uint32_t
read_need(uint32_t cl, uint32_t left)
{
	if (cl == WEFT_KV_READ_ALL)
		return left > 0 ? left : 1;
	if (cl == WEFT_KV_READ_QUORUM)
		return left / 2 + 1;
	return 1;
}

/* What a read's state decides: 0 (not yet), 1 (enough answers) or -1
 * (out of reach). */
static int
read_outcome(const void *op, uint64_t state)
{
	const struct kv_read *r = op;
	uint32_t left = r->replicas - WEFT__KV_COUNT(state, WEFT__KV_GONE);

	return weft__kv_tally_verdict(state, left, read_need(r->cl, left));
}

/* Adds one to field of r's state: the verdict this call decided, or 0. */
static int
read_count(struct kv_read *r, uint64_t field)
{
	return weft__kv_tally_add(&r->state, field, read_outcome, r);
}

static void
read_unref(struct kv_read *r)
{
	uint32_t i;

	if (atomic_fetch_sub(&r->refs, 1) != 1)
		return;
	for (i = 0; i < r->replicas; i++)
		if (r->slots[i].value != NULL)
			weft__kv_blob_unref(r->slots[i].value);
	free(r);
}

/*
 * Answers a get with the value; consumes the caller's reference on b. A
 * large value is lent to the answer by reference: its bytes go from the
 * store to the socket without a copy, and the reference ends when they
 * have left.
 */
static void
respond_value(weft_msvc_msg *msg, struct weft__kv_blob *b)
{
	struct evbuffer *buf;

	if (b->len >= LEND_MIN && (buf = evbuffer_new()) != NULL) {
		if (weft__kv_blob_lend(b, buf) == 0)
			weft_msvc_respond_buf(msg, buf);
		else
			weft_msvc_respond(msg, b->data, b->len);
		evbuffer_free(buf);
	} else {
		weft_msvc_respond(msg, b->data, b->len);
	}
	weft__kv_blob_unref(b);
}

/* Answers a get with b (consumed; NULL: not found). */
static void
answer_value(weft_kv *kv, weft_msvc_msg *msg, struct weft__kv_blob *b)
{
	if (b == NULL) {
		weft__kv_count(&kv->st.get_misses);
		weft_msvc_respond_error(msg, WEFT_ENOTFOUND, "no such key");
		return;
	}
	respond_value(msg, b);
}

/*
 * Enough replicas answered: the newest version among the answers in wins.
 * A read whose answers differ is counted once, and if this node's own
 * replica was behind, the newest becomes its state (the others that were
 * behind are left to anti-entropy).
 */
static void
decide_newest(struct kv_read *r)
{
	weft_kv *kv = r->kv;
	struct read_slot *best = &r->slots[0], *s;
	bool differ = false;
	uint32_t i;

	for (i = 1; i < r->replicas; i++) {
		s = &r->slots[i];
		if (!atomic_load_explicit(&s->filled, memory_order_acquire))
			continue;
		if (weft__kv_version_cmp(&s->ver, &best->ver) > 0)
			best = s;
	}
	for (i = 0; i < r->replicas; i++) {
		s = &r->slots[i];
		if (atomic_load_explicit(&s->filled, memory_order_acquire) &&
		    weft__kv_version_cmp(&s->ver, &best->ver) != 0)
			differ = true;
	}
	if (differ)
		weft__kv_count(&kv->st.read_disagreements);
	if (best != &r->slots[0] &&
	    weft__kv_store_apply(&kv->store, r->key, r->key_len, best->value,
	                         &best->ver) == WEFT__KV_APPLIED)
		weft__kv_count(&kv->st.read_repairs);
	if (best->value != NULL)
		weft__kv_blob_ref(best->value);
	answer_value(kv, r->msg, best->value);
}

static void
answer_error(struct kv_read *r, int status, const weft_msvc_peer *peer)
{
	uint32_t left =
	    r->replicas - WEFT__KV_COUNT(atomic_load(&r->state), WEFT__KV_GONE);
	char text[160];

	weft__kv_count(&r->kv->st.read_failures);
	snprintf(text, sizeof(text),
	         "read consistency %s not reached: %u of %u replicas needed, "
	         "%s: %s",
	         cl_name(r->cl), read_need(r->cl, left), left,
	         weft_msvc_peer_id(peer), weft_strerror(status));
	weft_debug("kv: %s", text);
	weft_msvc_respond_error(r->msg, weft__kv_client_status(status), text);
}

/* Fills s from a replica's answer; 0, or WEFT_EINVAL (refused: it counts
 * as that replica failing). */
static int
slot_fill(struct read_slot *s, const void *data, size_t len)
{
	weft_kv *kv = s->r->kv;
	struct weft__kv_req a;
	const char *origin = "";

	if (weft__kv_decode_read_answer(data, len, &a) != 0 ||
	    a.value_len > kv->max_value ||
	    (a.op != 0 &&
	     ((origin = weft__kv_origin(kv, a.origin, a.origin_len)) == NULL ||
	      weft__kv_clock_observe(kv, a.ts) != 0)))
		return WEFT_EINVAL;
	if (a.op == WEFT__KV_OP_PUT &&
	    (s->value = weft__kv_blob_new(a.value, a.value_len)) == NULL)
		return WEFT_ENOMEM;
	s->ver = (struct weft__kv_version){a.ts, origin};
	atomic_store_explicit(&s->filled, true, memory_order_release);
	return 0;
}

static void
on_read_reply(weft_msvc *svc, int status, const void *data, size_t len,
              void *arg)
{
	struct read_slot *s = arg;
	struct kv_read *r = s->r;
	int outcome;

	(void)svc;
	if (status == 0 && (status = slot_fill(s, data, len)) != 0) {
		weft__kv_count(&r->kv->st.read_answers_refused);
		status = WEFT_EREMOTE;
	}
	if (status == 0) {
		outcome = read_count(r, WEFT__KV_ACK);
	} else if (status == WEFT_EUNKNOWNVERB) {
		/* A member of an older build: it cannot take part. */
		weft__kv_count(&r->kv->st.reads_downgraded);
		outcome = read_count(r, WEFT__KV_GONE);
	} else if (status == WEFT_ENOTMEMBER ||
	           !weft_msvc_peer_is_member(s->peer)) {
		outcome = read_count(r, WEFT__KV_GONE);
	} else {
		outcome = read_count(r, WEFT__KV_FAIL);
	}
	if (outcome > 0)
		decide_newest(r);
	else if (outcome < 0)
		answer_error(r, status, s->peer);
	read_unref(r);
}

/* A read of req's key at cl across the members m, this node's entry
 * read into the first slot. */
static struct kv_read *
read_new(weft_kv *kv, const struct weft__kv_req *req, uint32_t cl,
         const struct weft__kv_members *m)
{
	struct kv_read *r;
	size_t i, j = 1;
	size_t size = sizeof(*r) + (m->count + 1) * sizeof(r->slots[0]);

	if ((r = calloc(1, size + req->key_len)) == NULL)
		return NULL;
	r->kv = kv;
	r->cl = cl;
	r->slots[0].r = r;
	r->slots[0].peer = kv->self;
	r->slots[0].value = weft__kv_store_get(&kv->store, req->key,
	                                       req->key_len, &r->slots[0].ver);
	atomic_init(&r->slots[0].filled, true);
	for (i = 0; i < m->count; i++) {
		if (weft_msvc_peer_is_self(m->peers[i]))
			continue;
		r->slots[j].r = r;
		r->slots[j++].peer = m->peers[i];
	}
	r->replicas = (uint32_t)j;
	atomic_init(&r->state, WEFT__KV_ACK);
	atomic_init(&r->refs, (uint32_t)j); /* the others, and the handler */
	r->lane = weft__kv_siphash(kv->store.seed, req->key, req->key_len);
	r->key = (uint8_t *)r + size;
	r->key_len = req->key_len;
	memcpy(r->key, req->key, req->key_len);
	return r;
}

/* Fails a read whose need is out of reach before anything is sent;
 * returns whether it did. */
static bool
refuse_impossible(weft_kv *kv, weft_msvc_msg *msg, uint32_t cl,
                  const struct weft__kv_members *m)
{
	uint32_t n = (uint32_t)m->count, down = 0, need = read_need(cl, n);
	char text[112];
	size_t i;

	for (i = 0; i < m->count; i++)
		down += weft_msvc_peer_is_down(m->peers[i]);
	if (need <= 1 || down <= n - need)
		return false;
	weft__kv_count(&kv->st.read_failures);
	snprintf(text, sizeof(text),
	         "read consistency %s impossible: %u of %u replicas down, "
	         "%u needed",
	         cl_name(cl), down, n, need);
	weft_msvc_respond_error(msg, WEFT_EPEERDOWN, text);
	return true;
}

/* Asks every other replica of r for its entry. */
static void
read_send(struct kv_read *r, weft_msvc_msg *msg)
{
	uint8_t p[READ_REQUEST_MAX];
	weft_msvc_call_opts opts;
	size_t n;
	uint32_t i;
	int rv;

	n = weft__kv_enc_array(p, 1);
	n += weft__kv_enc_bin(p + n, (uint32_t)r->key_len);
	memcpy(p + n, r->key, r->key_len);
	n += r->key_len;
	memset(&opts, 0, sizeof(opts));
	opts.timeout_ms = r->kv->replicate_timeout_ms;
	opts.deadline_ms = weft_msvc_msg_deadline_ms(msg);
	opts.key = r->lane;
	for (i = 1; i < r->replicas; i++) {
		struct read_slot *s = &r->slots[i];

		rv = weft_msvc_request(r->kv->svc, s->peer, WEFT_KV_VERB_READ,
		                       p, n, &opts, on_read_reply, s);
		if (rv != 0)
			on_read_reply(r->kv->svc, rv, NULL, 0, s);
	}
}

/* Coordinates a read at cl (quorum or all) of req's key. */
static void
coordinate(weft_kv *kv, weft_msvc_msg *msg, const struct weft__kv_req *req,
           uint32_t cl)
{
	struct weft__kv_members m;
	struct kv_read *r;

	weft__kv_count(&kv->st.reads_coordinated);
	if (weft__kv_members_get(kv, &m) != 0) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	if (refuse_impossible(kv, msg, cl, &m))
		goto out;
	if ((r = read_new(kv, req, cl, &m)) == NULL) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		goto out;
	}
	/* A read this node alone decides (it is the only replica). */
	if (read_outcome(r, WEFT__KV_ACK) > 0) {
		atomic_store(&r->state, WEFT__KV_ACK | WEFT__KV_DECIDED);
		r->msg = msg;
		decide_newest(r);
		atomic_store(&r->refs, 1);
		read_unref(r);
		goto out;
	}
	if ((r->msg = weft_msvc_msg_detach_reply(msg)) == NULL) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		atomic_store(&r->refs, 1); /* nothing was sent */
		read_unref(r);
		goto out;
	}
	read_send(r, msg);
	read_unref(r);
out:
	weft__kv_members_fini(&m);
}

void
weft__kv_on_get(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	weft_kv *kv = arg;
	struct weft__kv_req req;
	uint32_t cl;

	(void)svc;
	if (weft__kv_refuse_read(kv, msg))
		return;
	if (weft__kv_decode_get(weft_msvc_msg_data(msg), weft_msvc_msg_len(msg),
	                        &req, &cl) != 0) {
		weft__kv_count(&kv->st.bad_requests);
		weft_msvc_respond_error(msg, WEFT_EINVAL, "malformed get");
		return;
	}
	weft__kv_count(&kv->st.gets);
	if (cl == WEFT_KV_READ_DEFAULT)
		cl = kv->read_consistency;
	if (cl == WEFT_KV_READ_QUORUM || cl == WEFT_KV_READ_ALL) {
		coordinate(kv, msg, &req, cl);
		return;
	}
	answer_value(
	    kv, msg,
	    weft__kv_store_get(&kv->store, req.key, req.key_len, NULL));
}

/* Answers a kv_read with [op, value, ts, origin]. */
static void
respond_entry(weft_msvc_msg *msg, struct weft__kv_blob *b,
              const struct weft__kv_version *ver)
{
	uint8_t head[ANSWER_HEAD_MAX + LEND_MIN + ANSWER_TAIL_MAX];
	uint8_t tail[ANSWER_TAIL_MAX];
	uint32_t op = b != NULL      ? WEFT__KV_OP_PUT
	              : ver->ts != 0 ? WEFT__KV_OP_DELETE
	                             : 0;
	size_t len = b != NULL ? b->len : 0, n, tn;
	struct evbuffer *buf;

	n = weft__kv_enc_array(head, 4);
	n += weft__kv_enc_uint(head + n, op);
	n += weft__kv_enc_bin(head + n, (uint32_t)len);
	tn = weft__kv_enc_version(tail, ver);
	if (len < LEND_MIN) {
		if (len > 0)
			memcpy(head + n, b->data, len);
		memcpy(head + n + len, tail, tn);
		weft_msvc_respond(msg, head, n + len + tn);
	} else if ((buf = evbuffer_new()) == NULL) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
	} else {
		if (evbuffer_add(buf, head, n) != 0 ||
		    weft__kv_blob_lend(b, buf) != 0 ||
		    evbuffer_add(buf, tail, tn) != 0)
			weft_msvc_respond_error(msg, WEFT_EREMOTE,
			                        "out of memory");
		else
			weft_msvc_respond_buf(msg, buf);
		evbuffer_free(buf);
	}
	if (b != NULL)
		weft__kv_blob_unref(b);
}

void
weft__kv_on_read(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	weft_kv *kv = arg;
	struct weft__kv_version ver;
	struct weft__kv_req req;
	struct weft__kv_blob *b;

	(void)svc;
	if (weft__kv_refuse_read(kv, msg))
		return;
	if (weft__kv_decode_key(weft_msvc_msg_data(msg), weft_msvc_msg_len(msg),
	                        &req) != 0) {
		weft__kv_count(&kv->st.bad_requests);
		weft_msvc_respond_error(msg, WEFT_EINVAL, "malformed read");
		return;
	}
	b = weft__kv_store_get(&kv->store, req.key, req.key_len, &ver);
	respond_entry(msg, b, &ver);
}
