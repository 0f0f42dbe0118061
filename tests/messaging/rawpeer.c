/* SPDX-License-Identifier: MIT */
/* rawpeer.c: see rawpeer.h. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <event2/buffer.h>
#include <msgpack.h>
#include <weft/core.h>
#include <weft/crc32c.h>

#include "rawpeer.h"
#include "support/wire.h"

bool
rp_try_connect(rawpeer *p, uint16_t port, SSL_CTX *tls, const char *sni)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons(port)};
	struct timeval tv = {5, 0};
	int one = 1;

	memset(p, 0, sizeof(*p));
	p->status = -1;
	p->crc = true;
	if ((p->fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return false;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(p->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(p->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(p->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		goto err_close;
	if (tls == NULL)
		return true;
	if ((p->ssl = SSL_new(tls)) == NULL)
		goto err_close;
	if (sni != NULL)
		SSL_set_tlsext_host_name(p->ssl, sni);
	SSL_set_fd(p->ssl, p->fd);
	if (SSL_connect(p->ssl) == 1)
		return true;
	SSL_free(p->ssl);
	p->ssl = NULL;
err_close:
	close(p->fd);
	p->fd = -1;
	return false;
}

bool
rp_connect_from(rawpeer *p, uint16_t port, const char *src, int rcvbuf)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons(port)};
	struct sockaddr_in from = {.sin_family = AF_INET};
	struct timeval tv = {5, 0};

	memset(p, 0, sizeof(*p));
	p->status = -1;
	p->crc = true;
	if ((p->fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return false;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(p->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(p->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (rcvbuf > 0)
		setsockopt(p->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
		           sizeof(rcvbuf));
	if (src != NULL &&
	    (inet_pton(AF_INET, src, &from.sin_addr) != 1 ||
	     bind(p->fd, (struct sockaddr *)&from, sizeof(from)) != 0))
		goto err_close;
	if (connect(p->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return true;
err_close:
	close(p->fd);
	p->fd = -1;
	return false;
}

void
rp_connect(rawpeer *p, uint16_t port, SSL_CTX *tls, const char *sni)
{
	assert_true(rp_try_connect(p, port, tls, sni));
}

void
rp_close(rawpeer *p)
{
	if (p->ssl != NULL) {
		SSL_shutdown(p->ssl);
		SSL_free(p->ssl);
		p->ssl = NULL;
	}
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	free(p->rbuf);
	p->rbuf = NULL;
	p->rcap = 0;
}

/* Reads up to n bytes; <0 on EOF or error. */
static ssize_t
raw_recv(rawpeer *p, void *buf, size_t n)
{
	ssize_t r;

	if (p->ssl != NULL) {
		size_t got = 0;

		if (SSL_read_ex(p->ssl, buf, n, &got) != 1)
			return -1;
		return (ssize_t)got;
	}
	r = recv(p->fd, buf, n, 0);
	return r > 0 ? r : -1;
}

/* Waits until something can be read: 1, 0 on timeout. */
static int
wait_readable(rawpeer *p, int timeout_ms)
{
	struct pollfd pfd = {.fd = p->fd, .events = POLLIN};

	if (p->ssl != NULL && SSL_pending(p->ssl) > 0)
		return 1;
	return poll(&pfd, 1, timeout_ms) > 0 ? 1 : 0;
}

