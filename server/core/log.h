/*
 * log.h - log lines, one JSON object each, to standard error.
 *
 * Every line carries the time and the module that wrote it:
 *   {"ts":"2026-11-22T10:00:00.123Z","module":"http","level":"info",...}
 * Lines are appended whole to one buffer under a mutex, so lines from
 * different threads never interleave. Access lines (one per request) stay
 * in the buffer until log_flush() (the loop thread calls it every few
 * milliseconds) or until it fills; every other line is written at once,
 * after whatever is buffered.
 *
 * Threading: any thread (one mutex); log_flush() from the loop thread.
 */
#ifndef TALLY_LOG_H
#define TALLY_LOG_H

#include <jansson.h>
#include <stddef.h>

/* Logs a message: {"ts", "module", "level", "msg"}. */
void log_msg(const char *module, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends a complete access line (text without the newline) to the
 * buffer. */
void log_access(const char *line, size_t len);

/* Writes out what is buffered. */
void log_flush(void);

/* Sends the lines to fd from now on (standard error until then); for
 * harnesses that run the daemon's code in-process. Any thread. */
void log_to(int fd);

/* The current time as 2026-11-22T10:00:00.123Z. */
void log_stamp(char *buf, size_t len);

/* Copies s into out as the body of a JSON string (escaped, no quotes);
 * returns the length written (at most outlen - 1; NUL-terminated). */
size_t log_escape(const char *s, char *out, size_t outlen);

#endif
