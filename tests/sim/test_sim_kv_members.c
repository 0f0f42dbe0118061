/* SPDX-License-Identifier: MIT */
/*
 * test_sim_kv_members.c: the key-value service while a member leaves and
 * joins again under load, on the cluster simulator, with a ledger of every
 * write. Two client threads write distinct keys through n1..n3 while n4 is
 * taken out (n1..n3 remove it, it stops) and brought back empty (n1..n3
 * add it, it starts and catches up), CYCLES times; meanwhile a reader
 * reads from n4 keys acknowledged before it started. Checked:
 *
 *   - every accepted write's callback runs exactly once;
 *   - n4 answers a read only once it holds every write acknowledged
 *     before it joined: a value is the one written, never a miss; before
 *     that it refuses with WEFT_EOVERLOAD;
 *   - no acknowledged write is lost: after anti-entropy rounds every
 *     member holds every acknowledged key with its value.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/kv.h>
#include <weft/sim.h>

#include "sim_int.h" /* the routes n4 is added at */

#define NODES 4
#define JOINER 3
#define WRITERS 2
#define ENTRIES 100000 /* writes at most, all threads */
#define OUTSTANDING 16 /* per thread */
#define CYCLES 3
#define READS 100 /* answered reads of n4 per cycle, at least */
#define WAIT_MS 20000

static const char *const ids[NODES] = {"n1", "n2", "n3", "n4"};

struct entry {
	_Atomic uint8_t accepted, callbacks;
	_Atomic int status;
};

struct ledger {
	weft_sim *sim;
	weft_msvc *client;
	weft_kv *_Atomic kv[NODES];
	struct entry *e;
	_Atomic uint32_t next;
	_Atomic uint32_t accepted, done;
	_Atomic bool stop;
	/* The reader's tally. */
	uint64_t refused, answered, wrong;
};

static struct ledger the_ledger;

static void
pause_ms(long ms)
{
	nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000}, NULL);
}

static void
key_of(char *key, char *value, uint32_t i)
{
	snprintf(key, 16, "k%07u", i);
	snprintf(value, 16, "v%07u", i);
}

static int
on_start(weft_sim *sim, uint32_t node, weft_msvc *svc, void *arg)
{
	struct ledger *l = arg;
	weft_kv_opts opts = {.replicate_timeout_ms = 1000,
	                     .repair_interval_ms = 3600 * 1000};
	weft_kv *kv;
	int rv;

	(void)sim;
	if (!weft_msvc_is_member(svc))
		return 0;
	if ((rv = weft_kv_new(svc, &opts, &kv)) == 0)
		atomic_store(&l->kv[node], kv);
	return rv;
}

static void
on_stop(weft_sim *sim, uint32_t node, weft_msvc *svc, void *arg)
{
	struct ledger *l = arg;

	(void)sim;
	(void)svc;
	if (node < NODES)
		weft_kv_free(atomic_exchange(&l->kv[node], NULL));
}

static void
on_put(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct entry *e = arg;

	(void)svc;
	(void)data;
	(void)len;
	atomic_store(&e->status, status);
	atomic_fetch_add(&e->callbacks, 1);
	atomic_fetch_add(&the_ledger.done, 1);
}

static void *
writer(void *arg)
{
	struct ledger *l = arg;
	char key[16], value[16];
	uint32_t i, mine = 0;
	weft_msvc_peer *to;
	int rv;

	while (!atomic_load(&l->stop) && mine < ENTRIES / WRITERS) {
		/* Bounded: the writes still out, of both threads. */
		if (atomic_load(&l->accepted) - atomic_load(&l->done) >=
		    WRITERS * OUTSTANDING) {
			pause_ms(1);
			continue;
		}
		i = atomic_fetch_add(&l->next, 1);
		mine++;
		key_of(key, value, i);
		to = weft_msvc_peer_find(l->client, ids[i % 3]);
		rv = weft_kv_client_put(l->client, to, key, strlen(key), value,
		                        strlen(value), NULL, on_put, &l->e[i]);
		if (rv == 0) {
			atomic_store(&l->e[i].accepted, 1);
			atomic_fetch_add(&l->accepted, 1);
		} else {
			atomic_store(&l->e[i].status, rv);
		}
	}
	return NULL;
}

