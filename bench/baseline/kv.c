/* SPDX-License-Identifier: MIT */
/*
 * kv.c: the key-value service of <weft/kv.h> on the baseline. Handlers
 * run on the reader threads. A get is answered from the local replica, or
 * at quorum or all from every member's (kv_read.c), as weft's service does. A
 * put or delete is coordinated by the member that receives it: it stamps
 * a version, applies the write, sends a replicate request to every other
 * member and detaches the client's request; the replicas' reply callbacks
 * count acknowledgements and the one that decides the outcome answers.
 * No reader thread ever waits for a reply (it may be the one to read it).
 *
 * Payloads are checked with weft_msgpack_check (no claimed length past
 * the bytes there), unpacked with msgpack-c, and packed with its packer.
 */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kv.h>
#include <weft/msgpack_codec.h>

#include "kv_int.h"

#define REPLICATE_TIMEOUT_MS 2000
#define MAX_VALUE (16u << 20)

/* One replica's share of a write, the argument of its reply callback. */
typedef struct wbase_ack {
	struct wbase_write *w;
	size_t peer;
} wbase_ack;

/*
 * A write in progress. acks counts the replicas that applied it (this
 * member first), fails those that could not; the callback that makes
 * acks reach the quorum, or fails reach the point where it is out of
 * reach, answers msg. The last reference frees it.
 */
typedef struct wbase_write {
	wbase_kv *kv;
	wbase_msg *msg; /* detached; NULL: answered at once */
	uint32_t quorum, replicas;
	atomic_uint acks, fails, refs;
	wbase_ack peers[];
} wbase_write;

/* A decoded request: key, value, and for replicate op, ts and origin. */
typedef struct kv_req {
	uint64_t op, ts;
	const uint8_t *key, *value;
	size_t key_len, value_len;
	const char *origin;
	size_t origin_len;
} kv_req;

