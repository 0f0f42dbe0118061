/* SPDX-License-Identifier: MIT */
/*
 * fixture.h: a channel under test over a bufferevent pair, for the codec
 * tests. The test drives the other end (peer) by hand: bytes written to it
 * reach the channel's pipeline in one read when the loop runs, and bytes
 * the channel writes collect in the peer's input. A sink at the end
 * of the pipeline records what arrives.
 */
#ifndef WEFT_TESTS_CODEC_FIXTURE_H
#define WEFT_TESTS_CODEC_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <weft/channel.h>
#include <weft/codec.h>

struct bufferevent;
struct evbuffer;

#define FX_MAX_MSGS 4096

typedef struct fx {
	weft_loop *loop;
	weft_channel *ch;
	struct bufferevent *peer;
	/* What the sink saw. */
	struct evbuffer *got;     /* every byte message, concatenated */
	size_t lens[FX_MAX_MSGS]; /* the length of each */
	size_t msgs;              /* byte messages read */
	size_t byte_runs;         /* of which came as weft_msg_bytes */
	void *typed[FX_MAX_MSGS]; /* typed messages, owned by the fixture */
	const weft_msg_type *typed_type[FX_MAX_MSGS];
	size_t ntyped;
	size_t read_completes;
	int errors;
	int last_error;
	bool inactive;
	/* User events: how many, the last one's number and, for
	 * WEFT_FRAME_EVENT_INCOMPLETE, its weft_frame_partial. */
	int events;
	int last_event;
	size_t partial_have;
	size_t partial_total;
	int write_cbs;
	int write_status;
	/* Taken by the sink when an error arrives, before the channel goes:
	 * the stats of the codec called stats_name (if set), and the bytes
	 * left in the channel's input. */
	const char *stats_name;
	weft_codec_stats err_stats;
	size_t input_at_error;
} fx;

/* fx_new makes the loop, the pair and the channel (not active yet). */
fx *fx_new(void);
/* fx_start adds the sink last and activates the channel. */
void fx_start(fx *f);
/* fx_free frees everything: typed messages, peer, loop (and channel). */
void fx_free(fx *f);

/* fx_send writes bytes into the peer and runs the loop until they reached
 * the pipeline (in one read). */
void fx_send(fx *f, const void *data, size_t len);
/* fx_peer_close makes the channel see end of stream. */
void fx_peer_close(fx *f);
/* fx_run_until_inactive runs the loop until the channel is gone. */
void fx_run_until_inactive(fx *f);
/* fx_run_until_write_cbs runs the loop until n write callbacks ran. */
void fx_run_until_write_cbs(fx *f, int n);
/* fx_run_until_peer_has runs the loop until the peer got n bytes. */
void fx_run_until_peer_has(fx *f, size_t n);
/* fx_write_cb counts into f (arg) and keeps the last status. */
void fx_write_cb(weft_channel *ch, int status, void *arg);

/* fx_peer_input is what the channel wrote so far (the peer's input). */
struct evbuffer *fx_peer_input(fx *f);

/* fx_msg copies byte message i to buf (of fx->lens[i] bytes). */
void fx_msg(fx *f, size_t i, void *buf);
/* fx_reset forgets the messages seen so far. */
void fx_reset(fx *f);

/* The last warning logged, and how many were; set up by fx_log_capture. */
void fx_log_capture(void);
const char *fx_last_warning(void);
int fx_warnings(void);

/* A deterministic pseudo-random generator for test data. */
uint32_t fx_rand(uint64_t *state);

#endif
