/* SPDX-License-Identifier: MIT */
/* test_pipeline.c: channels and their pipelines over a bufferevent pair. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include <weft/channel.h>
#include <weft/transport.h>

#include "support/wait.h"

struct fixture {
	weft_loop *loop;
	weft_channel *ch;         /* the channel under test */
	struct bufferevent *peer; /* the other end, driven by hand */
	char log[512];
	int write_cbs;
	int write_status;
};

static void
note(struct fixture *f, const char *what)
{
	strncat(f->log, what, sizeof(f->log) - strlen(f->log) - 1);
}

static int
setup(void **state)
{
	struct bufferevent *pair[2];
	struct fixture *f = calloc(1, sizeof(*f));

	assert_int_equal(weft_loop_new(&f->loop), 0);
	assert_int_equal(bufferevent_pair_new(weft_loop_base(f->loop),
	                                      BEV_OPT_CLOSE_ON_FREE, pair),
	                 0);
	assert_int_equal(weft_channel_new(f->loop, pair[0], NULL, &f->ch), 0);
	weft_channel_set_data(f->ch, f);
	f->peer = pair[1];
	bufferevent_enable(f->peer, EV_READ | EV_WRITE);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	if (f->peer != NULL)
		bufferevent_free(f->peer);
	weft_loop_free(f->loop);
	free(f);
	return 0;
}

static struct fixture *
fx(weft_ctx *ctx)
{
	return weft_channel_data(weft_ctx_channel(ctx));
}

/* A recording handler: notes each event with its state string as a tag. */
static void
rec_active(weft_ctx *ctx)
{
	note(fx(ctx), weft_ctx_state(ctx));
	note(fx(ctx), ".active ");
	weft_ctx_fire_active(ctx);
}

static void
rec_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	note(fx(ctx), weft_ctx_state(ctx));
	note(fx(ctx), ".read ");
	weft_ctx_fire_read(ctx, type, msg);
}

static void
rec_inactive(weft_ctx *ctx)
{
	note(fx(ctx), weft_ctx_state(ctx));
	note(fx(ctx), ".inactive ");
	weft_ctx_fire_inactive(ctx);
}

static void
rec_write(weft_ctx *ctx, const weft_msg_type *type, void *msg, weft_write_cb cb,
          void *arg)
{
	note(fx(ctx), weft_ctx_state(ctx));
	note(fx(ctx), ".write ");
	weft_ctx_write(ctx, type, msg, cb, arg);
}

static void
rec_removed(weft_ctx *ctx)
{
	note(fx(ctx), weft_ctx_state(ctx));
	note(fx(ctx), ".removed ");
}

static const weft_handler recorder = {
    .removed = rec_removed,
    .active = rec_active,
    .read = rec_read,
    .inactive = rec_inactive,
    .write = rec_write,
};

/* A sink at the end that keeps every byte it reads. */
static void
sink_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct evbuffer *kept = weft_ctx_state(ctx);

	assert_ptr_equal(type, &weft_msg_evbuffer);
	evbuffer_add_buffer(kept, msg);
}

static const weft_handler sink = {.read = sink_read};

static bool
log_has(void *arg)
{
	struct fixture *f = arg;

	return strstr(f->log, "C.read") != NULL;
}

static void
on_write_done(weft_channel *ch, int status, void *arg)
{
	struct fixture *f = arg;

	(void)ch;
	f->write_cbs++;
	f->write_status = status;
}

static void
test_events_travel_head_to_tail_and_writes_tail_to_head(void **state)
{
	struct fixture *f = *state;
	struct evbuffer *kept = evbuffer_new();
	struct evbuffer *out = evbuffer_new();

	assert_int_equal(weft_pipeline_add_last(f->ch, "B", &recorder, "B"), 0);
	assert_int_equal(weft_pipeline_add_first(f->ch, "A", &recorder, "A"),
	                 0);
	assert_int_equal(
	    weft_pipeline_add_after(f->ch, "B", "C", &recorder, "C"), 0);
	assert_int_equal(weft_pipeline_add_last(f->ch, "sink", &sink, kept), 0);
	assert_int_equal(weft_pipeline_add_last(f->ch, "A", &recorder, "X"),
	                 WEFT_EEXIST);
	weft_channel_activate(f->ch);
	bufferevent_write(f->peer, "ping", 4);
	assert_int_equal(weft_loop_run_until(f->loop, log_has, f, 5000), 0);
	assert_string_equal(f->log,
	                    "A.active B.active C.active A.read B.read C.read ");
	assert_int_equal(evbuffer_get_length(kept), 4);

	f->log[0] = '\0';
	evbuffer_add(out, "pong", 4);
	assert_int_equal(weft_channel_write(f->ch, out, on_write_done, f), 0);
	assert_int_equal(evbuffer_get_length(out), 0);
	assert_int_equal(f->write_cbs, 0); /* never inside the call */
	assert_string_equal(f->log, "C.write B.write A.write ");
	evbuffer_free(out);
	evbuffer_free(kept);
}

/* A handshake handler that, on its first message, replaces itself with
 * the application handler and passes the message on. */
static void
handshake_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct evbuffer *kept = weft_ctx_state(ctx);
	weft_channel *ch = weft_ctx_channel(ctx);

	note(fx(ctx), "handshake ");
	assert_int_equal(
	    weft_pipeline_replace(ch, "handshake", "app", &sink, kept), 0);
	assert_null(weft_pipeline_get(ch, "handshake"));
	/* ctx is retired but still valid until this callback returns. */
	weft_ctx_fire_read(ctx, type, msg);
}

static const weft_handler handshake = {.read = handshake_read};

static bool
has_8_bytes(void *arg)
{
	return evbuffer_get_length(arg) >= 8;
}

static void
test_handler_replaces_itself_inside_a_callback(void **state)
{
	struct fixture *f = *state;
	struct evbuffer *kept = evbuffer_new();

	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "handshake", &handshake, kept), 0);
	weft_channel_activate(f->ch);
	bufferevent_write(f->peer, "1234", 4);
	assert_int_equal(weft_loop_run_until(f->loop, log_has, f, 50),
	                 WEFT_ETIMEDOUT);
	bufferevent_write(f->peer, "5678", 4);
	assert_int_equal(weft_loop_run_until(f->loop, has_8_bytes, kept, 5000),
	                 0);
	assert_string_equal(f->log, "handshake ");
	assert_non_null(weft_pipeline_get(f->ch, "app"));
	evbuffer_free(kept);
}

static void
removing_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	note(fx(ctx), "once ");
	weft_ctx_remove(ctx);
	weft_ctx_remove(ctx); /* idempotent */
	weft_ctx_fire_read(ctx, type, msg);
}

static const weft_handler remove_once = {.read = removing_read};

