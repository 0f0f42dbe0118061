/* SPDX-License-Identifier: MIT */
/*
 * wire.c: the bytes of docs/PROTOCOL.md. The envelope is the codec's
 * (<weft/envelope.h>); the handshake and the error payload have fixed
 * layouts too, written and read by hand (still valid msgpack) without a
 * generic object tree; the decoder checks every length against the bytes
 * it has before reading them.
 */
#include <string.h>

#include <event2/buffer.h>

#include <weft/envelope.h>

#include "msvc_int.h"

static const uint8_t magic[4] = {'W', 'E', 'F', 'T'};

void
weft__msvc_env_header(uint8_t *out, uint64_t id, uint32_t verb, uint32_t flags,
                      uint64_t created_ms, uint64_t expires_ms,
                      uint32_t payload_len)
{
	weft_envelope env = {.id = id,
	                     .verb = verb,
	                     .flags = flags,
	                     .created_ms = created_ms,
	                     .expires_ms = expires_ms};

	weft_envelope_encode_header(out, &env, payload_len);
}

int
weft__msvc_env_decode(const uint8_t *p, size_t n, struct weft__msvc_env *out)
{
	weft_envelope env;

	if (weft_envelope_decode(p, n, &env) != 0)
		return WEFT_EPROTO;
	out->id = env.id;
	out->verb = env.verb;
	out->flags = env.flags;
	out->created_ms = env.created_ms;
	out->expires_ms = env.expires_ms;
	out->payload = env.payload;
	out->len = env.payload_len;
	return 0;
}

/* A bounds-checked reader over one frame body. */
struct rd {
	const uint8_t *p, *end;
};

static bool
rd_uint(struct rd *r, uint64_t *out)
{
	static const uint8_t widths[] = {1, 2, 4, 8};
	uint8_t t;
	size_t n;
	uint64_t v;

	if (r->p >= r->end)
		return false;
	t = *r->p++;
	if (t <= 0x7f) {
		*out = t;
		return true;
	}
	if (t >= 0xcc && t <= 0xcf)
		n = widths[t - 0xcc];
	else if (t >= 0xd0 && t <= 0xd3)
		n = widths[t - 0xd0];
	else
		return false;
	if ((size_t)(r->end - r->p) < n)
		return false;
	v = weft__msvc_get_be(r->p, n);
	r->p += n;
	/* A signed integer must be non-negative. */
	if (t >= 0xd0 && (v >> (n * 8 - 1)) != 0)
		return false;
	*out = v;
	return true;
}

static bool
rd_len(struct rd *r, uint8_t t8, const uint8_t **data, size_t *len)
{
	uint8_t t;
	size_t n, hdr;

	if (r->p >= r->end)
		return false;
	t = *r->p++;
	if (t8 == 0xd9 && t >= 0xa0 && t <= 0xbf) {
		n = t & 0x1f; /* fixstr */
		hdr = 0;
	} else if (t >= t8 && t <= t8 + 2) {
		hdr = (size_t)1 << (t - t8);
		if ((size_t)(r->end - r->p) < hdr)
			return false;
		n = (size_t)weft__msvc_get_be(r->p, hdr);
	} else {
		return false;
	}
	r->p += hdr;
	if ((size_t)(r->end - r->p) < n)
		return false;
	*data = r->p;
	*len = n;
	r->p += n;
	return true;
}

/* str 8/16/32 start at 0xd9, plus fixstr. */
static bool
rd_str(struct rd *r, char *out, size_t cap)
{
	const uint8_t *s;
	size_t n;

	if (!rd_len(r, 0xd9, &s, &n) || n >= cap)
		return false;
	memcpy(out, s, n);
	out[n] = '\0';
	return strlen(out) == n; /* no NUL inside */
}

