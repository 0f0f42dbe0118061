/* SPDX-License-Identifier: MIT */
/* Tests of bench/weft-bench/optval.c: the entries of a --hosts list, read
 * with the transport's address grammar. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wbench.h"

static void
test_host_entries_read_ids_hosts_and_ports(void **state)
{
	const char *list = "a@127.0.0.1:5000,[::1]:5001,b@node-2.example:7";
	char id[64], host[256];
	uint16_t port;

	(void)state;
	assert_int_equal(wbench_host_at(list, 0, id, host, &port), 0);
	assert_string_equal(id, "a");
	assert_string_equal(host, "127.0.0.1");
	assert_int_equal(port, 5000);
	/* No id: "n" and the entry's index; an IPv6 host loses its brackets. */
	assert_int_equal(wbench_host_at(list, 1, id, host, &port), 0);
	assert_string_equal(id, "n1");
	assert_string_equal(host, "::1");
	assert_int_equal(port, 5001);
	assert_int_equal(wbench_host_at(list, 2, id, host, &port), 0);
	assert_string_equal(id, "b");
	assert_string_equal(host, "node-2.example");
	assert_int_equal(port, 7);
	assert_int_equal(wbench_host_at(list, 3, id, host, &port), -1);
}

static void
test_host_entries_refuse_what_weft_connect_refuses(void **state)
{
	const char *bad[] = {
	    "::1:5000",        /* IPv6 without brackets: ambiguous */
	    ":5000",           /* no host */
	    "127.0.0.1",       /* no port */
	    "127.0.0.1:0",     /* nothing listens on port 0 */
	    "127.0.0.1:65536", /* not a port */
	    "@127.0.0.1:5000", /* an empty id */
	    "unix:/tmp/s",     /* not a host and a port */
	};
	char id[64], host[256];
	uint16_t port;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(wbench_host_at(bad[i], 0, id, host, &port),
		                 -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_host_entries_read_ids_hosts_and_ports),
	    cmocka_unit_test(
	        test_host_entries_refuse_what_weft_connect_refuses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