static void
test_handler_removes_itself_and_still_forwards(void **state)
{
	struct fixture *f = *state;
	struct evbuffer *kept = evbuffer_new();

	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "once", &remove_once, NULL), 0);
	assert_int_equal(weft_pipeline_add_last(f->ch, "sink", &sink, kept), 0);
	weft_channel_activate(f->ch);
	bufferevent_write(f->peer, "abcd", 4);
	bufferevent_write(f->peer, "efgh", 4);
	assert_int_equal(weft_loop_run_until(f->loop, has_8_bytes, kept, 5000),
	                 0);
	assert_string_equal(f->log, "once ");
	assert_int_equal(weft_pipeline_remove(f->ch, "once"), WEFT_ENOTFOUND);
	evbuffer_free(kept);
}

static const weft_handler reads_only = {.read = rec_read};
static const weft_handler writes_only = {.write = rec_write};

/* On the first read, puts N right after itself and takes Y out, then
 * passes the read on: it must reach N and not Y. */
static void
rearranging_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	weft_channel *ch = weft_ctx_channel(ctx);

	note(fx(ctx), "M.read ");
	if (weft_pipeline_get(ch, "N") == NULL) {
		assert_int_equal(
		    weft_pipeline_add_after(ch, "M", "N", &reads_only, "N"), 0);
		assert_int_equal(weft_pipeline_remove(ch, "Y"), 0);
	}
	weft_ctx_fire_read(ctx, type, msg);
}

static const weft_handler rearranger = {.read = rearranging_read};

static bool
has_4_bytes(void *arg)
{
	return evbuffer_get_length(arg) >= 4;
}

/* Each event goes straight to the next handler that handles it, also
 * after handlers come and go inside a callback. */
static void
test_events_skip_the_handlers_that_do_not_handle_them(void **state)
{
	static const char *const names[] = {"A", "W1", "M", "X", "Y", "W2"};
	const weft_handler *kinds[] = {&reads_only, &writes_only,
	                               &rearranger, &writes_only,
	                               &reads_only, &writes_only};
	struct fixture *f = *state;
	struct evbuffer *kept = evbuffer_new();
	struct evbuffer *out = evbuffer_new();
	size_t i;

	for (i = 0; i < 6; i++)
		assert_int_equal(weft_pipeline_add_last(f->ch, names[i],
		                                        kinds[i],
		                                        (void *)names[i]),
		                 0);
	assert_int_equal(weft_pipeline_add_last(f->ch, "sink", &sink, kept), 0);
	weft_channel_activate(f->ch);
	bufferevent_write(f->peer, "ping", 4);
	assert_int_equal(weft_loop_run_until(f->loop, has_4_bytes, kept, 5000),
	                 0);
	assert_string_equal(f->log, "A.read M.read N.read ");

	f->log[0] = '\0';
	evbuffer_add(out, "pong", 4);
	assert_int_equal(weft_channel_write(f->ch, out, NULL, NULL), 0);
	assert_string_equal(f->log, "W2.write X.write W1.write ");

	f->log[0] = '\0';
	assert_int_equal(weft_pipeline_remove(f->ch, "X"), 0);
	assert_int_equal(
	    weft_pipeline_replace(f->ch, "W2", "R2", &reads_only, "R2"), 0);
	evbuffer_add(out, "pong", 4);
	assert_int_equal(weft_channel_write(f->ch, out, NULL, NULL), 0);
	assert_string_equal(f->log, "W1.write ");
	evbuffer_drain(kept, 4);
	bufferevent_write(f->peer, "ping", 4);
	assert_int_equal(weft_loop_run_until(f->loop, has_4_bytes, kept, 5000),
	                 0);
	assert_string_equal(f->log, "W1.write A.read M.read N.read R2.read ");
	evbuffer_free(out);
	evbuffer_free(kept);
}

struct writability {
	int changes;
	bool writable;
};

static void
on_writability(weft_ctx *ctx, bool writable)
{
	struct writability *w = weft_ctx_state(ctx);

	w->changes++;
	w->writable = writable;
}

static const weft_handler watcher = {.writability_changed = on_writability};

static bool
is_writable_again(void *arg)
{
	return ((struct writability *)arg)->writable;
}

static void
test_water_marks_toggle_writability(void **state)
{
	struct fixture *f = *state;
	weft_channel_opts opts = {.high_water_bytes = 4096,
	                          .low_water_bytes = 1024};
	struct bufferevent *pair[2];
	struct writability w = {0, true};
	struct evbuffer *out = evbuffer_new();
	char chunk[1000];
	weft_channel *ch;
	int i;

	memset(chunk, 'x', sizeof(chunk));
	assert_int_equal(bufferevent_pair_new(weft_loop_base(f->loop),
	                                      BEV_OPT_CLOSE_ON_FREE, pair),
	                 0);
	assert_int_equal(weft_channel_new(f->loop, pair[0], &opts, &ch), 0);
	assert_int_equal(weft_pipeline_add_last(ch, "watch", &watcher, &w), 0);
	weft_channel_activate(ch);
	bufferevent_disable(pair[1], EV_READ); /* a peer that stops reading */
	for (i = 0; i < 4; i++) {
		evbuffer_add(out, chunk, sizeof(chunk));
		weft_channel_write(ch, out, NULL, NULL);
		assert_true(weft_channel_is_writable(ch));
	}
	evbuffer_add(out, chunk, sizeof(chunk));
	weft_channel_write(ch, out, NULL, NULL);
	assert_false(weft_channel_is_writable(ch));
	assert_int_equal(w.changes, 1);
	assert_int_equal(weft_channel_pending_write_bytes(ch), 5000);

	bufferevent_enable(pair[1], EV_READ); /* the peer reads again */
	assert_int_equal(
	    weft_loop_run_until(f->loop, is_writable_again, &w, 5000), 0);
	assert_int_equal(w.changes, 2);
	assert_true(weft_channel_is_writable(ch));
	assert_int_equal(evbuffer_get_length(bufferevent_get_input(pair[1])),
	                 5000);
	weft_channel_close(ch);
	bufferevent_free(pair[1]);
	evbuffer_free(out);
}

static bool
write_cb_ran(void *arg)
{
	return ((struct fixture *)arg)->write_cbs > 0;
}

static void
test_write_callback_runs_once_after_bytes_leave(void **state)
{
	struct fixture *f = *state;
	struct evbuffer *out = evbuffer_new();

	weft_channel_activate(f->ch);
	evbuffer_add(out, "hello", 5);
	assert_int_equal(weft_channel_write(f->ch, out, on_write_done, f), 0);
	assert_int_equal(weft_loop_run_until(f->loop, write_cb_ran, f, 5000),
	                 0);
	assert_int_equal(f->write_cbs, 1);
	assert_int_equal(f->write_status, 0);
	assert_int_equal(evbuffer_get_length(bufferevent_get_input(f->peer)),
	                 5);
	evbuffer_free(out);
}

