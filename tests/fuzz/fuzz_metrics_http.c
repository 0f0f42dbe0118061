/* SPDX-License-Identifier: MIT */
/*
 * fuzz_metrics_http.c: weftd's HTTP endpoint (/metrics, /livez and
 * /readyz: metrics.c and health.c), as a client on the network reaches
 * it: libevent's HTTP server set up exactly as weftd sets it up
 * (weftd_http_new), serving a node's real counters, on 127.0.0.1 port 0.
 * The input is what the client sends; then it closes its side and reads
 * to the end.
 *
 * Every answer must be an HTTP status line; the answer to a HEAD request
 * must not carry a body; the server must neither hang nor hold memory out
 * of proportion to the request.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "fuzz.h"
#include "weftd_int.h"

/* The metrics text of a one-node cluster, and the HTTP around it. */
#define RESPONSE_SLACK (256u << 10)
#define WAIT_MS 5000

struct node {
	weft_loop *loop; /* this thread's: the HTTP server and the client */
	weft_loop_group *group;
	weft_msvc_config *cfg;
	struct weftd d;
	struct evhttp *http;
	uint16_t port;
};

struct client {
	struct bufferevent *bev;
	struct evbuffer *answer;
	bool done;
};

static void
node_start(struct node *n)
{
	struct evhttp_bound_socket *bs;
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	memset(n, 0, sizeof(*n));
	if (weft_loop_new(&n->loop) != 0 ||
	    weft_loop_group_new(1, &n->group) != 0 ||
	    weft_msvc_config_new("fuzz", &n->cfg) != 0 ||
	    weft_msvc_config_add_node(n->cfg, "n1", "127.0.0.1", 0) != 0 ||
	    weft_msvc_new(n->group, n->cfg, "n1", NULL, &n->d.svc) != 0 ||
	    weft_kv_new(n->d.svc, NULL, &n->d.kv) != 0)
		abort();
	n->d.id = "n1";
	n->d.cfg = n->cfg;
	n->d.started_ns = weft_now_ns();
	if ((n->http = weftd_http_new(&n->d, weft_loop_base(n->loop))) ==
	        NULL ||
	    (bs = evhttp_bind_socket_with_handle(n->http, "127.0.0.1", 0)) ==
	        NULL ||
	    getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sa,
	                &len) != 0)
		abort();
	n->port = ntohs(sa.sin_port);
}

static void
node_stop(struct node *n)
{
	evhttp_free(n->http);
	/* The store first: its repair thread uses the service. */
	weft_kv_free(n->d.kv);
	weft_msvc_free(n->d.svc);
	weft_msvc_config_free(n->cfg);
	weft_loop_group_free(n->group);
	weft_loop_free(n->loop);
}

static void
on_read(struct bufferevent *bev, void *arg)
{
	struct client *c = arg;

	evbuffer_add_buffer(c->answer, bufferevent_get_input(bev));
}

/* Everything sent: the client closes its side, as a request's end. */
static void
on_sent(struct bufferevent *bev, void *arg)
{
	(void)arg;
	shutdown(bufferevent_getfd(bev), SHUT_WR);
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
	struct client *c = arg;

	if (what & BEV_EVENT_CONNECTED) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			on_sent(bev, arg);
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		on_read(bev, arg);
		c->done = true;
	}
}

static bool
client_done(void *arg)
{
	return ((struct client *)arg)->done;
}

/* Sends the request, reads the answer to its end; false on a hang. */
static bool
exchange(struct node *n, const uint8_t *data, size_t size, struct client *c)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons(n->port)};

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c->answer = evbuffer_new();
	c->bev = bufferevent_socket_new(weft_loop_base(n->loop), -1,
	                                BEV_OPT_CLOSE_ON_FREE);
	if (c->answer == NULL || c->bev == NULL)
		abort();
	bufferevent_setcb(c->bev, on_read, on_sent, on_event, c);
	bufferevent_write(c->bev, data, size);
	if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&sa,
	                               sizeof(sa)) != 0)
		abort();
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	return weft_loop_run_until(n->loop, client_done, c, WAIT_MS) == 0;
}

/* The answer starts with a status line; after the header block of weftd's
 * own answer to a HEAD request comes nothing, or the next answer. (An
 * answer to a request libevent could not parse is libevent's.) */
static void
check_answer(const uint8_t *req, size_t req_len, struct evbuffer *answer)
{
	size_t len = evbuffer_get_length(answer);
	const char *a = (const char *)evbuffer_pullup(answer, -1);
	struct evbuffer_ptr end;
	size_t v = 5;

	if (len == 0)
		return;
	/* libevent answers in the request's version, whatever it is: also
	 * "HTTP/1.-1" for a minor number too large for an int. */
	if (len < 12 || memcmp(a, "HTTP/", 5) != 0)
		fuzz_fail("an answer without a status line");
	while (v < len && v < 32 && a[v] != ' ' &&
	       ((a[v] >= '0' && a[v] <= '9') || a[v] == '.' || a[v] == '-'))
		v++;
	if (v == 5 || v + 4 > len || a[v] != ' ' || a[v + 1] < '1' ||
	    a[v + 1] > '5')
		fuzz_fail("an answer without a status line");
	if (req_len < 5 || memcmp(req, "HEAD ", 5) != 0 ||
	    (memcmp(a + v + 1, "200", 3) != 0 &&
	     memcmp(a + v + 1, "404", 3) != 0))
		return;
	end = evbuffer_search(answer, "\r\n\r\n", 4, NULL);
	if (end.pos < 0)
		fuzz_fail("an answer without the end of its header");
	end.pos += 4;
	if ((size_t)end.pos < len &&
	    (len - (size_t)end.pos < 5 || memcmp(a + end.pos, "HTTP/", 5) != 0))
		fuzz_fail("the answer to HEAD has a body");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct client c = {0};
	struct node n;

	weft_log_set_level(WEFT_LOG_OFF);
	node_start(&n);
	fuzz_alloc_begin();
	if (!exchange(&n, data, size, &c))
		fuzz_fail("the endpoint neither answered nor closed in %d ms",
		          WAIT_MS);
	if (getenv("FUZZ_TRACE") != NULL) /* the answer, to read a failure */
		fwrite(evbuffer_pullup(c.answer, -1), 1,
		       evbuffer_get_length(c.answer), stderr);
	check_answer(data, size, c.answer);
	bufferevent_free(c.bev);
	evbuffer_free(c.answer);
	fuzz_alloc_end(size + RESPONSE_SLACK / FUZZ_ALLOC_PER_BYTE,
	               "metrics request");
	node_stop(&n);
	return 0;
}
