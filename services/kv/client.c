/* SPDX-License-Identifier: MIT */
/* client.c: requests to the key-value service, from any weft_msvc. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "kv_int.h"

/* The encoded request around the key. */
#define HEAD_MAX (3 * WEFT__KV_HDR_MAX + WEFT_KV_MAX_KEY)

static bool
key_is_valid(const void *key, size_t key_len)
{
	return key != NULL && key_len > 0 && key_len <= WEFT_KV_MAX_KEY;
}

/* Encodes [key] or [key, value-header] into out; returns its size. */
static size_t
encode_key(uint8_t *out, uint32_t fields, const void *key, size_t key_len)
{
	size_t n;

	n = weft__kv_enc_array(out, fields);
	n += weft__kv_enc_bin(out + n, (uint32_t)key_len);
	memcpy(out + n, key, key_len);
	return n + key_len;
}

static int
key_request(weft_msvc *svc, weft_msvc_peer *node, uint32_t verb,
            const void *key, size_t key_len, const weft_msvc_call_opts *opts,
            weft_msvc_reply_cb cb, void *arg)
{
	uint8_t buf[HEAD_MAX];
	size_t n;

	if (!key_is_valid(key, key_len))
		return WEFT_EINVAL;
	n = encode_key(buf, 1, key, key_len);
	return weft_msvc_request(svc, node, verb, buf, n, opts, cb, arg);
}

int
weft_kv_client_get(weft_msvc *svc, weft_msvc_peer *node, const void *key,
                   size_t key_len, const weft_msvc_call_opts *opts,
                   weft_msvc_reply_cb cb, void *arg)
{
	return key_request(svc, node, WEFT_KV_VERB_GET, key, key_len, opts, cb,
	                   arg);
}

int
weft_kv_client_get_at(weft_msvc *svc, weft_msvc_peer *node, const void *key,
                      size_t key_len, weft_kv_consistency cl,
                      const weft_msvc_call_opts *opts, weft_msvc_reply_cb cb,
                      void *arg)
{
	uint8_t buf[HEAD_MAX];
	size_t n;

	if (cl == WEFT_KV_READ_DEFAULT)
		return weft_kv_client_get(svc, node, key, key_len, opts, cb,
		                          arg);
	if (!key_is_valid(key, key_len) || cl < WEFT_KV_READ_ONE ||
	    cl > WEFT_KV_READ_ALL)
		return WEFT_EINVAL;
	/* [key, consistency]: only when one is named, so that a get that
	 * names none is the request every build serves. */
	n = encode_key(buf, 2, key, key_len);
	n += weft__kv_enc_uint(buf + n, (uint64_t)cl);
	return weft_msvc_request(svc, node, WEFT_KV_VERB_GET, buf, n, opts, cb,
	                         arg);
}

int
weft_kv_consistency_parse(const char *text, weft_kv_consistency *out)
{
	static const char *const names[] = {"one", "quorum", "all"};
	size_t i;

	for (i = 0; text != NULL && i < 3; i++) {
		if (strcasecmp(text, names[i]) == 0) {
			*out = (weft_kv_consistency)(i + WEFT_KV_READ_ONE);
			return 0;
		}
	}
	return WEFT_EINVAL;
}

int
weft_kv_client_delete(weft_msvc *svc, weft_msvc_peer *node, const void *key,
                      size_t key_len, const weft_msvc_call_opts *opts,
                      weft_msvc_reply_cb cb, void *arg)
{
	return key_request(svc, node, WEFT_KV_VERB_DELETE, key, key_len, opts,
	                   cb, arg);
}

/*
 * A small value is copied with the header into one buffer on the stack,
 * which weft_msvc_request copies; a larger one is copied once, after its
 * header, into an evbuffer whose chains weft_msvc_request_buf moves on.
 */
int
weft_kv_client_put(weft_msvc *svc, weft_msvc_peer *node, const void *key,
                   size_t key_len, const void *value, size_t value_len,
                   const weft_msvc_call_opts *opts, weft_msvc_reply_cb cb,
                   void *arg)
{
	uint8_t p[HEAD_MAX + 4096];
	struct evbuffer *buf;
	size_t n;
	int rv;

	if (!key_is_valid(key, key_len) || value_len > UINT32_MAX ||
	    (value == NULL && value_len > 0))
		return WEFT_EINVAL;
	n = encode_key(p, 2, key, key_len);
	n += weft__kv_enc_bin(p + n, (uint32_t)value_len);
	if (value_len <= sizeof(p) - n) {
		if (value_len > 0)
			memcpy(p + n, value, value_len);
		return weft_msvc_request(svc, node, WEFT_KV_VERB_PUT, p,
		                         n + value_len, opts, cb, arg);
	}
	if ((buf = evbuffer_new()) == NULL)
		return WEFT_ENOMEM;
	if (evbuffer_expand(buf, n + value_len) != 0 ||
	    evbuffer_add(buf, p, n) != 0 ||
	    evbuffer_add(buf, value, value_len) != 0)
		rv = WEFT_ENOMEM;
	else
		rv = weft_msvc_request_buf(svc, node, WEFT_KV_VERB_PUT, buf,
		                           opts, cb, arg);
	evbuffer_free(buf);
	return rv;
}
