/* SPDX-License-Identifier: MIT */
/*
 * channel_group.c: a set of channels on any loops, written to and closed
 * together (Netty's ChannelGroup).
 *
 * The member list is a mutex-guarded array: it changes from any thread,
 * and a write takes a snapshot of it. Each member carries a watch handler
 * that notices its teardown (the pipeline's handlers are all removed
 * then). Adding and removing the watch happen on the channel's loop, in a
 * task that makes the pipeline agree with the list as it is when the task
 * runs, so tasks of quick adds and removes may run in any order.
 *
 * The group is reference-counted: by its owner, by each task on its way,
 * by each watch installed and by each write under way, so that freeing it
 * never pulls memory from under one of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "core_int.h"
#include "weft_int.h"

struct weft_channel_group {
	_Atomic int refs;
	pthread_mutex_t lock;
	weft_channel **members;
	size_t len, cap;
	char watch_name[48]; /* the watch handler's name in a pipeline */
};

/* A task making one channel's watch agree with the member list. */
struct watch_task {
	weft_task task;
	weft_channel_group *g;
	weft_channel *ch;
};

/* One group write: the bytes, shared by reference, and the writes left. */
struct group_write {
	weft_task task;
	weft_channel_group *g;
	weft_loop *loop;
	weft_channel_group_cb cb;
	void *arg;
	_Atomic size_t writes_left;
	_Atomic size_t failures;
	/* The completion, and each member's reference to data. */
	_Atomic size_t refs;
	size_t len;
	char data[];
};

static void
group_ref(weft_channel_group *g)
{
	atomic_fetch_add(&g->refs, 1);
}

static void
group_unref(weft_channel_group *g)
{
	if (atomic_fetch_sub(&g->refs, 1) != 1)
		return;
	pthread_mutex_destroy(&g->lock);
	free(g->members);
	free(g);
}

int
weft_channel_group_new(weft_channel_group **out)
{
	weft_channel_group *g;

	if ((g = calloc(1, sizeof(*g))) == NULL)
		return WEFT_ENOMEM;
	atomic_init(&g->refs, 1);
	pthread_mutex_init(&g->lock, NULL);
	/* Unique among the groups alive: a channel may be in several. */
	snprintf(g->watch_name, sizeof(g->watch_name), "weft.group.%p",
	         (void *)g);
	*out = g;
	return 0;
}

/* The index of ch in the list, or len. Requires that we hold the lock. */
static size_t
find(const weft_channel_group *g, const weft_channel *ch)
{
	size_t i;

	for (i = 0; i < g->len && g->members[i] != ch; i++)
		;
	return i;
}

/* Takes ch off the list; true if it was there, its reference now the
 * caller's to drop. */
static bool
take_out(weft_channel_group *g, weft_channel *ch)
{
	size_t i;
	bool found;

	pthread_mutex_lock(&g->lock);
	i = find(g, ch);
	found = i < g->len;
	/* Order among members does not matter: the last fills the hole. */
	if (found)
		g->members[i] = g->members[--g->len];
	pthread_mutex_unlock(&g->lock);
	return found;
}

/* The watch's removed: by teardown (the channel has closed), or by a
 * watch task on a channel that left the group. */
static void
watch_removed(weft_ctx *ctx)
{
	weft_channel_group *g = weft_ctx_state(ctx);
	weft_channel *ch = weft_ctx_channel(ctx);

	if (ch->torn_down && take_out(g, ch))
		weft_channel_unref(ch);
	group_unref(g);
}

static const weft_handler watch_handler = {.removed = watch_removed};

/* On ch's loop: a member gets its watch, a channel that left the group
 * loses it, and a member that has closed already leaves. */
