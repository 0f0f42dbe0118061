/* SPDX-License-Identifier: MIT */
/*
 * fuzz_load.c: the payload of weftd's load verb ([weftd] load = on), a
 * msgpack map read by weftd_load_decode exactly as the verb's handler
 * reads it.
 *
 * What is accepted must have an op inside the decoded message and sane
 * numbers, and its parameters packed again as a map must read back the
 * same. Decoding must stay within the allocation bound: this is where a
 * 31 MiB array of one-byte elements once cost 830 MB.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "fuzz.h"
#include "weftd_int.h"

static int
pack_kv(msgpack_packer *pk, const char *key, uint64_t v)
{
	return msgpack_pack_str_with_body(pk, key, strlen(key)) ||
	       msgpack_pack_uint64(pk, v);
}

/* A rate as the parser takes it: an integer is read as is, a float only
 * up to 1e12, so a larger rate (which came as an integer) goes back as
 * one; the largest uint64 reads as 2^64. */
static int
pack_rate(msgpack_packer *pk, double rate)
{
	if (rate <= 1e12)
		return msgpack_pack_double(pk, rate);
	return msgpack_pack_uint64(
	    pk, rate >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)rate);
}

static struct evbuffer *
pack(const struct weftd_load_params *p)
{
	struct evbuffer *b = evbuffer_new();
	msgpack_packer pk;

	if (b == NULL || weft_msgpack_packer_init(&pk, b) != 0 ||
	    msgpack_pack_map(&pk, 6) ||
	    msgpack_pack_str_with_body(&pk, "op", 2) ||
	    msgpack_pack_str_with_body(&pk, p->op, p->op_len) ||
	    pack_kv(&pk, "warmup_ms", p->warmup_ms) ||
	    pack_kv(&pk, "duration_ms", p->duration_ms) ||
	    pack_kv(&pk, "outstanding", p->outstanding) ||
	    pack_kv(&pk, "size", p->size) ||
	    msgpack_pack_str_with_body(&pk, "rate", 4) ||
	    pack_rate(&pk, p->rate))
		abort();
	return b;
}

static void
round_trip(const struct weftd_load_params *p)
{
	struct weftd_load_params again;
	struct evbuffer *b = pack(p);
	weft_msgpack_msg *m;

	if (weftd_load_decode(evbuffer_pullup(b, -1), evbuffer_get_length(b),
	                      &m, &again) != NULL)
		fuzz_fail("load parameters packed again are refused");
	if (again.op_len != p->op_len ||
	    memcmp(again.op, p->op, p->op_len) != 0 ||
	    again.warmup_ms != p->warmup_ms ||
	    again.duration_ms != p->duration_ms ||
	    again.outstanding != p->outstanding || again.size != p->size ||
	    again.rate != p->rate)
		fuzz_fail("load parameters do not survive a round trip");
	weft_msgpack_msg_free(m);
	evbuffer_free(b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct weftd_load_params p;
	weft_msgpack_msg *m;

	fuzz_alloc_begin();
	if (weftd_load_decode(data, size, &m, &p) != NULL) {
		if (m != NULL)
			fuzz_fail("a refused request left a message");
		fuzz_alloc_end(size, "load payload");
		return 0;
	}
	if (p.op == NULL || !isfinite(p.rate) || p.rate < 0)
		fuzz_fail("accepted with op %p, rate %g", (const void *)p.op,
		          p.rate);
	round_trip(&p);
	weft_msgpack_msg_free(m);
	fuzz_alloc_end(size, "load payload");
	return 0;
}
