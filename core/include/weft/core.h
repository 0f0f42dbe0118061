/* SPDX-License-Identifier: MIT */
/* weft/core.h: library set-up, error codes and logging. */
#ifndef WEFT_CORE_H
#define WEFT_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of these headers. A release x.y.z follows semantic versioning
 * (docs/STABILITY.md): before 1.0 every minor release may change the API
 * and the ABI, and the shared library's SONAME changes with it
 * (libweft.so.0.MINOR); from 1.0 on, only a major release does (SONAME
 * libweft.so.MAJOR). The build reads these three lines, so they are the one
 * place the version is written.
 */
#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0

#define WEFT__STRINGIFY(x) #x
#define WEFT__VERSION_TEXT(a, b, c)                                            \
	WEFT__STRINGIFY(a) "." WEFT__STRINGIFY(b) "." WEFT__STRINGIFY(c)
/* "0.1.0" */
#define WEFT_VERSION_STRING                                                    \
	WEFT__VERSION_TEXT(WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR,             \
	                   WEFT_VERSION_PATCH)
/* 0x00MMmmpp: one number to compare, as OPENSSL_VERSION_NUMBER. */
#define WEFT_VERSION_NUMBER                                                    \
	((WEFT_VERSION_MAJOR << 16) | (WEFT_VERSION_MINOR << 8) |              \
	 WEFT_VERSION_PATCH)

#if defined(__GNUC__)
#define WEFT_API __attribute__((visibility("default")))
#define WEFT_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define WEFT_API
#define WEFT_PRINTF(fmt, args)
#endif

/*
 * Every error weft reports, as X(NAME, value, message). Functions return 0 or
 * one of these negative codes; weft_strerror() names it.
 */
#define WEFT_ERRNO_MAP(X)                                                      \
	X(ENOMEM, -1, "out of memory")                                         \
	X(EINVAL, -2, "invalid argument")                                      \
	X(ECLOSED, -3, "channel closed")                                       \
	X(ETIMEDOUT, -4, "timed out")                                          \
	X(ESHUTDOWN, -5, "shut down")                                          \
	X(EOVERLOAD, -6, "overloaded")                                         \
	X(EPROTO, -7, "protocol error")                                        \
	X(ETOOBIG, -8, "message too large")                                    \
	X(EIO, -9, "I/O error")                                                \
	X(ECONNREFUSED, -10, "connection refused")                             \
	X(EADDRINUSE, -11, "address in use")                                   \
	X(EADDR, -12, "bad or unresolvable address")                           \
	X(EPEERDOWN, -13, "peer down")                                         \
	X(EEXPIRED, -14, "expired")                                            \
	X(EUNKNOWNVERB, -15, "unknown verb")                                   \
	X(ETLS, -16, "TLS error")                                              \
	X(ECHECKSUM, -17, "checksum mismatch")                                 \
	X(ECANCELED, -18, "canceled")                                          \
	X(EAUTH, -19, "authentication failed")                                 \
	X(ECONFIG, -20, "invalid configuration")                               \
	X(ENOTSUP, -21, "not supported")                                       \
	X(EEXIST, -22, "already exists")                                       \
	X(ENOTFOUND, -23, "not found")                                         \
	X(EBUSY, -24, "busy")                                                  \
	X(EREMOTE, -25, "remote error")                                        \
	X(EPERM, -26, "not permitted")                                         \
	X(ECONFLICT, -27, "superseded by a newer version")                     \
	X(ENOTMEMBER, -28, "not a member of the cluster")

enum weft_errno {
#define WEFT__ERRNO_ENUM(name, value, msg) WEFT_##name = (value),
	WEFT_ERRNO_MAP(WEFT__ERRNO_ENUM)
#undef WEFT__ERRNO_ENUM
};

/*
 * weft_version is the version of the library the program runs with, as
 * WEFT_VERSION_STRING was when it was built: it differs from the headers'
 * when a program built against one release loads another. A constant
 * string. Any thread.
 */
WEFT_API const char *weft_version(void);
/* weft_version_number is the running library's WEFT_VERSION_NUMBER. Any
 * thread. */
WEFT_API unsigned weft_version_number(void);

/* weft_strerror names a WEFT_E code (or 0). Returns a constant string, never
 * NULL. Any thread. */
WEFT_API const char *weft_strerror(int err);