struct mybox {
	int value;
	int *freed;
};

static void
mybox_free(void *msg)
{
	struct mybox *b = msg;

	(*b->freed)++;
	free(b);
}

static const weft_msg_type mybox_type = {"mybox", mybox_free};

static void
test_typed_message_at_the_head_fails_and_is_freed(void **state)
{
	struct fixture *f = *state;
	struct mybox *b = malloc(sizeof(*b));
	int freed = 0;

	b->value = 1;
	b->freed = &freed;
	weft_channel_activate(f->ch);
	assert_int_equal(
	    weft_channel_write_msg(f->ch, &mybox_type, b, on_write_done, f), 0);
	assert_int_equal(freed, 1);
	assert_int_equal(weft_loop_run_until(f->loop, write_cb_ran, f, 5000),
	                 0);
	assert_int_equal(f->write_status, WEFT_EINVAL);
}

static bool
inactive_seen(void *arg)
{
	return strstr(((struct fixture *)arg)->log, "R.inactive") != NULL;
}

static void
test_close_drains_pending_writes_then_fires_inactive(void **state)
{
	struct fixture *f = *state;
	struct evbuffer *out = evbuffer_new();
	char big[100000];

	memset(big, 'y', sizeof(big));
	assert_int_equal(weft_pipeline_add_last(f->ch, "R", &recorder, "R"), 0);
	weft_channel_activate(f->ch);
	bufferevent_disable(f->peer, EV_READ);
	evbuffer_add(out, big, sizeof(big));
	weft_channel_write(f->ch, out, on_write_done, f);
	weft_channel_close(f->ch);
	weft_channel_close(f->ch); /* idempotent */
	assert_false(weft_channel_is_open(f->ch));
	assert_null(strstr(f->log, "inactive"));
	bufferevent_enable(f->peer, EV_READ);
	assert_int_equal(weft_loop_run_until(f->loop, inactive_seen, f, 5000),
	                 0);
	assert_int_equal(f->write_cbs, 1);
	assert_int_equal(f->write_status, 0);
	assert_int_equal(evbuffer_get_length(bufferevent_get_input(f->peer)),
	                 sizeof(big));
	assert_non_null(strstr(f->log, "R.removed"));
	evbuffer_free(out);
}

static void
test_peer_close_fires_inactive_and_fails_waiting_writes(void **state)
{
	struct fixture *f = *state;
	struct evbuffer *out = evbuffer_new();

	assert_int_equal(weft_pipeline_add_last(f->ch, "R", &recorder, "R"), 0);
	weft_channel_activate(f->ch);
	bufferevent_disable(f->peer, EV_READ);
	evbuffer_add(out, "stuck", 5);
	weft_channel_write(f->ch, out, on_write_done, f);
	bufferevent_flush(f->peer, EV_WRITE, BEV_FINISHED); /* EOF */
	bufferevent_free(f->peer);
	f->peer = NULL;
	assert_int_equal(weft_loop_run_until(f->loop, inactive_seen, f, 5000),
	                 0);
	assert_int_equal(weft_loop_run_until(f->loop, write_cb_ran, f, 5000),
	                 0);
	assert_int_equal(f->write_cbs, 1);
	assert_int_equal(f->write_status, WEFT_ECLOSED);
	evbuffer_free(out);
}

/*
 * A handler that closes its channel and then writes in the same callback
 * (the write fails: the channel is closing) must hear about that write
 * before it is removed, never after: its state is freed in removed.
 */
static void
on_owner_write_done(weft_channel *ch, int status, void *arg)
{
	struct fixture *f = weft_channel_data(ch);

	(void)arg;
	f->write_cbs++;
	f->write_status = status;
	note(f, "W.write_cb ");
}

static void
closer_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	weft_bytes b = {"late", 4};

	(void)type;
	(void)msg;
	weft_ctx_close(ctx);
	weft_ctx_write(ctx, &weft_msg_bytes, &b, on_owner_write_done, NULL);
	weft_ctx_flush(ctx);
}

static const weft_handler closer = {
    .removed = rec_removed,
    .read = closer_read,
};

static bool
removed_seen(void *arg)
{
	return strstr(((struct fixture *)arg)->log, "W.removed") != NULL;
}

static void
test_write_callback_runs_before_its_handler_is_removed(void **state)
{
	struct fixture *f = *state;
	const char *cb, *removed;

	assert_int_equal(weft_pipeline_add_last(f->ch, "W", &closer, "W"), 0);
	weft_channel_activate(f->ch);
	bufferevent_write(f->peer, "x", 1);
	assert_int_equal(weft_loop_run_until(f->loop, removed_seen, f, 5000),
	                 0);
	cb = strstr(f->log, "W.write_cb");
	removed = strstr(f->log, "W.removed");
	assert_non_null(cb);
	assert_true(cb < removed);
	assert_int_equal(f->write_cbs, 1);
	assert_int_equal(f->write_status, WEFT_ECLOSED);
}

#define CROSS_WRITES 2000

struct cross {
	weft_channel *ch;
	_Atomic int done;
};

static void
count_cross(weft_channel *ch, int status, void *arg)
{
	struct cross *c = arg;

	(void)ch;
	assert_int_equal(status, 0);
	atomic_fetch_add(&c->done, 1);
}

static void *
cross_writer(void *arg)
{
	struct cross *c = arg;
	struct evbuffer *out = evbuffer_new();
	uint32_t i;

	/* Wait until the main thread drives the loop: an idle loop belongs
	 * to whichever thread uses it. */
	while (weft_loop_in_thread(weft_channel_loop(c->ch)))
		sched_yield();
	for (i = 0; i < CROSS_WRITES; i++) {
		weft_bytes b = {&i, sizeof(i)};

		/* Alternate the two byte kinds; both are taken at once. */
		if (i % 2 == 0) {
			evbuffer_add(out, &i, sizeof(i));
			assert_int_equal(
			    weft_channel_write(c->ch, out, count_cross, c), 0);
		} else {
			assert_int_equal(
			    weft_channel_write_msg(c->ch, &weft_msg_bytes, &b,
			                           count_cross, c),
			    0);
		}
	}
	evbuffer_free(out);
	return NULL;
}

static bool
cross_done(void *arg)
{
	return atomic_load(&((struct cross *)arg)->done) == CROSS_WRITES;
}

