/* SPDX-License-Identifier: MIT */
/* weftd_int.h: the node daemon's parts. */
#ifndef WEFTD_INT_H
#define WEFTD_INT_H

#include <stdatomic.h>
#include <stdio.h>

#include <weft/kv.h>
#include <weft/loop.h>
#include <weft/messaging.h>
#include <weft/msgpack_codec.h>

#include "weftd_proto.h"

struct event;
struct event_base;
struct evhttp;
struct weftd_probe;

/* The [weftd] section, and [weftd ID] for one node (settings.c). */
struct weftd_settings {
	weft_msvc_conf_address metrics; /* host "": no endpoint */
	weft_msvc_conf_address listen;  /* host "": the node's host and port */
	uint64_t shutdown_timeout_ms;
	int log_level;                 /* enum weft_log_level */
	int log_format;                /* index in log_formats: 0 auto */
	bool load;                     /* register the load verb */
	uint64_t load_max_duration_ms; /* a run's warm-up and window */
	uint32_t load_max_rate;        /* requests/s of an open-loop run */
	const char *span_file;         /* NULL: spans are not written */
	double trace_sample_rate;      /* weft_msvc_opts' */
};
extern const weft_msvc_conf_section weftd_config_section;

/* [cluster]'s discovery keys (settings.c), in the order of its choices. */
enum weftd_discovery {
	WEFTD_DISCOVERY_FILE,
	WEFTD_DISCOVERY_STATIC,
	WEFTD_DISCOVERY_DNS_SRV
};
struct weftd_cluster {
	int discovery;           /* enum weftd_discovery */
	const char *dns_name;    /* borrowed from the config */
	const char *dns_service; /* NULL: _weft._tcp */
	const char *dns_servers; /* NULL: /etc/resolv.conf */
	uint64_t dns_grace_ms;   /* 0: the provider's default */
	uint32_t dns_max_members;
};
extern const weft_msvc_conf_section weftd_cluster_section;
/* weftd_cluster_read reads [cluster]'s discovery keys into c; 0 or
 * WEFT_ECONFIG (message in err). */
int weftd_cluster_read(const weft_msvc_config *cfg, struct weftd_cluster *c,
                       char *err, size_t errlen);

struct weft_dns_discovery;

enum {
	WEFTD_SIG_TERM,
	WEFTD_SIG_INT,
	WEFTD_SIG_USR1,
	WEFTD_SIG_HUP,
	WEFTD_SIGNALS
};

/* What tells a changed file (reload.c). */
struct weftd_stamp {
	uint64_t dev, ino, size, mtime_ns;
};

/* One node: everything main() builds, freed in reverse. */
struct weftd {
	const char *config_path;
	const char *id;
	const char *tls_cert; /* --tls-cert, --tls-key: override [tls] */
	const char *tls_key;
	weft_msvc_config *cfg;
	bool check_only; /* --check-config */
	struct weftd_settings set;
	struct weftd_cluster cluster;
	/* Runtime. */
	weft_loop *main_loop; /* the main thread's: signals and HTTP */
	weft_loop_group *group;
	weft_msvc *svc;
	weft_kv *kv;
	weft_tls_ctx *tls;
	struct weftd_load *load; /* the load verb's runs, or NULL */
	struct event *signals[WEFTD_SIGNALS];
	struct evhttp *http;
	uint16_t metrics_bound_port;
	struct weftd_probe *probes; /* one per loop of the group (health.c) */
	size_t nprobes;
	weft_timer *probe_timer;
	uint64_t started_ns;
	int stop_signal;
	_Atomic bool ready; /* READY=1 sent, STOPPING=1 not yet */
	/* reload.c, main loop: the file read again, the members from the
	 * last one accepted (NULL: still cfg's). */
	weft_msvc_config *applied;
	struct weftd_stamp stamp;
	weft_timer *watch_timer;
	bool reload_retry;         /* an add to try again */
	weft_log_limit reload_log; /* refusals of a changed file */
	uint64_t reloads_applied, reloads_refused;
	/* discovery.c, main loop: the DNS SRV provider, or NULL. */
	struct weft_dns_discovery *dns;
	/* spans.c: [weftd] span_file's writer, or NULL. */
	struct weftd_spans *spans;
};

