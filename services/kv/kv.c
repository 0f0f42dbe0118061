/* SPDX-License-Identifier: MIT */
/* kv.c: the key-value service: set-up, reads, the clock and counters. */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "kv_int.h"

/*
 * The hybrid clock's physical part is the cluster's time
 * (weft_msvc_cluster_wall_ms): this node's wall clock moved by the median
 * of the offsets it measures to the members that are up. A node whose
 * clock is far off then stamps versions near the others' clocks, so they
 * are neither refused as too far ahead nor beaten by older ones.
 */
static uint64_t
cluster_ms(weft_kv *kv)
{
	/* The cluster's time is only as good as the clocks measured: every
	 * member is watched from the first use of the clock on. Without a
	 * service (the store's unit tests), the system's clock. */
	if (kv->svc == NULL)
		return weft_wall_ms();
	if (!atomic_load_explicit(&kv->watching, memory_order_relaxed) &&
	    !atomic_exchange(&kv->watching, true))
		weft_msvc_watch_members(kv->svc);
	return weft_msvc_cluster_wall_ms(kv->svc);
}

uint64_t
weft__kv_clock_next(weft_kv *kv)
{
	uint64_t wall = cluster_ms(kv) << 16;
	uint64_t old = atomic_load(&kv->clock), next;

	do {
		if (old == UINT64_MAX && wall <= old)
			return 0;
		next = wall > old ? wall : old + 1;
	} while (!atomic_compare_exchange_weak(&kv->clock, &old, next));
	return next;
}

int
weft__kv_clock_observe(weft_kv *kv, uint64_t ts)
{
	uint64_t limit = cluster_ms(kv) + kv->max_skew_ms;
	uint64_t old = atomic_load(&kv->clock);

	/* The timestamp's millisecond part, against ours plus the skew. */
	if ((ts >> 16) > limit)
		return WEFT_EINVAL;
	while (old < ts && !atomic_compare_exchange_weak(&kv->clock, &old, ts))
		;
	return 0;
}

bool
weft__kv_refuse_read(weft_kv *kv, weft_msvc_msg *msg)
{
	if (atomic_load_explicit(&kv->caught_up, memory_order_acquire))
		return false;
	weft__kv_count(&kv->st.reads_refused);
	weft_msvc_respond_error(msg, WEFT_EOVERLOAD,
	                        "catching up: this member is still copying "
	                        "the data; read from another member");
	return true;
}

/* Fills the options from opts, the [kv] section and the defaults. */
static int
configure(weft_kv *kv, const weft_kv_opts *opts)
{
	struct weft__kv_settings s;
	char err[512];

	if (weft__kv_settings_read(opts ? opts->config : NULL, kv->members, &s,
	                           err, sizeof(err)) != 0) {
		weft_error("kv: %s", err);
		return WEFT_ECONFIG;
	}
	kv->quorum_spec = s.quorum;
	kv->quorum = s.write_quorum;
	kv->read_consistency = s.read_consistency;
	kv->repair_interval_ms = s.repair_interval_ms;
	kv->replicate_timeout_ms = s.replicate_timeout_ms;
	kv->max_value = s.max_value;
	kv->max_skew_ms = s.max_clock_skew_ms;
	return 0;
}

/* Applies the explicit options over the configured ones. */
static int
override(weft_kv *kv, const weft_kv_opts *opts)
{
	if (opts == NULL)
		return 0;
	if (opts->write_quorum > kv->members) {
		weft_error("kv: write quorum %u above the %u members",
		           opts->write_quorum, kv->members);
		return WEFT_ECONFIG;
	}
	if (opts->write_quorum) {
		kv->quorum_spec = (struct weft__kv_quorum){
		    WEFT__KV_QUORUM_COUNT, opts->write_quorum};
		kv->quorum = opts->write_quorum;
	}
	if (opts->read_consistency > WEFT_KV_READ_ALL) {
		weft_error("kv: read consistency %u: want one, quorum or all",
		           (unsigned)opts->read_consistency);
		return WEFT_ECONFIG;
	}
	if (opts->read_consistency != WEFT_KV_READ_DEFAULT)
		kv->read_consistency = opts->read_consistency;
	atomic_store(&kv->members_known, !opts->await_members);
	kv->on_caught_up = opts->on_caught_up;
	kv->on_caught_up_arg = opts->on_caught_up_arg;
	if (opts->repair_interval_ms)
		kv->repair_interval_ms = opts->repair_interval_ms;
	if (opts->replicate_timeout_ms)
		kv->replicate_timeout_ms = opts->replicate_timeout_ms;
	if (opts->max_value_bytes)
		kv->max_value = opts->max_value_bytes;
	if (opts->max_clock_skew_ms)
		kv->max_skew_ms = opts->max_clock_skew_ms;
	return 0;
}

