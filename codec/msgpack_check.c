/* SPDX-License-Identifier: MIT */
/*
 * msgpack_check.c: a single pass over msgpack bytes that proves they hold
 * one object that msgpack-c can unpack within a memory bound, before
 * msgpack-c reserves anything (weft_msgpack_check).
 */
#include <stdint.h>

#include <msgpack.h>

#include <weft/msgpack_codec.h>

#include "codec_int.h"

/* What one item's header says. */
struct item {
	size_t header;    /* bytes of the header itself */
	uint64_t payload; /* bytes that follow the header (scalars) */
	uint64_t count;   /* items inside (containers: 2 per map pair) */
	bool container;
	bool map;
};

/* The header at p gives the length of what follows in n bytes after the
 * first (a str/bin/ext length, or a container count). */
static int
sized(struct item *it, const unsigned char *p, size_t avail, size_t n,
      size_t extra)
{
	if (avail < 1 + n + extra)
		return WEFT_EPROTO;
	it->header = 1 + n + extra;
	it->payload = weft__load_be(p + 1, n);
	return 0;
}

static int
container(struct item *it, const unsigned char *p, size_t avail, size_t n,
          bool map)
{
	if (n > 0 && sized(it, p, avail, n, 0) != 0)
		return WEFT_EPROTO;
	if (n == 0) {
		it->header = 1;
		it->payload = p[0] & 0x0f;
	}
	it->container = true;
	it->map = map;
	it->count = map ? 2 * it->payload : it->payload;
	it->payload = 0;
	return 0;
}

/* Reads the header of the item at p (avail >= 1 bytes there). */
static int
read_header(struct item *it, const unsigned char *p, size_t avail)
{
	unsigned b = p[0];

	*it = (struct item){.header = 1};
	if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
		return 0;
	if (b <= 0x8f)
		return container(it, p, avail, 0, true);
	if (b <= 0x9f)
		return container(it, p, avail, 0, false);
	if (b <= 0xbf) {
		it->payload = b & 0x1f;
		return 0;
	}
	switch (b) {
	case 0xc4:
	case 0xc5:
	case 0xc6: /* bin 8, 16, 32 */
		return sized(it, p, avail, (size_t)1 << (b - 0xc4), 0);
	case 0xc7:
	case 0xc8:
	case 0xc9: /* ext 8, 16, 32: length, type */
		return sized(it, p, avail, (size_t)1 << (b - 0xc7), 1);
	case 0xca:
	case 0xcb: /* float 32, 64 */
		it->payload = b == 0xca ? 4 : 8;
		return 0;
	case 0xcc:
	case 0xcd:
	case 0xce:
	case 0xcf: /* uint 8 to 64 */
		it->payload = (uint64_t)1 << (b - 0xcc);
		return 0;
	case 0xd0:
	case 0xd1:
	case 0xd2:
	case 0xd3: /* int 8 to 64 */
		it->payload = (uint64_t)1 << (b - 0xd0);
		return 0;
	case 0xd4:
	case 0xd5:
	case 0xd6:
	case 0xd7:
	case 0xd8: /* fixext */
		it->payload = 1 + ((uint64_t)1 << (b - 0xd4));
		return 0;
	case 0xd9:
	case 0xda:
	case 0xdb: /* str 8, 16, 32 */
		return sized(it, p, avail, (size_t)1 << (b - 0xd9), 0);
	case 0xdc:
	case 0xdd: /* array 16, 32 */
		return container(it, p, avail, (size_t)2 << (b - 0xdc), false);
	case 0xde:
	case 0xdf: /* map 16, 32 */
		return container(it, p, avail, (size_t)2 << (b - 0xde), true);
	default: /* 0xc1, never used */
		return WEFT_EPROTO;
	}
}

static int
reject(weft__msgpack_census *census, const char *why)
{
	census->why = why;
	return WEFT_EPROTO;
}

/*
 * What msgpack-c reserves for a container's elements the moment it reads
 * its header: one msgpack_object per array element, one msgpack_object_kv
 * per map pair (24 and 48 bytes on LP64). Strings, binaries and
 * extensions point into the input and cost nothing more.
 */
static uint64_t
container_cost(const struct item *it)
{
	return it->map ? it->count / 2 * sizeof(msgpack_object_kv)
	               : it->count * sizeof(msgpack_object);
}

/*
 * Items are counted, not recursed into: open[] holds how many items each
 * open container has yet to start, and outstanding how many items are
 * still expected in all. Each item takes at least one byte, so an item
 * whose size or count does not fit in the bytes left, after one byte for
 * each other outstanding item, cannot be valid. Every container's cost is
 * added up as its header is read, so an input whose objects would take
 * more than WEFT_MSGPACK_OBJECT_BYTES(len) is refused before msgpack-c sees it:
 * one element a byte is valid msgpack, but 24 bytes of objects for each.
 */
int
weft__msgpack_walk(const void *data, size_t len, unsigned max_depth,
                   weft__msgpack_census *census)
{
	const unsigned char *p = data;
	uint64_t open[WEFT_MSGPACK_MAX_DEPTH];
	uint64_t outstanding = 1, room, cost = 0,
	         bound = WEFT_MSGPACK_OBJECT_BYTES(len);
	unsigned depth = 0;
	struct item it;

	if (max_depth == 0 || max_depth > WEFT_MSGPACK_MAX_DEPTH)
		max_depth = WEFT_MSGPACK_MAX_DEPTH;
	*census = (weft__msgpack_census){0};
	if (p == NULL && len > 0)
		return reject(census, "no data");
	while (outstanding > 0) {
		if (len < outstanding)
			return reject(census, "it ends inside an object");
		if (read_header(&it, p, len) != 0)
			return reject(census, "an invalid type byte or header");
		/* Bytes this item may use: all but one per other item. */
		room = len - (outstanding - 1);
		if (it.header > room || it.payload > room - it.header)
			return reject(census, "a length above the bytes left");
		if (it.count > room - it.header) {
			census->overclaim = true;
			return reject(census, "a container claims more "
			                      "elements than bytes left");
		}
		p += it.header + it.payload;
		len -= it.header + it.payload;
		outstanding = outstanding - 1 + it.count;
		if (depth > 0)
			open[depth - 1]--;
		if (it.container) {
			/* msgpack-c checks its stack before it looks at the
			 * count, so an empty container counts too. */
			if (depth >= max_depth)
				return reject(census, "containers nested too "
				                      "deep");
			cost += container_cost(&it);
			if (cost > bound) {
				census->overclaim = true;
				return reject(census, "its objects would take "
				                      "too much memory");
			}
			if (it.map)
				census->map_pairs += it.count / 2;
			else
				census->array_elems += it.count;
			if (it.count > 0)
				open[depth++] = it.count;
		}
		/* A complete item may complete its parents too. */
		while (depth > 0 && open[depth - 1] == 0)
			depth--;
	}
	return len == 0 ? 0 : reject(census, "bytes after the object");
}

int
weft_msgpack_check(const void *data, size_t len, unsigned max_depth)
{
	weft__msgpack_census census;

	return weft__msgpack_walk(data, len, max_depth, &census);
}
