/* SPDX-License-Identifier: MIT */
/*
 * kv_read.c: quorum and all gets on the baseline, with the semantics of
 * weft's service (<weft/kv.h>, "Reads"), so that the two compare on the
 * same work: the member that receives the get reads its own entry, asks
 * every other member for theirs (kv_read, 71), and the reply callback
 * that brings the answers to the need, or the failures past it, answers
 * the client with the newest version. A reader thread never waits for a
 * reply; a read's answers meet under its own mutex, as the systems of
 * the time did. The members are fixed (the baseline has no membership
 * changes).
 */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kv.h>
#include <weft/msgpack_codec.h>

#include "kv_int.h"

typedef struct read_op read_op;

typedef struct read_slot {
	read_op *r;
	size_t peer;
} read_slot;

/* A read in progress: the newest answer so far (best), the counts, and
 * whether the answers differed, under lock. */
struct read_op {
	wbase_kv *kv;
	wbase_msg *msg; /* detached */
	pthread_mutex_t lock;
	uint32_t need, replicas, acks, fails;
	bool decided, differ;
	wbase_blob *best; /* NULL: absent or deleted */
	wbase_version best_ver;
	atomic_uint refs;
	read_slot slots[];
};

static void
count(atomic_uint_fast64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static int
version_cmp(const wbase_version *a, const wbase_version *b)
{
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return strcmp(a->origin, b->origin);
}

static void
read_unref(read_op *r)
{
	if (atomic_fetch_sub(&r->refs, 1) != 1)
		return;
	wbase__blob_unref(r->best);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* decode_answer reads [op, value, ts, origin] (see <weft/kv.h>) into b
 * (a new blob for a put) and ver; false for a malformed answer. */
static bool
decode_answer(wbase_kv *kv, const void *p, size_t n, wbase_blob **b,
              wbase_version *ver)
{
	msgpack_unpacked u;
	const msgpack_object *a;
	size_t off = 0;
	bool ok = false;
	uint64_t op;

	*b = NULL;
	msgpack_unpacked_init(&u);
	if (p == NULL || n == 0 || weft_msgpack_check(p, n, 1) != 0 ||
	    msgpack_unpack_next(&u, p, n, &off) != MSGPACK_UNPACK_SUCCESS ||
	    off != n || u.data.type != MSGPACK_OBJECT_ARRAY ||
	    u.data.via.array.size != 4)
		goto out;
	a = u.data.via.array.ptr;
	if (a[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
	    a[1].type != MSGPACK_OBJECT_BIN ||
	    a[2].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
	    a[3].type != MSGPACK_OBJECT_STR || (op = a[0].via.u64) > 2)
		goto out;
	ver->ts = a[2].via.u64;
	ver->origin = "";
	if (op == 0) {
		ok = ver->ts == 0;
		goto out;
	}
	if ((ver->origin = wbase__kv_origin(kv, a[3].via.str.ptr,
	                                    a[3].via.str.size)) == NULL ||
	    ver->ts == 0)
		goto out;
	ok = op == 2 || (*b = wbase__blob_new(a[1].via.bin.ptr,
	                                      a[1].via.bin.size)) != NULL;
out:
	msgpack_unpacked_destroy(&u);
	return ok;
}

/* Takes (b, ver) as the newest if it is; consumes b. Under r->lock. */
static void
offer(read_op *r, wbase_blob *b, const wbase_version *ver)
{
	int c = version_cmp(ver, &r->best_ver);

	if (c != 0)
		r->differ = true;
	if (c > 0) {
		wbase__blob_unref(r->best);
		r->best = b;
		r->best_ver = *ver;
	} else {
		wbase__blob_unref(b);
	}
}

static void
answer(read_op *r, int status, size_t peer)
{
	wbase_blob *b;
	char text[160];

	if (status == 0) {
		pthread_mutex_lock(&r->lock);
		if (r->differ)
			count(&r->kv->read_disagreements);
		if ((b = r->best) != NULL)
			atomic_fetch_add(&b->refs, 1);
		pthread_mutex_unlock(&r->lock);
		wbase__kv_answer_value(r->kv, r->msg, b);
		return;
	}
	count(&r->kv->read_failures);
	snprintf(text, sizeof(text),
	         "read consistency %s not reached: %u of %u replicas needed, "
	         "%s: %s",
	         r->need == r->replicas ? "all" : "quorum", r->need,
	         r->replicas, wbase_peer_id(r->kv->node, peer),
	         weft_strerror(status));
	wbase_respond_error(r->msg,
	                    status == WEFT_ETIMEDOUT || status == WEFT_EOVERLOAD
	                        ? status
	                        : WEFT_EPEERDOWN,
	                    text);
}

static void
on_read_reply(wbase_node *node, int status, const void *data, size_t len,
              void *arg)
{
	read_slot *s = arg;
	read_op *r = s->r;
	wbase_version ver;
	wbase_blob *b = NULL;
	int outcome = 0;

	(void)node;
	if (status == 0 && !decode_answer(r->kv, data, len, &b, &ver))
		status = WEFT_EREMOTE;
	pthread_mutex_lock(&r->lock);
	if (status == 0) {
		offer(r, b, &ver);
		if (++r->acks == r->need && !r->decided)
			outcome = 1;
	} else if (++r->fails == r->replicas - r->need + 1 && !r->decided) {
		outcome = -1;
	}
	r->decided |= outcome != 0;
	pthread_mutex_unlock(&r->lock);
	if (outcome != 0)
		answer(r, outcome > 0 ? 0 : status, s->peer);
	read_unref(r);
}

void
wbase__kv_read_coordinate(wbase_kv *kv, wbase_msg *msg, const void *key,
                          size_t key_len, uint32_t cl)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	read_op *r;
	size_t j = 0;

	count(&kv->reads_coordinated);
	if ((r = calloc(1, sizeof(*r) + kv->members * sizeof(read_slot))) ==
	    NULL) {
		wbase_respond_error(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	r->kv = kv;
	pthread_mutex_init(&r->lock, NULL);
	r->replicas = kv->members;
	r->need = cl == WEFT_KV_READ_ALL ? kv->members : kv->members / 2 + 1;
	r->acks = 1; /* this member's own entry */
	r->best = wbase__store_get(&kv->store, key, key_len, &r->best_ver);
	atomic_init(&r->refs, kv->members); /* the others and the handler */
	if (r->need <= 1 || (r->msg = wbase_msg_detach(msg)) == NULL) {
		r->msg = msg;
		r->decided = true;
		answer(r, 0, 0);
		atomic_store(&r->refs, 1);
		read_unref(r);
		return;
	}
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	if (msgpack_pack_array(&pk, 1) || msgpack_pack_bin(&pk, key_len) ||
	    msgpack_pack_bin_body(&pk, key, key_len))
		sb.size = 0; /* out of memory: every request fails */
	for (size_t i = 0; i < kv->members; i++) {
		read_slot *s;
		int rv;

		if (wbase_peer_is_self(kv->node, i))
			continue;
		s = &r->slots[j++];
		*s = (read_slot){r, i};
		rv = sb.size == 0
		         ? WEFT_ENOMEM
		         : wbase_request(
		               kv->node, i, WEFT_KV_VERB_READ, sb.data, sb.size,
		               kv->replicate_timeout_ms, on_read_reply, s);
		if (rv != 0)
			on_read_reply(kv->node, rv, NULL, 0, s);
	}
	msgpack_sbuffer_destroy(&sb);
	read_unref(r);
}

/* A kv_read from a member: [op, value, ts, origin]. */
void
wbase__kv_on_read(wbase_node *node, wbase_msg *msg, void *arg)
{
	wbase_kv *kv = arg;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked u;
	const msgpack_object *a;
	wbase_version ver;
	wbase_blob *b;
	size_t off = 0, olen;
	const uint8_t *key;

	(void)node;
	msgpack_unpacked_init(&u);
	if (wbase_msg_sender(msg) == SIZE_MAX || wbase_msg_data(msg) == NULL ||
	    weft_msgpack_check(wbase_msg_data(msg), wbase_msg_len(msg), 1) !=
	        0 ||
	    msgpack_unpack_next(&u, wbase_msg_data(msg), wbase_msg_len(msg),
	                        &off) != MSGPACK_UNPACK_SUCCESS ||
	    off != wbase_msg_len(msg) || u.data.type != MSGPACK_OBJECT_ARRAY ||
	    u.data.via.array.size != 1 ||
	    (a = u.data.via.array.ptr)->type != MSGPACK_OBJECT_BIN ||
	    a->via.bin.size == 0 || a->via.bin.size > WEFT_KV_MAX_KEY) {
		count(&kv->bad_requests);
		wbase_respond_error(msg, WEFT_EINVAL, "malformed read");
		msgpack_unpacked_destroy(&u);
		return;
	}
	key = (const uint8_t *)a->via.bin.ptr;
	b = wbase__store_get(&kv->store, key, a->via.bin.size, &ver);
	msgpack_unpacked_destroy(&u);
	olen = strlen(ver.origin);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	if (msgpack_pack_array(&pk, 4) ||
	    msgpack_pack_uint32(&pk, b != NULL     ? 1
	                             : ver.ts != 0 ? 2
	                                           : 0) ||
	    msgpack_pack_bin(&pk, b != NULL ? b->len : 0) ||
	    (b != NULL && msgpack_pack_bin_body(&pk, b->data, b->len)) ||
	    msgpack_pack_uint64(&pk, ver.ts) || msgpack_pack_str(&pk, olen) ||
	    msgpack_pack_str_body(&pk, ver.origin, olen))
		wbase_respond_error(msg, WEFT_EREMOTE, "out of memory");
	else
		wbase_respond(msg, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	wbase__blob_unref(b);
}