static void
test_write_from_another_thread_arrives_in_order(void **state)
{
	struct fixture *f = *state;
	struct cross c = {f->ch, 0};
	struct evbuffer *in = bufferevent_get_input(f->peer);
	pthread_t thread;
	uint32_t i, v;

	weft_channel_activate(f->ch);
	weft_channel_ref(f->ch);
	pthread_create(&thread, NULL, cross_writer, &c);
	assert_int_equal(weft_loop_run_until(f->loop, cross_done, &c, 20000),
	                 0);
	pthread_join(thread, NULL);
	assert_int_equal(evbuffer_get_length(in), CROSS_WRITES * 4);
	for (i = 0; i < CROSS_WRITES; i++) {
		evbuffer_remove(in, &v, sizeof(v));
		assert_int_equal(v, i);
	}
	weft_channel_unref(f->ch);
}

static void
test_byte_runs_are_copied_on_write_and_measured(void **state)
{
	struct fixture *f = *state;
	struct evbuffer *in = bufferevent_get_input(f->peer);
	char text[] = "borrowed";
	weft_bytes b = {text, 8};
	char head[4];

	assert_true(weft_msg_is_bytes(&weft_msg_bytes));
	assert_true(weft_msg_is_bytes(&weft_msg_evbuffer));
	assert_int_equal(weft_msg_length(&weft_msg_bytes, &b), 8);
	assert_int_equal(weft_msg_copyout(&weft_msg_bytes, &b, head, 4), 4);
	assert_memory_equal(head, "borr", 4);
	weft_channel_activate(f->ch);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_bytes, &b,
	                                        on_write_done, f),
	                 0);
	memset(text, 'x', 8); /* the bytes were taken before the return */
	assert_int_equal(weft_loop_run_until(f->loop, write_cb_ran, f, 5000),
	                 0);
	assert_int_equal(f->write_status, 0);
	assert_int_equal(evbuffer_get_length(in), 8);
	assert_memory_equal(evbuffer_pullup(in, 8), "borrowed", 8);
}

struct log_capture {
	int warnings;
	char line[256];
};

static void
capture_warning(enum weft_log_level level, const char *line, void *arg)
{
	struct log_capture *c = arg;

	if (level != WEFT_LOG_WARN)
		return;
	c->warnings++;
	snprintf(c->line, sizeof(c->line), "%s", line);
}

/* An error no handler dealt with reaches the tail: it must be logged where
 * it is seen (warning, as Netty does), not at debug level. */
static void
test_unhandled_error_at_the_tail_is_a_warning(void **state)
{
	struct fixture *f = *state;
	struct log_capture c = {0};
	weft_ctx *ctx;

	assert_int_equal(weft_pipeline_add_last(f->ch, "A", &recorder, "A"), 0);
	ctx = weft_pipeline_get(f->ch, "A");
	assert_non_null(ctx);
	weft_log_set_sink(capture_warning, &c);
	weft_log_set_level(WEFT_LOG_WARN);
	weft_log_set_peer_interval(0); /* each line, whatever went before */
	weft_ctx_fire_error(ctx, WEFT_EPROTO);
	weft_log_set_peer_interval(WEFT_LOG_PEER_INTERVAL_MS);
	weft_log_set_sink(NULL, NULL);
	assert_int_equal(c.warnings, 1);
	assert_non_null(strstr(c.line, "unhandled"));
	assert_non_null(strstr(c.line, weft_strerror(WEFT_EPROTO)));
}

/* Errors that reach the tail come from peers as often as from bugs (a
 * codec refusing bad input fires one on every bad connection): their
 * warning is rate-limited at the peer interval, and the next one that
 * goes out says how many were dropped. */
static void
test_unhandled_errors_are_logged_at_a_rate(void **state)
{
	struct fixture *f = *state;
	struct log_capture c = {0};
	weft_ctx *ctx;

	assert_int_equal(weft_pipeline_add_last(f->ch, "A", &recorder, "A"), 0);
	ctx = weft_pipeline_get(f->ch, "A");
	weft_log_set_sink(capture_warning, &c);
	weft_log_set_level(WEFT_LOG_WARN);
	weft_log_set_peer_interval(0);
	weft_ctx_fire_error(ctx, WEFT_EPROTO);
	assert_int_equal(c.warnings, 1);
	weft_log_set_peer_interval(3600 * 1000); /* longer than any run */
	for (int i = 0; i < 20; i++)
		weft_ctx_fire_error(ctx, WEFT_EPROTO);
	assert_int_equal(c.warnings, 1);
	weft_log_set_peer_interval(0);
	weft_ctx_fire_error(ctx, WEFT_EPROTO);
	weft_log_set_peer_interval(WEFT_LOG_PEER_INTERVAL_MS);
	weft_log_set_sink(NULL, NULL);
	assert_int_equal(c.warnings, 2);
	assert_non_null(strstr(c.line, "unhandled"));
	assert_non_null(strstr(c.line, "and 20 more like it"));
}

/* A reader that takes one byte per read and pauses reading: the rest
 * stays in the channel's input. */
struct sipper {
	char got[16];
	size_t n;
	int reads;
	int want;       /* reads to wait for */
	bool in_resume; /* inside weft_channel_set_auto_read(true) */
};

static void
sip_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct sipper *s = weft_ctx_state(ctx);

	assert_ptr_equal(type, &weft_msg_evbuffer);
	assert_false(s->in_resume);
	s->reads++;
	assert_true(s->n < sizeof(s->got));
	assert_int_equal(evbuffer_remove(msg, s->got + s->n, 1), 1);
	s->n++;
	weft_channel_set_auto_read(weft_ctx_channel(ctx), false);
	assert_false(weft_channel_is_auto_read(weft_ctx_channel(ctx)));
}

static const weft_handler sipper_handler = {.read = sip_read};

static bool
sipped(void *arg)
{
	struct sipper *s = arg;

	return s->reads >= s->want;
}

/* Runs f's loop until s has seen n reads; returns 0 or WEFT_ETIMEDOUT. */
static int
run_until_reads(struct fixture *f, struct sipper *s, int n, uint64_t ms)
{
	s->want = n;
	return weft_loop_run_until(f->loop, sipped, s, ms);
}

