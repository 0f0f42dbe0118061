/* SPDX-License-Identifier: MIT */
/*
 * spans.c: [weftd] span_file. The spans of sampled traces that this node's
 * requests belong to (weft_msvc_on_span: a replicated write, a catch-up
 * pull, anything its handlers ask of other members) are written to a file
 * as OTLP/JSON, one ExportTraceServiceRequest a line: the form the
 * OpenTelemetry Collector's otlpjsonfile receiver reads. docs/WEFTD.md,
 * "Traces".
 *
 * A span is formatted on the loop that ends its request and appended to a
 * buffer under a lock; the main loop writes the buffer out once a second,
 * and at the end. The buffer is bounded: past it spans are dropped and
 * counted, so a slow disk never holds a loop. SIGHUP opens the file again
 * (after logrotate has moved it).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "weftd_int.h"

#define FLUSH_MS 1000
#define MAX_PENDING (4u << 20) /* bytes of spans not yet written */

struct weftd_spans {
	pthread_mutex_t lock;
	struct evbuffer *pending; /* under lock */
	char *path;
	int fd;            /* main loop */
	weft_timer *flush; /* main loop */
	const char *node;  /* the node's id, borrowed */
	const char *cluster;
	weft_log_limit log; /* write failures */
	_Atomic uint64_t written, dropped;
};

/* Ids and verb names go into the JSON as they are: an id is letters,
 * digits, '_', '.' and '-' (the configuration's rule), and a name with
 * any other byte is written as "verb N" instead, so nothing needs
 * escaping. */
static bool
plain(const char *s)
{
	if (s == NULL || *s == '\0')
		return false;
	for (; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' ||
		      *s == '-'))
			return false;
	return true;
}

