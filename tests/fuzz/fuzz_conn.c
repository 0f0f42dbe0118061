/* SPDX-License-Identifier: MIT */
/*
 * fuzz_conn.c: whole messaging connections against an in-process node
 * (conn_node.c), driven by a script the input spells out: the kind of
 * target that finds lifecycle bugs (a callback owed to a connection that
 * is gone, a counter that never comes back), not only parser bugs.
 *
 * The client speaks raw TCP on this thread, with two connection slots.
 * Each connection opens with a HELLO the input shapes (usually a valid
 * client's). Then each op byte picks, for slot (op >> 7):
 *   request / one-way / response frames (verb, payload, expiry from the
 *   input), frames with a bad CRC, a bad length or a garbage envelope, raw
 *   bytes; a write of everything queued in one go or in pieces; a sync (an
 *   echo request, then reading until it is answered); reading or not;
 *   shutting down the write side; closing; reconnecting; releasing the
 *   requests the node holds; cancels (protocol version 2, which the
 *   ordinary HELLO offers) of our own requests, of ids nobody asked, and
 *   in storms. The ordinary HELLO asks for chunks and LZ4 too: requests
 *   go in chunks of any size, compressed, with sizes that lie, as the
 *   input says; what the node sends in chunks or compressed is put
 *   together here and must follow the document.
 * What the node sends back must be well-formed, and no request may be
 * answered twice or with another verb; an echo must echo. At the end every
 * connection closes and the node must come back to rest (no connection
 * open, no inbound bytes counted in flight) and still answer a new client.
 * ASan sees the rest. An input's script runs for at most SCRIPT_MS, so no
 * input takes near the fuzzer's timeout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>

#include <weft/crc32c.h>

#include "conn_node.h"
#include "fuzz.h"
#include "msvc_int.h"

#define SLOTS 2
#define SEQS 1024
/* Our request ids: a tag in the top bits, then a sequence number. */
#define ID_TAG 0x5eed000000000000ull
#define ID_MASK 0x0000ffffffffffffull
#define SYNC_MS 300  /* a sync in the script: the node may be paused */
#define LIVE_MS 5000 /* the last one, which must be answered */
#define REST_MS 5000
#define MAX_OPS 200
/* The script's share of an input's time. Its waits are bounded one by one
 * (a sync, a flush, a read), but 200 of them added up to a minute when
 * the node rightly stopped answering (its requests held, reading paused),
 * past scripts/fuzz.sh's 30 s timeout; the ops left when this is spent
 * are skipped. What follows the script (the closes, the node coming to
 * rest, a fresh client served) is bounded by REST_MS and LIVE_MS. */
#define SCRIPT_MS 8000
/* Payloads run a little past the node's largest frame. */
#define MAX_PAYLOAD (3u * 0x7fff)
/* Past this the client writes what it has queued, so that its own memory
 * stays small next to the node's. */
#define TX_MAX (256u << 10)
/* What the node may hold: its limits (conn_node.c) leave it a few MiB. */
#define NODE_HEAP_BOUND (8u << 20)

enum seq_state { SEQ_FREE, SEQ_ASKED, SEQ_ANSWERED };

struct seq {
	uint8_t state;
	uint32_t verb;
	uint32_t crc; /* of the payload, to check an echo */
	uint32_t len;
};

struct slot {
	int fd;
	bool reading;    /* false: the node's answers pile up */
	bool eof;        /* the node closed it */
	bool replied;    /* the handshake reply came */
	uint64_t stages; /* the reply's flags: chunks, LZ4 (PROTOCOL.md 2.1) */
	int version;     /* the reply's protocol version */
	struct evbuffer *tx, *rx;
	/* A message the node sends in chunks, being put together. */
	struct evbuffer *assembly;
	uint64_t assembly_total;
	uint32_t assembly_msg;
	bool assembling;
	uint32_t next_seq;
	struct seq seqs[SEQS];
};

