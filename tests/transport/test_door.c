/* SPDX-License-Identifier: MIT */
/*
 * test_door.c: the door's choice of which pending connection makes room
 * (transport/door.c), white-box. What it means over real sockets is
 * tests/messaging/test_door.c.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "transport_int.h"

static int held;

static void
hold(struct weft__door_entry *e)
{
	(void)e;
	held++;
}

struct fixture {
	struct weft__door door;
	struct weft__door_entry e[8];
};

static int
setup(void **state)
{
	static struct fixture f;

	memset(&f, 0, sizeof(f));
	held = 0;
	assert_int_equal(weft__door_init(&f.door, hold), 0);
	*state = &f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	weft__door_fini(&f->door);
	return 0;
}

/* Enters e[i] from host, making room below the cap if make_room; returns
 * the index of the entry evicted, or -1. */
static int
enter_room(struct fixture *f, int i, const char *host, bool make_room)
{
	struct weft__door_entry *v;

	assert_int_equal(
	    weft__door_enter(&f->door, &f->e[i], host, make_room, &v), 0);
	return v == NULL ? -1 : (int)(v - f->e);
}

static int
enter(struct fixture *f, int i, const char *host)
{
	return enter_room(f, i, host, false);
}

static void
test_below_the_cap_nobody_is_evicted(void **state)
{
	struct fixture *f = *state;

	f->door.max = 3;
	assert_int_equal(enter(f, 0, "10.0.0.1"), -1);
	assert_int_equal(enter(f, 1, "10.0.0.1"), -1);
	assert_int_equal(enter(f, 2, "10.0.0.2"), -1);
	assert_int_equal(held, 0);
}

static void
test_the_heaviest_host_gives_up_its_oldest(void **state)
{
	struct fixture *f = *state;

	f->door.max = 4;
	enter(f, 0, "10.0.0.2");
	enter(f, 1, "10.0.0.1");
	enter(f, 2, "10.0.0.1");
	enter(f, 3, "10.0.0.3");
	/* 10.0.0.1 holds two: its oldest goes, not the oldest of all. */
	assert_int_equal(enter(f, 4, "10.0.0.4"), 1);
	assert_false(weft__door_leave(&f->door, &f->e[1]));
	assert_true(weft__door_leave(&f->door, &f->e[2]));
	assert_int_equal(held, 1);
}

static void
test_a_newcomer_counts_with_its_host(void **state)
{
	struct fixture *f = *state;

	f->door.max = 2;
	enter(f, 0, "10.0.0.2");
	enter(f, 1, "10.0.0.1");
	/* 10.0.0.1 would hold two with the newcomer: it gives up its own,
	 * though 10.0.0.2's is older. */
	assert_int_equal(enter(f, 2, "10.0.0.1"), 1);
}

static void
test_between_equals_the_oldest_goes(void **state)
{
	struct fixture *f = *state;

	f->door.max = 3;
	enter(f, 0, "10.0.0.1");
	enter(f, 1, "10.0.0.2");
	enter(f, 2, "10.0.0.3");
	assert_int_equal(enter(f, 3, "10.0.0.4"), 0);
	assert_int_equal(enter(f, 4, "10.0.0.5"), 1);
}

/* Below the cap, room is made when asked for (the server at
 * max_channels), by the same rule; in an empty door there is none. */
static void
test_room_is_made_below_the_cap_when_asked(void **state)
{
	struct fixture *f = *state;

	f->door.max = 8;
	assert_int_equal(enter_room(f, 0, "10.0.0.1", true), -1);
	enter(f, 1, "10.0.0.2");
	enter(f, 2, "10.0.0.2");
	assert_int_equal(enter_room(f, 3, "10.0.0.3", true), 1);
	assert_int_equal(held, 1);
	assert_true(weft__door_leave(&f->door, &f->e[0]));
}

static void
test_a_lower_cap_evicts_down_to_it(void **state)
{
	struct fixture *f = *state;
	int n = 0;

	for (int i = 0; i < 5; i++)
		enter(f, i, i < 3 ? "10.0.0.1" : "10.0.0.2");
	while (weft__door_set_max(&f->door, 2) != NULL)
		n++;
	assert_int_equal(n, 3);
	assert_int_equal(f->door.n, 2);
	/* 10.0.0.1 gave up its oldest, then, tied with 10.0.0.2 and older,
	 * its next; then 10.0.0.2, the heavier, its oldest. */
	assert_false(weft__door_leave(&f->door, &f->e[1]));
	assert_false(weft__door_leave(&f->door, &f->e[3]));
	assert_true(weft__door_leave(&f->door, &f->e[2]));
	assert_true(weft__door_leave(&f->door, &f->e[4]));
}

static void
host_of(const char *text, char *out, size_t len)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, text, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
	} else {
		assert_int_equal(inet_pton(AF_INET6, text, &s6->sin6_addr), 1);
		s6->sin6_family = AF_INET6;
	}
	weft__door_host_of((struct sockaddr *)&ss, out, len);
}

static void
test_hosts_are_addresses_and_ipv6_prefixes(void **state)
{
	char a[64], b[64];

	(void)state;
	host_of("192.0.2.7", a, sizeof(a));
	assert_string_equal(a, "192.0.2.7");
	host_of("::ffff:192.0.2.7", b, sizeof(b));
	assert_string_equal(a, b);
	/* One /64, one host; another /64, another. */
	host_of("2001:db8:1:2::1", a, sizeof(a));
	host_of("2001:db8:1:2:ffff::9", b, sizeof(b));
	assert_string_equal(a, b);
	host_of("2001:db8:1:3::1", b, sizeof(b));
	assert_string_not_equal(a, b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_below_the_cap_nobody_is_evicted, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_the_heaviest_host_gives_up_its_oldest, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_a_newcomer_counts_with_its_host, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_between_equals_the_oldest_goes,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_room_is_made_below_the_cap_when_asked, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_a_lower_cap_evicts_down_to_it,
	                                    setup, teardown),
	    cmocka_unit_test(test_hosts_are_addresses_and_ipv6_prefixes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
