/* SPDX-License-Identifier: MIT */
/*
 * codec_bench.c: how fast the codecs go on one core.
 *
 *   weft-codec-bench [-s payload_bytes] [-c chain_bytes] [-k] [-b] [-x]
 *                    [-t secs] [-m decode|encode|crc|envelope|batch|compress]
 *
 * decode: batches of frames arrive in a channel's input in chains of
 * chain_bytes (4096, as libevent 2.1 reads a socket), the frame codec
 * delivers each to one handler, which looks at its first byte and length.
 * encode: one handler writes payloads of that size through the frame codec
 * and flushes once per batch. crc: weft_crc32c of one frame (4 + payload
 * bytes, at every alignment; payloads up to 4092 bytes) and over 64 KiB. -k
 * turns the CRC32C trailer on; -b delivers frames as byte runs (emit_bytes);
 * -x puts a chunk codec (sending chunks) after the frame codec, as every
 * messaging connection of this release has, to time what it costs the
 * messages that pass it whole. Only the delivery is timed, not building
 * the input.
 *
 * The two ways to send envelopes, same bytes on the wire (not run by
 * default): envelope writes each message down the pipeline through the
 * envelope and frame codecs and flushes once per batch, as Netty's
 * encoders do; batch builds each frame in place in one buffer with
 * weft_envelope_put_frame and writes the buffer once per batch, as the
 * messaging service does (and as Cassandra 4.0's messaging serialises
 * into a frame buffer rather than through a per-message encoder).
 *
 * compress (not run by default; try -s 4096): a compression codec after
 * the frame codec, with no algorithm, LZ4 and zstd at their fast
 * defaults, on JSON-like text and on random bytes: raw megabytes per
 * second written (one handler writes and flushes once per batch, as in
 * encode) and read back (the wire bytes of a batch, delivered as in
 * decode), timed in the thread's CPU time, and the wire bytes per raw
 * byte. Random bodies do not
 * compress, and the codec's back-off then skips most of them: the cost
 * of compression on such traffic is the gap to "none".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <weft/chunk.h>
#include <weft/compress.h>
#include <weft/core.h>
#include <weft/crc32c.h>
#include <weft/envelope.h>
#include <weft/frame.h>
#include <weft/transport.h>

#define BATCH_BYTES (256u << 10)

struct bench {
	size_t payload;
	size_t chain;
	bool crc;
	bool emit_bytes;
	bool envelopes; /* an envelope codec after the frame codec */
	bool compress;  /* a compression codec after the frame codec */
	bool chunks;    /* a chunk codec (send on) after it, as a messaging
	                   connection of this release has (-x) */
	int alg;        /* its algorithm */
	double seconds;
	weft_loop *loop;
	weft_channel *ch;
	struct bufferevent *peer;
	uint64_t frames;
	uint64_t bytes;
	uint64_t checksum;
	size_t read_completes;
};

static void
sink_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct bench *b = weft_channel_data(weft_ctx_channel(ctx));
	size_t len = weft_msg_length(type, msg);
	unsigned char first;

	if (weft_msg_copyout(type, msg, &first, 1) == 1)
		b->checksum += first;
	b->frames++;
	b->bytes += len;
}

static void
sink_read_complete(weft_ctx *ctx)
{
	struct bench *b = weft_channel_data(weft_ctx_channel(ctx));

	b->read_completes++;
}

static const weft_handler sink = {
    .read = sink_read,
    .read_complete = sink_read_complete,
};

