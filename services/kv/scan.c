/* SPDX-License-Identifier: MIT */
/*
 * scan.c: ordered scans of one node's replica (see <weft/kv.h>): the
 * handler walks the index from the start key, reading each entry's value
 * under its shard's lock as a get does, and answers with the live entries
 * it met and the key to resume from; the client half encodes the request
 * and reads the answer.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "kv_int.h"

/* The most keys one scan examines, tombstones included. */
#define SCAN_MAX_VISIT 65536u
#define MSGPACK_NIL 0xc0

/* One live entry met by a scan: its key (entries live as long as the
 * store) and a reference on its value. */
struct scan_hit {
	const struct weft__kv_entry *e;
	struct weft__kv_blob *b;
};

struct scan {
	struct weft__kv_store *store;
	uint32_t want, got, visited;
	size_t bytes; /* encoded size of the hits so far */
	struct scan_hit *hits;
	const struct weft__kv_entry *next; /* where to resume; NULL: end */
};

static size_t
entry_size(size_t key_len, size_t value_len)
{
	return 1 + 2 * WEFT__KV_HDR_MAX + key_len + value_len;
}

/* visit keeps e if the scan has room for it, else notes it as the key to
 * resume from and stops. */
static bool
visit(struct weft__kv_entry *e, void *arg)
{
	struct scan *sc = arg;
	struct weft__kv_blob *b;
	size_t size;

	if (sc->got == sc->want || ++sc->visited > SCAN_MAX_VISIT) {
		sc->next = e;
		return false;
	}
	if ((b = weft__kv_store_entry_value(sc->store, e, NULL)) == NULL)
		return true; /* a tombstone */
	size = entry_size(e->key_len, b->len);
	/* The first entry always goes, whatever its size. */
	if (sc->got > 0 && sc->bytes + size > WEFT_KV_SCAN_MAX_BYTES) {
		weft__kv_blob_unref(b);
		sc->next = e;
		return false;
	}
	sc->hits[sc->got++] = (struct scan_hit){e, b};
	sc->bytes += size;
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

/* encode writes [[[key, value]...], next] into out, which holds at least
 * sc->bytes + 2 * WEFT__KV_HDR_MAX + WEFT_KV_MAX_KEY bytes. */
static size_t
encode(const struct scan *sc, uint8_t *out)
{
	size_t n = weft__kv_enc_array(out, 2);

	n += weft__kv_enc_array(out + n, sc->got);
	for (uint32_t i = 0; i < sc->got; i++) {
		const struct scan_hit *h = &sc->hits[i];

		n += weft__kv_enc_array(out + n, 2);
		n += put_bin(out + n, h->e->key, h->e->key_len);
		n += put_bin(out + n, h->b->data, h->b->len);
	}
	if (sc->next == NULL)
		out[n++] = MSGPACK_NIL;
	else
		n += put_bin(out + n, sc->next->key, sc->next->key_len);
	return n;
}

/* The answer is encoded straight into the memory of the evbuffer it
 * leaves in, which the response takes over: its bytes are written once,
 * here, and their chains move on to the socket (chunks and frames move
 * them too), where a copy would have been made twice more. */
static void
respond(weft_msvc_msg *msg, const struct scan *sc)
{
	size_t cap = sc->bytes + 2 * WEFT__KV_HDR_MAX + WEFT_KV_MAX_KEY + 1;
	struct evbuffer *out = evbuffer_new();
	struct evbuffer_iovec v;
	int rv;

	if (out == NULL || evbuffer_reserve_space(out, cap, &v, 1) != 1) {
		if (out != NULL)
			evbuffer_free(out);
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	v.iov_len = encode(sc, v.iov_base);
	if (evbuffer_commit_space(out, &v, 1) != 0)
		rv =
		    weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
	else
		rv = weft_msvc_respond_buf(msg, out);
	if (rv == WEFT_ETOOBIG)
		weft_msvc_respond_error(msg, WEFT_ETOOBIG, "entry too large");
	evbuffer_free(out);
}

void
weft__kv_on_scan(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	weft_kv *kv = arg;
	struct weft__kv_req req;
	struct scan sc = {.store = &kv->store};

	(void)svc;
	if (weft__kv_refuse_read(kv, msg))
		return;
	if (weft__kv_decode_scan(weft_msvc_msg_data(msg),
	                         weft_msvc_msg_len(msg), &req, &sc.want) != 0) {
		weft__kv_count(&kv->st.bad_requests);
		weft_msvc_respond_error(msg, WEFT_EINVAL, "malformed scan");
		return;
	}
	weft__kv_count(&kv->st.scans);
	if ((sc.hits = calloc(sc.want, sizeof(*sc.hits))) == NULL) {
		weft_msvc_respond_error(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	weft__kv_index_walk(&kv->store.index, req.key, req.key_len, visit, &sc);
	respond(msg, &sc);
	for (uint32_t i = 0; i < sc.got; i++)
		weft__kv_blob_unref(sc.hits[i].b);
	free(sc.hits);
}

/* ---- Payloads ------------------------------------------------------------ */

int
weft__kv_decode_scan(const void *p, size_t n, struct weft__kv_req *out,
                     uint32_t *count)
{
	struct weft__kv_reader r = {p, (const uint8_t *)p + n};
	uint32_t fields;
	uint64_t want;

	memset(out, 0, sizeof(*out));
	if (p == NULL || weft__kv_read_array(&r, &fields) != 0 || fields != 2 ||
	    weft__kv_read_bin(&r, &out->key, &out->key_len) != 0 ||
	    out->key_len > WEFT_KV_MAX_KEY ||
	    weft__kv_read_uint(&r, &want) != 0 || want == 0 ||
	    want > WEFT_KV_MAX_SCAN || r.p != r.end)
		return WEFT_EINVAL;
	*count = (uint32_t)want;
	return 0;
}

int
weft_kv_client_scan(weft_msvc *svc, weft_msvc_peer *node, const void *start,
                    size_t start_len, uint32_t count,
                    const weft_msvc_call_opts *opts, weft_msvc_reply_cb cb,
                    void *arg)
{
	uint8_t buf[3 * WEFT__KV_HDR_MAX + WEFT_KV_MAX_KEY];
	size_t n;

	if (start_len > WEFT_KV_MAX_KEY || (start == NULL && start_len > 0) ||
	    count == 0 || count > WEFT_KV_MAX_SCAN)
		return WEFT_EINVAL;
	n = weft__kv_enc_array(buf, 2);
	n += put_bin(buf + n, start, start_len);
	n += weft__kv_enc_uint(buf + n, count);
	return weft_msvc_request(svc, node, WEFT_KV_VERB_SCAN, buf, n, opts, cb,
	                         arg);
}

/* read_entry reads one [key, value] of an answer. */
static int
read_entry(struct weft__kv_reader *r, struct weft__kv_req *e)
{
	uint32_t fields;

	if (weft__kv_read_array(r, &fields) != 0 || fields != 2 ||
	    weft__kv_read_bin(r, &e->key, &e->key_len) != 0 ||
	    e->key_len == 0 || e->key_len > WEFT_KV_MAX_KEY ||
	    weft__kv_read_bin(r, &e->value, &e->value_len) != 0)
		return WEFT_EINVAL;
	return 0;
}

/* read_next reads the answer's resume key, or nil. */
static int
read_next(struct weft__kv_reader *r, const void **next, size_t *next_len)
{
	const uint8_t *key = NULL;
	size_t len = 0;

	if (r->p < r->end && *r->p == MSGPACK_NIL)
		r->p++;
	else if (weft__kv_read_bin(r, &key, &len) != 0 || len == 0 ||
	         len > WEFT_KV_MAX_KEY)
		return WEFT_EINVAL;
	if (next != NULL)
		*next = key;
	if (next_len != NULL)
		*next_len = len;
	return r->p == r->end ? 0 : WEFT_EINVAL;
}

/* check reads a whole answer without a callback: entries, then next. */
static int
check(const void *data, size_t len, uint32_t *entries, const void **next,
      size_t *next_len)
{
	struct weft__kv_reader r = {data, (const uint8_t *)data + len};
	struct weft__kv_req e;
	uint32_t fields;

	if (data == NULL || weft__kv_read_array(&r, &fields) != 0 ||
	    fields != 2 || weft__kv_read_array(&r, entries) != 0 ||
	    *entries > WEFT_KV_MAX_SCAN)
		return WEFT_EINVAL;
	for (uint32_t i = 0; i < *entries; i++)
		if (read_entry(&r, &e) != 0)
			return WEFT_EINVAL;
	return read_next(&r, next, next_len);
}

int
weft_kv_scan_parse(const void *data, size_t len, weft_kv_scan_cb cb, void *arg,
                   const void **next, size_t *next_len)
{
	struct weft__kv_reader r = {data, (const uint8_t *)data + len};
	struct weft__kv_req e;
	uint32_t fields, entries;

	if (check(data, len, &entries, next, next_len) != 0)
		return WEFT_EINVAL;
	weft__kv_read_array(&r, &fields);
	weft__kv_read_array(&r, &entries);
	for (uint32_t i = 0; cb != NULL && i < entries; i++) {
		read_entry(&r, &e);
		cb(e.key, e.key_len, e.value, e.value_len, arg);
	}
	return (int)entries;
}
