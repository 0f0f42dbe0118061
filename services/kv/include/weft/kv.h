/* SPDX-License-Identifier: MIT */
/*
 * weft/kv.h: an in-memory replicated key-value store on the messaging
 * service, written only against <weft/messaging.h>, as the model of how
 * users write services.
 *
 * Every member of the cluster holds a full replica. A get is answered by
 * the node that receives it, at the read consistency the request names or
 * [kv] read_consistency: one (the default) reads its own replica, without
 * waiting for any write in progress; quorum and all read the key's value
 * and version on a majority of the members, or on every member, of the
 * moment (this node's replica among them) and answer with the newest,
 * counting a read whose replicas disagreed (see "Reads" below). A put or delete
 * is coordinated by the node that receives it: it stamps the write with a
 * version, applies it locally and sends it to every other member; the client's
 * answer comes once write_quorum replicas (the coordinator included) have
 * applied it, or an error once that can no longer happen. Versions are
 * (hybrid-clock timestamp, origin node id) pairs compared last-writer-wins, so
 * replicas that see the same writes in any order end with the same value.
 * Deletes leave a versioned tombstone for the same reason.
 *
 * A scan reads the live keys from a start key on, in byte order (a
 * prefix first), from the replica of the node that receives it: each
 * entry as a get would read it then, not one snapshot of them all.
 *
 * Membership: a write goes to the members of the moment it starts (and
 * its quorum is resolved for them); a member that leaves before it
 * answers is taken out of that write's replicas and the quorum resolved
 * again for those left (a majority or all shrinks with them, a count
 * stays), so the write neither waits for it nor fails because of it. A
 * member that joins meanwhile gets the write through anti-entropy.
 *
 * Reads: a quorum or all read asks every other member for its entry
 * (kv_read, members only) and decides as a write does: once the needed
 * replicas have answered, or once that can no longer happen (an error
 * naming the replica that failed: PEER_DOWN for one unreachable, TIMEOUT,
 * OVERLOADED), exactly once. A member that leaves before it answers is
 * taken out of the read's replicas, and the need resolved again for those
 * left. When the answers disagree, the newest version wins (a tombstone
 * is a version too), read_disagreements counts the read, and the
 * coordinator applies the newest to its own replica if it was behind;
 * the other replicas that were behind are left to anti-entropy. A member
 * of an older build answers kv_read with UNKNOWN_VERB: it is taken out of
 * the read like a member that left (reads_downgraded counts it), so in a
 * mixed cluster a read needs only the members that can answer; an old
 * client's get ([key]) reads at the node's read_consistency.
 *
 * Catch-up: a replica starts empty and answers gets and scans only once it
 * has copied the entries (with their versions) of N - W + 1 other members
 * (N members, write quorum W; at most all the others), which together hold
 * every write acknowledged before the copy; before that they are refused
 * with OVERLOADED ("catching up"), so a client asks another member. Writes
 * it receives meanwhile are applied as usual, and a copied entry older
 * than what it holds is ignored, so no write is lost to the copy.
 *
 * Anti-entropy: every repair_interval, each replica compares the digests
 * of 256 ranges of keys (by a hash every member shares) with one other
 * member's, in turn, and pulls the entries of the ranges that differ,
 * keeping those newer than its own; a replica that missed writes (down,
 * or outside a write's quorum) converges within one round per member.
 *
 * Not provided: tombstone collection (a deleted key keeps a small entry).
 * A write that failed its quorum may still have been applied by some
 * replicas, and anti-entropy may then spread it, as in Dynamo.
 *
 * Payloads (all integers and strings in any msgpack encoding):
 *   get       request [key: bin] or [key: bin, consistency: uint
 *             (1 one, 2 quorum, 3 all)]     response: the value bytes
 *             (a node of an older build refuses the second form INVALID)
 *   put       request [key: bin, value: bin] response: empty
 *   delete    request [key: bin]            response: empty
 *   replicate request [op: uint (1 put, 2 delete), key: bin, value: bin,
 *                      version: uint, origin: str]  response: empty
 *   read      request [key: bin] (members only)
 *             response [op: uint (0 absent, 1 put, 2 delete), value: bin,
 *                       version: uint, origin: str] (absent: value, origin
 *                       empty, version 0)
 *   scan      request [start: bin (0 to WEFT_KV_MAX_KEY bytes),
 *                      count: uint (1 to WEFT_KV_MAX_SCAN)]
 *             response [entries: [[key: bin, value: bin], ...],
 *                       next: bin or nil]
 *     entries: at most count live keys from start on (start included),
 *     ascending, stopping early before an entry that would take the
 *     response past WEFT_KV_SCAN_MAX_BYTES (the first entry always goes)
 *     or after 65,536 keys examined, tombstones included; next: the key
 *     to scan from for the rest, or nil when no key follows.
 * Errors travel as messaging error responses: NOT_FOUND (no such key),
 * INVALID (malformed request, key too long), TOO_BIG (value above
 * max_value), and when the write quorum is out of reach, from the replica
 * failure that decided it: TIMEOUT (too slow), PEER_DOWN (unreachable or
 * stopping), OVERLOADED, or APPLICATION (it answered with an error); the
 * text says how many replicas were needed and which one failed.
 */
