/* SPDX-License-Identifier: MIT */
/*
 * health.c: what the node tells an orchestrator. /livez: every loop of
 * the group still runs the tasks posted to it. /readyz: the node serves,
 * enough members are up for a key-value write to meet its quorum, and its
 * replica has caught up, so that it answers reads.
 * docs/WEFTD.md ("Health") defines both; systemd hears of the node's
 * start and stop through notify.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "weftd_int.h"

/* Every loop is sent a probe this often, and a probe that has waited
 * longer than WEFTD_LIVE_MS for its loop makes the node not live: a loop
 * that blocks (a handler that does not return, a deadlock) for seconds
 * serves nobody, while one busy for a second still turns. */
#define PROBE_MS 500
#define LIVE_MS 5000

/* One loop's probe: posted by the main loop, run by the loop. */
struct weftd_probe {
	weft_task task;
	_Atomic bool queued;
	_Atomic uint64_t posted_ns;
};

static void
on_probe(weft_loop *loop, int status, void *arg)
{
	struct weftd_probe *p = arg;

	(void)loop;
	(void)status;
	atomic_store(&p->queued, false);
}

/* Main loop: posts a probe to every loop whose last one has run. */
static void
on_probe_timer(weft_timer *t, void *arg)
{
	struct weftd *d = arg;
	size_t i;

	(void)t;
	for (i = 0; i < d->nprobes; i++) {
		struct weftd_probe *p = &d->probes[i];

		if (atomic_load(&p->queued))
			continue;
		atomic_store(&p->posted_ns, weft_now_ns());
		atomic_store(&p->queued, true);
		p->task.cb = on_probe;
		p->task.arg = p;
		if (weft_loop_post_task(weft_loop_group_at(d->group, i),
		                        &p->task) != 0)
			atomic_store(&p->queued, false);
	}
}

int
weftd_health_start(struct weftd *d)
{
	size_t n = weft_loop_group_size(d->group);

	if ((d->probes = calloc(n, sizeof(*d->probes))) == NULL)
		return WEFT_ENOMEM;
	d->nprobes = n;
	if (weft_timer_new(d->main_loop, on_probe_timer, d, &d->probe_timer))
		return WEFT_ENOMEM;
	return weft_timer_start(d->probe_timer, PROBE_MS, PROBE_MS);
}

void
weftd_health_stop(struct weftd *d)
{
	if (d->probe_timer != NULL)
		weft_timer_free(d->probe_timer);
	d->probe_timer = NULL;
}

/* After the group is freed: a probe still queued has run by then. */
void
weftd_health_free(struct weftd *d)
{
	free(d->probes);
	d->probes = NULL;
	d->nprobes = 0;
}

/* ---- The checks ------------------------------------------------------- */

/* A check: its name and whether it passed; why says what failed. */
struct check {
	const char *name;
	bool ok;
	char why[256];
};

static void
check_loops(struct weftd *d, struct check *c)
{
	uint64_t now = weft_now_ns(), waited_ms;
	size_t i;

	c->name = "loops";
	c->ok = true;
	for (i = 0; i < d->nprobes; i++) {
		struct weftd_probe *p = &d->probes[i];

		if (!atomic_load(&p->queued))
			continue;
		waited_ms = (now - atomic_load(&p->posted_ns)) / 1000000;
		if (waited_ms > LIVE_MS) {
			c->ok = false;
			snprintf(c->why, sizeof(c->why),
			         "loop %zu has not run a task posted %llu ms "
			         "ago",
			         i, (unsigned long long)waited_ms);
			return;
		}
	}
}

static void
check_listening(struct weftd *d, struct check *c)
{
	c->name = "listening";
	c->ok = d->svc != NULL && weft_msvc_port(d->svc) != 0;
	if (!c->ok)
		snprintf(c->why, sizeof(c->why),
		         "the service is not listening");
}

/* The configuration is loaded and checked before anything starts (weftd
 * exits with 78 otherwise), and SIGHUP reloads only the TLS files, which
 * keep the old ones when the new ones do not load: while the endpoint
 * answers, this passes. It is listed so that the verbose answer shows
 * every condition of readiness. */
