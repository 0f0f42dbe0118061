/* SPDX-License-Identifier: MIT */
/*
 * compress.c: compressed frame bodies (weft/compress.h): the pure encode
 * and decode, and the codec built on them. Inbound, a plain body passes
 * on as the same message after a look at its first two bytes; a
 * compressed one is checked before anything is allocated, then
 * decompressed straight into the message it leaves as. Outbound, a body
 * is compressed straight into the next handler's reservation (small) or
 * a buffer lent to the next handler's evbuffer (large); an in-place write
 * gets twice its room from the next handler, the body in the second half
 * and its compressed form written into the first.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <lz4.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <weft/compress.h>
#include <weft/frame.h>

#include "codec_int.h"

#define HDR WEFT_COMPRESS_HEADER_BYTES
#define ALG_BIT(alg) (1u << (alg))
/* What a decoder can read; the NONE bit of an accept mask means nothing. */
#define DECODABLE (ALG_BIT(WEFT_COMPRESS_LZ4) | ALG_BIT(WEFT_COMPRESS_ZSTD))
#define KNOWN (DECODABLE | ALG_BIT(WEFT_COMPRESS_NONE))
/* The longest run of bodies skipped after incompressible ones. */
#define MAX_SKIP 64u

typedef struct compress_codec {
	weft__codec base; /* first: see weft__codec */
	weft_compress_stats cstats;
	int alg;
	int level;
	unsigned accept; /* decodable algorithms only; 0: none */
	size_t min_bytes;
	size_t max_body_bytes;
	uint32_t max_ratio;
	unsigned skip_left; /* bodies still to send plain without trying */
	unsigned backoff;   /* bodies to skip after the next failure */
	unsigned char *rsv; /* the open in-place write's room (compressed
	                       in the first rsv_n bytes, the body in the
	                       next rsv_n), or NULL when it is the next
	                       handler's own, passed through */
	size_t rsv_n;
} compress_codec;

/* ---- Contexts, one set per thread ---------------------------------- */

/* A thread's compression state, made as it is first needed and freed when
 * the thread ends: a node holds one per loop, not one per channel. */
struct thread_state {
	void *lz4; /* LZ4_sizeofState() bytes */
	ZSTD_CCtx *cctx;
	ZSTD_DCtx *dctx;
};

/* GLOBAL: the key whose destructor frees each thread's state, made once
 * by the first thread that compresses; read-only after. */
static pthread_key_t state_key;
static pthread_once_t state_key_once = PTHREAD_ONCE_INIT;
static int state_key_rv;
/* This thread's state (also under state_key, for the destructor). */
static _Thread_local struct thread_state *my_state
    __attribute__((tls_model("initial-exec")));

static void
state_free(void *arg)
{
	struct thread_state *s = arg;

	free(s->lz4);
	ZSTD_freeCCtx(s->cctx);
	ZSTD_freeDCtx(s->dctx);
	free(s);
	my_state = NULL;
}

static void
state_key_make(void)
{
	state_key_rv = pthread_key_create(&state_key, state_free);
}

