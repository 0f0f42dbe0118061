/* SPDX-License-Identifier: MIT */
/*
 * wire.c: the bytes of docs/PROTOCOL.md. The envelope is the codec's
 * (<weft/envelope.h>); the handshake and the error payload have fixed
 * layouts too, written and read with the codec's bounded msgpack cursor
 * (<weft/mp.h>), without a generic object tree.
 */
#include <string.h>

#include <event2/buffer.h>

#include <weft/envelope.h>
#include <weft/mp.h>

#include "msvc_int.h"

static const uint8_t magic[4] = {'W', 'E', 'F', 'T'};

/* Reads a string of fewer than cap bytes, with no NUL inside, into out. */
static int
read_cstr(weft_mp_reader *r, char *out, size_t cap)
{
	const char *s;
	size_t n;

	if (weft_mp_read_str(r, &s, &n) != 0 || n >= cap ||
	    memchr(s, '\0', n) != NULL)
		return WEFT_EPROTO;
	memcpy(out, s, n);
	out[n] = '\0';
	return 0;
}

/* Writes a C string, cut at 255 bytes as the wire format always had. */
static void
write_cstr(weft_mp_writer *w, const char *s)
{
	size_t n = strlen(s);

	weft_mp_write_str(w, s, n > 255 ? 255 : n);
}

/* Starts a reader after the magic of a handshake body; WEFT_EPROTO when
 * the magic is not there. */
static int
open_handshake(weft_mp_reader *r, const uint8_t *p, size_t n, uint32_t want)
{
	uint32_t count;

	if (n < 4 || memcmp(p, magic, 4) != 0)
		return WEFT_EPROTO;
	weft_mp_reader_init(r, p + 4, n - 4);
	if (weft_mp_read_array(r, &count) != 0 || count != want)
		return WEFT_EPROTO;
	return 0;
}

int
weft__msvc_hello_encode(struct evbuffer *buf, const struct weft__msvc_hello *h)
{
	uint8_t body[256];
	weft_mp_writer w;

	weft_mp_writer_init(&w, body, sizeof(body));
	weft_mp_write_raw(&w, magic, 4);
	weft_mp_write_array(&w, 8);
	weft_mp_write_uint(&w, h->min_version);
	weft_mp_write_uint(&w, h->max_version);
	write_cstr(&w, h->cluster);
	write_cstr(&w, h->id);
	weft_mp_write_uint(&w, h->role);
	weft_mp_write_uint(&w, h->cls);
	weft_mp_write_uint(&w, h->index);
	weft_mp_write_uint(&w, h->flags);
	if (weft_mp_writer_status(&w) != 0)
		return WEFT_EINVAL;
	return evbuffer_add(buf, body, weft_mp_writer_length(&w)) == 0
	           ? 0
	           : WEFT_ENOMEM;
}

int
weft__msvc_hello_decode(const uint8_t *p, size_t n,
                        struct weft__msvc_hello *out)
{
	weft_mp_reader r;

	if (open_handshake(&r, p, n, 8) != 0 ||
	    weft_mp_read_uint(&r, UINT64_MAX, &out->min_version) != 0 ||
	    weft_mp_read_uint(&r, UINT64_MAX, &out->max_version) != 0 ||
	    read_cstr(&r, out->cluster, sizeof(out->cluster)) != 0 ||
	    read_cstr(&r, out->id, sizeof(out->id)) != 0 ||
	    weft_mp_read_uint(&r, UINT64_MAX, &out->role) != 0 ||
	    weft_mp_read_uint(&r, UINT64_MAX, &out->cls) != 0 ||
	    weft_mp_read_uint(&r, UINT64_MAX, &out->index) != 0 ||
	    weft_mp_read_uint(&r, UINT64_MAX, &out->flags) != 0 ||
	    weft_mp_reader_end(&r) != 0)
		return WEFT_EPROTO;
	return 0;
}

int
weft__msvc_reply_encode(struct evbuffer *buf, const struct weft__msvc_reply *r)
{
	uint8_t body[512];
	weft_mp_writer w;

	weft_mp_writer_init(&w, body, sizeof(body));
	weft_mp_write_raw(&w, magic, 4);
	weft_mp_write_array(&w, 6);
	weft_mp_write_uint(&w, r->status);
	weft_mp_write_uint(&w, r->version);
	write_cstr(&w, r->id);
	weft_mp_write_uint(&w, r->flags);
	weft_mp_write_uint(&w, r->max_frame);
	write_cstr(&w, r->reason);
	if (weft_mp_writer_status(&w) != 0)
		return WEFT_EINVAL;
	return evbuffer_add(buf, body, weft_mp_writer_length(&w)) == 0
	           ? 0
	           : WEFT_ENOMEM;
}

int
weft__msvc_reply_decode(const uint8_t *p, size_t n,
                        struct weft__msvc_reply *out)
{
	weft_mp_reader r;

	if (open_handshake(&r, p, n, 6) != 0 ||
	    weft_mp_read_uint(&r, UINT64_MAX, &out->status) != 0 ||
	    weft_mp_read_uint(&r, UINT64_MAX, &out->version) != 0 ||
	    read_cstr(&r, out->id, sizeof(out->id)) != 0 ||
	    weft_mp_read_uint(&r, UINT64_MAX, &out->flags) != 0 ||
	    weft_mp_read_uint(&r, UINT64_MAX, &out->max_frame) != 0 ||
	    read_cstr(&r, out->reason, sizeof(out->reason)) != 0 ||
	    weft_mp_reader_end(&r) != 0)
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
	weft_mp_writer w;

	weft_mp_writer_init(&w, out, cap);
	weft_mp_write_array(&w, 2);
	weft_mp_write_uint(&w,
	                   (uint64_t)weft__msvc_error_status_to_wire(status));
	write_cstr(&w, text != NULL ? text : "");
	return weft_mp_writer_status(&w) == 0 ? weft_mp_writer_length(&w) : 0;
}

int
weft__msvc_error_decode(const uint8_t *p, size_t n, int *status,
                        const uint8_t **text, size_t *text_len)
{
	weft_mp_reader r;
	const char *s;
	uint32_t count;
	uint64_t code;

	weft_mp_reader_init(&r, p, n);
	if (weft_mp_read_array(&r, &count) != 0 || count != 2 ||
	    weft_mp_read_uint(&r, UINT64_MAX, &code) != 0 ||
	    weft_mp_read_str(&r, &s, text_len) != 0 ||
	    weft_mp_reader_end(&r) != 0) {
		*status = WEFT_EREMOTE;
		*text = NULL;
		*text_len = 0;
		return WEFT_EPROTO;
	}
	*text = (const uint8_t *)s;
	*status = weft__msvc_wire_to_error_status(code > 1000 ? WIRE_APPLICATION
	                                                      : (int)code);
	return 0;
}