static void
setup(struct bench *b)
{
	weft_frame_codec_opts o = {.crc32c = b->crc,
	                           .emit_bytes = b->emit_bytes};
	struct bufferevent *pair[2];

	if (weft_loop_new(&b->loop) != 0 ||
	    bufferevent_pair_new(weft_loop_base(b->loop), BEV_OPT_CLOSE_ON_FREE,
	                         pair) != 0 ||
	    weft_channel_new(b->loop, pair[0], NULL, &b->ch) != 0 ||
	    weft_frame_codec_add(b->ch, "frame", &o) != 0 ||
	    (b->compress &&
	     weft_compress_codec_add(
	         b->ch, "compress",
	         &(weft_compress_codec_opts){
	             .alg = b->alg,
	             .accept = (1u << WEFT_COMPRESS_LZ4) |
	                       (1u << WEFT_COMPRESS_ZSTD)}) != 0) ||
	    (b->chunks && weft_chunk_codec_add(
	                      b->ch, "chunk",
	                      &(weft_chunk_codec_opts){.send = true}) != 0) ||
	    (b->envelopes &&
	     weft_envelope_codec_add(b->ch, "envelope", NULL) != 0) ||
	    weft_pipeline_add_last(b->ch, "sink", &sink, NULL) != 0) {
		fprintf(stderr, "set-up failed\n");
		exit(1);
	}
	b->peer = pair[1];
	weft_channel_set_data(b->ch, b);
	bufferevent_enable(b->peer, EV_READ | EV_WRITE);
	weft_channel_activate(b->ch);
}

/* The bytes of one batch of whole frames. */
static unsigned char *
make_frames(struct bench *b, size_t *len)
{
	struct evbuffer *frames = evbuffer_new(), *one = evbuffer_new();
	weft_frame_codec_opts o = {.crc32c = b->crc};
	unsigned char *payload = malloc(b->payload + 1), *bytes;

	memset(payload, 0x5a, b->payload + 1);
	do {
		evbuffer_add(one, payload, b->payload);
		weft_frame_encode(frames, one, &o);
	} while (evbuffer_get_length(frames) < BATCH_BYTES);
	*len = evbuffer_get_length(frames);
	bytes = malloc(*len);
	evbuffer_remove(frames, bytes, *len);
	free(payload);
	evbuffer_free(frames);
	evbuffer_free(one);
	return bytes;
}

/* The batch as it would come from a socket: in chains of b->chain. */
static struct evbuffer *
make_batch(struct bench *b, const unsigned char *bytes, size_t len)
{
	struct evbuffer *batch = evbuffer_new(), *chunk = evbuffer_new();
	size_t off, n;

	for (off = 0; off < len; off += n) {
		n = len - off < b->chain ? len - off : b->chain;
		evbuffer_add(chunk, bytes + off, n);
		evbuffer_add_buffer(batch, chunk);
	}
	evbuffer_free(chunk);
	return batch;
}

struct wait {
	struct bench *b;
	size_t read_completes;
};

static bool
delivered(void *arg)
{
	struct wait *w = arg;

	return w->b->read_completes > w->read_completes;
}

static void
bench_decode(struct bench *b)
{
	uint64_t t0, spent = 0, budget = (uint64_t)(b->seconds * 1e9);
	struct wait w = {b, 0};
	size_t len;
	unsigned char *bytes = make_frames(b, &len);

	while (spent < budget) {
		struct evbuffer *batch = make_batch(b, bytes, len);

		w.read_completes = b->read_completes;
		t0 = weft_now_ns();
		bufferevent_write_buffer(b->peer, batch);
		weft_loop_run_until(b->loop, delivered, &w, 10000);
		spent += weft_now_ns() - t0;
		evbuffer_free(batch);
	}
	free(bytes);
	printf("decode  %7zu B %s%s: %6.2f M frames/s %6.2f GB/s (%.2f ns "
	       "per frame)\n",
	       b->payload, b->crc ? "crc" : "   ",
	       b->emit_bytes ? " bytes" : "", b->frames * 1e3 / spent,
	       (double)b->bytes / spent, (double)spent / b->frames);
}

static void
bench_encode(struct bench *b)
{
	weft_ctx *end = weft_pipeline_get(b->ch, "sink");
	struct evbuffer *p = evbuffer_new(), *in;
	unsigned char *payload = calloc(1, b->payload + 1);
	uint64_t t0, spent = 0, budget = (uint64_t)(b->seconds * 1e9);
	uint64_t frames = 0;
	size_t i, per = BATCH_BYTES / (b->payload + 8) + 1;

	in = bufferevent_get_input(b->peer);
	while (spent < budget) {
		t0 = weft_now_ns();
		for (i = 0; i < per; i++) {
			evbuffer_add(p, payload, b->payload);
			weft_ctx_write(end, &weft_msg_evbuffer, p, NULL, NULL);
		}
		weft_ctx_flush(end);
		spent += weft_now_ns() - t0;
		frames += per;
		/* Let the pair hand the bytes over, then drop them. */
		event_base_loop(weft_loop_base(b->loop), EVLOOP_NONBLOCK);
		evbuffer_drain(in, evbuffer_get_length(in));
	}
	printf("encode  %7zu B %s: %6.2f M frames/s %6.2f GB/s\n", b->payload,
	       b->crc ? "crc" : "   ", frames * 1e3 / spent,
	       (double)frames * b->payload / spent);
	evbuffer_free(p);
	free(payload);
}

