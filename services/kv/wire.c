/* SPDX-License-Identifier: MIT */
/*
 * wire.c: the key-value payloads (see <weft/kv.h>): a few msgpack headers
 * written by hand, and a bounded reader that accepts every msgpack
 * encoding of the types it expects and nothing else.
 */
#include <string.h>

#include "kv_int.h"

static void
put_be(uint8_t *out, uint64_t v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		out[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

size_t
weft__kv_enc_array(uint8_t *out, uint32_t n)
{
	if (n < 16) {
		out[0] = (uint8_t)(0x90 | n);
		return 1;
	}
	out[0] = 0xdd;
	put_be(out + 1, n, 4);
	return 5;
}

size_t
weft__kv_enc_uint(uint8_t *out, uint64_t v)
{
	if (v < 128) {
		out[0] = (uint8_t)v;
		return 1;
	}
	out[0] = 0xcf;
	put_be(out + 1, v, 8);
	return 9;
}

size_t
weft__kv_enc_bin(uint8_t *out, uint32_t len)
{
	if (len < 256) {
		out[0] = 0xc4;
		out[1] = (uint8_t)len;
		return 2;
	}
	out[0] = 0xc6;
	put_be(out + 1, len, 4);
	return 5;
}

size_t
weft__kv_enc_str(uint8_t *out, uint32_t len)
{
	if (len < 32) {
		out[0] = (uint8_t)(0xa0 | len);
		return 1;
	}
	out[0] = 0xdb;
	put_be(out + 1, len, 4);
	return 5;
}

/* Reads an n-byte big-endian number; WEFT_EINVAL when truncated. */
static int
take_be(struct weft__kv_reader *r, size_t n, uint64_t *v)
{
	size_t i;

	if ((size_t)(r->end - r->p) < n)
		return WEFT_EINVAL;
	*v = 0;
	for (i = 0; i < n; i++)
		*v = (*v << 8) | *r->p++;
	return 0;
}

static int
take_byte(struct weft__kv_reader *r, uint8_t *b)
{
	if (r->p >= r->end)
		return WEFT_EINVAL;
	*b = *r->p++;
	return 0;
}

int
weft__kv_read_array(struct weft__kv_reader *r, uint32_t *n)
{
	uint64_t v;
	uint8_t b;

	if (take_byte(r, &b) != 0)
		return WEFT_EINVAL;
	if ((b & 0xf0) == 0x90) {
		*n = b & 0x0f;
		return 0;
	}
	if (b != 0xdc && b != 0xdd)
		return WEFT_EINVAL;
	if (take_be(r, b == 0xdc ? 2 : 4, &v) != 0)
		return WEFT_EINVAL;
	*n = (uint32_t)v;
	return 0;
}

int
weft__kv_read_uint(struct weft__kv_reader *r, uint64_t *v)
{
	uint8_t b;
	int64_t s;

	if (take_byte(r, &b) != 0)
		return WEFT_EINVAL;
	if (b < 0x80) {
		*v = b;
		return 0;
	}
	if (b >= 0xcc && b <= 0xcf)
		return take_be(r, (size_t)1 << (b - 0xcc), v);
	if (b < 0xd0 || b > 0xd3)
		return WEFT_EINVAL;
	/* Signed encodings of a non-negative value are accepted too. */
	if (take_be(r, (size_t)1 << (b - 0xd0), v) != 0)
		return WEFT_EINVAL;
	s = (b == 0xd0)   ? (int8_t)*v
	    : (b == 0xd1) ? (int16_t)*v
	    : (b == 0xd2) ? (int32_t)*v
	                  : (int64_t)*v;
	return s < 0 ? WEFT_EINVAL : 0;
}

/* Reads a bin or str body of the announced length. */
static int
take_body(struct weft__kv_reader *r, uint64_t len, const uint8_t **data,
          size_t *out_len)
{
	if ((uint64_t)(r->end - r->p) < len)
		return WEFT_EINVAL;
	*data = r->p;
	*out_len = (size_t)len;
	r->p += len;
	return 0;
}

int
weft__kv_read_bin(struct weft__kv_reader *r, const uint8_t **data, size_t *len)
{
	uint64_t n;
	uint8_t b;

	if (take_byte(r, &b) != 0 || b < 0xc4 || b > 0xc6)
		return WEFT_EINVAL;
	if (take_be(r, (size_t)1 << (b - 0xc4), &n) != 0)
		return WEFT_EINVAL;
	return take_body(r, n, data, len);
}

int
weft__kv_read_str(struct weft__kv_reader *r, const char **data, size_t *len)
{
	const uint8_t *p;
	uint64_t n;
	uint8_t b;
	int rv;

	if (take_byte(r, &b) != 0)
		return WEFT_EINVAL;
	if ((b & 0xe0) == 0xa0)
		n = b & 0x1f;
	else if (b < 0xd9 || b > 0xdb ||
	         take_be(r, (size_t)1 << (b - 0xd9), &n) != 0)
		return WEFT_EINVAL;
	if ((rv = take_body(r, n, &p, len)) != 0)
		return rv;
	*data = (const char *)p;
	return 0;
}

/* Starts a reader on a payload that must be an array of n elements. */
static int
open_array(struct weft__kv_reader *r, const void *p, size_t n, uint32_t want)
{
	uint32_t got;

	if (n == 0)
		return WEFT_EINVAL;
	r->p = p;
	r->end = r->p + n;
	if (weft__kv_read_array(r, &got) != 0 || got != want)
		return WEFT_EINVAL;
	return 0;
}

static int
read_key(struct weft__kv_reader *r, struct weft__kv_req *out)
{
	if (weft__kv_read_bin(r, &out->key, &out->key_len) != 0 ||
	    out->key_len == 0 || out->key_len > WEFT_KV_MAX_KEY)
		return WEFT_EINVAL;
	return 0;
}

int
weft__kv_decode_key(const void *p, size_t n, struct weft__kv_req *out)
{
	struct weft__kv_reader r;

	memset(out, 0, sizeof(*out));
	if (open_array(&r, p, n, 1) != 0 || read_key(&r, out) != 0 ||
	    r.p != r.end)
		return WEFT_EINVAL;
	return 0;
}

int
weft__kv_decode_put(const void *p, size_t n, struct weft__kv_req *out)
{
	struct weft__kv_reader r;

	memset(out, 0, sizeof(*out));
	if (open_array(&r, p, n, 2) != 0 || read_key(&r, out) != 0 ||
	    weft__kv_read_bin(&r, &out->value, &out->value_len) != 0 ||
	    r.p != r.end)
		return WEFT_EINVAL;
	return 0;
}

int
weft__kv_decode_replicate(const void *p, size_t n, struct weft__kv_req *out)
{
	struct weft__kv_reader r;
	uint64_t op;

	memset(out, 0, sizeof(*out));
	if (open_array(&r, p, n, 5) != 0 || weft__kv_read_uint(&r, &op) != 0 ||
	    (op != WEFT__KV_OP_PUT && op != WEFT__KV_OP_DELETE) ||
	    read_key(&r, out) != 0 ||
	    weft__kv_read_bin(&r, &out->value, &out->value_len) != 0 ||
	    weft__kv_read_uint(&r, &out->ts) != 0 ||
	    weft__kv_read_str(&r, &out->origin, &out->origin_len) != 0 ||
	    out->origin_len == 0 || out->origin_len > WEFT_MSVC_MAX_ID ||
	    r.p != r.end)
		return WEFT_EINVAL;
	out->op = (uint32_t)op;
	return 0;
}