/* metrics.c: the Prometheus text of the whole node. */
int weftd_metrics_dump(struct weftd *d, struct evbuffer *out);
/* weftd_http_new makes the /metrics endpoint's server on base, not yet
 * bound: its limits, methods and handler (which reads d). NULL: no
 * memory. */
struct evhttp *weftd_http_new(struct weftd *d, struct event_base *base);
/* Starts the /metrics endpoint on the main loop; 0 or a WEFT_E code. */
int weftd_http_start(struct weftd *d);
void weftd_http_stop(struct weftd *d);

/* health.c: /livez and /readyz (docs/WEFTD.md, "Health"). Start after
 * the service: probes every loop of the group from the main loop; stop
 * before the group is freed, free after. 0 or a WEFT_E code. */
int weftd_health_start(struct weftd *d);
void weftd_health_stop(struct weftd *d);
void weftd_health_free(struct weftd *d);
/* weftd_livez and weftd_readyz append the answer's text to out ("ok", or
 * "not live: ..." with what failed; verbose, every check) and return
 * whether the node is live or ready. Main loop. */
bool weftd_livez(struct weftd *d, struct evbuffer *out, bool verbose);
bool weftd_readyz(struct weftd *d, struct evbuffer *out, bool verbose);

/* notify.c: weftd_notify sends the formatted "KEY=value\n..." lines to
 * the service manager ($NOTIFY_SOCKET, sd_notify(3)); nothing without
 * it. Never blocks. Any thread. */
void weftd_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* tls.c: the TLS context from the [tls] section, and its reload. */
/* weftd_tls_ctx_from_config makes the context [tls] asks for (*out NULL
 * when mode is none); cert and key override the section's when not NULL.
 * Returns 0, or WEFT_ECONFIG with "FILE:LINE: [tls] key: reason" in err
 * (every failure, the files not loading included, is the
 * configuration's). */
int weftd_tls_ctx_from_config(const weft_msvc_config *cfg, const char *cert,
                              const char *key, weft_tls_ctx **out, char *err,
                              size_t errlen);
int weftd_tls_open(struct weftd *d, char *err, size_t errlen);
void weftd_tls_reload(struct weftd *d);
void weftd_tls_close(struct weftd *d);

/* spans.c: [weftd] span_file (docs/WEFTD.md, "Traces"): the spans of
 * sampled traces as OTLP/JSON lines. Start on the main loop after the
 * service is made and before it starts (nothing without span_file);
 * reopen on SIGHUP; free after the service is freed. Start returns 0 or
 * a WEFT_E code (logged). */
int weftd_spans_start(struct weftd *d);
void weftd_spans_reopen(struct weftd *d);
void weftd_spans_counts(const struct weftd *d, uint64_t *written,
                        uint64_t *dropped);
void weftd_spans_free(struct weftd *d);

/* status.c: the status verb; register before the service starts, once
 * d->kv is set. 0 or a WEFT_E code. */
int weftd_status_register(struct weftd *d);

/* kv_format.c: how weft-kv prints bytes. Text: printable ASCII as it is,
 * a backslash as \\, newline, carriage return and tab as \n, \r, \t, any
 * other byte as \xHH (redis-cli's quoting, without the quotes), so that
 * one value is one line. JSON: a string member "name" when the bytes are
 * valid UTF-8 (control characters, quote and backslash escaped), else
 * "name_base64" with the bytes in base64 (RFC 4648). */
void weftd_print_escaped(FILE *f, const void *data, size_t len);
void weftd_print_json_bytes(FILE *f, const char *name, const void *data,
                            size_t len);
/* weftd_print_json_string prints the len bytes of s as a JSON string,
 * escaped (the bytes are taken to be UTF-8). */
void weftd_print_json_string(FILE *f, const char *s, size_t len);

/* kv_status.c: weft-kv ping and status on node, printed to stdout as
 * text or JSON. They return 0 or the request's status. */
