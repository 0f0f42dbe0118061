/* SPDX-License-Identifier: MIT */
/* mp.c: the bounded msgpack cursor (weft/mp.h). */
#include <string.h>

#include <weft/mp.h>

void
weft_mp_reader_init(weft_mp_reader *r, const void *data, size_t len)
{
	r->p = data;
	r->end = data != NULL ? r->p + len : NULL;
	r->status = data != NULL || len == 0 ? 0 : WEFT_EPROTO;
}

size_t
weft_mp_reader_left(const weft_mp_reader *r)
{
	return (size_t)(r->end - r->p);
}

int
weft_mp_reader_end(const weft_mp_reader *r)
{
	if (r->status != 0)
		return r->status;
	return r->p == r->end ? 0 : WEFT_EPROTO;
}

static int
bad(weft_mp_reader *r)
{
	r->status = WEFT_EPROTO;
	return WEFT_EPROTO;
}

/* Takes the type byte; false when the reader failed or is empty. */
static bool
take_tag(weft_mp_reader *r, unsigned char *tag)
{
	if (r->status != 0 || r->p == r->end)
		return false;
	*tag = *r->p++;
	return true;
}

/* Takes n bytes as a big-endian number; false when fewer are left. */
static bool
take_be(weft_mp_reader *r, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (weft_mp_reader_left(r) < n)
		return false;
	while (n-- > 0)
		v = v << 8 | *r->p++;
	*out = v;
	return true;
}

int
weft_mp_read_uint(weft_mp_reader *r, uint64_t max, uint64_t *out)
{
	unsigned char t;
	uint64_t v;
	size_t n;

	if (!take_tag(r, &t))
		return bad(r);
	if (t <= 0x7f) {
		v = t;
	} else {
		if (t >= 0xcc && t <= 0xcf)
			n = (size_t)1 << (t - 0xcc);
		else if (t >= 0xd0 && t <= 0xd3)
			n = (size_t)1 << (t - 0xd0);
		else
			return bad(r);
		if (!take_be(r, n, &v))
			return bad(r);
		/* A signed integer must be non-negative. */
		if (t >= 0xd0 && (v >> (n * 8 - 1)) != 0)
			return bad(r);
	}
	if (v > max)
		return bad(r);
	*out = v;
	return 0;
}

int
weft_mp_read_array(weft_mp_reader *r, uint32_t *count)
{
	unsigned char t;
	uint64_t n;

	if (!take_tag(r, &t))
		return bad(r);
	if (t >= 0x90 && t <= 0x9f)
		n = t & 0x0f;
	else if ((t != 0xdc && t != 0xdd) || !take_be(r, t == 0xdc ? 2 : 4, &n))
		return bad(r);
	*count = (uint32_t)n;
	return 0;
}

int
weft_mp_read_map(weft_mp_reader *r, uint32_t *count)
{
	unsigned char t;
	uint64_t n;

	if (!take_tag(r, &t))
		return bad(r);
	if (t >= 0x80 && t <= 0x8f)
		n = t & 0x0f;
	else if ((t != 0xde && t != 0xdf) || !take_be(r, t == 0xde ? 2 : 4, &n))
		return bad(r);
	*count = (uint32_t)n;
	return 0;
}

/* Takes len bytes of a string or bin body. */
static int
take_body(weft_mp_reader *r, uint64_t len, const void **data, size_t *out)
{
	if (weft_mp_reader_left(r) < len)
		return bad(r);
	*data = r->p;
	*out = (size_t)len;
	r->p += len;
	return 0;
}

int
weft_mp_read_str(weft_mp_reader *r, const char **data, size_t *len)
{
	unsigned char t;
	uint64_t n;

	if (!take_tag(r, &t))
		return bad(r);
	if (t >= 0xa0 && t <= 0xbf)
		n = t & 0x1f;
	else if (t < 0xd9 || t > 0xdb ||
	         !take_be(r, (size_t)1 << (t - 0xd9), &n))
		return bad(r);
	return take_body(r, n, (const void **)data, len);
}