static bool
wait_accepted(struct ledger *l, uint32_t more)
{
	uint32_t want = atomic_load(&l->accepted) + more;
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;

	while (atomic_load(&l->accepted) < want) {
		if (weft_now_ns() > deadline)
			return false;
		pause_ms(2);
	}
	return true;
}

static bool
all_done(struct ledger *l)
{
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;

	while (atomic_load(&l->done) != atomic_load(&l->accepted)) {
		if (weft_now_ns() > deadline)
			return false;
		pause_ms(2);
	}
	return true;
}

static bool
acked(struct ledger *l, uint32_t i)
{
	return atomic_load(&l->e[i].callbacks) == 1 &&
	       atomic_load(&l->e[i].status) == 0;
}

/* One n4 member change on every other node: add or remove. */
static void
change_everywhere(struct ledger *l, bool add)
{
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	weft_msvc *svc;
	uint32_t i;
	int rv;

	for (i = 0; i < JOINER; i++) {
		svc = weft_sim_node(l->sim, i);
		if (!add) {
			assert_int_equal(weft_msvc_member_remove(svc, "n4"), 0);
			continue;
		}
		/* Once the drain of its removal is over. */
		while ((rv = weft_msvc_member_add(
		            svc, "n4", "127.0.0.1",
		            l->sim->routes[i][JOINER].port)) == WEFT_EBUSY &&
		       weft_now_ns() < deadline)
			pause_ms(5);
		assert_int_equal(rv, 0);
	}
}

struct read {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int status;
	struct evbuffer *data;
};