static bool
read_exact(rawpeer *p, void *buf, size_t n, int timeout_ms)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		if (wait_readable(p, timeout_ms) == 0)
			return false;
		if ((r = raw_recv(p, (char *)buf + got, n - got)) < 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

bool
rp_send_bytes(rawpeer *p, const void *data, size_t n)
{
	size_t done = 0;
	ssize_t w;

	while (done < n) {
		if (p->ssl != NULL) {
			size_t put = 0;

			if (SSL_write_ex(p->ssl, (const char *)data + done,
			                 n - done, &put) != 1)
				return false;
			w = (ssize_t)put;
		} else {
			w = send(p->fd, (const char *)data + done, n - done,
			         MSG_NOSIGNAL);
			if (w <= 0)
				return false;
		}
		done += (size_t)w;
	}
	return true;
}

bool
rp_send(rawpeer *p, struct evbuffer *b)
{
	size_t n = evbuffer_get_length(b);
	bool ok = rp_send_bytes(p, evbuffer_pullup(b, -1), n);

	evbuffer_drain(b, n);
	return ok;
}

void
rp_frame(struct evbuffer *out, const void *body, size_t n, bool crc)
{
	uint8_t h[4], t[4];
	uint32_t c;

	weft_test_put_be32(h, (uint32_t)n);
	evbuffer_add(out, h, 4);
	evbuffer_add(out, body, n);
	if (crc) {
		c = weft_crc32c(0, h, 4);
		c = weft_crc32c(c, body, n);
		weft_test_put_be32(t, c);
		evbuffer_add(out, t, 4);
	}
}

void
rp_envelope(struct evbuffer *out, bool crc, uint64_t id, uint32_t verb,
            uint32_t flags, uint64_t expires_ms, const void *payload,
            size_t len)
{
	rp_envelope_at(out, crc, id, verb, flags, weft_wall_ms(), expires_ms,
	               payload, len);
}

void
rp_envelope_at(struct evbuffer *out, bool crc, uint64_t id, uint32_t verb,
               uint32_t flags, uint64_t created_ms, uint64_t expires_ms,
               const void *payload, size_t len)
{
	uint8_t *b = malloc(39 + len);

	assert_non_null(b);
	b[0] = 0x96;
	b[1] = 0xcf;
	weft_test_put_be64(b + 2, id);
	b[10] = 0xce;
	weft_test_put_be32(b + 11, verb);
	b[15] = (uint8_t)flags;
	b[16] = 0xcf;
	weft_test_put_be64(b + 17, created_ms);
	b[25] = 0xcf;
	weft_test_put_be64(b + 26, expires_ms);
	b[34] = 0xc6;
	weft_test_put_be32(b + 35, (uint32_t)len);
	if (len > 0)
		memcpy(b + 39, payload, len);
	rp_frame(out, b, 39 + len, crc);
	free(b);
}

void
rp_envelope_params(struct evbuffer *out, bool crc, uint64_t id, uint32_t verb,
                   uint32_t flags, const void *payload, size_t len,
                   const void *params, size_t n)
{
	uint64_t now = weft_wall_ms();
	uint8_t *b = malloc(39 + len + n);

	assert_non_null(b);
	b[0] = 0x97;
	b[1] = 0xcf;
	weft_test_put_be64(b + 2, id);
	b[10] = 0xce;
	weft_test_put_be32(b + 11, verb);
	b[15] = (uint8_t)flags;
	b[16] = 0xcf;
	weft_test_put_be64(b + 17, now);
	b[25] = 0xcf;
	weft_test_put_be64(b + 26, now + 5000);
	b[34] = 0xc6;
	weft_test_put_be32(b + 35, (uint32_t)len);
	if (len > 0)
		memcpy(b + 39, payload, len);
	if (n > 0)
		memcpy(b + 39 + len, params, n);
	rp_frame(out, b, 39 + len + n, crc);
	free(b);
}

bool
rp_request(rawpeer *p, uint64_t id, uint32_t verb, const void *payload,
           size_t len)
{
	struct evbuffer *b = evbuffer_new();
	bool ok;

	rp_envelope(b, p->crc, id, verb, RP_REQUEST, weft_wall_ms() + 10000,
	            payload, len);
	ok = rp_send(p, b);
	evbuffer_free(b);
	return ok;
}

/* Reads one frame into p->rbuf; returns its body length, -1 or -2. */
static ssize_t
read_frame(rawpeer *p, bool crc, int timeout_ms)
{
	uint8_t h[4], t[4];
	uint32_t n;

	if (wait_readable(p, timeout_ms) == 0)
		return -2;
	if (!read_exact(p, h, 4, timeout_ms))
		return -1;
	n = weft_test_get_be32(h);
	if (n > (64u << 20))
		return -1;
	if (n > p->rcap) {
		free(p->rbuf);
		p->rcap = n;
		p->rbuf = malloc(n);
		assert_non_null(p->rbuf);
	}
	if (!read_exact(p, p->rbuf, n, timeout_ms))
		return -1;
	if (crc) {
		if (!read_exact(p, t, 4, timeout_ms))
			return -1;
		assert_int_equal(weft_test_get_be32(t),
		                 weft_crc32c(weft_crc32c(0, h, 4), p->rbuf, n));
	}
	return n;
}

static void
pack_str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str_with_body(pk, s, strlen(s));
}

