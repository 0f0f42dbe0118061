/* SPDX-License-Identifier: MIT */
/*
 * fuzz_kv_wire.c: the key-value service's request payloads (<weft/kv.h>:
 * get and delete [key], put [key, value], replicate [op, key, value,
 * version, origin], and its abort form [3, key, value, version, origin,
 * restore op, restore version, restore origin]; a get naming its read
 * consistency [key, consistency]; and a replica's answer to a read
 * [op, value, version, origin], which a coordinator reads from peers that
 * may lie), read by services/kv/wire.c.
 *
 * The first input byte picks the verb; the rest is the payload. What a
 * decoder accepts must lie inside the payload, respect the key and origin
 * limits, and encode back with the service's own encoders to a payload
 * that decodes to the same request.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kv_int.h"

enum verb { KEY, PUT, REPLICATE, GET, READ_ANSWER, VERBS };

static void
check_inside(const uint8_t *p, size_t n, const void *field, size_t len)
{
	const uint8_t *f = field;

	if (len > 0 && (f < p || len > n || f + len > p + n))
		fuzz_fail("a decoded field lies outside the payload");
}

static size_t
put_bytes(uint8_t *out, size_t (*hdr)(uint8_t *, uint32_t), const void *data,
          size_t len)
{
	size_t n = hdr(out, (uint32_t)len);

	if (len > 0)
		memcpy(out + n, data, len);
	return n + len;
}

/* Encodes r as verb's payload into out (room enough: see below). */
static size_t
encode(enum verb verb, const struct weft__kv_req *r, uint8_t *out)
{
	static const uint32_t fields[VERBS] = {1, 2, 5, 1, 4};
	bool is_abort = verb == REPLICATE && r->op == WEFT__KV_OP_ABORT;
	size_t n;

	if (verb == READ_ANSWER) {
		n = weft__kv_enc_array(out, 4);
		n += weft__kv_enc_uint(out + n, r->op);
		n += put_bytes(out + n, weft__kv_enc_bin, r->value,
		               r->value_len);
		n += weft__kv_enc_uint(out + n, r->ts);
		return n + put_bytes(out + n, weft__kv_enc_str, r->origin,
		                     r->origin_len);
	}
	/* A get's consistency travels in restore_op here (see decode). */
	n = weft__kv_enc_array(out, is_abort ? 8
	                            : verb == GET && r->restore_op
	                                ? 2
	                                : fields[verb]);
	if (verb == REPLICATE)
		n += weft__kv_enc_uint(out + n, r->op);
	n += put_bytes(out + n, weft__kv_enc_bin, r->key, r->key_len);
	if (verb == GET && r->restore_op)
		n += weft__kv_enc_uint(out + n, r->restore_op);
	if (verb != KEY && verb != GET)
		n += put_bytes(out + n, weft__kv_enc_bin, r->value,
		               r->value_len);
	if (verb == REPLICATE) {
		n += weft__kv_enc_uint(out + n, r->ts);
		n += put_bytes(out + n, weft__kv_enc_str, r->origin,
		               r->origin_len);
	}
	if (is_abort) {
		n += weft__kv_enc_uint(out + n, r->restore_op);
		n += weft__kv_enc_uint(out + n, r->restore_ts);
		n += put_bytes(out + n, weft__kv_enc_str, r->restore_origin,
		               r->restore_origin_len);
	}
	return n;
}

static int
decode(enum verb verb, const void *p, size_t n, struct weft__kv_req *r)
{
	switch (verb) {
	case KEY:
		return weft__kv_decode_key(p, n, r);
	case PUT:
		return weft__kv_decode_put(p, n, r);
	case GET:
		return weft__kv_decode_get(p, n, r, &r->restore_op);
	case READ_ANSWER:
		return weft__kv_decode_read_answer(p, n, r);
	default:
		return weft__kv_decode_replicate(p, n, r);
	}
}

static void
check_same(const struct weft__kv_req *a, const struct weft__kv_req *b)
{
	if (a->op != b->op || a->key_len != b->key_len ||
	    (a->key_len > 0 && memcmp(a->key, b->key, a->key_len) != 0) ||
	    a->value_len != b->value_len ||
	    (a->value_len > 0 &&
	     memcmp(a->value, b->value, a->value_len) != 0) ||
	    a->ts != b->ts || a->origin_len != b->origin_len ||
	    (a->origin_len > 0 &&
	     memcmp(a->origin, b->origin, a->origin_len) != 0) ||
	    a->restore_op != b->restore_op || a->restore_ts != b->restore_ts ||
	    a->restore_origin_len != b->restore_origin_len ||
	    (a->restore_origin_len > 0 &&
	     memcmp(a->restore_origin, b->restore_origin,
	            a->restore_origin_len) != 0))
		fuzz_fail("a request does not survive encode and decode");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct weft__kv_req r, again;
	enum verb verb;
	const uint8_t *p;
	uint8_t *out;
	size_t n;

	if (size < 1)
		return 0;
	p = data + 1;
	n = size - 1;
	verb = (enum verb)(data[0] % VERBS);
	fuzz_alloc_begin();
	if (decode(verb, p, n, &r) != 0) {
		fuzz_alloc_end(size, "kv payload");
		return 0;
	}
	check_inside(p, n, r.key, r.key_len);
	check_inside(p, n, r.value, r.value_len);
	check_inside(p, n, r.origin, r.origin_len);
	check_inside(p, n, r.restore_origin, r.restore_origin_len);
	if (verb == READ_ANSWER
	        ? r.op > WEFT__KV_OP_DELETE ||
	              r.origin_len > WEFT_MSVC_MAX_ID ||
	              (r.op == 0) != (r.ts == 0) ||
	              (r.op == 0) != (r.origin_len == 0) ||
	              (r.op != WEFT__KV_OP_PUT && r.value_len != 0)
	        : r.key_len == 0 || r.key_len > WEFT_KV_MAX_KEY ||
	              (verb == GET && r.restore_op > WEFT_KV_READ_ALL))
		fuzz_fail("a request past the limits was accepted");
	if ((verb == REPLICATE &&
	     (r.origin_len == 0 || r.origin_len > WEFT_MSVC_MAX_ID ||
	      (r.op != WEFT__KV_OP_PUT && r.op != WEFT__KV_OP_DELETE &&
	       r.op != WEFT__KV_OP_ABORT) ||
	      (r.op == WEFT__KV_OP_ABORT &&
	       (r.restore_origin_len == 0 ||
	        r.restore_origin_len > WEFT_MSVC_MAX_ID)))))
		fuzz_fail("a request past the limits was accepted");
	/* The fields are inside the payload, and each header is at most
	 * WEFT__KV_HDR_MAX bytes. */
	if ((out = malloc(n + 9 * WEFT__KV_HDR_MAX)) == NULL)
		abort();
	if (decode(verb, out, encode(verb, &r, out), &again) != 0)
		fuzz_fail("the service's own encoding is refused");
	check_same(&r, &again);
	free(out);
	fuzz_alloc_end(size, "kv payload");
	return 0;
}