static struct thread_state *
thread_state(void)
{
	struct thread_state *s = my_state;

	if (s != NULL)
		return s;
	pthread_once(&state_key_once, state_key_make);
	if (state_key_rv != 0 || (s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	if (pthread_setspecific(state_key, s) != 0) {
		free(s);
		return NULL;
	}
	return my_state = s;
}

static void *
lz4_state(void)
{
	struct thread_state *s = thread_state();

	if (s != NULL && s->lz4 == NULL)
		s->lz4 = malloc((size_t)LZ4_sizeofState());
	return s != NULL ? s->lz4 : NULL;
}

static ZSTD_CCtx *
zstd_cctx(void)
{
	struct thread_state *s = thread_state();

	if (s != NULL && s->cctx == NULL)
		s->cctx = ZSTD_createCCtx();
	return s != NULL ? s->cctx : NULL;
}

static ZSTD_DCtx *
zstd_dctx(void)
{
	struct thread_state *s = thread_state();

	if (s != NULL && s->dctx == NULL)
		s->dctx = ZSTD_createDCtx();
	return s != NULL ? s->dctx : NULL;
}

/* ---- The pure functions --------------------------------------------- */

static bool
alg_is_known(int alg)
{
	return alg == WEFT_COMPRESS_NONE || alg == WEFT_COMPRESS_LZ4 ||
	       alg == WEFT_COMPRESS_ZSTD;
}

static bool
starts_compressed(const unsigned char *p, size_t len)
{
	return len >= 2 && p[0] == WEFT_WRAPPED_MARK &&
	       p[1] == WEFT_WRAPPED_COMPRESSED;
}

/* Compresses into the cap bytes at dst; returns how many it wrote, 0 when
 * they did not fit. */
static long
deflate_lz4(unsigned char *dst, size_t cap, int level, const void *in,
            size_t len)
{
	void *state = lz4_state();
	int n;

	if (state == NULL)
		return WEFT_ENOMEM;
	if (len > LZ4_MAX_INPUT_SIZE)
		return WEFT_ETOOBIG;
	n = LZ4_compress_fast_extState(state, in, (char *)dst, (int)len,
	                               cap > INT_MAX ? INT_MAX : (int)cap,
	                               level > 0 ? level : 1);
	return n > 0 ? n : 0;
}

static long
deflate_zstd(unsigned char *dst, size_t cap, int level, const void *in,
             size_t len)
{
	ZSTD_CCtx *cctx = zstd_cctx();
	size_t n;

	if (cctx == NULL)
		return WEFT_ENOMEM;
	n = ZSTD_compressCCtx(cctx, dst, cap, in, len, level != 0 ? level : 1);
	if (!ZSTD_isError(n))
		return (long)n;
	return ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation
	           ? WEFT_ENOMEM
	           : 0;
}

/*
 * Writes the compressed body of the len bytes at in (header included) to
 * dst, in at most cap bytes. Returns its length; 0 when it does not fit
 * or would decompress to more than max_ratio times its compressed bytes;
 * WEFT_ENOMEM (no context) or WEFT_ETOOBIG (len above what alg takes).
 * The one compressor of the file.
 */
static long
deflate_into(unsigned char *dst, size_t cap, int alg, int level,
             uint32_t max_ratio, const void *in, size_t len)
{
	long n;

	if (len > UINT32_MAX)
		return WEFT_ETOOBIG;
	if (cap <= HDR || len == 0)
		return 0;
	if (alg == WEFT_COMPRESS_LZ4)
		n = deflate_lz4(dst + HDR, cap - HDR, level, in, len);
	else
		n = deflate_zstd(dst + HDR, cap - HDR, level, in, len);
	if (n <= 0 || len > (uint64_t)n * max_ratio)
		return n < 0 ? n : 0;
	dst[0] = WEFT_WRAPPED_MARK;
	dst[1] = WEFT_WRAPPED_COMPRESSED;
	dst[2] = (unsigned char)alg;
	weft__store_be32(dst + 3, (uint32_t)len);
	return HDR + n;
}

/* A small body's compressed form, in a reservation of out. */
static long
encode_reserved(struct evbuffer *out, int alg, int level, uint32_t max_ratio,
                const void *in, size_t len)
{
	struct evbuffer_iovec v;
	long n;

	if (evbuffer_reserve_space(out, (ev_ssize_t)(len - 1), &v, 1) < 1)
		return WEFT_ENOMEM;
	/* Nothing committed, out stays as it was. */
	if ((n = deflate_into(v.iov_base, len - 1, alg, level, max_ratio, in,
	                      len)) <= 0)
		return n;
	v.iov_len = (size_t)n;
	return evbuffer_commit_space(out, &v, 1) == 0 ? n : WEFT_ENOMEM;
}

static void
free_reference(const void *data, size_t len, void *arg)
{
	(void)len;
	(void)arg;
	free((void *)data);
}

/* A large body's compressed form, in memory of its own cut to fit and
 * lent to out: no copy, and no chain of the body's size for a fraction
 * of it. */
static long
encode_referenced(struct evbuffer *out, int alg, int level, uint32_t max_ratio,
                  const void *in, size_t len)
{
	unsigned char *buf = malloc(len - 1), *fit;
	long n;

	if (buf == NULL)
		return WEFT_ENOMEM;
	if ((n = deflate_into(buf, len - 1, alg, level, max_ratio, in, len)) <=
	    0) {
		free(buf);
		return n;
	}
	if ((fit = realloc(buf, (size_t)n)) != NULL)
		buf = fit;
	if (evbuffer_add_reference(out, buf, (size_t)n, free_reference, NULL) !=
	    0) {
		free(buf);
		return WEFT_ENOMEM;
	}
	return n;
}

long
weft_compress_encode(struct evbuffer *out, int alg, int level,
                     uint32_t max_ratio, const void *in, size_t len)
{
	if (out == NULL || (in == NULL && len > 0) || !alg_is_known(alg))
		return WEFT_EINVAL;
	if (len > UINT32_MAX)
		return WEFT_ETOOBIG;
	/* Shorter than a header and a byte: nothing to gain. */
	if (alg == WEFT_COMPRESS_NONE || len <= HDR + 1)
		return 0;
	if (max_ratio == 0)
		max_ratio = WEFT_COMPRESS_DEFAULT_RATIO;
	if (len <= WEFT__CODEC_COPY_MAX)
		return encode_reserved(out, alg, level, max_ratio, in, len);
	return encode_referenced(out, alg, level, max_ratio, in, len);
}

/* A compressed body whose header was checked. */
struct wrapped {
	int alg;
	uint32_t raw_len;
	const unsigned char *data; /* the compressed bytes */
	size_t data_len;
};

/*
 * Checks the header of the compressed body of len bytes at body against
 * accept (a mask of decodable algorithms; 0: none) and the bounds, before
 * anything is allocated. Returns 0 with *w set, or WEFT_EPROTO or
 * WEFT_ETOOBIG with a constant reason in *why.
 */
static int
check_head(const unsigned char *body, size_t len, unsigned accept,
           size_t max_body_bytes, uint32_t max_ratio, struct wrapped *w,
           const char **why)
{
	if (!starts_compressed(body, len))
		return *why = "not a compressed body", WEFT_EPROTO;
	if (len < HDR)
		return *why = "truncated header", WEFT_EPROTO;
	w->alg = body[2];
	w->raw_len = weft__load_be32(body + 3);
	w->data = body + HDR;
	w->data_len = len - HDR;
	if (w->alg != WEFT_COMPRESS_LZ4 && w->alg != WEFT_COMPRESS_ZSTD)
		return *why = "unknown algorithm", WEFT_EPROTO;
	if ((accept & ALG_BIT(w->alg)) == 0)
		return *why = "algorithm not accepted", WEFT_EPROTO;
	if (w->raw_len == 0)
		return *why = "raw_len 0", WEFT_EPROTO;
	if (w->data_len == 0)
		return *why = "no compressed bytes", WEFT_EPROTO;
	if (w->raw_len > max_body_bytes)
		return *why = "raw_len above the body limit", WEFT_ETOOBIG;
	if (w->raw_len > (uint64_t)w->data_len * max_ratio)
		return *why = "raw_len above max_ratio times the compressed "
		              "bytes",
		       WEFT_ETOOBIG;
	return 0;
}

static int
inflate_lz4(const struct wrapped *w, unsigned char *dst, const char **why)
{
	int n;

	/* Within the frame limit, both fit an int. */
	if (w->data_len > INT_MAX || w->raw_len > INT_MAX)
		return *why = "too long for LZ4", WEFT_EPROTO;
	n = LZ4_decompress_safe((const char *)w->data, (char *)dst,
	                        (int)w->data_len, (int)w->raw_len);
	if (n < 0)
		return *why = "corrupt LZ4 data", WEFT_EPROTO;
	if ((uint32_t)n != w->raw_len)
		return *why = "LZ4 data shorter than raw_len", WEFT_EPROTO;
	return 0;
}

static int
inflate_zstd(const struct wrapped *w, unsigned char *dst, const char **why)
{
	unsigned long long content =
	    ZSTD_getFrameContentSize(w->data, w->data_len);
	ZSTD_DCtx *dctx;
	size_t n;

	if (content == ZSTD_CONTENTSIZE_ERROR)
		return *why = "not a zstd frame", WEFT_EPROTO;
	if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != w->raw_len)
		return *why = "zstd content size is not raw_len", WEFT_EPROTO;
	/* ZSTD_decompressDCtx would go on into a second frame. */
	if (ZSTD_findFrameCompressedSize(w->data, w->data_len) != w->data_len)
		return *why = "not exactly one zstd frame", WEFT_EPROTO;
	if ((dctx = zstd_dctx()) == NULL)
		return *why = "no memory for a zstd context", WEFT_ENOMEM;
	n = ZSTD_decompressDCtx(dctx, dst, w->raw_len, w->data, w->data_len);
	if (ZSTD_isError(n))
		return ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation
		           ? (*why = "no memory for zstd", WEFT_ENOMEM)
		           : (*why = "corrupt zstd data", WEFT_EPROTO);
	if (n != w->raw_len)
		return *why = "zstd data shorter than raw_len", WEFT_EPROTO;
	return 0;
}

/* Decompresses w into exactly its raw_len bytes at dst. The one
 * decompressor of the file. */
static int
inflate_into(const struct wrapped *w, unsigned char *dst, const char **why)
{
	int rv;

	if (w->alg == WEFT_COMPRESS_LZ4)
		rv = inflate_lz4(w, dst, why);
	else
		rv = inflate_zstd(w, dst, why);
	if (rv == 0 && starts_compressed(dst, w->raw_len))
		return *why = "a compressed body inside", WEFT_EPROTO;
	return rv;
}

/* Appends w's raw_len bytes to out, contiguous, all or nothing. */
static int
inflate_append(struct evbuffer *out, const struct wrapped *w, const char **why)
{
	struct evbuffer_iovec v;
	int rv;

	if (evbuffer_reserve_space(out, (ev_ssize_t)w->raw_len, &v, 1) < 1)
		return *why = "no memory for the body", WEFT_ENOMEM;
	/* Not committed on failure: out keeps no byte of it. */
	if ((rv = inflate_into(w, v.iov_base, why)) != 0)
		return rv;
	v.iov_len = w->raw_len;
	if (evbuffer_commit_space(out, &v, 1) != 0)
		return *why = "no memory for the body", WEFT_ENOMEM;
	return 0;
}

static size_t
body_limit(size_t max_body_bytes)
{
	if (max_body_bytes == 0 || max_body_bytes > WEFT_FRAME_LIMIT)
		return WEFT_FRAME_LIMIT;
	return max_body_bytes;
}

int
weft_compress_decode(struct evbuffer *out, const void *body, size_t len,
                     unsigned accept, size_t max_body_bytes, uint32_t max_ratio,
                     const char **why)
{
	const char *reason;
	struct wrapped w;
	int rv;

	if (why == NULL)
		why = &reason;
	if (out == NULL || (body == NULL && len > 0))
		return *why = "no buffer", WEFT_EINVAL;
	accept = accept == 0 ? DECODABLE : accept & DECODABLE;
	if ((rv = check_head(body, len, accept, body_limit(max_body_bytes),
	                     max_ratio != 0 ? max_ratio
	                                    : WEFT_COMPRESS_DEFAULT_RATIO,
	                     &w, why)) != 0)
		return rv;
	return inflate_append(out, &w, why);
}

const char *
weft_compress_name(int alg)
{
	switch (alg) {
	case WEFT_COMPRESS_NONE:
		return "none";
	case WEFT_COMPRESS_LZ4:
		return "lz4";
	case WEFT_COMPRESS_ZSTD:
		return "zstd";
	default:
		return NULL;
	}
}

int
weft_compress_parse(const char *name, int *alg)
{
	int a;

	if (name == NULL || alg == NULL)
		return WEFT_EINVAL;
	for (a = WEFT_COMPRESS_NONE; a <= WEFT_COMPRESS_ZSTD; a++)
		if (strcmp(name, weft_compress_name(a)) == 0) {
			*alg = a;
			return 0;
		}
	return WEFT_EINVAL;
}

/* ---- The codec, inbound --------------------------------------------- */

/* Whether a byte message starts c1 01: its first two bytes only. */
static bool
msg_is_compressed(const weft_msg_type *type, void *msg)
{
	const weft_bytes *run = msg;
	unsigned char two[2];

	if (type == &weft_msg_bytes)
		return starts_compressed(run->data, run->len);
	return evbuffer_copyout(msg, two, 2) == 2 && starts_compressed(two, 2);
}

static void
fail_body(compress_codec *z, weft_ctx *ctx, int err, size_t len,
          const char *why)
{
	weft__codec_fail(&z->base, ctx, err, "compressed body of %zu bytes: %s",
	                 len, why);
}

static void
count_in(compress_codec *z, size_t wire, size_t raw)
{
	z->cstats.wire_in += wire;
	z->cstats.raw_in += raw;
}

/*
 * Decompresses the checked body w (len bytes on the wire, which came as a
 * message of type) and passes it on as that type was: a byte run on the
 * stack when it was one and the result is small, else in the codec's
 * message buffer, made in place.
 */
static void
deliver(compress_codec *z, weft_ctx *ctx, const weft_msg_type *type,
        const struct wrapped *w, size_t len)
{
	unsigned char raw[WEFT__CODEC_COPY_MAX];
	const char *why;
	int rv;

	if (type == &weft_msg_bytes && w->raw_len <= sizeof(raw)) {
		if ((rv = inflate_into(w, raw, &why)) != 0) {
			fail_body(z, ctx, rv, len, why);
			return;
		}
		z->cstats.compressed_in++;
		count_in(z, len, w->raw_len);
		weft__codec_deliver_bytes(&z->base, ctx, raw, w->raw_len);
		return;
	}
	if ((rv = inflate_append(z->base.msg, w, &why)) != 0) {
		fail_body(z, ctx, rv, len, why);
		return;
	}
	z->cstats.compressed_in++;
	count_in(z, len, w->raw_len);
	weft__codec_deliver(&z->base, ctx, w->raw_len);
}

static void
read_compressed(compress_codec *z, weft_ctx *ctx, const weft_msg_type *type,
                void *msg, size_t len)
{
	const unsigned char *p;
	struct wrapped w;
	const char *why;
	int rv;

	/* A frame's body, bounded by the frame limit: made contiguous. */
	if (type == &weft_msg_bytes)
		p = ((const weft_bytes *)msg)->data;
	else if ((p = evbuffer_pullup(msg, -1)) == NULL) {
		weft__codec_fail(&z->base, ctx, WEFT_ENOMEM,
		                 "no memory for a compressed body");
		return;
	}
	if ((rv = check_head(p, len, z->accept, z->max_body_bytes, z->max_ratio,
	                     &w, &why)) != 0) {
		fail_body(z, ctx, rv, len, why);
		return;
	}
	deliver(z, ctx, type, &w, len);
}

static void
compress_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	compress_codec *z = weft_ctx_state(ctx);
	size_t len;

	if (!weft_msg_is_bytes(type)) {
		weft_ctx_fire_read(ctx, type, msg);
		return;
	}
	/* After a failure, the bodies still on their way are dropped. */
	if (z->base.failed) {
		weft_msg_free(type, msg);
		return;
	}
	len = weft_msg_length(type, msg);
	if (!msg_is_compressed(type, msg)) {
		count_in(z, len, len);
		z->base.stats.msgs_in++;
		z->base.stats.bytes_in += len;
		weft_ctx_fire_read(ctx, type, msg);
		return;
	}
	weft__codec_enter(&z->base);
	read_compressed(z, ctx, type, msg, len);
	/* Its bytes were taken, whatever happened. */
	if (type == &weft_msg_evbuffer)
		evbuffer_drain(msg, len);
	weft__codec_leave(&z->base);
}