static void
count(atomic_uint_fast64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static uint64_t
clock_next(wbase_kv *kv)
{
	uint64_t wall = weft_wall_ms() << 16;
	uint64_t old = atomic_load(&kv->clock), next;

	do {
		next = wall > old ? wall : old + 1;
	} while (!atomic_compare_exchange_weak(&kv->clock, &old, next));
	return next;
}

static void
clock_observe(wbase_kv *kv, uint64_t ts)
{
	uint64_t old = atomic_load(&kv->clock);

	while (old < ts && !atomic_compare_exchange_weak(&kv->clock, &old, ts))
		;
}

/* ---- Payloads ----------------------------------------------------------- */

/* unpack checks that p holds exactly one msgpack array of want elements
 * (bounded first, then unpacked into u); returns its elements or NULL. */
static const msgpack_object *
unpack(msgpack_unpacked *u, const void *p, size_t n, uint32_t want)
{
	size_t off = 0;

	if (p == NULL || n == 0 || weft_msgpack_check(p, n, 1) != 0 ||
	    msgpack_unpack_next(u, p, n, &off) != MSGPACK_UNPACK_SUCCESS ||
	    off != n || u->data.type != MSGPACK_OBJECT_ARRAY ||
	    u->data.via.array.size != want)
		return NULL;
	return u->data.via.array.ptr;
}

static bool
read_bin(const msgpack_object *o, const uint8_t **p, size_t *n)
{
	if (o->type != MSGPACK_OBJECT_BIN)
		return false;
	*p = (const uint8_t *)o->via.bin.ptr;
	*n = o->via.bin.size;
	return true;
}

static bool
read_key(const msgpack_object *o, kv_req *r)
{
	return read_bin(o, &r->key, &r->key_len) && r->key_len > 0 &&
	       r->key_len <= WEFT_KV_MAX_KEY;
}

/* decode_get reads a get: [key] (*cl WEFT_KV_READ_DEFAULT) or [key,
 * consistency]. */
static bool
decode_get(msgpack_unpacked *u, const void *p, size_t n, kv_req *r,
           uint32_t *cl)
{
	const msgpack_object *a = unpack(u, p, n, 1);

	memset(r, 0, sizeof(*r));
	*cl = WEFT_KV_READ_DEFAULT;
	if (a == NULL) {
		msgpack_unpacked_destroy(u);
		msgpack_unpacked_init(u);
		if ((a = unpack(u, p, n, 2)) == NULL ||
		    a[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
		    a[1].via.u64 < WEFT_KV_READ_ONE ||
		    a[1].via.u64 > WEFT_KV_READ_ALL)
			return false;
		*cl = (uint32_t)a[1].via.u64;
	}
	return read_key(&a[0], r);
}

/* decode reads a get or delete ([key]) or a put ([key, value]). */
static bool
decode(msgpack_unpacked *u, const void *p, size_t n, bool put, kv_req *r)
{
	const msgpack_object *a = unpack(u, p, n, put ? 2 : 1);

	memset(r, 0, sizeof(*r));
	return a != NULL && read_key(&a[0], r) &&
	       (!put || read_bin(&a[1], &r->value, &r->value_len));
}

/* item_len is the size of the int, bin or str at p (within left), or 0. */
static size_t
item_len(const uint8_t *p, size_t left)
{
	size_t hdr = 1, body = 0, n = 0;
	uint8_t b;

	if (left == 0)
		return 0;
	b = p[0];
	if (b >= 0xcc && b <= 0xd3)
		hdr += (size_t)1 << ((b - 0xcc) & 3);
	else if ((b & 0xe0) == 0xa0)
		body = b & 0x1f;
	else if (b >= 0xc4 && b <= 0xc6)
		n = (size_t)1 << (b - 0xc4);
	else if (b >= 0xd9 && b <= 0xdb)
		n = (size_t)1 << (b - 0xd9);
	else if (b >= 0x80 && b < 0xe0)
		return 0; /* not a fixint either */
	if (hdr + n > left)
		return 0;
	for (size_t i = 0; i < n; i++)
		body = (body << 8) | p[1 + i];
	hdr += n;
	return body > left - hdr ? 0 : hdr + body;
}

/* write_len is the size of the write (an array of 5 plain items) at the
 * start of a replicate payload, or 0 if there is none: where msgpack-c's
 * unpacker may look (what follows it makes the payload malformed). */
static size_t
write_len(const uint8_t *p, size_t left)
{
	size_t off = 1, k;

	if (left == 0 || p[0] != 0x95) /* fixarray 5: what kv packs */
		return 0;
	for (int i = 0; i < 5; i++, off += k)
		if ((k = item_len(p + off, left - off)) == 0)
			return 0;
	return off;
}

/* decode_write reads the write at *p, moving past it. */
static bool
decode_write(msgpack_unpacked *u, const uint8_t **p, const uint8_t *end,
             kv_req *r)
{
	size_t n = write_len(*p, (size_t)(end - *p));
	const msgpack_object *a = n ? unpack(u, *p, n, 5) : NULL;

	memset(r, 0, sizeof(*r));
	if (a == NULL || a[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
	    a[3].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
	    a[4].type != MSGPACK_OBJECT_STR || !read_key(&a[1], r) ||
	    !read_bin(&a[2], &r->value, &r->value_len))
		return false;
	r->op = a[0].via.u64;
	r->ts = a[3].via.u64;
	r->origin = a[4].via.str.ptr;
	r->origin_len = a[4].via.str.size;
	*p += n;
	return (r->op == 1 || (r->op == 2 && r->value_len == 0)) &&
	       r->value_len <= MAX_VALUE && r->origin_len > 0 &&
	       r->origin_len <= WEFT_MSVC_MAX_ID;
}

const char *
wbase__kv_origin(wbase_kv *kv, const char *origin, size_t len)
{
	for (size_t i = 0; i < kv->members; i++) {
		const char *id = wbase_peer_id(kv->node, i);

		if (strlen(id) == len && memcmp(id, origin, len) == 0)
			return id;
	}
	return NULL;
}

/* origin_of finds the member named by a write's origin, or NULL. */
static const char *
origin_of(wbase_kv *kv, const kv_req *r)
{
	return wbase__kv_origin(kv, r->origin, r->origin_len);
}

/* pack_write packs a replicate request's write into sb. */
static int
pack_write(msgpack_sbuffer *sb, uint64_t op, const kv_req *r,
           const wbase_version *ver)
{
	msgpack_packer pk;
	size_t olen = strlen(ver->origin);

	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	if (msgpack_pack_array(&pk, 5) || msgpack_pack_uint64(&pk, op) ||
	    msgpack_pack_bin(&pk, r->key_len) ||
	    msgpack_pack_bin_body(&pk, r->key, r->key_len) ||
	    msgpack_pack_bin(&pk, r->value_len) ||
	    msgpack_pack_bin_body(&pk, r->value, r->value_len) ||
	    msgpack_pack_uint64(&pk, ver->ts) || msgpack_pack_str(&pk, olen) ||
	    msgpack_pack_str_body(&pk, ver->origin, olen))
		return WEFT_ENOMEM;
	return 0;
}

/* ---- Writes ------------------------------------------------------------- */

static void
write_unref(wbase_write *w)
{
	if (atomic_fetch_sub(&w->refs, 1) == 1)
		free(w);
}

/* client_status is what the client hears when a replica's failure costs
 * the quorum, as weft's service says it. */
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
answer_error(wbase_write *w, int status, size_t peer)
{
	char text[160];

	count(&w->kv->quorum_failures);
	snprintf(text, sizeof(text),
	         "write quorum not reached: %u of %u replicas needed, %s: %s",
	         w->quorum, w->replicas, wbase_peer_id(w->kv->node, peer),
	         weft_strerror(status));
	if (w->msg != NULL)
		wbase_respond_error(w->msg, client_status(status), text);
}

/* ack_done counts one replica's outcome; exactly one call decides. */
static void
ack_done(wbase_ack *a, int status)
{
	wbase_write *w = a->w;

	if (status == 0) {
		if (atomic_fetch_add(&w->acks, 1) + 1 == w->quorum) {
			count(&w->kv->writes_acked);
			if (w->msg != NULL)
				wbase_respond(w->msg, "", 0);
		}
	} else {
		count(&w->kv->replica_failures);
		if (atomic_fetch_add(&w->fails, 1) + 1 ==
		    w->replicas - w->quorum + 1)
			answer_error(w, status, a->peer);
	}
	write_unref(w);
}

static void
on_ack(wbase_node *node, int status, const void *data, size_t len, void *arg)
{
	(void)node;
	(void)data;
	(void)len;
	ack_done(arg, status);
}

static wbase_write *
write_new(wbase_kv *kv)
{
	wbase_write *w =
	    calloc(1, sizeof(*w) + kv->members * sizeof(wbase_ack));
	size_t j = 0;

	if (w == NULL)
		return NULL;
	w->kv = kv;
	w->quorum = kv->quorum;
	w->replicas = kv->members;
	atomic_init(&w->acks, 1);           /* this member's replica */
	atomic_init(&w->refs, kv->members); /* the others and the handler */
	for (size_t i = 0; i < kv->members; i++)
		if (!wbase_peer_is_self(kv->node, i))
			w->peers[j++] = (wbase_ack){w, i};
	return w;
}

/* replicate_timeout_ms: the replicas' time, within the client's. */
static uint64_t
replicate_timeout_ms(const wbase_kv *kv, const wbase_msg *msg)
{
	uint64_t deadline = wbase_msg_deadline_ms(msg), now = weft_wall_ms();

	if (deadline == 0 || deadline >= now + kv->replicate_timeout_ms)
		return kv->replicate_timeout_ms;
	return deadline > now ? deadline - now : 1;
}

/* replicate sends the packed write (pack: its packing's outcome) to
 * every other member; a request that cannot leave is that replica's
 * failure. */
static void
replicate(wbase_write *w, const msgpack_sbuffer *sb, int pack,
          uint64_t timeout_ms)
{
	for (uint32_t i = 0; i + 1 < w->replicas; i++) {
		wbase_ack *a = &w->peers[i];
		int rv = pack;

		if (rv == 0)
			rv = wbase_request(w->kv->node, a->peer,
			                   WEFT_KV_VERB_REPLICATE, sb->data,
			                   sb->size, timeout_ms, on_ack, a);
		if (rv != 0)
			ack_done(a, rv);
	}
}

/* coordinate applies a put (b) or delete (b NULL) here and replicates it;
 * the client hears once the quorum has applied it. */
static void
coordinate(wbase_kv *kv, wbase_msg *msg, const kv_req *r, wbase_blob *b)
{
	wbase_version ver = {clock_next(kv), kv->self_id};
	uint64_t timeout_ms = replicate_timeout_ms(kv, msg);
	msgpack_sbuffer sb;
	wbase_write *w;
	int rv;

	if ((rv = wbase__store_apply(&kv->store, r->key, r->key_len, b, &ver)) <
	        0 ||
	    (w = write_new(kv)) == NULL) {
		wbase_respond_error(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	if (rv == WBASE_SUPERSEDED) {
		write_unref(w);
		wbase_respond_error(msg, WEFT_ECONFLICT,
		                    "superseded by a newer version");
		return;
	}
	if (w->quorum <= 1) {
		count(&kv->writes_acked);
		wbase_respond(msg, "", 0);
	} else if ((w->msg = wbase_msg_detach(msg)) == NULL) {
		wbase_respond_error(msg, WEFT_EREMOTE, "out of memory");
	}
	msgpack_sbuffer_init(&sb);
	rv = pack_write(&sb, b != NULL ? 1 : 2, r, &ver);
	replicate(w, &sb, rv, timeout_ms);
	msgpack_sbuffer_destroy(&sb);
	write_unref(w);
}

/* ---- Handlers ----------------------------------------------------------- */

static void
bad_request(wbase_kv *kv, wbase_msg *msg, const char *text)
{
	count(&kv->bad_requests);
	wbase_respond_error(msg, WEFT_EINVAL, text);
}

void
wbase__kv_answer_value(wbase_kv *kv, wbase_msg *msg, wbase_blob *b)
{
	if (b == NULL) {
		count(&kv->get_misses);
		wbase_respond_error(msg, WEFT_ENOTFOUND, "no such key");
		return;
	}
	wbase_respond(msg, b->data, b->len);
	wbase__blob_unref(b);
}

static void
on_get(wbase_node *node, wbase_msg *msg, void *arg)
{
	wbase_kv *kv = arg;
	msgpack_unpacked u;
	uint32_t cl;
	kv_req r;

	(void)node;
	msgpack_unpacked_init(&u);
	if (!decode_get(&u, wbase_msg_data(msg), wbase_msg_len(msg), &r, &cl)) {
		bad_request(kv, msg, "malformed get");
	} else {
		count(&kv->gets);
		if (cl == WEFT_KV_READ_QUORUM || cl == WEFT_KV_READ_ALL)
			wbase__kv_read_coordinate(kv, msg, r.key, r.key_len,
			                          cl);
		else
			wbase__kv_answer_value(
			    kv, msg,
			    wbase__store_get(&kv->store, r.key, r.key_len,
			                     NULL));
	}
	msgpack_unpacked_destroy(&u);
}

static void
on_put(wbase_node *node, wbase_msg *msg, void *arg)
{
	wbase_kv *kv = arg;
	msgpack_unpacked u;
	wbase_blob *b;
	kv_req r;

	(void)node;
	msgpack_unpacked_init(&u);
	if (!decode(&u, wbase_msg_data(msg), wbase_msg_len(msg), true, &r)) {
		bad_request(kv, msg, "malformed put");
	} else if (r.value_len > MAX_VALUE) {
		count(&kv->bad_requests);
		wbase_respond_error(msg, WEFT_ETOOBIG, "value too large");
	} else if ((b = wbase__blob_new(r.value, r.value_len)) == NULL) {
		wbase_respond_error(msg, WEFT_EREMOTE, "out of memory");
	} else {
		count(&kv->puts);
		coordinate(kv, msg, &r, b);
		wbase__blob_unref(b);
	}
	msgpack_unpacked_destroy(&u);
}

static void
on_delete(wbase_node *node, wbase_msg *msg, void *arg)
{
	wbase_kv *kv = arg;
	msgpack_unpacked u;
	kv_req r;

	(void)node;
	msgpack_unpacked_init(&u);
	if (!decode(&u, wbase_msg_data(msg), wbase_msg_len(msg), false, &r)) {
		bad_request(kv, msg, "malformed delete");
	} else {
		count(&kv->deletes);
		coordinate(kv, msg, &r, NULL);
	}
	msgpack_unpacked_destroy(&u);
}

/* apply_write applies one replicated write; 0 or WEFT_ENOMEM. */
static int
apply_write(wbase_kv *kv, const kv_req *r, const char *origin)
{
	wbase_version ver = {r->ts, origin};
	wbase_blob *b = NULL;
	int rv;

	if (r->op == 1 && (b = wbase__blob_new(r->value, r->value_len)) == NULL)
		return WEFT_ENOMEM;
	clock_observe(kv, r->ts);
	rv = wbase__store_apply(&kv->store, r->key, r->key_len, b, &ver);
	wbase__blob_unref(b);
	if (rv < 0)
		return rv;
	count(rv == 1 ? &kv->replicas_applied : &kv->replicas_stale);
	return rv == WBASE_SUPERSEDED ? WEFT_ECONFLICT : 0;
}

/* A replicate request holds one write, from a member. */
static void
on_replicate(wbase_node *node, wbase_msg *msg, void *arg)
{
	wbase_kv *kv = arg;
	const uint8_t *p = wbase_msg_data(msg), *end = p + wbase_msg_len(msg);
	const char *origin = NULL;
	msgpack_unpacked u;
	kv_req r;
	int rv;

	(void)node;
	msgpack_unpacked_init(&u);
	if (wbase_msg_sender(msg) == SIZE_MAX || p == NULL ||
	    !decode_write(&u, &p, end, &r) || p != end ||
	    (origin = origin_of(kv, &r)) == NULL)
		bad_request(kv, msg, "malformed replicate");
	else if ((rv = apply_write(kv, &r, origin)) == WEFT_ECONFLICT)
		wbase_respond_error(msg, rv, "superseded by a newer version");
	else if (rv != 0)
		wbase_respond_error(msg, WEFT_EREMOTE, "out of memory");
	else
		wbase_respond(msg, "", 0);
	msgpack_unpacked_destroy(&u);
}

/* ---- Set-up ------------------------------------------------------------- */

int
wbase_kv_new(wbase_node *node, const wbase_kv_opts *opts, wbase_kv **out)
{
	static const struct {
		uint32_t verb;
		wbase_handler_cb cb;
	} verbs[] = {
	    {WEFT_KV_VERB_GET, on_get},
	    {WEFT_KV_VERB_PUT, on_put},
	    {WEFT_KV_VERB_DELETE, on_delete},
	    {WEFT_KV_VERB_REPLICATE, on_replicate},
	    {WEFT_KV_VERB_SCAN, wbase__kv_on_scan},
	    {WEFT_KV_VERB_READ, wbase__kv_on_read},
	};
	uint32_t members = (uint32_t)wbase_peer_count(node);
	wbase_kv_opts o = opts != NULL ? *opts : (wbase_kv_opts){0};
	wbase_kv *kv;
	int rv = 0;

	if (o.write_quorum > members)
		return WEFT_EINVAL;
	if ((kv = calloc(1, sizeof(*kv))) == NULL)
		return WEFT_ENOMEM;
	kv->node = node;
	kv->members = members;
	kv->quorum = o.write_quorum ? o.write_quorum : members / 2 + 1;
	kv->replicate_timeout_ms = o.replicate_timeout_ms
	                               ? o.replicate_timeout_ms
	                               : REPLICATE_TIMEOUT_MS;
	for (size_t i = 0; i < members; i++)
		if (wbase_peer_is_self(node, i))
			kv->self_id = wbase_peer_id(node, i);
	wbase__store_init(&kv->store);
	for (size_t i = 0; rv == 0 && i < sizeof(verbs) / sizeof(verbs[0]); i++)
		rv = wbase_register(node, verbs[i].verb, verbs[i].cb, kv);
	if (rv != 0) {
		wbase_kv_free(kv);
		return rv;
	}
	*out = kv;
	return 0;
}

void
wbase_kv_free(wbase_kv *kv)
{
	if (kv == NULL)
		return;
	wbase__store_fini(&kv->store);
	free(kv);
}

void
wbase_kv_get_stats(const wbase_kv *kv, wbase_kv_stats *out)
{
	out->gets = atomic_load(&kv->gets);
	out->get_misses = atomic_load(&kv->get_misses);
	out->puts = atomic_load(&kv->puts);
	out->deletes = atomic_load(&kv->deletes);
	out->writes_acked = atomic_load(&kv->writes_acked);
	out->quorum_failures = atomic_load(&kv->quorum_failures);
	out->replicas_applied = atomic_load(&kv->replicas_applied);
	out->replicas_stale = atomic_load(&kv->replicas_stale);
	out->replica_failures = atomic_load(&kv->replica_failures);
	out->bad_requests = atomic_load(&kv->bad_requests);
	out->scans = atomic_load(&kv->scans);
	out->keys = atomic_load(&kv->store.keys);
	out->reads_coordinated = atomic_load(&kv->reads_coordinated);
	out->read_disagreements = atomic_load(&kv->read_disagreements);
	out->read_failures = atomic_load(&kv->read_failures);
}
