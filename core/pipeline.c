/* SPDX-License-Identifier: MIT */
/* pipeline.c: the ordered handlers of a channel and event propagation. */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "core_int.h"

static weft_ctx *
find_linked(weft_channel *ch, const char *name)
{
	weft_ctx *c;

	for (c = ch->head->next; c != ch->tail; c = c->next)
		if (strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

weft_ctx *
weft__ctx_new(weft_channel *ch, const char *name, const weft_handler *h,
              void *state)
{
	size_t len = strlen(name) + 1;
	weft_ctx *c = calloc(1, sizeof(*c) + len);

	if (c == NULL)
		return NULL;
	c->ch = ch;
	c->h = h;
	c->state = state;
	memcpy(c->name, name, len);
	return c;
}

static bool
handles(const weft_handler *h, enum weft__event e)
{
	switch (e) {
	case WEFT__EV_READ:
		return h->read != NULL;
	case WEFT__EV_WRITE:
		return h->write != NULL;
	case WEFT__EV_FLUSH:
		return h->flush != NULL;
	case WEFT__EV_READ_COMPLETE:
		return h->read_complete != NULL;
	case WEFT__EV_ACTIVE:
		return h->active != NULL;
	case WEFT__EV_WRITABILITY:
		return h->writability_changed != NULL;
	case WEFT__EV_USER_EVENT:
		return h->user_event != NULL;
	case WEFT__EV_ERROR:
		return h->error != NULL;
	case WEFT__EV_INACTIVE:
		return h->inactive != NULL;
	case WEFT__EV_CLOSE:
		return h->close != NULL;
	case WEFT__EV_RESERVE:
		return h->reserve != NULL || h->write != NULL;
	case WEFT__EVENTS:
		break;
	}
	return false;
}

static bool
is_outbound(enum weft__event e)
{
	return e == WEFT__EV_WRITE || e == WEFT__EV_FLUSH ||
	       e == WEFT__EV_CLOSE || e == WEFT__EV_RESERVE;
}

void
weft__pipeline_relink(weft_channel *ch)
{
	weft_ctx *near[WEFT__EVENTS], *c;
	int e;

	/* Inbound: from the tail back; the tail handles every one. */
	for (e = 0; e < WEFT__EVENTS; e++)
		near[e] = ch->tail;
	for (c = ch->tail; c != NULL; c = c == ch->head ? NULL : c->prev)
		for (e = 0; e < WEFT__EVENTS; e++) {
			if (is_outbound(e))
				continue;
			c->skip[e] = near[e];
			if (handles(c->h, e))
				near[e] = c;
		}
	/* Outbound: from the head on; the head handles every one. */
	for (e = 0; e < WEFT__EVENTS; e++)
		near[e] = ch->head;
	for (c = ch->head; c != NULL; c = c == ch->tail ? NULL : c->next)
		for (e = 0; e < WEFT__EVENTS; e++) {
			if (!is_outbound(e))
				continue;
			c->skip[e] = near[e];
			if (handles(c->h, e))
				near[e] = c;
		}
}

static int
insert(weft_channel *ch, weft_ctx *prev, const char *name,
       const weft_handler *h, void *state)
{
	weft_ctx *c;

	WEFT_ASSERT_IN_LOOP(ch->loop);
	if (ch->torn_down)
		return WEFT_ECLOSED;
	if ((h->reserve == NULL) != (h->commit == NULL))
		return WEFT_EINVAL;
	if (find_linked(ch, name) != NULL)
		return WEFT_EEXIST;
	if ((c = weft__ctx_new(ch, name, h, state)) == NULL)
		return WEFT_ENOMEM;
	c->prev = prev;
	c->next = prev->next;
	prev->next->prev = c;
	prev->next = c;
	weft__pipeline_relink(ch);
	if (h->added != NULL)
		h->added(c);
	return 0;
}

int
weft_pipeline_add_last(weft_channel *ch, const char *name,
                       const weft_handler *h, void *state)
{
	return insert(ch, ch->tail->prev, name, h, state);
}

int
weft_pipeline_add_first(weft_channel *ch, const char *name,
                        const weft_handler *h, void *state)
{
	return insert(ch, ch->head, name, h, state);
}

int
weft_pipeline_add_before(weft_channel *ch, const char *base, const char *name,
                         const weft_handler *h, void *state)
{
	weft_ctx *c = find_linked(ch, base);

	return c == NULL ? WEFT_ENOTFOUND : insert(ch, c->prev, name, h, state);
}

int
weft_pipeline_add_after(weft_channel *ch, const char *base, const char *name,
                        const weft_handler *h, void *state)
{
	weft_ctx *c = find_linked(ch, base);

	return c == NULL ? WEFT_ENOTFOUND : insert(ch, c, name, h, state);
}

void
weft__pipeline_reap(weft_channel *ch)
{
	weft_ctx *c;

	/* What the removed callbacks do to the channel waits for them, as
	 * any callback's would. */
	ch->depth++;
	while ((c = ch->dead) != NULL) {
		if ((ch->dead = c->next_dead) == NULL)
			ch->dead_tail = &ch->dead;
		/* A callback owed to a writer may belong to this handler. */
		weft__channel_run_owed(ch);
		if (c->h->removed != NULL)
			c->h->removed(c);
		free(c);
	}
	ch->depth--;
}

/*
 * Retires an unlinked context: no more events reach it at once; its
 * removed runs, and its memory goes, once the channel's outermost callback
 * returns (at once outside any).
 */
static void
retire(weft_ctx *c)
{
	weft_channel *ch = c->ch;

	c->removed = true;
	c->next_dead = NULL;
	*ch->dead_tail = c;
	ch->dead_tail = &c->next_dead;
	if (ch->depth == 0)
		weft__pipeline_reap(ch);
}

void
weft_ctx_remove(weft_ctx *c)
{
	WEFT_ASSERT_IN_LOOP(c->ch->loop);
	if (c->removed)
		return;
	/* Unlink, but keep c's own links for a traversal standing on it. */
	c->prev->next = c->next;
	c->next->prev = c->prev;
	weft__pipeline_relink(c->ch);
	retire(c);
}

bool
weft_ctx_is_removed(const weft_ctx *ctx)
{
	return ctx->removed;
}

int
weft_pipeline_remove(weft_channel *ch, const char *name)
{
	weft_ctx *c = find_linked(ch, name);

	if (c == NULL)
		return WEFT_ENOTFOUND;
	weft_ctx_remove(c);
	return 0;
}

int
weft_pipeline_replace(weft_channel *ch, const char *old_name, const char *name,
                      const weft_handler *h, void *state)
{
	weft_ctx *old = find_linked(ch, old_name);
	weft_ctx *c;
	int e;

	WEFT_ASSERT_IN_LOOP(ch->loop);
	if (old == NULL)
		return WEFT_ENOTFOUND;
	if ((h->reserve == NULL) != (h->commit == NULL))
		return WEFT_EINVAL;
	c = find_linked(ch, name);
	if (c != NULL && c != old)
		return WEFT_EEXIST;
	if ((c = weft__ctx_new(ch, name, h, state)) == NULL)
		return WEFT_ENOMEM;
	c->prev = old->prev;
	c->next = old->next;
	old->prev->next = c;
	old->next->prev = c;
	/* Whatever the old handler still forwards goes through its
	 * replacement, so a handshake handler can pass on what it read. */
	old->prev = c;
	old->next = c;
	for (e = 0; e < WEFT__EVENTS; e++)
		old->skip[e] = c;
	weft__pipeline_relink(ch);
	retire(old);
	if (h->added != NULL)
		h->added(c);
	return 0;
}

weft_ctx *
weft_pipeline_get(weft_channel *ch, const char *name)
{
	return find_linked(ch, name);
}

weft_channel *
weft_ctx_channel(const weft_ctx *ctx)
{
	return ctx->ch;
}

void *
weft_ctx_state(const weft_ctx *ctx)
{
	return ctx->state;
}

const char *
weft_ctx_name(const weft_ctx *ctx)
{
	return ctx->name;
}

const weft_handler *
weft_ctx_handler(const weft_ctx *ctx)
{
	return ctx->h;
}

/*
 * The next context towards the tail (inbound) or head (outbound) that
 * handles member. The sentinels handle every event of their direction, so
 * the search always ends.
 */
/* Steps c to the next context that handles the event: its skip link, and
 * on from there past any that left the pipeline since it was set (or, for
 * a replaced handler's links, that does not handle it). */
#define NEXT(c, ev, member)                                                    \
	do {                                                                   \
		(c) = (c)->skip[ev];                                           \
	} while ((c)->removed || (c)->h->member == NULL)
#define NEXT_IN(c, member) NEXT(c, EV_OF_##member, member)
#define NEXT_OUT(c, member) NEXT(c, EV_OF_##member, member)
#define EV_OF_read WEFT__EV_READ
#define EV_OF_write WEFT__EV_WRITE
#define EV_OF_flush WEFT__EV_FLUSH
#define EV_OF_read_complete WEFT__EV_READ_COMPLETE
#define EV_OF_active WEFT__EV_ACTIVE
#define EV_OF_writability_changed WEFT__EV_WRITABILITY
#define EV_OF_user_event WEFT__EV_USER_EVENT
#define EV_OF_error WEFT__EV_ERROR
#define EV_OF_inactive WEFT__EV_INACTIVE
#define EV_OF_close WEFT__EV_CLOSE

void
weft_ctx_fire_active(weft_ctx *c)
{
	NEXT_IN(c, active);
	c->h->active(c);
}

void
weft_ctx_fire_read(weft_ctx *c, const weft_msg_type *type, void *msg)
{
	NEXT_IN(c, read);
	c->h->read(c, type, msg);
}

void
weft_ctx_fire_read_complete(weft_ctx *c)
{
	NEXT_IN(c, read_complete);
	c->h->read_complete(c);
}

void
weft_ctx_fire_writability_changed(weft_ctx *c, bool writable)
{
	NEXT_IN(c, writability_changed);
	c->h->writability_changed(c, writable);
}

void
weft_ctx_fire_user_event(weft_ctx *c, int event, void *data)
{
	NEXT_IN(c, user_event);
	c->h->user_event(c, event, data);
}

void
weft_ctx_fire_error(weft_ctx *c, int status)
{
	NEXT_IN(c, error);
	c->h->error(c, status);
}

void
weft_ctx_fire_inactive(weft_ctx *c)
{
	NEXT_IN(c, inactive);
	c->h->inactive(c);
}

void
weft_ctx_write(weft_ctx *c, const weft_msg_type *type, void *msg,
               weft_write_cb cb, void *cb_arg)
{
	NEXT_OUT(c, write);
	c->h->write(c, type, msg, cb, cb_arg);
}

void
weft_ctx_flush(weft_ctx *c)
{
	NEXT_OUT(c, flush);
	c->h->flush(c);
}

void
weft_ctx_close(weft_ctx *c)
{
	NEXT_OUT(c, close);
	c->h->close(c);
}

/* Steps c to the next context towards the head that takes in-place
 * writes: one with reserve, or one with write alone. */
#define NEXT_RESERVE(c)                                                        \
	do {                                                                   \
		(c) = (c)->skip[WEFT__EV_RESERVE];                             \
	} while ((c)->removed ||                                               \
	         ((c)->h->reserve == NULL && (c)->h->write == NULL))

void *
weft_ctx_reserve(weft_ctx *c, size_t n)
{
	weft_channel *ch = c->ch;

	NEXT_RESERVE(c);
	if (c->h->reserve != NULL)
		return c->h->reserve(c, n);
	return weft__channel_scratch(ch, n);
}

void
weft_ctx_commit(weft_ctx *c, size_t used, weft_write_cb cb, void *cb_arg)
{
	weft_channel *ch = c->ch;
	weft_bytes b;

	NEXT_RESERVE(c);
	if (c->h->commit != NULL) {
		c->h->commit(c, used, cb, cb_arg);
		return;
	}
	assert(used <= ch->scratch_cap);
	b = (weft_bytes){ch->scratch, used};
	c->h->write(c, &weft_msg_bytes, &b, cb, cb_arg);
}

void
weft_msg_free(const weft_msg_type *type, void *msg)
{
	if (msg == NULL)
		return;
	if (type == &weft_msg_evbuffer)
		evbuffer_drain(msg, evbuffer_get_length(msg));
	else if (type != NULL && type->free != NULL)
		type->free(msg);
}

bool
weft_msg_is_bytes(const weft_msg_type *type)
{
	return type == &weft_msg_evbuffer || type == &weft_msg_bytes;
}

size_t
weft_msg_length(const weft_msg_type *type, const void *msg)
{
	if (type == &weft_msg_evbuffer)
		return evbuffer_get_length(msg);
	if (type == &weft_msg_bytes)
		return ((const weft_bytes *)msg)->len;
	return 0;
}

size_t
weft_msg_copyout(const weft_msg_type *type, const void *msg, void *dst,
                 size_t len)
{
	const weft_bytes *b = msg;
	ev_ssize_t n;

	if (type == &weft_msg_evbuffer) {
		n = evbuffer_copyout((struct evbuffer *)msg, dst, len);
		return n < 0 ? 0 : (size_t)n;
	}
	if (type != &weft_msg_bytes)
		return 0;
	if (len > b->len)
		len = b->len;
	memcpy(dst, b->data, len);
	return len;
}