static void
compress_read_complete(weft_ctx *ctx)
{
	weft__codec_publish(weft_ctx_state(ctx));
	weft_ctx_fire_read_complete(ctx);
}

/* ---- The codec, outbound -------------------------------------------- */

/*
 * Whether to try to compress a body of len bytes: alg is set, the body
 * is large enough, and no backing off; a body skipped counts as one.
 */
static bool
should_compress(compress_codec *z, size_t len)
{
	if (z->alg == WEFT_COMPRESS_NONE || len < z->min_bytes)
		return false;
	if (z->skip_left == 0)
		return true;
	z->skip_left--;
	z->cstats.skipped_out++;
	return false;
}

/* A body that did not compress: the next ones are skipped, twice as many
 * as last time, up to MAX_SKIP, until one compresses. */
static void
back_off(compress_codec *z)
{
	z->cstats.skipped_out++;
	z->skip_left = z->backoff;
	if (z->backoff < MAX_SKIP)
		z->backoff *= 2;
}

/* Counts a body of raw bytes that leaves as wire bytes. */
static void
count_out(compress_codec *z, size_t raw, size_t wire)
{
	z->base.stats.msgs_out++;
	z->base.stats.bytes_out += raw;
	z->cstats.raw_out += raw;
	z->cstats.wire_out += wire;
	if (wire != raw) {
		z->cstats.compressed_out++;
		z->backoff = 1;
	}
}