static bool
rd_array(struct rd *r, size_t want)
{
	uint8_t t;

	if (r->p >= r->end)
		return false;
	t = *r->p++;
	if (t >= 0x90 && t <= 0x9f)
		return (size_t)(t & 0x0f) == want;
	if (t == 0xdc && r->end - r->p >= 2) {
		r->p += 2;
		return weft__msvc_get_be(r->p - 2, 2) == want;
	}
	if (t == 0xdd && r->end - r->p >= 4) {
		r->p += 4;
		return weft__msvc_get_be(r->p - 4, 4) == want;
	}
	return false;
}

/* A small msgpack writer into a fixed buffer. */
struct wr {
	uint8_t *p, *end;
	bool ok;
};

static void
wr_bytes(struct wr *w, const void *data, size_t n)
{
	if (!w->ok || (size_t)(w->end - w->p) < n) {
		w->ok = false;
		return;
	}
	memcpy(w->p, data, n);
	w->p += n;
}

static void
wr_uint(struct wr *w, uint64_t v)
{
	uint8_t b[9];

	if (v <= 0x7f) {
		b[0] = (uint8_t)v;
		wr_bytes(w, b, 1);
	} else if (v <= UINT32_MAX) {
		b[0] = 0xce;
		weft__msvc_put_be32(b + 1, (uint32_t)v);
		wr_bytes(w, b, 5);
	} else {
		b[0] = 0xcf;
		weft__msvc_put_be64(b + 1, v);
		wr_bytes(w, b, 9);
	}
}

static void
wr_str(struct wr *w, const char *s)
{
	size_t n = strlen(s);
	uint8_t b[2];

	if (n <= 31) {
		b[0] = (uint8_t)(0xa0 | n);
		wr_bytes(w, b, 1);
	} else {
		b[0] = 0xd9;
		b[1] = (uint8_t)(n > 255 ? 255 : n);
		n = b[1];
		wr_bytes(w, b, 2);
	}
	wr_bytes(w, s, n);
}

static void
wr_u8(struct wr *w, uint8_t v)
{
	wr_bytes(w, &v, 1);
}

int
weft__msvc_frame_add(struct evbuffer *out, const void *body, size_t n, bool crc)
{
	uint8_t hdr[4], trailer[4];
	uint32_t c;

	weft__msvc_put_be32(hdr, (uint32_t)n);
	if (evbuffer_add(out, hdr, 4) != 0 || evbuffer_add(out, body, n) != 0)
		return WEFT_ENOMEM;
	if (!crc)
		return 0;
	c = weft__msvc_crc32c(0, hdr, 4);
	c = weft__msvc_crc32c(c, body, n);
	weft__msvc_put_be32(trailer, c);
	return evbuffer_add(out, trailer, 4) == 0 ? 0 : WEFT_ENOMEM;
}

int
weft__msvc_hello_encode(struct evbuffer *buf, const struct weft__msvc_hello *h)
{
	uint8_t body[256];
	struct wr w = {body, body + sizeof(body), true};

	wr_bytes(&w, magic, 4);
	wr_u8(&w, 0x98);
	wr_uint(&w, h->min_version);
	wr_uint(&w, h->max_version);
	wr_str(&w, h->cluster);
	wr_str(&w, h->id);
	wr_uint(&w, h->role);
	wr_uint(&w, h->cls);
	wr_uint(&w, h->index);
	wr_uint(&w, h->flags);
	if (!w.ok)
		return WEFT_EINVAL;
	return weft__msvc_frame_add(buf, body, (size_t)(w.p - body), true);
}

int
weft__msvc_hello_decode(const uint8_t *p, size_t n,
                        struct weft__msvc_hello *out)
{
	struct rd r = {p + 4, p + n};

	if (n < 4 || memcmp(p, magic, 4) != 0)
		return WEFT_EPROTO;
	if (!rd_array(&r, 8) || !rd_uint(&r, &out->min_version) ||
	    !rd_uint(&r, &out->max_version) ||
	    !rd_str(&r, out->cluster, sizeof(out->cluster)) ||
	    !rd_str(&r, out->id, sizeof(out->id)) || !rd_uint(&r, &out->role) ||
	    !rd_uint(&r, &out->cls) || !rd_uint(&r, &out->index) ||
	    !rd_uint(&r, &out->flags) || r.p != r.end)
		return WEFT_EPROTO;
	return 0;
}

