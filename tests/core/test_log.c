/* SPDX-License-Identifier: MIT */
/* test_log.c: error codes and the log sink. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <weft/core.h>

static void
test_every_code_has_a_distinct_name_and_message(void **state)
{
	static const int codes[] = {
#define CODE(name, value, msg) WEFT_##name,
	    WEFT_ERRNO_MAP(CODE)
#undef CODE
	};
	size_t i, j, n = sizeof(codes) / sizeof(codes[0]);

	(void)state;
	for (i = 0; i < n; i++) {
		assert_true(codes[i] < 0);
		assert_string_not_equal(weft_strerror(codes[i]),
		                        "unknown error");
		for (j = i + 1; j < n; j++) {
			assert_int_not_equal(codes[i], codes[j]);
			assert_string_not_equal(weft_errname(codes[i]),
			                        weft_errname(codes[j]));
		}
	}
	assert_string_equal(weft_strerror(0), "success");
	assert_string_equal(weft_strerror(12345), "unknown error");
	assert_string_equal(weft_errname(WEFT_EPROTO), "EPROTO");
	assert_int_equal(weft_from_errno(ECONNREFUSED), WEFT_ECONNREFUSED);
	assert_int_equal(weft_from_errno(ENOMEM), WEFT_ENOMEM);
	assert_int_equal(weft_from_errno(EPIPE), WEFT_ECLOSED);
	assert_int_equal(weft_from_errno(0), 0);
}

struct captured {
	int calls;
	enum weft_log_level level;
	char line[256];
};

static void
capture(enum weft_log_level level, const char *line, void *arg)
{
	struct captured *c = arg;

	c->calls++;
	c->level = level;
	strncpy(c->line, line, sizeof(c->line) - 1);
}

static void
test_sink_receives_lines_at_or_above_the_level(void **state)
{
	struct captured c;

	(void)state;
	memset(&c, 0, sizeof(c));
	weft_log_set_sink(capture, &c);
	weft_log_set_level(WEFT_LOG_WARN);
	weft_info("dropped %d", 1);
	weft_debug("dropped %d", 2);
	assert_int_equal(c.calls, 0);
	weft_warn("kept %d", 3);
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.level, WEFT_LOG_WARN);
	assert_string_equal(c.line, "kept 3");
	weft_log_set_level(WEFT_LOG_OFF);
	weft_error("dropped");
	assert_int_equal(c.calls, 1);
	weft_log_set_level(WEFT_LOG_INFO);
	weft_log_set_sink(NULL, NULL);
}

/* A burst of the same line is one line; the next one that gets through
 * says how many were dropped. */
static void
test_limited_lines_are_counted_not_repeated(void **state)
{
	weft_log_limit lim = WEFT_LOG_LIMIT_INIT(60000);
	struct captured c = {0};
	int i, emitted = 0;

	(void)state;
	weft_log_set_sink(capture, &c);
	weft_log_set_level(WEFT_LOG_INFO);
	for (i = 0; i < 100; i++)
		emitted +=
		    weft_log_limited(&lim, WEFT_LOG_WARN, "bad peer %d", i);
	assert_int_equal(emitted, 1);
	assert_int_equal(c.calls, 1);
	assert_string_equal(c.line, "bad peer 0");
	/* The interval is over (as if a minute had passed). */
	lim.last_ns = 0;
	assert_true(weft_log_limited(&lim, WEFT_LOG_WARN, "bad peer %d", 100));
	assert_int_equal(c.calls, 2);
	assert_non_null(strstr(c.line, "bad peer 100 (and 99 more like it"));
	/* Nothing dropped since: a plain line. */
	lim.last_ns = 0;
	assert_true(weft_log_limited(&lim, WEFT_LOG_WARN, "calm"));
	assert_string_equal(c.line, "calm");
	weft_log_set_sink(NULL, NULL);
}

/* Runs first, before anything has read the level: a library must not
 * print INFO lines into the stderr of the program that uses it. */
static void
test_default_level_is_warn_without_weft_log(void **state)
{
	(void)state;
	assert_int_equal(weft_log_get_level(), WEFT_LOG_WARN);
	assert_false(WEFT_LOG_ENABLED(WEFT_LOG_INFO));
	assert_true(WEFT_LOG_ENABLED(WEFT_LOG_WARN));
}

