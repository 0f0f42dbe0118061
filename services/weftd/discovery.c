/* SPDX-License-Identifier: MIT */
/*
 * discovery.c: where weftd's members come from, [cluster] discovery:
 * file (the configuration file, re-read: reload.c), static (the file as
 * it was at start) or dns-srv (SRV records, through the provider of
 * services/discovery). docs/WEFTD.md, "Changing the cluster".
 */
#include <stdlib.h>

#include <weft/discovery.h>

#include "weftd_int.h"

/* The members are known once the first answer is in: the replica may
 * catch up from them (weft_kv_opts.await_members). */
static void
on_answer(void *arg)
{
	struct weftd *d = arg;

	weft_kv_members_known(d->kv);
}

int
weftd_discovery_start(struct weftd *d)
{
	const struct weftd_cluster *c = &d->cluster;
	const char *servers = getenv("WEFT_DNS_SERVERS");
	weft_dns_discovery_opts opts = {
	    .name = c->dns_name,
	    .service = c->dns_service,
	    .servers = servers != NULL ? servers : c->dns_servers,
	    .grace_ms = c->dns_grace_ms,
	    .max_members = c->dns_max_members,
	    .on_answer = on_answer,
	    .arg = d,
	};
	int rv;

	if (c->discovery != WEFTD_DISCOVERY_DNS_SRV)
		return 0;
	if ((rv = weft_dns_discovery_new(d->svc, d->main_loop, &opts,
	                                 &d->dns)) != 0 ||
	    (rv = weft_dns_discovery_start(d->dns)) != 0) {
		weft_error("weftd: %s: cannot start DNS discovery: %s",
		           d->config_path, weft_strerror(rv));
		return rv;
	}
	weft_info("weftd: members from the SRV records of %s.%s",
	          c->dns_service ? c->dns_service : "_weft._tcp", c->dns_name);
	return 0;
}

void
weftd_discovery_stop(struct weftd *d)
{
	weft_dns_discovery_free(d->dns);
	d->dns = NULL;
}