/* weft_errname returns the code's symbolic name ("EPROTO"). Any thread. */
WEFT_API const char *weft_errname(int err);

/* weft_from_errno translates a positive errno value into a WEFT_E code.
 * Returns the code: 0 for 0, WEFT_EIO for an errno without a code of its
 * own. Any thread. */
WEFT_API int weft_from_errno(int errnum);

/*
 * weft_init sets up libevent for threads. It changes no signal
 * disposition: weft writes to sockets with MSG_NOSIGNAL, so a peer that
 * went away is an error, never a SIGPIPE (the one exception, kernel TLS,
 * is opt-in and says so in <weft/tls.h>). It is idempotent and
 * thread-safe; every constructor calls it, so calling it yourself is
 * optional. Returns 0 or WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_init(void);

enum weft_log_level {
	WEFT_LOG_DEBUG = 0,
	WEFT_LOG_INFO = 1,
	WEFT_LOG_WARN = 2,
	WEFT_LOG_ERROR = 3,
	WEFT_LOG_OFF = 4,
};

/* A log sink: called with a formatted line (no trailing newline). */
typedef void (*weft_log_cb)(enum weft_log_level level, const char *line,
                            void *arg);

/*
 * weft_log_set_sink replaces the stderr sink (NULL restores it). Set it once,
 * before any loop runs. The sink may be called from any loop thread at once.
 */
WEFT_API void weft_log_set_sink(weft_log_cb cb, void *arg);

/*
 * One log message, as a record sink receives it: its fields, not a line.
 * time_ns is the wall clock (CLOCK_REALTIME) in nanoseconds since the
 * epoch; message has no trailing newline. Borrowed for the call.
 */
typedef struct weft_log_record {
	enum weft_log_level level;
	int64_t time_ns;
	const char *message;
} weft_log_record;

/* A record sink: called with each message at or above the level. */
typedef void (*weft_log_record_cb)(const weft_log_record *rec, void *arg);

/*
 * weft_log_set_record_sink replaces the stderr sink with cb (NULL restores
 * it), as weft_log_set_sink does, and replaces that one too: the last set
 * of the two is the one called. Set it once, before any loop runs. The sink
 * may be called from any loop thread at once.
 */
WEFT_API void weft_log_set_record_sink(weft_log_record_cb cb, void *arg);

/*
 * How the stderr sink writes a record (weft_log_format_record):
 *   TEXT    2026-12-05T07:42:05.123+01:00 weft warn: message
 *   LOGFMT  ts=2026-12-05T07:42:05.123+01:00 level=warn msg="message"
 *   JSON    {"ts":"2026-12-05T07:42:05.123+01:00","level":"warn",
 *           "msg":"message"}, one object per line
 *   JOURNAL to the systemd journal (sd_journal_send: MESSAGE, PRIORITY,
 *           WEFT_LEVEL, WEFT_TIME), when weft is built with libsystemd and
 *           a journald listens; a line it fails to take goes out as TEXT
 * The time is local, with its offset from UTC.
 */
enum weft_log_format {
	WEFT_LOG_TEXT = 0,
	WEFT_LOG_LOGFMT = 1,
	WEFT_LOG_JSON = 2,
	WEFT_LOG_JOURNAL = 3,
};

/*
 * weft_log_format_parse reads "text", "logfmt", "json", "journal" or
 * "auto" (JOURNAL when stderr is the journal's stream, $JOURNAL_STREAM,
 * and weft has libsystemd; TEXT otherwise) into *out. Returns 0 or
 * WEFT_EINVAL. Any thread.
 */
WEFT_API int weft_log_format_parse(const char *name, enum weft_log_format *out);

/*
 * weft_log_set_format sets the stderr sink's format. The default is read
 * from the WEFT_LOG_FORMAT environment variable (the names above), else
 * TEXT. Returns 0, or WEFT_ENOTSUP for JOURNAL without libsystemd or
 * without a journald (/run/systemd/journal/socket); the format is then
 * unchanged. weft_log_get_format returns the format in use. Any thread.
 */
WEFT_API int weft_log_set_format(enum weft_log_format format);
WEFT_API enum weft_log_format weft_log_get_format(void);