static void
test_resumed_reading_reads_what_waits_in_the_input(void **state)
{
	struct fixture *f = *state;
	struct sipper s = {0};
	int i;

	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "sip", &sipper_handler, &s), 0);
	weft_channel_activate(f->ch);
	assert_true(weft_channel_is_auto_read(f->ch));
	bufferevent_write(f->peer, "abcd", 4);
	assert_int_equal(run_until_reads(f, &s, 1, 5000), 0);
	/* Paused: nothing more comes, though three bytes wait. */
	assert_int_equal(run_until_reads(f, &s, 2, 20), WEFT_ETIMEDOUT);
	for (i = 2; i <= 4; i++) {
		s.in_resume = true;
		weft_channel_set_auto_read(f->ch, true);
		s.in_resume = false;
		/* Not inside the call: from a task, soon. */
		assert_int_equal(s.reads, i - 1);
		assert_true(weft_channel_is_auto_read(f->ch));
		assert_int_equal(run_until_reads(f, &s, i, 5000), 0);
		assert_int_equal(s.reads, i);
	}
	assert_int_equal(s.n, 4);
	assert_memory_equal(s.got, "abcd", 4);
	/* An empty input: resuming fires nothing. */
	weft_channel_set_auto_read(f->ch, true);
	assert_int_equal(run_until_reads(f, &s, 5, 20), WEFT_ETIMEDOUT);
	/* New bytes are read as ever. */
	bufferevent_write(f->peer, "e", 1);
	assert_int_equal(run_until_reads(f, &s, 5, 5000), 0);
	assert_memory_equal(s.got, "abcde", 5);
}

/* A reader that takes one byte per read and gives up its turn: reading
 * stays on, the decoder side sees it stop, and the rest comes back by
 * itself on later rounds, never inside the call. */
static void
yield_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct sipper *s = weft_ctx_state(ctx);
	weft_channel *ch = weft_ctx_channel(ctx);

	assert_ptr_equal(type, &weft_msg_evbuffer);
	assert_false(s->in_resume);
	assert_true(weft_channel_is_reading(ch));
	s->reads++;
	assert_true(s->n < sizeof(s->got));
	assert_int_equal(evbuffer_remove(msg, s->got + s->n, 1), 1);
	s->n++;
	s->in_resume = true;
	weft_channel_yield(ch);
	weft_channel_yield(ch); /* a no-op once given up */
	s->in_resume = false;
	assert_true(weft_channel_is_auto_read(ch));
	assert_false(weft_channel_is_reading(ch));
}

static const weft_handler yielder_handler = {.read = yield_read};

static void
test_yielded_turn_comes_back_on_the_next_round(void **state)
{
	struct fixture *f = *state;
	struct sipper s = {0};

	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "yield", &yielder_handler, &s), 0);
	weft_channel_activate(f->ch);
	bufferevent_write(f->peer, "abcd", 4);
	/* One byte per turn, each turn on a round of its own, with nothing
	 * but the loop running. */
	assert_int_equal(run_until_reads(f, &s, 4, 5000), 0);
	assert_int_equal(s.reads, 4);
	assert_memory_equal(s.got, "abcd", 4);
	assert_int_equal(weft_channel_pending_read_bytes(f->ch), 0);
	/* An empty input: nothing more is delivered; new bytes are read. */
	assert_int_equal(run_until_reads(f, &s, 5, 20), WEFT_ETIMEDOUT);
	bufferevent_write(f->peer, "e", 1);
	assert_int_equal(run_until_reads(f, &s, 5, 5000), 0);
	assert_memory_equal(s.got, "abcde", 5);
}

/* A reader that takes all its input and gives up its turn anyway, as a
 * handler at its budget does when the budget falls on the last message:
 * nothing is left to wait, so the turn is not given up at all. */
static void
drain_yield_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct sipper *s = weft_ctx_state(ctx);
	size_t n = evbuffer_get_length(msg);

	(void)type;
	assert_true(s->n + n <= sizeof(s->got));
	assert_int_equal(evbuffer_remove(msg, s->got + s->n, n), (int)n);
	s->n += n;
	s->reads++;
	weft_channel_yield(weft_ctx_channel(ctx));
}

static void
drain_yield_complete(weft_ctx *ctx)
{
	struct sipper *s = weft_ctx_state(ctx);

	/* Reading again at once: no round to wait for. */
	s->in_resume = weft_channel_is_reading(weft_ctx_channel(ctx));
}

static const weft_handler drain_yielder_handler = {
    .read = drain_yield_read, .read_complete = drain_yield_complete};

static void
test_turn_given_up_at_the_last_byte_costs_nothing(void **state)
{
	struct fixture *f = *state;
	struct sipper s = {0};

	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "yield", &drain_yielder_handler, &s),
	    0);
	weft_channel_activate(f->ch);
	bufferevent_write(f->peer, "abcd", 4);
	assert_int_equal(run_until_reads(f, &s, 1, 5000), 0);
	assert_true(s.in_resume);
	assert_true(weft_channel_is_reading(f->ch));
	bufferevent_write(f->peer, "ef", 2);
	assert_int_equal(run_until_reads(f, &s, 2, 5000), 0);
	assert_true(s.in_resume);
	assert_memory_equal(s.got, "abcdef", 6);
}

/* Reading resumed and paused again before the task runs: the task reads
 * nothing; resumed once more, it reads. */
static void
test_resume_then_pause_before_the_task_reads_nothing(void **state)
{
	struct fixture *f = *state;
	struct sipper s = {0};

	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "sip", &sipper_handler, &s), 0);
	weft_channel_activate(f->ch);
	bufferevent_write(f->peer, "xy", 2);
	assert_int_equal(run_until_reads(f, &s, 1, 5000), 0);
	weft_channel_set_auto_read(f->ch, true);
	weft_channel_set_auto_read(f->ch, false);
	assert_int_equal(run_until_reads(f, &s, 2, 20), WEFT_ETIMEDOUT);
	weft_channel_set_auto_read(f->ch, true);
	assert_int_equal(run_until_reads(f, &s, 2, 5000), 0);
	assert_memory_equal(s.got, "xy", 2);
}

/* ---- In-place writes ---------------------------------------------------- */

/* A handler that puts its state's two characters around every in-place
 * write, as a frame codec puts a header and a CRC: "[]" makes "[data]". */
struct bracket {
	const char *marks;
	char *at; /* its own reservation, open */
};

static void *
bracket_reserve(weft_ctx *ctx, size_t n)
{
	struct bracket *b = weft_ctx_state(ctx);

	if ((b->at = weft_ctx_reserve(ctx, n + 2)) == NULL)
		return NULL;
	b->at[0] = b->marks[0];
	return b->at + 1;
}

static void
bracket_commit(weft_ctx *ctx, size_t used, weft_write_cb cb, void *arg)
{
	struct bracket *b = weft_ctx_state(ctx);

	b->at[1 + used] = b->marks[1];
	weft_ctx_commit(ctx, used + 2, cb, arg);
}

static const weft_handler bracket = {.reserve = bracket_reserve,
                                     .commit = bracket_commit};

/* Where in-place writes start: a handler of no events of its own. */
static const weft_handler origin = {0};

/* Writes text in place from ctx, reserving room more than it needs. */
static void
write_in_place(weft_ctx *ctx, const char *text, weft_write_cb cb, void *arg)
{
	size_t n = strlen(text);
	char *p = weft_ctx_reserve(ctx, n + 16);

	assert_non_null(p);
	memcpy(p, text, n);
	weft_ctx_commit(ctx, n, cb, arg);
}