/* Lets the pair hand what the channel wrote to the peer, until a turn of
 * the loop moves nothing more, and drops it: the bytes moved. */
static size_t
hand_over(struct bench *b, struct evbuffer *in)
{
	size_t got = 0, n;

	do {
		event_base_loop(weft_loop_base(b->loop), EVLOOP_NONBLOCK);
		n = evbuffer_get_length(in);
		evbuffer_drain(in, n);
		got += n;
	} while (n > 0);
	return got;
}

/* One batch of envelopes, each of b->payload bytes, sent the pipeline's
 * way (per message, through the codecs) or the batch way (in place into
 * one buffer, written once): messages per second. */
static void
bench_envelopes(struct bench *b, bool batch)
{
	weft_ctx *end = weft_pipeline_get(b->ch, "sink");
	/* Writes from the frame codec's context go on past it, unframed. */
	weft_ctx *below = weft_pipeline_get(b->ch, "frame");
	unsigned char *payload = calloc(1, b->payload + 1), *buf;
	uint64_t t0, spent = 0, budget = (uint64_t)(b->seconds * 1e9);
	uint64_t msgs = 0, wire = 0;
	size_t i, used, per = 64, cap;
	struct evbuffer *tx = evbuffer_new(), *in;
	weft_envelope env = {.verb = 7,
	                     .created_ms = 1700000000000ull,
	                     .payload = payload,
	                     .payload_len = b->payload};

	cap = per * WEFT_ENVELOPE_FRAME_BYTES(b->payload, true);
	buf = malloc(cap);
	in = bufferevent_get_input(b->peer);
	while (spent < budget) {
		t0 = weft_now_ns();
		used = 0;
		for (i = 0; i < per; i++) {
			env.id = msgs + i;
			if (batch)
				used += weft_envelope_put_frame(buf + used,
				                                &env, b->crc);
			else
				weft_ctx_write(end, &weft_msg_envelope, &env,
				               NULL, NULL);
		}
		if (batch) {
			evbuffer_add(tx, buf, used);
			weft_ctx_write(below, &weft_msg_evbuffer, tx, NULL,
			               NULL);
			weft_ctx_flush(below);
		} else {
			weft_ctx_flush(end);
		}
		spent += weft_now_ns() - t0;
		msgs += per;
		wire += hand_over(b, in);
	}
	printf("%s %7zu B %s: %6.2f M envelopes/s (%.1f ns per envelope, "
	       "batches of %zu, %.1f bytes each on the wire)\n",
	       batch ? "batch   " : "envelope", b->payload,
	       b->crc ? "crc" : "   ", msgs * 1e3 / spent, (double)spent / msgs,
	       per, (double)wire / msgs);
	free(buf);
	free(payload);
	evbuffer_free(tx);
}

/* JSON-like text (it compresses a few times over), or random bytes. */
static void
fill_payload(unsigned char *p, size_t n, bool text)
{
	static const char *const words[] = {
	    "{\"id\":",     "\"name\":\"weft\",", "\"verb\":16,",
	    "\"ok\":true,", "\"items\":[1,2,3],", "}\n"};
	uint64_t s = 42;
	size_t k = 0, len;
	const char *w;

	while (k < n) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		if (!text) {
			p[k++] = (unsigned char)(s >> 33);
			continue;
		}
		w = words[(s >> 33) % 6];
		len = strlen(w) < n - k ? strlen(w) : n - k;
		memcpy(p + k, w, len);
		k += len;
	}
}

/* This thread's CPU time: the compress mode's clock, so that other work on
 * a busy machine does not count. */
