/* SPDX-License-Identifier: MIT */
/*
 * write.c: puts and deletes. The node that receives one coordinates it:
 * it stamps a version, applies the write to its own replica, sends it to
 * every other member and answers the client from the replicas' reply
 * callbacks once the quorum is met or can no longer be. Nothing waits:
 * the handler returns at once and no lock is held across a send.
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
/* The encoded replicate request around the key and value. */
#define REPLICATE_OVERHEAD (6 * WEFT__KV_HDR_MAX + WEFT_MSVC_MAX_ID)

struct kv_write;

/* One replica's acknowledgement, the argument of its reply callback. */
struct kv_ack {
	struct kv_write *w;
	weft_msvc_peer *peer;
};

/*
 * A write in progress. acks counts replicas that applied it (this node
 * first), fails those that could not; exactly one reply callback sees acks
 * reach the quorum or fails reach the point where the quorum is out of
 * reach, and answers. The last reference frees it.
 */
struct kv_write {
	weft_kv *kv;
	weft_msvc_msg *msg; /* detached; NULL when answered already */
	uint32_t quorum;
	uint32_t replicas;
	_Atomic uint32_t acks;
	_Atomic uint32_t fails;
	_Atomic uint32_t refs;
	struct kv_ack peers[];
};

static void
write_unref(struct kv_write *w)
{
	if (atomic_fetch_sub(&w->refs, 1) == 1)
		free(w);
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
static int
client_status(int status)
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
	         w->quorum, w->replicas, weft_msvc_peer_id(peer),
	         weft_strerror(status));
	weft_debug("kv: %s", text);
	weft_msvc_respond_error(w->msg, client_status(status), text);
}

static void
on_replica_reply(weft_msvc *svc, int status, const void *data, size_t len,
                 void *arg)
{
	struct kv_ack *a = arg;
	struct kv_write *w = a->w;
	uint32_t n;

	(void)svc;
	(void)data;
	(void)len;
	if (status == 0) {
		n = atomic_fetch_add(&w->acks, 1) + 1;
		if (n == w->quorum && w->msg != NULL)
			answer_ok(w->kv, w->msg);
	} else {
		weft__kv_count(&w->kv->st.replica_failures);
		n = atomic_fetch_add(&w->fails, 1) + 1;
		if (n == w->replicas - w->quorum + 1 && w->msg != NULL)
			answer_error(w, status, a->peer);
	}
	write_unref(w);
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

static size_t
encode_tail(uint8_t *out, const struct weft__kv_version *ver)
{
	size_t n, olen = strlen(ver->origin);

	n = weft__kv_enc_uint(out, ver->ts);
	n += weft__kv_enc_str(out + n, (uint32_t)olen);
	memcpy(out + n, ver->origin, olen);
	return n + olen;
}

/*
 * Sends the write to every other member. Each request gets a copy of one
 * encoded payload (on the stack for small values).
 * TODO: lend large values to the requests by reference
 * (evbuffer_add_reference and weft_msvc_request_buf) once the _buf calls
 * no longer race with the loop that frees their buffer.
 */
static void
replicate(struct kv_write *w, uint32_t op, const struct weft__kv_req *req,
          struct weft__kv_blob *b, const struct weft__kv_version *ver,
          const weft_msvc_call_opts *opts)
{
	uint8_t stack[REPLICATE_OVERHEAD + WEFT_KV_MAX_KEY + STACK_VALUE_MAX];
	size_t value_len = b ? b->len : 0, n;
	uint8_t *p = stack;
	uint32_t i;
	int rv = 0;

	if (value_len > STACK_VALUE_MAX &&
	    (p = malloc(REPLICATE_OVERHEAD + req->key_len + value_len)) == NULL)
		rv = WEFT_ENOMEM;
	if (rv == 0) {
		n = encode_head(p, op, req->key, req->key_len, value_len);
		if (value_len > 0)
			memcpy(p + n, b->data, value_len);
		n += value_len;
		n += encode_tail(p + n, ver);
	}
	for (i = 0; i < w->replicas - 1; i++) {
		struct kv_ack *a = &w->peers[i];
		int sent = rv;

		if (sent == 0)
			sent = weft_msvc_request(w->kv->svc, a->peer,
			                         WEFT_KV_VERB_REPLICATE, p, n,
			                         opts, on_replica_reply, a);
		/* Refused at once: that replica's answer is this error. */
		if (sent != 0)
			on_replica_reply(w->kv->svc, sent, NULL, 0, a);
	}
	if (p != stack)
		free(p);
}

static struct kv_write *
write_new(weft_kv *kv)
{
	struct kv_write *w;
	size_t i, j = 0, n = weft_msvc_peer_count(kv->svc);
	weft_msvc_peer *p;

	if ((w = calloc(1, sizeof(*w) + n * sizeof(w->peers[0]))) == NULL)
		return NULL;
	w->kv = kv;
	w->quorum = kv->quorum;
	w->replicas = kv->members;
	atomic_init(&w->acks, 1);           /* this node's own replica */
	atomic_init(&w->refs, kv->members); /* the others, and the handler */
	for (i = 0; i < n; i++) {
		p = weft_msvc_peer_at(kv->svc, i);
		if (!weft_msvc_peer_is_self(p))
			w->peers[j++] = (struct kv_ack){w, p};
	}
	return w;
}

/* Replicas this node knows to be down (weft_msvc_peer_is_down). */
static uint32_t
replicas_down(const weft_kv *kv)
{
	size_t i, n = weft_msvc_peer_count(kv->svc);
	uint32_t down = 0;

	for (i = 0; i < n; i++)
		down += weft_msvc_peer_is_down(weft_msvc_peer_at(kv->svc, i));
	return down;
}

/* Coordinates one write: value NULL deletes. */
static void
coordinate(weft_kv *kv, weft_msvc_msg *msg, const struct weft__kv_req *req,
           struct weft__kv_blob *b)
{
	struct weft__kv_version ver;
	weft_msvc_call_opts opts;
	struct kv_write *w;
	uint32_t down;
	char text[96];
	int rv;

	/* A quorum out of reach already fails now, before anything is
	 * applied, rather than after the replicas' timeout. */
	if (kv->quorum > 1 &&
	    (down = replicas_down(kv)) > kv->members - kv->quorum) {
		weft__kv_count(&kv->st.quorum_failures);
		snprintf(text, sizeof(text),
		         "write quorum impossible: %u of %u replicas down, %u "
		         "needed",
		         down, kv->members, kv->quorum);
		weft_msvc_respond_error(msg, WEFT_EPEERDOWN, text);
		return;
	}
	if ((ver.ts = weft__kv_clock_next(kv)) == 0) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "clock exhausted");
		return;
	}
	ver.origin = weft_msvc_peer_id(kv->self);
	rv = weft__kv_store_apply(&kv->store, req->key, req->key_len, b, &ver);
	if (rv < 0) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	if (rv == WEFT__KV_SUPERSEDED) {
		/* A concurrent write with a later version got here first. */
		weft__kv_count(&kv->st.writes_superseded);
		weft_msvc_respond_error(msg, WEFT_ECONFLICT,
		                        "superseded by a newer version");
		return;
	}
	if ((w = write_new(kv)) == NULL) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	if (w->quorum <= 1)
		answer_ok(kv, msg);
	else
		w->msg = weft_msvc_msg_detach(msg);
	memset(&opts, 0, sizeof(opts));
	opts.timeout_ms = kv->replicate_timeout_ms;
	opts.deadline_ms = weft_msvc_msg_deadline_ms(msg);
	/* Writes to one key from here keep their order on the wire. */
	opts.key = weft__kv_siphash(kv->store.seed, req->key, req->key_len);
	replicate(w, b ? WEFT__KV_OP_PUT : WEFT__KV_OP_DELETE, req, b, &ver,
	          &opts);
	write_unref(w);
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

