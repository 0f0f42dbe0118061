/* SPDX-License-Identifier: MIT */
/* metrics.c: the node's HTTP endpoint: its counters in Prometheus text
 * (/metrics) and its health (/livez, /readyz: health.c). */
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <weft/discovery.h>
#include <weft/metrics.h>
#include <weft/tls.h>

#include "weftd_int.h"

static int
dump_daemon(struct weftd *d, struct evbuffer *out)
{
	double up = (double)(weft_now_ns() - d->started_ns) / 1e9;
	char node[2 * WEFT_MSVC_MAX_ID + 1], cluster[2 * WEFT_MSVC_MAX_ID + 1];

	weft_metrics_escape(node, sizeof(node), d->id);
	weft_metrics_escape(cluster, sizeof(cluster),
	                    weft_msvc_config_cluster(d->cfg));
	if (evbuffer_add_printf(
	        out,
	        "# HELP weftd_info The node this daemon runs.\n"
	        "# TYPE weftd_info gauge\n"
	        "weftd_info{node=\"%s\",cluster=\"%s\",version=\"%s\"} 1\n"
	        "# HELP weftd_uptime_seconds Time since start.\n"
	        "# TYPE weftd_uptime_seconds gauge\n"
	        "weftd_uptime_seconds{node=\"%s\"} %.3f\n"
	        "# HELP weftd_config_reloads_total The configuration file read "
	        "again (SIGHUP, or changed on disk), by outcome.\n"
	        "# TYPE weftd_config_reloads_total counter\n"
	        "weftd_config_reloads_total{node=\"%s\",result=\"applied\"} "
	        "%" PRIu64 "\n"
	        "weftd_config_reloads_total{node=\"%s\",result=\"refused\"} "
	        "%" PRIu64 "\n",
	        node, cluster, weft_version(), node, up, node,
	        d->reloads_applied, node, d->reloads_refused) < 0)
		return WEFT_ENOMEM;
	if (d->spans != NULL) {
		uint64_t written, dropped;

		weftd_spans_counts(d, &written, &dropped);
		if (evbuffer_add_printf(
		        out,
		        "# HELP weftd_spans_total Spans of sampled traces for "
		        "[weftd] span_file, by outcome.\n"
		        "# TYPE weftd_spans_total counter\n"
		        "weftd_spans_total{node=\"%s\",result=\"written\"} "
		        "%" PRIu64 "\n"
		        "weftd_spans_total{node=\"%s\",result=\"dropped\"} "
		        "%" PRIu64 "\n",
		        node, written, node, dropped) < 0)
			return WEFT_ENOMEM;
	}
	return weft_metrics_dump_process(out);
}

/* dump_tls: the TLS context's handshakes and whether the kernel carries
 * the records (kTLS), with TLS configured. */
static int
dump_tls(struct weftd *d, struct evbuffer *out)
{
	char node[2 * WEFT_MSVC_MAX_ID + 1];
	weft_tls_stats st;

	if (d->tls == NULL)
		return 0;
	weft_tls_ctx_get_stats(d->tls, &st);
	weft_metrics_escape(node, sizeof(node), d->id);
	if (evbuffer_add_printf(
	        out,
	        "# HELP weftd_tls_handshakes_total TLS handshakes, both "
	        "sides.\n"
	        "# TYPE weftd_tls_handshakes_total counter\n"
	        "weftd_tls_handshakes_total{node=\"%s\",kind=\"completed\"} "
	        "%llu\n"
	        "weftd_tls_handshakes_total{node=\"%s\",kind=\"resumed\"} "
	        "%llu\n"
	        "# HELP weftd_tls_ktls_total TLS connections whose records "
	        "the kernel encrypts (send) or decrypts (recv).\n"
	        "# TYPE weftd_tls_ktls_total counter\n"
	        "weftd_tls_ktls_total{node=\"%s\",direction=\"send\"} "
	        "%llu\n"
	        "weftd_tls_ktls_total{node=\"%s\",direction=\"recv\"} "
	        "%llu\n"
	        "# HELP weftd_tls_ktls_offered The kernel offers kernel TLS "
	        "(the tls TCP upper layer).\n"
	        "# TYPE weftd_tls_ktls_offered gauge\n"
	        "weftd_tls_ktls_offered{node=\"%s\"} %d\n",
	        node, (unsigned long long)st.handshakes_completed, node,
	        (unsigned long long)st.handshakes_resumed, node,
	        (unsigned long long)st.ktls_send, node,
	        (unsigned long long)st.ktls_recv, node,
	        st.ktls_offered ? 1 : 0) < 0)
		return WEFT_ENOMEM;
	return 0;
}