struct run {
	struct conn_node node;
	struct slot slots[SLOTS];
	fuzz_input in;
	bool trace; /* FUZZ_TRACE set: each op on stderr, to read a crash */
};

static const char *const op_names[] = {
    "request",   "oneway",  "response",     "bad-crc", "bad-length",
    "garbage",   "raw",     "hello",        "flush",   "flush-pieces",
    "sync",      "read",    "stop-reading", "shut-wr", "close",
    "reconnect", "release", "cancel"};

/* ---- Frames the client writes ------------------------------------------ */

static void
add_frame(struct slot *s, const void *body, size_t n, bool bad_crc)
{
	uint8_t hdr[4], crc[4];
	uint32_t c;

	weft__store_be32(hdr, (uint32_t)n);
	c = weft_crc32c(0, hdr, 4);
	c = weft_crc32c(c, body, n);
	weft__store_be32(crc, bad_crc ? ~c : c);
	evbuffer_add(s->tx, hdr, 4);
	evbuffer_add(s->tx, body, n);
	evbuffer_add(s->tx, crc, 4);
}

static void
add_hello(struct run *r, struct slot *s, uint8_t shape)
{
	static const char *const ids[] = {"c1", "c2", "n2", "n1", "", "x y"};
	struct weft__msvc_hello h = {
	    .min_version = 1, .max_version = 2, .role = 1, .cls = 1};
	struct evbuffer *buf = evbuffer_new();

	snprintf(h.cluster, sizeof(h.cluster), "%s",
	         shape & 0x80 ? "other" : "fuzz");
	/* A client of this release asks for chunks and LZ4. */
	h.flags =
	    WEFT__MSVC_HELLO_CHUNKS | WEFT__MSVC_HELLO_ALG(WEFT_COMPRESS_LZ4);
	/* Low bits 0: the ordinary client; others bend one field each. */
	snprintf(h.id, sizeof(h.id), "%s", ids[(shape >> 4) & 1]);
	/* Bit 5: a client of version 1, to which a cancel is malformed. */
	if (shape & 0x20)
		h.max_version = 1;
	switch (shape & 0x0f) {
	case 1: /* a member's id, as a member */
	case 2: /* the node's own id */
		snprintf(h.id, sizeof(h.id), "%s", ids[1 + (shape & 0x0f)]);
		h.role = 0;
		break;
	case 3:
		h.cls = fuzz_u8(&r->in) % 5;
		break;
	case 4:
		h.min_version = fuzz_u8(&r->in);
		h.max_version = fuzz_u8(&r->in);
		break;
	case 5:
		snprintf(h.id, sizeof(h.id), "%s", ids[4 + (shape >> 6 & 1)]);
		break;
	case 6:
		h.role = fuzz_u8(&r->in);
		h.index = fuzz_u32(&r->in);
		h.flags = fuzz_u8(&r->in);
		break;
	default:
		break;
	}
	if (buf == NULL || weft__msvc_hello_encode(buf, &h) != 0)
		abort();
	add_frame(s, evbuffer_pullup(buf, -1), evbuffer_get_length(buf), false);
	evbuffer_free(buf);
}

static uint32_t
pick_verb(uint8_t b)
{
	static const uint32_t verbs[] = {VERB_ECHO,  VERB_ECHO_BLOCK,
	                                 VERB_HOLD,  VERB_SINK,
	                                 VERB_FAIL,  VERB_SILENT,
	                                 VERB_TWICE, 0,
	                                 99,         WEFT_MSVC_MAX_VERBS + 7};

	return verbs[b % (sizeof(verbs) / sizeof(verbs[0]))];
}

/* A payload of the length the input asks for (up to a little past the
 * node's largest frame), from the input as far as it goes. */