int weftd_kv_ping(weft_msvc *svc, weft_msvc_peer *node, uint64_t timeout_ms,
                  bool json);
int weftd_kv_status(weft_msvc *svc, weft_msvc_peer *node, uint64_t timeout_ms,
                    bool json);

/* debug.c: what is in flight (docs/WEFTD.md, "What is in flight").
 * weftd_debug_is_path tells the endpoint's paths; weftd_debug_answer
 * fills body with path's JSON and returns the HTTP status (main loop:
 * it waits for the service's loops, at most a second); weftd_debug_pack
 * adds "connections" and "requests" to a map being packed (status.c).
 * 0 or WEFT_ENOMEM. */
bool weftd_debug_is_path(const char *path);
int weftd_debug_answer(struct weftd *d, const char *path,
                       struct evbuffer *body);
int weftd_debug_pack(const weft_msvc_snapshot *snap, msgpack_packer *pk);

/* load.c: the load verb, with which weft-bench runs the cluster workload
 * on weftd nodes (docs/WEFTD.md). Register before the service starts;
 * stop (ends a run, joins its thread) before the service stops; free
 * after it stopped. 0 or a WEFT_E code. */
int weftd_load_register(struct weftd *d);
/* A load request's parameters, read from its msgpack map; op points into
 * the decoded message. */
struct weftd_load_params {
	const char *op;
	size_t op_len;
	uint64_t warmup_ms, duration_ms, outstanding, size;
	double rate;
};
/* weftd_load_decode reads a load request's payload: checked and decoded
 * (weft_msgpack_decode, within its memory bound) into *m, which the caller
 * frees with weft_msgpack_msg_free (NULL on failure), and its parameters
 * into *p. Returns NULL, or why the request is malformed. Any thread. */
const char *weftd_load_decode(const void *data, size_t len,
                              weft_msgpack_msg **m,
                              struct weftd_load_params *p);
void weftd_load_stop(struct weftd *d);
void weftd_load_free(struct weftd *d);

/* reload.c: the file read again on SIGHUP (weftd_reload, why says what
 * asked, signalled whether a signal did) and when it changes on disk, its
 * members applied; start after the service, on the main loop, stop
 * before the service stops. */
int weftd_reload_start(struct weftd *d);
void weftd_reload(struct weftd *d, const char *why, bool signalled);
void weftd_reload_stop(struct weftd *d);

/* discovery.c: with discovery = dns-srv, the DNS SRV provider on the
 * main loop (its servers from $WEFT_DNS_SERVERS, else dns_servers, else
 * /etc/resolv.conf); nothing otherwise. Start after the service, stop
 * before it stops. 0 or a WEFT_E code. */
int weftd_discovery_start(struct weftd *d);
void weftd_discovery_stop(struct weftd *d);

/* settings.c. weftd_config_load reads the file with every section checked
 * ([weftd], [kv] and the messaging service's); 0, WEFT_ECONFIG, WEFT_EIO or
 * WEFT_ENOMEM, with file:line in err. */
int weftd_config_load(const char *path, weft_msvc_config **out, char *err,
                      size_t errlen);
/* weftd_settings_read reads [weftd] and [weftd id] into s, defaults first;
 * 0 or WEFT_ECONFIG (message in err). */
int weftd_settings_read(const weft_msvc_config *cfg, const char *id,
                        struct weftd_settings *s, char *err, size_t errlen);
/* weftd_settings_where writes where key of node id's settings was set:
 * "FILE:LINE" into where, and "weftd ID" or "weftd" into section. */
void weftd_settings_where(const weft_msvc_config *cfg, const char *id,
                          const char *key, char *section, size_t seclen,
                          char *where, size_t wherelen);
/* weftd_settings_load reads d's settings and sets the log level and
 * format. */
int weftd_settings_load(struct weftd *d, char *err, size_t errlen);
/* "host:port", "[v6]:port" */
void weftd_format_address(const weft_msvc_conf_address *a, uint16_t port,
                          char *buf, size_t len);

#endif