/* dump_dns: what DNS SRV discovery did, with discovery = dns-srv. */
static int
dump_dns(struct weftd *d, struct evbuffer *out)
{
	char node[2 * WEFT_MSVC_MAX_ID + 1];
	weft_dns_discovery_stats st;
	static const char *const events[] = {
	    "query",   "answer", "failure", "added",
	    "removed", "moved",  "ignored",
	};
	uint64_t counts[sizeof(events) / sizeof(events[0])];
	size_t i;

	if (d->dns == NULL)
		return 0;
	weft_dns_discovery_stats_get(d->dns, &st);
	weft_metrics_escape(node, sizeof(node), d->id);
	counts[0] = st.queries;
	counts[1] = st.answers;
	counts[2] = st.failures;
	counts[3] = st.added;
	counts[4] = st.removed;
	counts[5] = st.moved;
	counts[6] = st.ignored;
	if (evbuffer_add_printf(
	        out, "# HELP weftd_dns_discovery_total DNS SRV "
	             "discovery's queries, answers, failures, "
	             "members proposed and targets ignored.\n"
	             "# TYPE weftd_dns_discovery_total counter\n") < 0)
		return WEFT_ENOMEM;
	for (i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
		if (evbuffer_add_printf(out,
		                        "weftd_dns_discovery_total{node=\"%s\","
		                        "event=\"%s\"} %" PRIu64 "\n",
		                        node, events[i], counts[i]) < 0)
			return WEFT_ENOMEM;
	}
	if (evbuffer_add_printf(out,
	                        "# HELP weftd_dns_discovery_members Members "
	                        "the SRV records currently propose.\n"
	                        "# TYPE weftd_dns_discovery_members gauge\n"
	                        "weftd_dns_discovery_members{node=\"%s\"} "
	                        "%u\n",
	                        node, st.members) < 0)
		return WEFT_ENOMEM;
	return 0;
}

int
weftd_metrics_dump(struct weftd *d, struct evbuffer *out)
{
	int rv;

	if ((rv = dump_daemon(d, out)) != 0 || (rv = dump_tls(d, out)) != 0 ||
	    (rv = dump_dns(d, out)) != 0)
		return rv;
	if ((rv = weft_msvc_metrics_dump(d->svc, out)) != 0)
		return rv;
	return weft_kv_metrics_dump(d->kv, out);
}

/* Sends body, or for HEAD only the headers a GET would have had
 * (libevent 2.1 would send the body after them too). */
static void
send_text(struct evhttp_request *req, int code, const char *reason,
          struct evbuffer *body, const char *path)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	const char *type = "text/plain; charset=utf-8";
	char length[24];

	/* The Prometheus text format's version, on its answers only. */
	if (code == HTTP_OK && path != NULL && strcmp(path, "/metrics") == 0)
		type = "text/plain; version=0.0.4; charset=utf-8";
	else if (code == HTTP_OK && path != NULL && weftd_debug_is_path(path))
		type = "application/json";
	evhttp_add_header(h, "Content-Type", type);
	if (evhttp_request_get_command(req) != EVHTTP_REQ_HEAD) {
		evhttp_send_reply(req, code, reason, body);
		return;
	}
	snprintf(length, sizeof(length), "%zu", evbuffer_get_length(body));
	evhttp_add_header(h, "Content-Length", length);
	evhttp_send_reply(req, code, reason, NULL);
}

/* Whether the query asks for every check: "verbose", as etcd takes it
 * ("?verbose", "?verbose=1", among other parameters). */
static bool
wants_verbose(struct evhttp_request *req)
{
	const char *q =
	    evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	size_t len = strlen("verbose");

	while (q != NULL && *q != '\0') {
		if (strncmp(q, "verbose", len) == 0 &&
		    (q[len] == '\0' || q[len] == '&' || q[len] == '='))
			return true;
		q = strchr(q, '&');
		q = q != NULL ? q + 1 : NULL;
	}
	return false;
}