static void
write_text(weft_channel *ch, const char *text)
{
	weft_bytes b = {text, strlen(text)};

	assert_int_equal(
	    weft_channel_write_msg(ch, &weft_msg_bytes, &b, NULL, NULL), 0);
}

static bool
peer_has(void *arg)
{
	struct fixture *f = arg;
	struct evbuffer *in = bufferevent_get_input(f->peer);

	return evbuffer_get_length(in) >= (size_t)f->write_status;
}

/* Waits until the peer holds len bytes, and compares them with want. */
static void
expect_peer(struct fixture *f, const char *want)
{
	struct evbuffer *in = bufferevent_get_input(f->peer);
	size_t len = strlen(want);

	f->write_status = (int)len;
	assert_int_equal(weft_loop_run_until(f->loop, peer_has, f, 5000), 0);
	assert_int_equal(evbuffer_get_length(in), len);
	assert_memory_equal(evbuffer_pullup(in, (ev_ssize_t)len), want, len);
	evbuffer_drain(in, len);
}

/* Two handlers each put their bytes around a reservation, on the way to
 * the head; the message leaves in order with ordinary writes, and its
 * callback runs once. */
static void
test_in_place_writes_are_wrapped_by_each_handler_on_the_way(void **state)
{
	struct fixture *f = *state;
	struct bracket outer = {"<>", NULL}, inner = {"[]", NULL};
	weft_ctx *z;

	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "outer", &bracket, &outer), 0);
	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "inner", &bracket, &inner), 0);
	assert_int_equal(weft_pipeline_add_last(f->ch, "Z", &origin, NULL), 0);
	z = weft_pipeline_get(f->ch, "Z");
	weft_channel_activate(f->ch);
	write_text(f->ch, "x");
	write_in_place(z, "data", on_write_done, f);
	write_in_place(z, "", NULL, NULL); /* an empty message, wrapped */
	write_text(f->ch, "y");
	expect_peer(f, "x<[data]><[]>y");
	assert_int_equal(weft_loop_run_until(f->loop, write_cb_ran, f, 5000),
	                 0);
	assert_int_equal(f->write_cbs, 1);
	assert_int_equal(f->write_status, 0);
}

/* A handler that takes ordinary writes only gets an in-place write as a
 * run of bytes, and the bytes arrive. */
static void
test_in_place_writes_reach_a_write_only_handler_as_bytes(void **state)
{
	struct fixture *f = *state;
	weft_ctx *z;

	assert_int_equal(weft_pipeline_add_last(f->ch, "R", &recorder, "R"), 0);
	assert_int_equal(weft_pipeline_add_last(f->ch, "Z", &origin, NULL), 0);
	z = weft_pipeline_get(f->ch, "Z");
	weft_channel_activate(f->ch);
	write_in_place(z, "through R", on_write_done, f);
	assert_non_null(strstr(f->log, "R.write"));
	expect_peer(f, "through R");
	assert_int_equal(weft_loop_run_until(f->loop, write_cb_ran, f, 5000),
	                 0);
	assert_int_equal(f->write_cbs, 1);
}

/* Committed on a closing channel: nothing is sent, and the callback says
 * so once. */
static void
test_in_place_write_on_a_closing_channel_fails_once(void **state)
{
	struct fixture *f = *state;
	weft_ctx *z;
	char *p;

	assert_int_equal(weft_pipeline_add_last(f->ch, "Z", &origin, NULL), 0);
	z = weft_pipeline_get(f->ch, "Z");
	weft_channel_activate(f->ch);
	/* Bytes still to go keep the closing channel (and Z) for a while. */
	bufferevent_disable(f->peer, EV_READ);
	write_text(f->ch, "first");
	p = weft_ctx_reserve(z, 4);
	assert_non_null(p);
	memcpy(p, "late", 4);
	weft_ctx_close(z);
	weft_ctx_commit(z, 4, on_write_done, f);
	assert_int_equal(f->write_cbs, 0); /* never inside the call */
	assert_int_equal(weft_loop_run_until(f->loop, write_cb_ran, f, 5000),
	                 0);
	assert_int_equal(f->write_cbs, 1);
	assert_int_equal(f->write_status, WEFT_ECLOSED);
}

/* A handler must take in-place writes whole: reserve without commit is
 * refused when it is added. */
static void
test_a_handler_with_reserve_needs_commit(void **state)
{
	struct fixture *f = *state;
	static const weft_handler half = {.reserve = bracket_reserve};

	assert_int_equal(weft_pipeline_add_last(f->ch, "half", &half, NULL),
	                 WEFT_EINVAL);
	assert_int_equal(weft_pipeline_add_last(f->ch, "whole", &bracket, NULL),
	                 0);
	assert_int_equal(
	    weft_pipeline_replace(f->ch, "whole", "half", &half, NULL),
	    WEFT_EINVAL);
}

/* One completion for everything written so far: after the bytes left,
 * at once (but not inside the call) when nothing waits, and with
 * WEFT_ECLOSED when the channel is gone. */
static void
test_when_written_completes_a_batch_once(void **state)
{
	struct fixture *f = *state;

	weft_channel_activate(f->ch);
	write_text(f->ch, "one");
	write_text(f->ch, "two");
	weft_channel_when_written(f->ch, on_write_done, f);
	assert_int_equal(f->write_cbs, 0);
	assert_int_equal(weft_loop_run_until(f->loop, write_cb_ran, f, 5000),
	                 0);
	assert_int_equal(f->write_cbs, 1);
	assert_int_equal(f->write_status, 0);
	assert_int_equal(evbuffer_get_length(bufferevent_get_input(f->peer)),
	                 6);
	f->write_cbs = 0;
	weft_channel_when_written(f->ch, on_write_done, f);
	assert_int_equal(f->write_cbs, 0);
	assert_int_equal(weft_loop_run_until(f->loop, write_cb_ran, f, 5000),
	                 0);
	assert_int_equal(f->write_status, 0);
}

static void
test_when_written_fails_when_the_channel_dies_first(void **state)
{
	struct fixture *f = *state;
	char big[200000];

	memset(big, 'z', sizeof(big));
	weft_channel_activate(f->ch);
	/* The peer reads nothing: most of it stays behind. */
	bufferevent_disable(f->peer, EV_READ);
	bufferevent_setwatermark(f->peer, EV_READ, 0, 1024);
	{
		weft_bytes b = {big, sizeof(big)};

		assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_bytes,
		                                        &b, NULL, NULL),
		                 0);
	}
	weft_channel_when_written(f->ch, on_write_done, f);
	bufferevent_flush(f->peer, EV_WRITE, BEV_FINISHED); /* EOF */
	bufferevent_free(f->peer); /* the connection goes */
	f->peer = NULL;
	assert_int_equal(weft_loop_run_until(f->loop, write_cb_ran, f, 5000),
	                 0);
	assert_int_equal(f->write_cbs, 1);
	assert_int_equal(f->write_status, WEFT_ECLOSED);
}