static uint64_t
cpu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Lets the pair hand over what the channel wrote, as hand_over does, and
 * keeps it in keep (emptied first). */
static void
hand_over_keep(struct bench *b, struct evbuffer *in, struct evbuffer *keep)
{
	size_t n;

	evbuffer_drain(keep, evbuffer_get_length(keep));
	do {
		event_base_loop(weft_loop_base(b->loop), EVLOOP_NONBLOCK);
		n = evbuffer_get_length(in);
		evbuffer_remove_buffer(in, keep, n);
	} while (n > 0);
}

/* Writes batches of payloads through the pipeline for b->seconds, keeping
 * the wire bytes of the last batch in wire. Returns raw bytes per
 * nanosecond, and the wire bytes per raw byte in *ratio. */
static double
compress_encode(struct bench *b, const unsigned char *payload,
                struct evbuffer *wire, double *ratio)
{
	weft_ctx *end = weft_pipeline_get(b->ch, "sink");
	struct evbuffer *p = evbuffer_new();
	struct evbuffer *in = bufferevent_get_input(b->peer);
	uint64_t t0, spent = 0, budget = (uint64_t)(b->seconds * 1e9);
	uint64_t raw = 0, wire_bytes = 0;
	size_t i, per = BATCH_BYTES / (b->payload + 8) + 1;

	while (spent < budget) {
		t0 = cpu_now_ns();
		for (i = 0; i < per; i++) {
			evbuffer_add(p, payload, b->payload);
			weft_ctx_write(end, &weft_msg_evbuffer, p, NULL, NULL);
		}
		weft_ctx_flush(end);
		spent += cpu_now_ns() - t0;
		raw += per * b->payload;
		hand_over_keep(b, in, wire);
		wire_bytes += evbuffer_get_length(wire);
	}
	*ratio = (double)wire_bytes / raw;
	evbuffer_free(p);
	return (double)raw / spent;
}

/* Delivers the wire bytes of one batch again and again for b->seconds, as
 * bench_decode does. Returns raw bytes per nanosecond. */
static double
compress_decode(struct bench *b, struct evbuffer *wire)
{
	uint64_t t0, spent = 0, budget = (uint64_t)(b->seconds * 1e9);
	size_t len = evbuffer_get_length(wire);
	unsigned char *bytes = malloc(len);
	struct wait w = {b, 0};
	uint64_t bytes0 = b->bytes;

	evbuffer_copyout(wire, bytes, len);
	while (spent < budget) {
		struct evbuffer *batch = make_batch(b, bytes, len);

		w.read_completes = b->read_completes;
		t0 = cpu_now_ns();
		bufferevent_write_buffer(b->peer, batch);
		weft_loop_run_until(b->loop, delivered, &w, 10000);
		spent += cpu_now_ns() - t0;
		evbuffer_free(batch);
	}
	free(bytes);
	return (double)(b->bytes - bytes0) / spent;
}

/* One pipeline with alg, on payload: prints what it measured if asked. */
static void
compress_one(struct bench *b, const unsigned char *payload, bool text,
             struct evbuffer *wire, bool print)
{
	double enc, dec, ratio;

	setup(b);
	enc = compress_encode(b, payload, wire, &ratio);
	dec = compress_decode(b, wire);
	if (print)
		printf("compress %-4s %-6s %7zu B: encode %8.1f MB/s, decode "
		       "%8.1f MB/s (CPU time), wire/raw %.3f\n",
		       weft_compress_name(b->alg), text ? "text" : "random",
		       b->payload, enc * 1e3, dec * 1e3, ratio);
	bufferevent_free(b->peer);
	weft_loop_free(b->loop);
}

/*
 * Every algorithm on text and on random bytes, a pipeline each, after a
 * shorter round of them all unmeasured: the first runs of a process pay
 * for the allocator settling (glibc maps large buffers afresh until its
 * mmap threshold has grown), which would count against whichever ran
 * first.
 */