/* Fills body with what path answers and returns the status; 0: no such
 * path. */
static int
answer(struct weftd *d, const char *path, struct evhttp_request *req,
       struct evbuffer *body)
{
	if (strcmp(path, "/metrics") == 0) {
		if (weftd_metrics_dump(d, body) == 0)
			return HTTP_OK;
		evbuffer_drain(body, evbuffer_get_length(body));
		evbuffer_add_printf(body, "out of memory\n");
		return HTTP_INTERNAL;
	}
	if (strcmp(path, "/livez") == 0)
		return weftd_livez(d, body, wants_verbose(req))
		           ? HTTP_OK
		           : HTTP_SERVUNAVAIL;
	if (strcmp(path, "/readyz") == 0)
		return weftd_readyz(d, body, wants_verbose(req))
		           ? HTTP_OK
		           : HTTP_SERVUNAVAIL;
	if (weftd_debug_is_path(path))
		return weftd_debug_answer(d, path, body);
	return 0;
}

static const char *
reason_of(int code)
{
	switch (code) {
	case HTTP_OK:
		return "OK";
	case HTTP_SERVUNAVAIL:
		return "Service Unavailable";
	default:
		return "Internal Error";
	}
}

static void
on_request(struct evhttp_request *req, void *arg)
{
	const char *path =
	    evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	struct weftd *d = arg;
	struct evbuffer *body;
	int code;

	if ((body = evbuffer_new()) == NULL) {
		evhttp_send_reply(req, HTTP_INTERNAL, "Internal Error", NULL);
		return;
	}
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET &&
	    evhttp_request_get_command(req) != EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		                  "Allow", "GET, HEAD");
		evbuffer_add_printf(body, "method not allowed: GET or HEAD\n");
		send_text(req, HTTP_BADMETHOD, "Method Not Allowed", body,
		          NULL);
	} else if (path == NULL || (code = answer(d, path, req, body)) == 0) {
		evbuffer_add_printf(body, "not found: try /metrics, /livez, "
		                          "/readyz, /debug/connections or "
		                          "/debug/requests\n");
		send_text(req, HTTP_NOTFOUND, "Not Found", body, NULL);
	} else {
		send_text(req, code, reason_of(code), body, path);
	}
	evbuffer_free(body);
}

/* The port the endpoint got, which differs from the configured one when
 * that is 0. */
static uint16_t
bound_port(struct evhttp_bound_socket *bs)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	evutil_socket_t fd = evhttp_bound_socket_get_fd(bs);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

struct evhttp *
weftd_http_new(struct weftd *d, struct event_base *base)
{
	struct evhttp *http = evhttp_new(base);

	if (http == NULL)
		return NULL;
	/* Other methods get a 405 from on_request with the Allow header,
	 * rather than libevent's 501 page. */
	evhttp_set_allowed_methods(
	    http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
	              EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
	              EVHTTP_REQ_PATCH);
	evhttp_set_max_headers_size(http, 16384);
	evhttp_set_max_body_size(http, 4096);
	evhttp_set_timeout(http, 10);
	evhttp_set_gencb(http, on_request, d);
	return http;
}

int
weftd_http_start(struct weftd *d)
{
	struct evhttp_bound_socket *bs;
	char where[WEFT_ADDRESS_MAX];

	if (d->set.metrics.host[0] == '\0')
		return 0;
	if ((d->http = weftd_http_new(d, weft_loop_base(d->main_loop))) == NULL)
		return WEFT_ENOMEM;
	bs = evhttp_bind_socket_with_handle(d->http, d->set.metrics.host,
	                                    d->set.metrics.port);
	if (bs == NULL) {
		weft_address_join(d->set.metrics.host, d->set.metrics.port,
		                  where, sizeof(where));
		weft_error("weftd: metrics_listen %s: cannot bind", where);
		evhttp_free(d->http);
		d->http = NULL;
		return WEFT_EADDRINUSE;
	}
	d->metrics_bound_port = bound_port(bs);
	return 0;
}

void
weftd_http_stop(struct weftd *d)
{
	if (d->http != NULL)
		evhttp_free(d->http);
	d->http = NULL;
}
