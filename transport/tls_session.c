/* SPDX-License-Identifier: MIT */
/*
 * tls_session.c: what each SSL_CTX carries besides OpenSSL's own state, in
 * an ex_data slot: a generation. It holds the counters shared with its
 * weft_tls_ctx and the client session cache of that configuration, and
 * OpenSSL frees it with the SSL_CTX, after the last connection made from
 * it: callbacks never see freed state, and after a reload (perhaps of a
 * new CA) no session from before is offered.
 *
 * The cache keeps the last session ticket per server name, a few dozen
 * names at most: a node dials a handful of connections per peer.
 *
 * A node dials its connections to one peer at about the same time, before
 * any ticket has come. So the first client handshake to a name that finds
 * no session leads: it runs in full, and the dials to that name that start
 * while it runs hold their hello until its ticket is stored, then resume
 * from it. The wait is bounded: it ends when the leader's ticket comes,
 * when the leader's connection goes without one (a failed handshake, a
 * server that issues none), or bound_ms after the leader began, whichever
 * is first; then the hello goes with whatever the cache holds, a full
 * handshake if nothing. A held dial is woken by a task posted to its loop.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "tls_int.h"

#define SESSION_SLOTS 64

/* Bits kept in an SSL's app data: which handshake events were counted. */
#define SEEN_START 1u
#define SEEN_DONE 2u

/* A client session kept for resumption, by server name. */
struct session_slot {
	char *name;
	SSL_SESSION *sess;
	uint64_t stored_at; /* the generation's clock, for eviction */
	/* A full handshake to name that the next dials wait for: its
	 * serial (0: none), and when they stop waiting (weft_now_ns). */
	uint64_t leader;
	uint64_t lead_until_ns;
};

/* Where a held dial is: on the generation's list, its task posted to its
 * loop, or neither (the post was refused). */
enum hold_state { HOLD_LISTED, HOLD_POSTED, HOLD_DETACHED };

/* A dial that waits for a leader's ticket. */
struct weft__tls_hold {
	struct weft__tls_hold *next; /* the generation's list */
	const char *name;            /* the SSL's, while listed */
	enum hold_state state;
	weft_task task;
	weft_loop *loop;
	void (*ready)(void *arg); /* NULL once released while posted */
	void *arg;
};

/* What one SSL_CTX carries. */
struct generation {
	struct weft__tls_shared *shared; /* a counted reference */
	pthread_mutex_t lock;            /* guards clock, slots and holds */
	uint64_t clock;
	struct session_slot slots[SESSION_SLOTS];
	struct weft__tls_hold *holds;
};

/* GLOBAL: set once by pthread_once, read-only after: the SSL_CTX ex_data
 * slot holding a struct generation, and the SSL ex_data slot holding the
 * serial of the handshake an SSL leads (0: none). */
static int generation_index = -1;
static int leader_index = -1;
static pthread_once_t generation_once = PTHREAD_ONCE_INIT;

static void
generation_free(struct generation *gen)
{
	size_t i;

	for (i = 0; i < SESSION_SLOTS; i++) {
		free(gen->slots[i].name);
		if (gen->slots[i].sess != NULL)
			SSL_SESSION_free(gen->slots[i].sess);
	}
	pthread_mutex_destroy(&gen->lock);
	weft__tls_shared_unref(gen->shared);
	free(gen);
}

/* OpenSSL calls this for every SSL_CTX freed in the process; ptr is NULL
 * for those that are not ours. */
static void
generation_free_cb(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
                   long argl, void *argp)
{
	(void)parent;
	(void)ad;
	(void)idx;
	(void)argl;
	(void)argp;
	if (ptr != NULL)
		generation_free(ptr);
}

static void
make_generation_index(void)
{
	generation_index =
	    SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, generation_free_cb);
	leader_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

static struct generation *
generation_of(const SSL *ssl)
{
	return SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), generation_index);
}