static void
check_config(struct weftd *d, struct check *c)
{
	c->name = "config";
	c->ok = d->cfg != NULL;
	if (!c->ok)
		snprintf(c->why, sizeof(c->why), "no configuration");
}

/* Appends ", id" (or the first "id") to a bounded list. */
static void
list_add(char *list, size_t cap, const char *id)
{
	size_t len = strlen(list);

	if (len + 1 < cap)
		snprintf(list + len, cap - len, "%s%s", len ? ", " : "", id);
}

/* The members up, this node included, against the key-value write
 * quorum: with fewer, every write through this node fails. */
static void
check_quorum(struct weftd *d, struct check *c)
{
	size_t i, n = weft_msvc_peer_count(d->svc), members = 0;
	uint32_t need = weft_kv_write_quorum(d->kv), up = 0;
	char down[160] = "";

	c->name = "quorum";
	for (i = 0; i < n; i++) {
		weft_msvc_peer *p = weft_msvc_peer_at(d->svc, i);

		/* A member removed at run time is not one to wait for. */
		if (!weft_msvc_peer_is_member(p))
			continue;
		members++;
		if (weft_msvc_peer_is_self(p) || weft_msvc_peer_is_up(p))
			up++;
		else
			list_add(down, sizeof(down), weft_msvc_peer_id(p));
	}
	c->ok = up >= need;
	snprintf(c->why, sizeof(c->why),
	         "%u of %zu members up, %u needed for the write quorum%s%s%s",
	         up, members, need, down[0] ? " (down: " : "", down,
	         down[0] ? ")" : "");
}

/* A replica started (or restarted) copies the data of enough members
 * before it answers reads (weft_kv_is_caught_up): until then every read
 * through this node is refused as overloaded. */
static void
check_replica(struct weftd *d, struct check *c)
{
	c->name = "replica";
	c->ok = weft_kv_is_caught_up(d->kv);
	if (!c->ok)
		snprintf(c->why, sizeof(c->why),
		         "the key-value replica is catching up (reads refused "
		         "until it has copied enough members' data)");
}

/* Writes the answer: "ok", or "not WHAT: " and what failed; verbose,
 * every check as etcd lists them. Returns whether all passed. */
static bool
report(struct evbuffer *out, const char *what, struct check *c, size_t n,
       bool verbose)
{
	const char *sep = ": ";
	bool ok = true;
	size_t i;

	for (i = 0; i < n; i++)
		ok = ok && c[i].ok;
	for (i = 0; verbose && i < n; i++)
		evbuffer_add_printf(out, "[%c]%s %s%s%s\n", c[i].ok ? '+' : '-',
		                    c[i].name, c[i].ok ? "ok" : "failed",
		                    c[i].why[0] ? ": " : "", c[i].why);
	if (ok) {
		evbuffer_add_printf(out, "%s\n",
		                    verbose ? "ok: all checks passed" : "ok");
		return true;
	}
	evbuffer_add_printf(out, "not %s", what);
	for (i = 0; i < n; i++) {
		if (!c[i].ok)
			evbuffer_add_printf(out, "%s%s", sep, c[i].why);
		sep = c[i].ok ? sep : "; ";
	}
	evbuffer_add_printf(out, "\n");
	return false;
}

bool
weftd_livez(struct weftd *d, struct evbuffer *out, bool verbose)
{
	struct check c[1] = {{0}};

	check_loops(d, &c[0]);
	return report(out, "live", c, 1, verbose);
}

bool
weftd_readyz(struct weftd *d, struct evbuffer *out, bool verbose)
{
	struct check c[4] = {{0}};

	check_listening(d, &c[0]);
	check_config(d, &c[1]);
	if (c[0].ok) {
		check_quorum(d, &c[2]);
		check_replica(d, &c[3]);
	} else {
		c[2] = (struct check){.name = "quorum", .why = "not started"};
		c[3] = (struct check){.name = "replica", .why = "not started"};
	}
	return report(out, "ready", c, 4, verbose);
}