/* Sends the n bytes written into the next handler's reservation. */
static void
commit_next(compress_codec *z, weft_ctx *ctx, size_t n, weft_write_cb cb,
            void *cb_arg)
{
	weft__codec_enter(&z->base);
	weft_ctx_commit(ctx, n, cb, cb_arg);
	weft__codec_leave(&z->base);
}

/* A small body: compressed into the next handler's reservation, which is
 * dropped unless that saves bytes. Returns whether it was sent. */
static bool
write_small(compress_codec *z, weft_ctx *ctx, const void *raw, size_t len,
            weft_write_cb cb, void *cb_arg)
{
	unsigned char *dst = weft_ctx_reserve(ctx, len - 1);
	long n;

	if (dst == NULL || (n = deflate_into(dst, len - 1, z->alg, z->level,
	                                     z->max_ratio, raw, len)) <= 0)
		return false;
	count_out(z, len, (size_t)n);
	commit_next(z, ctx, (size_t)n, cb, cb_arg);
	return true;
}

/* A large body: compressed into a buffer of its own, whose chain moves
 * on. Returns whether it was sent. */
static bool
write_large(compress_codec *z, weft_ctx *ctx, const void *raw, size_t len,
            weft_write_cb cb, void *cb_arg)
{
	struct evbuffer *out = evbuffer_new();
	long n;

	if (out == NULL)
		return false;
	n = weft_compress_encode(out, z->alg, z->level, z->max_ratio, raw, len);
	if (n <= 0) {
		evbuffer_free(out);
		return false;
	}
	count_out(z, len, (size_t)n);
	weft__codec_enter(&z->base);
	weft_ctx_write(ctx, &weft_msg_evbuffer, out, cb, cb_arg);
	weft__codec_leave(&z->base);
	evbuffer_free(out);
	return true;
}