/* slot_for picks the slot of name, else an empty one, else the oldest.
 * Requires gen->lock. */
static struct session_slot *
slot_for(struct generation *gen, const char *name)
{
	struct session_slot *pick = &gen->slots[0];
	size_t i;

	for (i = 0; i < SESSION_SLOTS; i++) {
		struct session_slot *s = &gen->slots[i];

		if (s->name != NULL && strcmp(s->name, name) == 0)
			return s;
		if (pick->name != NULL &&
		    (s->name == NULL || s->stored_at < pick->stored_at))
			pick = s;
	}
	return pick;
}

/* find_slot is name's slot, or NULL. Requires gen->lock. */
static struct session_slot *
find_slot(struct generation *gen, const char *name)
{
	size_t i;

	for (i = 0; i < SESSION_SLOTS; i++)
		if (gen->slots[i].name != NULL &&
		    strcmp(gen->slots[i].name, name) == 0)
			return &gen->slots[i];
	return NULL;
}

/* claim_slot gives name a slot, its own or another's (the session there
 * is dropped). Returns NULL without memory. Requires gen->lock. */
static struct session_slot *
claim_slot(struct generation *gen, const char *name)
{
	struct session_slot *slot = slot_for(gen, name);

	if (slot->name != NULL && strcmp(slot->name, name) == 0)
		return slot;
	free(slot->name);
	if (slot->sess != NULL)
		SSL_SESSION_free(slot->sess);
	memset(slot, 0, sizeof(*slot));
	return (slot->name = strdup(name)) != NULL ? slot : NULL;
}

/* wake_holds posts the task of every dial that waits for name's ticket.
 * Requires gen->lock. */
static void
wake_holds(struct generation *gen, const char *name)
{
	struct weft__tls_hold **p = &gen->holds, *h;

	while ((h = *p) != NULL) {
		if (strcmp(h->name, name) != 0) {
			p = &h->next;
			continue;
		}
		*p = h->next;
		h->next = NULL;
		/* Refused (the loop stops): its deadline or the loop's
		 * shutdown ends the wait instead. */
		h->state = weft_loop_post_task(h->loop, &h->task) == 0
		               ? HOLD_POSTED
		               : HOLD_DETACHED;
	}
}

/* session_store keeps sess (taking the caller's reference) for name and
 * wakes the dials that wait for it. Returns 1 if it kept it, 0 if not
 * (the caller still owns it). */
static int
session_store(struct generation *gen, const char *name, SSL_SESSION *sess)
{
	struct session_slot *slot;
	int kept = 0;

	pthread_mutex_lock(&gen->lock);
	if ((slot = claim_slot(gen, name)) != NULL) {
		if (slot->sess != NULL)
			SSL_SESSION_free(slot->sess);
		slot->sess = sess;
		slot->stored_at = ++gen->clock;
		slot->leader = 0;
		kept = 1;
	}
	wake_holds(gen, name);
	pthread_mutex_unlock(&gen->lock);
	return kept;
}

/* is_expired: a session past its lifetime resumes nothing. */
static bool
is_expired(const SSL_SESSION *sess)
{
	return SSL_SESSION_get_time(sess) + SSL_SESSION_get_timeout(sess) <=
	       time(NULL);
}

/* session_take offers ssl slot's session, if it has a live one. Returns
 * whether it did. Requires gen->lock. */
static bool
session_take(struct session_slot *slot, SSL *ssl)
{
	if (slot == NULL || slot->sess == NULL)
		return false;
	if (is_expired(slot->sess)) {
		SSL_SESSION_free(slot->sess);
		slot->sess = NULL;
		return false;
	}
	return SSL_set_session(ssl, slot->sess) == 1;
}