static void
run_watch_task(weft_loop *loop, int status, void *arg)
{
	struct watch_task *t = arg;
	weft_channel_group *g = t->g;
	weft_channel *ch = t->ch;
	weft_ctx *watch;
	bool member;

	(void)loop;
	pthread_mutex_lock(&g->lock);
	member = find(g, ch) < g->len;
	pthread_mutex_unlock(&g->lock);
	/* status: the loop is being freed; the pipeline is left alone. */
	watch = status != 0 || ch->torn_down
	            ? NULL
	            : weft_pipeline_get(ch, g->watch_name);
	if (member && (status != 0 || ch->torn_down)) {
		if (take_out(g, ch))
			weft_channel_unref(ch);
	} else if (member && watch == NULL) {
		group_ref(g);
		if (weft_pipeline_add_first(ch, g->watch_name, &watch_handler,
		                            g) != 0) {
			/* Unwatched, it could never leave: it leaves now. */
			group_unref(g);
			if (take_out(g, ch))
				weft_channel_unref(ch);
		}
	} else if (!member && watch != NULL) {
		weft_pipeline_remove(ch, g->watch_name);
	}
	weft_channel_unref(ch);
	group_unref(g);
	free(t);
}

/* Posts a watch task for ch. Without memory or a loop for it, ch leaves
 * the group (if a member): better than a member that never leaves. */
static void
post_watch_task(weft_channel_group *g, weft_channel *ch)
{
	struct watch_task *t = calloc(1, sizeof(*t));

	if (t != NULL) {
		*t = (struct watch_task){.g = g, .ch = ch};
		t->task = (weft_task){.cb = run_watch_task, .arg = t};
		group_ref(g);
		weft_channel_ref(ch);
		if (weft_loop_post_task(ch->loop, &t->task) == 0)
			return;
		weft_channel_unref(ch);
		group_unref(g);
		free(t);
	}
	if (take_out(g, ch))
		weft_channel_unref(ch);
}

/* Room for one more member. Requires that we hold the lock. */
static int
reserve(weft_channel_group *g)
{
	return WEFT__ARRAY_ROOM(g->members, g->cap, g->len, 8) != NULL
	           ? 0
	           : WEFT_ENOMEM;
}

int
weft_channel_group_add(weft_channel_group *g, weft_channel *ch)
{
	int rv;

	if (g == NULL || ch == NULL)
		return WEFT_EINVAL;
	if (!weft_channel_is_open(ch))
		return WEFT_ECLOSED;
	pthread_mutex_lock(&g->lock);
	if (find(g, ch) < g->len) {
		rv = WEFT_EEXIST;
	} else if ((rv = reserve(g)) == 0) {
		weft_channel_ref(ch);
		g->members[g->len++] = ch;
	}
	pthread_mutex_unlock(&g->lock);
	if (rv == 0)
		post_watch_task(g, ch);
	return rv;
}

int
weft_channel_group_remove(weft_channel_group *g, weft_channel *ch)
{
	if (g == NULL || ch == NULL || !take_out(g, ch))
		return WEFT_ENOTFOUND;
	/* The task takes its own reference before ours goes. */
	post_watch_task(g, ch);
	weft_channel_unref(ch);
	return 0;
}

bool
weft_channel_group_contains(weft_channel_group *g, const weft_channel *ch)
{
	bool member;

	pthread_mutex_lock(&g->lock);
	member = find(g, ch) < g->len;
	pthread_mutex_unlock(&g->lock);
	return member;
}

size_t
weft_channel_group_size(weft_channel_group *g)
{
	size_t len;

	pthread_mutex_lock(&g->lock);
	len = g->len;
	pthread_mutex_unlock(&g->lock);
	return len;
}

/* The members of the moment, each with a reference of the caller's; NULL
 * with *n 0 for none, or on failure (*n then SIZE_MAX). */
static weft_channel **
snapshot(weft_channel_group *g, size_t *n)
{
	weft_channel **copy = NULL;
	size_t i;

	pthread_mutex_lock(&g->lock);
	*n = g->len;
	if (g->len > 0 && (copy = malloc(g->len * sizeof(*copy))) != NULL) {
		for (i = 0; i < g->len; i++) {
			copy[i] = g->members[i];
			weft_channel_ref(copy[i]);
		}
	} else if (g->len > 0) {
		*n = SIZE_MAX;
	}
	pthread_mutex_unlock(&g->lock);
	return copy;
}

void
weft_channel_group_close(weft_channel_group *g)
{
	weft_channel **members;
	size_t n, i;

	if ((members = snapshot(g, &n)) == NULL)
		return;
	for (i = 0; i < n; i++) {
		weft_channel_close(members[i]);
		weft_channel_unref(members[i]);
	}
	free(members);
}

