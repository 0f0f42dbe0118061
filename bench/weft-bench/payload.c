/* SPDX-License-Identifier: MIT */
/* payload.c: building and checking weft-bench messages. */
#include <endian.h>
#include <string.h>

#include "wbench.h"

void
wbench_be32_put(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

uint32_t
wbench_be32_get(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

void
wbench_pattern_fill(uint8_t *buf, size_t size, uint64_t seed)
{
	/* xorshift64: any seed but 0 works, so 0 is mapped to another. */
	uint64_t x = seed ? seed : 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < size; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
}

/* splitmix64: the generator of the text and random payloads. */
static uint64_t
next_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void
random_fill(uint8_t *buf, size_t size, uint64_t seed)
{
	uint64_t state = seed, r;
	size_t i = 0;

	for (; i + 8 <= size; i += 8) {
		r = next_rand(&state);
		memcpy(buf + i, &r, 8);
	}
	r = next_rand(&state);
	memcpy(buf + i, &r, size - i);
}

/* The vocabulary of the text payloads: YCSB-like records whose field
 * names repeat and whose values are a few words each. */
static const char *const text_words[] = {
    "alpha",   "bravo",    "charlie", "delta",   "foxtrot", "juliet",
    "oscar",   "sierra",   "active",  "pending", "shipped", "returned",
    "premium", "standard", "europe",  "america"};
static const char *const text_fields[] = {
    "\"name\":\"", "\"city\":\"",    "\"status\":\"", "\"plan\":\"",
    "\"note\":\"", "\"country\":\"", "\"tag\":\"",    "\"owner\":\""};

#define NWORDS (sizeof(text_words) / sizeof(text_words[0]))
#define NFIELDS (sizeof(text_fields) / sizeof(text_fields[0]))

/* A text buffer being filled: bytes past its size are dropped. */
typedef struct text_out {
	uint8_t *buf;
	size_t size, pos;
} text_out;

static void
text_put(text_out *t, const char *s, size_t len)
{
	size_t room = t->size - t->pos;

	memcpy(t->buf + t->pos, s, len < room ? len : room);
	t->pos += len < room ? len : room;
}

static void
text_puts(text_out *t, const char *s)
{
	text_put(t, s, strlen(s));
}

/* text_number writes digits decimal digits of r. */
static void
text_number(text_out *t, uint64_t r, unsigned digits)
{
	char d[20];

	for (unsigned i = 0; i < digits; i++, r /= 10)
		d[digits - 1 - i] = (char)('0' + r % 10);
	text_put(t, d, digits);
}

/* text_record writes record i: its id and time stamp count up, as in a
 * table's scan, and each field holds one or two of four words of its
 * own (which is what makes LZ4 shrink the records about 3.5x). */
static void
text_record(text_out *t, uint64_t i, uint64_t *state)
{
	uint64_t r;

	text_puts(t, "{\"id\":\"user");
	text_number(t, i, 8);
	text_puts(t, "\",");
	for (size_t f = 0; f < NFIELDS; f++) {
		unsigned words;

		r = next_rand(state);
		words = 1 + (unsigned)(r & 1);
		text_puts(t, text_fields[f]);
		for (unsigned w = 0; w < words; w++, r >>= 5) {
			if (w > 0)
				text_put(t, " ", 1);
			text_puts(t,
			          text_words[(2 * f + (r >> 1) % 4) % NWORDS]);
		}
		text_puts(t, "\",");
	}
	text_puts(t, "\"ts\":");
	text_number(t, 1700000000000 + i * 1000 + next_rand(state) % 1000, 13);
	text_puts(t, "}\n");
}

static void
text_fill(uint8_t *buf, size_t size, uint64_t seed)
{
	text_out t = {buf, size, 0};
	uint64_t state = seed;

	for (uint64_t i = seed % 1000000; t.pos < t.size; i++)
		text_record(&t, i, &state);
}

static const char *const payload_names[] = {"pattern", "text", "random"};

const char *
wbench_payload_name(enum wbench_payload kind)
{
	return (unsigned)kind < 3 ? payload_names[kind] : "?";
}

int
wbench_payload_parse(const char *s, enum wbench_payload *out)
{
	for (unsigned i = 0; i < 3; i++)
		if (strcmp(s, payload_names[i]) == 0) {
			*out = (enum wbench_payload)i;
			return 0;
		}
	return -1;
}

void
wbench_payload_fill(uint8_t *buf, size_t size, enum wbench_payload kind,
                    uint64_t seed)
{
	switch (kind) {
	case WBENCH_PAYLOAD_TEXT:
		text_fill(buf, size, seed);
		break;
	case WBENCH_PAYLOAD_RANDOM:
		random_fill(buf, size, seed);
		break;
	default:
		wbench_pattern_fill(buf, size, seed);
	}
}

static size_t
seq_len(size_t size)
{
	return size < WBENCH_SEQ_BYTES ? size : WBENCH_SEQ_BYTES;
}

uint64_t
wbench_seq_mask(size_t size)
{
	size_t n = seq_len(size);

	return n >= 8 ? UINT64_MAX : (UINT64_C(1) << (8 * n)) - 1;
}

void
wbench_seq_put(uint8_t *payload, size_t size, uint64_t seq)
{
	size_t n = seq_len(size);

	if (n == WBENCH_SEQ_BYTES) {
		seq = htobe64(seq);
		memcpy(payload, &seq, sizeof(seq));
		return;
	}

	for (size_t i = 0; i < n; i++)
		payload[i] = (uint8_t)(seq >> (8 * (n - 1 - i)));
}

uint64_t
wbench_seq_get(const uint8_t *payload, size_t size)
{
	size_t n = seq_len(size);
	uint64_t seq = 0;

	if (n == WBENCH_SEQ_BYTES) {
		memcpy(&seq, payload, sizeof(seq));
		return be64toh(seq);
	}

	for (size_t i = 0; i < n; i++)
		seq = seq << 8 | payload[i];
	return seq;
}

void
wbench_scan_init(wbench_scan *s, size_t size, const uint8_t *pattern)
{
	memset(s, 0, sizeof(*s));
	s->size = size;
	s->pattern = pattern;
}

/* check_seq counts a sequence number out of order and follows it, so that
 * every loss or repeat counts once. */
static inline void
check_seq(wbench_scan *s, uint64_t seq)
{
	uint64_t mask = wbench_seq_mask(s->size);

	if (seq != (s->next_seq & mask)) {
		s->errors++;
		s->next_seq = (s->next_seq & ~mask) | seq;
	}
	s->next_seq++;
}

/* check_head checks a frame's length and sequence number. */
static int
check_head(wbench_scan *s, const uint8_t *head)
{
	if (wbench_be32_get(head) != s->size) {
		s->errors++;
		return -1;
	}
	check_seq(s, wbench_seq_get(head + 4, s->size));
	return 0;
}

static void
check_body(wbench_scan *s, const uint8_t *p, size_t n)
{
	if (s->pattern && memcmp(p, s->pattern + s->body_off, n) != 0)
		s->errors++;
	s->body_off += n;
	s->body_left -= n;
	if (s->body_left == 0)
		s->frames++;
}

/* take_head gathers the length and sequence bytes of a frame. Returns the
 * bytes used, or -1 on a wrong length. */
static long
take_head(wbench_scan *s, const uint8_t *p, size_t n)
{
	size_t need = 4 + seq_len(s->size) - s->head_have;
	size_t k = n < need ? n : need;

	memcpy(s->head + s->head_have, p, k);
	s->head_have += k;
	if (k < need)
		return (long)k;
	s->head_have = 0;
	if (check_head(s, s->head) != 0)
		return -1;
	s->body_off = seq_len(s->size);
	s->body_left = s->size - s->body_off;
	if (s->body_left == 0)
		s->frames++;
	return (long)k;
}

/* scan_whole checks the whole frames at p, the common case; returns the
 * bytes used, or -1 on a wrong length. */
static long
scan_whole(wbench_scan *s, const uint8_t *p, size_t n)
{
	size_t frame_len = 4 + s->size, seq_n = seq_len(s->size), used = 0;

	while (n - used >= frame_len) {
		const uint8_t *f = p + used;

		if (wbench_be32_get(f) != s->size) {
			s->errors++;
			return -1;
		}
		check_seq(s, wbench_seq_get(f + 4, s->size));
		if (s->pattern && memcmp(f + 4 + seq_n, s->pattern + seq_n,
		                         s->size - seq_n) != 0)
			s->errors++;
		s->frames++;
		used += frame_len;
	}
	return (long)used;
}

long
wbench_scan_feed(wbench_scan *s, const uint8_t *p, size_t n)
{
	uint64_t before = s->frames;

	while (n > 0) {
		long k;

		if (s->body_left > 0) {
			k = (long)(s->body_left < n ? s->body_left : n);
			check_body(s, p, (size_t)k);
		} else if (s->head_have == 0 && n >= 4 + s->size) {
			k = scan_whole(s, p, n);
		} else {
			k = take_head(s, p, n);
		}
		if (k < 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return (long)(s->frames - before);
}
