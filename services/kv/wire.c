/* SPDX-License-Identifier: MIT */
/*
 * wire.c: the key-value payloads (see <weft/kv.h>), written and read with
 * the codec's bounded msgpack cursor (<weft/mp.h>), which accepts every
 * msgpack encoding of the types it expects and nothing else.
 */
#include <string.h>

#include <weft/mp.h>

#include "kv_int.h"

/* Each encoder writes one value of at most WEFT__KV_HDR_MAX bytes with
 * the codec's msgpack writer, in its smallest encoding. */
size_t
weft__kv_enc_array(uint8_t *out, uint32_t n)
{
	weft_mp_writer w;

	weft_mp_writer_init(&w, out, WEFT__KV_HDR_MAX);
	weft_mp_write_array(&w, n);
	return weft_mp_writer_length(&w);
}

size_t
weft__kv_enc_uint(uint8_t *out, uint64_t v)
{
	weft_mp_writer w;

	weft_mp_writer_init(&w, out, WEFT__KV_HDR_MAX);
	weft_mp_write_uint(&w, v);
	return weft_mp_writer_length(&w);
}

size_t
weft__kv_enc_bin(uint8_t *out, uint32_t len)
{
	weft_mp_writer w;

	weft_mp_writer_init(&w, out, WEFT__KV_HDR_MAX);
	weft_mp_write_bin_header(&w, len);
	return weft_mp_writer_length(&w);
}

size_t
weft__kv_enc_str(uint8_t *out, uint32_t len)
{
	weft_mp_writer w;

	weft_mp_writer_init(&w, out, WEFT__KV_HDR_MAX);
	weft_mp_write_str_header(&w, len);
	return weft_mp_writer_length(&w);
}

/*
 * Each read runs the codec's bounded msgpack reader over what is left of
 * r and moves r past what it read: every encoding of the type asked for
 * is taken, and nothing else (WEFT_EINVAL).
 */
size_t
weft__kv_enc_version(uint8_t *out, const struct weft__kv_version *ver)
{
	size_t n, olen = strlen(ver->origin);

	n = weft__kv_enc_uint(out, ver->ts);
	n += weft__kv_enc_str(out + n, (uint32_t)olen);
	memcpy(out + n, ver->origin, olen);
	return n + olen;
}

static void
reader_open(weft_mp_reader *m, const struct weft__kv_reader *r)
{
	weft_mp_reader_init(m, r->p, (size_t)(r->end - r->p));
}

static int
reader_close(const weft_mp_reader *m, struct weft__kv_reader *r, int rv)
{
	if (rv != 0)
		return WEFT_EINVAL;
	r->p = m->p;
	return 0;
}

int
weft__kv_read_array(struct weft__kv_reader *r, uint32_t *n)
{
	weft_mp_reader m;

	reader_open(&m, r);
	return reader_close(&m, r, weft_mp_read_array(&m, n));
}

int
weft__kv_read_uint(struct weft__kv_reader *r, uint64_t *v)
{
	weft_mp_reader m;

	reader_open(&m, r);
	return reader_close(&m, r, weft_mp_read_uint(&m, UINT64_MAX, v));
}

int
weft__kv_read_bin(struct weft__kv_reader *r, const uint8_t **data, size_t *len)
{
	weft_mp_reader m;
	const void *p;
	int rv;

	reader_open(&m, r);
	if ((rv = reader_close(&m, r, weft_mp_read_bin(&m, &p, len))) == 0)
		*data = p;
	return rv;
}