static weft_msvc_peer *
find_self(weft_msvc *svc)
{
	size_t i, n = weft_msvc_peer_count(svc);

	for (i = 0; i < n; i++) {
		if (weft_msvc_peer_is_self(weft_msvc_peer_at(svc, i)))
			return weft_msvc_peer_at(svc, i);
	}
	return NULL;
}

static int
register_verbs(weft_kv *kv)
{
	static const struct {
		uint32_t verb;
		const char *name;
		weft_msvc_handler_cb cb;
		unsigned flags;
	} verbs[] = {
	    {WEFT_KV_VERB_GET, "kv_get", weft__kv_on_get, WEFT_MSVC_CLIENTS},
	    {WEFT_KV_VERB_PUT, "kv_put", weft__kv_on_put, WEFT_MSVC_CLIENTS},
	    {WEFT_KV_VERB_DELETE, "kv_delete", weft__kv_on_delete,
	     WEFT_MSVC_CLIENTS},
	    /* Replicas take writes from the members that coordinate them. */
	    {WEFT_KV_VERB_REPLICATE, "kv_replicate", weft__kv_on_replicate, 0},
	    {WEFT_KV_VERB_SCAN, "kv_scan", weft__kv_on_scan, WEFT_MSVC_CLIENTS},
	    /* Replicas copy from one another (sync.c). */
	    {WEFT_KV_VERB_DIGEST, "kv_digest", weft__kv_on_digest, 0},
	    {WEFT_KV_VERB_PULL, "kv_pull", weft__kv_on_pull, 0},
	    /* Coordinators of quorum and all reads ask replicas (read.c). */
	    {WEFT_KV_VERB_READ, "kv_read", weft__kv_on_read, 0},
	};
	size_t i;
	int rv;

	for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		rv = weft_msvc_register(kv->svc, verbs[i].verb, verbs[i].name,
		                        verbs[i].cb, kv, verbs[i].flags);
		if (rv != 0)
			return rv;
	}
	return 0;
}

int
weft__kv_members_get(weft_kv *kv, struct weft__kv_members *m)
{
	size_t n = weft_msvc_members(kv->svc, m->small, 16);

	m->peers = m->small;
	m->count = n;
	/* Members added meanwhile are left for the next look. */
	while (m->count > 16 && m->peers == m->small) {
		if ((m->peers = calloc(n, sizeof(*m->peers))) == NULL)
			return WEFT_ENOMEM;
		m->count = weft_msvc_members(kv->svc, m->peers, n);
		if (m->count > n) {
			free(m->peers);
			m->peers = m->small;
			n = m->count;
		}
	}
	if (m->count > n)
		m->count = n;
	return 0;
}

void
weft__kv_members_fini(struct weft__kv_members *m)
{
	if (m->peers != m->small)
		free(m->peers);
}

const char *
weft__kv_origin(weft_kv *kv, const char *id, size_t len)
{
	size_t i, n = weft_msvc_peer_count(kv->svc);
	const char *name;

	/* Removed members too: their writes outlive them. */
	for (i = 0; i < n; i++) {
		name = weft_msvc_peer_id(weft_msvc_peer_at(kv->svc, i));
		if (strlen(name) == len && memcmp(name, id, len) == 0)
			return name;
	}
	return NULL;
}

/*
 * A member joined or left: a write from now on goes to the members then
 * (write.c resolves the quorum for each write); the numbers here are for
 * reports. A member that left will not answer the aborts parked for it.
 */
static void
on_member(weft_msvc *svc, weft_msvc_peer *peer, bool joined, void *arg)
{
	weft_kv *kv = arg;
	struct weft__kv_members m;
	uint32_t n, q;
	bool listed = false;
	size_t i;

	(void)svc;
	if (weft__kv_members_get(kv, &m) != 0)
		return;
	for (i = 0; i < m.count; i++)
		listed |= m.peers[i] == peer;
	/* The list may not show this change yet. */
	n = (uint32_t)m.count + (joined && !listed) - (!joined && listed);
	weft__kv_members_fini(&m);
	q = weft__kv_quorum_now(&kv->quorum_spec, n);
	atomic_store(&kv->members, n);
	atomic_store(&kv->quorum, q);
	if (!joined)
		weft__kv_aborts_forget(kv, peer);
	weft_info("kv: %s %s: %u replicas, write quorum %u%s",
	          weft_msvc_peer_id(peer), joined ? "joined" : "left", n, q,
	          q > n ? " (more than the replicas: writes fail)" : "");
}

