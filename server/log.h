/*
 * log.h - log lines, one JSON object each, to standard error.
 *
 * Every line carries the time and the module that wrote it:
 *   {"ts":"2026-11-22T10:00:00.123Z","module":"http","level":"info",...}
 * Lines are written with one write() each, so lines from different
 * threads do not interleave.
 */
#ifndef TALLY_LOG_H
#define TALLY_LOG_H

#include <jansson.h>

/* Logs a message: {"ts", "module", "level", "msg"}. */
void log_msg(const char *module, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Logs the members of obj (a JSON object; this takes its reference) with
 * "ts", "module" and "level" added in front. */
void log_obj(const char *module, const char *level, json_t *obj);

#endif