static size_t
payload(struct run *r, uint8_t *buf, size_t cap)
{
	uint16_t want = fuzz_u16(&r->in);
	size_t n = want >> 15 ? (size_t)(want & 0x7fff) * 3 : want & 0xff;
	const uint8_t *p;
	size_t got;

	if (n > cap)
		n = cap;
	got = fuzz_bytes(&r->in, n < 64 ? n : 64, &p);
	if (got > 0)
		memcpy(buf, p, got);
	for (size_t i = got; i < n; i++)
		buf[i] = (uint8_t)(i * 7);
	return n;
}

/* Expiry: none, already past, or a little ahead. */
static uint64_t
expiry(uint8_t b)
{
	switch (b & 3) {
	case 1:
		return 1;
	case 2:
		return weft_wall_ms() + 50;
	default:
		return 0;
	}
}

/* Adds body as one frame, compressed (LZ4, when the handshake agreed on
 * it and how asks: bit 4) and with its size lying by one (bit 5). */
static void
add_body(struct slot *s, uint8_t how, const uint8_t *body, size_t n,
         bool bad_crc)
{
	struct evbuffer *z;
	uint8_t *p;
	long zn;

	if (!(how & 0x10) ||
	    !(s->stages & WEFT__MSVC_HELLO_ALG(WEFT_COMPRESS_LZ4)) ||
	    (z = evbuffer_new()) == NULL) {
		add_frame(s, body, n, bad_crc);
		return;
	}
	zn = weft_compress_encode(z, WEFT_COMPRESS_LZ4, 0, 0, body, n);
	if (zn <= 0) {
		add_frame(s, body, n, bad_crc);
	} else {
		p = evbuffer_pullup(z, -1);
		if (how & 0x20)
			weft__store_be32(p + 3, (uint32_t)n + 1);
		add_frame(s, p, (size_t)zn, bad_crc);
	}
	evbuffer_free(z);
}

/* Adds a message's body: in chunks of a size the input picks when the
 * handshake agreed on them and how asks (bit 3), else as one frame. */
static void
add_chunked(struct run *r, struct slot *s, uint8_t how, const uint8_t *body,
            size_t n, bool bad_crc)
{
	size_t chunk, at = 0;
	uint32_t msg;
	uint8_t *f;

	if (!(how & 0x08) || !(s->stages & WEFT__MSVC_HELLO_CHUNKS)) {
		add_body(s, how, body, n, bad_crc);
		return;
	}
	chunk = 1 + fuzz_u16(&r->in) % (CONN_NODE_MAX_FRAME - 64);
	msg = fuzz_u8(&r->in);
	if ((f = malloc(WEFT_CHUNK_FIRST_HEADER_BYTES + chunk)) == NULL)
		abort();
	while (at < n) {
		size_t k = n - at < chunk ? n - at : chunk, h = 7;

		f[0] = WEFT_WRAPPED_MARK;
		f[1] = WEFT_WRAPPED_CHUNK;
		f[2] = (uint8_t)((at == 0 ? WEFT_CHUNK_FIRST : 0) |
		                 (at + k == n ? WEFT_CHUNK_LAST : 0));
		weft__store_be32(f + 3, msg);
		if (at == 0) {
			weft__store_be32(f + 7, 0);
			weft__store_be32(f + 11, (uint32_t)n);
			h = WEFT_CHUNK_FIRST_HEADER_BYTES;
		}
		memcpy(f + h, body + at, k);
		add_body(s, how, f, h + k, bad_crc);
		at += k;
	}
	free(f);
}

