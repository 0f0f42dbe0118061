/*
 * tls_stub.c: the TLS hooks for a build without transport/tls.c. Every TLS
 * request fails with WEFT_ENOTSUP. transport/CMakeLists.txt compiles this
 * file only when tls.c is absent, so tls.c replaces it without an edit
 * here.
 */
#include <unistd.h>

#include "transport_int.h"

int
weft__tls_bev_accept(struct weft_tls_ctx *tls, int mode,
                     struct event_base *base, evutil_socket_t fd,
                     uint64_t timeout_ms, weft__tls_accept_cb cb, void *arg,
                     struct bufferevent **out)
{
	(void)tls;
	(void)mode;
	(void)base;
	(void)timeout_ms;
	(void)cb;
	(void)arg;
	(void)out;
	close(fd);
	weft_warn("TLS accept: this build has no TLS");
	return WEFT_ENOTSUP;
}

int
weft__tls_bev_connect(struct weft_tls_ctx *tls, struct event_base *base,
                      evutil_socket_t fd, const char *server_name,
                      struct bufferevent **out)
{
	(void)tls;
	(void)base;
	(void)server_name;
	(void)out;
	close(fd);
	weft_warn("TLS connect: this build has no TLS");
	return WEFT_ENOTSUP;
}