void
weft__kv_on_replicate(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	weft_kv *kv = arg;
	char origin[WEFT_MSVC_MAX_ID + 1];
	struct weft__kv_blob *b = NULL;
	struct weft__kv_version ver;
	struct weft__kv_req req;
	weft_msvc_peer *p = NULL;
	int rv;

	if (weft__kv_decode_replicate(weft_msvc_msg_data(msg),
	                              weft_msvc_msg_len(msg), &req) == 0) {
		memcpy(origin, req.origin, req.origin_len);
		origin[req.origin_len] = '\0';
		p = weft_msvc_peer_find(svc, origin);
	}
	if (p == NULL || req.value_len > kv->max_value ||
	    (req.op == WEFT__KV_OP_DELETE && req.value_len != 0)) {
		weft__kv_count(&kv->st.bad_requests);
		weft_msvc_respond_error(msg, WEFT_EINVAL,
		                        "malformed replicate");
		return;
	}
	if (req.op == WEFT__KV_OP_PUT &&
	    (b = weft__kv_blob_new(req.value, req.value_len)) == NULL) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	ver.ts = req.ts;
	ver.origin = weft_msvc_peer_id(p);
	if (weft__kv_clock_observe(kv, req.ts) != 0) {
		weft__kv_blob_unref(b);
		weft__kv_count(&kv->st.replicas_refused);
		weft_msvc_respond_error(msg, WEFT_EINVAL,
		                        "version too far ahead of this node's "
		                        "clock");
		return;
	}
	rv = weft__kv_store_apply(&kv->store, req.key, req.key_len, b, &ver);
	weft__kv_blob_unref(b);
	if (rv < 0) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	if (rv == WEFT__KV_SUPERSEDED) {
		weft__kv_count(&kv->st.replicas_stale);
		weft_msvc_respond_error(msg, WEFT_ECONFLICT,
		                        "superseded by a newer version");
		return;
	}
	weft__kv_count(&kv->st.replicas_applied);
	weft_msvc_respond(msg, "", 0);
}