static void
add_message(struct run *r, struct slot *s, uint32_t kind, bool bad_crc)
{
	uint8_t *body = malloc(WEFT_ENVELOPE_HEADER_BYTES + MAX_PAYLOAD);
	weft_envelope env;
	uint8_t how;
	uint32_t verb;
	uint64_t id;
	size_t len;
	struct seq *q;

	if (body == NULL)
		abort();
	/* The input spells: how, verb, payload length and bytes, id. */
	how = fuzz_u8(&r->in);
	verb = pick_verb(fuzz_u8(&r->in));
	len = payload(r, body + WEFT_ENVELOPE_HEADER_BYTES, MAX_PAYLOAD);
	id = fuzz_u32(&r->in);
	if (kind == WEFT__MSVC_F_REQUEST && s->next_seq < SEQS) {
		q = &s->seqs[s->next_seq];
		id = ID_TAG | s->next_seq++;
		*q = (struct seq){
		    SEQ_ASKED, verb,
		    weft_crc32c(0, body + WEFT_ENVELOPE_HEADER_BYTES, len),
		    (uint32_t)len};
	}
	if (kind == WEFT__MSVC_F_RESPONSE && (how & 4))
		kind |= WEFT__MSVC_F_ERROR;
	env = (weft_envelope){.id = id,
	                      .verb = verb,
	                      .flags = kind,
	                      .created_ms = weft_wall_ms(),
	                      .expires_ms = expiry(how)};
	weft_envelope_encode_header(body, &env, (uint32_t)len);
	if (r->trace)
		fprintf(stderr,
		        "  kind %u verb %u id %llx len %zu expiry %d%s%s%s%s\n",
		        kind, verb, (unsigned long long)id, len, how & 3,
		        bad_crc ? " bad crc" : "", how & 8 ? " chunked" : "",
		        how & 0x10 ? " lz4" : "", how & 0x20 ? " lying" : "");
	add_chunked(r, s, how, body, WEFT_ENVELOPE_HEADER_BYTES + len, bad_crc);
	free(body);
}

/* Cancels: of one of our requests (answered or not), of an id nobody
 * asked, with the verb it had or another; up to 64 in a row. */
static void
add_cancels(struct run *r, struct slot *s)
{
	uint8_t how = fuzz_u8(&r->in), body[WEFT_ENVELOPE_HEADER_BYTES];
	unsigned n = how & 0x80 ? 1 + (how & 0x3f) : 1, i;
	weft_envelope env = {.flags = WEFT__MSVC_F_CANCEL};
	uint32_t seq;

	for (i = 0; i < n; i++) {
		seq = fuzz_u16(&r->in) % SEQS;
		env.id = how & 0x40 ? fuzz_u32(&r->in) : ID_TAG | seq;
		env.verb = s->seqs[seq].state != SEQ_FREE && !(how & 0x20)
		               ? s->seqs[seq].verb
		               : pick_verb(fuzz_u8(&r->in));
		env.created_ms = weft_wall_ms();
		weft_envelope_encode_header(body, &env, 0);
		add_frame(s, body, sizeof(body), false);
	}
	if (r->trace)
		fprintf(stderr, "  %u cancels\n", n);
}

static void
add_bad_length(struct run *r, struct slot *s)
{
	static const uint32_t lens[] = {0, 1, 7, CONN_NODE_MAX_FRAME + 1,
	                                UINT32_MAX};
	uint8_t hdr[4];

	weft__store_be32(hdr, lens[fuzz_u8(&r->in) % 5]);
	evbuffer_add(s->tx, hdr, 4);
}

/* A frame with a valid CRC around bytes that are not an envelope (or,
 * now and then, are one). */
static void
add_garbage(struct run *r, struct slot *s)
{
	const uint8_t *p;
	size_t n = fuzz_bytes(&r->in, fuzz_u8(&r->in) % 64, &p);

	add_frame(s, p, n, false);
}

static void
add_raw(struct run *r, struct slot *s)
{
	const uint8_t *p;
	size_t n = fuzz_bytes(&r->in, 1 + fuzz_u8(&r->in) % 32, &p);

	evbuffer_add(s->tx, p, n);
}

/* ---- Reading what the node sends --------------------------------------- */