static void
on_get(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct read *r = arg;

	(void)svc;
	pthread_mutex_lock(&r->lock);
	r->status = status;
	evbuffer_add(r->data, data, len);
	r->done = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* Reads key i through n4; returns the status, checking the value. */
static int
read_n4(struct ledger *l, uint32_t i)
{
	char key[16], value[16];
	struct read r = {.status = 1};
	struct timespec ts;
	int status;

	key_of(key, value, i);
	pthread_mutex_init(&r.lock, NULL);
	pthread_cond_init(&r.cond, NULL);
	assert_non_null(r.data = evbuffer_new());
	assert_int_equal(
	    weft_kv_client_get(l->client, weft_msvc_peer_find(l->client, "n4"),
	                       key, strlen(key), NULL, on_get, &r),
	    0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&r.lock);
	while (!r.done && pthread_cond_timedwait(&r.cond, &r.lock, &ts) == 0)
		;
	assert_true(r.done);
	status = r.status;
	pthread_mutex_unlock(&r.lock);
	if (status == 0 &&
	    (evbuffer_get_length(r.data) != strlen(value) ||
	     memcmp(evbuffer_pullup(r.data, -1), value, strlen(value)) != 0))
		status = WEFT_EINVAL; /* a wrong value */
	evbuffer_free(r.data);
	pthread_cond_destroy(&r.cond);
	pthread_mutex_destroy(&r.lock);
	return status;
}

/*
 * Reads, through n4 just started, keys acknowledged before it started
 * (before[0..n)) until READS of them are answered: each answer must be
 * the value written; refusals while it catches up are counted.
 */
static void
read_joiner(struct ledger *l, const uint32_t *before, uint32_t n, uint64_t *rng)
{
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	uint32_t answered = 0;
	int status;

	while (answered < READS && weft_now_ns() < deadline) {
		*rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
		status = read_n4(l, before[(*rng >> 33) % n]);
		if (status == 0) {
			answered++;
		} else if (status == WEFT_EOVERLOAD) {
			l->refused++;
		} else if (status == WEFT_ENOTFOUND || status == WEFT_EINVAL) {
			l->wrong++;
			answered++;
		} else {
			pause_ms(5); /* not connected yet */
		}
	}
	l->answered += answered;
	assert_int_equal(answered, READS);
}

/* The keys acknowledged so far. */
static uint32_t *
acked_now(struct ledger *l, uint32_t *n)
{
	uint32_t i, end = atomic_load(&l->next), *out;

	assert_non_null(out = calloc(end + 1, sizeof(*out)));
	for (*n = 0, i = 0; i < end; i++)
		if (acked(l, i))
			out[(*n)++] = i;
	return out;
}

/* Anti-entropy rounds on every node, each with every other in turn. */
static void
converge(struct ledger *l)
{
	weft_kv_stats st;
	uint64_t want, deadline;
	uint32_t i, r;
	weft_kv *kv;

	for (r = 0; r < NODES - 1; r++) {
		for (i = 0; i < NODES; i++) {
			kv = atomic_load(&l->kv[i]);
			weft_kv_get_stats(kv, &st);
			want = st.repair_rounds + 1;
			deadline = weft_now_ns() + WAIT_MS * 1000000ull;
			do {
				weft_kv_repair(kv);
				pause_ms(20);
				weft_kv_get_stats(kv, &st);
			} while (st.repair_rounds < want &&
			         weft_now_ns() < deadline);
			assert_true(st.repair_rounds >= want);
		}
	}
}

static void
test_a_member_leaves_and_joins_under_kv_load(void **state)
{
	struct ledger *l = &the_ledger;
	weft_sim_opts o = {.nodes = NODES,
	                   .cluster = "kvsim",
	                   .on_start = on_start,
	                   .on_stop = on_stop,
	                   .arg = l};
	char key[16], value[16];
	uint32_t i, n, end, ok = 0, failed = 0, lost = 0, *before;
	uint32_t why[64] = {0}; /* failed writes by -status */
	uint64_t rng;
	pthread_t th[WRITERS];
	struct evbuffer *buf;
	uint32_t endpoint;
	int c;

	(void)state;
	memset(l, 0, sizeof(*l));
	assert_non_null(l->e = calloc(ENTRIES, sizeof(*l->e)));
	assert_int_equal(weft_sim_new(&o, &l->sim), 0);
	rng = weft_sim_seed(l->sim) | 1;
	assert_int_equal(
	    weft_sim_client_new(l->sim, "client", &endpoint, &l->client), 0);
	for (c = 0; c < WRITERS; c++)
		assert_int_equal(pthread_create(&th[c], NULL, writer, l), 0);
	for (c = 0; c < CYCLES; c++) {
		assert_true(wait_accepted(l, 300));
		change_everywhere(l, false);
		assert_int_equal(weft_sim_node_stop(l->sim, JOINER), 0);
		assert_true(wait_accepted(l, 300));
		change_everywhere(l, true);
		before = acked_now(l, &n);
		assert_true(n > 0);
		assert_int_equal(weft_sim_node_start(l->sim, JOINER, NULL), 0);
		read_joiner(l, before, n, &rng);
		free(before);
	}
	assert_true(wait_accepted(l, 300));
	atomic_store(&l->stop, true);
	for (c = 0; c < WRITERS; c++)
		pthread_join(th[c], NULL);
	assert_true(all_done(l));
	converge(l);
	end = atomic_load(&l->next);
	for (i = 0; i < end; i++) {
		struct entry *e = &l->e[i];

		assert_int_equal(atomic_load(&e->callbacks),
		                 atomic_load(&e->accepted));
		if (!acked(l, i)) {
			failed += atomic_load(&e->accepted);
			if (atomic_load(&e->accepted))
				why[-atomic_load(&e->status) & 63]++;
			continue;
		}
		ok++;
		key_of(key, value, i);
		for (c = 0; c < NODES; c++) {
			buf = evbuffer_new();
			if (weft_kv_get_local(atomic_load(&l->kv[c]), key,
			                      strlen(key), buf) != 0 ||
			    evbuffer_get_length(buf) != strlen(value) ||
			    memcmp(evbuffer_pullup(buf, -1), value,
			           strlen(value)) != 0)
				lost++;
			evbuffer_free(buf);
		}
	}
	print_message("%u writes, %u acknowledged, %u failed; n4 refused %llu "
	              "reads while catching up and answered %llu (%llu "
	              "wrong); %u acknowledged copies missing\n",
	              end, ok, failed, (unsigned long long)l->refused,
	              (unsigned long long)l->answered,
	              (unsigned long long)l->wrong, lost);
	for (i = 0; i < 64; i++)
		if (why[i] > 0)
			print_message("  failed with %s: %u\n",
			              weft_strerror(-(int)i), why[i]);
	assert_int_equal(l->wrong, 0);
	assert_int_equal(lost, 0);
	assert_true(ok > 0);
	weft_sim_free(l->sim);
	free(l->e);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_member_leaves_and_joins_under_kv_load),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
