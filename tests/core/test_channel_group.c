/* SPDX-License-Identifier: MIT */
/*
 * test_channel_group.c: channel groups (core/channel_group.c) over real
 * TCP channels on 127.0.0.1: a server on a group of two loops adds every
 * channel it accepts to a group; clients on the test's loop read what the
 * group writes. Members join and leave from any thread, leave by
 * themselves when they close (also in the middle of a write to the
 * group), and a group write ends once, with the count of the members
 * whose write failed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/channel.h>
#include <weft/transport.h>

#include "../transport/echo.h"
#include "support/wait.h"

#define DEADLINE_MS 30000
#define CLIENTS 4

struct fixture {
	weft_loop_group *loops;
	weft_server *srv;
	weft_channel_group *group;
	/* The server's channels, in the order accepted. */
	weft_channel *_Atomic accepted[CLIENTS];
	atomic_int naccepted;
	atomic_int on_loop[2];
	echo_sink sinks[CLIENTS];
	echo_result connects[CLIENTS];
	int want_accepted;
};

/* How a group write ended, on the test's loop. */
struct done {
	int calls;
	int status;
	size_t failures;
};

static void
on_group_done(weft_channel_group *g, int status, size_t failures, void *arg)
{
	struct done *d = arg;

	(void)g;
	d->calls++;
	d->status = status;
	d->failures = failures;
}

static bool
done_once(void *arg)
{
	return ((struct done *)arg)->calls > 0;
}

static int
server_init(weft_channel *ch, void *arg)
{
	struct fixture *f = arg;
	int i = atomic_fetch_add(&f->naccepted, 1);

	if (i < CLIENTS)
		atomic_store(&f->accepted[i], ch);
	atomic_fetch_add(
	    &f->on_loop[weft_channel_loop(ch) == weft_loop_group_at(f->loops, 0)
	                    ? 0
	                    : 1],
	    1);
	return weft_channel_group_add(f->group, ch);
}

static bool
group_has(struct fixture *f, size_t n)
{
	return weft_channel_group_size(f->group) == n;
}

static bool
group_has_all(void *arg)
{
	return group_has(arg, CLIENTS);
}

static bool
group_has_all_but_one(void *arg)
{
	return group_has(arg, CLIENTS - 1);
}

static bool
accepted_enough(void *arg)
{
	struct fixture *f = arg;

	return atomic_load(&f->naccepted) >= f->want_accepted;
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	weft_server_opts opts = {
	    .address = "127.0.0.1:0", .init = server_init, .init_arg = f};
	weft_connect_opts copts = {.init = echo_sink_init};
	int i;

	assert_non_null(f);
	echo_loop_setup(NULL);
	assert_int_equal(weft_channel_group_new(&f->group), 0);
	assert_int_equal(weft_loop_group_new(2, &f->loops), 0);
	assert_int_equal(weft_server_new(f->loops, &opts, &f->srv), 0);
	for (i = 0; i < CLIENTS; i++) {
		copts.init_arg = &f->sinks[i];
		assert_int_equal(
		    weft_connect(echo_loop, weft_server_address(f->srv), &copts,
		                 echo_result_cb, &f->connects[i]),
		    0);
		assert_int_equal(weft_test_run_until(echo_loop, echo_result_set,
		                                     &f->connects[i],
		                                     DEADLINE_MS),
		                 0);
		assert_int_equal(f->connects[i].status, 0);
		/* One at a time, so that accepted[i] is sinks[i]'s peer. */
		f->want_accepted = i + 1;
		assert_int_equal(weft_test_run_until(echo_loop, accepted_enough,
		                                     f, DEADLINE_MS),
		                 0);
	}
	assert_int_equal(
	    weft_test_run_until(echo_loop, group_has_all, f, DEADLINE_MS), 0);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	atomic_int closed = 0;
	int i;

	weft_channel_group_free(f->group);
	/* A sink's channel is freed once inactive (the test's thread). */
	for (i = 0; i < CLIENTS; i++)
		if (!f->sinks[i].inactive)
			weft_channel_close(f->sinks[i].ch);
	weft_server_close(f->srv, echo_server_closed, &closed);
	assert_int_equal(weft_test_run_until(echo_loop, weft_test_atomic_set,
	                                     &closed, DEADLINE_MS),
	                 0);
	weft_loop_group_free(f->loops);
	echo_loop_teardown(NULL);
	free(f);
	return 0;
}

/* len bytes of the tests' pattern, from offset 0. */
static struct evbuffer *
pattern(size_t len)
{
	struct evbuffer *buf = evbuffer_new();
	struct evbuffer_iovec v;
	size_t i;

	assert_non_null(buf);
	assert_int_equal(evbuffer_reserve_space(buf, len, &v, 1), 1);
	for (i = 0; i < len; i++)
		((uint8_t *)v.iov_base)[i] = echo_pattern(i);
	v.iov_len = len;
	assert_int_equal(evbuffer_commit_space(buf, &v, 1), 0);
	return buf;
}

struct sinks_have {
	struct fixture *f;
	uint64_t bytes;
	int first, last; /* the sinks to look at */
};

static bool
sinks_have(void *arg)
{
	struct sinks_have *h = arg;
	int i;

	for (i = h->first; i <= h->last; i++)
		if (h->f->sinks[i].bytes < h->bytes)
			return false;
	return true;
}

