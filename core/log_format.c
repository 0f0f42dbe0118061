/* SPDX-License-Identifier: MIT */
/*
 * log_format.c: a log record as a line of text, logfmt or JSON, and the
 * journal. Only what passed the level is formatted (weft_logv).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <weft/core.h>

#include "core_int.h"

#ifdef WEFT_HAVE_SYSTEMD
#include <syslog.h>
#include <systemd/sd-journal.h>
#endif

static const char *const level_names[] = {"debug", "info", "warn", "error"};
static const char *const format_names[] = {"text", "logfmt", "json", "journal"};

/* A line being written into a caller's buffer; cap leaves room for the
 * NUL. A piece that does not fit is left out whole. */
struct out {
	char *buf;
	size_t cap, n;
};

static bool
put(struct out *o, size_t end, const char *s, size_t k)
{
	if (o->n + k > end)
		return false;
	memcpy(o->buf + o->n, s, k);
	o->n += k;
	return true;
}

static bool
puts_(struct out *o, const char *s)
{
	return put(o, o->cap, s, strlen(s));
}

/* The message, escaped for a quoted logfmt or JSON value, up to end; a
 * character is written whole or not at all. */
static void
put_escaped(struct out *o, size_t end, const char *msg, bool json)
{
	char unit[8];
	size_t k;

	for (; *msg != '\0'; msg++) {
		unsigned char c = (unsigned char)*msg;

		unit[0] = '\\';
		k = 2;
		if (c == '"' || c == '\\')
			unit[1] = (char)c;
		else if (c == '\n')
			unit[1] = 'n';
		else if (c == '\t')
			unit[1] = 't';
		else if (c == '\r')
			unit[1] = 'r';
		else if (c < 0x20 || c == 0x7f)
			k = (size_t)snprintf(unit, sizeof(unit),
			                     json ? "\\u%04x" : "\\x%02x", c);
		else {
			unit[0] = (char)c;
			k = 1;
		}
		if (!put(o, end, unit, k))
			return;
	}
}

/* 2026-12-05T07:42:05.123+01:00: local time, with its offset. */
static void
format_time(int64_t time_ns, char *buf, size_t len)
{
	time_t sec = (time_t)(time_ns / 1000000000);
	int off, ms = (int)(time_ns % 1000000000 / 1000000);
	struct tm tm;

	localtime_r(&sec, &tm);
	/* Offsets are within a day (glibc: within 25 hours). */
	off = (int)(tm.tm_gmtoff / 60 % (100 * 60));
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03d%c%02d:%02d",
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	         tm.tm_min, tm.tm_sec, ms, off < 0 ? '-' : '+', abs(off) / 60,
	         abs(off) % 60);
}

size_t
weft_log_format_record(const weft_log_record *rec, enum weft_log_format format,
                       char *buf, size_t len)
{
	struct out o = {buf, len > 0 ? len - 1 : 0, 0};
	const char *level = level_names[rec->level & 3];
	char ts[64], head[128];

	if (len == 0)
		return 0;
	format_time(rec->time_ns, ts, sizeof(ts));
	if (format == WEFT_LOG_JSON) {
		snprintf(head, sizeof(head),
		         "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"", ts,
		         level);
		/* The closing quote and brace always fit. */
		if (puts_(&o, head) && o.cap >= o.n + 2) {
			put_escaped(&o, o.cap - 2, rec->message, true);
			puts_(&o, "\"}");
		}
	} else if (format == WEFT_LOG_LOGFMT) {
		snprintf(head, sizeof(head), "ts=%s level=%s msg=\"", ts,
		         level);
		if (puts_(&o, head) && o.cap >= o.n + 1) {
			put_escaped(&o, o.cap - 1, rec->message, false);
			puts_(&o, "\"");
		}
	} else {
		snprintf(head, sizeof(head), "%s weft %s: ", ts, level);
		if (puts_(&o, head))
			put(&o, o.cap, rec->message,
			    strnlen(rec->message, o.cap - o.n));
	}
	buf[o.n] = '\0';
	return o.n;
}

/* Whether stderr is the stream systemd connected to the journal: it
 * says so in $JOURNAL_STREAM, "DEVICE:INODE" (systemd.exec(5)). */
static bool
stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (env == NULL || sscanf(env, "%llu:%llu", &dev, &ino) != 2 ||
	    fstat(STDERR_FILENO, &st) != 0)
		return false;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

int
weft_log_format_parse(const char *name, enum weft_log_format *out)
{
	int i;

	if (name == NULL)
		return WEFT_EINVAL;
	if (strcmp(name, "auto") == 0) {
		*out = weft__log_has_journal() && stderr_is_journal()
		           ? WEFT_LOG_JOURNAL
		           : WEFT_LOG_TEXT;
		return 0;
	}
	for (i = WEFT_LOG_TEXT; i <= WEFT_LOG_JOURNAL; i++) {
		if (strcmp(name, format_names[i]) == 0) {
			*out = (enum weft_log_format)i;
			return 0;
		}
	}
	return WEFT_EINVAL;
}

#ifdef WEFT_HAVE_SYSTEMD
/* sd_journal_send drops the entry and returns 0 when no journald listens
 * (a container, a build host), so its socket is looked for first. */
bool
weft__log_has_journal(void)
{
	return access("/run/systemd/journal/socket", F_OK) == 0;
}

int
weft__log_journal(const weft_log_record *rec)
{
	static const int priorities[] = {LOG_DEBUG, LOG_INFO, LOG_WARNING,
	                                 LOG_ERR};
	char ts[64];

	format_time(rec->time_ns, ts, sizeof(ts));
	/* The journal stamps the entry itself; WEFT_TIME is when it was
	 * logged, for entries that wait in a busy journald's socket. */
	return sd_journal_send("MESSAGE=%s", rec->message, "PRIORITY=%d",
	                       priorities[rec->level & 3], "WEFT_LEVEL=%s",
	                       level_names[rec->level & 3], "WEFT_TIME=%s", ts,
	                       NULL) < 0
	           ? WEFT_EIO
	           : 0;
}
#else
bool
weft__log_has_journal(void)
{
	return false;
}

int
weft__log_journal(const weft_log_record *rec)
{
	(void)rec;
	return WEFT_ENOTSUP;
}
#endif
