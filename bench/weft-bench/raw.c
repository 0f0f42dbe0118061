/* SPDX-License-Identifier: MIT */
/*
 * raw.c: the raw-socket reference, the ceiling weft is compared against.
 * Blocking sockets; the sender writes pre-built frames in large batches with
 * write(), the receiver reads into a large buffer and parses; ping-pong is a
 * blocking write and read per round trip.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <weft/histogram.h>

#include "wbench.h"

#define RAW_READ_BYTES (256u << 10)
#define RAW_BATCH_BYTES (64u << 10)

/* make_frames builds n frames of the run's size: length, then pattern. */
static uint8_t *
make_frames(const wbench_opts *o, size_t n)
{
	size_t frame_len = 4 + o->size;
	uint8_t *buf = malloc(n * frame_len);

	if (buf == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		wbench_be32_put(buf + i * frame_len, (uint32_t)o->size);
		wbench_pattern_fill(buf + i * frame_len + 4, o->size, o->seed);
	}
	return buf;
}

static uint8_t *
make_pattern(const wbench_opts *o)
{
	uint8_t *p = malloc(o->size ? o->size : 1);

	if (p != NULL)
		wbench_pattern_fill(p, o->size, o->seed);
	return p;
}

/* raw_receive reads frames until the warm-up and the count have arrived;
 * the window opens at the read that completes the first measured
 * message. */
static int
raw_receive(const wbench_opts *o, int fd, wbench_result *res)
{
	uint64_t warm = o->warmup_by_time ? UINT64_MAX : o->warmup_count;
	uint64_t start_ns = 0, start_frames = 0, first_ns = 0, last;
	uint8_t *buf = malloc(RAW_READ_BYTES), *pattern = make_pattern(o);
	wbench_progress prog;
	wbench_scan scan;
	int rv = -1;

	if (buf == NULL || pattern == NULL)
		goto out;
	wbench_scan_init(&scan, o->size, o->verify ? pattern : NULL);
	wbench_progress_init(&prog, o, "raw");
	while (warm == UINT64_MAX || scan.frames < warm + o->count) {
		uint64_t before = scan.frames, now;
		ssize_t n = read(fd, buf, RAW_READ_BYTES);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || wbench_scan_feed(&scan, buf, (size_t)n) < 0)
			break;
		now = wbench_now_ns();
		first_ns = first_ns || !scan.frames ? first_ns : now;
		if (warm == UINT64_MAX &&
		    wbench_warmup_over(o, before, first_ns, now))
			warm = before;
		if (start_ns == 0 && warm != UINT64_MAX && scan.frames > warm) {
			start_ns = now;
			start_frames = scan.frames;
		}
		res->seconds = (double)(now - start_ns) / 1e9;
		wbench_progress_tick(&prog, now, scan.frames, NULL);
	}
	res->received = scan.frames;
	res->warmup = warm == UINT64_MAX ? scan.frames : warm;
	res->errors = scan.errors + (scan.frames < res->warmup + o->count);
	/* Frames read past the run's end are checked, not measured; a run
	 * that ended in the read that opened its window measured none. */
	last = scan.frames < res->warmup + o->count ? scan.frames
	                                            : res->warmup + o->count;
	res->measured =
	    start_ns && last > start_frames ? last - start_frames : 0;
	wbench_result_rates(res, o->size);
	rv = scan.frames >= res->warmup + o->count ? 0 : -1;
	if (rv != 0)
		fprintf(stderr, "weft-bench: raw: %llu of %llu messages\n",
		        (unsigned long long)scan.frames,
		        (unsigned long long)(res->warmup + o->count));
out:
	free(pattern);
	free(buf);
	return rv;
}

/* raw_ping sends one frame at a time and waits for its echo. */
static int
raw_ping(const wbench_opts *o, int fd, uint8_t *frame, uint8_t *echo,
         weft_histogram *h, wbench_result *res)
{
	size_t frame_len = 4 + o->size;
	uint64_t warm = o->warmup_by_time ? UINT64_MAX : o->warmup_count;
	uint64_t first_ns = 0, begin_ns = wbench_now_ns(), now = begin_ns;
	uint64_t cpu_ns = 0;
	wbench_progress prog;
	wbench_scan scan;

	wbench_scan_init(&scan, o->size, o->verify ? frame + 4 : NULL);
	wbench_progress_init(&prog, o, "raw");
	for (uint64_t i = 0; warm == UINT64_MAX || i < warm + o->count; i++) {
		uint64_t t0;

		if (warm == UINT64_MAX &&
		    wbench_warmup_over(o, i, begin_ns, now))
			warm = i;
		wbench_seq_put(frame + 4, o->size, i);
		t0 = wbench_now_ns();
		if (wbench_write_all(fd, frame, frame_len) != 0 ||
		    wbench_read_all(fd, echo, frame_len) != 0 ||
		    wbench_scan_feed(&scan, echo, frame_len) != 1)
			break;
		now = wbench_now_ns();
		if (warm != UINT64_MAX && i >= warm) {
			weft_histogram_record(h, now - t0);
			if (first_ns == 0) {
				first_ns = t0;
				cpu_ns = wbench_cpu_ns();
			}
		}
		wbench_progress_tick(&prog, now, weft_histogram_count(h), h);
	}
	res->received = scan.frames;
	res->warmup = warm == UINT64_MAX ? scan.frames : warm;
	res->errors = scan.errors + (scan.frames < res->warmup + o->count);
	res->measured = weft_histogram_count(h);
	res->seconds = first_ns ? (double)(now - first_ns) / 1e9 : 0;
	if (first_ns && res->measured > 0)
		res->cpu_us = (double)(wbench_cpu_ns() - cpu_ns) / 1e3 /
		              (double)res->measured;
	wbench_result_rates(res, o->size);
	wbench_result_latency(res, h);
	return scan.frames == res->warmup + o->count ? 0 : -1;
}

