/* SPDX-License-Identifier: MIT */
/*
 * echo.h: handlers the transport tests share. An echo server that sends
 * back every byte, a checking client that streams numbered bytes through
 * it and checks each one, a sink that counts what it reads, and the small
 * callbacks that record how a connect, a write or a server close ended.
 */
#ifndef WEFT_TESTS_TRANSPORT_ECHO_H
#define WEFT_TESTS_TRANSPORT_ECHO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <weft/channel.h>
#include <weft/transport.h>

/* The byte at offset i of every test stream. */
static inline uint8_t
echo_pattern(uint64_t i)
{
	return (uint8_t)((i * 2654435761u) >> 13);
}

/* Server side: counts channels across loop threads. */
typedef struct echo_server {
	atomic_int channels; /* init calls */
	atomic_int inactive; /* inactive events */
	atomic_llong bytes;  /* bytes echoed */
	weft_loop_group *group;
	atomic_int per_loop[4]; /* channels per group loop (by index) */
	atomic_int nodelay;     /* TCP channels with TCP_NODELAY set */
} echo_server;

/* echo_server_init is a weft_channel_init_cb; arg is an echo_server. */
int echo_server_init(weft_channel *ch, void *arg);

/* Client side: streams msgs_total messages, at most window bytes ahead
 * of what came back, and checks every byte. Raise msgs_total and fire a
 * user event on the channel to send more. Loop thread of the client. */
typedef struct echo_client {
	uint64_t msgs_total;
	uint64_t window;
	uint64_t msgs_sent;
	uint64_t bytes_sent;
	uint64_t bytes_recv;
	uint64_t mismatches;
	uint64_t reads;
	weft_channel *ch;
	int connect_status;
	bool connected;
	bool active;
	bool inactive;
} echo_client;

/* echo_client_init is a weft_channel_init_cb; arg is an echo_client. */
int echo_client_init(weft_channel *ch, void *arg);
/* echo_client_done: everything sent came back (or the channel died); arg
 * is an echo_client, so that it is also a condition for
 * weft_test_run_until. */
bool echo_client_done(void *arg);
/* echo_client_connected is a weft_connect_cb; arg is an echo_client. */
void echo_client_connected(weft_channel *ch, int status, void *arg);

/* A sink: counts and checks the bytes it reads; can pause reading. */
typedef struct echo_sink {
	uint64_t bytes;
	uint64_t mismatches;
	uint64_t reads;
	weft_channel *ch;
	bool start_paused;
	bool inactive;
} echo_sink;

int echo_sink_init(weft_channel *ch, void *arg);

/* echo_notify_init adds a handler named "notify" that counts the
 * channel's inactive events in *inactive (which outlives the channel) and
 * passes them on. Loop thread of the channel. */
int echo_notify_init(weft_channel *ch, atomic_int *inactive);

/* How one asynchronous call ended, for one loop thread. */
typedef struct echo_result {
	int calls;  /* callbacks so far */
	int status; /* the last one's status */
	weft_channel *ch;
} echo_result;

/* echo_result_cb is a weft_connect_cb and a weft_write_cb; arg is an
 * echo_result. */
void echo_result_cb(weft_channel *ch, int status, void *arg);
/* echo_result_set: the echo_result arg has had its callback. */
bool echo_result_set(void *arg);

/* echo_server_closed is a weft_server_close_cb; arg is an atomic_int
 * that it increments. */
void echo_server_closed(weft_server *srv, void *arg);

/*
 * echo_loop is the loop of a test that runs on one loop of its own:
 * echo_loop_setup makes it and echo_loop_teardown frees it (and sets it
 * back to NULL). Both are cmocka fixtures; state is not used. The test's
 * thread.
 */
extern weft_loop *echo_loop;
int echo_loop_setup(void **state);
int echo_loop_teardown(void **state);

#endif