static void
check_response(struct slot *s, const weft_envelope *env)
{
	uint64_t seq = env->id & ID_MASK;
	struct seq *q;

	if ((env->id & ~ID_MASK) != ID_TAG || seq >= SEQS)
		return; /* not one of ours (raw bytes may make requests) */
	q = &s->seqs[seq];
	if (q->state != SEQ_ASKED)
		fuzz_fail("request %llu answered %s", (unsigned long long)seq,
		          q->state == SEQ_ANSWERED ? "twice" : "unasked");
	q->state = SEQ_ANSWERED;
	if (env->verb != q->verb)
		fuzz_fail("request %llu of verb %u answered as verb %u",
		          (unsigned long long)seq, q->verb, env->verb);
	if ((q->verb == VERB_ECHO || q->verb == VERB_ECHO_BLOCK) &&
	    !(env->flags & WEFT__MSVC_F_ERROR) &&
	    (env->payload_len != q->len ||
	     weft_crc32c(0, env->payload, env->payload_len) != q->crc))
		fuzz_fail("an echo came back changed");
}

static void
take_envelope(struct slot *s, const uint8_t *p, size_t len)
{
	weft_envelope env;

	/* In version 2 an answer has params: its stage times. */
	if (weft_envelope_decode_version(p, len, s->version, &env) != 0)
		fuzz_fail("the node sent a malformed envelope");
	if (env.flags & WEFT__MSVC_F_RESPONSE)
		check_response(s, &env);
}

/* A chunk the node sent: it must follow the document, every time. */
static void
take_chunk(struct slot *s, const uint8_t *p, size_t len)
{
	uint8_t flags;
	uint32_t msg;
	size_t h = WEFT_CHUNK_HEADER_BYTES;

	if (!(s->stages & WEFT__MSVC_HELLO_CHUNKS))
		fuzz_fail("the node sent a chunk where none were agreed");
	if (len < h)
		fuzz_fail("the node sent a chunk cut short");
	flags = p[2];
	msg = (uint32_t)weft__load_be(p + 3, 4);
	if ((flags & ~3u) != 0 || flags == 3)
		fuzz_fail("the node sent a chunk with flags %#x", flags);
	if (flags & WEFT_CHUNK_FIRST) {
		if (s->assembling || len < WEFT_CHUNK_FIRST_HEADER_BYTES)
			fuzz_fail("the node began a message in the middle of "
			          "another");
		h = WEFT_CHUNK_FIRST_HEADER_BYTES;
		s->assembly_total = weft__load_be(p + 7, 8);
		s->assembly_msg = msg;
		s->assembling = true;
	} else if (!s->assembling || msg != s->assembly_msg) {
		fuzz_fail("the node sent a chunk of no message");
	}
	if (len == h ||
	    evbuffer_get_length(s->assembly) + (len - h) > s->assembly_total)
		fuzz_fail("the node sent a chunk empty or past its total");
	evbuffer_add(s->assembly, p + h, len - h);
	if (!(flags & WEFT_CHUNK_LAST))
		return;
	if (evbuffer_get_length(s->assembly) != s->assembly_total)
		fuzz_fail("the node ended a message short of its total");
	take_envelope(s, evbuffer_pullup(s->assembly, -1),
	              (size_t)s->assembly_total);
	evbuffer_drain(s->assembly, evbuffer_get_length(s->assembly));
	s->assembling = false;
}

/* A frame body the node sent after the handshake: compressed, a chunk
 * or an envelope, as the handshake allows. */
static void
take_body(struct slot *s, const uint8_t *p, size_t len)
{
	struct evbuffer *raw;
	const char *why;

	if (len >= 2 && p[0] == WEFT_WRAPPED_MARK &&
	    p[1] == WEFT_WRAPPED_COMPRESSED) {
		if (!(s->stages & WEFT__MSVC_HELLO_ALG(WEFT_COMPRESS_LZ4)) ||
		    (raw = evbuffer_new()) == NULL)
			fuzz_fail("the node sent a compressed frame where none "
			          "was agreed");
		if (weft_compress_decode(raw, p, len, 1u << WEFT_COMPRESS_LZ4,
		                         CONN_NODE_MAX_FRAME, 0, &why) != 0)
			fuzz_fail("the node sent a bad compressed frame: %s",
			          why);
		len = evbuffer_get_length(raw);
		p = evbuffer_pullup(raw, -1);
		if (len >= 2 && p[0] == WEFT_WRAPPED_MARK &&
		    p[1] == WEFT_WRAPPED_CHUNK)
			take_chunk(s, p, len);
		else
			take_envelope(s, p, len);
		evbuffer_free(raw);
	} else if (len >= 2 && p[0] == WEFT_WRAPPED_MARK &&
	           p[1] == WEFT_WRAPPED_CHUNK) {
		take_chunk(s, p, len);
	} else {
		take_envelope(s, p, len);
	}
}

