/*
 * textbuf.h - a growing text buffer for the documents the daemon renders
 * (the metrics exposition, the statistics JSON).
 *
 * Appending never fails on the spot: running out of memory is remembered
 * (oom) and later appends do nothing, so a renderer checks once at the end.
 *
 * Threading: a buffer belongs to its caller.
 */
#ifndef TALLY_TEXTBUF_H
#define TALLY_TEXTBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *buf; /* malloc'd, NUL-terminated while !oom */
    size_t len, cap;
    bool oom;
} textbuf;

/* Starts an empty buffer with room for cap bytes; oom when none. */
void textbuf_init(textbuf *t, size_t cap);

/* Appends printf-formatted text. */
void textbuf_put(textbuf *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void textbuf_vput(textbuf *t, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* The text (malloc'd, the caller's) and its length; NULL, with the buffer
 * freed, when memory ran out along the way. */
char *textbuf_take(textbuf *t, size_t *len);

#endif