/* Tries to send the body of len bytes at raw compressed; returns false
 * when it must leave plain (it did not compress, or was compressed
 * already). */
static bool
write_compressed(compress_codec *z, weft_ctx *ctx, const void *raw, size_t len,
                 weft_write_cb cb, void *cb_arg)
{
	if (starts_compressed(raw, len))
		return false;
	if (len <= WEFT__CODEC_COPY_MAX
	        ? write_small(z, ctx, raw, len, cb, cb_arg)
	        : write_large(z, ctx, raw, len, cb, cb_arg))
		return true;
	back_off(z);
	return false;
}

static void
compress_write(weft_ctx *ctx, const weft_msg_type *type, void *msg,
               weft_write_cb cb, void *cb_arg)
{
	compress_codec *z = weft_ctx_state(ctx);
	const void *raw;
	size_t len;

	if (!weft_msg_is_bytes(type)) {
		weft_ctx_write(ctx, type, msg, cb, cb_arg);
		return;
	}
	len = weft_msg_length(type, msg);
	if (should_compress(z, len)) {
		if (type == &weft_msg_bytes)
			raw = ((const weft_bytes *)msg)->data;
		else if ((raw = evbuffer_pullup(msg, -1)) == NULL) {
			weft_ctx_fail_write(ctx, type, msg, cb, cb_arg,
			                    WEFT_ENOMEM);
			return;
		}
		if (write_compressed(z, ctx, raw, len, cb, cb_arg)) {
			/* Consumed, as a write's message is. */
			if (type == &weft_msg_evbuffer)
				evbuffer_drain(msg, len);
			return;
		}
	}
	count_out(z, len, len);
	weft_ctx_write(ctx, type, msg, cb, cb_arg);
}

