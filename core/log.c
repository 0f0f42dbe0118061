/* SPDX-License-Identifier: MIT */
/* log.c: leveled logging to stderr or a user sink. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/thread.h>

#include <weft/core.h>

#include "core_int.h"

/* GLOBAL: set once by weft_init() or before loops run, read-only after. */
static weft_log_cb log_sink;
static weft_log_record_cb log_record_sink;
static void *log_sink_arg;
/* GLOBAL: the level and format are atomic so any thread may change them. */
static _Atomic int log_level = -1;
static _Atomic int log_format = -1;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

static int
level_from_env(void)
{
	const char *env = getenv("WEFT_LOG");
	int level;

	/* A library speaks up only when something is wrong: INFO lines are
	 * for programs that ask for them (weftd does), not for every host
	 * program's stderr. */
	if (env == NULL)
		return WEFT_LOG_WARN;
	for (level = WEFT_LOG_DEBUG; level <= WEFT_LOG_ERROR; level++)
		if (strcmp(env, level_names[level]) == 0)
			return level;
	return strcmp(env, "off") == 0 ? WEFT_LOG_OFF : WEFT_LOG_WARN;
}

enum weft_log_level
weft_log_get_level(void)
{
	int level = atomic_load_explicit(&log_level, memory_order_relaxed);

	if (level < 0) {
		level = level_from_env();
		atomic_store_explicit(&log_level, level, memory_order_relaxed);
	}
	return (enum weft_log_level)level;
}

void
weft_log_set_level(enum weft_log_level level)
{
	atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

void
weft_log_set_sink(weft_log_cb cb, void *arg)
{
	log_record_sink = NULL;
	log_sink = cb;
	log_sink_arg = arg;
}

void
weft_log_set_record_sink(weft_log_record_cb cb, void *arg)
{
	log_sink = NULL;
	log_record_sink = cb;
	log_sink_arg = arg;
}

enum weft_log_format
weft_log_get_format(void)
{
	int format = atomic_load_explicit(&log_format, memory_order_relaxed);
	enum weft_log_format f = WEFT_LOG_TEXT;

	if (format < 0) {
		/* An unknown name is TEXT, as an unknown level is WARN. */
		if (weft_log_format_parse(getenv("WEFT_LOG_FORMAT"), &f) != 0 ||
		    (f == WEFT_LOG_JOURNAL && !weft__log_has_journal()))
			f = WEFT_LOG_TEXT;
		format = (int)f;
		atomic_store_explicit(&log_format, format,
		                      memory_order_relaxed);
	}
	return (enum weft_log_format)format;
}

int
weft_log_set_format(enum weft_log_format format)
{
	if ((int)format < WEFT_LOG_TEXT || format > WEFT_LOG_JOURNAL)
		return WEFT_EINVAL;
	if (format == WEFT_LOG_JOURNAL && !weft__log_has_journal())
		return WEFT_ENOTSUP;
	atomic_store_explicit(&log_format, (int)format, memory_order_relaxed);
	return 0;
}

static void
log_to_stderr(const weft_log_record *rec)
{
	enum weft_log_format format = weft_log_get_format();
	char line[2048];

	/* Without a journald to take it, the line goes to stderr rather
	 * than nowhere. */
	if (format == WEFT_LOG_JOURNAL && weft__log_journal(rec) == 0)
		return;
	weft_log_format_record(rec, format, line, sizeof(line));
	/* One fprintf per line: stdio locks the stream, so lines from
	 * different threads do not interleave. */
	fprintf(stderr, "%s\n", line);
}

void
weft_logv(enum weft_log_level level, const char *fmt, va_list ap)
{
	weft_log_record rec = {.level = level};
	char line[1024];
	struct timespec ts;

	/* Nothing is formatted for a level that is not logged. */
	if (level < weft_log_get_level() || level >= WEFT_LOG_OFF)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	if (log_sink != NULL) {
		log_sink(level, line, log_sink_arg);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	rec.time_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	rec.message = line;
	if (log_record_sink != NULL)
		log_record_sink(&rec, log_sink_arg);
	else
		log_to_stderr(&rec);
}

void
weft_log(enum weft_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	weft_logv(level, fmt, ap);
	va_end(ap);
}

/* GLOBAL: the interval of the limits of lines about misbehaving peers. */
static uint64_t peer_interval_ms = WEFT_LOG_PEER_INTERVAL_MS;

void
weft_log_set_peer_interval(uint64_t interval_ms)
{
	__atomic_store_n(&peer_interval_ms, interval_ms, __ATOMIC_RELAXED);
}

uint64_t
weft_log_get_peer_interval(void)
{
	return __atomic_load_n(&peer_interval_ms, __ATOMIC_RELAXED);
}

bool
weft_log_limited(weft_log_limit *lim, enum weft_log_level level,
                 const char *fmt, ...)
{
	uint64_t now = weft_now_ns(), last, interval, dropped;
	char line[1024];
	va_list ap;

	interval = lim->interval_ms == WEFT_LOG_PEER_INTERVAL
	               ? weft_log_get_peer_interval()
	               : lim->interval_ms;
	/* In nanoseconds; an interval past 584 years is forever. */
	interval =
	    interval > UINT64_MAX / 1000000u ? UINT64_MAX : interval * 1000000u;
	last = __atomic_load_n(&lim->last_ns, __ATOMIC_RELAXED);
	/* One thread wins the slot; the others count themselves. The
	 * interval counts from the last line, so a change to it applies at
	 * once. */
	if ((last != 0 && now - last < interval) ||
	    !__atomic_compare_exchange_n(&lim->last_ns, &last, now, false,
	                                 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
		__atomic_fetch_add(&lim->suppressed, 1, __ATOMIC_RELAXED);
		return false;
	}
	dropped = __atomic_exchange_n(&lim->suppressed, 0, __ATOMIC_RELAXED);
	if (level < weft_log_get_level())
		return true;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (dropped == 0)
		weft_log(level, "%s", line);
	else if (last == 0)
		weft_log(level, "%s (and %llu more like it)", line,
		         (unsigned long long)dropped);
	else
		weft_log(level, "%s (and %llu more like it in the last %llu s)",
		         line, (unsigned long long)dropped,
		         (unsigned long long)((now - last + 999999999u) /
		                              1000000000u));
	return true;
}

uint64_t
weft_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
weft_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* GLOBAL: set once by weft_init(), read-only after. */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_status;

static void
init_globals(void)
{
	if (evthread_use_pthreads() != 0)
		init_status = WEFT_ENOMEM;
	(void)weft_log_get_level();
	(void)weft_log_get_format();
}

int
weft_init(void)
{
	pthread_once(&init_once, init_globals);
	return init_status;
}