int
weft_kv_new(weft_msvc *svc, const weft_kv_opts *opts, weft_kv **out)
{
	weft_kv *kv;
	int rv;

	if (svc == NULL || out == NULL || !weft_msvc_is_member(svc))
		return WEFT_EINVAL;
	if ((kv = calloc(1, sizeof(*kv))) == NULL)
		return WEFT_ENOMEM;
	kv->svc = svc;
	kv->members = (uint32_t)weft_msvc_members(svc, NULL, 0);
	if ((kv->self = find_self(svc)) == NULL) {
		rv = WEFT_EINVAL;
		goto err_free;
	}
	if ((rv = configure(kv, opts)) != 0 || (rv = override(kv, opts)) != 0)
		goto err_free;
	if ((rv = weft__kv_store_init(&kv->store)) != 0)
		goto err_free;
	if ((rv = weft__kv_aborts_init(&kv->aborts)) != 0)
		goto err_store;
	if ((rv = register_verbs(kv)) != 0 ||
	    (rv = weft_msvc_on_member_event(svc, on_member, kv)) != 0)
		goto err_aborts;
	if ((rv = weft__kv_repair_start(kv)) != 0)
		goto err_aborts;
	weft_info("kv: %s serving %u replicas, write quorum %u, reads %s",
	          weft_msvc_node_id(svc), kv->members, kv->quorum,
	          kv->read_consistency == WEFT_KV_READ_ALL      ? "all"
	          : kv->read_consistency == WEFT_KV_READ_QUORUM ? "quorum"
	                                                        : "one");
	*out = kv;
	return 0;

err_aborts:
	weft__kv_aborts_fini(&kv->aborts);
err_store:
	weft__kv_store_fini(&kv->store);
err_free:
	free(kv);
	return rv;
}

void
weft_kv_free(weft_kv *kv)
{
	if (kv == NULL)
		return;
	weft__kv_repair_stop(kv);
	weft__kv_aborts_fini(&kv->aborts);
	weft__kv_store_fini(&kv->store);
	free(kv);
}

uint32_t
weft_kv_write_quorum(const weft_kv *kv)
{
	return atomic_load(&kv->quorum);
}

int
weft_kv_get_local(weft_kv *kv, const void *key, size_t key_len,
                  struct evbuffer *value_out)
{
	struct weft__kv_blob *b;
	int rv = 0;

	if (key_len == 0 || key_len > WEFT_KV_MAX_KEY)
		return WEFT_EINVAL;
	if ((b = weft__kv_store_get(&kv->store, key, key_len, NULL)) == NULL)
		return WEFT_ENOTFOUND;
	if (value_out != NULL && evbuffer_add(value_out, b->data, b->len) != 0)
		rv = WEFT_ENOMEM;
	weft__kv_blob_unref(b);
	return rv;
}