#ifndef WEFT_KV_H
#define WEFT_KV_H

#include <weft/messaging.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evbuffer;

/* The verbs the service registers. */
#define WEFT_KV_VERB_GET 64u
#define WEFT_KV_VERB_PUT 65u
#define WEFT_KV_VERB_DELETE 66u
#define WEFT_KV_VERB_REPLICATE 67u
#define WEFT_KV_VERB_SCAN 68u
/* Members only: a replica's range digests, and its entries of some
 * ranges with their versions (catch-up and anti-entropy). */
#define WEFT_KV_VERB_DIGEST 69u
#define WEFT_KV_VERB_PULL 70u
/* Members only: a replica's entry of a key with its version, for a
 * quorum or all read. */
#define WEFT_KV_VERB_READ 71u

/* Longest key, in bytes; keys are 1 to WEFT_KV_MAX_KEY bytes. */
#define WEFT_KV_MAX_KEY 1024u
/* The most entries one scan answers with, and the answer's size past
 * which it stops adding entries. */
#define WEFT_KV_MAX_SCAN 1000u
#define WEFT_KV_SCAN_MAX_BYTES (1u << 20)

typedef struct weft_kv weft_kv;

/*
 * A get's read consistency: how many replicas of the moment must answer
 * (see "Reads" above). WEFT_KV_READ_DEFAULT is the node's [kv]
 * read_consistency.
 */
typedef enum weft_kv_consistency {
	WEFT_KV_READ_DEFAULT = 0,
	WEFT_KV_READ_ONE = 1,
	WEFT_KV_READ_QUORUM = 2,
	WEFT_KV_READ_ALL = 3,
} weft_kv_consistency;

/*
 * Service options; zero fields are read from the [kv] section of config
 * (weft_kv_config_section) and otherwise take the defaults shown.
 */
typedef struct weft_kv_opts {
	/* Borrowed during weft_kv_new only; NULL: no [kv] section. */
	const weft_msvc_config *config;
	/* write_quorum: replicas that must apply a write, 1..members;
	 * config: a number, "majority", "all" or "one". Default majority. */
	uint32_t write_quorum;
	/* replicate_timeout: how long a replica has to acknowledge a write
	 * (the client's deadline still applies). Default 2000 ms. */
	uint64_t replicate_timeout_ms;
	/* max_value: longest value accepted. Default 16 MiB; it and its
	 * key must fit the messaging service's max_message (a value larger
	 * than a frame travels in chunks). */
	size_t max_value_bytes;
	/* max_clock_skew: how far ahead of this node's clock a replicated
	 * write's version may be. A member whose clock runs further ahead
	 * (or a forged version) is refused with WEFT_EINVAL rather than let
	 * it pin keys and push the clock to its end. Default 30 s. */
	uint64_t max_clock_skew_ms;
	/* repair_interval: how often this replica compares its range
	 * digests with one other member's, in turn, and pulls the newer
	 * entries of the ranges that differ (anti-entropy). Default
	 * 10000 ms; weft_kv_repair asks for a round at once. */
	uint64_t repair_interval_ms;
	/* on_caught_up, when set, is called once when this replica has
	 * caught up (weft_kv_is_caught_up turns true), with
	 * on_caught_up_arg, on the store's repair thread: it must not call
	 * weft_kv_free. For a readiness signal. */
	void (*on_caught_up)(weft_kv *kv, void *arg);
	void *on_caught_up_arg;
	/* await_members: the members are not all known when the service
	 * starts (they come from discovery), so this replica does not
	 * count itself caught up, however few members it knows, until
	 * weft_kv_members_known is called: a node that knows only itself
	 * would need no copy, and would answer reads without the data. */
	bool await_members;
	/* read_consistency: what a get that names none reads;
	 * config: "one", "quorum" or "all". Default one. */
	weft_kv_consistency read_consistency;
} weft_kv_opts;

/*
 * The [kv] section of the configuration file (weft.conf(5)): write_quorum,
 * replicate_timeout, max_value. Pass it in weft_msvc_config_opts.sections
 * so that loading checks it; weft_kv_new reads it from opts->config.
 */