/* 2026-12-05T07:42:05.123Z */
#define WHEN_NS (1796456525 * 1000000000LL + 123456789)

static void
set_tz(const char *tz)
{
	setenv("TZ", tz, 1);
	tzset();
}

/* Read first, before anything set the format: main sets the variable. */
static void
test_format_comes_from_weft_log_format(void **state)
{
	enum weft_log_format f;

	(void)state;
	assert_int_equal(weft_log_get_format(), WEFT_LOG_JSON);
	assert_int_equal(weft_log_format_parse("logfmt", &f), 0);
	assert_int_equal(f, WEFT_LOG_LOGFMT);
	assert_int_equal(weft_log_format_parse("yaml", &f), WEFT_EINVAL);
	/* auto is the journal only under systemd's journal stream. */
	unsetenv("JOURNAL_STREAM");
	assert_int_equal(weft_log_format_parse("auto", &f), 0);
	assert_int_equal(f, WEFT_LOG_TEXT);
	assert_int_equal(weft_log_set_format(WEFT_LOG_TEXT), 0);
	assert_int_equal(weft_log_get_format(), WEFT_LOG_TEXT);
}

struct records {
	int calls;
	weft_log_record last;
	char message[256];
};

static void
capture_record(const weft_log_record *rec, void *arg)
{
	struct records *r = arg;

	r->calls++;
	r->last = *rec;
	snprintf(r->message, sizeof(r->message), "%s", rec->message);
	r->last.message = r->message;
}

static int64_t
wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
test_record_sink_gets_the_fields(void **state)
{
	struct records r = {0};
	int64_t before, after;

	(void)state;
	weft_log_set_record_sink(capture_record, &r);
	weft_log_set_level(WEFT_LOG_WARN);
	weft_info("dropped");
	assert_int_equal(r.calls, 0);
	before = wall_ns();
	weft_error("kept %d", 7);
	after = wall_ns();
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.last.level, WEFT_LOG_ERROR);
	assert_string_equal(r.last.message, "kept 7");
	assert_true(r.last.time_ns >= before && r.last.time_ns <= after);
	/* The old sink replaces it, and the other way round. */
	{
		struct captured c = {0};

		weft_log_set_sink(capture, &c);
		weft_warn("old");
		assert_int_equal(c.calls, 1);
		assert_int_equal(r.calls, 1);
	}
	weft_log_set_sink(NULL, NULL);
}

static void
test_text_has_date_time_and_zone(void **state)
{
	weft_log_record rec = {WEFT_LOG_WARN, WHEN_NS, "disk 90% full"};
	char line[256];

	(void)state;
	set_tz("UTC0");
	weft_log_format_record(&rec, WEFT_LOG_TEXT, line, sizeof(line));
	assert_string_equal(line, "2026-12-05T07:42:05.123+00:00 weft warn: "
	                          "disk 90% full");
	set_tz("EST5");
	weft_log_format_record(&rec, WEFT_LOG_TEXT, line, sizeof(line));
	assert_string_equal(line, "2026-12-05T02:42:05.123-05:00 weft warn: "
	                          "disk 90% full");
	set_tz("IST-5:30");
	weft_log_format_record(&rec, WEFT_LOG_TEXT, line, sizeof(line));
	assert_string_equal(line, "2026-12-05T13:12:05.123+05:30 weft warn: "
	                          "disk 90% full");
	set_tz("UTC0");
}

/* Reads a quoted value at *p (logfmt's and JSON's escapes) into out;
 * returns false on anything malformed. */
static bool
read_quoted(const char **p, char *out, size_t cap, bool json)
{
	const char *s = *p;
	size_t n = 0;
	unsigned v;

	if (*s++ != '"')
		return false;
	while (*s != '"') {
		char c = *s++;

		if (c == '\0' || (unsigned char)c < 0x20 || n + 1 >= cap)
			return false;
		if (c == '\\') {
			c = *s++;
			if (c == 'n')
				c = '\n';
			else if (c == 't')
				c = '\t';
			else if (c == 'r')
				c = '\r';
			else if (json && c == 'u' &&
			         sscanf(s, "%4x", &v) == 1) {
				c = (char)v;
				s += 4;
			} else if (!json && c == 'x' &&
			           sscanf(s, "%2x", &v) == 1) {
				c = (char)v;
				s += 2;
			} else if (c != '"' && c != '\\')
				return false;
		}
		out[n++] = c;
	}
	out[n] = '\0';
	*p = s + 1;
	return true;
}