/* ---- The end of a batch, and writes nobody waits for ------------------- */

/* Notes each flush that passes it and each error that reaches it. */
static void
watch_flush(weft_ctx *ctx)
{
	note(fx(ctx), "W.flush ");
	weft_ctx_flush(ctx);
}

static void
watch_error(weft_ctx *ctx, int status)
{
	note(fx(ctx), "W.error ");
	fx(ctx)->write_status = status;
}

static const weft_handler flush_watcher = {.flush = watch_flush,
                                           .error = watch_error};

/* Refuses every write with the status its state points at, as an encoder
 * out of memory would. */
static void
refuse_write(weft_ctx *ctx, const weft_msg_type *type, void *msg,
             weft_write_cb cb, void *arg)
{
	weft_ctx_fail_write(ctx, type, msg, cb, arg,
	                    *(const int *)weft_ctx_state(ctx));
}

static const weft_handler refuser = {.write = refuse_write};

static size_t
count_of(const char *log, const char *what)
{
	size_t n = 0;

	for (; (log = strstr(log, what)) != NULL; log += strlen(what))
		n++;
	return n;
}

/* Bytes written without a flush leave with the channel's own flush after
 * the wake-up, and that flush passes every handler with a flush on its
 * way from the tail, once: a handler that gathers or accounts for a batch
 * sees where it ends. */
static void
test_the_flush_after_the_wake_up_passes_the_handlers(void **state)
{
	struct fixture *f = *state;
	weft_bytes b = {"abc", 3};
	weft_ctx *z;

	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "W", &flush_watcher, NULL), 0);
	assert_int_equal(weft_pipeline_add_last(f->ch, "Z", &origin, NULL), 0);
	z = weft_pipeline_get(f->ch, "Z");
	weft_channel_activate(f->ch);
	weft_ctx_write(z, &weft_msg_bytes, &b, NULL, NULL);
	weft_ctx_write(z, &weft_msg_bytes, &b, NULL, NULL);
	assert_int_equal(count_of(f->log, "W.flush"), 0);
	expect_peer(f, "abcabc");
	assert_int_equal(count_of(f->log, "W.flush"), 1);
}

/* A write with a callback that fails tells the callback; one without
 * tells the handlers after the one that refused it, with an error event
 * (a write whose channel closed does not: the channel says so itself). */
static void
test_a_failed_write_without_a_callback_is_an_error_event(void **state)
{
	struct fixture *f = *state;
	weft_bytes b = {"abc", 3};
	int status = WEFT_ENOMEM;
	weft_ctx *z;

	assert_int_equal(weft_pipeline_add_last(f->ch, "X", &refuser, &status),
	                 0);
	assert_int_equal(
	    weft_pipeline_add_last(f->ch, "W", &flush_watcher, NULL), 0);
	assert_int_equal(weft_pipeline_add_last(f->ch, "Z", &origin, NULL), 0);
	z = weft_pipeline_get(f->ch, "Z");
	weft_channel_activate(f->ch);
	weft_ctx_write(z, &weft_msg_bytes, &b, on_write_done, f);
	assert_int_equal(weft_loop_run_until(f->loop, write_cb_ran, f, 5000),
	                 0);
	assert_int_equal(f->write_cbs, 1);
	assert_int_equal(f->write_status, WEFT_ENOMEM);
	assert_int_equal(count_of(f->log, "W.error"), 0);
	f->write_status = 0;
	weft_ctx_write(z, &weft_msg_bytes, &b, NULL, NULL);
	assert_int_equal(count_of(f->log, "W.error"), 1);
	assert_int_equal(f->write_status, WEFT_ENOMEM);
	assert_int_equal(f->write_cbs, 1);
	/* Refused for a closed channel: no error event. */
	status = WEFT_ECLOSED;
	weft_ctx_write(z, &weft_msg_bytes, &b, NULL, NULL);
	assert_int_equal(count_of(f->log, "W.error"), 1);
}

#define WRITERS 2
#define WRITES 300

struct writers {
	weft_channel *ch;
	_Atomic int done, ok, failed, refused, running;
	_Atomic bool go; /* set from the loop: it runs on the test's thread */
};

static void
on_thread_write(weft_channel *ch, int status, void *arg)
{
	struct writers *w = arg;

	(void)ch;
	atomic_fetch_add(status == 0 ? &w->ok : &w->failed, 1);
}

static void *
writer_main(void *arg)
{
	struct writers *w = arg;
	static const char kib[1024];
	weft_bytes b = {kib, sizeof(kib)};
	int i;

	/* Until the loop runs, any thread counts as its own. */
	while (!atomic_load(&w->go))
		sched_yield();
	for (i = 0; i < WRITES; i++)
		if (weft_channel_write_msg(w->ch, &weft_msg_bytes, &b,
		                           on_thread_write, w) != 0)
			atomic_fetch_add(&w->refused, 1);
	atomic_fetch_sub(&w->running, 1);
	return NULL;
}

/* Checked on the loop's thread while it runs: lets the writers go. */
static bool
writers_done(void *arg)
{
	struct writers *w = arg;

	atomic_store(&w->go, true);
	return atomic_load(&w->running) == 0;
}

static bool
all_ended(void *arg)
{
	struct writers *w = arg;

	return atomic_load(&w->ok) + atomic_load(&w->failed) +
	           atomic_load(&w->refused) ==
	       2 * WRITERS * WRITES;
}

/* Runs the loop for ms, whatever happens. */
static void
run_for(struct fixture *f, int ms)
{
	assert_int_equal(
	    weft_loop_run_until(f->loop, weft_test_never, NULL, ms),
	    WEFT_ETIMEDOUT);
}

static void
start_writers(struct writers *w, pthread_t *t)
{
	int i;

	atomic_store(&w->go, false);
	atomic_store(&w->running, WRITERS);
	for (i = 0; i < WRITERS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, writer_main, w),
		                 0);
}

/* Writes from other threads reach the head while the peer reads nothing;
 * a batch completion waits for them, the connection dies, and more writes
 * come from the threads: the completion runs exactly once (WEFT_ECLOSED),
 * and every write accepted has its callback once. */