WEFT_API extern const weft_msvc_conf_section weft_kv_config_section;

/*
 * weft_kv_config_check reads the [kv] section of cfg and checks it against
 * the cluster: a write_quorum no larger than the members, a max_value that
 * fits [limits] max_frame. Returns 0, or WEFT_ECONFIG with the file, line
 * and reason in err. What weft_kv_new would refuse, before starting
 * anything (weftd --check-config). Any thread.
 */
WEFT_API int weft_kv_config_check(const weft_msvc_config *cfg, char *err,
                                  size_t errlen);

/*
 * weft_kv_new registers the key-value verbs on svc, which must be a member
 * not yet started, and returns the store in *out (the caller's, to free
 * with weft_kv_free). svc is borrowed and must outlive the store's use.
 * Returns 0, WEFT_EINVAL (svc is not a member), WEFT_ECONFIG (a bad [kv]
 * value, logged; or a write_quorum above the member count), WEFT_EEXIST
 * (a verb is taken), WEFT_EBUSY (svc already started) or WEFT_ENOMEM.
 * Not from one of svc's loops.
 */
WEFT_API int weft_kv_new(weft_msvc *svc, const weft_kv_opts *opts,
                         weft_kv **out);

/*
 * weft_kv_free frees the store. Call it after weft_msvc_stop(svc) has
 * returned (every write in progress has then ended); it does not touch
 * svc. NULL is ignored. Any thread, once weft_msvc_stop has returned.
 */
WEFT_API void weft_kv_free(weft_kv *kv);

/* weft_kv_write_quorum is the quorum in force for the members now. Any
 * thread. */
WEFT_API uint32_t weft_kv_write_quorum(const weft_kv *kv);

/*
 * weft_kv_is_caught_up is true once this replica has copied the data of
 * enough other members to hold every acknowledged write (see "Catch-up"
 * above); until then its gets and scans are refused with OVERLOADED. Any
 * thread.
 */
WEFT_API bool weft_kv_is_caught_up(const weft_kv *kv);

/*
 * weft_kv_members_known tells a replica made with await_members that its
 * members are known now (discovery's first answer has been applied): its
 * catch-up goes on from them at once. Once is enough; later calls do
 * nothing. Any thread.
 */
WEFT_API void weft_kv_members_known(weft_kv *kv);

/*
 * weft_kv_repair asks for an anti-entropy round now (see "Anti-entropy"
 * above) rather than at the next repair_interval; it runs on the store's
 * repair thread, and repair_rounds counts it once done. Any thread.
 */
WEFT_API void weft_kv_repair(weft_kv *kv);

/*
 * weft_kv_get_local reads key from this node's replica, appending the
 * value to value_out (may be NULL). Returns 0, WEFT_ENOTFOUND (no such key,
 * or deleted) or WEFT_ENOMEM. For tests and embedding. Any thread.
 */
WEFT_API int weft_kv_get_local(weft_kv *kv, const void *key, size_t key_len,
                               struct evbuffer *value_out);

/* Counters. Any thread; each field is exact, the set is not a snapshot. */
typedef struct weft_kv_stats {
	uint64_t gets;              /* get requests answered */
	uint64_t get_misses;        /* of which not found */
	uint64_t puts;              /* puts coordinated here */
	uint64_t deletes;           /* deletes coordinated here */
	uint64_t writes_acked;      /* writes answered with success */
	uint64_t quorum_failures;   /* writes answered with an error */
	uint64_t replicas_applied;  /* replicated writes that won */
	uint64_t replicas_stale;    /* replicated writes already superseded */
	uint64_t replicas_refused;  /* versions too far ahead of our clock */
	uint64_t writes_superseded; /* writes that lost to a newer version */
	uint64_t replica_failures;  /* replica acks that failed */
	uint64_t bad_requests;      /* malformed payloads */
	uint64_t scans;             /* scan requests answered */
	uint64_t keys;              /* keys held, tombstones included */
	uint64_t value_bytes;       /* bytes of live values held */
	uint64_t aborts_sent;       /* aborts of failed writes sent */
	uint64_t replicas_aborted;  /* failed writes taken back here */
	uint64_t aborts_dropped;    /* aborts given up (too many waiting) */
	uint64_t reads_refused;     /* gets and scans before caught up */
	uint64_t repair_rounds;     /* anti-entropy rounds completed */
	uint64_t ranges_repaired;   /* ranges found different and pulled */
	uint64_t entries_pulled;    /* pulled entries that were newer */
	uint64_t entries_pulled_stale; /* pulled entries not newer */
	uint64_t bytes_pulled;         /* payload bytes of pulls and digests */
	uint64_t caught_up;            /* 1 once gets and scans are answered */
	uint64_t reads_coordinated;    /* quorum and all gets coordinated */
	uint64_t read_disagreements;   /* of which replicas disagreed */
	uint64_t read_failures;        /* of which answered with an error */
	uint64_t read_repairs;         /* newer entries applied here on read */
	uint64_t reads_downgraded;     /* replicas left out: older build */
	uint64_t read_answers_refused; /* replica answers malformed or lying */
} weft_kv_stats;

