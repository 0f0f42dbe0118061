/*
 * tls.c: weftd's TLS context. The [tls] section is parsed by the messaging
 * service; the context itself comes from <weft/tls.h>, which this build
 * does not have yet: a node configured for TLS refuses to start, and
 * SIGHUP only says that there is nothing to reload.
 * TODO: weft_tls_ctx from the [tls] files and its reload, once
 * <weft/tls.h> lands.
 */
#include "weftd_int.h"

int
weftd_tls_open(struct weftd *d)
{
	const weft_msvc_tls_config *tls = weft_msvc_config_tls(d->cfg);

	d->tls = NULL;
	if (tls->mode == WEFT_MSVC_TLS_NONE)
		return 0;
	weft_error("weftd: %s: [tls] mode asks for TLS, which this build "
	           "of weftd does not support yet",
	           d->config_path);
	return WEFT_ENOTSUP;
}

void
weftd_tls_reload(struct weftd *d)
{
	(void)d;
	weft_warn("weftd: SIGHUP: TLS reload not available");
}

void
weftd_tls_close(struct weftd *d)
{
	d->tls = NULL;
}