static int
raw_latency(const wbench_opts *o, int fd, wbench_result *res)
{
	uint8_t *frame = make_frames(o, 1);
	uint8_t *echo = malloc(4 + o->size);
	weft_histogram *h = NULL;
	int rv = -1;

	if (frame == NULL || echo == NULL || weft_histogram_new(&h) != 0)
		goto out;
	rv = raw_ping(o, fd, frame, echo, h, res);
	if (rv != 0)
		fprintf(stderr,
		        "weft-bench: raw: ping-pong failed after "
		        "%llu round trips\n",
		        (unsigned long long)res->received);
out:
	weft_histogram_free(h);
	free(echo);
	free(frame);
	return rv;
}

int
wbench_raw_measure(const wbench_opts *o, wbench_ready_cb ready, void *arg,
                   wbench_result *res)
{
	char bound[160];
	int lfd, fd, rv = -1;

	memset(res, 0, sizeof(*res));
	if ((lfd = wbench_listen(o->addr, bound, sizeof(bound))) < 0)
		return -1;
	if (ready != NULL && ready(bound, arg) != 0)
		goto out_listen;
	if ((fd = wbench_accept(lfd, o->timeout_ms)) < 0)
		goto out_listen;
	if (o->workload == WBENCH_THROUGHPUT)
		rv = raw_receive(o, fd, res);
	else
		rv = raw_latency(o, fd, res);
	close(fd);
out_listen:
	close(lfd);
	return rv;
}

/* send_some writes len bytes without blocking past the deadline: 0 when
 * written, 1 when the receiver has closed (the end of the run), -1 on an
 * error or at the deadline. */
static int
send_some(int fd, const uint8_t *p, size_t len, uint64_t deadline_ns)
{
	while (len > 0) {
		struct pollfd pfd = {fd, POLLOUT | POLLIN, 0};
		ssize_t n;

		if (wbench_now_ns() > deadline_ns)
			return -1;
		if (poll(&pfd, 1, 100) < 0 && errno != EINTR)
			return -1;
		/* The receiver never writes: input is its close. */
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
			return 1;
		if (!(pfd.revents & POLLOUT))
			continue;
		n = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
			return 1;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		}
	}
	return 0;
}

/* raw_send writes frames in batches until the receiver, which counts
 * them, closes the connection (or --timeout passes). */
static int
raw_send(const wbench_opts *o, int fd)
{
	size_t frame_len = 4 + o->size;
	size_t per_batch = RAW_BATCH_BYTES / frame_len;
	uint64_t deadline = wbench_now_ns() + o->timeout_ms * 1000000u;
	uint64_t sent = 0;
	uint8_t *buf;
	int rv = 0;

	per_batch = per_batch ? per_batch : 1;
	if ((buf = make_frames(o, per_batch)) == NULL)
		return -1;
	while (rv == 0) {
		for (size_t i = 0; i < per_batch; i++)
			wbench_seq_put(buf + i * frame_len + 4, o->size,
			               sent + i);
		rv = send_some(fd, buf, per_batch * frame_len, deadline);
		sent += per_batch;
	}
	free(buf);
	return rv == 1 ? 0 : -1;
}

/* raw_echo reads whatever arrived and writes back every whole frame. */
static int
raw_echo(const wbench_opts *o, int fd)
{
	size_t cap = 4 + o->size + RAW_READ_BYTES, have = 0;
	uint8_t *buf = malloc(cap);
	int rv = -1;

	while (buf != NULL) {
		ssize_t n = read(fd, buf + have, cap - have);
		size_t off = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rv = n == 0 ? 0 : -1;
			break;
		}
		have += (size_t)n;
		while (have - off >= 4 &&
		       have - off >= 4 + (size_t)wbench_be32_get(buf + off)) {
			size_t len = 4 + wbench_be32_get(buf + off);

			if (wbench_write_all(fd, buf + off, len) != 0)
				goto out;
			off += len;
		}
		if (have - off >= 4 && wbench_be32_get(buf + off) > o->size)
			break; /* a frame we cannot hold: not ours */
		memmove(buf, buf + off, have - off);
		have -= off;
	}
out:
	free(buf);
	return rv;
}

int
wbench_raw_load(const wbench_opts *o)
{
	int fd = wbench_connect(o->addr, o->timeout_ms), rv;

	if (fd < 0)
		return -1;
	if (o->workload == WBENCH_THROUGHPUT)
		rv = raw_send(o, fd);
	else
		rv = raw_echo(o, fd);
	close(fd);
	return rv;
}
