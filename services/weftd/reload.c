/* SPDX-License-Identifier: MIT */
/*
 * reload.c: the configuration file as the cluster's discovery. On SIGHUP,
 * and when the file changes on disk (looked at each second), weftd reads
 * it again and applies what changed in its members through the membership
 * API: [node ID] sections added (weft_msvc_member_add), removed
 * (weft_msvc_member_remove), or with another host or port
 * (weft_msvc_set_peer_addr). A file that does not load, or that changes
 * anything a running node cannot take (weft_msvc_config_check_change), is
 * refused as a whole with its file:line, and the configuration in force
 * stays. docs/WEFTD.md, "Changing the cluster".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "weftd_int.h"

/* How often the file is looked at for a change. */
#define WATCH_MS 1000
/* At most one line per this long about refused files. */
#define REFUSED_LOG_MS 10000

/* Enough of a stat to tell a changed file: an editor that writes in
 * place changes the time or size, one that renames a new file over it
 * the inode. */
static void
file_stamp(const char *path, struct weftd_stamp *out)
{
	struct stat st;

	memset(out, 0, sizeof(*out));
	if (stat(path, &st) != 0)
		return;
	out->dev = (uint64_t)st.st_dev;
	out->ino = (uint64_t)st.st_ino;
	out->size = (uint64_t)st.st_size;
	out->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u +
	                (uint64_t)st.st_mtim.tv_nsec;
}

/* The configuration the members were last set from. */
static const weft_msvc_config *
in_force(const struct weftd *d)
{
	return d->applied != NULL ? d->applied : d->cfg;
}

static ssize_t
node_index(const weft_msvc_config *cfg, const char *id)
{
	size_t i, n = weft_msvc_config_node_count(cfg);
	const char *nid;

	for (i = 0; i < n; i++)
		if (weft_msvc_config_node(cfg, i, &nid, NULL, NULL) == 0 &&
		    strcmp(nid, id) == 0)
			return (ssize_t)i;
	return -1;
}

/* A member of cfg: added, or moved. false when it must be tried again
 * (removed a moment ago, still draining). */
static bool
apply_node(struct weftd *d, const weft_msvc_config *cfg, size_t i)
{
	const weft_msvc_config *old = in_force(d);
	const char *id, *host, *old_host;
	uint16_t port, old_port;
	ssize_t j;
	int rv;

	weft_msvc_config_node(cfg, i, &id, &host, &port);
	if (strcmp(id, d->id) == 0)
		return true;
	if (weft_msvc_peer_find(d->svc, id) == NULL) {
		rv = weft_msvc_member_add(d->svc, id, host, port);
		if (rv == 0)
			weft_info("weftd: %s: member %s added at %s:%u",
			          d->config_path, id, host, port);
		else
			weft_warn("weftd: %s: cannot add member %s: %s%s",
			          d->config_path, id, weft_strerror(rv),
			          rv == WEFT_EBUSY ? " (still draining; tried "
			                             "again in a second)"
			                           : "");
		return rv != WEFT_EBUSY;
	}
	j = node_index(old, id);
	if (j >= 0) {
		weft_msvc_config_node(old, (size_t)j, NULL, &old_host,
		                      &old_port);
		if (strcmp(old_host, host) == 0 && old_port == port)
			return true;
	}
	if ((rv = weft_msvc_set_peer_addr(d->svc, id, host, port)) == 0)
		weft_info("weftd: %s: member %s now at %s:%u", d->config_path,
		          id, host, port);
	else
		weft_warn("weftd: %s: cannot move member %s: %s",
		          d->config_path, id, weft_strerror(rv));
	return true;
}

/* Members that cfg no longer lists leave. */
static void
remove_gone(struct weftd *d, const weft_msvc_config *cfg)
{
	weft_msvc_peer *list[64], **members = list;
	size_t i, cap = 64, n = weft_msvc_members(d->svc, list, cap);
	int rv;

	if (n > cap) {
		/* Only this thread adds members: n stays. */
		if ((members = calloc(n, sizeof(*members))) == NULL)
			return;
		cap = n;
		n = weft_msvc_members(d->svc, members, cap);
	}
	for (i = 0; i < n && i < cap; i++) {
		const char *id = weft_msvc_peer_id(members[i]);

		if (weft_msvc_peer_is_self(members[i]) ||
		    node_index(cfg, id) >= 0)
			continue;
		if ((rv = weft_msvc_member_remove(d->svc, id)) == 0)
			weft_info("weftd: %s: member %s removed",
			          d->config_path, id);
		else if (rv != WEFT_ENOTFOUND)
			weft_warn("weftd: %s: cannot remove member %s: %s",
			          d->config_path, id, weft_strerror(rv));
	}
	if (members != list)
		free(members);
}

/* Sets the members from cfg; false when some must be tried again. */
static bool
apply(struct weftd *d, const weft_msvc_config *cfg)
{
	size_t i, n = weft_msvc_config_node_count(cfg);
	bool done = true;

	remove_gone(d, cfg);
	for (i = 0; i < n; i++)
		done = apply_node(d, cfg, i) && done;
	return done;
}

void
weftd_reload(struct weftd *d, const char *why, bool signalled)
{
	weft_msvc_config *cfg;
	char err[640];
	int rv;

	file_stamp(d->config_path, &d->stamp);
	rv = weftd_config_load(d->config_path, &cfg, err, sizeof(err));
	if (rv == 0 && (rv = weft_msvc_config_check_change(
	                    in_force(d), cfg, d->id, err, sizeof(err))) != 0)
		weft_msvc_config_free(cfg);
	if (rv != 0) {
		d->reloads_refused++;
		/* A signal is someone asking: each is answered. A file that
		 * an editor saves again and again is a line per interval. */
		if (signalled)
			weft_error("weftd: %s: %s refused, the configuration "
			           "in force stays: %s",
			           why, d->config_path, err);
		else
			weft_log_limited(&d->reload_log, WEFT_LOG_ERROR,
			                 "weftd: %s: %s refused, the "
			                 "configuration in force stays: %s",
			                 why, d->config_path, err);
		return;
	}
	d->reloads_applied++;
	weft_info("weftd: %s: %s read again", why, d->config_path);
	d->reload_retry = !apply(d, cfg);
	weft_msvc_config_free(d->applied);
	d->applied = cfg;
}

static void
on_watch(weft_timer *t, void *arg)
{
	struct weftd *d = arg;
	struct weftd_stamp now;

	(void)t;
	file_stamp(d->config_path, &now);
	if (memcmp(&now, &d->stamp, sizeof(now)) != 0)
		weftd_reload(d, "file changed", false);
	else if (d->reload_retry)
		d->reload_retry = !apply(d, in_force(d));
}

int
weftd_reload_start(struct weftd *d)
{
	int rv;

	d->reload_log = (weft_log_limit)WEFT_LOG_LIMIT_INIT(REFUSED_LOG_MS);
	file_stamp(d->config_path, &d->stamp);
	if ((rv = weft_timer_new(d->main_loop, on_watch, d, &d->watch_timer)) !=
	    0)
		return rv;
	weft_timer_start(d->watch_timer, WATCH_MS, WATCH_MS);
	return 0;
}

void
weftd_reload_stop(struct weftd *d)
{
	if (d->watch_timer != NULL)
		weft_timer_free(d->watch_timer);
	d->watch_timer = NULL;
	weft_msvc_config_free(d->applied);
	d->applied = NULL;
}