/*
 * In-place writes. A body that leaves plain (alg NONE, below min_bytes,
 * or skipped) is written straight into the next handler's room. One that
 * may compress gets the second half of a reservation of twice its size,
 * and its compressed form is written into the first half at commit: no
 * buffer of the codec's, and a copy of the body only when it does not
 * compress.
 */
static void *
compress_reserve(weft_ctx *ctx, size_t n)
{
	compress_codec *z = weft_ctx_state(ctx);

	z->rsv = NULL;
	if (z->alg == WEFT_COMPRESS_NONE || n < z->min_bytes ||
	    z->skip_left > 0 || n > WEFT_FRAME_LIMIT)
		return weft_ctx_reserve(ctx, n);
	if ((z->rsv = weft_ctx_reserve(ctx, 2 * n)) == NULL)
		return NULL;
	z->rsv_n = n;
	return z->rsv + n;
}

static void
compress_commit(weft_ctx *ctx, size_t used, weft_write_cb cb, void *cb_arg)
{
	compress_codec *z = weft_ctx_state(ctx);
	unsigned char *p = z->rsv;
	long n = 0;

	z->rsv = NULL;
	if (p == NULL) {
		(void)should_compress(z, used); /* counts a skip */
		count_out(z, used, used);
		commit_next(z, ctx, used, cb, cb_arg);
		return;
	}
	if (should_compress(z, used) &&
	    !starts_compressed(p + z->rsv_n, used) &&
	    (n = deflate_into(p, used - 1, z->alg, z->level, z->max_ratio,
	                      p + z->rsv_n, used)) <= 0) {
		back_off(z);
		n = 0;
	}
	if (n == 0) {
		/* Plain after all: the body moves to the front. */
		memcpy(p, p + z->rsv_n, used);
		n = (long)used;
	}
	count_out(z, used, (size_t)n);
	commit_next(z, ctx, (size_t)n, cb, cb_arg);
}

