/* SPDX-License-Identifier: MIT */
/*
 * fuzz_msgpack.c: weft_msgpack_check against msgpack-c itself.
 *
 * The input is msgpack bytes. What the check accepts must decode, whole,
 * and pack back to bytes the check accepts and that decode to an equal
 * object. What it rejects, msgpack-c must not unpack whole either; we only
 * ask msgpack-c when no container header in the input claims more elements
 * than bytes follow it, since msgpack-c would reserve memory for them all.
 * Decoding must stay within the allocation bound of fuzz.h.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <msgpack.h>

#include <weft/msgpack_codec.h>

#include "codec_int.h"
#include "fuzz.h"

/* Packs obj into a new evbuffer. */
static struct evbuffer *
pack(const msgpack_object *obj)
{
	struct evbuffer *b = evbuffer_new();
	msgpack_packer pk;

	if (b == NULL || weft_msgpack_packer_init(&pk, b) != 0 ||
	    msgpack_pack_object(&pk, *obj) != 0)
		abort();
	return b;
}

/* Packing what we decoded gives bytes the check accepts, and that decode
 * and pack again to the same bytes. (Not the input's bytes: msgpack has
 * more than one encoding of a value. Not msgpack_object_equal: NaN.) The
 * check's object budget grows with the input's size, so a repack shorter
 * than the input (its encodings are the smallest) may fairly exceed it:
 * only then may the check refuse it. */
static void
repack_and_compare(const msgpack_object *obj, size_t in_len)
{
	struct evbuffer *b1 = pack(obj), *b2;
	size_t len = evbuffer_get_length(b1);
	const void *bytes = evbuffer_pullup(b1, -1);
	weft_msgpack_msg *again;

	if (weft_msgpack_check(bytes, len, 0) != 0) {
		if (len >= in_len)
			abort();
		evbuffer_free(b1);
		return;
	}
	if (weft_msgpack_decode(bytes, len, 0, &again) != 0)
		abort();
	b2 = pack(weft_msgpack_msg_object(again));
	if (evbuffer_get_length(b2) != len ||
	    memcmp(evbuffer_pullup(b2, -1), bytes, len) != 0)
		abort();
	weft_msgpack_msg_free(again);
	evbuffer_free(b1);
	evbuffer_free(b2);
}

/* The bytes of the header of the item at p (avail bytes there), 0 when it
 * is incomplete or invalid; *count is a container's element count (2 per
 * map pair) and *skip the payload bytes that follow a scalar's header. */
static size_t
header(const uint8_t *p, size_t avail, uint64_t *count, uint64_t *skip)
{
	static const uint8_t fixed[32] = {
	    [0x00] = 0, [0x02] = 0, [0x03] = 0, [0x0a] = 4, [0x0b] = 8,
	    [0x0c] = 1, [0x0d] = 2, [0x0e] = 4, [0x0f] = 8, [0x10] = 1,
	    [0x11] = 2, [0x12] = 4, [0x13] = 8, [0x14] = 2, [0x15] = 3,
	    [0x16] = 5, [0x17] = 9, [0x18] = 17};
	uint8_t b = p[0];
	size_t n = 0, i;
	uint64_t v = 0;

	*count = *skip = 0;
	if (b <= 0x7f || b >= 0xe0)
		return 1;
	if (b <= 0x9f) {
		*count = (uint64_t)(b & 0x0f) * (b <= 0x8f ? 2 : 1);
		return 1;
	}
	if (b <= 0xbf) {
		*skip = b & 0x1f;
		return 1;
	}
	if (b == 0xc1)
		return 0;
	if ((b >= 0xc4 && b <= 0xc9) || b >= 0xd9) {
		/* bin, ext, str, array, map: a length or count follows. */
		n = b <= 0xc6   ? (size_t)1 << (b - 0xc4)
		    : b <= 0xc9 ? (size_t)1 << (b - 0xc7)
		    : b <= 0xdb ? (size_t)1 << (b - 0xd9)
		                : (size_t)2 << ((b - 0xdc) & 1);
		if (avail < 1 + n)
			return 0;
		for (i = 0; i < n; i++)
			v = v << 8 | p[1 + i];
		if (b >= 0xdc)
			*count = b >= 0xde ? 2 * v : v;
		else
			*skip = v + (b >= 0xc7 && b <= 0xc9 ? 1 : 0);
		return 1 + n;
	}
	*skip = fixed[b - 0xc0];
	return 1;
}

/* Whether msgpack-c, reading the items in order, could meet a container
 * that claims more elements than bytes follow (it reserves for them all
 * at once). Scans past where msgpack-c would stop, to be safe. */
static bool
could_overreserve(const uint8_t *p, size_t len)
{
	uint64_t count, skip;
	size_t h;

	while (len > 0 && (h = header(p, len, &count, &skip)) != 0) {
		if (count > len - h)
			return true;
		if (skip > len - h)
			return false;
		p += h + skip;
		len -= h + skip;
	}
	return false;
}

/* What msgpack-c says: true when it unpacks all size bytes. */
static bool
msgpack_c_accepts(const uint8_t *data, size_t size)
{
	msgpack_zone *z = msgpack_zone_new(1024);
	msgpack_object obj;
	size_t off = 0;
	bool whole;

	if (z == NULL)
		abort();
	whole = msgpack_unpack((const char *)data, size, &off, z, &obj) ==
	            MSGPACK_UNPACK_SUCCESS &&
	        off == size;
	msgpack_zone_free(z);
	return whole;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	weft__msgpack_census census;
	weft_msgpack_msg *m;
	int rv;

	fuzz_alloc_begin();
	rv = weft_msgpack_decode(data, size, 0, &m);
	fuzz_alloc_end(size, "weft_msgpack_decode");
	if (weft__msgpack_walk(data, size, 0, &census) != 0) {
		if (rv != WEFT_EPROTO)
			abort();
		/* Refused for its cost, not its validity: msgpack-c may
		 * well accept it (and reserve that much). */
		if (census.overclaim)
			return 0;
		if (size > 0 && !could_overreserve(data, size) &&
		    msgpack_c_accepts(data, size))
			abort();
		return 0;
	}
	if (rv != 0 || !msgpack_c_accepts(data, size))
		abort();
	repack_and_compare(weft_msgpack_msg_object(m), size);
	weft_msgpack_msg_free(m);
	return 0;
}