/* A JSON object of string values only, in this order: ts, level, msg.
 * Anything else (another key, a missing comma, a trailing byte) fails. */
static void
parse_json(const char *line, char *ts, char *level, char *msg, size_t cap)
{
	static const char *const keys[] = {"ts", "level", "msg"};
	char *vals[] = {ts, level, msg}, key[16];
	const char *p = line;
	int i;

	assert_int_equal(*p++, '{');
	for (i = 0; i < 3; i++) {
		if (i > 0)
			assert_int_equal(*p++, ',');
		assert_true(read_quoted(&p, key, sizeof(key), true));
		assert_string_equal(key, keys[i]);
		assert_int_equal(*p++, ':');
		assert_true(read_quoted(&p, vals[i], cap, true));
	}
	assert_int_equal(*p++, '}');
	assert_int_equal(*p, '\0');
}

/* key=value pairs, space-separated; the msg value quoted. */
static void
parse_logfmt(const char *line, char *ts, char *level, char *msg, size_t cap)
{
	const char *p = line, *sp;

	assert_int_equal(strncmp(p, "ts=", 3), 0);
	sp = strchr(p += 3, ' ');
	assert_non_null(sp);
	snprintf(ts, cap, "%.*s", (int)(sp - p), p);
	p = sp + 1;
	assert_int_equal(strncmp(p, "level=", 6), 0);
	sp = strchr(p += 6, ' ');
	assert_non_null(sp);
	snprintf(level, cap, "%.*s", (int)(sp - p), p);
	p = sp + 1;
	assert_int_equal(strncmp(p, "msg=", 4), 0);
	p += 4;
	assert_true(read_quoted(&p, msg, cap, false));
	assert_int_equal(*p, '\0');
}

static const char tricky[] = "peer \"n2\" said: a=b\\c\nnext\tline\x01 é";

static void
test_logfmt_and_json_parse_back(void **state)
{
	weft_log_record rec = {WEFT_LOG_INFO, WHEN_NS, tricky};
	char line[512], ts[128], level[16], msg[256];

	(void)state;
	set_tz("UTC0");
	weft_log_format_record(&rec, WEFT_LOG_JSON, line, sizeof(line));
	parse_json(line, ts, level, msg, sizeof(msg));
	assert_string_equal(ts, "2026-12-05T07:42:05.123+00:00");
	assert_string_equal(level, "info");
	assert_string_equal(msg, tricky);
	assert_null(strchr(line, '\n'));
	weft_log_format_record(&rec, WEFT_LOG_LOGFMT, line, sizeof(line));
	parse_logfmt(line, ts, level, msg, sizeof(msg));
	assert_string_equal(ts, "2026-12-05T07:42:05.123+00:00");
	assert_string_equal(level, "info");
	assert_string_equal(msg, tricky);
	assert_null(strchr(line, '\n'));
}

