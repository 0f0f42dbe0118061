/* SPDX-License-Identifier: MIT */
/*
 * sync.c: copying entries between replicas, for catch-up and
 * anti-entropy (repair.c). Two verbs, for members only:
 *
 *   digest request []  response [digests: bin, WEFT__KV_RANGES little-endian
 *                                u64: each range's XOR of entry digests]
 *   pull   request [start: bin, count: uint, ranges: bin (empty: all;
 *                  else a bitmap of WEFT__KV_RANGES bits, range r in bit
 *                  r % 8 of byte r / 8)]
 *          response [entries: [[key: bin, value: bin or nil (a
 *                   tombstone), ts: uint, origin: str], ...],
 *                   next: bin or nil]
 *
 * A pull walks the index in key order from start, as a scan does, keeps
 * the entries of the asked ranges, and stops at count entries, at
 * PULL_MAX_BYTES, or after SCAN_MAX_VISIT keys examined; next says where
 * to go on. The puller applies each entry as a replicated write would be
 * (weft__kv_store_apply): one newer than its own wins, one older is
 * ignored, so a write that reached the puller during the copy is never
 * replaced by the older copied version.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "kv_int.h"

#define PULL_MAX_COUNT 4096u
#define PULL_MAX_BYTES (1u << 20)
#define PULL_MAX_VISIT 65536u
#define MSGPACK_NIL 0xc0
#define RANGE_BYTES (WEFT__KV_RANGES / 8)

/* ---- Serving ------------------------------------------------------------ */

void
weft__kv_digest_read(weft_kv *kv, uint64_t out[WEFT__KV_RANGES])
{
	uint32_t i;

	for (i = 0; i < WEFT__KV_RANGES; i++)
		out[i] = atomic_load_explicit(&kv->store.digest[i],
		                              memory_order_relaxed);
}

void
weft__kv_on_digest(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	uint8_t out[WEFT__KV_HDR_MAX * 2 + WEFT__KV_RANGES * 8];
	uint64_t d[WEFT__KV_RANGES];
	size_t n;
	uint32_t i, j;

	(void)svc;
	weft__kv_digest_read(arg, d);
	n = weft__kv_enc_array(out, 1);
	n += weft__kv_enc_bin(out + n, WEFT__KV_RANGES * 8);
	for (i = 0; i < WEFT__KV_RANGES; i++)
		for (j = 0; j < 8; j++)
			out[n++] = (uint8_t)(d[i] >> (8 * j));
	weft_msvc_respond(msg, out, n);
}

/* One entry a pull answers with: the key (entries live as long as the
 * store), its value (a reference; NULL: a tombstone) and version. */
struct pull_hit {
	const struct weft__kv_entry *e;
	struct weft__kv_blob *b;
	struct weft__kv_version ver;
};

struct pull {
	weft_kv *kv;
	const uint8_t *ranges; /* NULL: all */
	uint32_t want, got, visited;
	size_t bytes;
	struct pull_hit *hits;
	const struct weft__kv_entry *next; /* where to resume; NULL: end */
};

static size_t
hit_size(const struct pull_hit *h)
{
	return 1 + 4 * WEFT__KV_HDR_MAX + h->e->key_len +
	       (h->b ? h->b->len : 0) + strlen(h->ver.origin);
}

static bool
in_ranges(const uint8_t *ranges, uint64_t ring)
{
	uint32_t r = weft__kv_range(ring);

	return ranges == NULL || (ranges[r / 8] >> (r % 8)) & 1;
}

static bool
pull_visit(struct weft__kv_entry *e, void *arg)
{
	struct pull *pl = arg;
	struct pull_hit h = {.e = e};

	if (pl->got == pl->want || ++pl->visited > PULL_MAX_VISIT) {
		pl->next = e;
		return false;
	}
	if (!in_ranges(pl->ranges, e->ring))
		return true;
	h.b = weft__kv_store_entry_value(&pl->kv->store, e, &h.ver);
	if (h.ver.origin == NULL || h.ver.ts == 0) {
		weft__kv_blob_unref(h.b);
		return true; /* never written */
	}
	if (pl->got > 0 && pl->bytes + hit_size(&h) > PULL_MAX_BYTES) {
		weft__kv_blob_unref(h.b);
		pl->next = e;
		return false;
	}
	pl->bytes += hit_size(&h);
	pl->hits[pl->got++] = h;
	return true;
}

static size_t
put_bin(uint8_t *out, const void *data, size_t len)
{
	size_t n = weft__kv_enc_bin(out, (uint32_t)len);

	if (len > 0)
		memcpy(out + n, data, len);
	return n + len;
}