/* Takes one whole frame off s->rx; false when none is there yet. */
static bool
take_frame(struct slot *s)
{
	struct weft__msvc_reply reply;
	uint8_t hdr[4];
	const uint8_t *p;
	size_t len;

	if (evbuffer_copyout(s->rx, hdr, 4) != 4)
		return false;
	len = (size_t)weft__load_be(hdr, 4);
	if (len == 0 || len > CONN_NODE_MAX_FRAME)
		fuzz_fail("the node sent a frame of %zu bytes", len);
	if (evbuffer_get_length(s->rx) < len + 8)
		return false;
	p = evbuffer_pullup(s->rx, (ev_ssize_t)len + 8);
	if (weft_crc32c(0, p, 4 + len) !=
	    (uint32_t)weft__load_be(p + 4 + len, 4))
		fuzz_fail("the node sent a frame with a bad CRC");
	if (!s->replied) {
		if (weft__msvc_reply_decode(p + 4, len, &reply) != 0)
			fuzz_fail("the node sent a malformed reply");
		s->replied = true;
		s->stages = reply.flags;
		s->version = (int)reply.version;
	} else {
		take_body(s, p + 4, len);
	}
	evbuffer_drain(s->rx, len + 8);
	return true;
}

/* Reads what has come, waiting up to wait_ms for something. */
static void
pump(struct slot *s, int wait_ms)
{
	struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
	uint8_t buf[16384];
	ssize_t n;

	if (s->fd < 0 || s->eof || poll(&pfd, 1, wait_ms) <= 0)
		return;
	n = recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		s->eof = true;
		return;
	}
	if (n > 0)
		evbuffer_add(s->rx, buf, (size_t)n);
	while (take_frame(s))
		;
}

/* Writes up to max bytes of s->tx; gives up after a while when the node
 * does not read (it may rightly have paused). */
static void
flush(struct slot *s, size_t max)
{
	struct pollfd pfd = {.fd = s->fd, .events = POLLOUT};
	uint64_t deadline = weft_now_ns() + 500 * 1000000ull;
	size_t left = evbuffer_get_length(s->tx);
	ssize_t n;

	if (left > max)
		left = max;
	while (s->fd >= 0 && left > 0 && weft_now_ns() < deadline) {
		n = send(s->fd, evbuffer_pullup(s->tx, (ev_ssize_t)left), left,
		         MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			evbuffer_drain(s->tx, (size_t)n);
			left -= (size_t)n;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			break;
		} else if (s->reading) {
			pump(s, 5);
		} else {
			poll(&pfd, 1, 5);
		}
	}
	if (left > 0 || s->fd < 0)
		evbuffer_drain(s->tx, evbuffer_get_length(s->tx));
}

/* An echo request, then reading until it is answered, the connection
 * ends or wait_ms pass; true if answered. */
static bool
sync_slot(struct slot *s, uint64_t wait_ms)
{
	uint64_t deadline = weft_now_ns() + wait_ms * 1000000ull;
	uint8_t body[WEFT_ENVELOPE_HEADER_BYTES + 4];
	uint32_t seq = s->next_seq;
	weft_envelope env = {.id = ID_TAG | seq,
	                     .verb = VERB_ECHO,
	                     .flags = WEFT__MSVC_F_REQUEST,
	                     .created_ms = weft_wall_ms()};

	if (s->fd < 0 || seq >= SEQS)
		return false;
	s->next_seq++;
	s->seqs[seq] =
	    (struct seq){SEQ_ASKED, VERB_ECHO, weft_crc32c(0, "sync", 4), 4};
	weft_envelope_encode_header(body, &env, 4);
	memcpy(body + WEFT_ENVELOPE_HEADER_BYTES, "sync", 4);
	add_frame(s, body, sizeof(body), false);
	flush(s, SIZE_MAX);
	while (!s->eof && s->seqs[seq].state == SEQ_ASKED &&
	       weft_now_ns() < deadline)
		pump(s, 10);
	return s->seqs[seq].state == SEQ_ANSWERED;
}