static void
test_write_reaches_every_member_across_loops(void **state)
{
	struct fixture *f = *state;
	struct evbuffer *buf = pattern(100000);
	struct done d = {0};
	struct sinks_have h = {f, 100000, 0, CLIENTS - 1};
	int i;

	/* Round-robin: members on both loops. */
	assert_int_equal(atomic_load(&f->on_loop[0]), CLIENTS / 2);
	assert_int_equal(atomic_load(&f->on_loop[1]), CLIENTS / 2);
	assert_int_equal(weft_channel_group_write(f->group, buf, echo_loop,
	                                          on_group_done, &d),
	                 0);
	assert_int_equal(evbuffer_get_length(buf), 0); /* moved out */
	assert_int_equal(d.calls, 0);                  /* never inside */
	assert_int_equal(
	    weft_test_run_until(echo_loop, done_once, &d, DEADLINE_MS), 0);
	assert_int_equal(d.status, 0);
	assert_int_equal(d.failures, 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, sinks_have, &h, DEADLINE_MS), 0);
	for (i = 0; i < CLIENTS; i++) {
		assert_int_equal(f->sinks[i].bytes, 100000);
		assert_int_equal(f->sinks[i].mismatches, 0);
	}
	/* Once: nothing more comes. */
	assert_int_equal(weft_test_run_until(echo_loop, weft_test_flag_set,
	                                     &(bool){false}, 50),
	                 WEFT_ETIMEDOUT);
	assert_int_equal(d.calls, 1);
	evbuffer_free(buf);
}

static void
test_members_join_and_leave(void **state)
{
	struct fixture *f = *state;
	weft_channel *ch = atomic_load(&f->accepted[0]);
	struct evbuffer *buf = pattern(10);

	assert_true(weft_channel_group_contains(f->group, ch));
	assert_int_equal(weft_channel_group_add(f->group, ch), WEFT_EEXIST);
	assert_int_equal(weft_channel_group_remove(f->group, ch), 0);
	assert_false(weft_channel_group_contains(f->group, ch));
	assert_int_equal(weft_channel_group_remove(f->group, ch),
	                 WEFT_ENOTFOUND);
	assert_int_equal(weft_channel_group_add(f->group, ch), 0);
	assert_int_equal(weft_channel_group_add(NULL, ch), WEFT_EINVAL);
	/* A callback without a loop (the bytes go all the same), then
	 * nothing to write. */
	assert_int_equal(
	    weft_channel_group_write(f->group, buf, NULL, on_group_done, NULL),
	    WEFT_EINVAL);
	assert_int_equal(evbuffer_get_length(buf), 0);
	assert_int_equal(weft_channel_group_write(f->group, buf, echo_loop,
	                                          on_group_done, NULL),
	                 WEFT_EINVAL);
	/* A member that closes leaves by itself. */
	weft_channel_close(f->sinks[1].ch);
	assert_int_equal(weft_test_run_until(echo_loop, group_has_all_but_one,
	                                     f, DEADLINE_MS),
	                 0);
	assert_false(weft_channel_group_contains(f->group,
	                                         atomic_load(&f->accepted[1])));
	evbuffer_free(buf);
}

static bool
group_is_empty(void *arg)
{
	return group_has(arg, 0);
}

static bool
sinks_inactive(void *arg)
{
	struct fixture *f = arg;
	int i;

	for (i = 0; i < CLIENTS; i++)
		if (!f->sinks[i].inactive)
			return false;
	return true;
}

static void
test_close_empties_the_group(void **state)
{
	struct fixture *f = *state;
	struct evbuffer *buf = pattern(10);
	struct done d = {0};

	weft_channel_group_close(f->group);
	assert_int_equal(
	    weft_test_run_until(echo_loop, group_is_empty, f, DEADLINE_MS), 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, sinks_inactive, f, DEADLINE_MS), 0);
	/* An empty group's write ends at once, but not inside the call. */
	assert_int_equal(weft_channel_group_write(f->group, buf, echo_loop,
	                                          on_group_done, &d),
	                 0);
	assert_int_equal(d.calls, 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, done_once, &d, DEADLINE_MS), 0);
	assert_int_equal(d.failures, 0);
	evbuffer_free(buf);
}

#define BIG (32u << 20)

/* One member stops reading, so its share of a large write cannot leave;
 * it closes in the middle: the write ends, once, with that one failure,
 * the others got everything, and the member has left. */
static void
test_a_member_closing_during_a_write(void **state)
{
	struct fixture *f = *state;
	struct evbuffer *buf = pattern(BIG);
	struct done d = {0};
	struct sinks_have h = {f, BIG, 1, CLIENTS - 1};
	int i;

	weft_channel_set_auto_read(f->sinks[0].ch, false);
	assert_int_equal(weft_channel_group_write(f->group, buf, echo_loop,
	                                          on_group_done, &d),
	                 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, sinks_have, &h, DEADLINE_MS), 0);
	/* Loopback buffers hold a few MiB: member 0's write is stuck. */
	assert_int_equal(d.calls, 0);
	assert_true(f->sinks[0].bytes < BIG);
	weft_channel_close(f->sinks[0].ch);
	assert_int_equal(
	    weft_test_run_until(echo_loop, done_once, &d, DEADLINE_MS), 0);
	assert_int_equal(d.status, 0);
	assert_int_equal(d.failures, 1);
	assert_int_equal(weft_test_run_until(echo_loop, group_has_all_but_one,
	                                     f, DEADLINE_MS),
	                 0);
	assert_false(weft_channel_group_contains(f->group,
	                                         atomic_load(&f->accepted[0])));
	for (i = 1; i < CLIENTS; i++)
		assert_int_equal(f->sinks[i].mismatches, 0);
	evbuffer_free(buf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_write_reaches_every_member_across_loops, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_members_join_and_leave, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_close_empties_the_group, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(
	        test_a_member_closing_during_a_write, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