/* weft_kv_get_stats copies the store's counters into *out. Any thread. */
WEFT_API void weft_kv_get_stats(const weft_kv *kv, weft_kv_stats *out);

/*
 * weft_kv_metrics_dump appends the counters to out in the Prometheus text
 * format (names start with weft_kv_). Returns 0 or WEFT_ENOMEM. Any
 * thread.
 */
WEFT_API int weft_kv_metrics_dump(const weft_kv *kv, struct evbuffer *out);

/*
 * Client calls, for any weft_msvc (a non-member client or a member): each
 * sends one request to node and runs cb exactly once, as
 * weft_msvc_request() does. get: status 0 and the value, or
 * WEFT_ENOTFOUND; put and delete: status 0 once the write quorum applied
 * it. Returns 0 or the codes of weft_msvc_request(), and WEFT_EINVAL for
 * an empty or too long key. Any thread.
 */
WEFT_API int weft_kv_client_get(weft_msvc *svc, weft_msvc_peer *node,
                                const void *key, size_t key_len,
                                const weft_msvc_call_opts *opts,
                                weft_msvc_reply_cb cb, void *arg);
WEFT_API int weft_kv_client_put(weft_msvc *svc, weft_msvc_peer *node,
                                const void *key, size_t key_len,
                                const void *value, size_t value_len,
                                const weft_msvc_call_opts *opts,
                                weft_msvc_reply_cb cb, void *arg);
WEFT_API int weft_kv_client_delete(weft_msvc *svc, weft_msvc_peer *node,
                                   const void *key, size_t key_len,
                                   const weft_msvc_call_opts *opts,
                                   weft_msvc_reply_cb cb, void *arg);

/*
 * weft_kv_client_get_at is weft_kv_client_get at read consistency cl
 * (WEFT_KV_READ_DEFAULT sends the same request as weft_kv_client_get,
 * which every build serves). Returns 0, the codes of weft_msvc_request(),
 * or WEFT_EINVAL (a bad key or cl). Any thread.
 */
WEFT_API int weft_kv_client_get_at(weft_msvc *svc, weft_msvc_peer *node,
                                   const void *key, size_t key_len,
                                   weft_kv_consistency cl,
                                   const weft_msvc_call_opts *opts,
                                   weft_msvc_reply_cb cb, void *arg);

/*
 * weft_kv_consistency_parse reads "one", "quorum" or "all" (any case)
 * into *out. Returns 0 or WEFT_EINVAL. Any thread.
 */
WEFT_API int weft_kv_consistency_parse(const char *text,
                                       weft_kv_consistency *out);

/*
 * weft_kv_client_scan asks node for up to count (1 to WEFT_KV_MAX_SCAN)
 * live entries from start on (start_len 0 to WEFT_KV_MAX_KEY; empty: from
 * the first key), as weft_msvc_request() does; cb gets status 0 and the
 * answer, to read with weft_kv_scan_parse. Returns 0, the codes of
 * weft_msvc_request(), or WEFT_EINVAL (a bad count or start). Any thread.
 */
WEFT_API int weft_kv_client_scan(weft_msvc *svc, weft_msvc_peer *node,
                                 const void *start, size_t start_len,
                                 uint32_t count,
                                 const weft_msvc_call_opts *opts,
                                 weft_msvc_reply_cb cb, void *arg);

/* One entry of a scan's answer, borrowed for the call. */
typedef void (*weft_kv_scan_cb)(const void *key, size_t key_len,
                                const void *value, size_t value_len, void *arg);

/*
 * weft_kv_scan_parse reads a scan's answer (data, len as the reply
 * callback got them): it checks the whole answer first, then calls cb (may
 * be NULL) for each entry in order. *next and *next_len (either may be
 * NULL) receive the key to scan from for the rest, pointing into data, or
 * NULL and 0 when no key follows. Returns the number of entries, or
 * WEFT_EINVAL for a malformed answer (cb is then never called). Any
 * thread.
 */
WEFT_API int weft_kv_scan_parse(const void *data, size_t len,
                                weft_kv_scan_cb cb, void *arg,
                                const void **next, size_t *next_len);

#ifdef __cplusplus
}
#endif

#endif