/* ---- Connections -------------------------------------------------------- */

static void
slot_close(struct slot *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	evbuffer_drain(s->tx, evbuffer_get_length(s->tx));
	evbuffer_drain(s->rx, evbuffer_get_length(s->rx));
	evbuffer_drain(s->assembly, evbuffer_get_length(s->assembly));
	s->assembling = false;
	s->stages = 0;
}

static void
slot_open(struct run *r, struct slot *s, uint8_t hello_shape)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons(r->node.port)};
	int one = 1;

	slot_close(s);
	memset(s->seqs, 0, sizeof(s->seqs));
	s->next_seq = 0;
	s->eof = s->replied = false;
	s->reading = true;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((s->fd = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(s->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		fuzz_fail("cannot connect to the node: %s", strerror(errno));
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	add_hello(r, s, hello_shape);
	flush(s, SIZE_MAX);
}

/* ---- The script ---------------------------------------------------------- */

enum op {
	OP_REQUEST,
	OP_ONEWAY,
	OP_RESPONSE,
	OP_BAD_CRC,
	OP_BAD_LENGTH,
	OP_GARBAGE,
	OP_RAW,
	OP_HELLO,
	OP_FLUSH,
	OP_FLUSH_PIECES,
	OP_SYNC,
	OP_READ,
	OP_STOP_READING,
	OP_SHUT_WR,
	OP_CLOSE,
	OP_RECONNECT,
	OP_RELEASE,
	OP_CANCEL,
	OPS
};

_Static_assert(sizeof(op_names) / sizeof(op_names[0]) == OPS,
               "a name for every op");

static void
step(struct run *r, uint8_t op)
{
	struct slot *s = &r->slots[op >> 7];
	size_t piece;

	if (r->trace)
		fprintf(stderr, "op %s slot %d%s\n",
		        op_names[(op & 0x7f) % OPS], op >> 7,
		        s->fd < 0 ? " (closed)" : "");
	if (s->fd < 0 && (op & 0x7f) % OPS != OP_RECONNECT)
		return;
	switch ((enum op)((op & 0x7f) % OPS)) {
	case OP_REQUEST:
		add_message(r, s, WEFT__MSVC_F_REQUEST, false);
		break;
	case OP_ONEWAY:
		add_message(r, s, WEFT__MSVC_F_ONEWAY, false);
		break;
	case OP_RESPONSE:
		add_message(r, s, WEFT__MSVC_F_RESPONSE, false);
		break;
	case OP_BAD_CRC:
		add_message(r, s, WEFT__MSVC_F_REQUEST, true);
		break;
	case OP_BAD_LENGTH:
		add_bad_length(r, s);
		break;
	case OP_GARBAGE:
		add_garbage(r, s);
		break;
	case OP_RAW:
		add_raw(r, s);
		break;
	case OP_HELLO:
		add_hello(r, s, fuzz_u8(&r->in));
		break;
	case OP_FLUSH:
		flush(s, SIZE_MAX);
		break;
	case OP_FLUSH_PIECES:
		piece = 1 + fuzz_u8(&r->in) % 64;
		while (s->fd >= 0 && evbuffer_get_length(s->tx) > 0) {
			flush(s, piece);
			if (s->reading)
				pump(s, 0);
		}
		break;
	case OP_SYNC:
		sync_slot(s, SYNC_MS);
		break;
	case OP_READ:
		pump(s, fuzz_u8(&r->in) % 20);
		break;
	case OP_STOP_READING:
		s->reading = !s->reading;
		break;
	case OP_SHUT_WR:
		flush(s, SIZE_MAX);
		shutdown(s->fd, SHUT_WR);
		break;
	case OP_CLOSE:
		slot_close(s);
		break;
	case OP_RECONNECT:
		slot_open(r, s, fuzz_u8(&r->in));
		break;
	case OP_RELEASE:
		conn_node_release(&r->node);
		break;
	case OP_CANCEL:
		add_cancels(r, s);
		break;
	case OPS:
		break;
	}
	if (evbuffer_get_length(s->tx) > TX_MAX)
		flush(s, SIZE_MAX);
}

/* ---- Coming to rest ------------------------------------------------------ */

static bool
at_rest(struct run *r)
{
	weft_msvc_stats st;

	weft_msvc_get_stats(r->node.svc, &st);
	return st.connections_open == 0 && st.inflight_bytes == 0;
}

/* Every connection closed and every held request answered, the node must
 * let go of everything, and still serve a new client. */
static void
check_rest(struct run *r)
{
	uint64_t deadline = weft_now_ns() + REST_MS * 1000000ull;
	struct slot *s = &r->slots[0];
	weft_msvc_stats st;

	/* A held request may still be on its way in: release again while
	 * waiting. */
	do {
		conn_node_release(&r->node);
		usleep(1000);
	} while (!at_rest(r) && weft_now_ns() < deadline);
	weft_msvc_get_stats(r->node.svc, &st);
	if (!at_rest(r))
		fuzz_fail("the node did not come to rest: %llu connection(s) "
		          "open, %llu inbound byte(s) in flight",
		          (unsigned long long)st.connections_open,
		          (unsigned long long)st.inflight_bytes);
	if (r->node.twice_accepted)
		fuzz_fail("a request was answered twice by its handler");
	r->in = fuzz_input_of(NULL, 0);
	slot_open(r, s, 0);
	if (!sync_slot(s, LIVE_MS))
		fuzz_fail("the node no longer answers a new client");
	slot_close(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run r = {.in = fuzz_input_of(data, size),
	                .trace = getenv("FUZZ_TRACE") != NULL};
	uint64_t script_end;
	int i, ops = 0;

	weft_log_set_level(WEFT_LOG_OFF);
	conn_node_start(&r.node);
	for (i = 0; i < SLOTS; i++) {
		r.slots[i].fd = -1;
		r.slots[i].tx = evbuffer_new();
		r.slots[i].rx = evbuffer_new();
		r.slots[i].assembly = evbuffer_new();
		if (r.slots[i].tx == NULL || r.slots[i].rx == NULL ||
		    r.slots[i].assembly == NULL)
			abort();
	}
	fuzz_alloc_begin();
	script_end = weft_now_ns() + SCRIPT_MS * 1000000ull;
	slot_open(&r, &r.slots[0], fuzz_u8(&r.in));
	while (r.in.left > 0 && ops++ < MAX_OPS && weft_now_ns() < script_end)
		step(&r, fuzz_u8(&r.in));
	if (r.trace && r.in.left > 0 && ops <= MAX_OPS)
		fprintf(stderr, "script: %d ms spent, the rest skipped\n",
		        SCRIPT_MS);
	for (i = 0; i < SLOTS; i++) {
		flush(&r.slots[i], SIZE_MAX);
		slot_close(&r.slots[i]);
	}
	check_rest(&r);
	fuzz_alloc_end_within(NODE_HEAP_BOUND + FUZZ_ALLOC_PER_BYTE * size,
	                      "messaging connections");
	for (i = 0; i < SLOTS; i++) {
		evbuffer_free(r.slots[i].tx);
		evbuffer_free(r.slots[i].rx);
		evbuffer_free(r.slots[i].assembly);
	}
	conn_node_stop(&r.node);
	return 0;
}
