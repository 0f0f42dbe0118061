/* SPDX-License-Identifier: MIT */
/*
 * test_weftd_clock.c: three weftd processes, n3's wall clock shifted by
 * libfaketime (Debian's faketime package; the monotonic clock left
 * alone), 5 s ahead and then an hour behind: key-value writes through
 * every node succeed for a few seconds, no node logs a peer down, and
 * n1 warns that n3's clock is off. Skipped where libfaketime is not
 * installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <weft/kv.h>

#include "support/ports.h"
#include "support/weftd_proc.h"

#define NODES 3
#define RUN_MS 3000
#define WAIT_MS 10000

static const char *const ids[NODES] = {"n1", "n2", "n3"};

static const char *const faketime_paths[] = {
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
};

static const char *
faketime_lib(void)
{
	size_t i;

	for (i = 0; i < sizeof(faketime_paths) / sizeof(faketime_paths[0]); i++)
		if (access(faketime_paths[i], R_OK) == 0)
			return faketime_paths[i];
	return NULL;
}

/* Puts through node id until one succeeds, for at most WAIT_MS. */
static bool
put_until_ok(weft_msvc *client, const char *id)
{
	uint64_t start = weft_now_ns();

	while (wt_ms_since(start) < WAIT_MS) {
		struct wt_call c = WT_CALL_INIT;

		assert_int_equal(weft_kv_client_put(client, wt_peer(client, id),
		                                    "warm", 4, "v", 1, NULL,
		                                    wt_call_done, &c),
		                 0);
		if (wt_call_wait(&c, WAIT_MS) == 0)
			return true;
		wt_pause_ms(50);
	}
	return false;
}

/*
 * What n3's process adds to its sanitizer's options. libfaketime is
 * preloaded before the sanitizer's runtime: allowed under ASan. Under
 * TSan, libfaketime wraps pthread_cond_timedwait and calls glibc's own,
 * so TSan never sees the wait release and take back its mutex, and
 * reports a lock that is not held as held twice: n3 runs unchecked there,
 * n1 and n2 (the same code) checked.
 */
#if defined(__SANITIZE_THREAD__)
#define SAN_OPTIONS "TSAN_OPTIONS"
#define SAN_N3 "report_bugs=0"
#else
#define SAN_OPTIONS "ASAN_OPTIONS"
#define SAN_N3 "verify_asan_link_order=0"
#endif

/* Runs the cluster with n3's clock at shift (libfaketime's syntax). */
static void
run_shifted(const char *lib, const char *shift)
{
	char dir[64], config[128], text[2048], key[32], san_options[512];
	char *san;
	uint16_t ports[NODES];
	struct wt_proc p[NODES];
	weft_loop_group *group;
	weft_msvc *client;
	uint64_t start;
	long since[NODES];
	int i, j, n, puts = 0, failed = 0;

	snprintf(dir, sizeof(dir), "/tmp/weftd-clock-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(config, sizeof(config), "%s/cluster.ini", dir);
	for (i = 0; i < NODES; i++)
		ports[i] = weft_test_free_port();
	n = wt_config_begin(text, sizeof(text), "weftd-clock", ids, ports,
	                    NODES);
	snprintf(text + n, sizeof(text) - (size_t)n,
	         "request_timeout = 1s\n[weftd]\nshutdown_timeout = 1s\n"
	         "metrics_listen = 127.0.0.1:0\n"
	         "[kv]\nwrite_quorum = all\nreplicate_timeout = 1s\n");
	wt_write_file(config, text);
	san = getenv(SAN_OPTIONS);
	snprintf(san_options, sizeof(san_options), "%s%s" SAN_N3,
	         san ? san : "", san ? ":" : "");
	san = san ? strdup(san) : NULL;
	for (i = 0; i < NODES; i++) {
		/* Only n3's process gets the shifted clock. */
		if (i == 2) {
			setenv("LD_PRELOAD", lib, 1);
			setenv("FAKETIME", shift, 1);
			setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
			setenv(SAN_OPTIONS, san_options, 1);
		}
		wt_node_start(&p[i], config, dir, ids[i], ports[i], NULL);
		unsetenv("LD_PRELOAD");
		unsetenv("FAKETIME");
		unsetenv("FAKETIME_DONT_FAKE_MONOTONIC");
		if (san != NULL)
			setenv(SAN_OPTIONS, san, 1);
		else
			unsetenv(SAN_OPTIONS);
	}
	free(san);
	/* Every member is dialed at start, so the nodes started before n3
	 * find it unreachable at first: what counts is what they log once
	 * each has every other up. */
	for (i = 0; i < NODES; i++) {
		for (j = 0; j < NODES; j++) {
			snprintf(key, sizeof(key), "peer %s is up", ids[j]);
			assert_true(i == j || wt_file_contains(p[i].err_path,
			                                       key, WAIT_MS));
		}
		since[i] = wt_file_size(p[i].err_path);
	}
	wt_client_start(config, "clock-client", NULL, &group, &client);
	/* Until n3 has measured the others' clocks (a heartbeat after they
	 * are first in touch), its key-value clock is its own, and an hour
	 * behind it refuses their versions as too far ahead: a put through
	 * each node that succeeds first (docs/RELIABILITY.md, "Clocks"). */
	for (i = 0; i < NODES; i++)
		assert_true(put_until_ok(client, ids[i]));
	start = weft_now_ns();
	while (wt_ms_since(start) < RUN_MS) {
		struct wt_call c = WT_CALL_INIT;

		i = puts % NODES;
		snprintf(key, sizeof(key), "k%d", puts++);
		assert_int_equal(weft_kv_client_put(client,
		                                    wt_peer(client, ids[i]),
		                                    key, strlen(key), "v", 1,
		                                    NULL, wt_call_done, &c),
		                 0);
		if (wt_call_wait(&c, WAIT_MS) != 0)
			failed++;
	}
	wt_client_stop(group, client);
	printf("n3's clock %s s: %d of %d puts through every node failed\n",
	       shift, failed, puts);
	for (i = 0; i < NODES; i++) {
		/* "peer X down: why", "peer X is down", "peer X
		 * unreachable": a timeout of 1 ms looks once. */
		if (wt_file_contains_from(p[i].err_path, since[i],
		                          " down: ", 1) ||
		    wt_file_contains_from(p[i].err_path, since[i], " is down",
		                          1) ||
		    wt_file_contains_from(p[i].err_path, since[i],
		                          " unreachable", 1))
			fail_msg("n3's clock %s s: %s logged a peer down",
			         shift, ids[i]);
	}
	assert_true(
	    wt_file_contains(p[0].err_path, "peer n3's clock is", WAIT_MS));
	assert_int_equal(failed, 0);
	assert_int_equal(wt_nodes_stop(p, NODES), 0);
	for (i = 0; i < NODES; i++)
		unlink(p[i].err_path);
	unlink(config);
	rmdir(dir);
}

static void
test_a_node_with_its_clock_shifted(void **state)
{
	const char *lib = faketime_lib();

	(void)state;
	if (lib == NULL) {
		printf("libfaketime is not installed (Debian: faketime)\n");
		skip();
	}
	run_shifted(lib, "+5");
	run_shifted(lib, "-3600");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_node_with_its_clock_shifted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