/* A client got a session ticket: keep it under the name it dialed. */
static int
on_new_session(SSL *ssl, SSL_SESSION *sess)
{
	struct generation *gen = generation_of(ssl);
	const char *name;

	if (gen == NULL || SSL_is_server(ssl) ||
	    !SSL_SESSION_is_resumable(sess))
		return 0;
	name = X509_VERIFY_PARAM_get0_host(SSL_get0_param(ssl), 0);
	if (name == NULL)
		return 0;
	return session_store(gen, name, sess);
}

/* Counts each connection's handshake once: TLS 1.3 reports the
 * post-handshake messages (tickets, key updates) as handshakes too. */
static void
on_info(const SSL *ssl, int where, int ret)
{
	struct generation *gen;
	uintptr_t seen;

	(void)ret;
	if (!(where & (SSL_CB_HANDSHAKE_START | SSL_CB_HANDSHAKE_DONE)) ||
	    (gen = generation_of(ssl)) == NULL)
		return;
	seen = (uintptr_t)SSL_get_app_data(ssl);
	if ((where & SSL_CB_HANDSHAKE_START) && !(seen & SEEN_START)) {
		weft__tls_count(&gen->shared->handshakes_started);
		seen |= SEEN_START;
	}
	if ((where & SSL_CB_HANDSHAKE_DONE) && !(seen & SEEN_DONE)) {
		weft__tls_count(&gen->shared->handshakes_completed);
		if (SSL_session_reused((SSL *)ssl))
			weft__tls_count(&gen->shared->handshakes_resumed);
		/* OpenSSL hands the keys to the kernel as the handshake ends,
		 * where SSL_OP_ENABLE_KTLS asks and the BIO can. */
		if (BIO_get_ktls_send(SSL_get_wbio(ssl)))
			weft__tls_count(&gen->shared->ktls_send);
		if (BIO_get_ktls_recv(SSL_get_rbio(ssl)))
			weft__tls_count(&gen->shared->ktls_recv);
		seen |= SEEN_DONE;
	}
	/* The SSL is ours (made in weft__tls_ssl_new); app data is free. */
	SSL_set_app_data((SSL *)ssl, (void *)seen);
}

int
weft__tls_generation_attach(SSL_CTX *sctx, struct weft__tls_shared *shared)
{
	struct generation *gen = calloc(1, sizeof(*gen));

	if (gen == NULL)
		return WEFT_ENOMEM;
	pthread_mutex_init(&gen->lock, NULL);
	weft__tls_shared_ref(shared);
	gen->shared = shared;
	if (SSL_CTX_set_ex_data(sctx, generation_index, gen) != 1) {
		ERR_clear_error();
		generation_free(gen);
		return WEFT_ENOMEM;
	}
	SSL_CTX_set_info_callback(sctx, on_info);
	SSL_CTX_sess_set_new_cb(sctx, on_new_session);
	return 0;
}

int
weft__tls_generation_init(void)
{
	pthread_once(&generation_once, make_generation_index);
	return generation_index < 0 || leader_index < 0 ? WEFT_ENOMEM : 0;
}

/* client_name is the server name a client SSL checks, or NULL. */
static const char *
client_name(SSL *ssl)
{
	return X509_VERIFY_PARAM_get0_host(SSL_get0_param(ssl), 0);
}

/* takes_tickets: a client whose context refuses tickets waits for none. */
static bool
takes_tickets(SSL *ssl)
{
	return !(SSL_get_options(ssl) & SSL_OP_NO_TICKET) &&
	       (SSL_CTX_get_session_cache_mode(SSL_get_SSL_CTX(ssl)) &
	        SSL_SESS_CACHE_CLIENT);
}

void
weft__tls_session_offer(SSL *ssl)
{
	struct generation *gen = generation_of(ssl);
	const char *name = client_name(ssl);

	if (gen == NULL || name == NULL)
		return;
	pthread_mutex_lock(&gen->lock);
	(void)session_take(find_slot(gen, name), ssl);
	pthread_mutex_unlock(&gen->lock);
}

