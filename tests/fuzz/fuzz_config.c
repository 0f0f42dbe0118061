/* SPDX-License-Identifier: MIT */
/*
 * fuzz_config.c: the cluster configuration file (INI, libinih), as
 * weftd reads it: the messaging service's sections, then weftd's own
 * [weftd] settings and the key-value service's [kv] values.
 *
 * A file that is refused must come with a message naming the file; one
 * that is accepted must hold only valid ids and values within their
 * bounds, survive a copy and validate again.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kv_int.h"
#include "msvc_int.h"
#include "weftd_int.h"

/* What loading accepts is within the bounds a node can live with
 * (docs/WEFTD.md, "Bounds"), its defaults filled in as a service does. */
static void
check_bounds(const weft_msvc_config *copy)
{
	const weft_msvc_limits *l = &copy->limits;
	const uint64_t durations[] = {
	    l->connect_timeout_ms,     l->heartbeat_interval_ms,
	    l->reconnect_min_ms,       l->reconnect_max_ms,
	    l->request_timeout_ms,     l->client_stall_timeout_ms,
	    l->client_idle_timeout_ms, l->frame_timeout_ms};
	size_t i;

	if (copy->nodes_len > WEFT__MSVC_MAX_NODES)
		fuzz_fail("%zu members accepted", copy->nodes_len);
	if (l->worker_threads < 1 ||
	    l->worker_threads > WEFT__MSVC_MAX_WORKERS ||
	    l->loops > WEFT__MSVC_MAX_LOOPS || l->max_pending_requests < 1)
		fuzz_fail("threads or pending requests out of bounds: %u "
		          "workers, %u loops, %u pending",
		          l->worker_threads, l->loops, l->max_pending_requests);
	if (l->outbound_queue_bytes < l->large_message_bytes ||
	    l->client_outbound_bytes < l->large_message_bytes ||
	    l->large_message_bytes > l->max_frame_bytes)
		fuzz_fail("queues below a small message accepted");
	for (i = 0; i < sizeof(durations) / sizeof(durations[0]); i++)
		if (durations[i] < 1 || durations[i] > WEFT_MSVC_CONF_DAY_MS)
			fuzz_fail("a duration of %llu ms accepted",
			          (unsigned long long)durations[i]);
}

static void
check_accepted(weft_msvc_config *cfg)
{
	struct weftd d = {.config_path = "fuzz.ini", .cfg = cfg};
	enum weft_log_level level = weft_log_get_level();
	struct weft__kv_settings kv;
	weft_msvc_config *copy;
	char err[512];
	size_t i;

	for (i = 0; i < cfg->nodes_len; i++)
		if (!weft__msvc_id_is_valid(cfg->nodes[i].id))
			fuzz_fail("node %zu has an invalid id", i);
	if (weft__msvc_config_validate(cfg, err, sizeof(err)) != 0)
		fuzz_fail("an accepted config fails validation: %s", err);
	if (weft__msvc_config_copy(cfg, &copy) != 0)
		abort();
	if (copy->nodes_len != cfg->nodes_len ||
	    strcmp(copy->cluster, cfg->cluster) != 0)
		fuzz_fail("a config copy differs");
	check_bounds(copy);
	weft_msvc_config_free(copy);
	/* weftd's section; a log_level in it must not outlive the input. */
	if (weftd_settings_load(&d, err, sizeof(err)) != 0 &&
	    strnlen(err, sizeof(err)) == 0)
		fuzz_fail("[weftd] refused without a message");
	weft_log_set_level(level);
	/* [kv], read as the key-value service reads it. */
	if (weft__kv_settings_read(cfg, (uint32_t)cfg->nodes_len, &kv, err,
	                           sizeof(err)) == 0) {
		if (kv.write_quorum < 1 || kv.write_quorum > cfg->nodes_len)
			fuzz_fail("write_quorum %u of %zu members",
			          kv.write_quorum, cfg->nodes_len);
	} else if (strnlen(err, sizeof(err)) == 0) {
		fuzz_fail("[kv] refused without a message");
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	weft_msvc_config *cfg = NULL;
	char err[256] = "";
	char *text;
	int rv;

	if ((text = malloc(size + 1)) == NULL)
		abort();
	if (size > 0)
		memcpy(text, data, size);
	text[size] = '\0';
	weft_log_set_level(WEFT_LOG_OFF);
	fuzz_alloc_begin();
	rv = weft_msvc_config_parse(text, "fuzz.ini", &cfg, err, sizeof(err));
	if (rv == 0)
		check_accepted(cfg);
	else if (rv != WEFT_ECONFIG && rv != WEFT_ENOMEM)
		fuzz_fail("weft_msvc_config_parse returned %d", rv);
	else if (err[0] == '\0' || strnlen(err, sizeof(err)) == sizeof(err))
		fuzz_fail("a refused config has no message");
	else if (strncmp(err, "fuzz.ini", 8) != 0)
		fuzz_fail("a refusal does not name the file: %s", err);
	weft_msvc_config_free(cfg);
	fuzz_alloc_end(size, "config");
	free(text);
	return 0;
}