static void
test_when_written_once_when_the_channel_dies_with_writes_from_threads(
    void **state)
{
	struct fixture *f = *state;
	struct writers w = {.ch = f->ch};
	pthread_t t[WRITERS];
	int i;

	/* Writers on other threads hold a reference, as they must. */
	weft_channel_ref(f->ch);
	weft_channel_activate(f->ch);
	bufferevent_disable(f->peer, EV_READ);
	bufferevent_setwatermark(f->peer, EV_READ, 0, 1024);
	start_writers(&w, t);
	assert_int_equal(weft_loop_run_until(f->loop, writers_done, &w, 5000),
	                 0);
	for (i = 0; i < WRITERS; i++)
		pthread_join(t[i], NULL);
	/* The inbox drains on the loop: then they have reached the head. */
	run_for(f, 50);
	weft_channel_when_written(f->ch, on_write_done, f);
	/* The connection goes while more writes come from the threads (the
	 * loop runs on this thread meanwhile: theirs are writes from other
	 * threads). */
	bufferevent_flush(f->peer, EV_WRITE, BEV_FINISHED); /* EOF */
	bufferevent_free(f->peer);
	f->peer = NULL;
	start_writers(&w, t);
	assert_int_equal(weft_loop_run_until(f->loop, writers_done, &w, 5000),
	                 0);
	for (i = 0; i < WRITERS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(weft_loop_run_until(f->loop, all_ended, &w, 5000), 0);
	assert_int_equal(weft_loop_run_until(f->loop, write_cb_ran, f, 5000),
	                 0);
	run_for(f, 50);
	assert_int_equal(f->write_cbs, 1);
	assert_int_equal(f->write_status, WEFT_ECLOSED);
	assert_true(atomic_load(&w.failed) > 0);
	assert_int_equal(atomic_load(&w.ok) + atomic_load(&w.failed) +
	                     atomic_load(&w.refused),
	                 2 * WRITERS * WRITES);
	weft_channel_unref(w.ch);
}

/* ---- Rounds: a socket that turns ready is not kept waiting ------------- */

#define TURNERS 20

/* Channels that take one byte per turn and give up their turn, and one
 * quiet channel whose byte is sent by the first turner's second turn. */
struct rounds {
	weft_channel *ch[TURNERS + 1];
	int peer_fd[TURNERS + 1];
	int seq;           /* turns and reads so far, in order */
	int second_turns;  /* turners' second turns before the quiet read */
	int quiet_read_at; /* seq of the quiet channel's read, or 0 */
	bool quiet_sent;
};

struct turner {
	struct rounds *r;
	int index; /* TURNERS: the quiet one */
	int turns;
};

static void
turner_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct turner *t = weft_ctx_state(ctx);
	struct rounds *r = t->r;
	char byte;

	(void)type;
	assert_int_equal(evbuffer_remove(msg, &byte, 1), 1);
	r->seq++;
	if (t->index == TURNERS) {
		r->quiet_read_at = r->seq;
		return;
	}
	if (++t->turns == 2) {
		if (r->quiet_read_at == 0)
			r->second_turns++;
		if (!r->quiet_sent) {
			r->quiet_sent = true;
			assert_int_equal(write(r->peer_fd[TURNERS], "q", 1), 1);
		}
	}
	weft_channel_yield(weft_ctx_channel(ctx));
}

static const weft_handler turner_handler = {.read = turner_read};

static bool
quiet_was_read(void *arg)
{
	return ((struct rounds *)arg)->quiet_read_at != 0;
}

static void
test_a_socket_ready_during_a_long_round_waits_for_few_turns(void **state)
{
	struct turner t[TURNERS + 1];
	struct rounds r = {0};
	weft_loop *loop;
	int i, sv[2];

	(void)state;
	assert_int_equal(weft_loop_new(&loop), 0);
	for (i = 0; i <= TURNERS; i++) {
		struct bufferevent *bev;

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		assert_int_equal(evutil_make_socket_nonblocking(sv[0]), 0);
		bev = bufferevent_socket_new(weft_loop_base(loop), sv[0],
		                             BEV_OPT_CLOSE_ON_FREE);
		assert_non_null(bev);
		assert_int_equal(weft_channel_new(loop, bev, NULL, &r.ch[i]),
		                 0);
		r.peer_fd[i] = sv[1];
		t[i] = (struct turner){.r = &r, .index = i};
		assert_int_equal(weft_pipeline_add_last(r.ch[i], "turner",
		                                        &turner_handler, &t[i]),
		                 0);
		weft_channel_activate(r.ch[i]);
		/* Bytes for three turns each: all ready at the first poll. */
		if (i < TURNERS)
			assert_int_equal(write(sv[1], "abc", 3), 3);
	}
	assert_int_equal(weft_loop_run_until(loop, quiet_was_read, &r, 5000),
	                 0);
	/* Every turner had its first turn at the first poll, then the
	 * second ones come round as deferred turns. The quiet byte, sent
	 * by the first of them, is read after a few more, not after all
	 * TURNERS. */
	assert_true(r.second_turns >= 1);
	assert_true(r.second_turns < TURNERS / 2);
	for (i = 0; i <= TURNERS; i++) {
		weft_channel_close(r.ch[i]);
		close(r.peer_fd[i]);
	}
	weft_loop_free(loop);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_events_travel_head_to_tail_and_writes_tail_to_head, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_handler_replaces_itself_inside_a_callback, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_handler_removes_itself_and_still_forwards, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_events_skip_the_handlers_that_do_not_handle_them, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(test_water_marks_toggle_writability,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_write_callback_runs_once_after_bytes_leave, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_typed_message_at_the_head_fails_and_is_freed, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_close_drains_pending_writes_then_fires_inactive, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_peer_close_fires_inactive_and_fails_waiting_writes, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_write_callback_runs_before_its_handler_is_removed, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_write_from_another_thread_arrives_in_order, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_byte_runs_are_copied_on_write_and_measured, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_unhandled_error_at_the_tail_is_a_warning, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_unhandled_errors_are_logged_at_a_rate, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_resumed_reading_reads_what_waits_in_the_input, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_resume_then_pause_before_the_task_reads_nothing, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_turn_given_up_at_the_last_byte_costs_nothing, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_yielded_turn_comes_back_on_the_next_round, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_in_place_writes_are_wrapped_by_each_handler_on_the_way,
	        setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_in_place_writes_reach_a_write_only_handler_as_bytes, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_in_place_write_on_a_closing_channel_fails_once, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_a_handler_with_reserve_needs_commit, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_when_written_completes_a_batch_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_when_written_fails_when_the_channel_dies_first, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_the_flush_after_the_wake_up_passes_the_handlers, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_a_failed_write_without_a_callback_is_an_error_event, setup,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_when_written_once_when_the_channel_dies_with_writes_from_threads,
	        setup, teardown),
	    cmocka_unit_test(
	        test_a_socket_ready_during_a_long_round_waits_for_few_turns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