int
weft_mp_read_bin_header(weft_mp_reader *r, uint32_t *len)
{
	unsigned char t;
	uint64_t n;

	if (!take_tag(r, &t) || t < 0xc4 || t > 0xc6 ||
	    !take_be(r, (size_t)1 << (t - 0xc4), &n))
		return bad(r);
	*len = (uint32_t)n;
	return 0;
}

int
weft_mp_read_bin(weft_mp_reader *r, const void **data, size_t *len)
{
	uint32_t n;

	if (weft_mp_read_bin_header(r, &n) != 0)
		return WEFT_EPROTO;
	return take_body(r, n, data, len);
}

int
weft_mp_read_nil(weft_mp_reader *r)
{
	unsigned char t;

	return take_tag(r, &t) && t == 0xc0 ? 0 : bad(r);
}

int
weft_mp_read_bool(weft_mp_reader *r, bool *out)
{
	unsigned char t;

	if (!take_tag(r, &t) || (t != 0xc2 && t != 0xc3))
		return bad(r);
	*out = t == 0xc3;
	return 0;
}

/* The fixed body sizes of types 0xc0..0xdf: floats, integers, and the
 * fixexts with their type byte. Others have none, or say theirs. */
static const unsigned char fixed_body[32] = {
    [0x0a] = 4, [0x0b] = 8,                         /* float 32, 64 */
    [0x0c] = 1, [0x0d] = 2, [0x0e] = 4, [0x0f] = 8, /* uint */
    [0x10] = 1, [0x11] = 2, [0x12] = 4, [0x13] = 8, /* int */
    [0x14] = 2, [0x15] = 3, [0x16] = 5, [0x17] = 9, [0x18] = 17, /* fixext */
};

/* The size of what follows type byte t, for a type that is not a
 * container: false when its length bytes are missing. */
static bool
body_size(weft_mp_reader *r, unsigned char t, uint64_t *n)
{
	if (t <= 0x7f || t >= 0xe0)
		return *n = 0, true;
	if (t >= 0xa0 && t <= 0xbf)
		return *n = t & 0x1f, true;
	if (t >= 0xc4 && t <= 0xc6) /* bin */
		return take_be(r, (size_t)1 << (t - 0xc4), n);
	if (t >= 0xd9 && t <= 0xdb) /* str */
		return take_be(r, (size_t)1 << (t - 0xd9), n);
	if (t >= 0xc7 && t <= 0xc9) { /* ext: length, then its type byte */
		if (!take_be(r, (size_t)1 << (t - 0xc7), n))
			return false;
		return *n += 1, true;
	}
	*n = fixed_body[t - 0xc0];
	return true;
}

int
weft_mp_skip(weft_mp_reader *r, unsigned max_containers)
{
	uint64_t todo = 1, n;
	unsigned char t;

	/* todo counts the objects still to skip, so nesting needs no
	 * recursion; max_containers bounds how many may open, and
	 * every container's elements must be in the input, so a skip is
	 * linear in the bytes there are. */
	while (todo > 0) {
		todo--;
		if (!take_tag(r, &t) || t == 0xc1)
			return bad(r);
		if ((t >= 0x80 && t <= 0x9f) || (t >= 0xdc && t <= 0xdf)) {
			if (t <= 0x9f)
				n = t & 0x0f;
			else if (!take_be(r, (t & 1) ? 4 : 2, &n))
				return bad(r);
			if (max_containers == 0)
				return bad(r);
			max_containers--;
			if (t <= 0x8f || t >= 0xde)
				n *= 2;
			/* Each element takes at least a byte. */
			if (n > weft_mp_reader_left(r))
				return bad(r);
			todo += n;
			continue;
		}
		if (!body_size(r, t, &n) || weft_mp_reader_left(r) < n)
			return bad(r);
		r->p += n;
	}
	return 0;
}

/* ---- The writer --------------------------------------------------------- */

void
weft_mp_writer_init(weft_mp_writer *w, void *buf, size_t cap)
{
	w->start = w->p = buf;
	w->end = buf != NULL ? w->p + cap : NULL;
	w->status = 0;
}

size_t
weft_mp_writer_length(const weft_mp_writer *w)
{
	return (size_t)(w->p - w->start);
}

int
weft_mp_writer_status(const weft_mp_writer *w)
{
	return w->status;
}