/* lead makes ssl the full handshake to slot's name that the next dials
 * wait for, until until_ns. Requires gen->lock. */
static void
lead(struct generation *gen, struct session_slot *slot, SSL *ssl,
     uint64_t until_ns)
{
	slot->leader = ++gen->clock;
	slot->stored_at = gen->clock;
	slot->lead_until_ns = until_ns;
	if (SSL_set_ex_data(ssl, leader_index,
	                    (void *)(uintptr_t)slot->leader) != 1) {
		ERR_clear_error();
		slot->leader = 0;
	}
}

/* hold_run wakes a held dial on its loop, unless it was released. */
static void
hold_run(weft_loop *loop, int status, void *arg)
{
	struct weft__tls_hold *h = arg;
	void (*ready)(void *) = h->ready;

	(void)loop;
	(void)status;
	if (ready != NULL)
		ready(h->arg);
	free(h);
}

/* hold_new lists a dial that waits for name's ticket. Requires
 * gen->lock. */
static struct weft__tls_hold *
hold_new(struct generation *gen, const char *name,
         const struct weft__tls_wake *wake)
{
	struct weft__tls_hold *h = calloc(1, sizeof(*h));

	if (h == NULL)
		return NULL;
	h->name = name;
	h->state = HOLD_LISTED;
	h->task.cb = hold_run;
	h->task.arg = h;
	h->loop = wake->loop;
	h->ready = wake->ready;
	h->arg = wake->arg;
	h->next = gen->holds;
	gen->holds = h;
	return h;
}

int
weft__tls_session_claim(SSL *ssl, uint64_t bound_ms,
                        const struct weft__tls_wake *wake,
                        struct weft__tls_hold **hold, uint64_t *until_ns)
{
	struct generation *gen = generation_of(ssl);
	const char *name = client_name(ssl);
	struct session_slot *slot;
	uint64_t now = weft_now_ns();
	int rv = 0;

	if (gen == NULL || name == NULL)
		return 0;
	pthread_mutex_lock(&gen->lock);
	slot = find_slot(gen, name);
	if (session_take(slot, ssl) || !takes_tickets(ssl) || bound_ms == 0)
		goto out;
	if (slot != NULL && slot->leader != 0 && now < slot->lead_until_ns) {
		if ((*hold = hold_new(gen, name, wake)) != NULL) {
			*until_ns = slot->lead_until_ns;
			rv = WEFT__TLS_HELD;
		}
		goto out;
	}
	if (slot != NULL || (slot = claim_slot(gen, name)) != NULL)
		lead(gen, slot, ssl, now + bound_ms * 1000000u);
out:
	pthread_mutex_unlock(&gen->lock);
	return rv;
}

void
weft__tls_session_unhold(SSL *ssl, struct weft__tls_hold *h)
{
	struct generation *gen = generation_of(ssl);
	struct weft__tls_hold **p;

	pthread_mutex_lock(&gen->lock);
	if (h->state == HOLD_LISTED) {
		for (p = &gen->holds; *p != h; p = &(*p)->next)
			;
		*p = h->next;
	} else if (h->state == HOLD_POSTED) {
		h->ready = NULL; /* hold_run frees it */
		h = NULL;
	}
	pthread_mutex_unlock(&gen->lock);
	free(h);
}

void
weft__tls_session_done(SSL *ssl)
{
	struct generation *gen = generation_of(ssl);
	uintptr_t serial = (uintptr_t)SSL_get_ex_data(ssl, leader_index);
	const char *name = client_name(ssl);
	struct session_slot *slot;

	if (gen == NULL || serial == 0 || name == NULL)
		return;
	pthread_mutex_lock(&gen->lock);
	/* It led, and no ticket came: the dials it held go on in full. */
	if ((slot = find_slot(gen, name)) != NULL && slot->leader == serial) {
		slot->leader = 0;
		wake_holds(gen, name);
	}
	pthread_mutex_unlock(&gen->lock);
}
