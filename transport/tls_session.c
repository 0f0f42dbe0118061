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
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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
};

/* What one SSL_CTX carries. */
struct generation {
	struct weft__tls_shared *shared; /* a counted reference */
	pthread_mutex_t lock;            /* guards clock and slots */
	uint64_t clock;
	struct session_slot slots[SESSION_SLOTS];
};

/* GLOBAL: set once by pthread_once, read-only after: the SSL_CTX ex_data
 * slot holding a struct generation. */
static int generation_index = -1;
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

/* session_store keeps sess (taking the caller's reference) for name.
 * Returns 1 if it kept it, 0 if not (the caller still owns it). */
static int
session_store(struct generation *gen, const char *name, SSL_SESSION *sess)
{
	struct session_slot *slot;
	int kept = 0;

	pthread_mutex_lock(&gen->lock);
	slot = slot_for(gen, name);
	if (slot->name == NULL || strcmp(slot->name, name) != 0) {
		free(slot->name);
		slot->name = strdup(name);
	}
	if (slot->sess != NULL)
		SSL_SESSION_free(slot->sess);
	slot->sess = NULL;
	if (slot->name != NULL) {
		slot->sess = sess;
		slot->stored_at = ++gen->clock;
		kept = 1;
	}
	pthread_mutex_unlock(&gen->lock);
	return kept;
}

/* session_find returns a new reference to name's session, or NULL. */
static SSL_SESSION *
session_find(struct generation *gen, const char *name)
{
	SSL_SESSION *sess = NULL;
	size_t i;

	pthread_mutex_lock(&gen->lock);
	for (i = 0; i < SESSION_SLOTS; i++) {
		struct session_slot *s = &gen->slots[i];

		if (s->name != NULL && s->sess != NULL &&
		    strcmp(s->name, name) == 0) {
			if (SSL_SESSION_up_ref(s->sess) == 1)
				sess = s->sess;
			break;
		}
	}
	pthread_mutex_unlock(&gen->lock);
	return sess;
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
	return generation_index < 0 ? WEFT_ENOMEM : 0;
}

void
weft__tls_session_offer(SSL *ssl, const char *name)
{
	struct generation *gen = generation_of(ssl);
	SSL_SESSION *sess;

	if (gen != NULL && (sess = session_find(gen, name)) != NULL) {
		SSL_set_session(ssl, sess);
		SSL_SESSION_free(sess);
	}
}
