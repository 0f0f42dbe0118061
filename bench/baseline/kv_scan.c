/* SPDX-License-Identifier: MIT */
/*
 * kv_scan.c: the scan verb of <weft/kv.h> on the baseline: the handler
 * walks the ordered index on the reader thread that read the request,
 * takes each live value under its shard's lock, and packs the answer with
 * msgpack-c: up to count entries, stopping before one that would take the
 * answer past WEFT_KV_SCAN_MAX_BYTES (the first always goes) or after
 * 65,536 keys examined, and the key to resume from (nil at the end).
 */
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kv.h>
#include <weft/msgpack_codec.h>

#include "kv_int.h"

#define SCAN_MAX_VISIT 65536u

typedef struct scan_hit {
	const wbase_entry *e;
	wbase_blob *b;
} scan_hit;

typedef struct scan {
	wbase_store *store;
	uint32_t want, got, visited;
	size_t bytes;
	scan_hit *hits;
	const wbase_entry *next; /* where to resume; NULL: the end */
} scan;

static bool
visit(const wbase_entry *e, void *arg)
{
	scan *sc = arg;
	wbase_blob *b;
	size_t size;

	if (sc->got == sc->want || ++sc->visited > SCAN_MAX_VISIT) {
		sc->next = e;
		return false;
	}
	if ((b = wbase__store_entry_value(sc->store, e)) == NULL)
		return true;
	size = 11 + e->key_len + b->len; /* headers at most 1 + 5 + 5 */
	if (sc->got > 0 && sc->bytes + size > WEFT_KV_SCAN_MAX_BYTES) {
		wbase__blob_unref(b);
		sc->next = e;
		return false;
	}
	sc->hits[sc->got++] = (scan_hit){e, b};
	sc->bytes += size;
	return true;
}

/* decode reads [start: bin, count: uint]; false if malformed. */
static bool
decode(const void *p, size_t n, const uint8_t **start, size_t *start_len,
       uint32_t *count)
{
	msgpack_unpacked u;
	const msgpack_object *a;
	size_t off = 0;
	bool ok;

	msgpack_unpacked_init(&u);
	ok = p != NULL && n > 0 && weft_msgpack_check(p, n, 1) == 0 &&
	     msgpack_unpack_next(&u, p, n, &off) == MSGPACK_UNPACK_SUCCESS &&
	     off == n && u.data.type == MSGPACK_OBJECT_ARRAY &&
	     u.data.via.array.size == 2;
	a = ok ? u.data.via.array.ptr : NULL;
	ok = ok && a[0].type == MSGPACK_OBJECT_BIN &&
	     a[0].via.bin.size <= WEFT_KV_MAX_KEY &&
	     a[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
	     a[1].via.u64 >= 1 && a[1].via.u64 <= WEFT_KV_MAX_SCAN;
	if (ok) {
		*start = (const uint8_t *)a[0].via.bin.ptr;
		*start_len = a[0].via.bin.size;
		*count = (uint32_t)a[1].via.u64;
	}
	msgpack_unpacked_destroy(&u);
	return ok;
}

static int
pack_bin(msgpack_packer *pk, const void *p, size_t n)
{
	return msgpack_pack_bin(pk, n) || msgpack_pack_bin_body(pk, p, n);
}

/* pack packs [[[key, value]...], next] into sb; 0 or WEFT_ENOMEM. */
static int
pack(msgpack_sbuffer *sb, const scan *sc)
{
	msgpack_packer pk;
	int rv;

	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	rv = msgpack_pack_array(&pk, 2) || msgpack_pack_array(&pk, sc->got);
	for (uint32_t i = 0; rv == 0 && i < sc->got; i++)
		rv =
		    msgpack_pack_array(&pk, 2) ||
		    pack_bin(&pk, sc->hits[i].e->key, sc->hits[i].e->key_len) ||
		    pack_bin(&pk, sc->hits[i].b->data, sc->hits[i].b->len);
	if (rv == 0)
		rv = sc->next == NULL
		         ? msgpack_pack_nil(&pk)
		         : pack_bin(&pk, sc->next->key, sc->next->key_len);
	return rv ? WEFT_ENOMEM : 0;
}

void
wbase__kv_on_scan(wbase_node *node, wbase_msg *msg, void *arg)
{
	wbase_kv *kv = arg;
	scan sc = {.store = &kv->store};
	const uint8_t *start;
	msgpack_sbuffer sb;
	size_t start_len;

	(void)node;
	if (!decode(wbase_msg_data(msg), wbase_msg_len(msg), &start, &start_len,
	            &sc.want)) {
		atomic_fetch_add(&kv->bad_requests, 1);
		wbase_respond_error(msg, WEFT_EINVAL, "malformed scan");
		return;
	}
	atomic_fetch_add(&kv->scans, 1);
	if ((sc.hits = calloc(sc.want, sizeof(*sc.hits))) == NULL) {
		wbase_respond_error(msg, WEFT_EREMOTE, "out of memory");
		return;
	}
	wbase__index_walk(&kv->store.index, start, start_len, visit, &sc);
	msgpack_sbuffer_init(&sb);
	if (pack(&sb, &sc) == 0)
		wbase_respond(msg, sb.data, sb.size);
	else
		wbase_respond_error(msg, WEFT_EREMOTE, "out of memory");
	msgpack_sbuffer_destroy(&sb);
	for (uint32_t i = 0; i < sc.got; i++)
		wbase__blob_unref(sc.hits[i].b);
	free(sc.hits);
}