static uint64_t
load(const _Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

void
weft_kv_get_stats(const weft_kv *kv, weft_kv_stats *out)
{
	const struct weft__kv_counters *c = &kv->st;

	out->gets = load(&c->gets);
	out->get_misses = load(&c->get_misses);
	out->puts = load(&c->puts);
	out->deletes = load(&c->deletes);
	out->writes_acked = load(&c->writes_acked);
	out->quorum_failures = load(&c->quorum_failures);
	out->replicas_applied = load(&c->replicas_applied);
	out->replicas_stale = load(&c->replicas_stale);
	out->replicas_refused = load(&c->replicas_refused);
	out->writes_superseded = load(&c->writes_superseded);
	out->replica_failures = load(&c->replica_failures);
	out->bad_requests = load(&c->bad_requests);
	out->scans = load(&c->scans);
	out->keys = load(&kv->store.keys);
	out->value_bytes = load(&kv->store.value_bytes);
	out->aborts_sent = load(&c->aborts_sent);
	out->replicas_aborted = load(&c->replicas_aborted);
	out->aborts_dropped = load(&c->aborts_dropped);
	out->reads_refused = load(&c->reads_refused);
	out->repair_rounds = load(&c->repair_rounds);
	out->ranges_repaired = load(&c->ranges_repaired);
	out->entries_pulled = load(&c->entries_pulled);
	out->entries_pulled_stale = load(&c->entries_pulled_stale);
	out->bytes_pulled = load(&c->bytes_pulled);
	out->caught_up = atomic_load(&kv->caught_up);
	out->reads_coordinated = load(&c->reads_coordinated);
	out->read_disagreements = load(&c->read_disagreements);
	out->read_failures = load(&c->read_failures);
	out->read_repairs = load(&c->read_repairs);
	out->reads_downgraded = load(&c->reads_downgraded);
	out->read_answers_refused = load(&c->read_answers_refused);
}

static int
dump_stats(const weft_kv_stats *s, const char *node, struct evbuffer *out)
{
	const struct {
		const char *name, *type, *help;
		uint64_t value;
	} rows[] = {
	    {"gets_total", "counter", "get requests answered", s->gets},
	    {"get_misses_total", "counter", "gets of absent keys",
	     s->get_misses},
	    {"puts_total", "counter", "puts coordinated", s->puts},
	    {"deletes_total", "counter", "deletes coordinated", s->deletes},
	    {"writes_acked_total", "counter", "writes that met quorum",
	     s->writes_acked},
	    {"quorum_failures_total", "counter", "writes that missed quorum",
	     s->quorum_failures},
	    {"replicas_applied_total", "counter", "replicated writes applied",
	     s->replicas_applied},
	    {"replicas_stale_total", "counter",
	     "replicated writes already superseded", s->replicas_stale},
	    {"replicas_refused_total", "counter",
	     "replicated writes refused: version too far ahead of the clock",
	     s->replicas_refused},
	    {"writes_superseded_total", "counter",
	     "writes answered CONFLICT: a newer version was held",
	     s->writes_superseded},
	    {"replica_failures_total", "counter", "replica acks that failed",
	     s->replica_failures},
	    {"bad_requests_total", "counter", "malformed requests",
	     s->bad_requests},
	    {"scans_total", "counter", "scan requests answered", s->scans},
	    {"keys", "gauge", "keys held, tombstones included", s->keys},
	    {"value_bytes", "gauge", "bytes of live values", s->value_bytes},
	    {"aborts_sent_total", "counter",
	     "aborts of failed writes sent to replicas", s->aborts_sent},
	    {"replicas_aborted_total", "counter",
	     "failed writes taken back on their coordinator's abort",
	     s->replicas_aborted},
	    {"aborts_dropped_total", "counter",
	     "aborts given up: too many waiting, or out of memory",
	     s->aborts_dropped},
	    {"reads_refused_total", "counter",
	     "gets and scans refused while catching up", s->reads_refused},
	    {"repair_rounds_total", "counter", "anti-entropy rounds completed",
	     s->repair_rounds},
	    {"ranges_repaired_total", "counter",
	     "key ranges found different by anti-entropy", s->ranges_repaired},
	    {"entries_pulled_total", "counter",
	     "entries copied from other members that were newer",
	     s->entries_pulled},
	    {"entries_pulled_stale_total", "counter",
	     "entries copied from other members that were not newer",
	     s->entries_pulled_stale},
	    {"bytes_pulled_total", "counter",
	     "payload bytes of catch-up and anti-entropy calls",
	     s->bytes_pulled},
	    {"caught_up", "gauge", "1 once reads are answered", s->caught_up},
	    {"reads_coordinated_total", "counter",
	     "quorum and all gets coordinated", s->reads_coordinated},
	    {"read_disagreements_total", "counter",
	     "quorum and all gets whose replicas disagreed",
	     s->read_disagreements},
	    {"read_failures_total", "counter",
	     "quorum and all gets answered with an error", s->read_failures},
	    {"read_repairs_total", "counter",
	     "newer entries applied to this replica by a read",
	     s->read_repairs},
	    {"reads_downgraded_total", "counter",
	     "replicas left out of a read: an older build without kv_read",
	     s->reads_downgraded},
	    {"read_answers_refused_total", "counter",
	     "replica answers to a read refused: malformed, or a version "
	     "too far ahead",
	     s->read_answers_refused},
	};
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		if (evbuffer_add_printf(out,
		                        "# HELP weft_kv_%s %s\n"
		                        "# TYPE weft_kv_%s %s\n"
		                        "weft_kv_%s{node=\"%s\"} %llu\n",
		                        rows[i].name, rows[i].help,
		                        rows[i].name, rows[i].type,
		                        rows[i].name, node,
		                        (unsigned long long)rows[i].value) < 0)
			return WEFT_ENOMEM;
	}
	return 0;
}

int
weft_kv_metrics_dump(const weft_kv *kv, struct evbuffer *out)
{
	weft_kv_stats s;

	weft_kv_get_stats(kv, &s);
	return dump_stats(&s, weft_msvc_node_id(kv->svc), out);
}