void
weft_channel_group_free(weft_channel_group *g)
{
	weft_channel *ch;

	if (g == NULL)
		return;
	for (;;) {
		pthread_mutex_lock(&g->lock);
		ch = g->len > 0 ? g->members[--g->len] : NULL;
		pthread_mutex_unlock(&g->lock);
		if (ch == NULL)
			break;
		post_watch_task(g, ch); /* takes the watch off */
		weft_channel_unref(ch);
	}
	group_unref(g);
}

/* ---- Writing to every member ------------------------------------------- */

static void
write_unref(struct group_write *w)
{
	if (atomic_fetch_sub(&w->refs, 1) != 1)
		return;
	group_unref(w->g);
	free(w);
}

/* A member's evbuffer let go of its reference to the bytes. */
static void
data_released(const void *data, size_t len, void *arg)
{
	(void)data;
	(void)len;
	write_unref(arg);
}

static void
run_group_done(weft_loop *loop, int status, void *arg)
{
	struct group_write *w = arg;

	(void)loop;
	w->cb(w->g, status != 0 ? WEFT_ESHUTDOWN : 0, atomic_load(&w->failures),
	      w->arg);
	write_unref(w);
}

/* One write finished (failed with failed): the last one posts the
 * completion. */
static void
write_finished(struct group_write *w, bool failed)
{
	if (failed)
		atomic_fetch_add(&w->failures, 1);
	if (atomic_fetch_sub(&w->writes_left, 1) != 1)
		return;
	if (w->cb != NULL) {
		w->task = (weft_task){.cb = run_group_done, .arg = w};
		if (weft_loop_post_task(w->loop, &w->task) == 0)
			return;
		weft_warn("channel group: the loop of a write's callback is "
		          "gone; the callback is dropped");
	}
	write_unref(w);
}

static void
on_member_written(weft_channel *ch, int status, void *arg)
{
	(void)ch;
	write_finished(arg, status != 0);
}

/* Writes w's bytes to ch through tmp, an empty evbuffer of the caller's
 * (each write moves the bytes out of it). */
static void
write_member(struct group_write *w, weft_channel *ch, struct evbuffer *tmp)
{
	atomic_fetch_add(&w->refs, 1);
	if (evbuffer_add_reference(tmp, w->data, w->len, data_released, w) !=
	    0) {
		write_unref(w);
		write_finished(w, true);
		return;
	}
	if (weft_channel_write(ch, tmp, on_member_written, w) != 0)
		write_finished(w, true);
}

int
weft_channel_group_write(weft_channel_group *g, struct evbuffer *buf,
                         weft_loop *loop, weft_channel_group_cb cb, void *arg)
{
	size_t len = evbuffer_get_length(buf), n, i;
	weft_channel **members;
	struct evbuffer *tmp;
	struct group_write *w;
	int rv = WEFT_ENOMEM;

	if (g == NULL || len == 0 || (cb != NULL && loop == NULL)) {
		evbuffer_drain(buf, len);
		return WEFT_EINVAL;
	}
	if ((w = malloc(sizeof(*w) + len)) == NULL)
		goto err_drain;
	*w = (struct group_write){
	    .g = g, .loop = loop, .cb = cb, .arg = arg, .len = len};
	evbuffer_remove(buf, w->data, len);
	members = snapshot(g, &n);
	if (n == SIZE_MAX || (tmp = evbuffer_new()) == NULL)
		goto err_free_members;
	group_ref(g);
	/* The call holds one write of its own until every member has had
	 * its own, so that the completion cannot come before. */
	atomic_init(&w->writes_left, n + 1);
	atomic_init(&w->refs, 1);
	for (i = 0; i < n; i++) {
		write_member(w, members[i], tmp);
		weft_channel_unref(members[i]);
	}
	evbuffer_free(tmp);
	free(members);
	write_finished(w, false);
	return 0;

err_free_members:
	for (i = 0; members != NULL && i < n; i++)
		weft_channel_unref(members[i]);
	free(members);
	free(w);
	return rv;
err_drain:
	evbuffer_drain(buf, len);
	return rv;
}
