/* SPDX-License-Identifier: MIT */
/*
 * tls.c: the TLS context that the [tls] section asks for (<weft/tls.h>),
 * shared by weftd and weft-kv, and weftd's reload on SIGHUP.
 */
#include <stdio.h>
#include <string.h>

#include <weft/tls.h>

#include "weftd_int.h"

/* "FILE:LINE: [tls] key" for key, or mode's line when key was not set. */
static void
where(const weft_msvc_config *cfg, const char *key, char *buf, size_t len)
{
	char at[300];

	weft_msvc_config_where(cfg, "tls", key, at, sizeof(at));
	if (strchr(at, ':') == NULL)
		weft_msvc_config_where(cfg, "tls", "mode", at, sizeof(at));
	snprintf(buf, len, "%s: [tls] %s", at, key);
}

int
weftd_tls_ctx_from_config(const weft_msvc_config *cfg, const char *cert,
                          const char *key, weft_tls_ctx **out, char *err,
                          size_t errlen)
{
	const weft_msvc_tls_config *t = weft_msvc_config_tls(cfg);
	weft_tls_opts opts = {0};
	char at[400];
	int rv;

	*out = NULL;
	if (t->mode == WEFT_MSVC_TLS_NONE)
		return 0;
	opts.cert_file = cert != NULL ? cert : t->cert_file;
	opts.key_file = key != NULL ? key : t->key_file;
	opts.ca_file = t->ca_file;
	if (opts.ca_file == NULL) {
		where(cfg, "ca", at, sizeof(at));
		snprintf(err, errlen,
		         "%s: not set, and mode %s needs it (the cluster's CA "
		         "bundle)",
		         at, t->mode == WEFT_MSVC_TLS_ALL ? "all" : "optional");
		return WEFT_ECONFIG;
	}
	if (t->min_version != NULL &&
	    weft_tls_version_parse(t->min_version, &opts.min_version) != 0) {
		where(cfg, "min_version", at, sizeof(at));
		snprintf(err, errlen, "%s: '%s': want 1.2 or 1.3", at,
		         t->min_version);
		return WEFT_ECONFIG;
	}
	if ((rv = weft_tls_ctx_new(&opts, out)) != 0) {
		/* The file named on the command line, or the section's. */
		where(cfg, cert != NULL ? "mode" : "cert", at, sizeof(at));
		snprintf(err, errlen,
		         "%s: cannot load cert %s, key %s, ca %s: %s (the "
		         "detail is logged above)",
		         at, opts.cert_file ? opts.cert_file : "(none)",
		         opts.key_file ? opts.key_file : "(none)", opts.ca_file,
		         weft_strerror(rv));
		return WEFT_ECONFIG;
	}
	return 0;
}

int
weftd_tls_open(struct weftd *d, char *err, size_t errlen)
{
	return weftd_tls_ctx_from_config(d->cfg, d->tls_cert, d->tls_key,
	                                 &d->tls, err, errlen);
}

void
weftd_tls_reload(struct weftd *d)
{
	int rv;

	if (d->tls == NULL) {
		weft_info("weftd: SIGHUP: TLS is not configured, nothing to "
		          "reload");
		return;
	}
	/* The files are read on the main thread, off the loops. */
	if ((rv = weft_tls_ctx_reload(d->tls)) != 0)
		weft_error("weftd: SIGHUP: TLS reload failed (%s); the "
		           "previous certificate stays in use",
		           weft_strerror(rv));
	else
		weft_info("weftd: SIGHUP: TLS certificate reloaded; new "
		          "connections use it");
}

void
weftd_tls_close(struct weftd *d)
{
	if (d->tls != NULL)
		weft_tls_ctx_unref(d->tls);
	d->tls = NULL;
}