/* A message longer than the line is cut, and the line stays whole. */
static void
test_a_cut_line_still_parses(void **state)
{
	char big[1000], line[200], ts[128], level[16], msg[256];
	weft_log_record rec = {WEFT_LOG_ERROR, WHEN_NS, big};
	size_t n, cap;

	(void)state;
	memset(big, '"', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	/* The fields before the message take 58 bytes. */
	for (cap = 64; cap <= sizeof(line); cap += 7) {
		n = weft_log_format_record(&rec, WEFT_LOG_JSON, line, cap);
		assert_true(n < cap);
		assert_int_equal(strlen(line), n);
		parse_json(line, ts, level, msg, sizeof(msg));
		assert_string_equal(level, "error");
		n = weft_log_format_record(&rec, WEFT_LOG_LOGFMT, line, cap);
		assert_true(n < cap);
		parse_logfmt(line, ts, level, msg, sizeof(msg));
	}
}

/* Standard error into a file, until stderr_end reads it into text. */
struct stderr_capture {
	int fd, saved;
};

static void
stderr_begin(struct stderr_capture *c)
{
	char path[] = "/tmp/weft-log-XXXXXX";

	assert_true((c->fd = mkstemp(path)) >= 0);
	unlink(path);
	fflush(stderr);
	c->saved = dup(STDERR_FILENO);
	assert_true(c->saved >= 0);
	dup2(c->fd, STDERR_FILENO);
}

static void
stderr_end(struct stderr_capture *c, char *text, size_t cap)
{
	ssize_t n;

	fflush(stderr);
	dup2(c->saved, STDERR_FILENO);
	close(c->saved);
	n = pread(c->fd, text, cap - 1, 0);
	close(c->fd);
	assert_true(n >= 0);
	text[n] = '\0';
}

/* The stderr sink writes one line per message in the format set. */
static void
test_stderr_sink_writes_the_format(void **state)
{
	char text[1024], ts[128], level[16], msg[256];
	struct stderr_capture cap;

	(void)state;
	stderr_begin(&cap);
	weft_log_set_level(WEFT_LOG_INFO);
	assert_int_equal(weft_log_set_format(WEFT_LOG_JSON), 0);
	weft_warn("one %s", "\"two\"");
	assert_int_equal(weft_log_set_format(WEFT_LOG_LOGFMT), 0);
	weft_info("three");
	weft_debug("not formatted");
	stderr_end(&cap, text, sizeof(text));
	weft_log_set_format(WEFT_LOG_TEXT);
	assert_non_null(strchr(text, '\n'));
	*strchr(text, '\n') = '\0';
	parse_json(text, ts, level, msg, sizeof(msg));
	assert_string_equal(level, "warn");
	assert_string_equal(msg, "one \"two\"");
	{
		char *second = text + strlen(text) + 1;

		assert_non_null(strchr(second, '\n'));
		*strchr(second, '\n') = '\0';
		parse_logfmt(second, ts, level, msg, sizeof(msg));
		assert_string_equal(level, "info");
		assert_string_equal(msg, "three");
		assert_string_equal(second + strlen(second) + 1, "");
	}
}

/* The journal format needs a journald: sd_journal_send drops entries
 * silently without one (a container, a build host), so the format is
 * refused there and the lines stay on stderr. */
static void
test_journal_only_with_a_journald(void **state)
{
	struct stderr_capture cap;
	char text[512];
	int rv;

	(void)state;
	assert_int_equal(weft_log_set_format(WEFT_LOG_TEXT), 0);
	rv = weft_log_set_format(WEFT_LOG_JOURNAL);
	if (access("/run/systemd/journal/socket", F_OK) != 0) {
		assert_int_equal(rv, WEFT_ENOTSUP);
		assert_int_equal(weft_log_get_format(), WEFT_LOG_TEXT);
		stderr_begin(&cap);
		weft_warn("not lost");
		stderr_end(&cap, text, sizeof(text));
		assert_non_null(strstr(text, " weft warn: not lost\n"));
		return;
	}
	if (rv == WEFT_ENOTSUP)
		skip(); /* built without libsystemd */
	assert_int_equal(rv, 0);
	assert_int_equal(weft_log_get_format(), WEFT_LOG_JOURNAL);
	/* To the journal, not to stderr. */
	stderr_begin(&cap);
	weft_warn("test_log: to the journal");
	stderr_end(&cap, text, sizeof(text));
	weft_log_set_format(WEFT_LOG_TEXT);
	assert_string_equal(text, "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_default_level_is_warn_without_weft_log),
	    cmocka_unit_test(test_format_comes_from_weft_log_format),
	    cmocka_unit_test(test_record_sink_gets_the_fields),
	    cmocka_unit_test(test_text_has_date_time_and_zone),
	    cmocka_unit_test(test_logfmt_and_json_parse_back),
	    cmocka_unit_test(test_a_cut_line_still_parses),
	    cmocka_unit_test(test_stderr_sink_writes_the_format),
	    cmocka_unit_test(test_journal_only_with_a_journald),
	    cmocka_unit_test(test_every_code_has_a_distinct_name_and_message),
	    cmocka_unit_test(test_sink_receives_lines_at_or_above_the_level),
	    cmocka_unit_test(test_limited_lines_are_counted_not_repeated),
	};

	unsetenv("WEFT_LOG");
	setenv("WEFT_LOG_FORMAT", "json", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