static size_t
pull_encode(const struct pull *pl, uint8_t *out)
{
	size_t n = weft__kv_enc_array(out, 2), olen;
	uint32_t i;

	n += weft__kv_enc_array(out + n, pl->got);
	for (i = 0; i < pl->got; i++) {
		const struct pull_hit *h = &pl->hits[i];

		n += weft__kv_enc_array(out + n, 4);
		n += put_bin(out + n, h->e->key, h->e->key_len);
		if (h->b == NULL)
			out[n++] = MSGPACK_NIL;
		else
			n += put_bin(out + n, h->b->data, h->b->len);
		n += weft__kv_enc_uint(out + n, h->ver.ts);
		olen = strlen(h->ver.origin);
		n += weft__kv_enc_str(out + n, (uint32_t)olen);
		memcpy(out + n, h->ver.origin, olen);
		n += olen;
	}
	if (pl->next == NULL)
		out[n++] = MSGPACK_NIL;
	else
		n += put_bin(out + n, pl->next->key, pl->next->key_len);
	return n;
}

/* Reads [start, count, ranges]; 0 or WEFT_EINVAL. */
static int
decode_pull(const void *p, size_t len, struct weft__kv_req *start,
            uint32_t *count, const uint8_t **ranges)
{
	struct weft__kv_reader r = {p, (const uint8_t *)p + len};
	const uint8_t *bits;
	size_t nbits;
	uint32_t fields;
	uint64_t want;

	memset(start, 0, sizeof(*start));
	if (p == NULL || weft__kv_read_array(&r, &fields) != 0 || fields != 3 ||
	    weft__kv_read_bin(&r, &start->key, &start->key_len) != 0 ||
	    start->key_len > WEFT_KV_MAX_KEY ||
	    weft__kv_read_uint(&r, &want) != 0 || want == 0 ||
	    want > PULL_MAX_COUNT ||
	    weft__kv_read_bin(&r, &bits, &nbits) != 0 ||
	    (nbits != 0 && nbits != RANGE_BYTES) || r.p != r.end)
		return WEFT_EINVAL;
	*count = (uint32_t)want;
	*ranges = nbits ? bits : NULL;
	return 0;
}

void
weft__kv_on_pull(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct pull pl = {.kv = arg};
	struct weft__kv_req start;
	uint8_t *out;
	uint32_t i;

	(void)svc;
	if (decode_pull(weft_msvc_msg_data(msg), weft_msvc_msg_len(msg), &start,
	                &pl.want, &pl.ranges) != 0) {
		weft__kv_count(&pl.kv->st.bad_requests);
		weft_msvc_respond_error(msg, WEFT_EINVAL, "malformed pull");
		return;
	}
	if ((pl.hits = calloc(pl.want, sizeof(*pl.hits))) == NULL) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	weft__kv_index_walk(&pl.kv->store.index, start.key, start.key_len,
	                    pull_visit, &pl);
	out = malloc(pl.bytes + 3 * WEFT__KV_HDR_MAX + WEFT_KV_MAX_KEY + 1);
	if (out == NULL)
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
	else if (weft_msvc_respond(msg, out, pull_encode(&pl, out)) ==
	         WEFT_ETOOBIG)
		weft_msvc_respond_error(msg, WEFT_ETOOBIG, "entry too large");
	free(out);
	for (i = 0; i < pl.got; i++)
		weft__kv_blob_unref(pl.hits[i].b);
	free(pl.hits);
}

/* ---- Pulling ------------------------------------------------------------- */

/*
 * A version this node stamped since it started: it applies its own
 * writes only once their quorum is met, so one it does not hold is in
 * flight or failed (and aborted), and the copy another replica staged
 * must not make it visible here. Its writes from before a restart are
 * older than this run's first (born_ts) and are copied as any other.
 */
static bool
own_write(const weft_kv *kv, const struct weft__kv_version *ver)
{
	uint64_t born = atomic_load(&kv->born_ts);

	return ver->origin == weft_msvc_peer_id(kv->self) && born != 0 &&
	       ver->ts >= born;
}

/* Applies one pulled entry [key, value|nil, ts, origin]. */
static int
apply_entry(weft_kv *kv, struct weft__kv_reader *r)
{
	struct weft__kv_version ver;
	struct weft__kv_blob *b = NULL;
	const uint8_t *key, *value = NULL;
	size_t key_len, value_len = 0, olen;
	const char *origin;
	uint32_t fields;
	int rv;

	if (weft__kv_read_array(r, &fields) != 0 || fields != 4 ||
	    weft__kv_read_bin(r, &key, &key_len) != 0 || key_len == 0 ||
	    key_len > WEFT_KV_MAX_KEY)
		return WEFT_EINVAL;
	if (r->p < r->end && *r->p == MSGPACK_NIL)
		r->p++;
	else if (weft__kv_read_bin(r, &value, &value_len) != 0)
		return WEFT_EINVAL;
	if (weft__kv_read_uint(r, &ver.ts) != 0 || ver.ts == 0 ||
	    weft__kv_read_str(r, &origin, &olen) != 0 || olen == 0 ||
	    olen > WEFT_MSVC_MAX_ID)
		return WEFT_EINVAL;
	/* A version from a member never known here, or far ahead of this
	 * node's clock, is left out, as a replicated write would be. */
	if ((ver.origin = weft__kv_origin(kv, origin, olen)) == NULL ||
	    weft__kv_clock_observe(kv, ver.ts) != 0 || own_write(kv, &ver)) {
		weft__kv_count(&kv->st.entries_pulled_stale);
		return 0;
	}
	if (value != NULL && (b = weft__kv_blob_new(value, value_len)) == NULL)
		return WEFT_ENOMEM;
	rv = weft__kv_store_apply(&kv->store, key, key_len, b, &ver);
	weft__kv_blob_unref(b);
	if (rv < 0)
		return rv;
	weft__kv_count(rv == WEFT__KV_APPLIED ? &kv->st.entries_pulled
	                                      : &kv->st.entries_pulled_stale);
	return 0;
}