static const weft_handler compress_handler = {
    .removed = weft__codec_removed,
    .read = compress_read,
    .read_complete = compress_read_complete,
    .write = compress_write,
    .flush = weft__codec_flush,
    .reserve = compress_reserve,
    .commit = compress_commit,
};

/* Reads opts into z; WEFT_EINVAL for an unknown alg or accept bit, or a
 * max_ratio below 2. */
static int
opts_resolve(compress_codec *z, const weft_compress_codec_opts *opts)
{
	z->min_bytes = WEFT_COMPRESS_DEFAULT_MIN;
	z->max_body_bytes = WEFT_FRAME_LIMIT;
	z->max_ratio = WEFT_COMPRESS_DEFAULT_RATIO;
	z->backoff = 1;
	if (opts == NULL)
		return 0;
	if (!alg_is_known(opts->alg) || (opts->accept & ~KNOWN) != 0 ||
	    (opts->max_ratio != 0 && opts->max_ratio < 2))
		return WEFT_EINVAL;
	z->alg = opts->alg;
	z->level = opts->level;
	z->accept =
	    (opts->accept != 0 ? opts->accept : ALG_BIT(opts->alg)) & DECODABLE;
	if (opts->min_bytes != 0)
		z->min_bytes = opts->min_bytes;
	z->max_body_bytes = body_limit(opts->max_body_bytes);
	if (opts->max_ratio != 0)
		z->max_ratio = opts->max_ratio;
	z->base.quiet = opts->quiet;
	return 0;
}

static int
compress_codec_add(weft_channel *ch, const char *base, const char *name,
                   const weft_compress_codec_opts *opts)
{
	compress_codec *z;
	int rv;

	if ((z = calloc(1, sizeof(*z))) == NULL)
		return WEFT_ENOMEM;
	if ((rv = opts_resolve(z, opts)) != 0 ||
	    (rv = weft__codec_init(&z->base, WEFT_CODEC_COMPRESS)) != 0) {
		free(z);
		return rv;
	}
	return weft__codec_add(ch, base, name, &compress_handler, &z->base);
}

int
weft_compress_codec_add(weft_channel *ch, const char *name,
                        const weft_compress_codec_opts *opts)
{
	return compress_codec_add(ch, WEFT__CODEC_LAST, name, opts);
}

int
weft_compress_codec_add_after(weft_channel *ch, const char *base,
                              const char *name,
                              const weft_compress_codec_opts *opts)
{
	return compress_codec_add(ch, base, name, opts);
}

int
weft_compress_codec_get_stats(weft_channel *ch, const char *name,
                              weft_compress_stats *out)
{
	weft__codec *c;
	int rv;

	if ((rv = weft__codec_find(ch, name, WEFT_CODEC_COMPRESS, &c)) != 0)
		return rv;
	*out = ((compress_codec *)c)->cstats;
	return 0;
}