int
rp_handshake(rawpeer *p, const char *cluster, const char *id, int role, int cls,
             int index)
{
	return rp_handshake_version(p, cluster, id, role, cls, index, 1);
}

int
rp_handshake_version(rawpeer *p, const char *cluster, const char *id, int role,
                     int cls, int index, int max_version)
{
	return rp_handshake_flags(p, cluster, id, role, cls, index, max_version,
	                          p->ssl != NULL ? 1 : 0);
}

int
rp_handshake_flags(rawpeer *p, const char *cluster, const char *id, int role,
                   int cls, int index, int max_version, uint64_t flags)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked u;
	struct evbuffer *b = evbuffer_new();
	const msgpack_object *f;
	ssize_t n;
	bool sent;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_sbuffer_write(&sb, "WEFT", 4);
	msgpack_pack_array(&pk, 8);
	msgpack_pack_uint8(&pk, 1);
	msgpack_pack_uint8(&pk, (uint8_t)max_version);
	pack_str(&pk, cluster);
	pack_str(&pk, id);
	msgpack_pack_uint8(&pk, (uint8_t)role);
	msgpack_pack_uint8(&pk, (uint8_t)cls);
	msgpack_pack_uint8(&pk, (uint8_t)index);
	msgpack_pack_uint64(&pk, flags);
	rp_frame(b, sb.data, sb.size, true);
	msgpack_sbuffer_destroy(&sb);
	sent = rp_send(p, b);
	evbuffer_free(b);
	if (!sent || (n = read_frame(p, true, 5000)) < 4 ||
	    memcmp(p->rbuf, "WEFT", 4) != 0)
		return -1;
	msgpack_unpacked_init(&u);
	assert_int_equal(msgpack_unpack_next(&u, (const char *)p->rbuf + 4,
	                                     (size_t)n - 4, NULL),
	                 MSGPACK_UNPACK_SUCCESS);
	assert_int_equal(u.data.type, MSGPACK_OBJECT_ARRAY);
	assert_int_equal(u.data.via.array.size, 6);
	f = u.data.via.array.ptr;
	p->status = (int)f[0].via.u64;
	p->version = (int)f[1].via.u64;
	snprintf(p->acceptor, sizeof(p->acceptor), "%.*s",
	         (int)f[2].via.str.size, f[2].via.str.ptr);
	p->crc = f[3].via.u64 & 1;
	p->reply_flags = f[3].via.u64;
	p->max_frame = f[4].via.u64;
	msgpack_unpacked_destroy(&u);
	return p->status;
}

/* Reads element i of an envelope array as an unsigned integer. */
static uint64_t
uint_at(const msgpack_object *a, uint32_t i)
{
	assert_true(a->via.array.ptr[i].type ==
	            MSGPACK_OBJECT_POSITIVE_INTEGER);
	return a->via.array.ptr[i].via.u64;
}