int
weft__kv_read_str(struct weft__kv_reader *r, const char **data, size_t *len)
{
	weft_mp_reader m;

	reader_open(&m, r);
	return reader_close(&m, r, weft_mp_read_str(&m, data, len));
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

/* Reads [origin: str] of 1 to WEFT_MSVC_MAX_ID bytes. */
static int
read_origin(struct weft__kv_reader *r, const char **origin, size_t *len)
{
	if (weft__kv_read_str(r, origin, len) != 0 || *len == 0 ||
	    *len > WEFT_MSVC_MAX_ID)
		return WEFT_EINVAL;
	return 0;
}

/* Reads an abort's tail: [restore op: uint, restore ts: uint, restore
 * origin: str]. */
static int
read_restore(struct weft__kv_reader *r, struct weft__kv_req *out)
{
	uint64_t op;

	if (weft__kv_read_uint(r, &op) != 0 ||
	    (op != WEFT__KV_OP_PUT && op != WEFT__KV_OP_DELETE) ||
	    weft__kv_read_uint(r, &out->restore_ts) != 0 ||
	    read_origin(r, &out->restore_origin, &out->restore_origin_len) != 0)
		return WEFT_EINVAL;
	out->restore_op = (uint32_t)op;
	return 0;
}

int
weft__kv_decode_replicate(const void *p, size_t n, struct weft__kv_req *out)
{
	struct weft__kv_reader r;
	uint32_t fields;
	uint64_t op;

	memset(out, 0, sizeof(*out));
	if (n == 0)
		return WEFT_EINVAL;
	r.p = p;
	r.end = r.p + n;
	if (weft__kv_read_array(&r, &fields) != 0 ||
	    weft__kv_read_uint(&r, &op) != 0)
		return WEFT_EINVAL;
	if (!(fields == 5 &&
	      (op == WEFT__KV_OP_PUT || op == WEFT__KV_OP_DELETE)) &&
	    !(fields == 8 && op == WEFT__KV_OP_ABORT))
		return WEFT_EINVAL;
	if (read_key(&r, out) != 0 ||
	    weft__kv_read_bin(&r, &out->value, &out->value_len) != 0 ||
	    weft__kv_read_uint(&r, &out->ts) != 0 ||
	    read_origin(&r, &out->origin, &out->origin_len) != 0 ||
	    (op == WEFT__KV_OP_ABORT && read_restore(&r, out) != 0) ||
	    r.p != r.end)
		return WEFT_EINVAL;
	out->op = (uint32_t)op;
	return 0;
}

int
weft__kv_decode_get(const void *p, size_t n, struct weft__kv_req *out,
                    uint32_t *cl)
{
	struct weft__kv_reader r;
	uint32_t fields;
	uint64_t v = WEFT_KV_READ_DEFAULT;

	memset(out, 0, sizeof(*out));
	if (n == 0)
		return WEFT_EINVAL;
	r.p = p;
	r.end = r.p + n;
	if (weft__kv_read_array(&r, &fields) != 0 ||
	    (fields != 1 && fields != 2) || read_key(&r, out) != 0 ||
	    (fields == 2 && (weft__kv_read_uint(&r, &v) != 0 ||
	                     v < WEFT_KV_READ_ONE || v > WEFT_KV_READ_ALL)) ||
	    r.p != r.end)
		return WEFT_EINVAL;
	*cl = (uint32_t)v;
	return 0;
}

/*
 * A replica's answer to a read: op 0 (absent) carries nothing, a put its
 * value, a delete none, and both a version with a timestamp and an origin.
 */
int
weft__kv_decode_read_answer(const void *p, size_t n, struct weft__kv_req *out)
{
	struct weft__kv_reader r;
	uint64_t op;

	memset(out, 0, sizeof(*out));
	if (open_array(&r, p, n, 4) != 0 || weft__kv_read_uint(&r, &op) != 0 ||
	    op > WEFT__KV_OP_DELETE ||
	    weft__kv_read_bin(&r, &out->value, &out->value_len) != 0 ||
	    weft__kv_read_uint(&r, &out->ts) != 0 ||
	    weft__kv_read_str(&r, &out->origin, &out->origin_len) != 0 ||
	    r.p != r.end)
		return WEFT_EINVAL;
	if (op == 0
	        ? out->value_len != 0 || out->ts != 0 || out->origin_len != 0
	        : out->ts == 0 || out->origin_len == 0 ||
	              out->origin_len > WEFT_MSVC_MAX_ID ||
	              (op == WEFT__KV_OP_DELETE && out->value_len != 0))
		return WEFT_EINVAL;
	out->op = (uint32_t)op;
	return 0;
}