/* Applies one page; stores the resume key in next (next_len 0: the end). */
static int
apply_page(weft_kv *kv, const uint8_t *p, size_t len, uint8_t *next,
           size_t *next_len)
{
	struct weft__kv_reader r = {p, p + len};
	const uint8_t *key;
	uint32_t fields, n, i;
	int rv;

	if (weft__kv_read_array(&r, &fields) != 0 || fields != 2 ||
	    weft__kv_read_array(&r, &n) != 0)
		return WEFT_EINVAL;
	for (i = 0; i < n; i++)
		if ((rv = apply_entry(kv, &r)) != 0)
			return rv;
	*next_len = 0;
	if (r.p < r.end && *r.p == MSGPACK_NIL)
		r.p++;
	else if (weft__kv_read_bin(&r, &key, next_len) != 0 || *next_len == 0 ||
	         *next_len > WEFT_KV_MAX_KEY)
		return WEFT_EINVAL;
	else
		memcpy(next, key, *next_len);
	return r.p == r.end ? 0 : WEFT_EINVAL;
}

/* One blocking call to peer; the answer lands in reply. */
static int
call(weft_kv *kv, weft_msvc_peer *peer, uint32_t verb, const void *req,
     size_t len, struct evbuffer *reply)
{
	weft_msvc_call_opts opts = {.timeout_ms = kv->replicate_timeout_ms};
	int rv;

	evbuffer_drain(reply, evbuffer_get_length(reply));
	rv = weft_msvc_call(kv->svc, peer, verb, req, len, &opts, reply);
	if (rv == 0)
		atomic_fetch_add_explicit(&kv->st.bytes_pulled,
		                          evbuffer_get_length(reply) + len,
		                          memory_order_relaxed);
	return rv;
}

int
weft__kv_pull(weft_kv *kv, weft_msvc_peer *peer, const uint8_t *ranges)
{
	uint8_t req[4 * WEFT__KV_HDR_MAX + WEFT_KV_MAX_KEY + RANGE_BYTES];
	uint8_t start[WEFT_KV_MAX_KEY];
	size_t start_len = 0, n;
	struct evbuffer *reply;
	int rv;

	if ((reply = evbuffer_new()) == NULL)
		return WEFT_ENOMEM;
	do {
		n = weft__kv_enc_array(req, 3);
		n += put_bin(req + n, start, start_len);
		n += weft__kv_enc_uint(req + n, PULL_MAX_COUNT);
		n += put_bin(req + n, ranges, ranges ? RANGE_BYTES : 0);
		if ((rv = call(kv, peer, WEFT_KV_VERB_PULL, req, n, reply)) !=
		    0)
			break;
		rv = apply_page(kv, evbuffer_pullup(reply, -1),
		                evbuffer_get_length(reply), start, &start_len);
	} while (rv == 0 && start_len > 0);
	evbuffer_free(reply);
	return rv;
}

int
weft__kv_fetch_digest(weft_kv *kv, weft_msvc_peer *peer,
                      uint64_t out[WEFT__KV_RANGES])
{
	const uint8_t req[1] = {0x90}; /* [] */
	struct weft__kv_reader r;
	struct evbuffer *reply;
	const uint8_t *d;
	uint32_t fields, i, j;
	size_t len;
	int rv;

	if ((reply = evbuffer_new()) == NULL)
		return WEFT_ENOMEM;
	if ((rv = call(kv, peer, WEFT_KV_VERB_DIGEST, req, 1, reply)) == 0) {
		r.p = evbuffer_pullup(reply, -1);
		r.end = r.p + evbuffer_get_length(reply);
		if (weft__kv_read_array(&r, &fields) != 0 || fields != 1 ||
		    weft__kv_read_bin(&r, &d, &len) != 0 ||
		    len != WEFT__KV_RANGES * 8 || r.p != r.end)
			rv = WEFT_EINVAL;
		for (i = 0; rv == 0 && i < WEFT__KV_RANGES; i++)
			for (out[i] = 0, j = 0; j < 8; j++)
				out[i] |= (uint64_t)d[8 * i + j] << (8 * j);
	}
	evbuffer_free(reply);
	return rv;
}