static void
decode_error(rp_env *e)
{
	msgpack_unpacked u;
	const msgpack_object *f;

	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, (const char *)e->payload, e->len, NULL) ==
	        MSGPACK_UNPACK_SUCCESS &&
	    u.data.type == MSGPACK_OBJECT_ARRAY && u.data.via.array.size == 2) {
		f = u.data.via.array.ptr;
		e->error_code = f[0].via.u64;
		if (f[1].type == MSGPACK_OBJECT_STR)
			snprintf(e->error_text, sizeof(e->error_text), "%.*s",
			         (int)f[1].via.str.size, f[1].via.str.ptr);
	}
	msgpack_unpacked_destroy(&u);
}

ssize_t
rp_read_frame(rawpeer *p, int timeout_ms)
{
	return read_frame(p, p->crc, timeout_ms);
}

int
rp_read_env(rawpeer *p, rp_env *out, int timeout_ms)
{
	ssize_t n = read_frame(p, p->crc, timeout_ms);

	if (n < 0)
		return (int)n;
	rp_env_decode(p->rbuf, (size_t)n, out);
	return 0;
}

void
rp_env_decode(const uint8_t *body, size_t n, rp_env *out)
{
	msgpack_unpacked u;
	const msgpack_object *a, *pl;

	memset(out, 0, sizeof(*out));
	msgpack_unpacked_init(&u);
	assert_int_equal(msgpack_unpack_next(&u, (const char *)body, n, NULL),
	                 MSGPACK_UNPACK_SUCCESS);
	a = &u.data;
	assert_int_equal(a->type, MSGPACK_OBJECT_ARRAY);
	/* Version 2: an array of 7 has params, which PARAMS announces. */
	assert_true(a->via.array.size == 6 || a->via.array.size == 7);
	out->id = uint_at(a, 0);
	out->verb = (uint32_t)uint_at(a, 1);
	out->flags = (uint32_t)uint_at(a, 2);
	out->has_params = a->via.array.size == 7;
	assert_int_equal(out->has_params, (out->flags & RP_PARAMS) != 0);
	out->flags &= ~RP_PARAMS;
	if (out->has_params) {
		assert_int_equal(a->via.array.ptr[6].type, MSGPACK_OBJECT_MAP);
		out->params_count = a->via.array.ptr[6].via.map.size;
	}
	out->created_ms = uint_at(a, 3);
	out->expires_ms = uint_at(a, 4);
	pl = &a->via.array.ptr[5];
	assert_int_equal(pl->type, MSGPACK_OBJECT_BIN);
	out->payload = (const uint8_t *)pl->via.bin.ptr;
	out->len = pl->via.bin.size;
	/* The payload points into body, which outlives u. */
	msgpack_unpacked_destroy(&u);
	if (out->flags & RP_ERROR)
		decode_error(out);
}

bool
rp_closed(rawpeer *p, int timeout_ms)
{
	uint8_t b[4096];
	uint64_t end = weft_now_ns() + (uint64_t)timeout_ms * 1000000;

	while (weft_now_ns() < end) {
		if (wait_readable(p, 100) == 0)
			continue;
		if (raw_recv(p, b, sizeof(b)) < 0)
			return true;
	}
	return false;
}

SSL_CTX *
rp_tls_ctx(const char *dir, const char *name)
{
	char path[512];
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	assert_non_null(ctx);
	snprintf(path, sizeof(path), "%s/ca.crt", dir);
	assert_int_equal(SSL_CTX_load_verify_locations(ctx, path, NULL), 1);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (name != NULL) {
		snprintf(path, sizeof(path), "%s/%s.crt", dir, name);
		assert_int_equal(SSL_CTX_use_certificate_chain_file(ctx, path),
		                 1);
		snprintf(path, sizeof(path), "%s/%s.key", dir, name);
		assert_int_equal(
		    SSL_CTX_use_PrivateKey_file(ctx, path, SSL_FILETYPE_PEM),
		    1);
	}
	return ctx;
}
