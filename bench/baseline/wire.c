/* SPDX-License-Identifier: MIT */
/* wire.c: the baseline's frames, envelopes and handshake (PROTOCOL.md). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <msgpack.h>
#include <weft/codec.h>
#include <weft/crc32c.h>
#include <weft/msgpack_codec.h>

#include "base_int.h"

static const uint8_t magic[4] = {'W', 'E', 'F', 'T'};

static void
put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void
put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static uint64_t
get_be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* ---- Reading frames ----------------------------------------------------- */

int
wbase__reader_init(wbase_reader *r, const wbase_io *io, size_t max_frame)
{
	memset(r, 0, sizeof(*r));
	r->io = io;
	r->crc = true; /* always on the handshake */
	r->max_frame = max_frame;
	r->cap = 256u << 10;
	r->buf = malloc(r->cap);
	return r->buf ? 0 : WEFT_ENOMEM;
}

void
wbase__reader_fini(wbase_reader *r)
{
	free(r->buf);
	r->buf = NULL;
}

/* fill reads at least one more byte, making room for need bytes. */
static int
fill(wbase_reader *r, size_t need, uint64_t timeout_ms)
{
	long n;

	if (r->off > 0 && r->off + need > r->cap) {
		memmove(r->buf, r->buf + r->off, r->have);
		r->off = 0;
	}
	if (need > r->cap) {
		uint8_t *b = realloc(r->buf, need);

		if (b == NULL)
			return -1;
		r->buf = b;
		r->cap = need;
	}
	if (timeout_ms > 0 && !wbase__io_buffered(r->io)) {
		struct pollfd pfd = {.fd = r->io->fd, .events = POLLIN};

		if (poll(&pfd, 1, (int)timeout_ms) <= 0)
			return -1;
	}
	n = wbase__io_read(r->io, r->buf + r->off + r->have,
	                   r->cap - r->off - r->have);
	if (n <= 0)
		return -1;
	r->have += (size_t)n;
	return 0;
}

int
wbase__read_frame(wbase_reader *r, const uint8_t **body, size_t *len,
                  uint64_t timeout_ms, bool *bad)
{
	size_t trailer = r->crc ? 4 : 0, flen;
	const uint8_t *p;

	*bad = false;
	while (r->have < 4)
		if (fill(r, 4, timeout_ms) != 0)
			return -1;
	flen = get_be(r->buf + r->off, 4);
	if (flen == 0 || flen > r->max_frame) {
		*bad = true;
		return -1;
	}
	while (r->have < 4 + flen + trailer)
		if (fill(r, 4 + flen + trailer, timeout_ms) != 0)
			return -1;
	p = r->buf + r->off;
	if (r->crc && weft_crc32c(0, p, 4 + flen) != get_be(p + 4 + flen, 4)) {
		*bad = true;
		return -1;
	}
	*body = p + 4;
	*len = flen;
	r->off += 4 + flen + trailer;
	r->have -= 4 + flen + trailer;
	if (r->have == 0)
		r->off = 0;
	return 0;
}

/* ---- Envelopes ---------------------------------------------------------- */

size_t
wbase__frame_len(size_t payload_len)
{
	return 4 + WBASE_ENV_HEADER + payload_len + 4;
}

void
wbase__frame(uint8_t *out, uint64_t id, uint32_t verb, uint32_t flags,
             uint64_t expires_ms, const void *payload, size_t len)
{
	uint8_t *e = out + 4;

	put_be32(out, (uint32_t)(WBASE_ENV_HEADER + len));
	e[0] = 0x96;
	e[1] = 0xcf;
	put_be64(e + 2, id);
	e[10] = 0xce;
	put_be32(e + 11, verb);
	e[15] = (uint8_t)(flags & 0x7f);
	e[16] = 0xcf;
	put_be64(e + 17, weft_wall_ms());
	e[25] = 0xcf;
	put_be64(e + 26, expires_ms);
	e[34] = 0xc6;
	put_be32(e + 35, (uint32_t)len);
	if (len > 0)
		memcpy(e + WBASE_ENV_HEADER, payload, len);
	put_be32(out + 4 + WBASE_ENV_HEADER + len,
	         weft_crc32c(0, out, 4 + WBASE_ENV_HEADER + len));
}

/* A bounds-checked cursor over one frame body. */
typedef struct cursor {
	const uint8_t *p, *end;
} cursor;

/* take_uint reads any msgpack encoding of a non-negative integer. */
static int
take_uint(cursor *c, uint64_t *out)
{
	uint8_t t;
	size_t n;

	if (c->p >= c->end)
		return -1;
	t = *c->p++;
	if (t <= 0x7f) {
		*out = t;
		return 0;
	}
	if (t >= 0xcc && t <= 0xcf)
		n = (size_t)1 << (t - 0xcc);
	else if (t >= 0xd0 && t <= 0xd3)
		n = (size_t)1 << (t - 0xd0);
	else
		return -1;
	if ((size_t)(c->end - c->p) < n || (t >= 0xd0 && (*c->p & 0x80)))
		return -1;
	*out = get_be(c->p, n);
	c->p += n;
	return 0;
}

static int
take_bin(cursor *c, const uint8_t **data, size_t *len)
{
	uint8_t t;
	size_t n;

	if (c->p >= c->end)
		return -1;
	t = *c->p++;
	if (t < 0xc4 || t > 0xc6)
		return -1;
	n = (size_t)1 << (t - 0xc4);
	if ((size_t)(c->end - c->p) < n)
		return -1;
	*len = get_be(c->p, n);
	c->p += n;
	if ((size_t)(c->end - c->p) < *len)
		return -1;
	*data = c->p;
	c->p += *len;
	return 0;
}