static void
hex(char *out, const uint8_t *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

static bool
all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

/* One span as one OTLP/JSON line into out; 0 or -1. */
static int
format_span(const struct weftd_spans *s, const weft_msvc_span *span,
            struct evbuffer *out)
{
	char trace[33], id[17], parent[17], name[64];
	const char *peer = plain(span->peer) ? span->peer : "?";
	int rv = 0;

	hex(trace, span->context.trace_id, 16);
	hex(id, span->context.span_id, 8);
	hex(parent, span->parent_span_id, 8);
	if (plain(span->verb_name))
		snprintf(name, sizeof(name), "%s", span->verb_name);
	else
		snprintf(name, sizeof(name), "verb %" PRIu32, span->verb);
	rv |= evbuffer_add_printf(
	          out,
	          "{\"resourceSpans\":[{\"resource\":{\"attributes\":["
	          "{\"key\":\"service.name\",\"value\":{\"stringValue\":"
	          "\"weftd\"}},"
	          "{\"key\":\"service.instance.id\",\"value\":{\"stringValue\":"
	          "\"%s\"}},"
	          "{\"key\":\"weft.cluster\",\"value\":{\"stringValue\":\"%s\"}"
	          "}]},"
	          "\"scopeSpans\":[{\"scope\":{\"name\":\"weft\",\"version\":"
	          "\"%d.%d.%d\"},\"spans\":[{\"traceId\":\"%s\",\"spanId\":\"%"
	          "s\",",
	          s->node, s->cluster, WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR,
	          WEFT_VERSION_PATCH, trace, id) < 0;
	if (!all_zero(span->parent_span_id, 8))
		rv |= evbuffer_add_printf(out, "\"parentSpanId\":\"%s\",",
		                          parent) < 0;
	rv |=
	    evbuffer_add_printf(
	        out,
	        "\"name\":\"%s\",\"kind\":3,\"startTimeUnixNano\":\"%" PRIu64
	        "\",\"endTimeUnixNano\":\"%" PRIu64 "\",\"attributes\":["
	        "{\"key\":\"rpc.system\",\"value\":{\"stringValue\":\"weft\"}},"
	        "{\"key\":\"rpc.method\",\"value\":{\"stringValue\":\"%s\"}},"
	        "{\"key\":\"weft.verb\",\"value\":{\"intValue\":\"%" PRIu32
	        "\"}},"
	        "{\"key\":\"weft.peer\",\"value\":{\"stringValue\":\"%s\"}},"
	        "{\"key\":\"weft.status\",\"value\":{\"intValue\":\"%d\"}}",
	        name, span->start_unix_ns, span->end_unix_ns, name, span->verb,
	        peer, span->status) < 0;
	if (span->stages != NULL && span->stages->n > 0) {
		rv |= evbuffer_add_printf(
		          out, ",{\"key\":\"weft.stage_us\",\"value\":{"
		               "\"arrayValue\":{\"values\":[") < 0;
		for (uint32_t i = 0;
		     i < span->stages->n && i < WEFT_MSVC_STAGES_MAX; i++)
			rv |= evbuffer_add_printf(
			          out, "%s{\"intValue\":\"%" PRIu64 "\"}",
			          i ? "," : "", span->stages->us[i]) < 0;
		rv |= evbuffer_add_printf(out, "]}}}") < 0;
	}
	/* Status: 1 OK, 2 ERROR with weft's name for it. */
	if (span->status == 0)
		rv |= evbuffer_add_printf(out, "],\"status\":{\"code\":1}") < 0;
	else
		rv |= evbuffer_add_printf(
		          out, "],\"status\":{\"code\":2,\"message\":\"%s\"}",
		          weft_strerror(span->status)) < 0;
	rv |= evbuffer_add_printf(out, "}]}]}]}\n") < 0;
	return rv ? -1 : 0;
}

/* The span hook, on the loop that ended the request. */
static void
on_span(weft_msvc *svc, const weft_msvc_span *span, void *arg)
{
	struct weftd_spans *s = arg;
	struct evbuffer *line = evbuffer_new();

	(void)svc;
	if (line == NULL || format_span(s, span, line) != 0) {
		atomic_fetch_add(&s->dropped, 1);
		goto out;
	}
	pthread_mutex_lock(&s->lock);
	if (evbuffer_get_length(s->pending) + evbuffer_get_length(line) >
	        MAX_PENDING ||
	    evbuffer_add_buffer(s->pending, line) != 0)
		atomic_fetch_add(&s->dropped, 1);
	else
		atomic_fetch_add(&s->written, 1);
	pthread_mutex_unlock(&s->lock);
out:
	if (line != NULL)
		evbuffer_free(line);
}

static int
open_file(struct weftd_spans *s)
{
	int fd = open(s->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);

	if (fd < 0) {
		weft_error("weftd: span_file %s: cannot open: %s", s->path,
		           strerror(errno));
		return WEFT_EIO;
	}
	if (s->fd >= 0)
		close(s->fd);
	s->fd = fd;
	return 0;
}

/* Writes what is pending. Main loop (or the end, when nothing else
 * runs). */
static void
flush_now(struct weftd_spans *s)
{
	struct evbuffer *out = evbuffer_new();
	size_t lost = 0;

	if (out == NULL)
		return;
	pthread_mutex_lock(&s->lock);
	evbuffer_add_buffer(out, s->pending);
	pthread_mutex_unlock(&s->lock);
	while (evbuffer_get_length(out) > 0) {
		if (evbuffer_write(out, s->fd) >= 0 || errno == EINTR)
			continue;
		/* Lost lines: the bytes left, counted as lines. */
		while (evbuffer_get_length(out) > 0) {
			struct evbuffer_ptr nl =
			    evbuffer_search(out, "\n", 1, NULL);

			lost++;
			evbuffer_drain(out, nl.pos < 0
			                        ? evbuffer_get_length(out)
			                        : (size_t)nl.pos + 1);
		}
		atomic_fetch_sub(&s->written, lost);
		atomic_fetch_add(&s->dropped, lost);
		weft_log_limited(&s->log, WEFT_LOG_WARN,
		                 "weftd: span_file %s: write failed (%s); "
		                 "%zu spans dropped",
		                 s->path, strerror(errno), lost);
	}
	evbuffer_free(out);
}

static void
on_flush(weft_timer *t, void *arg)
{
	(void)t;
	flush_now(arg);
}

int
weftd_spans_start(struct weftd *d)
{
	struct weftd_spans *s;
	int rv = WEFT_ENOMEM;

	if (d->set.span_file == NULL || d->set.span_file[0] == '\0')
		return 0;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return WEFT_ENOMEM;
	s->fd = -1;
	s->node = d->id;
	s->cluster = weft_msvc_config_cluster(d->cfg);
	s->log = (weft_log_limit)WEFT_LOG_LIMIT_INIT(10000);
	pthread_mutex_init(&s->lock, NULL);
	if ((s->path = strdup(d->set.span_file)) == NULL ||
	    (s->pending = evbuffer_new()) == NULL ||
	    weft_timer_new(d->main_loop, on_flush, s, &s->flush) != 0)
		goto err;
	if ((rv = open_file(s)) != 0 ||
	    (rv = weft_timer_start(s->flush, FLUSH_MS, FLUSH_MS)) != 0 ||
	    (rv = weft_msvc_on_span(d->svc, on_span, s)) != 0)
		goto err;
	d->spans = s;
	weft_info("weftd: spans of sampled traces to %s (OTLP/JSON lines)",
	          s->path);
	return 0;
err:
	d->spans = s;
	weftd_spans_free(d);
	return rv;
}

void
weftd_spans_reopen(struct weftd *d)
{
	struct weftd_spans *s = d->spans;

	if (s == NULL)
		return;
	flush_now(s);
	if (open_file(s) == 0)
		weft_info("weftd: SIGHUP: span_file %s opened again", s->path);
}

void
weftd_spans_counts(const struct weftd *d, uint64_t *written, uint64_t *dropped)
{
	*written = d->spans ? atomic_load(&d->spans->written) : 0;
	*dropped = d->spans ? atomic_load(&d->spans->dropped) : 0;
}

void
weftd_spans_free(struct weftd *d)
{
	struct weftd_spans *s = d->spans;

	if (s == NULL)
		return;
	if (s->flush != NULL)
		weft_timer_free(s->flush);
	if (s->pending != NULL && s->fd >= 0)
		flush_now(s);
	if (s->fd >= 0)
		close(s->fd);
	if (s->pending != NULL)
		evbuffer_free(s->pending);
	pthread_mutex_destroy(&s->lock);
	free(s->path);
	free(s);
	d->spans = NULL;
}