/*
 * weft_log_format_record writes rec as one line of format (TEXT, LOGFMT
 * or JSON), without a newline, into buf (len bytes, always NUL-terminated
 * when len > 0). A message too long is cut between characters, so that
 * the line stays whole (a JSON line one valid object); the fields before
 * it take under 64 bytes. Returns the length written. Any thread.
 */
WEFT_API size_t weft_log_format_record(const weft_log_record *rec,
                                       enum weft_log_format format, char *buf,
                                       size_t len);

/*
 * weft_log_set_level drops messages below level. Any thread. The default is
 * WEFT_LOG_WARN, so a program that uses weft sees only warnings and errors
 * on its stderr unless it asks for more; the WEFT_LOG environment variable
 * (debug, info, warn, error, off) sets the starting level instead.
 */
WEFT_API void weft_log_set_level(enum weft_log_level level);
/* weft_log_get_level returns the level below which messages are dropped.
 * Any thread. */
WEFT_API enum weft_log_level weft_log_get_level(void);

/* weft_log formats and emits one line. Any thread. */
WEFT_API void weft_log(enum weft_log_level level, const char *fmt, ...)
    WEFT_PRINTF(2, 3);
WEFT_API void weft_logv(enum weft_log_level level, const char *fmt, va_list ap);

/*
 * A rate limit for one kind of log line (say, "closing a bad
 * connection"): weft_log_limited lets at most one line through per
 * interval, counts the ones it drops, and adds their number to the next
 * line that gets through ("... (and 41 more like it in the last 10 s)").
 * Embed one per kind of line in the object that logs it, initialised with
 * WEFT_LOG_LIMIT_INIT; its fields are the library's. Any thread.
 */
typedef struct weft_log_limit {
	uint64_t interval_ms; /* or WEFT_LOG_PEER_INTERVAL */
	uint64_t last_ns;     /* when the last line went (0: none yet) */
	uint64_t suppressed;  /* lines dropped since the last one */
} weft_log_limit;

#define WEFT_LOG_LIMIT_INIT(interval_ms)                                       \
	{                                                                      \
		(interval_ms), 0, 0                                            \
	}

/*
 * The lines weft logs about a peer that misbehaves (a codec closing a
 * channel on bad input, a TLS record that fails to decrypt, the error
 * that then reaches the tail of a pipeline with no error handler) go through
 * process-wide limits, one per kind of line, whose interval is the peer
 * interval: a limit initialised with WEFT_LOG_PEER_INTERVAL follows it.
 * So a thousand hostile connections log a line per interval, not a line
 * each. weft_log_set_peer_interval sets it in milliseconds (default
 * WEFT_LOG_PEER_INTERVAL_MS; 0 logs every line, for tests that look for
 * each). A change applies from the next line on. Any thread.
 */
#define WEFT_LOG_PEER_INTERVAL UINT64_MAX
#define WEFT_LOG_PEER_INTERVAL_MS 1000
/* weft_log_set_peer_interval sets the peer interval above and
 * weft_log_get_peer_interval returns it, in milliseconds. Any thread. */
WEFT_API void weft_log_set_peer_interval(uint64_t interval_ms);
WEFT_API uint64_t weft_log_get_peer_interval(void);

/* weft_log_limited is weft_log through lim. Returns true when the line
 * was emitted (or would have been, below the log level). */
WEFT_API bool weft_log_limited(weft_log_limit *lim, enum weft_log_level level,
                               const char *fmt, ...) WEFT_PRINTF(3, 4);

#define WEFT_LOG_ENABLED(level) ((level) >= weft_log_get_level())
#define weft_debug(...)                                                        \
	do {                                                                   \
		if (WEFT_LOG_ENABLED(WEFT_LOG_DEBUG))                          \
			weft_log(WEFT_LOG_DEBUG, __VA_ARGS__);                 \
	} while (0)
#define weft_info(...) weft_log(WEFT_LOG_INFO, __VA_ARGS__)
#define weft_warn(...) weft_log(WEFT_LOG_WARN, __VA_ARGS__)
#define weft_error(...) weft_log(WEFT_LOG_ERROR, __VA_ARGS__)

/* weft_now_ns is a monotonic clock in nanoseconds. Any thread. */
WEFT_API uint64_t weft_now_ns(void);
/* weft_wall_ms is wall-clock time, milliseconds since the Unix epoch. Any
 * thread. */
WEFT_API uint64_t weft_wall_ms(void);

#ifdef __cplusplus
}
#endif

#endif