static bool
flags_valid(uint64_t f)
{
	uint64_t kind = f & 0x07;

	if (kind != WBASE_REQUEST && kind != WBASE_RESPONSE &&
	    kind != WBASE_ONEWAY)
		return false;
	return !(f & WBASE_ERROR) || kind == WBASE_RESPONSE;
}

int
wbase__env_decode(const uint8_t *body, size_t len, wbase_env *env)
{
	cursor c = {body + 1, body + len};
	uint64_t verb, flags;

	if (len < 1 || body[0] != 0x96)
		return -1;
	if (take_uint(&c, &env->id) || take_uint(&c, &verb) ||
	    take_uint(&c, &flags) || take_uint(&c, &env->created_ms) ||
	    take_uint(&c, &env->expires_ms) ||
	    take_bin(&c, &env->payload, &env->len) || c.p != c.end ||
	    verb > UINT32_MAX || !flags_valid(flags))
		return -1;
	env->verb = (uint32_t)verb;
	env->flags = (uint32_t)flags;
	return 0;
}

/* ---- Handshake ---------------------------------------------------------- */

/* send_body frames a handshake body (magic + packed array) with a CRC. */
static int
send_body(const wbase_io *io, const msgpack_sbuffer *sb)
{
	size_t len = 4 + sb->size, n = 4 + len + 4;
	uint8_t *f = malloc(n);
	int rv;

	if (f == NULL)
		return -1;
	put_be32(f, (uint32_t)len);
	memcpy(f + 4, magic, 4);
	memcpy(f + 8, sb->data, sb->size);
	put_be32(f + 4 + len, weft_crc32c(0, f, 4 + len));
	rv = wbase__io_write(io, f, n);
	free(f);
	return rv;
}

static void
pack_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);

	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

int
wbase__hello_send(const wbase_io *io, const char *cluster, const char *id,
                  bool member)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int rv;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 8);
	msgpack_pack_uint32(&pk, WBASE_VERSION);
	msgpack_pack_uint32(&pk, WBASE_VERSION);
	pack_str(&pk, cluster);
	pack_str(&pk, id);
	msgpack_pack_uint32(&pk, member ? 0 : 1);
	msgpack_pack_uint32(&pk, 1); /* class small: everything goes here */
	msgpack_pack_uint32(&pk, 0);
	msgpack_pack_uint32(&pk, 0); /* flags: keep CRCs, even under TLS */
	rv = send_body(io, &sb);
	msgpack_sbuffer_destroy(&sb);
	return rv;
}

int
wbase__reply_send(const wbase_io *io, unsigned status, const char *id,
                  size_t max_frame, const char *reason)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int rv;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 6);
	msgpack_pack_uint32(&pk, status);
	msgpack_pack_uint32(&pk, status == 0 ? WBASE_VERSION : 0);
	pack_str(&pk, id);
	msgpack_pack_uint32(&pk, 1); /* CRC on: plaintext */
	msgpack_pack_uint64(&pk, max_frame);
	pack_str(&pk, reason);
	rv = send_body(io, &sb);
	msgpack_sbuffer_destroy(&sb);
	return rv;
}

/* read_array reads one handshake frame into an array of n objects. */
static int
read_array(wbase_reader *r, uint32_t n, msgpack_unpacked *u,
           uint64_t timeout_ms)
{
	const uint8_t *body;
	size_t len;
	bool bad;

	if (wbase__read_frame(r, &body, &len, timeout_ms, &bad) != 0 ||
	    len < 4 || len > WBASE_HELLO_MAX || memcmp(body, magic, 4) != 0 ||
	    weft_msgpack_check(body + 4, len - 4, 4) != 0)
		return -1;
	if (msgpack_unpack_next(u, (const char *)body + 4, len - 4, NULL) !=
	        MSGPACK_UNPACK_SUCCESS ||
	    u->data.type != MSGPACK_OBJECT_ARRAY || u->data.via.array.size != n)
		return -1;
	return 0;
}

static bool
is_uint(const msgpack_object *o)
{
	return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER;
}

int
wbase__hello_recv(wbase_reader *r, const char *cluster, char *id, bool *member,
                  uint64_t timeout_ms)
{
	msgpack_unpacked u;
	msgpack_object *f;
	int rv = -1;

	msgpack_unpacked_init(&u);
	if (read_array(r, 8, &u, timeout_ms) != 0)
		goto out;
	f = u.data.via.array.ptr;
	if (!is_uint(&f[0]) || !is_uint(&f[1]) || !is_uint(&f[4]) ||
	    f[2].type != MSGPACK_OBJECT_STR ||
	    f[3].type != MSGPACK_OBJECT_STR || f[3].via.str.size >= 64 ||
	    f[0].via.u64 > WBASE_VERSION || f[1].via.u64 < WBASE_VERSION ||
	    f[2].via.str.size != strlen(cluster) ||
	    memcmp(f[2].via.str.ptr, cluster, f[2].via.str.size) != 0)
		goto out;
	memcpy(id, f[3].via.str.ptr, f[3].via.str.size);
	id[f[3].via.str.size] = '\0';
	*member = f[4].via.u64 == 0;
	rv = 0;
out:
	msgpack_unpacked_destroy(&u);
	return rv;
}

int
wbase__reply_recv(wbase_reader *r, uint64_t timeout_ms)
{
	msgpack_unpacked u;
	msgpack_object *f;
	int rv = -1;

	msgpack_unpacked_init(&u);
	if (read_array(r, 6, &u, timeout_ms) != 0)
		goto out;
	f = u.data.via.array.ptr;
	if (is_uint(&f[0]) && f[0].via.u64 == 0 && is_uint(&f[3])) {
		r->crc = (f[3].via.u64 & 1) != 0;
		rv = 0;
	}
out:
	msgpack_unpacked_destroy(&u);
	return rv;
}