int
weft__msvc_reply_encode(struct evbuffer *buf, const struct weft__msvc_reply *r)
{
	uint8_t body[512];
	struct wr w = {body, body + sizeof(body), true};

	wr_bytes(&w, magic, 4);
	wr_u8(&w, 0x96);
	wr_uint(&w, r->status);
	wr_uint(&w, r->version);
	wr_str(&w, r->id);
	wr_uint(&w, r->flags);
	wr_uint(&w, r->max_frame);
	wr_str(&w, r->reason);
	if (!w.ok)
		return WEFT_EINVAL;
	return weft__msvc_frame_add(buf, body, (size_t)(w.p - body), true);
}

int
weft__msvc_reply_decode(const uint8_t *p, size_t n,
                        struct weft__msvc_reply *out)
{
	struct rd r = {p + 4, p + n};

	if (n < 4 || memcmp(p, magic, 4) != 0)
		return WEFT_EPROTO;
	if (!rd_array(&r, 6) || !rd_uint(&r, &out->status) ||
	    !rd_uint(&r, &out->version) ||
	    !rd_str(&r, out->id, sizeof(out->id)) ||
	    !rd_uint(&r, &out->flags) || !rd_uint(&r, &out->max_frame) ||
	    !rd_str(&r, out->reason, sizeof(out->reason)) || r.p != r.end)
		return WEFT_EPROTO;
	return 0;
}

/* Wire error codes (PROTOCOL.md 4.2) and the status each maps to. */
static const struct {
	int code;
	int status;
} error_map[] = {
    {1, WEFT_EUNKNOWNVERB}, {2, WEFT_EEXPIRED},  {3, WEFT_EOVERLOAD},
    {4, WEFT_ESHUTDOWN},    {5, WEFT_ETOOBIG},   {6, WEFT_EINVAL},
    {7, WEFT_ENOTFOUND},    {8, WEFT_ETIMEDOUT}, {9, WEFT_EPEERDOWN},
    {10, WEFT_EREMOTE},     {11, WEFT_EPERM},    {12, WEFT_ECONFLICT},
};
#define N_ERRORS (sizeof(error_map) / sizeof(error_map[0]))
#define WIRE_APPLICATION 10

int
weft__msvc_error_status_to_wire(int status)
{
	size_t i;

	for (i = 0; i < N_ERRORS; i++)
		if (error_map[i].status == status)
			return error_map[i].code;
	return WIRE_APPLICATION;
}

int
weft__msvc_wire_to_error_status(int code)
{
	size_t i;

	for (i = 0; i < N_ERRORS; i++)
		if (error_map[i].code == code)
			return error_map[i].status;
	return WEFT_EREMOTE;
}

size_t
weft__msvc_error_encode(uint8_t *out, size_t cap, int status, const char *text)
{
	struct wr w = {out, out + cap, true};

	wr_u8(&w, 0x92);
	wr_uint(&w, (uint64_t)weft__msvc_error_status_to_wire(status));
	wr_str(&w, text != NULL ? text : "");
	return w.ok ? (size_t)(w.p - out) : 0;
}

int
weft__msvc_error_decode(const uint8_t *p, size_t n, int *status,
                        const uint8_t **text, size_t *text_len)
{
	struct rd r = {p, p + n};
	uint64_t code;

	if (!rd_array(&r, 2) || !rd_uint(&r, &code) ||
	    !rd_len(&r, 0xd9, text, text_len) || r.p != r.end) {
		*status = WEFT_EREMOTE;
		*text = NULL;
		*text_len = 0;
		return WEFT_EPROTO;
	}
	*status = weft__msvc_wire_to_error_status(code > 1000 ? WIRE_APPLICATION
	                                                      : (int)code);
	return 0;
}