/* Reserves n bytes; NULL (and the writer failed) when they do not fit. */
static unsigned char *
room(weft_mp_writer *w, size_t n)
{
	unsigned char *at = w->p;

	if (w->status != 0 || (size_t)(w->end - w->p) < n) {
		w->status = WEFT_ETOOBIG;
		return NULL;
	}
	w->p += n;
	return at;
}

/* Writes tag and v in n big-endian bytes. */
static int
put_tagged(weft_mp_writer *w, unsigned char tag, uint64_t v, size_t n)
{
	unsigned char *p = room(w, 1 + n);

	if (p == NULL)
		return WEFT_ETOOBIG;
	*p++ = tag;
	while (n-- > 0)
		*p++ = (unsigned char)(v >> (8 * n));
	return 0;
}

int
weft_mp_write_uint(weft_mp_writer *w, uint64_t v)
{
	if (v <= 0x7f)
		return put_tagged(w, (unsigned char)v, 0, 0);
	if (v <= 0xff)
		return put_tagged(w, 0xcc, v, 1);
	if (v <= 0xffff)
		return put_tagged(w, 0xcd, v, 2);
	if (v <= 0xffffffffu)
		return put_tagged(w, 0xce, v, 4);
	return put_tagged(w, 0xcf, v, 8);
}

int
weft_mp_write_array(weft_mp_writer *w, uint32_t count)
{
	if (count <= 15)
		return put_tagged(w, (unsigned char)(0x90 | count), 0, 0);
	if (count <= 0xffff)
		return put_tagged(w, 0xdc, count, 2);
	return put_tagged(w, 0xdd, count, 4);
}

int
weft_mp_write_map(weft_mp_writer *w, uint32_t count)
{
	if (count <= 15)
		return put_tagged(w, (unsigned char)(0x80 | count), 0, 0);
	if (count <= 0xffff)
		return put_tagged(w, 0xde, count, 2);
	return put_tagged(w, 0xdf, count, 4);
}

int
weft_mp_write_str_header(weft_mp_writer *w, uint32_t len)
{
	if (len <= 31)
		return put_tagged(w, (unsigned char)(0xa0 | len), 0, 0);
	if (len <= 0xff)
		return put_tagged(w, 0xd9, len, 1);
	if (len <= 0xffff)
		return put_tagged(w, 0xda, len, 2);
	return put_tagged(w, 0xdb, len, 4);
}

int
weft_mp_write_bin_header(weft_mp_writer *w, uint32_t len)
{
	if (len <= 0xff)
		return put_tagged(w, 0xc4, len, 1);
	if (len <= 0xffff)
		return put_tagged(w, 0xc5, len, 2);
	return put_tagged(w, 0xc6, len, 4);
}

int
weft_mp_write_raw(weft_mp_writer *w, const void *data, size_t len)
{
	unsigned char *p = room(w, len);

	if (p == NULL)
		return WEFT_ETOOBIG;
	if (len > 0)
		memcpy(p, data, len);
	return 0;
}

/* A header and its body, both or neither. */
static int
write_sized(weft_mp_writer *w, bool str, const void *data, size_t len)
{
	unsigned char *mark = w->p;

	if (len > UINT32_MAX) {
		w->status = WEFT_ETOOBIG;
		return WEFT_ETOOBIG;
	}
	if ((str ? weft_mp_write_str_header(w, (uint32_t)len)
	         : weft_mp_write_bin_header(w, (uint32_t)len)) != 0)
		return WEFT_ETOOBIG;
	if (weft_mp_write_raw(w, data, len) != 0) {
		w->p = mark;
		return WEFT_ETOOBIG;
	}
	return 0;
}

int
weft_mp_write_str(weft_mp_writer *w, const char *data, size_t len)
{
	return write_sized(w, true, data, len);
}

int
weft_mp_write_bin(weft_mp_writer *w, const void *data, size_t len)
{
	return write_sized(w, false, data, len);
}

int
weft_mp_write_nil(weft_mp_writer *w)
{
	return put_tagged(w, 0xc0, 0, 0);
}

int
weft_mp_write_bool(weft_mp_writer *w, bool v)
{
	return put_tagged(w, v ? 0xc3 : 0xc2, 0, 0);
}
