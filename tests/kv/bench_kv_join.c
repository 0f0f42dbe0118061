/* SPDX-License-Identifier: MIT */
/*
 * bench_kv_join.c: a benchmark, not a test (ctest does not run it): the
 * time from a member being added to it serving reads. Four nodes on the
 * cluster simulator, n4 taken out (n1..n3 remove it, it stops); KEYS keys
 * of SIZE bytes are put through n1..n3 (a majority of three), 64 at a
 * time; then n1..n3 add n4 and it starts, empty, and the clock runs until
 * it is caught up (weft_kv_is_caught_up: it answers reads from then on).
 * Every connection goes through the simulator's proxies on loopback, one
 * more hop each way than between weftd processes.
 *
 *   build/tests/kv/bench_kv_join [KEYS] [SIZE]     (default 100000 1024)
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weft/kv.h>
#include <weft/sim.h>

#include "sim_int.h" /* the routes n4 is added at */

#define NODES 4
#define JOINER 3
#define OUTSTANDING 64
#define WAIT_NS (600ull * 1000000000ull)

static weft_kv *_Atomic kvs[NODES];
static _Atomic uint32_t done, failed;

static int
on_start(weft_sim *sim, uint32_t node, weft_msvc *svc, void *arg)
{
	weft_kv_opts opts = {.repair_interval_ms = 3600 * 1000};
	weft_kv *kv;
	int rv;

	(void)sim;
	(void)arg;
	if (!weft_msvc_is_member(svc))
		return 0;
	if ((rv = weft_kv_new(svc, &opts, &kv)) == 0)
		atomic_store(&kvs[node], kv);
	return rv;
}

static void
on_stop(weft_sim *sim, uint32_t node, weft_msvc *svc, void *arg)
{
	(void)sim;
	(void)svc;
	(void)arg;
	if (node < NODES)
		weft_kv_free(atomic_exchange(&kvs[node], NULL));
}

static void
on_put(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	(void)svc;
	(void)data;
	(void)len;
	(void)arg;
	if (status != 0)
		atomic_fetch_add(&failed, 1);
	atomic_fetch_add(&done, 1);
}

static void
pause_ms(long ms)
{
	nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000}, NULL);
}

static int
fail(const char *what, int rv)
{
	fprintf(stderr, "bench_kv_join: %s: %s\n", what, weft_strerror(rv));
	return 1;
}

int
main(int argc, char **argv)
{
	uint32_t keys =
	    argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 100000;
	size_t size = argc > 2 ? strtoul(argv[2], NULL, 10) : 1024;
	weft_sim_opts o = {.nodes = NODES,
	                   .cluster = "kvjoin",
	                   .on_start = on_start,
	                   .on_stop = on_stop};
	static const char *const ids[JOINER] = {"n1", "n2", "n3"};
	weft_msvc *client, *svc;
	weft_sim *sim;
	weft_msvc_peer *to[JOINER];
	uint64_t start, end, deadline;
	weft_kv_stats st;
	uint32_t endpoint, i, sent = 0;
	char key[32], *value;
	int rv;

	if (keys == 0 || size == 0 || (value = malloc(size)) == NULL)
		return 2;
	memset(value, 'v', size);
	weft_log_set_level(WEFT_LOG_WARN);
	if ((rv = weft_sim_new(&o, &sim)) != 0)
		return fail("sim", rv);
	if ((rv = weft_sim_client_new(sim, "client", &endpoint, &client)) != 0)
		return fail("client", rv);
	for (i = 0; i < JOINER; i++) {
		svc = weft_sim_node(sim, i);
		if ((rv = weft_msvc_member_remove(svc, "n4")) != 0)
			return fail("remove n4", rv);
		to[i] = weft_msvc_peer_find(client, ids[i]);
	}
	if ((rv = weft_sim_node_stop(sim, JOINER)) != 0)
		return fail("stop n4", rv);
	start = weft_now_ns();
	deadline = start + WAIT_NS;
	while (atomic_load(&done) < keys && weft_now_ns() < deadline) {
		if (sent == keys || sent - atomic_load(&done) >= OUTSTANDING) {
			pause_ms(1);
			continue;
		}
		snprintf(key, sizeof(key), "key%09u", sent);
		rv = weft_kv_client_put(client, to[sent % JOINER], key,
		                        strlen(key), value, size, NULL, on_put,
		                        NULL);
		if (rv != 0)
			return fail("put", rv);
		sent++;
	}
	end = weft_now_ns();
	printf("loaded %u keys of %zu bytes in %llu ms (%u failed)\n", keys,
	       size, (unsigned long long)((end - start) / 1000000),
	       atomic_load(&failed));
	/* n4 joins: every member adds it once its removal has drained, then
	 * it starts, empty. */
	start = weft_now_ns();
	deadline = start + WAIT_NS;
	for (i = 0; i < JOINER; i++) {
		svc = weft_sim_node(sim, i);
		while ((rv = weft_msvc_member_add(
		            svc, "n4", "127.0.0.1",
		            sim->routes[i][JOINER].port)) == WEFT_EBUSY &&
		       weft_now_ns() < deadline)
			pause_ms(1);
		if (rv != 0)
			return fail("add n4", rv);
	}
	start = weft_now_ns();
	if ((rv = weft_sim_node_start(sim, JOINER, NULL)) != 0)
		return fail("start n4", rv);
	while (!weft_kv_is_caught_up(atomic_load(&kvs[JOINER])) &&
	       weft_now_ns() < deadline)
		pause_ms(1);
	end = weft_now_ns();
	weft_kv_get_stats(atomic_load(&kvs[JOINER]), &st);
	printf("n4 caught up (serves reads) %llu ms after it was added: %llu "
	       "keys, %llu entries copied (%llu not newer), %llu MiB pulled\n",
	       (unsigned long long)((end - start) / 1000000),
	       (unsigned long long)st.keys,
	       (unsigned long long)st.entries_pulled,
	       (unsigned long long)st.entries_pulled_stale,
	       (unsigned long long)(st.bytes_pulled >> 20));
	weft_sim_free(sim);
	free(value);
	return st.caught_up ? 0 : 1;
}