static void
bench_compress(struct bench *b)
{
	unsigned char *payload = malloc(b->payload + 1);
	struct evbuffer *wire = evbuffer_new();
	double seconds = b->seconds;
	int round, text;

	b->compress = true;
	for (round = 0; round < 2; round++) {
		b->seconds = round == 0 ? seconds / 4 : seconds;
		for (text = 1; text >= 0; text--) {
			fill_payload(payload, b->payload, text);
			for (b->alg = WEFT_COMPRESS_NONE;
			     b->alg <= WEFT_COMPRESS_ZSTD; b->alg++)
				compress_one(b, payload, text, wire,
				             round == 1);
		}
	}
	evbuffer_free(wire);
	free(payload);
}

static void
bench_crc(double seconds)
{
	static unsigned char buf[64 << 10];
	uint64_t t0 = weft_now_ns(), n = 0, spent;
	uint32_t crc = 0;

	memset(buf, 0xa5, sizeof(buf));
	do {
		crc = weft_crc32c(crc, buf, sizeof(buf));
		n++;
		spent = weft_now_ns() - t0;
	} while (spent < (uint64_t)(seconds * 1e9));
	printf("crc32c  64 KiB: %6.2f GB/s (%08x)\n",
	       (double)n * sizeof(buf) / spent, crc);
}

/*
 * The CRC32C of one frame of len bytes (length field and payload), as the
 * codec computes it per frame, at every offset from 8-byte alignment in
 * turn: nanoseconds per frame. Each CRC starts from the last one's result,
 * so that the time is that of one CRC after another (its latency), not
 * of many overlapped by the CPU.
 */
static void
bench_crc_frame(size_t len, double seconds)
{
	static unsigned char buf[4096 + 8];
	uint64_t t0 = weft_now_ns(), n = 0, spent;
	uint32_t crc = 0;
	size_t i;

	if (len > 4096)
		return;
	memset(buf, 0x5a, sizeof(buf));
	do {
		for (i = 0; i < 4096; i++)
			crc = weft_crc32c(crc, buf + (i & 7), len);
		n += 4096;
		spent = weft_now_ns() - t0;
	} while (spent < (uint64_t)(seconds * 1e9));
	printf("crc32c %5zu B: %6.2f ns per frame, any alignment (%08x)\n", len,
	       (double)spent / (double)n, crc);
}

int
main(int argc, char **argv)
{
	struct bench b = {.payload = 64, .chain = 4096, .seconds = 1.0};
	const char *only = "";
	int c;

	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("weft-codec-bench %s\n", weft_version());
		return 0;
	}
	while ((c = getopt(argc, argv, "s:c:kbxt:m:")) != -1) {
		switch (c) {
		case 'x':
			b.chunks = true;
			break;
		case 'b':
			b.emit_bytes = true;
			break;
		case 'm':
			only = optarg;
			break;
		case 's':
			b.payload = strtoul(optarg, NULL, 0);
			break;
		case 'c':
			b.chain = strtoul(optarg, NULL, 0);
			break;
		case 'k':
			b.crc = true;
			break;
		case 't':
			b.seconds = strtod(optarg, NULL);
			break;
		default:
			fprintf(
			    stderr,
			    "usage: %s [-s payload] [-c chain] "
			    "[-k] [-b] [-x] [-t seconds] "
			    "[-m decode|encode|crc|envelope|batch|compress]\n",
			    argv[0]);
			return 2;
		}
	}
	if (b.chain == 0 || b.payload > WEFT_FRAME_DEFAULT_MAX)
		return 2;
	if (strcmp(only, "compress") == 0) {
		bench_compress(&b);
		return 0;
	}
	b.envelopes =
	    strcmp(only, "envelope") == 0 || strcmp(only, "batch") == 0;
	setup(&b);
	if (b.envelopes)
		bench_envelopes(&b, strcmp(only, "batch") == 0);
	if (*only == '\0' || strcmp(only, "decode") == 0)
		bench_decode(&b);
	if (*only == '\0' || strcmp(only, "encode") == 0)
		bench_encode(&b);
	if (*only == '\0' || strcmp(only, "crc") == 0) {
		bench_crc_frame(WEFT_FRAME_HEADER_BYTES + b.payload,
		                b.seconds / 2);
		bench_crc(b.seconds / 2);
	}
	bufferevent_free(b.peer);
	weft_loop_free(b.loop);
	return b.frames > 0 && b.checksum == 0 && b.payload > 0 ? 1 : 0;
}
